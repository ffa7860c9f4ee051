//! A pi session kept across restarts of fake-device (`--state-dir`), as `pi --continue`
//! resumes one: its snapshot and the last seq it gave out, so a restarted plugin says hello
//! for the same session and numbers on where it stopped (spec, "Envelope": the seq lasts as
//! long as the session). Unsent events are not kept: the spec buffers them in memory only.

use std::path::Path;

use serde_json::{Value, json};

/// The file in the state directory.
const FILE: &str = "lvmh-session.json";

/// A session as it was left.
#[derive(Debug, Clone, PartialEq)]
pub struct Saved {
    /// Its snapshot (`id`, `name`, `cwd`, …).
    pub session: Value,
    /// The last seq it gave out.
    pub last_seq: u64,
}

/// The session left in `dir`, if one was (a file that cannot be read is no session).
pub fn load(dir: &Path) -> Option<Saved> {
    let text = std::fs::read_to_string(dir.join(FILE)).ok()?;
    let value: Value = serde_json::from_str(&text).ok()?;
    let session = value
        .get("session")
        .filter(|s| s["id"].is_string())?
        .clone();
    let last_seq = value.get("lastSeq")?.as_u64()?;
    Some(Saved { session, last_seq })
}

/// Keeps the session in `dir`, whole or not at all (written aside, then renamed).
pub fn save(dir: &Path, saved: &Saved) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let aside = dir.join(format!("{FILE}.new"));
    let text = json!({ "session": saved.session, "lastSeq": saved.last_seq }).to_string();
    std::fs::write(&aside, text)?;
    std::fs::rename(aside, dir.join(FILE))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_saved_session_comes_back_and_a_broken_file_is_none() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(load(dir.path()), None);
        let saved = Saved {
            session: json!({"id": "pi-1", "name": "fix"}),
            last_seq: 42,
        };
        save(dir.path(), &saved).unwrap();
        assert_eq!(load(dir.path()), Some(saved));
        std::fs::write(dir.path().join(FILE), "{\"session\": ").unwrap();
        assert_eq!(load(dir.path()), None);
    }
}
