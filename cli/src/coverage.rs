//! `harness coverage`: every rule of the catalogue with what proves it is checked, as markdown
//! or JSON, with totals per side and per section, and the check CI runs (an observable rule
//! with no scenario or no misbehaviour must say why not yet).

use std::collections::BTreeMap;

use harness::rules::{Applies, Binds, Catalogue, Rule};
use harness::scenario::catalogue::embedded_of;
use harness::scenario::{Family, Side};
use serde::Serialize;

use crate::Error;

/// How far a rule is proven.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// A scenario checks it and the other double's misbehaviour proves the check fails (or, for
    /// the rules of both sides, a named test feeds the monitor a breaking message).
    Covered,
    /// The catalogue says why not yet.
    NotYet,
    /// Nothing outside the peer's process can see it.
    Unobservable,
    /// Observable, not proven, and nothing says why: CI fails.
    Missing,
}

impl Status {
    fn label(self) -> &'static str {
        match self {
            Status::Covered => "covered",
            Status::NotYet => "not yet",
            Status::Unobservable => "unobservable",
            Status::Missing => "MISSING",
        }
    }
}

/// One rule's line of the report.
#[derive(Debug, Clone, Serialize)]
pub struct RuleCoverage {
    /// The rule's id.
    pub id: String,
    /// The protocol family it belongs to.
    pub family: Family,
    /// The side it binds.
    pub side: Binds,
    /// The spec section, as the catalogue names it.
    pub section: String,
    /// The section it is counted under (the catalogue's first section, without its gloss).
    pub group: String,
    /// Where it holds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub applies: Option<Applies>,
    /// The scenarios whose `rules:` name it, as `folder/file`, from the folder whose double
    /// checks this side.
    pub scenarios: Vec<String>,
    /// The other double's misbehaviour that breaks it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub misbehaviour: Option<String>,
    /// Every misbehaviour that breaks it, by the id `--misbehave` takes (`RULE`, `RULE/WAY`),
    /// with what it does.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub misbehaviours: Vec<(String, String)>,
    /// Why it can be broken in one way only, where the catalogue says so.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub one_way: Option<String>,
    /// Tests that prove a monitor-only check.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub proven_by: Vec<String>,
    /// How far it is proven.
    pub status: Status,
    /// Why it is not yet covered, or why it cannot be observed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// Counts for one side or one section.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Totals {
    /// Every rule.
    pub rules: usize,
    /// The observable ones.
    pub observable: usize,
    /// Observable and proven.
    pub covered: usize,
    /// Observable, with a reason why not yet.
    pub not_yet: usize,
    /// Marked unobservable.
    pub unobservable: usize,
    /// Observable, unproven, with no reason.
    pub missing: usize,
    /// The misbehaviours of the covered rules, every way counted.
    pub misbehaviours: usize,
    /// Covered rules broken in one way only that do not say why only one (each wants a second
    /// way that breaks it differently).
    pub one_way: usize,
}

impl Totals {
    fn add(&mut self, rule: &RuleCoverage) {
        let status = rule.status;
        if status == Status::Covered {
            self.misbehaviours += rule.misbehaviours.len();
            if rule.lacks_a_second_way() {
                self.one_way += 1;
            }
        }
        self.rules += 1;
        match status {
            Status::Covered => self.covered += 1,
            Status::NotYet => self.not_yet += 1,
            Status::Unobservable => self.unobservable += 1,
            Status::Missing => self.missing += 1,
        }
        if status != Status::Unobservable {
            self.observable += 1;
        }
    }

    /// Covered observable rules, in percent (100 with none).
    pub fn percent(&self) -> u32 {
        (self.covered * 100)
            .checked_div(self.observable)
            .and_then(|p| u32::try_from(p).ok())
            .unwrap_or(100)
    }
}

impl RuleCoverage {
    /// Covered by a single misbehaviour, though nothing says it can be broken only one way.
    pub fn lacks_a_second_way(&self) -> bool {
        self.status == Status::Covered
            && self.side != Binds::Both
            && self.misbehaviours.len() < 2
            && self.one_way.is_none()
    }
}

/// The whole report.
#[derive(Debug, Clone, Serialize)]
pub struct Coverage {
    /// Totals per side (`device`, `instance`, `both`) and over all (`all`).
    pub sides: BTreeMap<String, Totals>,
    /// Totals per side and section.
    pub sections: Vec<SectionTotals>,
    /// Every rule.
    pub rules: Vec<RuleCoverage>,
    /// Inconsistencies of the catalogue: a rule marked not yet that is covered, a misbehaviour
    /// no scenario of the right folder checks.
    pub problems: Vec<String>,
}

/// One section's counts for one side.
#[derive(Debug, Clone, Serialize)]
#[allow(missing_docs)] // fields whose names say it all go undocumented
pub struct SectionTotals {
    /// The protocol family.
    pub family: Family,
    pub side: Binds,
    pub section: String,
    /// Its counts.
    #[serde(flatten)]
    pub totals: Totals,
}

/// The side as the report names it: lvmh's sides by their own names (the plugin dials, as a
/// device does; the daemon serves, as an instance does).
fn side_name(family: Family, side: Binds) -> &'static str {
    match (family, side) {
        (Family::Lembas, Binds::Device) => "device",
        (Family::Lembas, Binds::Instance) => "instance",
        (Family::Lembas, Binds::Both) => "both",
        (Family::Lvmh, Binds::Device) => "lvmh plugin/web",
        (Family::Lvmh, Binds::Instance) => "lvmh daemon",
        (Family::Lvmh, Binds::Both) => "lvmh both",
    }
}

/// The sides of the totals, in the order the report shows them.
const SIDES: [&str; 7] = [
    "device",
    "instance",
    "both",
    "lvmh plugin/web",
    "lvmh daemon",
    "lvmh both",
    "all",
];

/// The section a rule is counted under: its first section, without the gloss in brackets, with
/// the spec's subsections folded into the heading a reader looks for (an HTTP route into the HTTP
/// API, each terminal method into the terminal's).
pub fn section_group(section: &str) -> String {
    let first = section.split(';').next().unwrap_or(section);
    let bare = first.split(" (").next().unwrap_or(first);
    let bare = bare.trim().trim_matches('`');
    if ["GET /", "PUT /", "POST /", "The library", "The HTTP API"]
        .iter()
        .any(|p| bare.starts_with(p))
    {
        "The HTTP API the CLI uses".into()
    } else if bare.starts_with("_lembas/terminal/") {
        "_lembas/terminal/*".into()
    } else if [
        "The opening paragraph",
        "Opening paragraph",
        "The device dials out",
    ]
    .contains(&bare)
    {
        "The opening paragraph".into()
    } else {
        bare.to_string()
    }
}

/// The scenarios naming each rule, from the folder of the double that checks the rule's side
/// (fake-instance checks the device, so a device rule is checked from `instance/`).
fn scenarios_by_rule() -> Result<BTreeMap<String, Vec<String>>, Error> {
    let mut by_rule: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for family in Family::ALL {
        for side in [Side::Instance, Side::Device] {
            for file in embedded_of(side, family) {
                let folder = format!("{}{}", family.folder(), side.folder());
                let scenario = file.load().map_err(|e| Error::Embedded {
                    label: format!("{folder}/{}", file.file),
                    source: Box::new(e),
                })?;
                for rule in scenario.rules {
                    by_rule
                        .entry(rule)
                        .or_default()
                        .push(format!("{folder}/{}", file.file));
                }
            }
        }
    }
    Ok(by_rule)
}

fn checks_side(folder_entry: &str, family: Family, side: Binds) -> bool {
    let Some(entry) = folder_entry.strip_prefix(family.folder()) else {
        return false;
    };
    match side {
        Binds::Device => entry.starts_with("instance/"),
        Binds::Instance => entry.starts_with("device/"),
        Binds::Both => true,
    }
}

fn judge(rule: &Rule, scenarios: &[String], problems: &mut Vec<String>) -> Status {
    if rule.unobservable.is_some() {
        return Status::Unobservable;
    }
    let proven = match rule.binds {
        Binds::Both => !rule.proven_by.is_empty(),
        _ => !scenarios.is_empty() && rule.misbehaviour.is_some(),
    };
    if rule.misbehaviour.is_some() && scenarios.is_empty() {
        problems.push(format!(
            "`{}` has a misbehaviour but no scenario of the folder that checks its side lists it",
            rule.id
        ));
    }
    match (proven, &rule.not_yet) {
        (true, Some(_)) => {
            problems.push(format!(
                "`{}` is covered but still marked `not_yet`: remove the mark",
                rule.id
            ));
            Status::Covered
        }
        (true, None) => Status::Covered,
        (false, Some(_)) => Status::NotYet,
        (false, None) => Status::Missing,
    }
}

/// Builds the report for a catalogue from the embedded scenarios.
pub fn coverage(catalogue: &Catalogue) -> Result<Coverage, Error> {
    let by_rule = scenarios_by_rule()?;
    let mut problems = Vec::new();
    let mut rules = Vec::new();
    for rule in catalogue.iter() {
        let scenarios: Vec<String> = by_rule
            .get(&rule.id)
            .into_iter()
            .flatten()
            .filter(|s| checks_side(s, rule.family, rule.binds))
            .cloned()
            .collect();
        let status = judge(rule, &scenarios, &mut problems);
        rules.push(RuleCoverage {
            id: rule.id.clone(),
            family: rule.family,
            side: rule.binds,
            section: rule.section.clone(),
            group: section_group(&rule.section),
            applies: rule.applies.clone(),
            scenarios,
            misbehaviour: rule.misbehaviour.clone(),
            misbehaviours: rule
                .misbehaviour_ids()
                .into_iter()
                .map(|(id, _, does)| (id, does.to_string()))
                .collect(),
            one_way: rule.one_way.clone(),
            proven_by: rule.proven_by.clone(),
            status,
            reason: rule.not_yet.clone().or_else(|| rule.unobservable.clone()),
        });
    }
    for (id, files) in &by_rule {
        if catalogue.get(id).is_none() {
            problems.push(format!(
                "{} name `{id}`, which is not in the catalogue",
                files.join(", ")
            ));
        }
    }
    let mut sides: BTreeMap<String, Totals> = BTreeMap::new();
    let mut sections: BTreeMap<(Family, String, String), (Binds, Totals)> = BTreeMap::new();
    for r in &rules {
        sides
            .entry(side_name(r.family, r.side).into())
            .or_default()
            .add(r);
        sides.entry("all".into()).or_default().add(r);
        sections
            .entry((
                r.family,
                side_name(r.family, r.side).into(),
                r.group.clone(),
            ))
            .or_insert_with(|| (r.side, Totals::default()))
            .1
            .add(r);
    }
    let sections = sections
        .into_iter()
        .map(|((family, _, section), (side, totals))| SectionTotals {
            family,
            side,
            section,
            totals,
        })
        .collect();
    Ok(Coverage {
        sides,
        sections,
        rules,
        problems,
    })
}

impl Coverage {
    /// What CI fails on: observable rules proven by nothing with no reason, and the catalogue's
    /// inconsistencies.
    pub fn failures(&self) -> Vec<String> {
        let mut out: Vec<String> = self
            .rules
            .iter()
            .filter(|r| r.status == Status::Missing)
            .map(|r| {
                let lacks = match (r.scenarios.is_empty(), r.misbehaviour.is_none()) {
                    _ if r.side == Binds::Both => "a `proven_by` test",
                    (true, true) => "a scenario and a misbehaviour",
                    (true, false) => "a scenario",
                    (false, _) => "a misbehaviour",
                };
                format!(
                    "`{}` is observable but lacks {lacks}: add them, or say why not yet with \
                     `not_yet`",
                    r.id
                )
            })
            .collect();
        out.extend(self.problems.iter().cloned());
        out
    }

    /// The totals per side, as a markdown table (the guide's coverage page shows it).
    pub fn totals_markdown(&self) -> String {
        let mut out = String::from(
            "| side | rules | observable | covered | not yet | unobservable | misbehaviours | \
             broken one way only |\n\
             |---|---:|---:|---:|---:|---:|---:|---:|\n",
        );
        for side in SIDES {
            if let Some(t) = self.sides.get(side) {
                out.push_str(&format!(
                    "| {side} | {} | {} | {} ({}%) | {} | {} | {} | {} |\n",
                    t.rules,
                    t.observable,
                    t.covered,
                    t.percent(),
                    t.not_yet + t.missing,
                    t.unobservable,
                    t.misbehaviours,
                    t.one_way
                ));
            }
        }
        out
    }

    /// The whole report as markdown: totals, sections, then every rule.
    pub fn markdown(&self) -> String {
        let mut out = String::from("# Rule coverage\n\n");
        out.push_str(
            "A rule is *covered* when a scenario checks it and the other double's misbehaviour \
             proves the check fails (`harness selftest` runs both). A rule a peer can break in \
             more than one way wants a misbehaviour for each (absent, wrong value, wrong type, \
             late, on the wrong session or link, one too many): *broken one way only* counts \
             the covered rules with one, which do not say why one is enough.\n\n## By side\n\n",
        );
        out.push_str(&self.totals_markdown());
        out.push_str(
            "\n## By section\n\n| side | section | rules | covered | not yet | unobservable |\n\
             |---|---|---:|---:|---:|---:|\n",
        );
        for s in &self.sections {
            out.push_str(&format!(
                "| {} | {} | {} | {} ({}%) | {} | {} |\n",
                side_name(s.family, s.side),
                s.section,
                s.totals.rules,
                s.totals.covered,
                s.totals.percent(),
                s.totals.not_yet + s.totals.missing,
                s.totals.unobservable
            ));
        }
        out.push_str("\n## Rules\n\n| rule | side | applies | status | checked by | proven by / why |\n|---|---|---|---|---|---|\n");
        for r in &self.rules {
            let applies = r
                .applies
                .as_ref()
                .map_or_else(|| "everywhere".to_string(), ToString::to_string);
            let checked = if r.scenarios.is_empty() {
                "—".to_string()
            } else {
                r.scenarios.join(", ")
            };
            let why = match (&r.misbehaviour, r.proven_by.is_empty(), &r.reason) {
                (Some(_), _, _) if r.status == Status::Covered => r
                    .misbehaviours
                    .iter()
                    .map(|(id, does)| format!("`--misbehave {id}`: {does}"))
                    .collect::<Vec<_>>()
                    .join("; "),
                (_, false, _) if r.status == Status::Covered => r.proven_by.join(", "),
                (_, _, Some(reason)) => reason.clone(),
                _ => "—".into(),
            };
            out.push_str(&format!(
                "| `{}` | {} | {applies} | {} | {checked} | {} |\n",
                r.id,
                side_name(r.family, r.side),
                r.status.label(),
                why.replace('|', "\\|").replace('\n', " ")
            ));
        }
        if !self.problems.is_empty() {
            out.push_str("\n## Problems\n\n");
            for p in &self.problems {
                out.push_str(&format!("- {p}\n"));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn catalogue(text: &str) -> Catalogue {
        Catalogue::parse(text).expect("test catalogue parses")
    }

    #[test]
    fn every_way_of_breaking_a_rule_is_counted_and_a_rule_with_one_is_told() {
        let report = coverage(harness::rules::catalogue()).expect("coverage builds");
        let rule = |id: &str| {
            report
                .rules
                .iter()
                .find(|r| r.id == id)
                .unwrap_or_else(|| panic!("{id} is in the report"))
        };
        let two = rule("device.initialize.constants");
        assert_eq!(two.misbehaviours.len(), 2, "{:?}", two.misbehaviours);
        assert!(
            two.misbehaviours[1]
                .0
                .starts_with("device.initialize.constants/")
        );
        assert!(!two.lacks_a_second_way());
        assert!(
            !rule("instance.title.limit").lacks_a_second_way(),
            "it says why one"
        );
        let counted: usize = report
            .rules
            .iter()
            .filter(|r| r.status == Status::Covered)
            .map(|r| r.misbehaviours.len())
            .sum();
        assert_eq!(report.sides["all"].misbehaviours, counted);
        let lacking = report
            .rules
            .iter()
            .filter(|r| r.lacks_a_second_way())
            .count();
        assert_eq!(report.sides["all"].one_way, lacking);
        assert!(
            report
                .markdown()
                .contains("`--misbehave device.initialize.constants/")
        );
    }

    #[test]
    fn sections_are_counted_under_their_first_name() {
        assert_eq!(
            section_group("session/prompt (limits: 10 MB a block); _lembas/event"),
            "session/prompt"
        );
        assert_eq!(section_group("`_lembas/hello`"), "_lembas/hello");
        assert_eq!(
            section_group("GET /v1/usage (the optional fields)"),
            "The HTTP API the CLI uses"
        );
        assert_eq!(section_group("_lembas/terminal/exit"), "_lembas/terminal/*");
    }

    #[test]
    fn an_unproven_observable_rule_fails_unless_it_says_why() {
        let bare = catalogue(
            "- {id: device.made.up, section: s, binds: device, says: x, misbehaviour: y}\n\
             - {id: device.other, section: s, binds: device, says: x, not_yet: needs a set-up}\n\
             - {id: device.tui, section: s, binds: device, says: x, unobservable: drawn on a screen}\n\
             - {id: both.thing, section: s, binds: both, says: x}\n",
        );
        let report = coverage(&bare).expect("coverage builds");
        let status: BTreeMap<&str, Status> = report
            .rules
            .iter()
            .map(|r| (r.id.as_str(), r.status))
            .collect();
        assert_eq!(status["device.made.up"], Status::Missing);
        assert_eq!(status["device.other"], Status::NotYet);
        assert_eq!(status["device.tui"], Status::Unobservable);
        assert_eq!(status["both.thing"], Status::Missing);
        let failures = report.failures().join("\n");
        assert!(failures.contains("`device.made.up` is observable but lacks a scenario"));
        assert!(failures.contains("`both.thing`"));
        assert!(!failures.contains("device.other"));
        assert_eq!(report.sides["device"].observable, 2);
        assert_eq!(report.sides["device"].unobservable, 1);
    }

    #[test]
    fn a_covered_rule_still_marked_not_yet_is_a_problem() {
        // device.hello.once is checked by an embedded scenario.
        let stale = catalogue(
            "- {id: device.hello.once, section: s, binds: device, says: x, misbehaviour: y, not_yet: z}\n",
        );
        let report = coverage(&stale).expect("coverage builds");
        assert_eq!(report.rules[0].status, Status::Covered);
        assert!(
            report
                .failures()
                .join("\n")
                .contains("still marked `not_yet`")
        );
    }

    #[test]
    fn the_shipped_catalogue_has_no_unexplained_gap() {
        let report = coverage(harness::rules::catalogue()).expect("coverage builds");
        assert_eq!(report.failures(), Vec::<String>::new());
    }

    #[test]
    fn every_proving_test_named_in_the_catalogue_exists() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        for rule in harness::rules::catalogue().iter() {
            for proof in &rule.proven_by {
                let (path, name) = proof
                    .split_once("::")
                    .unwrap_or_else(|| panic!("{}: `{proof}` is not path::test", rule.id));
                let text = std::fs::read_to_string(root.join(path))
                    .unwrap_or_else(|e| panic!("{}: {path}: {e}", rule.id));
                assert!(
                    text.contains(&format!("fn {name}(")),
                    "{}: no test `{name}` in {path}",
                    rule.id
                );
            }
        }
    }

    #[test]
    fn the_guide_shows_the_current_totals() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let page = "docs/book/src/coverage.md";
        let text = std::fs::read_to_string(root.join(page)).expect("the guide's page reads");
        let start = text
            .find("<!-- coverage:begin")
            .and_then(|i| text[i..].find("-->").map(|j| i + j + 4))
            .expect("the page has the coverage:begin marker");
        let end = text
            .find("<!-- coverage:end -->")
            .expect("the page has the coverage:end marker");
        let report = coverage(harness::rules::catalogue()).expect("coverage builds");
        assert_eq!(
            &text[start..end],
            report.totals_markdown(),
            "{page}'s totals are stale: paste `harness coverage --format totals` between the \
             markers"
        );
    }
}
