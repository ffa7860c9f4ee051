//! `_lembas/session/delete`: which sessions a client may delete (one it was given, else one
//! under the roots of a device whose remote work is on), and the answer that says whether it
//! was there. Telling other clients (`_lembas/session/deleted`) is the registry's.

use harness::jsonrpc::{INTERNAL_ERROR, RpcError};
use harness::rules::{Misbehaviours, ids};
use serde_json::json;

use super::call::Call;
use crate::answers::{Answer, param_str, refuse};
use crate::store::{StoredSession, TurnLog};

/// What a misbehaving device's delete gets wrong; all off by default.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Faults {
    /// A session it does not have is said deleted.
    pub absent_deleted: bool,
    /// A session that was there is said not to have been.
    pub present_not_deleted: bool,
    /// The mark of what the client was given is not looked at.
    pub given_ignored: bool,
    /// One it gave the client, outside the limits now, is said not to be there.
    pub given_outside_not_there: bool,
    /// One never given and outside the roots is deleted all the same.
    pub scope_ignored: bool,
    /// One never given and outside the roots is refused, and deleted all the same.
    pub refused_yet_gone: bool,
    /// An untrusted project's session is said not to be there.
    pub untrusted_not_there: bool,
    /// Trust is asked of a delete as of session/new.
    pub untrusted_refused: bool,
    /// The delete is answered, and the session stays.
    pub stays: bool,
    /// Taken out of the store, and still open in memory.
    pub memory_only: bool,
    /// The terminal's new session is shared under the deleted one's id.
    pub terminal_same_id: bool,
}

impl Faults {
    /// The faults `m` asks for.
    pub(crate) fn of(m: &Misbehaviours) -> Faults {
        Faults {
            absent_deleted: m.breaks(ids::DEVICE_DELETE_RESULT),
            present_not_deleted: m.breaks_way(ids::DEVICE_DELETE_RESULT, "false_for_present"),
            given_ignored: m.breaks(ids::DEVICE_DELETE_GIVEN),
            given_outside_not_there: m.breaks_way(ids::DEVICE_DELETE_GIVEN, "says_false"),
            scope_ignored: m.breaks(ids::DEVICE_DELETE_SCOPE),
            refused_yet_gone: m.breaks_way(ids::DEVICE_DELETE_SCOPE, "refused_gone"),
            untrusted_not_there: m.breaks_way(ids::DEVICE_DELETE_UNTRUSTED, "says_false"),
            untrusted_refused: m.breaks(ids::DEVICE_DELETE_UNTRUSTED),
            stays: m.breaks(ids::DEVICE_DELETE_GONE),
            memory_only: m.breaks_way(ids::DEVICE_DELETE_GONE, "memory_only"),
            terminal_same_id: m.breaks_way(ids::DEVICE_DELETE_TERMINAL_NEW, "same_id"),
        }
    }
}

/// Answers `_lembas/session/delete`.
pub(crate) async fn answer(call: Call<'_>, faults: &Faults) -> Answer {
    let (sessions, params) = (call.sessions, call.params);
    let registry = sessions.registry();
    let id = param_str(params, "sessionId")?;
    let Some(live) = sessions.open(id).await else {
        return Ok(json!({ "deleted": faults.absent_deleted }));
    };
    {
        let state = live.state.lock().await;
        // Which sessions a client may delete: one it was given, else one under the roots
        // of a device whose remote work is on. Trust is not asked: deleting runs nothing.
        let limits = registry.limits();
        // Misbehaving: the mark of what the client was given is not looked at.
        let given = state.stored.given && !faults.given_ignored;
        let outside = !limits.inside_roots(&state.stored.cwd);
        // Misbehaving: one it gave the client, outside the limits now, said not to be there.
        if state.stored.given && outside && faults.given_outside_not_there {
            return Ok(json!({ "deleted": false }));
        }
        if !given && outside && !faults.scope_ignored {
            // Misbehaving: refused, and deleted all the same.
            if faults.refused_yet_gone {
                drop(state);
                let _ = registry.remove(id, &live).await;
            }
            return Err(refuse(
                "this session was never the client's and is outside the device's roots",
            ));
        }
        let untrusted = limits.require_trust && !limits.is_trusted(&state.stored.cwd);
        // Misbehaving: an untrusted project's session said not to be there.
        if untrusted && faults.untrusted_not_there {
            return Ok(json!({ "deleted": false }));
        }
        // Misbehaving: trust is asked of a delete as of session/new.
        if faults.untrusted_refused && untrusted {
            return Err(refuse("this session's project is not trusted"));
        }
    }
    if faults.stays {
        // Misbehaving: the delete is answered, and the session stays.
        return Ok(json!({ "deleted": true }));
    }
    if faults.memory_only {
        // Misbehaving: taken out of the store, and still open in memory.
        let _ = registry.store.delete_session(id);
        return Ok(json!({ "deleted": true }));
    }
    let was_terminal = registry.is_terminal_session(id);
    let removed = registry
        .remove(id, &live)
        .await
        .map_err(|e| RpcError::new(INTERNAL_ERROR, e.to_string()))?;
    if was_terminal && faults.terminal_same_id {
        // Misbehaving: the terminal's new session is shared under the deleted one's id.
        let cwd = live.state.lock().await.stored.cwd.clone();
        let stored = StoredSession {
            title: "a terminal session".into(),
            given: true,
            ..StoredSession::new(id, cwd)
        };
        if let Err(e) = registry.store.save_session(&stored) {
            tracing::error!("cannot store the terminal's new session: {e}");
        }
        sessions.spawn_live(stored, TurnLog::default());
        registry.share(id);
    }
    // Misbehaving: a session that was there is said not to have been.
    let said = removed && !faults.present_not_deleted;
    Ok(json!({ "deleted": said }))
}
