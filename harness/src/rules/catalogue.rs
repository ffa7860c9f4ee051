//! The catalogue as read: one file a spec section (`conformance/rules/<section>.yaml`), each
//! rule checked as it is read, so a broken file names itself and the rule at fault.

use std::collections::BTreeMap;

use super::rule::{Binds, Rule};

/// The whole catalogue, by id, and the section files it was read from, in their order.
#[derive(Debug, Clone)]
pub struct Catalogue {
    rules: BTreeMap<String, Rule>,
    sections: Vec<Section>,
}

/// One file of the catalogue: a spec section's rules, as written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Section {
    /// The file's name below `conformance/rules/`, without `.yaml` (`session/rewind`).
    pub name: String,
    /// The ids of its rules, in the file's order.
    pub rules: Vec<String>,
}

/// Why a catalogue could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CatalogueError {
    /// A file is not a YAML list of rules.
    #[error("{file}: {message}")]
    Yaml {
        /// The section file (empty for a catalogue given as one text).
        file: String,
        /// What the YAML reader said, with the line.
        message: String,
    },
    /// A rule breaks one of the catalogue's own rules.
    #[error("{}rule `{rule}` {problem}", in_file(.file))]
    Rule {
        /// The section file it is in.
        file: String,
        /// The rule's id.
        rule: String,
        /// What is wrong with it.
        problem: RuleProblem,
    },
}

fn in_file(file: &str) -> String {
    if file.is_empty() {
        String::new()
    } else {
        format!("{file}: ")
    }
}

/// What can be wrong with one rule of the catalogue.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RuleProblem {
    /// An unobservable rule also says how it would be checked.
    #[error("is marked unobservable, so it can have neither `not_yet` nor a misbehaviour")]
    UnobservableYetChecked,
    /// Its shape's pattern is not a pattern.
    #[error("has a shape that does not compile: {0}")]
    ShapeDoesNotCompile(String),
    /// A shape rule says nothing of what its `break` does.
    #[error("has a shape, so it needs a `misbehaviour` saying what its `break` does")]
    ShapeWithoutMisbehaviour,
    /// It lists `ways` before a first one.
    #[error("has `ways` but no `misbehaviour`: write the first way there")]
    WaysWithoutFirst,
    /// It says it breaks one way only, and lists more.
    #[error("says it breaks `one_way` yet lists `ways`")]
    OneWayWithWays,
    /// A way's name is not made of lowercase letters, digits and `_`.
    #[error("has the way `{0}`, which needs a name of lowercase letters, digits and `_`")]
    WayName(String),
    /// A way is listed twice.
    #[error("lists the way `{0}` twice")]
    WayTwice(String),
    /// A way has a `break` though the rule has no shape.
    #[error("has the way `{0}` with a `break`, which only a shape rule's way can have")]
    StrayBreak(String),
    /// The id is taken by another rule.
    #[error("is in the catalogue twice (also in `{0}`)")]
    Twice(String),
}

impl Catalogue {
    /// Reads a catalogue given as one text (a test's own, or a tool's).
    pub fn parse(text: &str) -> Result<Catalogue, CatalogueError> {
        Catalogue::from_sections([("", text)])
    }

    /// Reads a catalogue from its section files: each a name (`session/rewind`) and its text.
    pub fn from_sections<'a>(
        files: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> Result<Catalogue, CatalogueError> {
        let mut catalogue = Catalogue {
            rules: BTreeMap::new(),
            sections: Vec::new(),
        };
        let mut file_of: BTreeMap<String, String> = BTreeMap::new();
        for (name, text) in files {
            let list: Vec<Rule> =
                serde_saphyr::from_str(text).map_err(|e| CatalogueError::Yaml {
                    file: name.to_string(),
                    message: e.to_string(),
                })?;
            let mut section = Section {
                name: name.to_string(),
                rules: Vec::with_capacity(list.len()),
            };
            for mut rule in list {
                let at_fault = |problem| CatalogueError::Rule {
                    file: name.to_string(),
                    rule: rule.id.clone(),
                    problem,
                };
                check_rule(&rule).map_err(at_fault)?;
                if let Some(other) = file_of.insert(rule.id.clone(), name.to_string()) {
                    return Err(at_fault(RuleProblem::Twice(other)));
                }
                rule.section_file = name.to_string();
                section.rules.push(rule.id.clone());
                catalogue.rules.insert(rule.id.clone(), rule);
            }
            catalogue.sections.push(section);
        }
        Ok(catalogue)
    }

    /// A rule by id.
    pub fn get(&self, id: &str) -> Option<&Rule> {
        self.rules.get(id)
    }

    /// Every rule, by id.
    pub fn iter(&self) -> impl Iterator<Item = &Rule> {
        self.rules.values()
    }

    /// The section files, in the order they were read.
    pub fn sections(&self) -> &[Section] {
        &self.sections
    }

    /// One section file by name: `session/rewind`, also written as the method
    /// (`_lembas/session/rewind`) or the file (`session/rewind.yaml`).
    pub fn section(&self, name: &str) -> Option<&Section> {
        let name = name.strip_prefix("_lembas/").unwrap_or(name);
        let name = name.strip_suffix(".yaml").unwrap_or(name);
        self.sections.iter().find(|s| s.name == name)
    }

    /// The rules with a misbehaviour that `double` can act out (it breaks the rules binding
    /// its own side).
    pub fn misbehaviours_of(&self, side: Binds) -> impl Iterator<Item = &Rule> {
        self.rules
            .values()
            .filter(move |r| r.binds == side && r.misbehaviour.is_some())
    }

    /// An empty catalogue: what a build with a broken shipped one falls back to.
    pub(super) fn empty() -> Catalogue {
        Catalogue {
            rules: BTreeMap::new(),
            sections: Vec::new(),
        }
    }
}

/// The catalogue's own rules for one rule: what an unobservable or a shape rule must say, and
/// its `ways`.
fn check_rule(rule: &Rule) -> Result<(), RuleProblem> {
    if rule.unobservable.is_some() && (rule.not_yet.is_some() || rule.misbehaviour.is_some()) {
        return Err(RuleProblem::UnobservableYetChecked);
    }
    if let Some(shape) = &rule.shape {
        if let Err(e) = crate::pattern::Pattern::compile(&shape.pattern) {
            return Err(RuleProblem::ShapeDoesNotCompile(e.to_string()));
        }
        if rule.misbehaviour.is_none() {
            return Err(RuleProblem::ShapeWithoutMisbehaviour);
        }
    }
    check_ways(rule)
}

/// A rule's `ways`: each needs the rule's own misbehaviour first, a name of its own made of
/// lowercase letters, digits and `_`, and a `break` only where the rule has a shape.
fn check_ways(rule: &Rule) -> Result<(), RuleProblem> {
    if rule.ways.is_empty() {
        return Ok(());
    }
    if rule.misbehaviour.is_none() {
        return Err(RuleProblem::WaysWithoutFirst);
    }
    if rule.one_way.is_some() {
        return Err(RuleProblem::OneWayWithWays);
    }
    let mut names = std::collections::BTreeSet::new();
    for way in &rule.ways {
        let well_named = !way.name.is_empty()
            && way
                .name
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
        if !well_named {
            return Err(RuleProblem::WayName(way.name.clone()));
        }
        if !names.insert(way.name.as_str()) {
            return Err(RuleProblem::WayTwice(way.name.clone()));
        }
        if way.breaks.is_some() && rule.shape.is_none() {
            return Err(RuleProblem::StrayBreak(way.name.clone()));
        }
    }
    Ok(())
}
