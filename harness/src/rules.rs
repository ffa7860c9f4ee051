//! The rule catalogue (`conformance/rules.yaml`), compiled in.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use serde::{Deserialize, Serialize};

/// The catalogue's text, as shipped.
pub const CATALOGUE_YAML: &str = include_str!("../../conformance/rules.yaml");

/// The side a rule binds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
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
    /// The spec section it comes from.
    pub section: String,
    /// The side it binds.
    pub binds: Binds,
    /// The rule in one line, in our words.
    pub says: String,
    /// What the other double does when told `--misbehave ID`; absent: no misbehaviour yet.
    #[serde(default)]
    pub misbehaviour: Option<String>,
    /// Where that misbehaviour shows; absent: every cell.
    #[serde(default)]
    pub cells: Option<Cells>,
}

/// The whole catalogue, by id.
#[derive(Debug, Clone)]
pub struct Catalogue {
    rules: BTreeMap<String, Rule>,
}

impl Catalogue {
    /// Parses a catalogue text.
    pub fn parse(text: &str) -> Result<Catalogue, String> {
        let list: Vec<Rule> = serde_saphyr::from_str(text).map_err(|e| e.to_string())?;
        let mut rules = BTreeMap::new();
        for rule in list {
            if let Some(old) = rules.insert(rule.id.clone(), rule) {
                return Err(format!("rule `{}` is in the catalogue twice", old.id));
            }
        }
        Ok(Catalogue { rules })
    }

    /// A rule by id.
    pub fn get(&self, id: &str) -> Option<&Rule> {
        self.rules.get(id)
    }

    /// Every rule, by id.
    pub fn iter(&self) -> impl Iterator<Item = &Rule> {
        self.rules.values()
    }

    /// The rules with a misbehaviour that `double` can act out (it breaks the rules binding
    /// its own side).
    pub fn misbehaviours_of(&self, side: Binds) -> impl Iterator<Item = &Rule> {
        self.rules
            .values()
            .filter(move |r| r.binds == side && r.misbehaviour.is_some())
    }
}

/// The rules a double was told to break (`--misbehave RULE`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Misbehaviours {
    rules: std::collections::BTreeSet<String>,
}

impl Misbehaviours {
    /// Checks each id: it must be a catalogue rule that binds `side` and has a misbehaviour.
    pub fn parse(ids: &[String], side: Binds) -> Result<Misbehaviours, String> {
        let mut rules = std::collections::BTreeSet::new();
        for id in ids {
            let known: Vec<&str> = catalogue()
                .misbehaviours_of(side)
                .map(|r| r.id.as_str())
                .collect();
            match catalogue().get(id) {
                Some(rule) if rule.binds == side && rule.misbehaviour.is_some() => {
                    rules.insert(id.clone());
                }
                _ => {
                    return Err(format!(
                        "`{id}` is not a misbehaviour of this double; it knows: {}",
                        known.join(", ")
                    ));
                }
            }
        }
        Ok(Misbehaviours { rules })
    }

    /// Whether to break this rule.
    pub fn breaks(&self, id: &str) -> bool {
        self.rules.contains(id)
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
        Catalogue::parse(CATALOGUE_YAML).unwrap_or_else(|e| {
            tracing::error!("the compiled-in rule catalogue is broken: {e}");
            Catalogue {
                rules: BTreeMap::new(),
            }
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shipped_catalogue_parses() {
        let c = Catalogue::parse(CATALOGUE_YAML).expect("catalogue parses");
        assert!(c.get("device.hello.protocol").is_some());
        assert!(c.misbehaviours_of(Binds::Device).count() >= 2);
        assert!(c.misbehaviours_of(Binds::Instance).count() >= 2);
    }

    #[test]
    fn duplicate_ids_are_refused() {
        let text = "- {id: a, section: s, binds: both, says: x}\n- {id: a, section: s, binds: both, says: y}\n";
        assert!(Catalogue::parse(text).unwrap_err().contains("twice"));
    }
}
