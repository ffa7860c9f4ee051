//! The library behind the `harness` command, so its tests can drive the self-test directly.
#![warn(missing_docs)]

pub mod baseline;
pub mod coverage;
pub mod error;
pub mod explore;
pub mod matrix;
pub mod merge;
pub mod pace;
pub mod record;
pub mod run;
pub mod scenarios;
pub mod selftest;
pub mod side_arg;
pub mod stall;

pub use error::{Error, RecordError};
pub use side_arg::SideArg;

/// A scenario's `instance:` section: fake-instance's settings, or the fake lvmh daemon's.
#[derive(schemars::JsonSchema)]
#[serde(untagged)]
#[allow(dead_code)]
enum InstanceSection {
    /// A LLeMbas scenario's.
    Lembas(Box<fake_instance::InstanceSettings>),
    /// An lvmh scenario's (`family: lvmh`).
    Lvmh(fake_instance::lvmh::DaemonSettings),
}

/// A scenario's `device:` section: fake-device's settings, or the fake lvmh plugin's.
#[derive(schemars::JsonSchema)]
#[serde(untagged)]
#[allow(dead_code)]
enum DeviceSection {
    /// A LLeMbas scenario's.
    Lembas(Box<fake_device::DeviceSettings>),
    /// An lvmh scenario's (`family: lvmh`).
    Lvmh(fake_device::lvmh::PluginSettings),
}

/// The workload format's JSON Schema (`*.workload.yaml`, `fake-device --fleet N --workload
/// FILE`), for editors.
pub fn workload_schema() -> String {
    let schema = schemars::schema_for!(fake_device::workload::Workload);
    serde_json::to_string_pretty(&schema).unwrap_or_default() + "\n"
}

/// The scenario format's JSON Schema, whole: the harness's model with the sections the doubles
/// type themselves (their settings, how the web UI answers cards, their actions) in place, for
/// both families.
pub fn scenario_schema() -> String {
    use harness::scenario::schema::{Merge, Section, json_schema_with};
    json_schema_with(
        &[
            Section::of::<InstanceSection>("", "instance"),
            Section::of::<DeviceSection>("", "device"),
        ],
        &[
            Merge::of::<fake_instance::WebAction>("ActStep"),
            Merge::of::<fake_device::DeviceAction>("ActStep"),
            Merge::of::<fake_instance::lvmh::DaemonAction>("ActStep"),
            Merge::of::<fake_device::lvmh::PluginAction>("ActStep"),
            Merge::of::<harness::lembas::setup::DeviceSetup>("PeerSetup"),
            Merge::of::<harness::lembas::setup::InstanceSetup>("PeerSetup"),
            Merge::of::<fake_device::lvmh::PluginSettings>("PeerSetup"),
            Merge::of::<fake_device::lvmh::DaemonSetup>("PeerSetup"),
        ],
    )
}
