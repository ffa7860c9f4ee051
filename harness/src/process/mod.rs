//! The system under test as a process the double starts (`--exec`, a scenario's `sut:`): the
//! placeholders that tell it where the double is, its bounded output, its stops and restarts,
//! and the guarantee that none of its processes outlives the run.

mod child;
mod output;
mod spec;
mod template;

pub(crate) use child::kill_group;
pub use child::{Exited, ProcessReport, RunRecord, Sut, SutError};
pub use output::{DEFAULT_KEPT_BYTES, MAX_LINE_BYTES, OutputLine, OutputLog, Stream};
pub use spec::{DEFAULT_GRACE, SutSpec};
pub use template::{Placeholders, Quoting, TemplateError, shell_quote};
