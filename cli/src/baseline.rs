//! The expected-failures baseline of `harness run --expected-failures FILE`: what a team's
//! project is known to fail today, so it can adopt the suite on day one and ratchet. A failure
//! the baseline does not list fails the matrix; so does an entry whose run now passes (remove
//! it). A run that did not apply is neither.
//!
//! The file is a YAML list. Each entry is `scenario` (it fails, on any rule), `scenario:rule`
//! (it fails on that rule), or a map `{failure: scenario[:rule], protocol: N, spec: V, why: ...}`
//! that holds only in the cells it names.

use std::path::Path;

use harness::engine::{Cell, Verdict};
use harness::scenario::LoadError;
use serde::Deserialize;

/// One listed failure.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Expected {
    /// The scenario's name.
    pub scenario: String,
    /// The rule it breaks, when the entry names one.
    pub rule: Option<String>,
    /// Only in this protocol.
    pub protocol: Option<u8>,
    /// Only in this spec.
    pub spec: Option<String>,
    /// Why, as the team wrote it.
    pub why: Option<String>,
}

impl std::fmt::Display for Expected {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.scenario)?;
        if let Some(rule) = &self.rule {
            write!(f, ":{rule}")?;
        }
        if let Some(p) = self.protocol {
            write!(f, " (protocol {p})")?;
        }
        if let Some(s) = &self.spec {
            write!(f, " (spec {s})")?;
        }
        Ok(())
    }
}

#[derive(Deserialize)]
#[serde(untagged)]
enum Entry {
    Short(String),
    Full(Full),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Full {
    failure: String,
    #[serde(default)]
    protocol: Option<u8>,
    #[serde(default)]
    spec: Option<String>,
    #[serde(default)]
    why: Option<String>,
}

impl Expected {
    fn of(failure: &str, protocol: Option<u8>, spec: Option<String>, why: Option<String>) -> Self {
        let (scenario, rule) = match failure.split_once(':') {
            Some((scenario, rule)) => (scenario, Some(rule.trim().to_string())),
            None => (failure, None),
        };
        Expected {
            scenario: scenario.trim().trim_end_matches(".yaml").to_string(),
            rule,
            protocol,
            spec,
            why,
        }
    }

    fn holds_in(&self, scenario: &str, cell: &Cell) -> bool {
        self.scenario == scenario
            && self.protocol.is_none_or(|p| p == cell.protocol())
            && self.spec.as_ref().is_none_or(|s| cell.spec_is(s))
    }
}

/// Reads a baseline file; an error names the file, the line and the entry at fault.
pub fn load(path: &Path) -> Result<Vec<Expected>, LoadError> {
    let entries: Vec<Entry> = harness::scenario::load_yaml_file(path)?;
    Ok(entries
        .into_iter()
        .map(|entry| match entry {
            Entry::Short(failure) => Expected::of(&failure, None, None, None),
            Entry::Full(full) => Expected::of(&full.failure, full.protocol, full.spec, full.why),
        })
        .collect())
}

/// What a run came to, as the baseline sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Judged {
    /// It passed.
    Passed,
    /// It did not apply.
    NotApplicable,
    /// It failed, as the baseline says it does.
    ExpectedFailure(String),
    /// It failed, and the baseline does not say so.
    UnexpectedFailure,
}

/// One run, for the baseline: its scenario, cell, verdict and the rules it broke.
#[derive(Debug, Clone)]
#[allow(missing_docs)] // fields whose names say it all go undocumented
pub struct RunSeen<'a> {
    /// The scenario's name.
    pub scenario: &'a str,
    pub cell: &'a Cell,
    pub verdict: &'a Verdict,
    /// The rules it broke.
    pub broken: &'a [String],
}

/// What the baseline made of the runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Judgement {
    /// Each run, in order.
    pub runs: Vec<Judged>,
    /// Entries that no longer hold: they fail the matrix, saying to remove them.
    pub stale: Vec<String>,
    /// Entries that speak of no run here (a scenario not selected, or a typo): a note only.
    pub unused: Vec<String>,
}

/// Judges each run against the baseline. A failed run is expected when a `scenario` entry
/// holds for it, or when every rule it broke has a `scenario:rule` entry: a new rule broken is
/// a regression, not hidden by an old one. Only a peer's failure is expected: a run that could
/// not run, or whose set-up broke, is neither expected nor evidence that an entry is stale. An
/// entry is stale when a run it speaks of (its scenario, in its cells) passed or failed without
/// its rule.
pub fn judge(expected: &[Expected], runs: &[RunSeen<'_>]) -> Judgement {
    let covered = |run: &RunSeen<'_>| -> Option<String> {
        if *run.verdict != Verdict::Failed {
            return None;
        }
        let holding: Vec<&Expected> = expected
            .iter()
            .filter(|e| e.holds_in(run.scenario, run.cell))
            .collect();
        if let Some(whole) = holding.iter().find(|e| e.rule.is_none()) {
            return Some(whole.to_string());
        }
        let listed = |rule: &String| holding.iter().any(|e| e.rule.as_ref() == Some(rule));
        (!run.broken.is_empty() && run.broken.iter().all(listed)).then(|| {
            holding
                .iter()
                .filter(|e| e.rule.as_ref().is_some_and(|r| run.broken.contains(r)))
                .map(|e| e.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        })
    };
    let judged = runs
        .iter()
        .map(|run| match run.verdict {
            Verdict::Passed => Judged::Passed,
            Verdict::NotApplicable(_) => Judged::NotApplicable,
            Verdict::Failed | Verdict::ScenarioError => match covered(run) {
                Some(entries) => Judged::ExpectedFailure(entries),
                None => Judged::UnexpectedFailure,
            },
        })
        .collect();
    let mut stale = Vec::new();
    let mut unused = Vec::new();
    for entry in expected {
        let spoken_of: Vec<&RunSeen<'_>> = runs
            .iter()
            .filter(|run| entry.holds_in(run.scenario, run.cell))
            .collect();
        if spoken_of.is_empty() {
            unused.push(format!("`{entry}` speaks of no run here"));
            continue;
        }
        let holds_not: Vec<String> = spoken_of
            .iter()
            .filter(|run| match run.verdict {
                Verdict::Passed => true,
                Verdict::Failed => entry.rule.as_ref().is_some_and(|r| !run.broken.contains(r)),
                Verdict::NotApplicable(_) | Verdict::ScenarioError => false,
            })
            .map(|run| run.cell.to_string())
            .collect();
        if !holds_not.is_empty() {
            let what = if entry.rule.is_some() {
                "does not fail on that rule"
            } else {
                "passes"
            };
            stale.push(format!(
                "`{entry}` {what} in {}: remove it from the baseline (or narrow it to the cells where it still fails)",
                holds_not.join(", ")
            ));
        }
    }
    Judgement {
        runs: judged,
        stale,
        unused,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cell(protocol: u8, spec: &str) -> Cell {
        Cell::lembas(protocol, spec.parse().expect("a spec"))
    }

    #[test]
    fn entries_are_read_short_or_per_cell() {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("expected.yaml");
        std::fs::write(
            &path,
            "- restart\n- terminal-turns:device.card.patient\n- { failure: \"cards.yaml:device.permission.ask\", protocol: 1, why: not yet }\n",
        )
        .expect("write");
        let entries = load(&path).expect("it loads");
        assert_eq!(entries[0].scenario, "restart");
        assert_eq!(entries[1].rule.as_deref(), Some("device.card.patient"));
        assert_eq!(entries[2].scenario, "cards");
        assert_eq!(entries[2].protocol, Some(1));
        std::fs::write(&path, "- { failure: x, protocl: 1 }\n").expect("write");
        assert!(load(&path).is_err());
    }

    #[test]
    fn a_listed_failure_is_expected_an_unlisted_one_is_not_and_a_listed_pass_is_stale() {
        let expected = vec![
            Expected::of("restart", None, None, None),
            Expected::of("cards:device.permission.ask", None, None, None),
            Expected::of("negotiate", Some(1), None, None),
            Expected::of("files-search", None, None, None),
        ];
        let (p1, p2) = (cell(1, "1.1.0"), cell(2, "1.1.0"));
        let broke = vec!["device.permission.ask".to_string()];
        let other = vec!["device.prompt.answer".to_string()];
        let na = Verdict::NotApplicable("no files".into());
        let runs = [
            // Listed, and failing: expected.
            RunSeen {
                scenario: "restart",
                cell: &p2,
                verdict: &Verdict::Failed,
                broken: &other,
            },
            // Listed with its rule, failing on it: expected.
            RunSeen {
                scenario: "cards",
                cell: &p2,
                verdict: &Verdict::Failed,
                broken: &broke,
            },
            // Not listed: unexpected.
            RunSeen {
                scenario: "steer",
                cell: &p2,
                verdict: &Verdict::Failed,
                broken: &other,
            },
            // Listed for protocol 1 only; in 2 it fails unexpectedly.
            RunSeen {
                scenario: "negotiate",
                cell: &p2,
                verdict: &Verdict::Failed,
                broken: &other,
            },
            // Listed for protocol 1, and it passes there: stale.
            RunSeen {
                scenario: "negotiate",
                cell: &p1,
                verdict: &Verdict::Passed,
                broken: &[],
            },
            // Listed, but it did not apply: neither.
            RunSeen {
                scenario: "files-search",
                cell: &p2,
                verdict: &na,
                broken: &[],
            },
        ];
        let Judgement {
            runs: judged,
            stale,
            unused,
        } = judge(&expected, &runs);
        assert!(unused.is_empty(), "{unused:?}");
        assert_eq!(
            judged,
            [
                Judged::ExpectedFailure("restart".into()),
                Judged::ExpectedFailure("cards:device.permission.ask".into()),
                Judged::UnexpectedFailure,
                Judged::UnexpectedFailure,
                Judged::Passed,
                Judged::NotApplicable,
            ]
        );
        assert_eq!(stale.len(), 1, "{stale:?}");
        assert!(
            stale[0].starts_with(
                "`negotiate (protocol 1)` passes in protocol 1 · spec 1.1.0: remove it"
            ),
            "{stale:?}"
        );
        // A rule it no longer breaks makes the entry stale, and the failure unexpected.
        let run = |verdict: &'static Verdict, broken: &'static [String]| RunSeen {
            scenario: "cards",
            cell: Box::leak(Box::new(cell(2, "1.1.0"))),
            verdict,
            broken,
        };
        let listed = [Expected::of(
            "cards:device.permission.ask",
            None,
            None,
            None,
        )];
        let other: &'static [String] = Box::leak(Box::new(["device.prompt.answer".to_string()]));
        let j = judge(&listed, &[run(&Verdict::Failed, other)]);
        assert_eq!(j.runs, [Judged::UnexpectedFailure]);
        assert!(
            j.stale[0].contains("does not fail on that rule"),
            "{:?}",
            j.stale
        );
        // A new rule broken beside a listed one is a regression, and the entry still holds.
        let both: &'static [String] = Box::leak(Box::new([
            "device.permission.ask".to_string(),
            "device.prompt.answer".to_string(),
        ]));
        let j = judge(&listed, &[run(&Verdict::Failed, both)]);
        assert_eq!(j.runs, [Judged::UnexpectedFailure]);
        assert!(j.stale.is_empty(), "{:?}", j.stale);
        // A run whose set-up broke is never expected, and never makes an entry stale.
        let j = judge(
            &[
                Expected::of("cards", None, None, None),
                Expected::of("typo", None, None, None),
            ],
            &[run(&Verdict::ScenarioError, &[])],
        );
        assert_eq!(j.runs, [Judged::UnexpectedFailure]);
        assert!(j.stale.is_empty(), "{:?}", j.stale);
        assert_eq!(j.unused, ["`typo` speaks of no run here"]);
    }
}
