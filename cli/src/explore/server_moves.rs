//! What `harness explore device` does to a web server under test: the person in its web UI
//! opens chats, writes in them and deletes them (fake-device's `peer.steps`, done by the
//! server's hooks), and the device's link drops and comes back (fake-device's own steps). Both
//! lanes keep one clock, so a chat is deleted while the device is offline, or a message is cut
//! short by a drop, as the sequence says.
//!
//! The oracle is fake-device's monitors and, after the last move, the model: what the spec lets
//! the server have sent by then. Every chat was opened by `session/new`; every message went to
//! the device once, as a prompt with a turn id or as a steer, and no second turn ever carries it
//! (a reattach follows or imports a cut-short turn, and sends an unknown one again only under
//! its own turn id); every deleted chat's delete reached the device, one made while it was
//! offline after it dialled again.
//!
//! A sequence stays valid however it is cut: a move that needs what is not there (a chat not
//! opened, a link already down) is left out when the sequence is written, and a device left
//! offline dials again before the model is checked.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::sequence::{Limits, Moves, Swarm, yaml_string};

/// What the person in the web UI, or the device, does next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Move {
    /// The person opens a chat on the device (`open_chat`: `session/new`).
    OpenChat {
        /// The chat's label (`c1`).
        chat: String,
    },
    /// The person writes in a chat (`send`): a prompt, or a steer while its turn runs.
    Send {
        /// The chat's label.
        chat: String,
        /// What they wrote: each message its own, so the model can tell them apart.
        text: String,
    },
    /// The person deletes a chat (`delete_chat`), the device linked or not.
    DeleteChat {
        /// The chat's label.
        chat: String,
    },
    /// The device's link ends (its network drops, it sleeps), with this close code.
    DropLink {
        /// The close code the device sends.
        code: u16,
    },
    /// The device dials again.
    Dial,
    /// The web server restarts (`restart_peer`, on its state directory): a linked device
    /// dials again once it is back; an offline one stays offline.
    RestartServer,
    /// A person at the device's terminal shares a session, types a turn in it and lets it go
    /// (`announce`, the turn's events, `left`; the announce waits for the next link).
    Terminal {
        /// What they typed.
        text: String,
    },
    /// Time passes.
    Wait {
        /// How long, in milliseconds.
        ms: u64,
    },
}

/// How long fake-device's echo agent pauses between the three pieces of an answer.
const STEP_DELAY_MS: u64 = 200;
/// How long the person waits after a message before writing the next in the same chat: a turn
/// (three pauses) with room to spare, so the message goes as a prompt, not a steer.
const TURN_MS: u64 = 1_200;
/// How long after the device dialled again the server may take to reattach its chats.
const REATTACH_MS: u64 = 800;
/// How long a restarting server is left alone: the web UI acts again only after it (and, with
/// the device linked, after the reattach window that follows the dial).
const RESTART_MS: u64 = 2_500;
/// How long after the last move the model waits before it looks: the last turns end.
const SETTLE_MS: u64 = 1_200;
/// How long each of the model's expectations waits for what it looks for, the settling time
/// past: what has not come by then is missing (and a finding's every shrinking run that fails
/// costs this, not the scenario's 10 s).
const MODEL_WAIT: &str = "3s";
/// The close codes a dropped link is drawn from: a normal close, going away, an error.
const CLOSE_CODES: [u16; 3] = [1000, 1001, 1011];

/// The rules a written sequence names: what its steps check beyond the always-on monitors.
pub const RULES: [&str; 6] = [
    "instance.link.token",
    "instance.chat.open",
    "instance.prompt.send",
    "instance.reattach.known",
    "instance.delete.on_chat",
    "instance.delete.redeliver",
];

impl Moves for Move {
    const SIDE: harness::scenario::Side = harness::scenario::Side::Device;
    const DOUBLE: &'static str = "fake-device";

    fn generate(seed: u64, run: u64, limits: Limits) -> Vec<Self> {
        generate(seed, run, limits)
    }

    fn scenario_text(name: &str, about: &str, moves: &[Self], broken: Option<&str>) -> String {
        scenario_text(name, about, moves, broken)
    }

    fn judged_by() -> String {
        format!(
            "fake-device's monitors and its model of the web server's chats ({})",
            RULES[1..].join(", ")
        )
    }
}

/// A kind of move, as drawn before its labels are chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Open,
    Send,
    Delete,
    Drop,
    Dial,
    Wait,
    Terminal,
    Restart,
}

/// The kinds of move, each with its weight in a sequence that draws from all of them.
const KINDS: [(Kind, u32); 8] = [
    (Kind::Open, 14),
    (Kind::Send, 25),
    (Kind::Delete, 8),
    (Kind::Drop, 12),
    (Kind::Dial, 10),
    (Kind::Wait, 6),
    (Kind::Terminal, 5),
    (Kind::Restart, 5),
];

/// The sequence of run `run` under `seed`: the same pair always gives the same moves.
///
/// As in swarm testing, each sequence first leaves out a few kinds of move (every kind but the
/// message has an even chance to go).
pub fn generate(seed: u64, run: u64, limits: Limits) -> Vec<Move> {
    let mut rng = StdRng::seed_from_u64(seed ^ run.wrapping_mul(0xD1B5_4A32_D192_ED03));
    let steps = rng.random_range(2..=limits.max_steps.max(2));
    let swarm = Swarm::new(&mut rng, &limits.allowed(&KINDS, Kind::Restart), Kind::Send);
    let (mut chats, mut texts, mut offline) = (0usize, 0usize, false);
    // One or two chats first.
    let mut moves: Vec<Move> = (0..rng.random_range(1..=2))
        .map(|_| Move::OpenChat {
            chat: new_label(&mut chats),
        })
        .collect();
    while moves.len() < steps {
        let kind = swarm.draw(&mut rng);
        // Mostly the newest chat, so that moves meet in one chat.
        let chat = match rng.random_range(0..4) {
            0 => format!("c{}", rng.random_range(1..=chats)),
            _ => format!("c{chats}"),
        };
        // The person opens and writes in chats of a linked device, and a terminal's turn is
        // told over a link: one offline comes back first. A drop drawn while offline is the
        // device coming back.
        if offline
            && matches!(
                kind,
                Kind::Open | Kind::Send | Kind::Drop | Kind::Dial | Kind::Terminal
            )
        {
            moves.push(Move::Dial);
            offline = false;
            if matches!(kind, Kind::Drop | Kind::Dial) {
                continue;
            }
        }
        match kind {
            // Chats are opened one or two at a time.
            Kind::Open => {
                for _ in 0..rng.random_range(1..=2) {
                    moves.push(Move::OpenChat {
                        chat: new_label(&mut chats),
                    });
                }
            }
            // One message, or one and a follow-up once it is answered; half the time the
            // last is cut short by a drop right after it.
            Kind::Send => {
                for _ in 0..rng.random_range(1..=2) {
                    texts += 1;
                    moves.push(Move::Send {
                        chat: chat.clone(),
                        text: format!("job {texts}"),
                    });
                }
                if rng.random_range(0..2) == 0 {
                    offline = drop_link(&mut moves, &mut rng, chats);
                }
            }
            Kind::Delete => moves.push(Move::DeleteChat { chat }),
            Kind::Drop => offline = drop_link(&mut moves, &mut rng, chats),
            // A dial of a linked device is no move.
            Kind::Dial => continue,
            Kind::Wait => moves.push(Move::Wait {
                ms: [100, 500, 1_000][rng.random_range(0..3)],
            }),
            Kind::Terminal => {
                texts += 1;
                moves.push(Move::Terminal {
                    text: format!("terminal job {texts}"),
                });
            }
            Kind::Restart => moves.push(Move::RestartServer),
        }
    }
    moves.truncate(steps);
    moves
}

/// The device's link drops (with one of the close codes); while it is offline the person often
/// deletes a chat or two (the newest and another), and half the time the device dials again at
/// once after. Whether it is still offline.
fn drop_link(moves: &mut Vec<Move>, rng: &mut StdRng, chats: usize) -> bool {
    moves.push(Move::DropLink {
        code: CLOSE_CODES[rng.random_range(0..CLOSE_CODES.len())],
    });
    let deleted = match chats {
        0 | 1 => rng.random_range(0..=chats),
        _ => rng.random_range(1..=2),
    };
    for at in 0..deleted {
        let chat = match at {
            0 => chats,
            _ => rng.random_range(1..chats),
        };
        moves.push(Move::DeleteChat {
            chat: format!("c{chat}"),
        });
    }
    if rng.random_range(0..2) == 0 {
        moves.push(Move::Dial);
        return false;
    }
    true
}

/// The next chat's label, counted in `chats`.
fn new_label(chats: &mut usize) -> String {
    *chats += 1;
    format!("c{chats}")
}

/// The scenario `moves` make, as `harness run` reads it for fake-device: the device dials
/// (itself: it dials only when told), the web UI's moves as `peer.steps` and the device's as
/// steps, each lane waiting for its move's time on the shared clock; then, once the last turns
/// have ended, the model. `broken` is a rule it was found to break, listed with the rules its
/// steps check.
pub fn scenario_text(name: &str, about: &str, moves: &[Move], broken: Option<&str>) -> String {
    let mut plan = Plan::default();
    for one in moves {
        plan.take(one);
    }
    if !plan.linked {
        plan.device_at(plan.clock, "dial: { rule: instance.link.token }".into());
    }
    plan.clock += SETTLE_MS;
    let settle = plan.clock - plan.device_clock;
    let mut rules: Vec<&str> = RULES.to_vec();
    if let Some(broken) = broken.filter(|b| !rules.contains(b)) {
        rules.push(broken);
    }
    let mut out = String::new();
    let mut line = |text: &str| {
        out.push_str(text);
        out.push('\n');
    };
    line(&format!("name: {name}"));
    line(&format!("about: {}", yaml_string(about)));
    line(&format!("rules: [{}]", rules.join(", ")));
    line("timeout: 10s");
    line(&format!(
        "device: {{ dial: manual, step_delay: {STEP_DELAY_MS}ms }}"
    ));
    // A message that went as a steer has no turn id to hold against a second turn.
    if !plan.sends.is_empty() {
        let unset: Vec<String> = (1..=plan.sends.len())
            .map(|n| format!("t{n}: \"\""))
            .collect();
        line(&format!("vars: {{ {} }}", unset.join(", ")));
    }
    if !plan.peer.is_empty() {
        line("peer:");
        line("  steps:");
        for step in &plan.peer {
            line(&format!("    - {step}"));
        }
    }
    line("steps:");
    line("  - dial: { rule: instance.link.token }");
    for step in &plan.device {
        line(&format!("  - {step}"));
    }
    line(&format!("  - wait: {settle}ms"));
    for step in plan.model() {
        line(&format!("  - {step}"));
    }
    out
}

/// A message the web UI sent: for the model.
#[derive(Debug)]
struct Sent {
    chat: String,
    text: String,
    /// A drop came after it: a second turn for it is the reattach's fault.
    dropped_after: bool,
}

/// A sequence being laid out on the clock: each lane's steps, and what the moves made.
#[derive(Debug)]
struct Plan {
    /// Now, in milliseconds from the first link.
    clock: u64,
    peer: Vec<String>,
    peer_clock: u64,
    device: Vec<String>,
    device_clock: u64,
    linked: bool,
    /// Each chat opened, in order, with when the person may next write in it and whether it
    /// was deleted.
    chats: Vec<Chat>,
    sends: Vec<Sent>,
    /// Each deleted chat, and whether the device was offline when it was deleted.
    deletes: Vec<(String, bool)>,
}

/// A chat the web UI opened.
#[derive(Debug)]
struct Chat {
    label: String,
    /// When a message written in it goes as a prompt: its last turn has ended, and after a
    /// drop, the server has reattached.
    idle_at: u64,
    deleted: bool,
}

impl Default for Plan {
    fn default() -> Self {
        Self {
            clock: 0,
            peer: Vec::new(),
            peer_clock: 0,
            device: Vec::new(),
            device_clock: 0,
            linked: true,
            chats: Vec::new(),
            sends: Vec::new(),
            deletes: Vec::new(),
        }
    }
}

impl Plan {
    fn chat(&mut self, label: &str) -> Option<&mut Chat> {
        self.chats
            .iter_mut()
            .find(|c| c.label == label && !c.deleted)
    }

    /// A web UI action at `at` on the clock.
    fn peer_at(&mut self, at: u64, step: String) {
        if at > self.peer_clock {
            self.peer.push(format!("wait: {}ms", at - self.peer_clock));
            self.peer_clock = at;
        }
        self.peer.push(step);
    }

    /// A device step at `at` on the clock.
    fn device_at(&mut self, at: u64, step: String) {
        if at > self.device_clock {
            self.device
                .push(format!("wait: {}ms", at - self.device_clock));
            self.device_clock = at;
        }
        self.device.push(step);
    }

    /// Lays out one move, or leaves it out when what it needs is not there.
    fn take(&mut self, one: &Move) {
        match one {
            Move::OpenChat { chat }
                if self.linked && !self.chats.iter().any(|c| c.label == *chat) =>
            {
                self.peer_at(
                    self.clock,
                    format!("act: {{ open_chat: {{}}, capture: {{ {chat}: sessionId }} }}"),
                );
                self.chats.push(Chat {
                    label: chat.clone(),
                    idle_at: 0,
                    deleted: false,
                });
                self.clock += 400;
            }
            Move::Send { chat, text } if self.linked && self.chat(chat).is_some() => {
                let now = self.clock;
                let at = self.chat(chat).map_or(now, |c| c.idle_at.max(now));
                self.peer_at(
                    at,
                    format!(
                        "act: {{ send: {{ chat: \"${{{chat}}}\", text: {} }} }}",
                        yaml_string(text)
                    ),
                );
                if let Some(c) = self.chat(chat) {
                    c.idle_at = at + TURN_MS;
                }
                self.sends.push(Sent {
                    chat: chat.clone(),
                    text: text.clone(),
                    dropped_after: false,
                });
                // Soon enough that a drop next cuts the turn short.
                self.clock = at + 150;
            }
            Move::DeleteChat { chat } if self.chat(chat).is_some() => {
                self.peer_at(
                    self.clock,
                    format!("act: {{ delete_chat: \"${{{chat}}}\" }}"),
                );
                if let Some(c) = self.chat(chat) {
                    c.deleted = true;
                }
                self.deletes.push((chat.clone(), !self.linked));
                self.clock += 300;
            }
            Move::DropLink { code } if self.linked => {
                self.device_at(
                    self.clock,
                    format!("close: {{ code: {code}, reason: \"the device's network dropped\" }}"),
                );
                self.linked = false;
                for sent in &mut self.sends {
                    sent.dropped_after = true;
                }
                self.clock += 300;
            }
            Move::Dial if !self.linked => {
                self.device_at(self.clock, "dial: { rule: instance.link.token }".into());
                self.linked = true;
                let reattached = self.clock + REATTACH_MS;
                for c in &mut self.chats {
                    c.idle_at = c.idle_at.max(reattached);
                }
                self.clock += 600;
            }
            // The turn is the device's own: the lane waits for it (three paced steps) before the
            // terminal lets the session go.
            Move::Terminal { text } if self.linked => {
                self.device_at(self.clock, "act: { share_session: true }".into());
                self.device_at(
                    self.clock,
                    format!("act: {{ terminal_prompt: {} }}", yaml_string(text)),
                );
                self.device_at(self.clock + TURN_MS, "act: { leave_session: true }".into());
                self.clock += TURN_MS + 100;
            }
            // Whatever ran is cut short, as by a drop; the deletes the server keeps for an offline
            // device outlive the restart, and the model expects them after the next dial.
            Move::RestartServer => {
                self.device_at(self.clock, "restart_peer: {}".into());
                for sent in &mut self.sends {
                    sent.dropped_after = true;
                }
                if self.linked {
                    self.device_at(self.clock, "dial: { rule: instance.link.token }".into());
                    let reattached = self.clock + RESTART_MS + REATTACH_MS;
                    for c in &mut self.chats {
                        c.idle_at = c.idle_at.max(reattached);
                    }
                }
                self.clock += RESTART_MS;
            }
            Move::Wait { ms } => self.clock += ms,
            // What needs what is not there (shrinking cut it, or the link is already so).
            _ => {}
        }
    }

    /// The model's steps: what the server must have sent by now, and must not have. A message
    /// may go as a prompt with a turn id, one without (a device that does not list `turns`),
    /// or a steer; only one with a turn id is held against a second turn. Deletes are expected
    /// only of a device that lists `delete`.
    fn model(&self) -> Vec<String> {
        let mut steps = Vec::new();
        for chat in &self.chats {
            steps.push(format!(
                "expect: {{ method: session/new, capture: {{ {}: answer.result.sessionId }}, timeout: {MODEL_WAIT}, rule: instance.chat.open }}",
                chat.label
            ));
        }
        for (n, sent) in self.sends.iter().enumerate() {
            let n = n + 1;
            let (chat, text) = (&sent.chat, yaml_string(&sent.text));
            steps.push(format!(
                "expect: {{ message: {{ $one_of: [{{ method: session/prompt, params: {{ sessionId: \"${{{chat}}}\", prompt: [{{ text: {text} }}], _meta: {{ lembas: {{ turnId: {{ $capture: t{n} }} }} }} }} }}, {{ method: session/prompt, params: {{ sessionId: \"${{{chat}}}\", prompt: [{{ text: {text} }}] }} }}, {{ method: _lembas/steer, params: {{ sessionId: \"${{{chat}}}\", text: {text} }} }}] }}, timeout: {MODEL_WAIT}, rule: instance.prompt.send }}"
            ));
        }
        for (n, sent) in self.sends.iter().enumerate() {
            let n = n + 1;
            let rule = match sent.dropped_after {
                true => "instance.reattach.known",
                false => "instance.prompt.send",
            };
            steps.push(format!(
                "when: {{ that: \"${{t{n}}}\", matches: {{ $regex: \".\" }}, steps: [{{ expect_none: {{ method: session/prompt, params: {{ prompt: [{{ text: {} }}], _meta: {{ lembas: {{ turnId: {{ $not: \"${{t{n}}}\" }} }} }} }}, for: 100ms, rule: {rule} }} }}] }}",
                yaml_string(&sent.text)
            ));
        }
        for (chat, offline) in &self.deletes {
            let rule = match offline {
                true => "instance.delete.redeliver",
                false => "instance.delete.on_chat",
            };
            steps.push(format!(
                "when: {{ needs: [delete], steps: [{{ expect: {{ method: _lembas/session/delete, params: {{ sessionId: \"${{{chat}}}\" }}, timeout: {MODEL_WAIT}, rule: {rule} }} }}] }}"
            ));
        }
        steps
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
    fn a_delete_while_offline_is_expected_after_the_next_dial_and_a_left_out_dial_is_made_up() {
        let moves = vec![
            Move::OpenChat { chat: "c1".into() },
            Move::DropLink { code: 1001 },
            Move::DeleteChat { chat: "c1".into() },
            Move::Send {
                chat: "c1".into(),
                text: "job 1".into(),
            },
        ];
        let text = scenario_text("cut", "cut", &moves, None);
        assert!(text.contains("rule: instance.delete.redeliver"), "{text}");
        assert!(
            !text.contains("job 1"),
            "a message in a deleted chat: {text}"
        );
        let dials = text.matches("- dial:").count();
        assert_eq!(dials, 2, "{text}");
    }

    #[test]
    fn a_terminal_turn_goes_only_over_a_link_and_a_restart_of_a_linked_server_is_dialled_after() {
        let offline = vec![
            Move::OpenChat { chat: "c1".into() },
            Move::DropLink { code: 1000 },
            Move::Terminal {
                text: "terminal job 1".into(),
            },
        ];
        let text = scenario_text("cut", "cut", &offline, None);
        assert!(!text.contains("terminal_prompt"), "{text}");
        let linked = vec![
            Move::OpenChat { chat: "c1".into() },
            Move::RestartServer,
            Move::Terminal {
                text: "terminal job 1".into(),
            },
        ];
        let text = scenario_text("cut", "cut", &linked, None);
        let restart = text.find("restart_peer").expect("a restart");
        let dial = text[restart..].find("- dial:").expect("a dial after it");
        let typed = text.find("terminal_prompt").expect("the terminal's turn");
        assert!(restart + dial < typed, "{text}");
    }
}
