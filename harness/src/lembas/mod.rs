//! What both doubles know of the LLeMbas link, kept in one place so the two sides cannot
//! disagree on a fact: spec versions and their capability sets, discovery, paths, close codes.

pub mod answers;
pub mod capabilities;
pub mod discovery;
pub mod methods;
pub mod setup;
pub mod spec;
pub mod turn_model;

pub use discovery::{Discovery, DiscoveryError};
pub use spec::Spec;

/// Where the device dials (spec, the opening paragraph).
pub const LINK_PATH: &str = "/api/devices/link";

/// Where discovery is served (spec, "Versions and discovery").
pub const DISCOVERY_PATH: &str = "/.well-known/lembas.json";

/// The close code of an instance that does not speak the protocol the device's hello said.
pub const CLOSE_PROTOCOL_MISMATCH: u16 = 4400;

/// The highest link protocol of this suite.
pub const LATEST_PROTOCOL: u8 = 2;
