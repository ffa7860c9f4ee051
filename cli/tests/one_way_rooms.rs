//! The code is laid out in one-way rooms: no module of any crate imports another that imports
//! it back, directly or round a longer loop. A module's imports are every path it names from
//! `crate::`, `super::` or `self::`, and every child it `use`s; a `mod.rs` that re-exports its
//! children imports them, so a child that reaches back up to its façade closes a loop. Test
//! modules are left out: they may look anywhere.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Every module of a crate's `src`, by path (`""` for the root, `"http::chat"`), with its file.
fn modules(src: &Path) -> BTreeMap<String, PathBuf> {
    let mut found = BTreeMap::new();
    let mut dirs = vec![src.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).expect("a source directory") {
            let path = entry.expect("an entry").path();
            if path.is_dir() {
                dirs.push(path);
                continue;
            }
            if path.extension().is_none_or(|e| e != "rs") {
                continue;
            }
            let relative = path
                .strip_prefix(src)
                .expect("inside src")
                .with_extension("");
            let mut parts: Vec<String> = relative
                .components()
                .map(|c| c.as_os_str().to_string_lossy().to_string())
                .collect();
            if parts.last().is_some_and(|p| p == "mod") {
                parts.pop();
            }
            // A binary's `main.rs` is a crate of its own, built on the library.
            if parts == ["main"] {
                continue;
            }
            if parts == ["lib"] {
                parts.clear();
            }
            found.insert(parts.join("::"), path);
        }
    }
    found
}

/// The modules declared under `#[cfg(test)]`: their files are tests.
fn test_modules(modules: &BTreeMap<String, PathBuf>) -> BTreeSet<String> {
    let mut tests = BTreeSet::new();
    for (name, file) in modules {
        let text = std::fs::read_to_string(file).expect("readable");
        let lines: Vec<&str> = text.lines().map(str::trim).collect();
        for (i, line) in lines.iter().enumerate() {
            let Some(child) = line
                .strip_prefix("mod ")
                .and_then(|rest| rest.strip_suffix(';'))
            else {
                continue;
            };
            if lines[i.saturating_sub(3)..i].contains(&"#[cfg(test)]") {
                tests.insert(join(name, child));
            }
        }
    }
    tests
}

fn join(parent: &str, child: &str) -> String {
    if parent.is_empty() {
        child.to_string()
    } else {
        format!("{parent}::{child}")
    }
}

/// The code of a file without its comments and its inline test modules: every
/// `#[cfg(test)]` `mod NAME {` block, wherever it stands, up to its closing brace at the margin
/// (a file may hold code after a test module, and that code must still be read).
fn code(text: &str) -> String {
    let mut kept = Vec::new();
    let mut lines = text.lines().peekable();
    while let Some(line) = lines.next() {
        let opens_test_module = line.starts_with("#[cfg(")
            && line.contains("test")
            && lines
                .peek()
                .is_some_and(|next| next.starts_with("mod ") && next.trim_end().ends_with('{'));
        if opens_test_module {
            lines.by_ref().find(|l| *l == "}");
            continue;
        }
        if !line.trim_start().starts_with("//") {
            kept.push(line);
        }
    }
    kept.join("\n")
}

fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// The paths written after `at` in `text`: `a::b::C`, and each one of `{a, b::{c, d}}`.
fn paths_at(text: &str, at: usize) -> Vec<Vec<String>> {
    let chars: Vec<char> = text[at..].chars().collect();
    let mut found = Vec::new();
    expand(&chars, &mut 0, Vec::new(), &mut found);
    found
}

fn expand(chars: &[char], i: &mut usize, prefix: Vec<String>, found: &mut Vec<Vec<String>>) {
    let mut path = prefix;
    loop {
        while *i < chars.len() && chars[*i].is_whitespace() {
            *i += 1;
        }
        if *i < chars.len() && chars[*i] == '{' {
            *i += 1;
            loop {
                expand(chars, i, path.clone(), found);
                while *i < chars.len() && chars[*i].is_whitespace() {
                    *i += 1;
                }
                match chars.get(*i) {
                    Some(',') => *i += 1,
                    Some('}') => {
                        *i += 1;
                        break;
                    }
                    _ => return,
                }
                while *i < chars.len() && chars[*i].is_whitespace() {
                    *i += 1;
                }
                if chars.get(*i) == Some(&'}') {
                    *i += 1;
                    break;
                }
            }
            return;
        }
        let start = *i;
        while *i < chars.len() && is_ident(chars[*i]) {
            *i += 1;
        }
        if *i == start {
            found.push(path);
            return;
        }
        path.push(chars[start..*i].iter().collect());
        if chars.get(*i) == Some(&':') && chars.get(*i + 1) == Some(&':') {
            *i += 2;
        } else {
            found.push(path);
            return;
        }
    }
}

/// The modules `module` imports.
fn imports(module: &str, text: &str, all: &BTreeMap<String, PathBuf>) -> BTreeSet<String> {
    let own: Vec<String> = if module.is_empty() {
        Vec::new()
    } else {
        module.split("::").map(str::to_string).collect()
    };
    let parent: Vec<String> = own[..own.len().saturating_sub(1)].to_vec();
    let mut named: Vec<Vec<String>> = Vec::new();
    for (anchor, base) in [
        ("crate::", Vec::new()),
        ("super::", parent),
        ("self::", own.clone()),
    ] {
        for (at, _) in text.match_indices(anchor) {
            let before = text[..at].chars().next_back();
            if before.is_some_and(is_ident) {
                continue;
            }
            for path in paths_at(text, at + anchor.len()) {
                named.push(base.iter().cloned().chain(path).collect());
            }
        }
    }
    // A child named without an anchor: `use child::…`, `child::f()` in code.
    let prefix = if module.is_empty() {
        String::new()
    } else {
        format!("{module}::")
    };
    for child in all.keys().filter_map(|m| {
        m.strip_prefix(&prefix)
            .filter(|rest| !rest.is_empty() && !rest.contains("::"))
    }) {
        let written = format!("{child}::");
        for (at, _) in text.match_indices(&written) {
            let before = text[..at].chars().next_back();
            if before.is_some_and(|c| is_ident(c) || c == ':') {
                continue;
            }
            for path in paths_at(text, at) {
                named.push(own.iter().cloned().chain(path).collect());
            }
        }
    }
    // `use child::…` and `pub use child::…` (also `use child;`-less forms above).
    for line in text.lines() {
        let line = line.trim_start();
        let rest = ["use ", "pub use ", "pub(crate) use "]
            .iter()
            .find_map(|p| line.strip_prefix(p));
        if let Some(rest) = rest {
            for path in paths_at(rest, 0) {
                named.push(own.iter().cloned().chain(path).collect());
            }
        }
    }
    let mut targets = BTreeSet::new();
    for path in named {
        // The longest leading part of the path that is a module.
        // The root (`""`) too: a module that reaches `crate::X` for an item the root itself
        // holds imports the root.
        let target = (0..=path.len())
            .rev()
            .map(|n| path[..n].join("::"))
            .find(|candidate| all.contains_key(candidate));
        if let Some(target) = target
            && target != module
        {
            targets.insert(target);
        }
    }
    targets
}

/// The loops of a crate: each set of modules that import each other round, with its edges.
fn loops(src: &Path) -> Vec<String> {
    loop_groups(src)
        .into_iter()
        .map(|(group, edges)| format!("{}: {group:?}\n{edges}", src.display()))
        .collect()
}

/// Each loop of a crate: its modules, and its edges as text.
fn loop_groups(src: &Path) -> Vec<(BTreeSet<String>, String)> {
    let all = modules(src);
    let tests = test_modules(&all);
    let graph: BTreeMap<String, BTreeSet<String>> = all
        .iter()
        .filter(|(name, _)| {
            !tests
                .iter()
                .any(|t| *name == t || name.starts_with(&format!("{t}::")))
        })
        .map(|(name, file)| {
            let text = code(&std::fs::read_to_string(file).expect("readable"));
            let targets = imports(name, &text, &all)
                .into_iter()
                .filter(|t| !tests.contains(t))
                .collect();
            (name.clone(), targets)
        })
        .collect();
    strongly_connected(&graph)
        .into_iter()
        .filter(|group| group.len() > 1)
        .map(|group| {
            let edges: Vec<String> = group
                .iter()
                .map(|m| {
                    let inside: Vec<&String> =
                        graph[m].iter().filter(|t| group.contains(*t)).collect();
                    format!(
                        "    {} -> {inside:?}",
                        if m.is_empty() { "(root)" } else { m }
                    )
                })
                .collect();
            let text = edges.join("\n");
            (group, text)
        })
        .collect()
}

/// Tarjan's strongly connected components.
fn strongly_connected(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<BTreeSet<String>> {
    struct State<'a> {
        graph: &'a BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on_stack: BTreeSet<&'a str>,
        found: Vec<BTreeSet<String>>,
    }
    fn visit<'a>(v: &'a str, s: &mut State<'a>) {
        let n = s.index.len();
        s.index.insert(v, n);
        s.low.insert(v, n);
        s.stack.push(v);
        s.on_stack.insert(v);
        for w in s.graph.get(v).into_iter().flatten() {
            if !s.graph.contains_key(w) {
                continue;
            }
            if !s.index.contains_key(w.as_str()) {
                visit(w, s);
                let low = s.low[v].min(s.low[w.as_str()]);
                s.low.insert(v, low);
            } else if s.on_stack.contains(w.as_str()) {
                let low = s.low[v].min(s.index[w.as_str()]);
                s.low.insert(v, low);
            }
        }
        if s.low[v] == s.index[v] {
            let mut group = BTreeSet::new();
            while let Some(w) = s.stack.pop() {
                s.on_stack.remove(w);
                group.insert(w.to_string());
                if w == v {
                    break;
                }
            }
            s.found.push(group);
        }
    }
    let mut state = State {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        found: Vec::new(),
    };
    for v in graph.keys() {
        if !state.index.contains_key(v.as_str()) {
            visit(v, &mut state);
        }
    }
    state.found
}

const CRATES: [&str; 4] = ["harness", "cli", "fake-instance", "fake-device"];

/// Loops that are known and being taken apart, each as its crate and modules: none is left. The
/// test fails on any other loop, and on a listed one that changed or went: a loop may only
/// shrink, and the list with it.
const KNOWN_LOOPS: &[(&str, &[&str])] = &[];

#[test]
fn no_module_imports_one_that_imports_it_back() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut unknown = Vec::new();
    let mut seen: Vec<(&str, BTreeSet<String>)> = Vec::new();
    for krate in CRATES {
        let src = root.join(krate).join("src");
        for (group, edges) in loop_groups(&src) {
            let known = KNOWN_LOOPS.iter().any(|(k, modules)| {
                *k == krate && group == modules.iter().map(|m| m.to_string()).collect()
            });
            if !known {
                unknown.push(format!("{krate}: {group:?}\n{edges}"));
            }
            seen.push((krate, group));
        }
    }
    assert!(
        unknown.is_empty(),
        "modules that import each other round:\n{}",
        unknown.join("\n")
    );
    for (krate, modules) in KNOWN_LOOPS {
        let group: BTreeSet<String> = modules.iter().map(|m| m.to_string()).collect();
        assert!(
            seen.iter().any(|(k, g)| k == krate && *g == group),
            "the known loop {krate}: {modules:?} is gone or smaller: take it off KNOWN_LOOPS"
        );
    }
}

/// The check sees a loop: two sibling files that import each other, a child that reaches
/// back up to the façade that re-exports it, and grouped imports.
#[test]
fn a_loop_is_seen() {
    let dir = tempfile::tempdir().expect("a directory");
    let src = dir.path();
    std::fs::create_dir_all(src.join("room")).expect("made");
    std::fs::write(
        src.join("lib.rs"),
        "mod a;\nmod b;\nmod c;\nmod room;\npub use c::C;\npub const R: u8 = 1;\n",
    )
    .expect("written");
    std::fs::write(src.join("a.rs"), "use crate::{c::C, b::B};\n").expect("written");
    std::fs::write(src.join("b.rs"), "pub struct B(crate::a::A);\n").expect("written");
    std::fs::write(
        src.join("c.rs"),
        "pub struct C;\npub const D: u8 = crate::R;\n",
    )
    .expect("written");
    std::fs::write(src.join("main.rs"), "fn main() { let _ = crate::R; }\n").expect("written");
    std::fs::write(
        src.join("room/mod.rs"),
        "mod inner;\npub fn x() -> u8 { inner::X }\npub const Y: u8 = 1;\n",
    )
    .expect("written");
    std::fs::write(src.join("room/inner.rs"), "pub const X: u8 = super::Y;\n").expect("written");
    let found = loops(src);
    let said = found.join("\n");
    assert_eq!(found.len(), 3, "{said}");
    assert!(said.contains(r#"{"a", "b"}"#), "{said}");
    assert!(said.contains(r#"{"room", "room::inner"}"#), "{said}");
    assert!(
        said.contains(r#"{"", "c"}"#),
        "a module reaching the root that re-exports it: {said}"
    );
    // Broken one way, each loop is gone.
    std::fs::write(src.join("b.rs"), "pub struct B;\n").expect("written");
    std::fs::write(src.join("room/inner.rs"), "pub const X: u8 = 1;\n").expect("written");
    std::fs::write(src.join("c.rs"), "pub struct C;\n").expect("written");
    assert!(loops(src).is_empty(), "{:#?}", loops(src));
}

#[test]
fn code_after_a_test_module_is_read_and_the_test_module_is_not() {
    let dir = tempfile::tempdir().expect("a directory");
    let src = dir.path();
    std::fs::write(src.join("lib.rs"), "mod a;\nmod b;\npub const R: u8 = 1;\n").expect("written");
    // `a` names `b` only inside its test module: no loop from there.
    std::fs::write(
        src.join("a.rs"),
        "pub struct A;\n#[cfg(test)]\nmod tests {\n    use crate::b::B;\n}\n",
    )
    .expect("written");
    std::fs::write(src.join("b.rs"), "pub struct B(crate::a::A);\n").expect("written");
    assert!(loops(src).is_empty(), "{:#?}", loops(src));
    // The same name after the test module is code, and closes the loop.
    std::fs::write(
        src.join("a.rs"),
        "pub struct A;\n#[cfg(test)]\nmod tests {\n}\npub fn b(_: crate::b::B) {}\n",
    )
    .expect("written");
    let found = loops(src).join("\n");
    assert!(found.contains(r#"{"a", "b"}"#), "{found}");
}
