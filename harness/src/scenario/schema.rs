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
#[allow(missing_docs)] // fields whose names say it all go undocumented
pub struct Section {
    /// The `$defs` entry holding the property, e.g. `PeerSetup`; empty: the scenario itself.
    pub definition: &'static str,
    /// The property, e.g. `http`.
    pub property: &'static str,
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

/// Keys the doubles define that join a definition of the format's (the `act` step's actions,
/// the peer's set-up): the properties of a type (a struct's, or each variant's of an externally
/// tagged enum), merged into `$defs/<definition>/properties`, which then allows no other key.
pub struct Merge {
    /// The `$defs` entry that takes the keys, e.g. `ActStep`.
    pub definition: &'static str,
    /// The type whose keys it takes.
    pub schema: fn(&mut SchemaGenerator) -> Schema,
}

impl Merge {
    /// `T`'s keys, into `definition`.
    pub fn of<T: JsonSchema>(definition: &'static str) -> Self {
        Self {
            definition,
            schema: |generator| generator.subschema_for::<T>(),
        }
    }
}

/// The schema with these sections' types in place of open JSON, and the doubles' keys merged
/// where they belong.
pub fn json_schema_with(sections: &[Section], merges: &[Merge]) -> String {
    let mut generator = SchemaGenerator::new(SchemaSettings::draft2020_12());
    let typed: Vec<(&Section, Schema)> = sections
        .iter()
        .map(|s| (s, (s.schema)(&mut generator)))
        .collect();
    let merged: Vec<(&Merge, Schema)> = merges
        .iter()
        .map(|m| (m, (m.schema)(&mut generator)))
        .collect();
    let mut schema = generator.into_root_schema_for::<Scenario>();
    for (merge, reference) in merged {
        let keys = properties_of(&schema, &reference);
        if let Some(definition) = schema
            .pointer_mut(&format!("/$defs/{}", merge.definition))
            .and_then(serde_json::Value::as_object_mut)
        {
            definition.insert(
                "additionalProperties".into(),
                serde_json::Value::Bool(false),
            );
            if let Some(properties) = definition
                .entry("properties")
                .or_insert_with(|| serde_json::json!({}))
                .as_object_mut()
            {
                properties.extend(keys);
            }
        }
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

/// The keys of the type `reference` points at, with their schemas: a struct's properties, or
/// each variant's of an externally tagged enum (its `oneOf`, each an object of one key, whose
/// description goes to its key).
fn properties_of(
    schema: &Schema,
    reference: &Schema,
) -> serde_json::Map<String, serde_json::Value> {
    let mut keys = serde_json::Map::new();
    let Some(definition) = reference
        .get("$ref")
        .and_then(serde_json::Value::as_str)
        .and_then(|r| r.strip_prefix('#'))
        .and_then(|path| schema.pointer(path))
    else {
        return keys;
    };
    let (variants, enum_like): (Vec<&serde_json::Value>, bool) = match definition.get("oneOf") {
        Some(serde_json::Value::Array(variants)) => (variants.iter().collect(), true),
        _ => (vec![definition], false),
    };
    for variant in variants {
        let Some(properties) = variant
            .get("properties")
            .and_then(serde_json::Value::as_object)
        else {
            continue;
        };
        for (key, value) in properties {
            let mut value = value.clone();
            if let (true, Some(fields), Some(description)) =
                (enum_like, value.as_object_mut(), variant.get("description"))
            {
                fields
                    .entry("description")
                    .or_insert_with(|| description.clone());
            }
            keys.insert(key.clone(), value);
        }
    }
    keys
}
