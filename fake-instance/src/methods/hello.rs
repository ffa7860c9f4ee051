//! `_lembas/hello`, the device's first word on a link: what the instance checks in it (its
//! shape, the protocol the discovery allows, the spec and the CLI's version).

use harness::finding::Finding;
use harness::lembas::Spec;
use harness::rules::ids;
use serde_json::{Value, json};

use crate::monitor::shape;

/// Checks a hello's params, given the protocol the discovery served allows and the spec the
/// device is expected to implement.
pub(crate) fn check_hello(params: &Value, allowed_protocol: u8, spec: Spec) -> Vec<Finding> {
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
    // Any number but the allowed one is wrong, -1 and 1e308 too (the shape rule takes text).
    match params.get("protocol") {
        Some(said) if said.as_u64() == Some(u64::from(allowed_protocol)) => {}
        Some(said) if said.is_number() => found.push(
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
        Some(_) | None => {}
    }
    // `version` is the CLI's own version: any release from the first that implemented the spec
    // (a CLI 1.3.1 of spec 1.1.0 is as right as 1.3.0), not one particular one.
    let spec_said = params.get("harness_spec").and_then(Value::as_str);
    let version_said = params.get("version").and_then(Value::as_str);
    if spec_said.is_some_and(|s| s != spec.as_str())
        || version_said.is_some_and(|v| !is_version_from(v, spec.cli_version()))
    {
        found.push(Finding::new(
            ids::DEVICE_HELLO_SPEC,
            format!(
                "hello says harness_spec {} and version {}, but a device of spec {} says harness_spec {} and a version from {} on",
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

/// A version as the CLI writes its own: `1.3.0`, `1.3.1-beta.2`, `2.0.0+build.5` (what
/// [`release`] reads).
pub(crate) const VERSION_PATTERN: &str = r"^[0-9]+\.[0-9]+\.[0-9]+([-+][0-9A-Za-z.+-]*)?$";

/// Whether `text` is a version no older than `first` (compared by major, minor and patch).
pub(crate) fn is_version_from(text: &str, first: &str) -> bool {
    matches!((release(text), release(first)), (Some(said), Some(first)) if said >= first)
}

/// A version's major, minor and patch, when it is one.
fn release(text: &str) -> Option<(u64, u64, u64)> {
    let core = text.split(['-', '+']).next().unwrap_or("");
    let rest = &text[core.len()..];
    if !(rest.is_empty() || rest.len() > 1) {
        return None;
    }
    let mut parts = core.split('.').map(|p| {
        (!p.is_empty() && p.chars().all(|c| c.is_ascii_digit()))
            .then(|| p.parse::<u64>().ok())
            .flatten()
    });
    match (parts.next(), parts.next(), parts.next(), parts.next()) {
        (Some(Some(major)), Some(Some(minor)), Some(Some(patch)), None) => {
            Some((major, minor, patch))
        }
        _ => None,
    }
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
    fn any_release_of_the_cli_is_a_version() {
        for good in ["1.3.0", "1.3.1", "2.0.0-beta.2", "1.3.0+build.7"] {
            assert!(release(good).is_some(), "{good}");
        }
        for bad in ["1.3", "latest", "1.3.x", "", "1.3.0-"] {
            assert!(release(bad).is_none(), "{bad}");
        }
        let mut newer = hello(2);
        newer["version"] = json!("1.3.1");
        assert!(check_hello(&newer, 2, Spec::V1_1_0).is_empty());
        newer["version"] = json!("1.2.9");
        assert_eq!(
            rules_of(&check_hello(&newer, 2, Spec::V1_1_0)),
            [ids::DEVICE_HELLO_SPEC],
            "older than the first CLI of spec 1.1.0"
        );
        newer["version"] = json!("one point three");
        assert_eq!(
            rules_of(&check_hello(&newer, 2, Spec::V1_1_0)),
            [ids::DEVICE_HELLO_SPEC]
        );
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

    #[test]
    fn a_protocol_out_of_every_range_is_a_wrong_protocol_not_no_protocol() {
        // -1 is an integer no u8 holds, 1e308 an integral float: neither may pass unjudged.
        for said in [json!(-1), json!(1e308), json!(2.5)] {
            let mut odd = hello(2);
            odd["protocol"] = said.clone();
            let found = check_hello(&odd, 2, Spec::V1_1_0);
            assert!(
                rules_of(&found).contains(&ids::DEVICE_HELLO_PROTOCOL),
                "{said}: {found:?}"
            );
        }
    }
}
