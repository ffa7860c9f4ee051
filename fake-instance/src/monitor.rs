//! The rules that bind a device, checked on whatever a linked device sends, whether or not a
//! scenario runs. Pure functions from messages to findings, so each is tested on its own.

use harness::finding::Finding;
use harness::lembas::Spec;
use harness::lembas::methods;
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
    Some(harness::shapes::mismatch(rule, what, &outcome, value))
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
const VERSION_PATTERN: &str = r"^[0-9]+\.[0-9]+\.[0-9]+([-+][0-9A-Za-z.+-]*)?$";

/// Whether `text` is a version no older than `first` (compared by major, minor and patch).
pub fn is_version_from(text: &str, first: &str) -> bool {
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

/// What one link has said so far, for the rules that depend on it: what the client said in
/// initialize, what the device listed, and the sessions the client knows (made, named, announced).
#[derive(Debug, Default)]
pub struct LinkWatch {
    /// Whether our initialize said `_meta.lembas`, and at which protocol (`None`: not yet).
    client: Option<(bool, u8)>,
    /// The device's capabilities.
    capabilities: Vec<String>,
    /// The sessions the client knows.
    sessions: std::collections::HashSet<String>,
    /// The device's modes: its `max_mode`, and those each session opened here offered.
    modes: crate::mode_watch::ModeWatch,
    /// The plan updates and `plan` events of each session, held to each other.
    plans: crate::plan_watch::PlanWatch,
    /// The rules that need what the link said before (hello, capabilities, turns, sessions).
    rules: crate::link_rules::LinkRules,
    /// The terminals of this link whose `exit` came: nothing more may come for them.
    ended_terminals: std::collections::HashSet<String>,
}

/// Methods a device sends about one session.
const ABOUT_A_SESSION: [&str; 5] = [
    methods::SESSION_UPDATE,
    methods::LEMBAS_EVENT,
    methods::SESSION_REQUEST_PERMISSION,
    methods::LEMBAS_QUESTION,
    methods::LEMBAS_PLAN,
];

impl LinkWatch {
    /// Knows a session the client holds from before this link (a chat made on an earlier link,
    /// or before a restart): its updates are no stranger's.
    pub fn know(&mut self, session_id: &str) {
        self.sessions.insert(session_id.to_string());
    }

    /// The sessions the client knows, as far as this link has seen.
    pub fn sessions(&self) -> impl Iterator<Item = &String> {
        self.sessions.iter()
    }

    /// Learns from a message this side sent: initialize's protocol, the sessions it names.
    pub fn sent(&mut self, message: &Value) {
        let params = message.get("params");
        if message.get("method").and_then(Value::as_str) == Some(methods::INITIALIZE) {
            let lembas = params.and_then(|p| p.pointer("/clientCapabilities/_meta/lembas"));
            let protocol = match lembas {
                Some(Value::Object(o)) => o.get("protocol").and_then(Value::as_u64).unwrap_or(1),
                _ => 1,
            };
            self.client = Some((lembas.is_some(), u8::try_from(protocol).unwrap_or(1)));
        }
        if let Some(id) = params
            .and_then(|p| p.get("sessionId"))
            .and_then(Value::as_str)
        {
            self.sessions.insert(id.to_string());
        }
    }

    /// Checks an answer of the device's, and learns from it (capabilities, new sessions).
    pub fn response(
        &mut self,
        method: &str,
        request_params: &Value,
        outcome: &Result<Value, Value>,
    ) -> Vec<Finding> {
        let mut found = self.rules.response(method, request_params, outcome);
        found.extend(self.judge_response(method, request_params, outcome));
        found
    }

    fn judge_response(
        &mut self,
        method: &str,
        request_params: &Value,
        outcome: &Result<Value, Value>,
    ) -> Vec<Finding> {
        let Ok(result) = outcome else {
            return Vec::new();
        };
        match method {
            methods::INITIALIZE => {
                let found = self.rules.initialized(result);
                self.capabilities = result
                    .pointer("/_meta/lembas/capabilities")
                    .and_then(Value::as_array)
                    .map(|l| {
                        l.iter()
                            .filter_map(Value::as_str)
                            .map(String::from)
                            .collect()
                    })
                    .unwrap_or_default();
                found
            }
            methods::SESSION_NEW => {
                if let Some(id) = result.get("sessionId").and_then(Value::as_str) {
                    self.sessions.insert(id.to_string());
                }
                self.modes.session_new(request_params, result)
            }
            methods::SESSION_PROMPT => {
                let sent = request_params
                    .pointer("/_meta/lembas/turnId")
                    .and_then(Value::as_str);
                let echoed = result
                    .pointer("/_meta/lembas/turnId")
                    .and_then(Value::as_str);
                match sent {
                    Some(sent)
                        if self.capabilities.iter().any(|c| c == "turns")
                            && echoed != Some(sent) =>
                    {
                        vec![Finding::new(
                            ids::DEVICE_PROMPT_TURN_ID,
                            format!(
                                "the answer to the prompt of turn `{sent}` says turnId {echoed:?}"
                            ),
                        )]
                    }
                    _ => Vec::new(),
                }
            }
            methods::LEMBAS_SESSION_COMPACT => shape(
                ids::DEVICE_COMPACT_RESULT,
                "the answer to `_lembas/session/compact`",
                json!({ "summary": "$string" }),
                result,
            )
            .into_iter()
            .collect(),
            methods::LEMBAS_CONFIGURE => shape(
                ids::DEVICE_CONFIGURE_RESULT,
                "the answer to `_lembas/configure`",
                json!({ "model": "$string", "effort": "$string" }),
                result,
            )
            .into_iter()
            .collect(),
            methods::LEMBAS_SESSION_STATUS => [
                shape(
                    ids::DEVICE_STATUS_HELD,
                    "the answer to `_lembas/session/status`",
                    json!({ "exists": "$boolean", "held": { "$one_of": ["here", "terminal", "none"] } }),
                    result,
                ),
                shape(
                    ids::DEVICE_STATUS_BUSY,
                    "the answer to `_lembas/session/status`",
                    json!({ "busy": "$boolean" }),
                    result,
                ),
            ]
            .into_iter()
            .flatten()
            .collect(),
            _ => Vec::new(),
        }
    }

    /// A terminal's `exit` comes once and ends it: a second `exit`, or `output` after it, for
    /// the same terminal breaks the rule (spec, `_lembas/terminal/output` and `exit`).
    fn terminal_notification(&mut self, method: &str, params: &Value) -> Option<Finding> {
        if !matches!(
            method,
            methods::LEMBAS_TERMINAL_OUTPUT | methods::LEMBAS_TERMINAL_EXIT
        ) {
            return None;
        }
        let id = params.get("terminalId").and_then(Value::as_str)?;
        if self.ended_terminals.contains(id) {
            return Some(Finding::new(
                ids::DEVICE_TERMINAL_NOTIFY_SHAPE,
                format!("`{method}` for terminal `{id}` after its `exit`"),
            ));
        }
        if method == methods::LEMBAS_TERMINAL_EXIT {
            self.ended_terminals.insert(id.to_string());
        }
        None
    }

    /// Checks a request or notification from the device.
    pub fn incoming(&mut self, method: &str, params: &Value) -> Vec<Finding> {
        let mut found = Vec::new();
        if method == methods::LEMBAS_HELLO {
            self.modes.hello(params);
            self.rules.hello(params);
        }
        found.extend(self.rules.incoming(method, params));
        found.extend(self.modes.incoming(method, params));
        found.extend(self.plans.incoming(method, params));
        found.extend(self.terminal_notification(method, params));
        let session = params.get("sessionId").and_then(Value::as_str);
        if method == methods::LEMBAS_SESSION_ANNOUNCE
            && let Some(id) = session
        {
            self.sessions.insert(id.to_string());
        }
        if ABOUT_A_SESSION.contains(&method)
            && let Some(id) = session
            && !self.sessions.contains(id)
        {
            found.push(Finding::new(
                ids::DEVICE_UPDATE_SESSION,
                format!("`{method}` names session `{id}`, which this client never made, named or was announced"),
            ));
        }
        if let Some((lembas, protocol)) = self.client {
            if method == methods::LEMBAS_EVENT && !lembas {
                found.push(Finding::new(
                    ids::DEVICE_EVENT_LEMBAS_ONLY,
                    "a `_lembas/event` to a client that did not say `_meta.lembas`",
                ));
            }
            if matches!(method, methods::LEMBAS_QUESTION | methods::LEMBAS_PLAN)
                && (!lembas || protocol < 2)
            {
                found.push(Finding::new(
                    ids::DEVICE_QUESTION_PROTOCOL,
                    format!(
                        "`{method}` to a client that said {}",
                        if lembas {
                            "protocol 1"
                        } else {
                            "no `_meta.lembas`"
                        }
                    ),
                ));
            }
        }
        found
    }
}

#[cfg(test)]
mod watch_tests {
    use super::*;

    fn rules_of(found: &[Finding]) -> Vec<&str> {
        found.iter().map(|f| f.rule.as_str()).collect()
    }

    #[test]
    fn compact_and_status_answers_are_checked_for_their_shape() {
        let mut watch = LinkWatch::default();
        let asked = json!({ "sessionId": "ses_a" });
        let compact = |watch: &mut LinkWatch, result: Value| {
            watch.response(methods::LEMBAS_SESSION_COMPACT, &asked, &Ok(result))
        };
        assert!(compact(&mut watch, json!({ "summary": "two turns" })).is_empty());
        assert_eq!(
            rules_of(&compact(&mut watch, json!({}))),
            [ids::DEVICE_COMPACT_RESULT]
        );
        let status = |watch: &mut LinkWatch, result: Value| {
            watch.response(methods::LEMBAS_SESSION_STATUS, &asked, &Ok(result))
        };
        let right = json!({ "sessionId": "ses_a", "exists": true, "held": "here", "busy": false, "title": "", "queued": [] });
        assert!(status(&mut watch, right.clone()).is_empty());
        let mut held_elsewhere = right.clone();
        held_elsewhere["held"] = json!("away");
        assert_eq!(
            rules_of(&status(&mut watch, held_elsewhere)),
            [ids::DEVICE_STATUS_HELD]
        );
        let mut busy_as_text = right;
        busy_as_text["busy"] = json!("no");
        assert_eq!(
            rules_of(&status(&mut watch, busy_as_text)),
            [ids::DEVICE_STATUS_BUSY]
        );
        // A refusal is judged by the scenario that asked, not by its shape.
        assert!(
            watch
                .response(
                    methods::LEMBAS_SESSION_STATUS,
                    &asked,
                    &Err(json!({ "code": -32602 }))
                )
                .is_empty()
        );
    }

    #[test]
    fn configure_answers_name_the_model_and_the_effort() {
        let mut watch = LinkWatch::default();
        let asked = json!({ "sessionId": "ses_a", "model": "fake/deep" });
        let mut configure = |result: Value| {
            rules_of(&watch.response(methods::LEMBAS_CONFIGURE, &asked, &Ok(result)))
                .into_iter()
                .map(String::from)
                .collect::<Vec<_>>()
        };
        assert!(configure(json!({ "model": "lembas/fake/deep", "effort": "off" })).is_empty());
        assert!(configure(json!({ "model": "fake/deep", "effort": "high" })).is_empty());
        let faults = [
            json!({}),
            json!({ "model": null, "effort": "off" }),
            json!({ "model": "fake/deep" }),
            json!({ "model": "fake/deep", "effort": false }),
        ];
        for fault in faults {
            assert_eq!(
                configure(fault.clone()),
                [ids::DEVICE_CONFIGURE_RESULT],
                "{fault}"
            );
        }
    }

    #[test]
    fn updates_for_unknown_sessions_and_cards_to_old_clients_are_found() {
        let mut watch = LinkWatch::default();
        watch.sent(&json!({"method": methods::INITIALIZE, "params": {"clientCapabilities": {"_meta": {"lembas": true}}}}));
        watch.response(
            methods::INITIALIZE,
            &json!({}),
            &Ok(json!({"_meta": {"lembas": {"capabilities": ["turns"]}}})),
        );
        watch.response(
            methods::SESSION_NEW,
            &json!({}),
            &Ok(json!({"sessionId": "ses_a"})),
        );
        assert!(
            watch
                .incoming(methods::SESSION_UPDATE, &json!({"sessionId": "ses_a"}))
                .is_empty()
        );
        assert_eq!(
            rules_of(&watch.incoming(methods::SESSION_UPDATE, &json!({"sessionId": "ses_ghost"}))),
            [ids::DEVICE_UPDATE_SESSION]
        );
        watch.incoming(
            methods::LEMBAS_SESSION_ANNOUNCE,
            &json!({"sessionId": "ses_t"}),
        );
        assert!(
            watch
                .incoming(methods::LEMBAS_EVENT, &json!({"sessionId": "ses_t"}))
                .is_empty()
        );
        assert_eq!(
            rules_of(&watch.incoming(methods::LEMBAS_QUESTION, &json!({"sessionId": "ses_a"}))),
            [ids::DEVICE_QUESTION_PROTOCOL]
        );
        let prompt = json!({"_meta": {"lembas": {"turnId": "t1"}}});
        assert!(
            watch
                .response(
                    methods::SESSION_PROMPT,
                    &prompt,
                    &Ok(json!({"_meta": {"lembas": {"turnId": "t1"}}}))
                )
                .is_empty()
        );
        assert_eq!(
            rules_of(&watch.response(methods::SESSION_PROMPT, &prompt, &Ok(json!({})))),
            [ids::DEVICE_PROMPT_TURN_ID]
        );
    }

    #[test]
    fn nothing_comes_for_a_terminal_after_its_exit() {
        let mut watch = LinkWatch::default();
        let output = json!({ "terminalId": "t1", "data": "aGk=" });
        let exit = json!({ "terminalId": "t1", "code": 0 });
        assert!(
            watch
                .incoming(methods::LEMBAS_TERMINAL_OUTPUT, &output)
                .is_empty()
        );
        assert!(
            watch
                .incoming(methods::LEMBAS_TERMINAL_EXIT, &exit)
                .is_empty()
        );
        assert!(
            watch
                .incoming(
                    methods::LEMBAS_TERMINAL_OUTPUT,
                    &json!({ "terminalId": "t2", "data": "" })
                )
                .is_empty(),
            "another terminal goes on"
        );
        assert_eq!(
            rules_of(&watch.incoming(methods::LEMBAS_TERMINAL_OUTPUT, &output)),
            [ids::DEVICE_TERMINAL_NOTIFY_SHAPE]
        );
        assert_eq!(
            rules_of(&watch.incoming(methods::LEMBAS_TERMINAL_EXIT, &exit)),
            [ids::DEVICE_TERMINAL_NOTIFY_SHAPE]
        );
    }

    #[test]
    fn events_to_a_plain_client_are_found() {
        let mut watch = LinkWatch::default();
        watch.sent(&json!({"method": methods::INITIALIZE, "params": {"clientCapabilities": {}}}));
        watch.sent(&json!({"method": methods::SESSION_PROMPT, "params": {"sessionId": "ses_a"}}));
        assert_eq!(
            rules_of(&watch.incoming(methods::LEMBAS_EVENT, &json!({"sessionId": "ses_a"}))),
            [ids::DEVICE_EVENT_LEMBAS_ONLY]
        );
    }
}
