//! `_lembas/commands`: the command set of a session, or of a folder a session could start in
//! (judged by the `session/new` rules), for the web UI's `/` picker.

use harness::rules::{Misbehaviours, ids};
use serde_json::json;

use super::call::Call;
use crate::answers::{Answer, param_str, refuse};
use crate::command_set::Kind;

/// What a misbehaving device's command list gets wrong; all off by default.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Faults {
    /// A session is answered as if its project had nothing of its own.
    pub builtins_only: bool,
    /// A session's skills are listed twice.
    pub skills_twice: bool,
}

impl Faults {
    /// The faults `m` asks for.
    pub(crate) fn of(m: &Misbehaviours) -> Faults {
        Faults {
            builtins_only: m.breaks(ids::DEVICE_COMMANDS_METHOD),
            skills_twice: m.breaks_way(ids::DEVICE_COMMANDS_METHOD, "skills_twice"),
        }
    }
}

/// Answers `_lembas/commands`.
pub(crate) async fn answer(call: Call<'_>, faults: &Faults) -> Answer {
    let (sessions, params) = (call.sessions, call.params);
    let of_session = params.get("sessionId").is_some();
    let project = if of_session {
        let live = sessions.session(params).await?;
        live.state.lock().await.stored.cwd.clone()
    } else {
        let cwd = param_str(params, "cwd")?;
        sessions
            .registry()
            .limits()
            .check_cwd(cwd)
            .map_err(refuse)?
    };
    let mut set = sessions.registry().command_set(&project);
    if of_session && faults.builtins_only {
        // Misbehaving: a session is answered as if its project had nothing of its own.
        set.retain(|c| c.kind == Kind::Builtin);
    }
    if of_session && faults.skills_twice {
        // Misbehaving: a session's skills are listed twice.
        let skills: Vec<_> = set
            .iter()
            .filter(|c| c.kind == Kind::Skill)
            .cloned()
            .collect();
        set.extend(skills);
    }
    Ok(json!({ "commands": crate::command_set::to_values(&set) }))
}
