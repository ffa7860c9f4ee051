//! The device's sessions as the link's methods reach them: a session opened from the store
//! (or made new) with its turn worker, the one a request names (refused once its folder left
//! the limits), and what a person at the device's own terminal does with them. The methods
//! themselves are answered in their rooms, [`crate::methods`].

use std::sync::Arc;

use harness::jsonrpc::RpcError;
use harness::rules::ids;
use serde_json::{Value, json};

use crate::answers::{Reply, fresh_id, param_str, refuse};
use crate::events::Client;
use crate::limits::Limits;
use crate::open_session::{JobQueue, OpenSession};
use crate::registry::{Opened, Registry, SessionsConfig};
use crate::store::{Store, StoredSession, TurnLog};
use crate::turns::{Faults, Turns};

/// A session's model: its default, and the device's ref for a model named.
mod model_choice;

/// Every session of the device, as the link's methods reach them.
#[derive(Debug)]
pub struct Sessions {
    registry: Arc<Registry>,
    /// What the turns get wrong on purpose, resolved once from the configured misbehaviours.
    turn_faults: Faults,
}

impl Sessions {
    /// Sessions over a store.
    pub fn new(store: Store, limits: Limits, config: SessionsConfig) -> Arc<Sessions> {
        let turn_faults = Faults::of(&config.misbehave);
        Arc::new(Sessions {
            registry: Arc::new(Registry::new(store, limits, config)),
            turn_faults,
        })
    }

    /// The registry under the sessions: their store, limits, behaviour and terminal.
    pub fn registry(&self) -> &Arc<Registry> {
        &self.registry
    }

    /// The live session `id`, opened from the store when it is not in memory.
    pub async fn open(&self, id: &str) -> Option<Arc<OpenSession>> {
        match self.registry.open(id)? {
            Opened::Already(live) => Some(live),
            Opened::Now(live, queue) => {
                self.start_worker(&live, queue);
                Some(live)
            }
        }
    }

    /// Puts a new session in memory with its turn worker.
    pub(crate) fn spawn_live(&self, stored: StoredSession, turns: TurnLog) -> Arc<OpenSession> {
        let (live, queue) = self.registry.insert(stored, turns);
        self.start_worker(&live, queue);
        live
    }

    fn start_worker(&self, live: &Arc<OpenSession>, queue: JobQueue) {
        tokio::spawn(crate::turns::worker(
            Arc::downgrade(&self.registry),
            Arc::downgrade(live),
            queue,
            self.turn_faults,
        ));
    }

    /// `session/prompt`, once its session is open: see [`Turns::prompt`].
    pub(crate) async fn prompt(&self, params: &Value, client: &Client) -> Result<Reply, RpcError> {
        // Misbehaving: a session left available is refused as still the terminal's.
        if let Some(id) = params.get("sessionId").and_then(Value::as_str)
            && self
                .registry
                .left_held
                .lock()
                .is_ok_and(|held| held.contains(id))
        {
            return Err(refuse(format!("session `{id}` is in use at the terminal")));
        }
        let live = self.session(params).await?;
        self.turns().prompt(&live, params, client).await
    }

    /// The turns of these sessions, misbehaving as the device was told.
    pub(crate) fn turns(&self) -> Turns<'_> {
        Turns::new(&self.registry, &self.turn_faults)
    }

    /// A person at the device's terminal starts a session in the first root and shares it.
    /// Gives its id (`None`: the device has no root to work in).
    pub fn share_terminal_session(&self) -> Option<String> {
        let cwd = self.registry.limits.read().ok()?.roots.first()?.clone();
        let stored = StoredSession {
            title: "a terminal session".into(),
            // Shared with the client: it may delete it from now on.
            given: true,
            ..StoredSession::new(fresh_id("ses_"), cwd)
        };
        let id = stored.id.clone();
        if let Err(e) = self.registry.store.save_session(&stored) {
            tracing::error!("cannot store the terminal's session: {e}");
        }
        self.spawn_live(stored, TurnLog::default());
        self.registry.share(&id);
        Some(id)
    }

    /// The person at the terminal types `text` into the session it shares: a turn like any
    /// other, with a turn id the device makes, reported to `client`. Gives that turn's id and
    /// where its answer comes when it ends (nobody waits for it on the link: the client
    /// follows the turn through its events).
    pub async fn terminal_turn(
        &self,
        text: &str,
        client: &Client,
    ) -> Result<(String, tokio::sync::oneshot::Receiver<Value>), String> {
        let id = self
            .registry
            .terminal_session()
            .ok_or("no session is shared")?;
        let params = json!({ "sessionId": id, "prompt": [{ "type": "text", "text": text }] });
        match self.prompt(&params, client).await {
            Ok(Reply::Later { turn_id, answer }) => Ok((turn_id, answer)),
            Ok(Reply::Now(_)) => Err("the shared session answered at once: no turn ran".into()),
            Err(e) => {
                tracing::warn!("the terminal's prompt was not taken: {e}");
                Err(format!("the terminal's prompt was not taken: {e}"))
            }
        }
    }

    /// Deletes a session on the device, as its terminal would; gives whether it was there.
    /// (Telling the client, now or at the next link, is the caller's: see [`crate::actions`].)
    pub async fn delete_here(&self, id: &str) -> Result<bool, String> {
        if !crate::store::is_store_id(id) {
            return Err(format!("`{id}` is not a session id"));
        }
        match self.open(id).await {
            Some(live) => self
                .registry
                .remove(id, &live)
                .await
                .map_err(|e| e.to_string()),
            None => Ok(false),
        }
    }

    /// The open session `params` name (`sessionId`), refused as `session/new` would refuse its
    /// folder when that left the limits.
    pub(crate) async fn session(&self, params: &Value) -> Result<Arc<OpenSession>, RpcError> {
        let id = param_str(params, "sessionId")?;
        let live = self
            .open(id)
            .await
            .ok_or_else(|| refuse(format!("no session `{id}` on this device")))?;
        {
            let mut state = live.state.lock().await;
            // The limits apply to every request as they are now: a session whose folder left
            // the roots (or remote work turned off) is refused as session/new would refuse it.
            // A terminal's shared session is the terminal's to bound.
            let limits = self.registry.limits();
            // Misbehaving: a session the client had is served wherever it lies.
            if !self.registry.is_terminal_session(id)
                && !limits.inside_roots(&state.stored.cwd)
                && !self.registry.breaks(ids::DEVICE_SESSIONS_REOPEN_RULES)
            {
                // Misbehaving: refused as an internal error rather than invalid params.
                if self
                    .registry
                    .breaks_way(ids::DEVICE_SESSIONS_REOPEN_RULES, "other_code")
                {
                    return Err(RpcError::new(
                        harness::jsonrpc::INTERNAL_ERROR,
                        "this session is outside the device's limits now",
                    ));
                }
                return Err(refuse(if limits.remote {
                    format!(
                        "session `{id}` works in {}, which is outside the device's remote roots",
                        state.stored.cwd.display()
                    )
                } else {
                    "remote work is off on this device".to_string()
                }));
            }
            // Named by the client: it may delete it from now on (spec, which sessions).
            if !state.stored.given {
                state.stored.given = true;
                self.registry.save(&state);
            }
        }
        Ok(live)
    }
}

/// Sessions and turn answers across a restart on the same store.
#[cfg(test)]
mod survives_restart;
