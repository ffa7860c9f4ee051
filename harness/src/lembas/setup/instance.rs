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
    /// The account's personalization, where it differs from a usable one
    /// (`personalization_unavailable` when not available; a real LLeMbas: an account whose
    /// plan has no personalization, arranged by the test).
    #[serde(default)]
    pub personalization: Option<PersonalizationSetup>,
    /// The account's library, as fake-instance's `instance.http.library` says it (its knowledge
    /// bases with their documents, and the ids in its default data group); a real LLeMbas: the
    /// test makes those bases, `library_fixtures`.
    #[serde(default)]
    pub library: Option<Value>,
}

/// The account's personalization as a scenario needs it.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PersonalizationSetup {
    /// Whether the account can use personalization at all (`false`: every write is refused).
    pub available: bool,
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
        let unavailable = self.personalization.as_ref().is_some_and(|p| !p.available);
        [
            ("answer_cards", self.cards.is_some()),
            ("personalization_unavailable", unavailable),
            ("library_fixtures", self.library.is_some()),
        ]
        .into_iter()
        .filter(|(_, needed)| *needed)
        .map(|(name, _)| name.to_string())
        .collect()
    }
}

impl InstanceSetup {
    /// The set-up an instance under test is given before the scenario's steps begin, as hook
    /// actions with their fields: how its person answers cards (`answer_cards`, with
    /// fake-instance's card policy), an account whose personalization is not available
    /// (`personalization_unavailable`, `{available: false}`), the account's library
    /// (`library_fixtures`, its knowledge bases).
    pub fn at_start(&self) -> Vec<(String, Value)> {
        let mut actions = Vec::new();
        if let Some(cards) = &self.cards {
            actions.push(("answer_cards".to_string(), cards.clone()));
        }
        if let Some(personalization) = self.personalization.as_ref().filter(|p| !p.available) {
            actions.push((
                "personalization_unavailable".to_string(),
                serde_json::json!({ "available": personalization.available }),
            ));
        }
        if let Some(library) = &self.library {
            actions.push(("library_fixtures".to_string(), library.clone()));
        }
        actions
    }
}
