//! A scenario's `peer:` set-up: what the other side must be given for the scenario to run. A
//! fake-instance scenario says what the device under test needs ([`DeviceSetup`]), a fake-device
//! scenario what the instance needs ([`InstanceSetup`]). The double that runs the scenario reads
//! it to judge and to name the set-up a real peer's test must arrange; the other double reads it
//! to play that peer. Kept here so the two read one type.

mod device;
mod instance;

pub use device::{
    DeviceSetup, LayOutError, LibraryChoice, LocalPersonalization, MaxMode, RootsNeed,
    TERMINAL_PROMPT,
};
pub use instance::{InstanceSetup, PersonalizationSetup};
