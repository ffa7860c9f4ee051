//! `_lembas/configure`: a session's model and/or effort changed between prompts, answered as
//! they now are, and told to a LLeMbas client as a `model` event (capability `model`).

use harness::jsonrpc::RpcError;
use harness::rules::{Misbehaviours, ids};
use serde_json::{Value, json};

use super::call::Call;
use crate::answers::{Answer, refuse};
use crate::model_ref;

/// The effort a configure that names only the model falls back to, when misbehaving.
const RESET_EFFORT: &str = "medium";

/// What a misbehaving device's configure gets wrong; all off by default.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Faults {
    /// A configure of the model alone puts the effort back to a default.
    pub effort_reset: bool,
    /// A configure of the effort alone puts the model back to the default.
    pub model_reset: bool,
    /// The answer names the new model, but the session stays on its old one.
    pub unapplied: bool,
    /// The session moves, but the answer names the model it had before.
    pub old_answer: bool,
    /// No `model` event tells of the change.
    pub no_event: bool,
    /// The event names the model the session had before.
    pub event_old_model: bool,
    /// The event's `instance` says the opposite of where the model is served.
    pub instance_flipped: bool,
    /// The event's `instance` is true through a connection that is not this instance.
    pub other_connection: bool,
    /// The answer is empty.
    pub empty_result: bool,
    /// The answer has no effort.
    pub no_effort: bool,
}

impl Faults {
    /// The faults `m` asks for.
    pub(crate) fn of(m: &Misbehaviours) -> Faults {
        Faults {
            effort_reset: m.breaks(ids::DEVICE_CONFIGURE_PARTIAL),
            model_reset: m.breaks_way(ids::DEVICE_CONFIGURE_PARTIAL, "model_reset"),
            unapplied: m.breaks(ids::DEVICE_CONFIGURE_APPLIES),
            old_answer: m.breaks_way(ids::DEVICE_CONFIGURE_APPLIES, "old_answer"),
            no_event: m.breaks(ids::DEVICE_CONFIGURE_MODEL_EVENT),
            event_old_model: m.breaks_way(ids::DEVICE_CONFIGURE_MODEL_EVENT, "old_model"),
            instance_flipped: m.breaks(ids::DEVICE_EVENT_MODEL_INSTANCE),
            other_connection: m.breaks_way(ids::DEVICE_EVENT_MODEL_INSTANCE, "other_connection"),
            empty_result: m.breaks(ids::DEVICE_CONFIGURE_RESULT),
            no_effort: m.breaks_way(ids::DEVICE_CONFIGURE_RESULT, "no_effort"),
        }
    }
}

/// Answers `_lembas/configure`: sets the session's model (the instance's served name) and/or
/// its effort.
pub(crate) async fn answer(call: Call<'_>, faults: &Faults) -> Answer {
    let (sessions, params, client) = (call.sessions, call.params, call.client);
    let registry = sessions.registry();
    let asked_model = optional_str(params, "model")?;
    let asked_effort = optional_str(params, "effort")?;
    let live = sessions.session(params).await?;
    // A session opened from an older store may have no model yet: it is on the default.
    let fallback = if asked_model.is_none() && live.state.lock().await.stored.model.is_none() {
        sessions.default_model().await
    } else {
        None
    };
    // Misbehaving: a configure of the effort alone puts the model back to the default.
    let reset = match asked_model.is_none() && asked_effort.is_some() && faults.model_reset {
        true => sessions.default_model().await,
        false => None,
    };
    let mut state = live.state.lock().await;
    // The spec has configure sent between prompts; a turn keeps the model it started on.
    if state.running.is_some() {
        return Err(refuse(
            "the session is working: configure it between prompts",
        ));
    }
    let connection = &registry.config.connection;
    let before = (state.stored.model.clone(), state.stored.effort.clone());
    let model = match asked_model {
        Some(name) => Some(model_ref::of_served(connection, name)),
        None => reset.or_else(|| state.stored.model.clone()).or(fallback),
    };
    let effort = match asked_effort {
        Some(effort) => effort.to_string(),
        None if asked_model.is_some() && faults.effort_reset => RESET_EFFORT.to_string(),
        None => state.stored.effort.clone(),
    };
    // Misbehaving: the answer names the new model, but the session stays on its old one.
    if asked_model.is_none() || !faults.unapplied {
        state.stored.model = model.clone();
    }
    state.stored.effort = effort.clone();
    registry.save(&state);
    let changed = (model.clone(), effort.clone()) != before;
    if changed
        && registry.has("model")
        && !faults.no_event
        && let Some(reference) = &model
    {
        let mut event = model_ref::event(connection, reference, &effort);
        if faults.event_old_model
            && let Some(old) = &before.0
        {
            // Misbehaving: the event names the model the session had before.
            event = model_ref::event(connection, old, &effort);
        }
        if faults.instance_flipped {
            // Misbehaving: `instance` says the opposite of where the model is served.
            event["instance"] = json!(event["instance"] != json!(true));
        }
        if faults.other_connection {
            // Misbehaving: `instance` true through a connection that is not this instance.
            event["connection"] = json!("elsewhere");
            event["instance"] = json!(true);
        }
        client.event(&state.stored.id, event);
    }
    if faults.empty_result {
        return Ok(json!({}));
    }
    if faults.no_effort {
        return Ok(json!({ "model": model }));
    }
    if faults.old_answer && asked_model.is_some() {
        // Misbehaving: the session moves, but the answer names the model it had before.
        return Ok(json!({ "model": before.0, "effort": effort }));
    }
    Ok(json!({ "model": model, "effort": effort }))
}

/// An optional string param: absent or `null` is none; any other type is refused.
fn optional_str<'a>(params: &'a Value, key: &str) -> Result<Option<&'a str>, RpcError> {
    match params.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(text)) => Ok(Some(text)),
        Some(other) => Err(refuse(format!("`{key}` must be a string, not {other}"))),
    }
}
