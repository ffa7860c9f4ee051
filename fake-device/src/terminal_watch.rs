//! The client's terminal messages on one link, judged (spec, `_lembas/terminal/*`): an open
//! asks an absolute `cwd`, 20–500 columns and 5–300 rows where it says them; input, resize and
//! close name a terminal this link's opens were given, input's data is base64, and a resize
//! keeps to the open's bounds.

use std::collections::HashSet;

use base64::Engine as _;
use harness::finding::Finding;
use harness::lembas::methods;
use harness::rules::ids;
use serde_json::Value;

use crate::terminals::{COLS, ROWS};

/// One link's terminals, as the client opened them.
#[derive(Debug, Clone, Default)]
pub struct TerminalWatch {
    /// Open requests not yet answered, by request id.
    opening: Vec<Value>,
    /// Every terminal id an open's answer gave on this link (one that has exited since still
    /// counts: the client may not have heard yet).
    given: HashSet<String>,
}

/// What is wrong with an optional size: absent and null are fine.
fn size_fault(params: &Value, key: &str, range: &std::ops::RangeInclusive<u64>) -> Option<String> {
    match params.get(key) {
        None | Some(Value::Null) => None,
        Some(v) if v.as_u64().is_some_and(|n| range.contains(&n)) => None,
        Some(v) => Some(format!(
            "`{key}` is {v}, not a whole number from {} to {}",
            range.start(),
            range.end()
        )),
    }
}

impl TerminalWatch {
    /// Judges an open request and remembers it.
    pub fn open(&mut self, id: &Value, params: &Value) -> Option<Finding> {
        self.opening.push(id.clone());
        let cwd = match params.get("cwd") {
            None | Some(Value::Null) => None,
            Some(Value::String(cwd)) if std::path::Path::new(cwd).is_absolute() => None,
            Some(other) => Some(format!("`cwd` is {other}, not an absolute path")),
        };
        let faults: Vec<String> = [
            cwd,
            size_fault(params, "cols", &COLS),
            size_fault(params, "rows", &ROWS),
        ]
        .into_iter()
        .flatten()
        .collect();
        (!faults.is_empty()).then(|| {
            Finding::new(
                ids::INSTANCE_TERMINAL_OPEN_SHAPE,
                format!("`_lembas/terminal/open` {}", faults.join("; ")),
            )
            .with_detail(format!("received: {params}"))
        })
    }

    /// Learns the terminal id an open's answer gave.
    pub fn sent(&mut self, message: &Value) {
        let Some(id) = message.get("id") else {
            return;
        };
        let Some(at) = self.opening.iter().position(|o| o == id) else {
            return;
        };
        self.opening.swap_remove(at);
        if let Some(terminal) = message
            .pointer("/result/terminalId")
            .and_then(Value::as_str)
        {
            self.given.insert(terminal.to_string());
        }
    }

    /// Judges an input, resize or close notification.
    pub fn notified(&self, method: &str, params: &Value) -> Option<Finding> {
        let mut faults = Vec::new();
        match params.get("terminalId").and_then(Value::as_str) {
            Some(terminal) if self.given.contains(terminal) => {}
            Some(terminal) => faults.push(format!(
                "names terminal `{terminal}`, which no open on this link was given"
            )),
            None => faults.push("has no `terminalId` string".to_string()),
        }
        match method {
            methods::LEMBAS_TERMINAL_INPUT => {
                let base64 = params
                    .get("data")
                    .and_then(Value::as_str)
                    .is_some_and(|d| base64::engine::general_purpose::STANDARD.decode(d).is_ok());
                if !base64 {
                    faults.push("has `data` that is not base64 text".to_string());
                }
            }
            methods::LEMBAS_TERMINAL_RESIZE => {
                for (key, range) in [("cols", &COLS), ("rows", &ROWS)] {
                    if params.get(key).is_none_or(Value::is_null) {
                        faults.push(format!("has no `{key}`"));
                    } else if let Some(fault) = size_fault(params, key, range) {
                        faults.push(fault);
                    }
                }
            }
            methods::LEMBAS_TERMINAL_CLOSE => {}
            _ => return None,
        }
        (!faults.is_empty()).then(|| {
            Finding::new(
                ids::INSTANCE_TERMINAL_NOTIFY_SHAPE,
                format!("`{method}` {}", faults.join("; ")),
            )
            .with_detail(format!("received: {params}"))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn opens_are_judged_on_their_bounds() {
        let mut watch = TerminalWatch::default();
        assert!(watch.open(&json!(1), &json!({})).is_none());
        assert!(
            watch
                .open(&json!(2), &json!({ "cwd": "/r", "cols": 80, "rows": 24 }))
                .is_none()
        );
        for bad in [
            json!({ "cols": 10 }),
            json!({ "rows": 301 }),
            json!({ "cwd": "relative" }),
        ] {
            assert!(watch.open(&json!(3), &bad).is_some(), "{bad}");
        }
    }

    #[test]
    fn notifications_name_a_terminal_of_the_link_with_base64_input() {
        let mut watch = TerminalWatch::default();
        watch.open(&json!(7), &json!({}));
        watch.sent(&json!({ "jsonrpc": "2.0", "id": 7, "result": { "terminalId": "term_1" } }));
        let input = |data: &str| json!({ "terminalId": "term_1", "data": data });
        assert!(
            watch
                .notified(methods::LEMBAS_TERMINAL_INPUT, &input("bHMK"))
                .is_none()
        );
        assert!(
            watch
                .notified(methods::LEMBAS_TERMINAL_INPUT, &input("ls\n\u{7}"))
                .is_some()
        );
        let resize = |cols: u64| json!({ "terminalId": "term_1", "cols": cols, "rows": 30 });
        assert!(
            watch
                .notified(methods::LEMBAS_TERMINAL_RESIZE, &resize(100))
                .is_none()
        );
        assert!(
            watch
                .notified(methods::LEMBAS_TERMINAL_RESIZE, &resize(600))
                .is_some()
        );
        assert!(
            watch
                .notified(
                    methods::LEMBAS_TERMINAL_CLOSE,
                    &json!({ "terminalId": "term_9" })
                )
                .is_some()
        );
        assert!(
            watch
                .notified(
                    methods::LEMBAS_TERMINAL_CLOSE,
                    &json!({ "terminalId": "term_1" })
                )
                .is_none()
        );
    }
}
