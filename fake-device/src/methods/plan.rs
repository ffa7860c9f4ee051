//! `_lembas/plan`: the card the device shows when its model calls `plan_submit`. The plan is
//! written for the record in the project whether or not anyone can be asked; a client that may
//! be asked gets the card, and its answer approves the plan in a mode (lowered to `max_mode`),
//! sends it back with feedback, or dismisses it. The answer is checked against the three the
//! spec allows.

use harness::finding::Finding;
use harness::jsonrpc::METHOD_NOT_FOUND;
use harness::lembas::methods;
use harness::rules::{Misbehaviours, ids};
use serde_json::{Value, json};

use super::card::{Asker, Card, outcome, wrong_answer};
use crate::completion::{ToolCall, ToolOutcome};
use crate::registry::ModeReport;
use crate::terminal_card::CardAnswer;

/// Where a plan is written when the model names no file of the project.
const PLAN_FILE: &str = "PLAN.md";

/// What the model is told when nobody can approve the plan.
const UNASKED: &str = "The plan is saved; nobody can approve it here, so stop now.";

/// The project file a `plan_submit` call's plan is written to: the `path` the model named when
/// it is inside the project, else [`PLAN_FILE`].
pub(crate) fn plan_path(arguments: &Value) -> String {
    arguments
        .get("path")
        .and_then(Value::as_str)
        .filter(|p| is_project_relative(p))
        .unwrap_or(PLAN_FILE)
        .to_string()
}

/// Whether `path` names a file inside the project: relative, and never climbing out of it.
fn is_project_relative(path: &str) -> bool {
    let path = std::path::Path::new(path);
    !path.as_os_str().is_empty()
        && path.components().all(|c| {
            matches!(
                c,
                std::path::Component::Normal(_) | std::path::Component::CurDir
            )
        })
}

/// What a misbehaving device gets wrong with its plans; all off by default.
#[derive(Debug, Clone, Copy, Default)]
struct Faults {
    /// No file for the card's plan.
    unwritten: bool,
    /// No file for a plan nobody can be asked about.
    unwritten_unasked: bool,
    /// The card's plan written under another name than the one it is known by.
    misplaced: bool,
    /// A plan nobody can be asked about written under another name.
    misplaced_unasked: bool,
    /// The mode asked, whatever `max_mode` allows.
    beyond_max_mode: bool,
    /// The session goes to manual whatever `max_mode` allows, told only by the `mode` event.
    manual_event_only: bool,
    /// An approval leaves the session in plan mode.
    unapproved: bool,
    /// The session goes on in another mode than the one approved.
    other_mode: bool,
    /// A revise answer takes the session out of plan mode.
    revise_leaves_plan: bool,
    /// The person's feedback never reaches the model.
    feedback_lost: bool,
}

impl Faults {
    fn of(m: &Misbehaviours) -> Faults {
        Faults {
            unwritten: m.breaks(ids::DEVICE_PLAN_CARD_FILE),
            unwritten_unasked: m.breaks(ids::DEVICE_PLAN_CARD_PLAIN_CLIENT),
            misplaced: m.breaks_way(ids::DEVICE_PLAN_CARD_FILE, "elsewhere"),
            misplaced_unasked: m.breaks_way(ids::DEVICE_PLAN_CARD_PLAIN_CLIENT, "elsewhere"),
            beyond_max_mode: m.breaks(ids::DEVICE_PLAN_CARD_BEYOND),
            manual_event_only: m.breaks_way(ids::DEVICE_PLAN_CARD_BEYOND, "manual_event_only"),
            unapproved: m.breaks(ids::DEVICE_PLAN_CARD_APPROVE),
            other_mode: m.breaks_way(ids::DEVICE_PLAN_CARD_APPROVE, "other_mode"),
            revise_leaves_plan: m.breaks_way(ids::DEVICE_PLAN_CARD_REVISE, "leaves_plan"),
            feedback_lost: m.breaks(ids::DEVICE_PLAN_CARD_REVISE),
        }
    }
}

/// The model's `plan_submit` call: the plan is written to its file, then shown as a card when
/// the client may be asked, and the answer decides the session's mode.
pub(crate) async fn submit(asker: &Asker<'_>, call: &ToolCall) -> ToolOutcome {
    let faults = Faults::of(&asker.registry.config.misbehave);
    let text = call
        .arguments
        .get("text")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    let path = plan_path(&call.arguments);
    let asks = asker.may_ask("plan");
    write_record(asker, &faults, asks, &path, &text).await;
    if !asks {
        return outcome(UNASKED, false);
    }
    let mut params = json!({
        "sessionId": asker.session_id,
        "toolCallId": call.id,
        "path": path,
        "text": text,
        "_meta": { "lembas": {} },
    });
    // With plan_state the card also carries the plan's structure, for LLeMbas to draw.
    if asker.registry.has("plan_state")
        && let Some(live) = asker.registry.live_session(asker.session_id)
        && let Some(plan) = live.state.lock().await.stored.plan.clone()
    {
        params["plan"] = plan;
    }
    let card = Card {
        method: methods::LEMBAS_PLAN,
        call_id: &call.id,
    };
    match asker.ask(card, params, at_terminal).await {
        Ok(Some(answer)) => read_answer(asker, &faults, &answer).await,
        Err(METHOD_NOT_FOUND) => {
            asker.refused();
            outcome(UNASKED, false)
        }
        _ => outcome("The plan was dismissed.", false),
    }
}

/// Writes the plan for the record in the project, asked or not (spec, `_lembas/plan`).
async fn write_record(asker: &Asker<'_>, faults: &Faults, asks: bool, path: &str, text: &str) {
    // Misbehaving: no file, for the card's plan or for one nobody can be asked about.
    let writes = match asks {
        true => !faults.unwritten,
        false => !faults.unwritten_unasked,
    };
    // Misbehaving: the plan is written, but under another name than the one it is known by.
    let misplaced = match asks {
        true => faults.misplaced,
        false => faults.misplaced_unasked,
    };
    if !writes {
        return;
    }
    let Some(live) = asker.registry.live_session(asker.session_id) else {
        return;
    };
    let file = if misplaced {
        live.state.lock().await.stored.cwd.join("misplaced-plan.md")
    } else {
        live.state.lock().await.stored.cwd.join(path)
    };
    let written = match file.parent() {
        Some(dir) => std::fs::create_dir_all(dir).and_then(|()| std::fs::write(&file, text)),
        None => std::fs::write(&file, text),
    };
    if let Err(e) = written {
        tracing::warn!("the plan file {} was not written: {e}", file.display());
    }
}

/// The plan card's answer, for the model and the session's mode.
async fn read_answer(asker: &Asker<'_>, faults: &Faults, answer: &Value) -> ToolOutcome {
    let feedback = answer.get("feedback").and_then(Value::as_str);
    match answer.get("outcome").and_then(Value::as_str) {
        Some("approve") => approved(asker, faults, answer).await,
        Some("revise") if faults.revise_leaves_plan => {
            // Misbehaving: a revise answer takes the session out of plan mode.
            if let Some(live) = asker.registry.live_session(asker.session_id) {
                asker
                    .registry
                    .change_mode(&live, "manual", Some(asker.client))
                    .await;
            }
            ToolOutcome {
                text: format!("Revise the plan: {}", feedback.unwrap_or("")),
                ran: true,
            }
        }
        Some("revise") => ToolOutcome {
            text: match feedback {
                // Misbehaving: the person's feedback never reaches the model.
                Some(_) if faults.feedback_lost => "Revise the plan.".into(),
                Some(feedback) => format!("Revise the plan: {feedback}"),
                None => "Revise the plan.".into(),
            },
            ran: true,
        },
        _ => outcome("The plan was dismissed.", false),
    }
}

/// An approved plan: the session goes on in the mode asked, lowered to `max_mode`; where even
/// `manual` is beyond it, nothing is decided.
async fn approved(asker: &Asker<'_>, faults: &Faults, answer: &Value) -> ToolOutcome {
    let registry = asker.registry;
    let client = asker.client;
    let asked = answer
        .get("mode")
        .and_then(Value::as_str)
        .unwrap_or("manual");
    let lowered = if faults.beyond_max_mode {
        // Misbehaving: the mode asked, whatever `max_mode` allows.
        Some(asked.to_string())
    } else {
        registry.limits().lower_mode(asked)
    };
    let live = registry.live_session(asker.session_id);
    if let Some(live) = &live
        && faults.manual_event_only
    {
        // Misbehaving: the session goes to manual whatever max_mode allows, told only by the
        // `mode` event.
        registry
            .put_mode(live, "manual", Some(client), ModeReport::EventOnly)
            .await;
        return outcome("The plan is approved; go on in manual mode.", true);
    }
    // Misbehaving: the session goes on in another mode than the one approved.
    let lowered = match lowered {
        Some(mode) if mode != "plan" && faults.other_mode => {
            Some(if mode == "edit" { "manual" } else { "edit" }.to_string())
        }
        lowered => lowered,
    };
    match (lowered, live) {
        // The session goes on in that mode, lowered to max_mode …
        (Some(mode), Some(live)) if mode != "plan" && !faults.unapproved => {
            let mode = if faults.beyond_max_mode {
                registry
                    .put_mode(&live, &mode, Some(client), ModeReport::Both)
                    .await;
                mode
            } else {
                registry.change_mode(&live, &mode, Some(client)).await
            };
            ToolOutcome {
                text: format!("The plan is approved; go on in {mode} mode."),
                ran: true,
            }
        }
        // … and where even `manual` is beyond it, nothing is decided.
        _ => outcome(
            "The plan is approved, but this device allows only planning here: stop and say so.",
            true,
        ),
    }
}

/// The plan answered at the terminal: approved in `edit`; denied, dismissed.
fn at_terminal(_params: &Value, answer: CardAnswer) -> Value {
    match answer {
        CardAnswer::Allow => json!({ "outcome": "approve", "mode": "edit" }),
        CardAnswer::Deny => json!({ "outcome": "dismissed" }),
    }
}

/// Checks the client's answer to a plan card: approved in `edit` or `manual`, sent back with
/// feedback, or dismissed.
pub(crate) fn check_answer(card: &Value, answer: &Value) -> Option<Finding> {
    let wrong = |why: String| Some(wrong_answer(methods::LEMBAS_PLAN, card, answer, why));
    let text = |v: Option<&Value>| v.and_then(Value::as_str).map(String::from);
    match text(answer.get("outcome")).as_deref() {
        Some("approve") => match text(answer.get("mode")).as_deref() {
            Some("edit") | Some("manual") => None,
            other => wrong(format!(
                "approves in mode {other:?}, not `edit` or `manual`"
            )),
        },
        Some("revise") if answer.get("feedback").is_some_and(Value::is_string) => None,
        Some("revise") => wrong("sends the plan back without `feedback`".into()),
        Some("dismissed") => None,
        _ => wrong("is not `approve`, `revise` or `dismissed`".into()),
    }
}
