//! What the state directory holds, and reading it at start: the chats and the undelivered
//! deletes an earlier run kept.

use std::collections::BTreeMap;
use std::path::Path;

use super::book::Chat;
use super::pending_deletes::PendingDelete;

/// The file undelivered deletes are kept in.
pub(super) const PENDING_DELETES: &str = "pending-deletes.json";
/// The file chats are kept in.
pub(super) const CHATS: &str = "chats.json";

/// Makes the state directory, and reads what an earlier run kept in it: the deletes pending
/// and the chats (none of either when there is no directory or nothing readable in it).
pub(super) fn load(
    state_dir: Option<&Path>,
) -> (BTreeMap<String, PendingDelete>, BTreeMap<String, Chat>) {
    if let Some(dir) = state_dir
        && let Err(e) = std::fs::create_dir_all(dir)
    {
        tracing::error!("cannot make the state directory {}: {e}", dir.display());
    }
    let read = |name: &str| state_dir.and_then(|dir| std::fs::read(dir.join(name)).ok());
    let pending_deletes = read(PENDING_DELETES)
        .and_then(|bytes| serde_json::from_slice(&bytes).ok())
        .unwrap_or_default();
    // Chats and their turns in flight outlive a restart: the next link reattaches to them.
    let chats = read(CHATS)
        .and_then(|bytes| serde_json::from_slice(&bytes).ok())
        .unwrap_or_default();
    (pending_deletes, chats)
}
