//! The device's modes as one link shows them: hello's `max_mode`, and for each session opened by
//! session/new on the link, the modes its answer offered. Checks every session/new answer
//! (spec, session/new: the mode lowered to `max_mode`) and every mode the device reports of such
//! a session (`current_mode_update`, the `mode` event). A terminal's shared session is left out:
//! the terminal bounds its mode, not the remote limits.

use std::collections::HashMap;

use harness::finding::Finding;
use harness::lembas::methods;
use harness::rules::ids;
use serde_json::Value;

/// The modes the spec ranks, least to most permissive (implied by `_lembas/plan`: "where even
/// manual is beyond it"). Any other mode id is not ranked.
const RANKED: [&str; 3] = ["plan", "manual", "edit"];

/// A mode's rank, when it is one of [`RANKED`].
fn rank(mode: &str) -> Option<usize> {
    RANKED.iter().position(|m| *m == mode)
}

/// What one link said of modes.
#[derive(Debug, Default)]
pub struct ModeWatch {
    /// Hello's `limits.max_mode`.
    max_mode: Option<String>,
    /// The sessions session/new opened on this link, with the ids of the modes it offered.
    sessions: HashMap<String, Vec<String>>,
}

impl ModeWatch {
    /// Learns `max_mode` from the device's hello.
    pub fn hello(&mut self, params: &Value) {
        self.max_mode = params
            .pointer("/limits/max_mode")
            .and_then(Value::as_str)
            .map(String::from);
    }

    /// Whether `mode` ranks above `max_mode` (false when either is not ranked).
    fn above_max(&self, mode: &str) -> bool {
        match (rank(mode), self.max_mode.as_deref().and_then(rank)) {
            (Some(mode), Some(max)) => mode > max,
            _ => false,
        }
    }

    /// Checks a session/new answer's mode against what was asked and the limits, and learns the
    /// session's modes.
    pub fn session_new(&mut self, request_params: &Value, result: &Value) -> Vec<Finding> {
        let offered = harness::lembas::answers::offered_modes(result);
        if let Some(id) = result.get("sessionId").and_then(Value::as_str) {
            self.sessions.insert(id.to_string(), offered.clone());
        }
        // No `modes` at all is the result's shape, judged under its own rule.
        let Some(current) = result.pointer("/modes/currentModeId") else {
            return Vec::new();
        };
        let asked = request_params
            .pointer("/_meta/mode")
            .and_then(Value::as_str);
        let said = result.pointer("/_meta/lembas/mode");
        let mut faults = Vec::new();
        match current.as_str() {
            None => faults.push(format!("`modes.currentModeId` is {current}, not a mode id")),
            Some(current) => {
                if !offered.iter().any(|m| m == current) {
                    faults.push(format!(
                        "`modes.currentModeId` `{current}` is not one of `availableModes` ({})",
                        offered.join(", ")
                    ));
                }
                if let Some(said) = said.filter(|s| s.as_str() != Some(current)) {
                    faults.push(format!(
                        "`_meta.lembas.mode` says {said} where `modes.currentModeId` says `{current}`"
                    ));
                }
                if let Some(max) = self.max_mode.as_deref().filter(|_| self.above_max(current)) {
                    faults.push(format!(
                        "the session opened in `{current}`, above the device's `max_mode` `{max}`"
                    ));
                }
                let lowered = asked
                    .and_then(rank)
                    .zip(self.max_mode.as_deref().and_then(rank))
                    .map(|(asked, max)| RANKED[asked.min(max)]);
                if let (Some(asked), Some(lowered)) = (asked, lowered)
                    && lowered != current
                {
                    faults.push(format!(
                        "`{asked}` was asked, which `max_mode` makes `{lowered}`, but the session opened in `{current}`"
                    ));
                }
            }
        }
        if faults.is_empty() {
            return Vec::new();
        }
        vec![
            Finding::new(
                ids::DEVICE_SESSION_NEW_MODE,
                format!(
                    "the session/new answer's mode is wrong: {}",
                    faults.join("; ")
                ),
            )
            .with_detail(format!(
                "max_mode: {:?}; asked: {request_params}\nreceived: {result}",
                self.max_mode
            )),
        ]
    }

    /// Checks a mode the device reports of a session opened on this link.
    pub fn incoming(&self, method: &str, params: &Value) -> Vec<Finding> {
        let Some(offered) = params
            .get("sessionId")
            .and_then(Value::as_str)
            .and_then(|id| self.sessions.get(id))
        else {
            return Vec::new();
        };
        let reported = match method {
            methods::SESSION_UPDATE
                if params
                    .pointer("/update/sessionUpdate")
                    .and_then(Value::as_str)
                    == Some("current_mode_update") =>
            {
                params.pointer("/update/currentModeId")
            }
            methods::LEMBAS_EVENT
                if params.pointer("/event/type").and_then(Value::as_str) == Some("mode") =>
            {
                params.pointer("/event/mode")
            }
            _ => return Vec::new(),
        };
        let what = if method == methods::SESSION_UPDATE {
            "a `current_mode_update`"
        } else {
            "a `mode` event"
        };
        let mut found = Vec::new();
        match reported.and_then(Value::as_str) {
            Some(mode) if self.above_max(mode) => found.push(
                Finding::new(
                    ids::DEVICE_SET_MODE_LOWERED,
                    format!(
                        "{what} puts the session in `{mode}`, above the device's `max_mode` `{}`",
                        self.max_mode.as_deref().unwrap_or("?")
                    ),
                )
                .with_detail(format!("received: {params}")),
            ),
            Some(mode) if method == methods::SESSION_UPDATE && !offered.iter().any(|m| m == mode) => {
                found.push(
                    Finding::new(
                        ids::DEVICE_MODE_UPDATE,
                        format!(
                            "{what} names `{mode}`, which is not one of the session's `availableModes` ({})",
                            offered.join(", ")
                        ),
                    )
                    .with_detail(format!("received: {params}")),
                )
            }
            Some(_) => {}
            None => found.push(
                Finding::new(
                    if method == methods::SESSION_UPDATE {
                        ids::DEVICE_MODE_UPDATE
                    } else {
                        ids::DEVICE_SET_MODE_LOWERED
                    },
                    format!("{what} names no mode"),
                )
                .with_detail(format!("received: {params}")),
            ),
        }
        found
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use harness::finding::rules_of;
    use serde_json::json;

    fn limited_to(max: &str) -> ModeWatch {
        let mut watch = ModeWatch::default();
        watch.hello(&json!({ "limits": { "roots": [], "max_mode": max, "require_trust": true } }));
        watch
    }

    fn opened(id: &str, mode: &str) -> Value {
        json!({
            "sessionId": id,
            "modes": { "currentModeId": mode, "availableModes": [{ "id": "plan" }, { "id": "manual" }, { "id": "edit" }] },
            "_meta": { "lembas": { "model": "m", "mode": mode, "effort": "off" } },
        })
    }

    #[test]
    fn a_session_opens_in_the_mode_asked_lowered_to_max_mode() {
        let mut watch = limited_to("manual");
        let asked = |mode: &str| json!({ "cwd": "/r", "_meta": { "mode": mode } });
        assert!(
            watch
                .session_new(&asked("edit"), &opened("a", "manual"))
                .is_empty()
        );
        assert!(
            watch
                .session_new(&asked("plan"), &opened("b", "plan"))
                .is_empty()
        );
        assert!(
            watch
                .session_new(&json!({ "cwd": "/r" }), &opened("c", "plan"))
                .is_empty()
        );
        assert_eq!(
            rules_of(&watch.session_new(&asked("edit"), &opened("d", "edit"))),
            [ids::DEVICE_SESSION_NEW_MODE]
        );
        assert_eq!(
            rules_of(&watch.session_new(&asked("plan"), &opened("e", "manual"))),
            [ids::DEVICE_SESSION_NEW_MODE],
            "a mode at or below max_mode is kept"
        );
        let mut disagreeing = opened("f", "manual");
        disagreeing["_meta"]["lembas"]["mode"] = json!("plan");
        assert_eq!(
            rules_of(&watch.session_new(&json!({}), &disagreeing)),
            [ids::DEVICE_SESSION_NEW_MODE]
        );
        let mut unoffered = opened("g", "manual");
        unoffered["modes"]["availableModes"] = json!([{ "id": "plan" }]);
        let found = watch.session_new(&json!({}), &unoffered);
        assert_eq!(rules_of(&found), [ids::DEVICE_SESSION_NEW_MODE]);
        assert!(
            found[0]
                .detail
                .as_deref()
                .is_some_and(|d| d.contains("received:")),
            "a finding shows what came"
        );
        // No `modes` is the result's shape, another rule's.
        assert!(
            watch
                .session_new(&json!({}), &json!({ "sessionId": "h" }))
                .is_empty()
        );
    }

    #[test]
    fn a_reported_mode_stays_within_max_mode_and_the_offered_modes() {
        let mut watch = limited_to("manual");
        watch.session_new(&json!({}), &opened("a", "manual"));
        let update = |mode: Value| json!({ "sessionId": "a", "update": { "sessionUpdate": "current_mode_update", "currentModeId": mode } });
        let event =
            |mode: &str| json!({ "sessionId": "a", "event": { "type": "mode", "mode": mode } });
        assert!(
            watch
                .incoming(methods::SESSION_UPDATE, &update(json!("plan")))
                .is_empty()
        );
        assert!(
            watch
                .incoming(methods::LEMBAS_EVENT, &event("manual"))
                .is_empty()
        );
        assert_eq!(
            rules_of(&watch.incoming(methods::SESSION_UPDATE, &update(json!("edit")))),
            [ids::DEVICE_SET_MODE_LOWERED]
        );
        assert_eq!(
            rules_of(&watch.incoming(methods::LEMBAS_EVENT, &event("edit"))),
            [ids::DEVICE_SET_MODE_LOWERED]
        );
        assert_eq!(
            rules_of(&watch.incoming(methods::SESSION_UPDATE, &update(json!("auto")))),
            [ids::DEVICE_MODE_UPDATE]
        );
        assert_eq!(
            rules_of(&watch.incoming(methods::SESSION_UPDATE, &update(Value::Null))),
            [ids::DEVICE_MODE_UPDATE]
        );
        // A session this link did not open (a terminal's) is not judged here.
        let shared = json!({ "sessionId": "t", "update": { "sessionUpdate": "current_mode_update", "currentModeId": "edit" } });
        assert!(watch.incoming(methods::SESSION_UPDATE, &shared).is_empty());
    }
}
