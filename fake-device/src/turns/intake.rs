//! Reading a `session/prompt` before its turn is admitted: the sizes the store would keep, the
//! attached blocks (checked, not yet written), the `@path` mentions of what was typed, and the
//! text the agent is given once the turn is new. What its turn id finds is [`super::admission`].

use std::path::{Path, PathBuf};

use harness::jsonrpc::RpcError;
use serde_json::Value;
use tokio::sync::oneshot;

use super::Turns;
use crate::answers::{Reply, fresh_id, refuse};
use crate::attachments::Prepared;
use crate::command_set::Slash;
use crate::events::Client;
use crate::limits::Limits;
use crate::open_session::{OpenSession, State};

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
pub(super) fn check_kept_sizes(
    params: &Value,
    turn_ids: bool,
    context: bool,
) -> Result<(), RpcError> {
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

/// A prompt read, before its turn is admitted: nothing of it is written yet.
pub(super) struct ReadPrompt {
    /// Where its attachments go (`None`: the device takes none).
    pub dir: Option<PathBuf>,
    /// Its blocks, checked.
    pub prepared: Prepared,
    /// What was typed, and where its mentions reach.
    pub typed: TypedPrompt,
}

/// What the person typed of a prompt, with what it needs to become the agent's text.
pub(super) struct TypedPrompt {
    /// What the person typed.
    pub text: String,
    /// What the `@path`s of the typed text attach.
    pub mentioned: String,
    /// The session's project (its working directory).
    pub project: PathBuf,
    /// The device's limits as the prompt was read.
    pub limits: Limits,
}

impl Turns<'_> {
    /// Takes a prompt in: the order-sensitive part (the turn queued, or found) happens now, in
    /// the link's order; the answer comes when the turn ends.
    pub(crate) async fn prompt(
        &self,
        live: &OpenSession,
        params: &Value,
        client: &Client,
    ) -> Result<Reply, RpcError> {
        check_kept_sizes(
            params,
            self.registry.has("turns"),
            self.registry.has("context"),
        )?;
        let read = self.read_prompt(live, params).await?;
        let meta = params.get("_meta");
        let given = meta
            .and_then(|m| m.pointer("/lembas/turnId"))
            .and_then(Value::as_str)
            .filter(|_| self.registry.has("turns"));
        let turn_id = given.map(String::from).unwrap_or_else(|| fresh_id("turn_"));
        let (tx, rx) = oneshot::channel();
        let admitted = Admitting {
            meta,
            client,
            turn_id: &turn_id,
            made_id: given.is_none(),
        };
        if let Some(reply) = self.admit(live, admitted, read, tx).await? {
            return Ok(reply);
        }
        Ok(Reply::Later {
            turn_id,
            answer: rx,
        })
    }

    /// Reads the prompt's blocks and mentions, refusing one the device would not keep.
    async fn read_prompt(
        &self,
        live: &OpenSession,
        params: &Value,
    ) -> Result<ReadPrompt, RpcError> {
        let (session_id, project) = {
            let state = live.state.lock().await;
            (state.stored.id.clone(), state.stored.cwd.clone())
        };
        let dir = self
            .registry
            .has("attachments")
            .then(|| self.registry.store.attachments_dir(&session_id));
        let prepared = self.prepare_blocks(params, dir.is_some())?;
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
        let mentioned = self.expand(&text, &project, &limits);
        Ok(ReadPrompt {
            dir,
            prepared,
            typed: TypedPrompt {
                text,
                mentioned,
                project,
                limits,
            },
        })
    }

    /// Checks the prompt's blocks against the attachment limits, writing nothing yet.
    fn prepare_blocks(
        &self,
        params: &Value,
        takes_attachments: bool,
    ) -> Result<Prepared, RpcError> {
        let faults = &self.faults.intake;
        // Misbehaving: a block may be twice the spec's limit.
        let max_block = match faults.double_block_limit {
            true => 2 * crate::attachments::MAX_BLOCK_BYTES,
            false => crate::attachments::MAX_BLOCK_BYTES,
        };
        crate::attachments::prepare(
            params.get("prompt").unwrap_or(&Value::Null),
            takes_attachments,
            max_block,
            faults.blocks,
        )
        .map_err(|why| match faults.limits_internal_error {
            // Misbehaving: a prompt over the limits refused as an internal error.
            true => RpcError::new(-32603, why),
            false => refuse(why),
        })
    }

    /// What the `@path`s of `text` attach (nothing when the device does not serve files); the
    /// files attached count as used for the picker's order.
    fn expand(&self, text: &str, project: &Path, limits: &Limits) -> String {
        if !self.registry.has("files") {
            return String::new();
        }
        let reach = crate::mentions::Reach {
            project,
            limits,
            misreads: self.faults.intake.mentions,
        };
        let expanded = crate::mentions::expand(text, &reach);
        for path in &expanded.used {
            self.registry.frecency.used(path);
        }
        expanded.text
    }

    /// The command a new turn's prompt is, when it is one the device serves.
    pub(super) fn command_of(&self, read: &TypedPrompt) -> Option<Slash> {
        self.registry
            .has("commands")
            .then(|| {
                crate::command_set::parse(&read.text, &self.registry.command_set(&read.project))
            })
            .flatten()
            .filter(|_| !self.faults.intake.commands_unread)
    }

    /// What the agent is given of a new turn: the text (a command's expanded), then what the
    /// typed `@path`s attach; the attached blocks' text follows it.
    pub(super) fn agent_text(
        &self,
        state: &State,
        read: &TypedPrompt,
        command: Option<&Slash>,
    ) -> String {
        let faults = &self.faults.intake;
        let text = &read.text;
        let mut given_text = match command {
            // Misbehaving: a built-in prompt command reaches the model as typed.
            Some(Slash::Prompt { name, .. })
                if crate::command_set::is_builtin(name) && faults.builtin_as_typed =>
            {
                text.clone()
            }
            // Misbehaving: a custom command's text without what follows its name.
            Some(Slash::Prompt { name, .. })
                if !crate::command_set::is_builtin(name) && faults.custom_without_arguments =>
            {
                match crate::command_set::parse(
                    &format!("/{name}"),
                    &self.registry.command_set(&read.project),
                ) {
                    Some(Slash::Prompt { text, .. }) => text,
                    _ => text.clone(),
                }
            }
            Some(Slash::Prompt { text, .. }) => text.clone(),
            _ => text.clone(),
        };
        given_text.push_str(&read.mentioned);
        // Misbehaving: `@path` in a command's own text is attached too.
        if let Some(Slash::Prompt { text: own, .. }) = command
            && faults.command_mentions_attached
        {
            given_text.push_str(&self.expand(own, &read.project, &read.limits));
        }
        // Misbehaving: the `@path`s of the last command's own text are attached to the prompt
        // after it.
        if faults.command_mentions_next_prompt
            && let Some(last) = state
                .stored
                .messages
                .iter()
                .rev()
                .find(|m| m.role == "user")
            && let Some(Slash::Prompt { text: own, .. }) =
                crate::command_set::parse(&last.text, &self.registry.command_set(&read.project))
        {
            given_text.push_str(&self.expand(&own, &read.project, &read.limits));
        }
        given_text
    }
}

/// Who sent a prompt, and the turn it names.
pub(super) struct Admitting<'a> {
    /// The prompt's `_meta` (its `Context`, its turn id).
    pub meta: Option<&'a Value>,
    /// The client it came from.
    pub client: &'a Client,
    /// Its turn id, given or made.
    pub turn_id: &'a str,
    /// Whether the device made the id (the prompt came without one).
    pub made_id: bool,
}
