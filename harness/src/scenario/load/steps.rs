//! The checks of a list of steps (`steps`, `peer.steps`, and the lists inside groups): each
//! step's own keys and patterns, the side that runs it, the `start` each `await` names, and
//! what an lvmh link cannot carry.

use serde_saphyr::Spanned;

use super::checker::{Checker, answer_patterns};
use super::error::LoadError;
use super::who::Side;
use crate::scenario::model::{ExpectStep, RequestStep, Step, WhenStep};

impl Checker<'_> {
    /// Every `await` names a request a `start` step sent before it (in file order), and waits
    /// no longer than that `start` allows: its `timeout` (else `default`, the scenario's) bounds
    /// the whole wait, so a longer one on the `await` would be silently cut short.
    pub(super) fn started(
        &self,
        steps: &[Spanned<Step>],
        base: &str,
        default: std::time::Duration,
        names: &mut Vec<(String, std::time::Duration)>,
    ) -> Result<(), LoadError> {
        for (i, step) in steps.iter().enumerate() {
            let path = format!("{base}[{i}]");
            let bound = |name: &str| {
                names
                    .iter()
                    .rev()
                    .find(|(n, _)| n == name)
                    .map(|(_, bound)| *bound)
            };
            match &step.value {
                Step::Start(st) => {
                    names.push((st.name.clone(), st.timeout.map_or(default, |t| t.0)));
                }
                Step::Await(a) if bound(&a.request).is_none() => {
                    return Err(self.error(
                        step,
                        format!("{path}.await.request"),
                        format!(
                            "no `start` step before this one sends a request `as: {}`",
                            a.request
                        ),
                    ));
                }
                Step::Await(a) if answer_patterns(&a.result, &a.error, &a.answer) > 1 => {
                    return Err(self.error(
                        step,
                        format!("{path}.await"),
                        "has more than one of `result`, `error` and `answer`: a response has one (`answer` with `$one_of` allows either)".into(),
                    ));
                }
                Step::Await(a)
                    if a.none_for.is_some()
                        && (answer_patterns(&a.result, &a.error, &a.answer) > 0
                            || !a.capture.is_empty()) =>
                {
                    return Err(self.error(
                        step,
                        format!("{path}.await.none_for"),
                        "expects no answer, so `result`, `error` and `capture` have nothing to match".into(),
                    ));
                }
                Step::Await(a)
                    if a.timeout
                        .is_some_and(|t| bound(&a.request).is_some_and(|b| t.0 > b)) =>
                {
                    let start = crate::duration::Dur(bound(&a.request).unwrap_or_default());
                    return Err(self.error(
                        step,
                        format!("{path}.await.timeout"),
                        format!(
                            "is longer than the {start} its `start` (`as: {}`) allows in all, which would cut it short: give the `start` step the longer `timeout`",
                            a.request
                        ),
                    ));
                }
                Step::When(w) => {
                    self.started(&w.steps, &format!("{path}.when.steps"), default, names)?
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// The steps of an lvmh scenario: whole frames only (see [`super::checks::check_lvmh`]).
    pub(super) fn lvmh_steps(&self, steps: &[Spanned<Step>], base: &str) -> Result<(), LoadError> {
        for (i, step) in steps.iter().enumerate() {
            let key = step_key(&step.value);
            let path = format!("{base}[{i}].{key}");
            let refused = match &step.value {
                Step::Notify(_)
                | Step::Request(_)
                | Step::Start(_)
                | Step::Await(_)
                | Step::Reply(_) => Some(
                    "an lvmh link carries envelopes, not JSON-RPC: send one with `send: {message: {type: …}}`, or act",
                ),
                Step::Expect(e) if e.method.is_some() || e.params.is_some() => {
                    Some("an lvmh frame has no method or params: expect `message: {type: …, …}`")
                }
                Step::ExpectNone(e) if e.method.is_some() || e.params.is_some() => {
                    Some("an lvmh frame has no method or params: give `message: {type: …}`")
                }
                Step::When(w)
                    if w.protocol.is_some() || w.spec.is_some() || !w.needs.is_empty() =>
                {
                    Some("lvmh has one version and no capabilities: only `that` and `matches`")
                }
                Step::Dial(d) if d.protocol.is_some() => Some("lvmh has no protocol to choose"),
                _ => None,
            };
            if let Some(why) = refused {
                return Err(self.error(step, path, why.into()));
            }
            match &step.value {
                Step::AnyOrder(inner) => self.lvmh_steps(inner, &path)?,
                Step::When(w) => self.lvmh_steps(&w.steps, &format!("{path}.steps"))?,
                _ => {}
            }
        }
        Ok(())
    }

    /// Checks each step of `steps`, a list at `base`, for the double `side` runs.
    pub(super) fn steps(
        &self,
        steps: &[Spanned<Step>],
        base: &str,
        side: Option<Side>,
    ) -> Result<(), LoadError> {
        for (i, step) in steps.iter().enumerate() {
            self.step(step, &format!("{base}[{i}]"), side)?;
        }
        Ok(())
    }

    /// One step at `path`: its patterns compile, its keys go together, and its group's steps
    /// pass in turn.
    fn step(&self, step: &Spanned<Step>, path: &str, side: Option<Side>) -> Result<(), LoadError> {
        match &step.value {
            Step::Expect(e) => self.expect(step, path, e),
            Step::Check(c) => {
                self.pattern(step, &format!("{path}.check.matches"), Some(&c.matches))
            }
            Step::ExpectNone(e) => {
                self.pattern(
                    step,
                    &format!("{path}.expect_none.params"),
                    e.params.as_ref(),
                )?;
                self.pattern(
                    step,
                    &format!("{path}.expect_none.message"),
                    e.message.as_ref(),
                )
            }
            Step::Request(r) => self.request(step, path, r),
            Step::AnyOrder(inner) => {
                if let Some((j, bad)) = inner
                    .iter()
                    .enumerate()
                    .find(|(_, s)| !matches!(s.value, Step::Expect(_)))
                {
                    return Err(self.error(
                        bad,
                        format!("{path}.any_order[{j}]"),
                        "only `expect` steps can be in `any_order`".into(),
                    ));
                }
                self.steps(inner, &format!("{path}.any_order"), side)
            }
            Step::When(w) => {
                self.when(step, path, w)?;
                self.steps(&w.steps, &format!("{path}.when.steps"), side)
            }
            _ => self.pairs_and_sides(step, path, side),
        }
    }

    /// An `expect` says something to expect, with a `message` that can take `method` and
    /// `params` merged into it, and patterns that compile.
    fn expect(&self, step: &Spanned<Step>, path: &str, e: &ExpectStep) -> Result<(), LoadError> {
        if e.message.as_ref().is_some_and(|m| !m.is_object())
            && (e.method.is_some() || e.params.is_some())
        {
            return Err(self.error(
                step,
                format!("{path}.expect.message"),
                "must be a mapping when `method` or `params` is given (they are merged into it)"
                    .into(),
            ));
        }
        if e.method.is_none() && e.params.is_none() && e.message.is_none() {
            return Err(self.error(
                step,
                format!("{path}.expect"),
                "says nothing to expect: give `method`, `params` or `message`".into(),
            ));
        }
        self.pattern(step, &format!("{path}.expect.params"), e.params.as_ref())?;
        self.pattern(step, &format!("{path}.expect.message"), e.message.as_ref())
    }

    /// A `request` expects one kind of answer at most, given as patterns that compile.
    fn request(&self, step: &Spanned<Step>, path: &str, r: &RequestStep) -> Result<(), LoadError> {
        if answer_patterns(&r.result, &r.error, &r.answer) > 1 {
            return Err(self.error(
                step,
                format!("{path}.request"),
                "has more than one of `result`, `error` and `answer`: a response has one (`answer` with `$one_of` allows either)".into(),
            ));
        }
        self.pattern(step, &format!("{path}.request.result"), r.result.as_ref())?;
        self.pattern(step, &format!("{path}.request.error"), r.error.as_ref())?;
        self.pattern(step, &format!("{path}.request.answer"), r.answer.as_ref())
    }

    /// A `when` (its steps aside) has a condition, whole, on capabilities the spec has, and a
    /// pattern that compiles.
    fn when(&self, step: &Spanned<Step>, path: &str, w: &WhenStep) -> Result<(), LoadError> {
        if w.that.is_some() != w.matches.is_some() {
            return Err(self.error(
                step,
                format!("{path}.when"),
                "needs both `that` and `matches`, or neither".into(),
            ));
        }
        if w.protocol.is_none() && w.spec.is_none() && w.that.is_none() && w.needs.is_empty() {
            return Err(self.error(
                step,
                format!("{path}.when"),
                "needs `protocol`, `spec`, `needs` or `that` with `matches`: otherwise its steps always run".into(),
            ));
        }
        if let Some((i, need)) = w
            .needs
            .iter()
            .enumerate()
            .find(|(_, n)| !crate::lembas::Spec::V1_1_0.defines(n))
        {
            return Err(self.error(
                step,
                format!("{path}.when.needs[{i}]"),
                format!("`{need}` is not a capability of the spec"),
            ));
        }
        self.pattern(step, &format!("{path}.when.matches"), w.matches.as_ref())
    }

    /// The other steps: a `reply` or `send` gives exactly one of its two contents, and a step
    /// only one double can do is not in the other's scenario.
    fn pairs_and_sides(
        &self,
        step: &Spanned<Step>,
        path: &str,
        side: Option<Side>,
    ) -> Result<(), LoadError> {
        match &step.value {
            Step::Reply(r) if r.result.is_some() == r.error.is_some() => Err(self.error(
                step,
                format!("{path}.reply"),
                "needs exactly one of `result` and `error`".into(),
            )),
            Step::Send(s) if s.message.is_some() == s.text.is_some() => Err(self.error(
                step,
                format!("{path}.send"),
                "needs exactly one of `message` and `text`".into(),
            )),
            Step::Dial(_) if side == Some(Side::Instance) => Err(self.error(
                step,
                format!("{path}.dial"),
                "only fake-device dials; fake-instance accepts links".into(),
            )),
            Step::ExpectReconnect(_) | Step::ExpectNoReconnect(_) if side == Some(Side::Device) => {
                Err(self.error(
                    step,
                    format!("{path}.{}", step_key(&step.value)),
                    "only fake-instance can see a peer link again; the instance never dials".into(),
                ))
            }
            _ => Ok(()),
        }
    }
}

/// The YAML key a step is written with.
pub fn step_key(step: &Step) -> &'static str {
    match step {
        Step::Notify(_) => "notify",
        Step::Request(_) => "request",
        Step::Start(_) => "start",
        Step::Await(_) => "await",
        Step::Expect(_) => "expect",
        Step::ExpectNone(_) => "expect_none",
        Step::Check(_) => "check",
        Step::AnyOrder(_) => "any_order",
        Step::Reply(_) => "reply",
        Step::Send(_) => "send",
        Step::Wait(_) => "wait",
        Step::Close(_) => "close",
        Step::Stall(_) => "stall",
        Step::ExpectClose(_) => "expect_close",
        Step::ExpectLink(_) => "expect_link",
        Step::ExpectReconnect(_) => "expect_reconnect",
        Step::ExpectNoReconnect(_) => "expect_no_reconnect",
        Step::Dial(_) => "dial",
        Step::Act(_) => "act",
        Step::When(_) => "when",
        Step::ExpectExit(_) => "expect_exit",
        Step::ExpectOutput(_) => "expect_output",
        Step::RestartPeer(_) => "restart_peer",
        Step::WaitForSignal(_) => "wait_for_signal",
    }
}
