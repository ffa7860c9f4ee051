//! `harness selftest`: every embedded scenario, in every cell of its matrix, against the other
//! double behaving well (it must pass) and misbehaving on each rule the scenario checks (it must
//! fail, naming that rule). A check that no misbehaviour can make fail is a check that cannot
//! fail; this is where we prove ours can.
//!
//! Then once more against a **reduced** peer, as a real one under test often is: a device that
//! lists only some capabilities, talks to a model of its own and can be given no set-up, and an
//! instance whose web UI nobody drives. Each run must pass or be not applicable, with its
//! reason; a failure there is a check that holds a peer to what it never claimed.

use std::fmt::Write as _;
use std::io::Write as _;
use std::sync::Arc;
use std::time::{Duration, Instant};

use fake_device::FakeDevice;
use fake_instance::FakeInstance;
use harness::embed::InProcessPeer;
use harness::engine::{Cell, RunOutcome, Verdict};
use harness::rules::{Binds, FoundBy, catalogue};
use harness::scenario::catalogue::embedded_of;
use harness::scenario::{Family, Scenario, Side};

use crate::Error;
use crate::pace::Pace;

/// One run of the self-test.
#[derive(Debug, Clone)]
#[allow(missing_docs)] // fields whose names say it all go undocumented
pub struct Case {
    /// The double that runs the scenario.
    pub side: Side,
    /// The scenario's file name.
    pub file: &'static str,
    pub scenario: Arc<Scenario>,
    pub cell: Cell,
    /// The misbehaviour the other double acts out (`RULE` or `RULE/WAY`), or none.
    pub misbehave: Option<String>,
    /// The other double plays a reduced peer (see [`REDUCED_DEVICE`]) and nothing arranges its
    /// set-up.
    pub reduced: bool,
    /// The misbehaviour is a bug planted for `harness explore` (`found_by: explore`): the
    /// scenario is to pass it, as the whole catalogue does.
    pub planted: bool,
}

impl Case {
    /// The rule the other double breaks, whichever way.
    pub fn broken_rule(&self) -> Option<String> {
        self.misbehave
            .as_deref()
            .map(|m| harness::rules::rule_of(m).to_string())
    }
}

/// How long the reduced device takes to answer initialize.
const REDUCED_INITIALIZE_AFTER: std::time::Duration = std::time::Duration::from_millis(30);

/// The capabilities the reduced device lists: those of an independent device written from the
/// 1.1.0 spec by others (one root, a model of its own, no person at its terminal).
pub const REDUCED_DEVICE: &[&str] = &[
    "turns", "status", "delete", "title", "steer", "rewind", "ask",
];

/// What a case came to.
#[derive(Debug)]
#[allow(missing_docs)] // fields whose names say it all go undocumented
pub struct CaseResult {
    pub case: Case,
    /// Whether it came out as it should.
    pub ok: bool,
    /// One line for the table.
    pub verdict: String,
    /// The full report, for a case that did not come out as it should.
    pub report: Option<String>,
    /// How long it took.
    pub elapsed: Duration,
    /// When it started, since the self-test's first case did (to set beside a stall).
    pub started: Duration,
    /// Its outcome and last messages, when it ran and an HTML report wants them (kept only
    /// then: a case's last messages can hold prompts of megabytes).
    pub run: Option<(RunOutcome, Vec<harness::journal::Entry>)>,
}

/// How long a simulated peer waits for the other side in the self-test.
const PATIENCE: Duration = Duration::from_secs(5);

/// Builds every case, and the list of misbehaviours no scenario checks.
pub fn plan(filter: Option<&str>) -> Result<(Vec<Case>, Vec<String>), Error> {
    let mut cases = Vec::new();
    let mut unchecked = Vec::new();
    for (family, side) in Family::ALL
        .into_iter()
        .flat_map(|f| [(f, Side::Instance), (f, Side::Device)])
    {
        // fake-instance checks the device, so the device's rules are the ones it can catch.
        let peer_binds = match side {
            Side::Instance => Binds::Device,
            Side::Device => Binds::Instance,
        };
        let misbehaviours = || {
            catalogue()
                .misbehaviours_of(peer_binds)
                .filter(move |r| r.family == family)
        };
        let mut checked = std::collections::BTreeSet::new();
        for file in embedded_of(side, family) {
            let scenario = Arc::new(file.load_for_selftest()?);
            checked.extend(scenario.rules.iter().cloned());
            if filter.is_some_and(|f| !scenario.name.contains(f) && !file.file.contains(f)) {
                continue;
            }
            for cell in Cell::all_of(&scenario) {
                // lvmh has no capabilities to list fewer of: no reduced peer.
                let reduced_too = family == Family::Lembas;
                for reduced in [false, true].into_iter().filter(|r| !r || reduced_too) {
                    cases.push(Case {
                        side,
                        file: file.file,
                        scenario: scenario.clone(),
                        cell,
                        misbehave: None,
                        reduced,
                        planted: false,
                    });
                }
                for rule in misbehaviours() {
                    for (id, cells, _) in rule.misbehaviour_ids() {
                        let planted = rule.found_by(&id) == FoundBy::Explore;
                        // A planted bug is run against every scenario; any other misbehaviour
                        // against those that list its rule.
                        if (planted || scenario.rules.contains(&rule.id))
                            && cells.is_none_or(|c| c.contains(cell.protocol(), cell.spec()))
                        {
                            cases.push(Case {
                                side,
                                file: file.file,
                                scenario: scenario.clone(),
                                cell,
                                misbehave: Some(id),
                                reduced: rule.on_reduced_peer && !planted,
                                planted,
                            });
                        }
                    }
                }
            }
        }
        if filter.is_none() {
            unchecked.extend(
                misbehaviours()
                    .filter(|r| !checked.contains(&r.id))
                    .map(|r| r.id.clone()),
            );
        }
    }
    Ok((cases, unchecked))
}

/// Runs one case: the scenario's double with the scenario, the other double playing the peer
/// its `peer:` section describes (or a reduced peer given no set-up), restarted when a step
/// says so.
pub async fn run_case(case: &Case) -> Result<(RunOutcome, Vec<harness::journal::Entry>), Error> {
    if case.scenario.family == Family::Lvmh {
        return run_lvmh_case(case).await;
    }
    let peer = InProcessPeer::new();
    let process: Arc<dyn harness::engine::PeerProcess> = peer.clone();
    let report = match case.side {
        Side::Instance => {
            // A scenario that speaks to the device on its standard input and output gets a pipe
            // pair: one end the instance's link, the other the device's stdin and stdout.
            let (instance_end, device_end) = match fake_instance::speaks_stdio(&case.scenario) {
                true => {
                    let (a, b) = stdio_pair();
                    (Some(fake_instance::StdioLink::new(a)), Some(b))
                }
                false => (None, None),
            };
            let instance = FakeInstance::builder()
                .with_scenario((*case.scenario).clone())
                .cell(case.cell)
                .patience(PATIENCE)
                .arranged(arranged(case.reduced))
                .peer_process(process)
                // A misbehaviour case is decided by its rule's first finding.
                .end_at_finding(case.broken_rule())
                .stdio_link(instance_end)
                .start()
                .await?;
            let (device, _root) = match peer_device(case, &instance.url(), peer, device_end).await {
                Ok(started) => started,
                Err(e) => {
                    instance.dismiss();
                    return Err(e);
                }
            };
            let report = instance.verdict().await;
            let _ = device.verdict().await;
            report
        }
        Side::Device => {
            let instance = FakeInstance::builder()
                .cell(case.cell)
                .patience(PATIENCE)
                .restarted_by(peer);
            let instance = match &case.misbehave {
                Some(rule) => instance.misbehave(rule)?,
                None => instance,
            };
            // An instance whose web UI nobody drives is given no set-up.
            let instance = if case.reduced {
                instance
            } else {
                instance.as_peer_of(&case.scenario)?
            };
            let instance = instance.start().await?;
            // One trusted root, as a web server's test would give the device (`--root`).
            let root = tempfile::tempdir().map_err(Error::Root)?;
            let device = FakeDevice::builder(instance.url())
                .with_scenario((*case.scenario).clone())
                .cell(case.cell)
                .root(root.path())
                .patience(PATIENCE)
                .arranged(arranged(case.reduced))
                .peer_process(process)
                // A misbehaviour case is decided by its rule's first finding.
                .end_at_finding(case.broken_rule())
                .start()
                .await?;
            let report = device.verdict().await;
            let _ = instance.verdict().await;
            report
        }
    };
    Ok(report.into_parts())
}

/// Runs one lvmh case: the fake daemon against the fake plugin, one of them running the
/// scenario, the other playing the peer its `peer:` section describes (restarted when a step
/// says so).
async fn run_lvmh_case(case: &Case) -> Result<(RunOutcome, Vec<harness::journal::Entry>), Error> {
    let peer = InProcessPeer::new();
    let process: Arc<dyn harness::engine::PeerProcess> = peer.clone();
    let scenario = (*case.scenario).clone();
    let report = match case.side {
        Side::Instance => {
            let daemon = FakeInstance::builder()
                .with_scenario(scenario.clone())
                .cell(case.cell)
                .patience(PATIENCE)
                .arranged(harness::engine::Arranged::Everything)
                .peer_process(process)
                .end_at_finding(case.broken_rule())
                .start()
                .await?;
            let settings = fake_device::lvmh::PluginSettings::of_peer(&scenario)
                .map_err(Error::PeerSettings)?;
            let plugin = FakeDevice::builder(daemon.url())
                .cell(case.cell)
                .patience(PATIENCE)
                .restarted_by(peer)
                .family(Family::Lvmh)
                .plugin(settings)
                .peer_steps(scenario.peer_steps().to_vec());
            let plugin = match &case.misbehave {
                Some(rule) => plugin.misbehave(rule)?,
                None => plugin,
            };
            let plugin = match plugin.start().await {
                Ok(plugin) => plugin,
                Err(e) => {
                    daemon.dismiss();
                    return Err(e.into());
                }
            };
            let report = daemon.verdict().await;
            let _ = plugin.verdict().await;
            report
        }
        Side::Device => {
            let daemon = FakeInstance::builder()
                .cell(case.cell)
                .patience(PATIENCE)
                .restarted_by(peer)
                .family(Family::Lvmh);
            let daemon = match &case.misbehave {
                Some(rule) => daemon.misbehave(rule)?,
                None => daemon,
            };
            let daemon = daemon.start().await?;
            let plugin = FakeDevice::builder(daemon.url())
                .with_scenario(scenario)
                .cell(case.cell)
                .patience(PATIENCE)
                .arranged(harness::engine::Arranged::Everything)
                .peer_process(process)
                .end_at_finding(case.broken_rule())
                .start()
                .await?;
            let report = plugin.verdict().await;
            let _ = daemon.verdict().await;
            report
        }
    };
    Ok(report.into_parts())
}

/// The device that plays an instance scenario's peer: the one its `peer:` section describes,
/// or a reduced one given no set-up; restarted by `peer` when a step says so. The reduced
/// device's root is given back with it, to live as long as the run.
async fn peer_device(
    case: &Case,
    url: &str,
    peer: Arc<InProcessPeer>,
    stdio: Option<harness::transport::Connection>,
) -> Result<(FakeDevice, Option<tempfile::TempDir>), Error> {
    let device = FakeDevice::builder(url)
        .cell(case.cell)
        .patience(PATIENCE)
        .restarted_by(peer)
        .own_runtime(restarts_peer(&case.scenario.steps));
    let device = match stdio {
        Some(connection) => device.stdio(connection),
        None => device,
    };
    let device = match &case.misbehave {
        Some(rule) => device.misbehave(rule)?,
        None => device,
    };
    // A reduced device is given no set-up: one root, a model of its own, only some
    // capabilities.
    let (device, root) = if case.reduced {
        let root = tempfile::tempdir().map_err(Error::Root)?;
        // It also answers initialize a little later, as a CLI on the official ACP SDK may:
        // an instance that sends anything before that answer is refused and caught.
        let device = device
            .root(root.path())
            .agent(fake_device::AgentKind::Echo)
            .capabilities(REDUCED_DEVICE.iter().copied())
            .initialize_after(REDUCED_INITIALIZE_AFTER);
        (device, Some(root))
    } else {
        let device = device.as_peer_of(&case.scenario)?;
        (device, None)
    };
    let device = device.start().await?;
    Ok((device, root))
}

/// Two ends of a pair of pipes, as an editor and `serve --stdio` hold them: what one writes,
/// one line a message, the other reads.
fn stdio_pair() -> (
    harness::transport::Connection,
    harness::transport::Connection,
) {
    use harness::transport::stdio::from_streams;
    let (a_reads, b_writes) = tokio::io::duplex(1 << 20);
    let (b_reads, a_writes) = tokio::io::duplex(1 << 20);
    let limits = harness::transport::FrameLimits::default();
    (
        from_streams(a_reads, a_writes, limits, "stdio".to_owned()),
        from_streams(b_reads, b_writes, limits, "editor".to_owned()),
    )
}

/// Whether the steps restart the peer (`restart_peer`, also inside `when`).
fn restarts_peer(steps: &[harness::scenario::Spanned<harness::scenario::Step>]) -> bool {
    use harness::scenario::Step;
    steps.iter().any(|step| match &step.value {
        Step::RestartPeer(_) => true,
        Step::When(when) => restarts_peer(&when.steps),
        _ => false,
    })
}

/// What the scenario's double may take as arranged: everything the other double does, or
/// nothing for a reduced peer.
fn arranged(reduced: bool) -> harness::engine::Arranged {
    if reduced {
        harness::engine::Arranged::Nothing
    } else {
        harness::engine::Arranged::Everything
    }
}

fn judge(
    case: Case,
    result: Result<(RunOutcome, Vec<harness::journal::Entry>), Error>,
    (started, elapsed): (Duration, Duration),
    keep: bool,
) -> CaseResult {
    let double = case.side.double();
    let run = if keep {
        result.as_ref().ok().cloned()
    } else {
        None
    };
    let (ok, verdict, report) = match (&case.misbehave, result) {
        (_, Err(e)) => (false, format!("ERROR {e}"), None),
        (None, Ok((outcome, recent))) if case.reduced => match outcome.verdict() {
            Verdict::Passed => (true, "passed".to_string(), None),
            Verdict::NotApplicable(why) => (true, format!("not applicable: {why}"), None),
            _ => (
                false,
                format!(
                    "FAILED against a reduced peer ({})",
                    outcome.broken_rules().join(", ")
                ),
                Some(harness::report::human::render(double, &outcome, &recent)),
            ),
        },
        (None, Ok((outcome, recent))) if outcome.passed() => {
            let _ = recent;
            (true, "passed".to_string(), None)
        }
        (None, Ok((outcome, recent))) => (
            false,
            format!(
                "FAILED against a well-behaved peer ({})",
                outcome.broken_rules().join(", ")
            ),
            Some(harness::report::human::render(double, &outcome, &recent)),
        ),
        (Some(_), Ok((outcome, recent))) if case.planted => match outcome.verdict() {
            Verdict::Passed | Verdict::NotApplicable(_) => {
                (true, "missed, as planted for explore".to_string(), None)
            }
            _ => (
                false,
                format!(
                    "CAUGHT ({}): a bug planted for explore is to pass every scenario; make it a way of its own",
                    outcome.broken_rules().join(", ")
                ),
                Some(harness::report::human::render(double, &outcome, &recent)),
            ),
        },
        (Some(_), Ok((outcome, recent))) => {
            let rule = case.broken_rule().unwrap_or_default();
            let broken = outcome.broken_rules();
            if !outcome.passed() && broken.contains(&rule) && !outcome.scenario_error() {
                (true, format!("caught: {}", broken.join(", ")), None)
            } else if outcome.passed() {
                (
                    false,
                    "MISSED: the scenario passed".to_string(),
                    Some(harness::report::human::render(double, &outcome, &recent)),
                )
            } else {
                (
                    false,
                    format!("MISSED: failed on {} but not on {rule}", broken.join(", ")),
                    Some(harness::report::human::render(double, &outcome, &recent)),
                )
            }
        }
    };
    CaseResult {
        case,
        ok,
        verdict,
        report,
        elapsed,
        started,
        run,
    }
}

/// Who the peer of a case was, in a few words.
fn peer_of(case: &Case) -> String {
    match (&case.misbehave, case.reduced) {
        (Some(m), _) if case.planted => format!("planted {m}"),
        (Some(m), true) => format!("reduced, breaks {m}"),
        (Some(m), false) => format!("breaks {m}"),
        (None, true) => "reduced".into(),
        (None, false) => "well-behaved".into(),
    }
}

/// The self-test as one HTML page: a row a scenario and peer, a column a cell.
fn write_html(path: &std::path::Path, results: &[CaseResult]) -> Result<(), Error> {
    let labels: Vec<String> = results
        .iter()
        .map(|r| {
            format!(
                "{}/{} · {}",
                r.case.side.folder(),
                r.case.file,
                peer_of(&r.case)
            )
        })
        .collect();
    let pages: Vec<harness::report::html::RunPage<'_>> = results
        .iter()
        .zip(&labels)
        .filter_map(|(r, label)| {
            r.run
                .as_ref()
                .map(|(outcome, recent)| harness::report::html::RunPage {
                    double: r.case.side.double(),
                    label,
                    outcome,
                    entries: recent,
                })
        })
        .collect();
    std::fs::write(
        path,
        harness::report::html::render_many("harness selftest", &pages),
    )
    .map_err(|source| Error::SelftestReport {
        path: path.to_path_buf(),
        source,
    })
}

/// The cases judged, and the stalls of the machine seen meanwhile.
#[derive(Debug)]
pub struct Judged {
    /// Each case's result, in the plan's order.
    pub results: Vec<CaseResult>,
    /// When timers ran late: a task held a worker, or the machine was busy (see
    /// [`crate::stall`]).
    pub stalls: Vec<crate::stall::Stall>,
}

/// Runs the cases, at most `jobs` at a time and fewer while the CPU is busy ([`Pace`]), and
/// judges each; `keep`: each result keeps its run (for the HTML report).
pub async fn judge_all(cases: Vec<Case>, jobs: usize, keep: bool) -> Judged {
    scratch_in_memory();
    let began = Instant::now();
    // The cases running now, so a stall can say what ran during it.
    let running = Arc::new(std::sync::Mutex::new(std::collections::BTreeMap::new()));
    let watch = crate::stall::StallWatch::start({
        let running = running.clone();
        move || describe_running(&running)
    });
    let pace = Pace::new(jobs);
    let total = cases.len();
    let done = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    // A progress line, on a terminal only: a log or a CI page gets the table alone.
    let progress = harness::cli::colours_on(&std::io::stderr());
    // The longest first, so that none of them starts last and keeps the whole self-test
    // waiting on it; the results come back in the plan's order.
    let mut order: Vec<(usize, Case)> = cases.into_iter().enumerate().collect();
    order.sort_by_key(|(_, case)| std::cmp::Reverse(expected_length(case)));
    let mut tasks = Vec::new();
    for (index, case) in order {
        let pace = pace.clone();
        let done = done.clone();
        let described = format!("{} [{}] {:?}", case.file, case.cell, case.misbehave);
        let running = running.clone();
        let short = format!("{} [{}] {}", case.file, case.cell, peer_of(&case));
        tasks.push((
            index,
            described,
            tokio::spawn(async move {
                let _permit = pace.admit().await;
                let started = Instant::now();
                if let Ok(mut running) = running.lock() {
                    running.insert(index, short);
                }
                let result = run_case(&case).await;
                if let Ok(mut running) = running.lock() {
                    running.remove(&index);
                }
                let judged = judge(case, result, (started - began, started.elapsed()), keep);
                let n = done.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
                if progress {
                    let mut err = std::io::stderr().lock();
                    let _ = write!(
                        err,
                        "\r\x1b[2K[{n}/{total}] {} {} · {}",
                        judged.case.file,
                        judged.case.cell,
                        peer_of(&judged.case)
                    );
                    let _ = err.flush();
                }
                judged
            }),
        ));
    }
    let mut results = Vec::new();
    let clear = || {
        if progress {
            let _ = write!(std::io::stderr(), "\r\x1b[2K");
        }
    };
    tasks.sort_by_key(|(index, _, _)| *index);
    for (_, described, task) in tasks {
        match task.await {
            Ok(result) => results.push(result),
            // A double that panics is a bug of ours; say which case, and keep the others.
            Err(e) => eprintln!("selftest: the case {described} panicked: {e}"),
        }
    }
    clear();
    Judged {
        results,
        stalls: watch.stop(),
    }
}

/// The cases running now, in a line: the first few by name, then how many more.
fn describe_running(
    running: &std::sync::Mutex<std::collections::BTreeMap<usize, String>>,
) -> String {
    const NAMED: usize = 6;
    let Ok(running) = running.lock() else {
        return "(unknown)".into();
    };
    let mut line: Vec<&str> = running.values().take(NAMED).map(String::as_str).collect();
    let more = running.len().saturating_sub(NAMED);
    let more = format!("and {more} more");
    if running.len() > NAMED {
        line.push(&more);
    }
    match line.is_empty() {
        true => "no case".into(),
        false => format!("{} case(s): {}", running.len(), line.join(", ")),
    }
}

/// Puts the cases' scratch folders (roots, state, stores) in `/dev/shm` where there is one and
/// `TMPDIR` says nothing: a self-test makes and deletes thousands of small folders, and on ext4
/// that costs more CPU than the doubles spend running (measured: a third of the whole).
fn scratch_in_memory() {
    let shm = std::path::Path::new("/dev/shm");
    if std::env::var_os("TMPDIR").is_none() && tempfile::tempdir_in(shm).is_ok() {
        // Only the first call takes; the self-test's tests call it once a side.
        let _ = tempfile::env::override_temp_dir(shm);
    }
}

/// About how long a case takes: what its steps wait for in any case (`wait`, the watch of
/// `expect_none` and `expect_no_reconnect`), and for a misbehaviour one deadline more, which its
/// caught step often waits out. Only the order cases start in depends on it.
fn expected_length(case: &Case) -> Duration {
    use harness::scenario::Step;
    fn waits(steps: &[harness::scenario::Spanned<Step>]) -> Duration {
        steps
            .iter()
            .map(|step| match &step.value {
                Step::Wait(d) => d.0,
                Step::ExpectNone(none) => none.duration.0,
                Step::ExpectNoReconnect(none) => none.duration.0,
                Step::When(when) => waits(&when.steps),
                Step::AnyOrder(inner) => waits(inner),
                _ => Duration::ZERO,
            })
            .sum()
    }
    let deadline = match &case.misbehave {
        Some(_) => case
            .scenario
            .timeout
            .map_or(harness::scenario::DEFAULT_TIMEOUT, |t| t.0),
        None => Duration::ZERO,
    };
    waits(&case.scenario.steps) + deadline
}

/// Runs the self-test and prints its table (and writes the HTML report to `html`); returns
/// whether everything came out as it should.
pub async fn selftest(
    filter: Option<&str>,
    jobs: usize,
    verbose: bool,
    quiet: bool,
    html: Option<&std::path::Path>,
) -> Result<bool, Error> {
    let started = Instant::now();
    let (cases, unchecked) = plan(filter)?;
    let total = cases.len();
    // explore's part runs beside the cases (its runs mostly wait on turns), unless a filter
    // other than `explore` picks some cases only.
    let explore = filter.is_none_or(|f| f == "explore");
    let (Judged { results, stalls }, explored) =
        tokio::join!(judge_all(cases, jobs, html.is_some()), async {
            match explore {
                true => crate::explore::planted::explore_all().await,
                false => Vec::new(),
            }
        });
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<10} {:<18} {:<22} {:<40} {:>8}  verdict",
        "double", "scenario", "cell", "peer", "time"
    );
    for r in results.iter().filter(|r| !quiet || !r.ok) {
        let _ = writeln!(
            out,
            "{:<10} {:<18} {:<22} {:<40} {:>6.0}ms  {}",
            r.case.side.folder(),
            r.case.file,
            r.case.cell.to_string(),
            peer_of(&r.case),
            r.elapsed.as_secs_f64() * 1000.0,
            r.verdict
        );
    }
    let _ = write!(std::io::stdout(), "{out}");
    for r in results.iter().filter(|r| !r.ok || verbose) {
        if let Some(report) = &r.report {
            let _ = writeln!(
                std::io::stdout(),
                "\n--- {} {} [{}] {:?}, started at {:.1}s\n{report}",
                r.case.side.double(),
                r.case.file,
                r.case.cell,
                r.case.misbehave,
                r.started.as_secs_f64()
            );
        }
    }
    for r in explored.iter().filter(|r| !quiet || !r.ok) {
        let _ = writeln!(
            std::io::stdout(),
            "{:<10} {:<18} {:<22} {:<40} {:>6.0}ms  {}",
            "explore",
            format!("seed {}", crate::explore::planted::SEED),
            "protocol 2 · spec 1.1.0",
            r.misbehave
                .as_deref()
                .map_or(format!("{}, well-behaved", r.double), |m| format!(
                    "{} planted {m}",
                    r.double
                )),
            r.elapsed.as_secs_f64() * 1000.0,
            r.verdict
        );
    }
    for rule in &unchecked {
        let _ = writeln!(
            std::io::stdout(),
            "UNCHECKED: the misbehaviour of {rule} is not caught by any scenario (no scenario lists the rule)"
        );
    }
    if let Some(path) = html {
        write_html(path, &results)?;
    }
    // Said whenever timers ran late, not only when a case failed: a stall that broke
    // nothing this time is the one that explains a failure next time.
    if let Some(stalled) = crate::stall::summary(&stalls) {
        let _ = writeln!(std::io::stdout(), "\nselftest: {stalled}");
    }
    let passed = results.iter().filter(|r| r.ok).count() + explored.iter().filter(|r| r.ok).count();
    let failed = total + explored.len() - passed + unchecked.len();
    let _ = writeln!(
        std::io::stdout(),
        "\nselftest: {passed} passed, {failed} failed in {:.1}s",
        started.elapsed().as_secs_f64()
    );
    Ok(failed == 0)
}
