//! The device's store on disk: sessions, each session's turn log, and the deletes made while no
//! link was up. Everything is JSON, written atomically (a temporary file renamed over the old),
//! so a restart of fake-device on the same state directory finds what it left, as the real CLI
//! does with its `~/.local/state/lembas`.

use std::collections::VecDeque;
use std::io;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// How many turn ids a session remembers (the spec's "last 200").
pub const TURNS_KEPT: usize = 200;

/// One message of a session's conversation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[allow(missing_docs)] // fields whose names say it all go undocumented
pub struct StoredMessage {
    /// `user` or `assistant`.
    pub role: String,
    pub text: String,
    /// The turn this message belongs to.
    pub turn_id: String,
    /// The reasoning, for assistant messages.
    #[serde(default)]
    pub reasoning: String,
    /// Left out of the conversation by a rewind.
    #[serde(default)]
    pub reverted: bool,
    /// The tool calls an assistant message's turn ran (`{id, name, args, output?, isError?}`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<Value>,
    /// The files attached to a user message (`{name, mimeType, size}`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub attachments: Vec<Value>,
}

/// A session as stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[allow(missing_docs)] // fields whose names say it all go undocumented
pub struct StoredSession {
    /// The store id (`ses_…`): it lasts across restarts.
    pub id: String,
    /// The working directory, absolute.
    pub cwd: PathBuf,
    pub title: String,
    /// The mode (`plan`, `manual`, `edit`).
    pub mode: String,
    /// The model ref, when set.
    #[serde(default)]
    pub model: Option<String>,
    /// The effort level, or `off`.
    pub effort: String,
    /// The client's `Context` (system_prompt, personalization, library, prototypes), newest.
    #[serde(default)]
    pub context: Value,
    /// The plan, when the session has one.
    #[serde(default)]
    pub plan: Option<Value>,
    /// The conversation.
    #[serde(default)]
    pub messages: Vec<StoredMessage>,
    /// Whether a client was ever given this session (it may then delete it, per the spec).
    #[serde(default)]
    pub given: bool,
}

/// Where a turn is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TurnState {
    /// Waiting for the session to be free.
    Queued,
    /// Running now.
    Running,
    /// Finished; its answer is kept.
    Done,
}

/// One remembered turn id.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[allow(missing_docs)] // fields whose names say it all go undocumented
pub struct StoredTurn {
    /// The client's id (or one made here).
    pub turn_id: String,
    pub state: TurnState,
    /// The answer to its prompt, once done (what a repeated prompt gets).
    #[serde(default)]
    pub answer: Option<Value>,
}

/// A session's turn log: the last [`TURNS_KEPT`] ids, oldest first.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[allow(missing_docs)] // fields whose names say it all go undocumented
pub struct TurnLog {
    pub turns: VecDeque<StoredTurn>,
}

impl TurnLog {
    /// The turn with this id.
    pub fn get(&self, turn_id: &str) -> Option<&StoredTurn> {
        self.turns.iter().find(|t| t.turn_id == turn_id)
    }

    /// Records a turn's new state (and answer), keeping only the newest [`TURNS_KEPT`].
    pub fn set(&mut self, turn_id: &str, state: TurnState, answer: Option<Value>) {
        match self.turns.iter_mut().find(|t| t.turn_id == turn_id) {
            Some(turn) => {
                turn.state = state;
                if answer.is_some() {
                    turn.answer = answer;
                }
            }
            None => self.turns.push_back(StoredTurn {
                turn_id: turn_id.into(),
                state,
                answer,
            }),
        }
        while self.turns.len() > TURNS_KEPT {
            self.turns.pop_front();
        }
    }

    /// The newest finished turn.
    pub fn last_done(&self) -> Option<&StoredTurn> {
        self.turns.iter().rev().find(|t| t.state == TurnState::Done)
    }
}

/// The store in one state directory.
#[derive(Debug, Clone)]
pub struct Store {
    root: PathBuf,
}

impl StoredSession {
    /// A new, empty session in `cwd`, in `edit` mode, not yet given to any client.
    pub fn new(id: impl Into<String>, cwd: PathBuf) -> StoredSession {
        StoredSession {
            id: id.into(),
            cwd,
            title: String::new(),
            mode: "edit".into(),
            model: None,
            effort: "off".into(),
            context: Value::Null,
            plan: None,
            messages: Vec::new(),
            given: false,
        }
    }
}

/// Session ids become file names: only the characters a store id has are allowed, so a peer's
/// `sessionId` can never name a path outside the store.
pub fn is_store_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 128
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

fn write_atomically(path: &Path, value: &impl Serialize) -> io::Result<()> {
    let text = serde_json::to_vec_pretty(value).map_err(io::Error::other)?;
    // A name of its own per write: two writers of one file never share a temporary.
    static WRITES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = WRITES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let tmp = path.with_extension(format!("tmp-{}-{n}", std::process::id()));
    std::fs::write(&tmp, text)?;
    std::fs::rename(&tmp, path)
}

fn read_json<T: for<'de> Deserialize<'de>>(path: &Path) -> io::Result<Option<T>> {
    match std::fs::read(path) {
        Ok(bytes) => serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(io::Error::other),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

impl Store {
    /// Opens (creating) the store in `root`.
    pub fn open(root: &Path) -> io::Result<Store> {
        for dir in ["sessions", "turns", "attachments"] {
            std::fs::create_dir_all(root.join(dir))?;
        }
        Ok(Store {
            root: root.to_path_buf(),
        })
    }

    /// Keeps, in each session's turn log, only the newest finished turn of the ones finished
    /// (only a device breaking `device.turns.persist` in its way `last_only` does, at its start:
    /// as if each turn file were written whole with the last turn, not merged).
    pub fn keep_last_finished_only(&self) -> io::Result<()> {
        for entry in std::fs::read_dir(self.root.join("turns"))? {
            let path = entry?.path();
            let Some(mut log) = read_json::<TurnLog>(&path)? else {
                continue;
            };
            let last_done = log.last_done().map(|t| t.turn_id.clone());
            log.turns
                .retain(|t| t.state != TurnState::Done || Some(&t.turn_id) == last_done.as_ref());
            write_atomically(&path, &log)?;
        }
        Ok(())
    }

    fn session_path(&self, id: &str) -> PathBuf {
        self.root.join("sessions").join(format!("{id}.json"))
    }

    fn turns_path(&self, id: &str) -> PathBuf {
        self.root.join("turns").join(format!("{id}.json"))
    }

    /// The device's own configuration directory (its own `commands/` and `skills/`, as
    /// `~/.config/lembas` is the CLI's).
    pub fn config_dir(&self) -> PathBuf {
        self.root.join("config")
    }

    /// The attachment directory of a session.
    pub fn attachments_dir(&self, id: &str) -> PathBuf {
        self.root.join("attachments").join(id)
    }

    /// Saves a session.
    pub fn save_session(&self, session: &StoredSession) -> io::Result<()> {
        write_atomically(&self.session_path(&session.id), session)
    }

    /// Loads a session by id (`None`: no such session, or not a store id).
    pub fn load_session(&self, id: &str) -> io::Result<Option<StoredSession>> {
        if !is_store_id(id) {
            return Ok(None);
        }
        read_json(&self.session_path(id))
    }

    /// Loads a session's turn log (empty when it has none yet).
    pub fn load_turns(&self, id: &str) -> io::Result<TurnLog> {
        if !is_store_id(id) {
            return Ok(TurnLog::default());
        }
        Ok(read_json(&self.turns_path(id))?.unwrap_or_default())
    }

    /// Saves a session's turn log.
    pub fn save_turns(&self, id: &str, log: &TurnLog) -> io::Result<()> {
        write_atomically(&self.turns_path(id), log)
    }

    /// Keeps a copy of a session's record aside before it is removed (only a device
    /// misbehaving on device.delete.gone_later); [`Store::load_aside`] gives it back.
    pub fn set_aside(&self, id: &str) -> io::Result<()> {
        if let Some(session) = self.load_session(id)? {
            let aside = self.root.join("aside");
            std::fs::create_dir_all(&aside)?;
            write_atomically(&aside.join(format!("{id}.json")), &session)?;
        }
        Ok(())
    }

    /// A session's record kept aside by [`Store::set_aside`].
    pub fn load_aside(&self, id: &str) -> io::Result<Option<StoredSession>> {
        if !is_store_id(id) {
            return Ok(None);
        }
        read_json(&self.root.join("aside").join(format!("{id}.json")))
    }

    /// Removes a session, its turn log and its attachments; says whether it was there.
    pub fn delete_session(&self, id: &str) -> io::Result<bool> {
        if !is_store_id(id) {
            return Ok(false);
        }
        let existed = self.session_path(id).exists();
        for path in [self.session_path(id), self.turns_path(id)] {
            match std::fs::remove_file(&path) {
                Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
                _ => {}
            }
        }
        match std::fs::remove_dir_all(self.attachments_dir(id)) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
            _ => {}
        }
        Ok(existed)
    }

    /// The deletes made while no link was up, oldest first.
    pub fn pending_deletes(&self) -> io::Result<Vec<String>> {
        Ok(read_json(&self.root.join("pending-deletes.json"))?.unwrap_or_default())
    }

    /// Keeps a delete for the next link.
    pub fn add_pending_delete(&self, id: &str) -> io::Result<()> {
        let mut pending = self.pending_deletes()?;
        if !pending.iter().any(|p| p == id) {
            pending.push(id.to_string());
        }
        write_atomically(&self.root.join("pending-deletes.json"), &pending)
    }

    /// Forgets the pending deletes (they were sent).
    pub fn clear_pending_deletes(&self) -> io::Result<()> {
        write_atomically(
            &self.root.join("pending-deletes.json"),
            &Vec::<String>::new(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn session(id: &str) -> StoredSession {
        StoredSession {
            given: true,
            ..StoredSession::new(id, "/w".into())
        }
    }

    #[test]
    fn sessions_and_turns_survive_a_reopen_and_leave_with_delete() {
        let dir = tempfile::tempdir().expect("tmp");
        let store = Store::open(dir.path()).expect("open");
        store.save_session(&session("ses_a")).expect("save");
        let mut log = TurnLog::default();
        log.set(
            "t1",
            TurnState::Done,
            Some(serde_json::json!({"stopReason": "end_turn"})),
        );
        store.save_turns("ses_a", &log).expect("turns");
        let again = Store::open(dir.path()).expect("reopen");
        assert_eq!(
            again.load_session("ses_a").expect("load"),
            Some(session("ses_a"))
        );
        assert_eq!(
            again
                .load_turns("ses_a")
                .expect("turns")
                .get("t1")
                .map(|t| t.state),
            Some(TurnState::Done)
        );
        assert!(again.delete_session("ses_a").expect("delete"));
        assert!(!again.delete_session("ses_a").expect("delete twice"));
        assert_eq!(again.load_session("ses_a").expect("load"), None);
    }

    #[test]
    fn the_turn_log_keeps_the_newest_200() {
        let mut log = TurnLog::default();
        for i in 0..250 {
            log.set(&format!("t{i}"), TurnState::Done, None);
        }
        assert_eq!(log.turns.len(), TURNS_KEPT);
        assert!(log.get("t0").is_none() && log.get("t249").is_some());
    }

    #[test]
    fn a_session_id_cannot_name_a_path() {
        let dir = tempfile::tempdir().expect("tmp");
        let store = Store::open(dir.path()).expect("open");
        for bad in ["../etc/passwd", "a/b", "", "ses x"] {
            assert_eq!(store.load_session(bad).expect("load"), None);
            assert!(!store.delete_session(bad).expect("delete"));
        }
    }

    #[test]
    fn pending_deletes_are_kept_once_and_cleared() {
        let dir = tempfile::tempdir().expect("tmp");
        let store = Store::open(dir.path()).expect("open");
        store.add_pending_delete("ses_a").expect("add");
        store.add_pending_delete("ses_a").expect("add");
        store.add_pending_delete("ses_b").expect("add");
        assert_eq!(store.pending_deletes().expect("read"), ["ses_a", "ses_b"]);
        store.clear_pending_deletes().expect("clear");
        assert!(store.pending_deletes().expect("read").is_empty());
    }
}
