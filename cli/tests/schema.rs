//! The JSON Schema in `docs/` is what editors read: it must be the one the model generates.

#[test]
fn the_schema_in_docs_is_current() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/scenario.schema.json");
    let kept = std::fs::read_to_string(path).unwrap_or_default();
    let generated = harness_cli::scenario_schema();
    assert!(
        kept == generated,
        "docs/scenario.schema.json is stale: run `cargo run -q -p harness-cli -- schema --write docs/scenario.schema.json`"
    );
}
