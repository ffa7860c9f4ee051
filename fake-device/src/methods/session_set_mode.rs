//! `session/set_mode`: the client moves a session to another mode, lowered to the device's
//! `max_mode`, and hears the mode the session is now in.

use harness::rules::{Misbehaviours, ids};
use serde_json::json;

use super::call::Call;
use crate::answers::{Answer, param_str, refuse};
use crate::registry::ModeReport;

/// What a misbehaving device's mode change gets wrong; all off by default.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Faults {
    /// The asked mode is put as it is, above `max_mode` or not.
    pub unlowered: bool,
    /// The mode is lowered, and the lowered mode is not reported.
    pub lowered_unreported: bool,
}

impl Faults {
    /// The faults `m` asks for.
    pub(crate) fn of(m: &Misbehaviours) -> Faults {
        Faults {
            unlowered: m.breaks(ids::DEVICE_SET_MODE_LOWERED),
            lowered_unreported: m.breaks_way(ids::DEVICE_SET_MODE_LOWERED, "unreported"),
        }
    }
}

/// Answers `session/set_mode`.
pub(crate) async fn answer(call: Call<'_>, faults: &Faults) -> Answer {
    let (sessions, params, client) = (call.sessions, call.params, call.client);
    let registry = sessions.registry();
    let live = sessions.session(params).await?;
    let asked = param_str(params, "modeId")?;
    let mode = registry
        .limits()
        .lower_mode(asked)
        .ok_or_else(|| refuse(format!("no mode `{asked}`")))?;
    {
        let mut state = live.state.lock().await;
        registry.report_to(&mut state, client);
    }
    // Misbehaving: the asked mode as it is, above `max_mode` or not.
    let mode = if faults.unlowered { asked } else { &mode };
    // Misbehaving: the mode is lowered, and the lowered mode is not reported.
    let report = if mode != asked && faults.lowered_unreported {
        ModeReport::Neither
    } else {
        ModeReport::Both
    };
    registry.put_mode(&live, mode, Some(client), report).await;
    Ok(json!({}))
}
