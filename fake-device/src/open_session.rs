//! A session open in memory: what it keeps ([`State`]), its turn queue ([`Job`]) and the turn
//! running now ([`Running`]). The bottom room of the session model: it knows the store's shapes
//! and the client it reports to, and nothing of who runs its turns.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use serde_json::{Value, json};
use tokio::sync::{mpsc, oneshot, watch};

use crate::command_set::Slash;
use crate::events::Client;
use crate::store::{StoredSession, TurnLog, TurnState};

/// The longest title a session keeps (spec, `_lembas/session/title`).
pub const TITLE_MAX: usize = 200;

/// A session's state in memory.
#[derive(Debug)]
pub struct State {
    /// What the store keeps.
    pub stored: StoredSession,
    /// The turn log.
    pub turns: TurnLog,
    /// The turn running now.
    pub running: Option<Running>,
    /// The turns waiting, in order.
    pub queued: Vec<String>,
    /// Who waits for each turn's answer.
    pub waiters: HashMap<String, Vec<oneshot::Sender<Value>>>,
    /// The client the session reports to (the last that named it).
    pub client: Option<Client>,
    /// The link that client was last told the session's commands and plan on.
    pub reported_link: Option<u32>,
    /// Commands the person allowed for the rest of the session (`session` on an approval).
    pub allowed: HashSet<String>,
    /// Deleted: nothing of it is written again (a turn still ending must not bring it back).
    pub deleted: bool,
    /// A cancel that came while nothing ran, kept for the next turn: only a device breaking
    /// `device.cancel.idle` keeps one.
    pub cancel_kept: bool,
    /// A cancel that came while nothing ran, held against the next prompt: only a device
    /// breaking `device.cancel.idle` in its way `refuses_next` holds one.
    pub refuse_next: bool,
}

impl State {
    /// Marks a turn as the running one (out of the queue, `running` in the log).
    pub fn mark_running(&mut self, turn_id: &str) {
        self.queued.retain(|t| t != turn_id);
        self.turns.set(turn_id, TurnState::Running, None);
        self.running = Some(Running {
            turn_id: turn_id.to_string(),
            cancel: watch::channel(false).0,
            steers: Vec::new(),
        });
    }
}

/// A session open in memory, with the queue its turn worker reads.
#[derive(Debug)]
#[allow(missing_docs)] // fields whose names say it all go undocumented
pub struct OpenSession {
    pub state: tokio::sync::Mutex<State>,
    /// Its turn queue.
    pub jobs: mpsc::UnboundedSender<Job>,
}

/// The other end of a session's turn queue: whoever opens a session hands it to a turn worker.
pub type JobQueue = mpsc::UnboundedReceiver<Job>;

impl OpenSession {
    /// A session in memory, idle, with the turn queue its worker is to read.
    pub fn new(stored: StoredSession, turns: TurnLog) -> (Arc<OpenSession>, JobQueue) {
        let (jobs, queue) = mpsc::unbounded_channel();
        let state = State {
            stored,
            turns,
            running: None,
            queued: Vec::new(),
            waiters: HashMap::new(),
            client: None,
            reported_link: None,
            allowed: HashSet::new(),
            deleted: false,
            cancel_kept: false,
            refuse_next: false,
        };
        let live = Arc::new(OpenSession {
            state: tokio::sync::Mutex::new(state),
            jobs,
        });
        (live, queue)
    }

    /// Takes in the steer messages waiting for the running turn, with a `steered` event; gives
    /// their texts.
    pub async fn take_steers(&self, client: Option<&Client>, session_id: &str) -> Vec<String> {
        let taken = {
            let mut state = self.state.lock().await;
            state
                .running
                .as_mut()
                .map(|r| std::mem::take(&mut r.steers))
                .unwrap_or_default()
        };
        if let (Some(client), false) = (client, taken.is_empty()) {
            let texts: Vec<&str> = taken.iter().map(|(t, _)| t.as_str()).collect();
            let ids: Vec<&str> = taken.iter().filter_map(|(_, id)| id.as_deref()).collect();
            client.event(
                session_id,
                json!({ "type": "steered", "texts": texts, "ids": ids }),
            );
        }
        taken.into_iter().map(|(text, _)| text).collect()
    }
}

/// A turn waiting in a session's queue.
#[derive(Debug)]
#[allow(missing_docs)] // fields whose names say it all go undocumented
pub struct Job {
    pub turn_id: String,
    /// What the agent is given (a command's expanded text).
    pub text: String,
    /// What the person typed (`/review`, not its body), for the prompt event and history.
    pub typed: String,
    /// The command the prompt is, when it is one.
    pub command: Option<Slash>,
    /// The files attached to it (`{name, mimeType, size}`), for the prompt event and history.
    pub attachments: Vec<Value>,
    /// Whether the device made its id (the prompt came without a `turnId`).
    pub made_id: bool,
}

/// The turn running in a session.
#[derive(Debug)]
#[allow(missing_docs)] // fields whose names say it all go undocumented
pub struct Running {
    pub turn_id: String,
    cancel: watch::Sender<bool>,
    /// Steer messages not yet taken in: (text, messageId).
    pub steers: Vec<(String, Option<String>)>,
}

impl Running {
    /// Stops it at its next step.
    pub fn cancel(&self) {
        self.cancel.send_replace(true);
    }

    /// Hears when it is cancelled.
    pub fn cancelled(&self) -> watch::Receiver<bool> {
        self.cancel.subscribe()
    }
}
