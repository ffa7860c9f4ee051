//! What one link's instance has asked and what the device answered it, for the instance's rules
//! that hang on it: a configure goes only between a session's prompts (spec,
//! `_lembas/configure`), so one that comes while a prompt of its session waits for its answer is
//! a finding; and set_mode asks for a mode the session's session/new answer offered (spec,
//! `session/set_mode`).

use std::collections::HashMap;

use harness::finding::Finding;
use harness::lembas::methods;
use harness::rules::ids;
use serde_json::Value;

/// The prompts one link's instance sent, by request id, with their sessions.
#[derive(Debug, Clone, Default)]
pub struct LinkWatch {
    /// Prompts seen on the link and not yet found answered: (request id, session).
    prompts: Vec<(Value, String)>,
    /// session/new requests not yet answered, by request id.
    opening: Vec<Value>,
    /// The sessions opened on the link, with the ids of the modes each answer offered.
    modes: HashMap<String, Vec<String>>,
}

impl LinkWatch {
    /// Checks a request of the instance's and learns from it. `waiting` says whether a request
    /// of the instance's (by id) still waits for the device's answer.
    pub fn request(
        &mut self,
        method: &str,
        id: &Value,
        params: &Value,
        waiting: impl Fn(&Value) -> bool,
    ) -> Vec<Finding> {
        // Answered prompts are forgotten first, so the list stays as long as the turns in flight.
        self.prompts.retain(|(prompt, _)| waiting(prompt));
        let session = params.get("sessionId").and_then(Value::as_str);
        match (method, session) {
            (methods::SESSION_PROMPT, Some(session)) => {
                self.prompts.push((id.clone(), session.to_string()));
                Vec::new()
            }
            (methods::SESSION_NEW, _) => {
                self.opening.push(id.clone());
                Vec::new()
            }
            (methods::SESSION_SET_MODE, _) => self.set_mode(params).into_iter().collect(),
            (methods::LEMBAS_CONFIGURE, Some(session)) => self
                .prompts
                .iter()
                .find(|(_, of)| of == session)
                .map(|(prompt, _)| {
                    Finding::new(
                        ids::INSTANCE_CONFIGURE_BETWEEN,
                        format!(
                            "`_lembas/configure` for session `{session}` came while its session/prompt (request {prompt}) still waited for its answer"
                        ),
                    )
                    .with_detail(format!("received: {params}"))
                })
                .into_iter()
                .collect(),
            _ => Vec::new(),
        }
    }

    /// Learns from a message the device sent: the modes a session/new answer offered. Gives
    /// the session such an answer gave the client.
    pub fn sent(&mut self, message: &Value) -> Option<String> {
        let id = message.get("id")?;
        let at = self.opening.iter().position(|o| o == id)?;
        self.opening.swap_remove(at);
        let result = message.get("result")?;
        let session = result.get("sessionId").and_then(Value::as_str)?;
        let offered = harness::lembas::answers::offered_modes(result);
        self.modes.insert(session.to_string(), offered);
        Some(session.to_string())
    }

    /// Checks a set_mode: a session and a mode id, as strings, the mode one the session's
    /// session/new answer offered (when that answer went on this link).
    fn set_mode(&self, params: &Value) -> Option<Finding> {
        let session = params.get("sessionId").and_then(Value::as_str);
        let mode = params.get("modeId").and_then(Value::as_str);
        let why = match (session, mode) {
            (Some(session), Some(mode)) => {
                let offered = self.modes.get(session)?;
                if offered.iter().any(|m| m == mode) {
                    return None;
                }
                format!(
                    "asks for mode `{mode}`, which session `{session}` was never offered (its session/new answer offered {})",
                    offered.join(", ")
                )
            }
            _ => "does not name its session and mode as strings".to_string(),
        };
        Some(
            Finding::new(
                ids::INSTANCE_SET_MODE_KNOWN,
                format!("`session/set_mode` {why}"),
            )
            .with_detail(format!("received: {params}")),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::collections::HashSet;

    #[test]
    fn a_configure_while_its_sessions_prompt_waits_is_found() {
        let mut watch = LinkWatch::default();
        let mut waiting: HashSet<String> = HashSet::new();
        let ask = |watch: &mut LinkWatch, waiting: &HashSet<String>, method, id: u64, params| {
            watch
                .request(method, &json!(id), &params, |id| {
                    waiting.contains(&id.to_string())
                })
                .into_iter()
                .map(|f| f.rule)
                .collect::<Vec<_>>()
        };
        waiting.insert("1".into());
        let prompt = json!({ "sessionId": "ses_a", "prompt": [] });
        assert!(ask(&mut watch, &waiting, methods::SESSION_PROMPT, 1, prompt).is_empty());
        // Another session's configure is no business of this prompt.
        let other = json!({ "sessionId": "ses_b", "effort": "off" });
        assert!(ask(&mut watch, &waiting, methods::LEMBAS_CONFIGURE, 2, other).is_empty());
        let same = json!({ "sessionId": "ses_a", "effort": "off" });
        assert_eq!(
            ask(
                &mut watch,
                &waiting,
                methods::LEMBAS_CONFIGURE,
                3,
                same.clone()
            ),
            [ids::INSTANCE_CONFIGURE_BETWEEN]
        );
        // Once the prompt is answered, the session is between prompts.
        waiting.clear();
        assert!(ask(&mut watch, &waiting, methods::LEMBAS_CONFIGURE, 4, same).is_empty());
    }

    #[test]
    fn set_mode_asks_for_a_mode_the_session_was_offered() {
        let mut watch = LinkWatch::default();
        let ask = |watch: &mut LinkWatch, id: u64, method, params: Value| {
            watch
                .request(method, &json!(id), &params, |_| false)
                .into_iter()
                .map(|f| f.rule)
                .collect::<Vec<_>>()
        };
        assert!(ask(&mut watch, 1, methods::SESSION_NEW, json!({ "cwd": "/r" })).is_empty());
        watch.sent(&json!({ "jsonrpc": "2.0", "id": 1, "result": {
            "sessionId": "ses_a",
            "modes": { "currentModeId": "edit", "availableModes": [{ "id": "plan" }, { "id": "edit" }] },
        }}));
        let switch = |mode: Value| json!({ "sessionId": "ses_a", "modeId": mode });
        assert!(
            ask(
                &mut watch,
                2,
                methods::SESSION_SET_MODE,
                switch(json!("plan"))
            )
            .is_empty()
        );
        assert_eq!(
            ask(
                &mut watch,
                3,
                methods::SESSION_SET_MODE,
                switch(json!("auto"))
            ),
            [ids::INSTANCE_SET_MODE_KNOWN]
        );
        assert_eq!(
            ask(&mut watch, 4, methods::SESSION_SET_MODE, switch(json!(2))),
            [ids::INSTANCE_SET_MODE_KNOWN]
        );
        // A session opened elsewhere offered its modes there: not judged on them here.
        let elsewhere = json!({ "sessionId": "ses_old", "modeId": "auto" });
        assert!(ask(&mut watch, 5, methods::SESSION_SET_MODE, elsewhere).is_empty());
    }
}
