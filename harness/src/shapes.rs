//! The catalogue's shape rules on every link: each message the peer sends is matched against
//! the shapes of the rules binding the peer's side, and this side's `--misbehave` of a shape
//! rule bends what it sends so the other double's check is seen to fail.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use serde_json::Value;

use crate::family::Family;
use crate::finding::Finding;
use crate::jsonrpc::{MessageWatch, Part};
use crate::pattern::Pattern;
use crate::rules::{Binds, Catalogue, Misbehaviours, Mutation, ShapeOf};

struct Check {
    rule: String,
    of: ShapeOf,
    method: String,
    pattern: Pattern,
}

struct Bend {
    of: ShapeOf,
    method: String,
    mutation: Mutation,
}

/// The shape checks of one run and the shape misbehaviours this side acts out.
pub struct ShapeWatch {
    checks: Arc<Vec<Check>>,
    bends: Vec<Bend>,
}

impl std::fmt::Debug for ShapeWatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ShapeWatch")
            .field("checks", &self.checks.len())
            .field("bends", &self.bends.len())
            .finish()
    }
}

/// An HTTP answer's route as shapes name it: `VERB /path`.
pub fn route(verb: &str, path: &str) -> String {
    format!("{} {}", verb.to_ascii_uppercase(), path)
}

fn same_part(of: ShapeOf, part: Part) -> bool {
    matches!(
        (of, part),
        (ShapeOf::Params, Part::Params) | (ShapeOf::Result, Part::Result)
    )
}

/// The compiled shape checks of the shipped catalogue for one side and spec, made once a
/// process: every link and every device of a fleet checks with the same ones, and compiling
/// them (regexes among them) for each cost a device more than its link did.
fn embedded_checks(family: Family, judged: Binds, spec: &str) -> Arc<Vec<Check>> {
    type Compiled = HashMap<(Family, Binds, String), Arc<Vec<Check>>>;
    static COMPILED: Mutex<Option<Compiled>> = Mutex::new(None);
    let mut compiled = COMPILED
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    compiled
        .get_or_insert_with(HashMap::new)
        .entry((family, judged, spec.to_string()))
        .or_insert_with(|| {
            Arc::new(compile_checks(
                crate::rules::catalogue(),
                family,
                judged,
                spec,
            ))
        })
        .clone()
}

/// The shape checks of `family`'s rules in `catalogue` binding `judged` at harness spec `spec`.
fn compile_checks(catalogue: &Catalogue, family: Family, judged: Binds, spec: &str) -> Vec<Check> {
    let mut checks = Vec::new();
    for rule in catalogue.iter() {
        let Some(shape) = &rule.shape else { continue };
        let in_spec = rule
            .applies
            .as_ref()
            .is_none_or(|a| a.spec.is_empty() || a.spec.iter().any(|s| s == spec));
        if rule.family != family || rule.binds != judged || !in_spec {
            continue;
        }
        match Pattern::compile(&shape.pattern) {
            Ok(pattern) => checks.push(Check {
                rule: rule.id.clone(),
                of: shape.of,
                method: shape.method.clone(),
                pattern,
            }),
            // The catalogue's own test compiles every shape; a broken one is left out rather
            // than failing every run.
            Err(e) => tracing::error!("the shape of {} does not compile: {e}", rule.id),
        }
    }
    checks
}

impl ShapeWatch {
    /// The watch of a LLeMbas double that checks `judged` (the other side), breaking the rules
    /// in `misbehaving`, at harness spec `spec`.
    pub fn new(
        catalogue: &Catalogue,
        judged: Binds,
        misbehaving: &Misbehaviours,
        spec: &str,
    ) -> ShapeWatch {
        ShapeWatch::of_family(Family::Lembas, catalogue, judged, misbehaving, spec)
    }

    /// The same for a double of protocol family `family`: only that family's shapes are
    /// checked and bent.
    pub fn of_family(
        family: Family,
        catalogue: &Catalogue,
        judged: Binds,
        misbehaving: &Misbehaviours,
        spec: &str,
    ) -> ShapeWatch {
        let checks = if std::ptr::eq(catalogue, crate::rules::catalogue()) {
            embedded_checks(family, judged, spec)
        } else {
            Arc::new(compile_checks(catalogue, family, judged, spec))
        };
        let bends = catalogue
            .iter()
            .filter(|rule| rule.family == family)
            .filter_map(|rule| {
                let shape = rule.shape.as_ref()?;
                // The shape's own `break`, or the `break` of the way asked for.
                let mutation = match misbehaving.breaks(&rule.id) {
                    true => Some(&shape.breaks),
                    false => rule
                        .ways
                        .iter()
                        .find(|w| misbehaving.breaks_way(&rule.id, &w.name))
                        .and_then(|w| w.breaks.as_ref()),
                }?;
                Some(Bend {
                    of: shape.of,
                    method: shape.method.clone(),
                    mutation: mutation.clone(),
                })
            })
            .collect();
        ShapeWatch { checks, bends }
    }

    /// The same, shared, as a link's watch (none when there is nothing to check or bend).
    pub fn shared(
        catalogue: &Catalogue,
        judged: Binds,
        misbehaving: &Misbehaviours,
        spec: &str,
    ) -> Option<Arc<dyn MessageWatch>> {
        ShapeWatch::new(catalogue, judged, misbehaving, spec).into_shared()
    }

    /// This watch as a link's (none when there is nothing to check or bend).
    pub fn into_shared(self) -> Option<Arc<dyn MessageWatch>> {
        if self.checks.is_empty() && self.bends.is_empty() {
            None
        } else {
            Some(Arc::new(self))
        }
    }
}

impl ShapeWatch {
    /// Checks the body of a successful HTTP answer to `route` (`GET /v1/usage`).
    pub fn check_response(&self, route: &str, body: &Value) -> Vec<Finding> {
        self.check(ShapeOf::Response, route, body)
    }

    /// Whether this side bends its answers to `route` (so a server buffers only those).
    pub fn bends_response(&self, route: &str) -> bool {
        self.bends
            .iter()
            .any(|b| b.of == ShapeOf::Response && b.method == route)
    }

    /// Bends the body of this side's HTTP answer to `route`, for a shape misbehaviour.
    pub fn bend_response(&self, route: &str, body: &mut Value) {
        for bend in &self.bends {
            if bend.of == ShapeOf::Response && bend.method == route {
                apply(&bend.mutation, body);
            }
        }
    }

    fn check(&self, of: ShapeOf, method: &str, value: &Value) -> Vec<Finding> {
        let mut found = Vec::new();
        for check in self.checks.iter() {
            if check.method != method || check.of != of {
                continue;
            }
            let outcome = check.pattern.matches(value);
            if outcome.is_match() {
                continue;
            }
            let what = match of {
                ShapeOf::Params => format!("the params of `{method}`"),
                ShapeOf::Result => format!("the answer to `{method}`"),
                ShapeOf::Response => format!("the answer to `{method}` over HTTP"),
            };
            found.push(mismatch(&check.rule, &what, &outcome, value));
        }
        found
    }
}

impl MessageWatch for ShapeWatch {
    fn incoming(&self, part: Part, method: &str, value: &Value) -> Vec<Finding> {
        let of = match part {
            Part::Params => ShapeOf::Params,
            Part::Result => ShapeOf::Result,
        };
        self.check(of, method, value)
    }

    fn outgoing(&self, part: Part, method: &str, value: &mut Value) {
        for bend in &self.bends {
            if bend.method == method && same_part(bend.of, part) {
                apply(&bend.mutation, value);
            }
        }
    }
}

/// How much of a mismatched message a finding quotes.
const QUOTED_MAX: usize = 2000;

/// The finding for `value` (`what`, in words) not matching its shape: every difference, and
/// what came, cut to a bounded quote.
pub fn mismatch(
    rule: &str,
    what: &str,
    outcome: &crate::pattern::MatchOutcome,
    value: &Value,
) -> Finding {
    let detail = outcome
        .mismatches
        .iter()
        .map(|m| m.to_string())
        .collect::<Vec<_>>()
        .join("\n");
    let mut received = value.to_string();
    if received.len() > QUOTED_MAX {
        let cut = (0..=QUOTED_MAX)
            .rev()
            .find(|i| received.is_char_boundary(*i))
            .unwrap_or(0);
        received.truncate(cut);
        received.push('…');
    }
    Finding::new(rule, format!("{what} is not shaped as the spec says"))
        .with_detail(format!("{detail}\nreceived: {received}"))
}

/// Applies a mutation: drops, then sets.
pub fn apply(mutation: &Mutation, value: &mut Value) {
    for path in &mutation.drop {
        let (parent, last) = split(path);
        if let Some(target) = walk(value, &parent) {
            match target {
                Value::Object(map) => {
                    map.remove(last);
                }
                Value::Array(items) => {
                    if let Ok(i) = last.parse::<usize>()
                        && i < items.len()
                    {
                        items.remove(i);
                    }
                }
                _ => {}
            }
        }
    }
    for (path, new) in &mutation.set {
        let (parent, last) = split(path);
        if let Some(target) = walk(value, &parent) {
            match target {
                Value::Object(map) => {
                    map.insert(last.to_string(), new.clone());
                }
                Value::Array(items) => {
                    if let Some(slot) = last.parse::<usize>().ok().and_then(|i| items.get_mut(i)) {
                        *slot = new.clone();
                    }
                }
                _ => {}
            }
        }
    }
}

fn split(path: &str) -> (Vec<&str>, &str) {
    let mut parts: Vec<&str> = path.split('.').collect();
    let last = parts.pop().unwrap_or("");
    (parts, last)
}

fn walk<'v>(value: &'v mut Value, path: &[&str]) -> Option<&'v mut Value> {
    let mut here = value;
    for step in path {
        here = match here {
            Value::Object(map) => map.get_mut(*step)?,
            Value::Array(items) => items.get_mut(step.parse::<usize>().ok()?)?,
            _ => return None,
        };
    }
    Some(here)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn catalogue() -> Catalogue {
        Catalogue::parse(
            r#"
- id: device.x.shape
  section: s
  binds: device
  says: x
  misbehaviour: drops `a`
  shape:
    of: result
    method: x/get
    pattern: { a: $string, b: { $one_of: [$absent, $null, $integer] } }
    break: { drop: [a] }
  ways:
    - { name: b_text, misbehaviour: sets `b` to text, break: { set: { b: "two" } } }
- id: instance.y.shape
  section: s
  binds: instance
  says: y
  misbehaviour: sets `list.0` to a number
  applies: { spec: ["1.1.0"] }
  shape:
    of: params
    method: y/tell
    pattern: { list: { $each: $string } }
    break: { set: { list.0: 7 } }
"#,
        )
        .expect("test catalogue parses")
    }

    #[test]
    fn the_judged_sides_shapes_are_checked_and_a_mismatch_shows_what_came() {
        let none = Misbehaviours::default();
        let watch = ShapeWatch::new(&catalogue(), Binds::Device, &none, "1.1.0");
        assert!(
            watch
                .incoming(Part::Result, "x/get", &json!({"a": "ok", "b": null}))
                .is_empty()
        );
        assert!(
            watch.incoming(Part::Params, "x/get", &json!({})).is_empty(),
            "only the result is shaped"
        );
        let found = watch.incoming(Part::Result, "x/get", &json!({"b": 2}));
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].rule, "device.x.shape");
        assert!(found[0].summary.contains("the answer to `x/get`"));
        assert!(
            found[0]
                .detail
                .as_deref()
                .unwrap_or("")
                .contains(r#"received: {"b":2}"#)
        );
        // The instance's rules are not this watch's to check.
        assert!(
            watch
                .incoming(Part::Params, "y/tell", &json!({"list": [1]}))
                .is_empty()
        );
    }

    #[test]
    fn each_way_bends_with_its_own_break_and_only_when_asked_for() {
        let bent = |asked: &[&str]| {
            let watch = ShapeWatch::new(
                &catalogue(),
                Binds::Instance,
                &Misbehaviours::unchecked(asked),
                "1.1.0",
            );
            let mut v = json!({"a": "ok", "b": 2});
            watch.outgoing(Part::Result, "x/get", &mut v);
            v
        };
        assert_eq!(bent(&[]), json!({"a": "ok", "b": 2}));
        assert_eq!(bent(&["device.x.shape"]), json!({"b": 2}));
        assert_eq!(
            bent(&["device.x.shape/b_text"]),
            json!({"a": "ok", "b": "two"})
        );
    }

    #[test]
    fn a_rule_of_another_spec_is_not_checked() {
        let none = Misbehaviours::default();
        let watch = ShapeWatch::new(&catalogue(), Binds::Instance, &none, "1.0.0");
        assert!(
            watch
                .incoming(Part::Params, "y/tell", &json!({"list": [1]}))
                .is_empty()
        );
        let watch = ShapeWatch::new(&catalogue(), Binds::Instance, &none, "1.1.0");
        assert_eq!(
            watch
                .incoming(Part::Params, "y/tell", &json!({"list": [1]}))
                .len(),
            1
        );
    }

    #[test]
    fn mutations_drop_and_set_along_dotted_paths() {
        let mut v = json!({"a": 1, "list": ["x", "y"], "o": {"k": true}});
        apply(
            &Mutation {
                drop: vec!["a".into(), "o.k".into(), "missing.deep".into()],
                set: [
                    ("list.0".to_string(), json!(7)),
                    ("o.n".to_string(), json!("new")),
                ]
                .into_iter()
                .collect(),
            },
            &mut v,
        );
        assert_eq!(v, json!({"list": [7, "y"], "o": {"n": "new"}}));
    }
}
