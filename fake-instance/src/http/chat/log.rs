//! The journal of chat completion requests, so a step can check what the model was asked and
//! how often ("exactly once for X").

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use serde::Serialize;

/// One request as the model saw it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LoggedRequest {
    /// Milliseconds since the run's HTTP API started.
    pub at_ms: u64,
    /// The model asked for, as sent.
    pub model: String,
    /// The last `user` message's text.
    pub last_user: Option<String>,
    /// The system text (`system` and `developer` messages, joined).
    pub system: Option<String>,
    /// The tool results the request ends with, when it hands the model some.
    pub tool_result: Option<String>,
    /// Whether it asked for a stream.
    pub stream: bool,
    /// Which turn of the conversation it is: its count of `user` messages.
    pub turn_hint: usize,
    /// The index of the script that answered; `None`: the echo (or a refusal).
    pub script: Option<usize>,
    /// The answer's status code.
    pub status: u16,
}

/// How many chat requests the log keeps.
pub const CHAT_LOG_KEPT: usize = 10_000;

/// Told of each request as it is logged.
pub type Observer = Arc<dyn Fn(&LoggedRequest) + Send + Sync>;

/// Every chat completion request of the run, in order (the newest 10 000). Clones
/// share the journal.
#[derive(Clone, Default)]
pub struct ChatLog(Arc<Mutex<Vec<LoggedRequest>>>, Arc<Mutex<Option<Observer>>>);

impl std::fmt::Debug for ChatLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("ChatLog").field(&self.0).finish()
    }
}

impl ChatLog {
    /// Tells `observer` of every request logged from now on (a scenario's steps see them).
    pub fn observe(&self, observer: Observer) {
        *self.1.lock().unwrap_or_else(PoisonError::into_inner) = Some(observer);
    }

    /// The requests so far.
    pub fn entries(&self) -> Vec<LoggedRequest> {
        self.lock().clone()
    }

    /// How many requests so far satisfy `test`.
    pub fn count(&self, test: impl Fn(&LoggedRequest) -> bool) -> usize {
        self.lock().iter().filter(|r| test(r)).count()
    }

    pub(super) fn push(&self, request: LoggedRequest) {
        let mut log = self.lock();
        // Bounded, like the inbox: a long simulated run keeps the newest requests.
        if log.len() >= CHAT_LOG_KEPT {
            log.remove(0);
        }
        let observer = self
            .1
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        if let Some(observer) = observer {
            observer(&request);
        }
        log.push(request);
    }

    /// The lock; a panic elsewhere while holding it leaves plain data, still usable.
    fn lock(&self) -> MutexGuard<'_, Vec<LoggedRequest>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}
