//! The rule catalogue (`conformance/rules/`, one file a spec section), compiled in.

use std::sync::OnceLock;

use include_dir::{Dir, include_dir};

mod catalogue;
pub mod ids;
mod rule;

pub use catalogue::{Catalogue, CatalogueError, RuleProblem, Section};
pub use rule::{
    Applies, Binds, Cells, CheckKind, FoundBy, Mutation, Rule, Shape, ShapeOf, WAY_SEPARATOR, Way,
    rule_of,
};

/// The catalogue's files, as shipped: `<section>.yaml`, in folders as the spec's methods are.
static SHIPPED: Dir<'static> = include_dir!("$CARGO_MANIFEST_DIR/../conformance/rules");

/// The shipped catalogue's section files, by name (`session/rewind`) and text, in the order of
/// their names.
pub fn shipped_sections() -> Vec<(&'static str, &'static str)> {
    fn walk(dir: &'static Dir<'static>, out: &mut Vec<(&'static str, &'static str)>) {
        for file in dir.files() {
            let path = file.path().to_str().unwrap_or_default();
            if let (Some(name), Some(text)) = (path.strip_suffix(".yaml"), file.contents_utf8()) {
                out.push((name, text));
            }
        }
        for sub in dir.dirs() {
            walk(sub, out);
        }
    }
    let mut out = Vec::new();
    walk(&SHIPPED, &mut out);
    out.sort_unstable_by_key(|(name, _)| *name);
    out
}

/// A `--misbehave` id the double does not know: it lists the ones it does.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{id}` is not a misbehaviour of this double; it knows: {}", .known.join(", "))]
pub struct UnknownMisbehaviour {
    /// The id as given.
    pub id: String,
    /// The misbehaviours of rules that bind this double's side.
    pub known: Vec<String>,
}

/// The misbehaviours a double was told to act out (`--misbehave RULE` for a rule's first way
/// of breaking, `--misbehave RULE/NAME` for one of its `ways`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Misbehaviours {
    rules: std::collections::BTreeSet<String>,
}

impl Misbehaviours {
    /// Checks each id: it must be a misbehaviour of a catalogue rule that binds `side`.
    pub fn parse(ids: &[String], side: Binds) -> Result<Misbehaviours, UnknownMisbehaviour> {
        let mut rules = std::collections::BTreeSet::new();
        for id in ids {
            let known = catalogue().misbehaviours_of(side).any(|rule| {
                rule.misbehaviour_ids()
                    .iter()
                    .any(|(known, _, _)| known == id)
            });
            if !known {
                let listed: Vec<String> = catalogue()
                    .misbehaviours_of(side)
                    .flat_map(|r| r.misbehaviour_ids().into_iter().map(|(id, _, _)| id))
                    .collect();
                return Err(UnknownMisbehaviour {
                    id: id.clone(),
                    known: listed,
                });
            }
            rules.insert(id.clone());
        }
        Ok(Misbehaviours { rules })
    }

    /// The misbehaviours `ids`, taken as they are (for a catalogue of a test's own).
    #[cfg(test)]
    pub(crate) fn unchecked(ids: &[&str]) -> Misbehaviours {
        Misbehaviours {
            rules: ids.iter().map(|id| id.to_string()).collect(),
        }
    }

    /// Whether to break this rule in its first way (its `misbehaviour`).
    pub fn breaks(&self, id: &str) -> bool {
        self.rules.contains(id)
    }

    /// Whether to break rule `id` in its way `name` (one of its `ways`).
    pub fn breaks_way(&self, id: &str, name: &str) -> bool {
        self.rules
            .iter()
            .any(|m| m.split_once(WAY_SEPARATOR) == Some((id, name)))
    }

    /// The rules to break.
    pub fn iter(&self) -> impl Iterator<Item = &String> {
        self.rules.iter()
    }
}

/// The shipped catalogue. It is checked by a test, so a broken file never reaches a user.
pub fn catalogue() -> &'static Catalogue {
    static CATALOGUE: OnceLock<Catalogue> = OnceLock::new();
    CATALOGUE.get_or_init(|| {
        Catalogue::from_sections(shipped_sections()).unwrap_or_else(|e| {
            tracing::error!("the compiled-in rule catalogue is broken: {e}");
            Catalogue::empty()
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shipped_catalogue_parses() {
        let c = Catalogue::from_sections(shipped_sections()).expect("catalogue parses");
        assert!(c.get("device.hello.protocol").is_some());
        assert!(c.misbehaviours_of(Binds::Device).count() >= 2);
        assert!(c.misbehaviours_of(Binds::Instance).count() >= 2);
    }

    #[test]
    fn every_id_constant_is_a_catalogue_rule() {
        let c = Catalogue::from_sections(shipped_sections()).expect("catalogue parses");
        for id in ids::ALL.iter().chain(
            [
                crate::jsonrpc::peer::rules::NOT_JSON,
                crate::jsonrpc::peer::rules::ENVELOPE,
                crate::jsonrpc::peer::rules::UNKNOWN_RESPONSE,
                crate::jsonrpc::peer::rules::BINARY,
            ]
            .iter(),
        ) {
            assert!(
                c.get(id).is_some(),
                "{id} is not in the catalogue (conformance/rules/)"
            );
        }
    }

    #[test]
    fn a_way_is_asked_for_by_rule_and_name_and_is_not_the_first_way() {
        let rule = catalogue()
            .iter()
            .find(|r| !r.ways.is_empty())
            .expect("a rule with ways");
        let way = format!("{}/{}", rule.id, rule.ways[0].name);
        let m = Misbehaviours::parse(std::slice::from_ref(&way), rule.binds).expect("a way parses");
        assert!(m.breaks_way(&rule.id, &rule.ways[0].name));
        assert!(
            !m.breaks(&rule.id),
            "a way is not the rule's first misbehaviour"
        );
        assert_eq!(rule_of(&way), rule.id);
        let unknown = format!("{}/no_such_way", rule.id);
        assert!(Misbehaviours::parse(&[unknown], rule.binds).is_err());
    }

    #[test]
    fn ways_are_checked_when_the_catalogue_is_read() {
        let no_first = "- {id: a, section: s, binds: device, says: x, ways: [{name: late, misbehaviour: m}]}\n";
        assert!(
            Catalogue::parse(no_first)
                .unwrap_err()
                .to_string()
                .contains("no `misbehaviour`")
        );
        let twice = "- {id: a, section: s, binds: device, says: x, misbehaviour: m, ways: [{name: late, misbehaviour: m}, {name: late, misbehaviour: n}]}\n";
        assert!(
            Catalogue::parse(twice)
                .unwrap_err()
                .to_string()
                .contains("twice")
        );
        let bad_name = "- {id: a, section: s, binds: device, says: x, misbehaviour: m, ways: [{name: Late, misbehaviour: m}]}\n";
        assert!(
            Catalogue::parse(bad_name)
                .unwrap_err()
                .to_string()
                .contains("lowercase")
        );
        let stray_break = "- {id: a, section: s, binds: device, says: x, misbehaviour: m, ways: [{name: late, misbehaviour: m, break: {drop: [x]}}]}\n";
        assert!(
            Catalogue::parse(stray_break)
                .unwrap_err()
                .to_string()
                .contains("shape rule")
        );
    }

    /// The catalogue file a rule's `section` points to: the first section it names (a
    /// capability's rule, the section after the capability table), by its method without
    /// `_lembas/`, or its heading.
    fn home_of(rule: &Rule) -> String {
        let mut clauses = rule.section.split(';').map(str::trim);
        let mut first = clauses.next().unwrap_or_default();
        if first.starts_with("Capabilities") {
            first = clauses.next().unwrap_or(first);
        }
        let head = first.split(" (").next().unwrap_or(first).trim();
        let aside = &first[head.len()..];
        if rule.family == crate::family::Family::Lvmh {
            let head = match head {
                "Plugin → daemon" | "Message shape" => "Plugin → daemon events",
                other => other,
            };
            let slug: String = head
                .to_lowercase()
                .replace('→', "to")
                .replace('&', "and")
                .split(|c: char| !c.is_ascii_alphanumeric())
                .filter(|w| !w.is_empty())
                .collect::<Vec<_>>()
                .join("-");
            return format!("lvmh/{slug}");
        }
        let http = [
            ("usage", "http/usage"),
            ("personalization", "http/personalization"),
            ("models", "http/models"),
            ("library", "http/library"),
            ("chat completions", "http/chat"),
        ];
        match head {
            h if h.starts_with("JSON-RPC 2.0") => "jsonrpc".into(),
            "Opening paragraph" | "The opening paragraph" | "The device dials out" => "link".into(),
            h if h.starts_with("Versions and discovery") => "discovery".into(),
            h if h.starts_with("Standard ACP") => "methods".into(),
            "Notes" => "notes".into(),
            h if h.starts_with("_lembas/terminal/") => "terminal".into(),
            h if h.starts_with("_lembas/") => h["_lembas/".len()..].into(),
            h if h == "initialize" || h.starts_with("session/") => h.into(),
            h if h.starts_with("The library") => "http/library".into(),
            h if h.starts_with("The HTTP API") || h.contains("/v1/") => http
                .iter()
                .find(|(key, _)| aside.contains(key) || h.contains(key))
                .map_or("http/user", |(_, file)| file)
                .into(),
            other => format!("(no file for the section `{other}`)"),
        }
    }

    #[test]
    fn every_rule_is_in_the_file_of_the_first_section_it_names() {
        let misplaced: Vec<String> = catalogue()
            .iter()
            .filter(|r| home_of(r) != r.section_file)
            .map(|r| format!("{} is in {} but names {}", r.id, r.section_file, home_of(r)))
            .collect();
        assert!(misplaced.is_empty(), "{misplaced:#?}");
        assert!(catalogue().section("session/rewind").is_some());
        assert!(catalogue().section("_lembas/session/rewind").is_some());
    }

    #[test]
    fn a_broken_section_file_is_named_in_the_error() {
        let good = "- {id: a, section: s, binds: device, says: x}\n";
        let twice = "- {id: a, section: s, binds: device, says: y}\n";
        let error = Catalogue::from_sections([("one", good), ("two", twice)])
            .expect_err("an id twice")
            .to_string();
        assert!(error.starts_with("two: rule `a`"), "{error}");
        assert!(error.contains("also in `one`"), "{error}");
        let not_yaml = Catalogue::from_sections([("three", "- {id: [")])
            .expect_err("not YAML")
            .to_string();
        assert!(not_yaml.starts_with("three: "), "{not_yaml}");
    }

    #[test]
    fn duplicate_ids_are_refused() {
        let text = "- {id: a, section: s, binds: both, says: x}\n- {id: a, section: s, binds: both, says: y}\n";
        assert!(
            Catalogue::parse(text)
                .unwrap_err()
                .to_string()
                .contains("twice")
        );
    }
}
