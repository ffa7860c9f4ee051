//! The rules that bind a device, checked on whatever a linked device sends, whether or not a
//! scenario runs. Pure functions from messages to findings, so each is tested on its own.

use harness::finding::Finding;
use harness::lembas::methods;
use harness::pattern::Pattern;
use harness::rules::ids;
use serde_json::{Value, json};

/// Checks `value` against a shape pattern; a mismatch becomes one finding with every
/// difference in its detail.
pub(crate) fn shape(rule: &str, what: &str, pattern: Value, value: &Value) -> Option<Finding> {
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
    /// What the spec lets the device's turns be, held to its events and answers.
    turns: harness::lembas::turn_model::TurnModel,
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
        self.turns.sent(message);
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

    /// Checks an answer of the device's to request `request_id`, and learns from it
    /// (capabilities, new sessions, the turns).
    pub fn response(
        &mut self,
        request_id: &Value,
        method: &str,
        request_params: &Value,
        outcome: &Result<Value, Value>,
    ) -> Vec<Finding> {
        let mut found = self.rules.response(method, request_params, outcome);
        found.extend(self.judge_response(method, request_params, outcome));
        let lists_turns = self.capabilities.iter().any(|c| c == "turns");
        found.extend(
            self.turns
                .answered(request_id, method, request_params, outcome, lists_turns),
        );
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
                self.capabilities = harness::lembas::answers::listed_capabilities(result);
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
        if method == methods::LEMBAS_EVENT {
            found.extend(self.turns.event(params));
        }
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
mod tests {
    use super::*;
    use harness::finding::rules_of;

    #[test]
    fn compact_and_status_answers_are_checked_for_their_shape() {
        let mut watch = LinkWatch::default();
        let asked = json!({ "sessionId": "ses_a" });
        let compact = |watch: &mut LinkWatch, result: Value| {
            watch.response(
                &json!(1),
                methods::LEMBAS_SESSION_COMPACT,
                &asked,
                &Ok(result),
            )
        };
        assert!(compact(&mut watch, json!({ "summary": "two turns" })).is_empty());
        assert_eq!(
            rules_of(&compact(&mut watch, json!({}))),
            [ids::DEVICE_COMPACT_RESULT]
        );
        let status = |watch: &mut LinkWatch, result: Value| {
            watch.response(
                &json!(1),
                methods::LEMBAS_SESSION_STATUS,
                &asked,
                &Ok(result),
            )
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
                    &json!(1),
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
            rules_of(&watch.response(&json!(1), methods::LEMBAS_CONFIGURE, &asked, &Ok(result)))
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
            &json!(1),
            methods::INITIALIZE,
            &json!({}),
            &Ok(json!({"_meta": {"lembas": {"capabilities": ["turns"]}}})),
        );
        watch.response(
            &json!(1),
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
                    &json!(1),
                    methods::SESSION_PROMPT,
                    &prompt,
                    &Ok(json!({"stopReason": "end_turn", "_meta": {"lembas": {"turnId": "t1"}}}))
                )
                .is_empty()
        );
        assert_eq!(
            rules_of(&watch.response(
                &json!(1),
                methods::SESSION_PROMPT,
                &prompt,
                &Ok(json!({"stopReason": "end_turn"}))
            )),
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
