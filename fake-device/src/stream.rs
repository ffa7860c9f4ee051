//! Reading a streamed chat completion (OpenAI's `chat.completion.chunk`s over SSE) back into one
//! [`Completion`]: text, reasoning, usage and tool calls put together from their fragments.
//!
//! Tool calls arrive as fragments keyed by `index`; the spec's change note for 1.1.0 says a
//! fragment *without* an index continues the last call, which is how some providers stream.

use serde_json::Value;

use crate::completion::{Completion, ToolCall};

/// One tool call being put together.
#[derive(Debug, Default, Clone)]
struct Partial {
    index: Option<u64>,
    id: String,
    name: String,
    arguments: String,
}

/// Puts a completion together from its chunks, in order.
#[derive(Debug, Default)]
pub struct Assembler {
    text: String,
    reasoning: String,
    calls: Vec<Partial>,
    usage: Option<Value>,
    /// Breaks the rule on index-less fragments (a misbehaving device): they go to index 0.
    index_less_is_zero: bool,
    /// Breaks the rule another way: each fragment without an index starts a new call.
    index_less_new: bool,
}

impl Assembler {
    /// An assembler; `index_less_is_zero` makes it misread fragments without an index the way a
    /// careless client does (as index 0), for the self-test of the rule.
    pub fn new(index_less_is_zero: bool) -> Self {
        Self {
            index_less_is_zero,
            ..Self::default()
        }
    }

    /// Misreads fragments without an index as new calls (a misbehaving device) when `new`.
    pub fn index_less_new(mut self, new: bool) -> Self {
        self.index_less_new = new;
        self
    }

    /// Takes one SSE `data:` payload. `false`: the stream said `[DONE]`.
    pub fn data(&mut self, payload: &str) -> bool {
        let payload = payload.trim();
        if payload == "[DONE]" {
            return false;
        }
        // Peer input: a chunk that is not JSON is skipped, never a panic.
        if let Ok(chunk) = serde_json::from_str::<Value>(payload) {
            self.chunk(&chunk);
        }
        true
    }

    /// Takes one parsed chunk.
    pub fn chunk(&mut self, chunk: &Value) {
        if let Some(usage) = chunk.get("usage").filter(|u| u.is_object()) {
            self.usage = Some(usage.clone());
        }
        let Some(delta) = chunk.pointer("/choices/0/delta") else {
            return;
        };
        if let Some(text) = delta.get("content").and_then(Value::as_str) {
            self.text.push_str(text);
        }
        let reasoning = delta
            .get("reasoning_content")
            .or_else(|| delta.get("reasoning"))
            .and_then(Value::as_str);
        if let Some(reasoning) = reasoning {
            self.reasoning.push_str(reasoning);
        }
        for fragment in delta
            .get("tool_calls")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            self.fragment(fragment);
        }
    }

    fn fragment(&mut self, fragment: &Value) {
        let index = fragment.get("index").and_then(Value::as_u64);
        let slot = match index {
            Some(index) => self.calls.iter().position(|c| c.index == Some(index)),
            None if self.index_less_is_zero => self.calls.iter().position(|c| c.index == Some(0)),
            // Misbehaving: a fragment without an index starts a call of its own.
            None if self.index_less_new => None,
            // Without an index: the last call goes on (a first fragment starts one).
            None => self.calls.len().checked_sub(1),
        };
        let slot = slot.unwrap_or_else(|| {
            self.calls.push(Partial {
                index: index.or(self.index_less_is_zero.then_some(0)),
                ..Partial::default()
            });
            self.calls.len() - 1
        });
        let Some(call) = self.calls.get_mut(slot) else {
            return;
        };
        if let Some(id) = fragment.get("id").and_then(Value::as_str) {
            call.id = id.to_string();
        }
        if let Some(name) = fragment.pointer("/function/name").and_then(Value::as_str) {
            call.name.push_str(name);
        }
        if let Some(arguments) = fragment
            .pointer("/function/arguments")
            .and_then(Value::as_str)
        {
            call.arguments.push_str(arguments);
        }
    }

    /// The completion the chunks made.
    pub fn finish(self) -> Completion {
        let tool_calls = self
            .calls
            .into_iter()
            .enumerate()
            .map(|(i, call)| ToolCall {
                id: if call.id.is_empty() {
                    format!("call-{i}")
                } else {
                    call.id
                },
                name: call.name,
                arguments: serde_json::from_str(&call.arguments)
                    .unwrap_or_else(|_| serde_json::json!({})),
            })
            .collect();
        Completion {
            text: self.text,
            reasoning: (!self.reasoning.is_empty()).then_some(self.reasoning),
            tool_calls,
            usage: self.usage,
        }
    }
}

/// Splits SSE text into its `data:` payloads as bytes arrive: complete lines only, the rest kept
/// for the next piece.
/// Bytes are kept until their line is whole, so a character split between two network reads
/// is decoded whole.
#[derive(Debug, Default)]
pub struct SseLines {
    pending: Vec<u8>,
}

impl SseLines {
    /// Feeds bytes; returns the `data:` payloads of the lines they completed.
    pub fn feed(&mut self, bytes: &[u8]) -> Vec<String> {
        self.pending.extend_from_slice(bytes);
        let mut payloads = Vec::new();
        while let Some(end) = self.pending.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = self.pending.drain(..=end).collect();
            let line = String::from_utf8_lossy(&line);
            let line = line.trim_end_matches(['\n', '\r']);
            if let Some(payload) = line.strip_prefix("data:") {
                payloads.push(payload.trim_start().to_string());
            }
        }
        payloads
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn chunk(delta: Value) -> Value {
        json!({"choices": [{"index": 0, "delta": delta}]})
    }

    /// Two calls; the second's continuations come without an index.
    fn two_calls() -> Vec<Value> {
        vec![
            chunk(
                json!({"tool_calls": [{"index": 0, "id": "a", "type": "function", "function": {"name": "bash", "arguments": "{\"command\":"}}]}),
            ),
            chunk(
                json!({"tool_calls": [{"index": 0, "function": {"arguments": "\"echo one\"}"}}]}),
            ),
            chunk(
                json!({"tool_calls": [{"index": 1, "id": "b", "type": "function", "function": {"name": "bash", "arguments": "{\"command\":"}}]}),
            ),
            chunk(json!({"tool_calls": [{"function": {"arguments": "\"echo two\"}"}}]})),
        ]
    }

    fn commands(completion: &Completion) -> Vec<Value> {
        completion
            .tool_calls
            .iter()
            .map(|c| c.arguments["command"].clone())
            .collect()
    }

    #[test]
    fn a_fragment_without_an_index_continues_the_last_call() {
        let mut assembler = Assembler::new(false);
        for c in two_calls() {
            assembler.chunk(&c);
        }
        let completion = assembler.finish();
        assert_eq!(
            commands(&completion),
            [json!("echo one"), json!("echo two")]
        );
        assert_eq!(completion.tool_calls[1].id, "b");
    }

    #[test]
    fn the_misbehaving_reading_breaks_both_calls() {
        let mut assembler = Assembler::new(true);
        for c in two_calls() {
            assembler.chunk(&c);
        }
        let completion = assembler.finish();
        // The second call's continuation lands in the first: both calls' arguments are broken
        // JSON, read as no arguments at all, and neither command runs as the model wrote it.
        let ids: Vec<&str> = completion
            .tool_calls
            .iter()
            .map(|c| c.id.as_str())
            .collect();
        assert_eq!(ids, ["a", "b"]);
        for call in &completion.tool_calls {
            assert_eq!(call.arguments, json!({}), "{call:?}");
        }
    }

    #[test]
    fn a_character_split_between_reads_comes_out_whole() {
        let mut lines = SseLines::default();
        let line = "data: {\"t\":\"é\"}\n".as_bytes();
        let split = line.iter().position(|b| *b == 0xC3).expect("é") + 1;
        assert!(lines.feed(&line[..split]).is_empty());
        assert_eq!(
            lines.feed(&line[split..]),
            vec!["{\"t\":\"é\"}".to_string()]
        );
    }

    #[test]
    fn text_reasoning_and_usage_add_up_and_done_ends() {
        let mut assembler = Assembler::new(false);
        let mut lines = SseLines::default();
        let sse = "data: {\"choices\":[{\"delta\":{\"reasoning_content\":\"hm\"}}]}\n\ndata: {\"choices\":[{\"delta\":{\"content\":\"Hel\"}}]}\n\ndata: {\"choices\":[{\"delta\":{\"content\":\"lo\"}}],\"usage\":{\"prompt_tokens\":3}}\n\ndata: not json\n\ndata: [DONE]\n\n";
        let (first, rest) = sse.split_at(30);
        let mut going = true;
        for payload in lines
            .feed(first.as_bytes())
            .into_iter()
            .chain(lines.feed(rest.as_bytes()))
        {
            going = assembler.data(&payload);
        }
        assert!(!going, "[DONE] ends the stream");
        let completion = assembler.finish();
        assert_eq!(completion.text, "Hello");
        assert_eq!(completion.reasoning.as_deref(), Some("hm"));
        assert_eq!(completion.usage, Some(json!({"prompt_tokens": 3})));
    }
}
