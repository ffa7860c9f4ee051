//! The engine both LLeMbas doubles are built on.
//!
//! Layers, bottom up; each knows only the ones below it:
//! - [`transport`]: whole text messages over WebSocket (server and client) or stdio.
//! - [`duration`]: durations as scenarios, hooks and `sut:` write them.
//! - [`journal`], [`finding`]: what happened, and what the peer did wrong.
//! - [`heavy`]: the work of one big message done without holding up the runtime's other tasks.
//! - [`pattern`]: partial JSON matching, placeholders, captures and `${var}` substitution.
//! - [`jsonrpc`]: JSON-RPC 2.0 correlation over a connection.
//! - [`scenario`], [`engine`], [`report`]: the scenario language, its runner, its reports.
//! - [`process`]: the system under test as a child process (`--exec`): placeholders, output,
//!   stops and restarts of its whole process group.
//! - [`hooks`], [`under_test`]: what only the real peer can do, done by the user's commands or
//!   requests, and the peer under test as one run sees it (its process, its set-up).
//! - [`control`]: the control API, an HTTP API on either double for test programs in any
//!   language.
//! - [`embed`]: a double's run inside a Rust test, on the test's runtime, and its verdict.
//! - [`facade`]: the types above that the doubles' APIs show, which each double re-exports.
//! - [`rules`]: the catalogue of protocol rules scenarios and monitors cite.
//! - [`lembas`]: what both doubles know of the LLeMbas protocol (spec versions, capabilities,
//!   discovery), shared so the two sides cannot disagree on facts.
//! - [`lvmh`]: the same for the second protocol family, lvmh v1 (envelopes, paths, limits), and
//!   its plugin, which both doubles run.
#![warn(missing_docs)]

#[cfg(feature = "cli")]
pub mod cli;
pub mod control;
pub mod double;
pub mod duration;
pub mod embed;
pub mod engine;
pub mod exit;
pub mod facade;
pub mod family;
pub mod finding;
pub mod free_port;
pub mod heavy;
pub mod hooks;
pub mod journal;
pub mod jsonrpc;
pub mod lembas;
pub mod load;
pub mod lvmh;
pub mod pattern;
pub mod process;
pub mod random;
pub mod report;
pub mod rules;
pub mod scenario;
pub mod shapes;
pub mod size;
pub mod transport;
pub mod under_test;

pub use exit::Exit;
