//! `fake-device serve --stdio`: plain ACP to an editor on standard input and output, the
//! spec's stdio mode, with no instance and no link of the LLeMbas kind.

use std::future::Future;
use std::time::Duration;

use crate::agent::{AgentConfig, AgentModel};
use crate::limits::Limits;
use crate::sessions::Sessions;
use crate::settings::DeviceSettings;

use super::config::{Basics, sessions_config};
use super::finished::Finished;
use super::options::Options;
use super::start_error::StartError;

/// Serves plain ACP to an editor over `connection` (stdin and stdout for
/// `fake-device serve --stdio`, one message a line), until the editor closes its end or
/// `shutdown`. The spec's stdio mode: no hello, `limits: null`, none of the `_lembas`
/// notifications and no question or plan cards (the editor is a plain ACP client), any existing
/// directory a project. `options.instance` is used only by `--agent model`.
pub async fn serve_stdio(
    options: Options,
    connection: harness::transport::Connection,
    shutdown: impl Future<Output = ()>,
) -> Result<Finished, StartError> {
    let settings = DeviceSettings::default();
    let Basics {
        opened,
        spec,
        store,
        ..
    } = Basics::open(&options)?;
    let agent = AgentConfig {
        spec,
        only: None,
        connection: "lembas".into(),
        misbehave: options.misbehave.clone(),
        patience: options.patience,
        terminal: false,
        terminal_home: None,
        terminal_integration: true,
        stdio: true,
        initialize_after: Duration::ZERO,
    };
    let http = harness::transport::http_client();
    let sessions = Sessions::new(
        store,
        Limits::local(),
        sessions_config(&options, &settings, &agent, &http),
    );
    let model = AgentModel::new(agent, sessions);
    model.set_next_protocol(2);
    let vars = options
        .cell
        .builtin_vars(&options.instance, &options.token, opened.tmp.path());
    let hub = opened.hub(model, None, vars)?;
    // No step reads what the editor sends: none of it is kept.
    hub.keep_nothing();
    // Misbehaving: a line of its own log on standard output, before any message.
    if options
        .misbehave
        .breaks(harness::rules::ids::DEVICE_STDIO_FRAMING)
    {
        let _ = connection.outgoing.send(harness::transport::Outgoing::Text(
            "fake-device: serving plain ACP on stdio".into(),
        ));
    }
    let mut connection = connection;
    if options
        .misbehave
        .breaks_way(harness::rules::ids::DEVICE_STDIO_FRAMING, "pretty")
    {
        // Misbehaving: every message pretty-printed, over several lines.
        let (relay, mut from_hub) = harness::transport::outbox();
        let to_editor = std::mem::replace(&mut connection.outgoing, relay);
        tokio::spawn(async move {
            while let Some(item) = from_hub.recv().await {
                let bytes = harness::transport::outbox::Weighed::bytes(&item);
                from_hub.written(bytes);
                // Each line of the pretty text written as a line of its own.
                let items = match item {
                    harness::transport::Outgoing::Text(text) => {
                        serde_json::from_str::<serde_json::Value>(&text)
                            .ok()
                            .and_then(|v| serde_json::to_string_pretty(&v).ok())
                            .unwrap_or(text)
                            .lines()
                            .map(|line| harness::transport::Outgoing::Text(line.to_string()))
                            .collect()
                    }
                    other => vec![other],
                };
                if items.into_iter().any(|item| to_editor.send(item).is_err()) {
                    break;
                }
            }
        });
    }
    let peer = hub.attach(connection);
    tokio::select! {
        _ = peer.closed() => {}
        () = shutdown => peer.close(harness::transport::CLOSE_NORMAL, "fake-device is done"),
    }
    Ok(Finished::of(opened.ended(None), None))
}
