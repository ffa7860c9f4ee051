//! `harness explore`: instead of a path someone wrote down, sequences of a double's own moves
//! drawn from a seed, each run against the system under test with every monitor of the double
//! judging it. A sequence that fails is shrunk to the fewest moves that still fail on the same
//! rule and written as a scenario that `harness run` replays.
//!
//! Two sides, one explorer: fake-instance explores a CLI (`cli_moves`: the web UI's prompts,
//! status, cancel, delete, drops and restarts, judged by the monitors and the reference model of
//! a device's turns, [`harness::lembas::turn_model`]); fake-device explores a web server
//! (`server_moves`: the web UI's chats by hooks, the device's drops and dials, judged by the
//! monitors and a model of the server's chats written as the scenario's last steps).

mod cli_moves;
mod explored;
mod in_process;
pub mod planted;
pub mod reports;
mod sequence;
mod server_moves;
mod shrink;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Args;
use futures_util::StreamExt;
use harness::Exit;
use harness::engine::{Arranged, Cell, RunOutcome, Verdict};
use harness::journal::Entry;
use harness::scenario::Side;

use crate::Error;
use crate::run::{Planned, Setup};
pub use explored::{Explored, Found, MODEL_RULES};
use sequence::{Limits, Moves};

/// Which double explores: the side the system under test is not.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ExploreSide {
    /// fake-instance drives a CLI under test (`--exec` starts it, with `{url}` and `{token}`).
    Instance,
    /// fake-device drives a web server under test (`--exec` starts it, with `{port}`; `--hooks`
    /// maps the web UI's actions to its test API).
    Device,
}

/// `harness explore`'s arguments.
#[derive(Debug, Clone, Args)]
pub struct ExploreArgs {
    /// Which double explores.
    #[arg(value_enum)]
    pub side: ExploreSide,
    /// Starts the system under test for each sequence (run by `sh -c`, in its own process group,
    /// ended with it). Placeholders as `harness run` has them.
    #[arg(long, value_name = "CMD")]
    pub exec: String,
    /// A hooks file, as `harness run` takes it.
    #[arg(long, value_name = "FILE")]
    pub hooks: Option<PathBuf>,
    /// Set-up the project's own test does, by name (or `all`).
    #[arg(long = "arranged", value_name = "NAME", value_delimiter = ',')]
    pub arranged: Vec<String>,
    /// The link protocol of every sequence.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u8).range(1..=2))]
    pub protocol: u8,
    /// The harness spec of every sequence.
    #[arg(long, default_value = "1.1.0")]
    pub spec: harness::lembas::Spec,
    /// The device token.
    #[arg(long, value_name = "T")]
    pub token: Option<String>,
    /// How long to explore (`60s`, `5m`), shrinking a finding included; with --runs,
    /// whichever ends first.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, default_value = "60s")]
    pub time: Duration,
    /// How many sequences to run at the most.
    #[arg(long, value_name = "N")]
    pub runs: Option<u64>,
    /// The seed: the same seed runs the same sequences (default: drawn, and printed).
    #[arg(long, value_name = "N")]
    pub seed: Option<u64>,
    /// The most moves a sequence has.
    #[arg(long, value_name = "N", default_value_t = 12, value_parser = clap::value_parser!(u64).range(2..=200))]
    pub max_steps: u64,
    /// How many runs shrinking a finding may take.
    #[arg(long, value_name = "N", default_value_t = 60)]
    pub shrink_runs: usize,
    /// Also write the exploration as `json:PATH`, `junit:PATH` or `html:PATH` (repeatable):
    /// the finding with its shrunk run (the HTML with its sequence diagram), or how much ran.
    #[arg(long, value_name = "FORMAT:PATH", value_parser = reports::parse)]
    pub report: Vec<reports::Report>,
    /// How many sequences run at once (each with a system under test of its own); more only
    /// when its instances keep out of each other's way (a state directory under `{tmp}`).
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=64))]
    pub jobs: u64,
    /// Where a finding's scenario is written.
    #[arg(long, value_name = "DIR", default_value = "explore-findings")]
    pub out: PathBuf,
}

/// A duration flag's value (`500ms`, `60s`).
fn parse_duration(text: &str) -> Result<Duration, String> {
    humantime::parse_duration(text.trim())
        .map_err(|e| format!("`{text}` is not a duration like 60s or 5m ({e})"))
}

/// Runs the command; gives its exit: 0 nothing found, 1 a finding, 6 interrupted.
pub fn command(args: ExploreArgs) -> Result<Exit, Error> {
    let hooks = harness::cli::hooks(args.hooks.as_deref())?;
    let setup = Setup {
        exec: Some(args.exec.clone()),
        hooks,
        instance: None,
        token: args.token.clone(),
        arranged: Arranged::from_names(&args.arranged),
    };
    let seed = args.seed.unwrap_or_else(rand::random);
    let runtime = harness::cli::runtime(true)?;
    let explorer = Explorer {
        target: Target::Exec(setup),
        cell: Cell::lembas(args.protocol, args.spec),
        seed,
        budget: Budget {
            time: args.time,
            runs: args.runs,
            max_steps: usize::try_from(args.max_steps).unwrap_or(usize::MAX),
            shrink_runs: args.shrink_runs,
            jobs: usize::try_from(args.jobs).unwrap_or(1),
        },
        say: true,
    };
    let exit = runtime.block_on(async {
        let explored = async {
            match args.side {
                ExploreSide::Instance => explorer.explore::<cli_moves::Move>().await,
                ExploreSide::Device => explorer.explore::<server_moves::Move>().await,
            }
        };
        tokio::select! {
            explored = explored => explored.and_then(|e| match args.side {
                ExploreSide::Instance => report::<cli_moves::Move>(&args, seed, e),
                ExploreSide::Device => report::<server_moves::Move>(&args, seed, e),
            }),
            () = harness::cli::shutdown_signal() => {
                println!("explore: interrupted (seed {seed})");
                Ok(Exit::Interrupted)
            }
        }
    });
    // Each sequence's task held its system under test, whose process group ends with it; a
    // task still blocked on a pipe of one must not hold the exit (once it held it 263 s).
    runtime.shutdown_timeout(Duration::from_secs(10));
    exit
}

/// Says what an exploration came to, writing its finding's scenario; gives the exit.
fn report<M: Moves>(args: &ExploreArgs, seed: u64, explored: Explored) -> Result<Exit, Error> {
    let cell = Cell::lembas(args.protocol, args.spec).to_string();
    let written = match &explored.found {
        Some(found) => Some(write_finding(
            &args.out,
            M::SIDE,
            &found.name,
            &found.scenario,
        )?),
        None => None,
    };
    let about = reports::About {
        seed,
        cell: &cell,
        written: written.as_deref(),
    };
    reports::write(&args.report, about, &explored)?;
    let (Some(found), Some(path)) = (&explored.found, written) else {
        println!(
            "explore: nothing found in {} sequences ({} moves, {} not applicable) in {:.1}s; judged by {}",
            explored.sequences,
            explored.moves,
            explored.not_applicable,
            explored.elapsed.as_secs_f64(),
            M::judged_by()
        );
        return Ok(Exit::Passed);
    };
    print!(
        "{}",
        harness::report::human::render(M::DOUBLE, &found.outcome, &found.recent)
    );
    println!(
        "explore: {} broken by a sequence of {} moves (found after {:.1}s, shrunk from {} moves in {} runs{}, {:.1}s in all); written to {}\n  replay: harness run {} --exec '{}'{} --protocols {} --specs {}",
        found.rule,
        found.moves_after,
        found.found_after.as_secs_f64(),
        found.moves_before,
        found.shrinking_runs,
        if found.shrinking_cut_short {
            ", stopped by --time: a longer --time shrinks it further"
        } else {
            ""
        },
        explored.elapsed.as_secs_f64(),
        path.display(),
        path.display(),
        args.exec,
        args.hooks
            .as_ref()
            .map_or(String::new(), |h| format!(" --hooks {}", h.display())),
        args.protocol,
        args.spec
    );
    Ok(Exit::PeerFailed)
}

/// What each sequence is run against.
pub enum Target {
    /// The system under test, started for each sequence as `harness run` starts it.
    Exec(Setup),
    /// The other double in this process (the self-test's way), breaking `misbehave` when
    /// given; fake-device's echo agent's turns paced by `step_delay`.
    Double {
        /// The misbehaviour it acts out (`RULE` or `RULE/WAY`).
        misbehave: Option<String>,
        /// The pause between its turns' steps.
        step_delay: Duration,
    },
}

/// How much an exploration may do.
#[derive(Debug, Clone, Copy)]
pub struct Budget {
    /// How long to draw new sequences.
    pub time: Duration,
    /// How many sequences at the most.
    pub runs: Option<u64>,
    /// The most moves a sequence has.
    pub max_steps: usize,
    /// How many runs shrinking a finding may take.
    pub shrink_runs: usize,
    /// How many sequences (or cuts of one) run at once.
    pub jobs: usize,
}

/// One exploration: what each sequence meets, in which cell, from which seed.
pub struct Explorer {
    /// What the sequences are run against.
    pub target: Target,
    /// The protocol and spec of every sequence.
    pub cell: Cell,
    /// The seed the sequences are drawn from.
    pub seed: u64,
    /// How much it may do.
    pub budget: Budget,
    /// Whether to say on standard output where it is (the command does; the self-test not).
    pub say: bool,
}

/// A sequence that failed: on which rule, with what outcome.
struct Failed {
    rule: String,
    outcome: RunOutcome,
    recent: Vec<Entry>,
}

impl Explorer {
    /// Draws and runs sequences until one fails (which is shrunk) or the budget is spent.
    pub async fn explore<M: Moves>(&self) -> Result<Explored, Error> {
        let limits = Limits {
            max_steps: self.budget.max_steps,
            // fake-instance in this process does its web UI's steps inside its own run, which a
            // restart ends: a web server is restarted only when it is a process of its own,
            // whose web UI (hooks) outlives it.
            restarts: !matches!(
                (&self.target, M::SIDE),
                (Target::Double { .. }, Side::Device)
            ),
        };
        let began = Instant::now();
        let (mut ran, mut moves_run, mut not_applicable) = (0u64, 0usize, 0u64);
        if self.say {
            println!(
                "explore: seed {} · {} · up to {} moves a sequence",
                self.seed, self.cell, self.budget.max_steps
            );
        }
        // Sequences drawn in order and run `jobs` at a time, their verdicts given back in
        // order: the first that fails is the finding, whatever `jobs` is. None starts once a
        // sequence failed, or when one as long as those so far would end past the time.
        let stop = std::sync::atomic::AtomicBool::new(false);
        let lengths = RunLengths::default();
        let lengths = &lengths;
        let mut sequences = futures_util::stream::iter(0..self.budget.runs.unwrap_or(u64::MAX))
            .take_while(|_| {
                std::future::ready(
                    !stop.load(std::sync::atomic::Ordering::Relaxed)
                        && began.elapsed() + lengths.mean() < self.budget.time,
                )
            })
            .map(|run| async move {
                let moves = M::generate(self.seed, run, limits);
                let started = Instant::now();
                let judged = self.run(&moves).await;
                lengths.add(started.elapsed());
                (run, moves, judged)
            })
            .buffered(self.budget.jobs.max(1));
        let mut failed = None;
        while let Some((run, moves, judged)) = sequences.next().await {
            ran = run + 1;
            moves_run += moves.len();
            match judged? {
                Judged::Passed => {}
                Judged::NotApplicable => not_applicable += 1,
                Judged::Failed(failure) => {
                    failed = Some((run, moves, failure));
                    break;
                }
            }
        }
        // The sequences still running end as they would (a double's run owes its verdict, a
        // process its exit) before shrinking starts its own; what they find is not needed.
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        while sequences.next().await.is_some() {}
        drop(sequences);
        if let Some((run, moves, failure)) = failed {
            let found_after = began.elapsed();
            // Shrinking spends what is left of the time budget (and at most its runs): no cut
            // starts that would end past it, judged by the sequences' length so far.
            let deadline = (began + self.budget.time)
                .checked_sub(lengths.mean())
                .unwrap_or(began);
            let mut found = self.shrunk(run, moves, failure, deadline).await?;
            found.found_after = found_after;
            return Ok(Explored {
                sequences: ran,
                moves: moves_run,
                not_applicable,
                elapsed: began.elapsed(),
                found: Some(found),
            });
        }
        Ok(Explored {
            sequences: ran,
            moves: moves_run,
            not_applicable,
            elapsed: began.elapsed(),
            found: None,
        })
    }

    /// Runs one sequence against a fresh system under test.
    async fn run<M: Moves>(&self, moves: &[M]) -> Result<Judged, Error> {
        let text = M::scenario_text("explored", "a sequence harness explore drew", moves, None);
        let scenario = harness::scenario::load_str(&text, "explored.yaml", Some(M::SIDE))
            .map_err(|e| Error::Explored(format!("{e}\n{text}")))?;
        let scenario = Arc::new(scenario);
        let (outcome, recent) = match &self.target {
            Target::Exec(setup) => {
                let planned = Planned {
                    side: M::SIDE,
                    label: "explored.yaml".into(),
                    scenario,
                    cell: self.cell,
                };
                crate::run::run_one(&planned, setup).await?
            }
            Target::Double {
                misbehave,
                step_delay,
            } => {
                let misbehave = misbehave.as_deref();
                match M::SIDE {
                    Side::Instance => {
                        in_process::against_device(&scenario, self.cell, misbehave, *step_delay)
                            .await?
                    }
                    Side::Device => {
                        in_process::against_instance(&scenario, self.cell, misbehave).await?
                    }
                }
            }
        };
        Ok(match outcome.verdict() {
            Verdict::ScenarioError => {
                let report = harness::report::human::render(M::DOUBLE, &outcome, &recent);
                return Err(Error::Explored(format!("{report}\n{text}")));
            }
            Verdict::Passed => Judged::Passed,
            Verdict::NotApplicable(_) => Judged::NotApplicable,
            Verdict::Failed => Judged::Failed(Box::new(Failed {
                rule: outcome.broken_rules().first().cloned().unwrap_or_default(),
                outcome,
                recent,
            })),
        })
    }

    /// Shrinks a failing sequence and writes it as a scenario.
    async fn shrunk<M: Moves>(
        &self,
        run: u64,
        moves: Vec<M>,
        failed: Box<Failed>,
        deadline: Instant,
    ) -> Result<Found, Error> {
        let before = moves.len();
        if self.say {
            println!(
                "explore: sequence {run} ({before} moves) broke {}; shrinking…",
                failed.rule
            );
        }
        let rule = failed.rule.clone();
        // Each cut that failed on the rule, with its run: the shortest one's is the report. A
        // cut kept is never longer than one that failed before it, so only the shortest cuts
        // so far are held: what is kept stays one batch of runs, however many shrinking takes.
        let failing: std::sync::Mutex<Vec<(Vec<M>, Box<Failed>)>> = std::sync::Mutex::default();
        let failing = &failing;
        let shrunk = shrink::shrink(
            moves.clone(),
            self.budget.shrink_runs,
            self.budget.jobs,
            deadline,
            |cut| {
                let rule = rule.clone();
                async move {
                    match self.run(&cut).await {
                        Ok(Judged::Failed(f)) if f.rule == rule => {
                            if let Ok(mut kept) = failing.lock() {
                                kept.push((cut, f));
                                let shortest = kept.iter().map(|(c, _)| c.len()).min();
                                kept.retain(|(c, _)| Some(c.len()) == shortest);
                            }
                            true
                        }
                        _ => false,
                    }
                }
            },
        )
        .await;
        let kept = failing.lock().ok().and_then(|mut kept| {
            let at = kept.iter().position(|(cut, _)| *cut == shrunk.moves)?;
            Some(kept.swap_remove(at).1)
        });
        let last = match kept {
            Some(last) => last,
            None if shrunk.moves == moves => failed,
            // A cut kept without its run on record is run once more for its report.
            None => match self.run(&shrunk.moves).await? {
                Judged::Failed(last) if last.rule == failed.rule => last,
                _ => failed,
            },
        };
        let name = format!("explore-{}", last.rule.replace(['.', '/'], "-"));
        let about = format!(
            "Found by harness explore (seed {}, sequence {run}), shrunk from {before} moves to {}: it breaks {}.",
            self.seed,
            shrunk.moves.len(),
            last.rule
        );
        let scenario = M::scenario_text(&name, &about, &shrunk.moves, Some(&last.rule));
        Ok(Found {
            rule: last.rule,
            found_after: Duration::ZERO,
            moves_before: before,
            moves_after: shrunk.moves.len(),
            shrinking_runs: shrunk.tried,
            shrinking_cut_short: shrunk.out_of_time,
            name,
            scenario,
            outcome: last.outcome,
            recent: last.recent,
        })
    }
}

/// How long the sequences run, for whether another fits in the time left.
#[derive(Debug, Default)]
struct RunLengths {
    total_micros: std::sync::atomic::AtomicU64,
    runs: std::sync::atomic::AtomicU64,
}

impl RunLengths {
    fn add(&self, length: Duration) {
        let micros = u64::try_from(length.as_micros()).unwrap_or(u64::MAX);
        self.total_micros
            .fetch_add(micros, std::sync::atomic::Ordering::Relaxed);
        self.runs.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }

    /// The mean length so far (none before the first has ended).
    fn mean(&self) -> Duration {
        let runs = self.runs.load(std::sync::atomic::Ordering::Relaxed);
        let total = self.total_micros.load(std::sync::atomic::Ordering::Relaxed);
        Duration::from_micros(total.checked_div(runs).unwrap_or(0))
    }
}

/// How one sequence went.
enum Judged {
    Passed,
    NotApplicable,
    Failed(Box<Failed>),
}

/// Writes a finding's scenario into `dir/instance/` or `dir/device/` (the folder says which
/// double runs it).
fn write_finding(dir: &Path, side: Side, name: &str, text: &str) -> Result<PathBuf, Error> {
    let folder = dir.join(match side {
        Side::Instance => "instance",
        Side::Device => "device",
    });
    let path = folder.join(format!("{name}.yaml"));
    std::fs::create_dir_all(&folder)
        .and_then(|()| std::fs::write(&path, text))
        .map_err(|source| Error::Write {
            path: path.clone(),
            source,
        })?;
    Ok(path)
}
