//! The `peer:` section: what the other double does by itself, and the set-up the double
//! running the scenario reads as its own type. Hand-written serde and schema, because the
//! section's other keys are the doubles' and only `steps` is the engine's.

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;
use serde_saphyr::Spanned;

use super::step::Step;

/// The peer under test's set-up: what the other double does by itself (`steps`), and the rest
/// of the section as written, which the double running the scenario reads as a type of its own
/// (fake-instance: what a device must be given; fake-device: what an instance must be made to
/// do). The engine knows neither.
#[derive(Debug, Clone, Default)]
pub struct PeerSetup {
    /// What the other double does by itself, in order, from its first link: `act` steps (its
    /// own actions: a person at the device's terminal, or in LLeMbas's web UI) and `wait` steps.
    /// A real peer under test must be made to do the same (by its test).
    pub steps: Vec<Spanned<Step>>,
    /// Every other key of the section, as written.
    pub setup: serde_json::Map<String, Value>,
}

impl PeerSetup {
    /// The actions of `steps`, by name, once each: set-up a real peer's test must do.
    pub fn actions(&self) -> Vec<String> {
        let mut names: Vec<String> = Vec::new();
        for step in &self.steps {
            if let Step::Act(act) = &step.value
                && !names.contains(&act.name)
            {
                names.push(act.name.clone());
            }
        }
        names
    }
}

impl<'de> Deserialize<'de> for PeerSetup {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Fields;
        impl<'de> serde::de::Visitor<'de> for Fields {
            type Value = PeerSetup;

            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("the peer's set-up (a mapping)")
            }

            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<PeerSetup, A::Error> {
                let mut peer = PeerSetup::default();
                while let Some(key) = map.next_key::<String>()? {
                    // Read straight from the YAML, so each step keeps its line.
                    if key == "steps" {
                        peer.steps = map.next_value()?;
                    } else {
                        let value = map.next_value()?;
                        peer.setup.insert(key, value);
                    }
                }
                Ok(peer)
            }
        }
        deserializer.deserialize_map(Fields)
    }
}

impl JsonSchema for PeerSetup {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "PeerSetup".into()
    }

    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        // The set-up keys are the doubles' own: `harness schema` puts them in place.
        let steps = generator.subschema_for::<Vec<Step>>();
        schemars::json_schema!({
            "type": "object",
            "properties": { "steps": steps }
        })
    }
}
