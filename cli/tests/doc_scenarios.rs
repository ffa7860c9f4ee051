//! Every whole scenario the docs show (a YAML block with `name:` and `steps:`) loads and passes
//! `harness check` for the double that runs it: a reader who copies one gets a scenario, not an
//! error.

use std::process::Command;

mod common;

use common::{HARNESS, root};

/// The YAML blocks of a Markdown text that are whole scenarios, with their line.
fn scenarios_in(text: &str) -> Vec<(usize, String)> {
    let mut found = Vec::new();
    let mut rest = text;
    let mut offset = 0;
    while let Some(start) = rest.find("```yaml\n") {
        let body_start = start + "```yaml\n".len();
        let Some(len) = rest[body_start..].find("```") else {
            break;
        };
        let body = &rest[body_start..body_start + len];
        let is_scenario = body.lines().any(|l| l.starts_with("name:"))
            && body.lines().any(|l| l.starts_with("steps:"));
        if is_scenario {
            let line = text[..offset + start].lines().count() + 1;
            found.push((line, body.to_string()));
        }
        offset += body_start + len + 3;
        rest = &rest[body_start + len + 3..];
    }
    found
}

/// The double that runs a scenario: the one that judges the side its rules bind.
fn side_of(scenario: &str) -> &'static str {
    if scenario.contains("instance.") || scenario.contains("lvmh.daemon.") {
        "device"
    } else {
        "instance"
    }
}

#[test]
fn every_scenario_the_docs_show_loads_for_its_double() {
    let mut files = vec![root().join("README.md")];
    for entry in std::fs::read_dir(root().join("docs")).expect("docs") {
        let path = entry.expect("an entry").path();
        if path.extension().is_some_and(|e| e == "md") {
            files.push(path);
        }
    }
    let dir = tempfile::tempdir().expect("dir");
    let mut checked = 0;
    for file in files {
        let text = std::fs::read_to_string(&file).expect("the doc");
        for (line, scenario) in scenarios_in(&text) {
            let copy = dir.path().join(format!("block-{checked}.yaml"));
            std::fs::write(&copy, &scenario).expect("written");
            let out = Command::new(HARNESS)
                .args(["check", "--side", side_of(&scenario)])
                .arg(&copy)
                .output()
                .expect("harness runs");
            assert!(
                out.status.success(),
                "{}:{line}: the scenario shown does not load:\n{}",
                file.display(),
                String::from_utf8_lossy(&out.stdout)
            );
            checked += 1;
        }
    }
    assert!(checked >= 3, "only {checked} scenarios found in the docs");
}
