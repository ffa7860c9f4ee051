//! The device's rules that hold on every message of a link and need what the link said before:
//! initialize agreeing with hello, each turn's `task` events paired, a listed capability's method
//! never answered method-not-found, the command list only with `commands` (after every
//! `session/new`, built-ins first), a made turn id in every answer, and a `model` event's
//! `instance` agreeing with initialize's `connection`. Part of
//! [`crate::monitor::LinkWatch`]; pure, so each rule is tested on its own.

use std::collections::{HashMap, HashSet};

use harness::finding::Finding;
use harness::jsonrpc::METHOD_NOT_FOUND;
use harness::lembas::{capabilities, methods};
use harness::rules::ids;
use serde_json::Value;

/// What one link has said that these rules depend on.
#[derive(Debug, Default)]
pub struct LinkRules {
    /// Hello's params, once it came.
    hello: Option<Value>,
    /// The capabilities initialize listed (`None`: not answered yet).
    listed: Option<Vec<String>>,
    /// Per session, the turns whose `task` start came on this link and whose end has not.
    open_turns: HashMap<String, HashSet<String>>,
    /// Per session, the turns whose `task` end came on this link.
    ended_turns: HashMap<String, HashSet<String>>,
    /// Sessions made by `session/new` on this link that have had no command list yet.
    awaiting_commands: HashSet<String>,
    /// initialize's `connection`: the device's name for this instance's login (`None`: not
    /// said; `Some(None)`: null, no login of this instance).
    connection: Option<Option<String>>,
}

/// The order of a command's kind in the set: built-ins, then custom commands, then skills.
fn kind_rank(command: &Value) -> Option<u8> {
    match command
        .pointer("/_meta/lembas/kind")
        .and_then(Value::as_str)?
    {
        "builtin" => Some(0),
        "custom" => Some(1),
        "skill" => Some(2),
        _ => None,
    }
}

/// A finding when a command list is not built-ins first, then custom commands, then skills.
fn check_order(commands: &Value, what: &str) -> Option<Finding> {
    let ranks: Vec<u8> = commands.as_array()?.iter().filter_map(kind_rank).collect();
    let sorted = ranks.windows(2).all(|pair| pair[0] <= pair[1]);
    (!sorted).then(|| {
        let names: Vec<&str> = commands
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|c| c.get("name").and_then(Value::as_str))
            .collect();
        Finding::new(
            ids::DEVICE_COMMANDS_BUILTINS_FIRST,
            format!("{what} is not built-ins, then custom commands, then skills"),
        )
        .with_detail(format!("in this order: {}", names.join(", ")))
    })
}

impl LinkRules {
    fn lists(&self, capability: &str) -> bool {
        self.listed
            .as_ref()
            .is_some_and(|l| l.iter().any(|c| c == capability))
    }

    /// Learns hello's params.
    pub fn hello(&mut self, params: &Value) {
        self.hello = Some(params.clone());
    }

    /// Checks initialize's result against hello (spec, `initialize` and `_lembas/hello`): the
    /// same harness spec, version, roots (in any order) and max_mode. Learns its capabilities.
    pub fn initialized(&mut self, result: &Value) -> Vec<Finding> {
        self.listed = Some(harness::lembas::answers::listed_capabilities(result));
        self.connection = result
            .pointer("/_meta/lembas/connection")
            .map(|c| c.as_str().map(String::from));
        let (Some(hello), Some(lembas)) = (&self.hello, result.pointer("/_meta/lembas")) else {
            return Vec::new();
        };
        let mut differs = Vec::new();
        if let Some(said) = lembas.get("harness_spec")
            && hello.get("harness_spec") != Some(said)
        {
            differs.push(format!(
                "harness_spec {said} where hello said {}",
                hello.get("harness_spec").unwrap_or(&Value::Null)
            ));
        }
        if let Some(said) = result.pointer("/agentInfo/version")
            && hello.get("version") != Some(said)
        {
            differs.push(format!(
                "agentInfo.version {said} where hello's version is {}",
                hello.get("version").unwrap_or(&Value::Null)
            ));
        }
        // `limits` is null only on serve --stdio, where there is no hello to agree with.
        if let (Some(limits), Some(said)) = (hello.get("limits"), lembas.get("limits"))
            && said.is_object()
        {
            let roots = |l: &Value| {
                let mut r: Vec<String> = l
                    .get("roots")
                    .and_then(Value::as_array)
                    .map(|a| a.iter().map(Value::to_string).collect())
                    .unwrap_or_default();
                r.sort();
                r
            };
            if roots(limits) != roots(said) {
                differs.push(format!(
                    "limits.roots {} where hello said {}",
                    said.get("roots").unwrap_or(&Value::Null),
                    limits.get("roots").unwrap_or(&Value::Null)
                ));
            }
            if said.get("max_mode") != limits.get("max_mode") {
                differs.push(format!(
                    "limits.max_mode {} where hello said {}",
                    said.get("max_mode").unwrap_or(&Value::Null),
                    limits.get("max_mode").unwrap_or(&Value::Null)
                ));
            }
        }
        if differs.is_empty() {
            return Vec::new();
        }
        vec![
            Finding::new(
                ids::DEVICE_INITIALIZE_MATCHES_HELLO,
                "initialize's answer does not say what the link's hello said",
            )
            .with_detail(differs.join("; ")),
        ]
    }

    /// Checks a request or notification of the device's.
    pub fn incoming(&mut self, method: &str, params: &Value) -> Vec<Finding> {
        let session = params.get("sessionId").and_then(Value::as_str);
        let mut found = Vec::new();
        if method == methods::SESSION_UPDATE
            && let Some(update) = params.get("update")
            && update.get("sessionUpdate").and_then(Value::as_str)
                == Some("available_commands_update")
        {
            if self.listed.is_some() && !self.lists("commands") {
                found.push(Finding::new(
                    ids::DEVICE_COMMANDS_CAPABILITY,
                    "an `available_commands_update` from a device that did not list `commands`",
                ));
            }
            if let Some(id) = session {
                self.awaiting_commands.remove(id);
            }
            if let Some(commands) = update.get("availableCommands") {
                found.extend(check_order(commands, "the `available_commands_update`"));
            }
        }
        if method == methods::LEMBAS_EVENT
            && let Some(id) = session
            && let Some(event) = params.get("event")
            && event.get("type").and_then(Value::as_str) == Some("task")
        {
            found.extend(self.task(id, event));
        }
        if method == methods::LEMBAS_EVENT
            && let Some(event) = params.get("event")
            && event.get("type").and_then(Value::as_str) == Some("model")
        {
            found.extend(self.model_event(event));
        }
        found
    }

    /// A `model` event: `instance` is true exactly when its `connection` is this link's
    /// instance's login, the `connection` initialize named (spec, `_lembas/event`).
    fn model_event(&self, event: &Value) -> Option<Finding> {
        let login = self.connection.as_ref()?;
        let said = event.get("instance").and_then(Value::as_bool)?;
        let through = event.get("connection").and_then(Value::as_str);
        let expected = login.is_some() && through == login.as_deref();
        (said != expected).then(|| {
            Finding::new(
                ids::DEVICE_EVENT_MODEL_INSTANCE,
                format!(
                    "a `model` event says instance {said} for connection {through:?}, where this link's instance is the device's connection {login:?}"
                ),
            )
            .with_detail(event.to_string())
        })
    }

    /// A `task` event: starts and ends pair up per turn (spec, `_lembas/event`). A turn that
    /// started on an earlier link may end on this one, so an end with no start here is no fault;
    /// a second end, or a second start while the first is open, is.
    fn task(&mut self, session: &str, event: &Value) -> Vec<Finding> {
        let Some(turn) = event.get("turnId").and_then(Value::as_str) else {
            return Vec::new();
        };
        let open = self.open_turns.entry(session.to_string()).or_default();
        let ended = self.ended_turns.entry(session.to_string()).or_default();
        let mut found = Vec::new();
        match event.get("state").and_then(Value::as_str) {
            Some("start") => {
                if !open.insert(turn.to_string()) {
                    found.push(Finding::new(
                        ids::DEVICE_EVENT_TASK_PAIRED,
                        format!("a second `task` start for turn `{turn}` of session `{session}` before its end"),
                    ));
                }
                ended.remove(turn);
                if self.awaiting_commands.remove(session) {
                    found.push(Finding::new(
                        ids::DEVICE_COMMANDS_AFTER_NEW,
                        format!("session `{session}`'s first turn started with no `available_commands_update` since its session/new"),
                    ));
                }
            }
            Some("end") => {
                open.remove(turn);
                if !ended.insert(turn.to_string()) {
                    found.push(Finding::new(
                        ids::DEVICE_EVENT_TASK_PAIRED,
                        format!("a second `task` end for turn `{turn}` of session `{session}`"),
                    ));
                }
            }
            _ => {}
        }
        found
    }

    /// Checks an answer of the device's to `method`, asked with `request_params`.
    pub fn response(
        &mut self,
        method: &str,
        request_params: &Value,
        outcome: &Result<Value, Value>,
    ) -> Vec<Finding> {
        let result = match outcome {
            Ok(result) => result,
            Err(error) => {
                let not_found = error.get("code").and_then(Value::as_i64) == Some(METHOD_NOT_FOUND);
                return match capabilities::of_method(method) {
                    // The capability table promises methods on the device's link, which opens
                    // with hello; an editor's stdio (no hello) may refuse the link-only ones.
                    Some(capability)
                        if not_found && self.lists(capability) && self.hello.is_some() =>
                    {
                        vec![Finding::new(
                            ids::DEVICE_CAPABILITIES_KEPT,
                            format!("`{method}` was answered method-not-found, though the device listed `{capability}`"),
                        )
                        .with_detail(error.to_string())]
                    }
                    _ => Vec::new(),
                };
            }
        };
        match method {
            methods::SESSION_NEW => {
                if self.lists("commands")
                    && let Some(id) = result.get("sessionId").and_then(Value::as_str)
                {
                    self.awaiting_commands.insert(id.to_string());
                }
                Vec::new()
            }
            methods::SESSION_PROMPT => {
                let mut found = Vec::new();
                let session = request_params.get("sessionId").and_then(Value::as_str);
                if let Some(id) = session
                    && self.awaiting_commands.remove(id)
                {
                    found.push(Finding::new(
                        ids::DEVICE_COMMANDS_AFTER_NEW,
                        format!("session `{id}`'s first prompt was answered with no `available_commands_update` since its session/new"),
                    ));
                }
                let sent = request_params.pointer("/_meta/lembas/turnId");
                let answered = result.pointer("/_meta/lembas/turnId");
                if sent.is_none() && self.lists("turns") && !answered.is_some_and(Value::is_string)
                {
                    found.push(Finding::new(
                        ids::DEVICE_TURNS_MADE_ID,
                        "the answer to a prompt sent without a turnId names no turn id the device made",
                    )
                    .with_detail(result.to_string()));
                }
                found
            }
            methods::LEMBAS_COMMANDS => result
                .get("commands")
                .and_then(|c| check_order(c, "the answer to `_lembas/commands`"))
                .into_iter()
                .collect(),
            _ => Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use harness::finding::rules_of;
    use serde_json::json;

    fn linked(capabilities: &[&str]) -> LinkRules {
        let mut rules = LinkRules::default();
        rules.hello(&json!({ "version": "1.3.0", "harness_spec": "1.1.0",
            "limits": { "roots": ["/a", "/b"], "max_mode": "edit", "require_trust": true } }));
        let found = rules.initialized(&json!({ "agentInfo": { "version": "1.3.0" },
            "_meta": { "lembas": { "harness_spec": "1.1.0", "capabilities": capabilities,
                "limits": { "roots": ["/b", "/a"], "max_mode": "edit" } } } }));
        assert!(found.is_empty(), "{found:?}");
        rules
    }

    #[test]
    fn initialize_must_say_what_hello_said() {
        let mut rules = LinkRules::default();
        rules.hello(&json!({ "version": "1.3.0", "harness_spec": "1.1.0",
            "limits": { "roots": [], "max_mode": "edit", "require_trust": true } }));
        let found = rules.initialized(&json!({ "agentInfo": { "version": "1.3.0" },
            "_meta": { "lembas": { "harness_spec": "1.1.0", "capabilities": [],
                "limits": { "roots": [], "max_mode": "auto" } } } }));
        assert_eq!(rules_of(&found), [ids::DEVICE_INITIALIZE_MATCHES_HELLO]);
    }

    #[test]
    fn a_model_event_says_instance_exactly_for_this_instances_login() {
        let mut rules = LinkRules::default();
        rules.initialized(&json!({ "_meta": { "lembas": { "connection": "lembas", "capabilities": ["model"] } } }));
        let model = |connection: &str, instance: bool| json!({ "sessionId": "s", "event": { "type": "model", "ref": "x/y", "effort": "off", "connection": connection, "instance": instance } });
        assert!(
            rules
                .incoming(methods::LEMBAS_EVENT, &model("lembas", true))
                .is_empty()
        );
        assert!(
            rules
                .incoming(methods::LEMBAS_EVENT, &model("local", false))
                .is_empty()
        );
        assert_eq!(
            rules_of(&rules.incoming(methods::LEMBAS_EVENT, &model("lembas", false))),
            [ids::DEVICE_EVENT_MODEL_INSTANCE]
        );
        assert_eq!(
            rules_of(&rules.incoming(methods::LEMBAS_EVENT, &model("local", true))),
            [ids::DEVICE_EVENT_MODEL_INSTANCE]
        );
    }

    #[test]
    fn task_events_pair_up_per_turn() {
        let mut rules = linked(&[]);
        let task = |state: &str, turn: &str| json!({ "sessionId": "s", "event": { "type": "task", "state": state, "turnId": turn } });
        let mut seen = |p: Value| rules.incoming(methods::LEMBAS_EVENT, &p);
        assert!(
            seen(task("end", "cut")).is_empty(),
            "started on an earlier link"
        );
        assert!(seen(task("start", "t1")).is_empty());
        assert!(seen(task("end", "t1")).is_empty());
        assert_eq!(
            rules_of(&seen(task("end", "t1"))),
            [ids::DEVICE_EVENT_TASK_PAIRED]
        );
        assert!(seen(task("start", "t2")).is_empty());
        assert_eq!(
            rules_of(&seen(task("start", "t2"))),
            [ids::DEVICE_EVENT_TASK_PAIRED]
        );
    }

    #[test]
    fn a_listed_method_is_never_method_not_found() {
        let mut rules = linked(&["compact"]);
        let missing = Err(json!({ "code": -32601, "message": "no" }));
        assert_eq!(
            rules_of(&rules.response(methods::LEMBAS_SESSION_COMPACT, &json!({}), &missing)),
            [ids::DEVICE_CAPABILITIES_KEPT]
        );
        let refused = Err(json!({ "code": -32602, "message": "working" }));
        assert!(
            rules
                .response(methods::LEMBAS_SESSION_COMPACT, &json!({}), &refused)
                .is_empty()
        );
        assert!(
            rules
                .response(methods::LEMBAS_SESSION_TITLE, &json!({}), &missing)
                .is_empty()
        );
    }

    #[test]
    fn command_lists_come_with_commands_after_each_new_session_in_order() {
        let update = |commands: Value| json!({ "sessionId": "s", "update": { "sessionUpdate": "available_commands_update", "availableCommands": commands } });
        let mut without = linked(&[]);
        assert_eq!(
            rules_of(&without.incoming(methods::SESSION_UPDATE, &update(json!([])))),
            [ids::DEVICE_COMMANDS_CAPABILITY]
        );
        let mut with = linked(&["commands", "turns"]);
        with.response(
            methods::SESSION_NEW,
            &json!({}),
            &Ok(json!({ "sessionId": "s" })),
        );
        let prompt = json!({ "sessionId": "s", "_meta": { "lembas": { "turnId": "t" } } });
        let answer = Ok(json!({ "_meta": { "lembas": { "turnId": "t" } } }));
        assert_eq!(
            rules_of(&with.response(methods::SESSION_PROMPT, &prompt, &answer)),
            [ids::DEVICE_COMMANDS_AFTER_NEW]
        );
        let kind = |name: &str, kind: &str| json!({ "name": name, "_meta": { "lembas": { "kind": kind } } });
        let right = json!([
            kind("compact", "builtin"),
            kind("deploy", "custom"),
            kind("release", "skill")
        ]);
        assert!(
            with.incoming(methods::SESSION_UPDATE, &update(right))
                .is_empty()
        );
        let wrong = json!([kind("deploy", "custom"), kind("compact", "builtin")]);
        assert_eq!(
            rules_of(&with.incoming(methods::SESSION_UPDATE, &update(wrong))),
            [ids::DEVICE_COMMANDS_BUILTINS_FIRST]
        );
    }

    #[test]
    fn a_prompt_without_a_turn_id_is_answered_with_a_made_one() {
        let mut rules = linked(&["turns"]);
        let bare = json!({ "sessionId": "s" });
        assert!(
            rules
                .response(
                    methods::SESSION_PROMPT,
                    &bare,
                    &Ok(json!({ "_meta": { "lembas": { "turnId": "turn_1" } } }))
                )
                .is_empty()
        );
        assert_eq!(
            rules_of(&rules.response(
                methods::SESSION_PROMPT,
                &bare,
                &Ok(json!({ "stopReason": "end_turn" }))
            )),
            [ids::DEVICE_TURNS_MADE_ID]
        );
    }
}
