//! A plugin's events: each envelope checked, its order judged, the messages and runs it opens
//! and closes followed, the kept kinds persisted, and every event shown to the browsers
//! subscribed to its session.

use std::sync::Arc;

use harness::engine::Hub;
use harness::jsonrpc::Peer;
use harness::lvmh::envelope::{is_persisted, kinds};
use harness::lvmh::{Envelope, RESULT_PREVIEW_MAX, rules};
use serde_json::{Value, json};

use super::{Daemon, find};

/// How far past 2048 characters a cut preview may run: room for a marker saying it was cut
/// ("…[truncated]"). The spec's "2KB" may count bytes, characters or UTF-16 units: characters
/// accept each of those readings' cuts of ASCII and of any other text.
const PREVIEW_MARKER_ALLOWANCE: usize = 32;

impl Daemon {
    /// A plugin's frame: its envelope checked, then a hello welcomed, or an event judged,
    /// followed, kept and shown to the browsers.
    pub(super) fn on_event(&self, hub: &Arc<Hub>, peer: &Arc<Peer>, kind: &str, frame: &Value) {
        let Some(envelope) = read_envelope(hub, peer, frame) else {
            return;
        };
        if kind == kinds::HELLO {
            return self.on_hello(hub, peer, frame);
        }
        if !self.is_links_session(hub, peer, &envelope, frame) {
            return;
        }
        if !self.judge_order(hub, peer, kind, &envelope, frame) {
            return;
        }
        self.note_overflow(kind, &envelope);
        self.note_session_info(kind, &envelope, frame);
        self.follow_messages(hub, peer, &envelope, frame);
        check_preview(hub, peer, kind, frame);
        self.persist(kind, &envelope, frame);
        self.fan_out(kind, &envelope, frame);
    }

    /// Whether the event is of the session this link's hello named; one of another session
    /// is reported and not kept.
    fn is_links_session(
        &self,
        hub: &Arc<Hub>,
        peer: &Arc<Peer>,
        envelope: &Envelope,
        frame: &Value,
    ) -> bool {
        let named = self
            .agents
            .lock()
            .ok()
            .and_then(|a| a.get(&peer.link()).and_then(|l| l.session.clone()));
        if let Some(named) = &named
            && *named != envelope.session_id
        {
            let why = format!(
                "sessionId `{}` is not the session this link's hello named (`{named}`); the event is not kept",
                envelope.session_id
            );
            find(hub, peer, rules::ENVELOPE, why, frame);
            return false;
        }
        true
    }

    /// A `buffer_overflow`: the daemon lacks events of the session, and a gap waiting for the
    /// notice is excused.
    fn note_overflow(&self, kind: &str, envelope: &Envelope) {
        if kind == kinds::BUFFER_OVERFLOW {
            self.not_whole(&envelope.session_id);
        }
        if kind == kinds::BUFFER_OVERFLOW
            && let Ok(mut gaps) = self.gaps.lock()
        {
            gaps.remove(&envelope.session_id);
        }
    }

    /// A `session_info`: the stored session takes the new snapshot, and the browsers the list.
    fn note_session_info(&self, kind: &str, envelope: &Envelope, frame: &Value) {
        if kind == kinds::SESSION_INFO
            && let Some(session) = frame.get("session").filter(|s| s.is_object())
        {
            // A rename or a model change: the list shows it.
            if let Ok(mut store) = self.store.lock() {
                let mut info = session.clone();
                info["id"] = json!(envelope.session_id);
                store.session(info);
            }
            self.list_changed();
        }
    }

    /// Keeps the event if its kind is kept (spec, "Persistence"), as the misbehaviours bend it.
    fn persist(&self, kind: &str, envelope: &Envelope, frame: &Value) {
        let persist = is_persisted(kind)
            || self.misbehave.breaks(rules::UPDATES_NOT_PERSISTED)
            || kind == kinds::BUFFER_OVERFLOW;
        let dropped = self.misbehave.breaks(rules::PERSISTS_EVENTS) && kind == kinds::AGENT_START;
        if persist
            && !dropped
            && let Ok(mut store) = self.store.lock()
        {
            if kind == kinds::MESSAGE_END
                && self.misbehave.breaks_way(rules::PERSISTS_EVENTS, "altered")
            {
                let mut cut = frame.clone();
                if let Some(text) = cut.pointer_mut("/message/text") {
                    *text = json!("");
                }
                store.persist(envelope, &cut);
            } else {
                store.persist(envelope, frame);
            }
        }
    }

    /// Deltas belong to an open assistant message, followed per session (a message open when
    /// a link dropped goes on on the next).
    fn follow_messages(
        &self,
        hub: &Arc<Hub>,
        peer: &Arc<Peer>,
        envelope: &Envelope,
        frame: &Value,
    ) {
        let kind = envelope.kind.as_str();
        let role = frame
            .pointer("/message/role")
            .and_then(Value::as_str)
            .map(str::to_string);
        let (open, whole, unstarted_end) = {
            let Ok(mut seen) = self.seen.lock() else {
                return;
            };
            let session = seen.entry(envelope.session_id.clone()).or_default();
            let whole = *session.whole.get_or_insert(envelope.seq == 1);
            let mut unstarted_end = false;
            match kind {
                kinds::MESSAGE_START => session.open_role = role,
                kinds::MESSAGE_END => session.open_role = None,
                kinds::AGENT_START => session.run_open = true,
                kinds::AGENT_END => {
                    unstarted_end = whole && !session.run_open;
                    session.run_open = false;
                }
                _ => {}
            }
            (session.open_role.clone(), whole, unstarted_end)
        };
        if kind == kinds::MESSAGE_UPDATE {
            let why = match open.as_deref() {
                Some("assistant") => None,
                Some(role) => Some(format!("a message_update while a `{role}` message is open")),
                // Between two messages: the last one ended, the next has not started.
                None if whole => Some("a message_update while no message is open".to_string()),
                None => None,
            };
            if let Some(why) = why {
                find(hub, peer, rules::UPDATES_ASSISTANT, why, frame);
            }
        }
        if unstarted_end {
            let why = "an agent_end with no agent_start since the last run ended".to_string();
            find(hub, peer, rules::RUN_FRAMED, why, frame);
        }
    }

    /// The daemon lacks events of `session` (lost to a full buffer).
    pub(super) fn not_whole(&self, session: &str) {
        if let Ok(mut seen) = self.seen.lock() {
            seen.entry(session.to_string()).or_default().whole = Some(false);
        }
    }
}

/// The frame's envelope, or none when it is not one lvmh v1 reads (reported).
fn read_envelope(hub: &Arc<Hub>, peer: &Arc<Peer>, frame: &Value) -> Option<Envelope> {
    let envelope = match Envelope::read(frame) {
        Ok(envelope) if envelope.version == harness::lvmh::VERSION => envelope,
        Ok(envelope) => {
            let why = format!("`v` is {}, not 1", envelope.version);
            find(hub, peer, rules::ENVELOPE, why, frame);
            return None;
        }
        Err(why) => {
            find(hub, peer, rules::ENVELOPE, why.to_string(), frame);
            return None;
        }
    };
    // Reported, and the frame still taken: its time is only wrongly stamped.
    if let Some(why) = envelope.ts_unit_error() {
        find(hub, peer, rules::ENVELOPE, why, frame);
    }
    Some(envelope)
}

/// A `tool_execution_end`'s `resultPreview` must be cut to 2 KB (with room for a marker).
fn check_preview(hub: &Arc<Hub>, peer: &Arc<Peer>, kind: &str, frame: &Value) {
    if kind == kinds::TOOL_END
        && let Some(preview) = frame.get("resultPreview").and_then(Value::as_str)
        && preview.chars().count() > RESULT_PREVIEW_MAX + PREVIEW_MARKER_ALLOWANCE
    {
        find(
            hub,
            peer,
            rules::RESULT_PREVIEW,
            format!(
                "resultPreview is {} characters, not cut to 2 KB",
                preview.chars().count()
            ),
            frame,
        );
    }
}
