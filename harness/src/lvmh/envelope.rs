//! The envelope every agent-link frame carries (spec, "Envelope"), and the kinds of frames.

use serde_json::{Map, Value, json};

/// The envelope's version (`v`), the only one there is.
pub const VERSION: u64 = 1;

/// The kinds of frames (`type`), by direction (spec, "Plugin → daemon events", "Daemon →
/// plugin", "Transport 3").
pub mod kinds {
    /// The plugin's first frame, with the session snapshot.
    pub const HELLO: &str = "hello";
    /// A message begins.
    pub const MESSAGE_START: &str = "message_start";
    /// A streaming text delta of an assistant message (never persisted).
    pub const MESSAGE_UPDATE: &str = "message_update";
    /// A message ends, whole.
    pub const MESSAGE_END: &str = "message_end";
    /// A tool call begins.
    pub const TOOL_START: &str = "tool_execution_start";
    /// A tool call's partial output.
    pub const TOOL_UPDATE: &str = "tool_execution_update";
    /// A tool call ends.
    pub const TOOL_END: &str = "tool_execution_end";
    /// An LLM run begins.
    pub const AGENT_START: &str = "agent_start";
    /// An LLM run ends, with its usage.
    pub const AGENT_END: &str = "agent_end";
    /// The agent is idle.
    pub const AGENT_SETTLED: &str = "agent_settled";
    /// The session was renamed or changed model.
    pub const SESSION_INFO: &str = "session_info";
    /// The plugin leaves on purpose.
    pub const BYE: &str = "bye";
    /// The plugin dropped buffered events while the daemon was away.
    pub const BUFFER_OVERFLOW: &str = "buffer_overflow";
    /// The daemon's answer to hello.
    pub const WELCOME: &str = "welcome";
    /// A message from the web, for the session.
    pub const PROMPT: &str = "prompt";
    /// Stop the current run.
    pub const ABORT: &str = "abort";
    /// Browser: subscribe to a session's events.
    pub const SUBSCRIBE: &str = "subscribe";
    /// Browser: stop a subscription.
    pub const UNSUBSCRIBE: &str = "unsubscribe";
    /// Daemon to browser: the whole session list.
    pub const SESSION_LIST: &str = "session_list";
    /// Daemon to browser: a batch of a session's events.
    pub const EVENTS: &str = "events";
    /// Daemon to browser: the spawn jobs.
    pub const SPAWN_STATUS: &str = "spawn_status";
}

/// Whether the daemon persists frames of this kind: every event but the streaming deltas
/// (spec, the notes under "Plugin → daemon events").
pub fn is_persisted(kind: &str) -> bool {
    kind != kinds::MESSAGE_UPDATE && kind != kinds::HELLO
}

/// The sender's clock, in unix milliseconds.
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// Why a frame has no envelope: a field of it missing, or of the wrong type.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EnvelopeError {
    /// `v`, `seq` or `ts` is missing or no whole number ≥ 0.
    #[error("`{0}` is not a whole number ≥ 0")]
    NotANumber(&'static str),
    /// `sessionId` or `type` is missing or no string.
    #[error("`{0}` is not a string")]
    NotAString(&'static str),
}

/// An envelope read from a frame: its fields, when they have their types.
#[derive(Debug, Clone, PartialEq)]
#[allow(missing_docs)] // fields whose names say it all go undocumented
pub struct Envelope {
    /// `v`.
    pub version: u64,
    /// `sessionId`.
    pub session_id: String,
    pub seq: u64,
    pub ts: u64,
    /// `type`.
    pub kind: String,
}

impl Envelope {
    /// Reads a frame's envelope; `Err` says which field is missing or of the wrong type.
    pub fn read(frame: &Value) -> Result<Envelope, EnvelopeError> {
        let number = |key: &'static str| {
            frame
                .get(key)
                .and_then(Value::as_u64)
                .ok_or(EnvelopeError::NotANumber(key))
        };
        let text = |key: &'static str| {
            frame
                .get(key)
                .and_then(Value::as_str)
                .map(str::to_string)
                .ok_or(EnvelopeError::NotAString(key))
        };
        Ok(Envelope {
            version: number("v")?,
            session_id: text("sessionId")?,
            seq: number("seq")?,
            ts: number("ts")?,
            kind: text("type")?,
        })
    }

    /// Why `ts` is no unix time in milliseconds, if it is not: one in seconds is below 10^12
    /// (which milliseconds passed in 2001), one in micro- or nanoseconds above 10^14 (the year
    /// 5138 in milliseconds). No clock is read: the sender's may be off.
    pub fn ts_unit_error(&self) -> Option<String> {
        const MS_FROM: u64 = 1_000_000_000_000;
        const MS_UNTIL: u64 = 100_000_000_000_000;
        match self.ts {
            ts if ts < MS_FROM => Some(format!(
                "`ts` is {ts}: not unix milliseconds (seconds, or a clock at 1970?)"
            )),
            ts if ts >= MS_UNTIL => Some(format!(
                "`ts` is {ts}: not unix milliseconds (micro- or nanoseconds?)"
            )),
            _ => None,
        }
    }

    /// A frame of `kind` for `session_id` numbered `seq`, stamped now, with `payload`'s fields.
    pub fn frame(kind: &str, session_id: &str, seq: u64, payload: Map<String, Value>) -> Value {
        let mut frame = json!({
            "v": VERSION,
            "sessionId": session_id,
            "seq": seq,
            "ts": now_ms(),
            "type": kind,
        });
        if let Value::Object(fields) = &mut frame {
            for (key, value) in payload {
                fields.entry(key).or_insert(value);
            }
        }
        frame
    }
}

/// `value`'s fields, or none when it is not an object: payloads written as `json!({…})`.
pub fn fields(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        _ => Map::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_frame_reads_back_as_its_envelope_and_a_broken_one_says_which_field() {
        let frame = Envelope::frame(kinds::AGENT_START, "s1", 3, Map::new());
        let read = Envelope::read(&frame).expect("a frame of ours reads");
        assert_eq!(
            (read.session_id.as_str(), read.seq, read.kind.as_str()),
            ("s1", 3, "agent_start")
        );
        let mut broken = frame.clone();
        broken["seq"] = json!(-1);
        assert_eq!(
            Envelope::read(&broken).unwrap_err().to_string(),
            "`seq` is not a whole number ≥ 0"
        );
        broken["seq"] = json!(1);
        broken["sessionId"] = json!(7);
        assert_eq!(
            Envelope::read(&broken).unwrap_err().to_string(),
            "`sessionId` is not a string"
        );
        assert_eq!(read.ts_unit_error(), None, "now, in milliseconds");
        let mut seconds = frame.clone();
        seconds["ts"] = json!(1_799_999_999);
        let seconds = Envelope::read(&seconds).expect("reads");
        assert!(
            seconds
                .ts_unit_error()
                .is_some_and(|e| e.contains("seconds"))
        );
        let mut micros = frame.clone();
        micros["ts"] = json!(1_799_999_999_000_000u64);
        let micros = Envelope::read(&micros).expect("reads");
        assert!(micros.ts_unit_error().is_some_and(|e| e.contains("micro")));
    }

    #[test]
    fn only_deltas_and_hello_are_not_persisted() {
        assert!(!is_persisted(kinds::MESSAGE_UPDATE));
        assert!(!is_persisted(kinds::HELLO));
        for kind in [
            kinds::MESSAGE_END,
            kinds::TOOL_UPDATE,
            kinds::AGENT_SETTLED,
            kinds::BYE,
        ] {
            assert!(is_persisted(kind), "{kind}");
        }
    }
}
