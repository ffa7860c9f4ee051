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
    /// The function tools the request offered the model (`None`: it had no `tools`).
    pub tools: Option<Vec<String>>,
    /// The tools the answer called (a script's tool calls).
    pub called: Vec<String>,
    /// The answer's status code.
    pub status: u16,
}

/// How many chat requests the log keeps.
pub const CHAT_LOG_KEPT: usize = 10_000;
/// How many bytes of their texts it keeps: a request may carry megabytes of conversation.
pub const CHAT_LOG_BYTES: usize = 32 * 1024 * 1024;

impl LoggedRequest {
    /// About the bytes it holds: its texts.
    fn bytes(&self) -> usize {
        let text = |t: &Option<String>| t.as_ref().map_or(0, String::len);
        let names = |n: &[String]| n.iter().map(String::len).sum::<usize>();
        64 + self.model.len()
            + text(&self.last_user)
            + text(&self.system)
            + text(&self.tool_result)
            + self.tools.as_deref().map_or(0, names)
            + names(&self.called)
    }
}

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
        // Bounded, like the inbox, by count and by bytes: a long simulated run keeps the newest
        // requests (the newest one always).
        let mut bytes: usize =
            log.iter().map(LoggedRequest::bytes).sum::<usize>() + request.bytes();
        let mut drop = 0;
        while drop < log.len() && (log.len() - drop >= CHAT_LOG_KEPT || bytes > CHAT_LOG_BYTES) {
            bytes -= log[drop].bytes();
            drop += 1;
        }
        log.drain(..drop);
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

#[cfg(test)]
mod tests {
    use super::*;

    fn request(n: usize, text_bytes: usize) -> LoggedRequest {
        LoggedRequest {
            at_ms: n as u64,
            model: "echo".into(),
            last_user: Some("x".repeat(text_bytes)),
            system: None,
            tool_result: None,
            stream: false,
            turn_hint: 1,
            script: None,
            tools: None,
            called: Vec::new(),
            status: 200,
        }
    }

    #[test]
    fn the_log_is_bounded_by_bytes_and_keeps_the_newest() {
        let log = ChatLog::default();
        for n in 0..100 {
            log.push(request(n, 2 * 1024 * 1024));
        }
        let kept = log.entries();
        let bytes: usize = kept.iter().map(LoggedRequest::bytes).sum();
        assert!(bytes <= CHAT_LOG_BYTES, "{bytes}");
        assert_eq!(kept.last().map(|r| r.at_ms), Some(99));
        assert!(
            kept.len() >= 15,
            "most of the budget is used: {}",
            kept.len()
        );
        // One over the whole budget is still logged, alone.
        log.push(request(100, CHAT_LOG_BYTES + 1));
        assert_eq!(log.entries().len(), 1);
    }
}
