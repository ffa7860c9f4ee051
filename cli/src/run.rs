//! `harness run`: the real project under test, across the matrix. Scenarios (files, folders, or
//! the embedded ones by name) × protocols × specs, each run with its own port, `{tmp}` and state,
//! the system under test started by the run (`--exec`) and its set-up done by hooks
//! (`--hooks`); a JUnit file a cell, a JSON summary, a table, and the exit code a CI job needs,
//! with an expected-failures baseline to ratchet on.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use harness::engine::{Arranged, Cell, RunOutcome, Verdict};
use harness::hooks::Hooks;
use harness::journal::Entry;
use harness::process::SutSpec;
use harness::scenario::{Family, Scenario, Side};

use crate::Error;
use crate::baseline::{self, Expected, Judged, RunSeen};
use crate::pace::Pace;

/// How every run of the matrix meets the system under test.
#[derive(Debug, Clone, Default)]
pub struct Setup {
    /// The command that starts it (`--exec`); else each scenario's `sut:`.
    pub exec: Option<String>,
    /// What its project does for the scenarios' set-up (`--hooks`).
    pub hooks: Option<Arc<Hooks>>,
    /// A running instance to dial (fake-device's scenarios, without `--exec`).
    pub instance: Option<String>,
    /// The device token.
    pub token: Option<String>,
    /// Set-up its own test does (`--arranged`).
    pub arranged: Arranged,
}

/// One run of the matrix: a scenario in a cell.
#[derive(Debug, Clone)]
#[allow(missing_docs)] // fields whose names say it all go undocumented
pub struct Planned {
    /// The double that runs it.
    pub side: Side,
    /// Where it came from (`scenarios/instance/negotiate.yaml`).
    pub label: String,
    pub scenario: Arc<Scenario>,
    pub cell: Cell,
}

/// A run's result.
#[derive(Debug)]
pub struct Ran {
    /// What ran.
    pub planned: Planned,
    /// Its outcome and last messages, or why it could not run.
    pub outcome: Result<(RunOutcome, Vec<Entry>), Error>,
    /// How long it took.
    pub elapsed: Duration,
}

impl Ran {
    /// Its verdict (a run that could not run is a scenario error).
    pub fn verdict(&self) -> Verdict {
        match &self.outcome {
            Ok((outcome, _)) => outcome.verdict(),
            Err(_) => Verdict::ScenarioError,
        }
    }

    /// The rules it broke.
    pub fn broken(&self) -> Vec<String> {
        match &self.outcome {
            Ok((outcome, _)) => outcome.broken_rules(),
            Err(_) => Vec::new(),
        }
    }

    /// Its outcome; a run that could not run is one erred step saying why, so every report
    /// shows it, and none reads green for it.
    pub fn outcome(&self) -> std::borrow::Cow<'_, RunOutcome> {
        match &self.outcome {
            Ok((outcome, _)) => std::borrow::Cow::Borrowed(outcome),
            Err(why) => std::borrow::Cow::Owned(RunOutcome {
                elapsed_ms: self.elapsed.as_secs_f64() * 1000.0,
                ..RunOutcome::broken(
                    self.planned.scenario.name.clone(),
                    self.planned.cell,
                    why.to_string(),
                )
            }),
        }
    }

    /// Its last messages.
    pub fn recent(&self) -> &[Entry] {
        match &self.outcome {
            Ok((_, recent)) => recent,
            Err(_) => &[],
        }
    }

    /// One line on what it came to.
    pub fn summary(&self) -> String {
        match (&self.outcome, self.verdict()) {
            (Err(e), _) => format!("ERROR {e}"),
            (_, Verdict::Passed) => "passed".into(),
            (_, Verdict::NotApplicable(why)) => format!("not applicable: {why}"),
            (_, Verdict::ScenarioError) => "SCENARIO ERROR".into(),
            (_, Verdict::Failed) => format!("FAILED: {}", self.broken().join(", ")),
        }
    }
}

/// The scenarios `args` name: files, folders (every `.yaml` under them), `instance` or `device`
/// (every embedded one of that side), or an embedded one by name (`instance/negotiate.yaml`, or
/// `negotiate` with `side`).
pub fn select(
    args: &[String],
    side: Option<Side>,
) -> Result<Vec<(Side, String, Arc<Scenario>)>, Error> {
    let mut found = Vec::new();
    for arg in args {
        let path = Path::new(arg);
        if path.is_dir() {
            let mut files = Vec::new();
            yaml_files(path, &mut files).map_err(|source| Error::Folder {
                folder: arg.clone(),
                source,
            })?;
            if files.is_empty() {
                return Err(Error::EmptyFolder(arg.clone()));
            }
            for file in files {
                let side = side_of(&file, side)?;
                let scenario = harness::scenario::load_file(&file, Some(side))?;
                found.push((side, file.display().to_string(), Arc::new(scenario)));
            }
        } else if path.is_file() {
            let side = side_of(path, side)?;
            let scenario = harness::scenario::load_file(path, Some(side))?;
            found.push((side, arg.clone(), Arc::new(scenario)));
        } else if let Some((family, whole)) = Family::ALL
            .into_iter()
            .flat_map(|f| [(f, Side::Instance), (f, Side::Device)])
            .find(|(f, s)| format!("{}{}", f.folder(), s.folder()) == *arg)
        {
            for embedded in harness::scenario::catalogue::embedded_of(whole, family) {
                let scenario = embedded.load()?;
                found.push((whole, embedded.label(), Arc::new(scenario)));
            }
        } else {
            // `lvmh/instance/replay` names an embedded scenario of the lvmh family.
            let (family, named) = match arg.strip_prefix(Family::Lvmh.folder()) {
                Some(rest) => (Family::Lvmh, rest),
                None => (Family::Lembas, arg.as_str()),
            };
            let side = match (side, named.split_once('/')) {
                (Some(side), _) => side,
                (None, Some(("instance", _))) => Side::Instance,
                (None, Some(("device", _))) => Side::Device,
                _ => return Err(Error::NotAScenario(arg.clone())),
            };
            let scenario = harness::scenario::catalogue::resolve_in(named, side, family)?;
            found.push((
                side,
                format!(
                    "scenarios/{}{}/{}",
                    family.folder(),
                    side.folder(),
                    named.rsplit('/').next().unwrap_or(named)
                ),
                Arc::new(scenario),
            ));
        }
    }
    // A scenario named twice (`device` and `device/cancel.yaml`) runs once.
    let mut seen = std::collections::HashSet::new();
    found.retain(|(side, _, scenario)| {
        seen.insert((
            side.folder(),
            scenario.family.folder(),
            scenario.name.clone(),
        ))
    });
    if let Some(first) = found.first().map(|f| f.0)
        && found.iter().any(|f| f.0 != first)
    {
        return Err(Error::BothSides);
    }
    Ok(found)
}

fn yaml_files(dir: &Path, into: &mut Vec<PathBuf>) -> std::io::Result<()> {
    let mut entries: Vec<_> = std::fs::read_dir(dir)?
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            yaml_files(&path, into)?;
        } else if path.extension().is_some_and(|e| e == "yaml" || e == "yml") {
            into.push(path);
        }
    }
    Ok(())
}

fn side_of(path: &Path, side: Option<Side>) -> Result<Side, Error> {
    side.or_else(|| Side::from_path(path))
        .ok_or_else(|| Error::NoSide(path.to_path_buf()))
}

/// Every run: each scenario in each cell of `protocols` × `specs` its matrix holds.
pub fn plan(
    selected: &[(Side, String, Arc<Scenario>)],
    protocols: &[u8],
    specs: &[harness::lembas::Spec],
) -> Vec<Planned> {
    let mut runs = Vec::new();
    // An lvmh scenario has one cell, whatever the matrix asked of the LLeMbas ones.
    for (side, label, scenario) in selected {
        if scenario.family == Family::Lvmh {
            runs.push(Planned {
                side: *side,
                label: label.clone(),
                scenario: scenario.clone(),
                cell: Cell::Lvmh,
            });
        }
    }
    for spec in specs {
        for protocol in protocols {
            for (side, label, scenario) in selected {
                let cell = Cell::lembas(*protocol, *spec);
                if scenario.family == Family::Lembas && Cell::all_of(scenario).contains(&cell) {
                    runs.push(Planned {
                        side: *side,
                        label: label.clone(),
                        scenario: scenario.clone(),
                        cell,
                    });
                }
            }
        }
    }
    runs
}

/// Runs one: its double in this process, the system under test as the setup says.
pub async fn run_one(planned: &Planned, setup: &Setup) -> Result<(RunOutcome, Vec<Entry>), Error> {
    let scenario = (*planned.scenario).clone();
    let spec = setup
        .exec
        .clone()
        .map(SutSpec::command)
        .or_else(|| scenario.sut.clone());
    match planned.side {
        Side::Instance => {
            if spec.is_none() {
                return Err(Error::NoExec);
            }
            let options = fake_instance::Options {
                family: scenario.family,
                cell: planned.cell,
                tokens: vec![
                    setup
                        .token
                        .clone()
                        .unwrap_or_else(|| fake_instance::DEFAULT_TOKEN.into()),
                ],
                sut: spec,
                hooks: setup.hooks.clone(),
                arranged: setup.arranged.clone(),
                ..fake_instance::Options::default()
            };
            let finished =
                fake_instance::run(options, Some(scenario), |_| {}, std::future::pending()).await?;
            let outcome = finished.outcome.ok_or(Error::NoVerdict("fake-instance"))?;
            Ok((outcome, finished.recent))
        }
        Side::Device => {
            let scratch = tempfile::tempdir().map_err(Error::Root)?;
            let root = scratch.path().join("root");
            std::fs::create_dir_all(&root).map_err(Error::Root)?;
            let token = setup
                .token
                .clone()
                .unwrap_or_else(|| "lembas-test-token".into());
            let (sut, instance) = match spec {
                Some(spec) => {
                    let (sut, url) = fake_device::start_instance(
                        spec,
                        setup.instance.as_deref(),
                        &token,
                        &planned.cell,
                        &root,
                        scenario.family,
                    )
                    .await
                    .map_err(Error::SystemUnderTest)?;
                    (Some(sut), url)
                }
                None => match &setup.instance {
                    Some(url) => (None, url.clone()),
                    None => return Err(Error::NoInstance),
                },
            };
            let options = fake_device::Options {
                family: scenario.family,
                token,
                roots: vec![root.display().to_string()],
                protocol: fake_device::ProtocolChoice::Fixed(planned.cell.protocol()),
                cell: planned.cell,
                state_dir: Some(scratch.path().join("state")),
                sut,
                hooks: setup.hooks.clone(),
                arranged: setup.arranged.clone(),
                ..fake_device::Options::for_instance(instance)
            };
            let finished =
                fake_device::run(options, Some(scenario), std::future::pending()).await?;
            let outcome = finished.outcome.ok_or(Error::NoVerdict("fake-device"))?;
            Ok((outcome, finished.recent))
        }
    }
}

/// Runs them all, at most `jobs` at a time and fewer while the CPU is busy ([`Pace`]), calling
/// `progress` as each ends.
pub async fn run_all(
    planned: Vec<Planned>,
    setup: Arc<Setup>,
    jobs: usize,
    progress: impl Fn(usize, usize, &Ran) + Send + Sync + 'static,
) -> Vec<Ran> {
    let total = planned.len();
    let pace = Pace::new(jobs);
    let progress = Arc::new(progress);
    let done = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for planned in planned {
        let (pace, setup, progress, done) =
            (pace.clone(), setup.clone(), progress.clone(), done.clone());
        let kept = planned.clone();
        tasks.push((
            kept,
            tokio::spawn(async move {
                let _permit = pace.admit().await;
                let started = Instant::now();
                let outcome = run_one(&planned, &setup).await;
                let ran = Ran {
                    planned,
                    outcome,
                    elapsed: started.elapsed(),
                };
                let n = done.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
                progress(n, total, &ran);
                ran
            }),
        ));
    }
    let mut all = Vec::new();
    for (planned, task) in tasks {
        match task.await {
            Ok(ran) => all.push(ran),
            // A double that panics is a bug of ours; the run counts as one that could not run,
            // so the matrix cannot pass over it.
            Err(e) => all.push(Ran {
                planned,
                outcome: Err(Error::Panicked(e)),
                elapsed: Duration::ZERO,
            }),
        }
    }
    all
}

/// What the matrix came to, with the baseline.
#[derive(Debug)]
pub struct Summary {
    /// Each run as the baseline sees it, in the order of the runs.
    pub judged: Vec<Judged>,
    /// Baseline entries that no longer hold.
    pub stale: Vec<String>,
    /// Baseline entries that speak of no run here.
    pub unused: Vec<String>,
    /// Each run's verdict, in order.
    pub verdicts: Vec<Verdict>,
}

impl Summary {
    /// Judges the runs against the baseline.
    pub fn of(ran: &[Ran], expected: &[Expected]) -> Summary {
        let verdicts: Vec<(Verdict, Vec<String>)> =
            ran.iter().map(|r| (r.verdict(), r.broken())).collect();
        let seen: Vec<RunSeen<'_>> = ran
            .iter()
            .zip(&verdicts)
            .map(|(r, (verdict, broken))| RunSeen {
                scenario: &r.planned.scenario.name,
                cell: &r.planned.cell,
                verdict,
                broken,
            })
            .collect();
        let judgement = baseline::judge(expected, &seen);
        Summary {
            judged: judgement.runs,
            stale: judgement.stale,
            unused: judgement.unused,
            verdicts: verdicts.iter().map(|(v, _)| v.clone()).collect(),
        }
    }

    /// Whether the matrix passes: no unexpected failure, no stale entry.
    pub fn passed(&self) -> bool {
        self.stale.is_empty() && !self.judged.contains(&Judged::UnexpectedFailure)
    }

    /// Whether every unexpected failure is a run that could not run or whose set-up broke (a
    /// usage or scenario error, exit 2), rather than a peer's.
    pub fn only_set_up_broke(&self) -> bool {
        self.judged
            .iter()
            .zip(&self.verdicts)
            .filter(|(j, _)| **j == Judged::UnexpectedFailure)
            .all(|(_, v)| *v == Verdict::ScenarioError)
    }

    /// How many runs came to `judged`.
    pub fn count(&self, what: fn(&Judged) -> bool) -> usize {
        self.judged.iter().filter(|j| what(j)).count()
    }
}

/// Which rules a whole matrix judged for its peer: a rule counts as judged when one run kept or
/// broke it; one never judged keeps the first reason a run gave.
#[derive(Debug, Default)]
pub struct RulesJudged {
    /// Every rule the runs' scenarios check, with what came of it.
    pub rules: std::collections::BTreeMap<String, harness::engine::RuleJudgement>,
}

impl RulesJudged {
    /// The tally over `ran`.
    pub fn of(ran: &[Ran]) -> RulesJudged {
        use harness::engine::Judged as RuleJudged;
        let mut rules: std::collections::BTreeMap<String, harness::engine::RuleJudgement> =
            std::collections::BTreeMap::new();
        for r in ran {
            for j in r.outcome().judgements() {
                let better = |held: &harness::engine::RuleJudgement| match (held.judged, j.judged) {
                    (_, RuleJudged::Broken) => held.judged != RuleJudged::Broken,
                    (RuleJudged::NotJudged, RuleJudged::Kept) => true,
                    _ => false,
                };
                match rules.get(&j.rule) {
                    Some(held) if !better(held) => {}
                    _ => {
                        rules.insert(j.rule.clone(), j);
                    }
                }
            }
        }
        RulesJudged { rules }
    }

    /// How many rules were judged (kept or broken somewhere).
    pub fn judged(&self) -> usize {
        self.rules.values().filter(|j| j.was_judged()).count()
    }

    /// The line `harness run` ends with: `judged N of M rules for this peer`.
    pub fn line(&self) -> String {
        let broken = self
            .rules
            .values()
            .filter(|j| j.judged == harness::engine::Judged::Broken)
            .count();
        format!(
            "judged {} of {} rules for this peer ({broken} broken, {} not judged: --report json says why)",
            self.judged(),
            self.rules.len(),
            self.rules.len() - self.judged()
        )
    }
}

/// The double that runs a side's scenarios.
pub fn double(side: Side) -> &'static str {
    side.double()
}

/// Writes one JUnit file a cell into `dir` (`fake-instance.protocol-2.spec-1.1.0.xml`,
/// `fake-device.lvmh-v1.xml`), each
/// with a suite a scenario; gives the files written.
pub fn write_junit(dir: &Path, ran: &[Ran]) -> std::io::Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir)?;
    let mut cells: Vec<(Side, Cell)> = Vec::new();
    for r in ran {
        let key = (r.planned.side, r.planned.cell);
        if !cells.iter().any(|c| c.0 == key.0 && c.1 == key.1) {
            cells.push(key);
        }
    }
    let mut written = Vec::new();
    for (side, cell) in cells {
        let owned: Vec<std::borrow::Cow<'_, RunOutcome>> = ran
            .iter()
            .filter(|r| r.planned.side == side && r.planned.cell == cell)
            .map(Ran::outcome)
            .collect();
        let outcomes: Vec<&RunOutcome> = owned.iter().map(|o| o.as_ref()).collect();
        let name = format!("{} · {cell}", double(side));
        let path = dir.join(format!("{}.{}.xml", double(side), cell.slug()));
        std::fs::write(
            &path,
            harness::report::junit::render_many(&name, double(side), &outcomes),
        )?;
        written.push(path);
    }
    Ok(written)
}

/// What went wrong in a run, for tools: each failing or broken step (its place, line, rule,
/// sentence, what it awaited and expected, the nearest message and the diff) and each
/// monitor's finding (its rule, sentence and link).
fn failures(r: &Ran) -> Vec<serde_json::Value> {
    let Ok((outcome, _)) = &r.outcome else {
        return Vec::new();
    };
    let steps = outcome.steps.iter().filter_map(|step| {
        let failure = step.failure.as_ref()?;
        Some(serde_json::json!({
            "step": step.index,
            "line": step.line,
            "title": step.title,
            "status": step.status,
            "rule": failure.rule,
            "message": failure.summary,
            "awaited": failure.awaited,
            "expected": failure.expected,
            "nearest": failure.nearest,
            "diff": failure.diff,
        }))
    });
    let findings = outcome.findings.iter().map(|finding| {
        serde_json::json!({
            "rule": finding.rule,
            "message": finding.summary,
            "detail": finding.detail,
            "link": finding.link,
        })
    });
    steps.chain(findings).collect()
}

/// The matrix as JSON: each run with its verdict, what went wrong in it and what the baseline
/// made of it, the stale entries, and whether it passed.
pub fn json_summary(ran: &[Ran], summary: &Summary, elapsed: Duration) -> serde_json::Value {
    let runs: Vec<serde_json::Value> = ran
        .iter()
        .zip(&summary.judged)
        .map(|(r, judged)| {
            let verdict = match r.verdict() {
                Verdict::Passed => "passed",
                Verdict::NotApplicable(_) => "not_applicable",
                Verdict::Failed => "failed",
                Verdict::ScenarioError => "scenario_error",
            };
            let why = match (&r.outcome, r.verdict()) {
                (Err(e), _) => Some(e.to_string()),
                (_, Verdict::NotApplicable(why)) => Some(why),
                _ => None,
            };
            serde_json::json!({
                "scenario": r.planned.scenario.name,
                "file": r.planned.label,
                "double": double(r.planned.side),
                "protocol": r.planned.cell.protocol(),
                "spec": r.planned.cell.spec(),
                "verdict": verdict,
                "why": why,
                "broken_rules": r.broken(),
                "rules": r.outcome().judgements(),
                "failures": failures(r),
                "baseline": match judged {
                    Judged::ExpectedFailure(entry) => serde_json::json!({ "expected": entry }),
                    Judged::UnexpectedFailure => serde_json::json!("unexpected failure"),
                    _ => serde_json::Value::Null,
                },
                "elapsed_ms": r.elapsed.as_secs_f64() * 1000.0,
            })
        })
        .collect();
    let tally = RulesJudged::of(ran);
    serde_json::json!({
        "passed": summary.passed(),
        "judged": tally.line(),
        "rules": tally.rules.values().collect::<Vec<_>>(),
        "runs": runs,
        "stale_baseline_entries": summary.stale,
        "elapsed_ms": elapsed.as_secs_f64() * 1000.0,
    })
}
