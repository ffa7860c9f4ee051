//! `session/new`: a session opened in a folder the limits allow, in the mode asked (lowered to
//! `max_mode`), on the model and effort asked or the device's defaults, with the client's
//! Context; and what follows its answer on the wire (the command list, the plan).

use std::path::PathBuf;

use harness::jsonrpc::{INTERNAL_ERROR, INVALID_PARAMS, RpcError};
use harness::lembas::methods;
use harness::rules::{Misbehaviours, ids};
use serde_json::{Value, json};

use super::call::Call;
use crate::answers::{Answer, fresh_id, param_str, refuse};
use crate::events::Client;
use crate::limits::{Limits, MODES};
use crate::model_ref;
use crate::registry::Registry;
use crate::sessions::Sessions;
use crate::store::{StoredSession, TurnLog};

/// The Context fields of `_meta.lembas`, with the capability that has the device read each.
const CONTEXT_FIELDS: [(&str, &str); 4] = [
    ("system_prompt", "context"),
    ("personalization", "context"),
    ("library", "library"),
    ("prototypes", "prototypes"),
];

/// What a misbehaving device's `session/new` gets wrong; all off by default.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Faults {
    /// A Context field of a capability the device did not list is refused as unknown.
    pub unlisted_context_refused: bool,
    /// The folder is judged by the limits the link's hello said, not by those of now.
    pub hello_limits: bool,
    /// The folder is judged by the current roots alone, as if remote work were on.
    pub remote_ignored: bool,
    /// A folder below a root, which the picker marks accepted, is refused.
    pub below_root_refused: bool,
    /// Any folder is opened, inside the limits or not.
    pub any_folder: bool,
    /// A folder outside the limits is refused as an internal error.
    pub outside_internal_error: bool,
    /// The asked mode is put as it is, above `max_mode` or not.
    pub mode_unlowered: bool,
    /// Every session opens at `max_mode`, a lower mode asked or not.
    pub mode_raised: bool,
    /// `_meta.lembas_model` is not read.
    pub lembas_model_ignored: bool,
    /// `_meta.lembas_model` is answered, and the session runs on the default.
    pub lembas_model_reported_only: bool,
    /// `_meta.model` is not read.
    pub own_model_ignored: bool,
    /// `_meta.model` is answered, and the session runs on the default.
    pub own_model_reported_only: bool,
    /// At protocol 1 a served id with a `/` is taken for a ref as it is.
    pub ref_unsplit: bool,
    /// At protocol 1 a served id with a `/` is split, its provider dropped.
    pub ref_split: bool,
    /// The protocol-1 form of a ref, the provider left out.
    pub ref_old_form: bool,
    /// The model's name alone for a ref.
    pub ref_bare: bool,
    /// Every session opens at one effort, whatever the client asked.
    pub effort_fixed: bool,
    /// The session's effort is left out of `_meta.lembas`.
    pub no_effort: bool,
    /// The answer has no `modes`.
    pub no_modes: bool,
    /// The session's mode is left out of `_meta.lembas`.
    pub no_mode: bool,
    /// An editor on stdio is told of the new session as LLeMbas would be.
    pub stdio_announced: bool,
    /// An update about a session the client never had follows the answer.
    pub ghost_update: bool,
    /// An event about a session the client never had follows the answer.
    pub ghost_event: bool,
    /// No command list follows the answer.
    pub no_commands_after: bool,
    /// What follows the answer goes before it.
    pub follow_up_first: bool,
}

impl Faults {
    /// The faults `m` asks for.
    pub(crate) fn of(m: &Misbehaviours) -> Faults {
        Faults {
            unlisted_context_refused: m.breaks(ids::DEVICE_CONTEXT_UNLISTED_IGNORED),
            hello_limits: m.breaks(ids::DEVICE_LIMITS_CURRENT),
            remote_ignored: m.breaks_way(ids::DEVICE_LIMITS_CURRENT, "remote_ignored"),
            below_root_refused: m.breaks_way(ids::DEVICE_DIRECTORIES_ACCEPTED, "refused_by_new"),
            any_folder: m.breaks(ids::DEVICE_SESSION_NEW_ROOTS),
            outside_internal_error: m.breaks_way(ids::DEVICE_SESSION_NEW_ROOTS, "other_code"),
            mode_unlowered: m.breaks(ids::DEVICE_SESSION_NEW_MODE),
            mode_raised: m.breaks_way(ids::DEVICE_SESSION_NEW_MODE, "raised"),
            lembas_model_ignored: m.breaks(ids::DEVICE_SESSION_NEW_LEMBAS_MODEL),
            lembas_model_reported_only: m
                .breaks_way(ids::DEVICE_SESSION_NEW_LEMBAS_MODEL, "reported_only"),
            own_model_ignored: m.breaks(ids::DEVICE_SESSION_NEW_OWN_MODEL),
            own_model_reported_only: m
                .breaks_way(ids::DEVICE_SESSION_NEW_OWN_MODEL, "reported_only"),
            ref_unsplit: m.breaks(ids::DEVICE_MODEL_REF_BARE),
            ref_split: m.breaks_way(ids::DEVICE_MODEL_REF_BARE, "split"),
            ref_old_form: m.breaks(ids::DEVICE_MODEL_REF_FORM),
            ref_bare: m.breaks_way(ids::DEVICE_MODEL_REF_FORM, "bare"),
            effort_fixed: m.breaks(ids::DEVICE_SESSION_NEW_EFFORT),
            no_effort: m.breaks_way(ids::DEVICE_SESSION_NEW_EFFORT, "no_effort"),
            no_modes: m.breaks(ids::DEVICE_SESSION_NEW_RESULT),
            no_mode: m.breaks_way(ids::DEVICE_SESSION_NEW_RESULT, "no_mode"),
            stdio_announced: m.breaks_way(ids::DEVICE_STDIO_PLAIN_ACP, "announces"),
            ghost_update: m.breaks(ids::DEVICE_UPDATE_SESSION),
            ghost_event: m.breaks_way(ids::DEVICE_UPDATE_SESSION, "event_ghost"),
            no_commands_after: m.breaks(ids::DEVICE_COMMANDS_AFTER_NEW),
            follow_up_first: m.breaks_way(ids::DEVICE_COMMANDS_AFTER_NEW, "before_answer"),
        }
    }
}

/// What `session/new` asks in `_meta`, each read only when it is a string.
#[derive(Debug, Clone, Copy, Default)]
struct Asked<'a> {
    mode: Option<&'a str>,
    lembas_model: Option<&'a str>,
    model: Option<&'a str>,
    effort: Option<&'a str>,
}

impl<'a> Asked<'a> {
    fn read(meta: Option<&'a Value>) -> Asked<'a> {
        let field = |key| meta.and_then(|m| m.get(key)).and_then(Value::as_str);
        Asked {
            mode: field("mode"),
            lembas_model: field("lembas_model"),
            model: field("model"),
            effort: field("effort"),
        }
    }
}

/// Misbehaving: a Context field of a capability the device did not list refused as an unknown
/// field (`session/new`, or `session/prompt` for the rule's second way).
pub(crate) fn unlisted_context_refused(registry: &Registry, params: &Value) -> Option<RpcError> {
    let context = params.pointer("/_meta/lembas")?.as_object()?;
    let (field, _) = CONTEXT_FIELDS
        .into_iter()
        .find(|(field, capability)| context.contains_key(*field) && !registry.has(capability))?;
    Some(RpcError::new(
        INVALID_PARAMS,
        format!("unknown field `_meta.lembas.{field}`"),
    ))
}

/// Answers `session/new`.
pub(crate) async fn answer(call: Call<'_>, faults: &Faults) -> Answer {
    let (sessions, params, client) = (call.sessions, call.params, call.client);
    let registry = sessions.registry();
    let (limits, cwd) = folder(registry, faults, param_str(params, "cwd")?)?;
    let meta = params.get("_meta");
    let asked = Asked::read(meta);
    let mode = mode(&limits, faults, asked.mode.unwrap_or("edit"))?;
    let connection = &registry.config.connection;
    let lembas_model = asked
        .lembas_model
        .filter(|_| !faults.lembas_model_ignored)
        .map(|name| served_ref(connection, client.protocol(), faults, name));
    let own_model = match asked.model.filter(|_| !faults.own_model_ignored) {
        Some(reference) => Some(sessions.own_ref(reference).await),
        None => None,
    };
    // Misbehaving: the model named is answered, and the session runs on the default.
    let reported_only = (lembas_model.is_some() && faults.lembas_model_reported_only)
        || (lembas_model.is_none() && own_model.is_some() && faults.own_model_reported_only);
    let model = lembas_model.or(own_model);
    let reported = model.clone();
    let model = if reported_only { None } else { model };
    // No model named: the session starts on the device's default, which it names.
    let model = match model {
        Some(model) => Some(model),
        None => sessions.default_model().await,
    };
    // Misbehaving: every session opens at one effort, whatever the client asked.
    let effort = match faults.effort_fixed {
        true => "medium".to_string(),
        false => asked.effort.unwrap_or("off").to_string(),
    };
    let stored = StoredSession {
        id: fresh_id("ses_"),
        cwd,
        title: String::new(),
        mode: mode.clone(),
        model: model.clone(),
        effort: effort.clone(),
        context: Value::Null,
        plan: None,
        messages: Vec::new(),
        given: true,
    };
    let live = sessions.spawn_live(stored, TurnLog::default());
    let mut state = live.state.lock().await;
    registry.read_context(meta, &mut state);
    state.client = Some(client.clone());
    state.reported_link = Some(client.peer().link());
    registry.save(&state);
    let model = if reported_only { reported } else { model };
    Ok(result(faults, &state.stored.id, &mode, model, &effort))
}

/// The limits the folder is judged by, and the folder itself once allowed.
fn folder(registry: &Registry, faults: &Faults, cwd: &str) -> Result<(Limits, PathBuf), RpcError> {
    let limits = registry.limits();
    // Misbehaving: judged by the limits the link's hello said, not by those of now.
    let mut limits = match registry.said_limits() {
        Some(said) if faults.hello_limits => said,
        _ => limits,
    };
    if faults.remote_ignored {
        // Misbehaving: a cwd judged by the current roots alone, as if remote work were on.
        limits.remote = true;
    }
    let cwd = match limits.check_cwd(cwd) {
        // Misbehaving: a folder below a root, which the picker marks accepted, is refused.
        Ok(path) if !limits.roots.contains(&path) && faults.below_root_refused => {
            return Err(refuse("only a root itself may be opened"));
        }
        Ok(path) => path,
        Err(_) if faults.any_folder => cwd.into(),
        // Misbehaving: refused, as an internal error rather than invalid params.
        Err(reason) if faults.outside_internal_error => {
            return Err(RpcError::new(INTERNAL_ERROR, reason));
        }
        Err(reason) => return Err(refuse(reason)),
    };
    Ok((limits, cwd))
}

/// The mode the session opens in: the asked one, lowered to `max_mode`.
fn mode(limits: &Limits, faults: &Faults, asked: &str) -> Result<String, RpcError> {
    let mode = limits
        .lower_mode(asked)
        .ok_or_else(|| refuse(format!("no mode `{asked}`")))?;
    // Misbehaving: the asked mode as it is, above `max_mode` or not.
    Ok(if faults.mode_unlowered {
        asked.to_string()
    } else if faults.mode_raised
        && let Some(max) = limits.lower_mode("edit")
    {
        // Misbehaving: every session opens at `max_mode`, a lower mode asked or not.
        max
    } else {
        mode
    })
}

/// The device's ref for the instance's served model `name` (`_meta.lembas_model`), as a
/// client speaking `protocol` names it.
fn served_ref(connection: &str, protocol: u8, faults: &Faults, name: &str) -> String {
    // Misbehaving: at protocol 1 a served id with a `/` is taken for a ref as it is.
    let provided = protocol >= 2 && name.contains('/');
    let model = name.split_once('/').map_or(name, |(_, model)| model);
    let old_with_slash = protocol == 1 && name.contains('/');
    if faults.ref_unsplit && old_with_slash {
        name.to_string()
    } else if old_with_slash && faults.ref_split {
        // Misbehaving: at protocol 1 an id with a `/` is split, its provider dropped.
        model_ref::of_served(connection, model)
    } else if provided && faults.ref_old_form {
        // Misbehaving: the protocol-1 form, the provider left out.
        format!("{connection}/{model}")
    } else if provided && faults.ref_bare {
        // Misbehaving: the model's name alone.
        model.to_string()
    } else {
        model_ref::of_served(connection, name)
    }
}

/// The answer: the session, its modes, and its model, mode and effort in `_meta.lembas`.
fn result(faults: &Faults, id: &str, mode: &str, model: Option<String>, effort: &str) -> Value {
    let mut result = json!({
        "sessionId": id,
        "_meta": { "lembas": { "model": model, "mode": mode, "effort": effort } },
    });
    let lembas = result
        .pointer_mut("/_meta/lembas")
        .and_then(Value::as_object_mut);
    if let Some(lembas) = lembas {
        // Misbehaving: the session's effort left out of `_meta.lembas`.
        if faults.no_effort {
            lembas.remove("effort");
        }
        // Misbehaving: the session's mode left out of `_meta.lembas`.
        if faults.no_mode {
            lembas.remove("mode");
        }
    }
    if !faults.no_modes {
        result["modes"] = json!({
            "currentModeId": mode,
            "availableModes": MODES.iter().map(|m| json!({ "id": m, "name": m })).collect::<Vec<_>>(),
        });
    }
    result
}

/// What follows `session/new`'s answer on the wire: the command list (capability `commands`)
/// and the plan, when the session has one.
pub(crate) async fn after(sessions: &Sessions, faults: &Faults, answer: &Answer, client: &Client) {
    let registry = sessions.registry();
    let Some(id) = answer
        .as_ref()
        .ok()
        .and_then(|a| a.get("sessionId"))
        .and_then(Value::as_str)
    else {
        return;
    };
    if registry.config.stdio && faults.stdio_announced {
        // Misbehaving: an editor is told of the new session as LLeMbas would be.
        client.peer().notify(
            methods::LEMBAS_SESSION_ANNOUNCE,
            json!({ "sessionId": id, "origin": "client" }),
        );
    }
    if faults.ghost_update {
        client.update("ses_ghost", json!({ "sessionUpdate": "agent_message_chunk", "content": { "type": "text", "text": "boo" } }));
    }
    if faults.ghost_event {
        // Misbehaving: an event about a session the client never had.
        client.event("ses_ghost", json!({ "type": "text", "text": "boo" }));
    }
    // Misbehaving: no command list follows the answer.
    if registry.sends_commands()
        && !faults.no_commands_after
        && let Some(live) = registry.live_session(id)
    {
        let project = live.state.lock().await.stored.cwd.clone();
        registry.send_commands(id, &project, client);
    }
}
