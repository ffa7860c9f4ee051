//! The library behind the `harness` command, so its tests can drive the self-test directly.
#![warn(missing_docs)]

pub mod baseline;
pub mod coverage;
pub mod matrix;
pub mod pace;
pub mod record;
pub mod run;
pub mod selftest;
pub mod stall;

/// The scenario format's JSON Schema, whole: the harness's model with the sections the doubles
/// type themselves (their settings, how the web UI answers cards, their actions) in place.
pub fn scenario_schema() -> String {
    use harness::scenario::schema::{Merge, Section, json_schema_with};
    json_schema_with(
        &[
            Section::of::<fake_instance::InstanceSettings>("", "instance"),
            Section::of::<fake_device::DeviceSettings>("", "device"),
        ],
        &[
            Merge::of::<fake_instance::WebAction>("ActStep"),
            Merge::of::<fake_device::DeviceAction>("ActStep"),
            Merge::of::<harness::lembas::setup::DeviceSetup>("PeerSetup"),
            Merge::of::<harness::lembas::setup::InstanceSetup>("PeerSetup"),
        ],
    )
}
