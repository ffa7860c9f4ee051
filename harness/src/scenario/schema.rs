//! The JSON Schema of the scenario format, generated from the model so it cannot drift.
//! `docs/scenario.schema.json` holds it for editors; a test keeps that file current.
//!
//! The doubles' own vocabulary (the `instance:` and `device:` settings, how the web UI answers
//! cards, each double's actions) is typed by the double that reads it: the harness keeps those
//! sections as plain JSON, and [`json_schema_with`] lets the caller that knows their types put
//! those types' schemas in place.

use schemars::{JsonSchema, Schema, SchemaGenerator, generate::SchemaSettings};

use super::model::Scenario;

/// A section typed elsewhere: where it sits (the `$defs` entry and its property) and how to
/// make its schema with the same generator (so its own definitions join the file's).
pub struct Section {
    /// The `$defs` entry holding the property, e.g. `PeerSetup`; empty: the scenario itself.
    pub definition: &'static str,
    /// The property, e.g. `http`.
    pub property: &'static str,
    /// Its schema.
    pub schema: fn(&mut SchemaGenerator) -> Schema,
}

impl Section {
    /// The section whose schema is `T`'s.
    pub fn of<T: JsonSchema>(definition: &'static str, property: &'static str) -> Self {
        Self {
            definition,
            property,
            schema: |generator| generator.subschema_for::<T>(),
        }
    }
}

/// The schema as pretty JSON, ending in a newline (sections typed elsewhere stay open JSON).
pub fn json_schema() -> String {
    json_schema_with(&[], &[])
}

/// The schema of a double's action type: an externally tagged enum, one action key a variant.
pub type Actions = fn(&mut SchemaGenerator) -> Schema;

/// The schema of a double's action type `A`.
pub fn actions_of<A: JsonSchema>(generator: &mut SchemaGenerator) -> Schema {
    generator.subschema_for::<A>()
}

/// The schema with these sections' types in place of open JSON, and every double's actions as
/// the keys an `act` step may hold.
pub fn json_schema_with(sections: &[Section], actions: &[Actions]) -> String {
    let mut generator = SchemaGenerator::new(SchemaSettings::draft2020_12());
    let typed: Vec<(&Section, Schema)> = sections
        .iter()
        .map(|s| (s, (s.schema)(&mut generator)))
        .collect();
    let action_refs: Vec<Schema> = actions.iter().map(|a| a(&mut generator)).collect();
    let mut schema = generator.into_root_schema_for::<Scenario>();
    let action_keys = action_properties(&schema, &action_refs);
    if let Some(act) = schema
        .pointer_mut("/$defs/ActStep/properties")
        .and_then(serde_json::Value::as_object_mut)
    {
        act.extend(action_keys);
    }
    if !actions.is_empty()
        && let Some(act) = schema
            .pointer_mut("/$defs/ActStep")
            .and_then(serde_json::Value::as_object_mut)
    {
        act.insert(
            "additionalProperties".into(),
            serde_json::Value::Bool(false),
        );
    }
    for (section, typed) in typed {
        let pointer = if section.definition.is_empty() {
            format!("/properties/{}", section.property)
        } else {
            format!(
                "/$defs/{}/properties/{}",
                section.definition, section.property
            )
        };
        if let Some(slot) = schema.pointer_mut(&pointer)
            && let (Some(slot), serde_json::Value::Object(typed)) =
                (slot.as_object_mut(), typed.to_value())
        {
            // The property keeps its own description; the type's schema joins it.
            slot.remove("default");
            slot.extend(typed);
        }
    }
    let mut text = serde_json::to_string_pretty(&schema).unwrap_or_default();
    text.push('\n');
    text
}

/// Each action key of the doubles' action types, with its schema and description: the variants
/// of each (an externally tagged enum's `oneOf`, each an object of one required key).
fn action_properties(
    schema: &Schema,
    refs: &[Schema],
) -> serde_json::Map<String, serde_json::Value> {
    let mut keys = serde_json::Map::new();
    for reference in refs {
        let Some(path) = reference
            .get("$ref")
            .and_then(serde_json::Value::as_str)
            .and_then(|r| r.strip_prefix('#'))
        else {
            continue;
        };
        let variants = schema
            .pointer(path)
            .and_then(|def| def.get("oneOf"))
            .and_then(serde_json::Value::as_array);
        for variant in variants.into_iter().flatten() {
            let Some(properties) = variant
                .get("properties")
                .and_then(serde_json::Value::as_object)
            else {
                continue;
            };
            for (key, value) in properties {
                let mut value = value.clone();
                if let (Some(fields), Some(description)) =
                    (value.as_object_mut(), variant.get("description"))
                {
                    fields
                        .entry("description")
                        .or_insert_with(|| description.clone());
                }
                keys.insert(key.clone(), value);
            }
        }
    }
    keys
}
