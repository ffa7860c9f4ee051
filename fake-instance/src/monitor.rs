//! The rules that bind a device, checked on whatever a linked device sends, whether or not a
//! scenario runs. Pure functions from messages to findings, so each is tested on its own.

use harness::finding::Finding;
use harness::lembas::Spec;
use harness::pattern::Pattern;
use harness::rules::ids;
use serde_json::{Value, json};

/// Checks `value` against a shape pattern; a mismatch becomes one finding with every
/// difference in its detail.
fn shape(rule: &str, what: &str, pattern: Value, value: &Value) -> Option<Finding> {
    let compiled = match Pattern::compile(&pattern) {
        Ok(p) => p,
        Err(e) => {
            tracing::error!("monitor pattern for {rule} does not compile: {e}");
            return None;
        }
    };
    let outcome = compiled.matches(value);
    if outcome.is_match() {
        return None;
    }
    let detail = outcome
        .mismatches
        .iter()
        .map(|m| m.to_string())
        .collect::<Vec<_>>()
        .join("\n");
    Some(
        Finding::new(rule, format!("{what} is not shaped as the spec says"))
            .with_detail(format!("{detail}\nreceived: {value}")),
    )
}

/// Checks a hello's params, given the protocol the discovery served allows and the spec the
/// device is expected to implement.
pub fn check_hello(params: &Value, allowed_protocol: u8, spec: Spec) -> Vec<Finding> {
    let mut found = Vec::new();
    found.extend(shape(
        ids::DEVICE_HELLO_SHAPE,
        "`_lembas/hello`",
        json!({
            "protocol": "$integer",
            "version": "$string",
            "harness_spec": "$string",
            "device": { "host": "$string", "platform": "$string" },
            "limits": { "roots": "$array", "max_mode": "$string", "require_trust": "$boolean" }
        }),
        params,
    ));
    match params.get("protocol").and_then(Value::as_u64) {
        Some(said) if said == u64::from(allowed_protocol) => {}
        Some(said) => found.push(
            Finding::new(
                ids::DEVICE_HELLO_PROTOCOL,
                format!(
                    "hello says protocol {said}, but the discovery served allows {allowed_protocol}"
                ),
            )
            .with_detail(format!(
                "expected protocol {allowed_protocol}; received: {params}"
            )),
        ),
        None => {}
    }
    let spec_said = params.get("harness_spec").and_then(Value::as_str);
    let version_said = params.get("version").and_then(Value::as_str);
    if spec_said.is_some_and(|s| s != spec.as_str())
        || version_said.is_some_and(|v| v != spec.cli_version())
    {
        found.push(Finding::new(
            ids::DEVICE_HELLO_SPEC,
            format!(
                "hello says harness_spec {} and version {}, but a device of spec {} says {} and {}",
                spec_said.unwrap_or("?"),
                version_said.unwrap_or("?"),
                spec,
                spec.as_str(),
                spec.cli_version()
            ),
        ));
    }
    found
}

/// Checks the device's answer to `initialize`: its shape, its protocol against hello's, and its
/// capabilities against the spec. `lembas_client`: whether our initialize said `_meta.lembas`.
pub fn check_initialize(
    outcome: &Result<Value, Value>,
    hello_protocol: Option<u8>,
    spec: Spec,
    lembas_client: bool,
) -> Vec<Finding> {
    let result = match outcome {
        Ok(result) => result,
        Err(error) => {
            return vec![
                Finding::new(
                    ids::DEVICE_INITIALIZE_RESULT,
                    "the device answered initialize with an error",
                )
                .with_detail(error.to_string()),
            ];
        }
    };
    let mut found = Vec::new();
    let mut pattern = json!({
        "protocolVersion": 1,
        "agentCapabilities": {
            "loadSession": "$boolean",
            "promptCapabilities": { "image": "$boolean", "audio": "$boolean", "embeddedContext": "$boolean" },
            "mcpCapabilities": { "http": "$boolean", "sse": "$boolean" }
        },
        "authMethods": "$array",
        "agentInfo": { "name": "$string", "version": spec.cli_version() },
    });
    if lembas_client {
        pattern["_meta"] = json!({ "lembas": {
            "protocol": "$integer",
            "harness_spec": spec.as_str(),
            "limits": { "$one_of": ["$object", "$null"] },
            "connection": { "$one_of": ["$string", "$null"] },
            "capabilities": "$array"
        }});
    }
    found.extend(shape(
        ids::DEVICE_INITIALIZE_RESULT,
        "the initialize result",
        pattern,
        result,
    ));
    let lembas = result.pointer("/_meta/lembas");
    if let (Some(hello), Some(said)) = (
        hello_protocol,
        lembas
            .and_then(|l| l.get("protocol"))
            .and_then(Value::as_u64),
    ) && said != u64::from(hello)
    {
        found.push(Finding::new(
            ids::DEVICE_INITIALIZE_PROTOCOL,
            format!("initialize says protocol {said}, but the device's hello said {hello}"),
        ));
    }
    if let Some(list) = lembas
        .and_then(|l| l.get("capabilities"))
        .and_then(Value::as_array)
    {
        let names: Vec<&str> = list.iter().filter_map(Value::as_str).collect();
        let beyond: Vec<&str> = names.iter().copied().filter(|c| !spec.defines(c)).collect();
        if !beyond.is_empty() {
            found.push(Finding::new(
                ids::DEVICE_INITIALIZE_CAPABILITIES,
                format!(
                    "lists capabilities harness spec {spec} does not have: {}",
                    beyond.join(", ")
                ),
            ));
        }
        if names.contains(&"shell") && !names.contains(&"terminal") {
            found.push(Finding::new(
                ids::DEVICE_INITIALIZE_CAPABILITIES,
                "lists `shell` without `terminal`",
            ));
        }
        if names.len() != list.len() {
            found.push(Finding::new(
                ids::DEVICE_INITIALIZE_CAPABILITIES,
                "the capability list holds something that is not a string",
            ));
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hello(protocol: u8) -> Value {
        json!({"protocol": protocol, "version": "1.3.0", "harness_spec": "1.1.0",
               "device": {"host": "h", "platform": "linux"},
               "limits": {"roots": [], "max_mode": "edit", "require_trust": true}})
    }

    fn rules_of(found: &[Finding]) -> Vec<&str> {
        found.iter().map(|f| f.rule.as_str()).collect()
    }

    #[test]
    fn a_right_hello_passes_and_each_fault_names_its_rule() {
        assert!(check_hello(&hello(2), 2, Spec::V1_1_0).is_empty());
        assert_eq!(
            rules_of(&check_hello(&hello(2), 1, Spec::V1_1_0)),
            [ids::DEVICE_HELLO_PROTOCOL]
        );
        assert_eq!(
            rules_of(&check_hello(&hello(1), 1, Spec::V1_0_0)),
            [ids::DEVICE_HELLO_SPEC]
        );
        let mut no_device = hello(1);
        no_device.as_object_mut().map(|o| o.remove("device"));
        assert_eq!(
            rules_of(&check_hello(&no_device, 1, Spec::V1_1_0)),
            [ids::DEVICE_HELLO_SHAPE]
        );
    }

    fn result(protocol: u8, caps: &[&str]) -> Value {
        json!({"protocolVersion": 1,
               "agentCapabilities": {"loadSession": false,
                   "promptCapabilities": {"image": true, "audio": false, "embeddedContext": true},
                   "mcpCapabilities": {"http": false, "sse": false}},
               "authMethods": [], "agentInfo": {"name": "LLeMbas CLI", "version": "1.0.0"},
               "_meta": {"lembas": {"protocol": protocol, "harness_spec": "1.0.0", "limits": null,
                                    "connection": null, "capabilities": caps}}})
    }

    #[test]
    fn initialize_results_are_checked_against_hello_and_spec() {
        assert!(
            check_initialize(&Ok(result(2, &["files"])), Some(2), Spec::V1_0_0, true).is_empty()
        );
        assert_eq!(
            rules_of(&check_initialize(
                &Ok(result(1, &[])),
                Some(2),
                Spec::V1_0_0,
                true
            )),
            [ids::DEVICE_INITIALIZE_PROTOCOL]
        );
        assert_eq!(
            rules_of(&check_initialize(
                &Ok(result(2, &["rewind"])),
                Some(2),
                Spec::V1_0_0,
                true
            )),
            [ids::DEVICE_INITIALIZE_CAPABILITIES]
        );
        assert_eq!(
            rules_of(&check_initialize(
                &Ok(result(2, &["shell"])),
                Some(2),
                Spec::V1_0_0,
                true
            )),
            [ids::DEVICE_INITIALIZE_CAPABILITIES]
        );
        assert_eq!(
            rules_of(&check_initialize(
                &Err(json!({"code": 1})),
                Some(2),
                Spec::V1_0_0,
                true
            )),
            [ids::DEVICE_INITIALIZE_RESULT]
        );
        let mut no_info = result(2, &[]);
        no_info.as_object_mut().map(|o| o.remove("agentInfo"));
        assert_eq!(
            rules_of(&check_initialize(&Ok(no_info), Some(2), Spec::V1_0_0, true)),
            [ids::DEVICE_INITIALIZE_RESULT]
        );
    }
}
