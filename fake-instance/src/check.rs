//! What fake-instance reads of a scenario beyond the format, checked before a run: its own
//! settings, set-up and actions, and what it reads of a device-side scenario it plays the peer
//! of.

use harness::lembas::setup::DeviceSetup;
use harness::scenario::{LoadError, Scenario, check_actions};

use crate::actions::WebAction;
use crate::settings::{self, CardPolicy};

/// Checks what fake-instance reads of an instance-side scenario beyond the format: its
/// `instance:` settings, its `peer:` set-up and its steps' actions. An error names the file,
/// the line and the key at fault.
pub fn check_scenario(scenario: &Scenario) -> Result<(), LoadError> {
    settings::of(scenario)?;
    DeviceSetup::of(scenario)?;
    check_actions::<WebAction>(&scenario.steps, "steps", &scenario.source)
}

/// Checks what fake-instance reads of a device-side scenario when it plays the instance for it:
/// how its web UI answers cards (`peer.cards`) and what it does by itself (`peer.steps`).
pub fn check_as_peer_of(scenario: &Scenario) -> Result<(), LoadError> {
    peer_cards(scenario)?;
    check_actions::<WebAction>(scenario.peer_steps(), "peer.steps", &scenario.source)
}

/// How the web UI's person answers cards for a device-side scenario (`peer.cards`).
pub fn peer_cards(scenario: &Scenario) -> Result<CardPolicy, LoadError> {
    let (Some(peer), Some(cards)) = (
        scenario.peer.as_ref(),
        scenario
            .peer
            .as_ref()
            .and_then(|p| p.value.setup.get("cards")),
    ) else {
        return Ok(CardPolicy::default());
    };
    harness::scenario::read_section(cards.clone(), "peer.cards", &scenario.source, peer)
}
