//! `_lembas/session/compact`: a session's conversation summed up between turns, said once in
//! the answer and once as a `compacted` event (the `/compact` action, run as a turn, sums it up
//! the same way: the summary is the turns' own, see [`crate::turns`]).

use harness::jsonrpc::{METHOD_NOT_FOUND, RpcError};
use harness::rules::{Misbehaviours, ids};
use serde_json::json;

use super::call::Call;
use crate::answers::{Answer, param_str, refuse};

/// What a misbehaving device gets wrong about compacting; all off by default.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Faults {
    /// The listed method is method-not-found.
    pub unserved: bool,
    /// The listed method is method-not-found while the session works.
    pub unserved_while_working: bool,
    /// A compact while the session works is refused, and the running turn cancelled with it.
    pub cancels_turn: bool,
    /// A compact while the session works is not refused.
    pub while_working: bool,
    /// The `compacted` event carries another summary than the answer.
    pub event_other_summary: bool,
    /// The method's compaction is no `compacted` event.
    pub no_event: bool,
    /// The answer has no summary.
    pub empty_result: bool,
    /// The answer's summary is an object, not a string.
    pub summary_object: bool,
}

impl Faults {
    /// The faults `m` asks for.
    pub(crate) fn of(m: &Misbehaviours) -> Faults {
        Faults {
            unserved: m.breaks(ids::DEVICE_CAPABILITIES_KEPT),
            unserved_while_working: m.breaks_way(ids::DEVICE_CAPABILITIES_KEPT, "while_working"),
            cancels_turn: m.breaks_way(ids::DEVICE_COMPACT_WORKING, "cancels_turn"),
            while_working: m.breaks(ids::DEVICE_COMPACT_WORKING),
            event_other_summary: m.breaks_way(ids::DEVICE_COMPACT_EVENT, "other_summary"),
            no_event: m.breaks(ids::DEVICE_COMPACT_EVENT),
            empty_result: m.breaks(ids::DEVICE_COMPACT_RESULT),
            summary_object: m.breaks_way(ids::DEVICE_COMPACT_RESULT, "summary_object"),
        }
    }
}

/// Answers `_lembas/session/compact`.
pub(crate) async fn answer(call: Call<'_>, faults: &Faults) -> Answer {
    let (params, client) = (call.params, call.client);
    let live = call.sessions.session(params).await?;
    let id = param_str(params, "sessionId")?;
    let working = live.state.lock().await.running.is_some();
    if working && faults.unserved_while_working {
        // Misbehaving: the listed method is method-not-found while the session works.
        return Err(RpcError::new(
            METHOD_NOT_FOUND,
            "_lembas/session/compact is not served while working",
        ));
    }
    if working && faults.cancels_turn {
        // Misbehaving: refused as it should be, but the running turn is cancelled with it.
        if let Some(running) = &live.state.lock().await.running {
            running.cancel();
        }
        return Err(refuse("the session is working: compact it between turns"));
    }
    if working && !faults.while_working {
        return Err(refuse("the session is working: compact it between turns"));
    }
    let summary = call.sessions.turns().summary(&live).await;
    // Misbehaving: the method's compaction is no event.
    if faults.event_other_summary {
        // Misbehaving: the event carries another summary than the answer.
        client.event(
            id,
            json!({ "type": "compacted", "summary": format!("(earlier) {summary}") }),
        );
    } else if !faults.no_event {
        client.event(id, json!({ "type": "compacted", "summary": summary }));
    }
    if faults.empty_result {
        return Ok(json!({}));
    }
    if faults.summary_object {
        return Ok(json!({ "summary": { "text": summary } }));
    }
    Ok(json!({ "summary": summary }))
}
