//! The run's sequence diagram, drawn here as SVG so the page shows it with scripts off too.
//! The journal's entries become rows first (an arrow, a link's opening or end, the failing
//! step's mark), then each row is drawn at its height.

use std::collections::HashMap;
use std::fmt::Write as _;

use serde_json::Value;

use super::escape::esc;
use super::run_page::RunPage;
use crate::engine::StepVerdict;
use crate::journal::{Direction, Entry};

/// The lanes' x positions.
const DOUBLE_X: f64 = 150.0;
const PEER_X: f64 = 520.0;
const HTTP_X: f64 = 760.0;
const ROW: f64 = 26.0;
const TOP: f64 = 50.0;

/// What a journal entry is, for the diagram.
enum Row<'a> {
    Message(Arrow<'a>),
    Open(u32),
    Close(String),
    Failing(String),
}

/// A message's arrow.
struct Arrow<'a> {
    entry: &'a Entry,
    label: String,
    /// The row of the request it answers.
    answer_to: Option<usize>,
    error: bool,
}

/// The row of each request, by link, direction and id, with its method: its answer joins it.
type Requests = HashMap<(u32, bool, String), (usize, String)>;

/// The diagram of `run`'s messages, with the `failing` step marked where it ended. Each
/// arrow's message goes into `messages`, for the panel a click on it opens.
pub(super) fn diagram<'a>(
    out: &mut String,
    run: &RunPage<'a>,
    failing: Option<&StepVerdict>,
    messages: &mut Vec<Value>,
) {
    let http = run.entries.iter().any(|e| e.link == 0);
    let peer_name = if run.double == "fake-instance" {
        "device under test"
    } else {
        "instance under test"
    };
    let rows = rows_of(run, failing);
    let width = if http { HTTP_X + 140.0 } else { PEER_X + 160.0 };
    let height = TOP + ROW * (rows.len() as f64 + 1.0);
    let _ = writeln!(
        out,
        "<svg class=\"sequence\" width=\"{width}\" height=\"{height}\" viewBox=\"0 0 {width} {height}\" xmlns=\"http://www.w3.org/2000/svg\">"
    );
    let _ = writeln!(
        out,
        "<defs><marker id=\"head\" viewBox=\"0 0 10 10\" refX=\"9\" refY=\"5\" markerWidth=\"7\" markerHeight=\"7\" orient=\"auto-start-reverse\"><path d=\"M0,0 L10,5 L0,10 z\" fill=\"context-stroke\"/></marker></defs>"
    );
    let mut lanes = vec![(DOUBLE_X, run.double), (PEER_X, peer_name)];
    if http {
        lanes.push((HTTP_X, "HTTP (the device's requests)"));
    }
    for (x, name) in &lanes {
        let _ = writeln!(
            out,
            "<text class=\"lane-name\" x=\"{x}\" y=\"20\" text-anchor=\"middle\">{}</text><line class=\"lane\" x1=\"{x}\" y1=\"28\" x2=\"{x}\" y2=\"{height}\"/>",
            esc(name)
        );
    }
    for (i, row) in rows.iter().enumerate() {
        let y = TOP + ROW * i as f64;
        match row {
            Row::Message(arrow) => draw_arrow(out, y, arrow, messages),
            Row::Open(link) => {
                let text = if *link > 1 {
                    format!("redial: link {link} opens")
                } else {
                    format!("link {link} opens")
                };
                draw_across(out, "segment", y, &text);
            }
            Row::Close(text) => draw_across(out, "close", y, text),
            Row::Failing(index) => draw_failing(out, y, width, index),
        }
    }
    let _ = writeln!(out, "</svg>");
}

/// The rows of `run`'s entries, in order, with the `failing` step's mark after the last entry
/// before the step ended (or last).
fn rows_of<'a>(run: &RunPage<'a>, failing: Option<&StepVerdict>) -> Vec<Row<'a>> {
    let mut rows: Vec<Row<'a>> = Vec::new();
    let mut requests: Requests = Default::default();
    let failing_at = failing.map(|s| s.started_ms + s.elapsed_ms);
    let mut marked = false;
    for entry in run.entries {
        if let (Some(at), false) = (failing_at, marked)
            && entry.t_ms > at
        {
            rows.push(Row::Failing(
                failing.map(|s| s.index.clone()).unwrap_or_default(),
            ));
            marked = true;
        }
        match entry.dir {
            Direction::Event => rows.extend(event_row(entry, run.double)),
            Direction::In | Direction::Out => {
                let row = message_row(entry, rows.len(), &mut requests);
                rows.push(row);
            }
        }
    }
    if let (Some(step), false) = (failing, marked) {
        rows.push(Row::Failing(step.index.clone()));
    }
    rows
}

/// The row of a link's event: its opening or its end (none for the others).
fn event_row<'a>(entry: &Entry, double: &str) -> Option<Row<'a>> {
    match entry.msg.get("event").and_then(Value::as_str) {
        Some("open") => Some(Row::Open(entry.link)),
        Some("closed") | Some("close_sent") => {
            let code = entry
                .msg
                .get("code")
                .map(|c| c.to_string())
                .unwrap_or_default();
            let reason = entry
                .msg
                .get("reason")
                .and_then(Value::as_str)
                .unwrap_or("");
            let who = if entry.msg["event"] == "close_sent" {
                double
            } else {
                "peer"
            };
            Some(Row::Close(format!(
                "link {} closed by {who}: {code} {reason}",
                entry.link
            )))
        }
        // The link faults a scenario injects, so the diagram shows why the peer did
        // what came next.
        Some("dropped") => Some(Row::Close(format!(
            "link {} dropped by {} (no close frame)",
            entry.link, double
        ))),
        Some("half_closed") => Some(Row::Close(format!(
            "link {} half-closed by {}: it sends nothing more, and still reads",
            entry.link, double
        ))),
        Some("stalled") => Some(Row::Close(format!(
            "link {} stalled by {} for {} ms",
            entry.link, double, entry.msg["ms"]
        ))),
        _ => None,
    }
}

/// The row of a message, number `row`: labelled with its method, or, for an answer, with its
/// request's (whose row it joins; a request is noted in `requests` for its answer to find).
fn message_row<'a>(entry: &'a Entry, row: usize, requests: &mut Requests) -> Row<'a> {
    let incoming = entry.dir == Direction::In;
    let msg = &entry.msg;
    let id = msg.get("id").map(|v| v.to_string());
    let method = msg.get("method").and_then(Value::as_str);
    let (label, answer_to) = match (method, &id) {
        (Some(method), Some(id)) => {
            requests.insert((entry.link, incoming, id.clone()), (row, method.into()));
            (method.to_string(), None)
        }
        (Some(method), None) => (method.to_string(), None),
        (None, Some(id)) => match requests.get(&(entry.link, !incoming, id.clone())) {
            Some((at, method)) => (format!("↩ {method}"), Some(*at)),
            None => (format!("↩ answer {id}"), None),
        },
        // An lvmh frame is named by its `type`.
        (None, None) => match msg.get("type").and_then(Value::as_str) {
            Some(kind) => (kind.to_string(), None),
            None => ("(not JSON-RPC)".into(), None),
        },
    };
    Row::Message(Arrow {
        entry,
        label,
        answer_to,
        error: msg.get("error").is_some(),
    })
}

/// A message's arrow at height `y`, its time and link in the margin; an answer's with the bar
/// joining it to its request.
fn draw_arrow(out: &mut String, y: f64, arrow: &Arrow<'_>, messages: &mut Vec<Value>) {
    let Arrow {
        entry,
        label,
        answer_to,
        error,
    } = arrow;
    let peer_x = if entry.link == 0 { HTTP_X } else { PEER_X };
    let (from, to) = if entry.dir == Direction::In {
        (peer_x, DOUBLE_X)
    } else {
        (DOUBLE_X, peer_x)
    };
    let mut class = String::from("arrow");
    if answer_to.is_some() || label.starts_with('↩') {
        class.push_str(" answer");
    }
    if *error {
        class.push_str(" error");
    }
    if let Some(at) = answer_to {
        // The answering lane holds the request from its arrival to its answer.
        let top = TOP + ROW * *at as f64;
        let _ = writeln!(
            out,
            "<rect class=\"activation\" x=\"{}\" y=\"{top}\" width=\"6\" height=\"{}\"/>",
            from - 3.0,
            y - top
        );
    }
    let index = messages.len();
    messages.push(clip_strings(&entry.msg));
    let _ = writeln!(
        out,
        "<g class=\"{class}\" data-message=\"{index}\"><text class=\"time\" x=\"8\" y=\"{}\">{:.1} ms · link {}</text><line x1=\"{from}\" y1=\"{y}\" x2=\"{to}\" y2=\"{y}\" marker-end=\"url(#head)\"/><text class=\"label\" x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text></g>",
        y + 4.0,
        entry.t_ms,
        entry.link,
        (from + to) / 2.0,
        y - 5.0,
        esc(&clip(label, 48))
    );
}

/// A line across the double's and the peer's lanes at height `y`, with `text` above it: a
/// link's opening (`segment`) or its end (`close`).
fn draw_across(out: &mut String, class: &str, y: f64, text: &str) {
    let _ = writeln!(
        out,
        "<g class=\"{class}\"><line x1=\"{DOUBLE_X}\" y1=\"{y}\" x2=\"{PEER_X}\" y2=\"{y}\"/><text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text></g>",
        (DOUBLE_X + PEER_X) / 2.0,
        y - 4.0,
        esc(text)
    );
}

/// The failing step's mark at height `y`, across the whole `width`.
fn draw_failing(out: &mut String, y: f64, width: f64, index: &str) {
    let _ = writeln!(
        out,
        "<g class=\"failing\"><rect x=\"4\" y=\"{}\" width=\"{}\" height=\"{}\"/><text x=\"{}\" y=\"{}\" text-anchor=\"middle\">✗ step {} failed here</text></g>",
        y - ROW / 2.0,
        width - 8.0,
        ROW - 4.0,
        width / 2.0,
        y + 4.0,
        esc(index)
    );
}

/// The longest string of a message the page keeps (a prompt's attachment can be megabytes).
const KEPT_STRING: usize = 4096;

/// A message with each long string cut, saying how long it was.
fn clip_strings(value: &Value) -> Value {
    match value {
        Value::String(s) if s.len() > KEPT_STRING => {
            let mut end = KEPT_STRING;
            while !s.is_char_boundary(end) {
                end -= 1;
            }
            Value::String(format!("{}… ({} bytes in all)", &s[..end], s.len()))
        }
        Value::Array(items) => Value::Array(items.iter().map(clip_strings).collect()),
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| (k.clone(), clip_strings(v)))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// `text` cut to at most `max` characters, an ellipsis saying so.
fn clip(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_string();
    }
    let cut: String = text.chars().take(max - 1).collect();
    format!("{cut}…")
}
