//! What the device answers a session method: at once, or when its turn ends; a refusal; the
//! params it reads; the ids it makes.

use harness::jsonrpc::{INVALID_PARAMS, RpcError};
use serde_json::Value;
use tokio::sync::oneshot;

/// A session method's answer.
pub type Answer = Result<Value, RpcError>;

/// A session method's reply: now, or when a turn ends (a prompt's answer waits for its turn,
/// and the link must not wait with it).
#[derive(Debug)]
pub enum Reply {
    /// The answer, at once.
    Now(Answer),
    /// The answer of turn `turn_id`, when it ends.
    Later {
        /// The turn.
        turn_id: String,
        /// Where its answer comes.
        answer: oneshot::Receiver<Value>,
    },
}

impl Reply {
    /// Waits for the answer.
    pub async fn wait(self) -> Answer {
        match self {
            Reply::Now(answer) => answer,
            Reply::Later { turn_id, answer } => answer.await.map_err(|_| {
                refuse(format!(
                    "turn `{turn_id}` was dropped: its session was deleted"
                ))
            }),
        }
    }
}

/// `-32602` with a reason: the spec's answer to a request the device refuses.
pub fn refuse(reason: impl Into<String>) -> RpcError {
    RpcError::new(INVALID_PARAMS, reason)
}

/// A string param, or the refusal saying it must be one.
pub(crate) fn param_str<'a>(params: &'a Value, key: &str) -> Result<&'a str, RpcError> {
    params
        .get(key)
        .and_then(Value::as_str)
        .ok_or_else(|| refuse(format!("`{key}` must be a string")))
}

/// A fresh id with a prefix (`ses_`, `turn_`).
pub fn fresh_id(prefix: &str) -> String {
    let n = harness::random::u64();
    format!("{prefix}{n:016x}")
}
