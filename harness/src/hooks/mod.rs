//! Hooks: what only the real project under test can do, done by the user's own commands or
//! requests (`--hooks FILE`). A scenario's `peer:` set-up and each `act` of its `peer.steps`
//! name an action (`share_session`, `open_chat`, …); a hooks file maps each name to a command,
//! an HTTP request, or a line written to the system under test's standard input, with the same
//! `{…}` placeholders as `--exec` plus the action's own fields. An action with no hook is not
//! done, and the run does not apply ("needs hook `share_session`"): never a failure.
//!
//! The engine knows no action's name: each double says which actions its scenarios need.

mod actor;
mod drive;
mod file;
mod run;

pub use crate::engine::verdict::HookRun;
pub use actor::HookActor;
pub use drive::{StepsError, Timed, after_signal, drive, from_first_link, steps_of};
pub use file::{DEFAULT_HOOK_TIMEOUT, Hook, Hooks, HttpHook, needs_hook};
pub use run::HookContext;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hooks_file_is_read_and_a_hook_with_two_kinds_is_located() {
        let dir = tempfile::tempdir().expect("dir");
        let good = dir.path().join("hooks.yaml");
        std::fs::write(
            &good,
            "share_session: { run: \"lembas share {root}\" }\nopen_chat:\n  http: { url: \"{url}/test/chats\", json: { device: \"{token}\" } }\n  timeout: 5s\nterminal_prompt: { stdin: \"{action}\\n\" }\n",
        )
        .expect("write");
        let hooks = Hooks::load(&good).expect("it loads");
        assert_eq!(
            hooks.names().collect::<Vec<_>>(),
            ["open_chat", "share_session", "terminal_prompt"]
        );
        let bad = dir.path().join("bad.yaml");
        std::fs::write(&bad, "share_session: { run: x, stdin: y }\n").expect("write");
        let e = Hooks::load(&bad).expect_err("two kinds");
        assert_eq!(e.key_path.as_deref(), Some("share_session"));
        std::fs::write(&bad, "share_session:\n  rum: x\n").expect("write");
        let e = Hooks::load(&bad).expect_err("a typo");
        assert_eq!(e.line, Some(2), "{e}");
        assert!(e.to_string().contains("rum"), "{e}");
    }
}
