//! One run as a page shows it: which double ran it, its scenario, its outcome and its messages.

use crate::engine::RunOutcome;
use crate::journal::Entry;

/// One run on a page.
#[derive(Debug, Clone, Copy)]
#[allow(missing_docs)] // fields whose names say it all go undocumented
pub struct RunPage<'a> {
    /// The double that ran it (`fake-instance`).
    pub double: &'a str,
    /// Where its scenario came from, for the heading.
    pub label: &'a str,
    pub outcome: &'a RunOutcome,
    /// Its messages (the journal's last ones).
    pub entries: &'a [Entry],
}
