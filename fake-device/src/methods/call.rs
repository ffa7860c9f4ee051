//! A session method's request as its room gets it: the sessions it reaches, its params, and
//! the client that asked (whom its events and follow-ups go to).

use serde_json::Value;

use crate::events::Client;
use crate::sessions::Sessions;

/// One request to a session method's room.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Call<'a> {
    /// The device's sessions.
    pub sessions: &'a Sessions,
    /// The request's params.
    pub params: &'a Value,
    /// The client that asked.
    pub client: &'a Client,
}
