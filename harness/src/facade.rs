//! The engine's types that the doubles' public APIs take and give, listed once. Each double
//! re-exports this list (`pub use harness::facade::*`), so a Rust test that embeds a double names
//! every type it meets (a report, a verdict, an error, a scenario's parts) through that double's
//! crate, and depends on it alone and tokio: the self-contained façade issue 35 asks for.
//!
//! What belongs here: a type that appears in a public signature, field or trait impl of either
//! double. Engine internals a double only uses inside stay out.

#[cfg(feature = "cli")]
pub use crate::cli::CliError;
pub use crate::control::ControlConfig;
pub use crate::double::OpenError;
pub use crate::embed::{Ended, InProcessPeer, NotUp, Ready, RestartedWithScenario};
pub use crate::engine::{
    ActError, Actor, Arranged, Cell, Failure, HandlerError, HubError, PeerProcess, RestartError,
    RuleJudgement, RunOutcome, SignalError, StepStatus, StepVerdict, TypedActor, Verdict,
};
pub use crate::family::Family;
pub use crate::finding::Finding;
pub use crate::hooks::{HookRun, Hooks, StepsError};
pub use crate::journal::{Direction, Entry as JournalEntry};
pub use crate::lembas::setup::LayOutError;
pub use crate::lembas::spec::UnknownSpec;
pub use crate::lembas::{Discovery, DiscoveryError, Spec};
pub use crate::lvmh::EnvelopeError;
pub use crate::lvmh::gitlab::GitLabError;
pub use crate::pattern::Vars;
pub use crate::process::{
    Exited, OutputLine, OutputLog, ProcessReport, Stream, Sut, SutError, SutSpec, TemplateError,
};
pub use crate::report::RunReport;
pub use crate::rules::{Binds, Misbehaviours, UnknownMisbehaviour};
pub use crate::scenario::{
    ActStep, AwaitStep, Captures, CheckStep, CloseStep, DialStep, Dur, ExpectCloseStep,
    ExpectExitStep, ExpectLinkStep, ExpectNoReconnectStep, ExpectNoneStep, ExpectOutputStep,
    ExpectReconnectStep, ExpectStep, Handler, LoadError, Matrix, Mode, NotifyStep, PeerSetup,
    ReplyStep, RequestStep, RestartPeerStep, Scenario, SelftestSettings, SendStep, Spanned,
    StartStep, Step, WaitForSignalStep, WhenStep,
};
pub use crate::shapes::ShapeWatch;
pub use crate::transport::outbox::Outbox;
pub use crate::transport::{Connection, FrameLimits, Incoming, Outgoing};
