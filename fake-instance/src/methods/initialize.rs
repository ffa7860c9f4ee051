//! `initialize`, which the instance sends as ACP's client: its params (the link's protocol in
//! `_meta.lembas`), when it goes (right after hello, before anything else on the link), and
//! what the instance checks in the device's answer (its shape, its protocol against hello's,
//! its capabilities against the spec).

use std::sync::Arc;
use std::time::Duration;

use harness::finding::Finding;
use harness::jsonrpc::{Peer, RpcError};
use harness::lembas::{Spec, methods};
use harness::rules::{Misbehaviours, ids};
use serde_json::{Value, json};

use crate::methods::hello::VERSION_PATTERN;
use crate::methods::links::OnLink;
use crate::monitor::shape;
use crate::settings::ClientKind;

/// What the instance gets wrong about initialize on purpose; all off by default.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Faults {
    /// Says `protocolVersion` 2 (initialize.shape).
    pub wrong_version: bool,
    /// Says no `clientCapabilities` at all (initialize.shape/no_capabilities).
    pub no_capabilities: bool,
    /// Says the other protocol than the link's (initialize.protocol).
    pub other_protocol: bool,
    /// Says the link's protocol as a string (initialize.protocol/as_string).
    pub protocol_as_string: bool,
    /// Sends no initialize after hello (initialize.after_hello).
    pub not_after_hello: bool,
    /// Sends it on the device's earliest other link (initialize.after_hello/other_link).
    pub other_link: bool,
    /// Opens a chat right behind it, unanswered (initialize.first).
    pub chat_first: bool,
    /// Sends a notification right behind it (initialize.first/notification).
    pub notification_first: bool,
    /// Calls a method the device may not have listed as soon as it answers
    /// (capabilities.respect).
    pub probes_unlisted: bool,
}

impl Faults {
    /// The initialize faults among `misbehave`.
    pub(crate) fn of(misbehave: &Misbehaviours) -> Self {
        let way = |id, name| misbehave.breaks_way(id, name);
        Self {
            wrong_version: misbehave.breaks(ids::INSTANCE_INITIALIZE_SHAPE),
            no_capabilities: way(ids::INSTANCE_INITIALIZE_SHAPE, "no_capabilities"),
            other_protocol: misbehave.breaks(ids::INSTANCE_INITIALIZE_PROTOCOL),
            protocol_as_string: way(ids::INSTANCE_INITIALIZE_PROTOCOL, "as_string"),
            not_after_hello: misbehave.breaks(ids::INSTANCE_INITIALIZE_AFTER_HELLO),
            other_link: way(ids::INSTANCE_INITIALIZE_AFTER_HELLO, "other_link"),
            chat_first: misbehave.breaks(ids::INSTANCE_INITIALIZE_FIRST),
            notification_first: way(ids::INSTANCE_INITIALIZE_FIRST, "notification"),
            probes_unlisted: misbehave.breaks(ids::INSTANCE_CAPABILITIES_RESPECT),
        }
    }

    /// ACP's order: the connection is initialized before anything else is sent on it (the
    /// official SDKs refuse any request before `initialize` is answered). A client that sends
    /// something right behind it on purpose has no such gate.
    pub(crate) fn opener(&self) -> Option<&'static str> {
        match self.chat_first || self.notification_first {
            true => None,
            false => Some(methods::INITIALIZE),
        }
    }
}

/// The `clientCapabilities._meta.lembas` a client of `kind` says on a link of `protocol`.
fn lembas_meta(kind: ClientKind, protocol: u8, faults: &Faults) -> Option<Value> {
    if kind == ClientKind::Plain {
        return None;
    }
    if faults.protocol_as_string {
        // Misbehaving: the link's protocol, as a string.
        return Some(json!({ "protocol": protocol.min(2).to_string() }));
    }
    Some(match (protocol >= 2) != faults.other_protocol {
        true => json!({ "protocol": 2 }),
        false => json!(true),
    })
}

/// The params of the initialize a client of `kind` sends on a link of `protocol`.
pub(crate) fn params(kind: ClientKind, protocol: u8, faults: &Faults) -> Value {
    let version = if faults.wrong_version { 2 } else { 1 };
    let mut capabilities = json!({});
    if let Some(lembas) = lembas_meta(kind, protocol, faults) {
        capabilities["_meta"] = json!({ "lembas": lembas });
    }
    if faults.no_capabilities {
        return json!({ "protocolVersion": version });
    }
    json!({ "protocolVersion": version, "clientCapabilities": capabilities })
}

/// Sends initialize on `target` now, its answer awaited aside (logged against `link`).
pub(crate) fn send(target: &Arc<Peer>, params: Value, patience: Duration, link: u32) {
    let answer = target.begin_request(methods::INITIALIZE, params, patience);
    tokio::spawn(async move {
        if let Err(e) = answer.await {
            tracing::info!(link, "initialize: {e}");
        }
    });
}

/// Initializes the link whose `hello` came. On the wire now, before any step sees the hello:
/// LLeMbas sends nothing before initialize, and a device judges every later request by what
/// initialize said. What the steps send next waits at the link's gate for initialize's answer
/// ([`Faults::opener`]).
pub(crate) fn after_hello(
    link: &OnLink<'_>,
    hello: &Value,
    params: Value,
    patience: Duration,
    faults: &Faults,
) {
    let peer = link.peer;
    // Misbehaving: the initialize goes on the device's earliest link still open, not on
    // the one whose hello it answers.
    let elsewhere = faults
        .other_link
        .then(|| {
            let mut others: Vec<u32> = link
                .links
                .lock()
                .map(|l| l.keys().copied().filter(|l| *l != peer.link()).collect())
                .unwrap_or_default();
            others.sort_unstable();
            others.into_iter().find_map(|l| link.hub.link(l))
        })
        .flatten();
    send(
        elsewhere.as_ref().unwrap_or(peer),
        params,
        patience,
        peer.link(),
    );
    if faults.notification_first {
        // Misbehaving (with no gate): a notification right behind initialize.
        peer.notify(
            methods::SESSION_CANCEL,
            json!({ "sessionId": "ses_before_initialized" }),
        );
    }
    if faults.chat_first {
        // Misbehaving (with no gate): a chat opened right behind initialize.
        let cwd = first_root(hello);
        let params = json!({ "cwd": cwd, "mcpServers": [] });
        unawaited(peer, methods::SESSION_NEW, params, patience);
    }
}

/// Sends a request whose answer nobody waits for (a misbehaving client's extra).
fn unawaited(peer: &Arc<Peer>, method: &str, params: Value, patience: Duration) {
    let answer = peer.begin_request(method, params, patience);
    tokio::spawn(async move {
        let _ = answer.await;
    });
}

/// The first root a hello names, or `/` when it names none.
fn first_root(hello: &Value) -> String {
    hello
        .pointer("/limits/roots/0")
        .and_then(Value::as_str)
        .unwrap_or("/")
        .to_string()
}

/// The device answered initialize (`request`: what this client said): the link is ready for
/// the chats, and the answer is judged against the link's hello and the spec.
pub(crate) fn on_answer(
    link: &OnLink<'_>,
    request: &Value,
    outcome: &Result<Value, RpcError>,
    spec: Spec,
    patience: Duration,
    faults: &Faults,
) {
    let peer = link.peer;
    let hello = link.hello_protocol();
    let lembas_client = request
        .pointer("/clientCapabilities/_meta/lembas")
        .is_some();
    if faults.probes_unlisted {
        // Misbehaving: a method the device may not have listed, right away.
        let params = json!({ "sessionId": "ses_probe" });
        unawaited(peer, methods::LEMBAS_SESSION_STATUS, params, patience);
    }
    if let Ok(result) = outcome {
        link.chats.ready(peer, result);
    }
    let outcome = outcome.clone().map_err(|e| e.to_value());
    for finding in check_initialize(&outcome, hello, spec, lembas_client) {
        link.found(finding);
    }
}

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
    use harness::finding::rules_of;

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
