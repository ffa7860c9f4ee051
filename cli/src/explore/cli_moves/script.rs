//! Writing a sequence as a scenario `harness run` replays: each move whose session exists by
//! then, and the checks of what the moves made (the model the sequence holds the CLI to).

use crate::explore::cli_moves::moves::{Move, STALLED};
use crate::explore::sequence::yaml_string;

/// The rules a written sequence names: what its steps check beyond the always-on monitors.
pub const RULES: [&str; 13] = [
    "device.hello.first",
    "device.session_new.result",
    "device.link.redial",
    "device.prompt.answer",
    "device.prompt.queued",
    "device.steer.result",
    "device.title.result",
    "device.title.applies",
    "device.history.turn_id",
    "device.rewind.result",
    "device.delete.gone",
    "device.delete.gone_later",
    "device.configure.result",
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
    // A device on the instance's model meets a model that stalls between its words.
    script.line("instance:");
    script.line("  http:");
    script.line("    scripts:");
    script.line(format!(
        "      - {{ when: {{ last_user: \"^{STALLED}$\" }}, reply: {{ chunks: [\"thinking\", \" it\", \" over\"], chunk_delay_ms: 800 }} }}"
    ));
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

/// A scenario being written: its text, and what its moves have made so far, which is the
/// model its checks hold the device to.
#[derive(Debug, Default)]
struct Script<'a> {
    out: String,
    sessions: Vec<&'a str>,
    /// Sessions deleted, or possibly lost with a restart: a prompt in them may be refused.
    gone: Vec<&'a str>,
    started: Vec<Started<'a>>,
    /// The title each session was given last, while it is not gone.
    titles: Vec<(&'a str, &'a str)>,
    /// Each delete: its session, the capture of its answer, and whether a link ended since.
    deletes: Vec<Deleted<'a>>,
    /// Captures made so far, each named by its number.
    captures: usize,
}

/// A delete the sequence sent, for the status after it.
#[derive(Debug)]
struct Deleted<'a> {
    session: &'a str,
    answer: String,
    relinked: bool,
}

/// A prompt the sequence sent, for its await.
#[derive(Debug)]
struct Started<'a> {
    label: String,
    session: &'a str,
    turn_id: Option<&'a str>,
    text: &'a str,
    /// Sent while an earlier prompt of its session was not yet answered: it waits its turn.
    behind_another: bool,
    /// Its session was deleted (or the device restarted) while it was under way or before.
    may_be_refused: bool,
    /// The capture of its answer, once awaited.
    answer: Option<String>,
    /// Sent on a link that dropped: sent again on the next, as the web UI does.
    abandoned: bool,
    /// A rewind to it or an earlier turn may have taken it out of the conversation.
    reverted: bool,
}

impl Started<'_> {
    fn waiting(&self) -> bool {
        self.answer.is_none() && !self.abandoned
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

    /// A step run only where the device listed `needs`.
    fn step_needing(&mut self, needs: &str, steps: &[String]) {
        self.step(format!(
            "when: {{ needs: [{needs}], steps: [{}] }}",
            steps.join(", ")
        ));
    }

    fn has(&self, session: &str) -> bool {
        self.sessions.contains(&session)
    }

    fn is_gone(&self, session: &str) -> bool {
        self.gone.contains(&session)
    }

    /// A fresh capture name with `stem`.
    fn capture(&mut self, stem: &str) -> String {
        self.captures += 1;
        format!("{stem}{}", self.captures)
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
                self.prompt(prompt.clone(), session, turn_id.as_deref(), text);
            }
            // A prompt sent again after the link ended is awaited as its copy on the new link.
            Move::Await { prompt } => {
                let again = format!("{prompt}r");
                if let Some(at) = self.started.iter().rposition(|s| {
                    (s.label == *prompt || s.label.starts_with(&again)) && s.waiting()
                }) {
                    self.await_prompt(at);
                }
            }
            Move::Status { session } if self.has(session) => self.status(session),
            Move::Cancel { session } if self.has(session) => self.step(format!(
                "notify: {{ method: session/cancel, params: {{ sessionId: \"${{{session}}}\" }} }}"
            )),
            Move::Delete { session } if self.has(session) => {
                let answer = self.capture("deleted");
                self.step_needing(
                    "delete",
                    &[format!(
                        "{{ request: {{ method: _lembas/session/delete, params: {{ sessionId: \"${{{session}}}\" }}, answer: {ANY_ANSWER}, capture: {{ {answer}: $ }} }} }}"
                    )],
                );
                // What was under way in it may end either way; what comes after finds no session.
                for one in self.started.iter_mut().filter(|s| s.session == *session) {
                    one.may_be_refused = true;
                }
                self.gone.push(session);
                self.titles.retain(|(s, _)| s != session);
                self.deletes.push(Deleted {
                    session,
                    answer,
                    relinked: false,
                });
            }
            Move::Steer { session, text } if self.has(session) => {
                let answer = match self.is_gone(session) {
                    true => ANY_ANSWER.to_string(),
                    false => "{ $one_of: [{ result: { queued: $number } }, { error: { code: -32602 } }] }".to_string(),
                };
                self.step_needing(
                    "steer",
                    &[format!(
                        "{{ request: {{ method: _lembas/steer, params: {{ sessionId: \"${{{session}}}\", text: {} }}, answer: {answer}, rule: device.steer.result }} }}",
                        yaml_string(text)
                    )],
                );
            }
            Move::Title { session, title } if self.has(session) => {
                let gone = self.is_gone(session);
                let answer = match gone {
                    true => ANY_ANSWER.to_string(),
                    false => format!("{{ result: {{ title: {} }} }}", yaml_string(title)),
                };
                self.step_needing(
                    "title",
                    &[format!(
                        "{{ request: {{ method: _lembas/session/title, params: {{ sessionId: \"${{{session}}}\", title: {} }}, answer: {answer}, rule: device.title.result }} }}",
                        yaml_string(title)
                    )],
                );
                self.titles.retain(|(s, _)| s != session);
                if !gone {
                    self.titles.push((session, title));
                }
            }
            Move::History { session } if self.has(session) => self.history(session),
            Move::Rewind { session, turn_id } if self.has(session) => {
                let answer = match self.is_gone(session) {
                    true => ANY_ANSWER.to_string(),
                    // Refused while the session works, or for a turn it never had.
                    false => "{ $one_of: [{ result: { reverted: $number } }, { error: { code: -32602 } }] }".to_string(),
                };
                self.step(format!(
                    "when: {{ spec: \"1.1.0\", needs: [rewind], steps: [{{ request: {{ method: _lembas/session/rewind, params: {{ sessionId: \"${{{session}}}\", turnId: {turn_id} }}, answer: {answer}, rule: device.rewind.result }} }}] }}"
                ));
                if let Some(first) = self
                    .started
                    .iter()
                    .position(|s| s.session == *session && s.turn_id == Some(turn_id.as_str()))
                {
                    for one in self.started[first..]
                        .iter_mut()
                        .filter(|s| s.session == *session)
                    {
                        one.reverted = true;
                    }
                }
            }
            // Configure is for between prompts: the web UI holds the change until the session's
            // prompts are answered. Taken (answered with the model and effort in force) or
            // refused.
            Move::Configure { session } if self.has(session) => {
                let waiting: Vec<usize> = (0..self.started.len())
                    .filter(|at| {
                        self.started[*at].session == *session && self.started[*at].waiting()
                    })
                    .collect();
                for at in waiting {
                    self.await_prompt(at);
                }
                let answer = match self.is_gone(session) {
                    true => ANY_ANSWER,
                    false => {
                        "{ $one_of: [{ result: { model: $string, effort: $string } }, { error: $object }] }"
                    }
                };
                self.step_needing(
                    "configure",
                    &[format!(
                        "{{ request: {{ method: _lembas/configure, params: {{ sessionId: \"${{{session}}}\", effort: \"off\" }}, answer: {answer}, rule: device.configure.result }} }}"
                    )],
                );
            }
            Move::Wait { ms } => self.step(format!("wait: {ms}ms")),
            Move::DropLink => self.relink(Relink::Drop),
            Move::CloseLink { code } => self.relink(Relink::Close(*code)),
            Move::Restart => self.relink(Relink::Restart),
            // What names a session that is not there (shrinking dropped it).
            _ => {}
        }
    }

    /// A status request (to a device that lists `status`), its answer judged by the model of
    /// turns, and here by what the sequence did: a title given since is the title, and a
    /// session whose delete was answered does not exist, on this link or after it ended.
    fn status(&mut self, session: &'a str) {
        let answer = self.capture("status");
        let mut steps = vec![format!(
            "{{ request: {{ method: _lembas/session/status, params: {{ sessionId: \"${{{session}}}\" }}, answer: {ANY_ANSWER}, capture: {{ {answer}: $ }} }} }}"
        )];
        if let Some((_, title)) = self.titles.iter().find(|(s, _)| *s == session) {
            steps.push(format!(
                "{{ when: {{ needs: [title], steps: [{{ check: {{ that: \"${{{answer}}}\", matches: {{ result: {{ title: {} }} }}, rule: device.title.applies }} }}] }} }}",
                yaml_string(title)
            ));
        }
        if let Some(deleted) = self.deletes.iter().rev().find(|d| d.session == session) {
            let (cell, rule) = match deleted.relinked {
                true => ("protocol: 2, spec: \"1.1.0\", ", "device.delete.gone_later"),
                false => ("", "device.delete.gone"),
            };
            steps.push(format!(
                "{{ when: {{ {cell}needs: [delete], that: \"${{{}}}\", matches: {{ result: {{ deleted: $boolean }} }}, steps: [{{ check: {{ that: \"${{{answer}}}\", matches: {{ result: {{ exists: false }} }}, rule: {rule} }} }}] }} }}",
                deleted.answer
            ));
        }
        self.step_needing("status", &steps);
    }

    /// A history request (to a device that lists `sessions`): a session not gone gives its
    /// conversation, in which (on a device that lists `turns`) every prompt of it answered `end_turn` and not rewound since is a
    /// user message with its turn id.
    fn history(&mut self, session: &'a str) {
        let gone = self.is_gone(session);
        let answer = self.capture("history");
        let expected = match gone {
            true => ANY_ANSWER.to_string(),
            false => "{ result: { turns: $array } }".to_string(),
        };
        let mut steps = vec![format!(
            "{{ request: {{ method: _lembas/session/history, params: {{ sessionId: \"${{{session}}}\" }}, answer: {expected}, capture: {{ {answer}: $ }}, rule: device.history.shape }} }}"
        )];
        let finished: Vec<(String, &str)> = self
            .started
            .iter()
            .filter(|s| s.session == session && !s.reverted && !s.may_be_refused)
            .filter_map(|s| s.answer.clone().zip(s.turn_id))
            .collect();
        for (prompt_answer, turn_id) in finished.into_iter().filter(|_| !gone) {
            steps.push(format!(
                "{{ when: {{ needs: [turns], that: \"${{{prompt_answer}}}\", matches: {{ result: {{ stopReason: end_turn }} }}, steps: [{{ check: {{ that: \"${{{answer}}}\", matches: {{ result: {{ turns: {{ $contains: [{{ role: user, turnId: {turn_id} }}] }} }} }}, rule: device.history.turn_id }} }}] }} }}"
            ));
        }
        // History is what `sessions` promises (a terminal's sessions): the engine refuses it
        // to a device that did not list it.
        self.step_needing("sessions", &steps);
    }

    fn prompt(&mut self, label: String, session: &'a str, turn_id: Option<&'a str>, text: &'a str) {
        let meta = turn_id.map_or(String::new(), |turn| {
            format!(", _meta: {{ lembas: {{ turnId: {turn} }} }}")
        });
        self.step(format!(
            "start: {{ method: session/prompt, params: {{ sessionId: \"${{{session}}}\", prompt: [{{ type: text, text: {} }}]{meta} }}, as: {label}, timeout: 30s }}",
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
            answer: None,
            abandoned: false,
            reverted: false,
        });
    }

    /// The link ends (dropped, closed, or the device restarts): the device dials again and
    /// says hello, and every prompt still waiting is sent again with its turn id on the new
    /// link, as the web UI reattaches. After a restart a device without lasting sessions may
    /// have lost every one of them.
    fn relink(&mut self, how: Relink) {
        match how {
            Relink::Restart => {
                self.step("restart_peer: {}");
                self.step("expect_close: { timeout: 10s, rule: device.link.redial }");
                let all = self.sessions.clone();
                self.gone.extend(all);
                self.titles.clear();
                for one in &mut self.started {
                    one.may_be_refused = true;
                }
            }
            Relink::Drop => self.step("close: { drop: true }"),
            Relink::Close(code) => self.step(format!(
                "close: {{ code: {code}, reason: \"harness explore closes the link\" }}"
            )),
        }
        for deleted in &mut self.deletes {
            deleted.relinked = true;
        }
        self.step("expect_reconnect: { within: 15s, rule: device.link.redial }");
        self.step("expect: { method: _lembas/hello, rule: device.hello.first }");
        let waiting: Vec<usize> = (0..self.started.len())
            .filter(|i| self.started[*i].waiting())
            .collect();
        for at in waiting {
            self.started[at].abandoned = true;
            let one = &self.started[at];
            // Without a turn id the web UI cannot tell whether it ran: it is not sent again.
            let Some(turn_id) = one.turn_id else {
                continue;
            };
            let (session, text, refused) = (one.session, one.text, one.may_be_refused);
            let label = format!("{}r{}", one.label, self.started.len());
            self.prompt(label, session, Some(turn_id), text);
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
        let label = prompt.label.clone();
        let capture = format!("{label}_answer");
        let line = format!(
            "await: {{ request: {label}, answer: {answer}, capture: {{ {capture}: $ }}, rule: {rule} }}"
        );
        self.started[at].answer = Some(capture);
        self.step(line);
    }
}

/// How a link ends before the device dials again.
#[derive(Debug, Clone, Copy)]
enum Relink {
    Drop,
    Close(u16),
    Restart,
}

/// An answer of either kind: what the spec lets a device answer either way (a status, a
/// delete, a prompt in a session that may be gone); what it must not do is leave it unanswered.
const ANY_ANSWER: &str = "{ $one_of: [{ result: $any }, { error: $object }] }";
