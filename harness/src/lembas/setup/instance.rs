//! What an instance under test must be made to do for a fake-device scenario: its `peer:`
//! section (beside `steps`, the web UI's own actions, which fake-instance does in the
//! self-test). The engine keeps the section as written; fake-device reads it and names the
//! set-up a real web server's test must arrange.

use crate::scenario::{LoadError, Scenario};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

/// The instance's set-up, as a fake-device scenario's `peer:` says it.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct InstanceSetup {
    /// How the person in the web UI answers the device's cards, as fake-instance's
    /// `instance.cards` says it (a real LLeMbas: answer them so in the test).
    #[serde(default)]
    pub cards: Option<Value>,
}

impl InstanceSetup {
    /// Reads a scenario's `peer:` set-up (the defaults without one); an error names the file, the
    /// section's line and the key at fault.
    pub fn of(scenario: &Scenario) -> Result<InstanceSetup, LoadError> {
        let Some(peer) = scenario.peer.as_ref() else {
            return Ok(Self::default());
        };
        crate::scenario::read_section(
            Value::Object(peer.value.setup.clone()),
            "peer",
            &scenario.source,
            peer,
        )
    }

    /// The set-up the instance must be given, by name: what fake-instance does by itself in the
    /// self-test, and what a real web server's test must arrange (`--arranged`).
    pub fn needs(&self) -> Vec<String> {
        [("answer_cards", self.cards.is_some())]
            .into_iter()
            .filter(|(_, needed)| *needed)
            .map(|(name, _)| name.to_string())
            .collect()
    }
}

impl InstanceSetup {
    /// The set-up an instance under test is given as it runs, as hook actions on a timeline:
    /// how its person answers cards (`answer_cards`, with fake-instance's card policy as its
    /// fields), at once.
    pub fn timeline(&self) -> Vec<crate::hooks::Timed> {
        self.cards
            .iter()
            .map(|cards| crate::hooks::Timed {
                at: std::time::Duration::ZERO,
                action: "answer_cards".into(),
                value: cards.clone(),
            })
            .collect()
    }
}
