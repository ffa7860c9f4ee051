//! LLeMbas's chats on a device, as its web UI keeps them: each chat is a device session, with
//! its transcript and the turns it sent. A person in the web UI opens chats, writes in them
//! (a prompt with a new turn id, or a steer while a turn runs), rewinds them and deletes them;
//! a terminal's shared session becomes a chat when it is announced. Deletes that could not be
//! delivered are kept (in the state directory when there is one) and sent again on the next
//! link, until answered or refused five times.
//!
//! This module holds the [`Chats`] handle: its one lock over `Inner`, which composes the
//! stores (the chat book, the deletes pending, the link facts, the cards settled). What the
//! handle does with them lives in one sibling per concern.

mod book;
mod delete;
mod follow;
mod link_facts;
mod link_life;
mod open;
mod pending_deletes;
mod persist;
mod reattach;
mod scopes;
mod settled_cards;
mod state_dir;
pub(crate) mod turns;
mod web_ui;

#[cfg(test)]
mod tests;

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use harness::rules::Misbehaviours;
use serde_json::{Value, json};

pub use book::Chat;
pub use link_facts::LinkFacts;
pub use pending_deletes::{DELETE_REFUSALS, PendingDelete};

use book::ChatBook;
use link_facts::Links;
use pending_deletes::PendingDeletes;
use settled_cards::SettledCards;

/// How the chats behave.
#[derive(Debug, Clone)]
pub struct ChatsConfig {
    /// How long a device may take to answer a request.
    pub patience: Duration,
    /// The rules to break.
    pub misbehave: Misbehaviours,
    /// Where undelivered deletes are kept (`None`: in memory only).
    pub state_dir: Option<PathBuf>,
}

/// Everything the one lock guards: the stores, each with its own methods, and the counters
/// and marks too small to be stores of their own.
#[derive(Debug, Default)]
struct Inner {
    /// The chats, with their transcripts, and the sessions deleted or moved.
    book: ChatBook,
    /// Deletes not yet answered, by session.
    pending_deletes: PendingDeletes,
    /// What the client knows of each link and its device.
    links: Links,
    /// Cards taken down (`_lembas/permission/settled`).
    settled: SettledCards,
    next_message: u64,
    /// Terminals a misbehaving web UI gave up on (their open answer had no `shell`).
    given_up_terminals: HashSet<String>,
}

/// Every chat of the instance.
#[derive(Debug)]
pub struct Chats {
    config: ChatsConfig,
    inner: Mutex<Inner>,
}

impl Chats {
    /// No chats yet; undelivered deletes from an earlier run are read from the state directory.
    pub fn new(config: ChatsConfig) -> Arc<Chats> {
        let (pending_deletes, chats) = state_dir::load(config.state_dir.as_deref());
        Arc::new(Chats {
            config,
            inner: Mutex::new(Inner {
                pending_deletes: PendingDeletes::from_kept(pending_deletes),
                book: ChatBook::from_kept(chats),
                next_message: book::first_message_number(),
                ..Inner::default()
            }),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// How long a device may take to answer a request.
    pub fn patience(&self) -> Duration {
        self.config.patience
    }

    /// Whether this instance was told to break `rule`.
    pub fn misbehaves(&self, rule: &str) -> bool {
        self.breaks(rule)
    }

    /// The rules this instance was told to break, for a room to resolve its faults from.
    pub(crate) fn misbehaviours(&self) -> &Misbehaviours {
        &self.config.misbehave
    }

    /// Whether the instance breaks `rule` in its way `name` (one of the catalogue's `ways`).
    pub fn misbehaves_way(&self, rule: &str, name: &str) -> bool {
        self.config.misbehave.breaks_way(rule, name)
    }

    /// Marks a terminal the web UI gave up on: it types nothing into it.
    pub fn give_up_terminal(&self, terminal: &str) {
        self.lock().given_up_terminals.insert(terminal.to_owned());
    }

    /// Whether the web UI gave up on this terminal.
    pub fn gave_up_terminal(&self, terminal: &str) -> bool {
        self.lock().given_up_terminals.contains(terminal)
    }

    fn breaks(&self, rule: &str) -> bool {
        self.config.misbehave.breaks(rule)
    }

    /// The session ids of every chat.
    pub fn session_ids(&self) -> Vec<String> {
        self.lock().book.ids()
    }

    /// A copy of a chat.
    pub fn chat(&self, session_id: &str) -> Option<Chat> {
        self.lock().book.get(session_id).cloned()
    }

    /// The session a chat is on now: the one it moved to, when it moved.
    pub fn current_chat(&self, chat: &str) -> String {
        self.lock().book.current(chat)
    }

    /// The device a chat lives on, when it is a known chat.
    pub fn device_of_chat(&self, chat: &str) -> Option<String> {
        self.lock()
            .book
            .get(chat)
            .map(|c| c.device.clone())
            .filter(|d| !d.is_empty())
    }

    /// Whether a chat has no turn waiting for its answer (`None`: no such chat).
    pub fn answered(&self, chat: &str) -> Option<bool> {
        self.lock().book.get(chat).map(|c| c.in_flight.is_empty())
    }

    /// What the control API shows of the chats: each chat (its in-flight turns and the end of
    /// its transcript, long texts cut), the deletes not yet delivered, and the devices linked.
    pub fn snapshot(&self) -> Value {
        let Ok(inner) = self.inner.lock() else {
            return json!({});
        };
        json!({
            "chats": inner.book.snapshot(),
            "pending_deletes": inner.pending_deletes.kept(),
            "devices": inner.links.snapshot(),
        })
    }
}
