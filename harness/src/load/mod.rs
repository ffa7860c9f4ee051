//! Load figures (issue 37): what a fleet measures while it drives a server, and how it says it.
//!
//! A [`Recorder`] takes latencies, counts and levels from every device of a process;
//! [`Figures`] keep them (latencies in HdrHistograms) with a [`Timeline`] of the same, and add
//! exactly, so a [`LoadReport`] per shard merges into the one report of the whole run. The
//! report is printed as a k6-style [`summary`], written as JSON or as an HTML page
//! ([`html`]), judged against [`Threshold`]s, and served live as OpenMetrics
//! ([`openmetrics`]). Nothing here knows the protocol: the names are the caller's.

mod figures;
pub mod html;
pub mod openmetrics;
mod recorder;
mod report;
mod show;
mod summary;
mod threshold;
mod timeline;
#[cfg(feature = "cli")]
mod write;

pub use figures::{Figures, Latency, MAX_NAMES, OTHER};
pub use recorder::Recorder;
pub use report::{EXAMPLES_KEPT, FORMAT, Findings, LoadReport, MergeError};
pub use show::{show_duration, show_number};
pub use summary::summary;
pub use threshold::{Judged, Op, Stat, Threshold};
pub use timeline::{Point, Span, Timeline};
#[cfg(feature = "cli")]
pub use write::write_reports;
