//! The web UI's mode switch: `session/set_mode` for a chat's session, with one of the modes the
//! device offered for it (spec, `session/set_mode`; the session/new answer's `availableModes`).

use std::sync::Arc;

use harness::jsonrpc::Peer;
use harness::lembas::methods;
use harness::rules::ids;
use serde_json::{Value, json};

use crate::chats::Chats;

/// The mode a misbehaving web UI asks for: one no device offers.
const UNOFFERED: &str = "auto";

/// Puts a chat in `mode` and gives the device's answer (a refusal as `{error}`). A mode the
/// device did not offer for the chat is not sent; a misbehaving web UI sends [`UNOFFERED`].
pub async fn set_mode(
    chats: &Chats,
    peer: &Arc<Peer>,
    chat: &str,
    mode: &str,
) -> Result<Value, String> {
    let known = chats
        .chat(chat)
        .ok_or_else(|| format!("no chat `{chat}`"))?;
    let mode = if chats.misbehaves(ids::INSTANCE_SET_MODE_KNOWN) {
        UNOFFERED
    } else if known.modes.is_empty() || known.modes.iter().any(|m| m == mode) {
        // Modes not known here (a chat opened elsewhere): the device judges.
        mode
    } else {
        return Err(format!(
            "the device offers no mode `{mode}` for chat `{chat}` (it offered {})",
            known.modes.join(", ")
        ));
    };
    let mut params = json!({ "sessionId": chat, "modeId": mode });
    if chats.misbehaves_way(ids::INSTANCE_SET_MODE_KNOWN, "session_list") {
        // Misbehaving: the session named as a list holding its id, not as a string.
        params["sessionId"] = json!([chat]);
    }
    match peer
        .request(methods::SESSION_SET_MODE, params, chats.patience())
        .await
    {
        Ok(Ok(answer)) => Ok(answer),
        Ok(Err(e)) => Ok(json!({ "error": e.to_value() })),
        Err(e) => Err(e.to_string()),
    }
}
