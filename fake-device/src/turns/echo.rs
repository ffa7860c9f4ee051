//! The echo agent, the device's default: it says the prompt back in up to three pieces, a step
//! delay apart, so a turn stays running long enough for cancel and steer to reach it. A model's
//! turn says its text the same way ([`Turns::speak`]).

use tokio::sync::watch;

use super::Turns;
use crate::events::Client;
use crate::open_session::OpenSession;

/// The pieces the echo agent answers in: up to three, split at spaces.
pub(super) fn pieces(text: &str) -> Vec<String> {
    let words: Vec<&str> = text.split_inclusive(' ').collect();
    if words.is_empty() {
        return vec![String::new()];
    }
    let per = words.len().div_ceil(3);
    words.chunks(per).map(|c| c.concat()).collect()
}

impl Turns<'_> {
    /// The echo agent's turn: `text` said back, taking in steer messages at each piece; gives
    /// what was said and the stop reason.
    pub(super) async fn echo_turn(
        &self,
        live: &OpenSession,
        client: Option<&Client>,
        session_id: &str,
        text: &str,
        cancelled: &mut watch::Receiver<bool>,
    ) -> (String, &'static str) {
        let (reply, was_cancelled) = self
            .speak(live, client, session_id, text, true, cancelled)
            .await;
        (
            reply,
            if was_cancelled {
                "cancelled"
            } else {
                "end_turn"
            },
        )
    }

    /// Says `text` in up to three pieces, a step delay apart. The echo agent's pieces are its
    /// steps, so it takes in steer messages at each (`take_steers`); a model's turn takes them in
    /// before its next model call instead. Gives what was said, and whether the turn was
    /// cancelled before the end.
    pub(super) async fn speak(
        &self,
        live: &OpenSession,
        client: Option<&Client>,
        session_id: &str,
        text: &str,
        take_steers: bool,
        cancelled: &mut watch::Receiver<bool>,
    ) -> (String, bool) {
        let mut said = String::new();
        for piece in pieces(text) {
            tokio::select! {
                () = tokio::time::sleep(self.registry.config.step_delay) => {}
                _ = cancelled.wait_for(|c| *c) => return (said, true),
            }
            if take_steers {
                live.take_steers(client, session_id).await;
            }
            if let Some(client) = client {
                client.text(session_id, &piece);
            }
            said.push_str(&piece);
        }
        (said, false)
    }
}
