//! Cards: what the device asks the person through the client when its model calls a tool — an
//! approval before a command runs (`session/request_permission`), questions (`_lembas/question`)
//! and a plan (`_lembas/plan`). Questions and plans go only to a client that said LLeMbas at
//! protocol 2 or later; one that answers them with method-not-found is not asked again on that
//! link. A card not answered within the approval timeout is a denial (or a dismissal), and the
//! client is told to take it down (`_lembas/permission/settled`).

use harness::lembas::methods;
use std::time::Duration;

use harness::jsonrpc::{METHOD_NOT_FOUND, RequestError};
use harness::rules::ids;
use serde_json::{Value, json};

use crate::terminal_card::{CardAnswer, TerminalCard};
use tokio::sync::oneshot;

use crate::completion::{ToolCall, ToolOutcome};
use crate::events::Client;
use crate::plan::{EntryFaults, plan_entries_with, plan_update_with};
use crate::registry::Registry;

/// At most this many questions on one card, of at most this many options (spec, `_lembas/question`).
pub const MAX_QUESTIONS: usize = 4;
/// See [`MAX_QUESTIONS`].
pub const MAX_OPTIONS: usize = 6;
/// The longest option label a card shows.
pub const MAX_LABEL: usize = 240;

/// Shapes the model's questions for a card: at most four of at most six options, the
/// recommended option first, labels cut to 240 characters.
pub fn card_questions(arguments: &Value) -> Vec<Value> {
    let questions = arguments
        .get("questions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    questions
        .into_iter()
        .take(MAX_QUESTIONS)
        .map(|q| {
            let mut options: Vec<Value> = q
                .get("options")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            options.sort_by_key(|o| {
                !o.get("recommended")
                    .and_then(Value::as_bool)
                    .unwrap_or(false)
            });
            let options: Vec<Value> = options
                .into_iter()
                .take(MAX_OPTIONS)
                .map(|mut o| {
                    if let Some(label) = o.get("label").and_then(Value::as_str) {
                        let cut: String = label.chars().take(MAX_LABEL).collect();
                        o["label"] = json!(cut);
                    }
                    o
                })
                .collect();
            json!({
                "header": q.get("header").cloned().unwrap_or(json!("")),
                "question": q.get("question").cloned().unwrap_or(json!("")),
                "multiple": q.get("multiple").and_then(Value::as_bool).unwrap_or(false),
                "options": options,
            })
        })
        .collect()
}

/// How the device reads a question card's answer; each flag is a misbehaviour.
#[derive(Debug, Clone, Copy, Default)]
struct Reading {
    /// Gives the model the label as the card cut it, not the whole option.
    keeps_cut_labels: bool,
    /// Gives the model another option than the one whose label the card cut.
    cut_is_other: bool,
    /// Gives the model the first question's answer alone.
    first_only: bool,
    /// Reads an outcome the spec does not define as an empty answer.
    unknown_is_answer: bool,
    /// Gives a skipped question's first option as if the person chose it.
    skipped_is_first: bool,
    /// Gives the answers in the reverse of the questions' order.
    reversed: bool,
}

/// The whole label of the option a card showed cut: the model's own option of question
/// `index` whose label the card's starts (spec, `_lembas/question`: answered with the cut
/// label, the model is given the whole one).
fn whole_label(asked: &Value, index: usize, label: &str) -> String {
    let cut = label.chars().count() >= MAX_LABEL;
    asked
        .pointer(&format!("/questions/{index}/options"))
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|o| o.get("label").and_then(Value::as_str))
        .find(|whole| *whole == label || (cut && whole.starts_with(label)))
        .unwrap_or(label)
        .to_string()
}

/// Reads a question card's answer for the model, against the questions the model `asked`;
/// anything the spec does not define is a dismissal.
fn read_answers(answer: &Value, asked: &Value, reading: Reading) -> String {
    let outcome = answer.get("outcome").and_then(Value::as_str);
    let answered =
        outcome == Some("answered") || (reading.unknown_is_answer && outcome != Some("dismissed"));
    if !answered {
        return "The person dismissed the questions.".into();
    }
    let answers = answer
        .get("answers")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let kept = if reading.first_only { 1 } else { answers.len() };
    let mut said: Vec<String> = answers
        .iter()
        .take(kept)
        .enumerate()
        .map(|(i, a)| match a.get("kind").and_then(Value::as_str) {
            Some("options") => {
                let labels: Vec<String> = a
                    .get("labels")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_str)
                    .map(|l| {
                        if reading.keeps_cut_labels {
                            l.to_string()
                        } else if reading.cut_is_other && whole_label(asked, i, l) != l {
                            // Misbehaving: a cut label read as another option of the question.
                            let whole = whole_label(asked, i, l);
                            asked
                                .pointer(&format!("/questions/{i}/options"))
                                .and_then(Value::as_array)
                                .into_iter()
                                .flatten()
                                .filter_map(|o| o.get("label").and_then(Value::as_str))
                                .find(|other| *other != whole)
                                .unwrap_or(l)
                                .to_string()
                        } else {
                            whole_label(asked, i, l)
                        }
                    })
                    .collect();
                format!("chose {}", json!(labels))
            }
            Some("custom") => {
                format!("wrote {}", a.get("text").cloned().unwrap_or(json!("")))
            }
            Some("back") => {
                format!("asked back {}", a.get("text").cloned().unwrap_or(json!("")))
            }
            Some("skipped") if reading.skipped_is_first => {
                let first = asked.pointer(&format!("/questions/{i}/options/0/label"));
                format!("chose {}", json!([first]))
            }
            Some("skipped") => "left it blank (no answer)".into(),
            _ => "gave something unreadable (no answer)".into(),
        })
        .collect();
    if reading.reversed {
        said.reverse();
    }
    format!("The person answered: {}", said.join("; "))
}

/// A card's answer given at the terminal, as the client would have given it. Allowing: allow
/// once, the first option of each question (the recommended one, when there is one), approve
/// the plan in `edit`; denying: deny, or dismiss.
fn terminal_answer(method: &str, params: &Value, answer: CardAnswer) -> Value {
    if answer == CardAnswer::Deny {
        return match method {
            methods::SESSION_REQUEST_PERMISSION => {
                json!({ "outcome": { "outcome": "selected", "optionId": "deny" } })
            }
            _ => json!({ "outcome": "dismissed" }),
        };
    }
    match method {
        methods::LEMBAS_QUESTION => {
            let answers: Vec<Value> = params
                .get("questions")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .map(|q| {
                    let first = q.pointer("/options/0/label").cloned();
                    json!({ "kind": "options", "labels": first.into_iter().collect::<Vec<_>>() })
                })
                .collect();
            json!({ "outcome": "answered", "answers": answers })
        }
        methods::LEMBAS_PLAN => json!({ "outcome": "approve", "mode": "edit" }),
        _ => json!({ "outcome": { "outcome": "selected", "optionId": "once" } }),
    }
}

/// What a question gives the model when the device (misbehaving) ends the turn there, without
/// giving the model a tool result.
pub(crate) const TURN_STOPS: &str = "The turn stops here.";

/// Where a plan is written when the model names no file of the project.
const PLAN_FILE: &str = "PLAN.md";

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

/// The cards of the device's sessions, over its registry.
#[derive(Debug, Clone, Copy)]
pub struct Cards<'r> {
    registry: &'r Registry,
}

impl<'r> Cards<'r> {
    /// Cards over `registry`.
    pub fn new(registry: &'r Registry) -> Cards<'r> {
        Cards { registry }
    }

    /// One tool call, as the client sees it: its `tool_call` update and `tool_start` event, the
    /// card it needs, then its end (`tool_end`, or `tool_denied` when it did not run).
    pub(crate) async fn tool_step(
        &self,
        client: Option<&Client>,
        session_id: &str,
        call: &crate::completion::ToolCall,
    ) -> ToolOutcome {
        let Some(client) = client else {
            return ToolOutcome {
                text: "Nobody is there to approve it.".into(),
                ran: false,
            };
        };
        client.update(session_id, json!({ "sessionUpdate": "tool_call", "toolCallId": call.id, "title": call.name, "kind": "execute", "status": "pending", "rawInput": call.arguments }));
        client.event(session_id, json!({ "type": "tool_start", "id": call.id, "name": call.name, "args": call.arguments }));
        let outcome = self.run_tool(client, session_id, call).await;
        let status = if outcome.ran { "completed" } else { "failed" };
        client.update(session_id, json!({ "sessionUpdate": "tool_call_update", "toolCallId": call.id, "status": status, "content": [{ "type": "content", "content": { "type": "text", "text": outcome.text } }] }));
        let kind = if outcome.ran {
            "tool_end"
        } else {
            "tool_denied"
        };
        client.event(
            session_id,
            json!({ "type": kind, "id": call.id, "name": call.name, "output": outcome.text }),
        );
        outcome
    }

    /// Whether this client may be asked questions and plans now.
    pub(crate) fn may_ask(&self, client: &Client, capability: &str) -> bool {
        let asks_all = self.registry.breaks(ids::DEVICE_QUESTION_PROTOCOL);
        // Misbehaving: a client that refused a question still gets plans.
        let still_asked = capability == "plan"
            && self
                .registry
                .breaks_way(ids::DEVICE_QUESTION_DOWNGRADE, "plans_still");
        self.registry.has(capability)
            && (asks_all
                || (client.lembas() && client.protocol() >= 2 && (client.asks() || still_asked)))
    }

    /// Asks the client, waiting at most the approval timeout. `None`: no answer in time, and
    /// the card has been settled.
    ///
    /// In a session a terminal shares, the card is also shown at the terminal (`patient`), and
    /// the first answer wins: when the person there answers first (after
    /// `terminal_answers_after`), the client is told to take its card down.
    async fn ask(
        &self,
        client: &Client,
        session_id: &str,
        call_id: &str,
        method: &str,
        params: Value,
    ) -> Result<Option<Value>, i64> {
        let wait: Duration = self.registry.config.approval_timeout;
        // A cancelled turn stops waiting for its card too (and takes it down).
        let mut cancelled = match self.registry.live_session(session_id) {
            Some(live) => live
                .state
                .lock()
                .await
                .running
                .as_ref()
                .map(|r| r.cancelled()),
            None => None,
        };
        let on_cancel = async move {
            match &mut cancelled {
                Some(rx) => {
                    let _ = rx.wait_for(|c| *c).await;
                }
                None => std::future::pending::<()>().await,
            }
        };
        tokio::select! {
            asked = self.ask_or_terminal(client, session_id, call_id, method, params, wait) => asked,
            () = on_cancel => {
                if client.lembas() {
                    client.peer().notify(
                        methods::LEMBAS_PERMISSION_SETTLED,
                        json!({ "sessionId": session_id, "toolCallId": call_id }),
                    );
                }
                Ok(None)
            }
        }
    }

    /// [`Self::ask`], without the turn's cancel.
    async fn ask_or_terminal(
        &self,
        client: &Client,
        session_id: &str,
        call_id: &str,
        method: &str,
        mut params: Value,
        wait: Duration,
    ) -> Result<Option<Value>, i64> {
        let shared = self.registry.is_terminal_session(session_id);
        params["_meta"]["lembas"]["patient"] =
            json!(shared && !self.registry.breaks(ids::DEVICE_CARD_PATIENT));
        if shared && self.registry.breaks_way(ids::DEVICE_CARD_PATIENT, "absent") {
            // Misbehaving: the cards of a terminal-shared session say nothing of patience.
            if let Some(lembas) = params["_meta"]["lembas"].as_object_mut() {
                lembas.remove("patient");
            }
        }
        let answered = if shared {
            // Shown at the terminal too: the first answer wins.
            let (tx, at_terminal) = oneshot::channel();
            if let Ok(mut cards) = self.registry.terminal_cards.lock() {
                cards.push(TerminalCard {
                    call_id: call_id.to_string(),
                    answer: tx,
                });
            }
            let timer = self.registry.config.terminal_answers_after;
            let terminal = async move {
                match timer {
                    Some(after) => {
                        tokio::time::sleep(after).await;
                        Some(CardAnswer::Allow)
                    }
                    None => at_terminal.await.ok(),
                }
            };
            let peer = client.peer();
            let web = peer.request(method, params.clone(), wait);
            tokio::pin!(web);
            let first = tokio::select! {
                answered = &mut web => Ok(answered),
                Some(answer) = terminal => Err(answer),
            };
            // Misbehaving: a question or plan answered at the terminal first still waits for the
            // web card, whose later answer wins.
            let first = match first {
                Err(_)
                    if method != methods::SESSION_REQUEST_PERMISSION
                        && self.registry.breaks(ids::DEVICE_CARD_FIRST_WINS) =>
                {
                    Ok(web.await)
                }
                first => first,
            };
            if let Ok(mut cards) = self.registry.terminal_cards.lock() {
                cards.retain(|c| c.call_id != call_id);
            }
            match first {
                Ok(answered) => answered,
                Err(answer) => {
                    if client.lembas() && !self.registry.breaks(ids::DEVICE_CARD_SETTLED_TERMINAL) {
                        // Misbehaving: the settled names a toolCallId of no card.
                        let named = if self
                            .registry
                            .breaks_way(ids::DEVICE_CARD_SETTLED_TERMINAL, "other_call")
                        {
                            format!("{call_id}_other")
                        } else {
                            call_id.to_string()
                        };
                        client.peer().notify(
                            methods::LEMBAS_PERMISSION_SETTLED,
                            json!({ "sessionId": session_id, "toolCallId": named }),
                        );
                    }
                    if method != methods::SESSION_REQUEST_PERMISSION
                        && self
                            .registry
                            .breaks_way(ids::DEVICE_CARD_FIRST_WINS, "dropped")
                    {
                        // Misbehaving: the terminal's first answer is dropped; the model hears
                        // nobody answered.
                        return Ok(None);
                    }
                    return Ok(Some(terminal_answer(method, &params, answer)));
                }
            }
        } else {
            client.peer().request(method, params, wait).await
        };
        match answered {
            Ok(Ok(answer)) => Ok(Some(answer)),
            Ok(Err(error)) => Err(error.code),
            Err(RequestError::Timeout { .. }) => {
                // `_lembas` notifications are for a LLeMbas client only.
                // Misbehaving: questions and plans left up after the device stopped waiting.
                let keeps_card_up = method != methods::SESSION_REQUEST_PERMISSION
                    && self.registry.breaks(ids::DEVICE_QUESTION_TIMEOUT);
                if self.registry.breaks(ids::DEVICE_CARD_TIMEOUT)
                    || keeps_card_up
                    || !client.lembas()
                {
                    return Ok(None);
                }
                // Misbehaving: a question or plan's settled names another session.
                let session = if method != methods::SESSION_REQUEST_PERMISSION
                    && self
                        .registry
                        .breaks_way(ids::DEVICE_QUESTION_TIMEOUT, "other_session")
                {
                    format!("{session_id}_other")
                } else {
                    session_id.to_string()
                };
                client.peer().notify(
                    methods::LEMBAS_PERMISSION_SETTLED,
                    json!({ "sessionId": session, "toolCallId": call_id }),
                );
                Ok(None)
            }
            // A device's own cards go after initialize: its gate holds nothing.
            Err(RequestError::Closed { .. } | RequestError::Held { .. }) => Ok(None),
        }
    }

    /// Runs one tool call of the model, with the card it needs.
    pub(crate) async fn run_tool(
        &self,
        client: &Client,
        session_id: &str,
        call: &ToolCall,
    ) -> ToolOutcome {
        match call.name.as_str() {
            "ask_user" => self.question(client, session_id, call).await,
            "plan_submit" => self.plan(client, session_id, call).await,
            "plan_write" => self.write_plan(client, session_id, call).await,
            "library_search" => {
                crate::library::search_library(self.registry, session_id, call).await
            }
            _ => self.approve_and_run(client, session_id, call).await,
        }
    }

    async fn question(&self, client: &Client, session_id: &str, call: &ToolCall) -> ToolOutcome {
        if !self.may_ask(client, "ask")
            && self
                .registry
                .breaks_way(ids::DEVICE_QUESTION_PROTOCOL, "model_untold")
        {
            // Misbehaving: nobody can be asked, and the turn ends without telling the model.
            return ToolOutcome {
                text: TURN_STOPS.into(),
                ran: false,
            };
        }
        if !self.may_ask(client, "ask") {
            return ToolOutcome {
                text: "Nobody can be asked here: go on with what you know.".into(),
                ran: false,
            };
        }
        let mut params = json!({
            "sessionId": session_id,
            "toolCallId": call.id,
            "questions": if self.registry.breaks(ids::DEVICE_QUESTION_SHAPE) {
                call.arguments.get("questions").cloned().unwrap_or(json!([]))
            } else if self.registry.breaks_way(ids::DEVICE_QUESTION_SHAPE, "first_six") {
                // Misbehaving: the model's first six options, the recommended one cut off.
                let mut questions = card_questions(&call.arguments);
                let asked = call.arguments["questions"].as_array().cloned().unwrap_or_default();
                for (q, a) in questions.iter_mut().zip(asked) {
                    let options: Vec<Value> = a["options"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .take(MAX_OPTIONS)
                        .cloned()
                        .collect();
                    q["options"] = json!(options);
                }
                json!(questions)
            } else {
                json!(card_questions(&call.arguments))
            },
            "_meta": { "lembas": {} },
        });
        if let Some(why) = call.arguments.get("why") {
            params["why"] = why.clone();
        }
        match self
            .ask(
                client,
                session_id,
                &call.id,
                methods::LEMBAS_QUESTION,
                params,
            )
            .await
        {
            Ok(Some(answer))
                if !matches!(
                    answer.get("outcome").and_then(Value::as_str),
                    Some("answered" | "dismissed")
                ) && self
                    .registry
                    .breaks_way(ids::DEVICE_QUESTION_MALFORMED, "stops_turn") =>
            {
                // Misbehaving: an answer it cannot read ends the turn.
                ToolOutcome {
                    text: TURN_STOPS.into(),
                    ran: false,
                }
            }
            Ok(Some(answer)) => ToolOutcome {
                text: read_answers(
                    &answer,
                    &call.arguments,
                    Reading {
                        keeps_cut_labels: self.registry.breaks(ids::DEVICE_QUESTION_CUT_LABEL),
                        cut_is_other: self
                            .registry
                            .breaks_way(ids::DEVICE_QUESTION_CUT_LABEL, "other_option"),
                        first_only: self.registry.breaks(ids::DEVICE_QUESTION_ANSWERS),
                        unknown_is_answer: self.registry.breaks(ids::DEVICE_QUESTION_MALFORMED),
                        skipped_is_first: self
                            .registry
                            .breaks_way(ids::DEVICE_QUESTION_ANSWERS, "skipped_chosen"),
                        reversed: self
                            .registry
                            .breaks_way(ids::DEVICE_QUESTION_ANSWERS, "reversed"),
                    },
                ),
                // Anything but an answer reads as a dismissal.
                ran: answer.get("outcome").and_then(Value::as_str) == Some("answered"),
            },
            Ok(None) => ToolOutcome {
                text: "The person did not answer in time (dismissed).".into(),
                ran: false,
            },
            Err(METHOD_NOT_FOUND) => {
                // A client that does not know questions is treated as protocol 1 from now on.
                if !self.registry.breaks(ids::DEVICE_QUESTION_DOWNGRADE) {
                    client.stop_asking();
                }
                ToolOutcome {
                    text: "Nobody can be asked here: go on with what you know.".into(),
                    ran: false,
                }
            }
            Err(_) => ToolOutcome {
                text: "The question could not be asked (dismissed).".into(),
                ran: false,
            },
        }
    }

    async fn plan(&self, client: &Client, session_id: &str, call: &ToolCall) -> ToolOutcome {
        let text = call
            .arguments
            .get("text")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        let path = plan_path(&call.arguments);
        // The plan is written for the record in the project, asked or not (spec, `_lembas/plan`).
        // Misbehaving: no file, for the card's plan or for one nobody can be asked about.
        let asks = self.may_ask(client, "plan");
        let writes = if asks {
            !self.registry.breaks(ids::DEVICE_PLAN_CARD_FILE)
        } else {
            !self.registry.breaks(ids::DEVICE_PLAN_CARD_PLAIN_CLIENT)
        };
        // Misbehaving: the plan is written, but under another name than the one it is known by.
        let misplaced = if asks {
            self.registry
                .breaks_way(ids::DEVICE_PLAN_CARD_FILE, "elsewhere")
        } else {
            self.registry
                .breaks_way(ids::DEVICE_PLAN_CARD_PLAIN_CLIENT, "elsewhere")
        };
        if writes && let Some(live) = self.registry.live_session(session_id) {
            let file = if misplaced {
                live.state.lock().await.stored.cwd.join("misplaced-plan.md")
            } else {
                live.state.lock().await.stored.cwd.join(&path)
            };
            let written = match file.parent() {
                Some(dir) => {
                    std::fs::create_dir_all(dir).and_then(|()| std::fs::write(&file, &text))
                }
                None => std::fs::write(&file, &text),
            };
            if let Err(e) = written {
                tracing::warn!("the plan file {} was not written: {e}", file.display());
            }
        }
        if !asks {
            return ToolOutcome {
                text: "The plan is saved; nobody can approve it here, so stop now.".into(),
                ran: false,
            };
        }
        let mut params = json!({
            "sessionId": session_id,
            "toolCallId": call.id,
            "path": path,
            "text": text,
            "_meta": { "lembas": {} },
        });
        // With plan_state the card also carries the plan's structure, for LLeMbas to draw.
        if self.registry.has("plan_state")
            && let Some(live) = self.registry.live_session(session_id)
            && let Some(plan) = live.state.lock().await.stored.plan.clone()
        {
            params["plan"] = plan;
        }
        match self
            .ask(client, session_id, &call.id, methods::LEMBAS_PLAN, params)
            .await
        {
            Ok(Some(answer)) => match answer.get("outcome").and_then(Value::as_str) {
                Some("approve") => {
                    let asked = answer
                        .get("mode")
                        .and_then(Value::as_str)
                        .unwrap_or("manual");
                    let lowered = if self.registry.breaks(ids::DEVICE_PLAN_CARD_BEYOND) {
                        // Misbehaving: the mode asked, whatever `max_mode` allows.
                        Some(asked.to_string())
                    } else {
                        self.registry.limits().lower_mode(asked)
                    };
                    let approves = !self.registry.breaks(ids::DEVICE_PLAN_CARD_APPROVE);
                    let live = self.registry.live_session(session_id);
                    if let Some(live) = &live
                        && self
                            .registry
                            .breaks_way(ids::DEVICE_PLAN_CARD_BEYOND, "manual_event_only")
                    {
                        // Misbehaving: the session goes to manual whatever max_mode allows,
                        // told only by the `mode` event.
                        self.registry
                            .put_mode(
                                live,
                                "manual",
                                Some(client),
                                crate::registry::ModeReport::EventOnly,
                            )
                            .await;
                        return ToolOutcome {
                            text: "The plan is approved; go on in manual mode.".into(),
                            ran: true,
                        };
                    }
                    // Misbehaving: the session goes on in another mode than the one approved.
                    let lowered = match lowered {
                        Some(mode)
                            if mode != "plan"
                                && self
                                    .registry
                                    .breaks_way(ids::DEVICE_PLAN_CARD_APPROVE, "other_mode") =>
                        {
                            Some(if mode == "edit" { "manual" } else { "edit" }.to_string())
                        }
                        lowered => lowered,
                    };
                    match (lowered, live) {
                        // The session goes on in that mode, lowered to max_mode …
                        (Some(mode), Some(live)) if mode != "plan" && approves => {
                            let mode = if self.registry.breaks(ids::DEVICE_PLAN_CARD_BEYOND) {
                                self.registry
                                    .put_mode(&live, &mode, Some(client), crate::registry::ModeReport::Both)
                                    .await;
                                mode
                            } else {
                                self.registry.change_mode(&live, &mode, Some(client)).await
                            };
                            ToolOutcome {
                                text: format!("The plan is approved; go on in {mode} mode."),
                                ran: true,
                            }
                        }
                        // … and where even `manual` is beyond it, nothing is decided.
                        _ => ToolOutcome {
                            text: "The plan is approved, but this device allows only planning here: stop and say so.".into(),
                            ran: true,
                        },
                    }
                }
                Some("revise")
                    if self
                        .registry
                        .breaks_way(ids::DEVICE_PLAN_CARD_REVISE, "leaves_plan") =>
                {
                    // Misbehaving: a revise answer takes the session out of plan mode.
                    if let Some(live) = self.registry.live_session(session_id) {
                        self.registry
                            .change_mode(&live, "manual", Some(client))
                            .await;
                    }
                    ToolOutcome {
                        text: format!(
                            "Revise the plan: {}",
                            answer.get("feedback").and_then(Value::as_str).unwrap_or("")
                        ),
                        ran: true,
                    }
                }
                Some("revise") => ToolOutcome {
                    text: match answer.get("feedback").and_then(Value::as_str) {
                        // Misbehaving: the person's feedback never reaches the model.
                        Some(_) if self.registry.breaks(ids::DEVICE_PLAN_CARD_REVISE) => {
                            "Revise the plan.".into()
                        }
                        Some(feedback) => format!("Revise the plan: {feedback}"),
                        None => "Revise the plan.".into(),
                    },
                    ran: true,
                },
                _ => ToolOutcome {
                    text: "The plan was dismissed.".into(),
                    ran: false,
                },
            },
            Err(METHOD_NOT_FOUND) => {
                if !self.registry.breaks(ids::DEVICE_QUESTION_DOWNGRADE) {
                    client.stop_asking();
                }
                ToolOutcome {
                    text: "The plan is saved; nobody can approve it here, so stop now.".into(),
                    ran: false,
                }
            }
            _ => ToolOutcome {
                text: "The plan was dismissed.".into(),
                ran: false,
            },
        }
    }

    /// `plan_write`: the session's plan changes; the client hears it as the `plan` session update
    /// (ACP's flat entries, and with `plan_state` the structure) and a `plan` event.
    async fn write_plan(&self, client: &Client, session_id: &str, call: &ToolCall) -> ToolOutcome {
        let plan = call.arguments.get("plan").cloned().unwrap_or(Value::Null);
        let mut previous = Value::Null;
        if let Some(live) = self.registry.live_session(session_id) {
            let mut state = live.state.lock().await;
            previous = state.stored.plan.clone().unwrap_or(Value::Null);
            state.stored.plan = (!plan.is_null()).then(|| plan.clone());
            self.registry.save(&state);
        }
        let faults = EntryFaults {
            dropped_pending: self.registry.breaks(ids::DEVICE_PLAN_DROPPED_COMPLETED),
            phases_as_entries: self.registry.breaks(ids::DEVICE_PLAN_ENTRIES_MATCH),
        };
        let entries: Vec<Value> = plan_entries_with(&plan, faults);
        let structure = !self.registry.breaks(ids::DEVICE_PLAN_UPDATE);
        let plan_state = self.registry.has("plan_state");
        let mut update = plan_update_with(&plan, plan_state, faults);
        if self
            .registry
            .breaks_way(ids::DEVICE_PLAN_ENTRIES_MATCH, "task_missing")
            && let Some(entries) = update["entries"].as_array_mut()
        {
            // Misbehaving: the last task is left out of the entries.
            entries.pop();
        }
        if self
            .registry
            .breaks_way(ids::DEVICE_PLAN_DROPPED_COMPLETED, "left_out")
            && let Some(entries) = update["entries"].as_array_mut()
        {
            // Misbehaving: a dropped task does not appear in the entries at all.
            let dropped: Vec<&str> = plan["phases"]
                .as_array()
                .into_iter()
                .flatten()
                .flat_map(|p| p["tasks"].as_array().into_iter().flatten())
                .filter(|t| t["status"] == "dropped")
                .filter_map(|t| t["title"].as_str())
                .collect();
            entries.retain(|e| !dropped.iter().any(|d| e["content"] == *d));
        }
        if plan.is_null()
            && self
                .registry
                .breaks_way(ids::DEVICE_PLAN_CLEARED, "old_plan")
        {
            // Misbehaving: the update for a cleared plan repeats the plan it had.
            update = plan_update_with(&previous, plan_state, faults);
        }
        if self.registry.config.spec == harness::lembas::Spec::V1_0_0
            && self
                .registry
                .breaks_way(ids::DEVICE_PLAN_UPDATE_1_0, "empty")
        {
            // Misbehaving: the plan update at spec 1.0.0 lists no entries.
            update["entries"] = json!([]);
        }
        if plan_state {
            if !structure {
                update["_meta"]["lembas"]["plan"] = Value::Null;
            }
            // Misbehaving: the event carries the plan as it was before this change.
            let mut told = if self.registry.breaks(ids::DEVICE_EVENT_PLAN_MATCHES) {
                previous
            } else {
                plan.clone()
            };
            if self
                .registry
                .breaks_way(ids::DEVICE_EVENT_PLAN_MATCHES, "no_phases")
                && let Some(fields) = told.as_object_mut()
            {
                // Misbehaving: the event's plan has lost its phases.
                fields.remove("phases");
            }
            client.event(session_id, json!({ "type": "plan", "plan": told }));
        } else if self.registry.breaks(ids::DEVICE_EVENT_TODOS) {
            client.event(session_id, json!({ "type": "plan", "plan": plan }));
        } else if self.registry.config.spec == harness::lembas::Spec::V1_0_0 {
            // Spec 1.0.0 has no plan structure: the session's plan is its todo list, and the
            // event that carries it is `todos` (the same entries the `plan` update has).
            let todos = match self.registry.breaks_way(ids::DEVICE_EVENT_TODOS, "empty") {
                // Misbehaving: the todos event carries none of the plan's entries.
                true => Vec::new(),
                false => entries,
            };
            client.event(session_id, json!({ "type": "todos", "todos": todos }));
        }
        // Misbehaving: a cleared plan, or any plan at spec 1.0.0, is not told as an update.
        let silent = (plan.is_null() && self.registry.breaks(ids::DEVICE_PLAN_CLEARED))
            || (self.registry.config.spec == harness::lembas::Spec::V1_0_0
                && self.registry.breaks(ids::DEVICE_PLAN_UPDATE_1_0));
        if !silent {
            client.update(session_id, update);
        }
        ToolOutcome {
            text: "The plan is written.".into(),
            ran: true,
        }
    }

    async fn approve_and_run(
        &self,
        client: &Client,
        session_id: &str,
        call: &ToolCall,
    ) -> ToolOutcome {
        let command = call.arguments.get("command").and_then(Value::as_str);
        let title = match command {
            Some(command) => format!("Run `{command}`"),
            None => format!("Use {}", call.name),
        };
        let live = self.registry.live_session(session_id);
        // Allowed for this session already: it runs without asking again.
        if let (Some(live), Some(command)) = (&live, command)
            && live.state.lock().await.allowed.contains(command)
        {
            return ToolOutcome {
                text: format!("{title}: done (exit 0; allowed for this session)."),
                ran: true,
            };
        }
        if self.registry.breaks(ids::DEVICE_PERMISSION_ASK) {
            // Misbehaving: it runs without asking.
            return ToolOutcome {
                text: format!("{title}: done (exit 0)."),
                ran: true,
            };
        }
        let mut options = vec![
            json!({ "optionId": "once", "name": "Allow once", "kind": "allow_once" }),
            json!({ "optionId": "session", "name": "Allow for this session", "kind": "allow_always" }),
            json!({ "optionId": "deny", "name": "Deny", "kind": "reject_once" }),
        ];
        if self.registry.breaks(ids::DEVICE_PERMISSION_SHAPE) {
            options.pop();
        }
        if self
            .registry
            .breaks_way(ids::DEVICE_PERMISSION_SHAPE, "once_always")
        {
            // Misbehaving: the `once` option is labelled with the kind allow_always.
            options[0]["kind"] = json!("allow_always");
        }
        // Misbehaving: the card is put under another session's id than the command's.
        let card_session = if self
            .registry
            .breaks_way(ids::DEVICE_PERMISSION_ASK, "other_session")
        {
            format!("{session_id}-other")
        } else {
            session_id.to_string()
        };
        let params = json!({
            "sessionId": card_session,
            "toolCall": { "toolCallId": call.id, "title": title, "kind": "execute", "status": "pending", "rawInput": call.arguments },
            "options": options,
            "_meta": { "lembas": { "reason": "it runs a command in your project" } },
        });
        let answer = self
            .ask(
                client,
                session_id,
                &call.id,
                methods::SESSION_REQUEST_PERMISSION,
                params,
            )
            .await;
        if matches!(answer, Ok(None)) && self.registry.breaks_way(ids::DEVICE_CARD_TIMEOUT, "runs")
        {
            // Misbehaving: a card unanswered in time is read as allowed, and the tool runs.
            return ToolOutcome {
                text: format!("{title}: done (exit 0)."),
                ran: true,
            };
        }
        let answer = answer.ok().flatten().unwrap_or_default();
        let said = |key: &str| {
            answer
                .pointer(&format!("/_meta/lembas/{key}"))
                .and_then(Value::as_str)
                .map(String::from)
        };
        match answer.pointer("/outcome/optionId").and_then(Value::as_str) {
            // `once` may come with the command line corrected: that one runs.
            // Misbehaving: an allow with a corrected command line is taken for a denial.
            Some("once")
                if said("command").is_some()
                    && self
                        .registry
                        .breaks_way(ids::DEVICE_PERMISSION_CORRECTED, "as_denial") =>
            {
                ToolOutcome {
                    text: format!("{title}: denied by the person."),
                    ran: false,
                }
            }
            Some("once") => match said("command")
                .filter(|_| !self.registry.breaks(ids::DEVICE_PERMISSION_CORRECTED))
            {
                Some(corrected) => ToolOutcome {
                    text: format!(
                        "Ran `{corrected}` (the person corrected the command): done (exit 0)."
                    ),
                    ran: true,
                },
                None => ToolOutcome {
                    text: format!("{title}: done (exit 0)."),
                    ran: true,
                },
            },
            Some("session") => {
                if let (Some(live), Some(command)) = (&live, command) {
                    live.state.lock().await.allowed.insert(command.to_string());
                }
                ToolOutcome {
                    text: format!("{title}: done (exit 0)."),
                    ran: true,
                }
            }
            // Denied (perhaps saying why), cancelled, unanswered in time, or anything else.
            _ => ToolOutcome {
                text: match said("feedback")
                    .filter(|_| !self.registry.breaks(ids::DEVICE_PERMISSION_FEEDBACK))
                    .map(|why| {
                        if self
                            .registry
                            .breaks_way(ids::DEVICE_PERMISSION_FEEDBACK, "cut")
                        {
                            // Misbehaving: only the feedback's first eight characters are given.
                            why.chars().take(8).collect()
                        } else {
                            why
                        }
                    }) {
                    Some(why) => format!("{title}: denied by the person, who says: {why}"),
                    None => format!("{title}: denied by the person."),
                },
                ran: false,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cards_hold_at_most_four_questions_of_six_options_recommended_first_and_cut_labels() {
        let long = "x".repeat(300);
        let options: Vec<Value> = (0..8).map(|i| json!({"label": if i == 0 { long.clone() } else { format!("o{i}") }, "recommended": i == 5})).collect();
        let questions: Vec<Value> = (0..6)
            .map(|i| json!({"question": format!("q{i}"), "options": options}))
            .collect();
        let card = card_questions(&json!({"questions": questions}));
        assert_eq!(card.len(), MAX_QUESTIONS);
        let first = card[0]["options"].as_array().expect("options");
        assert_eq!(first.len(), MAX_OPTIONS);
        assert_eq!(first[0]["label"], "o5", "the recommended one first");
        assert_eq!(
            first[1]["label"].as_str().map(|l| l.chars().count()),
            Some(MAX_LABEL)
        );
    }

    #[test]
    fn answers_the_spec_does_not_define_read_as_dismissed() {
        let read = |answer: Value| read_answers(&answer, &json!({}), Reading::default());
        assert!(read(json!({"outcome": "answered", "answers": [{"kind": "options", "labels": ["SQLite"]}]})).contains("SQLite"));
        assert!(read(json!({"outcome": "whatever"})).contains("dismissed"));
        assert!(
            read(json!({"outcome": "answered", "answers": [{"kind": "nonsense"}]}))
                .contains("no answer")
        );
    }

    #[test]
    fn a_cut_label_is_given_to_the_model_whole() {
        let whole = format!("{}END", "x".repeat(300));
        let asked = json!({"questions": [{"options": [{"label": "short"}, {"label": whole}]}]});
        let cut: String = whole.chars().take(MAX_LABEL).collect();
        let answer =
            json!({"outcome": "answered", "answers": [{"kind": "options", "labels": [cut]}]});
        assert!(read_answers(&answer, &asked, Reading::default()).contains("END"));
    }
}
