//! The rules that bind an instance, checked on what a linked instance sends and serves.

use harness::finding::Finding;
use harness::lembas::Discovery;
use harness::rules::ids;
use serde_json::Value;

/// Reads discovery and checks it; the findings come with whatever could be read.
pub fn check_discovery(value: &Value) -> (Option<Discovery>, Vec<Finding>) {
    match Discovery::from_value(value) {
        Err(why) => (
            None,
            vec![
                Finding::new(ids::INSTANCE_DISCOVERY_SHAPE, why)
                    .with_detail(format!("received: {value}")),
            ],
        ),
        Ok(discovery) => {
            let mut found = Vec::new();
            if discovery.protocol != 1 {
                found.push(Finding::new(
                    ids::INSTANCE_DISCOVERY_SHAPE,
                    format!("discovery says protocol {}; it stays 1 so clients comparing it still log in", discovery.protocol),
                ));
            }
            if discovery
                .protocols
                .as_ref()
                .is_some_and(|l| !l.contains(&1))
            {
                found.push(Finding::new(
                    ids::INSTANCE_DISCOVERY_SHAPE,
                    "discovery's `protocols` does not list 1",
                ));
            }
            (Some(discovery), found)
        }
    }
}

/// Checks an instance's `initialize` params on a link whose hello said `protocol`.
pub fn check_initialize(params: &Value, protocol: u8) -> Vec<Finding> {
    let mut found = Vec::new();
    if params.get("protocolVersion").and_then(Value::as_u64) != Some(1)
        || !params
            .get("clientCapabilities")
            .is_some_and(Value::is_object)
    {
        found.push(
            Finding::new(
                ids::INSTANCE_INITIALIZE_SHAPE,
                "initialize's params are not protocolVersion 1 with a clientCapabilities object",
            )
            .with_detail(format!("received: {params}")),
        );
    }
    let said = match params.pointer("/clientCapabilities/_meta/lembas") {
        None => None,
        Some(Value::Bool(true)) => Some(1),
        Some(Value::Object(lembas)) => match lembas.get("protocol") {
            None => Some(1),
            Some(p) => p.as_u64(),
        },
        Some(_) => Some(0),
    };
    match said {
        Some(said) if said == u64::from(protocol) => {}
        None => found.push(Finding::new(
            ids::INSTANCE_INITIALIZE_PROTOCOL,
            "initialize has no clientCapabilities._meta.lembas: the instance does not say it is LLeMbas",
        )),
        Some(said) => found.push(
            Finding::new(
                ids::INSTANCE_INITIALIZE_PROTOCOL,
                format!("initialize says protocol {said}, but the device's hello said {protocol}"),
            )
            .with_detail(format!(
                "expected clientCapabilities._meta.lembas {}; received: {}",
                if protocol >= 2 { "{\"protocol\": 2}" } else { "true" },
                params.pointer("/clientCapabilities/_meta/lembas").cloned().unwrap_or(Value::Null)
            )),
        ),
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rules_of(found: &[Finding]) -> Vec<&str> {
        found.iter().map(|f| f.rule.as_str()).collect()
    }

    #[test]
    fn initialize_must_say_the_link_protocol() {
        let two = json!({"protocolVersion": 1, "clientCapabilities": {"_meta": {"lembas": {"protocol": 2}}}});
        let one = json!({"protocolVersion": 1, "clientCapabilities": {"_meta": {"lembas": true}}});
        assert!(check_initialize(&two, 2).is_empty());
        assert!(check_initialize(&one, 1).is_empty());
        assert_eq!(
            rules_of(&check_initialize(&two, 1)),
            [ids::INSTANCE_INITIALIZE_PROTOCOL]
        );
        assert_eq!(
            rules_of(&check_initialize(&one, 2)),
            [ids::INSTANCE_INITIALIZE_PROTOCOL]
        );
        let v2 = json!({"protocolVersion": 2, "clientCapabilities": {"_meta": {"lembas": true}}});
        assert_eq!(
            rules_of(&check_initialize(&v2, 1)),
            [ids::INSTANCE_INITIALIZE_SHAPE]
        );
    }

    #[test]
    fn discovery_keeps_protocol_1() {
        assert!(
            check_discovery(&json!({"protocol": 1, "protocols": [1, 2]}))
                .1
                .is_empty()
        );
        assert_eq!(
            rules_of(&check_discovery(&json!({"protocol": 2, "protocols": [1, 2]})).1),
            [ids::INSTANCE_DISCOVERY_SHAPE]
        );
        assert_eq!(
            rules_of(&check_discovery(&json!({"protocols": [1, 2]})).1),
            [ids::INSTANCE_DISCOVERY_SHAPE]
        );
    }
}

/// The capability a method of the client's needs (spec, the capability table).
pub fn capability_of(method: &str) -> Option<&'static str> {
    Some(match method {
        "_lembas/directories" => "directories",
        "_lembas/configure" => "configure",
        "_lembas/steer" => "steer",
        "_lembas/session/status" => "status",
        "_lembas/session/delete" => "delete",
        "_lembas/session/compact" => "compact",
        "_lembas/session/title" => "title",
        "_lembas/session/history" => "sessions",
        "_lembas/session/rewind" => "rewind",
        "_lembas/files/search" => "files",
        "_lembas/commands" => "commands",
        m if m.starts_with("_lembas/terminal/") => "terminal",
        _ => return None,
    })
}

/// Checks a request or notification of the instance's against the capabilities the device
/// listed: no method, nor `Context` field, whose capability is missing.
pub fn check_capabilities(method: &str, params: &Value, listed: &[String]) -> Vec<Finding> {
    let has = |c: &str| listed.iter().any(|l| l == c);
    let mut found = Vec::new();
    if let Some(needed) = capability_of(method)
        && !has(needed)
    {
        found.push(Finding::new(
            ids::INSTANCE_CAPABILITIES_RESPECT,
            format!("the instance calls `{method}`, but the device did not list `{needed}`"),
        ));
    }
    if matches!(method, "session/new" | "session/prompt")
        && let Some(lembas) = params.pointer("/_meta/lembas").and_then(Value::as_object)
    {
        for (field, needed) in [
            ("system_prompt", "context"),
            ("personalization", "context"),
            ("library", "library"),
            ("prototypes", "prototypes"),
            ("turnId", "turns"),
        ] {
            if lembas.contains_key(field) && !has(needed) {
                found.push(Finding::new(
                    ids::INSTANCE_CAPABILITIES_RESPECT,
                    format!("`{method}` sends `_meta.lembas.{field}`, but the device did not list `{needed}`"),
                ));
            }
        }
    }
    found
}

#[cfg(test)]
mod capability_tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn methods_and_fields_beyond_the_listed_capabilities_are_found() {
        let listed = vec!["status".to_string(), "turns".to_string()];
        assert!(check_capabilities("_lembas/session/status", &json!({}), &listed).is_empty());
        assert_eq!(
            check_capabilities("_lembas/session/rewind", &json!({}), &listed).len(),
            1
        );
        assert_eq!(
            check_capabilities("_lembas/terminal/open", &json!({}), &listed).len(),
            1
        );
        let prompt = json!({"_meta": {"lembas": {"turnId": "t1", "library": {"bases": []}}}});
        let found = check_capabilities("session/prompt", &prompt, &listed);
        assert_eq!(found.len(), 1, "turnId is listed, library is not");
        assert!(found[0].summary.contains("library"));
        assert!(check_capabilities("session/cancel", &json!({}), &[]).is_empty());
    }
}
