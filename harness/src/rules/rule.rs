//! One rule of the catalogue as written: the side it binds, where it holds, its shape, the ways
//! the other double breaks it.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

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
    /// Whether the cell of this protocol and spec is one of these (a cell without a spec,
    /// lvmh's, is limited by none).
    pub fn contains(&self, protocol: u8, spec: Option<crate::lembas::Spec>) -> bool {
        (self.protocol.is_empty() || self.protocol.contains(&protocol))
            && (self.spec.is_empty()
                || spec.is_none_or(|spec| self.spec.iter().any(|s| s == spec.as_str())))
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
#[allow(missing_docs)] // fields whose names say it all go undocumented
pub struct Shape {
    /// Which part of which message: the params of the method's requests and notifications,
    /// the result of its successful answers, or the body of an HTTP answer.
    pub of: ShapeOf,
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
    /// What is to catch it: a scenario (the default), or only `harness explore`.
    #[serde(default, skip_serializing_if = "FoundBy::is_scenario")]
    pub found_by: FoundBy,
}

/// What catches a way of breaking a rule.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FoundBy {
    /// A scenario of the catalogue (with the monitors it runs).
    #[default]
    Scenario,
    /// Only `harness explore`: a bug planted between the scripted paths, which the self-test
    /// shows every scenario passing and explore finding.
    Explore,
}

impl FoundBy {
    fn is_scenario(&self) -> bool {
        *self == FoundBy::Scenario
    }
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

    /// What is to catch the misbehaviour `id` (`RULE` or `RULE/NAME`) of this rule.
    pub fn found_by(&self, id: &str) -> FoundBy {
        self.ways
            .iter()
            .find(|way| id.split_once(WAY_SEPARATOR) == Some((self.id.as_str(), way.name.as_str())))
            .map_or(FoundBy::Scenario, |way| way.found_by)
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
