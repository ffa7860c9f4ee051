//! The web UI's terminal on a device that turned remote terminals on (spec,
//! `_lembas/terminal/*`): open one sized to the browser's window within the spec's bounds
//! (20–500 columns, 5–300 rows), type into it (keystrokes go base64), resize it, hang it up.

use std::sync::Arc;

use base64::Engine as _;
use harness::jsonrpc::Peer;
use harness::lembas::methods;
use harness::rules::ids;
use serde_json::{Value, json};

use crate::chats::Chats;

/// The columns a terminal may have.
const COLS: std::ops::RangeInclusive<u64> = 20..=500;
/// The rows a terminal may have.
const ROWS: std::ops::RangeInclusive<u64> = 5..=300;

/// The columns a misbehaving web UI asks for: fewer than the spec allows.
const TOO_NARROW: u64 = 10;
/// A height no terminal takes (5 to 300 rows), for `--misbehave instance.terminal.open_shape/too_tall`.
const TOO_TALL: u64 = 400;

/// A window's size, as the browser measures it, brought within the spec's bounds.
fn fit(cols: u64, rows: u64) -> (u64, u64) {
    (
        cols.clamp(*COLS.start(), *COLS.end()),
        rows.clamp(*ROWS.start(), *ROWS.end()),
    )
}

/// Opens a terminal; gives the device's answer (a refusal as `{error}`).
pub async fn open(
    chats: &Chats,
    peer: &Arc<Peer>,
    cwd: Option<&str>,
    cols: Option<u64>,
    rows: Option<u64>,
) -> Result<Value, String> {
    let mut params = json!({});
    if let Some(cwd) = cwd {
        if !std::path::Path::new(cwd).is_absolute() {
            return Err(format!(
                "a terminal opens in an absolute directory, not `{cwd}`"
            ));
        }
        params["cwd"] = json!(cwd);
    }
    if cols.is_some() || rows.is_some() {
        let (cols, rows) = fit(cols.unwrap_or(80), rows.unwrap_or(24));
        params["cols"] = json!(cols);
        params["rows"] = json!(rows);
    }
    if chats.misbehaves(ids::INSTANCE_TERMINAL_OPEN_SHAPE) {
        params["cols"] = json!(TOO_NARROW);
    }
    if chats.misbehaves_way(ids::INSTANCE_TERMINAL_OPEN_SHAPE, "too_tall") {
        params["rows"] = json!(TOO_TALL);
    }
    match peer
        .request(methods::LEMBAS_TERMINAL_OPEN, params, chats.patience())
        .await
    {
        Ok(Ok(answer)) => {
            give_up_without_shell(chats, peer, &answer);
            Ok(answer)
        }
        Ok(Err(e)) => Ok(json!({ "error": e.to_value() })),
        Err(e) => Err(e.to_string()),
    }
}

/// Misbehaving: an answer without `shell` (a device that lists `terminal` but not `shell`)
/// taken for a broken terminal, hung up at once, or kept waiting for integration marks.
fn give_up_without_shell(chats: &Chats, peer: &Arc<Peer>, answer: &Value) {
    let hangs_up = chats.misbehaves(ids::INSTANCE_TERMINAL_WITHOUT_SHELL);
    let waits = chats.misbehaves_way(ids::INSTANCE_TERMINAL_WITHOUT_SHELL, "waits_for_marks");
    let Some(terminal) = answer["terminalId"].as_str() else {
        return;
    };
    if answer.get("shell").is_some() || !(hangs_up || waits) {
        return;
    }
    chats.give_up_terminal(terminal);
    if hangs_up {
        close(peer, terminal);
    }
}

/// Types `text` into a terminal.
pub fn input(chats: &Chats, peer: &Arc<Peer>, terminal: &str, text: &str) -> Value {
    if chats.gave_up_terminal(terminal) {
        // Misbehaving: nothing typed into a terminal given up on.
        return json!({ "terminalId": terminal });
    }
    let data = if chats.misbehaves(ids::INSTANCE_TERMINAL_NOTIFY_SHAPE) {
        // Misbehaving: the keystrokes go as they are, not base64.
        format!("{text}\u{7}")
    } else {
        base64::engine::general_purpose::STANDARD.encode(text)
    };
    let mut params = json!({ "terminalId": terminal, "data": data });
    // Misbehaving: keystrokes that name no terminal.
    if chats.misbehaves_way(ids::INSTANCE_TERMINAL_NOTIFY_SHAPE, "no_terminal")
        && let Some(fields) = params.as_object_mut()
    {
        fields.remove("terminalId");
    }
    peer.notify(methods::LEMBAS_TERMINAL_INPUT, params);
    json!({ "terminalId": terminal })
}

/// Resizes a terminal to the browser's window, within the spec's bounds.
pub fn resize(peer: &Arc<Peer>, terminal: &str, cols: u64, rows: u64) -> Value {
    let (cols, rows) = fit(cols, rows);
    let params = json!({ "terminalId": terminal, "cols": cols, "rows": rows });
    peer.notify(methods::LEMBAS_TERMINAL_RESIZE, params);
    json!({ "terminalId": terminal, "cols": cols, "rows": rows })
}

/// Hangs a terminal up.
pub fn close(peer: &Arc<Peer>, terminal: &str) -> Value {
    peer.notify(
        methods::LEMBAS_TERMINAL_CLOSE,
        json!({ "terminalId": terminal }),
    );
    json!({ "terminalId": terminal })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_window_is_brought_within_the_bounds() {
        assert_eq!(fit(10, 2), (20, 5));
        assert_eq!(fit(120, 40), (120, 40));
        assert_eq!(fit(900, 400), (500, 300));
    }
}
