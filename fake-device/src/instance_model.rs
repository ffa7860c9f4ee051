//! The instance's model, as the device uses it: `/v1/models` to find a chat model, and
//! `/v1/chat/completions` (OpenAI-compatible, streamed, as the real CLI asks) for each step of a
//! turn.

use std::time::Duration;

use serde_json::{Value, json};

use crate::completion::{Completion, ToolCall};

/// The instance's `/v1`, with the device's token.
#[derive(Debug, Clone)]
#[allow(missing_docs)] // fields whose names say it all go undocumented
pub struct ModelClient {
    /// The instance's base URL.
    pub base: String,
    /// The device token.
    pub token: String,
    pub http: reqwest::Client,
    /// Misreads a tool-call fragment without an index as index 0 (a misbehaving device).
    pub index_less_is_zero: bool,
    /// Takes a model of any kind for a chat model (a misbehaving device).
    pub any_kind: bool,
    /// Starts a new call at each tool-call fragment without an index (a misbehaving device).
    pub index_less_new: bool,
    /// Leaves the model out of its chat completions requests (a misbehaving device).
    pub no_model: bool,
    /// Asks for the first model listed, whatever its kind, in place of the first chat model
    /// (a misbehaving device).
    pub first_listed: bool,
    /// Where a load run's figures go: each chat completion timed to its first streamed piece
    /// (`server.chat_completions.first_token`) and to its end (`server.chat_completions`).
    pub recorder: Option<std::sync::Arc<harness::load::Recorder>>,
}

/// How long one model call may take.
const CALL_TIMEOUT: Duration = Duration::from_secs(60);

impl ModelClient {
    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base.trim_end_matches('/'))
    }

    /// The first chat model the instance serves (a model without `kind` counts as chat).
    pub async fn first_chat_model(&self) -> Result<String, String> {
        self.chat_models()
            .await?
            .into_iter()
            .next()
            .ok_or_else(|| "the instance serves no chat model".into())
    }

    /// The ids of the chat models the instance serves, in its order (a model without `kind`
    /// counts as chat; any other kind is no model the device talks to).
    pub async fn chat_models(&self) -> Result<Vec<String>, String> {
        Ok(self
            .listed_models()
            .await?
            .iter()
            .filter(|m| self.any_kind || m.get("kind").is_none_or(|k| k == "chat"))
            .filter_map(|m| m.get("id").and_then(Value::as_str))
            .map(String::from)
            .collect())
    }

    /// The id of the first model the instance lists, of whatever kind (for a misbehaving device).
    async fn first_listed(&self) -> Option<String> {
        let models = self.listed_models().await.ok()?;
        models
            .first()?
            .get("id")
            .and_then(Value::as_str)
            .map(String::from)
    }

    /// Every model `/v1/models` lists, in its order.
    async fn listed_models(&self) -> Result<Vec<Value>, String> {
        let response = self
            .http
            .get(self.url("/v1/models"))
            .bearer_auth(&self.token)
            .timeout(CALL_TIMEOUT)
            .send()
            .await
            .map_err(|e| format!("/v1/models: {e}"))?;
        let body: Value = response
            .json()
            .await
            .map_err(|e| format!("/v1/models is not JSON: {e}"))?;
        Ok(match body.get("data") {
            Some(Value::Array(models)) => models.clone(),
            _ => Vec::new(),
        })
    }

    /// One step: the conversation so far, the tools on offer. Asked as a stream; an instance
    /// that answers whole JSON instead is read as such.
    pub async fn complete(
        &self,
        model: &str,
        messages: &[Value],
        tools: &[Value],
    ) -> Result<Completion, String> {
        let began = std::time::Instant::now();
        let completed = self.complete_untimed(model, messages, tools, began).await;
        if let Some(recorder) = &self.recorder {
            recorder.latency(
                "server.chat_completions",
                began.elapsed(),
                completed.is_ok(),
            );
        }
        completed
    }

    async fn complete_untimed(
        &self,
        model: &str,
        messages: &[Value],
        tools: &[Value],
        began: std::time::Instant,
    ) -> Result<Completion, String> {
        // Misbehaving: the first model listed is asked for in place of the first chat model.
        let swapped =
            if self.first_listed && self.first_chat_model().await.ok().as_deref() == Some(model) {
                self.first_listed().await
            } else {
                None
            };
        let model = swapped.as_deref().unwrap_or(model);
        let mut request = json!({
            "model": model,
            "messages": messages,
            "stream": true,
            "stream_options": { "include_usage": true },
        });
        if !tools.is_empty() {
            request["tools"] = json!(tools);
        }
        if self.no_model {
            // Misbehaving: the request names no model.
            request.as_object_mut().map(|r| r.remove("model"));
        }
        let asked = self
            .http
            .post(self.url("/v1/chat/completions"))
            .bearer_auth(&self.token)
            .json(&request)
            .timeout(CALL_TIMEOUT)
            .send();
        let mut response = asked.await.map_err(|e| format!("chat completions: {e}"))?;
        let status = response.status();
        let streamed = response
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("text/event-stream"));
        if !status.is_success() || !streamed {
            let body: Value = response
                .json()
                .await
                .map_err(|e| format!("chat completions answered {status}, not JSON: {e}"))?;
            if !status.is_success() {
                return Err(format!("chat completions answered {status}: {body}"));
            }
            return Ok(parse_completion(&body));
        }
        let mut assembler = crate::stream::Assembler::new(self.index_less_is_zero)
            .index_less_new(self.index_less_new);
        let mut lines = crate::stream::SseLines::default();
        let mut first = self.recorder.as_ref();
        loop {
            // The request's timeout bounds the whole stream, so this loop ends.
            let piece = response
                .chunk()
                .await
                .map_err(|e| format!("the model's stream broke: {e}"))?;
            let Some(piece) = piece else {
                return Err("the model's stream ended without [DONE]".into());
            };
            for payload in lines.feed(&piece) {
                if let Some(recorder) = first.take() {
                    recorder.latency("server.chat_completions.first_token", began.elapsed(), true);
                }
                if !assembler.data(&payload) {
                    return Ok(assembler.finish());
                }
            }
        }
    }
}

/// Reads an OpenAI `chat.completion` (untrusted: whatever is missing is empty).
pub fn parse_completion(body: &Value) -> Completion {
    let message = body
        .pointer("/choices/0/message")
        .cloned()
        .unwrap_or_default();
    let tool_calls = message
        .get("tool_calls")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|call| ToolCall {
            id: call
                .get("id")
                .and_then(Value::as_str)
                .unwrap_or("call")
                .to_string(),
            name: call
                .pointer("/function/name")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string(),
            arguments: call
                .pointer("/function/arguments")
                .and_then(Value::as_str)
                .and_then(|a| serde_json::from_str(a).ok())
                .unwrap_or_else(|| json!({})),
        })
        .collect();
    Completion {
        text: message
            .get("content")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string(),
        reasoning: message
            .get("reasoning_content")
            .and_then(Value::as_str)
            .map(String::from),
        tool_calls,
        usage: body.get("usage").filter(|u| u.is_object()).cloned(),
    }
}

/// The tools the device offers its model: a shell command (it asks before running), a question
/// for the person (`ask_user`), and a plan for approval (`plan_submit`).
pub fn tools() -> Vec<Value> {
    let tool = |name: &str, description: &str, parameters: Value| json!({ "type": "function", "function": { "name": name, "description": description, "parameters": parameters } });
    vec![
        tool(
            "bash",
            "Run a shell command in the project",
            json!({ "type": "object", "properties": { "command": { "type": "string" } }, "required": ["command"] }),
        ),
        tool(
            "ask_user",
            "Ask the person questions",
            json!({ "type": "object", "properties": { "questions": { "type": "array" }, "why": { "type": "string" } }, "required": ["questions"] }),
        ),
        tool(
            "library_search",
            "Search the knowledge bases of the person's LLeMbas account",
            json!({ "type": "object", "properties": { "query": { "type": "string" }, "base": { "type": "string" } }, "required": ["query"] }),
        ),
        tool(
            "plan_write",
            "Write the session's plan (phases of tasks)",
            json!({ "type": "object", "properties": { "plan": { "type": "object" } }, "required": ["plan"] }),
        ),
        tool(
            "plan_submit",
            "Submit a plan for approval",
            json!({ "type": "object", "properties": { "text": { "type": "string" }, "path": { "type": "string" } }, "required": ["text"] }),
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_completion_with_text_reasoning_and_tools_is_read() {
        let body = json!({"choices": [{"message": {"role": "assistant", "content": "hi", "reasoning_content": "hmm",
            "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "bash", "arguments": "{\"command\":\"ls\"}"}},
                           {"id": "c2", "type": "function", "function": {"name": "ask_user", "arguments": "not json"}}]}}]});
        let c = parse_completion(&body);
        assert_eq!(c.text, "hi");
        assert_eq!(c.reasoning.as_deref(), Some("hmm"));
        assert_eq!(c.tool_calls[0].arguments, json!({"command": "ls"}));
        assert_eq!(c.tool_calls[1].arguments, json!({}));
        assert_eq!(parse_completion(&json!("garbage")), Completion::default());
    }
}
