//! What the fake daemon persists (spec, "Daemon persistence"): each session's snapshot, its
//! events keyed by `(sessionId, seq)`, and the settings. The spec's daemon keeps them in
//! SQLite; what a test can see of them is the REST API and the `lastSeq` of a welcome, so this
//! double keeps them in memory and, with a state directory, appends each change to a JSON-lines
//! file it reads back when it starts again: a restart of the daemon loses nothing, and no
//! SQLite library is built for it.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use harness::lvmh::Envelope;
use serde_json::{Value, json};

/// The log's file name in the state directory.
const LOG_FILE: &str = "lvmh-daemon.jsonl";

/// How many events of one session are kept; past it the oldest go (a peer could otherwise
/// fill the daemon's memory with one endless session).
pub const EVENTS_KEPT: usize = 200_000;

/// One session as persisted.
#[derive(Debug, Clone, Default)]
pub struct StoredSession {
    /// The snapshot of its last hello or `session_info`.
    pub info: Value,
    /// Its events by seq.
    pub events: BTreeMap<u64, Value>,
    /// The `ts` of its newest event.
    pub last_event_at: Option<u64>,
}

/// How many sessions are kept; past it a new session is not (any hello makes one).
pub const SESSIONS_KEPT: usize = 10_000;

/// The daemon's persisted state.
#[derive(Debug, Default)]
pub struct Store {
    log: Option<PathBuf>,
    /// The log, open for appending.
    file: Option<std::fs::File>,
    sessions: BTreeMap<String, StoredSession>,
    settings: BTreeMap<String, String>,
}

impl Store {
    /// A store kept in `dir` (read back if it holds one), or in memory only.
    pub fn open(dir: Option<&Path>) -> std::io::Result<Store> {
        let mut store = Store::default();
        let Some(dir) = dir else {
            return Ok(store);
        };
        std::fs::create_dir_all(dir)?;
        let path = dir.join(LOG_FILE);
        if let Ok(bytes) = std::fs::read(&path) {
            // A line cut short by a kill (even inside a character) is skipped: what came
            // before stands, and each entry is one whole write, so the next starts clean.
            for line in bytes.split(|b| *b == b'\n') {
                if let Ok(entry) = serde_json::from_slice::<Value>(line) {
                    store.apply(&entry);
                }
            }
            if bytes.last().is_some_and(|b| *b != b'\n') {
                std::fs::OpenOptions::new()
                    .append(true)
                    .open(&path)?
                    .write_all(b"\n")?;
            }
        }
        store.file = Some(
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&path)?,
        );
        store.log = Some(path);
        Ok(store)
    }

    fn apply(&mut self, entry: &Value) {
        if let Some(info) = entry.get("session") {
            self.set_session(info.clone());
        } else if let Some(frame) = entry.get("event") {
            if let Ok(envelope) = Envelope::read(frame) {
                self.insert(&envelope, frame.clone());
            }
        } else if let (Some(key), Some(value)) = (
            entry.get("setting").and_then(Value::as_str),
            entry.get("value"),
        ) {
            match value.as_str() {
                Some(value) => self.settings.insert(key.into(), value.into()),
                None => self.settings.remove(key),
            };
        }
    }

    fn append(&mut self, entry: &Value) {
        let Some(file) = &mut self.file else { return };
        // One write of the whole line, so a kill leaves at most the last one cut.
        let line = format!("{entry}\n");
        if let Err(e) = file.write_all(line.as_bytes()) {
            let path = self.log.as_deref().map(|p| p.display().to_string());
            tracing::error!("cannot persist to {}: {e}", path.unwrap_or_default());
        }
    }

    fn set_session(&mut self, info: Value) {
        let Some(id) = info.get("id").and_then(Value::as_str).map(str::to_string) else {
            return;
        };
        if !self.sessions.contains_key(&id) && self.sessions.len() >= SESSIONS_KEPT {
            return;
        }
        self.sessions.entry(id).or_default().info = info;
    }

    /// Keeps a session's snapshot.
    pub fn session(&mut self, info: Value) {
        self.append(&json!({ "session": info }));
        self.set_session(info);
    }

    fn insert(&mut self, envelope: &Envelope, frame: Value) -> bool {
        if !self.sessions.contains_key(&envelope.session_id) && self.sessions.len() >= SESSIONS_KEPT
        {
            return false;
        }
        let session = self
            .sessions
            .entry(envelope.session_id.clone())
            .or_default();
        if session.events.contains_key(&envelope.seq) {
            return false;
        }
        session.events.insert(envelope.seq, frame);
        session.last_event_at = Some(envelope.ts);
        while session.events.len() > EVENTS_KEPT {
            session.events.pop_first();
        }
        true
    }

    /// Persists an event; false when its `(sessionId, seq)` was persisted already (the first
    /// stays, as a primary key keeps it).
    pub fn persist(&mut self, envelope: &Envelope, frame: &Value) -> bool {
        let new = self.insert(envelope, frame.clone());
        if new {
            self.append(&json!({ "event": frame }));
        }
        new
    }

    /// The highest persisted seq of a session, 0 for none.
    pub fn last_seq(&self, id: &str) -> u64 {
        self.sessions
            .get(id)
            .and_then(|s| s.events.last_key_value())
            .map_or(0, |(seq, _)| *seq)
    }

    /// A session's persisted events after `after`, at most `limit`, seq ascending.
    pub fn events(&self, id: &str, after: u64, limit: usize) -> Vec<Value> {
        self.sessions.get(id).map_or_else(Vec::new, |s| {
            s.events
                .range(after.saturating_add(1)..)
                .take(limit)
                .map(|(_, frame)| frame.clone())
                .collect()
        })
    }

    /// The session whose newest event is the latest (for a misbehaving route).
    pub fn newest_session(&self) -> Option<&String> {
        self.sessions
            .iter()
            .max_by_key(|(_, s)| s.last_event_at)
            .map(|(id, _)| id)
    }

    /// Every session, by id.
    pub fn sessions(&self) -> &BTreeMap<String, StoredSession> {
        &self.sessions
    }

    /// A setting (`gitlab.token`).
    pub fn setting(&self, key: &str) -> Option<&str> {
        self.settings.get(key).map(String::as_str)
    }

    /// Sets or clears a setting.
    pub fn set_setting(&mut self, key: &str, value: Option<&str>) {
        self.append(&json!({ "setting": key, "value": value }));
        match value {
            Some(value) => self.settings.insert(key.into(), value.into()),
            None => self.settings.remove(key),
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use harness::lvmh::envelope::{fields, kinds};

    fn event(seq: u64) -> (Envelope, Value) {
        let frame = Envelope::frame(kinds::AGENT_START, "s1", seq, fields(json!({})));
        (Envelope::read(&frame).unwrap(), frame)
    }

    #[test]
    fn what_is_persisted_survives_a_restart_and_the_first_of_a_seq_stays() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::open(Some(dir.path())).unwrap();
        store.session(json!({"id": "s1", "cwd": "/w"}));
        for seq in [1, 2, 3] {
            let (envelope, frame) = event(seq);
            assert!(store.persist(&envelope, &frame));
        }
        let (envelope, mut again) = event(2);
        again["extra"] = json!(true);
        assert!(
            !store.persist(&envelope, &again),
            "seq 2 is persisted already"
        );
        store.set_setting("gitlab.token", Some("glpat-x"));
        drop(store);

        let store = Store::open(Some(dir.path())).unwrap();
        assert_eq!(store.last_seq("s1"), 3);
        assert_eq!(store.last_seq("unknown"), 0);
        let events = store.events("s1", 1, 10);
        let seqs: Vec<u64> = events.iter().map(|e| e["seq"].as_u64().unwrap()).collect();
        assert_eq!(seqs, [2, 3]);
        assert!(events[0].get("extra").is_none());
        assert_eq!(store.events("s1", 0, 1).len(), 1);
        assert_eq!(store.setting("gitlab.token"), Some("glpat-x"));
        assert_eq!(store.sessions()["s1"].info["cwd"], "/w");
    }

    #[test]
    fn a_last_line_cut_by_a_kill_is_skipped_and_the_next_entry_stays_whole() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::open(Some(dir.path())).unwrap();
        let (envelope, frame) = event(1);
        store.persist(&envelope, &frame);
        drop(store);
        // Half an entry, cut inside a two-byte character.
        let log = dir.path().join(LOG_FILE);
        let mut file = std::fs::OpenOptions::new().append(true).open(&log).unwrap();
        file.write_all(b"{\"event\": {\"note\": \"\xc3").unwrap();
        drop(file);

        let mut store = Store::open(Some(dir.path())).expect("a cut line does not stop it");
        assert_eq!(store.last_seq("s1"), 1);
        let (envelope, frame) = event(2);
        store.persist(&envelope, &frame);
        drop(store);
        let store = Store::open(Some(dir.path())).unwrap();
        assert_eq!(
            store.last_seq("s1"),
            2,
            "the entry after the cut one is whole"
        );
    }
}
