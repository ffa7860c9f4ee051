//! The JSON Schema of the scenario format, generated from the model so it cannot drift.
//! `docs/scenario.schema.json` holds it for editors; a test keeps that file current.

use super::model::Scenario;

/// The schema as pretty JSON, ending in a newline.
pub fn json_schema() -> String {
    let schema = schemars::schema_for!(Scenario);
    let mut text = serde_json::to_string_pretty(&schema).unwrap_or_default();
    text.push('\n');
    text
}
