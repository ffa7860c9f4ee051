//! `fake-device --fleet N`: many simulated devices in one process, their tokens, their count
//! printed as they link, and how the fleet exits.

use std::net::SocketAddr;
use std::sync::Arc;

use harness::Exit;
use harness::cli::CliError;
use harness::load::{LoadReport, Recorder, Threshold};

use super::args::Cli;

/// `fake-device --fleet N`: the devices' tokens, then the fleet run until a signal or the end of
/// `--for`, or until every device stopped by itself; its figures served while it runs
/// (`--metrics`), summed up and judged at its end.
pub(super) fn fleet(
    cli: &Cli,
    count: usize,
    template: crate::Options,
    runtime: &tokio::runtime::Runtime,
) -> Result<Exit, CliError> {
    let tokens = fleet_tokens(cli, count)?;
    let shard = shard_of(cli, std::env::var(JOB_INDEX).ok().as_deref())?;
    let devices = tokens.devices(shard);
    let device_count = devices.len();
    let made_root = match &cli.common.state_dir {
        Some(_) => None,
        None => Some(
            harness::random::temp_dir()
                .map_err(|e| CliError::Internal(format!("cannot make a state directory: {e}")))?,
        ),
    };
    let state_root = cli
        .common
        .state_dir
        .clone()
        .or_else(|| made_root.as_ref().map(|d| d.path().to_path_buf()))
        .unwrap_or_default();
    let plan = workload_plan(cli, count, device_count)?;
    let plan_said = plan.as_ref().map(|p| {
        let name = p.workload.name.clone().unwrap_or_else(|| {
            cli.workload
                .as_deref()
                .map(|path| path.display().to_string())
                .unwrap_or_default()
        });
        (name, p.seed)
    });
    let recorder = Arc::new(Recorder::new());
    let mut template = template;
    template.recorder = Some(recorder.clone());
    if let Some(plan) = &plan {
        apply_device_settings(&mut template, &plan.workload.device);
    }
    let run_for = cli.run_for.map(|d| d.0);
    let finished = runtime.block_on(async {
        if let Some(address) = cli.metrics {
            serve_metrics(address, recorder.clone()).await?;
        }
        // Inside the runtime: the signal handlers need its reactor.
        let signal = harness::cli::shutdown_signal();
        let shutdown = async move {
            match run_for {
                Some(run_for) => {
                    tokio::select! {
                        () = signal => {}
                        () = tokio::time::sleep(run_for) => {}
                    }
                }
                None => signal.await,
            }
        };
        Ok::<_, CliError>(
            crate::run_fleet_plan(
                template,
                devices,
                state_root,
                plan,
                print_fleet_count(),
                FLEET_COUNT_EVERY,
                shutdown,
            )
            .await,
        )
    })?;
    drop(made_root);
    let mut report = load_report(&recorder, device_count, shard, &finished, &cli.thresholds);
    if let Some(plan) = &plan_said {
        report.workload = Some(plan.0.clone());
        report.seed = Some(plan.1);
    }
    eprint!("{}", harness::load::summary(&report));
    if let Err(e) = harness::load::write_reports(&cli.common.reports, &report) {
        eprintln!("error: cannot write a report: {e}");
        return Ok(Exit::Internal);
    }
    let exit = fleet_exit(&finished);
    let crossed = report.thresholds.iter().filter(|t| t.crossed).count();
    Ok(match exit {
        Exit::Passed if crossed > 0 => {
            eprintln!("fake-device: {crossed} thresholds crossed");
            Exit::ThresholdCrossed
        }
        exit => exit,
    })
}

/// Where a Kubernetes Indexed Job gives each pod its index, from 0.
pub(super) const JOB_INDEX: &str = "JOB_COMPLETION_INDEX";

/// The slice of the fleet this process runs: `--shard K/N`, or with `--shards N` the one
/// `job_index` (the value of [`JOB_INDEX`], from 0) names, else the whole fleet.
pub(super) fn shard_of(cli: &Cli, job_index: Option<&str>) -> Result<crate::Shard, CliError> {
    let Some(of) = cli.shards else {
        return Ok(cli.shard.unwrap_or(crate::Shard::WHOLE));
    };
    let of = of as usize;
    let index = job_index.ok_or_else(|| {
        CliError::Usage(format!(
            "--shards {of}: {JOB_INDEX} is not set (a Kubernetes Indexed Job sets it); say --shard K/{of} elsewhere"
        ))
    })?;
    match index.trim().parse::<usize>() {
        Ok(index) if index < of => Ok(crate::Shard {
            index: index + 1,
            of,
        }),
        _ => Err(CliError::Usage(format!(
            "--shards {of}: {JOB_INDEX} is `{index}`, not a number from 0 to {}",
            of - 1
        ))),
    }
}

/// The workload of `--workload FILE`, with its seed (`--seed`, else its own, else 1); a usage
/// error when it does not load or its stages ask for more devices than `--fleet` has.
/// Its stages count the whole fleet: this process, running `here` of its `count` devices, runs
/// that part of each stage's.
fn workload_plan(
    cli: &Cli,
    count: usize,
    here: usize,
) -> Result<Option<crate::FleetPlan>, CliError> {
    let Some(path) = &cli.workload else {
        return Ok(None);
    };
    let workload =
        crate::workload::Workload::load(path).map_err(|e| CliError::Usage(e.to_string()))?;
    if workload.most_devices() > count {
        return Err(CliError::Usage(format!(
            "{}: a stage runs {} devices, but --fleet has {count}",
            path.display(),
            workload.most_devices()
        )));
    }
    let seed = cli.common.seed.or(workload.seed).unwrap_or(1);
    Ok(Some(crate::FleetPlan {
        workload: Arc::new(workload),
        seed,
        part: here as f64 / count.max(1) as f64,
    }))
}

/// A workload's `device:` settings over the command line's.
fn apply_device_settings(template: &mut crate::Options, device: &crate::workload::WorkloadDevice) {
    if let Some(agent) = device.agent {
        template.agent = match agent {
            crate::workload::WorkloadAgent::Echo => crate::AgentKind::Echo,
            crate::workload::WorkloadAgent::Model => crate::AgentKind::Model,
        };
    }
    if let Some(delay) = device.step_delay {
        template.step_delay = Some(delay.0);
    }
    if let Some(timeout) = device.approval_timeout {
        template.approval_timeout = Some(timeout.0);
    }
    template
        .scripts
        .splice(0..0, device.scripts.iter().cloned());
}

/// Serves the fleet's figures as OpenMetrics at `address` (bound before the fleet starts, so a
/// port in use is said at once).
async fn serve_metrics(address: SocketAddr, recorder: Arc<Recorder>) -> Result<(), CliError> {
    let listener = tokio::net::TcpListener::bind(address)
        .await
        .map_err(|e| CliError::Usage(format!("--metrics {address}: cannot listen: {e}")))?;
    let bound = listener.local_addr().unwrap_or(address);
    eprintln!("fake-device: metrics at http://{bound}/metrics");
    let render =
        Arc::new(move || harness::load::openmetrics::render(&recorder.snapshot(), METRICS_PREFIX));
    tokio::spawn(async move {
        if let Err(e) = harness::load::openmetrics::serve(listener, render).await {
            tracing::warn!("the metrics endpoint stopped: {e}");
        }
    });
    Ok(())
}

/// What every family a fleet serves is named with (`lembas_fleet_latency_seconds`).
pub(super) const METRICS_PREFIX: &str = "lembas_fleet";

/// The fleet's report: its figures, what its devices found, its thresholds judged.
fn load_report(
    recorder: &Recorder,
    devices: usize,
    shard: crate::Shard,
    finished: &crate::FleetFinished,
    thresholds: &[Threshold],
) -> LoadReport {
    let figures = recorder.snapshot();
    let started = recorder.started_unix_ms();
    let mut report = LoadReport {
        format: harness::load::FORMAT.to_string(),
        tool: "fake-device".to_string(),
        started_unix_ms: started,
        ended_unix_ms: started + recorder.elapsed().as_millis() as u64,
        devices: devices as u64,
        workload: None,
        seed: None,
        shards: vec![format!("{}/{}", shard.index, shard.of)],
        figures,
        findings: harness::load::Findings {
            count: finished.findings as u64,
            examples: finished
                .examples
                .iter()
                .map(|(device, finding)| format!("device {device}: {finding}"))
                .collect(),
        },
        thresholds: Vec::new(),
    };
    let seconds = report.seconds();
    report.thresholds = thresholds
        .iter()
        .map(|t| t.judge(&report.figures, seconds))
        .collect();
    report
}

/// How often a fleet looks at how many of its devices are linked (a line is printed when the
/// count changed).
const FLEET_COUNT_EVERY: std::time::Duration = std::time::Duration::from_millis(100);

/// The fleet's tokens: `--tokens FILE` (as many as --fleet asks, from its first line), else
/// `--token` as a pattern holding `{i}`. The same token for every device would make them one
/// device to the instance: a usage error.
fn fleet_tokens(cli: &Cli, count: usize) -> Result<crate::FleetTokens, CliError> {
    match &cli.tokens {
        Some(path) => {
            let mut tokens = harness::cli::token_file(path)?;
            if tokens.len() < count {
                return Err(CliError::Usage(format!(
                    "--fleet {count}: {} holds only {} tokens",
                    path.display(),
                    tokens.len()
                )));
            }
            tokens.truncate(count);
            Ok(crate::FleetTokens::List(tokens))
        }
        None if cli.token.value.contains(crate::INDEX_PLACEHOLDER) => {
            Ok(crate::FleetTokens::Pattern {
                pattern: cli.token.value.clone(),
                count,
            })
        }
        None => Err(CliError::Usage(format!(
            "--fleet: each device needs a token of its own: give --token a pattern holding {} (tok-{}) or --tokens FILE",
            crate::INDEX_PLACEHOLDER,
            crate::INDEX_PLACEHOLDER
        ))),
    }
}

/// What a fleet refuses: what it has no single run for.
pub(super) fn fleet_refusals(cli: &Cli) -> Result<(), CliError> {
    let refused = [
        (cli.common.scenario.is_some(), "--scenario"),
        (cli.common.exec.is_some(), "--exec"),
        (cli.common.control.is_some(), "--control"),
        (cli.console, "--console"),
    ];
    if let Some((_, flag)) = refused.iter().find(|(given, _)| *given) {
        return Err(CliError::Usage(format!(
            "--fleet runs devices with the default behaviour: {flag} is for one device"
        )));
    }
    if let Some(journal) = &cli.common.journal
        && !journal.to_string_lossy().contains(crate::INDEX_PLACEHOLDER)
    {
        return Err(CliError::Usage(format!(
            "--fleet: --journal needs {} in its path, for a journal a device",
            crate::INDEX_PLACEHOLDER
        )));
    }
    Ok(())
}

/// Prints the fleet's count as a JSON line on stdout whenever it changed.
fn print_fleet_count() -> impl Fn(crate::FleetCount) {
    let last = std::cell::Cell::new(None);
    move |count: crate::FleetCount| {
        let now = (count.linked, count.running, count.stopped);
        if last.replace(Some(now)) == Some(now) {
            return;
        }
        println!(
            "{}",
            serde_json::json!({"fleet": {
                "devices": count.devices,
                "running": count.running,
                "linked": count.linked,
                "stopped": count.stopped,
                "seconds": (count.elapsed.as_secs_f64() * 1000.0).round() / 1000.0,
            }})
        );
    }
}

/// How a fleet exits: 5 when the instance refused every device, 4 when it closed every one with
/// 4400, 3 when none could start, 1 when its devices found the instance breaking rules (each
/// said on stderr), else 0.
fn fleet_exit(finished: &crate::FleetFinished) -> Exit {
    let all = finished.devices;
    for (device, finding) in &finished.examples {
        eprintln!("fake-device: device {device}: finding {finding}");
    }
    if finished.findings > finished.examples.len() {
        eprintln!(
            "fake-device: {} findings in all (the first {} shown)",
            finished.findings,
            finished.examples.len()
        );
    }
    if let Some(error) = &finished.first_error {
        eprintln!(
            "fake-device: {} devices could not start: {error}",
            finished.not_started
        );
    }
    match () {
        () if all > 0 && finished.unauthorized == all => {
            eprintln!("fake-device: the instance refused every device's token (401)");
            Exit::Unauthorized
        }
        () if all > 0 && finished.protocol_mismatch == all => {
            eprintln!("fake-device: {}", crate::PROTOCOL_MISMATCH_SENTENCE);
            Exit::ProtocolMismatch
        }
        () if all > 0 && finished.not_started == all => Exit::Internal,
        () if finished.findings > 0 => Exit::PeerFailed,
        () => Exit::Passed,
    }
}
