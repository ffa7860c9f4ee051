//! An embedder needs the double's crate alone (and tokio): every engine type a builder or a
//! handle takes or gives is re-exported by the double, and the tests that show embedding name
//! no `harness` path.

mod common;

use std::collections::BTreeSet;

fn read(path: &str) -> String {
    let path = common::root().join(path);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The names a file imports from the engine crate (`use harness::a::{B, C};` gives B and C).
fn engine_imports(text: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let mut rest = text;
    while let Some(at) = rest.find("\nuse harness::") {
        let statement = &rest[at..];
        let end = statement.find(';').unwrap_or(statement.len());
        let body = &statement["\nuse harness::".len()..end];
        let inside = body.rsplit_once('{').map_or(body, |(_, list)| list);
        for item in inside.split(',') {
            let last = item
                .trim()
                .trim_end_matches('}')
                .rsplit("::")
                .next()
                .unwrap_or_default();
            let name = last.rsplit(" as ").next().unwrap_or(last).trim();
            if name.chars().next().is_some_and(char::is_uppercase) {
                names.insert(name.to_string());
            }
        }
        rest = &statement[end..];
    }
    names
}

/// The text of every public function's signature (from `pub fn` or `pub async fn` to its body).
fn public_signatures(text: &str) -> Vec<&str> {
    let mut found = Vec::new();
    for (at, _) in text.match_indices("    pub ") {
        let rest = &text[at..];
        if rest.starts_with("    pub fn ") || rest.starts_with("    pub async fn ") {
            let end = rest.find('{').unwrap_or(rest.len());
            found.push(&rest[..end]);
        }
    }
    found
}

/// The names a crate's root re-exports from the engine (`pub use harness::…`, and the engine's
/// one list for the doubles when it re-exports `harness::facade::*`).
fn reexported(lib: &str) -> BTreeSet<String> {
    let mut names = engine_imports(&lib.replace("\npub use harness::", "\nuse harness::"));
    if lib.contains("\npub use harness::facade::*;") {
        let facade = read("harness/src/facade.rs");
        names.extend(engine_imports(
            &facade.replace("\npub use crate::", "\nuse harness::"),
        ));
    }
    names
}

#[test]
fn every_engine_type_in_a_builders_or_handles_signature_is_reexported_by_its_double() {
    for double in ["fake-device", "fake-instance"] {
        let embedding = read(&format!("{double}/src/embedding.rs"));
        let lib = read(&format!("{double}/src/lib.rs"));
        let offered = reexported(&lib);
        let signatures = public_signatures(&embedding);
        assert!(signatures.len() > 20, "{double}: {signatures:?}");
        let mut missing = BTreeSet::new();
        for name in engine_imports(&embedding) {
            let used = signatures.iter().any(|s| {
                s.split(|c: char| !c.is_alphanumeric() && c != '_')
                    .any(|word| word == name)
            });
            if used && !offered.contains(&name) {
                missing.insert(name);
            }
        }
        assert!(
            missing.is_empty(),
            "{double}'s API takes or gives these engine types, which its lib.rs does not \
             re-export: {missing:?}"
        );
    }
}

#[test]
fn the_embedding_tests_and_the_guides_rust_example_name_no_engine_path() {
    for file in [
        "fake-device/tests/embedding.rs",
        "fake-instance/tests/lvmh_daemon.rs",
        "embed-check/tests/embedding.rs",
        "docs/book/src/getting-started-rust.md",
    ] {
        let text = read(file);
        let named: Vec<&str> = text
            .lines()
            .filter(|l| l.contains("harness::") && !l.trim_start().starts_with("//"))
            .collect();
        assert!(
            named.is_empty(),
            "{file} should need the double's crate alone, yet names: {named:#?}"
        );
    }
}

#[test]
fn the_checks_see_an_import_and_a_signature() {
    let text = "\nuse harness::engine::{ActError, Cell};\nuse harness::report::RunReport as R;\n\
                impl X {\n    pub async fn verdict(self) -> RunReport {\n    }\n}\n";
    let names = engine_imports(text);
    assert_eq!(
        names,
        ["ActError", "Cell", "R"]
            .map(String::from)
            .into_iter()
            .collect()
    );
    assert_eq!(
        public_signatures(text),
        ["    pub async fn verdict(self) -> RunReport "]
    );
    let lib = "\npub use harness::engine::{ActError, Cell};\n";
    assert!(reexported(lib).contains("Cell"));
}
