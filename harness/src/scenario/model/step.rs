//! The step, one key of a kind per step, and the groups whose steps run together (`any_order`,
//! `when`). The kinds' own types live beside it, grouped by what they work on.

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;
use serde_saphyr::Spanned;

use super::expecting::{CheckStep, ExpectNoneStep, ExpectStep};
use super::links::{
    CloseStep, DialStep, ExpectCloseStep, ExpectLinkStep, ExpectNoReconnectStep,
    ExpectReconnectStep,
};
use super::off_link::{ActStep, WaitForSignalStep};
use super::peer_process::{ExpectExitStep, ExpectOutputStep, RestartPeerStep};
use super::sending::{AwaitStep, NotifyStep, ReplyStep, RequestStep, SendStep, StartStep};
use crate::duration::Dur;

/// One step. Each is a map with exactly one of these keys.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Step {
    /// Send a notification.
    Notify(NotifyStep),
    /// Send a request and expect its result or error.
    Request(RequestStep),
    /// Send a request and go on without its answer; an `await` step takes the answer later.
    Start(StartStep),
    /// Wait for the answer of a request sent by `start`, and check it like `request` does.
    Await(AwaitStep),
    /// Expect a request or notification from the peer (consumed from the inbox).
    Expect(ExpectStep),
    /// Expect nothing matching from the peer for a while.
    ExpectNone(ExpectNoneStep),
    /// Check a value taken earlier (a capture) against a pattern, at once.
    Check(CheckStep),
    /// Expect all of these, in any order (only `expect` steps inside).
    #[schemars(with = "Vec<Step>")]
    AnyOrder(Vec<Spanned<Step>>),
    /// Answer a request captured earlier (held by a handler with `hold: true`).
    Reply(ReplyStep),
    /// Send any JSON (or raw text) as one message, as is.
    Send(SendStep),
    /// Do nothing for a while; the traffic keeps flowing to handlers and the default behaviour.
    Wait(Dur),
    /// Close the link with a code, drop it without one (`drop: true`), or end only our
    /// sending direction (`half: true`).
    Close(CloseStep),
    /// Send the peer nothing on the link for a while (what is sent meanwhile waits, then goes
    /// in order), still reading it: a stalled peer, as a busy or suspended process is.
    Stall(Dur),
    /// Expect the peer to close the link (with a code, if given).
    ExpectClose(ExpectCloseStep),
    /// Expect a link from the peer (an open one, or one within a time).
    ExpectLink(ExpectLinkStep),
    /// Expect the peer to link again within a time.
    ExpectReconnect(ExpectReconnectStep),
    /// Expect the peer not to link again for a time.
    ExpectNoReconnect(ExpectNoReconnectStep),
    /// Dial the instance (fake-device only): a fresh link, or an expected refusal.
    Dial(DialStep),
    /// Act as the double's own side would, off the link: a person in LLeMbas's web UI
    /// (fake-instance), a person at the device or an edit of its settings (fake-device).
    Act(Box<ActStep>),
    /// Run these steps only in the cells that match.
    When(WhenStep),
    /// Expect the system under test's process to exit (with a code, if given): it needs a
    /// process the double started (`--exec`, `sut:`).
    ExpectExit(ExpectExitStep),
    /// Expect a line matching a pattern on the system under test's stdout or stderr.
    ExpectOutput(ExpectOutputStep),
    /// Stop the system under test (SIGTERM, then SIGKILL after its grace period) and start it
    /// again on the same state: a restart of the real CLI or web server.
    RestartPeer(RestartPeerStep),
    /// Wait until the test program driving the double raises a named signal on its control
    /// API: a point where the program does its part (starts a second client, edits a file).
    WaitForSignal(WaitForSignalStep),
}

impl Step {
    /// What the step judges of the peer: `Some(rule)` for a step that can fail it (with the
    /// rule it names, or `None` where it names none), `None` for one that acts, sends, waits or
    /// groups (a group's steps judge for themselves).
    pub fn judges(&self) -> Option<Option<&str>> {
        let rule = match self {
            Step::Request(s) => &s.rule,
            Step::Await(s) => &s.rule,
            Step::Expect(s) => &s.rule,
            Step::ExpectNone(s) => &s.rule,
            Step::Check(s) => &s.rule,
            Step::ExpectClose(s) => &s.rule,
            Step::ExpectLink(s) => &s.rule,
            Step::ExpectReconnect(s) => &s.rule,
            Step::ExpectNoReconnect(s) => &s.rule,
            Step::Dial(s) => &s.rule,
            Step::ExpectExit(s) => &s.rule,
            Step::ExpectOutput(s) => &s.rule,
            Step::AnyOrder(_)
            | Step::When(_)
            | Step::Notify(_)
            | Step::Start(_)
            | Step::Reply(_)
            | Step::Send(_)
            | Step::Wait(_)
            | Step::Stall(_)
            | Step::Close(_)
            | Step::Act(_)
            | Step::RestartPeer(_)
            | Step::WaitForSignal(_) => return None,
        };
        Some(rule.as_deref())
    }

    /// The steps inside a group (`any_order`, `when`); none for any other step.
    pub fn inner(&self) -> &[Spanned<Step>] {
        match self {
            Step::AnyOrder(inner) => inner,
            Step::When(when) => &when.steps,
            _ => &[],
        }
    }
}

/// Steps that run only in some cells, or only when a value (a capture) matches a pattern: for
/// a peer the spec lets do one of several things, each reading's own checks.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WhenStep {
    /// Only at this link protocol.
    #[serde(default)]
    pub protocol: Option<u8>,
    /// Only at this harness spec.
    #[serde(default)]
    pub spec: Option<String>,
    /// Only when the peer claimed these (fake-instance: capabilities the device listed): a
    /// part of a scenario that judges what not every peer implements. Where it did not, the
    /// steps are skipped and the rest of the scenario goes on.
    #[serde(default)]
    pub needs: Vec<String>,
    /// Only when this value (usually a capture: `${status.turnId}`) matches `matches`.
    #[serde(default)]
    pub that: Option<Value>,
    /// The pattern `that` must match for the steps to run.
    #[serde(default)]
    pub matches: Option<Value>,
    /// The steps.
    #[schemars(with = "Vec<Step>")]
    pub steps: Vec<Spanned<Step>>,
}
