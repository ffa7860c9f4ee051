//! fake-device: plays LLeMbas CLI, the device, for a real LLeMbas web server's tests.
//!
//! It reads discovery before every dial and links with its token, acts as the ACP agent on the
//! link (a session store, turns with de-duplication, cards, files, commands, attachments,
//! terminals), and checks every rule that binds an instance as the instance talks. With a
//! scenario it runs the scenario's steps over the link and ends with its verdict; without one it
//! stays linked as a simulated device, driven from the test.
//!
//! In a Rust test, start it with [`FakeDevice::builder`], pointed at the instance under test:
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use fake_device::FakeDevice;
//! # let instance = fake_instance::FakeInstance::start().await?;
//! # let url = instance.url();
//!
//! let root = tempfile::tempdir()?;
//! let device = FakeDevice::builder(url).root(root.path()).scenario("negotiate")?.start().await?;
//! device.verdict().await.assert_passed();
//! # Ok(())
//! # }
//! ```
//!
//! The command-line double (`fake-device --scenario …`) is [`run`] with [`Options`];
//! `fake-device serve --stdio` is [`serve_stdio`].
#![warn(missing_docs)]

mod account;
mod actions;
mod agent;
mod answers;
mod attachments;
mod cards;
mod check;
#[cfg(feature = "cli")]
pub mod cli;
mod client_watch;
mod command_set;
mod completion;
mod dial;
mod embedding;
mod events;
mod figures;
mod files;
mod fleet;
mod instance_model;
mod instance_start;
mod library;
mod limits;
mod link_watch;
pub mod lvmh;
mod mentions;
mod methods;
mod model_ref;
mod monitor;
mod open_session;
mod peer_of;
mod plan;
mod registry;
mod review;
mod run;
mod scripted_turn;
mod scripts;
mod sessions;
mod settings;
mod store;
mod stream;
mod system_prompt;
mod terminal_card;
mod terminal_watch;
mod terminals;
mod turns;
pub mod workload;

pub use actions::{
    CardAnswer, DeviceAction, HttpCall, LibraryCall, LimitsChange, PersonalizationChange,
};
pub use check::{check_as_peer_of, check_scenario};
#[cfg(feature = "cli")]
use dial::probe_protocol;
pub use dial::{ProtocolChoice, Stopped};
pub use embedding::{DeviceBuilder, FakeDevice};
pub use fleet::{
    FleetCount, FleetDevice, FleetFinished, FleetPlan, FleetTokens, INDEX_PLACEHOLDER, Shard,
    run_fleet, run_fleet_plan,
};
pub use instance_start::InstanceStartError;
#[cfg(feature = "cli")]
use run::last_words;
pub use run::{
    Finished, Options, PROTOCOL_MISMATCH_SENTENCE, StartError, TERMINAL_PROMPT, TerminalPlay, run,
    run_with, serve_stdio, start_instance,
};
pub use scripts::{
    AgentScript, Regex, Say, ScriptAsk, ScriptPermission, ScriptStep, ScriptSubmitPlan, ScriptTool,
    StopReason,
};
pub use settings::{AgentKind, DeviceSettings};

// The engine's types that this crate's API takes and gives (listed in `harness::facade`), so
// that a test needs this crate alone (and tokio).
pub use harness::facade::*;
