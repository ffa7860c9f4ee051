//! The cards whose settling a link has said (`_lembas/permission/settled`), so a late answer
//! to one is not sent.

use std::collections::HashSet;

/// The cards taken down (`_lembas/permission/settled`): by toolCallId, and by session for a
/// client that (wrongly) keys cards by session.
#[derive(Debug, Default)]
pub(super) struct SettledCards {
    pub(super) calls: HashSet<String>,
    pub(super) sessions: HashSet<String>,
}

impl SettledCards {
    pub(super) fn settle(&mut self, call: Option<&str>, session: Option<&str>) {
        if let Some(call) = call {
            self.calls.insert(call.to_string());
        }
        if let Some(session) = session {
            self.sessions.insert(session.to_string());
        }
    }
}
