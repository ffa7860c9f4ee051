//! `fake-device --fleet N`: many simulated devices in one process, their tokens, their count
//! printed as they link, and how the fleet exits.

use harness::Exit;
use harness::cli::CliError;

use super::args::Cli;

/// `fake-device --fleet N`: the devices' tokens, then the fleet run until a signal or the end of
/// `--for`, or until every device stopped by itself.
pub(super) fn fleet(
    cli: &Cli,
    count: usize,
    template: crate::Options,
    runtime: &tokio::runtime::Runtime,
) -> Result<Exit, CliError> {
    let tokens = fleet_tokens(cli, count)?;
    let devices = tokens.devices(cli.shard.unwrap_or(crate::Shard::WHOLE));
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
    let run_for = cli.run_for.map(|d| d.0);
    let finished = runtime.block_on(async {
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
        crate::run_fleet(
            template,
            devices,
            state_root,
            print_fleet_count(),
            FLEET_COUNT_EVERY,
            shutdown,
        )
        .await
    });
    drop(made_root);
    Ok(fleet_exit(&finished))
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
        (!cli.common.reports.is_empty(), "--report"),
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
        let now = (count.linked, count.stopped);
        if last.replace(Some(now)) == Some(now) {
            return;
        }
        println!(
            "{}",
            serde_json::json!({"fleet": {
                "devices": count.devices,
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
