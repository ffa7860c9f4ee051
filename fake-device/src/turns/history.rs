//! The steps that change a session's conversation from a turn: `/undo` takes the last turn
//! out of it and `/compact` sums it up (actions run as turns). `_lembas/session/compact` sums
//! it up the same way from its room, [`crate::methods::session_compact`].

use super::Turns;
use crate::open_session::OpenSession;

impl Turns<'_> {
    /// What compacting the conversation comes to.
    pub(crate) async fn summary(&self, live: &OpenSession) -> String {
        let state = live.state.lock().await;
        let turns = state
            .stored
            .messages
            .iter()
            .filter(|m| m.role == "user" && !m.reverted)
            .count();
        format!(
            "A conversation of {turns} turn(s) in {}.",
            state.stored.cwd.display()
        )
    }

    /// `/undo`: the last turn leaves the conversation; gives its prompt (`None`: nothing to undo).
    pub(super) async fn undo_last(&self, live: &OpenSession) -> Option<String> {
        let mut state = live.state.lock().await;
        let last = state
            .stored
            .messages
            .iter()
            .rev()
            .find(|m| !m.reverted && m.role == "user")
            .map(|m| (m.turn_id.clone(), m.text.clone()))?;
        for message in state
            .stored
            .messages
            .iter_mut()
            .filter(|m| m.turn_id == last.0)
        {
            message.reverted = true;
        }
        self.registry.save(&state);
        Some(last.1)
    }
}
