//! `harness record`: sits between a real device and a real instance, passes everything through
//! unchanged, and writes the journal and a draft scenario for each double, so a team can start
//! from a real session instead of writing a scenario by hand.

pub mod draft;
mod proxy;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use harness::journal::Journal;

use crate::RecordError;

pub use proxy::{MESSAGES_KEPT, Recorder};

/// `harness record`'s arguments.
#[derive(Debug, Clone, clap::Args)]
pub struct RecordArgs {
    /// Where devices dial and read discovery: point the device under test here.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:0")]
    pub listen: SocketAddr,
    /// The instance everything is passed on to (`http://host:port`).
    #[arg(long, value_name = "URL")]
    pub upstream: String,
    /// Where the journal and the drafts go.
    #[arg(long, value_name = "DIR", default_value = "recording")]
    pub out: PathBuf,
    /// The drafts' scenario name (and file names: NAME.instance.yaml, NAME.device.yaml).
    #[arg(long, default_value = "recorded")]
    pub name: String,
    /// Stop after this long (default: at Ctrl-C).
    #[arg(long = "for", value_name = "DURATION", value_parser = humantime::parse_duration)]
    pub duration: Option<std::time::Duration>,
}

/// A recording in progress.
pub struct Recording {
    /// Where it listens.
    pub addr: SocketAddr,
    recorder: Arc<Recorder>,
    server: tokio::task::JoinHandle<()>,
    out: PathBuf,
    name: String,
}

/// What a finished recording wrote.
#[derive(Debug)]
pub struct Written {
    /// Every message and HTTP exchange, as JSON lines.
    pub journal: PathBuf,
    /// The draft fake-instance runs against a device.
    pub instance: PathBuf,
    /// The draft fake-device runs against an instance.
    pub device: PathBuf,
    /// How many link messages were recorded.
    pub messages: usize,
}

impl Recording {
    /// Binds `listen` and passes everything on to `upstream`, journaling into `out`.
    pub async fn start(
        listen: SocketAddr,
        upstream: &str,
        out: &Path,
        name: &str,
    ) -> Result<Recording, RecordError> {
        std::fs::create_dir_all(out).map_err(|source| RecordError::MakeDir {
            path: out.to_path_buf(),
            source,
        })?;
        let journal_path = out.join("journal.jsonl");
        let journal =
            Arc::new(
                Journal::to_file(&journal_path).map_err(|source| RecordError::Write {
                    path: journal_path.clone(),
                    source,
                })?,
            );
        let recorder = Recorder::new(upstream, journal)?;
        let cannot_listen = |source| RecordError::Listen {
            addr: listen,
            source,
        };
        let listener = tokio::net::TcpListener::bind(listen)
            .await
            .map_err(cannot_listen)?;
        let addr = listener.local_addr().map_err(cannot_listen)?;
        let app =
            proxy::router(recorder.clone()).into_make_service_with_connect_info::<SocketAddr>();
        let server = tokio::spawn(async move {
            if let Err(e) = axum::serve(listener, app).await {
                tracing::warn!("the recording proxy stopped: {e}");
            }
        });
        Ok(Recording {
            addr,
            recorder,
            server,
            out: out.to_path_buf(),
            name: name.to_string(),
        })
    }

    /// Its URL: where the device under test reads discovery and dials.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The link messages so far.
    pub fn messages(&self) -> Vec<draft::Recorded> {
        self.recorder.messages()
    }

    /// Stops passing things on, and writes the drafts beside the journal.
    pub fn finish(self) -> Result<Written, RecordError> {
        self.server.abort();
        let messages = self.recorder.messages();
        let mut note = String::new();
        if self.recorder.dropped() > 0 {
            note = format!(
                "# Only the first {MESSAGES_KEPT} link messages are drafted ({} more are in the journal).\n",
                self.recorder.dropped()
            );
        }
        let instance = self.out.join(format!("{}.instance.yaml", self.name));
        let device = self.out.join(format!("{}.device.yaml", self.name));
        for (path, scenario, double) in [
            (
                &instance,
                draft::for_instance(&self.name, &messages),
                "fake-instance",
            ),
            (
                &device,
                draft::for_device(&self.name, &messages),
                "fake-device",
            ),
        ] {
            let yaml = serde_saphyr::to_string(&scenario).map_err(RecordError::Yaml)?;
            let text = format!(
                "# Drafted by `harness record` for {double}: review it (`harness check` this file),\n\
                 # name the rules it checks, and loosen what may differ on another run.\n{note}{yaml}"
            );
            std::fs::write(path, text).map_err(|source| RecordError::Write {
                path: path.clone(),
                source,
            })?;
        }
        Ok(Written {
            journal: self.out.join("journal.jsonl"),
            instance,
            device,
            messages: messages.len(),
        })
    }
}

/// Runs `harness record` until Ctrl-C or `--for`.
pub async fn run(args: &RecordArgs) -> Result<Written, RecordError> {
    let recording = Recording::start(args.listen, &args.upstream, &args.out, &args.name).await?;
    println!(
        "recording {} -> {} (point the device at the first; Ctrl-C to stop)",
        recording.url(),
        args.upstream
    );
    match args.duration {
        Some(duration) => tokio::select! {
            () = tokio::time::sleep(duration) => {}
            () = harness::cli::shutdown_signal() => {}
        },
        None => harness::cli::shutdown_signal().await,
    }
    recording.finish()
}
