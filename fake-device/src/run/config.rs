//! A device's settings resolved once for its run, from the options and a scenario's `device`
//! section: what every run opens (journal, store), its limits, how its sessions behave, and
//! which capabilities it lists.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use harness::double::Opened;
use harness::lembas::Spec;
use harness::rules::ids;

use crate::account;
use crate::agent::AgentConfig;
use crate::instance_model::ModelClient;
use crate::limits::Limits;
use crate::registry::SessionsConfig;
use crate::settings::{AgentKind, DeviceSettings};
use crate::store::Store;

use super::options::Options;
use super::start_error::StartError;

/// The capabilities to list: those both the command line and the scenario keep (`None`: no
/// reduction).
pub(crate) fn reduced(
    options: Option<&[String]>,
    scenario: Option<&[String]>,
) -> Option<Vec<String>> {
    match (options, scenario) {
        (None, None) => None,
        (Some(only), None) | (None, Some(only)) => Some(only.to_vec()),
        (Some(a), Some(b)) => Some(a.iter().filter(|c| b.contains(c)).cloned().collect()),
    }
}

/// What every run starts from: its journal, findings and directory, its spec, and the store.
pub(crate) struct Basics {
    pub(crate) opened: Opened,
    pub(crate) spec: Spec,
    pub(crate) state_dir: PathBuf,
    pub(crate) store: Store,
}

impl Basics {
    pub(crate) fn open(options: &Options) -> Result<Basics, StartError> {
        let tap = options.recorder.clone().map(|recorder| {
            Arc::new(crate::figures::DeviceTap::new(recorder)) as Arc<dyn harness::journal::Tap>
        });
        let opened = Opened::open_tapped(options.journal.as_deref(), options.lean, tap)?;
        if let Some(recorder) = options.recorder.clone() {
            opened
                .findings
                .tally_into(Arc::new(move |_| recorder.count("findings", 1)));
        }
        // The store lives in --state-dir, so a restart finds its sessions; else in this run's
        // own temporary directory.
        let state_dir = options
            .state_dir
            .clone()
            .unwrap_or_else(|| opened.tmp.path().join("state"));
        let store = Store::open(&state_dir).map_err(|source| StartError::State {
            path: state_dir.clone(),
            source,
        })?;
        if options
            .misbehave
            .breaks_way(ids::DEVICE_TURNS_PERSIST, "last_only")
        {
            // Misbehaving: only the newest finished turn of each session outlives a restart.
            store
                .keep_last_finished_only()
                .map_err(|source| StartError::State {
                    path: state_dir.clone(),
                    source,
                })?;
        }
        Ok(Basics {
            opened,
            spec: options.cell.lembas_spec(),
            state_dir,
            store,
        })
    }
}

/// The device's limits, from the options: its roots, the folders in them left untrusted, its
/// most permissive mode.
pub(crate) fn device_limits(options: &Options) -> Limits {
    let mut limits = Limits::new(&options.roots).with_untrusted(&options.untrusted);
    if let Some(mode) = &options.max_mode {
        limits = limits.with_max_mode(mode);
    }
    // Misbehaving: a config that says nothing of `remote.require_trust` requires none.
    if options.misbehave.breaks(ids::DEVICE_LIMITS_TRUST_DEFAULT) {
        limits.require_trust = false;
    }
    // Misbehaving: trust said to be required, and an untrusted project opened all the same.
    if options
        .misbehave
        .breaks_way(ids::DEVICE_LIMITS_TRUST_DEFAULT, "unenforced")
    {
        limits.untrusted.clear();
    }
    limits
}

/// How the sessions behave, from the options and the scenario's `device` section.
pub(crate) fn sessions_config(
    options: &Options,
    settings: &DeviceSettings,
    agent: &AgentConfig,
    http: &reqwest::Client,
) -> SessionsConfig {
    let m = &options.misbehave;
    SessionsConfig {
        spec: agent.spec,
        capabilities: agent.capabilities(),
        misbehave: options.misbehave.clone(),
        step_delay: settings
            .step_delay
            .map(|d| d.0)
            .or(options.step_delay)
            .unwrap_or(Duration::from_millis(50)),
        connection: agent.connection.clone(),
        stdio: agent.stdio,
        account: account::Account {
            base: options.instance.clone(),
            token: options.token.clone(),
            http: http.clone(),
            writes_whole: m.breaks(ids::DEVICE_PERSONALIZATION_PARTIAL),
            ignores_enabled: m.breaks(ids::DEVICE_PERSONALIZATION_USE),
            invents_presets: m.breaks(ids::DEVICE_PERSONALIZATION_UNKNOWN_PRESET),
            ways: account::Ways {
                no_enabled: m.breaks_way(ids::DEVICE_PERSONALIZATION_PARTIAL, "no_enabled"),
                unused_when_enabled: m
                    .breaks_way(ids::DEVICE_PERSONALIZATION_USE, "unused_when_enabled"),
                account_too: m
                    .breaks_way(ids::DEVICE_PERSONALIZATION_LOCAL_OTHERWISE, "account_too"),
                unknown_as_custom: m
                    .breaks_way(ids::DEVICE_PERSONALIZATION_UNKNOWN_PRESET, "as_custom"),
            },
            // Misbehaving: the local settings are never used.
            local: options
                .local_personalization
                .clone()
                .filter(|_| !m.breaks(ids::DEVICE_PERSONALIZATION_LOCAL_OTHERWISE)),
        },
        model: (settings.agent.unwrap_or(options.agent) == AgentKind::Model).then(|| ModelClient {
            base: options.instance.clone(),
            token: options.token.clone(),
            http: http.clone(),
            index_less_is_zero: m.breaks(ids::DEVICE_MODEL_TOOLCALL_INDEX),
            any_kind: m.breaks(ids::DEVICE_MODELS_CHAT_ONLY),
            index_less_new: m.breaks_way(ids::DEVICE_MODEL_TOOLCALL_INDEX, "new_call"),
            no_model: m.breaks_way(ids::DEVICE_MODEL_SERVED_ID, "no_model"),
            first_listed: m.breaks_way(ids::DEVICE_MODELS_CHAT_ONLY, "asks_first_listed"),
            recorder: options.recorder.clone(),
        }),
        approval_timeout: settings
            .approval_timeout
            .map(|d| d.0)
            .or(options.approval_timeout)
            .unwrap_or(Duration::from_secs(30)),
        terminal_answers_after: options.terminal.answers_after,
        library_local: options.library_local,
        scripts: settings
            .scripts
            .iter()
            .chain(&options.scripts)
            .cloned()
            .collect(),
    }
}
