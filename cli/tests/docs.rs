//! The docs cannot drift from the code. For the front page (README.md), the contributors' page and
//! every page of the user guide (docs/book/src, with mdBook's includes expanded as the built book
//! shows them):
//! - every link and image leads somewhere: a file that exists (inside the book, for a book page,
//!   or the built book would break it) and a heading that exists for a `#fragment`;
//! - every page of the guide is in its table of contents;
//! - every YAML block loads: a whole scenario passes `harness check` for its double, a hooks
//!   file loads as hooks, scripts as fake-device's scripts, a baseline as a baseline, and the
//!   rest parses;
//! - every Cargo dependency line resolves against this workspace;
//! - every `fake-instance`, `fake-device` and `harness` command in a shell block parses with
//!   the command's own arguments;
//! - the README is at most 150 lines, and each of its blocks says how it is checked, which the
//!   checker it names does;
//! - the catalogue page is what `harness scenarios` generates.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use pulldown_cmark::{Event, Options, Parser, Tag, TagEnd};

mod common;

use common::{HARNESS, binary, readme_block, root, words};

/// The guide's source folder.
fn book() -> PathBuf {
    root().join("docs/book/src")
}

/// Every page a reader sees, as (path, whether it is a page of the book).
fn pages() -> Vec<(PathBuf, bool)> {
    let mut pages = vec![
        (root().join("README.md"), false),
        (root().join("CONTRIBUTING.md"), false),
    ];
    let mut in_book: Vec<PathBuf> = std::fs::read_dir(book())
        .expect("docs/book/src")
        .map(|e| e.expect("an entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    in_book.sort();
    pages.extend(in_book.into_iter().map(|p| (p, true)));
    pages
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// A page's text with mdBook's `{{#include PATH[:FROM[:TO]]}}` put in, as the built book has it.
fn expanded(page: &Path) -> String {
    let text = read(page);
    let mut out = String::new();
    let mut rest = text.as_str();
    while let Some(at) = rest.find("{{#include ") {
        out.push_str(&rest[..at]);
        let end = rest[at..].find("}}").expect("an include ends") + at;
        let spec = rest[at + "{{#include ".len()..end].trim();
        let mut parts = spec.split(':');
        let file = page
            .parent()
            .expect("a folder")
            .join(parts.next().expect("a path"));
        let included = read(&file);
        let lines: Vec<&str> = included.lines().collect();
        let from = parts
            .next()
            .filter(|s| !s.is_empty())
            .map_or(1, |s| s.parse::<usize>().expect("a line number"));
        let to = parts
            .next()
            .filter(|s| !s.is_empty())
            .map_or(lines.len(), |s| s.parse::<usize>().expect("a line number"));
        out.push_str(&lines[from - 1..to].join("\n"));
        rest = &rest[end + 2..];
    }
    out.push_str(rest);
    out
}

/// A fenced code block: its language, its text and the line it starts on.
struct Block {
    lang: String,
    text: String,
    line: usize,
    /// The `<!-- checked: ... -->` comment right above it, if any.
    checked: Option<String>,
}

fn line_of(text: &str, offset: usize) -> usize {
    text[..offset].lines().count() + 1
}

fn blocks(text: &str) -> Vec<Block> {
    let mut found = Vec::new();
    let mut current: Option<Block> = None;
    for (event, range) in Parser::new_ext(text, Options::all()).into_offset_iter() {
        match event {
            Event::Start(Tag::CodeBlock(pulldown_cmark::CodeBlockKind::Fenced(lang))) => {
                let above = text[..range.start].trim_end();
                let checked = above
                    .lines()
                    .last()
                    .and_then(|l| l.trim().strip_prefix("<!-- checked:"))
                    .and_then(|l| l.strip_suffix("-->"))
                    .map(|l| l.trim().to_string());
                current = Some(Block {
                    lang: lang
                        .split(',')
                        .next()
                        .unwrap_or_default()
                        .trim()
                        .to_string(),
                    text: String::new(),
                    line: line_of(text, range.start),
                    checked,
                });
            }
            Event::Text(t) => {
                if let Some(block) = current.as_mut() {
                    block.text.push_str(&t);
                }
            }
            Event::End(TagEnd::CodeBlock) => found.extend(current.take()),
            _ => {}
        }
    }
    found
}

/// mdBook's id for a heading: lowercase letters, digits, `-` and `_` kept, spaces made `-`,
/// the rest dropped; a repeated id gets `-1`, `-2`, ...
fn heading_ids(text: &str) -> BTreeSet<String> {
    let mut ids = BTreeSet::new();
    let mut heading: Option<String> = None;
    for event in Parser::new_ext(text, Options::all()) {
        match event {
            Event::Start(Tag::Heading { .. }) => {
                heading = Some(String::new());
            }
            Event::Text(t) | Event::Code(t) => {
                if let Some(h) = heading.as_mut() {
                    h.push_str(&t);
                }
            }
            Event::End(TagEnd::Heading(_)) => {
                let title = heading.take().unwrap_or_default();
                let id: String = title
                    .chars()
                    .filter_map(|c| {
                        if c.is_alphanumeric() || c == '_' || c == '-' {
                            Some(c.to_ascii_lowercase())
                        } else if c.is_whitespace() {
                            Some('-')
                        } else {
                            None
                        }
                    })
                    .collect();
                let mut unique = id.clone();
                let mut n = 1;
                while ids.contains(&unique) {
                    unique = format!("{id}-{n}");
                    n += 1;
                }
                ids.insert(unique);
            }
            _ => {}
        }
    }
    ids
}

/// Every link and image destination of a page, with its line.
fn links(text: &str) -> Vec<(String, usize)> {
    Parser::new_ext(text, Options::all())
        .into_offset_iter()
        .filter_map(|(event, range)| match event {
            Event::Start(Tag::Link { dest_url, .. } | Tag::Image { dest_url, .. }) => {
                Some((dest_url.to_string(), line_of(text, range.start)))
            }
            _ => None,
        })
        .collect()
}

#[test]
fn every_link_leads_somewhere() {
    let book_root = book().canonicalize().expect("the book");
    let mut broken = Vec::new();
    for (page, in_book) in pages() {
        let text = expanded(&page);
        for (dest, line) in links(&text) {
            if dest.contains("://") || dest.starts_with("mailto:") {
                continue;
            }
            let (path, fragment) = dest.split_once('#').unwrap_or((&dest, ""));
            let target = if path.is_empty() {
                page.clone()
            } else {
                page.parent().expect("a folder").join(path)
            };
            let at = format!("{}:{line}: `{dest}`", page.display());
            let Ok(target) = target.canonicalize() else {
                broken.push(format!("{at}: no such file"));
                continue;
            };
            if in_book && !target.starts_with(&book_root) {
                broken.push(format!(
                    "{at}: leads out of the book (name the file as code instead)"
                ));
                continue;
            }
            if !fragment.is_empty() {
                let is_page = target.extension().is_some_and(|e| e == "md");
                if !is_page || !heading_ids(&expanded(&target)).contains(fragment) {
                    broken.push(format!("{at}: no heading with that id"));
                }
            }
        }
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

#[test]
fn every_page_of_the_guide_is_in_its_table_of_contents() {
    let summary = read(&book().join("SUMMARY.md"));
    let listed: BTreeSet<String> = links(&summary).into_iter().map(|(d, _)| d).collect();
    for (page, in_book) in pages() {
        let name = page
            .file_name()
            .expect("a name")
            .to_string_lossy()
            .to_string();
        if in_book && name != "SUMMARY.md" {
            assert!(listed.contains(&name), "{name} is not in SUMMARY.md");
        }
    }
}

/// The double that runs a scenario: the one that judges the side its rules bind.
fn side_of(scenario: &str) -> &'static str {
    if scenario.contains("instance.") || scenario.contains("lvmh.daemon.") {
        "device"
    } else {
        "instance"
    }
}

/// What a YAML block is, from its shape.
enum YamlKind {
    Scenario,
    Hooks,
    Scripts,
    Baseline,
    Workload,
    Other,
}

fn kind_of(value: &serde_json::Value) -> YamlKind {
    use serde_json::Value;
    match value {
        Value::Object(map) if map.contains_key("name") && map.contains_key("steps") => {
            YamlKind::Scenario
        }
        Value::Object(map) if map.contains_key("stages") || map.contains_key("every") => {
            YamlKind::Workload
        }
        Value::Object(map)
            if !map.is_empty()
                && map.values().all(|v| {
                    v.as_object().is_some_and(|h| {
                        h.contains_key("run") || h.contains_key("http") || h.contains_key("stdin")
                    })
                }) =>
        {
            YamlKind::Hooks
        }
        Value::Array(items)
            if !items.is_empty()
                && items
                    .iter()
                    .all(|i| i.get("when").is_some() && i.get("steps").is_some()) =>
        {
            YamlKind::Scripts
        }
        Value::Array(items)
            if !items.is_empty()
                && items
                    .iter()
                    .all(|i| i.is_string() || i.get("failure").is_some()) =>
        {
            YamlKind::Baseline
        }
        _ => YamlKind::Other,
    }
}

#[test]
fn every_yaml_block_loads() {
    let dir = tempfile::tempdir().expect("dir");
    let mut failures = Vec::new();
    let mut scenarios = 0;
    for (page, _) in pages() {
        for (n, block) in blocks(&expanded(&page)).into_iter().enumerate() {
            if !matches!(block.lang.as_str(), "yaml" | "yml") {
                continue;
            }
            let at = format!("{}:{}", page.display(), block.line);
            let value: serde_json::Value = match serde_saphyr::from_str(&block.text) {
                Ok(v) => v,
                Err(e) => {
                    failures.push(format!("{at}: not YAML: {e}"));
                    continue;
                }
            };
            let file = dir.path().join(format!(
                "{}-{n}.yaml",
                page.file_stem().unwrap().to_string_lossy()
            ));
            std::fs::write(&file, &block.text).expect("written");
            let loaded = match kind_of(&value) {
                YamlKind::Scenario => {
                    scenarios += 1;
                    let out = Command::new(HARNESS)
                        .args(["check", "--side", side_of(&block.text)])
                        .arg(&file)
                        .output()
                        .expect("harness runs");
                    out.status
                        .success()
                        .then_some(())
                        .ok_or_else(|| String::from_utf8_lossy(&out.stdout).to_string())
                }
                YamlKind::Hooks => harness::hooks::Hooks::load(&file)
                    .map(drop)
                    .map_err(|e| e.to_string()),
                YamlKind::Scripts => {
                    harness::scenario::load_yaml_file::<Vec<fake_device::AgentScript>>(&file)
                        .map(drop)
                        .map_err(|e| e.to_string())
                }
                YamlKind::Baseline => harness_cli::baseline::load(&file)
                    .map(drop)
                    .map_err(|e| e.to_string()),
                YamlKind::Workload => fake_device::workload::Workload::load(&file)
                    .map(drop)
                    .map_err(|e| e.to_string()),
                YamlKind::Other => Ok(()),
            };
            if let Err(e) = loaded {
                failures.push(format!("{at}: does not load:\n{e}"));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
    assert!(
        scenarios >= 3,
        "only {scenarios} whole scenarios in the docs"
    );
}

/// A scratch crate beside a checkout named `lembas-doubles`, as the docs tell a user to lay it
/// out, with `dependencies` as its manifest's dependency section; `cargo metadata` resolves it.
fn resolves(dependencies: &str) -> Result<serde_json::Value, String> {
    let dir = tempfile::tempdir().expect("dir");
    std::os::unix::fs::symlink(
        root().canonicalize().expect("the root"),
        dir.path().join("lembas-doubles"),
    )
    .expect("a link to the checkout");
    let project = dir.path().join("project");
    std::fs::create_dir_all(project.join("src")).expect("made");
    std::fs::write(project.join("src/lib.rs"), "").expect("written");
    std::fs::write(
        project.join("Cargo.toml"),
        format!(
            "[package]\nname = \"a-project\"\nversion = \"0.0.0\"\nedition = \"2024\"\n\n[workspace]\n\n{dependencies}"
        ),
    )
    .expect("written");
    // This machine's platform only: a fresh machine's cache holds the crates its own builds
    // fetched, not those of other platforms (an Android-only crate failed CI's clean clone).
    let out = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .args(["metadata", "--offline", "--format-version", "1"])
        .args(["--filter-platform", &host_triple()])
        .current_dir(&project)
        .output()
        .expect("cargo runs");
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).to_string());
    }
    serde_json::from_slice(&out.stdout).map_err(|e| e.to_string())
}

/// The platform `rustc` builds for here (`x86_64-unknown-linux-gnu`).
fn host_triple() -> String {
    let out = Command::new(std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into()))
        .arg("-vV")
        .output()
        .expect("rustc runs");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|line| line.strip_prefix("host: "))
        .expect("rustc names its host")
        .to_string()
}

#[cfg(unix)]
#[test]
fn every_cargo_dependency_line_resolves_without_the_command_line() {
    let mut checked = 0;
    for (page, _) in pages() {
        for block in blocks(&expanded(&page)) {
            if block.lang != "toml" || !block.text.contains("dependencies]") {
                continue;
            }
            let at = format!("{}:{}", page.display(), block.line);
            let metadata = resolves(&block.text).unwrap_or_else(|e| panic!("{at}: {e}"));
            let packages = metadata["packages"].as_array().expect("packages");
            for double in ["fake-instance", "fake-device"] {
                if block.text.contains(&format!("{double} =")) {
                    assert!(
                        packages.iter().any(|p| p["name"] == double),
                        "{at}: {double} is not resolved"
                    );
                }
            }
            // Without the `cli` feature, clap is nobody's dependency.
            assert!(
                !packages.iter().any(|p| p["name"] == "clap"),
                "{at}: the line pulls in the command line's clap"
            );
            checked += 1;
        }
    }
    assert!(checked >= 2, "only {checked} Cargo lines checked");
}

/// The commands of a shell block: continuation lines joined, comments dropped, split at `&&`,
/// `;`, `|` and `&`.
fn commands(block: &str) -> Vec<Vec<String>> {
    let joined = block.replace("\\\n", " ");
    let mut found = Vec::new();
    for line in joined.lines() {
        let mut command = Vec::new();
        for word in words(line) {
            if word.starts_with('#') {
                break;
            }
            if matches!(word.as_str(), "&&" | ";" | "|" | "&" | "||") {
                found.push(std::mem::take(&mut command));
                continue;
            }
            command.push(word);
        }
        found.push(command);
    }
    found.retain(|c| !c.is_empty());
    found
}

/// A command of the suite's own, as a binary and its arguments: `fake-instance …`,
/// `harness …`, or `cargo run -q -p harness-cli -- …`.
fn own_command(words: &[String]) -> Option<(PathBuf, Vec<String>)> {
    let (name, args) = match words.first()?.as_str() {
        "fake-instance" | "fake-device" | "harness" => (words[0].as_str(), &words[1..]),
        "cargo" if words.iter().any(|w| w == "harness-cli") => {
            let at = words.iter().position(|w| w == "--")?;
            ("harness", &words[at + 1..])
        }
        _ => return None,
    };
    // A redirect ends the arguments.
    let args: Vec<String> = args
        .iter()
        .take_while(|a| !a.starts_with('>') && !a.starts_with('<'))
        .cloned()
        .collect();
    let binary = if name == "harness" {
        PathBuf::from(HARNESS)
    } else {
        binary(name)
    };
    Some((binary, args))
}

#[test]
fn every_command_of_the_suite_in_the_docs_parses() {
    let dir = tempfile::tempdir().expect("dir");
    let mut failures = Vec::new();
    let mut checked = 0;
    for (page, _) in pages() {
        for block in blocks(&expanded(&page)) {
            if !matches!(block.lang.as_str(), "sh" | "bash" | "console") {
                continue;
            }
            for command in commands(&block.text) {
                let Some((binary, mut args)) = own_command(&command) else {
                    continue;
                };
                // Arguments are checked as they are read, left to right; `--help` then ends the
                // parse before the command would start anything.
                args.push("--help".into());
                let out = Command::new(&binary)
                    .args(&args)
                    .current_dir(dir.path())
                    .env("NO_COLOR", "1")
                    .output()
                    .expect("the command runs");
                if !out.status.success() {
                    failures.push(format!(
                        "{}:{}: `{}` does not parse:\n{}",
                        page.display(),
                        block.line,
                        command.join(" "),
                        String::from_utf8_lossy(&out.stderr)
                    ));
                }
                checked += 1;
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(checked >= 20, "only {checked} commands found in the docs");
}

#[test]
fn the_options_page_names_every_option_of_both_doubles() {
    let page = read(&book().join("options.md"));
    let flag = regex::Regex::new(r"(?m)^\s+(?:-\w, )?(--[a-z][a-z-]*)").expect("a regex");
    let mut missing = Vec::new();
    for name in ["fake-instance", "fake-device"] {
        let out = Command::new(binary(name))
            .arg("--help")
            .output()
            .expect("the command runs");
        let help = String::from_utf8_lossy(&out.stdout).to_string();
        for found in flag.captures_iter(&help) {
            let option = &found[1];
            if !matches!(option, "--help" | "--version") && !page.contains(&format!("`{option}")) {
                missing.push(format!("{name} {option}"));
            }
        }
    }
    assert!(missing.is_empty(), "options.md lacks: {missing:?}");
}

#[test]
fn the_catalogue_page_is_current() {
    let kept = read(&root().join(harness_cli::scenarios::PAGE));
    assert!(
        kept == harness_cli::scenarios::markdown(),
        "{} is stale: run `cargo run -q -p harness-cli -- scenarios --write {}`",
        harness_cli::scenarios::PAGE,
        harness_cli::scenarios::PAGE
    );
}

#[test]
fn the_guide_shows_the_readme_s_install_block_as_it_is() {
    let readme = read(&root().join("README.md"));
    let install = readme_block(&readme, "run by packages/test-packages.sh (build");
    assert!(
        read(&book().join("install.md")).contains(&install),
        "install.md's copy of the README's install block differs from it:\n{install}"
    );
}

#[test]
fn every_pinned_version_in_the_docs_is_this_one() {
    // A pin shown to users (a package version, a release tag, a release file) names the version
    // being released, so a version bump cannot leave the docs installing the last one.
    let pin = regex::Regex::new(
        r#"(?:lembas[-_]doubles(?:==|@|-)|tag = "v|--tag v|download/v)(\d+\.\d+\.\d+)"#,
    )
    .expect("a regex");
    // The performance page's log names the files it measured, of their day's version.
    let mut shown: Vec<(PathBuf, bool)> = pages()
        .into_iter()
        .filter(|(p, _)| !p.ends_with("performance.md"))
        .collect();
    shown.push((root().join("packages/python/README.md"), false));
    shown.push((root().join("packages/npm/lembas-doubles/README.md"), false));
    let mut pins = 0;
    for (page, _) in shown {
        let text = read(&page);
        for found in pin.captures_iter(&text) {
            assert_eq!(
                &found[1],
                env!("CARGO_PKG_VERSION"),
                "{}: `{}` pins another version than the workspace's",
                page.display(),
                &found[0]
            );
            pins += 1;
        }
    }
    assert!(pins >= 5, "only {pins} pins found");
}

#[test]
fn the_readme_is_a_front_page() {
    let readme = read(&root().join("README.md"));
    let lines = readme.lines().count();
    assert!(lines <= 150, "README.md has {lines} lines: at most 150");
}

#[test]
fn no_page_names_the_protocol_by_a_path_outside_the_repository() {
    // A reader of a clone finds nothing there: the protocol is named by its title and versions.
    for (page, _) in pages() {
        assert!(
            !read(&page).contains("shared/spec"),
            "{} points outside the repository",
            page.display()
        );
    }
}

/// The non-blank lines of a code example, without comments and trailing comments, trimmed.
fn code_lines(text: &str) -> Vec<String> {
    text.lines()
        .map(|l| {
            let l = l.split("  #").next().unwrap_or(l);
            l.split("  //").next().unwrap_or(l).trim().to_string()
        })
        .filter(|l| !l.is_empty() && !l.starts_with('#') && !l.starts_with("//"))
        .collect()
}

#[test]
fn every_readme_block_says_how_it_is_checked_and_is() {
    let readme = read(&root().join("README.md"));
    for block in blocks(&readme) {
        let at = format!("README.md:{}", block.line);
        let checked = block
            .checked
            .unwrap_or_else(|| panic!("{at}: no `<!-- checked: ... -->` above the block"));
        if let Some(file) = checked.strip_prefix("the lines appear, in order, in ") {
            let shown = code_lines(&block.text);
            let kept = code_lines(&read(&root().join(file)));
            let mut at_line = 0;
            for line in &shown {
                match kept[at_line..].iter().position(|k| k == line) {
                    Some(found) => at_line += found + 1,
                    None => panic!("{at}: `{line}` is not in {file} (in order)"),
                }
            }
        } else if checked.starts_with("run by .ci/run") {
            let ci = read(&root().join(".ci/run"));
            for command in code_lines(&block.text) {
                assert!(
                    ci.lines().any(|l| l.trim().starts_with(&command)),
                    "{at}: .ci/run does not run `{command}`"
                );
            }
        } else if let Some(rest) = checked.strip_prefix("run by ") {
            // The checker it names reads the README and runs the block.
            let file = rest
                .split_whitespace()
                .next()
                .expect("a file")
                .trim_end_matches(',');
            let checker = read(&root().join(file));
            assert!(
                checker.contains("README.md"),
                "{at}: {file} does not read README.md"
            );
        } else if checked.starts_with("resolved by cli/tests/docs.rs") {
            assert!(block.lang == "toml", "{at}: only Cargo lines are resolved");
        } else {
            panic!("{at}: `{checked}` is no way of checking this test knows");
        }
    }
}
