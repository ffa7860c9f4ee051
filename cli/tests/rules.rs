//! `harness rules --section`: one spec section's rules, from its one catalogue file.

use std::process::Command;

fn harness(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_harness"))
        .args(args)
        .output()
        .expect("harness runs")
}

/// The ids a section file lists, in its order, read straight from the file (each rule starts
/// with `- id:`).
fn ids_in_file(section: &str) -> Vec<String> {
    let path = format!(
        "{}/../conformance/rules/{section}.yaml",
        env!("CARGO_MANIFEST_DIR")
    );
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    text.lines()
        .filter_map(|l| l.strip_prefix("- id: "))
        .map(|id| id.trim().to_string())
        .collect()
}

/// The rule ids `harness rules` printed, in its order (a rule's line starts at column 0).
fn printed_ids(out: &std::process::Output) -> Vec<String> {
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| !l.starts_with(' ') && !l.is_empty())
        .filter_map(|l| l.split_whitespace().next())
        .map(str::to_string)
        .collect()
}

#[test]
fn a_section_prints_its_files_rules_in_the_files_order_by_either_name() {
    let wanted = ids_in_file("session/rewind");
    assert!(wanted.len() >= 5, "{wanted:?}");
    for name in [
        "session/rewind",
        "_lembas/session/rewind",
        "session/rewind.yaml",
    ] {
        let out = harness(&["rules", "--section", name]);
        assert!(out.status.success(), "{name}: {out:?}");
        assert_eq!(printed_ids(&out), wanted, "{name}");
    }
    let lvmh = harness(&["rules", "--section", "lvmh/handshake"]);
    assert_eq!(printed_ids(&lvmh), ids_in_file("lvmh/handshake"));
}

#[test]
fn every_file_is_a_section_with_its_rules_and_together_they_are_the_catalogue() {
    let catalogue = harness::rules::catalogue();
    let mut from_files = Vec::new();
    let files = section_files(&format!(
        "{}/../conformance/rules",
        env!("CARGO_MANIFEST_DIR")
    ));
    assert!(files.len() >= 40, "{files:?}");
    for name in files {
        let section = catalogue
            .section(&name)
            .unwrap_or_else(|| panic!("{name} is not a section"));
        let in_file = ids_in_file(&name);
        assert_eq!(section.rules, in_file, "{name}");
        from_files.extend(in_file);
    }
    let mut whole: Vec<String> = catalogue.iter().map(|r| r.id.clone()).collect();
    whole.sort();
    from_files.sort();
    assert_eq!(whole, from_files);
}

#[test]
fn an_unknown_section_is_a_usage_error_that_lists_the_sections() {
    let out = harness(&["rules", "--section", "session/rewnd"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("`session/rewnd`"), "{err}");
    assert!(err.contains("session/rewind"), "{err}");
    assert!(out.stdout.is_empty());
}

/// The section names of the catalogue's files: their paths below `dir`, without `.yaml`.
fn section_files(dir: &str) -> Vec<String> {
    fn walk(root: &std::path::Path, dir: &std::path::Path, out: &mut Vec<String>) {
        for entry in std::fs::read_dir(dir).expect("the catalogue folder") {
            let path = entry.expect("an entry").path();
            if path.is_dir() {
                walk(root, &path, out);
            } else if let Some(name) = path
                .strip_prefix(root)
                .ok()
                .and_then(|p| p.to_str())
                .and_then(|p| p.strip_suffix(".yaml"))
            {
                out.push(name.to_string());
            }
        }
    }
    let root = std::path::Path::new(dir);
    let mut out = Vec::new();
    walk(root, root, &mut out);
    out
}
