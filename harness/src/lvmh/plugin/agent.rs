//! The scripted agent: one run per prompt, in order, streamed as pi streams it (the prompt
//! mirrored, the run framed, an optional tool call, the reply in deltas, cut short by an
//! abort); and the other things a pi session does on its own (a rename, a burst of output).

use std::sync::Arc;
use std::sync::atomic::Ordering;

use serde_json::{Map, Value, json};
use tokio::sync::mpsc;

use super::Plugin;
use crate::lvmh::envelope::{fields, kinds};
use crate::lvmh::{RESULT_PREVIEW_MAX, rules};

impl Plugin {
    /// A person typed `text` into the session's terminal: the agent runs it as it runs a
    /// prompt from the web.
    pub fn type_prompt(&self, text: &str) -> bool {
        // Counted before it is queued, so the agent never finishes it before it is counted.
        self.pending.fetch_add(1, Ordering::SeqCst);
        let queued = self.prompts.try_send(text.to_string()).is_ok();
        if !queued {
            self.pending.fetch_sub(1, Ordering::SeqCst);
        }
        queued
    }

    /// Whether the agent has run every prompt it took.
    pub fn is_idle(&self) -> bool {
        self.pending.load(Ordering::SeqCst) == 0
    }

    /// The session was renamed: `session_info` with the new snapshot.
    pub fn rename(&self, name: &str) {
        let session = {
            let Ok(mut state) = self.state.lock() else {
                return;
            };
            state.session["name"] = json!(name);
            state.session.clone()
        };
        let session = match self.config.misbehave.breaks(rules::SESSION_INFO) {
            true => json!({ "name": name }),
            false => session,
        };
        // Misbehaving: the whole snapshot, but as it was before the rename.
        let session = match self
            .config
            .misbehave
            .breaks_way(rules::SESSION_INFO, "stale")
        {
            true => self.config.session.clone(),
            false => session,
        };
        self.emit(kinds::SESSION_INFO, fields(json!({ "session": session })));
    }

    /// `count` tool updates at once (a long tool's output): what fills a buffer while the
    /// daemon is away.
    pub fn burst(&self, count: usize) {
        for n in 0..count {
            self.emit(
                kinds::TOOL_UPDATE,
                fields(json!({"toolCallId": "burst", "toolName": "bash", "partial": format!("line {n}\n")})),
            );
        }
    }

    /// The scripted agent: one run per prompt, in order (a prompt during a run waits, as
    /// typed-ahead input does).
    pub(super) async fn agent(self: Arc<Self>, mut prompts: mpsc::Receiver<String>) {
        let mut message = 0u64;
        loop {
            let prompt = tokio::select! {
                prompt = prompts.recv() => prompt,
                () = self.until_stopped() => None,
            };
            let Some(prompt) = prompt else { break };
            self.aborted.store(false, Ordering::Relaxed);
            message += 1;
            self.mirror_prompt(message, &prompt);
            // Misbehaving: the run starts without agent_start.
            if !self
                .config
                .misbehave
                .breaks_way(rules::RUN_FRAMED, "no_start")
            {
                self.emit(kinds::AGENT_START, Map::new());
            }
            if let Some((tool, output)) = self.config.agent.tool.clone() {
                self.tool_call(message, &tool, &output);
            }
            let said = self.reply(message, &prompt).await;
            if self.aborted.load(Ordering::Relaxed)
                && self.config.misbehave.breaks_way(rules::ABORT, "unsettled")
            {
                // Misbehaving: the reply stops at the abort, but the run never ends or settles.
                self.pending.fetch_sub(1, Ordering::SeqCst);
                continue;
            }
            self.emit(
                kinds::AGENT_END,
                fields(json!({"usage": {"inputTokens": prompt.len(), "outputTokens": said.len()}})),
            );
            // Misbehaving: the run never settles.
            if !self.config.misbehave.breaks(rules::RUN_FRAMED) {
                self.emit(kinds::AGENT_SETTLED, Map::new());
            }
            self.pending.fetch_sub(1, Ordering::SeqCst);
        }
    }

    /// The prompt mirrored as the user's message, as pi shows what was typed.
    fn mirror_prompt(&self, message: u64, prompt: &str) {
        let user = format!("u{message}");
        // Misbehaving (`wrong_role`): the prompt mirrored as a system message.
        let role = match self
            .config
            .misbehave
            .breaks_way(rules::PROMPT_MIRRORED, "wrong_role")
        {
            true => "system",
            false => "user",
        };
        if !self.config.misbehave.breaks(rules::PROMPT_MIRRORED) {
            self.emit(
                kinds::MESSAGE_START,
                fields(json!({"message": {"role": role, "id": user}})),
            );
            if self.config.misbehave.breaks(rules::UPDATES_ASSISTANT) {
                self.emit(kinds::MESSAGE_UPDATE, fields(json!({ "delta": prompt })));
            }
            self.emit(
                kinds::MESSAGE_END,
                fields(json!({"message": whole_message(role, &user, prompt, None)})),
            );
        }
    }

    /// The assistant's answer to `prompt`, streamed; gives what was said (less, when the run
    /// was aborted).
    async fn reply(&self, message: u64, prompt: &str) -> String {
        let reply = self.config.agent.reply.replace("{prompt}", prompt);
        let assistant = format!("a{message}");
        self.emit(
            kinds::MESSAGE_START,
            fields(json!({"message": {"role": "assistant", "id": assistant}})),
        );
        let said = self.stream(&reply).await;
        self.emit(
            kinds::MESSAGE_END,
            fields(json!({"message": whole_message("assistant", &assistant, &said, None)})),
        );
        if self
            .config
            .misbehave
            .breaks_way(rules::UPDATES_ASSISTANT, "after_end")
        {
            // Misbehaving: one more delta once the assistant's message has ended.
            self.emit(kinds::MESSAGE_UPDATE, fields(json!({ "delta": " more" })));
        }
        said
    }

    /// The assistant asks for a tool (a message whose `toolCalls` name it), the tool runs, and
    /// its result comes back as a `toolResult` message answering the call, as pi streams them.
    fn tool_call(&self, message: u64, tool: &str, output: &str) {
        let call = format!("call{message}");
        let asking = format!("a{message}t");
        self.emit(
            kinds::MESSAGE_START,
            fields(json!({"message": {"role": "assistant", "id": asking}})),
        );
        let mut asked = whole_message("assistant", &asking, "", None);
        asked["toolCalls"] = json!([{"id": call, "name": tool, "argsJson": r#"{"command":"ls"}"#}]);
        self.emit(kinds::MESSAGE_END, fields(json!({ "message": asked })));
        self.emit(
            kinds::TOOL_START,
            fields(json!({"toolCallId": call, "toolName": tool, "args": {"command": "ls"}})),
        );
        self.emit(
            kinds::TOOL_UPDATE,
            fields(json!({"toolCallId": call, "toolName": tool, "partial": output})),
        );
        let preview = match self.config.misbehave.breaks(rules::RESULT_PREVIEW) {
            true => output.to_string(),
            false => cut(output, RESULT_PREVIEW_MAX),
        };
        self.emit(
            kinds::TOOL_END,
            fields(json!({"toolCallId": call, "toolName": tool, "isError": false, "resultPreview": preview})),
        );
        let result = format!("r{message}");
        self.emit(
            kinds::MESSAGE_START,
            fields(json!({"message": {"role": "toolResult", "id": result}})),
        );
        let answer = whole_message(
            "toolResult",
            &result,
            &cut(output, RESULT_PREVIEW_MAX),
            Some(&call),
        );
        self.emit(kinds::MESSAGE_END, fields(json!({ "message": answer })));
    }

    /// Streams `reply` in deltas; gives what was said (less, when the run was aborted).
    async fn stream(&self, reply: &str) -> String {
        let chars: Vec<char> = reply.chars().collect();
        let parts = self.config.agent.deltas.max(1);
        let size = chars.len().div_ceil(parts).max(1);
        let mut said = String::new();
        for chunk in chars.chunks(size) {
            if self.aborted.load(Ordering::Relaxed) {
                break;
            }
            let delta: String = chunk.iter().collect();
            said.push_str(&delta);
            self.emit(kinds::MESSAGE_UPDATE, fields(json!({ "delta": delta })));
            tokio::select! {
                () = tokio::time::sleep(self.config.agent.pace) => {}
                () = self.abort.notified() => {}
            }
        }
        said
    }
}

/// A message as `message_end` carries it (spec, "Message shape").
fn whole_message(role: &str, id: &str, text: &str, tool_call_id: Option<&str>) -> Value {
    json!({
        "role": role,
        "id": id,
        "text": text,
        "thinking": null,
        "toolCalls": [],
        "toolCallId": tool_call_id,
    })
}

/// `text` cut to at most `max` bytes, on a character boundary.
fn cut(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text[..end].to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_preview_is_cut_on_a_character_boundary() {
        let long = "é".repeat(2000);
        let preview = cut(&long, RESULT_PREVIEW_MAX);
        assert!(preview.len() <= RESULT_PREVIEW_MAX);
        assert_eq!(preview.len(), 2048);
    }
}
