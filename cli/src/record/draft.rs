//! Draft scenarios from a recorded session, one for each double.
//!
//! For fake-instance (testing a device), the instance's messages become what the double does
//! (`request` and `notify` steps, and handlers answering the device's requests) and the device's
//! become partial expectations. For fake-device (testing an instance), the instance's messages
//! become the expectations, and the device's own part is left to fake-device's default
//! behaviour. Values that change from run to run (ids, times, temporary paths) are matched as
//! `$string` or `$number`; a value the device said that the instance later sends back (a session
//! id, its root) is captured where the device said it and sent as `${vN}`.

use std::collections::BTreeMap;
use std::sync::LazyLock;

use regex::Regex;
use serde_json::{Map, Value, json};

/// One recorded message of the link.
#[derive(Debug, Clone)]
pub struct Recorded {
    /// The link, counting from 1.
    pub link: u32,
    /// Sent by the device (else by the instance).
    pub from_device: bool,
    /// The message.
    pub msg: Value,
}

/// How long a drafted step waits: generous, since a real peer under test may be slow.
const STEP_TIMEOUT: &str = "30s";

/// Strings that differ from run to run: made ids, uuids, times, absolute paths.
static VOLATILE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(concat!(
        r"^(?:",
        r"[A-Za-z]+[_-][0-9A-Za-z]{8,}",
        r"|[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}",
        r"|\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}.*",
        r"|/\S*",
        r"|[A-Za-z]:\\.*",
        r")$"
    ))
    .expect("a valid regex")
});

/// Whether a value differs from run to run.
fn volatile(value: &Value) -> bool {
    match value {
        Value::String(s) => VOLATILE.is_match(s),
        // Times in milliseconds or seconds since the epoch.
        Value::Number(n) => n.as_u64().is_some_and(|n| n >= 1_000_000_000),
        _ => false,
    }
}

/// A recorded value as a pattern that matches it on another run: volatile leaves become
/// `$string` or `$number`, and literal `$`s are escaped.
fn pattern_of(value: &Value) -> Value {
    match value {
        Value::String(_) | Value::Number(_) if volatile(value) => {
            json!(if value.is_string() {
                "$string"
            } else {
                "$number"
            })
        }
        // A `${` would be read as a variable: such a text is matched by type.
        Value::String(s) if s.contains("${") => json!("$string"),
        Value::String(s) => Value::String(pattern_literal(s)),
        Value::Array(items) => Value::Array(items.iter().map(pattern_of).collect()),
        Value::Object(fields) => Value::Object(
            fields
                .iter()
                .map(|(k, v)| (pattern_literal(k), pattern_of(v)))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// A literal string in a pattern: a leading `$` (an operator's mark) is escaped as `$$`.
fn pattern_literal(s: &str) -> String {
    if s.starts_with('$') {
        format!("${s}")
    } else {
        s.to_string()
    }
}

/// A literal string the double sends: only a `${` (a variable's mark) is escaped, as `$${`.
fn sent_literal(s: &str) -> String {
    s.replace("${", "$${")
}

/// The strings a device message holds worth capturing (long enough to be a value the instance
/// could only have learnt from it), with their paths from `root` (`params.limits.roots[0]`).
fn strings_with_paths(value: &Value, path: String, out: &mut Vec<(String, String)>) {
    match value {
        Value::String(s) if s.len() >= 6 => out.push((s.clone(), path)),
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                strings_with_paths(item, format!("{path}[{i}]"), out);
            }
        }
        Value::Object(fields) => {
            for (key, item) in fields {
                let simple = key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
                if simple {
                    strings_with_paths(item, format!("{path}.{key}"), out);
                }
            }
        }
        _ => {}
    }
}

/// What the draft has learnt of the device's values, to send them back as captures.
#[derive(Default)]
struct Captures {
    /// A device's string → the step that saw it, and its path there.
    seen: BTreeMap<String, (usize, String)>,
    /// A string already captured → its variable.
    named: BTreeMap<String, String>,
    /// The captures each step takes: step → variable → path.
    taken: BTreeMap<usize, BTreeMap<String, String>>,
}

impl Captures {
    fn learn(&mut self, step: usize, root: &str, value: &Value) {
        let mut found = Vec::new();
        strings_with_paths(value, root.to_string(), &mut found);
        for (s, path) in found {
            self.seen.entry(s).or_insert((step, path));
        }
    }

    /// A message the instance sends, with what it learnt from the device as `${vN}`; a string
    /// of `own` (a handler's request, by value → path) as `${params.…}`, which a handler reads
    /// from the request it answers.
    fn substitute(&mut self, value: &Value, own: &BTreeMap<String, String>) -> Value {
        match value {
            Value::String(s) => {
                if let Some(path) = own.get(s) {
                    return Value::String(format!("${{{path}}}"));
                }
                match self.seen.get(s).cloned() {
                    Some((step, path)) => {
                        let next = format!("v{}", self.named.len() + 1);
                        let name = self.named.entry(s.clone()).or_insert(next).clone();
                        self.taken
                            .entry(step)
                            .or_default()
                            .insert(name.clone(), path);
                        Value::String(format!("${{{name}}}"))
                    }
                    None => Value::String(sent_literal(s)),
                }
            }
            Value::Array(items) => {
                Value::Array(items.iter().map(|v| self.substitute(v, own)).collect())
            }
            Value::Object(fields) => Value::Object(
                fields
                    .iter()
                    .map(|(k, v)| (sent_literal(k), self.substitute(v, own)))
                    .collect(),
            ),
            other => other.clone(),
        }
    }
}

/// The messages of the first link, and how many links there were.
fn first_link(messages: &[Recorded]) -> (Vec<&Recorded>, usize) {
    let mut links: Vec<u32> = messages.iter().map(|m| m.link).collect();
    links.sort_unstable();
    links.dedup();
    let first = links.first().copied().unwrap_or(1);
    (
        messages.iter().filter(|m| m.link == first).collect(),
        links.len(),
    )
}

fn method(msg: &Value) -> Option<&str> {
    msg.get("method").and_then(Value::as_str)
}

fn is_request(msg: &Value) -> bool {
    method(msg).is_some() && msg.get("id").is_some()
}

fn is_response(msg: &Value) -> bool {
    method(msg).is_none() && msg.get("id").is_some()
}

/// The scenario fake-instance runs to play the recorded instance against a device.
pub fn for_instance(name: &str, messages: &[Recorded]) -> Value {
    let (link, links) = first_link(messages);
    let mut draft = InstanceDraft {
        steps: vec![json!({ "expect_link": { "within": STEP_TIMEOUT } })],
        captures: Captures::default(),
        handlers: Vec::new(),
    };
    // The device's answers, by the id of the instance's request they answer.
    let answers: BTreeMap<String, &Value> = link
        .iter()
        .filter(|m| m.from_device && is_response(&m.msg))
        .filter_map(|m| m.msg.get("id").map(|id| (id.to_string(), &m.msg)))
        .collect();
    for recorded in &link {
        let msg = &recorded.msg;
        // An answer is folded into the step of the request it answers (the device's), or given
        // by a handler (the instance's).
        if is_response(msg) {
            continue;
        }
        let Some(method) = method(msg) else { continue };
        match recorded.from_device {
            true => draft.expect_from_device(&link, msg, method),
            false => draft.send_as_instance(&answers, msg, method),
        }
    }
    draft.into_scenario(name, links)
}

/// A fake-instance scenario being drafted: its steps, the values later steps take from earlier
/// ones, and the handlers that answer the device's requests.
struct InstanceDraft {
    steps: Vec<Value>,
    captures: Captures,
    handlers: Vec<Value>,
}

impl InstanceDraft {
    /// A message of the device's: expected; a request of its is answered by a handler giving
    /// the instance's recorded answer (from the first request of its method).
    fn expect_from_device(&mut self, link: &[&Recorded], msg: &Value, method: &str) {
        let index = self.steps.len();
        self.captures
            .learn(index, "params", msg.get("params").unwrap_or(&Value::Null));
        let mut expect = Map::new();
        expect.insert("method".into(), json!(method));
        if let Some(params) = msg.get("params") {
            expect.insert("params".into(), pattern_of(params));
        }
        expect.insert("timeout".into(), json!(STEP_TIMEOUT));
        self.steps.push(json!({ "expect": expect }));
        if !is_request(msg) {
            return;
        }
        let answered = link
            .iter()
            .find(|m| !m.from_device && is_response(&m.msg) && m.msg.get("id") == msg.get("id"));
        let Some(answer) = answered else { return };
        if self.handlers.iter().any(|h| h["method"] == json!(method)) {
            return;
        }
        // A value of the request itself is read from the request being answered: the handler
        // answers before any step could capture it.
        let mut found = Vec::new();
        strings_with_paths(
            msg.get("params").unwrap_or(&Value::Null),
            "params".into(),
            &mut found,
        );
        let own: BTreeMap<String, String> = found.into_iter().collect();
        let mut handler = Map::new();
        handler.insert("method".into(), json!(method));
        for field in ["result", "error"] {
            if let Some(value) = answer.msg.get(field) {
                handler.insert(field.into(), self.captures.substitute(value, &own));
            }
        }
        self.handlers.push(Value::Object(handler));
    }

    /// A message of the instance's: what the double sends, a request with the device's
    /// recorded answer as what it awaits.
    fn send_as_instance(&mut self, answers: &BTreeMap<String, &Value>, msg: &Value, method: &str) {
        let params = msg
            .get("params")
            .map(|p| self.captures.substitute(p, &BTreeMap::new()));
        if !is_request(msg) {
            let mut notify = Map::new();
            notify.insert("method".into(), json!(method));
            if let Some(params) = params {
                notify.insert("params".into(), params);
            }
            self.steps.push(json!({ "notify": notify }));
            return;
        }
        let index = self.steps.len();
        let mut request = Map::new();
        request.insert("method".into(), json!(method));
        if let Some(params) = params {
            request.insert("params".into(), params);
        }
        if let Some(answer) = msg.get("id").and_then(|id| answers.get(&id.to_string())) {
            for field in ["result", "error"] {
                if let Some(value) = answer.get(field) {
                    request.insert(field.into(), pattern_of(value));
                    self.captures.learn(index, field, value);
                }
            }
        }
        request.insert("timeout".into(), json!(STEP_TIMEOUT));
        if method == harness::lembas::methods::INITIALIZE {
            // Its answer is where the device says what it claims: nothing to wait for first.
            request.insert("unlisted".into(), json!(true));
        }
        self.steps.push(json!({ "request": request }));
    }

    /// The scenario: each step takes the captures a later message of the instance needs.
    fn into_scenario(mut self, name: &str, links: usize) -> Value {
        for (index, taken) in self.captures.taken {
            if let Some(Value::Object(step)) = self.steps.get_mut(index)
                && let Some(Value::Object(inner)) = step.values_mut().next()
            {
                inner.insert("capture".into(), json!(taken));
            }
        }
        let mut about = "Recorded from a device and an instance: the instance's messages are \
                         sent as they were, the device's are expected, ids and times matched by \
                         type."
            .to_string();
        if links > 1 {
            about.push_str(&format!(
                " Only the first of the {links} links recorded is drafted."
            ));
        }
        let mut scenario = Map::new();
        scenario.insert("name".into(), json!(name));
        scenario.insert("about".into(), json!(about));
        // The steps send initialize themselves, as the recorded instance did.
        scenario.insert("instance".into(), json!({ "initialize": "manual" }));
        if !self.handlers.is_empty() {
            scenario.insert("handlers".into(), Value::Array(self.handlers));
        }
        scenario.insert("steps".into(), Value::Array(self.steps));
        Value::Object(scenario)
    }
}

/// The scenario fake-device runs to play the recorded device against an instance: the
/// instance's requests and notifications, expected in order; the device answers them as its
/// default behaviour does.
pub fn for_device(name: &str, messages: &[Recorded]) -> Value {
    let (link, links) = first_link(messages);
    let mut steps = Vec::new();
    for recorded in link.iter().filter(|m| !m.from_device) {
        let msg = &recorded.msg;
        let Some(method) = method(msg) else { continue };
        let mut expect = Map::new();
        expect.insert("method".into(), json!(method));
        if let Some(params) = msg.get("params") {
            expect.insert("params".into(), pattern_of(params));
        }
        expect.insert("timeout".into(), json!(STEP_TIMEOUT));
        steps.push(json!({ "expect": expect }));
    }
    let mut about = "Recorded from a device and an instance: the instance's requests and \
                     notifications are expected as they came, ids and times matched by type; \
                     the device answers as fake-device does by default."
        .to_string();
    if links > 1 {
        about.push_str(&format!(
            " Only the first of the {links} links recorded is drafted."
        ));
    }
    json!({ "name": name, "about": about, "steps": steps })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn device(msg: Value) -> Recorded {
        Recorded {
            link: 1,
            from_device: true,
            msg,
        }
    }

    fn instance(msg: Value) -> Recorded {
        Recorded {
            link: 1,
            from_device: false,
            msg,
        }
    }

    #[test]
    fn the_instance_sends_back_what_the_device_said_as_captures() {
        let recorded = vec![
            device(
                json!({"jsonrpc": "2.0", "method": "_lembas/hello", "params": {"protocol": 2, "limits": {"roots": ["/tmp/x/root"]}}}),
            ),
            instance(
                json!({"jsonrpc": "2.0", "id": 1, "method": "session/new", "params": {"cwd": "/tmp/x/root"}}),
            ),
            device(
                json!({"jsonrpc": "2.0", "id": 1, "result": {"sessionId": "ses_0123456789abcdef"}}),
            ),
            instance(
                json!({"jsonrpc": "2.0", "id": 2, "method": "session/prompt", "params": {"sessionId": "ses_0123456789abcdef", "prompt": [{"type": "text", "text": "$5 for ${HOME}"}]}}),
            ),
            device(json!({"jsonrpc": "2.0", "id": 2, "result": {"stopReason": "end_turn"}})),
        ];
        let draft = for_instance("recorded", &recorded);
        let steps = draft["steps"].as_array().expect("steps");
        assert_eq!(
            steps[1]["expect"]["params"]["limits"]["roots"][0], "$string",
            "a path is matched by type"
        );
        assert_eq!(
            steps[1]["expect"]["capture"]["v1"],
            "params.limits.roots[0]"
        );
        assert_eq!(steps[2]["request"]["params"]["cwd"], "${v1}");
        assert_eq!(steps[2]["request"]["result"]["sessionId"], "$string");
        assert_eq!(steps[2]["request"]["capture"]["v2"], "result.sessionId");
        assert_eq!(steps[3]["request"]["params"]["sessionId"], "${v2}");
        assert_eq!(
            steps[3]["request"]["params"]["prompt"][0]["text"], "$5 for $${HOME}",
            "what is sent escapes only a variable's mark"
        );
        assert_eq!(steps[3]["request"]["result"]["stopReason"], "end_turn");
        assert_eq!(draft["instance"]["initialize"], "manual");
    }

    #[test]
    fn the_devices_requests_are_answered_by_handlers_as_the_instance_did() {
        let recorded = vec![
            device(
                json!({"jsonrpc": "2.0", "id": 7, "method": "session/request_permission", "params": {"toolCall": {"toolCallId": "call_0123456789"}, "options": [{"optionId": "allow-once"}, {"optionId": "$weird"}]}}),
            ),
            instance(
                json!({"jsonrpc": "2.0", "id": 7, "result": {"outcome": {"outcome": "selected", "optionId": "allow-once"}}}),
            ),
        ];
        let draft = for_instance("recorded", &recorded);
        assert_eq!(draft["handlers"][0]["method"], "session/request_permission");
        assert_eq!(
            draft["handlers"][0]["result"]["outcome"]["optionId"], "${params.options[0].optionId}",
            "a value of the request is read from the request being answered"
        );
        assert_eq!(
            draft["steps"][1]["expect"]["params"]["options"][1]["optionId"], "$$weird",
            "a pattern escapes a leading `$`"
        );
        let device_draft = for_device("recorded", &recorded);
        assert_eq!(
            device_draft["steps"].as_array().map(Vec::len),
            Some(0),
            "an answer is not something fake-device expects"
        );
    }
}
