//! fake-device as the lvmh plugin (`--family lvmh`, spec `lvmh-protocol-v1.md`): one pi
//! session whose plugin dials the daemon under test, streams a scripted agent's events, takes
//! its prompts, and redials forever; beside it, a fake browser for the web UI's side. It checks
//! the daemon's frames as they come, and runs an lvmh scenario's steps.
//!
//! The plugin is [`harness::lvmh::plugin`], which the fake daemon also runs for its spawns.

mod actions;
mod peer_error;
mod resume;
mod web_ui;

use std::sync::Arc;

use harness::double::{Course, Opened, SetUp};
use harness::finding::Finding;
use harness::lvmh::plugin::{FrameCheck, Plugin, PluginConfig};
use harness::lvmh::{AGENT_PATH, kinds, rules};
use harness::scenario::{Dur, Scenario, check_actions};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::run::start_error::StartError;

pub use actions::{PluginAction, PluginActor};
pub use peer_error::PeerSettingsError;

/// What a daemon-side lvmh scenario's `peer:` section asks the daemon under test to be set up
/// for: each is set-up its own test arranges (`--arranged`), else the run does not apply.
#[derive(Debug, Clone, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DaemonSetup {
    /// The daemon is pointed at fake-device's fake GitLab (`{gitlab_url}`).
    #[serde(default)]
    pub gitlab: bool,
    /// The daemon can spawn sessions in containers.
    #[serde(default)]
    pub spawns: bool,
}

/// What an lvmh scenario's `device:` section says of the fake plugin.
#[derive(Debug, Clone, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PluginSettings {
    /// The pi session's id (default: a fresh one each run).
    #[serde(default)]
    pub session: Option<String>,
    /// The first pause between two dials (default 250ms); it doubles up to 30s.
    #[serde(default)]
    pub backoff: Option<Dur>,
    /// The agent's reply (`{prompt}`: the prompt's text).
    #[serde(default)]
    pub reply: Option<String>,
    /// How many deltas the reply streams in (default 3).
    #[serde(default)]
    pub deltas: Option<usize>,
    /// The pause between two deltas (default 5ms).
    #[serde(default)]
    pub pace: Option<Dur>,
    /// A tool the agent calls before it answers, and how much it prints (`{name,
    /// output_bytes}`).
    #[serde(default)]
    pub tool: Option<ToolSetting>,
    /// The set-up that a restart of the plugin's process resumes its session (`pi
    /// --continue`); fake-device resumes whenever it has a state directory, so it only says
    /// what a scenario needs of a real plugin.
    #[serde(default)]
    pub resumes: bool,
    /// A web UI instead of a plugin: no plugin links, and a fake web UI opens the first
    /// online session the daemon lists (the peer of a fake daemon's scenario that judges a web
    /// UI: a reconnect subscribes again and fetches what it missed).
    #[serde(default)]
    pub web_ui: bool,
}

/// A tool call of the scripted agent.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ToolSetting {
    /// The tool's name.
    pub name: String,
    /// How many bytes it prints (numbered lines).
    pub output_bytes: usize,
}

impl ToolSetting {
    /// Its output: numbered lines, `output_bytes` long (at most 1 MiB).
    fn output(&self) -> String {
        let wanted = self.output_bytes.min(1 << 20);
        let mut output = String::with_capacity(wanted + 16);
        let mut line = 0;
        while output.len() < wanted {
            line += 1;
            output.push_str(&format!("output line {line}\n"));
        }
        output.truncate(wanted);
        output
    }
}

impl PluginSettings {
    /// The settings a daemon scenario's `peer:` section gives its plugin (beside `steps`).
    pub fn of_peer(scenario: &Scenario) -> Result<Self, PeerSettingsError> {
        let setup = scenario
            .peer
            .as_ref()
            .map(|p| p.value.setup.clone())
            .unwrap_or_default();
        Ok(serde_json::from_value(Value::Object(setup))?)
    }

    fn of(
        section: Option<&harness::scenario::Spanned<Value>>,
        file: &str,
    ) -> Result<Self, harness::scenario::LoadError> {
        match section {
            Some(section) => {
                harness::scenario::read_section(section.value.clone(), "device", file, section)
            }
            None => Ok(PluginSettings::default()),
        }
    }
}

/// The checks a plugin makes of every daemon frame, whatever the scenario.
fn daemon_checks(
    session: String,
    plugin_last_seq: Arc<dyn Fn() -> u64 + Send + Sync>,
) -> FrameCheck {
    Arc::new(move |kind, frame| {
        let mut found = Vec::new();
        // The envelope binds both directions: the daemon's frames to the plugin carry it too.
        if matches!(kind, kinds::WELCOME | kinds::PROMPT | kinds::ABORT) {
            match harness::lvmh::Envelope::read(frame) {
                Err(why) => found.push(Finding::new(
                    rules::DAEMON_ENVELOPE,
                    format!("a `{kind}` frame without its envelope: {why}"),
                )),
                Ok(envelope) if envelope.version != harness::lvmh::VERSION => {
                    found.push(Finding::new(
                        rules::DAEMON_ENVELOPE,
                        format!("a `{kind}` frame says `v` {}", envelope.version),
                    ));
                }
                Ok(envelope) if envelope.session_id != session => found.push(Finding::new(
                    rules::DAEMON_ENVELOPE,
                    format!(
                        "a `{kind}` frame for session `{}` on the link of `{session}`",
                        envelope.session_id
                    ),
                )),
                Ok(_) => {}
            }
        }
        if let Some(finding) =
            harness::lvmh::gitlab::token_shown(frame, &format!("a `{kind}` frame"))
        {
            found.push(finding);
        }
        match kind {
            kinds::WELCOME => match frame.get("lastSeq").and_then(Value::as_u64) {
                None => found.push(Finding::new(
                    rules::WELCOME_LAST_SEQ,
                    "welcome has no whole-number `lastSeq`",
                )),
                Some(last) if last > plugin_last_seq() => found.push(Finding::new(
                    rules::WELCOME_LAST_SEQ,
                    format!(
                        "welcome says lastSeq {last}, but the plugin has given out only {}",
                        plugin_last_seq()
                    ),
                )),
                Some(_) => {}
            },
            kinds::PROMPT => {
                let has = |key: &str| frame.get(key).is_some_and(Value::is_string);
                if !has("promptId") || !has("message") {
                    found.push(Finding::new(
                        rules::PROMPT_ROUTED,
                        "a prompt frame without a string `promptId` and `message`",
                    ));
                }
            }
            _ => {}
        }
        found
            .into_iter()
            .map(|f| f.with_detail(harness::size::cut_clone(frame).to_string()))
            .collect()
    })
}

/// What a plugin's run is given (fake-device's options, as far as they concern it).
pub(crate) struct PluginPlan {
    /// The daemon's base URL (`http://host:port`).
    pub instance: String,
    /// `LVMH_TOKEN`.
    pub token: String,
    /// Where to write the journal.
    pub journal: Option<std::path::PathBuf>,
    /// The plugin rules to break.
    pub misbehave: harness::rules::Misbehaviours,
    /// Each link's frame limits.
    pub limits: harness::transport::FrameLimits,
    /// What the person at the session does by itself, when no scenario runs.
    pub steps: Vec<harness::scenario::Spanned<harness::scenario::Step>>,
    /// The plugin's settings, when no scenario gives them.
    pub plugin: Option<PluginSettings>,
    /// The daemon as a process (for `restart_peer`).
    pub process: Option<Arc<dyn harness::engine::PeerProcess>>,
    /// End the scenario at the first finding under this rule.
    pub end_at_finding: Option<String>,
    /// Which of a scenario's `peer:` set-up something arranges for the daemon under test.
    pub arranged: harness::engine::Arranged,
    /// Where the pi session is kept across restarts (none: a new session each run).
    pub state_dir: Option<std::path::PathBuf>,
}

/// Checks what the plugin reads of a daemon-side lvmh scenario beyond the format: its `device:`
/// settings and its steps' actions.
pub(crate) fn check_scenario(scenario: &Scenario) -> Result<(), harness::scenario::LoadError> {
    PluginSettings::of(scenario.device.as_ref(), &scenario.source)
        .map_err(|e| harness::scenario::LoadError::unlocated(&scenario.source, e.to_string()))?;
    if let Some(peer) = &scenario.peer {
        let setup = serde_json::Value::Object(peer.value.setup.clone());
        harness::scenario::read_section::<DaemonSetup, _>(setup, "peer", &scenario.source, peer)?;
    }
    check_actions::<PluginAction>(&scenario.steps, "steps", &scenario.source)
}

/// Checks what the plugin reads of a plugin-side lvmh scenario when it plays the plugin for it:
/// its `peer:` settings and its own steps.
pub(crate) fn check_as_peer_of(scenario: &Scenario) -> Result<(), harness::scenario::LoadError> {
    PluginSettings::of_peer(scenario)
        .map_err(|e| harness::scenario::LoadError::unlocated(&scenario.source, e.to_string()))?;
    check_actions::<PluginAction>(scenario.peer_steps(), "peer.steps", &scenario.source)
}

/// How long a plugin asked to stop waits for its `bye` to go out.
const BYE_WITHIN: std::time::Duration = std::time::Duration::from_secs(1);

/// Runs fake-device as the lvmh plugin; `started` gets its progress once the plugin runs.
pub(crate) async fn run_started(
    options: PluginPlan,
    scenario: Option<Scenario>,
    started: impl FnOnce(Arc<harness::engine::Progress>),
    shutdown: impl std::future::Future<Output = ()>,
) -> Result<harness::embed::Ended, StartError> {
    // A stop asked for (SIGTERM, SIGINT, the handle let go) is pi shutting down: it says `bye`.
    let asked_to_stop = std::sync::atomic::AtomicBool::new(false);
    let shutdown = async {
        shutdown.await;
        asked_to_stop.store(true, std::sync::atomic::Ordering::Relaxed);
    };
    harness::double::check_steps::<PluginAction>(
        scenario.as_ref(),
        &options.steps,
        "the plugin's own steps",
    )?;
    let settings = match &scenario {
        Some(s) => PluginSettings::of(s.device.as_ref(), &s.source)?,
        None => options.plugin.clone().unwrap_or_default(),
    };
    let opened = Opened::open(options.journal.as_deref(), false)?;
    let base = options.instance.trim_end_matches('/').to_string();
    let url = format!("{}{AGENT_PATH}", base.replacen("http", "ws", 1));
    let resumed = resumed(&options, &settings);
    let session = match &resumed {
        Some(saved) => saved.session["id"].as_str().unwrap_or_default().to_string(),
        None => settings.session.clone().unwrap_or_else(|| {
            let [a, b] = [harness::random::u64(), harness::random::u64()];
            format!("pi-{a:016x}{b:016x}")
        }),
    };
    let tmp = opened.tmp.path();
    let mut config = PluginConfig::new(&url, &options.token, &session, &tmp.display().to_string());
    configure(&mut config, &options, &settings, resumed.as_ref());
    // Open for the whole run, closed when it ends.
    let _web_ui = settings.web_ui.then(|| {
        web_ui::WebUi::start(web_ui::WebUiConfig {
            base: base.clone(),
            token: options.token.clone(),
            limits: options.limits,
            misbehave: options.misbehave.clone(),
        })
    });
    let mut vars = harness::engine::Cell::Lvmh.builtin_vars(&base, &options.token, tmp);
    vars.set("link_url", json!(url));
    vars.set("session", json!(session));
    set_gitlab_vars(&mut vars, scenario.as_ref())?;
    let last_seq: Arc<std::sync::OnceLock<std::sync::Weak<Plugin>>> = Arc::default();
    let seen = last_seq.clone();
    let check = daemon_checks(
        session.clone(),
        Arc::new(move || {
            seen.get()
                .and_then(std::sync::Weak::upgrade)
                .map_or(u64::MAX, |p| p.last_seq())
        }),
    );
    let (journal, findings) = (opened.journal.clone(), opened.findings.clone());
    let plugin = Plugin::start(
        config,
        journal,
        findings,
        vars,
        scenario.as_ref(),
        Some(check),
    )?;
    let _ = last_seq.set(Arc::downgrade(&plugin));
    let hub = plugin.hub().clone();
    started(hub.progress().clone());
    let actor = Arc::new(PluginActor {
        plugin: plugin.clone(),
        base,
        token: options.token.clone(),
        http: harness::transport::http_client(),
        // The daemon's rules bind the serving side: every answer the fake browser gets is
        // checked against their shapes.
        shapes: harness::lvmh::shape_watch(harness::rules::Binds::Instance, &Default::default()),
    });
    // What the daemon under test must be able to do (spawn containers): the keys of the
    // `peer:` set-up.
    let set_up = match &scenario {
        Some(scenario) => SetUp::unarranged(harness::engine::applicability::unarranged(
            &harness::double::needs_as_keyed(scenario),
            &options.arranged,
        )),
        None => SetUp::Ready,
    };
    let outcome = Course::new("fake-device", hub, harness::engine::Cell::Lvmh, actor)
        .with_process(options.process.clone())
        .ending_at_finding(options.end_at_finding.clone())
        .own_steps("the plugin's own steps", options.steps.clone(), false)
        .run(scenario.as_ref(), set_up, shutdown)
        .await;
    match asked_to_stop.load(std::sync::atomic::Ordering::Relaxed) {
        true => plugin.quit_and_wait(BYE_WITHIN).await,
        false => plugin.kill(),
    }
    if let Some(dir) = &options.state_dir {
        let saved = resume::Saved {
            session: plugin.snapshot(),
            last_seq: plugin.last_seq(),
        };
        if let Err(e) = resume::save(dir, &saved) {
            tracing::warn!("the pi session could not be kept in {}: {e}", dir.display());
        }
    }
    Ok(opened.ended(outcome))
}

/// The pi session a restart resumes, left in the state directory. A session of its own each
/// run otherwise, as pi's are (a daemon under test keeps the sessions of the runs before, and
/// several runs may share it).
fn resumed(options: &PluginPlan, settings: &PluginSettings) -> Option<resume::Saved> {
    options
        .state_dir
        .as_deref()
        .and_then(resume::load)
        // Misbehaving: a restarted pi says hello for a session of its own, not the one it left.
        .filter(|_| {
            !options
                .misbehave
                .breaks_way(rules::SEQ_SESSION_LIFETIME, "new_session")
        })
        .filter(|saved| {
            settings
                .session
                .as_deref()
                .is_none_or(|id| saved.session["id"] == id)
        })
}

/// The plugin as the options and the scenario's settings say: what it breaks, its limits, the
/// session it resumes, its backoff and its scripted agent.
fn configure(
    config: &mut PluginConfig,
    options: &PluginPlan,
    settings: &PluginSettings,
    resumed: Option<&resume::Saved>,
) {
    config.misbehave = options.misbehave.clone();
    config.limits = options.limits;
    if let Some(saved) = resumed {
        config.session = saved.session.clone();
        // A plugin told to break the rule numbers the resumed session from 1 again.
        if !options.misbehave.breaks(rules::SEQ_SESSION_LIFETIME) {
            config.first_seq = saved.last_seq;
        }
    }
    if let Some(backoff) = settings.backoff {
        config.backoff = backoff.0;
    }
    if let Some(reply) = &settings.reply {
        config.agent.reply = reply.clone();
    }
    if let Some(deltas) = settings.deltas {
        config.agent.deltas = deltas.clamp(1, 10_000);
    }
    if let Some(pace) = settings.pace {
        config.agent.pace = pace.0;
    }
    if let Some(tool) = &settings.tool {
        config.agent.tool = Some((tool.name.clone(), tool.output()));
    }
    config.dial = !settings.web_ui;
}

/// The GitLab a daemon under test is pointed at (served when a scenario wants it), and what it
/// accepts.
fn set_gitlab_vars(
    vars: &mut harness::pattern::Vars,
    scenario: Option<&Scenario>,
) -> Result<(), StartError> {
    let wants_gitlab = scenario
        .and_then(|s| s.peer.as_ref())
        .is_some_and(|p| p.value.setup.contains_key("gitlab"));
    if wants_gitlab {
        let url = harness::lvmh::gitlab::url()?;
        vars.set("gitlab_url", json!(url));
    }
    vars.set("gitlab_token", json!(harness::lvmh::gitlab::TOKEN));
    vars.set("gitlab_user", json!(harness::lvmh::gitlab::USERNAME));
    Ok(())
}
