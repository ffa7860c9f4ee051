//! Loading scenarios: every error names the file, line, column and key path at fault, and says
//! what is wrong in words a scenario author understands.

use harness::scenario::catalogue::embedded;
use harness::scenario::{
    LoadError, Reader, Scenario, Side, Step, load_file, load_str, load_str_for,
};
use serde_json::json;

const FILE: &str = "t.yaml";

/// The header every test scenario starts with (lines 1 and 2).
const HEAD: &str = "name: t\nabout: a test\n";

fn scenario(body: &str) -> String {
    format!("{HEAD}{body}")
}

fn load_err(body: &str, side: Option<Side>) -> LoadError {
    let text = scenario(body);
    match load_str(&text, FILE, side) {
        Ok(_) => panic!("this scenario should not load:\n{text}"),
        Err(e) => e,
    }
}

fn load_ok(body: &str, side: Option<Side>) -> Scenario {
    let text = scenario(body);
    load_str(&text, FILE, side).unwrap_or_else(|e| panic!("should load, but: {e}"))
}

/// Asserts where an error points and that its message says `fragment`.
#[track_caller]
fn assert_at(
    e: &LoadError,
    line: Option<u32>,
    column: Option<u32>,
    key_path: &str,
    fragment: &str,
) {
    assert_eq!(e.file, FILE, "{e}");
    assert_eq!(e.line, line, "line of: {e}");
    assert_eq!(e.column, column, "column of: {e}");
    assert_eq!(e.key_path.as_deref(), Some(key_path), "key path of: {e}");
    assert!(
        e.message.contains(fragment),
        "message {:?} should say {fragment:?}",
        e.message
    );
}

// ---------------------------------------------------------------------------------------------
// Parse errors (serde-saphyr + serde_path_to_error)

#[test]
fn unknown_top_level_key_names_it_and_lists_the_expected_ones() {
    let e = load_err("stepz: []\nsteps: []\n", None);
    assert_at(&e, Some(3), Some(1), "stepz", "unknown field `stepz`");
    for key in [
        "name", "about", "rules", "matrix", "timeout", "handlers", "steps",
    ] {
        assert!(e.message.contains(key), "{:?} should list {key}", e.message);
    }
    // The parser's snippet shows the offending line.
    let snippet = e.snippet.as_deref().unwrap_or_default();
    assert!(snippet.contains("3 | stepz: []"), "{snippet}");
}

#[test]
fn unknown_key_inside_a_step_names_the_step_index_and_the_key() {
    let e = load_err(
        "steps:\n  - expect: { method: a }\n  - expect: { method: x, bogus: 1 }\n",
        None,
    );
    assert_at(
        &e,
        Some(5),
        Some(26),
        "steps[1].expect.bogus",
        "unknown field `bogus`",
    );
    assert!(
        e.message.contains("method, params, message"),
        "{}",
        e.message
    );
}

#[test]
fn unknown_key_inside_a_step_has_the_documented_key_path() {
    let e = load_err("steps:\n  - expect: { method: x, bogus: 1 }\n", None);
    assert_eq!(e.key_path.as_deref(), Some("steps[0].expect.bogus"));
}

#[test]
fn unknown_key_in_a_block_mapping_points_at_the_key() {
    let e = load_err(
        "steps:\n  - expect:\n      method: x\n      bogus: 1\n",
        None,
    );
    assert_at(
        &e,
        Some(6),
        Some(7),
        "steps[0].expect.bogus",
        "unknown field `bogus`",
    );
}

#[test]
fn unknown_step_kind_points_at_its_line_and_lists_the_kinds() {
    let e = load_err("steps:\n  - wait: 1s\n  - expekt: {}\n", None);
    assert_at(&e, Some(5), Some(5), "steps[1]", "unknown variant `expekt`");
    for kind in ["expect", "expect_none", "any_order", "reply", "when"] {
        assert!(
            e.message.contains(kind),
            "{:?} should list {kind}",
            e.message
        );
    }
}

#[test]
fn a_duration_that_is_not_text_with_a_unit_says_what_a_duration_looks_like() {
    let e = load_err("timeout: abc\nsteps: []\n", None);
    assert_at(
        &e,
        Some(3),
        Some(10),
        "timeout",
        "`abc` is not a duration like 500ms or 5s",
    );

    let e = load_err("timeout: 5\nsteps: []\n", None);
    assert_at(
        &e,
        Some(3),
        Some(10),
        "timeout",
        "`5` is not a duration like 500ms or 5s",
    );
    assert!(e.message.contains("time unit needed"), "{}", e.message);
}

#[test]
fn a_bad_step_timeout_names_the_step() {
    let e = load_err("steps:\n  - expect: { method: a, timeout: 5 }\n", None);
    assert_at(
        &e,
        Some(4),
        Some(35),
        "steps[0].expect.timeout",
        "is not a duration like 500ms or 5s",
    );
}

#[test]
fn display_starts_with_file_line_column_and_key_path() {
    let e = load_err("stepz: []\nsteps: []\n", None);
    let shown = e.to_string();
    assert!(
        shown.starts_with("t.yaml:3:1: at `stepz`: unknown field `stepz`"),
        "{shown}"
    );
    // A checker error (no snippet) renders on one line, the same way.
    let e = load_err("steps:\n  - when: { steps: [] }\n", None);
    assert_eq!(
        e.to_string(),
        "t.yaml:4:5: at `steps[0].when`: needs `protocol`, `spec`, `needs` or `that` with `matches`: otherwise its steps always run"
    );
}

#[test]
fn a_top_level_error_names_the_line_of_its_section() {
    let e = load_err("matrix: { protocol: [3] }\nsteps: []\n", None);
    assert_eq!(
        e.to_string(),
        "t.yaml:3:1: at `matrix.protocol`: 3 is not a link protocol (1 or 2)"
    );
}

#[test]
fn a_top_level_error_names_its_line_however_the_key_is_written() {
    // A scenario written as JSON: the key is quoted and indented.
    let text = "{\n  \"name\": \"t\",\n  \"about\": \"a\",\n  \"steps\": [],\n  \"matrix\": {\"protocol\": [3]}\n}\n";
    let e = load_str(text, FILE, None).expect_err("protocol 3");
    assert_at(
        &e,
        Some(5),
        Some(3),
        "matrix.protocol",
        "not a link protocol",
    );
    // An explicit key, and flow style.
    let e = load_err("steps: []\n? rules\n: [no.such.rule]\n", None);
    assert_at(
        &e,
        Some(4),
        Some(3),
        "rules[0]",
        "not a rule of the catalogue",
    );
    let text = "{name: t, about: a, steps: [], device: {}}\n";
    let e = load_str(text, FILE, Some(Side::Instance)).expect_err("device: in instance/");
    assert_at(&e, Some(1), Some(32), "device", "configures fake-device");
    // A self-test variable whose name is written with an escape: the line of `selftest`.
    let e = load_err(
        "vars: { x: 1 }\n\"selftest\": { vars: { \"\\x79\": 1 } }\nsteps: []\n",
        None,
    );
    assert_eq!(e.line, Some(4), "{e}");
    assert_eq!(e.key_path.as_deref(), Some("selftest.vars.y"), "{e}");
}

// ---------------------------------------------------------------------------------------------
// Semantic errors (the checker)

#[test]
fn any_order_with_a_non_expect_points_at_that_step() {
    let e = load_err(
        "steps:\n  - any_order:\n      - expect: { method: a }\n      - wait: 1s\n",
        None,
    );
    assert_at(
        &e,
        Some(6),
        Some(9),
        "steps[0].any_order[1]",
        "only `expect` steps can be in `any_order`",
    );
}

#[test]
fn reply_with_both_result_and_error() {
    let e = load_err(
        "steps:\n  - wait: 1s\n  - reply: { to: r, result: 1, error: { code: 1 } }\n",
        None,
    );
    assert_at(
        &e,
        Some(5),
        Some(5),
        "steps[1].reply",
        "needs exactly one of `result` and `error`",
    );
}

#[test]
fn reply_with_neither_result_nor_error() {
    let e = load_err("steps:\n  - reply: { to: r }\n", None);
    assert_at(
        &e,
        Some(4),
        Some(5),
        "steps[0].reply",
        "needs exactly one of `result` and `error`",
    );
}

#[test]
fn request_with_more_than_one_answer_pattern() {
    for body in [
        "steps:\n  - request: { method: m, result: 1, error: { code: 1 } }\n",
        "steps:\n  - request: { method: m, result: 1, answer: { result: 1 } }\n",
    ] {
        let e = load_err(body, None);
        assert_at(
            &e,
            Some(4),
            Some(5),
            "steps[0].request",
            "has more than one of `result`, `error` and `answer`",
        );
    }
}

#[test]
fn when_on_a_value_needs_both_that_and_matches() {
    let e = load_err(
        "steps:\n  - when:\n      that: x\n      steps: [ { wait: 1s } ]\n",
        None,
    );
    assert_at(
        &e,
        Some(4),
        Some(5),
        "steps[0].when",
        "needs both `that` and `matches`",
    );
}

#[test]
fn needs_name_capabilities_of_every_spec_the_matrix_runs() {
    let e = load_err("needs: [files, context]\nsteps: []\n", None);
    assert_eq!(e.key_path.as_deref(), Some("needs[1]"));
    assert!(
        e.message
            .contains("`context` is not a capability of harness spec 1.0.0"),
        "{}",
        e.message
    );
    let fine = load_ok(
        "needs: [files, context]\nmatrix: { spec: [\"1.1.0\"] }\nsteps: []\n",
        None,
    );
    assert_eq!(fine.needs, ["files", "context"]);
}

#[test]
fn send_needs_exactly_one_of_message_and_text() {
    let e = load_err("steps:\n  - send: {}\n", None);
    assert_at(
        &e,
        Some(4),
        Some(5),
        "steps[0].send",
        "needs exactly one of `message` and `text`",
    );
}

#[test]
fn when_without_protocol_or_spec() {
    let e = load_err("steps:\n  - when:\n      steps: [ { wait: 1s } ]\n", None);
    assert_at(
        &e,
        Some(4),
        Some(5),
        "steps[0].when",
        "needs `protocol`, `spec`, `needs` or `that` with `matches`",
    );
}

#[test]
fn errors_inside_when_point_at_the_inner_step() {
    let e = load_err(
        "steps:\n  - when:\n      protocol: 2\n      steps:\n        - wait: 1s\n        - expect: { capture: { a: $ } }\n",
        None,
    );
    assert_at(
        &e,
        Some(8),
        Some(11),
        "steps[0].when.steps[1].expect",
        "says nothing to expect",
    );
}

#[test]
fn handler_with_both_result_and_hold() {
    let e = load_err(
        "handlers:\n  - { method: a, result: 1 }\n  - { method: m, result: 1, hold: true }\nsteps: []\n",
        None,
    );
    assert_at(
        &e,
        Some(5),
        Some(5),
        "handlers[1]",
        "needs exactly one of `result`, `error` and `hold: true`",
    );
}

#[test]
fn handler_with_a_bad_params_pattern() {
    let e = load_err(
        "handlers:\n  - { method: m, params: { x: $nmber }, result: 1 }\nsteps: []\n",
        None,
    );
    assert_at(
        &e,
        Some(4),
        Some(5),
        "handlers[0].params",
        "unknown placeholder \"$nmber\"",
    );
}

#[test]
fn expect_with_nothing_to_expect() {
    let e = load_err("steps:\n  - expect: { capture: { a: b } }\n", None);
    assert_at(
        &e,
        Some(4),
        Some(5),
        "steps[0].expect",
        "says nothing to expect: give `method`, `params` or `message`",
    );
}

#[test]
fn a_typo_placeholder_is_a_bad_pattern() {
    let e = load_err(
        "steps:\n  - expect: { method: m, params: { id: \"$strnig\" } }\n",
        None,
    );
    assert_at(
        &e,
        Some(4),
        Some(5),
        "steps[0].expect.params",
        "bad pattern: invalid pattern at /id: unknown placeholder \"$strnig\"",
    );
    // It lists the placeholders that exist, so the author sees the right spelling.
    assert!(e.message.contains("$string"), "{}", e.message);
}

#[test]
fn bad_patterns_in_request_check_and_expect_none_are_caught() {
    let e = load_err(
        "steps:\n  - request: { method: m, result: { $regex: 1 } }\n",
        None,
    );
    assert_at(
        &e,
        Some(4),
        Some(5),
        "steps[0].request.result",
        "bad pattern",
    );
    let e = load_err("steps:\n  - check: { that: 1, matches: $nope }\n", None);
    assert_at(
        &e,
        Some(4),
        Some(5),
        "steps[0].check.matches",
        "bad pattern",
    );
    let e = load_err(
        "steps:\n  - expect_none: { method: m, params: { a: $nope }, for: 1s }\n",
        None,
    );
    assert_at(
        &e,
        Some(4),
        Some(5),
        "steps[0].expect_none.params",
        "bad pattern",
    );
}

#[test]
fn dial_in_a_scenario_fake_instance_runs() {
    let body = "steps:\n  - wait: 1s\n  - dial: {}\n";
    let e = load_err(body, Some(Side::Instance));
    assert_at(
        &e,
        Some(5),
        Some(5),
        "steps[1].dial",
        "only fake-device dials",
    );
    // fake-device may dial.
    load_ok(body, Some(Side::Device));
}

#[test]
fn expect_reconnect_in_a_scenario_fake_device_runs() {
    let body = "steps:\n  - expect_reconnect: { within: 1s }\n";
    let e = load_err(body, Some(Side::Device));
    assert_at(
        &e,
        Some(4),
        Some(5),
        "steps[0].expect_reconnect",
        "only fake-instance can see a peer link again",
    );
    load_ok(body, Some(Side::Instance));
}

#[test]
fn instance_section_in_a_device_scenario() {
    let body = "instance: { initialize: manual }\nsteps: []\n";
    let e = load_err(body, Some(Side::Device));
    // A top-level section's error points at the section's line.
    assert_at(
        &e,
        Some(3),
        Some(1),
        "instance",
        "configures fake-instance, but fake-device runs this scenario",
    );
    assert!(e.message.contains("use `device:`"), "{}", e.message);
    load_ok(body, Some(Side::Instance));
    load_ok(body, None);
}

#[test]
fn device_section_in_an_instance_scenario() {
    let e = load_err(
        "device: { dial: manual }\nsteps: []\n",
        Some(Side::Instance),
    );
    assert_at(
        &e,
        Some(3),
        Some(1),
        "device",
        "configures fake-device, but fake-instance runs this scenario",
    );
}

#[test]
fn matrix_protocol_outside_1_and_2() {
    let e = load_err("matrix: { protocol: [2, 3] }\nsteps: []\n", None);
    assert_at(
        &e,
        Some(3),
        Some(1),
        "matrix.protocol",
        "3 is not a link protocol (1 or 2)",
    );
}

#[test]
fn matrix_spec_that_does_not_exist() {
    let e = load_err("matrix: { spec: [\"2.0.0\"] }\nsteps: []\n", None);
    assert_at(
        &e,
        Some(3),
        Some(1),
        "matrix.spec",
        "`2.0.0` is not a harness spec version",
    );
}

#[test]
fn unknown_rule_in_rules() {
    let e = load_err(
        "rules: [device.hello.first, device.hello.frist]\nsteps: []\n",
        None,
    );
    assert_at(
        &e,
        Some(3),
        Some(1),
        "rules[1]",
        "`device.hello.frist` is not a rule of the catalogue",
    );
}

#[test]
fn unknown_rule_on_a_step() {
    let e = load_err(
        "steps:\n  - expect: { method: m, rule: device.hello.first }\n  - expect: { method: m, rule: nope.rule }\n",
        None,
    );
    assert_eq!(e.line, Some(5), "{e}");
    assert_eq!(e.column, Some(5), "{e}");
    let path = e.key_path.as_deref().unwrap_or_default();
    assert!(path.starts_with("steps[1]."), "{path}");
    assert!(path.ends_with("rule"), "{path}");
    assert!(
        e.message
            .contains("`nope.rule` is not a rule of the catalogue"),
        "{}",
        e.message
    );
}

#[test]
fn a_step_that_judges_the_peer_without_a_rule_is_found_for_harness_check() {
    // Deep in a `when`, and on steps the rule check once skipped (expect_output).
    let text = "steps:\n  - expect: { method: m, rule: device.hello.first }\n  - when:\n      spec: \"1.1.0\"\n      steps:\n        - expect_output: { pattern: ready }\n";
    let scenario = load_ok(text, None);
    let e = harness::scenario::load::unruled(&scenario, FILE).expect("found");
    assert_eq!(e.line, Some(8), "{e}");
    assert_eq!(
        e.key_path.as_deref(),
        Some("steps[1].when.steps[0].expect_output.rule"),
        "{e}"
    );
    assert!(
        e.message.contains("names the catalogue rule it checks"),
        "{e}"
    );
    let e = load_err(
        "steps:\n  - expect_output: { pattern: ready, rule: nope.c }\n",
        None,
    );
    assert!(e.message.contains("`nope.c`"), "{e}");
    // Acting, sending and waiting judge nothing: no rule needed.
    let quiet = load_ok("steps:\n  - send: { text: hi }\n  - wait: 10ms\n", None);
    assert!(harness::scenario::load::unruled(&quiet, FILE).is_none());
}

#[test]
fn unknown_rule_nested_in_any_order_and_when() {
    let e = load_err(
        "steps:\n  - any_order:\n      - expect: { method: m, rule: nope.a }\n",
        None,
    );
    assert_eq!(e.line, Some(5), "{e}");
    assert!(e.message.contains("`nope.a`"), "{e}");
    let e = load_err(
        "steps:\n  - when:\n      spec: \"1.1.0\"\n      steps:\n        - check: { that: 1, matches: 1, rule: nope.b }\n",
        None,
    );
    assert_eq!(e.line, Some(7), "{e}");
    assert!(e.message.contains("`nope.b`"), "{e}");
}

#[test]
fn unknown_rule_on_a_step_has_the_key_path_of_the_rule_key() {
    let e = load_err("steps:\n  - expect: { method: m, rule: nope.rule }\n", None);
    assert_eq!(e.key_path.as_deref(), Some("steps[0].expect.rule"));
}

// ---------------------------------------------------------------------------------------------
// What loads

#[test]
fn yaml_1_1_booleans_stay_strings_in_free_json() {
    let s = load_ok(
        "vars: { answer: no }\nsteps:\n  - notify: { method: m, params: { country: NO, flag: yes, on: on, real: true, off: false } }\n",
        None,
    );
    let Step::Notify(n) = &s.steps[0].value else {
        panic!("not a notify: {:?}", s.steps[0].value)
    };
    assert_eq!(
        n.params,
        Some(json!({"country": "NO", "flag": "yes", "on": "on", "real": true, "off": false}))
    );
    assert_eq!(s.vars.get("answer"), Some(&json!("no")));
}

#[test]
fn a_minimal_scenario_gets_the_defaults() {
    let s = load_ok("steps: []\n", None);
    assert_eq!(s.name, "t");
    assert_eq!(s.matrix.protocol, vec![1, 2]);
    assert_eq!(s.matrix.spec, vec!["1.0.0", "1.1.0"]);
    assert!(s.timeout.is_none());
    assert!(s.handlers.is_empty() && s.rules.is_empty());
}

#[test]
fn load_file_on_a_missing_file_names_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("nowhere.yaml");
    let e = load_file(&path, None).unwrap_err();
    assert_eq!(e.file, path.display().to_string());
    assert_eq!(
        (e.line, e.column, e.key_path.as_deref()),
        (None, None, None)
    );
    assert!(e.message.contains("cannot read it"), "{}", e.message);
    assert!(e.to_string().contains("nowhere.yaml"), "{e}");
}

#[test]
fn load_file_infers_the_side_from_the_folder() {
    let dir = tempfile::tempdir().unwrap();
    let text = scenario("steps:\n  - dial: {}\n");
    for folder in ["instance", "device", "elsewhere"] {
        std::fs::create_dir(dir.path().join(folder)).unwrap();
        std::fs::write(dir.path().join(folder).join("s.yaml"), &text).unwrap();
    }

    // Under instance/: fake-instance runs it, and fake-instance does not dial.
    let path = dir.path().join("instance").join("s.yaml");
    let e = load_file(&path, None).unwrap_err();
    assert_eq!(e.file, path.display().to_string());
    assert_eq!(e.line, Some(4));
    assert_eq!(e.key_path.as_deref(), Some("steps[0].dial"));
    assert!(e.message.contains("only fake-device dials"), "{e}");

    // An explicit side wins over the folder.
    load_file(&path, Some(Side::Device)).unwrap();
    // Under device/ or any other folder it loads.
    load_file(&dir.path().join("device").join("s.yaml"), None).unwrap();
    load_file(&dir.path().join("elsewhere").join("s.yaml"), None).unwrap();
}

#[test]
fn every_shipped_scenario_loads() {
    let mut count = 0;
    for side in [Side::Instance, Side::Device] {
        let shipped = embedded(side);
        assert!(!shipped.is_empty(), "no {side:?} scenarios embedded");
        for e in shipped {
            assert_eq!(e.side, side);
            if let Err(err) = e.load() {
                panic!("{} does not load: {err}", e.label());
            }
            count += 1;
        }
    }
    assert!(count >= 2);
}

#[test]
fn an_await_must_name_an_earlier_start() {
    let e = load_err(
        "steps:\n  - await: { request: nope }\n  - start: { method: m, as: nope }\n",
        None,
    );
    assert_eq!(e.key_path.as_deref(), Some("steps[0].await.request"), "{e}");
    assert!(e.message.contains("as: nope"), "{e}");
    load_ok(
        "steps:\n  - start: { method: m, as: a }\n  - await: { request: a }\n",
        None,
    );
}

#[test]
fn an_await_waits_no_longer_than_its_start_allows() {
    // The start's timeout (else the scenario's) bounds the whole wait: a longer await would be
    // cut short without a word.
    let e = load_err(
        "steps:\n  - start: { method: m, as: long }\n  - await: { request: long, timeout: 15s }\n",
        None,
    );
    assert_eq!(e.key_path.as_deref(), Some("steps[1].await.timeout"), "{e}");
    assert!(
        e.message.contains("5s") && e.message.contains("as: long"),
        "{e}"
    );
    let e = load_err(
        "timeout: 10s\nsteps:\n  - when: { protocol: 2, steps: [{ start: { method: m, as: a, timeout: 2s } }] }\n  - await: { request: a, timeout: 3s }\n",
        None,
    );
    assert_eq!(e.key_path.as_deref(), Some("steps[1].await.timeout"), "{e}");
    load_ok(
        "steps:\n  - start: { method: m, as: a, timeout: 15s }\n  - await: { request: a, timeout: 10s }\n",
        None,
    );
    load_ok(
        "timeout: 20s\nsteps:\n  - start: { method: m, as: a }\n  - await: { request: a, timeout: 15s }\n",
        None,
    );
}

#[test]
fn a_duration_may_name_a_variable_which_the_self_test_may_shorten() {
    let body = "vars: { window: 20s }\nselftest:\n  vars: { window: 2s }\nsteps:\n  - expect_close: { timeout: \"${window}\" }\n";
    let deadline = |s: &Scenario| match &s.steps[0].value {
        Step::ExpectClose(close) => close.timeout.map(|t| t.0),
        other => panic!("not an expect_close: {other:?}"),
    };
    let for_a_peer = load_ok(body, None);
    assert_eq!(
        deadline(&for_a_peer),
        Some(std::time::Duration::from_secs(20))
    );
    let text = scenario(body);
    let for_the_selftest = load_str_for(&text, FILE, None, Reader::Selftest).expect("loads");
    assert_eq!(
        deadline(&for_the_selftest),
        Some(std::time::Duration::from_secs(2))
    );
    assert_eq!(
        for_the_selftest.vars["window"],
        json!("2s"),
        "`${{window}}` in text too"
    );

    let e = load_err("steps:\n  - wait: \"${nowhere}\"\n", None);
    assert_eq!(e.line, Some(4), "{e}");
    assert!(e.message.contains("names no variable"), "{e}");
    let e = load_err(
        "vars: { window: soon }\nsteps:\n  - wait: \"${window}\"\n",
        None,
    );
    assert!(e.message.contains("not a duration"), "{e}");
    let e = load_err(
        "vars: { window: 20s }\nselftest:\n  vars: { windw: 2s }\nsteps: []\n",
        None,
    );
    assert_at(
        &e,
        Some(5),
        None,
        "selftest.vars.windw",
        "no variable of `vars:`",
    );
}

#[test]
fn handler_params_may_use_only_what_is_known_at_the_start() {
    let e = load_err(
        "handlers:\n  - method: m\n    params: { sessionId: \"${sid}\" }\n    hold: true\nsteps: []\n",
        None,
    );
    assert_eq!(e.key_path.as_deref(), Some("handlers[0].params"), "{e}");
    assert!(e.message.contains("`${sid}`"), "{e}");
    load_ok(
        "vars: { sid: x }\nhandlers:\n  - method: m\n    params: { sessionId: \"${sid}\", p: \"${protocol}\" }\n    hold: true\nsteps: []\n",
        None,
    );
}

#[test]
fn an_act_holds_exactly_one_action_beside_capture_and_timeout() {
    let e = load_err(
        "steps:\n  - act: { open_chat: {}, send: { chat: c, text: t } }\n",
        None,
    );
    assert!(
        e.message
            .contains("needs exactly one action, not `open_chat` and `send`"),
        "{e}"
    );
    assert_eq!(e.line, Some(4), "{e}");
    let e = load_err("steps:\n  - act: { capture: { x: sessionId } }\n", None);
    assert!(e.message.contains("not none"), "{e}");
    let fine = load_ok(
        "steps:\n  - act: { whatever_the_double_says: { a: 1 }, capture: { x: y }, timeout: 2s }\n",
        None,
    );
    let harness::scenario::Step::Act(act) = &fine.steps[0].value else {
        panic!("an act step");
    };
    assert_eq!(act.name, "whatever_the_double_says");
    assert_eq!(
        act.action(),
        serde_json::json!({ "whatever_the_double_says": { "a": 1 } })
    );
    assert_eq!(act.capture.get("x").map(String::as_str), Some("y"));
}

#[test]
fn check_actions_reads_each_act_as_the_double_s_type_and_locates_the_fault() {
    #[derive(serde::Deserialize)]
    #[serde(rename_all = "snake_case", deny_unknown_fields)]
    #[allow(dead_code)]
    enum Own {
        Open { cwd: String },
    }
    let scenario = load_ok(
        "steps:\n  - wait: 1s\n  - when:\n      protocol: 2\n      steps:\n        - act: { open: { cwd: /w, bogus: 1 } }\n",
        None,
    );
    let e = harness::scenario::check_actions::<Own>(&scenario.steps, "steps", FILE)
        .expect_err("bogus is no field of `open`");
    assert_eq!(
        e.key_path.as_deref(),
        Some("steps[1].when.steps[0].act.open.bogus")
    );
    assert_eq!(e.line, Some(8), "{e}");
    assert!(e.message.contains("unknown field `bogus`"), "{e}");
    let fine = load_ok("steps:\n  - act: { open: { cwd: /w } }\n", None);
    assert!(harness::scenario::check_actions::<Own>(&fine.steps, "steps", FILE).is_ok());
}
