//! The library behind the `harness` command, so its tests can drive the self-test directly.
#![warn(missing_docs)]

pub mod baseline;
pub mod in_process;
pub mod matrix;
pub mod run;
pub mod selftest;

/// The scenario format's JSON Schema, whole: the harness's model with the sections the doubles
/// type themselves (their settings, how the web UI answers cards, their actions) in place.
pub fn scenario_schema() -> String {
    use harness::scenario::schema::{Merge, Section, json_schema_with};
    json_schema_with(
        &[
            Section::of::<fake_instance::settings::InstanceSettings>("", "instance"),
            Section::of::<fake_device::settings::DeviceSettings>("", "device"),
        ],
        &[
            Merge::of::<fake_instance::actions::WebAction>("ActStep"),
            Merge::of::<fake_device::actions::DeviceAction>("ActStep"),
            Merge::of::<fake_instance::setup::DeviceSetup>("PeerSetup"),
            Merge::of::<fake_device::setup::InstanceSetup>("PeerSetup"),
        ],
    )
}

#[cfg(test)]
mod tests {
    /// fake-instance names what a device's terminal person types for `terminal_prompt_after`
    /// (hooks send it to a real CLI); fake-device types it in the self-test. Neither crate may
    /// depend on the other, so this crate holds them to one text.
    #[test]
    fn both_doubles_type_the_same_terminal_prompt() {
        assert_eq!(
            fake_instance::setup::TERMINAL_PROMPT,
            fake_device::TERMINAL_PROMPT
        );
    }
}
