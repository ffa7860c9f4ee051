//! What fake-device reads of a scenario beyond the format, checked before a run: its own
//! settings, set-up and actions, and what it reads of an instance-side scenario it plays the
//! peer of.

use harness::lembas::setup::InstanceSetup;
use harness::scenario::{LoadError, Scenario, check_actions};

use crate::actions::DeviceAction;
use crate::settings;

/// Checks what fake-device reads of a device-side scenario beyond the format: its `device:`
/// settings, its `peer:` set-up and its steps' actions. An error names the file, the line and
/// the key at fault.
pub fn check_scenario(scenario: &Scenario) -> Result<(), LoadError> {
    if scenario.family == harness::family::Family::Lvmh {
        return crate::lvmh::check_scenario(scenario);
    }
    settings::of(scenario)?;
    InstanceSetup::of(scenario)?;
    check_actions::<DeviceAction>(&scenario.steps, "steps", &scenario.source)
}

/// Checks what fake-device reads of an instance-side scenario when it plays the device for it:
/// what its person does by itself (`peer.steps`).
pub fn check_as_peer_of(scenario: &Scenario) -> Result<(), LoadError> {
    if scenario.family == harness::family::Family::Lvmh {
        return crate::lvmh::check_as_peer_of(scenario);
    }
    check_actions::<DeviceAction>(scenario.peer_steps(), "peer.steps", &scenario.source)
}
