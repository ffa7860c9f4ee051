//! What a device under test must be given for a fake-instance scenario: its `peer:` section
//! (beside `steps`, the device's own actions, which fake-device does in the self-test). The
//! engine keeps the section as written; fake-instance reads it, judges from it what a device's
//! hello and capabilities must show, and names the set-up a real CLI's test must arrange.

use std::collections::BTreeMap;

use crate::scenario::{Dur, LoadError, Scenario};
use schemars::JsonSchema;
use serde::Deserialize;

/// Why a set-up's files could not be laid out: a path that would leave where it belongs, or
/// what the file system said.
#[derive(Debug, thiserror::Error)]
pub enum LayOutError {
    /// A `home_files` path that is absolute or climbs out of the home.
    #[error("`{relative}`: a path in the home, relative, that does not leave it")]
    OutOfHome {
        /// The path as written.
        relative: String,
    },
    /// A root path that is absolute or climbs out, other than by a leading `../outside/`.
    #[error(
        "`{relative}`: a path in the root, relative, where only a leading `../outside/` may leave it"
    )]
    OutOfRoot {
        /// The path as written.
        relative: String,
    },
    /// An untrusted folder outside the root.
    #[error("`{folder}`: an untrusted folder is inside the root")]
    UntrustedOutside {
        /// The folder as written.
        folder: String,
    },
    /// A directory could not be made.
    #[error("cannot make {}: {source}", .path.display())]
    Make {
        /// The directory.
        path: std::path::PathBuf,
        /// What the system said.
        source: std::io::Error,
    },
    /// A file could not be written.
    #[error("cannot write {}: {source}", .path.display())]
    Write {
        /// The file.
        path: std::path::PathBuf,
        /// What the system said.
        source: std::io::Error,
    },
    /// A symbolic link could not be made.
    #[error("cannot link {}: {source}", .path.display())]
    Link {
        /// The link.
        path: std::path::PathBuf,
        /// What the system said.
        source: std::io::Error,
    },
    /// A symbolic link, on a machine without them.
    #[error("symbolic links ({}) need a Unix machine", .path.display())]
    NoSymlinks {
        /// The link.
        path: std::path::PathBuf,
    },
}

/// The device's set-up, as a fake-instance scenario's `peer:` says it.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DeviceSetup {
    /// fake-device (for scenarios in `instance/`): the device has a trusted remote root (`true`,
    /// the default: the scenario opens sessions in it; a hello with none makes the run not
    /// applicable), has none at all (`false`: set-up `no_roots`, since the hello is what is
    /// judged), or either (`any`).
    #[serde(default)]
    pub roots: RootsNeed,
    /// fake-device: sessions it deleted while no link was up, kept in its store for the next
    /// link (a real CLI: delete them with the CLI while it is offline).
    #[serde(default)]
    pub pending_deletes: Vec<String>,
    /// fake-device: sessions in its store that no client was ever given, in a directory outside
    /// its roots (a real CLI: sessions started at its terminal elsewhere and never shared).
    #[serde(default)]
    pub foreign_sessions: Vec<String>,
    /// fake-device: folders in its one root (relative) that the person has not trusted as
    /// projects; made empty if missing (a real CLI: folders left out of its trusted projects).
    #[serde(default)]
    pub untrusted: Vec<String>,
    /// fake-device: sessions in its store that no client was given, in the first `untrusted`
    /// folder (a real CLI: sessions started at its terminal there).
    #[serde(default)]
    pub untrusted_sessions: Vec<String>,
    /// fake-device: files in its one root, path (relative, `/`-separated) → text. A path that
    /// starts with `../outside/` goes to a directory beside the root, outside every root (a real
    /// CLI: make the same files in its root and beside it).
    #[serde(default)]
    pub files: BTreeMap<String, String>,
    /// fake-device: remote terminals on (`true`: `remote.terminal: true`, and the scenario needs
    /// capability `terminal`) or off (`false`: set-up `terminal_off`, since the capability
    /// list is what is judged); absent: either (a real CLI: the same setting).
    #[serde(default)]
    pub terminal: Option<bool>,
    /// fake-device: its terminals' shell integration (`remote.terminal_integration`; a real CLI:
    /// the same global setting); `false`: shells start without the rc wrapper (set-up
    /// `terminal_integration_off`).
    #[serde(default = "integration_on")]
    pub terminal_integration: bool,
    /// fake-device: files in the home of the user its terminals run as, path (relative,
    /// `/`-separated) → text: the user's own startup files (a real CLI: run it as a user whose
    /// home holds them; set-up `lay_out_home`).
    #[serde(default)]
    pub home_files: BTreeMap<String, String>,
    /// fake-device: symbolic links in its root, path → target (as the link holds it, e.g.
    /// `../outside/secret.txt`).
    #[serde(default)]
    pub links: BTreeMap<String, String>,
    /// fake-device: add a remote root this long after it starts (a real CLI: edit its `remote:`
    /// block during the test).
    #[serde(default)]
    pub change_limits_after: Option<Dur>,
    /// fake-device: a person at its terminal shares a session this long after it starts (a real
    /// CLI: start a session in a terminal and share it).
    #[serde(default)]
    pub share_session_after: Option<Dur>,
    /// fake-device: the terminal lets that session go this long after sharing it.
    #[serde(default)]
    pub leave_session_after: Option<Dur>,
    /// fake-device: the person at the terminal types a prompt (`typed at the terminal`) into the
    /// shared session this long after sharing it (a real CLI: type it).
    #[serde(default)]
    pub terminal_prompt_after: Option<Dur>,
    /// fake-device: the person at the terminal answers each card of the shared session this long
    /// after it is shown — allow once, the first option, approve (a real CLI: answer it there).
    #[serde(default)]
    pub terminal_answers_after: Option<Dur>,
    /// fake-device: how long a card waits for the client's answer (a real CLI:
    /// `remote.approval_timeout`).
    #[serde(default)]
    pub approval_timeout: Option<Dur>,
    /// fake-device: the most permissive mode a client may put a session in (a real CLI:
    /// `remote.max_mode`); absent: `edit`, which lowers nothing.
    #[serde(default)]
    pub max_mode: Option<MaxMode>,
    /// fake-device: the device's own (local) personality and instructions, which it uses when
    /// it is not logged in to exactly one instance with personalization available (a real CLI:
    /// its local `personality`, `personality_custom` and `instructions` settings).
    #[serde(default)]
    pub local_personalization: Option<LocalPersonalization>,
    /// fake-device: whose library the device's model searches (a real CLI: its `library:`
    /// setting); absent: the account's, as a config that sets none does.
    #[serde(default)]
    pub library: Option<LibraryChoice>,
}

/// A device's `library:` setting.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum LibraryChoice {
    /// The account's library on the instance it is logged in to (`lembas`).
    Lembas,
    /// Its own library on the device (`local`), written in its config.
    Local,
}

/// A device's local personalization settings.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, JsonSchema, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct LocalPersonalization {
    /// A preset's name, `custom`, or empty.
    #[serde(default)]
    pub personality: String,
    /// The personality's own text, for `custom`.
    #[serde(default)]
    pub personality_custom: String,
    /// The instructions.
    #[serde(default)]
    pub instructions: String,
}

/// Shell integration is on unless a set-up turns it off (the spec's default).
fn integration_on() -> bool {
    true
}

impl Default for DeviceSetup {
    fn default() -> Self {
        Self {
            roots: RootsNeed::default(),
            pending_deletes: Vec::new(),
            foreign_sessions: Vec::new(),
            untrusted: Vec::new(),
            untrusted_sessions: Vec::new(),
            files: BTreeMap::new(),
            terminal: None,
            terminal_integration: true,
            home_files: BTreeMap::new(),
            links: BTreeMap::new(),
            change_limits_after: None,
            share_session_after: None,
            leave_session_after: None,
            terminal_prompt_after: None,
            terminal_answers_after: None,
            approval_timeout: None,
            max_mode: None,
            local_personalization: None,
            library: None,
        }
    }
}

/// A device's `remote.max_mode`: the modes, least to most permissive.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum MaxMode {
    /// Read and plan only.
    Plan,
    /// Ask before each change.
    Manual,
    /// Change files.
    Edit,
}

impl MaxMode {
    /// The mode's id, as hello's `limits.max_mode` says it.
    pub fn as_str(self) -> &'static str {
        match self {
            MaxMode::Plan => "plan",
            MaxMode::Manual => "manual",
            MaxMode::Edit => "edit",
        }
    }
}

impl DeviceSetup {
    /// Reads a scenario's `peer:` set-up (the defaults without one); an error names the file, the
    /// section's line and the key at fault.
    pub fn of(scenario: &Scenario) -> Result<DeviceSetup, LoadError> {
        let Some(peer) = scenario.peer.as_ref() else {
            return Ok(Self::default());
        };
        crate::scenario::read_section(
            serde_json::Value::Object(peer.value.setup.clone()),
            "peer",
            &scenario.source,
            peer,
        )
    }

    /// The set-up actions the device must be given before or during the run, by name: what
    /// fake-device does by itself in the self-test, and what a real CLI's test must arrange
    /// (`--arranged`). Conditions fake-instance can see for itself (a root to open sessions in,
    /// remote terminals on) are not among them: the device's hello and capabilities show those.
    pub fn needs(&self) -> Vec<String> {
        [
            // A device with no roots is the set-up under test: its hello is what is judged, so
            // it cannot also say whether the set-up was made.
            ("no_roots", self.roots == RootsNeed::None),
            ("delete_unlinked", !self.pending_deletes.is_empty()),
            ("seed_foreign_session", !self.foreign_sessions.is_empty()),
            ("untrusted_folder", !self.untrusted.is_empty()),
            (
                "seed_untrusted_session",
                !self.untrusted_sessions.is_empty(),
            ),
            (
                "lay_out_root",
                !self.files.is_empty() || !self.links.is_empty(),
            ),
            ("change_limits", self.change_limits_after.is_some()),
            ("share_session", self.share_session_after.is_some()),
            ("leave_session", self.leave_session_after.is_some()),
            ("terminal_prompt", self.terminal_prompt_after.is_some()),
            ("answer_card", self.terminal_answers_after.is_some()),
            ("approval_timeout", self.approval_timeout.is_some()),
            ("max_mode", self.max_mode.is_some()),
            ("terminal_off", self.terminal == Some(false)),
            ("terminal_integration_off", !self.terminal_integration),
            ("lay_out_home", !self.home_files.is_empty()),
            (
                "local_personalization",
                self.local_personalization.is_some(),
            ),
            ("library_local", self.library == Some(LibraryChoice::Local)),
        ]
        .into_iter()
        .filter(|(_, needed)| *needed)
        .map(|(name, _)| name.to_string())
        .collect()
    }
}

/// What the person at the device's terminal types for `terminal_prompt_after`.
pub const TERMINAL_PROMPT: &str = "typed at the terminal";

impl DeviceSetup {
    /// The set-up a device under test is given before it starts, as hook actions with their
    /// fields: sessions deleted while it was offline, sessions it has elsewhere, no roots, its
    /// cards' timeout, its most permissive mode.
    pub fn before_start(&self) -> Vec<(String, serde_json::Value)> {
        use serde_json::json;
        let mut actions = Vec::new();
        if self.roots == RootsNeed::None {
            actions.push(("no_roots".to_string(), json!({})));
        }
        for id in &self.pending_deletes {
            actions.push(("delete_unlinked".to_string(), json!({ "session": id })));
        }
        for id in &self.foreign_sessions {
            actions.push(("seed_foreign_session".to_string(), json!({ "session": id })));
        }
        for folder in &self.untrusted {
            actions.push(("untrusted_folder".to_string(), json!({ "folder": folder })));
        }
        for id in &self.untrusted_sessions {
            let folder = self.untrusted.first().cloned().unwrap_or_default();
            actions.push((
                "seed_untrusted_session".to_string(),
                json!({ "session": id, "folder": folder }),
            ));
        }
        if let Some(timeout) = self.approval_timeout {
            actions.push((
                "approval_timeout".to_string(),
                json!({ "timeout": timeout.to_string(), "ms": timeout.0.as_millis() as u64 }),
            ));
        }
        if let Some(mode) = self.max_mode {
            actions.push(("max_mode".to_string(), json!({ "mode": mode.as_str() })));
        }
        if self.terminal == Some(false) {
            actions.push(("terminal_off".to_string(), json!({})));
        }
        if !self.terminal_integration {
            actions.push(("terminal_integration_off".to_string(), json!({})));
        }
        if !self.home_files.is_empty() {
            actions.push((
                "lay_out_home".to_string(),
                json!({ "files": self.home_files }),
            ));
        }
        if let Some(local) = &self.local_personalization {
            actions.push(("local_personalization".to_string(), json!(local)));
        }
        if self.library == Some(LibraryChoice::Local) {
            actions.push(("library_local".to_string(), json!({})));
        }
        actions
    }

    /// The set-up done while the device runs, on the scenario's timers, as hook actions whose
    /// values are fake-device's own actions (`{action}` is a line its `--console` reads).
    pub fn timeline(&self) -> Vec<crate::hooks::Timed> {
        use crate::hooks::Timed;
        use serde_json::json;
        let mut timeline = Vec::new();
        let timed = |at: std::time::Duration, action: &str, value: serde_json::Value| Timed {
            at,
            action: action.to_string(),
            value,
        };
        if let Some(after) = self.change_limits_after {
            timeline.push(timed(after.0, "change_limits", json!({ "add_root": true })));
        }
        if let Some(share) = self.share_session_after {
            let share = share.0;
            timeline.push(timed(share, "share_session", json!(true)));
            if let Some(prompt) = self.terminal_prompt_after {
                timeline.push(timed(
                    share + prompt.0,
                    "terminal_prompt",
                    json!(TERMINAL_PROMPT),
                ));
                if let Some(answers) = self.terminal_answers_after {
                    timeline.push(timed(
                        share + prompt.0 + answers.0,
                        "answer_card",
                        json!("allow"),
                    ));
                }
            }
            if let Some(leave) = self.leave_session_after {
                timeline.push(timed(share + leave.0, "leave_session", json!(true)));
            }
        }
        timeline
    }

    /// Writes the set-up's `home_files` under `home` (the home of the user the device's
    /// terminals run as); each path stays inside it.
    pub fn lay_out_home(&self, home: &std::path::Path) -> Result<(), LayOutError> {
        for (relative, text) in &self.home_files {
            let path = std::path::Path::new(relative);
            if path.is_absolute() || relative.split(['/', '\\']).any(|part| part == "..") {
                return Err(LayOutError::OutOfHome {
                    relative: relative.clone(),
                });
            }
            let path = home.join(path);
            if let Some(parent) = path.parent() {
                make_dir(parent)?;
            }
            write(&path, text)?;
        }
        Ok(())
    }

    /// Makes the files and links the set-up says are in the device's root, under `root`; a path
    /// under `../outside/` lands beside the root, outside it. fake-instance does this itself for
    /// a device it starts (`{root}`); the self-test does it for its fake-device.
    pub fn lay_out(&self, root: &std::path::Path) -> Result<(), LayOutError> {
        let place = |relative: &str| -> Result<std::path::PathBuf, LayOutError> {
            // Relative, and only `../outside/` at its start may leave the root: a scenario
            // never writes anywhere else on the machine.
            let (base, rest) = match relative.strip_prefix("../outside/") {
                Some(rest) => (root.with_file_name("outside"), rest),
                None => (root.to_path_buf(), relative),
            };
            if std::path::Path::new(rest).is_absolute()
                || rest.split(['/', '\\']).any(|part| part == "..")
            {
                return Err(LayOutError::OutOfRoot {
                    relative: relative.to_string(),
                });
            }
            let path = base.join(rest);
            if let Some(parent) = path.parent() {
                make_dir(parent)?;
            }
            Ok(path)
        };
        for folder in &self.untrusted {
            if folder.starts_with("../") {
                return Err(LayOutError::UntrustedOutside {
                    folder: folder.clone(),
                });
            }
            make_dir(&place(folder)?)?;
        }
        for (relative, text) in &self.files {
            write(&place(relative)?, text)?;
        }
        for (relative, target) in &self.links {
            let path = place(relative)?;
            #[cfg(unix)]
            std::os::unix::fs::symlink(target, &path)
                .map_err(|source| LayOutError::Link { path, source })?;
            #[cfg(not(unix))]
            return Err(LayOutError::NoSymlinks { path });
        }
        Ok(())
    }
}

fn make_dir(path: &std::path::Path) -> Result<(), LayOutError> {
    std::fs::create_dir_all(path).map_err(|source| LayOutError::Make {
        path: path.to_path_buf(),
        source,
    })
}

fn write(path: &std::path::Path, text: &str) -> Result<(), LayOutError> {
    std::fs::write(path, text).map_err(|source| LayOutError::Write {
        path: path.to_path_buf(),
        source,
    })
}

/// Whether the device under test must have a remote root.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum RootsNeed {
    /// `true`: one trusted root (the scenario opens sessions in it).
    #[default]
    One,
    /// `false`: none at all.
    None,
    /// `any`: either.
    Any,
}

impl<'de> Deserialize<'de> for RootsNeed {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Said {
            Flag(bool),
            Word(String),
        }
        match Said::deserialize(deserializer)? {
            Said::Flag(true) => Ok(RootsNeed::One),
            Said::Flag(false) => Ok(RootsNeed::None),
            Said::Word(word) if word == "any" => Ok(RootsNeed::Any),
            Said::Word(word) => Err(serde::de::Error::custom(format!(
                "`{word}` is not `true`, `false` or `any`"
            ))),
        }
    }
}

impl JsonSchema for RootsNeed {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "RootsNeed".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "oneOf": [{ "type": "boolean" }, { "const": "any" }],
            "description": "true: the device has a trusted root; false: it has none; any: either."
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scenario(peer: &str) -> Scenario {
        crate::scenario::load_str(
            &format!("name: t\nabout: t\nsteps: []\npeer:\n{peer}"),
            "t.yaml",
            None,
        )
        .expect("it loads")
    }

    #[test]
    fn the_device_s_set_up_is_read_here_and_names_what_a_test_must_arrange() {
        let read = DeviceSetup::of(&scenario(
            "  roots: false\n  pending_deletes: [ses_x]\n  share_session_after: 1s\n  steps:\n    - act: { show_usage: true }\n",
        ))
        .expect("a device's set-up");
        assert_eq!(read.roots, RootsNeed::None);
        let limited = DeviceSetup::of(&scenario("  max_mode: manual\n")).expect("a max mode");
        assert_eq!(limited.max_mode, Some(MaxMode::Manual));
        assert_eq!(limited.needs(), ["max_mode"]);
        assert_eq!(
            limited.before_start(),
            [(
                "max_mode".to_string(),
                serde_json::json!({ "mode": "manual" })
            )]
        );
        assert!(DeviceSetup::of(&scenario("  max_mode: yolo\n")).is_err());
        let terminals = DeviceSetup::of(&scenario(
            "  terminal: true\n  terminal_integration: false\n  home_files: { .profile: \"x=1\" }\n",
        ))
        .expect("terminals");
        assert_eq!(
            terminals.needs(),
            ["terminal_integration_off", "lay_out_home"]
        );
        let off = DeviceSetup::of(&scenario("  terminal: false\n")).expect("terminals off");
        assert_eq!(off.needs(), ["terminal_off"]);
        assert!(DeviceSetup::default().needs().is_empty());
        let home = tempfile::tempdir().expect("home");
        terminals.lay_out_home(home.path()).expect("laid out");
        assert!(home.path().join(".profile").exists());
        let escaping = DeviceSetup::of(&scenario("  home_files: { ../x: \"\" }\n")).expect("read");
        assert!(escaping.lay_out_home(home.path()).is_err());
        let s = scenario(
            "  roots: false\n  pending_deletes: [ses_x]\n  share_session_after: 1s\n  steps:\n    - act: { show_usage: true }\n",
        );
        assert_eq!(
            s.set_up_needs(read.needs()),
            ["no_roots", "delete_unlinked", "share_session", "show_usage"]
        );
        assert_eq!(
            DeviceSetup::of(&scenario("  roots: any\n"))
                .expect("any")
                .roots,
            RootsNeed::Any
        );
    }

    #[test]
    fn a_key_a_device_set_up_lacks_is_located() {
        let e = DeviceSetup::of(&scenario("  roots: true\n  pending_delets: [x]\n"))
            .expect_err("a typo");
        assert_eq!(e.key_path.as_deref(), Some("peer.pending_delets"));
        assert!(e.message.contains("unknown field `pending_delets`"), "{e}");
        assert_eq!(e.line, Some(5), "{e}");
        let e = DeviceSetup::of(&scenario("  roots: maybe\n")).expect_err("not a roots need");
        assert!(
            e.message
                .contains("`maybe` is not `true`, `false` or `any`"),
            "{e}"
        );
    }

    #[test]
    fn a_root_s_files_stay_in_the_root_or_beside_it() {
        let dir = tempfile::tempdir().expect("dir");
        let root = dir.path().join("root");
        for escape in ["/etc/x", "../x", "../outside/../../x", "a/../../x"] {
            let setup = DeviceSetup {
                files: [(escape.to_string(), "x".to_string())].into(),
                ..DeviceSetup::default()
            };
            let e = setup.lay_out(&root).expect_err(escape).to_string();
            assert!(e.contains("only a leading `../outside/`"), "{e}");
        }
        let setup = DeviceSetup {
            files: [
                ("src/a.rs".to_string(), "a".to_string()),
                ("../outside/secret".to_string(), "s".to_string()),
            ]
            .into(),
            ..DeviceSetup::default()
        };
        setup.lay_out(&root).expect("laid out");
        assert!(root.join("src/a.rs").exists());
        assert!(dir.path().join("outside/secret").exists());
    }
}
