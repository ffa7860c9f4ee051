//! The rules that bind an instance, checked on what a linked instance sends and serves.

use harness::finding::Finding;
use harness::lembas::Discovery;
use harness::lembas::methods;
use harness::rules::ids;
use serde_json::{Value, json};

/// Reads discovery and checks it; the findings come with whatever could be read.
pub fn check_discovery(value: &Value) -> (Option<Discovery>, Vec<Finding>) {
    match Discovery::from_value(value) {
        Err(why) => (
            None,
            vec![
                Finding::new(ids::INSTANCE_DISCOVERY_SHAPE, why.to_string())
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
    // What it says, as it said it: -1 or 1e308 is a wrong protocol, not a missing one.
    let said = match params.pointer("/clientCapabilities/_meta/lembas") {
        None => None,
        Some(Value::Bool(true)) => Some(json!(1)),
        Some(Value::Object(lembas)) => Some(lembas.get("protocol").cloned().unwrap_or(json!(1))),
        Some(other) => Some(other.clone()),
    };
    match said {
        Some(said) if said.as_u64() == Some(u64::from(protocol)) => {}
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

    #[test]
    fn card_answers_are_checked_against_what_each_card_offered() {
        let card = json!({"options": [{"optionId": "once"}, {"optionId": "deny"}]});
        let pick = |id: &str| json!({"outcome": {"outcome": "selected", "optionId": id}});
        assert!(
            check_card_answer(methods::SESSION_REQUEST_PERMISSION, &card, &pick("once")).is_none()
        );
        assert!(
            check_card_answer(
                methods::SESSION_REQUEST_PERMISSION,
                &card,
                &json!({"outcome": {"outcome": "cancelled"}})
            )
            .is_none()
        );
        let bad = check_card_answer(methods::SESSION_REQUEST_PERMISSION, &card, &pick("always"));
        assert_eq!(
            bad.map(|f| f.rule),
            Some(ids::INSTANCE_CARD_ANSWER.to_string())
        );

        let q = json!({"questions": [{"options": [{"label": "A"}]}, {"options": []}]});
        let ok = json!({"outcome": "answered", "answers": [{"kind": "options", "labels": ["A"]}, {"kind": "skipped"}]});
        assert!(check_card_answer(methods::LEMBAS_QUESTION, &q, &ok).is_none());
        let unoffered = json!({"outcome": "answered", "answers": [{"kind": "options", "labels": ["Z"]}, {"kind": "skipped"}]});
        assert!(check_card_answer(methods::LEMBAS_QUESTION, &q, &unoffered).is_some());
        let short = json!({"outcome": "answered", "answers": [{"kind": "skipped"}]});
        assert!(check_card_answer(methods::LEMBAS_QUESTION, &q, &short).is_some());

        assert!(
            check_card_answer(
                methods::LEMBAS_PLAN,
                &json!({}),
                &json!({"outcome": "approve", "mode": "edit"})
            )
            .is_none()
        );
        assert!(
            check_card_answer(
                methods::LEMBAS_PLAN,
                &json!({}),
                &json!({"outcome": "approve", "mode": "yolo"})
            )
            .is_some()
        );
        assert!(
            check_card_answer(
                methods::LEMBAS_PLAN,
                &json!({}),
                &json!({"outcome": "revise"})
            )
            .is_some()
        );
        assert!(check_card_answer(methods::SESSION_NEW, &json!({}), &json!({})).is_none());
    }
    use super::*;
    use harness::finding::rules_of;
    use serde_json::json;

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
    fn a_protocol_out_of_every_range_is_judged_as_said() {
        for said in [json!(-1), json!(1e308)] {
            let odd = json!({"protocolVersion": 1, "clientCapabilities": {"_meta": {"lembas": {"protocol": said}}}});
            let found = check_initialize(&odd, 2);
            assert_eq!(rules_of(&found), [ids::INSTANCE_INITIALIZE_PROTOCOL]);
            assert!(
                found[0].summary.contains(&said.to_string()),
                "says what came: {}",
                found[0].summary
            );
        }
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

/// Checks the client's answer to one of the device's cards (spec, `session/request_permission`,
/// `_lembas/question`, `_lembas/plan`): an approval chooses an option the card offered, or is
/// cancelled; questions get one answer of a defined kind per question, with offered labels; a
/// plan is approved in `edit` or `manual`, sent back with feedback, or dismissed. An error
/// answer is not judged here (it says the client does not take cards).
pub fn check_card_answer(method: &str, card: &Value, answer: &Value) -> Option<Finding> {
    use crate::methods::{plan, question, request_permission};
    match method {
        methods::SESSION_REQUEST_PERMISSION => request_permission::check_answer(card, answer),
        methods::LEMBAS_QUESTION => question::check_answer(card, answer),
        methods::LEMBAS_PLAN => plan::check_answer(card, answer),
        _ => None,
    }
}

/// Checks a request or notification of the instance's against the capabilities the device
/// listed: no method, nor `_meta.lembas` field, whose capability is missing (the spec's
/// capability table, [`harness::lembas::capabilities`]). Blocks are judged below, under their own
/// rule; text that would be expanded is no call at all (a device without the capability reads it
/// as plain text).
pub fn check_capabilities(method: &str, params: &Value, listed: &[&str]) -> Vec<Finding> {
    use harness::lembas::capabilities::{Mark, to_send};
    let has = |c: &str| listed.contains(&c);
    let mut found: Vec<Finding> = to_send(method, params)
        .into_iter()
        .filter(|need| {
            matches!(
                need.mark,
                Mark::Method(_) | Mark::Methods(_) | Mark::PromptMeta(_)
            )
        })
        .filter(|need| !has(need.capability))
        .map(|need| {
            Finding::new(
                ids::INSTANCE_CAPABILITIES_RESPECT,
                format!(
                    "the instance sends {}, but the device did not list `{}`",
                    need.what, need.capability
                ),
            )
        })
        .collect();
    // A prompt's blocks: their shapes and sizes, and attachments only to a device that takes
    // them (spec, session/prompt).
    if method == methods::SESSION_PROMPT
        && let Err(why) = crate::attachments::check(
            params.get("prompt").unwrap_or(&Value::Null),
            has("attachments"),
        )
    {
        found.push(Finding::new(
            ids::INSTANCE_PROMPT_BLOCKS,
            format!("a session/prompt the device cannot take: {why}"),
        ));
    }
    found
}

/// Checks configure's params (spec, `_lembas/configure`): the session as a string, and the
/// model and effort, each optional, as strings.
pub fn check_configure(params: &Value) -> Option<Finding> {
    let optional_text = |key: &str| match params.get(key) {
        None | Some(Value::Null) | Some(Value::String(_)) => None,
        Some(other) => Some(format!("`{key}` is {other}, not a string")),
    };
    let faults: Vec<String> = [
        (!params.get("sessionId").is_some_and(Value::is_string))
            .then(|| "`sessionId` is not a string".to_string()),
        optional_text("model"),
        optional_text("effort"),
    ]
    .into_iter()
    .flatten()
    .collect();
    (!faults.is_empty()).then(|| {
        Finding::new(
            ids::INSTANCE_CONFIGURE_SHAPE,
            format!(
                "`_lembas/configure` is not shaped as the spec says: {}",
                faults.join("; ")
            ),
        )
        .with_detail(format!(
            "expected {{sessionId: string, model?: string, effort?: string}}; received: {params}"
        ))
    })
}

#[cfg(test)]
mod configure_tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn configure_params_are_strings_where_given() {
        for good in [
            json!({ "sessionId": "ses_a", "model": "fake/deep" }),
            json!({ "sessionId": "ses_a", "effort": "off" }),
            json!({ "sessionId": "ses_a", "model": null, "effort": "high" }),
            json!({ "sessionId": "ses_a" }),
        ] {
            assert!(check_configure(&good).is_none(), "{good}");
        }
        for bad in [
            json!({ "sessionId": "ses_a", "effort": false }),
            json!({ "sessionId": "ses_a", "model": { "id": "deep" } }),
            json!({ "effort": "off" }),
        ] {
            let found = check_configure(&bad).map(|f| f.rule);
            assert_eq!(
                found.as_deref(),
                Some(ids::INSTANCE_CONFIGURE_SHAPE),
                "{bad}"
            );
        }
        let shown = check_configure(&json!({ "sessionId": "ses_a", "effort": false }))
            .and_then(|f| f.detail)
            .unwrap_or_default();
        assert!(shown.contains("\"effort\":false"), "{shown}");
    }
}

#[cfg(test)]
mod capability_tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn methods_and_fields_beyond_the_listed_capabilities_are_found() {
        let listed = ["status", "turns"];
        assert!(check_capabilities(methods::LEMBAS_SESSION_STATUS, &json!({}), &listed).is_empty());
        assert_eq!(
            check_capabilities(methods::LEMBAS_SESSION_REWIND, &json!({}), &listed).len(),
            1
        );
        assert_eq!(
            check_capabilities(methods::LEMBAS_TERMINAL_OPEN, &json!({}), &listed).len(),
            1
        );
        let prompt =
            json!({"prompt": [], "_meta": {"lembas": {"turnId": "t1", "library": {"bases": []}}}});
        let found = check_capabilities(methods::SESSION_PROMPT, &prompt, &listed);
        assert_eq!(found.len(), 1, "turnId is listed, library is not");
        assert!(found[0].summary.contains("library"));
        assert!(check_capabilities(methods::SESSION_CANCEL, &json!({}), &[]).is_empty());
    }
}
