//! Fuzzing the scenario loader, [`load_str_for`]: arbitrary text, YAML assembled from the
//! scenario format's own words, and the shipped scenarios with one line deleted, duplicated,
//! moved, re-indented or given a garbage value.
//!
//! Nothing may panic or hang, and every error names the file and a line of it: a scenario
//! author is told where to look, whatever they wrote.
//!
//! The case count comes from `PROPTEST_CASES` (a short run by default, for CI); a long run:
//!
//! ```sh
//! PROPTEST_CASES=100000 cargo test --release -p harness --test fuzz_loader
//! ```

mod fuzz_support;

use fuzz_support::{config, within};
use harness::scenario::catalogue::{Embedded, embedded};
use harness::scenario::{Reader, Side, load_str_for};
use proptest::prelude::*;
use serde_json::{Map, Value, json};

const FILE: &str = "fuzz.yaml";

/// Loads `text` as `file` and checks what an error says; `Ok` whether it loaded or not.
fn check(text: &str, file: &str, side: Option<Side>, reader: Reader) -> Result<(), String> {
    let Err(e) = load_str_for(text, file, side, reader) else {
        return Ok(());
    };
    let shown = e.to_string();
    let Some(line) = e.line else {
        return Err(format!(
            "an error without a line: {shown}\n--- the text:\n{text}"
        ));
    };
    // A parser may point just past the last line (an unclosed bracket at the end).
    let lines = u32::try_from(text.lines().count()).unwrap_or(u32::MAX);
    if e.file != file || line == 0 || line > lines.saturating_add(1) {
        return Err(format!(
            "error at {}:{line}, in a file of {lines} lines: {shown}",
            e.file
        ));
    }
    if !shown.starts_with(&format!("{file}:{line}")) {
        return Err(format!(
            "the message does not start with file and line: {shown}"
        ));
    }
    Ok(())
}

fn arb_side() -> impl Strategy<Value = Option<Side>> {
    prop::sample::select(vec![None, Some(Side::Instance), Some(Side::Device)])
}

fn arb_reader() -> impl Strategy<Value = Reader> {
    prop::sample::select(vec![Reader::Peer, Reader::Selftest])
}

/// Lines a scenario is made of, right and wrong, for assembling new ones.
fn arb_line() -> impl Strategy<Value = String> {
    let line = prop::sample::select(vec![
        "name: t",
        "about: a test",
        "rules: [jsonrpc.json]",
        "rules: [no.such.rule]",
        "matrix: { protocol: [1, 2], spec: [1.0.0] }",
        "matrix: { protocol: [3] }",
        "matrix:",
        "  protocol: [7]",
        "  spec: [\"9.9.9\"]",
        "needs: [questions]",
        "needs: [bogus]",
        "timeout: 5s",
        "timeout: ${t}",
        "timeout: forever",
        "vars: { t: 2s, x: 1 }",
        "selftest: { vars: { y: 1 } }",
        "selftest:",
        "  vars: { t: 1s }",
        "instance: {}",
        "device: {}",
        "handlers:",
        "  - method: m",
        "    result: {}",
        "    hold: true",
        "    params: { a: $strnig, b: \"${nope}\" }",
        "steps:",
        "steps: []",
        "  - expect: { method: a }",
        "  - expect: {}",
        "  - expect: { method: a, params: { $regex: \"(\" } }",
        "  - expect: { message: 3, method: a }",
        "  - start: { as: r, method: m, timeout: 1s }",
        "  - await: { request: r, timeout: 9s }",
        "  - await: { request: nobody }",
        "  - request: { method: m, result: {}, error: {} }",
        "  - reply: { result: 1 }",
        "  - send: { text: hi }",
        "  - send: {}",
        "  - dial: {}",
        "  - expect_reconnect: {}",
        "  - any_order: [ { wait: 1s } ]",
        "  - when: { protocol: 2, steps: [ { wait: 1s } ] }",
        "  - when: { steps: [] }",
        "  - when: { needs: [bogus], steps: [] }",
        "  - wait: 1s",
        "  - check: { that: x, matches: { $len: -1 } }",
        "peer:",
        "  steps: [ { expect: { method: a } } ]",
        "    - ",
        "  ",
        "&a [1]",
        "x: *a",
        "{",
        "- [",
        "? complex",
        "%YAML 1.2",
        "---",
        "...",
        "\t- tab",
    ])
    .prop_map(str::to_owned);
    prop_oneof![8 => line, 1 => any::<String>()]
}

/// A `name`/`about` header and then lines in any order: far enough into the format that the
/// parser is passed now and then, and its errors are many.
fn arb_assembled() -> impl Strategy<Value = String> {
    prop::collection::vec(arb_line(), 0..12)
        .prop_map(|lines| format!("name: t\nabout: a test\n{}\n", lines.join("\n")))
}

/// A value from `choices` for `key`, present with probability `p`.
fn section(
    key: &'static str,
    p: f64,
    choices: Vec<Value>,
) -> BoxedStrategy<Option<(String, Value)>> {
    prop::option::weighted(p, prop::sample::select(choices))
        .prop_map(move |v| v.map(|v| (key.to_owned(), v)))
        .boxed()
}

/// Steps right and wrong, for the checks that run after the parse.
fn steps() -> Vec<Value> {
    vec![
        json!({"expect": {"method": "a"}}),
        json!({"expect": {}}),
        json!({"expect": {"method": "a", "params": {"$regex": "("}}}),
        json!({"expect": {"message": 3, "method": "a"}}),
        json!({"expect": {"method": "a", "rule": "no.such.rule"}}),
        json!({"start": {"as": "r", "method": "m", "timeout": "1s"}}),
        json!({"await": {"request": "r", "timeout": "9s"}}),
        json!({"await": {"request": "nobody"}}),
        json!({"request": {"method": "m", "result": {}, "error": {}}}),
        json!({"reply": {"result": 1}}),
        json!({"send": {}}),
        json!({"dial": {}}),
        json!({"expect_reconnect": {}}),
        json!({"any_order": [{"wait": "1s"}]}),
        json!({"when": {"steps": []}}),
        json!({"when": {"needs": ["bogus"], "steps": []}}),
        json!({"check": {"that": "x", "matches": {"$len": -1}}}),
        json!({"wait": "1s"}),
        json!({"bogus": 1}),
    ]
}

/// Scenarios made of the format's sections, each right or wrong, in any order, written as
/// block YAML, as JSON, or on one line in flow style: the checks after the parse see them all,
/// however the keys are written.
fn arb_structured() -> impl Strategy<Value = String> {
    let sections = vec![
        section("name", 0.95, vec![json!("t")]),
        section("about", 0.95, vec![json!("a test")]),
        prop::option::weighted(
            0.95,
            prop::collection::vec(prop::sample::select(steps()), 0..4),
        )
        .prop_map(|s| s.map(|s| ("steps".to_owned(), Value::Array(s))))
        .boxed(),
        section(
            "rules",
            0.3,
            vec![json!(["jsonrpc.json"]), json!(["no.such.rule"])],
        ),
        section(
            "matrix",
            0.3,
            vec![
                json!({"protocol": [1, 2]}),
                json!({"protocol": [3]}),
                json!({"spec": ["9.9.9"]}),
            ],
        ),
        section("needs", 0.2, vec![json!(["ask"]), json!(["bogus"])]),
        section(
            "timeout",
            0.2,
            vec![json!("5s"), json!("${t}"), json!("forever")],
        ),
        section("vars", 0.3, vec![json!({"t": "2s", "x": 1})]),
        section(
            "selftest",
            0.2,
            vec![json!({"vars": {"y": 1}}), json!({"vars": {"t": "1s"}})],
        ),
        section("instance", 0.1, vec![json!({})]),
        section("device", 0.1, vec![json!({})]),
        section(
            "handlers",
            0.2,
            vec![
                json!([{"method": "m", "result": {}}]),
                json!([{"method": "m"}]),
                json!([{"method": "m", "result": {}, "params": {"a": "$strnig"}}]),
                json!([{"method": "m", "hold": true, "params": {"b": "${nope}"}}]),
            ],
        ),
        section(
            "peer",
            0.1,
            vec![json!({"steps": [{"expect": {"method": "a"}}]})],
        ),
    ];
    (sections, 0..3u8)
        .prop_flat_map(|(sections, style)| {
            let present: Vec<(String, Value)> = sections.into_iter().flatten().collect();
            (Just(present).prop_shuffle(), Just(style))
        })
        .prop_map(|(present, style)| {
            let scenario = Value::Object(present.into_iter().collect::<Map<_, _>>());
            match style {
                0 => serde_saphyr::to_string(&scenario).unwrap_or_default(),
                1 => serde_json::to_string_pretty(&scenario).unwrap_or_default(),
                _ => scenario.to_string(),
            }
        })
}

/// The shipped scenarios, both sides.
fn shipped() -> Vec<Embedded> {
    let mut all = embedded(Side::Instance);
    all.extend(embedded(Side::Device));
    all
}

/// One mutation of a scenario's lines, at places given as fractions of its length.
#[derive(Debug, Clone)]
enum Mutation {
    Delete(prop::sample::Index),
    Duplicate(prop::sample::Index),
    Swap(prop::sample::Index, prop::sample::Index),
    Indent(prop::sample::Index, bool),
    Value(prop::sample::Index, String),
    Insert(prop::sample::Index, String),
    Truncate(prop::sample::Index),
}

/// What a value may be replaced with: the wrong type, broken YAML, `$` and `${` text.
fn arb_garbage() -> impl Strategy<Value = String> {
    prop_oneof![
        prop::sample::select(vec![
            "",
            "~",
            "[]",
            "{}",
            "[",
            "{",
            "\"",
            "'",
            "-1",
            "1e999",
            "0x10",
            "NO",
            "true",
            "$bogus",
            "${nope}",
            "$$",
            "&x",
            "*x",
            "!!binary AA",
            "|",
            ">",
            ": :",
            "#",
            "{ $regex: \"(\" }",
            "{ a: 1, $len: 2 }",
            "99999999999999999999",
        ])
        .prop_map(str::to_owned),
        any::<String>(),
    ]
}

fn arb_mutation() -> impl Strategy<Value = Mutation> {
    use prop::sample::Index;
    prop_oneof![
        any::<Index>().prop_map(Mutation::Delete),
        any::<Index>().prop_map(Mutation::Duplicate),
        (any::<Index>(), any::<Index>()).prop_map(|(a, b)| Mutation::Swap(a, b)),
        (any::<Index>(), any::<bool>()).prop_map(|(a, more)| Mutation::Indent(a, more)),
        (any::<Index>(), arb_garbage()).prop_map(|(a, g)| Mutation::Value(a, g)),
        (any::<Index>(), arb_line()).prop_map(|(a, l)| Mutation::Insert(a, l)),
        any::<Index>().prop_map(Mutation::Truncate),
    ]
}

fn mutate(text: &str, mutations: &[Mutation]) -> String {
    let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
    for mutation in mutations {
        if lines.is_empty() {
            break;
        }
        let n = lines.len();
        match mutation {
            Mutation::Delete(at) => {
                lines.remove(at.index(n));
            }
            Mutation::Duplicate(at) => {
                let line = lines[at.index(n)].clone();
                lines.insert(at.index(n), line);
            }
            Mutation::Swap(a, b) => lines.swap(a.index(n), b.index(n)),
            Mutation::Indent(at, more) => {
                let line = &mut lines[at.index(n)];
                if *more {
                    line.insert_str(0, "  ");
                } else if let Some(rest) = line.strip_prefix("  ") {
                    *line = rest.to_owned();
                }
            }
            Mutation::Value(at, garbage) => {
                let line = &mut lines[at.index(n)];
                // The value after the line's first `key: `, or the whole line without one.
                let keep = line.find(": ").map_or(0, |i| i + 2);
                line.truncate(keep);
                line.push_str(garbage);
            }
            Mutation::Insert(at, new) => lines.insert(at.index(n + 1), new.clone()),
            Mutation::Truncate(at) => lines.truncate(at.index(n)),
        }
    }
    let mut out = lines.join("\n");
    out.push('\n');
    out
}

proptest! {
    #![proptest_config(config(256))]

    #[test]
    fn any_text_loads_or_gets_an_error_with_file_and_line(
        text in prop_oneof![any::<String>(), "[a-z:{}\\[\\]\\-\"' \n$&*!#|>]{0,60}"],
        side in arb_side(),
        reader in arb_reader(),
    ) {
        within("load", move || check(&text, FILE, side, reader))?.map_err(TestCaseError::fail)?;
    }

    #[test]
    fn assembled_scenarios_load_or_get_an_error_with_file_and_line(
        text in prop_oneof![arb_assembled(), arb_structured()],
        side in arb_side(),
        reader in arb_reader(),
    ) {
        within("load", move || check(&text, FILE, side, reader))?.map_err(TestCaseError::fail)?;
    }

    #[test]
    fn a_shipped_scenario_mutated_loads_or_gets_an_error_with_file_and_line(
        which in any::<prop::sample::Index>(),
        mutations in prop::collection::vec(arb_mutation(), 1..3),
        reader in arb_reader(),
    ) {
        within("load", move || {
            let all = shipped();
            let scenario = all[which.index(all.len())];
            let text = mutate(scenario.text, &mutations);
            check(&text, &scenario.label(), Some(scenario.side), reader)
        })?
        .map_err(TestCaseError::fail)?;
    }
}

#[test]
fn every_shipped_scenario_loads_unmutated() {
    // The mutations above start from scenarios that load: otherwise an error would be the
    // original's, not the mutation's.
    for scenario in shipped() {
        for reader in [Reader::Peer, Reader::Selftest] {
            if let Err(e) = load_str_for(
                scenario.text,
                &scenario.label(),
                Some(scenario.side),
                reader,
            ) {
                panic!("{e}");
            }
        }
    }
}

#[test]
fn yaml_nested_past_the_parser_budget_is_an_error_with_a_line() {
    for depth in [65, 1_000, 100_000] {
        for inner in [
            format!("{}{}", "[".repeat(depth), "]".repeat(depth)),
            format!("{}1{}", "{a: ".repeat(depth), "}".repeat(depth)),
            "[".repeat(depth),
        ] {
            let text = format!(
                "name: t\nabout: a test\nsteps:\n  - expect: {{ method: m, params: {inner} }}\n"
            );
            within("load", move || check(&text, FILE, None, Reader::Peer))
                .unwrap_or_else(|e| panic!("{depth} deep: {e}"))
                .unwrap_or_else(|e| panic!("{depth} deep: {e}"));
        }
    }
}
