//! What the model answers, and the two shapes it goes out in: one `chat.completion` object, or
//! the `chat.completion.chunk` events of a stream.

use serde_json::{Value, json};

use super::request::{ChatRequest, words};
use super::script::{Reply, TokenUsage, ToolCallScript};

/// The longest argument fragment a streamed tool call sends: short enough that any real
/// arguments arrive in several pieces, as a provider's do.
const ARGUMENT_FRAGMENT: usize = 12;

/// An answer, resolved from a reply and the request it answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Answer {
    pub id: String,
    pub created: u64,
    pub model: String,
    /// The text as its stream deltas; joined, the whole text.
    pub content: Vec<String>,
    /// The reasoning as its stream deltas.
    pub reasoning: Vec<String>,
    pub tool_calls: Vec<ToolCallScript>,
    pub omit_index_on_continuations: bool,
    pub finish_reason: String,
    pub usage: TokenUsage,
    pub include_usage: bool,
}

impl Answer {
    /// Resolves `reply` for `request`: defaults filled in, text split into deltas.
    pub fn new(id: String, created: u64, request: &ChatRequest, reply: &Reply) -> Answer {
        let content = match (&reply.chunks, &reply.text) {
            (Some(chunks), _) => chunks.clone(),
            (None, Some(text)) => deltas(text),
            (None, None) if reply.tool_calls.is_empty() => {
                deltas(request.last_user().unwrap_or_default())
            }
            (None, None) => Vec::new(),
        };
        let reasoning = reply.reasoning.as_deref().map(deltas).unwrap_or_default();
        let finish_reason = reply.finish_reason.clone().unwrap_or_else(|| {
            if reply.tool_calls.is_empty() {
                "stop".into()
            } else {
                "tool_calls".into()
            }
        });
        let said: u64 = content
            .iter()
            .chain(&reasoning)
            .map(|t| words(t))
            .chain(reply.tool_calls.iter().map(|c| words(&c.arguments) + 1))
            .sum();
        let usage = reply.usage.unwrap_or(TokenUsage {
            prompt_tokens: request.words(),
            completion_tokens: said,
        });
        Answer {
            id,
            created,
            model: request.model.clone(),
            content,
            reasoning,
            tool_calls: reply.tool_calls.clone(),
            omit_index_on_continuations: reply.omit_index_on_continuations,
            finish_reason,
            usage,
            include_usage: request.include_usage,
        }
    }

    fn usage_value(&self) -> Value {
        json!({
            "prompt_tokens": self.usage.prompt_tokens,
            "completion_tokens": self.usage.completion_tokens,
            "total_tokens": self.usage.prompt_tokens.saturating_add(self.usage.completion_tokens),
        })
    }

    /// The whole answer: a `chat.completion` object.
    pub fn completion(&self) -> Value {
        let text = self.content.concat();
        let mut message = json!({ "role": "assistant", "content": text });
        // Like OpenAI's: a message that only calls tools has `content: null`.
        if text.is_empty() && !self.tool_calls.is_empty() {
            message["content"] = Value::Null;
        }
        if !self.reasoning.is_empty() {
            message["reasoning_content"] = json!(self.reasoning.concat());
        }
        if !self.tool_calls.is_empty() {
            let calls: Vec<Value> = self
                .tool_calls
                .iter()
                .map(|c| {
                    json!({
                        "id": c.id,
                        "type": "function",
                        "function": { "name": c.name, "arguments": c.arguments },
                    })
                })
                .collect();
            message["tool_calls"] = json!(calls);
        }
        json!({
            "id": self.id,
            "object": "chat.completion",
            "created": self.created,
            "model": self.model,
            "choices": [{ "index": 0, "message": message, "finish_reason": self.finish_reason }],
            "usage": self.usage_value(),
        })
    }

    /// A stream chunk with one choice carrying this delta.
    fn chunk(&self, delta: Value, finish_reason: Option<&str>) -> Value {
        json!({
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "choices": [{ "index": 0, "delta": delta, "finish_reason": finish_reason }],
        })
    }

    /// The stream's events, in order, `[DONE]` excluded: the role, the reasoning, the text, each
    /// tool call (its first fragment names it, the rest carry argument pieces), the finish, and
    /// the usage when the request asked for it.
    pub fn chunks(&self) -> Vec<Value> {
        let mut out = vec![self.chunk(json!({"role": "assistant", "content": ""}), None)];
        for piece in &self.reasoning {
            out.push(self.chunk(json!({ "reasoning_content": piece }), None));
        }
        for piece in &self.content {
            out.push(self.chunk(json!({ "content": piece }), None));
        }
        for (index, call) in self.tool_calls.iter().enumerate() {
            let opening = json!({
                "index": index,
                "id": call.id,
                "type": "function",
                "function": { "name": call.name, "arguments": "" },
            });
            out.push(self.chunk(json!({ "tool_calls": [opening] }), None));
            for piece in fragments(&call.arguments) {
                let mut more = json!({ "function": { "arguments": piece } });
                if !self.omit_index_on_continuations {
                    more["index"] = json!(index);
                }
                out.push(self.chunk(json!({ "tool_calls": [more] }), None));
            }
        }
        out.push(self.chunk(json!({}), Some(&self.finish_reason)));
        if self.include_usage {
            out.push(json!({
                "id": self.id,
                "object": "chat.completion.chunk",
                "created": self.created,
                "model": self.model,
                "choices": [],
                "usage": self.usage_value(),
            }));
        }
        out
    }
}

/// A text as stream deltas: word by word, each word keeping the space after it, so the deltas
/// join back to the text exactly.
fn deltas(text: &str) -> Vec<String> {
    text.split_inclusive(' ').map(str::to_string).collect()
}

/// Tool call arguments in fragments of at most [`ARGUMENT_FRAGMENT`] characters.
fn fragments(arguments: &str) -> Vec<String> {
    let chars: Vec<char> = arguments.chars().collect();
    chars
        .chunks(ARGUMENT_FRAGMENT)
        .map(|c| c.iter().collect())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(body: Value) -> ChatRequest {
        ChatRequest::read(&body).expect("valid")
    }

    fn asked(text: &str) -> ChatRequest {
        request(json!({"model": "m", "messages": [{"role": "user", "content": text}]}))
    }

    #[test]
    fn the_default_echoes_and_deltas_join_back() {
        let answer = Answer::new("c".into(), 0, &asked("héllo big world"), &Reply::default());
        assert_eq!(answer.content, ["héllo ", "big ", "world"]);
        assert_eq!(
            answer.completion()["choices"][0]["message"]["content"],
            "héllo big world"
        );
        assert_eq!(answer.completion()["choices"][0]["finish_reason"], "stop");
        assert_eq!(answer.usage.prompt_tokens, 3);
    }

    #[test]
    fn tool_calls_stream_as_fragments_with_or_without_index() {
        let reply = Reply {
            tool_calls: vec![ToolCallScript {
                id: "call_1".into(),
                name: "read".into(),
                arguments: r#"{"path":"src/main.rs"}"#.into(),
            }],
            ..Reply::default()
        };
        let answer = Answer::new("c".into(), 0, &asked("x"), &reply);
        assert!(answer.content.is_empty());
        let whole = answer.completion();
        assert_eq!(whole["choices"][0]["message"]["content"], Value::Null);
        assert_eq!(whole["choices"][0]["finish_reason"], "tool_calls");
        let calls: Vec<Value> = answer
            .chunks()
            .iter()
            .filter_map(|c| c["choices"][0]["delta"].get("tool_calls").cloned())
            .collect();
        assert_eq!(calls.len(), 3, "{calls:?}");
        assert_eq!(calls[0][0]["id"], "call_1");
        assert!(calls[1..].iter().all(|c| c[0]["index"] == 0));
        let unindexed = Answer {
            omit_index_on_continuations: true,
            ..answer
        };
        let calls: Vec<Value> = unindexed
            .chunks()
            .iter()
            .filter_map(|c| c["choices"][0]["delta"].get("tool_calls").cloned())
            .collect();
        assert_eq!(calls[0][0]["index"], 0);
        assert!(calls[1..].iter().all(|c| c[0].get("index").is_none()));
        let joined: String = calls[1..]
            .iter()
            .filter_map(|c| c[0]["function"]["arguments"].as_str())
            .collect();
        assert_eq!(joined, r#"{"path":"src/main.rs"}"#);
    }
}
