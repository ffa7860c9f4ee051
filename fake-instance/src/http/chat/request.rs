//! A chat completion request, read leniently: the fields the fake needs, from whatever an
//! OpenAI-compatible client sends (a message's content may be a string, parts, or `null`).

use serde_json::Value;

/// How many offered tools a request's reading keeps, and how much of each name: peer input.
const MAX_TOOLS_KEPT: usize = 256;
const MAX_TOOL_NAME: usize = 128;

/// One message: its role and its text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Message {
    pub role: String,
    pub text: String,
}

/// What the fake reads of a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct ChatRequest {
    pub model: String,
    pub messages: Vec<Message>,
    pub stream: bool,
    /// `stream_options.include_usage`: a usage chunk before `[DONE]`.
    pub include_usage: bool,
    /// The names of the function tools the request offers the model (`tools`; `None`: the
    /// request has no `tools`).
    pub tools: Option<Vec<String>>,
}

impl ChatRequest {
    /// Reads a request body. Peer input: a missing or mistyped field is an error that names it.
    pub fn read(body: &Value) -> Result<ChatRequest, String> {
        // A model missing or not a string is read as "" and refused after the request is
        // journaled, so a step sees what such a device asked.
        let model = body
            .get("model")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        let messages = body
            .get("messages")
            .and_then(Value::as_array)
            .ok_or("`messages` must be a list")?
            .iter()
            .enumerate()
            .map(|(i, m)| message(m).ok_or(format!("`messages[{i}]` has no string `role`")))
            .collect::<Result<Vec<_>, _>>()?;
        let stream = flag(body.get("stream")).ok_or("`stream` must be a boolean")?;
        let include_usage = flag(
            body.get("stream_options")
                .and_then(|o| o.get("include_usage")),
        )
        .ok_or("`stream_options.include_usage` must be a boolean")?;
        // Leniently: a tool whose shape is not OpenAI's is one whose name the model cannot use.
        let tools = body.get("tools").and_then(Value::as_array).map(|tools| {
            tools
                .iter()
                .filter_map(|t| t.pointer("/function/name").and_then(Value::as_str))
                .map(|name| name.chars().take(MAX_TOOL_NAME).collect())
                .take(MAX_TOOLS_KEPT)
                .collect()
        });
        Ok(ChatRequest {
            model,
            messages,
            stream,
            include_usage,
            tools,
        })
    }

    /// The text of the last `user` message.
    pub fn last_user(&self) -> Option<&str> {
        self.messages
            .iter()
            .rev()
            .find(|m| m.role == "user")
            .map(|m| m.text.as_str())
    }

    /// The system text: every `system` or `developer` message, joined by newlines.
    pub fn system(&self) -> Option<String> {
        joined(
            self.messages
                .iter()
                .filter(|m| m.role == "system" || m.role == "developer"),
        )
    }

    /// The text of the `tool` messages that end the conversation, joined by newlines: present
    /// only when this request hands the model its tool calls' results.
    pub fn tool_result(&self) -> Option<String> {
        let trailing = self.messages.iter().rev().take_while(|m| m.role == "tool");
        let mut texts: Vec<&Message> = trailing.collect();
        texts.reverse();
        joined(texts.into_iter())
    }

    /// Which turn of the conversation this is: its count of `user` messages.
    pub fn turn_hint(&self) -> usize {
        self.messages.iter().filter(|m| m.role == "user").count()
    }

    /// A rough token count of everything sent: its words.
    pub fn words(&self) -> u64 {
        self.messages.iter().map(|m| words(&m.text)).sum()
    }
}

/// Words in a text: the fake's stand-in for tokens.
pub(super) fn words(text: &str) -> u64 {
    u64::try_from(text.split_whitespace().count()).unwrap_or(u64::MAX)
}

/// An optional boolean: absent or `null` is false; anything else but a boolean is `None`.
fn flag(value: Option<&Value>) -> Option<bool> {
    match value {
        None | Some(Value::Null) => Some(false),
        Some(Value::Bool(b)) => Some(*b),
        Some(_) => None,
    }
}

fn joined<'a>(messages: impl Iterator<Item = &'a Message>) -> Option<String> {
    let texts: Vec<&str> = messages.map(|m| m.text.as_str()).collect();
    (!texts.is_empty()).then(|| texts.join("\n"))
}

/// A message's role and text; `None` without a string role.
fn message(value: &Value) -> Option<Message> {
    let role = value.get("role")?.as_str()?.to_string();
    let text = match value.get("content") {
        Some(Value::String(s)) => s.clone(),
        // Parts: the text of the `text` ones, in order; images and the like carry none.
        Some(Value::Array(parts)) => parts
            .iter()
            .filter(|p| p.get("type").and_then(Value::as_str) == Some("text"))
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join(""),
        _ => String::new(),
    };
    Some(Message { role, text })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_tools_offered_are_read_by_name_and_their_absence_kept() {
        let offered = ChatRequest::read(&json!({
            "model": "m", "messages": [],
            "tools": [
                {"type": "function", "function": {"name": "bash", "parameters": {}}},
                {"type": "function", "function": {"name": "x".repeat(1000)}},
                {"type": "retrieval"},
            ],
        }))
        .expect("read");
        let tools = offered.tools.expect("offered");
        assert_eq!(tools[0], "bash");
        assert_eq!(tools[1].len(), MAX_TOOL_NAME, "a long name is cut");
        assert_eq!(
            tools.len(),
            2,
            "a tool with no function name is none the model can call"
        );
        let none = ChatRequest::read(&json!({"model": "m", "messages": []})).expect("read");
        assert_eq!(none.tools, None);
    }

    #[test]
    fn content_may_be_text_parts_or_null() {
        let request = ChatRequest::read(&json!({
            "model": "m",
            "messages": [
                {"role": "system", "content": "be brief"},
                {"role": "developer", "content": [{"type": "text", "text": "really"}]},
                {"role": "user", "content": [
                    {"type": "text", "text": "hello "},
                    {"type": "image_url", "image_url": {"url": "data:"}},
                    {"type": "text", "text": "there"}
                ]},
                {"role": "assistant", "content": null},
            ],
            "stream": true,
            "stream_options": {"include_usage": true},
            "tools": [{"type": "function"}]
        }))
        .expect("valid");
        assert_eq!(request.last_user(), Some("hello there"));
        assert_eq!(request.system().as_deref(), Some("be brief\nreally"));
        assert_eq!(request.tool_result(), None);
        assert_eq!(request.turn_hint(), 1);
        assert!(request.stream && request.include_usage);
    }

    #[test]
    fn a_broken_request_names_its_field() {
        // A model missing or mistyped is read as "" (refused once the request is journaled).
        for body in [json!({"messages": []}), json!({"model": 1, "messages": []})] {
            let request = ChatRequest::read(&body).expect("read");
            assert_eq!(request.model, "");
        }
        for (body, field) in [
            (json!({}), "messages"),
            (json!({"model": "m"}), "messages"),
            (
                json!({"model": "m", "messages": [{"content": "x"}]}),
                "messages[0]",
            ),
            (
                json!({"model": "m", "messages": [], "stream": "yes"}),
                "stream",
            ),
            (json!([1, 2]), "messages"),
        ] {
            let error = ChatRequest::read(&body).expect_err("invalid");
            assert!(error.contains(field), "{error}");
        }
    }
}
