//! What the device gave its client and what the client asked of it, across every link of the
//! device's life, for the instance's rules that hang on it: a method that acts on a session
//! names one the device gave the client (spec, the `_lembas/*` methods and standard ACP as used
//! here). The checks of one method, on what is remembered here, live in its room: a rewind
//! names a turn the client itself sent in that session ([`session_rewind`]), and
//! `session/cancel` is a notification ([`session_cancel`]).

use std::collections::{HashMap, HashSet};

use harness::finding::Finding;
use harness::lembas::methods;
use harness::rules::ids;
use serde_json::Value;

use crate::methods::{session_cancel, session_rewind};

/// The methods that act on a session, and so must name one the client was given. Status,
/// history and delete exist to ask about sessions that may be gone, and are not judged.
const ACTING: [&str; 8] = [
    methods::SESSION_PROMPT,
    methods::SESSION_CANCEL,
    methods::SESSION_SET_MODE,
    methods::LEMBAS_CONFIGURE,
    methods::LEMBAS_STEER,
    methods::LEMBAS_SESSION_REWIND,
    methods::LEMBAS_SESSION_COMPACT,
    methods::LEMBAS_SESSION_TITLE,
];

/// The device's memory of its client, for the whole run.
#[derive(Debug, Default)]
pub struct ClientWatch {
    /// Sessions given to the client in this life: made by session/new, or announced.
    given: HashSet<String>,
    /// For each session made by session/new in this life (so every prompt of it was seen
    /// here), the turn ids the client sent in its prompts.
    prompted: HashMap<String, HashSet<String>>,
}

impl ClientWatch {
    /// A session/new answer gave the client `session`.
    pub fn opened(&mut self, session: &str) {
        self.given.insert(session.to_string());
        self.prompted.entry(session.to_string()).or_default();
    }

    /// The device announced `session` (a terminal shares it).
    pub fn announced(&mut self, session: &str) {
        self.given.insert(session.to_string());
    }

    /// Judges a request (`request: true`) or notification of the client's, and learns from it.
    /// `given_before` says whether the device's store marks the session as given to a client in
    /// an earlier life.
    pub fn judge(
        &mut self,
        method: &str,
        params: &Value,
        request: bool,
        given_before: impl Fn(&str) -> bool,
    ) -> Vec<Finding> {
        let mut found = Vec::new();
        if method == methods::SESSION_CANCEL {
            found.extend(session_cancel::came_as_request(params, request));
        }
        let Some(session) = params.get("sessionId").and_then(Value::as_str) else {
            return found;
        };
        if ACTING.contains(&method) && !self.given.contains(session) && !given_before(session) {
            found.push(
                Finding::new(
                    ids::INSTANCE_SESSION_KNOWN,
                    format!(
                        "`{method}` names session `{session}`, which this device never gave the client (by session/new, an announce, or on an earlier link)"
                    ),
                )
                .with_detail(format!("params: {params}")),
            );
        }
        let turn = params
            .pointer("/_meta/lembas/turnId")
            .or_else(|| params.get("turnId"))
            .and_then(Value::as_str);
        match (method, turn) {
            (methods::SESSION_PROMPT, Some(turn)) => {
                if let Some(turns) = self.prompted.get_mut(session) {
                    turns.insert(turn.to_string());
                }
            }
            (methods::LEMBAS_SESSION_REWIND, Some(turn)) => {
                if let Some(turns) = self.prompted.get(session) {
                    found.extend(session_rewind::unknown_turn(session, turn, turns, params));
                }
            }
            _ => {}
        }
        found
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rules(found: Vec<Finding>) -> Vec<String> {
        found.into_iter().map(|f| f.rule).collect()
    }

    #[test]
    fn acting_on_a_session_never_given_is_found_and_asking_about_one_is_not() {
        let mut watch = ClientWatch::default();
        let never = |_: &str| false;
        let prompt = json!({ "sessionId": "ses_x", "prompt": [] });
        assert_eq!(
            rules(watch.judge(methods::SESSION_PROMPT, &prompt, true, never)),
            [ids::INSTANCE_SESSION_KNOWN]
        );
        let status = json!({ "sessionId": "ses_x" });
        assert!(
            watch
                .judge(methods::LEMBAS_SESSION_STATUS, &status, true, never)
                .is_empty()
        );
        // Given in an earlier life (the store's mark), or now.
        assert!(
            watch
                .judge(methods::SESSION_PROMPT, &prompt, true, |_| true)
                .is_empty()
        );
        watch.announced("ses_x");
        assert!(
            watch
                .judge(methods::SESSION_PROMPT, &prompt, true, never)
                .is_empty()
        );
    }

    #[test]
    fn a_rewind_names_a_turn_the_client_sent_there() {
        let mut watch = ClientWatch::default();
        let never = |_: &str| false;
        watch.opened("ses_a");
        let prompt = json!({ "sessionId": "ses_a", "prompt": [], "_meta": { "lembas": { "turnId": "t1" } } });
        assert!(
            watch
                .judge(methods::SESSION_PROMPT, &prompt, true, never)
                .is_empty()
        );
        let rewind = |turn: &str| json!({ "sessionId": "ses_a", "turnId": turn });
        assert!(
            watch
                .judge(methods::LEMBAS_SESSION_REWIND, &rewind("t1"), true, never)
                .is_empty()
        );
        assert_eq!(
            rules(watch.judge(methods::LEMBAS_SESSION_REWIND, &rewind("t9"), true, never)),
            [ids::INSTANCE_REWIND_KNOWN_TURN]
        );
    }

    #[test]
    fn a_cancel_request_is_found() {
        let mut watch = ClientWatch::default();
        watch.opened("ses_a");
        let cancel = json!({ "sessionId": "ses_a" });
        assert!(
            watch
                .judge(methods::SESSION_CANCEL, &cancel, false, |_| false)
                .is_empty()
        );
        assert_eq!(
            rules(watch.judge(methods::SESSION_CANCEL, &cancel, true, |_| false)),
            [ids::INSTANCE_CANCEL_IS_NOTIFICATION]
        );
    }
}
