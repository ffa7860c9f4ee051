//! The scenario model: what a YAML scenario file says, as Rust types.
//!
//! Every struct refuses unknown keys, so a typo is an error with its line, never a silently
//! ignored step. The doc comments here become the JSON Schema's descriptions, which editors show
//! while a person types: they are written for scenario authors.
//!
//! The parts of the format, by file: the scenario and its top-level settings here, `matrix`,
//! `peer` and `handler` for their sections, `step` for the step and its groups, and the step
//! kinds' types grouped by what they work on (`sending`, `expecting`, `links`, `off_link`,
//! `peer_process`). The JSON Schema follows field and variant order, not files, so moving a
//! type between these files does not change it.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;
use serde_saphyr::Spanned;

use crate::duration::Dur;

mod captures;
mod expecting;
mod handler;
mod links;
mod matrix;
mod off_link;
mod peer;
mod peer_process;
mod sending;
mod step;

pub use captures::Captures;
pub use expecting::{CheckStep, ExpectNoneStep, ExpectStep};
pub use handler::Handler;
pub use links::{
    CloseStep, DialStep, ExpectCloseStep, ExpectLinkStep, ExpectNoReconnectStep,
    ExpectReconnectStep,
};
pub use matrix::Matrix;
pub use off_link::{ActStep, WaitForSignalStep};
pub use peer::PeerSetup;
pub use peer_process::{ExpectExitStep, ExpectOutputStep, RestartPeerStep};
pub use sending::{AwaitStep, NotifyStep, ReplyStep, RequestStep, SendStep, StartStep};
pub use step::{Step, WhenStep};

/// The deadline of a step that waits, when neither it nor its scenario gives one.
pub const DEFAULT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

/// A scenario: what one double does and checks in one run against a real peer.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    /// A short name, unique in its folder (`negotiate`).
    pub name: String,
    /// One line: what the scenario proves about the peer.
    pub about: String,
    /// The protocol family it speaks: `lembas` (the default) or `lvmh` (whose scenarios live in
    /// `scenarios/lvmh/`, and whose steps send and expect whole frames: `send` and `expect`
    /// with `message`, no requests).
    #[serde(default)]
    pub family: crate::family::Family,
    /// The catalogue rules (ids from `conformance/rules/`) this scenario checks.
    #[serde(default)]
    pub rules: Vec<String>,
    /// Capabilities the scenario relies on beyond those its steps' messages show (a method, a
    /// block, a `_meta.lembas` field, a result field: the spec's capability table derives
    /// those). A peer that did not list one makes the run not applicable.
    #[serde(default)]
    pub needs: Vec<String>,
    /// Capabilities whose fields the scenario sends on purpose whether or not the peer listed
    /// them (to judge that an unlisted field is ignored): sending one to a peer that did not
    /// list it keeps the run applicable.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sends_unlisted: Vec<String>,
    /// The protocol and spec cells the scenario applies to; `harness selftest` runs each.
    #[serde(default)]
    pub matrix: Matrix,
    /// The default deadline of every step that waits (default 5s).
    #[serde(default)]
    pub timeout: Option<Dur>,
    /// Variables available as `${name}` from the start, beside the built-ins: `protocol`,
    /// `spec`, `url`, `token`, `tmp`, and `link_url` (fake-instance) or `link_protocol`
    /// (fake-device, after each dial).
    #[serde(default)]
    pub vars: BTreeMap<String, Value>,
    /// What `harness selftest` changes when the other double plays the peer: `vars` giving
    /// windows that exist for a real peer (a server's restart, a redial) the length a double
    /// that answers in milliseconds needs. Runs against a real peer never read it.
    #[serde(default)]
    pub selftest: Option<SelftestSettings>,
    /// How fake-instance behaves by default in this scenario (only in scenarios it runs). Its
    /// keys are fake-instance's own (it reads them when the run starts; `harness check` too).
    #[serde(default)]
    #[schemars(with = "Option<Value>")]
    pub instance: Option<Spanned<Value>>,
    /// How fake-device behaves by default in this scenario (only in scenarios it runs). Its keys
    /// are fake-device's own (it reads them when the run starts; `harness check` too).
    #[serde(default)]
    #[schemars(with = "Option<Value>")]
    pub device: Option<Spanned<Value>>,
    /// What the peer under test must be given, and what the other double does by itself in the
    /// self-test. A real peer's test must set it up alike (`--arranged` says it did).
    #[serde(default)]
    #[schemars(with = "Option<PeerSetup>")]
    pub peer: Option<Spanned<PeerSetup>>,
    /// The system under test, started by the double for the run (`--exec` on the command line
    /// overrides it): a command, or `{exec, env, cwd, grace}`.
    #[serde(default)]
    pub sut: Option<crate::process::SutSpec>,
    /// Rules that answer the peer's matching requests instead of the default behaviour.
    #[serde(default)]
    #[schemars(with = "Vec<Handler>")]
    pub handlers: Vec<Spanned<Handler>>,
    /// What to do and expect, in order.
    #[schemars(with = "Vec<Step>")]
    pub steps: Vec<Spanned<Step>>,
    /// The file it was read from (or its embedded name), for errors found after loading.
    #[serde(skip)]
    #[schemars(skip)]
    pub source: String,
}

/// The `selftest:` section of a scenario.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SelftestSettings {
    /// Variables of `vars:` given another value in the self-test (each must be one of them).
    #[serde(default)]
    pub vars: BTreeMap<String, Value>,
}

impl Scenario {
    /// What the other double does by itself (`peer.steps`).
    pub fn peer_steps(&self) -> &[Spanned<Step>] {
        self.peer.as_ref().map_or(&[], |p| &p.value.steps)
    }

    /// Every set-up the peer under test needs, by name: `own` (what the double running the
    /// scenario reads from its `peer:` set-up), then each action of `peer.steps`, once each.
    pub fn set_up_needs(&self, own: Vec<String>) -> Vec<String> {
        let mut needs = own;
        if let Some(peer) = &self.peer {
            for action in peer.value.actions() {
                if !needs.contains(&action) {
                    needs.push(action);
                }
            }
        }
        needs
    }

    /// A scenario of nothing but these steps (a double's own steps, run by its runner).
    pub fn of_steps(name: &str, steps: Vec<Spanned<Step>>) -> Scenario {
        Scenario {
            name: name.into(),
            about: String::new(),
            family: crate::family::Family::Lembas,
            rules: Vec::new(),
            needs: Vec::new(),
            sends_unlisted: Vec::new(),
            matrix: Matrix::default(),
            timeout: Some(Dur(std::time::Duration::from_secs(30))),
            vars: BTreeMap::new(),
            selftest: None,
            instance: None,
            device: None,
            peer: None,
            sut: None,
            handlers: Vec::new(),
            steps,
            source: name.into(),
        }
    }
}

/// Whether the double does a thing by itself or leaves it to the steps.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// The double does it, as the real peer would.
    #[default]
    Auto,
    /// The steps do it.
    Manual,
}
