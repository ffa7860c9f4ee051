//! The scenario engine: it sits between the links and the double's protocol model.
//!
//! Every event of every link passes through the [`Hub`]: the double's [`Behaviour`] observes it
//! (its monitors check the peer), expect steps find it in the [`inbox`], handlers answer the
//! requests they match, and what nobody takes goes to the double's default behaviour, or gets
//! `-32601`. The [`runner`] walks a scenario's steps over the hub, each with a deadline.
//!
//! The hub speaks JSON-RPC through [`crate::jsonrpc::Peer`] but knows no protocol rule: the
//! LLeMbas knowledge lives in the doubles' behaviours.

pub mod applicability;
pub mod console;
pub mod handlers;
pub mod hub;
pub mod inbox;
pub mod judged;
pub mod process;
pub mod progress;
pub mod runner;
pub mod verdict;

pub use applicability::{ActError, Applies, Arranged, Intent};
pub use handlers::HandlerError;
pub use hub::{Behaviour, Hub, HubError, LinkRecord};
pub use judged::{Judged, RuleJudgement};
pub use process::{PeerProcess, RestartError};
pub use progress::{Progress, RunEvent, SignalError};
pub use runner::{Actor, Cell, RunOutcome, Runner, TypedActor, Verdict};
pub use verdict::{Failure, StepStatus, StepVerdict};
