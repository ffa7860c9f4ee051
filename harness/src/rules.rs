//! The rule catalogue (`conformance/rules/`, one file a spec section), compiled in.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use include_dir::{Dir, include_dir};
use serde::{Deserialize, Serialize};

mod catalogue;
pub mod ids;

pub use catalogue::{Catalogue, CatalogueError, RuleProblem, Section};

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

/// The side a rule binds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Binds {
    /// The device (LLeMbas CLI, the ACP agent): fake-instance checks it.
    Device,
    /// The instance (LLeMbas, the ACP client): fake-device checks it.
    Instance,
    /// Both sides.
    Both,
}

/// Cells where a misbehaviour shows.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Cells {
    /// Link protocols; empty: all.
    #[serde(default)]
    pub protocol: Vec<u8>,
    /// Harness specs; empty: all.
    #[serde(default)]
    pub spec: Vec<String>,
}

impl Cells {
    /// Whether the cell is one of these.
    pub fn contains(&self, protocol: u8, spec: &str) -> bool {
        (self.protocol.is_empty() || self.protocol.contains(&protocol))
            && (self.spec.is_empty() || self.spec.iter().any(|s| s == spec))
    }
}

/// One rule of the catalogue.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rule {
    /// The stable id (`device.hello.protocol`).
    pub id: String,
    /// The protocol family it belongs to (`lembas` unless it says `lvmh`): lvmh's plugin rules
    /// bind `device` (the side that dials), its daemon's bind `instance` (the side that serves).
    #[serde(default, skip_serializing_if = "is_lembas")]
    pub family: crate::family::Family,
    /// The spec section it comes from.
    pub section: String,
    /// The catalogue file it is written in, by name (`session/rewind` for
    /// `conformance/rules/session/rewind.yaml`); set when the catalogue is read.
    #[serde(skip)]
    pub section_file: String,
    /// The side it binds.
    pub binds: Binds,
    /// The rule in one line, in our words.
    pub says: String,
    /// Where the spec leaves room: every reading the check accepts, and why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub readings: Option<String>,
    /// What the other double does when told `--misbehave ID`; absent: no misbehaviour yet.
    #[serde(default)]
    pub misbehaviour: Option<String>,
    /// Where that misbehaviour shows; absent: every cell.
    #[serde(default)]
    pub cells: Option<Cells>,
    /// More ways the other double breaks the rule, each different from `misbehaviour` (absent
    /// where that broke it, a wrong value, a wrong type, late, on the wrong session or link,
    /// one too many): each asked for as `RULE/NAME`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ways: Vec<Way>,
    /// Whether its misbehaviours are acted by the self-test's reduced peer (a device listing
    /// few capabilities): a rule about what a device does with what it did not list.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub on_reduced_peer: bool,
    /// Why the rule can be broken in one way only (so it needs no `ways`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub one_way: Option<String>,
    /// Where the rule holds at all; absent: everywhere.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub applies: Option<Applies>,
    /// How a check can see it: on every message, or only in a scripted situation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub check: Option<CheckKind>,
    /// Tests that prove a monitor-only check fails on a message that breaks the rule (for the
    /// rules of both sides, which no one double can act out): `path::test_name`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub proven_by: Vec<String>,
    /// Why the rule has no scenario or misbehaviour yet, and what it would take.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_yet: Option<String>,
    /// Why nothing outside the peer's process can see whether it keeps the rule.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unobservable: Option<String>,
    /// The shape of one message the rule is about, which every link checks (see
    /// [`crate::shapes`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shape: Option<Shape>,
}

fn is_lembas(family: &crate::family::Family) -> bool {
    *family == crate::family::Family::Lembas
}

/// The shape a message must have, checked on every link whatever the scenario.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Shape {
    /// Which part of which message: the params of the method's requests and notifications,
    /// the result of its successful answers, or the body of an HTTP answer.
    pub of: ShapeOf,
    /// The method.
    pub method: String,
    /// A pattern (the scenarios' matching language) the part must match.
    pub pattern: serde_json::Value,
    /// What the other double does to that part with `--misbehave` (a shape rule's
    /// misbehaviour is always this mutation).
    #[serde(rename = "break")]
    pub breaks: Mutation,
}

/// The part of a message a shape is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ShapeOf {
    /// The params of a request or notification.
    Params,
    /// The result of a successful answer.
    Result,
    /// The JSON body of a successful HTTP answer; `method` is then `VERB /path`
    /// (`GET /v1/usage`).
    Response,
}

/// A change made to a message, to break its shape: fields dropped, fields set. Paths are
/// dotted, with numbers for array elements (`modes.availableModes.0.id`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Mutation {
    /// Fields to remove.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub drop: Vec<String>,
    /// Fields to set (made where missing, inside existing objects).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub set: BTreeMap<String, serde_json::Value>,
}

/// One more way to break a rule (see [`Rule::ways`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Way {
    /// Its name, after the rule's id and a `/` (`wrong_type`).
    pub name: String,
    /// What the other double does.
    pub misbehaviour: String,
    /// For a shape rule: the mutation this way makes instead of the shape's `break` (a way of
    /// a shape rule without one is acted out in the double's code).
    #[serde(rename = "break", default, skip_serializing_if = "Option::is_none")]
    pub breaks: Option<Mutation>,
    /// Where it shows; absent: where the rule's misbehaviour does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cells: Option<Cells>,
}

/// The separator of a rule id and a way's name in a misbehaviour's id (`RULE/NAME`).
pub const WAY_SEPARATOR: char = '/';

/// The rule a misbehaviour id (`RULE` or `RULE/NAME`) breaks.
pub fn rule_of(misbehaviour: &str) -> &str {
    misbehaviour
        .split_once(WAY_SEPARATOR)
        .map_or(misbehaviour, |(rule, _)| rule)
}

impl Rule {
    /// Whether a check from outside the peer could see the rule kept or broken.
    pub fn observable(&self) -> bool {
        self.unobservable.is_none()
    }

    /// Every misbehaviour of the rule by id: `RULE` for its first, `RULE/NAME` for each way,
    /// with the cells each shows in and what it does. None when the rule has no misbehaviour.
    pub fn misbehaviour_ids(&self) -> Vec<(String, Option<&Cells>, &str)> {
        let Some(first) = &self.misbehaviour else {
            return Vec::new();
        };
        let mut ids = vec![(self.id.clone(), self.cells.as_ref(), first.as_str())];
        for way in &self.ways {
            ids.push((
                format!("{}{WAY_SEPARATOR}{}", self.id, way.name),
                way.cells.as_ref().or(self.cells.as_ref()),
                way.misbehaviour.as_str(),
            ));
        }
        ids
    }
}

/// Where a rule holds: the capability the device must list, the client kind, the protocols and
/// the spec versions (each absent or empty: no restriction).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Applies {
    /// The device capabilities the rule is about (one, or a list).
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "one_or_many"
    )]
    pub capability: Vec<String>,
    /// The kind of client (`lembas`: one that said `_meta.lembas` in initialize).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client: Option<String>,
    /// Link protocols; empty: all.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub protocol: Vec<u8>,
    /// Harness specs; empty: all.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub spec: Vec<String>,
}

impl std::fmt::Display for Applies {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut parts = Vec::new();
        if !self.capability.is_empty() {
            parts.push(format!("capability {}", self.capability.join(" + ")));
        }
        if let Some(c) = &self.client {
            parts.push(format!("{c} client"));
        }
        if !self.protocol.is_empty() {
            let list: Vec<String> = self.protocol.iter().map(u8::to_string).collect();
            parts.push(format!("protocol {}", list.join("/")));
        }
        if !self.spec.is_empty() {
            parts.push(format!("spec {}", self.spec.join("/")));
        }
        if parts.is_empty() {
            f.write_str("everywhere")
        } else {
            f.write_str(&parts.join(", "))
        }
    }
}

/// A string or a list of strings, as a list.
fn one_or_many<'de, D: serde::Deserializer<'de>>(de: D) -> Result<Vec<String>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum OneOrMany {
        One(String),
        Many(Vec<String>),
    }
    Ok(match OneOrMany::deserialize(de)? {
        OneOrMany::One(one) => vec![one],
        OneOrMany::Many(many) => many,
    })
}

/// How a rule can be checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CheckKind {
    /// On every message, whatever the scenario: a shape, a type, an ordering.
    Monitor,
    /// Only in a scripted situation.
    Scenario,
    /// Both: an always-on monitor finding and a scenario step.
    Both,
}

/// The misbehaviours a double was told to act out (`--misbehave RULE` for a rule's first way
/// of breaking, `--misbehave RULE/NAME` for one of its `ways`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Misbehaviours {
    rules: std::collections::BTreeSet<String>,
}

impl Misbehaviours {
    /// Checks each id: it must be a misbehaviour of a catalogue rule that binds `side`.
    pub fn parse(ids: &[String], side: Binds) -> Result<Misbehaviours, String> {
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
                return Err(format!(
                    "`{id}` is not a misbehaviour of this double; it knows: {}",
                    listed.join(", ")
                ));
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
