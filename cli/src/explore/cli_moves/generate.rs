//! Drawing a sequence of the web UI's moves from a seed, as swarm testing does.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::explore::cli_moves::moves::{CLOSE_CODES, Move, TEXTS};
use crate::explore::sequence::{Limits, Swarm};

/// The kinds of move, each with its weight in a sequence that draws from all of them.
const KINDS: [(Kind, u32); 15] = [
    (Kind::Open, 8),
    (Kind::Prompt, 20),
    (Kind::Await, 12),
    (Kind::Status, 15),
    (Kind::Cancel, 6),
    (Kind::Delete, 6),
    (Kind::DropLink, 5),
    (Kind::Restart, 8),
    (Kind::Wait, 8),
    (Kind::Steer, 3),
    (Kind::Title, 3),
    (Kind::History, 5),
    (Kind::Rewind, 3),
    (Kind::CloseLink, 2),
    (Kind::Configure, 2),
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
    Steer,
    Title,
    History,
    Rewind,
    CloseLink,
    Configure,
}

/// The sequence of run `run` under `seed`: the same pair always gives the same moves.
///
/// Each sequence first leaves out a few kinds of move at random (every kind but the prompt has
/// an even chance to go), as swarm testing does: a sequence of only prompts, waits and
/// status requests reaches deep into one queue, where one that spreads its moves over every
/// kind seldom does.
pub fn generate(seed: u64, run: u64, limits: Limits) -> Vec<Move> {
    let mut rng = StdRng::seed_from_u64(seed ^ run.wrapping_mul(0x9E37_79B9_7F4A_7C15));
    let steps = rng.random_range(2..=limits.max_steps.max(2));
    let swarm = Swarm::new(
        &mut rng,
        &limits.allowed(&KINDS, Kind::Restart),
        Kind::Prompt,
    );
    let mut drawn = Drawn::default();
    let mut moves = vec![drawn.open_session()];
    while moves.len() < steps {
        let kind = swarm.draw(&mut rng);
        let next = match kind {
            Kind::Open => drawn.open_session(),
            // Prompts come in bursts of up to three, as a person who types fast sends them; half
            // the bursts are looked at, after a pause, with a status of the last one's session,
            // and one in four is cut short by the link ending while they wait in the queue.
            Kind::Prompt => {
                for _ in 1..rng.random_range(1..=3) {
                    moves.push(drawn.prompt(&mut rng));
                }
                let last = drawn.prompt(&mut rng);
                match (&last, rng.random_range(0..4)) {
                    (Move::Prompt { session, .. }, 0 | 1) => {
                        let session = session.clone();
                        moves.extend([last, Move::Wait { ms: 300 }]);
                        Move::Status { session }
                    }
                    (_, 2) => {
                        moves.push(last);
                        match rng.random_range(0..2) {
                            0 => Move::DropLink,
                            _ => Move::CloseLink {
                                code: CLOSE_CODES[rng.random_range(0..CLOSE_CODES.len())],
                            },
                        }
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
            // Half the deletes are looked at at once, in status.
            Kind::Delete => {
                let session = drawn.session(&mut rng);
                match rng.random_range(0..2) {
                    0 => {
                        moves.push(Move::Delete {
                            session: session.clone(),
                        });
                        Move::Status { session }
                    }
                    _ => Move::Delete { session },
                }
            }
            Kind::DropLink => Move::DropLink,
            // Two restarts in three come once the newest prompt is answered (a CLI is most
            // often restarted idle, for an update); those not awaited are sent again after it.
            Kind::Restart => {
                if rng.random_range(0..3) > 0
                    && let Some(prompt) = drawn.newest_outstanding()
                {
                    moves.push(Move::Await { prompt });
                }
                Move::Restart
            }
            Kind::Wait => Move::Wait {
                ms: [20, 100, 300][rng.random_range(0..3)],
            },
            // Half the steers follow a prompt at once, so a turn runs to take them in.
            Kind::Steer => {
                let session = match rng.random_range(0..2) {
                    0 => {
                        let prompt = drawn.prompt(&mut rng);
                        let session = match &prompt {
                            Move::Prompt { session, .. } => session.clone(),
                            _ => drawn.session(&mut rng),
                        };
                        moves.push(prompt);
                        session
                    }
                    _ => drawn.session(&mut rng),
                };
                Move::Steer {
                    session,
                    text: drawn.message("mind the tests"),
                }
            }
            // Half the titles are looked at at once, in status.
            Kind::Title => {
                let session = drawn.session(&mut rng);
                let title = drawn.message("Title");
                let titled = Move::Title {
                    session: session.clone(),
                    title,
                };
                match rng.random_range(0..2) {
                    0 => {
                        moves.push(titled);
                        Move::Status { session }
                    }
                    _ => titled,
                }
            }
            // Half the histories are asked once the newest prompt is answered, as a web UI
            // reloads a chat whose answer came.
            Kind::History => {
                if rng.random_range(0..2) == 0
                    && let Some(prompt) = drawn.newest_outstanding()
                {
                    let session = drawn.session_of(&prompt);
                    moves.push(Move::Await { prompt });
                    Move::History { session }
                } else {
                    Move::History {
                        session: drawn.session(&mut rng),
                    }
                }
            }
            // Half the rewinds come once the session's prompts are answered (a person edits a
            // message when the chat is idle); the others meet a session that may still work.
            Kind::Rewind => {
                let Some((session, turn_id)) = drawn.rewound(&mut rng) else {
                    continue;
                };
                if rng.random_range(0..2) == 0 {
                    moves.extend(
                        drawn
                            .outstanding_in(&session)
                            .into_iter()
                            .map(|prompt| Move::Await { prompt }),
                    );
                }
                Move::Rewind { session, turn_id }
            }
            Kind::CloseLink => Move::CloseLink {
                code: CLOSE_CODES[rng.random_range(0..CLOSE_CODES.len())],
            },
            Kind::Configure => Move::Configure {
                session: drawn.session(&mut rng),
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
    /// Each prompt's label, session, turn id (if any) and text, and whether it was awaited.
    prompts: Vec<(String, String, Option<String>, String, bool)>,
    /// Sessions a rewind was drawn in: their turn ids are not sent again (whether a rewound
    /// turn's id is still known is not the spec's to say).
    rewound: Vec<String>,
    /// Steers and titles drawn, each numbered so that no two are alike.
    messages: usize,
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
        let session = self.session(rng);
        // One fresh prompt in six has no turn id, as a client that keeps none sends it.
        let turn_id = (rng.random_range(0..6) > 0).then(|| format!("t{}", self.prompts.len() + 1));
        let text = TEXTS[rng.random_range(0..TEXTS.len())].to_string();
        self.sent(session, turn_id, text)
    }

    /// A prompt sent with the next label, kept for the moves after it.
    fn sent(&mut self, session: String, turn_id: Option<String>, text: String) -> Move {
        let label = format!("p{}", self.prompts.len() + 1);
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

    /// The session of the prompt labelled `prompt` (the newest session, for none).
    fn session_of(&self, prompt: &str) -> String {
        self.prompts.iter().find(|p| p.0 == prompt).map_or_else(
            || self.sessions[self.sessions.len() - 1].clone(),
            |p| p.1.clone(),
        )
    }

    /// A message of its own, `stem` and a number.
    fn message(&mut self, stem: &str) -> String {
        self.messages += 1;
        format!("{stem} {}", self.messages)
    }

    /// An earlier prompt's session and turn id to rewind to, its session marked rewound; none
    /// before a prompt with a turn id.
    fn rewound(&mut self, rng: &mut StdRng) -> Option<(String, String)> {
        let with_ids: Vec<(String, String)> = self
            .prompts
            .iter()
            .filter_map(|p| p.2.clone().map(|turn| (p.1.clone(), turn)))
            .collect();
        if with_ids.is_empty() {
            return None;
        }
        let (session, turn_id) = with_ids[rng.random_range(0..with_ids.len())].clone();
        self.rewound.push(session.clone());
        Some((session, turn_id))
    }

    /// A prompt sending an earlier prompt's turn again, in its session; none before a prompt
    /// with a turn id, nor in a session rewound.
    fn repeat(&mut self, rng: &mut StdRng) -> Option<Move> {
        let candidates: Vec<usize> = (0..self.prompts.len())
            .filter(|at| {
                self.prompts[*at].2.is_some() && !self.rewound.contains(&self.prompts[*at].1)
            })
            .collect();
        if candidates.is_empty() {
            return None;
        }
        let (_, session, turn_id, text, _) =
            self.prompts[candidates[rng.random_range(0..candidates.len())]].clone();
        Some(self.sent(session, turn_id, text))
    }

    /// Every prompt of `session` not yet awaited, oldest first, marked awaited.
    fn outstanding_in(&mut self, session: &str) -> Vec<String> {
        self.prompts
            .iter_mut()
            .filter(|p| p.1 == session && !p.4)
            .map(|p| {
                p.4 = true;
                p.0.clone()
            })
            .collect()
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
