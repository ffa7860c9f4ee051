//! The checks YAML cannot express, on a scenario read whole: the double and section that fit
//! its folder, the matrix and capabilities, the handlers, what an lvmh scenario cannot say, and
//! (through [`Checker`](super::checker::Checker)) its steps.

use super::checker::Checker;
use super::error::{LoadError, place};
use super::rules::check_rules;
use super::steps::step_key;
use super::variables::unknown_start_variable;
use super::who::Side;
use super::yaml::top_key_at;
use crate::pattern::Pattern;
use crate::scenario::model::{Scenario, Step};

/// Every check of a scenario of any family, in the order its errors are reported.
pub(super) fn check(
    scenario: &Scenario,
    file: &str,
    side: Option<Side>,
    text: &str,
) -> Result<(), LoadError> {
    sections(scenario, file, side, text)?;
    let checker = Checker { file };
    checker.handlers(scenario)?;
    checker.steps(&scenario.steps, "steps", side)?;
    let default = scenario
        .timeout
        .map_or(crate::scenario::model::DEFAULT_TIMEOUT, |t| t.0);
    checker.started(&scenario.steps, "steps", default, &mut Vec::new())?;
    checker.peer_steps(scenario, side)?;
    check_rules(scenario, file, text)
}

/// The top-level sections: the double's section that fits the folder, the matrix's cells, and
/// the capabilities needed of each spec the matrix runs. Their errors point at the section's
/// key.
fn sections(
    scenario: &Scenario,
    file: &str,
    side: Option<Side>,
    text: &str,
) -> Result<(), LoadError> {
    let top = |key: &str, message: String| {
        let section = key.split(['.', '[']).next().unwrap_or(key);
        LoadError::found(
            file,
            place(top_key_at(text, section)),
            key.to_string(),
            message,
        )
    };
    match side {
        Some(Side::Instance) if scenario.device.is_some() => {
            return Err(top("device", "configures fake-device, but fake-instance runs this scenario (it is in instance/): use `instance:`".into()));
        }
        Some(Side::Device) if scenario.instance.is_some() => {
            return Err(top("instance", "configures fake-instance, but fake-device runs this scenario (it is in device/): use `device:`".into()));
        }
        _ => {}
    }
    if let Some(bad) = scenario
        .matrix
        .protocol
        .iter()
        .find(|p| !matches!(p, 1 | 2))
    {
        return Err(top(
            "matrix.protocol",
            format!("{bad} is not a link protocol (1 or 2)"),
        ));
    }
    if let Some(bad) = scenario
        .matrix
        .spec
        .iter()
        .find(|s| !matches!(s.as_str(), "1.0.0" | "1.1.0"))
    {
        return Err(top(
            "matrix.spec",
            format!("`{bad}` is not a harness spec version (1.0.0 or 1.1.0)"),
        ));
    }
    for (i, need) in scenario.needs.iter().enumerate() {
        for spec in &scenario.matrix.spec {
            let Some(version) = crate::lembas::Spec::parse(spec) else {
                continue;
            };
            if !version.defines(need) {
                return Err(top(
                    &format!("needs[{i}]"),
                    format!(
                        "`{need}` is not a capability of harness spec {spec}, which the matrix runs (capabilities: {})",
                        version.capabilities().join(", ")
                    ),
                ));
            }
        }
    }
    Ok(())
}

impl Checker<'_> {
    /// Each handler answers one way, with params that are a pattern of variables known from the
    /// run's start.
    fn handlers(&self, scenario: &Scenario) -> Result<(), LoadError> {
        for (i, handler) in scenario.handlers.iter().enumerate() {
            let h = &handler.value;
            let answers = usize::from(h.result.is_some())
                + usize::from(h.error.is_some())
                + usize::from(h.hold);
            if answers != 1 {
                return Err(self.error(
                    handler,
                    format!("handlers[{i}]"),
                    "needs exactly one of `result`, `error` and `hold: true`".into(),
                ));
            }
            if let Some(params) = &h.params
                && let Some(unknown) = unknown_start_variable(params, scenario)
            {
                return Err(self.error(
                    handler,
                    format!("handlers[{i}].params"),
                    format!("`${{{unknown}}}` is not known when the run starts (a handler's params see the built-ins and `vars:`, not captures)"),
                ));
            }
            if let Some(params) = &h.params {
                Pattern::compile(params).map_err(|e| {
                    self.error(
                        handler,
                        format!("handlers[{i}].params"),
                        format!("bad pattern: {e}"),
                    )
                })?;
            }
        }
        Ok(())
    }

    /// `peer.steps` are done by the other double, and are only its actions and pauses; they
    /// are checked as that double's steps.
    fn peer_steps(&self, scenario: &Scenario, side: Option<Side>) -> Result<(), LoadError> {
        for (i, step) in scenario.peer_steps().iter().enumerate() {
            if !matches!(step.value, Step::Act(_) | Step::Wait(_)) {
                return Err(self.error(
                    step,
                    format!("peer.steps[{i}].{}", step_key(&step.value)),
                    "the other double does only `act` and `wait` steps here".into(),
                ));
            }
        }
        let other = side.map(|s| match s {
            Side::Instance => Side::Device,
            Side::Device => Side::Instance,
        });
        self.steps(scenario.peer_steps(), "peer.steps", other)
    }
}

/// What a scenario of the lvmh family cannot say: its links carry envelopes, not JSON-RPC, so
/// there is no request to send or answer, and it has one version, so no matrix and no
/// capabilities to need.
pub(super) fn check_lvmh(scenario: &Scenario, file: &str, text: &str) -> Result<(), LoadError> {
    let top = |key: &str, message: &str| {
        LoadError::found(
            file,
            place(top_key_at(text, key)),
            key.to_string(),
            message.to_string(),
        )
    };
    if !scenario.handlers.is_empty() {
        return Err(top(
            "handlers",
            "an lvmh link has no requests to answer: the double's default behaviour and `send` steps speak",
        ));
    }
    if !scenario.needs.is_empty() {
        return Err(top("needs", "lvmh has no capabilities to need"));
    }
    let default = crate::scenario::model::Matrix::default();
    if scenario.matrix.protocol != default.protocol || scenario.matrix.spec != default.spec {
        return Err(top(
            "matrix",
            "lvmh has one version (v 1): an lvmh scenario has no matrix",
        ));
    }
    let checker = Checker { file };
    checker.lvmh_steps(&scenario.steps, "steps")?;
    checker.lvmh_steps(scenario.peer_steps(), "peer.steps")
}
