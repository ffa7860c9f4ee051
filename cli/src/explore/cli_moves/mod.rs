//! What `harness explore instance` does to a CLI under test: the web UI's moves (open a session,
//! prompt with a new, a repeated or no turn id, status, cancel, steer, title, history, rewind,
//! configure, delete, waits; the link dropped or closed, the CLI restarted), drawn from a seed
//! (`generate`), and written as the steps of a scenario that `harness run` replays, with the
//! checks of what the moves made (`script`).
//!
//! A sequence stays valid however it is cut: a move names the session or prompt it acts on by
//! label, and one whose label no earlier move made is left out when the sequence is written. So
//! shrinking may drop any move and what remains is still a scenario that runs.

mod generate;
mod moves;
mod script;

use super::sequence::{Limits, Moves};

pub use generate::generate;
pub use moves::Move;
pub use script::{RULES, scenario_text};

impl Moves for Move {
    const SIDE: harness::scenario::Side = harness::scenario::Side::Instance;
    const DOUBLE: &'static str = "fake-instance";

    fn generate(seed: u64, run: u64, limits: Limits) -> Vec<Self> {
        generate(seed, run, limits)
    }

    fn scenario_text(name: &str, about: &str, moves: &[Self], broken: Option<&str>) -> String {
        scenario_text(name, about, moves, broken)
    }

    fn judged_by() -> String {
        format!(
            "fake-instance's monitors, its model of the device's turns ({}) and the sequence's own checks ({})",
            super::explored::MODEL_RULES.join(", "),
            RULES[3..].join(", ")
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_seed_gives_the_same_moves_and_another_seed_others() {
        crate::explore::sequence::laws::a_seed_gives_the_same_moves::<Move>();
    }

    #[test]
    fn every_sequence_and_every_cut_of_it_is_a_scenario_that_loads() {
        crate::explore::sequence::laws::every_cut_is_a_scenario::<Move>();
    }

    #[test]
    fn a_move_on_a_session_that_was_cut_is_left_out_and_every_prompt_is_awaited() {
        let moves = vec![
            Move::Prompt {
                prompt: "p1".into(),
                session: "s1".into(),
                turn_id: Some("t1".into()),
                text: "say hello".into(),
            },
            Move::OpenSession {
                session: "s2".into(),
            },
            Move::Prompt {
                prompt: "p2".into(),
                session: "s2".into(),
                turn_id: Some("t2".into()),
                text: "say hello".into(),
            },
        ];
        let text = scenario_text("cut", "cut", &moves, Some("device.turns.dedup"));
        assert!(!text.contains("as: p1"), "{text}");
        assert!(
            text.contains("as: p2") && text.contains("request: p2"),
            "{text}"
        );
        assert!(
            text.contains("device.configure.result, device.turns.dedup]"),
            "{text}"
        );
    }

    /// The check after a link ended fails a device whose deleted session comes back with a
    /// restart, and passes the well-behaved one (explore finds that device on the same link's
    /// check first, so this sequence is written out here).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_deleted_session_back_after_a_restart_fails_the_check_after_the_link() {
        let moves = vec![
            Move::OpenSession {
                session: "s1".into(),
            },
            Move::Delete {
                session: "s1".into(),
            },
            Move::Restart,
            Move::Status {
                session: "s1".into(),
            },
        ];
        let text = scenario_text("gone", "gone", &moves, None);
        let scenario = harness::scenario::load_str(&text, "gone.yaml", Some(Move::SIDE))
            .unwrap_or_else(|e| panic!("{e}\n{text}"));
        let cell = harness::engine::Cell::LATEST;
        let pace = std::time::Duration::from_millis(50);
        let broken = crate::explore::in_process::against_device(
            &scenario,
            cell,
            Some("device.delete.gone_later"),
            pace,
        )
        .await
        .expect("ran");
        assert_eq!(
            broken.0.broken_rules(),
            ["device.delete.gone_later"],
            "{text}"
        );
        let kept = crate::explore::in_process::against_device(&scenario, cell, None, pace)
            .await
            .expect("ran");
        assert!(kept.0.broken_rules().is_empty(), "{text}");
    }
}
