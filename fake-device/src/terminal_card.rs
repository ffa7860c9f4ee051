//! A card waiting at the device's terminal for the person there, and how they answer it.

use schemars::JsonSchema;
use serde::Deserialize;
use tokio::sync::oneshot;

/// How the person at the terminal answers a card.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum CardAnswer {
    /// Allow once; the first option of each question; approve the plan in `edit`.
    Allow,
    /// Deny; dismiss the questions or the plan.
    Deny,
}

/// A card of the shared session, as the terminal shows it.
#[derive(Debug)]
pub(crate) struct TerminalCard {
    /// Its toolCallId.
    pub call_id: String,
    /// Where the terminal's answer goes.
    pub answer: oneshot::Sender<CardAnswer>,
}
