//! `--side instance|device` (`harness check`, `harness run`): which double runs the scenarios,
//! read by clap as a value of its own type instead of a string compared afterwards.

use clap::builder::PossibleValue;
use harness::scenario::Side;

/// The value of `--side`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SideArg {
    /// fake-instance runs them (`instance`).
    Instance,
    /// fake-device runs them (`device`).
    Device,
}

// Written out rather than derived: the derive makes each variant's doc comment the value's help,
// and `--help` would then list the values one a line instead of `[possible values: instance,
// device]`, which the command has always shown.
impl clap::ValueEnum for SideArg {
    fn value_variants<'a>() -> &'a [Self] {
        &[SideArg::Instance, SideArg::Device]
    }

    fn to_possible_value(&self) -> Option<PossibleValue> {
        Some(PossibleValue::new(match self {
            SideArg::Instance => "instance",
            SideArg::Device => "device",
        }))
    }
}

impl From<SideArg> for Side {
    fn from(side: SideArg) -> Side {
        match side {
            SideArg::Instance => Side::Instance,
            SideArg::Device => Side::Device,
        }
    }
}
