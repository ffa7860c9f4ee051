//! A plugin's events: each envelope checked, its order judged, the messages and runs it opens
//! and closes followed, the kept kinds persisted, and every event shown to the browsers
//! subscribed to its session.

use std::sync::Arc;

use harness::engine::Hub;
use harness::jsonrpc::Peer;
use harness::lvmh::envelope::{is_persisted, kinds};
use harness::lvmh::{Envelope, RESULT_PREVIEW_MAX, rules};
use serde_json::{Value, json};

use super::sequence::Order;
use super::{Daemon, find};

/// How far past 2048 characters a cut preview may run: room for a marker saying it was cut
/// ("…[truncated]"). The spec's "2KB" may count bytes, characters or UTF-16 units: characters
/// accept each of those readings' cuts of ASCII and of any other text.
const PREVIEW_MARKER_ALLOWANCE: usize = 32;

impl Daemon {
    pub(super) fn on_event(&self, hub: &Arc<Hub>, peer: &Arc<Peer>, kind: &str, frame: &Value) {
        let envelope = match Envelope::read(frame) {
            Ok(envelope) if envelope.version == harness::lvmh::VERSION => envelope,
            Ok(envelope) => {
                let why = format!("`v` is {}, not 1", envelope.version);
                return find(hub, peer, rules::ENVELOPE, why, frame);
            }
            Err(why) => return find(hub, peer, rules::ENVELOPE, why, frame),
        };
        // Reported, and the frame still taken: its time is only wrongly stamped.
        if let Some(why) = envelope.ts_unit_error() {
            find(hub, peer, rules::ENVELOPE, why, frame);
        }
        if kind == kinds::HELLO {
            return self.on_hello(hub, peer, frame);
        }
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
            return find(hub, peer, rules::ENVELOPE, why, frame);
        }
        let Some(check) = self.check_order(peer, &envelope) else {
            return find(
                hub,
                peer,
                rules::HELLO_FIRST,
                format!("`{kind}` came before hello"),
                frame,
            );
        };
        match check {
            Order::Fine => {}
            Order::Broken(rule, why) => find(hub, peer, rule, why, frame),
            Order::Gap(from, to) => {
                self.not_whole(&envelope.session_id);
                let why = format!(
                    "after welcome said lastSeq {}, the first event had seq {to}: {from}..{} were lost, and no buffer_overflow said so",
                    from - 1,
                    to - 1
                );
                let session = envelope.session_id.clone();
                if let Ok(mut gaps) = self.gaps.lock() {
                    gaps.insert(session.clone(), why.clone());
                }
                self.watch_gap(hub, peer, &session, why);
            }
        }
        if kind == kinds::BUFFER_OVERFLOW {
            self.not_whole(&envelope.session_id);
        }
        if kind == kinds::BUFFER_OVERFLOW
            && let Ok(mut gaps) = self.gaps.lock()
        {
            gaps.remove(&envelope.session_id);
        }
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
        self.follow_messages(hub, peer, &envelope, frame);
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
                store.persist(&envelope, &cut);
            } else {
                store.persist(&envelope, frame);
            }
        }
        // Misbehaving: the live deltas go out in batches naming another session.
        let named = match kind == kinds::MESSAGE_UPDATE
            && self
                .misbehave
                .breaks_way(rules::UPDATES_LIVE, "wrong_session")
        {
            true => format!("{}-other", envelope.session_id),
            false => envelope.session_id.clone(),
        };
        let batch = json!({
            "type": kinds::EVENTS,
            "sessionId": named,
            "after": envelope.seq.saturating_sub(1),
            "events": [frame],
        });
        let withheld = !is_persisted(kind) && self.misbehave.breaks(rules::UPDATES_LIVE);
        let mut to = self.browser_peers(Some(&envelope.session_id));
        if kind == kinds::MESSAGE_UPDATE && self.misbehave.breaks_way(rules::UNSUBSCRIBE, "deltas")
        {
            to.extend(self.left_browsers(&envelope.session_id));
        }
        for browser in to {
            if !withheld {
                browser.send_frame(batch.clone());
                self.web
                    .shown(&envelope.session_id, envelope.seq, is_persisted(kind));
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
    fn not_whole(&self, session: &str) {
        if let Ok(mut seen) = self.seen.lock() {
            seen.entry(session.to_string()).or_default().whole = Some(false);
        }
    }
}
