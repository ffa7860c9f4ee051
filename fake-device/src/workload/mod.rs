//! A load test's workload (`fake-device --fleet N --workload FILE`, a `*.workload.yaml`): how
//! many devices run when (k6-style stages), how each answers the server, and what each does by
//! itself at its own pace: share a session, type prompts at its terminal, drop its link and
//! redial, restart. Every device keeps its monitors on while it does.
//!
//! The parts: `format` is the file and its checks, `stages` the count of devices at a moment,
//! `drive` one device doing its activities.

mod drive;
mod format;
mod stages;

pub(crate) use drive::{RestartAsked, drive};
pub use format::{Activity, Stage, Workload, WorkloadAgent, WorkloadDevice};
pub use stages::target;
