//! Keeping the chats and the undelivered deletes in the state directory (when there is one),
//! so a restarted instance reattaches to its chats' turns and still delivers its deletes.

use std::collections::BTreeMap;

use super::{Chat, Chats, ChatsConfig, PendingDelete};

/// The file undelivered deletes are kept in.
const PENDING_DELETES: &str = "pending-deletes.json";
/// The file chats are kept in.
const CHATS: &str = "chats.json";

/// Makes the state directory, and reads what an earlier run kept in it: the deletes pending
/// and the chats (none of either when there is no directory or nothing readable in it).
pub(super) fn load(
    config: &ChatsConfig,
) -> (BTreeMap<String, PendingDelete>, BTreeMap<String, Chat>) {
    if let Some(dir) = &config.state_dir
        && let Err(e) = std::fs::create_dir_all(dir)
    {
        tracing::error!("cannot make the state directory {}: {e}", dir.display());
    }
    let read = |name: &str| {
        config
            .state_dir
            .as_ref()
            .and_then(|dir| std::fs::read(dir.join(name)).ok())
    };
    let pending_deletes = read(PENDING_DELETES)
        .and_then(|bytes| serde_json::from_slice(&bytes).ok())
        .unwrap_or_default();
    // Chats and their turns in flight outlive a restart: the next link reattaches to them.
    let chats = read(CHATS)
        .and_then(|bytes| serde_json::from_slice(&bytes).ok())
        .unwrap_or_default();
    (pending_deletes, chats)
}

impl Chats {
    pub(super) fn save_pending_deletes(&self, pending: &BTreeMap<String, PendingDelete>) {
        self.keep(PENDING_DELETES, pending);
    }

    /// Keeps the chats in the state directory (when there is one).
    pub(super) fn save_chats(&self) {
        if self.config.state_dir.is_some() {
            let chats = self.lock().book.chats().clone();
            self.keep(CHATS, &chats);
        }
    }

    /// Writes a file of the state directory atomically (a temporary file renamed over it).
    fn keep(&self, name: &str, value: &impl serde::Serialize) {
        let Some(dir) = &self.config.state_dir else {
            return;
        };
        let write = || -> std::io::Result<()> {
            let mut file = tempfile::NamedTempFile::new_in(dir)?;
            serde_json::to_writer(&mut file, value)?;
            file.persist(dir.join(name))?;
            Ok(())
        };
        // The directory was made with the chats, and is not made again here: gone, it was an
        // embedded run's scratch folder, removed once the run ended while a link was still
        // closing, and a new one would be left behind.
        if let Err(e) = write()
            && dir.is_dir()
        {
            tracing::error!("cannot keep {name}: {e}");
        }
    }
}
