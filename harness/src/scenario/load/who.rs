//! Who a scenario is for: the double that runs it, and who reads it (a run against a peer, or
//! the self-test), which decides its variables' values.

use std::path::Path;

/// Which double runs a scenario.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// fake-instance runs it (it checks a device).
    Instance,
    /// fake-device runs it (it checks an instance).
    Device,
}

impl Side {
    /// The double's name.
    pub fn double(self) -> &'static str {
        match self {
            Side::Instance => "fake-instance",
            Side::Device => "fake-device",
        }
    }

    /// The scenario folder this double's scenarios live in.
    pub fn folder(self) -> &'static str {
        match self {
            Side::Instance => "instance",
            Side::Device => "device",
        }
    }

    /// Guesses the side from a path (`scenarios/instance/x.yaml`).
    pub fn from_path(path: &Path) -> Option<Side> {
        let parent = path.parent()?.file_name()?.to_str()?;
        match parent {
            "instance" => Some(Side::Instance),
            "device" => Some(Side::Device),
            _ => None,
        }
    }
}

/// Who a scenario is loaded for, which decides the values of its variables.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reader {
    /// A run against a peer: the variables as `vars:` gives them.
    Peer,
    /// `harness selftest`: `selftest.vars` over `vars:`.
    Selftest,
}
