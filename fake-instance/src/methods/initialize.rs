//! `initialize`, which the instance sends as ACP's client: what it checks in the device's answer
//! (its shape, its protocol against hello's, its capabilities against the spec).

use harness::finding::Finding;
use harness::lembas::Spec;
use harness::rules::ids;
use serde_json::{Value, json};

use crate::methods::hello::VERSION_PATTERN;
use crate::monitor::shape;

/// Checks the device's answer to `initialize`: its shape, its protocol against hello's, and its
/// capabilities against the spec. `lembas_client`: whether our initialize said `_meta.lembas`.
pub(crate) fn check_initialize(
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
        "agentInfo": { "name": "$string", "version": { "$regex": VERSION_PATTERN } },
    });
    if lembas_client {
        // `connection` comes with capability `model` (the capability table); a device without
        // it may leave it out.
        let lists_model = result
            .pointer("/_meta/lembas/capabilities")
            .and_then(Value::as_array)
            .is_some_and(|listed| listed.iter().any(|c| c == "model"));
        let connection = if lists_model {
            json!({ "$one_of": ["$string", "$null"] })
        } else {
            json!({ "$one_of": ["$string", "$none"] })
        };
        pattern["_meta"] = json!({ "lembas": {
            "protocol": "$integer",
            "harness_spec": spec.as_str(),
            "limits": { "$one_of": ["$object", "$null"] },
            "connection": connection,
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
            .filter(|p| p.is_number()),
    ) && said.as_u64() != Some(u64::from(hello))
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

    fn rules_of(found: &[Finding]) -> Vec<&str> {
        found.iter().map(|f| f.rule.as_str()).collect()
    }

    #[test]
    fn a_protocol_out_of_every_range_is_a_wrong_protocol_not_no_protocol() {
        // -1 is an integer no u8 holds, 1e308 an integral float: neither may pass unjudged.
        for said in [json!(-1), json!(1e308), json!(2.5)] {
            let mut init = result(2, &[]);
            init["_meta"]["lembas"]["protocol"] = said.clone();
            assert!(
                rules_of(&check_initialize(&Ok(init), Some(2), Spec::V1_0_0, true))
                    .contains(&ids::DEVICE_INITIALIZE_PROTOCOL),
                "{said}"
            );
        }
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
