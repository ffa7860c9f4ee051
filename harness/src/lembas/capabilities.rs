//! The capability table (spec, "Versions and discovery"): which capability each method, content
//! block, `_meta.lembas` field, session update, event and result field needs.
//!
//! One table serves both sides. fake-device judges an instance with it (LLeMbas never calls a
//! method, nor relies on a field, the device did not list), and fake-instance asks it before a
//! scenario step sends or expects something, so a run against a device that never claimed a
//! capability ends "not applicable" instead of failing.

use crate::lembas::methods;
use serde_json::{Map, Value};

/// Where a capability shows on the link.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mark {
    /// A method, of either side.
    Method(&'static str),
    /// Every method under this prefix.
    Methods(&'static str),
    /// A content block of this `type` in `session/prompt`.
    Block(&'static str),
    /// A field of `_meta.lembas` in `session/new` and `session/prompt` (the `Context`, the turn id).
    PromptMeta(&'static str),
    /// A text block of a prompt that the device expands as the TUI would: `/name` at the start
    /// (`Slash`) or an `@path` mention (`Mention`).
    Text(TextUse),
    /// A `session/update` of this `sessionUpdate` kind.
    Update(&'static str),
    /// A field of a `session/update`'s `update` (a JSON pointer below it).
    UpdateField(&'static str),
    /// A `_lembas/event` of this `type`.
    Event(&'static str),
    /// A field of every `_lembas/event`'s `event` (a JSON pointer below it).
    EventField(&'static str),
    /// A field of a method's result (method, JSON pointer below the result).
    ResultField(&'static str, &'static str),
    /// A field of a method's params (method, JSON pointer below the params).
    ParamsField(&'static str, &'static str),
}

/// How a prompt's text relies on the device's expander.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TextUse {
    /// A text starting with `/name`: a command (capability `commands`).
    Slash,
    /// `@path` in the text: a mention (capability `files`).
    Mention,
}

/// The table: each capability with the marks it promises, in the order of the spec's table.
pub const TABLE: &[(&str, Mark)] = &[
    ("directories", Mark::Method(methods::LEMBAS_DIRECTORIES)),
    ("configure", Mark::Method(methods::LEMBAS_CONFIGURE)),
    ("steer", Mark::Method(methods::LEMBAS_STEER)),
    (
        "steer",
        Mark::ResultField(methods::SESSION_PROMPT, "/_meta/lembas/unsent"),
    ),
    ("terminal", Mark::Methods("_lembas/terminal/")),
    ("sessions", Mark::Method(methods::LEMBAS_SESSION_HISTORY)),
    ("sessions", Mark::Method(methods::LEMBAS_SESSION_ANNOUNCE)),
    ("sessions", Mark::Method(methods::LEMBAS_SESSION_LEFT)),
    ("status", Mark::Method(methods::LEMBAS_SESSION_STATUS)),
    ("delete", Mark::Method(methods::LEMBAS_SESSION_DELETE)),
    ("delete", Mark::Method(methods::LEMBAS_SESSION_DELETED)),
    ("compact", Mark::Method(methods::LEMBAS_SESSION_COMPACT)),
    ("title", Mark::Method(methods::LEMBAS_SESSION_TITLE)),
    ("files", Mark::Method(methods::LEMBAS_FILES_SEARCH)),
    ("files", Mark::Text(TextUse::Mention)),
    ("commands", Mark::Method(methods::LEMBAS_COMMANDS)),
    ("commands", Mark::Update("available_commands_update")),
    ("commands", Mark::Text(TextUse::Slash)),
    ("attachments", Mark::Block("image")),
    ("attachments", Mark::Block("resource")),
    ("attachments", Mark::EventField("/attachments")),
    ("ask", Mark::Method(methods::LEMBAS_QUESTION)),
    ("plan", Mark::Method(methods::LEMBAS_PLAN)),
    ("model", Mark::Event("model")),
    (
        "model",
        Mark::ResultField(methods::INITIALIZE, "/_meta/lembas/connection"),
    ),
    ("turns", Mark::PromptMeta("turnId")),
    ("turns", Mark::EventField("/turnId")),
    (
        "turns",
        Mark::ResultField(methods::LEMBAS_SESSION_STATUS, "/turnId"),
    ),
    (
        "turns",
        Mark::ResultField(methods::LEMBAS_SESSION_STATUS, "/lastTurnId"),
    ),
    (
        "turns",
        Mark::ResultField(methods::LEMBAS_SESSION_STATUS, "/queued"),
    ),
    (
        "shell",
        Mark::ResultField(methods::LEMBAS_TERMINAL_OPEN, "/shell"),
    ),
    (
        "shell",
        Mark::ResultField(methods::LEMBAS_TERMINAL_OPEN, "/integration"),
    ),
    ("context", Mark::PromptMeta("system_prompt")),
    ("context", Mark::PromptMeta("personalization")),
    ("library", Mark::PromptMeta("library")),
    ("prototypes", Mark::PromptMeta("prototypes")),
    ("plan_state", Mark::UpdateField("/_meta/lembas/plan")),
    (
        "plan_state",
        Mark::ParamsField(methods::LEMBAS_PLAN, "/plan"),
    ),
    (
        "plan_state",
        Mark::ResultField(methods::LEMBAS_SESSION_STATUS, "/plan"),
    ),
    ("rewind", Mark::Method(methods::LEMBAS_SESSION_REWIND)),
];

/// A capability something needs, and what it was.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Need {
    /// The capability (`files`).
    pub capability: &'static str,
    /// Where it shows.
    pub mark: Mark,
    /// What needs it, for a person (`` `_lembas/files/search` ``, `an \`image\` block`).
    pub what: String,
}

impl std::fmt::Display for Need {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} needs `{}`", self.what, self.capability)
    }
}

/// The capability a method needs, if any (either side's methods).
pub fn of_method(method: &str) -> Option<&'static str> {
    method_entry(method).map(|(capability, _)| capability)
}

fn method_entry(method: &str) -> Option<(&'static str, Mark)> {
    TABLE.iter().find_map(|(capability, mark)| match mark {
        Mark::Method(m) if *m == method => Some((*capability, *mark)),
        Mark::Methods(prefix) if method.starts_with(prefix) => Some((*capability, *mark)),
        _ => None,
    })
}

/// Every capability a message the client sends needs: its method, its prompt's blocks and
/// expanded text, its `_meta.lembas` fields. `params` may be a pattern (a scenario's): only
/// literal keys and values count.
pub fn to_send(method: &str, params: &Value) -> Vec<Need> {
    let mut needs = Vec::new();
    if let Some((capability, mark)) = method_entry(method) {
        needs.push(Need {
            capability,
            mark,
            what: format!("`{method}`"),
        });
    }
    if matches!(method, methods::SESSION_NEW | methods::SESSION_PROMPT)
        && let Some(lembas) = params.pointer("/_meta/lembas").and_then(Value::as_object)
    {
        for (capability, mark) in TABLE {
            if let Mark::PromptMeta(field) = mark
                && lembas.contains_key(*field)
            {
                needs.push(Need {
                    capability,
                    mark: *mark,
                    what: format!("`_meta.lembas.{field}` on `{method}`"),
                });
            }
        }
    }
    if method == methods::SESSION_PROMPT {
        for block in params
            .get("prompt")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let kind = block.get("type").and_then(Value::as_str).unwrap_or("");
            for (capability, mark) in TABLE {
                if matches!(mark, Mark::Block(k) if *k == kind) {
                    needs.push(Need {
                        capability,
                        mark: *mark,
                        what: format!("a block of type `{kind}` in `session/prompt`"),
                    });
                }
            }
            if kind == "text"
                && let Some(text) = block.get("text").and_then(Value::as_str)
            {
                for (capability, mark) in TABLE {
                    if let Mark::Text(usage) = mark
                        && relies_on(text, *usage)
                    {
                        needs.push(Need {
                            capability,
                            mark: *mark,
                            what: match usage {
                                TextUse::Slash => format!("the command `{}`", first_word(text)),
                                TextUse::Mention => "an `@path` mention".to_string(),
                            },
                        });
                    }
                }
            }
        }
    }
    dedup(needs)
}

/// Every capability a message the agent sends needs, judged on a pattern of it (a scenario's
/// `expect`): its method, its update kind and fields, its event type and fields, its params.
pub fn to_receive(pattern: &Value) -> Vec<Need> {
    let mut needs = Vec::new();
    let Some(method) = pattern.get("method").and_then(Value::as_str) else {
        return needs;
    };
    let params = pattern.get("params").unwrap_or(&Value::Null);
    if let Some((capability, mark)) = method_entry(method) {
        needs.push(Need {
            capability,
            mark,
            what: format!("`{method}`"),
        });
    }
    let update = params.get("update").unwrap_or(&Value::Null);
    let event = params.get("event").unwrap_or(&Value::Null);
    for (capability, mark) in TABLE {
        let what = match mark {
            Mark::Update(kind) if method == methods::SESSION_UPDATE => {
                (update.get("sessionUpdate").and_then(Value::as_str) == Some(*kind))
                    .then(|| format!("a `{kind}` session update"))
            }
            Mark::UpdateField(pointer) if method == methods::SESSION_UPDATE => {
                has_field(update, pointer)
                    .then(|| format!("`update{}` on `session/update`", dotted(pointer)))
            }
            Mark::Event(kind) if method == methods::LEMBAS_EVENT => {
                (event.get("type").and_then(Value::as_str) == Some(*kind))
                    .then(|| format!("a `{kind}` event"))
            }
            Mark::EventField(pointer) if method == methods::LEMBAS_EVENT => {
                has_field(event, pointer)
                    .then(|| format!("`event{}` on `_lembas/event`", dotted(pointer)))
            }
            Mark::ParamsField(on, pointer) if *on == method => has_field(params, pointer)
                .then(|| format!("`params{}` on `{method}`", dotted(pointer))),
            _ => None,
        };
        if let Some(what) = what {
            needs.push(Need {
                capability,
                mark: *mark,
                what,
            });
        }
    }
    dedup(needs)
}

/// Every capability the fields of a result pattern need (`turnId` in a status, `shell` in a
/// terminal's).
pub fn in_result(method: &str, result: &Value) -> Vec<Need> {
    let needs = TABLE
        .iter()
        .filter_map(|(capability, mark)| match mark {
            Mark::ResultField(on, pointer) if *on == method && has_field(result, pointer) => {
                Some(Need {
                    capability,
                    mark: *mark,
                    what: format!("`{}` in the result of `{method}`", &dotted(pointer)[1..]),
                })
            }
            _ => None,
        })
        .collect();
    dedup(needs)
}

/// Whether a prompt's text relies on the expander this way.
pub fn relies_on(text: &str, usage: TextUse) -> bool {
    match usage {
        TextUse::Slash => {
            let word = first_word(text);
            word.len() > 1
                && word.starts_with('/')
                && word[1..]
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == ':')
        }
        TextUse::Mention => text
            .split_whitespace()
            .any(|word| word.len() > 1 && word.starts_with('@')),
    }
}

fn first_word(text: &str) -> &str {
    text.split_whitespace().next().unwrap_or("")
}

/// Whether a value (a message or a pattern) has a key at this pointer: a pattern's `$absent`
/// names the field as much as a value does, and so does any alternative of a `$one_of`.
fn has_field(value: &Value, pointer: &str) -> bool {
    let keys: Vec<&str> = pointer.split('/').filter(|k| !k.is_empty()).collect();
    names(value, &keys)
}

fn names(value: &Value, keys: &[&str]) -> bool {
    if let Some(alternatives) = value.get("$one_of").and_then(Value::as_array) {
        return alternatives.iter().any(|a| names(a, keys));
    }
    match keys {
        [] => true,
        [key, rest @ ..] => value
            .as_object()
            .and_then(|fields: &Map<String, Value>| fields.get(*key))
            .is_some_and(|below| names(below, rest)),
    }
}

/// `/_meta/lembas/plan` as `._meta.lembas.plan`.
fn dotted(pointer: &str) -> String {
    pointer.replace('/', ".")
}

fn dedup(needs: Vec<Need>) -> Vec<Need> {
    let mut kept: Vec<Need> = Vec::new();
    for need in needs {
        if !kept.iter().any(|k| k.capability == need.capability) {
            kept.push(need);
        }
    }
    kept
}

/// The first need of `needs` whose capability is not in `listed`.
pub fn first_unlisted<'a>(needs: &'a [Need], listed: &[String]) -> Option<&'a Need> {
    needs
        .iter()
        .find(|need| !listed.iter().any(|l| l == need.capability))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lembas::Spec;
    use serde_json::json;

    fn capabilities(needs: &[Need]) -> Vec<&'static str> {
        needs.iter().map(|n| n.capability).collect()
    }

    #[test]
    fn every_capability_in_the_table_is_the_spec_s() {
        for (capability, _) in TABLE {
            assert!(Spec::V1_1_0.defines(capability), "{capability}");
        }
        for capability in Spec::V1_1_0.capabilities() {
            assert!(
                TABLE.iter().any(|(c, _)| *c == capability),
                "{capability} has no mark in the table"
            );
        }
    }

    #[test]
    fn methods_of_both_sides_need_their_capability() {
        assert_eq!(of_method(methods::LEMBAS_FILES_SEARCH), Some("files"));
        assert_eq!(of_method(methods::LEMBAS_TERMINAL_INPUT), Some("terminal"));
        assert_eq!(of_method(methods::LEMBAS_QUESTION), Some("ask"));
        assert_eq!(of_method(methods::LEMBAS_SESSION_DELETED), Some("delete"));
        assert_eq!(of_method(methods::SESSION_PROMPT), None);
        assert_eq!(of_method(methods::LEMBAS_HELLO), None);
    }

    #[test]
    fn a_prompt_needs_what_its_blocks_fields_and_text_rely_on() {
        let prompt = json!({
            "sessionId": "s",
            "prompt": [
                { "type": "text", "text": "/compact now" },
                { "type": "text", "text": "look at @src/main.rs" },
                { "type": "image", "data": "", "mimeType": "image/png" },
                { "type": "resource_link", "uri": "file:///x" }
            ],
            "_meta": { "lembas": { "turnId": "t", "system_prompt": "be brief", "library": {} } }
        });
        assert_eq!(
            capabilities(&to_send(methods::SESSION_PROMPT, &prompt)),
            [
                "turns",
                "context",
                "library",
                "commands",
                "files",
                "attachments"
            ]
        );
        let plain = json!({ "prompt": [{ "type": "text", "text": "say hello to me@example" }] });
        assert!(to_send(methods::SESSION_PROMPT, &plain).is_empty());
        assert!(to_send(methods::SESSION_NEW, &json!({ "cwd": "/w" })).is_empty());
    }

    #[test]
    fn an_expected_message_needs_its_method_kind_and_fields() {
        let commands = json!({ "method": methods::SESSION_UPDATE, "params": { "update": { "sessionUpdate": "available_commands_update" } } });
        assert_eq!(capabilities(&to_receive(&commands)), ["commands"]);
        let task = json!({ "method": methods::LEMBAS_EVENT, "params": { "event": { "type": "task", "turnId": "t1" } } });
        assert_eq!(capabilities(&to_receive(&task)), ["turns"]);
        let model =
            json!({ "method": methods::LEMBAS_EVENT, "params": { "event": { "type": "model" } } });
        assert_eq!(capabilities(&to_receive(&model)), ["model"]);
        let plan = json!({ "method": methods::SESSION_UPDATE, "params": { "update": { "sessionUpdate": "plan", "_meta": { "lembas": { "plan": "$object" } } } } });
        assert_eq!(capabilities(&to_receive(&plan)), ["plan_state"]);
        let question = json!({ "method": methods::LEMBAS_QUESTION });
        assert_eq!(capabilities(&to_receive(&question)), ["ask"]);
        assert!(to_receive(&json!({ "method": methods::LEMBAS_HELLO })).is_empty());
        assert!(to_receive(&json!({ "params": {} })).is_empty());
    }

    #[test]
    fn result_fields_need_their_capability() {
        let status = json!({ "busy": false, "lastTurnId": "t1", "plan": null });
        assert_eq!(
            capabilities(&in_result(methods::LEMBAS_SESSION_STATUS, &status)),
            ["turns", "plan_state"]
        );
        assert!(in_result(methods::LEMBAS_SESSION_STATUS, &json!({ "exists": true })).is_empty());
        let either =
            json!({ "$one_of": [{ "busy": true, "turnId": "t9" }, { "turnId": "$none" }] });
        assert_eq!(
            capabilities(&in_result(methods::LEMBAS_SESSION_STATUS, &either)),
            ["turns"]
        );
        let unsent = json!({ "_meta": { "lembas": { "unsent": ["x"] } } });
        assert_eq!(
            capabilities(&in_result(methods::SESSION_PROMPT, &unsent)),
            ["steer"]
        );
    }

    #[test]
    fn the_first_unlisted_need_is_named() {
        let needs = to_send(
            methods::SESSION_PROMPT,
            &json!({ "prompt": [{ "type": "image" }], "_meta": { "lembas": { "turnId": "t" } } }),
        );
        let listed = vec!["turns".to_string()];
        let unmet = first_unlisted(&needs, &listed).expect("attachments is unlisted");
        assert_eq!(unmet.capability, "attachments");
        assert_eq!(
            unmet.to_string(),
            "a block of type `image` in `session/prompt` needs `attachments`"
        );
    }
}
