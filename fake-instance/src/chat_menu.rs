//! The web UI's chat menu and folder picker: rename a chat (`_lembas/session/title`, the
//! title cut to the spec's 200 characters as the UI's field is), compact it
//! (`_lembas/session/compact`, only between its prompts: the device refuses one while it
//! works), and browse the device's directories for a new chat (`_lembas/directories`, the
//! roots first, then an absolute path the device itself listed).

use std::sync::Arc;

use harness::jsonrpc::Peer;
use harness::lembas::methods;
use serde_json::{Value, json};

use crate::chats::Chats;

/// The longest title the spec lets a client send (`_lembas/session/title`).
pub const MAX_TITLE: usize = 200;

/// Renames a chat; gives the device's answer (a refusal as `{error}`).
pub async fn rename(
    chats: &Chats,
    peer: &Arc<Peer>,
    chat: &str,
    title: &str,
) -> Result<Value, String> {
    chats
        .chat(chat)
        .ok_or_else(|| format!("no chat `{chat}`"))?;
    // The title field takes no more than the spec allows.
    let title: String = title.chars().take(MAX_TITLE).collect();
    // Misbehaving: the chat's session id with its last character cut off (never given).
    let session = match chats.misbehaves_way(harness::rules::ids::INSTANCE_SESSION_KNOWN, "cut_id")
    {
        true => chat
            .char_indices()
            .last()
            .map_or(chat, |(at, _)| &chat[..at]),
        false => chat,
    };
    let params = json!({ "sessionId": session, "title": title });
    ask(chats, peer, methods::LEMBAS_SESSION_TITLE, params).await
}

/// Compacts a chat between its prompts; while its turn runs the menu item is disabled.
pub async fn compact(chats: &Chats, peer: &Arc<Peer>, chat: &str) -> Result<Value, String> {
    let known = chats
        .chat(chat)
        .ok_or_else(|| format!("no chat `{chat}`"))?;
    if !known.in_flight.is_empty() {
        return Err(format!(
            "chat `{chat}` is working: compact waits until its turn is answered"
        ));
    }
    let params = json!({ "sessionId": chat });
    ask(chats, peer, methods::LEMBAS_SESSION_COMPACT, params).await
}

/// The folder picker: the device's places (`path` none), or one absolute directory's entries.
pub async fn pick_folder(
    chats: &Chats,
    peer: &Arc<Peer>,
    path: Option<&str>,
) -> Result<Value, String> {
    let params = match path {
        None => json!({}),
        Some(path) if std::path::Path::new(path).is_absolute() => json!({ "path": path }),
        Some(path) => {
            return Err(format!(
                "the folder picker opens only absolute paths the device listed, not `{path}`"
            ));
        }
    };
    ask(chats, peer, methods::LEMBAS_DIRECTORIES, params).await
}

/// Sends a request and gives the device's answer (a refusal as `{error}`).
async fn ask(
    chats: &Chats,
    peer: &Arc<Peer>,
    method: &str,
    params: Value,
) -> Result<Value, String> {
    match peer.request(method, params, chats.patience()).await {
        Ok(Ok(answer)) => Ok(answer),
        Ok(Err(e)) => Ok(json!({ "error": e.to_value() })),
        Err(e) => Err(e.to_string()),
    }
}
