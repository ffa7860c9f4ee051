//! The `harness run` command: its arguments, its progress line, its table and its reports.

use std::io::{IsTerminal as _, Write as _};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use clap::Args;
use harness::Exit;
use harness::engine::{Arranged, Verdict};
use harness::scenario::Side;

use crate::baseline::{Expected, Judged};
use crate::run::{Planned, Ran, Setup, Summary};
use crate::{Error, SideArg};

/// `harness run`'s arguments.
#[derive(Debug, Clone, Args)]
pub struct RunArgs {
    /// Scenarios: files, folders, `instance` or `device` (every embedded one), or embedded ones
    /// by name (instance/negotiate.yaml).
    #[arg(required = true, value_name = "SCENARIO")]
    pub scenarios: Vec<String>,
    /// Start the system under test with this command for each run (run by `sh -c`, in its own
    /// process group, ended with it). Placeholders: {url}, {ws_url}, {port}, {token}, {tmp},
    /// {root}, {protocol}, {spec}, {protocols}.
    #[arg(long, value_name = "CMD")]
    pub exec: Option<String>,
    /// A hooks file: the set-up actions the scenarios need, done by the project's commands or
    /// requests.
    #[arg(long, value_name = "FILE")]
    pub hooks: Option<PathBuf>,
    /// The link protocols to run.
    #[arg(
        long,
        value_name = "LIST",
        value_delimiter = ',',
        default_value = "1,2"
    )]
    pub protocols: Vec<u8>,
    /// The harness specs to run.
    #[arg(
        long,
        value_name = "LIST",
        value_delimiter = ',',
        default_value = "1.0.0,1.1.0"
    )]
    pub specs: Vec<harness::lembas::Spec>,
    /// How many runs at once (each gets its own port, {tmp} and state).
    #[arg(long, default_value_t = 1)]
    pub jobs: usize,
    /// junit:DIR (a file a cell), json:PATH (the summary), html:PATH (one page: a table of
    /// scenario × cell, and each run with its sequence diagram); repeatable.
    #[arg(long = "report", value_name = "KIND:PATH")]
    pub reports: Vec<String>,
    /// The expected-failures baseline (YAML): `scenario` or `scenario:rule`, optionally per cell.
    #[arg(long, value_name = "FILE")]
    pub expected_failures: Option<PathBuf>,
    /// Which double runs the scenarios, when their folder does not say.
    #[arg(long, value_enum)]
    pub side: Option<SideArg>,
    /// fake-device's scenarios: an instance already running, instead of --exec.
    #[arg(long, value_name = "URL")]
    pub instance: Option<String>,
    /// The device token (default lembas-test-token).
    #[arg(long, value_name = "T")]
    pub token: Option<String>,
    /// Set-up the project's own test does, by name (or `all`).
    #[arg(long = "arranged", value_name = "NAME", value_delimiter = ',')]
    pub arranged: Vec<String>,
    /// Runs that do not apply fail the matrix.
    #[arg(long)]
    pub strict: bool,
    /// Only the summary line and one line a failure.
    #[arg(long, conflicts_with = "verbose")]
    pub quiet: bool,
    /// Every run's whole report, not only the failures'.
    #[arg(long)]
    pub verbose: bool,
}

/// Where `--report` writes.
#[derive(Debug, Default)]
struct Reports {
    junit: Option<PathBuf>,
    json: Option<PathBuf>,
    html: Option<PathBuf>,
}

fn reports(said: &[String]) -> Result<Reports, Error> {
    let mut reports = Reports::default();
    for report in said {
        match report.split_once(':') {
            Some(("junit", dir)) if !dir.is_empty() => reports.junit = Some(dir.into()),
            Some(("json", path)) if !path.is_empty() => reports.json = Some(path.into()),
            Some(("html", path)) if !path.is_empty() => reports.html = Some(path.into()),
            _ => {
                return Err(Error::Argument {
                    flag: "--report",
                    said: Some(report.clone()),
                    want: "say junit:DIR, json:PATH or html:PATH",
                });
            }
        }
    }
    Ok(reports)
}

/// Colours for the table, on a terminal only.
struct Paint(bool);

impl Paint {
    fn verdict(&self, text: &str, verdict: &Verdict, judged: &Judged) -> String {
        if !self.0 {
            return text.to_string();
        }
        let code = match (verdict, judged) {
            (_, Judged::ExpectedFailure(_)) => "33",
            (Verdict::Passed, _) => "32",
            (Verdict::NotApplicable(_), _) => "2",
            _ => "31;1",
        };
        format!("\x1b[{code}m{text}\x1b[0m")
    }
}

/// Runs the command; gives its verdict's exit, or why it could not run.
pub fn command(args: RunArgs) -> Result<Exit, Error> {
    let Prepared {
        reports,
        expected,
        setup,
        planned,
    } = prepare(&args)?;
    let runtime = harness::cli::runtime(true)?;
    // Read by a program or kept in a file (a CI log): each run's line as it ends, not the whole
    // table after the last (a matrix takes minutes). On a terminal the table comes sorted at
    // the end, with a progress line meanwhile.
    let streaming = !std::io::stdout().is_terminal();
    let Some((mut ran, elapsed)) = run_matrix(runtime, planned, setup, &args, streaming) else {
        return Ok(Exit::Interrupted);
    };
    ran.sort_by(|a, b| {
        (a.planned.cell.listing_key(), a.planned.label.as_str())
            .cmp(&(b.planned.cell.listing_key(), b.planned.label.as_str()))
    });
    let summary = Summary::of(&ran, &expected);
    print_table(&ran, &summary, &args, streaming);
    print_totals(&ran, &summary, elapsed);
    write_reports(&reports, &ran, &summary, elapsed, args.quiet)?;
    Ok(verdict(&summary, args.strict))
}

/// What a matrix needs before it runs.
struct Prepared {
    /// Where it reports.
    reports: Reports,
    /// The expected-failures baseline.
    expected: Vec<Expected>,
    /// How each run meets the system under test.
    setup: Arc<Setup>,
    /// Every run.
    planned: Vec<Planned>,
}

/// Reads the arguments, the scenarios, the baseline and the hooks, and plans the runs; each
/// mistake found here is said once, before anything starts.
fn prepare(args: &RunArgs) -> Result<Prepared, Error> {
    let side = args.side.map(Side::from);
    let reports = reports(&args.reports)?;
    if let Some(bad) = args.protocols.iter().find(|p| !matches!(p, 1 | 2)) {
        return Err(Error::Protocol(*bad));
    }
    let selected = crate::run::select(&args.scenarios, side)?;
    let expected = match &args.expected_failures {
        Some(path) => crate::baseline::load(path).map_err(|e| Error::Baseline(Box::new(e)))?,
        None => Vec::new(),
    };
    let hooks = harness::cli::hooks(args.hooks.as_deref())?;
    let setup = Arc::new(Setup {
        exec: args.exec.clone(),
        hooks,
        instance: args.instance.clone(),
        token: args.token.clone(),
        arranged: Arranged::from_names(&args.arranged),
    });
    // Every run would fail the same way: say it once, as a usage error.
    let no_exec: Vec<&str> = selected
        .iter()
        .filter(|(side, _, scenario)| {
            args.exec.is_none()
                && scenario.sut.is_none()
                && (*side == Side::Instance || args.instance.is_none())
        })
        .map(|(_, label, _)| label.as_str())
        .collect();
    if let Some(first) = no_exec.first() {
        return Err(Error::NoSystemUnderTest {
            first: (*first).to_string(),
            more: no_exec.len() - 1,
        });
    }
    let planned = crate::run::plan(&selected, &args.protocols, &args.specs);
    if planned.is_empty() {
        return Err(Error::NothingApplies);
    }
    Ok(Prepared {
        reports,
        expected,
        setup,
        planned,
    })
}

/// Runs every planned run on `runtime`, with a progress line on a terminal (and, `streaming`,
/// each run's line as it ends); gives the runs and how long they took, or `None` when
/// interrupted (said, and every system under test ended).
fn run_matrix(
    runtime: tokio::runtime::Runtime,
    planned: Vec<Planned>,
    setup: Arc<Setup>,
    args: &RunArgs,
    streaming: bool,
) -> Option<(Vec<Ran>, std::time::Duration)> {
    let started = Instant::now();
    let args_jobs = args.jobs;
    let progress_on = harness::cli::colours_on(&std::io::stderr()) && !args.quiet;
    let quiet = args.quiet;
    let ran = runtime.block_on(async move {
        // The signal handlers are in place before the first system under test starts.
        let interrupted = harness::cli::shutdown_signal();
        let all = crate::run::run_all(planned, setup, args_jobs, move |n, total, ran| {
            let failed = matches!(ran.verdict(), Verdict::Failed | Verdict::ScenarioError);
            if streaming && (failed || !quiet) {
                let mut out = std::io::stdout().lock();
                let _ = writeln!(out, "{}", run_line(ran, &ran.summary()));
                let _ = out.flush();
            }
            if progress_on {
                let mut err = std::io::stderr().lock();
                let _ = write!(
                    err,
                    "\r\x1b[2K[{n}/{total}] {} {} · {}",
                    ran.planned.scenario.name,
                    ran.planned.cell,
                    ran.summary().chars().take(60).collect::<String>()
                );
                let _ = err.flush();
            }
        });
        tokio::select! {
            ran = all => Some(ran),
            () = interrupted => None,
        }
    });
    let Some(ran) = ran else {
        // Each run's task holds its system under test; dropping the tasks ends their process
        // groups. Wait for that before exiting, or they would outlive the run.
        runtime.shutdown_timeout(std::time::Duration::from_secs(10));
        eprintln!("harness run: interrupted; every system under test it started is ended");
        return None;
    };
    // The runs' processes are gone; a task still blocked on a pipe must not hold the exit.
    runtime.shutdown_background();
    if progress_on {
        let _ = write!(std::io::stderr(), "\r\x1b[2K");
    }
    Some((ran, started.elapsed()))
}

/// The lines after the table: stale and unused baseline entries, the tally, and the rules
/// judged.
fn print_totals(ran: &[Ran], summary: &Summary, elapsed: std::time::Duration) {
    let mut out = std::io::stdout().lock();
    for stale in &summary.stale {
        let _ = writeln!(out, "STALE: {stale}");
    }
    for unused in &summary.unused {
        let _ = writeln!(out, "note: the baseline entry {unused}");
    }
    let _ = writeln!(
        out,
        "\nrun: {} runs: {} passed, {} not applicable, {} failed as expected, {} failed unexpectedly, {} stale baseline entries in {:.1}s",
        ran.len(),
        summary.count(|j| *j == Judged::Passed),
        summary.count(|j| *j == Judged::NotApplicable),
        summary.count(|j| matches!(j, Judged::ExpectedFailure(_))),
        summary.count(|j| *j == Judged::UnexpectedFailure),
        summary.stale.len(),
        elapsed.as_secs_f64()
    );
    let _ = writeln!(out, "{}", crate::run::RulesJudged::of(ran).line());
}

/// Writes the reports `--report` asked for: the JUnit files, the JSON summary, the HTML page.
fn write_reports(
    reports: &Reports,
    ran: &[Ran],
    summary: &Summary,
    elapsed: std::time::Duration,
    quiet: bool,
) -> Result<(), Error> {
    if let Some(dir) = &reports.junit {
        let files = crate::run::write_junit(dir, ran).map_err(Error::Junit)?;
        if !quiet {
            let _ = writeln!(
                std::io::stdout(),
                "wrote {} JUnit files to {}",
                files.len(),
                dir.display()
            );
        }
    }
    let write = |path: &PathBuf, text: String| {
        std::fs::write(path, text).map_err(|source| Error::Write {
            path: path.clone(),
            source,
        })
    };
    if let Some(path) = &reports.json {
        let json = crate::run::json_summary(ran, summary, elapsed);
        write(
            path,
            serde_json::to_string_pretty(&json).unwrap_or_default(),
        )?;
    }
    if let Some(path) = &reports.html {
        let outcomes: Vec<std::borrow::Cow<'_, harness::engine::RunOutcome>> =
            ran.iter().map(Ran::outcome).collect();
        let pages: Vec<harness::report::html::RunPage<'_>> = ran
            .iter()
            .zip(&outcomes)
            .map(|(r, outcome)| harness::report::html::RunPage {
                double: r.planned.side.double(),
                label: &r.planned.label,
                outcome,
                entries: r.recent(),
            })
            .collect();
        write(
            path,
            harness::report::html::render_many("harness run", &pages),
        )?;
    }
    Ok(())
}

/// The matrix's exit: passed (runs that do not apply fail it only with `--strict`), a usage
/// error when only set-up broke, else the peer failed.
fn verdict(summary: &Summary, strict: bool) -> Exit {
    let not_applicable = summary.count(|j| *j == Judged::NotApplicable);
    let unexpected = summary.count(|j| *j == Judged::UnexpectedFailure);
    if summary.passed() && !(strict && not_applicable > 0) {
        Exit::Passed
    } else if unexpected > 0 && summary.stale.is_empty() && summary.only_set_up_broke() {
        // Nothing the peer did: a run could not run, or its set-up (a hook) broke.
        Exit::Usage
    } else {
        Exit::PeerFailed
    }
}

/// One run's line of the table: scenario, cell, time and `verdict` (painted or not).
fn run_line(r: &Ran, verdict: &str) -> String {
    format!(
        "{:<26} {:<24} {:>7.0}ms  {verdict}",
        r.planned.scenario.name,
        r.planned.cell.to_string(),
        r.elapsed.as_secs_f64() * 1000.0,
    )
}

/// The table of runs (unless each line was streamed as its run ended: then only the failures
/// the baseline expects, which a streamed line could not say), and each unexpected failure's
/// report.
fn print_table(ran: &[Ran], summary: &Summary, args: &RunArgs, streamed: bool) {
    let paint = Paint(harness::cli::colours_on(&std::io::stdout()));
    let mut out = std::io::stdout().lock();
    for (r, judged) in ran.iter().zip(&summary.judged) {
        let failed = matches!(judged, Judged::UnexpectedFailure);
        let expected = matches!(judged, Judged::ExpectedFailure(_));
        if (args.quiet && !failed) || (streamed && !expected) {
            continue;
        }
        let mut line = r.summary();
        if let Judged::ExpectedFailure(entry) = judged {
            line = format!("{line} (expected: {entry})");
        }
        let _ = writeln!(
            out,
            "{}",
            run_line(r, &paint.verdict(&line, &r.verdict(), judged))
        );
    }
    if args.quiet {
        return;
    }
    for (r, judged) in ran.iter().zip(&summary.judged) {
        if !(args.verbose || matches!(judged, Judged::UnexpectedFailure)) {
            continue;
        }
        let _ = writeln!(
            out,
            "\n--- {} [{}] ({})",
            r.planned.label,
            r.planned.cell,
            r.planned.side.double()
        );
        match &r.outcome {
            Ok((outcome, recent)) => {
                let _ = write!(
                    out,
                    "{}",
                    harness::report::human::render(r.planned.side.double(), outcome, recent)
                );
            }
            Err(e) => {
                let _ = writeln!(out, "  could not run: {e}");
            }
        }
    }
}
