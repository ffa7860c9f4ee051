//! Turns: a prompt runs once per turn id, one at a time per session, in arrival order; a
//! repeated turn id gets the first run's answer; `session/cancel` stops the running turn and
//! `_lembas/steer` hands it a message at its next step. The default agent echoes the prompt back
//! in a few pieces.

use std::sync::Weak;

use harness::jsonrpc::RpcError;
use harness::rules::ids;
use serde_json::{Value, json};
use tokio::sync::{oneshot, watch};

use crate::answers::{Answer, Reply, fresh_id, param_str, refuse};
use crate::cards::Cards;
use crate::commands::Slash;
use crate::events::Client;
use crate::live::{Job, JobQueue, Live};
use crate::model::ModelClient;
use crate::registry::{ModeReport, Registry};
use crate::script::Scripted;
use crate::store::{StoredMessage, TurnState};

/// The longest turn id the device keeps; the store writes every turn id into its files, and
/// rewrites them each turn, so a peer's megabyte ids would grow them without end.
pub const MAX_TURN_ID_BYTES: usize = 256;
/// The most prompt text the device keeps of one message (attachments have their own limit).
pub const MAX_KEPT_TEXT_BYTES: usize = 1024 * 1024;
/// The most of the client's `_meta.lembas` (its `Context`) the device keeps, as JSON.
pub const MAX_KEPT_CONTEXT_BYTES: usize = 1024 * 1024;

/// Refuses, with -32602, a prompt whose strings the store would keep past its bounds: its turn
/// id when the device keeps turn ids (`turns`), its `_meta.lembas` when it keeps the client's
/// context (`context`).
fn check_kept_sizes(params: &Value, turn_ids: bool, context: bool) -> Result<(), RpcError> {
    let lembas = params.pointer("/_meta/lembas");
    if let Some(turn_id) = lembas
        .filter(|_| turn_ids)
        .and_then(|l| l.get("turnId"))
        .and_then(Value::as_str)
        && turn_id.len() > MAX_TURN_ID_BYTES
    {
        return Err(refuse(format!(
            "`_meta.lembas.turnId` is {} bytes; the device keeps turn ids of at most {MAX_TURN_ID_BYTES}",
            turn_id.len()
        )));
    }
    let kept = lembas
        .filter(|_| context)
        .map_or(0, |l| l.to_string().len());
    if kept > MAX_KEPT_CONTEXT_BYTES {
        return Err(refuse(format!(
            "`_meta.lembas` is {kept} bytes of JSON; the device keeps at most {MAX_KEPT_CONTEXT_BYTES}"
        )));
    }
    Ok(())
}

/// The pieces the echo agent answers in: up to three, split at spaces.
fn pieces(text: &str) -> Vec<String> {
    let words: Vec<&str> = text.split_inclusive(' ').collect();
    if words.is_empty() {
        return vec![String::new()];
    }
    let per = words.len().div_ceil(3);
    words.chunks(per).map(|c| c.concat()).collect()
}

/// The turns of the device's sessions, over its registry.
#[derive(Debug, Clone, Copy)]
pub struct Turns<'r> {
    registry: &'r Registry,
}

impl<'r> Turns<'r> {
    /// Turns over `registry`.
    pub fn new(registry: &'r Registry) -> Turns<'r> {
        Turns { registry }
    }

    /// Takes a prompt in: the order-sensitive part (the turn queued, or found) happens now, in
    /// the link's order; the answer comes when the turn ends.
    pub(crate) async fn prompt(
        &self,
        live: &Live,
        params: &Value,
        client: &Client,
    ) -> Result<Reply, RpcError> {
        check_kept_sizes(
            params,
            self.registry.has("turns"),
            self.registry.has("context"),
        )?;
        let (session_id, project) = {
            let state = live.state.lock().await;
            (state.stored.id.clone(), state.stored.cwd.clone())
        };
        let dir = self
            .registry
            .has("attachments")
            .then(|| self.registry.store.attachments_dir(&session_id));
        // Misbehaving: a block may be twice the spec's limit.
        let max_block = match self.registry.breaks(ids::DEVICE_ATTACHMENTS_LIMITS) {
            true => 2 * crate::attachments::MAX_BLOCK_BYTES,
            false => crate::attachments::MAX_BLOCK_BYTES,
        };
        let misreads = crate::attachments::Misreads {
            joined_by_space: self.registry.breaks(ids::DEVICE_PROMPT_TEXT_JOIN),
            bare_link: self.registry.breaks(ids::DEVICE_PROMPT_RESOURCE_LINK),
            encoded_size: self.registry.breaks(ids::DEVICE_ATTACHMENTS_BLOB),
            unsized_binary: self
                .registry
                .breaks_way(ids::DEVICE_ATTACHMENTS_BLOB, "no_size"),
            unnumbered: self
                .registry
                .breaks_way(ids::DEVICE_ATTACHMENTS_NAMED, "unnumbered"),
            first_text_only: self
                .registry
                .breaks_way(ids::DEVICE_PROMPT_TEXT_JOIN, "first_only"),
            link_dropped: self
                .registry
                .breaks_way(ids::DEVICE_PROMPT_RESOURCE_LINK, "dropped"),
        };
        let internal = self
            .registry
            .breaks_way(ids::DEVICE_ATTACHMENTS_LIMITS, "internal_error");
        let prepared = crate::attachments::prepare(
            params.get("prompt").unwrap_or(&Value::Null),
            dir.is_some(),
            max_block,
            misreads,
        )
        .map_err(|why| match internal {
            // Misbehaving: a prompt over the limits refused as an internal error.
            true => RpcError::new(-32603, why),
            false => refuse(why),
        })?;
        if prepared.typed.len() > MAX_KEPT_TEXT_BYTES {
            return Err(refuse(format!(
                "the prompt's text is {} bytes; the device keeps at most {MAX_KEPT_TEXT_BYTES} of a message",
                prepared.typed.len()
            )));
        }
        let text = prepared.typed.clone();
        // `@path` in what the person typed (never in a command's own text), before any
        // attached block's text.
        let limits = self
            .registry
            .limits
            .read()
            .map(|l| l.clone())
            .unwrap_or_else(|p| p.into_inner().clone());
        let expand = |text: &str| {
            if !self.registry.has("files") {
                return String::new();
            }
            let reach = crate::mentions::Reach {
                project: &project,
                limits: &limits,
                misreads: crate::mentions::Misreads {
                    judges_unresolved: self.registry.breaks(ids::DEVICE_FILES_MENTION),
                    misreads_hash: self.registry.breaks(ids::DEVICE_FILES_HASH_ESCAPE),
                    lists_no_dirs: self.registry.breaks(ids::DEVICE_FILES_DIR_LISTING),
                    whole_file: self
                        .registry
                        .breaks_way(ids::DEVICE_FILES_MENTION, "whole_file"),
                    hash_in_name: self
                        .registry
                        .breaks_way(ids::DEVICE_FILES_HASH_ESCAPE, "hash_in_name"),
                    lists_project: self
                        .registry
                        .breaks_way(ids::DEVICE_FILES_DIR_LISTING, "project_listed"),
                },
            };
            let expanded = crate::mentions::expand(text, &reach);
            for path in &expanded.used {
                self.registry.frecency.used(path);
            }
            expanded.text
        };
        let mentioned = expand(&text);
        let meta = params.get("_meta");
        let given = meta
            .and_then(|m| m.pointer("/lembas/turnId"))
            .and_then(Value::as_str)
            .filter(|_| self.registry.has("turns"));
        let turn_id = given.map(String::from).unwrap_or_else(|| fresh_id("turn_"));
        let (tx, rx) = oneshot::channel();
        {
            let mut state = live.state.lock().await;
            if std::mem::take(&mut state.refuse_next) {
                return Err(refuse("the session was cancelled"));
            }
            // Newer `Context` replaces older, on every prompt.
            if !self.registry.breaks(ids::DEVICE_CONTEXT_READ) {
                self.registry.read_context(meta, &mut state);
            }
            self.registry.report_to(&mut state, client);
            state.stored.given = true;
            let known = state
                .turns
                .get(&turn_id)
                .cloned()
                .filter(|_| !self.registry.breaks(ids::DEVICE_TURNS_DEDUP))
                // Misbehaving: a turn still running, sent again, runs once more after it.
                .filter(|turn| {
                    turn.state == TurnState::Done
                        || !self
                            .registry
                            .breaks_way(ids::DEVICE_TURNS_RELINK, "runs_twice")
                });
            match known {
                Some(turn)
                    if turn.state == TurnState::Done
                        && self.registry.breaks_way(ids::DEVICE_TURNS_DEDUP, "refused") =>
                {
                    // Misbehaving: a finished turn sent again is refused, not given its answer.
                    return Err(refuse(format!("turn `{turn_id}` has already run")));
                }
                Some(turn) if turn.state == TurnState::Done => {
                    // A known turn does not run again: it gets the first run's answer.
                    return turn.answer.map(|a| Reply::Now(Ok(a))).ok_or_else(|| {
                        refuse(format!("turn `{turn_id}` finished without an answer"))
                    });
                }
                Some(_) => state.waiters.entry(turn_id.clone()).or_default().push(tx),
                None if state.running.is_some()
                    && self.registry.breaks(ids::DEVICE_PROMPT_QUEUED) =>
                {
                    // Misbehaving: a prompt that comes while a turn runs is refused.
                    return Err(refuse("the session is working"));
                }
                None if state.running.is_some()
                    && self
                        .registry
                        .breaks_way(ids::DEVICE_PROMPT_QUEUED, "answered_unrun") =>
                {
                    // Misbehaving: a prompt that comes while a turn runs is answered at once,
                    // and never runs.
                    return Ok(Reply::Now(Ok(json!({
                        "stopReason": "end_turn",
                        "_meta": { "lembas": { "turnId": turn_id } }
                    }))));
                }
                None => {
                    // Only a new turn keeps its attachments.
                    let read = prepared.write(dir.as_deref()).map_err(refuse)?;
                    // A prompt to an idle session runs at once; otherwise it waits its turn.
                    state.turns.set(&turn_id, TurnState::Queued, None);
                    if state.running.is_none() && state.queued.is_empty() {
                        state.mark_running(&turn_id);
                    } else {
                        state.queued.push(turn_id.clone());
                    }
                    state.waiters.entry(turn_id.clone()).or_default().push(tx);
                    self.registry.save(&state);
                    let command = self
                        .registry
                        .has("commands")
                        .then(|| {
                            crate::commands::parse(&text, &self.registry.command_set(&project))
                        })
                        .flatten()
                        .filter(|_| !self.registry.breaks(ids::DEVICE_COMMANDS_ACTIONS));
                    let mut given_text = match &command {
                        // Misbehaving: a built-in prompt command reaches the model as typed.
                        Some(Slash::Prompt { name, .. })
                            if crate::commands::is_builtin(name)
                                && self.registry.breaks(ids::DEVICE_COMMANDS_PROMPT_BUILTIN) =>
                        {
                            text.clone()
                        }
                        // Misbehaving: a custom command's text without what follows its name.
                        Some(Slash::Prompt { name, .. })
                            if !crate::commands::is_builtin(name)
                                && self
                                    .registry
                                    .breaks_way(ids::DEVICE_COMMANDS_CUSTOM, "no_arguments") =>
                        {
                            match crate::commands::parse(
                                &format!("/{name}"),
                                &self.registry.command_set(&project),
                            ) {
                                Some(Slash::Prompt { text, .. }) => text,
                                _ => text.clone(),
                            }
                        }
                        Some(Slash::Prompt { text, .. }) => text.clone(),
                        _ => text.clone(),
                    };
                    given_text.push_str(&mentioned);
                    // Misbehaving: `@path` in a command's own text is attached too.
                    if let Some(Slash::Prompt { text: own, .. }) = &command
                        && self.registry.breaks(ids::DEVICE_FILES_NOT_FROM_COMMAND)
                    {
                        given_text.push_str(&expand(own));
                    }
                    // Misbehaving: the `@path`s of the last command's own text are attached to
                    // the prompt after it.
                    if self
                        .registry
                        .breaks_way(ids::DEVICE_FILES_NOT_FROM_COMMAND, "next_prompt")
                        && let Some(last) = state
                            .stored
                            .messages
                            .iter()
                            .rev()
                            .find(|m| m.role == "user")
                        && let Some(Slash::Prompt { text: own, .. }) =
                            crate::commands::parse(&last.text, &self.registry.command_set(&project))
                    {
                        given_text.push_str(&expand(&own));
                    }
                    given_text.push_str(&read.attached_text);
                    if live
                        .jobs
                        .send(Job {
                            turn_id: turn_id.clone(),
                            text: given_text,
                            typed: text,
                            command,
                            attachments: read
                                .attachments
                                .iter()
                                .map(crate::attachments::Attachment::to_value)
                                .collect(),
                            made_id: given.is_none(),
                        })
                        .is_err()
                    {
                        return Err(refuse("the session is closing"));
                    }
                }
            }
        }
        Ok(Reply::Later {
            turn_id,
            answer: rx,
        })
    }

    /// `_lembas/steer`: a message for the running turn, taken in at its next step.
    pub(crate) async fn steer(&self, live: &Live, params: &Value) -> Answer {
        let text = param_str(params, "text")?;
        let mut state = live.state.lock().await;
        let message_id = params
            .get("messageId")
            .and_then(Value::as_str)
            .map(String::from);
        match state
            .running
            .as_mut()
            .filter(|_| !self.registry.breaks(ids::DEVICE_STEER_RUNNING))
        {
            Some(running)
                if self
                    .registry
                    .breaks_way(ids::DEVICE_STEER_RUNNING, "dropped") =>
            {
                // Misbehaving: the steer is said to be queued, and never given to the model.
                Ok(json!({ "queued": running.steers.len() + 1 }))
            }
            Some(running) => {
                running.steers.push((text.to_string(), message_id));
                Ok(json!({ "queued": running.steers.len() }))
            }
            None if self.registry.breaks(ids::DEVICE_STEER_IDLE) => Ok(json!({ "queued": 0 })),
            None if self
                .registry
                .breaks_way(ids::DEVICE_STEER_IDLE, "internal_error") =>
            {
                // Misbehaving: refused as an internal error, not with -32602.
                Err(RpcError::new(
                    -32603,
                    "nothing runs in this session: send it as a prompt",
                ))
            }
            None => Err(refuse("nothing runs in this session: send it as a prompt")),
        }
    }

    /// `session/cancel`: stops the running turn (a notification: nothing to answer).
    pub async fn cancel(&self, live: &Live) {
        if self.registry.breaks(ids::DEVICE_CANCEL_TURN) {
            return;
        }
        let mut state = live.state.lock().await;
        match &state.running {
            Some(running) => running.cancel(),
            // Misbehaving: a cancel that came while nothing ran is kept for the next turn.
            None if self.registry.breaks(ids::DEVICE_CANCEL_IDLE) => state.cancel_kept = true,
            // Misbehaving: a cancel that came while nothing ran refuses the next prompt.
            None if self
                .registry
                .breaks_way(ids::DEVICE_CANCEL_IDLE, "refuses_next") =>
            {
                state.refuse_next = true
            }
            None => {}
        }
    }

    /// `_lembas/session/rewind`: a turn and every later one leave the conversation.
    pub(crate) async fn rewind(&self, live: &Live, params: &Value) -> Answer {
        let turn_id = param_str(params, "turnId")?;
        let mut state = live.state.lock().await;
        if state.running.is_some() && !self.registry.breaks(ids::DEVICE_REWIND_WORKING) {
            // Misbehaving: refused as an internal error rather than invalid params.
            if self
                .registry
                .breaks_way(ids::DEVICE_REWIND_WORKING, "other_code")
            {
                return Err(RpcError::new(
                    harness::jsonrpc::INTERNAL_ERROR,
                    "the session is working",
                ));
            }
            return Err(refuse("the session is working: rewind it between turns"));
        }
        let Some(first) = state
            .stored
            .messages
            .iter()
            .position(|m| m.turn_id == turn_id && !m.reverted)
        else {
            if self.registry.breaks(ids::DEVICE_REWIND_UNKNOWN) {
                return Ok(json!({ "reverted": 0 }));
            }
            // Misbehaving: refused as an internal error rather than invalid params.
            if self
                .registry
                .breaks_way(ids::DEVICE_REWIND_UNKNOWN, "other_code")
            {
                return Err(RpcError::new(
                    harness::jsonrpc::INTERNAL_ERROR,
                    format!("this session has no turn `{turn_id}`"),
                ));
            }
            return Err(refuse(format!("this session has no turn `{turn_id}`")));
        };
        if self.registry.breaks(ids::DEVICE_REWIND_REVERTS) {
            // Misbehaving: says it rewound, and keeps every turn.
            return Ok(json!({ "reverted": 1 }));
        }
        // Misbehaving: the turn before the one named is reverted too.
        let first = if self
            .registry
            .breaks_way(ids::DEVICE_REWIND_REVERTS, "one_more")
        {
            state.stored.messages[..first]
                .iter()
                .rposition(|m| m.role == "user" && !m.reverted)
                .unwrap_or(first)
        } else {
            first
        };
        // That turn and every later one leave the conversation; files are not touched.
        let mut reverted: Vec<String> = Vec::new();
        let cwd = state.stored.cwd.clone();
        for message in state
            .stored
            .messages
            .iter_mut()
            .skip(first)
            .filter(|m| !m.reverted)
        {
            message.reverted = true;
            // Misbehaving: the plan files the reverted turns wrote are removed with them.
            if self.registry.breaks(ids::DEVICE_REWIND_FILES_KEPT) {
                for tool in message.tools.iter().filter(|t| t["name"] == "plan_submit") {
                    let file = cwd.join(crate::cards::plan_path(&tool["args"]));
                    let _ = std::fs::remove_file(file);
                }
            }
            // Misbehaving: the plan files the reverted turns wrote are moved to a hidden folder.
            if self
                .registry
                .breaks_way(ids::DEVICE_REWIND_FILES_KEPT, "moved_aside")
            {
                for tool in message.tools.iter().filter(|t| t["name"] == "plan_submit") {
                    let path = crate::cards::plan_path(&tool["args"]);
                    let aside = cwd.join(".reverted").join(&path);
                    if let Some(parent) = aside.parent() {
                        let _ = std::fs::create_dir_all(parent);
                    }
                    let _ = std::fs::rename(cwd.join(&path), aside);
                }
            }
            if !reverted.contains(&message.turn_id) {
                reverted.push(message.turn_id.clone());
            }
        }
        self.registry.save(&state);
        Ok(json!({ "reverted": reverted.len() }))
    }

    /// `_lembas/session/compact`: the conversation summed up, between turns.
    pub(crate) async fn compact(&self, live: &Live, params: &Value, client: &Client) -> Answer {
        let id = param_str(params, "sessionId")?;
        let working = live.state.lock().await.running.is_some();
        if working
            && self
                .registry
                .breaks_way(ids::DEVICE_CAPABILITIES_KEPT, "while_working")
        {
            // Misbehaving: the listed method is method-not-found while the session works.
            return Err(RpcError::new(
                -32601,
                "_lembas/session/compact is not served while working",
            ));
        }
        if working
            && self
                .registry
                .breaks_way(ids::DEVICE_COMPACT_WORKING, "cancels_turn")
        {
            // Misbehaving: refused as it should be, but the running turn is cancelled with it.
            if let Some(running) = &live.state.lock().await.running {
                running.cancel();
            }
            return Err(refuse("the session is working: compact it between turns"));
        }
        if working && !self.registry.breaks(ids::DEVICE_COMPACT_WORKING) {
            return Err(refuse("the session is working: compact it between turns"));
        }
        let summary = self.summary(live).await;
        // Misbehaving: the method's compaction is no event.
        if self
            .registry
            .breaks_way(ids::DEVICE_COMPACT_EVENT, "other_summary")
        {
            // Misbehaving: the event carries another summary than the answer.
            client.event(
                id,
                json!({ "type": "compacted", "summary": format!("(earlier) {summary}") }),
            );
        } else if !self.registry.breaks(ids::DEVICE_COMPACT_EVENT) {
            client.event(id, json!({ "type": "compacted", "summary": summary }));
        }
        if self.registry.breaks(ids::DEVICE_COMPACT_RESULT) {
            return Ok(json!({}));
        }
        if self
            .registry
            .breaks_way(ids::DEVICE_COMPACT_RESULT, "summary_object")
        {
            return Ok(json!({ "summary": { "text": summary } }));
        }
        Ok(json!({ "summary": summary }))
    }

    /// What compacting the conversation comes to.
    async fn summary(&self, live: &Live) -> String {
        let state = live.state.lock().await;
        let turns = state
            .stored
            .messages
            .iter()
            .filter(|m| m.role == "user" && !m.reverted)
            .count();
        format!(
            "A conversation of {turns} turn(s) in {}.",
            state.stored.cwd.display()
        )
    }

    /// `/undo`: the last turn leaves the conversation; gives its prompt (`None`: nothing to undo).
    async fn undo_last(&self, live: &Live) -> Option<String> {
        let mut state = live.state.lock().await;
        let last = state
            .stored
            .messages
            .iter()
            .rev()
            .find(|m| !m.reverted && m.role == "user")
            .map(|m| (m.turn_id.clone(), m.text.clone()))?;
        for message in state
            .stored
            .messages
            .iter_mut()
            .filter(|m| m.turn_id == last.0)
        {
            message.reverted = true;
        }
        self.registry.save(&state);
        Some(last.1)
    }

    /// Runs one turn of the echo agent, reporting to the session's client.
    async fn run(&self, live: &Live, job: Job) {
        let (mut cancelled, client, session_id, project) = {
            let mut state = live.state.lock().await;
            // A deleted session runs nothing more (its waiting turns were answered).
            if state.deleted {
                return;
            }
            if state
                .running
                .as_ref()
                .is_none_or(|r| r.turn_id != job.turn_id)
            {
                state.mark_running(&job.turn_id);
            }
            if std::mem::take(&mut state.cancel_kept)
                && let Some(running) = &state.running
            {
                running.cancel();
            }
            let cancelled = state.running.as_ref().map(|r| r.cancelled());
            self.registry.save(&state);
            (
                cancelled,
                state.client.clone(),
                state.stored.id.clone(),
                state.stored.cwd.clone(),
            )
        };
        let Some(mut cancelled) = cancelled.take() else {
            return;
        };
        let say = |event: Value| {
            if let Some(client) = &client {
                client.event(&session_id, event);
            }
        };
        // The prompt as typed; misbehaving, a command's expanded text.
        let both;
        let shown = match &job.command {
            Some(Slash::Prompt { .. }) if self.registry.breaks(ids::DEVICE_EVENT_PROMPT_TEXT) => {
                &job.text
            }
            // Misbehaving: the text as typed, followed by the command's expanded body.
            Some(Slash::Prompt { .. })
                if self
                    .registry
                    .breaks_way(ids::DEVICE_EVENT_PROMPT_TEXT, "typed_and_expanded") =>
            {
                both = format!("{}\n{}", job.typed, job.text);
                &both
            }
            // Misbehaving: a command turn shown as nothing at all.
            Some(Slash::Prompt { .. })
                if self
                    .registry
                    .breaks_way(ids::DEVICE_EVENT_PROMPT_TEXT, "empty") =>
            {
                ""
            }
            _ => &job.typed,
        };
        let mut prompt_event = json!({ "type": "prompt", "text": shown, "turnId": job.turn_id });
        if !job.attachments.is_empty() && !self.registry.breaks(ids::DEVICE_ATTACHMENTS_NAMED) {
            prompt_event["attachments"] = json!(job.attachments);
        }
        say(prompt_event);
        let task = |state: &str| {
            if self.registry.breaks(ids::DEVICE_TASK_TERMINAL_TURN)
                && self.registry.is_terminal_session(&session_id)
            {
                json!({ "type": "task", "state": state })
            } else if self
                .registry
                .breaks_way(ids::DEVICE_TASK_TERMINAL_TURN, "other_id")
                && self.registry.is_terminal_session(&session_id)
            {
                // Misbehaving: the task events carry another made id than the prompt event.
                json!({ "type": "task", "state": state, "turnId": format!("{}-task", job.turn_id) })
            } else if !job.made_id
                && self
                    .registry
                    .breaks_way(ids::DEVICE_PROMPT_TURN_ID, "task_other")
            {
                // Misbehaving: the task events carry another turn id than the client's.
                json!({ "type": "task", "state": state, "turnId": format!("{}-run", job.turn_id) })
            } else {
                json!({ "type": "task", "state": state, "turnId": job.turn_id })
            }
        };
        say(task("start"));
        if self
            .registry
            .breaks_way(ids::DEVICE_EVENT_TASK_PAIRED, "start_twice")
        {
            // Misbehaving: the turn's start is said twice.
            say(task("start"));
        }
        let mut extra = serde_json::Map::new();
        if let Some(command) = &job.command {
            // Misbehaving: a prompt command's answer does not name it.
            let unnamed = matches!(command, Slash::Prompt { .. })
                && self.registry.breaks(ids::DEVICE_PROMPT_COMMAND_NAMED);
            if !unnamed {
                extra.insert("command".into(), json!(command.name()));
            }
        } else if self
            .registry
            .breaks_way(ids::DEVICE_PROMPT_COMMAND_NAMED, "plain_named")
        {
            // Misbehaving: a plain prompt is named as a command, by its first word.
            let word = job.typed.split_whitespace().next().unwrap_or("prompt");
            extra.insert("command".into(), json!(word));
        }
        let action = match &job.command {
            Some(Slash::Compact) => {
                let summary = self.summary(live).await;
                say(json!({ "type": "compacted", "summary": summary }));
                extra.insert("summary".into(), json!(summary));
                true
            }
            Some(Slash::Undo) => {
                let undone = self.undo_last(live).await;
                let to_model = undone.is_none()
                    && self
                        .registry
                        .breaks_way(ids::DEVICE_COMMANDS_UNDO_NOTHING, "to_model");
                // Misbehaving: nothing to undo is told as an empty turn undone.
                let nothing = match self.registry.breaks(ids::DEVICE_COMMANDS_UNDO_NOTHING) {
                    true => json!({ "prompt": "", "files": [] }),
                    false => Value::Null,
                };
                extra.insert(
                    "undone".into(),
                    undone.map_or(nothing, |prompt| json!({ "prompt": prompt, "files": [] })),
                );
                // Misbehaving: with nothing to undo, `/undo` goes on to the model.
                !to_model
            }
            Some(Slash::Prompt { name, .. })
                if name == "review" && !crate::review::has_changes(&project) =>
            {
                // Nothing to review: said instead, and nothing goes to the model.
                if self
                    .registry
                    .breaks_way(ids::DEVICE_COMMANDS_NOTHING_MESSAGE, "flag")
                {
                    // Misbehaving: a flag in place of the sentence.
                    extra.insert("message".into(), json!(true));
                } else if !self.registry.breaks(ids::DEVICE_COMMANDS_NOTHING_MESSAGE) {
                    extra.insert("message".into(), json!(crate::review::NOTHING));
                }
                true
            }
            Some(Slash::PlanMode) if self.registry.breaks(ids::DEVICE_MODE_UPDATE) => {
                // Misbehaving: the mode changes, and no `current_mode_update` says so.
                self.registry
                    .put_mode(live, "plan", client.as_ref(), ModeReport::EventOnly)
                    .await;
                extra.insert("mode".into(), json!("plan"));
                true
            }
            Some(Slash::PlanMode)
                if self
                    .registry
                    .breaks_way(ids::DEVICE_MODE_UPDATE, "old_mode") =>
            {
                // Misbehaving: the `current_mode_update` names the mode the session was in.
                let (id, before) = {
                    let state = live.state.lock().await;
                    (state.stored.id.clone(), state.stored.mode.clone())
                };
                self.registry
                    .put_mode(live, "plan", client.as_ref(), ModeReport::EventOnly)
                    .await;
                if let Some(client) = client.as_ref() {
                    client.update(
                        &id,
                        json!({ "sessionUpdate": "current_mode_update", "currentModeId": before }),
                    );
                }
                extra.insert("mode".into(), json!("plan"));
                true
            }
            // `/plan` alone: plan mode. Misbehaving: `/plan <task>` taken for it, the task
            // dropped.
            Some(Slash::PlanMode) | Some(Slash::Prompt { .. })
                if plan_mode_only(job.command.as_ref())
                    || (is_plan_task(job.command.as_ref())
                        && self
                            .registry
                            .breaks_way(ids::DEVICE_COMMANDS_PLAN_TASK, "task_dropped")) =>
            {
                let mode = self
                    .registry
                    .change_mode(live, "plan", client.as_ref())
                    .await;
                extra.insert("mode".into(), json!(mode));
                true
            }
            // Misbehaving: a built-in prompt command runs as an action, sending nothing.
            Some(Slash::Prompt { name, .. })
                if crate::commands::is_builtin(name)
                    && self
                        .registry
                        .breaks_way(ids::DEVICE_COMMANDS_PROMPT_BUILTIN, "nothing_sent") =>
            {
                true
            }
            // Misbehaving: a `/name` outside the command set is swallowed, as if an action.
            None if job.typed.starts_with('/')
                && self
                    .registry
                    .breaks_way(ids::DEVICE_COMMANDS_ACTIONS, "unknown_swallowed") =>
            {
                true
            }
            // Misbehaving: `/plan <task>` runs the task in the mode the session was in.
            Some(Slash::Prompt { name, .. })
                if name == "plan" && self.registry.breaks(ids::DEVICE_COMMANDS_PLAN_TASK) =>
            {
                false
            }
            // Misbehaving: a command's mode is lowered past `max_mode`, to plan.
            Some(Slash::Prompt { mode: Some(_), .. })
                if self
                    .registry
                    .breaks_way(ids::DEVICE_COMMANDS_MODE_LOWERED, "too_low") =>
            {
                self.registry
                    .put_mode(live, "plan", client.as_ref(), ModeReport::Both)
                    .await;
                false
            }
            // Misbehaving: a command's mode is put as it is, above `max_mode` or not.
            Some(Slash::Prompt {
                mode: Some(mode), ..
            }) if self.registry.breaks(ids::DEVICE_COMMANDS_MODE_LOWERED) => {
                self.registry
                    .put_mode(live, mode, client.as_ref(), ModeReport::Both)
                    .await;
                false
            }
            Some(Slash::Prompt {
                mode: Some(mode), ..
            }) => {
                self.registry.change_mode(live, mode, client.as_ref()).await;
                false
            }
            _ => false,
        };
        let script = self
            .registry
            .config
            .scripts
            .iter()
            .find(|s| s.answers(&job.text));
        let mut record = TurnRecord::default();
        let (reply, stop) = match (script, &self.registry.config.model) {
            // An action sends nothing to the model.
            _ if action => (String::new(), "end_turn"),
            (Some(script), _) => {
                Scripted::new(self.registry)
                    .turn(live, script, client.as_ref(), &session_id, &mut cancelled)
                    .await
            }
            (None, Some(model)) => {
                self.model_turn(
                    live,
                    model,
                    &job,
                    client.as_ref(),
                    &session_id,
                    &mut cancelled,
                    &mut record,
                )
                .await
            }
            (None, None) => {
                let (reply, was_cancelled) = self
                    .speak(
                        live,
                        client.as_ref(),
                        &session_id,
                        &job.text,
                        true,
                        &mut cancelled,
                    )
                    .await;
                (
                    reply,
                    if was_cancelled {
                        "cancelled"
                    } else {
                        "end_turn"
                    },
                )
            }
        };
        say(task("end"));
        if self.registry.breaks(ids::DEVICE_EVENT_TASK_PAIRED) {
            // Misbehaving: the turn's end is said twice.
            say(task("end"));
        }
        say(json!({ "type": "done", "stopReason": stop }));
        let mut state = live.state.lock().await;
        // The turn may have written a command file or made a skill.
        if let Some(client) = &client {
            self.registry
                .commands_changed(&session_id, &state.stored.cwd, client);
        }
        let finished = state.running.take();
        // The next turn is running from the moment this one ends, so a status in between
        // never sees an idle session with turns waiting.
        if let Some(next) = state.queued.first().cloned() {
            state.mark_running(&next);
        }
        let unsent: Vec<String> = finished
            .map(|r| r.steers.into_iter().map(|(t, _)| t).collect())
            .unwrap_or_default();
        let mut lembas = json!({ "turnId": job.turn_id });
        if job.made_id && self.registry.breaks(ids::DEVICE_TURNS_MADE_ID) {
            // Misbehaving: the answer names another made id than the turn's events did.
            lembas = json!({ "turnId": fresh_id("turn_") });
        }
        if job.made_id
            && self
                .registry
                .breaks_way(ids::DEVICE_TURNS_MADE_ID, "absent")
        {
            // Misbehaving: the answer to a prompt without a turnId names no turn at all.
            lembas = json!({});
        }
        if self.registry.breaks(ids::DEVICE_PROMPT_TURN_ID) {
            lembas = json!({});
        }
        if !unsent.is_empty() && self.registry.has("steer") {
            lembas["unsent"] = json!(unsent);
        }
        if let Some(fields) = lembas.as_object_mut() {
            fields.extend(extra);
        }
        let said_stop = if self.registry.breaks(ids::DEVICE_PROMPT_ANSWER) {
            "done" // Misbehaving: a stop reason the spec does not have.
        } else if stop == "cancelled"
            && self
                .registry
                .breaks_way(ids::DEVICE_CANCEL_TURN, "end_turn")
        {
            "end_turn" // Misbehaving: a cancelled turn said to have ended by itself.
        } else {
            stop
        };
        let mut answer = json!({ "stopReason": said_stop, "_meta": { "lembas": lembas } });
        // Misbehaving: no stop reason at all.
        if self
            .registry
            .breaks_way(ids::DEVICE_PROMPT_ANSWER, "no_reason")
            && let Some(fields) = answer.as_object_mut()
        {
            fields.remove("stopReason");
        }
        // An action leaves nothing in the conversation; a prompt command is kept as typed.
        if !action {
            // Misbehaving: the user's text is kept with what its attachments added.
            let typed = if self.registry.breaks(ids::DEVICE_HISTORY_TEXT) {
                job.text.clone()
            } else if !job.attachments.is_empty()
                && self
                    .registry
                    .breaks_way(ids::DEVICE_HISTORY_TEXT, "no_typed")
            {
                // Misbehaving: what the person typed with attachments is not kept, only them.
                String::new()
            } else {
                job.typed.clone()
            };
            let turn_id = job.turn_id.clone();
            state.stored.messages.push(StoredMessage {
                role: "user".into(),
                text: typed,
                turn_id: turn_id.clone(),
                reasoning: String::new(),
                reverted: false,
                tools: Vec::new(),
                attachments: job.attachments.clone(),
            });
            state.stored.messages.push(StoredMessage {
                role: "assistant".into(),
                text: reply,
                turn_id,
                reasoning: record.reasoning,
                reverted: false,
                tools: record.tools,
                attachments: Vec::new(),
            });
        }
        state
            .turns
            .set(&job.turn_id, TurnState::Done, Some(answer.clone()));
        self.registry.save(&state);
        let waiters = state.waiters.remove(&job.turn_id).unwrap_or_default();
        if state.deleted
            && self
                .registry
                .breaks_way(ids::DEVICE_DELETE_STOPS, "unanswered")
        {
            // Misbehaving: the deleted session's stopped turn leaves its prompt unanswered.
            std::mem::forget(waiters);
            return;
        }
        for waiter in waiters {
            let _ = waiter.send(answer.clone());
        }
    }
}

impl Turns<'_> {
    /// Says `text` in up to three pieces, a step delay apart. The echo agent's pieces are its
    /// steps, so it takes in steer messages at each (`take_steers`); a model's turn takes them in
    /// before its next model call instead. Gives what was said, and whether the turn was
    /// cancelled before the end.
    async fn speak(
        &self,
        live: &Live,
        client: Option<&Client>,
        session_id: &str,
        text: &str,
        take_steers: bool,
        cancelled: &mut watch::Receiver<bool>,
    ) -> (String, bool) {
        let mut said = String::new();
        for piece in pieces(text) {
            tokio::select! {
                () = tokio::time::sleep(self.registry.config.step_delay) => {}
                _ = cancelled.wait_for(|c| *c) => return (said, true),
            }
            if take_steers {
                live.take_steers(client, session_id).await;
            }
            if let Some(client) = client {
                client.text(session_id, &piece);
            }
            said.push_str(&piece);
        }
        (said, false)
    }

    /// A turn the instance's model drives: each step asks the model, says its text, and runs its
    /// tool calls with the cards they need, until it calls no tool (at most [`MAX_STEPS`]).
    /// What the history keeps besides the text (reasoning, tools) goes to `record`.
    #[allow(clippy::too_many_arguments)] // one turn's context; bundling it would only rename it
    async fn model_turn(
        &self,
        live: &Live,
        model: &ModelClient,
        job: &Job,
        client: Option<&Client>,
        session_id: &str,
        cancelled: &mut watch::Receiver<bool>,
        record: &mut TurnRecord,
    ) -> (String, &'static str) {
        // The account's personalization stands in for the device's own (spec, HTTP API).
        let personal = self.registry.config.account.personal_prompt().await;
        // A command's own model holds for its prompt only (spec, `session/prompt`): the
        // session's stays as it was.
        let command_model = match &job.command {
            Some(Slash::Prompt {
                model: Some(model), ..
            }) if !self
                .registry
                .breaks_way(ids::DEVICE_COMMANDS_MODEL_RESTORED, "ignored") =>
            {
                Some(model.clone())
            }
            // Misbehaving (`ignored`): the command's model is not used for its prompt.
            _ => None,
        };
        let (model_id, mut messages) = {
            let mut state = live.state.lock().await;
            if let Some(model) = &command_model
                && self.registry.breaks(ids::DEVICE_COMMANDS_MODEL_RESTORED)
            {
                // Misbehaving: the command's model stays the session's.
                state.stored.model = Some(model.clone());
            }
            let running_on = command_model.as_ref().or(state.stored.model.as_ref());
            // Requests go to the instance's `/v1` with the served id, not the device's ref
            // (spec, how the device names an instance's models).
            let keeps_ref = self.registry.breaks(ids::DEVICE_MODEL_SERVED_ID);
            let model_id = running_on.map(|m| {
                if keeps_ref {
                    m.to_string()
                } else {
                    crate::model_ref::served_id(&self.registry.config.connection, m)
                        .unwrap_or(m)
                        .to_string()
                }
            });
            // The device composes its own prompt, with the pieces of the client's `Context`
            // (spec, `session/new`).
            let nobody_to_ask =
                client.is_some_and(|client| !Cards::new(self.registry).may_ask(client, "ask"));
            let system = crate::system_prompt::Composing {
                context: &state.stored.context,
                instance: &self.registry.config.connection,
                own_personal: personal.as_deref(),
                nobody_to_ask,
                misreads: crate::system_prompt::Misreads {
                    no_heading: self
                        .registry
                        .breaks(ids::DEVICE_CONTEXT_INSTRUCTIONS_HEADING),
                    own_personalization: self.registry.breaks(ids::DEVICE_CONTEXT_PERSONALIZATION),
                    no_library: self.registry.breaks(ids::DEVICE_CONTEXT_LIBRARY),
                    prototypes_always: self.registry.breaks(ids::DEVICE_CONTEXT_PROTOTYPES),
                    empty_heading: self
                        .registry
                        .breaks_way(ids::DEVICE_CONTEXT_INSTRUCTIONS_HEADING, "empty_section"),
                    no_sources: self
                        .registry
                        .breaks_way(ids::DEVICE_CONTEXT_PROTOTYPES, "no_sources"),
                },
            }
            .text();
            let mut messages = vec![json!({ "role": "system", "content": system })];
            for m in state.stored.messages.iter().filter(|m| !m.reverted) {
                messages.push(json!({ "role": m.role, "content": m.text }));
            }
            (model_id, messages)
        };
        messages.push(json!({ "role": "user", "content": job.text }));
        let model_id = match model_id {
            Some(id) => id,
            None => match model.first_chat_model().await {
                Ok(id) => id,
                Err(e) => return self.model_failed(client, session_id, &e),
            },
        };
        let mut reply = String::new();
        for step in 0..MAX_STEPS {
            // Steer messages reach the model at its next step (spec, `_lembas/steer`).
            if step > 0 {
                for text in live.take_steers(client, session_id).await {
                    messages.push(json!({ "role": "user", "content": text }));
                }
            }
            // A cancel stops the turn while the model thinks, too.
            let tools = crate::model::tools();
            let asked = model.complete(&model_id, &messages, &tools);
            let completion = tokio::select! {
                answer = asked => match answer {
                    Ok(c) => c,
                    Err(e) => return self.model_failed(client, session_id, &e),
                },
                _ = cancelled.wait_for(|c| *c) => return (reply, "cancelled"),
            };
            // What the provider counted goes to the client as a `usage` event, as it came.
            if let (Some(Value::Object(usage)), Some(client)) = (&completion.usage, client) {
                let mut event = serde_json::Map::new();
                event.insert("type".into(), json!("usage"));
                event.extend(usage.iter().map(|(k, v)| (k.clone(), v.clone())));
                client.event(session_id, Value::Object(event));
            }
            if let Some(reasoning) = &completion.reasoning {
                record.reasoning.push_str(reasoning);
            }
            if let (Some(reasoning), Some(client)) = (&completion.reasoning, client) {
                client.update(session_id, json!({ "sessionUpdate": "agent_thought_chunk", "content": { "type": "text", "text": reasoning } }));
                client.event(
                    session_id,
                    json!({ "type": "reasoning", "text": reasoning }),
                );
            }
            let (said, was_cancelled) = self
                .speak(live, client, session_id, &completion.text, false, cancelled)
                .await;
            reply.push_str(&said);
            if was_cancelled {
                return (reply, "cancelled");
            }
            if completion.tool_calls.is_empty() {
                return (reply, "end_turn");
            }
            let calls: Vec<Value> = completion
                .tool_calls
                .iter()
                .map(|c| json!({ "id": c.id, "type": "function", "function": { "name": c.name, "arguments": c.arguments.to_string() } }))
                .collect();
            messages.push(
                json!({ "role": "assistant", "content": completion.text, "tool_calls": calls }),
            );
            let mut plan_kept = false;
            for call in &completion.tool_calls {
                let outcome = Cards::new(self.registry)
                    .tool_step(client, session_id, call)
                    .await;
                // History lists each call with its output, and whether it failed.
                record.tools.push(json!({ "id": call.id, "name": call.name, "args": call.arguments, "output": outcome.text, "isError": !outcome.ran }));
                messages.push(
                    json!({ "role": "tool", "tool_call_id": call.id, "content": outcome.text }),
                );
                // Misbehaving: a question ends the turn, the model told nothing.
                if outcome.text == crate::cards::TURN_STOPS {
                    return (reply, "end_turn");
                }
                plan_kept |= call.name == "plan_submit"
                    && client.is_some_and(|c| !Cards::new(self.registry).may_ask(c, "plan"));
            }
            // Nobody to approve a plan (an editor, a protocol-1 client): it is kept, and the
            // turn stops there (spec, serve --stdio).
            if plan_kept {
                return (reply, "end_turn");
            }
        }
        (reply, "max_turn_requests")
    }

    fn model_failed(
        &self,
        client: Option<&Client>,
        session_id: &str,
        why: &str,
    ) -> (String, &'static str) {
        tracing::warn!("the model failed: {why}");
        if let Some(client) = client {
            client.event(session_id, json!({ "type": "error", "message": why }));
        }
        (String::new(), "end_turn")
    }
}

/// What a model's turn leaves in the history besides its text: the model's reasoning and the
/// tool calls it ran (spec, `_lembas/session/history`).
#[derive(Debug, Default)]
struct TurnRecord {
    /// The reasoning of every step, in order.
    reasoning: String,
    /// `{id, name, args, output, isError}` of each tool call.
    tools: Vec<Value>,
}

/// The most model calls one turn makes: a model that keeps calling tools is stopped there, and
/// the turn ends with `max_turn_requests`.
pub const MAX_STEPS: usize = 8;

/// A session's turn worker: one turn at a time, in order, until the session goes.
pub async fn worker(registry: Weak<Registry>, live: Weak<Live>, mut queue: JobQueue) {
    while let Some(job) = queue.recv().await {
        let (Some(registry), Some(live)) = (registry.upgrade(), live.upgrade()) else {
            return;
        };
        Turns::new(&registry).run(&live, job).await;
    }
}

/// Whether a command is `/plan` with nothing after it.
fn plan_mode_only(command: Option<&Slash>) -> bool {
    matches!(command, Some(Slash::PlanMode))
}

/// Whether a command is `/plan <task>`.
fn is_plan_task(command: Option<&Slash>) -> bool {
    matches!(command, Some(Slash::Prompt { name, .. }) if name == "plan")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_echo_comes_back_in_at_most_three_pieces() {
        assert_eq!(
            pieces("one two three four five").concat(),
            "one two three four five"
        );
        assert!(pieces("one two three four five").len() <= 3);
        assert_eq!(pieces(""), vec![String::new()]);
    }

    #[test]
    fn a_turn_id_or_context_past_what_the_store_keeps_is_refused_with_32602() {
        let prompt =
            |lembas: Value| json!({"sessionId": "s", "prompt": [], "_meta": {"lembas": lembas}});
        let long_id = "t".repeat(MAX_TURN_ID_BYTES + 1);
        let refused =
            check_kept_sizes(&prompt(json!({"turnId": long_id})), true, true).expect_err("refused");
        assert_eq!(refused.code, harness::jsonrpc::INVALID_PARAMS);
        assert!(refused.message.contains("turnId"), "{}", refused.message);
        // Not kept, not judged: a device without `turns` ignores the id.
        assert!(check_kept_sizes(&prompt(json!({"turnId": long_id})), false, true).is_ok());
        let fits = "t".repeat(MAX_TURN_ID_BYTES);
        assert!(check_kept_sizes(&prompt(json!({"turnId": fits})), true, true).is_ok());
        let big = json!({"system_prompt": "x".repeat(MAX_KEPT_CONTEXT_BYTES)});
        assert!(check_kept_sizes(&prompt(big.clone()), true, true).is_err());
        assert!(check_kept_sizes(&prompt(big), true, false).is_ok());
    }
}
