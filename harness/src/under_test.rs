//! The peer under test, as a run sees it when the user gave a way to start it (`--exec`) or
//! hooks for what only it can do (`--hooks`): the set-up done before it starts, the process, the
//! timed set-up and the other side's own steps done by hooks while the scenario runs, and what
//! the report says of them at the end. Each double says which actions its scenarios need and
//! what placeholders its peer gets; this part knows neither.

use std::sync::Arc;

use serde_json::Value;

use crate::engine::{Arranged, Cell, Hub, PeerProcess, RunOutcome};
use crate::hooks::{HookContext, Hooks};
use crate::process::{Placeholders, Sut, SutError, SutSpec};
use crate::scenario::{Spanned, Step};

/// What a peer under test is told of its run, as placeholders for its command and its hooks:
/// `{url}` (and `{ws_url}`, the link on it), `{port}` when there is one to listen on or dial,
/// `{token}`, `{tmp}`, `{root}`, and the cell (`{protocol}`, `{protocols}` the link protocols an
/// instance of the cell speaks, `{spec}`).
pub fn placeholders(
    url: &str,
    port: Option<u16>,
    token: &str,
    tmp: &std::path::Path,
    root: &str,
    cell: &Cell,
) -> Placeholders {
    let url = url.trim_end_matches('/');
    let mut placeholders = Placeholders::new();
    placeholders
        .set("url", url)
        .set(
            "ws_url",
            format!(
                "{}{}",
                url.replacen("http", "ws", 1),
                crate::lembas::LINK_PATH
            ),
        )
        .set("token", token)
        .set("tmp", tmp.display().to_string())
        .set("root", root)
        .set("protocol", cell.protocol().to_string())
        .set("protocols", protocols_of(cell.protocol()));
    if let Some(spec) = cell.spec() {
        placeholders.set("spec", spec.to_string());
    }
    if let Some(port) = port {
        placeholders.set("port", port.to_string());
    }
    placeholders
}

/// The link protocols an instance of a cell speaks, as its discovery would list them: the
/// protocol-1 cell is an instance that speaks only 1 (which closes a hello saying 2 with 4400),
/// the protocol-2 cell one that speaks both.
fn protocols_of(protocol: u8) -> String {
    (1..=protocol.max(1))
        .map(|p| p.to_string())
        .collect::<Vec<_>>()
        .join(",")
}

/// The peer under test, started (or not) for one run.
#[derive(Debug, Default)]
pub struct UnderTest {
    sut: Option<Arc<Sut>>,
    hooks: Option<Arc<HookContext>>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
    /// Why the run does not apply: a set-up action the project does not implement.
    not_applicable: Option<String>,
}

impl UnderTest {
    /// Does each `before` action that has a hook (set-up made before the peer runs: sessions
    /// deleted while it was offline), then starts `spec`, if given, with `placeholders`.
    /// Actions with no hook are left: the run does not apply to what they set up. A hook that
    /// fails is in the record, and the run ends as a scenario error.
    pub async fn start(
        spec: Option<SutSpec>,
        placeholders: Placeholders,
        hooks: Option<Arc<Hooks>>,
        before: &[(String, Value)],
        scratch: Option<tempfile::TempDir>,
    ) -> Result<UnderTest, SutError> {
        let hooks = hooks.map(|h| Arc::new(HookContext::new(h, placeholders.clone())));
        let mut under_test = UnderTest {
            sut: None,
            hooks,
            tasks: Vec::new(),
            not_applicable: None,
        };
        // A set-up that broke leaves nothing to judge, and one the project does not implement
        // does not apply: the peer is not started on either.
        match under_test.set_up(before).await {
            Ok(()) => {}
            Err(crate::engine::ActError::NotApplicable(why)) => {
                under_test.not_applicable = Some(why);
                return Ok(under_test);
            }
            Err(_) => return Ok(under_test),
        }
        under_test.sut = match spec {
            Some(spec) => Some(Sut::start(spec, placeholders, scratch).await?),
            None => None,
        };
        if let (Some(context), Some(sut)) = (&under_test.hooks, &under_test.sut) {
            context.set_sut(sut.clone());
        }
        Ok(under_test)
    }

    /// Does each of `actions` that has a hook, one after the other, before anything else of the
    /// run (actions with none are left: the run does not apply to what they set up). Stops at
    /// the first hook that fails (whose record the verdict shows), or that says the project
    /// does not implement its action (`ActError::NotApplicable`).
    pub async fn set_up(&self, actions: &[(String, Value)]) -> Result<(), crate::engine::ActError> {
        let Some(context) = &self.hooks else {
            return Ok(());
        };
        for (action, value) in actions {
            if context.has(action) {
                context.run(action, value).await?;
            }
        }
        Ok(())
    }

    /// Why the run does not apply, when a set-up action made before the peer started is one the
    /// project does not implement.
    pub fn set_up_not_applicable(&self) -> Option<String> {
        self.not_applicable.clone()
    }

    /// Why the set-up broke, when a hook of it failed: the run has no verdict of its own then.
    pub fn set_up_failed(&self) -> Option<String> {
        let runs = self.hooks.as_ref()?.runs();
        runs.iter()
            .find(|r| !r.ok && r.not_applicable.is_none())
            .map(|r| {
                format!(
                    "the set-up broke, so the peer was not judged: {r}: {}",
                    r.output
                )
            })
    }

    /// A peer whose process was started before the run (`sut`, when one was: fake-device starts
    /// an instance before it reads its discovery), with hooks that run with `placeholders` (the
    /// process's own, when there is one).
    pub fn adopt(
        sut: Option<Arc<Sut>>,
        hooks: Option<Arc<Hooks>>,
        placeholders: Placeholders,
    ) -> UnderTest {
        let placeholders = match &sut {
            Some(sut) => sut.placeholders().clone(),
            None => placeholders,
        };
        let hooks = hooks.map(|h| Arc::new(HookContext::new(h, placeholders)));
        if let (Some(context), Some(sut)) = (&hooks, &sut) {
            context.set_sut(sut.clone());
        }
        UnderTest {
            sut,
            hooks,
            tasks: Vec::new(),
            not_applicable: None,
        }
    }

    /// The link over the started process's standard input and output, when its spec said so
    /// (`link_on_stdio`); once.
    pub fn take_link(&self) -> Option<crate::transport::Connection> {
        self.sut.as_ref().and_then(|sut| sut.take_link())
    }

    /// The process started, if one was.
    pub fn sut(&self) -> Option<&Arc<Sut>> {
        self.sut.as_ref()
    }

    /// The process steps' process: the one started, else `fallback` (a peer something else
    /// runs, as the self-test's other double).
    pub fn process(&self, fallback: Option<Arc<dyn PeerProcess>>) -> Option<Arc<dyn PeerProcess>> {
        match &self.sut {
            Some(sut) => Some(sut.clone()),
            None => fallback,
        }
    }

    /// What is arranged for the peer: `base` (the user's `--arranged`), every action with a
    /// hook, and `by_the_double` when a process was started (set-up the double made itself,
    /// like the files of the root it gave the peer).
    pub fn arranged(&self, base: Arranged, by_the_double: &[&str]) -> Arranged {
        // A hook named like what the double does itself is never called: it arranges nothing.
        let mut more: Vec<String> = self
            .hooks
            .as_ref()
            .map(|h| h.names())
            .unwrap_or_default()
            .into_iter()
            .filter(|name| !by_the_double.contains(&name.as_str()))
            .collect();
        if self.sut.is_some() {
            more.extend(by_the_double.iter().map(|s| s.to_string()));
        }
        base.and(more)
    }

    /// Runs `steps` (acts and waits) in the background, each action through its hook; nothing
    /// without hooks.
    pub fn drive(&mut self, hub: &Arc<Hub>, cell: &Cell, name: &str, steps: Vec<Spanned<Step>>) {
        let Some(context) = &self.hooks else {
            return;
        };
        if let Some(task) = crate::hooks::drive(hub.clone(), *cell, context.clone(), name, steps) {
            self.tasks.push(task);
        }
    }

    /// Ends it: the background steps stop, the process stops (SIGTERM, then SIGKILL to its
    /// group), and the outcome gets the process's and the hooks' record.
    pub async fn finish(self, outcome: Option<&mut RunOutcome>) {
        for task in &self.tasks {
            task.abort();
        }
        if let Some(sut) = &self.sut {
            sut.stop().await;
        }
        if let Some(outcome) = outcome {
            outcome.process = self.sut.as_ref().map(|s| s.report());
            outcome.hooks = self.hooks.as_ref().map(|h| h.runs()).unwrap_or_default();
        }
    }
}
