//! `harness`: suite-wide commands.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use harness::Exit;
use harness::scenario::{Side, load_file};
use harness_cli::{Error, SideArg};

/// mimalloc, not the system's allocator: why is in the workspace's Cargo.toml.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Suite-wide commands of the LLeMbas test doubles.
#[derive(Debug, Parser)]
#[command(name = "harness", version = harness::cli::version())]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run every embedded scenario against the other double, well-behaved and misbehaving.
    Selftest {
        /// Only scenarios whose name or file contains this.
        filter: Option<String>,
        /// At most this many runs at once; fewer while the machine's CPU is busy (most runs
        /// only wait on a deadline, so many fit).
        #[arg(long, default_value_t = 128)]
        jobs: usize,
        /// Show every run's report, not only the failures'.
        #[arg(long, conflicts_with = "quiet")]
        verbose: bool,
        /// Only the runs that did not come out as they should, and the summary.
        #[arg(long)]
        quiet: bool,
        /// html:PATH: every run on one page, with its sequence diagram.
        #[arg(long = "report", value_name = "html:PATH")]
        report: Option<String>,
    },
    /// Validate scenario files without running them (all embedded ones when none is named).
    Check {
        /// Scenario files.
        files: Vec<PathBuf>,
        /// Which double runs them (default: from the folder, instance/ or device/).
        #[arg(long, value_enum)]
        side: Option<SideArg>,
    },
    /// Print the JSON Schema of the scenario format, or of workloads (or write it to a file).
    Schema {
        /// Write it here instead of stdout.
        #[arg(long, value_name = "PATH")]
        write: Option<PathBuf>,
        /// The workload format's (`*.workload.yaml`) instead of the scenario format's.
        #[arg(long)]
        workload: bool,
    },
    /// List the rule catalogue, with the scenarios that check each rule and its misbehaviour.
    Rules {
        /// Only one spec section's rules, from its catalogue file, in the file's order:
        /// `session/rewind` (or `_lembas/session/rewind`), `initialize`, `lvmh/handshake`.
        #[arg(long, value_name = "NAME")]
        section: Option<String>,
    },
    /// The shipped scenarios as a Markdown page: what each checks, its cells, what it needs of
    /// the peer and the rules it judges (the guide's catalogue page).
    Scenarios {
        /// Write it here instead of stdout.
        #[arg(long, value_name = "PATH")]
        write: Option<PathBuf>,
    },
    /// Every rule with the scenarios and misbehaviours that prove it, totals per side and
    /// section; `--check` fails when an observable rule is unproven and does not say why.
    Coverage {
        /// markdown (the default), json, or totals (the per-side table the guide shows).
        #[arg(long, default_value = "markdown", value_parser = ["markdown", "json", "totals"])]
        format: String,
        /// Write the report here instead of stdout.
        #[arg(long, value_name = "PATH")]
        write: Option<PathBuf>,
        /// Exit 1, naming each, when an observable rule lacks a scenario or a misbehaviour and
        /// is not marked `not_yet` with a reason.
        #[arg(long)]
        check: bool,
    },
    /// Run scenarios against the real project under test, across protocols and specs: start it
    /// for each run (--exec), do its set-up by hooks (--hooks), report a JUnit file a cell.
    Run(Box<harness_cli::matrix::RunArgs>),
    /// Explore: run sequences of the double's own moves drawn from a seed against the project
    /// under test, every monitor judging; shrink a failing one and write it as a scenario that
    /// `harness run` replays.
    Explore(Box<harness_cli::explore::ExploreArgs>),
    /// Merge the JSON reports of a fleet's shards (`fake-device --fleet N --shard K/N --report
    /// json:PATH`) into the report of the whole run: histograms merged exactly, the summary
    /// printed, thresholds judged on the merge.
    Merge(harness_cli::merge::MergeArgs),
    /// Sit between a real device and a real instance, pass everything through, and write the
    /// journal and a draft scenario for each double (at Ctrl-C or after --for).
    Record(harness_cli::record::RecordArgs),
}

/// Loads a scenario and checks what the doubles read themselves: its settings and its own steps'
/// actions against its double's types, its `peer.steps` (and the web UI's `peer.cards`) against
/// the other's.
fn load_checked(
    load: impl FnOnce() -> Result<harness::scenario::Scenario, harness::scenario::LoadError>,
    side: Option<Side>,
) -> Result<harness::scenario::Scenario, harness::scenario::LoadError> {
    let scenario = load()?;
    // A failure must be able to name its rule: `check` holds every judging step to one.
    if let Some(e) = harness::scenario::load::unruled(&scenario, &scenario.source) {
        return Err(e);
    }
    match side {
        Some(Side::Instance) => {
            fake_instance::check_scenario(&scenario)?;
            fake_device::check_as_peer_of(&scenario)?;
        }
        Some(Side::Device) => {
            fake_device::check_scenario(&scenario)?;
            fake_instance::check_as_peer_of(&scenario)?;
        }
        None => {}
    }
    Ok(scenario)
}

/// A generated text (the schema, the catalogue page) written to `path`, or printed.
fn written_or_printed(text: &str, path: Option<&Path>) -> Result<Exit, Error> {
    match path {
        Some(path) => std::fs::write(path, text).map_err(|source| Error::Write {
            path: path.to_path_buf(),
            source,
        })?,
        None => {
            let _ = std::io::stdout().write_all(text.as_bytes());
        }
    }
    Ok(Exit::Passed)
}

/// `harness record`: passes everything through until Ctrl-C or `--for`, then says what it
/// wrote.
fn record(args: &harness_cli::record::RecordArgs) -> Result<Exit, Error> {
    harness::cli::init_logs("warn");
    harness::cli::init_tls();
    let runtime = harness::cli::runtime(true)?;
    let written = runtime.block_on(harness_cli::record::run(args))?;
    println!(
        "recorded {} link messages\n  journal        {}\n  fake-instance  {}\n  fake-device    {}",
        written.messages,
        written.journal.display(),
        written.instance.display(),
        written.device.display()
    );
    Ok(Exit::Passed)
}

/// `harness check`: each scenario (every embedded one when none is named) loaded and checked,
/// a line each; a usage error when one is not right.
fn check(files: &[PathBuf], side: Option<Side>) -> Exit {
    let mut bad = 0;
    if files.is_empty() {
        let every = harness::family::Family::ALL
            .into_iter()
            .flat_map(|family| [(family, Side::Instance), (family, Side::Device)]);
        for (family, side) in every {
            for embedded in harness::scenario::catalogue::embedded_of(side, family) {
                match load_checked(|| embedded.load(), Some(side)) {
                    Ok(s) => {
                        let _ =
                            writeln!(std::io::stdout(), "ok    {} ({})", embedded.label(), s.name);
                    }
                    Err(e) => {
                        bad += 1;
                        let _ = writeln!(std::io::stdout(), "error {e}");
                    }
                }
            }
        }
    }
    for file in files {
        let side = side.or_else(|| Side::from_path(file));
        match load_checked(|| load_file(file, side), side) {
            Ok(s) => {
                let _ = writeln!(std::io::stdout(), "ok    {} ({})", file.display(), s.name);
            }
            Err(e) => {
                bad += 1;
                let _ = writeln!(std::io::stdout(), "error {e}");
            }
        }
    }
    if bad == 0 { Exit::Passed } else { Exit::Usage }
}

/// The catalogue: each rule, the side it binds, what it says, the scenarios that check it and
/// the misbehaviour that proves they can fail.
/// Prints every rule by id, or one section's in its file's order; an unknown section is a
/// usage error that lists the sections.
fn print_rules(section: Option<&str>) -> Result<Exit, Error> {
    let catalogue = harness::rules::catalogue();
    let rules: Vec<&harness::rules::Rule> = match section {
        None => catalogue.iter().collect(),
        Some(name) => match catalogue.section(name) {
            Some(section) => section
                .rules
                .iter()
                .filter_map(|id| catalogue.get(id))
                .collect(),
            None => {
                return Err(Error::Section {
                    name: name.to_string(),
                    sections: catalogue
                        .sections()
                        .iter()
                        .map(|s| s.name.clone())
                        .collect(),
                });
            }
        },
    };
    let mut checked_by: std::collections::BTreeMap<String, Vec<String>> = Default::default();
    for side in [Side::Instance, Side::Device] {
        for embedded in harness::scenario::catalogue::embedded(side) {
            if let Ok(scenario) = embedded.load() {
                for rule in scenario.rules {
                    checked_by.entry(rule).or_default().push(format!(
                        "{}/{}",
                        side.folder(),
                        embedded.file
                    ));
                }
            }
        }
    }
    let mut out = std::io::stdout().lock();
    for rule in rules {
        let _ = writeln!(
            out,
            "{}  ({}; spec: {})",
            rule.id,
            format!("{:?}", rule.binds).to_lowercase(),
            rule.section
        );
        let _ = writeln!(out, "    {}", rule.says);
        if let Some(readings) = &rule.readings {
            let _ = writeln!(out, "    readings accepted: {readings}");
        }
        let scenarios = checked_by
            .get(&rule.id)
            .map(|s| s.join(", "))
            .unwrap_or_else(|| "none (monitors only)".into());
        let _ = writeln!(out, "    checked by: {scenarios}");
        for (id, _, does) in rule.misbehaviour_ids() {
            let _ = writeln!(out, "    --misbehave {id}: {does}");
        }
        if let Some(why) = &rule.one_way {
            let _ = writeln!(out, "    broken one way only: {why}");
        }
    }
    Ok(Exit::Passed)
}

/// `harness coverage`: the report written or printed; with `check`, the peer fails when an
/// observable rule is unproven and does not say why.
fn coverage(format: &str, write: Option<&Path>, check: bool) -> Result<Exit, Error> {
    let report = harness_cli::coverage::coverage(harness::rules::catalogue())?;
    let text = match format {
        "json" => serde_json::to_string_pretty(&report).unwrap_or_default() + "\n",
        "totals" => report.totals_markdown(),
        _ => report.markdown(),
    };
    match write {
        Some(path) => std::fs::write(path, &text).map_err(|source| Error::CoverageWrite {
            path: path.to_path_buf(),
            source,
        })?,
        None => std::io::stdout()
            .lock()
            .write_all(text.as_bytes())
            .map_err(Error::Stdout)?,
    }
    let failures = report.failures();
    if check && !failures.is_empty() {
        for f in &failures {
            eprintln!("coverage: {f}");
        }
        return Ok(Exit::PeerFailed);
    }
    Ok(Exit::Passed)
}

/// `harness selftest`: every case run and judged; the peer "failed" when one did not come out as
/// it should.
fn selftest(
    filter: Option<&str>,
    jobs: usize,
    verbose: bool,
    quiet: bool,
    report: Option<&str>,
) -> Result<Exit, Error> {
    let html = match report.map(|r| r.split_once(':')) {
        None => None,
        Some(Some(("html", path))) if !path.is_empty() => Some(PathBuf::from(path)),
        Some(_) => {
            return Err(Error::Argument {
                flag: "--report",
                said: None,
                want: "say html:PATH",
            });
        }
    };
    let runtime = harness::cli::runtime(true)?;
    let passed = runtime.block_on(harness_cli::selftest::selftest(
        filter,
        jobs,
        verbose,
        quiet,
        html.as_deref(),
    ))?;
    Ok(if passed {
        Exit::Passed
    } else {
        Exit::PeerFailed
    })
}

/// Runs one command: the exit its verdict gives, or why it came to none.
fn run(command: Command) -> Result<Exit, Error> {
    match command {
        Command::Check { files, side } => Ok(check(&files, side.map(Side::from))),
        Command::Schema { write, workload } => {
            let schema = match workload {
                true => harness_cli::workload_schema(),
                false => harness_cli::scenario_schema(),
            };
            written_or_printed(&schema, write.as_deref())
        }
        Command::Rules { section } => print_rules(section.as_deref()),
        Command::Scenarios { write } => {
            written_or_printed(&harness_cli::scenarios::markdown(), write.as_deref())
        }
        Command::Coverage {
            format,
            write,
            check,
        } => coverage(&format, write.as_deref(), check),
        Command::Run(args) => harness_cli::matrix::command(*args),
        Command::Explore(args) => harness_cli::explore::command(*args),
        Command::Record(args) => record(&args),
        Command::Merge(args) => harness_cli::merge::command(args),
        Command::Selftest {
            filter,
            jobs,
            verbose,
            quiet,
            report,
        } => selftest(filter.as_deref(), jobs, verbose, quiet, report.as_deref()),
    }
}

fn main() -> ExitCode {
    harness::cli::init_process("error");
    let cli = Cli::parse();
    // The one place an error is said and becomes the process's exit.
    match run(cli.command) {
        Ok(exit) => exit.into(),
        Err(e) => {
            eprintln!("error: {e}");
            e.exit().into()
        }
    }
}
