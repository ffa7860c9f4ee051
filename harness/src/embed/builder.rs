//! What both doubles' embedding builders set the same way: the scenario and the spec of the run,
//! how long its verdict may take, the peer that restarts it, and the settings of the run both
//! doubles' options hold under the same names. The core holds the first; the setters of both
//! are written once, in [`crate::double_builder_setters`], which each builder expands with the
//! words of its own double.

use std::sync::Arc;
use std::time::Duration;

use super::in_process::InProcessPeer;
use super::plan::RunPlan;
use crate::engine::Cell;
use crate::lembas::Spec;
use crate::scenario::Scenario;

/// How long a builder's `start` waits for its double to be up.
pub const START_WITHIN: Duration = Duration::from_secs(10);

/// How long a handle's `verdict` waits for a scenario to end, unless the builder says.
pub const VERDICT_WITHIN: Duration = Duration::from_secs(300);

/// A double was given both a peer that restarts it and a scenario: a restarted run plays a
/// peer, and the scenario's steps would start over with each restart.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("a double restarted by its peer runs no scenario of its own")]
pub struct RestartedWithScenario;

/// What a double's builder holds beside the double's own options.
#[derive(Debug, Default)]
pub struct BuilderCore {
    /// The scenario to run.
    pub scenario: Option<Scenario>,
    /// The spec of the run, when the test says.
    pub spec: Option<Spec>,
    /// How long the verdict may take, when the test says.
    pub verdict_within: Option<Duration>,
    /// The peer that restarts the double, as `restart_peer` does a real process.
    pub restarts: Option<Arc<InProcessPeer>>,
}

impl BuilderCore {
    /// The settings, once sure the double can start as they ask (a double a peer restarts
    /// runs no scenario of its own).
    pub fn vetted(self) -> Result<BuilderCore, RestartedWithScenario> {
        match self.restarts.is_some() && self.scenario.is_some() {
            true => Err(RestartedWithScenario),
            false => Ok(self),
        }
    }

    /// The spec of the run: the test's, else `cell`'s, else the scenario's newest, else
    /// `otherwise`.
    pub fn spec_or(&self, cell: Option<&Cell>, otherwise: Spec) -> Spec {
        let matrix = self.scenario.as_ref().map(|s| &s.matrix);
        self.spec
            .or_else(|| cell.and_then(Cell::spec))
            .or_else(|| matrix.and_then(|m| m.spec.iter().filter_map(|s| s.parse().ok()).max()))
            .unwrap_or(otherwise)
    }

    /// How `double`'s run in `cell` is started and judged.
    pub fn plan(&self, double: &'static str, cell: Cell) -> RunPlan {
        RunPlan {
            double,
            cell,
            scenario: self.scenario.as_ref().map(|s| s.name.clone()),
            up_within: START_WITHIN,
            verdict_within: self.verdict_within.unwrap_or(VERDICT_WITHIN),
        }
    }
}

/// The control API's URL and token, once it listens at `addr`, for a builder that asked for it
/// with `token`.
pub fn control_url(
    addr: Option<std::net::SocketAddr>,
    token: Option<String>,
) -> Option<(String, String)> {
    addr.zip(token)
        .map(|(addr, token)| (format!("http://{addr}"), token))
}

/// A builder method's example, as a doc comment's text: the double of crate `krate` made by
/// `new`, given `call`, and started, in an async test that returns any error; `peer` (a
/// process the test gives), `scenario` (one it loaded) and `connection` (a pipe to an editor)
/// are at hand.
#[macro_export]
macro_rules! builder_example {
    ($krate:expr, $new:expr, $call:expr) => {
        concat!(
            "\n\n```no_run\n",
            "# use std::{sync::Arc, time::Duration};\n",
            "# use ",
            $krate,
            "::*;\n",
            "# async fn example(\n",
            "#     peer: Arc<dyn PeerProcess>,\n",
            "#     scenario: Scenario,\n",
            "#     connection: Connection,\n",
            "# ) -> Result<(), Box<dyn std::error::Error>> {\n",
            "let double = ",
            $new,
            "\n",
            "    ",
            $call,
            "\n",
            "    .start()\n",
            "    .await?;\n",
            "# Ok(()) }\n",
            "```"
        )
    };
}

/// The setters both doubles' builders have, expanded inside a builder's `impl`: the builder has
/// a `core` ([`BuilderCore`]) and `options` whose `patience`, `control`, `family`, `arranged`,
/// `process`, `end_at_finding`, `limits` and `misbehave` are the double's run settings. The
/// words are the double's: its crate and how a test makes its builder (for the examples), its
/// handle's and its builder's names, its side and the rules it binds, a rule it can break, its
/// error type (which an `UnknownMisbehaviour` converts into), its peer, an embedded scenario of
/// its side, what its patience waits for, and what it plays in lvmh.
#[macro_export]
macro_rules! double_builder_setters {
    (
        krate: $krate:literal,
        new: $new:literal,
        handle: $handle:literal,
        builder: $builder:literal,
        side: $side:expr,
        binds: $binds:expr,
        rule: $rule:literal,
        error: $error:ident,
        peer: $peer:literal,
        example: $example:literal,
        patience: $patience:literal,
        lvmh: $lvmh:literal $(,)?
    ) => {
        #[doc = concat!(
            "The spec version of the run (default: the scenario's newest, else 1.1.0).",
            $crate::builder_example!($krate, $new, ".spec(Spec::V1_0_0)")
        )]
        pub fn spec(mut self, spec: $crate::lembas::Spec) -> Self {
            self.core.spec = Some(spec);
            self
        }

        #[doc = concat!(
            "Runs a scenario: an embedded one by name (`\"", $example, "\"`, `\"", $example,
            ".yaml\"`) or a file.",
            $crate::builder_example!($krate, $new, concat!(".scenario(\"", $example, "\")?"))
        )]
        pub fn scenario(
            mut self,
            name_or_path: &str,
        ) -> Result<Self, $crate::scenario::LoadError> {
            self.core.scenario = Some($crate::scenario::catalogue::resolve(name_or_path, $side)?);
            Ok(self)
        }

        #[doc = concat!(
            "Runs a scenario already loaded (or written in the test with ",
            "[`harness::scenario::load_str`]).",
            $crate::builder_example!($krate, $new, ".with_scenario(scenario)")
        )]
        pub fn with_scenario(mut self, scenario: $crate::scenario::Scenario) -> Self {
            self.core.scenario = Some(scenario);
            self
        }

        #[doc = concat!(
            "Breaks a rule of the catalogue on purpose, to show that the ", $peer,
            "'s check catches it.",
            $crate::builder_example!($krate, $new, concat!(".misbehave(\"", $rule, "\")?"))
        )]
        pub fn misbehave(mut self, rule: &str) -> Result<Self, $error> {
            let mut rules: Vec<String> = self.options.misbehave.iter().cloned().collect();
            rules.push(rule.to_string());
            self.options.misbehave = $crate::rules::Misbehaviours::parse(&rules, $binds)?;
            Ok(self)
        }

        #[doc = concat!(
            "How long the ", $peer, " may take ", $patience, " (default 5 s).",
            $crate::builder_example!($krate, $new, ".patience(Duration::from_secs(2))")
        )]
        pub fn patience(mut self, patience: std::time::Duration) -> Self {
            self.options.patience = patience;
            self
        }

        #[doc = concat!(
            "How long [`", $handle, "::verdict`] waits for the scenario to end (default 5 \
             minutes).",
            $crate::builder_example!($krate, $new, ".verdict_within(Duration::from_secs(60))")
        )]
        pub fn verdict_within(mut self, within: std::time::Duration) -> Self {
            self.core.verdict_within = Some(within);
            self
        }

        #[doc = concat!(
            "Serves the control API on a free loopback port with a fresh token, for a program \
             in another language that the test starts ([`", $handle, "::control`] says where).",
            $crate::builder_example!($krate, $new, ".control()")
        )]
        pub fn control(mut self) -> Self {
            self.options.control = Some($crate::control::ControlConfig::loopback(0));
            self
        }

        #[doc = concat!(
            "The protocol family it plays: LLeMbas (the default) or lvmh's ", $lvmh, ".",
            $crate::builder_example!($krate, $new, ".family(Family::Lvmh)")
        )]
        pub fn family(mut self, family: $crate::family::Family) -> Self {
            self.options.family = family;
            self
        }

        #[doc = concat!(
            "What the ", $peer, "'s own test has set up, so the scenario's `needs_setup` steps \
             apply.",
            $crate::builder_example!($krate, $new, ".arranged(Arranged::Everything)")
        )]
        pub fn arranged(mut self, arranged: $crate::engine::Arranged) -> Self {
            self.options.arranged = arranged;
            self
        }

        #[doc = concat!(
            "The ", $peer, "'s process, for a scenario that restarts it (`restart_peer`) and \
             reads its output; [`", $builder, "::restarted_by`] is the usual way in a test.",
            $crate::builder_example!($krate, $new, ".peer_process(peer)")
        )]
        pub fn peer_process(
            mut self,
            process: std::sync::Arc<dyn $crate::engine::PeerProcess>,
        ) -> Self {
            self.options.process = Some(process);
            self
        }

        #[doc = concat!(
            "Ends the run at the first finding of this rule: what decides a misbehaviour case \
             of the self-test, so it need not wait out the scenario.",
            $crate::builder_example!($krate, $new, concat!(".end_at_finding(Some(\"", $rule, "\".into()))"))
        )]
        pub fn end_at_finding(mut self, rule: Option<String>) -> Self {
            self.options.end_at_finding = rule;
            self
        }

        #[doc = concat!(
            "How long a link may say nothing before it is closed as gone (the transport's \
             keep-alive).",
            $crate::builder_example!($krate, $new, ".silence(Duration::from_secs(30))")
        )]
        pub fn silence(mut self, silence: std::time::Duration) -> Self {
            self.options.limits.silence = silence;
            self
        }
    };
}
