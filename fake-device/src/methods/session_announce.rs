//! `_lembas/session/announce`: the device tells a LLeMbas client of the session a person at
//! its terminal shares, when it is shared and again whenever a link comes up; what the client
//! taking it over hears next (the command list, the plan) follows the announce.

use harness::lembas::methods;
use harness::rules::{Misbehaviours, ids};
use serde_json::{Value, json};

use crate::events::Client;
use crate::open_session::State;
use crate::sessions::Sessions;

/// What a misbehaving device's announces get wrong; all off by default.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Faults {
    /// The announce has no `origin`.
    pub no_origin: bool,
    /// A terminal's session is announced as the service's.
    pub service_origin: bool,
    /// A new link is not told of the shared session again.
    pub not_again: bool,
    /// A new link hears of a made-up session in place of the shared one.
    pub other_id_again: bool,
}

impl Faults {
    /// The faults `m` asks for.
    pub(crate) fn of(m: &Misbehaviours) -> Faults {
        Faults {
            no_origin: m.breaks(ids::DEVICE_ANNOUNCE_SHAPE),
            service_origin: m.breaks_way(ids::DEVICE_ANNOUNCE_SHAPE, "wrong_origin"),
            not_again: m.breaks(ids::DEVICE_ANNOUNCE_RELINK),
            other_id_again: m.breaks_way(ids::DEVICE_ANNOUNCE_RELINK, "other_id"),
        }
    }
}

/// Announces the session a terminal shares to `client`, which the session reports to from
/// then on: the announce first, then what a client taking a session over hears.
pub(crate) async fn announce_to(sessions: &Sessions, faults: &Faults, client: &Client) {
    let registry = sessions.registry();
    let Some(id) = registry.terminal_session() else {
        return;
    };
    let Some(live) = registry.live_session(&id) else {
        return;
    };
    let mut state = live.state.lock().await;
    let params = announcement(faults, &id, &state);
    client
        .peer()
        .notify(methods::LEMBAS_SESSION_ANNOUNCE, params);
    registry.report_to(&mut state, client);
}

/// What `announce` says of a shared session.
fn announcement(faults: &Faults, id: &str, state: &State) -> Value {
    let mut params = json!({
        "sessionId": id,
        "cwd": state.stored.cwd.display().to_string(),
        "title": state.stored.title,
        "model": state.stored.model,
        "instance": state.stored.model.is_some(),
        "mode": state.stored.mode,
        "effort": state.stored.effort,
        "busy": state.running.is_some(),
        "origin": "terminal",
    });
    if faults.no_origin {
        params.as_object_mut().map(|p| p.remove("origin"));
    }
    if faults.service_origin {
        // Misbehaving: a terminal's session announced as the service's.
        params["origin"] = json!("service");
    }
    params
}

/// Misbehaving: the announce of a made-up terminal session working in `cwd`, which a new link
/// hears in place of the shared one.
pub(crate) fn made_up(cwd: &std::path::Path) -> Value {
    json!({
        "sessionId": crate::answers::fresh_id("ses_"),
        "cwd": cwd.display().to_string(),
        "title": "a terminal session",
        "model": null,
        "instance": false,
        "mode": "edit",
        "effort": "off",
        "busy": false,
        "origin": "terminal",
    })
}
