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

/// Every shipped scenario, of both families, is valid against the schema: an editor that reads
/// it flags nothing in a file the doubles run.
#[test]
fn every_shipped_scenario_is_valid_against_the_schema() {
    use harness::family::Family;
    use harness::scenario::Side;
    let schema: serde_json::Value =
        serde_json::from_str(&harness_cli::scenario_schema()).expect("the schema is JSON");
    let validator = jsonschema::validator_for(&schema).expect("the schema compiles");
    let mut invalid = Vec::new();
    for family in Family::ALL {
        for side in [Side::Instance, Side::Device] {
            for embedded in harness::scenario::catalogue::embedded_of(side, family) {
                let value: serde_json::Value =
                    serde_saphyr::from_str(embedded.text).expect("shipped YAML parses");
                for error in validator.iter_errors(&value) {
                    invalid.push(format!(
                        "{}: {} at {}",
                        embedded.label(),
                        error,
                        error.instance_path()
                    ));
                }
            }
        }
    }
    assert!(invalid.is_empty(), "{}", invalid.join("\n"));
}

/// What the loader takes, the schema takes: a `sut:` as a bare command or as a map without
/// `env`.
#[test]
fn the_schema_takes_a_sut_as_the_loader_does() {
    let schema: serde_json::Value =
        serde_json::from_str(&harness_cli::scenario_schema()).expect("the schema is JSON");
    let validator = jsonschema::validator_for(&schema).expect("the schema compiles");
    for sut in [
        serde_json::json!("lembas serve --url {url}"),
        serde_json::json!({ "exec": "lembas serve", "grace": "2s" }),
    ] {
        let scenario = serde_json::json!({
            "name": "s", "about": "a", "sut": sut, "steps": [{ "wait": "1ms" }]
        });
        let errors: Vec<String> = validator
            .iter_errors(&scenario)
            .map(|e| e.to_string())
            .collect();
        assert!(errors.is_empty(), "{sut}: {errors:?}");
        let yaml = format!("name: s\nabout: a\nsut: {sut}\nsteps:\n  - wait: 1ms\n");
        harness::scenario::load_str(&yaml, "s.yaml", None).expect("the loader takes it too");
    }
}

#[test]
fn the_workload_schema_in_docs_is_current_and_every_shipped_workload_is_valid_and_loads() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/workload.schema.json");
    let kept = std::fs::read_to_string(path).unwrap_or_default();
    let generated = harness_cli::workload_schema();
    assert!(
        kept == generated,
        "docs/workload.schema.json is stale: run `cargo run -q -p harness-cli -- schema --workload --write docs/workload.schema.json`"
    );
    let schema: serde_json::Value = serde_json::from_str(&generated).expect("the schema is JSON");
    let validator = jsonschema::validator_for(&schema).expect("the schema compiles");
    let folder = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/recipes/workloads");
    let mut shipped = 0;
    for entry in std::fs::read_dir(folder).expect("the workloads folder") {
        let path = entry.expect("an entry").path();
        if !path.to_string_lossy().ends_with(".workload.yaml") {
            continue;
        }
        shipped += 1;
        let text = std::fs::read_to_string(&path).expect("a workload");
        let value: serde_json::Value = serde_saphyr::from_str(&text).expect("YAML");
        let errors: Vec<String> = validator
            .iter_errors(&value)
            .map(|e| e.to_string())
            .collect();
        assert!(errors.is_empty(), "{}: {errors:?}", path.display());
        fake_device::workload::Workload::load(&path).unwrap_or_else(|e| panic!("{e}"));
    }
    assert!(shipped >= 3, "only {shipped} workloads shipped");
}
