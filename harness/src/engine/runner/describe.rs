//! The words of the report: a step's title, and how a failure names what it awaited and
//! what came instead. Pure functions of the step and the answer; what the run saw meanwhile
//! is `missed`'s.

use serde_json::Value;

use crate::jsonrpc::RpcError;
use crate::scenario::model::*;
use crate::transport::CLOSE_NORMAL;

/// A value in at most a line.
pub(super) fn clip(value: &Value) -> String {
    let text = value.to_string();
    if text.chars().count() <= 120 {
        return text;
    }
    format!("{}…", text.chars().take(120).collect::<String>())
}

/// What a step expects of an answer.
#[derive(Debug, Clone, Copy)]
pub(super) enum Expected<'a> {
    /// A result matching this.
    Result(&'a Value),
    /// An error matching this.
    Error(&'a Value),
    /// `{result}` or `{error}` matching this (a `$one_of` of readings).
    Answer(&'a Value),
    /// Any result.
    AnyResult,
}

impl<'a> Expected<'a> {
    /// Which of the step's patterns it judges by: `answer` over `error` over `result`.
    pub(super) fn of(
        result: &'a Option<Value>,
        error: &'a Option<Value>,
        answer: &'a Option<Value>,
    ) -> Self {
        match (answer, error, result) {
            (Some(whole), _, _) => Expected::Answer(whole),
            (None, Some(error), _) => Expected::Error(error),
            (None, None, Some(result)) => Expected::Result(result),
            (None, None, None) => Expected::AnyResult,
        }
    }
}

/// The headline of an answer that is not what the spec says: what came (a result, or which
/// error), against what kind of answer the step wanted, never implying a particular error was
/// expected when a result was.
pub(super) fn answer_summary(
    method: &str,
    answer: &Result<Value, RpcError>,
    expected: Expected<'_>,
) -> String {
    let refused = |e: &RpcError| {
        format!(
            "`{method}` was refused with error {} ({})",
            e.code, e.message
        )
    };
    match (answer, expected) {
        (Err(e), Expected::Result(_) | Expected::AnyResult) => {
            format!("{} where the spec wants a result", refused(e))
        }
        (Err(e), Expected::Error(_)) => format!("{}, not the error the spec wants", refused(e)),
        (Err(e), Expected::Answer(_)) => {
            format!("{}, which is no answer the spec allows", refused(e))
        }
        (Ok(_), Expected::Error(_)) => {
            format!("`{method}` was answered with a result where the spec wants it refused")
        }
        (Ok(_), Expected::Answer(_)) => {
            format!("the result of `{method}` is no answer the spec allows")
        }
        (Ok(_), _) => format!("the result of `{method}` is not what the spec says"),
    }
}

/// How a checked value is named in a failure: the variable it came from, when it is one.
pub(super) fn describe_value(that: &Value) -> String {
    match that.as_str() {
        Some(text) if text.starts_with("${") => {
            format!("`{}`", text.trim_start_matches("${").trim_end_matches('}'))
        }
        _ => "the value".into(),
    }
}

/// How an awaited message is named in a failure: by its method, when the step names one.
pub(super) fn describe(method: &Option<String>) -> String {
    match method {
        Some(m) => format!("`{m}`"),
        None => "a matching message".into(),
    }
}

/// A few words saying what a step does, for the report.
pub fn title(step: &Step) -> String {
    match step {
        Step::Notify(n) => format!("notify {}", n.method),
        Step::Request(r) => format!("request {}", r.method),
        Step::Start(st) => format!("start {} as {}", st.method, st.name),
        Step::Await(a) => match a.none_for {
            Some(quiet) => format!("expect no answer to {} for {quiet}", a.request),
            None => format!("await {}", a.request),
        },
        Step::Expect(e) => format!("expect {}", e.method.as_deref().unwrap_or("message")),
        Step::ExpectNone(e) => format!(
            "expect no {} for {}",
            e.method.as_deref().unwrap_or("message"),
            e.duration
        ),
        Step::AnyOrder(g) => format!("any order of {} expects", g.len()),
        Step::Check(c) => format!("check {}", describe_value(&c.that).trim_matches('`')),
        Step::ExpectLink(e) => format!("expect a link within {}", e.within),
        Step::Reply(r) => format!("reply to {}", r.to),
        Step::Send(_) => "send a raw message".into(),
        Step::Wait(d) => format!("wait {d}"),
        Step::Close(c) if c.drop => "drop the link (no close frame)".into(),
        Step::Close(c) if c.half => "half-close the link (end our direction, go on reading)".into(),
        Step::Close(c) => format!("close with {}", c.code.unwrap_or(CLOSE_NORMAL)),
        Step::Stall(d) => format!("stall the link for {d}"),
        Step::ExpectClose(e) => match e.code {
            Some(code) => format!("expect the peer to close with {code}"),
            None => "expect the peer to close".into(),
        },
        Step::ExpectReconnect(e) => format!("expect a reconnect within {}", e.within),
        Step::ExpectNoReconnect(e) => format!("expect no reconnect for {}", e.duration),
        Step::Dial(d) => match d.refused {
            Some(status) => format!("dial, expecting refusal {status}"),
            None => "dial".into(),
        },
        Step::Act(a) => format!("act: {}", a.name),
        Step::ExpectExit(e) => match e.code {
            Some(code) => format!("expect the process to exit with {code}"),
            None => "expect the process to exit".into(),
        },
        Step::ExpectOutput(e) => format!("expect output matching `{}`", e.pattern),
        Step::RestartPeer(_) => "restart the peer".into(),
        Step::WaitForSignal(w) => format!("wait for signal {}", w.name),
        Step::When(w) => match &w.that {
            Some(that) => format!("when {}", describe_value(that).trim_matches('`')),
            None => "when".into(),
        },
    }
}
