//! fake-instance: plays LLeMbas, the web server, for a real LLeMbas CLI's tests.
//!
//! It serves discovery and the HTTP API a device uses ([`http`]), accepts device links behind
//! their tokens, acts as the ACP client on each link, and checks every rule that binds a device
//! as the device talks. With a scenario it runs the scenario's steps over those links and ends
//! with its verdict; without one it stays up as a simulated instance, driven from the test.
//!
//! In a Rust test, start it with [`FakeInstance::builder`]:
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use fake_instance::FakeInstance;
//!
//! let instance = FakeInstance::builder().protocol(2).scenario("reattach")?.start().await?;
//! // Start the CLI under test with instance.url() and instance.token(), then:
//! # let root = tempfile::tempdir()?;
//! # let _device = fake_device::FakeDevice::builder(instance.url()).root(root.path()).start().await?;
//! instance.verdict().await.assert_passed();
//! # Ok(())
//! # }
//! ```
//!
//! The command-line double (`fake-instance --scenario …`) is [`run`] with [`Options`].
#![warn(missing_docs)]

mod actions;
mod applicability;
mod attach;
mod chat_menu;
mod chats;
mod check;
#[cfg(feature = "cli")]
pub mod cli;
mod client;
mod configure;
mod embedding;
pub mod http;
mod link_rules;
pub mod lvmh;
mod mention;
mod methods;
mod mode_watch;
mod modes;
mod monitor;
mod plan_watch;
mod run;
mod server;
mod settings;
mod stdio_watch;
mod web_terminal;

pub use actions::{
    AttachFile, ComposerAsk, ConfigureChat, MentionFile, OpenChat, OpenTerminal, PickFolder,
    RenameChat, ResizeTerminal, RewindChat, SendMessage, SetMode, TerminalInput, WebAction,
};
pub use check::{check_as_peer_of, check_scenario, peer_cards};
pub use embedding::{FakeInstance, InstanceBuilder};
pub use http::{
    HTTP_CHAT, HTTP_DISCOVERY, HTTP_INSTANCE, HTTP_MCP, HTTP_MODELS, HTTP_PERSONALIZATION,
    HTTP_USAGE,
};
pub use run::{DEFAULT_TOKEN, Finished, HTTP_LINK, Options, StartError, StdioLink, run, run_with};
pub use settings::{
    CardPolicy, ClientKind, InstanceSettings, LinkKind, PermissionPolicy, PlanPolicy,
    QuestionPolicy, speaks_stdio,
};

// The engine's types that this crate's API takes and gives (listed in `harness::facade`), so
// that a test needs this crate alone (and tokio).
pub use harness::facade::*;
