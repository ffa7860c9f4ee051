//! What the plugin sends the daemon: every event numbered at once and kept in a bounded
//! buffer, sent while a welcomed link is up, and resent after a `welcome` from the daemon's
//! `lastSeq` on (with a notice of what the buffer dropped). Also what a test reads back of it:
//! the seqs given out, delivered and replayed.

use std::sync::Arc;

use serde_json::{Map, Value, json};

use super::fingerprint::{PRINTS_KEPT, Print, print_of};
use super::{Plugin, State};
use crate::jsonrpc::Peer;
use crate::lvmh::envelope::{Envelope, fields, kinds};
use crate::lvmh::rules;

/// How many of the events it sent the plugin remembers (seq and kind), for a page reload to be
/// compared with.
pub(super) const SENT_KEPT: usize = 200_000;

impl Plugin {
    /// Numbers an event, keeps it, and sends it when a welcomed link is up. Never waits.
    pub fn emit(&self, kind: &str, payload: Map<String, Value>) {
        self.emit_under(None, kind, payload);
    }

    /// As [`Plugin::emit`], under `session`'s id instead of its own when one is given.
    fn emit_under(&self, session: Option<&str>, kind: &str, payload: Map<String, Value>) {
        let Ok(mut state) = self.state.lock() else {
            return;
        };
        state.seq += 1;
        let mut seq = state.seq;
        if self.config.misbehave.breaks(rules::SEQ_MONOTONIC) && seq == 3 {
            // Says 2 again: the daemon must see a seq that is not above the one before.
            seq = 2;
        }
        if self
            .config
            .misbehave
            .breaks_way(rules::SEQ_MONOTONIC, "swapped")
        {
            // Misbehaving: the third and fourth events numbered 4 and 3, so seq goes down.
            seq = match seq {
                3 => 4,
                4 => 3,
                other => other,
            };
        }
        let own = self.session_id();
        let mut frame = Envelope::frame(kind, session.unwrap_or(&own), seq, payload);
        if self.config.misbehave.breaks(rules::ENVELOPE)
            && let Value::Object(fields) = &mut frame
        {
            fields.remove("ts");
        }
        // Misbehaving: the time in seconds, not milliseconds.
        if self
            .config
            .misbehave
            .breaks_way(rules::ENVELOPE, "ts_seconds")
            && let Some(ts) = frame.get("ts").and_then(Value::as_u64)
        {
            frame["ts"] = json!(ts / 1000);
        }
        if state.buffer.len() >= self.config.buffer_cap.max(1)
            && let Some(oldest) = state.buffer.pop_front()
        {
            let seq = oldest.get("seq").and_then(Value::as_u64).unwrap_or(0);
            state.dropped_up_to = state.dropped_up_to.max(seq);
        }
        if state.sent.len() >= SENT_KEPT {
            state.sent.pop_front();
        }
        state.sent.push_back((seq, kind.to_string()));
        if state.prints.len() >= PRINTS_KEPT {
            state.prints.pop_front();
        }
        state.prints.push_back((seq, print_of(&frame)));
        state.buffer.push_back(frame.clone());
        if let Some(peer) = state.live.clone() {
            peer.send_frame(frame);
            deliver(&mut state, seq);
        }
    }

    /// The daemon has everything up to `last`: the rest of the buffer goes out, oldest first,
    /// then a notice of what the buffer dropped, and the link is live.
    pub(super) fn welcomed(&self, peer: &Arc<Peer>, last: u64) {
        let notice = {
            let Ok(mut state) = self.state.lock() else {
                return;
            };
            if !state.waiting.as_ref().is_some_and(|w| Arc::ptr_eq(w, peer)) {
                return;
            }
            state.waiting = None;
            state.last_welcomed = Some(peer.link());
            state.welcomes.push(last);
            let misbehave = &self.config.misbehave;
            let from = match misbehave.breaks(rules::REPLAY_AFTER_LAST_SEQ) {
                // Resends the last one the daemon has too.
                true => last,
                // A daemon's lastSeq may be the largest there is.
                false => last.saturating_add(1),
            };
            state
                .buffer
                .retain(|f| f.get("seq").and_then(Value::as_u64).unwrap_or(0) >= from);
            if misbehave.breaks_way(rules::REPLAY_AFTER_LAST_SEQ, "skips_one") {
                // Misbehaving: the first event the daemon lacks is left out. Not "the first one
                // never sent": events sent into a link that was already dying count as sent,
                // and when a whole run went that way nothing was left out and the rule held.
                let first_lacking = state
                    .buffer
                    .iter()
                    .position(|f| f.get("seq").and_then(Value::as_u64).unwrap_or(0) > last);
                if let Some(at) = first_lacking {
                    state.buffer.remove(at);
                }
            }
            let resent: Vec<u64> = state
                .buffer
                .iter()
                .map(|frame| {
                    peer.send_frame(frame.clone());
                    frame.get("seq").and_then(Value::as_u64).unwrap_or(0)
                })
                .collect();
            for seq in resent {
                deliver(&mut state, seq);
            }
            state.replayed = state.buffer.len() as u64;
            state.live = Some(peer.clone());
            // What the daemon lacks and the buffer no longer holds is lost: said so.
            let lost = state.dropped_up_to.saturating_sub(last);
            (lost > 0 && !misbehave.breaks(rules::BUFFER_OVERFLOW_NOTICE)).then_some(lost)
        };
        if let Some(dropped) = notice {
            // Misbehaving (`wrong_session`): the notice goes out under another session's id.
            let other = format!("{}-other", self.session_id());
            let under = self
                .config
                .misbehave
                .breaks_way(rules::BUFFER_OVERFLOW_NOTICE, "wrong_session")
                .then_some(other.as_str());
            self.emit_under(
                under,
                kinds::BUFFER_OVERFLOW,
                fields(json!({ "dropped": dropped })),
            );
        }
    }

    /// The last seq given out.
    pub fn last_seq(&self) -> u64 {
        self.state.lock().map(|s| s.seq).unwrap_or(0)
    }

    /// The `lastSeq` of each welcome so far.
    pub fn welcomes(&self) -> Vec<u64> {
        self.state
            .lock()
            .map(|s| s.welcomes.clone())
            .unwrap_or_default()
    }

    /// How many events the last welcome had the plugin resend.
    pub fn replayed(&self) -> u64 {
        self.state.lock().map(|s| s.replayed).unwrap_or(0)
    }

    /// The seqs of the events that went out on a link (live or in a replay), at most the last
    /// 200,000: what a daemon can have.
    pub fn delivered(&self) -> std::collections::BTreeSet<u64> {
        self.state
            .lock()
            .map(|s| s.delivered.clone())
            .unwrap_or_default()
    }

    /// Every event given out so far, `(seq, type)`, oldest first.
    pub fn sent(&self) -> Vec<(u64, String)> {
        self.state
            .lock()
            .map(|s| s.sent.iter().cloned().collect())
            .unwrap_or_default()
    }
}

/// Notes that event `seq` went out on a link.
fn deliver(state: &mut State, seq: u64) {
    state.delivered.insert(seq);
    while state.delivered.len() > SENT_KEPT {
        state.delivered.pop_first();
    }
}

impl Plugin {
    /// The seqs of the `served` events (a daemon's `GET …/events`) that are not what this
    /// plugin sent under that seq: a field it sent is missing or has another value (a field
    /// the daemon adds is its own). Only the last events sent keep what they held.
    pub fn altered(&self, served: &[Value]) -> Vec<u64> {
        let Ok(state) = self.state.lock() else {
            return Vec::new();
        };
        let prints: std::collections::HashMap<u64, &Print> = state
            .prints
            .iter()
            .map(|(seq, print)| (*seq, print))
            .collect();
        served
            .iter()
            .filter_map(|event| {
                let seq = event.get("seq").and_then(Value::as_u64)?;
                let sent = prints.get(&seq)?;
                let came = print_of(event);
                sent.iter()
                    .any(|field| !came.contains(field))
                    .then_some(seq)
            })
            .collect()
    }
}
