//! `_lembas/session/history`: a session's conversation as the web UI redraws it (the user's
//! turns with their ids and attachments, the answers with their reasoning and tools, in order),
//! leaving out what a rewind reverted.

use harness::rules::{Misbehaviours, ids};
use serde_json::{Value, json};

use super::call::Call;
use crate::answers::Answer;

/// What a misbehaving device's history gets wrong; all off by default.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Faults {
    /// Answers come without their tools.
    pub no_tools: bool,
    /// Each tool comes without what it was called with.
    pub no_tool_args: bool,
    /// Answers come without their reasoning.
    pub no_reasoning: bool,
    /// The reasoning is folded into the answer's text.
    pub reasoning_in_text: bool,
    /// No message names its turn.
    pub no_turn_ids: bool,
    /// Each user message carries the next one's turn id.
    pub turn_ids_shifted: bool,
    /// The newest turn first.
    pub reversed: bool,
    /// Each answer before the message it answers.
    pub answer_first: bool,
    /// The root named is the device's config directory, not the session's.
    pub root_config_dir: bool,
    /// An untitled session is named by its first message.
    pub title_first_message: bool,
}

impl Faults {
    /// The faults `m` asks for.
    pub(crate) fn of(m: &Misbehaviours) -> Faults {
        Faults {
            no_tools: m.breaks(ids::DEVICE_HISTORY_TOOLS),
            no_tool_args: m.breaks_way(ids::DEVICE_HISTORY_TOOLS, "no_args"),
            no_reasoning: m.breaks(ids::DEVICE_HISTORY_REASONING),
            reasoning_in_text: m.breaks_way(ids::DEVICE_HISTORY_REASONING, "in_text"),
            no_turn_ids: m.breaks(ids::DEVICE_HISTORY_TURN_ID),
            turn_ids_shifted: m.breaks_way(ids::DEVICE_HISTORY_TURN_ID, "shifted"),
            reversed: m.breaks(ids::DEVICE_HISTORY_ORDER),
            answer_first: m.breaks_way(ids::DEVICE_HISTORY_ORDER, "answer_first"),
            root_config_dir: m.breaks(ids::DEVICE_HISTORY_FIELDS),
            title_first_message: m.breaks_way(ids::DEVICE_HISTORY_FIELDS, "first_message"),
        }
    }
}

/// Answers `_lembas/session/history`.
pub(crate) async fn answer(call: Call<'_>, faults: &Faults) -> Answer {
    let (sessions, params) = (call.sessions, call.params);
    let live = sessions.session(params).await?;
    let state = live.state.lock().await;
    let mut turns: Vec<Value> = state
        .stored
        .messages
        .iter()
        .filter(|m| !m.reverted)
        .map(|m| match m.role.as_str() {
            "user" if !m.attachments.is_empty() => json!({ "role": "user", "text": m.text, "turnId": m.turn_id, "attachments": m.attachments }),
            "user" => json!({ "role": "user", "text": m.text, "turnId": m.turn_id }),
            _ => json!({ "role": "assistant", "text": m.text, "reasoning": m.reasoning, "tools": m.tools }),
        })
        .collect();
    misreport(faults, &mut turns);
    // Misbehaving: an untitled session named in history by its first message.
    let title = match state.stored.messages.first() {
        Some(first) if state.stored.title.is_empty() && faults.title_first_message => {
            first.text.clone()
        }
        _ => state.stored.title.clone(),
    };
    Ok(json!({
        "sessionId": state.stored.id,
        "title": title,
        // Misbehaving: the root named is the device's config directory, not the session's.
        "root": if faults.root_config_dir {
            sessions.registry().store.config_dir().display().to_string()
        } else {
            state.stored.cwd.display().to_string()
        },
        "turns": turns,
    }))
}

/// Misbehaving: the turns as a misbehaving device tells them.
fn misreport(faults: &Faults, turns: &mut [Value]) {
    // Misbehaving: assistant turns come without their tools, or without their reasoning.
    for turn in turns.iter_mut().filter(|t| t["role"] == "assistant") {
        if faults.no_tools {
            turn["tools"] = json!([]);
        }
        if faults.no_reasoning {
            turn["reasoning"] = json!("");
        }
        if faults.reasoning_in_text {
            // Misbehaving: the reasoning folded into the answer's text.
            let merged = format!(
                "{} {}",
                turn["reasoning"].as_str().unwrap_or(""),
                turn["text"].as_str().unwrap_or("")
            );
            turn["text"] = json!(merged);
            turn["reasoning"] = json!("");
        }
        if faults.no_tool_args {
            // Misbehaving: each tool without what it was called with.
            for tool in turn["tools"].as_array_mut().into_iter().flatten() {
                tool.as_object_mut().map(|t| t.remove("args"));
            }
        }
    }
    if faults.turn_ids_shifted {
        // Misbehaving: each user message carries the next one's turn id.
        let mut users: Vec<&mut Value> = turns.iter_mut().filter(|t| t["role"] == "user").collect();
        let ids: Vec<Value> = users.iter().map(|t| t["turnId"].clone()).collect();
        for (i, turn) in users.iter_mut().enumerate() {
            turn["turnId"] = ids.get(i + 1).cloned().unwrap_or(Value::Null);
        }
    }
    if faults.no_turn_ids {
        for turn in turns.iter_mut() {
            turn.as_object_mut().map(|t| t.remove("turnId"));
        }
    }
    if faults.reversed {
        turns.reverse();
    }
    if faults.answer_first {
        // Misbehaving: each answer before the message it answers.
        for pair in turns.chunks_exact_mut(2) {
            pair.swap(0, 1);
        }
    }
}
