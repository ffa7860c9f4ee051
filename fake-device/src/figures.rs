//! What a device measures of its link for a load run's figures (`Options::recorder`): shown
//! every message as the journal records it, it pairs requests with their answers and prompts
//! with their first update, and times the link's set-up and each redial.
//!
//! The names it records under:
//! - `link.setup`: from the device's start to its answer to the first `initialize`;
//! - `link.redial`: from a link's end to the next link's `initialize` answered;
//! - `device.METHOD`: from the instance's request to the device's answer (`prompt.answer` for
//!   `session/prompt` too), and `prompt.first_update`: to the first `session/update` of its
//!   session;
//! - `server.METHOD`: from the device's request to the instance's answer;
//! - counters `messages.in`, `messages.out`, `events.KIND` (each `session/update` the device
//!   sends, by its `sessionUpdate`), `notifications.in.METHOD`, `notifications.out.METHOD`,
//!   `links.opened`, `requests.unanswered` (asked on a link that ended before the answer).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use harness::journal::{Direction, Tap};
use harness::load::Recorder;
use serde_json::Value;

/// How many requests a device keeps waiting for their answers, both ways together: what a
/// peer asks is bounded, however much it asks without waiting.
const MAX_WAITING: usize = 1024;
/// How many prompts a device keeps waiting for their first update.
const MAX_PROMPTS: usize = 256;
/// The longest request id kept (longer ones are not timed): an id is the peer's to choose.
const MAX_ID_BYTES: usize = 128;

/// Who asked a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Asker {
    Instance,
    Device,
}

/// A device's side of a load run's figures.
#[derive(Debug)]
pub(crate) struct DeviceTap {
    recorder: Arc<Recorder>,
    started: Instant,
    state: Mutex<Waiting>,
}

/// What is waiting to be timed.
#[derive(Debug, Default)]
struct Waiting {
    /// Requests waiting for their answers: by link, asker and id, their method and start.
    requests: HashMap<(u32, Asker, String), (String, Instant)>,
    /// Prompts waiting for their first update: by link and session, their start.
    prompts: HashMap<(u32, String), Instant>,
    /// Whether a link has been set up yet.
    linked_once: bool,
    /// When the last link ended, until the next is set up.
    link_ended: Option<Instant>,
}

impl DeviceTap {
    /// A tap recording into `recorder`, for a device starting now.
    pub(crate) fn new(recorder: Arc<Recorder>) -> DeviceTap {
        DeviceTap {
            recorder,
            started: Instant::now(),
            state: Mutex::new(Waiting::default()),
        }
    }
}

/// A request id as a key, if it is one a device would time.
fn id_key(id: &Value) -> Option<String> {
    let key = id.to_string();
    (key.len() <= MAX_ID_BYTES).then_some(key)
}

fn session_of(msg: &Value) -> Option<&str> {
    msg.pointer("/params/sessionId").and_then(Value::as_str)
}

impl Tap for DeviceTap {
    fn seen(&self, link: u32, dir: Direction, msg: &Value) {
        let now = Instant::now();
        let Ok(mut waiting) = self.state.lock() else {
            return;
        };
        let recorder = &self.recorder;
        if dir == Direction::Event {
            return self.link_event(&mut waiting, link, msg, now);
        }
        recorder.count(
            if dir == Direction::In {
                "messages.in"
            } else {
                "messages.out"
            },
            1,
        );
        let method = msg.get("method").and_then(Value::as_str);
        let id = msg.get("id").filter(|id| !id.is_null());
        match (method, id, dir) {
            (Some(method), Some(id), _) => {
                let asker = if dir == Direction::In {
                    Asker::Instance
                } else {
                    Asker::Device
                };
                if waiting.requests.len() < MAX_WAITING
                    && let Some(key) = id_key(id)
                {
                    waiting
                        .requests
                        .insert((link, asker, key), (method.to_string(), now));
                }
                if method == "session/prompt"
                    && asker == Asker::Instance
                    && waiting.prompts.len() < MAX_PROMPTS
                    && let Some(session) = session_of(msg)
                {
                    waiting.prompts.insert((link, session.to_string()), now);
                }
            }
            (None, Some(id), _) => {
                // An answer: to the instance's request when the device sends it.
                let asker = if dir == Direction::Out {
                    Asker::Instance
                } else {
                    Asker::Device
                };
                let Some(key) = id_key(id) else { return };
                let Some((method, asked)) = waiting.requests.remove(&(link, asker, key)) else {
                    return;
                };
                let took = now.saturating_duration_since(asked);
                let ok = msg.get("error").is_none();
                match asker {
                    Asker::Instance => {
                        recorder.latency(&format!("device.{method}"), took, ok);
                        if method == "session/prompt" {
                            recorder.latency("prompt.answer", took, ok);
                            waiting
                                .prompts
                                .retain(|(l, _), at| *l != link || *at != asked);
                        }
                        if method == "initialize" && ok {
                            if !waiting.linked_once {
                                waiting.linked_once = true;
                                recorder.latency("link.setup", now - self.started, true);
                            } else if let Some(ended) = waiting.link_ended.take() {
                                recorder.latency("link.redial", now - ended, true);
                            }
                        }
                    }
                    Asker::Device => recorder.latency(&format!("server.{method}"), took, ok),
                }
            }
            (Some(method), None, Direction::Out) => {
                if method != "session/update" {
                    return recorder.count(&format!("notifications.out.{method}"), 1);
                }
                let kind = msg
                    .pointer("/params/update/sessionUpdate")
                    .and_then(Value::as_str)
                    .unwrap_or("(none)");
                recorder.count(&format!("events.{kind}"), 1);
                if let Some(session) = session_of(msg)
                    && let Some(asked) = waiting.prompts.remove(&(link, session.to_string()))
                {
                    recorder.latency("prompt.first_update", now - asked, true);
                }
            }
            (Some(method), None, _) => {
                recorder.count(&format!("notifications.in.{method}"), 1);
            }
            (None, None, _) => {}
        }
    }
}

impl DeviceTap {
    /// A link opened or ended: what was waiting on an ended link will not be answered.
    fn link_event(&self, waiting: &mut Waiting, link: u32, msg: &Value, now: Instant) {
        match msg.get("event").and_then(Value::as_str) {
            Some("open") => self.recorder.count("links.opened", 1),
            Some("closed" | "dropped") => {
                if waiting.link_ended.is_none() {
                    waiting.link_ended = Some(now);
                }
                let before = waiting.requests.len();
                waiting.requests.retain(|(l, _, _), _| *l != link);
                let lost = before - waiting.requests.len();
                if lost > 0 {
                    self.recorder.count("requests.unanswered", lost as u64);
                }
                waiting.prompts.retain(|(l, _), _| *l != link);
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_prompt_is_timed_to_its_first_update_and_its_answer_and_requests_both_ways() {
        let recorder = Arc::new(Recorder::new());
        let tap = DeviceTap::new(recorder.clone());
        tap.seen(1, Direction::Event, &json!({"event": "open"}));
        tap.seen(
            1,
            Direction::In,
            &json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {}}),
        );
        tap.seen(
            1,
            Direction::Out,
            &json!({"jsonrpc": "2.0", "id": 0, "result": {}}),
        );
        let prompt = json!({"jsonrpc": "2.0", "id": "p1", "method": "session/prompt", "params": {"sessionId": "s1"}});
        tap.seen(1, Direction::In, &prompt);
        let update = |kind: &str| json!({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "s1", "update": {"sessionUpdate": kind}}});
        tap.seen(1, Direction::Out, &update("agent_thought_chunk"));
        tap.seen(1, Direction::Out, &update("agent_message_chunk"));
        tap.seen(1, Direction::Out, &json!({"jsonrpc": "2.0", "id": 7, "method": "session/request_permission", "params": {}}));
        tap.seen(
            1,
            Direction::In,
            &json!({"jsonrpc": "2.0", "id": 7, "error": {"code": -1, "message": "no"}}),
        );
        tap.seen(
            1,
            Direction::Out,
            &json!({"jsonrpc": "2.0", "id": "p1", "result": {"stopReason": "end_turn"}}),
        );
        tap.seen(
            1,
            Direction::In,
            &json!({"jsonrpc": "2.0", "id": 9, "method": "session/new", "params": {}}),
        );
        tap.seen(1, Direction::Event, &json!({"event": "closed"}));
        tap.seen(
            2,
            Direction::In,
            &json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {}}),
        );
        tap.seen(
            2,
            Direction::Out,
            &json!({"jsonrpc": "2.0", "id": 0, "result": {}}),
        );
        let figures = recorder.snapshot();
        let count = |name: &str| figures.latencies.get(name).map(|l| l.count());
        assert_eq!(count("link.setup"), Some(1));
        assert_eq!(count("link.redial"), Some(1));
        assert_eq!(count("device.initialize"), Some(2));
        assert_eq!(count("prompt.first_update"), Some(1));
        assert_eq!(count("prompt.answer"), Some(1));
        assert_eq!(count("device.session/prompt"), Some(1));
        assert_eq!(
            figures.latencies["server.session/request_permission"].errors,
            1
        );
        assert_eq!(count("device.session/new"), None, "never answered");
        assert_eq!(figures.counters["requests.unanswered"], 1);
        assert_eq!(figures.counters["events.agent_thought_chunk"], 1);
        assert_eq!(figures.counters["messages.in"], 5);
        assert_eq!(figures.counters["messages.out"], 6);
        assert_eq!(figures.counters["links.opened"], 1);
    }

    #[test]
    fn a_peer_asking_without_waiting_is_timed_within_a_bound() {
        let recorder = Arc::new(Recorder::new());
        let tap = DeviceTap::new(recorder.clone());
        for id in 0..(MAX_WAITING as u64 * 3) {
            tap.seen(1, Direction::In, &json!({"jsonrpc": "2.0", "id": id, "method": "session/prompt", "params": {"sessionId": id.to_string()}}));
        }
        tap.seen(
            1,
            Direction::In,
            &json!({"jsonrpc": "2.0", "id": "x".repeat(10_000), "method": "m", "params": {}}),
        );
        let waiting = tap.state.lock().expect("the lock");
        assert_eq!(waiting.requests.len(), MAX_WAITING);
        assert_eq!(waiting.prompts.len(), MAX_PROMPTS);
    }
}
