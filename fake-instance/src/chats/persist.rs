//! Keeping the chats and the undelivered deletes in the state directory (when there is one),
//! so a restarted instance reattaches to its chats' turns and still delivers its deletes.

use std::collections::BTreeMap;

use super::state_dir::{CHATS, PENDING_DELETES};
use super::{Chats, PendingDelete};

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
