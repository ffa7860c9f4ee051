//! fake-device's own settings: a scenario's `device:` section (how the simulated CLI behaves by
//! default: dialling, the capabilities it lists, its agent, its cards' patience, its scripts,
//! its terminals, its redial backoff). The engine keeps the section as written; this module reads
//! it, so the vocabulary lives with the double that acts on it.

use harness::scenario::{Dur, LoadError, Mode, Scenario};
use schemars::JsonSchema;
use serde::Deserialize;

/// fake-device's default behaviour.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DeviceSettings {
    /// `auto`: read discovery and dial at start; `manual`: only `dial` steps dial.
    #[serde(default)]
    pub dial: Mode,
    /// Advertise only these capabilities (to test that an instance respects the list).
    #[serde(default)]
    pub capabilities: Option<Vec<String>>,
    /// `echo` (default): the agent echoes each prompt; `model`: it asks the instance's model
    /// (`/v1/chat/completions`) and follows its tool calls with the cards they need.
    #[serde(default)]
    pub agent: Option<AgentKind>,
    /// How long a card (approval, question, plan) waits for an answer (default 30s).
    #[serde(default)]
    pub approval_timeout: Option<Dur>,
    /// The pause between the pieces of the default (echo) agent's answer (default 50ms): a turn
    /// runs at least three of these, which is when cancel and steer can reach it.
    #[serde(default)]
    pub step_delay: Option<Dur>,
    /// The scripted agent: for a prompt whose text matches a script's `when`, the turn does
    /// that script's steps (the first match wins); other prompts go to `agent`.
    #[serde(default)]
    pub scripts: Vec<crate::scripts::AgentScript>,
    /// `remote.terminal`: remote terminals on (`_lembas/terminal/*`, capabilities `terminal`
    /// and `shell`). Default: off, as on a fresh CLI.
    #[serde(default)]
    pub terminal: bool,
    /// How long the device takes to answer initialize (default: at once), as a CLI that loads
    /// its configuration first does: an instance that sends anything before the answer is
    /// caught doing so (`instance.initialize.first`).
    #[serde(default)]
    pub initialize_after: Option<Dur>,
    /// Redial backoff after a dropped link: first wait.
    #[serde(default)]
    pub redial_initial: Option<Dur>,
    /// Redial backoff after a dropped link: longest wait.
    #[serde(default)]
    pub redial_cap: Option<Dur>,
}

/// What drives fake-device's turns.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum AgentKind {
    /// Echo the prompt back in three pieces.
    #[default]
    Echo,
    /// Ask the instance's model, as the CLI does, and follow its tool calls.
    Model,
}

/// Reads a scenario's `device:` section (the defaults without one); an error names the file, the
/// section's line and the key at fault.
pub fn of(scenario: &Scenario) -> Result<DeviceSettings, LoadError> {
    match scenario.device.as_ref() {
        Some(section) => harness::scenario::read_section(
            section.value.clone(),
            "device",
            &scenario.source,
            section,
        ),
        None => Ok(DeviceSettings::default()),
    }
}
