//! Whether a scenario applies to the device under test: what its steps need (by the spec's
//! capability table) and what the scenario relies on, against what the device said in its
//! hello and listed in `initialize`. A device that never claimed what a step needs is not
//! judged on it: the run ends not applicable, naming the capability.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use harness::engine::{Applies, Hub, Intent};
use harness::lembas::capabilities::{self, Need};
use harness::scenario::Scenario;
use serde_json::Value;

use crate::chats::{Chats, LinkFacts};
use crate::http::HTTP_CHAT;
use crate::settings::InstanceSettings;
use harness::lembas::setup::{DeviceSetup, RootsNeed};

/// What a run relies on beyond its steps' messages.
#[derive(Debug, Clone, Default)]
pub struct Standing {
    /// Capabilities the scenario needs (`needs:`, and `terminal` for `peer.terminal`).
    pub capabilities: Vec<String>,
    /// Whether the device must have a root, or none.
    pub roots: RootsNeed,
    /// The scenario scripts the instance's model (`instance.http.scripts`): it drives the
    /// device's turns through that model, so it relies on a device that asks it.
    pub drives_the_model: bool,
    /// Capabilities whose fields the scenario sends on purpose to a device that may not list
    /// them (`sends_unlisted`).
    pub sends_unlisted: Vec<String>,
}

impl Standing {
    /// What `scenario` relies on (with its settings and its device's set-up read); nothing
    /// without one (a simulated instance judges nothing).
    pub fn of(
        scenario: Option<&Scenario>,
        settings: &InstanceSettings,
        setup: &DeviceSetup,
    ) -> Standing {
        let Some(scenario) = scenario else {
            return Standing {
                capabilities: Vec::new(),
                roots: RootsNeed::Any,
                drives_the_model: false,
                sends_unlisted: Vec::new(),
            };
        };
        let mut capabilities = scenario.needs.clone();
        if setup.terminal == Some(true) && !capabilities.iter().any(|c| c == "terminal") {
            capabilities.push("terminal".into());
        }
        let drives_the_model = settings
            .http
            .as_ref()
            .is_some_and(|http| !http.scripts.is_empty());
        Standing {
            capabilities,
            roots: setup.roots,
            drives_the_model,
            sends_unlisted: scenario.sends_unlisted.clone(),
        }
    }
}

/// What the device's requests to the instance's model showed of it.
#[derive(Debug, Default)]
pub struct ModelUse {
    /// Whether the device ever asked the instance's model (an `http/chat` came).
    asked: AtomicBool,
    /// The first tool the model (a scenario's script) called that the request did not offer
    /// it, with what the request offered: the device does not have that tool.
    unoffered: Mutex<Option<(String, Option<Vec<String>>)>>,
}

impl ModelUse {
    /// Learns from one `http/chat` (its params, as steps see them).
    pub fn saw_chat(&self, params: &Value) {
        self.asked.store(true, Ordering::Relaxed);
        let offered: Option<Vec<String>> = params.get("tools").and_then(Value::as_array).map(|t| {
            t.iter()
                .filter_map(Value::as_str)
                .map(String::from)
                .collect()
        });
        let called = params.get("called").and_then(Value::as_array);
        let missing = called
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .find(|name| {
                !offered
                    .as_ref()
                    .is_some_and(|o| o.iter().any(|t| t == name))
            });
        if let (Some(name), Ok(mut unoffered)) = (missing, self.unoffered.lock())
            && unoffered.is_none()
        {
            *unoffered = Some((name.to_string(), offered));
        }
    }

    fn asked(&self) -> bool {
        self.asked.load(Ordering::Relaxed)
    }

    /// Why a step waited in vain for what a tool the device lacks would have made it do.
    fn lacks_a_tool(&self) -> Option<String> {
        let unoffered = self.unoffered.lock().ok()?;
        let (name, offered) = unoffered.as_ref()?;
        let offered = match offered.as_deref() {
            None | Some([]) => "no tools".to_string(),
            Some(list) => format!("only {}", list.join(", ")),
        };
        Some(format!(
            "the model asked for the tool `{name}`, which the device does not have (its request to the model offered {offered}), and the rest of this scenario relies on that tool: run it against a device that offers it"
        ))
    }
}

/// Judges intents against the device the instance knows.
#[derive(Debug)]
pub struct Applicability {
    standing: Standing,
    chats: Arc<Chats>,
    /// What the device's model requests showed.
    model: Arc<ModelUse>,
    /// Whether the device answered a prompt: with no `http/chat`, it ran that turn on a model
    /// of its own.
    turn_answered: AtomicBool,
}

impl Applicability {
    /// A judge for a run relying on `standing`.
    pub fn new(standing: Standing, chats: Arc<Chats>, model: Arc<ModelUse>) -> Self {
        Self {
            standing,
            chats,
            model,
            turn_answered: AtomicBool::new(false),
        }
    }

    /// The device answered a prompt.
    pub fn turn_answered(&self) {
        self.turn_answered.store(true, Ordering::Relaxed);
    }

    /// The answer for one intent. What is about to be sent is judged by the link it goes on
    /// (the newest open one, ready once its initialize was answered); what is awaited by the
    /// newest link that said hello, open or not (between two links the device is the same).
    pub fn applies(&self, hub: &Arc<Hub>, intent: Intent<'_>) -> Applies {
        let latest = self.chats.latest();
        let sending = || hub.current().and_then(|peer| self.chats.link(peer.link()));
        match intent {
            Intent::Step => self.standing(latest.as_ref()),
            Intent::Send { method, params } => {
                let mut needs = capabilities::to_send(method, params);
                needs.retain(|n| {
                    !self
                        .standing
                        .sends_unlisted
                        .iter()
                        .any(|c| c == n.capability)
                });
                listed(sending().as_ref(), &needs)
            }
            Intent::Answer { method, result } => {
                listed(sending().as_ref(), &capabilities::in_result(method, result))
            }
            Intent::Await { pattern } => {
                listed(latest.as_ref(), &capabilities::to_receive(pattern))
            }
            Intent::Claims { needs } => {
                let Some(facts) = latest.as_ref().filter(|f| f.ready) else {
                    return Applies::NotYet;
                };
                match needs.iter().find(|n| !facts.capabilities.contains(n)) {
                    Some(missing) => Applies::No(format!("the device did not list `{missing}`")),
                    None => Applies::Yes,
                }
            }
            Intent::Missed { pattern } => self.missed(pattern),
        }
    }

    fn standing(&self, facts: Option<&LinkFacts>) -> Applies {
        let Some(facts) = facts.filter(|f| f.hello) else {
            return Applies::NotYet;
        };
        // A device that must have no roots is set-up (`no_roots`), not judged here: that its
        // hello says so is the very check.
        if self.standing.roots == RootsNeed::One && facts.roots.is_empty() {
            return Applies::No(
                "the device has no remote root (its hello says `roots: []`), and this scenario opens sessions in one: give it a trusted root".into(),
            );
        }
        if !facts.ready {
            return Applies::NotYet;
        }
        match self
            .standing
            .capabilities
            .iter()
            .find(|c| !facts.capabilities.contains(c))
        {
            Some(missing) => Applies::No(format!(
                "the device did not list `{missing}`, which this scenario relies on"
            )),
            None => Applies::Yes,
        }
    }

    /// A message that never came from a device that never asked the instance's model at all:
    /// an `http/chat` it was never going to send (it talks to a model of its own), or, once it
    /// has shown it runs its turns on a model of its own (it answered a prompt with no model
    /// request), anything a scenario that scripts the instance's model meant that model to make
    /// it do. A device that never got so far as a turn is judged as usual.
    ///
    /// Likewise, once the model called a tool the device does not offer it (a scripted answer
    /// naming a tool the request did not list), what the scenario meant that tool to make the
    /// device do.
    fn missed(&self, pattern: &Value) -> Applies {
        if let Some(why) = self.model.lacks_a_tool() {
            return Applies::No(why);
        }
        if self.model.asked() {
            return Applies::Yes;
        }
        let method = pattern.get("method").and_then(Value::as_str);
        if method == Some(HTTP_CHAT) {
            return Applies::No(format!(
                "the device never asked the instance's model (no `{HTTP_CHAT}` came in the whole run), and this step judges what it asks: run it against a device whose model is the instance's"
            ));
        }
        if self.standing.drives_the_model && self.turn_answered.load(Ordering::Relaxed) {
            return Applies::No(format!(
                "the device never asked the instance's model (no `{HTTP_CHAT}` came in the whole run), and this scenario drives the device's turns through that model's scripted answers: run it against a device whose model is the instance's"
            ));
        }
        Applies::Yes
    }
}

/// Whether the device listed every capability of `needs`.
fn listed(facts: Option<&LinkFacts>, needs: &[Need]) -> Applies {
    if needs.is_empty() {
        return Applies::Yes;
    }
    let Some(facts) = facts.filter(|f| f.ready) else {
        return Applies::NotYet;
    };
    match capabilities::first_unlisted(needs, &facts.capabilities) {
        Some(need) => Applies::No(format!(
            "the device did not list `{}` (needed by {})",
            need.capability, need.what
        )),
        None => Applies::Yes,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_tool_the_model_called_that_the_request_did_not_offer_is_one_the_device_lacks() {
        let offered = ModelUse::default();
        offered.saw_chat(&json!({ "tools": ["bash", "plan_write"], "called": ["bash"] }));
        assert!(offered.asked());
        assert_eq!(offered.lacks_a_tool(), None);

        let none = ModelUse::default();
        none.saw_chat(&json!({ "tools": null, "called": [] }));
        assert_eq!(none.lacks_a_tool(), None, "no call, nothing lacking");
        none.saw_chat(&json!({ "tools": null, "called": ["bash"] }));
        let why = none.lacks_a_tool().expect("bash was never offered");
        assert!(
            why.contains("`bash`") && why.contains("offered no tools"),
            "{why}"
        );

        let other = ModelUse::default();
        other.saw_chat(&json!({ "tools": ["read"], "called": ["plan_write"] }));
        other.saw_chat(&json!({ "tools": ["read"], "called": ["bash"] }));
        let why = other.lacks_a_tool().expect("plan_write was not offered");
        assert!(
            why.contains("`plan_write`") && why.contains("only read"),
            "the first is kept: {why}"
        );
    }
}
