//! The deletes waiting for redelivery: each chat deleted in the web UI whose device has not
//! answered its `_lembas/session/delete` yet, with how often the device refused it, until
//! LLeMbas gives it up. A store of its own, so the give-up count lives next to what it counts.

use std::collections::{BTreeMap, HashSet};

/// How often a delete is refused before LLeMbas gives it up (spec, `_lembas/session/delete`).
pub const DELETE_REFUSALS: u32 = 5;

/// A delete not yet answered: the device it is for, and how often it was refused.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct PendingDelete {
    /// The device the chat lived on.
    pub device: String,
    /// Refusals so far.
    pub refusals: u32,
}

/// The deletes not yet answered, by session, and those held back one link.
#[derive(Debug, Default)]
pub(super) struct PendingDeletes {
    kept: BTreeMap<String, PendingDelete>,
    /// Kept deletes held back one link (misbehaving on instance.delete.redeliver).
    held_back: HashSet<String>,
}

impl PendingDeletes {
    /// The store holding the deletes kept by an earlier run.
    pub(super) fn from_kept(kept: BTreeMap<String, PendingDelete>) -> Self {
        PendingDeletes {
            kept,
            ..PendingDeletes::default()
        }
    }

    /// Every delete not yet answered, by session (what is kept in the state directory).
    pub(super) fn kept(&self) -> &BTreeMap<String, PendingDelete> {
        &self.kept
    }

    /// Whether the session's delete is still waiting.
    pub(super) fn contains(&self, chat: &str) -> bool {
        self.kept.contains_key(chat)
    }

    /// Forgets a session's delete (answered, or dropped on purpose).
    pub(super) fn remove(&mut self, chat: &str) {
        self.kept.remove(chat);
    }

    /// Keeps a delete for `device`, unless one is kept for the session already.
    pub(super) fn keep(&mut self, chat: &str, device: String) {
        self.kept.entry(chat.to_string()).or_insert(PendingDelete {
            device,
            refusals: 0,
        });
    }

    /// The device a kept delete is for.
    pub(super) fn owner(&self, chat: &str) -> Option<String> {
        self.kept.get(chat).map(|p| p.device.clone())
    }

    /// The device refused a delete: one refusal more, and at `limit` it is given up (when
    /// `give_up`).
    pub(super) fn refused(&mut self, chat: &str, limit: u32, give_up: bool) {
        if let Some(pending) = self.kept.get_mut(chat) {
            pending.refusals += 1;
            if pending.refusals >= limit && give_up {
                self.kept.remove(chat);
            }
        }
    }

    /// The kept deletes for a device: its own, and those made for no device in particular.
    pub(super) fn for_device(&self, device: &str) -> Vec<String> {
        self.kept
            .iter()
            .filter(|(_, p)| p.device.is_empty() || p.device == device)
            .map(|(chat, _)| chat.clone())
            .collect()
    }

    /// Holds a delete back one link; gives whether it was not held back already.
    pub(super) fn hold_back(&mut self, chat: &str) -> bool {
        self.held_back.insert(chat.to_string())
    }

    /// Lets a held-back delete go.
    pub(super) fn release(&mut self, chat: &str) {
        self.held_back.remove(chat);
    }
}
