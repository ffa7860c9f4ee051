//! What a LLeMbas device's run is made of, before it dials: the agent (its spec, the
//! capabilities it lists, its terminals), its sessions on the store, the hub its links come to,
//! the dialer that links it and keeps it linked, the person's hands, and the control API over
//! them.

use std::sync::Arc;
use std::time::Duration;

use harness::double::Opened;
use harness::engine::Hub;
use harness::scenario::Scenario;

use crate::actions::DeviceActor;
use crate::agent::{AgentConfig, AgentModel};
use crate::dial::DeviceDialer;
use crate::sessions::Sessions;
use crate::settings::DeviceSettings;

use super::config::{Basics, device_limits, reduced, sessions_config};
use super::options::Options;
use super::start_error::StartError;

/// A device's run, wired: what it records, its links' hub, its dialer and the person's hands.
pub(crate) struct Wired {
    pub(crate) opened: Opened,
    pub(crate) hub: Arc<Hub>,
    pub(crate) dialer: Arc<DeviceDialer>,
    pub(crate) actor: Arc<DeviceActor>,
}

impl Wired {
    /// The device the options and the scenario's `device` section describe.
    pub(crate) fn new(
        options: &Options,
        scenario: Option<&Scenario>,
        settings: &DeviceSettings,
        basics: Basics,
    ) -> Result<Wired, StartError> {
        let Basics {
            opened,
            spec,
            state_dir,
            store,
        } = basics;
        let agent = AgentConfig {
            spec,
            only: reduced(
                options.capabilities.as_deref(),
                settings.capabilities.as_deref(),
            ),
            connection: "lembas".into(),
            misbehave: options.misbehave.clone(),
            patience: options.patience,
            terminal: settings.terminal || options.remote_terminal,
            terminal_home: options.terminal_home.clone(),
            terminal_integration: options.terminal_integration,
            stdio: false,
            initialize_after: settings
                .initialize_after
                .map(|d| d.0)
                .or(options.initialize_after)
                .unwrap_or_default(),
        };
        let http = harness::transport::http_client();
        let sessions = Sessions::new(
            store,
            device_limits(options),
            sessions_config(options, settings, &agent, &http),
        );
        let model = AgentModel::new(agent, sessions.clone());
        let vars = options
            .cell
            .builtin_vars(&options.instance, &options.token, opened.tmp.path());
        let hub = opened.hub(model.clone(), scenario, vars)?;
        if options.lean {
            hub.keep_nothing();
        }
        let dialer = Arc::new(DeviceDialer {
            instance: options.instance.clone(),
            token: options.token.clone(),
            protocol: options.protocol,
            hub: hub.clone(),
            model: model.clone(),
            http,
            limits: options.limits,
            relinking: std::sync::atomic::AtomicBool::new(false),
            dialling: tokio::sync::Mutex::new(()),
            first_allowed: std::sync::Mutex::new(None),
            cached_allowed: std::sync::Mutex::new(None),
        });
        let actor = Arc::new(DeviceActor {
            sessions,
            model,
            hub: hub.clone(),
            dialer: dialer.clone(),
            scratch: state_dir,
        });
        Ok(Wired {
            opened,
            hub,
            dialer,
            actor,
        })
    }

    /// Links the device and keeps it linked, redialling as the scenario's `device` section
    /// paces it, until it stops for good; boxed, so what a fleet's idle device holds is the
    /// state it waits in.
    pub(crate) fn linking(
        &self,
        options: &Options,
        settings: &DeviceSettings,
    ) -> std::pin::Pin<Box<impl Future<Output = crate::dial::Stopped> + Send + 'static>> {
        let initial = settings
            .redial_initial
            .map(|d| d.0)
            .unwrap_or(Duration::from_millis(250));
        let cap = settings
            .redial_cap
            .map(|d| d.0)
            .unwrap_or(Duration::from_secs(30));
        let patience = options.patience;
        let dialer = self.dialer.clone();
        Box::pin(async move { dialer.keep_linked(initial, cap, patience).await })
    }

    /// The control API, when asked for (`--control`), served until its server is dropped.
    pub(crate) async fn serve_control(
        &self,
        options: &Options,
        scenario: Option<&Scenario>,
    ) -> Result<Option<harness::control::ControlServer>, StartError> {
        let Some(config) = &options.control else {
            return Ok(None);
        };
        let snapshot = self.actor.sessions.clone();
        let target = harness::control::ControlTarget {
            double: "fake-device",
            cell: options.cell,
            scenario: scenario.map(|s| s.name.clone()),
            hub: self.hub.clone(),
            actor: self.actor.clone(),
            peer_state: Arc::new(move || snapshot.registry().snapshot()),
        };
        let served = Box::pin(harness::control::serve(config, target))
            .await
            .map_err(|source| StartError::Control {
                addr: config.listen,
                source,
            })?;
        Ok(Some(served))
    }
}
