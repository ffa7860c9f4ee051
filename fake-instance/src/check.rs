//! What fake-instance reads of a scenario beyond the format, checked before a run: its own
//! settings, set-up and actions, and what it reads of a device-side scenario it plays the peer
//! of.

use harness::lembas::setup::DeviceSetup;
use harness::scenario::{LoadError, Scenario, check_actions};

use crate::actions::WebAction;
use crate::http::LibraryConfig;
use crate::settings::{self, CardPolicy};

/// Checks what fake-instance reads of an instance-side scenario beyond the format: its
/// `instance:` settings, its `peer:` set-up and its steps' actions. An error names the file,
/// the line and the key at fault.
pub fn check_scenario(scenario: &Scenario) -> Result<(), LoadError> {
    if scenario.family == harness::family::Family::Lvmh {
        return crate::lvmh::check_scenario(scenario);
    }
    settings::of(scenario)?;
    DeviceSetup::of(scenario)?;
    check_actions::<WebAction>(&scenario.steps, "steps", &scenario.source)
}

/// Checks what fake-instance reads of a device-side scenario when it plays the instance for it:
/// how its web UI answers cards (`peer.cards`), the account's library (`peer.library`) and what
/// it does by itself (`peer.steps`).
pub fn check_as_peer_of(scenario: &Scenario) -> Result<(), LoadError> {
    // The lvmh daemon plays a daemon scenario's peer as it is: it reads nothing of it.
    if scenario.family == harness::family::Family::Lvmh {
        return Ok(());
    }
    peer_cards(scenario)?;
    peer_library(scenario)?;
    check_actions::<WebAction>(scenario.peer_steps(), "peer.steps", &scenario.source)
}

/// How the web UI's person answers cards for a device-side scenario (`peer.cards`).
pub fn peer_cards(scenario: &Scenario) -> Result<CardPolicy, LoadError> {
    Ok(peer_section(scenario, "cards")?.unwrap_or_default())
}

/// The account's library for a device-side scenario (`peer.library`, in the shape of
/// `instance.http.library`), if it gives one.
pub fn peer_library(scenario: &Scenario) -> Result<Option<LibraryConfig>, LoadError> {
    peer_section(scenario, "library")
}

/// One key of a device-side scenario's `peer:` set-up, read as `T`; an error names the file,
/// the line and the key at fault.
fn peer_section<T: serde::de::DeserializeOwned>(
    scenario: &Scenario,
    key: &str,
) -> Result<Option<T>, LoadError> {
    let Some(peer) = scenario.peer.as_ref() else {
        return Ok(None);
    };
    let Some(value) = peer.value.setup.get(key) else {
        return Ok(None);
    };
    harness::scenario::read_section(
        value.clone(),
        &format!("peer.{key}"),
        &scenario.source,
        peer,
    )
    .map(Some)
}
