//! `session/request_permission`: the approval the device asks before its model's command runs.
//! A command allowed for the session runs without asking again; otherwise the card offers allow
//! once, allow for this session and deny, and the answer decides whether it runs (as corrected,
//! when the person corrected the command line) or is denied (with the person's feedback). The
//! answer is checked against the options the card offered.

use harness::finding::Finding;
use harness::lembas::methods;
use harness::rules::{Misbehaviours, ids};
use serde_json::{Value, json};

use super::card::{Asker, Card, wrong_answer};
use crate::completion::{ToolCall, ToolOutcome};
use crate::terminal_card::CardAnswer;

/// What a misbehaving device gets wrong with its approvals; all off by default.
#[derive(Debug, Clone, Copy, Default)]
struct Faults {
    /// The command runs without asking.
    unasked: bool,
    /// The card is put under another session's id than the command's.
    other_session: bool,
    /// The card offers no `deny`.
    no_deny: bool,
    /// The `once` option is labelled with the kind allow_always.
    once_always: bool,
    /// A card unanswered in time is read as allowed, and the tool runs.
    timeout_runs: bool,
    /// An allow with a corrected command line is taken for a denial.
    corrected_as_denial: bool,
    /// The command runs as the model wrote it, not as the person corrected it.
    correction_ignored: bool,
    /// A denial's feedback never reaches the model.
    feedback_lost: bool,
    /// Only the feedback's first eight characters are given.
    feedback_cut: bool,
}

impl Faults {
    fn of(m: &Misbehaviours) -> Faults {
        Faults {
            unasked: m.breaks(ids::DEVICE_PERMISSION_ASK),
            other_session: m.breaks_way(ids::DEVICE_PERMISSION_ASK, "other_session"),
            no_deny: m.breaks(ids::DEVICE_PERMISSION_SHAPE),
            once_always: m.breaks_way(ids::DEVICE_PERMISSION_SHAPE, "once_always"),
            timeout_runs: m.breaks_way(ids::DEVICE_CARD_TIMEOUT, "runs"),
            corrected_as_denial: m.breaks_way(ids::DEVICE_PERMISSION_CORRECTED, "as_denial"),
            correction_ignored: m.breaks(ids::DEVICE_PERMISSION_CORRECTED),
            feedback_lost: m.breaks(ids::DEVICE_PERMISSION_FEEDBACK),
            feedback_cut: m.breaks_way(ids::DEVICE_PERMISSION_FEEDBACK, "cut"),
        }
    }
}

/// Any other tool of the model: it runs when the person allows it.
pub(crate) async fn approve_and_run(asker: &Asker<'_>, call: &ToolCall) -> ToolOutcome {
    let faults = Faults::of(&asker.registry.config.misbehave);
    let command = call.arguments.get("command").and_then(Value::as_str);
    let title = match command {
        Some(command) => format!("Run `{command}`"),
        None => format!("Use {}", call.name),
    };
    let done = ToolOutcome {
        text: format!("{title}: done (exit 0)."),
        ran: true,
    };
    let live = asker.registry.live_session(asker.session_id);
    // Allowed for this session already: it runs without asking again.
    if let (Some(live), Some(command)) = (&live, command)
        && live.state.lock().await.allowed.contains(command)
    {
        return ToolOutcome {
            text: format!("{title}: done (exit 0; allowed for this session)."),
            ran: true,
        };
    }
    if faults.unasked {
        // Misbehaving: it runs without asking.
        return done;
    }
    let params = card_params(&faults, asker.session_id, call, &title);
    let card = Card {
        method: methods::SESSION_REQUEST_PERMISSION,
        call_id: &call.id,
    };
    let answer = asker.ask(card, params, at_terminal).await;
    if matches!(answer, Ok(None)) && faults.timeout_runs {
        // Misbehaving: a card unanswered in time is read as allowed, and the tool runs.
        return done;
    }
    let answer = answer.ok().flatten().unwrap_or_default();
    let said = |key: &str| {
        answer
            .pointer(&format!("/_meta/lembas/{key}"))
            .and_then(Value::as_str)
            .map(String::from)
    };
    let denied = |text: String| ToolOutcome { text, ran: false };
    match answer.pointer("/outcome/optionId").and_then(Value::as_str) {
        // `once` may come with the command line corrected: that one runs.
        // Misbehaving: an allow with a corrected command line is taken for a denial.
        Some("once") if said("command").is_some() && faults.corrected_as_denial => {
            denied(format!("{title}: denied by the person."))
        }
        Some("once") => match said("command").filter(|_| !faults.correction_ignored) {
            Some(corrected) => ToolOutcome {
                text: format!(
                    "Ran `{corrected}` (the person corrected the command): done (exit 0)."
                ),
                ran: true,
            },
            None => done,
        },
        Some("session") => {
            if let (Some(live), Some(command)) = (&live, command) {
                live.state.lock().await.allowed.insert(command.to_string());
            }
            done
        }
        // Denied (perhaps saying why), cancelled, unanswered in time, or anything else.
        _ => denied(match feedback(&faults, said("feedback")) {
            Some(why) => format!("{title}: denied by the person, who says: {why}"),
            None => format!("{title}: denied by the person."),
        }),
    }
}

/// The approval card of tool call `call`, shown as `title`.
fn card_params(faults: &Faults, session_id: &str, call: &ToolCall, title: &str) -> Value {
    let mut options = vec![
        json!({ "optionId": "once", "name": "Allow once", "kind": "allow_once" }),
        json!({ "optionId": "session", "name": "Allow for this session", "kind": "allow_always" }),
        json!({ "optionId": "deny", "name": "Deny", "kind": "reject_once" }),
    ];
    if faults.no_deny {
        options.pop();
    }
    if faults.once_always {
        // Misbehaving: the `once` option is labelled with the kind allow_always.
        options[0]["kind"] = json!("allow_always");
    }
    // Misbehaving: the card is put under another session's id than the command's.
    let card_session = match faults.other_session {
        true => format!("{session_id}-other"),
        false => session_id.to_string(),
    };
    json!({
        "sessionId": card_session,
        "toolCall": { "toolCallId": call.id, "title": title, "kind": "execute", "status": "pending", "rawInput": call.arguments },
        "options": options,
        "_meta": { "lembas": { "reason": "it runs a command in your project" } },
    })
}

/// The feedback of a denial, as the model is given it.
fn feedback(faults: &Faults, said: Option<String>) -> Option<String> {
    let why = said.filter(|_| !faults.feedback_lost)?;
    if faults.feedback_cut {
        // Misbehaving: only the feedback's first eight characters are given.
        return Some(why.chars().take(8).collect());
    }
    Some(why)
}

/// The approval answered at the terminal: allow once, or deny.
fn at_terminal(_params: &Value, answer: CardAnswer) -> Value {
    let option = match answer {
        CardAnswer::Allow => "once",
        CardAnswer::Deny => "deny",
    };
    json!({ "outcome": { "outcome": "selected", "optionId": option } })
}

/// Checks the client's answer to an approval: an option the card offered, or cancelled.
pub(crate) fn check_answer(card: &Value, answer: &Value) -> Option<Finding> {
    let wrong = |why: String| {
        Some(wrong_answer(
            methods::SESSION_REQUEST_PERMISSION,
            card,
            answer,
            why,
        ))
    };
    let text = |v: Option<&Value>| v.and_then(Value::as_str).map(String::from);
    let offered: Vec<String> = card
        .get("options")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|o| text(o.get("optionId")))
        .collect();
    match text(answer.pointer("/outcome/outcome")).as_deref() {
        Some("cancelled") => None,
        Some("selected") => match text(answer.pointer("/outcome/optionId")) {
            Some(id) if offered.contains(&id) => None,
            Some(id) => wrong(format!(
                "chooses `{id}`, which the card did not offer ({})",
                offered.join(", ")
            )),
            None => wrong("selects no optionId".into()),
        },
        _ => wrong("is neither `selected` nor `cancelled`".into()),
    }
}
