//! What one link's instance has asked and is still waiting for, for the instance's rules that
//! hang on it: a configure goes only between a session's prompts (spec, `_lembas/configure`),
//! so one that comes while a prompt of its session waits for its answer is a finding.

use harness::finding::Finding;
use harness::lembas::methods;
use harness::rules::ids;
use serde_json::Value;

/// The prompts one link's instance sent, by request id, with their sessions.
#[derive(Debug, Clone, Default)]
pub struct LinkWatch {
    /// Prompts seen on the link and not yet found answered: (request id, session).
    prompts: Vec<(Value, String)>,
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
}
