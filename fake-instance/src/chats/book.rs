//! The chat book: every chat the web UI shows, with its transcript and its turns, and the
//! sessions that must not come back as chats (deleted) or that a chat left (moved). A store
//! of its own so the rest of the module reads and writes chats through what they mean.

use std::collections::{BTreeMap, HashMap, HashSet};

use serde_json::{Value, json};

use super::link_facts::LinkFacts;

/// One line of a chat's transcript.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Line {
    /// `user` or `assistant`.
    pub role: String,
    /// What was said.
    pub text: String,
    /// The turn it belongs to.
    pub turn_id: Option<String>,
}

/// A chat: a device session as the web UI shows it.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct Chat {
    /// The device's session id.
    pub session_id: String,
    /// The device the chat lives on.
    #[serde(default)]
    pub device: String,
    /// Made from a terminal's announce (not opened here).
    pub from_terminal: bool,
    /// The terminal let it go (`left`).
    pub left: bool,
    /// What was said, in order.
    pub transcript: Vec<Line>,
    /// Turns sent and not yet answered, oldest first: their ids and texts (a turn the device
    /// turns out not to know is sent again as it was).
    pub in_flight: Vec<(String, String)>,
    /// Every turn id this chat ever sent (a new message never reuses one).
    pub sent: Vec<String>,
    /// The chat's `Context` (system_prompt, personalization, library, prototypes), as set.
    #[serde(default)]
    pub context: serde_json::Map<String, Value>,
    /// The modes the device offered for the session (its session/new answer's
    /// `availableModes`); empty: not known here.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub modes: Vec<String>,
    /// The files' blocks a turn carries besides its text, by turn id (sent again with it).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub attached: BTreeMap<String, Vec<Value>>,
    /// The agent's text of the turn now running, as it streams.
    #[serde(skip)]
    pub(super) streaming: String,
    /// The link its session was opened on (0: not known, as after a restart): a device that
    /// does not list `sessions` keeps no session past its link.
    #[serde(skip)]
    pub(super) link: u32,
}

impl Chat {
    /// The `Context` fields the device takes (only those whose capability it listed).
    pub(super) fn context(&self, facts: &LinkFacts) -> Option<Value> {
        let listed: serde_json::Map<String, Value> = self
            .context
            .iter()
            .filter(|(field, _)| {
                let needed = match field.as_str() {
                    "library" => "library",
                    "prototypes" => "prototypes",
                    _ => "context",
                };
                facts.capabilities.iter().any(|c| c == needed)
            })
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        (!listed.is_empty()).then_some(Value::Object(listed))
    }

    /// Adds a line to the transcript.
    pub(super) fn say(&mut self, role: &str, text: &str, turn_id: Option<String>) {
        self.transcript.push(Line {
            role: role.to_string(),
            text: text.to_string(),
            turn_id,
        });
    }

    /// Takes a turn out of flight; when it was in flight, gives what the agent streamed for
    /// it (and the chat streams afresh).
    pub(super) fn end_turn(&mut self, turn_id: &str) -> Option<String> {
        let was = self.in_flight.len();
        self.in_flight.retain(|(t, _)| t != turn_id);
        (self.in_flight.len() < was).then(|| std::mem::take(&mut self.streaming))
    }

    /// Takes a turn out of flight with nothing said for it (given up, or sent again anew).
    pub(super) fn drop_turn(&mut self, turn_id: &str) {
        self.in_flight.retain(|(t, _)| t != turn_id);
    }
}

/// The chats by session id, and what became of sessions that are chats no more.
#[derive(Debug, Default)]
pub(super) struct ChatBook {
    chats: BTreeMap<String, Chat>,
    /// Sessions the device said it deleted: never made into chats again, even by an answer to
    /// session/new read after the `deleted` came.
    gone: HashSet<String>,
    /// Chats moved to a new session (a device without `sessions`, written to after a redial):
    /// the old session id, which the person's page still names, to the new one.
    moved: HashMap<String, String>,
}

impl ChatBook {
    /// A book holding the chats kept by an earlier run.
    pub(super) fn from_kept(chats: BTreeMap<String, Chat>) -> Self {
        ChatBook {
            chats,
            ..ChatBook::default()
        }
    }

    /// Every chat, by session id (what is kept in the state directory).
    pub(super) fn chats(&self) -> &BTreeMap<String, Chat> {
        &self.chats
    }

    pub(super) fn ids(&self) -> Vec<String> {
        self.chats.keys().cloned().collect()
    }

    pub(super) fn get(&self, session_id: &str) -> Option<&Chat> {
        self.chats.get(session_id)
    }

    pub(super) fn get_mut(&mut self, session_id: &str) -> Option<&mut Chat> {
        self.chats.get_mut(session_id)
    }

    /// The chat of a session, made by `make` when there is none yet.
    pub(super) fn get_or_make(
        &mut self,
        session_id: &str,
        make: impl FnOnce() -> Chat,
    ) -> &mut Chat {
        self.chats
            .entry(session_id.to_string())
            .or_insert_with(make)
    }

    /// Puts a chat in the book, unless the device said its session was deleted.
    pub(super) fn insert_unless_gone(&mut self, session_id: String, chat: Chat) {
        if !self.gone.contains(&session_id) {
            self.chats.insert(session_id, chat);
        }
    }

    pub(super) fn remove(&mut self, session_id: &str) -> Option<Chat> {
        self.chats.remove(session_id)
    }

    /// The device deleted the session: its chat goes, for good.
    pub(super) fn deleted(&mut self, session_id: &str) {
        self.chats.remove(session_id);
        self.gone.insert(session_id.to_string());
    }

    /// Whether the device said it deleted the session.
    pub(super) fn is_gone(&self, session_id: &str) -> bool {
        self.gone.contains(session_id)
    }

    /// Adds a line to a chat's transcript (none when there is no such chat).
    pub(super) fn say(&mut self, chat: &str, role: &str, text: &str, turn_id: Option<String>) {
        if let Some(chat) = self.chats.get_mut(chat) {
            chat.say(role, text, turn_id);
        }
    }

    /// A chat was rewound to `turn`: that turn's lines and all after them leave its transcript.
    pub(super) fn rewound(&mut self, chat: &str, turn: &str) {
        if let Some(c) = self.chats.get_mut(chat)
            && let Some(at) = c
                .transcript
                .iter()
                .position(|l| l.turn_id.as_deref() == Some(turn))
        {
            c.transcript.truncate(at);
        }
    }

    /// The chat `old` moved to the session `new` (already a chat), taking what was said and
    /// sent in it; the old id is remembered as leading to the new one.
    pub(super) fn moved(&mut self, old: &str, new: &str, was: Chat) {
        if let Some(moved) = self.chats.get_mut(new) {
            moved.transcript = was.transcript;
            moved.sent = was.sent;
        }
        self.chats.remove(old);
        self.moved.insert(old.to_string(), new.to_string());
    }

    /// The session a chat is on now: the one it moved to, when it moved.
    pub(super) fn current(&self, chat: &str) -> String {
        let mut id = chat;
        // Bounded: each move is to a session made later, but a loop must not hang the web UI.
        for _ in 0..self.moved.len() {
            match self.moved.get(id) {
                Some(next) => id = next,
                None => break,
            }
        }
        id.to_string()
    }

    /// The device's chats with turns not yet answered, and those turns.
    pub(super) fn incomplete(&self, device: &str) -> Vec<(String, Vec<(String, String)>)> {
        self.chats
            .values()
            .filter(|c| !c.in_flight.is_empty() && c.device == device)
            .map(|c| (c.session_id.clone(), c.in_flight.clone()))
            .collect()
    }

    /// What the control API shows of each chat: its in-flight turns and the end of its
    /// transcript, long texts cut.
    pub(super) fn snapshot(&self) -> Vec<Value> {
        /// The newest transcript lines shown per chat, and the longest text shown of each.
        const LINES_SHOWN: usize = 20;
        const TEXT_SHOWN: usize = 2000;
        self.chats
            .values()
            .map(|chat| {
                let lines: Vec<Value> = chat
                    .transcript
                    .iter()
                    .rev()
                    .take(LINES_SHOWN)
                    .rev()
                    .map(|line| {
                        let mut text = line.text.clone();
                        if text.len() > TEXT_SHOWN {
                            let mut cut = TEXT_SHOWN;
                            while !text.is_char_boundary(cut) {
                                cut -= 1;
                            }
                            text.truncate(cut);
                            text.push('…');
                        }
                        json!({ "role": line.role, "text": text, "turnId": line.turn_id })
                    })
                    .collect();
                json!({
                    "sessionId": chat.session_id,
                    "device": chat.device,
                    "from_terminal": chat.from_terminal,
                    "left": chat.left,
                    "in_flight": chat.in_flight.iter().map(|(turn, _)| turn).collect::<Vec<_>>(),
                    "turns_sent": chat.sent.len(),
                    "transcript": lines,
                })
            })
            .collect()
    }
}

/// Where message ids start counting. From the clock, so a restarted instance never reuses one
/// its chats kept; a seeded run counts from a draw instead (a restart in the same process
/// draws another), so its ids repeat with the seed.
pub(super) fn first_message_number() -> u64 {
    if harness::random::seeded() {
        harness::random::u64() >> 12
    } else {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX / 2))
    }
}
