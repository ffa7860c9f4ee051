//! `_lembas/question`: the card the device shows when its model calls `ask_user`. The model's
//! questions are shaped to the card's limits, the person's answer is read back for the model
//! (cut labels given whole, anything undefined a dismissal), and the answer is checked against
//! what the card offered.

use harness::finding::Finding;
use harness::jsonrpc::METHOD_NOT_FOUND;
use harness::lembas::methods;
use harness::rules::{Misbehaviours, ids};
use serde_json::{Value, json};

use super::card::{Asker, Card, outcome, wrong_answer};
use crate::completion::{ToolCall, ToolOutcome};
use crate::terminal_card::CardAnswer;

/// At most this many questions on one card, of at most this many options (spec, `_lembas/question`).
pub const MAX_QUESTIONS: usize = 4;
/// See [`MAX_QUESTIONS`].
pub const MAX_OPTIONS: usize = 6;
/// The longest option label a card shows.
pub const MAX_LABEL: usize = 240;

/// What a question gives the model when the device (misbehaving) ends the turn there, without
/// giving the model a tool result.
pub(crate) const TURN_STOPS: &str = "The turn stops here.";

/// What the model is told when nobody can be asked.
const NOBODY: &str = "Nobody can be asked here: go on with what you know.";

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

/// What a misbehaving device gets wrong in its questions; all off by default.
#[derive(Debug, Clone, Copy, Default)]
struct Faults {
    /// Nobody can be asked, and the turn ends without telling the model.
    model_untold: bool,
    /// The model's questions sent as it wrote them, unshaped.
    unshaped: bool,
    /// The model's first six options, the recommended one cut off.
    first_six: bool,
    /// An answer it cannot read ends the turn.
    unreadable_stops_turn: bool,
    /// How the answer is misread.
    reading: Reading,
}

impl Faults {
    fn of(m: &Misbehaviours) -> Faults {
        Faults {
            model_untold: m.breaks_way(ids::DEVICE_QUESTION_PROTOCOL, "model_untold"),
            unshaped: m.breaks(ids::DEVICE_QUESTION_SHAPE),
            first_six: m.breaks_way(ids::DEVICE_QUESTION_SHAPE, "first_six"),
            unreadable_stops_turn: m.breaks_way(ids::DEVICE_QUESTION_MALFORMED, "stops_turn"),
            reading: Reading {
                keeps_cut_labels: m.breaks(ids::DEVICE_QUESTION_CUT_LABEL),
                cut_is_other: m.breaks_way(ids::DEVICE_QUESTION_CUT_LABEL, "other_option"),
                first_only: m.breaks(ids::DEVICE_QUESTION_ANSWERS),
                unknown_is_answer: m.breaks(ids::DEVICE_QUESTION_MALFORMED),
                skipped_is_first: m.breaks_way(ids::DEVICE_QUESTION_ANSWERS, "skipped_chosen"),
                reversed: m.breaks_way(ids::DEVICE_QUESTION_ANSWERS, "reversed"),
            },
        }
    }
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

/// The model's `ask_user` call: the questions go to the client as a card, when it may be asked,
/// and its answer is read back for the model.
pub(crate) async fn ask_user(asker: &Asker<'_>, call: &ToolCall) -> ToolOutcome {
    let faults = Faults::of(&asker.registry.config.misbehave);
    if !asker.may_ask("ask") && faults.model_untold {
        // Misbehaving: nobody can be asked, and the turn ends without telling the model.
        return outcome(TURN_STOPS, false);
    }
    if !asker.may_ask("ask") {
        return outcome(NOBODY, false);
    }
    let mut params = json!({
        "sessionId": asker.session_id,
        "toolCallId": call.id,
        "questions": questions(&call.arguments, &faults),
        "_meta": { "lembas": {} },
    });
    if let Some(why) = call.arguments.get("why") {
        params["why"] = why.clone();
    }
    let card = Card {
        method: methods::LEMBAS_QUESTION,
        call_id: &call.id,
    };
    match asker.ask(card, params, at_terminal).await {
        Ok(Some(answer))
            if !matches!(
                answer.get("outcome").and_then(Value::as_str),
                Some("answered" | "dismissed")
            ) && faults.unreadable_stops_turn =>
        {
            // Misbehaving: an answer it cannot read ends the turn.
            outcome(TURN_STOPS, false)
        }
        Ok(Some(answer)) => ToolOutcome {
            text: read_answers(&answer, &call.arguments, faults.reading),
            // Anything but an answer reads as a dismissal.
            ran: answer.get("outcome").and_then(Value::as_str) == Some("answered"),
        },
        Ok(None) => outcome("The person did not answer in time (dismissed).", false),
        Err(METHOD_NOT_FOUND) => {
            asker.refused();
            outcome(NOBODY, false)
        }
        Err(_) => outcome("The question could not be asked (dismissed).", false),
    }
}

/// The card's questions, shaped from the model's `arguments`.
fn questions(arguments: &Value, faults: &Faults) -> Value {
    if faults.unshaped {
        return arguments.get("questions").cloned().unwrap_or(json!([]));
    }
    let mut questions = card_questions(arguments);
    if faults.first_six {
        // Misbehaving: the model's first six options, the recommended one cut off.
        let asked = arguments["questions"]
            .as_array()
            .cloned()
            .unwrap_or_default();
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
    }
    json!(questions)
}

/// The questions answered at the terminal: the first option of each (the recommended one, when
/// there is one); denied, dismissed.
fn at_terminal(params: &Value, answer: CardAnswer) -> Value {
    if answer == CardAnswer::Deny {
        return json!({ "outcome": "dismissed" });
    }
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

/// The labels of question `index`'s options as the model wrote them.
fn labels(asked: &Value, index: usize) -> impl Iterator<Item = &str> {
    asked
        .pointer(&format!("/questions/{index}/options"))
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|o| o.get("label").and_then(Value::as_str))
}

/// The whole label of the option a card showed cut: the model's own option of question
/// `index` whose label the card's starts (spec, `_lembas/question`: answered with the cut
/// label, the model is given the whole one).
fn whole_label(asked: &Value, index: usize, label: &str) -> String {
    let cut = label.chars().count() >= MAX_LABEL;
    labels(asked, index)
        .find(|whole| *whole == label || (cut && whole.starts_with(label)))
        .unwrap_or(label)
        .to_string()
}

/// A label of question `index`'s answer, as the model is given it.
fn given_label(asked: &Value, index: usize, label: &str, reading: Reading) -> String {
    if reading.keeps_cut_labels {
        return label.to_string();
    }
    let whole = whole_label(asked, index, label);
    if reading.cut_is_other && whole != label {
        // Misbehaving: a cut label read as another option of the question.
        return labels(asked, index)
            .find(|other| *other != whole)
            .unwrap_or(label)
            .to_string();
    }
    whole
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
                    .map(|l| given_label(asked, i, l, reading))
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

/// Checks the client's answer to a question card: one answer of a defined kind per question,
/// its labels among those the card offered.
pub(crate) fn check_answer(card: &Value, answer: &Value) -> Option<Finding> {
    let wrong = |why: String| Some(wrong_answer(methods::LEMBAS_QUESTION, card, answer, why));
    let text = |v: Option<&Value>| v.and_then(Value::as_str).map(String::from);
    let questions = card
        .get("questions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    match text(answer.get("outcome")).as_deref() {
        Some("dismissed") => return None,
        Some("answered") => {}
        _ => return wrong("is neither `answered` nor `dismissed`".into()),
    }
    let answers = answer
        .get("answers")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    if answers.len() != questions.len() {
        return wrong(format!(
            "has {} answers for {} questions",
            answers.len(),
            questions.len()
        ));
    }
    for (n, a) in answers.iter().enumerate() {
        match text(a.get("kind")).as_deref() {
            Some("options") => {
                let labels: Vec<&str> = labels(card, n).collect();
                let chosen = a.get("labels").and_then(Value::as_array);
                let Some(chosen) = chosen else {
                    return wrong(format!("answer {n} has no `labels`"));
                };
                // The card shows a label cut to 240 characters, and the client answers with
                // what it showed.
                let offered = |l: &str| {
                    labels
                        .iter()
                        .any(|x| *x == l || x.chars().take(MAX_LABEL).eq(l.chars()))
                };
                if let Some(bad) = chosen.iter().find(|l| !l.as_str().is_some_and(offered)) {
                    return wrong(format!(
                        "answer {n} chooses {bad}, which question {n} did not offer"
                    ));
                }
            }
            Some("custom") | Some("back") if a.get("text").is_some_and(Value::is_string) => {}
            Some("skipped") => {}
            other => {
                return wrong(format!(
                    "answer {n} has kind {other:?} (options, custom or back with a text, or skipped)"
                ));
            }
        }
    }
    None
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
