//! The web composer's `@` picker: it asks the device for the chat's files
//! (`_lembas/files/search`), and a file the person chooses goes into the message as `@path`
//! text, a space or a `#` in it escaped with a backslash as the TUI's picker writes it; the
//! device expands it when the prompt comes (spec, `_lembas/files/search` and the notes on
//! writing a path in `session/prompt`). It never becomes an attachment block.

use std::sync::Arc;

use harness::jsonrpc::Peer;
use harness::lembas::methods;
use harness::rules::ids;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::chats::{Chats, LinkFacts};

/// A file chosen in the composer's `@` picker, sent with a message.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MentionFile {
    /// The chat (its session id).
    pub chat: String,
    /// What the person typed after `@`.
    #[serde(default)]
    pub query: String,
    /// The path to choose among the results (default: the first).
    #[serde(default)]
    pub choose: Option<String>,
    /// The message written before the mention.
    #[serde(default)]
    pub text: String,
}

/// `@path` as the picker writes it: spaces and `#` escaped; a directory ends with `/`.
pub fn written(path: &str, dir: bool) -> String {
    let mut text = String::from("@");
    for c in path.chars() {
        if c == ' ' || c == '#' || c == '\\' {
            text.push('\\');
        }
        text.push(c);
    }
    if dir && !path.ends_with('/') {
        text.push('/');
    }
    text
}

/// Searches, chooses, and sends the message with the mention; gives `{turnId, mention}`.
pub async fn mention(
    chats: &Arc<Chats>,
    peer: &Arc<Peer>,
    facts: &LinkFacts,
    ask: &MentionFile,
) -> Result<Value, String> {
    let params = json!({ "sessionId": ask.chat, "query": ask.query });
    let answer = peer
        .request(methods::LEMBAS_FILES_SEARCH, params, chats.patience())
        .await
        .map_err(|e| e.to_string())?
        .map_err(|e| format!("the device refused the file search: {}", e.message))?;
    let files = answer
        .get("files")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let path_of = |f: &Value| f.get("path").and_then(Value::as_str).map(String::from);
    let chosen = files
        .iter()
        .find(|f| ask.choose.is_none() || path_of(f) == ask.choose)
        .ok_or_else(|| match &ask.choose {
            Some(path) => format!("the search found no `{path}`"),
            None => "the search found nothing".to_string(),
        })?;
    let path = path_of(chosen).ok_or("a search result without a path")?;
    let dir = chosen.get("kind").and_then(Value::as_str) == Some("dir");
    if chats.misbehaves_way(ids::INSTANCE_FILES_MENTION_TEXT, "as_link") {
        // Misbehaving: the chosen file goes as a resource_link block, with no `@path` text.
        let root = answer.get("root").and_then(Value::as_str).unwrap_or("");
        let uri = format!("file://{}/{path}", root.trim_end_matches('/'));
        let link = json!({ "type": "resource_link", "uri": uri, "name": path });
        let mut sent = chats.send_blocks(peer, facts, &ask.chat, &ask.text, vec![link]);
        sent["mention"] = Value::Null;
        return Ok(sent);
    }
    let mention = if chats.misbehaves(ids::INSTANCE_FILES_MENTION_TEXT) {
        // Misbehaving: the path goes in as it is, so a space ends it early.
        format!("@{path}")
    } else {
        written(&path, dir)
    };
    let text = if ask.text.is_empty() {
        mention.clone()
    } else {
        format!("{} {mention}", ask.text)
    };
    let mut sent = chats.send(peer, facts, &ask.chat, &text, &[]).await?;
    sent["mention"] = json!(mention);
    Ok(sent)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spaces_and_hashes_are_escaped_and_directories_end_with_a_slash() {
        assert_eq!(written("my notes.md", false), "@my\\ notes.md");
        assert_eq!(written("a#b.md", false), "@a\\#b.md");
        assert_eq!(written("src", true), "@src/");
        assert_eq!(written("src/main.rs", false), "@src/main.rs");
    }
}
