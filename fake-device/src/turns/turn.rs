//! A turn while it runs (its session and the client that hears it) and what it came to: what
//! the turn's frame, its actions and its end pass between them.

use std::path::PathBuf;

use serde_json::{Map, Value};

use super::model_agent::TurnRecord;
use crate::events::Client;

/// The session a turn runs in, and the client that hears it (if one is there).
pub(super) struct Underway {
    /// The session's client when the turn started.
    pub client: Option<Client>,
    /// The session's id.
    pub session_id: String,
    /// The session's project (its working directory).
    pub project: PathBuf,
}

impl Underway {
    /// Tells the client a lembas event of the turn.
    pub fn say(&self, event: Value) {
        if let Some(client) = &self.client {
            client.event(&self.session_id, event);
        }
    }
}

/// What a turn came to, once its agent (or action) is done.
pub(super) struct Ended {
    /// What the answer's `_meta.lembas` says besides the turn id (a command's doing).
    pub extra: Map<String, Value>,
    /// What the agent said.
    pub reply: String,
    /// Why it stopped.
    pub stop: &'static str,
    /// What the history keeps besides the text.
    pub record: TurnRecord,
    /// Whether the turn was an action (it leaves nothing in the conversation).
    pub action: bool,
}
