//! How an embedded double's run is started and judged: its name and cell for the report, the
//! scenario whose verdict it owes, and how long it may take to come up and to end.

use std::time::Duration;

use crate::engine::Cell;

/// How a run is started and judged.
#[derive(Debug, Clone)]
pub struct RunPlan {
    /// `fake-instance` or `fake-device`, for reports.
    pub double: &'static str,
    /// The protocol and spec of the run.
    pub cell: Cell,
    /// The scenario's name, when one runs: its verdict is then owed.
    pub scenario: Option<String>,
    /// How long it may take to come up.
    pub up_within: Duration,
    /// How long a scenario may take to end once its verdict is asked for.
    pub verdict_within: Duration,
}
