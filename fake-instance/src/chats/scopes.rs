//! The chats as the MCP library sees them: a library call's scope names one of the calling
//! device's chats, and its knowledge bases are the ones that chat's `Context.library` named.

use serde_json::Value;

use super::Chats;

/// A library call's scope names one of the calling device's chats; its knowledge bases are the
/// ones its `Context.library` named (none named: the whole library).
impl crate::http::ChatScopes for Chats {
    fn bases_of(&self, device: &str, session_id: &str) -> Option<Vec<String>> {
        let inner = self.lock();
        let chat = inner.book.get(session_id).filter(|c| c.device == device)?;
        let bases = chat
            .context
            .get("library")
            .and_then(|l| l.get("bases"))
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|b| b.get("id").and_then(Value::as_str).map(String::from))
            .collect();
        Some(bases)
    }
}
