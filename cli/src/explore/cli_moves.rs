//! What `harness explore instance` does to a CLI under test: the web UI's moves (open a session,
//! prompt with a new or a repeated turn id, ask its status, cancel, delete, wait), drawn from a
//! seed, and written as the steps of a scenario that `harness run` replays.
//!
//! A sequence stays valid however it is cut: a move names the session or prompt it acts on by
//! label, and one whose label no earlier move made is left out when the sequence is written. So
//! shrinking may drop any move and what remains is still a scenario that runs.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::sequence::{Limits, Moves, Swarm, yaml_string};

/// What the person at the web UI (fake-instance) does next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Move {
    /// Open a session in the device's first root (`session/new`).
    OpenSession {
        /// The session's label (`s1`).
        session: String,
    },
    /// Send a prompt and go on without waiting (`session/prompt`).
    Prompt {
        /// The request's label (`p1`), which an await names.
        prompt: String,
        /// The session's label.
        session: String,
        /// Its turn id: a fresh one, or an earlier prompt's (the web UI sending it again).
        turn_id: String,
        /// What the person typed.
        text: String,
    },
    /// Wait for a prompt's answer (any result or refusal; none at all breaks
    /// `device.prompt.answer`).
    Await {
        /// The prompt's label.
        prompt: String,
    },
    /// Ask a session's status (`_lembas/session/status`).
    Status {
        /// The session's label.
        session: String,
    },
    /// Stop a session's running turn (`session/cancel`).
    Cancel {
        /// The session's label.
        session: String,
    },
    /// Delete a session (`_lembas/session/delete`).
    Delete {
        /// The session's label.
        session: String,
    },
    /// Drop the link without a close frame, as a lost network does: the device dials again.
    DropLink,
    /// Restart the device (`restart_peer`) on the same state directory.
    Restart,
    /// Let time pass.
    Wait {
        /// How long, in milliseconds.
        ms: u64,
    },
}

/// The texts a prompt is drawn from: short, and one the scripted models answer slowly, so that
/// prompts meet a running turn.
const TEXTS: [&str; 3] = ["say hello", "a long turn", "count to three"];

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
            "fake-instance's monitors, its model of the device's turns ({}) and each prompt's answer ({})",
            super::explored::MODEL_RULES.join(", "),
            RULES[3..].join(", ")
        )
    }
}

/// The kinds of move, each with its weight in a sequence that draws from all of them.
const KINDS: [(Kind, u32); 9] = [
    (Kind::Open, 8),
    (Kind::Prompt, 20),
    (Kind::Await, 12),
    (Kind::Status, 15),
    (Kind::Cancel, 6),
    (Kind::Delete, 4),
    (Kind::DropLink, 5),
    (Kind::Restart, 6),
    (Kind::Wait, 8),
];

/// A kind of move, as drawn before its labels are chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Open,
    Prompt,
    Await,
    Status,
    Cancel,
    Delete,
    DropLink,
    Restart,
    Wait,
}

/// The sequence of run `run` under `seed`: the same pair always gives the same moves.
///
/// Each sequence first leaves out a few kinds of move at random (every kind but the prompt has
/// one chance in three to go), as swarm testing does: a sequence of only prompts, waits and
/// status requests reaches deep into one queue, where one that spreads its moves over every
/// kind seldom does.
pub fn generate(seed: u64, run: u64, limits: Limits) -> Vec<Move> {
    let mut rng = StdRng::seed_from_u64(seed ^ run.wrapping_mul(0x9E37_79B9_7F4A_7C15));
    let steps = rng.random_range(2..=limits.max_steps.max(2));
    let swarm = Swarm::new(&mut rng, &KINDS, Kind::Prompt);
    let mut drawn = Drawn::default();
    let mut moves = vec![drawn.open_session()];
    while moves.len() < steps {
        let kind = swarm.draw(&mut rng);
        let next = match kind {
            Kind::Open => drawn.open_session(),
            // Prompts come in bursts of up to three, as a person who types fast sends them; half
            // the bursts are looked at, after a pause, with a status of the last one's session.
            Kind::Prompt => {
                for _ in 1..rng.random_range(1..=3) {
                    moves.push(drawn.prompt(&mut rng));
                }
                let last = drawn.prompt(&mut rng);
                match (&last, rng.random_range(0..2)) {
                    (Move::Prompt { session, .. }, 0) => {
                        let session = session.clone();
                        moves.extend([last, Move::Wait { ms: 300 }]);
                        Move::Status { session }
                    }
                    _ => last,
                }
            }
            Kind::Await => match drawn.outstanding(&mut rng) {
                Some(prompt) => Move::Await { prompt },
                None => continue,
            },
            // Half the status requests come after a pause, when what was sent has been admitted.
            Kind::Status => {
                if rng.random_range(0..2) == 0 {
                    moves.push(Move::Wait { ms: 300 });
                }
                Move::Status {
                    session: drawn.session(&mut rng),
                }
            }
            Kind::Cancel => Move::Cancel {
                session: drawn.session(&mut rng),
            },
            Kind::Delete => Move::Delete {
                session: drawn.session(&mut rng),
            },
            Kind::DropLink => Move::DropLink,
            // Half the restarts come once the newest prompt is answered (a CLI is most often
            // restarted idle, for an update); those not awaited are sent again after it.
            Kind::Restart => {
                if rng.random_range(0..2) == 0
                    && let Some(prompt) = drawn.newest_outstanding()
                {
                    moves.push(Move::Await { prompt });
                }
                Move::Restart
            }
            Kind::Wait => Move::Wait {
                ms: [20, 100, 300][rng.random_range(0..3)],
            },
        };
        moves.push(next);
    }
    moves.truncate(steps);
    moves
}

/// What a sequence has made so far, for the next move to act on.
#[derive(Debug, Default)]
struct Drawn {
    sessions: Vec<String>,
    /// Each prompt's label, session, turn id and text, and whether it was awaited.
    prompts: Vec<(String, String, String, String, bool)>,
}

impl Drawn {
    fn open_session(&mut self) -> Move {
        let session = format!("s{}", self.sessions.len() + 1);
        self.sessions.push(session.clone());
        Move::OpenSession { session }
    }

    /// A session to act on: mostly the newest, so that moves meet in one session's queue.
    fn session(&self, rng: &mut StdRng) -> String {
        match rng.random_range(0..4) {
            0 => self.sessions[rng.random_range(0..self.sessions.len())].clone(),
            _ => self.sessions[self.sessions.len() - 1].clone(),
        }
    }

    fn prompt(&mut self, rng: &mut StdRng) -> Move {
        // One prompt in five sends an earlier turn again, as a web UI that lost the answer does.
        if !self.prompts.is_empty()
            && rng.random_range(0..5) == 0
            && let Some(again) = self.repeat(rng)
        {
            return again;
        }
        let label = format!("p{}", self.prompts.len() + 1);
        let session = self.session(rng);
        let turn_id = format!("t{}", self.prompts.len() + 1);
        let text = TEXTS[rng.random_range(0..TEXTS.len())].to_string();
        self.prompts.push((
            label.clone(),
            session.clone(),
            turn_id.clone(),
            text.clone(),
            false,
        ));
        Move::Prompt {
            prompt: label,
            session,
            turn_id,
            text,
        }
    }

    /// A prompt sending an earlier prompt's turn again, in its session; none before a prompt.
    fn repeat(&mut self, rng: &mut StdRng) -> Option<Move> {
        if self.prompts.is_empty() {
            return None;
        }
        let (_, session, turn_id, text, _) =
            self.prompts[rng.random_range(0..self.prompts.len())].clone();
        let label = format!("p{}", self.prompts.len() + 1);
        self.prompts.push((
            label.clone(),
            session.clone(),
            turn_id.clone(),
            text.clone(),
            false,
        ));
        Some(Move::Prompt {
            prompt: label,
            session,
            turn_id,
            text,
        })
    }

    /// The newest prompt not yet awaited, marked awaited.
    fn newest_outstanding(&mut self) -> Option<String> {
        let newest = self.prompts.iter_mut().rev().find(|p| !p.4)?;
        newest.4 = true;
        Some(newest.0.clone())
    }

    fn outstanding(&mut self, rng: &mut StdRng) -> Option<String> {
        let waiting: Vec<usize> = (0..self.prompts.len())
            .filter(|i| !self.prompts[*i].4)
            .collect();
        if waiting.is_empty() {
            return None;
        }
        let at = waiting[rng.random_range(0..waiting.len())];
        self.prompts[at].4 = true;
        Some(self.prompts[at].0.clone())
    }
}

/// The rules a written sequence names: what its steps check beyond the always-on monitors.
pub const RULES: [&str; 5] = [
    "device.hello.first",
    "device.session_new.result",
    "device.link.redial",
    "device.prompt.answer",
    "device.prompt.queued",
];

/// The scenario `moves` make, as `harness run` reads it: the link and hello first, then each
/// move whose session exists by then, then an await for every prompt not yet awaited (every
/// request is answered). `broken` is a rule it was found to break, listed with the rules its
/// steps check, so a replay reports it as judged.
pub fn scenario_text(name: &str, about: &str, moves: &[Move], broken: Option<&str>) -> String {
    let mut rules: Vec<&str> = RULES.to_vec();
    if let Some(broken) = broken.filter(|b| !rules.contains(b)) {
        rules.push(broken);
    }
    let mut script = Script::default();
    script.line(format!("name: {name}"));
    script.line(format!("about: {}", yaml_string(about)));
    script.line(format!("rules: [{}]", rules.join(", ")));
    script.line("timeout: 10s");
    script.line("steps:");
    script.step("expect_link: { within: 30s, rule: device.link.dial }");
    script.step(
        "expect: { method: _lembas/hello, capture: { hello: params }, rule: device.hello.first }",
    );
    for one in moves {
        script.write(one);
    }
    let waiting: Vec<usize> = (0..script.started.len())
        .filter(|i| script.started[*i].waiting())
        .collect();
    for at in waiting {
        script.await_prompt(at);
    }
    script.out
}

/// A scenario being written: its text, and what its moves have made so far.
#[derive(Debug, Default)]
struct Script<'a> {
    out: String,
    sessions: Vec<&'a str>,
    /// Sessions deleted, or possibly lost with a restart: a prompt in them may be refused.
    gone: Vec<&'a str>,
    started: Vec<Started<'a>>,
}

/// A prompt the sequence sent, for its await.
#[derive(Debug)]
struct Started<'a> {
    label: String,
    session: &'a str,
    turn_id: &'a str,
    text: &'a str,
    /// Sent while an earlier prompt of its session was not yet answered: it waits its turn.
    behind_another: bool,
    /// Its session was deleted (or the device restarted) while it was under way or before.
    may_be_refused: bool,
    awaited: bool,
    /// Sent on a link that dropped: sent again on the next, as the web UI does.
    abandoned: bool,
}

impl Started<'_> {
    fn waiting(&self) -> bool {
        !self.awaited && !self.abandoned
    }
}

impl<'a> Script<'a> {
    fn line(&mut self, text: impl AsRef<str>) {
        self.out.push_str(text.as_ref());
        self.out.push('\n');
    }

    fn step(&mut self, text: impl AsRef<str>) {
        self.line(format!("  - {}", text.as_ref()));
    }

    fn has(&self, session: &str) -> bool {
        self.sessions.contains(&session)
    }

    fn write(&mut self, one: &'a Move) {
        match one {
            Move::OpenSession { session } => {
                self.step(format!(
                    "request: {{ method: session/new, params: {{ cwd: \"${{hello.limits.roots[0]}}\", mcpServers: [] }}, capture: {{ {session}: result.sessionId }}, rule: device.session_new.result }}"
                ));
                self.sessions.push(session);
            }
            Move::Prompt {
                prompt,
                session,
                turn_id,
                text,
            } if self.has(session) && !self.started.iter().any(|s| s.label == *prompt) => {
                self.prompt(prompt.clone(), session, turn_id, text);
            }
            Move::Await { prompt } => {
                if let Some(at) = self
                    .started
                    .iter()
                    .position(|s| s.label == *prompt && s.waiting())
                {
                    self.await_prompt(at);
                }
            }
            Move::Status { session } if self.has(session) => self.step(format!(
                "request: {{ method: _lembas/session/status, params: {{ sessionId: \"${{{session}}}\" }}, answer: {ANY_ANSWER} }}"
            )),
            Move::Cancel { session } if self.has(session) => self.step(format!(
                "notify: {{ method: session/cancel, params: {{ sessionId: \"${{{session}}}\" }} }}"
            )),
            Move::Delete { session } if self.has(session) => {
                self.step(format!(
                    "request: {{ method: _lembas/session/delete, params: {{ sessionId: \"${{{session}}}\" }}, answer: {ANY_ANSWER} }}"
                ));
                // What was under way in it may end either way; what comes after finds no session.
                for one in self.started.iter_mut().filter(|s| s.session == *session) {
                    one.may_be_refused = true;
                }
                self.gone.push(session);
            }
            Move::Wait { ms } => self.step(format!("wait: {ms}ms")),
            Move::DropLink => self.relink(false),
            Move::Restart => self.relink(true),
            // What names a session that is not there (shrinking dropped it).
            _ => {}
        }
    }

    fn prompt(&mut self, label: String, session: &'a str, turn_id: &'a str, text: &'a str) {
        self.step(format!(
            "start: {{ method: session/prompt, params: {{ sessionId: \"${{{session}}}\", prompt: [{{ type: text, text: {} }}], _meta: {{ lembas: {{ turnId: {turn_id} }} }} }}, as: {label}, timeout: 30s }}",
            yaml_string(text)
        ));
        let behind_another = self
            .started
            .iter()
            .any(|s| s.session == session && s.waiting());
        let may_be_refused = self.gone.contains(&session);
        self.started.push(Started {
            label,
            session,
            turn_id,
            text,
            behind_another,
            may_be_refused,
            awaited: false,
            abandoned: false,
        });
    }

    /// The link drops (or the device restarts, dropping it): the device dials again and says
    /// hello, and every prompt still waiting is sent again with its turn id on the new link, as
    /// the web UI reattaches. After a restart a device without lasting sessions may have lost
    /// every one of them.
    fn relink(&mut self, restart: bool) {
        if restart {
            self.step("restart_peer: {}");
            self.step("expect_close: { timeout: 10s, rule: device.link.redial }");
            let all = self.sessions.clone();
            self.gone.extend(all);
            for one in &mut self.started {
                one.may_be_refused = true;
            }
        } else {
            self.step("close: { drop: true }");
        }
        self.step("expect_reconnect: { within: 15s, rule: device.link.redial }");
        self.step("expect: { method: _lembas/hello, rule: device.hello.first }");
        let waiting: Vec<usize> = (0..self.started.len())
            .filter(|i| self.started[*i].waiting())
            .collect();
        for at in waiting {
            self.started[at].abandoned = true;
            let one = &self.started[at];
            let (session, turn_id, text, refused) =
                (one.session, one.turn_id, one.text, one.may_be_refused);
            let label = format!("{}r{}", one.label, self.started.len());
            self.prompt(label, session, turn_id, text);
            if let Some(again) = self.started.last_mut() {
                again.may_be_refused |= refused;
            }
        }
    }

    /// A prompt's await: it is answered with one of the spec's stop reasons
    /// (`device.prompt.answer`), and one that waited behind another is not refused for it
    /// (`device.prompt.queued`); only a prompt whose session may be gone may be refused.
    fn await_prompt(&mut self, at: usize) {
        let prompt = &self.started[at];
        let (answer, rule) = match (prompt.may_be_refused, prompt.behind_another) {
            (true, _) => (ANY_ANSWER.to_string(), "device.prompt.answer"),
            (false, behind) => (
                format!(
                    "{{ result: {{ stopReason: {{ $one_of: [{}] }} }} }}",
                    harness::lembas::turn_model::STOP_REASONS.join(", ")
                ),
                if behind {
                    "device.prompt.queued"
                } else {
                    "device.prompt.answer"
                },
            ),
        };
        let line = format!(
            "await: {{ request: {}, answer: {answer}, rule: {rule} }}",
            prompt.label
        );
        self.started[at].awaited = true;
        self.step(line);
    }
}

/// An answer of either kind: what the spec lets a device answer either way (a status, a
/// delete, a prompt in a session that may be gone); what it must not do is leave it unanswered.
const ANY_ANSWER: &str = "{ $one_of: [{ result: $any }, { error: $object }] }";

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
                turn_id: "t1".into(),
                text: "say hello".into(),
            },
            Move::OpenSession {
                session: "s2".into(),
            },
            Move::Prompt {
                prompt: "p2".into(),
                session: "s2".into(),
                turn_id: "t2".into(),
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
            text.contains("device.prompt.queued, device.turns.dedup]"),
            "{text}"
        );
    }
}
