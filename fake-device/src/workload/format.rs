//! The workload format: what a `*.workload.yaml` says, and the checks YAML cannot.

use std::path::Path;

use harness::scenario::{Dur, LoadError, Spanned};
use schemars::JsonSchema;
use serde::Deserialize;

use crate::actions::DeviceAction;

/// A workload: what each device of a fleet does, and how many run when.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Workload {
    /// Its name, for the report.
    #[serde(default)]
    pub name: Option<String>,
    /// What it is for.
    #[serde(default)]
    pub description: Option<String>,
    /// The seed of its draws (when each device first does each activity); `--seed` overrides
    /// it. Default 1: two runs of one workload draw alike.
    #[serde(default)]
    pub seed: Option<u64>,
    /// How many devices run when, as k6's stages: each ramps the count linearly from the last
    /// stage's (0 at the start) to its `devices` over its `duration`; the run ends with the
    /// last. None: every device of `--fleet` at once, until `--for` or a signal.
    #[serde(default)]
    #[schemars(with = "Vec<Stage>")]
    pub stages: Vec<Spanned<Stage>>,
    /// How each device answers the server (its agent and pace).
    #[serde(default)]
    pub device: WorkloadDevice,
    /// What each device does once its first link is up, in order (`share_session: true`).
    #[serde(default)]
    pub start: Vec<DeviceAction>,
    /// What each device does again and again, each at its own pace.
    #[serde(default)]
    #[schemars(with = "Vec<Activity>")]
    pub every: Vec<Spanned<Activity>>,
}

/// One stage of the ramp.
#[derive(Debug, Clone, Copy, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Stage {
    /// How long the stage lasts (`30s`, `2m`).
    pub duration: Dur,
    /// How many devices run at its end.
    pub devices: usize,
}

/// How each device answers the server; what is not given comes from the command line.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WorkloadDevice {
    /// `echo` (the prompt back) or `model` (the instance's model, a chat completion a step).
    #[serde(default)]
    pub agent: Option<WorkloadAgent>,
    /// The pause between a turn's steps (the pace of its answers).
    #[serde(default)]
    pub step_delay: Option<Dur>,
    /// How long a card waits for an answer.
    #[serde(default)]
    pub approval_timeout: Option<Dur>,
    /// Scripted turns (text, thoughts, tool calls, cards), as a scenario's `device.scripts`.
    #[serde(default)]
    pub scripts: Vec<crate::scripts::AgentScript>,
}

/// The agents a workload's devices may run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum WorkloadAgent {
    /// Echo each prompt back.
    Echo,
    /// Ask the instance's model.
    Model,
}

/// One thing each device does again and again: exactly one of `act`, `prompt`, `drop_link`,
/// `restart`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Activity {
    /// How often (`10s`); the first time comes after a random part of it, so devices spread.
    pub every: Dur,
    /// A person's action at the device, as a scenario's `act` step
    /// (`{terminal_prompt: "fix it"}`, `{http: {path: /v1/usage}}`); timed as `act.KIND`.
    #[serde(default)]
    pub act: Option<DeviceAction>,
    /// A person types this at the terminal (sharing a session first if none is), and the device
    /// runs the turn; timed to the turn's end as `terminal.turn`.
    #[serde(default)]
    pub prompt: Option<String>,
    /// The link is dropped (no close frame, as a lost network), and the device redials.
    #[serde(default)]
    pub drop_link: bool,
    /// The device stops and starts again with the same state (a person restarting the CLI).
    #[serde(default)]
    pub restart: bool,
}

/// What an activity does.
#[derive(Debug, Clone)]
pub(crate) enum Move {
    Act(DeviceAction),
    Prompt(String),
    DropLink,
    Restart,
}

impl Activity {
    /// Its one move, or why it has none or more than one.
    pub(crate) fn move_of(&self) -> Result<Move, String> {
        let mut moves = Vec::new();
        if let Some(action) = &self.act {
            moves.push(Move::Act(action.clone()));
        }
        if let Some(text) = &self.prompt {
            moves.push(Move::Prompt(text.clone()));
        }
        if self.drop_link {
            moves.push(Move::DropLink);
        }
        if self.restart {
            moves.push(Move::Restart);
        }
        match moves.len() {
            1 => Ok(moves.remove(0)),
            0 => {
                Err("says no move: give one of act, prompt, drop_link: true, restart: true".into())
            }
            _ => Err(
                "gives more than one move: one of act, prompt, drop_link, restart an entry".into(),
            ),
        }
    }
}

impl Workload {
    /// Reads and checks a workload file; an error names the file, line and key at fault.
    pub fn load(path: &Path) -> Result<Workload, LoadError> {
        let workload: Workload = harness::scenario::load_yaml_file(path)?;
        workload.checked(&path.display().to_string())
    }

    /// Reads and checks a workload from text; `file` names it in errors.
    pub fn from_str(text: &str, file: &str) -> Result<Workload, LoadError> {
        let workload: Workload = harness::scenario::load_yaml_str(text, file)?;
        workload.checked(file)
    }

    /// The checks the format cannot say: one move an activity, periods and stages that end.
    fn checked(self, file: &str) -> Result<Workload, LoadError> {
        fn at<T>(file: &str, written: &Spanned<T>, key: String, message: String) -> LoadError {
            LoadError {
                file: file.to_string(),
                line: u32::try_from(written.referenced.line()).ok(),
                column: u32::try_from(written.referenced.column()).ok(),
                key_path: Some(key),
                message,
                snippet: None,
            }
        }
        for (i, activity) in self.every.iter().enumerate() {
            if let Err(why) = activity.value.move_of() {
                return Err(at(file, activity, format!("every[{i}]"), why));
            }
            if activity.value.every.0 < std::time::Duration::from_millis(10) {
                return Err(at(
                    file,
                    activity,
                    format!("every[{i}].every"),
                    "is shorter than 10ms: a device would do nothing else".into(),
                ));
            }
        }
        if !self.stages.is_empty() && self.stages.iter().all(|s| s.value.duration.0.is_zero()) {
            let first = &self.stages[0];
            return Err(at(
                file,
                first,
                "stages".into(),
                "last no time at all: give a stage a duration".into(),
            ));
        }
        Ok(self)
    }

    /// The most devices a stage asks for (0 without stages).
    pub fn most_devices(&self) -> usize {
        self.stages
            .iter()
            .map(|s| s.value.devices)
            .max()
            .unwrap_or(0)
    }

    /// The stages, without their places.
    pub fn stage_list(&self) -> Vec<Stage> {
        self.stages.iter().map(|s| s.value).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_workload_reads_stages_start_and_activities() {
        let workload = Workload::from_str(
            "name: chatty\nseed: 7\nstages:\n  - {duration: 10s, devices: 100}\n  - {duration: 20s, devices: 100}\n\
             device: {agent: echo, step_delay: 20ms}\nstart:\n  - share_session: true\n\
             every:\n  - every: 10s\n    prompt: summarise the diff\n  - every: 1m\n    drop_link: true\n  - every: 5s\n    act: {show_usage: true}\n",
            "chatty.workload.yaml",
        )
        .expect("it loads");
        assert_eq!(workload.most_devices(), 100);
        assert_eq!(workload.every.len(), 3);
        assert!(matches!(
            workload.every[0].value.move_of(),
            Ok(Move::Prompt(_))
        ));
        assert_eq!(workload.device.agent, Some(WorkloadAgent::Echo));
    }

    #[test]
    fn an_activity_without_one_move_is_refused_at_its_line_and_key() {
        let error = Workload::from_str(
            "every:\n  - every: 10s\n    prompt: hi\n  - every: 5s\n    prompt: hi\n    restart: true\n",
            "w.workload.yaml",
        )
        .expect_err("two moves in one entry");
        assert_eq!(error.key_path.as_deref(), Some("every[1]"));
        assert_eq!(error.line, Some(4), "{error}");
        assert!(error.to_string().contains("more than one move"), "{error}");
        let error = Workload::from_str("every:\n  - every: 10s\n    promt: hi\n", "w.yaml")
            .expect_err("an unknown key");
        assert!(error.to_string().contains("promt"), "{error}");
        assert_eq!(error.line, Some(3), "{error}");
    }
}
