//! The chat model's script: which requests a script answers (`when`), and what it says
//! (`reply`), faults included.

use serde::{Deserialize, Deserializer};

use super::request::ChatRequest;

/// A regular expression from the configuration, compiled when the configuration is read so a
/// bad one is an error there, not at the first request.
#[derive(Debug, Clone)]
pub struct Pattern(pub regex::Regex);

impl<'de> Deserialize<'de> for Pattern {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        regex::Regex::new(&text)
            .map(Pattern)
            .map_err(serde::de::Error::custom)
    }
}

/// In the schema, a pattern is the regular expression's text.
impl schemars::JsonSchema for Pattern {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "ChatPattern".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({ "type": "string", "format": "regex" })
    }
}

impl Pattern {
    /// Whether the text is there and matches.
    fn finds(&self, text: Option<&str>) -> bool {
        text.is_some_and(|t| self.0.is_match(t))
    }
}

/// One scripted answer.
#[derive(Debug, Clone, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct ChatScript {
    /// Which requests it answers; empty: every request.
    pub when: When,
    /// What it says.
    pub reply: Reply,
    /// Answer at most this many requests, then let later ones go to the next script (a 429
    /// once, then the answer); `None`: every matching request.
    pub times: Option<u32>,
}

/// What a request must look like; every condition given must hold.
#[derive(Debug, Clone, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct When {
    /// The text of the last `user` message.
    pub last_user: Option<Pattern>,
    /// The text of the `system` (or `developer`) messages, joined by newlines.
    pub system: Option<Pattern>,
    /// The requested model, as sent.
    pub model: Option<Pattern>,
    /// The text of the `tool` messages that end the conversation (the request answers a tool
    /// call); a request that does not end with one never matches.
    pub tool_result: Option<Pattern>,
}

impl When {
    /// Whether the request matches.
    pub(super) fn matches(&self, request: &ChatRequest) -> bool {
        let system = request.system();
        let tool_result = request.tool_result();
        let checks = [
            (&self.last_user, request.last_user()),
            (&self.system, system.as_deref()),
            (&self.model, Some(request.model.as_str())),
            (&self.tool_result, tool_result.as_deref()),
        ];
        checks
            .into_iter()
            .all(|(pattern, text)| pattern.as_ref().is_none_or(|p| p.finds(text)))
    }
}

/// What the model says.
#[derive(Debug, Clone, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct Reply {
    /// The answer's text (streamed word by word). Neither this nor `chunks`: the last user
    /// message's text, echoed, unless there are tool calls (then no text).
    pub text: Option<String>,
    /// The answer's text as these stream deltas exactly; wins over `text`.
    pub chunks: Option<Vec<String>>,
    /// A pause between stream events.
    pub chunk_delay_ms: u64,
    /// Reasoning (`reasoning_content`), streamed before the text.
    pub reasoning: Option<String>,
    /// Tool calls the model makes.
    pub tool_calls: Vec<ToolCallScript>,
    /// Stream each tool call's argument fragments after its first without `index`, which the
    /// spec's change note says continues the last call.
    pub omit_index_on_continuations: bool,
    /// `finish_reason`; default: `tool_calls` with tool calls, else `stop`.
    pub finish_reason: Option<String>,
    /// The usage reported; default: a count of words in and out.
    pub usage: Option<TokenUsage>,
    /// A fault instead of (or on the way to) the answer.
    pub fault: Option<Fault>,
}

/// A tool call the model makes.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ToolCallScript {
    /// Its id (`call_1`).
    pub id: String,
    /// The function's name.
    pub name: String,
    /// The arguments, as the JSON text the model writes (streamed in fragments).
    #[serde(default)]
    pub arguments: String,
}

/// Token counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct TokenUsage {
    /// Tokens in.
    pub prompt_tokens: u64,
    /// Tokens out.
    pub completion_tokens: u64,
}

/// Something going wrong, as a provider behind an instance goes wrong.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Fault {
    /// 429 with a `Retry-After` header.
    RateLimited {
        /// The header's seconds.
        retry_after_s: u64,
    },
    /// 500.
    ServerError,
    /// The answer stops part-way: a stream after this many events (the role delta is the
    /// first), without `[DONE]`; a whole answer after half its body.
    CutStream {
        /// Events sent before the cut.
        after_chunks: usize,
        /// Drop the connection at the cut, rather than end the body there cleanly.
        #[serde(default)]
        reset: bool,
    },
    /// Nothing at all (not even the status line) for this long, then the answer.
    SlowFirstByte {
        /// The wait.
        ms: u64,
    },
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn request(body: serde_json::Value) -> ChatRequest {
        ChatRequest::read(&body).expect("a valid request")
    }

    #[test]
    fn every_given_condition_must_hold() {
        let when: When = serde_json::from_value(json!({
            "last_user": "^list",
            "model": "echo$",
        }))
        .expect("valid");
        let asks = |model: &str, text: &str| {
            request(json!({"model": model, "messages": [{"role": "user", "content": text}]}))
        };
        assert!(when.matches(&asks("fake/echo", "list files")));
        assert!(!when.matches(&asks("fake/other", "list files")));
        assert!(!when.matches(&asks("fake/echo", "please list")));
        assert!(When::default().matches(&asks("x", "y")));
    }

    #[test]
    fn tool_result_needs_a_trailing_tool_message() {
        let when: When = serde_json::from_value(json!({"tool_result": "ok"})).expect("valid");
        let answered = request(json!({"model": "m", "messages": [
            {"role": "user", "content": "go"},
            {"role": "assistant", "content": null, "tool_calls": []},
            {"role": "tool", "tool_call_id": "c", "content": "ok"},
        ]}));
        assert!(when.matches(&answered));
        let later = request(json!({"model": "m", "messages": [
            {"role": "tool", "tool_call_id": "c", "content": "ok"},
            {"role": "user", "content": "again"},
        ]}));
        assert!(!when.matches(&later));
    }

    #[test]
    fn faults_and_patterns_read_strictly() {
        let fault: Fault =
            serde_json::from_value(json!({"cut_stream": {"after_chunks": 2}})).expect("valid");
        assert_eq!(
            fault,
            Fault::CutStream {
                after_chunks: 2,
                reset: false
            }
        );
        assert_eq!(
            serde_json::from_value::<Fault>(json!("server_error")).ok(),
            Some(Fault::ServerError)
        );
        assert!(serde_json::from_value::<Fault>(json!({"rate_limited": {"after": 1}})).is_err());
        assert!(serde_json::from_value::<When>(json!({"last_user": "("})).is_err());
    }
}
