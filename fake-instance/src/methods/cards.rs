//! How LLeMbas answers a device's cards, whichever card it is: by default an approval allowed
//! once, each question answered with its recommended option (else the first), a plan approved
//! in `edit` mode; a scenario's card policy (`instance.cards`) or its handlers answer otherwise.
//! What every card shares lives here: the person's delay, the client's timeout, patient cards,
//! cards the device takes down (settled) and the misbehaviours about those; what each card
//! answers is its own room's.

use std::sync::Arc;
use std::time::Duration;

use harness::jsonrpc::{IncomingRequest, Peer};
use harness::lembas::methods;
use harness::rules::{Misbehaviours, ids};
use serde_json::{Value, json};

use crate::chats::Chats;
use crate::methods::{plan, question, request_permission};
use crate::settings::CardPolicy;

/// The methods that are cards.
pub(crate) const CARD_METHODS: [&str; 3] = [
    methods::SESSION_REQUEST_PERMISSION,
    methods::LEMBAS_QUESTION,
    methods::LEMBAS_PLAN,
];

/// The answer a policy gives a card; `None`: a method that is not one, or a card the policy
/// leaves unanswered (`ignore`).
pub(crate) fn answer_by(policy: &CardPolicy, method: &str, params: &Value) -> Option<Value> {
    match method {
        methods::SESSION_REQUEST_PERMISSION => {
            request_permission::by_policy(policy.permission, params)
        }
        methods::LEMBAS_QUESTION => question::by_policy(policy.question, params),
        methods::LEMBAS_PLAN => plan::by_policy(policy.plan),
        _ => None,
    }
}

/// What LLeMbas answers when it takes a card down unanswered (its own timeout).
pub(crate) fn dismissal(method: &str) -> Value {
    match method {
        methods::SESSION_REQUEST_PERMISSION => json!({ "outcome": { "outcome": "cancelled" } }),
        _ => json!({ "outcome": "dismissed" }),
    }
}

/// Whether a card says the person may answer it at the terminal (`_meta.lembas.patient`).
pub(crate) fn is_patient(params: &Value) -> bool {
    params
        .pointer("/_meta/lembas/patient")
        .and_then(Value::as_bool)
        == Some(true)
}

/// A card's toolCallId (an approval has it inside `toolCall`).
pub(crate) fn tool_call_id(method: &str, params: &Value) -> Option<String> {
    let at = if method == methods::SESSION_REQUEST_PERMISSION {
        "/toolCall/toolCallId"
    } else {
        "/toolCallId"
    };
    params.pointer(at).and_then(Value::as_str).map(String::from)
}

/// What the client gets wrong about cards on purpose; all off by default.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Faults {
    /// A patient card is timed out like any other (card.patient).
    pub impatient: bool,
    /// A patient card is dismissed at once, as by a client that takes none
    /// (card.patient/dismissed_at_once).
    pub dismisses_patient: bool,
    /// A question or a plan nobody answers is left up for ever (card.timeout_dismissed).
    pub never_dismissed: bool,
    /// A question or plan timed out is answered as if the person had chosen
    /// (card.timeout_dismissed/answered).
    pub answers_timed_out: bool,
    /// An approval is answered with an option it never offered (card.answer).
    pub unoffered_option: bool,
    /// A question is answered one answer short (card.answer/answers_short).
    pub answers_short: bool,
    /// A card taken down is answered all the same (card.settled).
    pub answers_settled: bool,
    /// A card is answered `cancelled` as soon as the device settles it
    /// (card.settled/cancelled_on_settle).
    pub cancels_settled: bool,
    /// Cards are keyed by session, so a settled card takes its session's others down with it
    /// (card.keyed).
    pub keyed_by_session: bool,
    /// A settled card makes the client cancel the session's other cards
    /// (card.keyed/others_cancelled).
    pub cancels_beside: bool,
}

impl Faults {
    /// The card faults among `misbehave`.
    pub(crate) fn of(misbehave: &Misbehaviours) -> Self {
        let way = |id, name| misbehave.breaks_way(id, name);
        Self {
            impatient: misbehave.breaks(ids::INSTANCE_CARD_PATIENT),
            dismisses_patient: way(ids::INSTANCE_CARD_PATIENT, "dismissed_at_once"),
            never_dismissed: misbehave.breaks(ids::INSTANCE_CARD_TIMEOUT_DISMISSED),
            answers_timed_out: way(ids::INSTANCE_CARD_TIMEOUT_DISMISSED, "answered"),
            unoffered_option: misbehave.breaks(ids::INSTANCE_CARD_ANSWER),
            answers_short: way(ids::INSTANCE_CARD_ANSWER, "answers_short"),
            answers_settled: misbehave.breaks(ids::INSTANCE_CARD_SETTLED),
            cancels_settled: way(ids::INSTANCE_CARD_SETTLED, "cancelled_on_settle"),
            keyed_by_session: misbehave.breaks(ids::INSTANCE_CARD_KEYED),
            cancels_beside: way(ids::INSTANCE_CARD_KEYED, "others_cancelled"),
        }
    }
}

/// Answers a card by the policy, as a person would: after the policy's delay, never for a card
/// taken down meanwhile (settled), and a card that is not patient dismissed when it has waited
/// the client's timeout. A patient card is never timed out.
pub(crate) fn answer(
    peer: &Arc<Peer>,
    request: &IncomingRequest,
    policy: &CardPolicy,
    chats: &Arc<Chats>,
    faults: &Faults,
) {
    let Some((answer, after)) = when(request, policy, faults) else {
        return;
    };
    let answer = misanswered(&request.method, answer, faults);
    let session = request.params.get("sessionId").and_then(Value::as_str);
    let of_session = |on: bool| on.then(|| session.map(String::from)).flatten();
    let delivery = Delivery {
        peer: peer.clone(),
        id: request.id.clone(),
        chats: chats.clone(),
        method: request.method.clone(),
        call: tool_call_id(&request.method, &request.params),
        answer,
        after,
        cancels_settled: faults.cancels_settled,
        cancels_beside: of_session(faults.cancels_beside),
        answers_settled: faults.answers_settled,
        by_session: of_session(faults.keyed_by_session),
    };
    tokio::spawn(delivery.run());
}

/// What the card gets and after how long; `None`: nothing, it stays up until it is settled.
fn when(
    request: &IncomingRequest,
    policy: &CardPolicy,
    faults: &Faults,
) -> Option<(Value, Duration)> {
    let (method, params) = (request.method.as_str(), &request.params);
    let delay = policy.delay.map(|d| d.0).unwrap_or_default();
    let timeout = policy
        .timeout
        .map(|d| d.0)
        .unwrap_or(Duration::from_secs(30));
    let patient = is_patient(params) && !faults.impatient;
    // Misbehaving: a question or a plan nobody answers is left up for ever.
    let never_dismissed = faults.never_dismissed && method != methods::SESSION_REQUEST_PERMISSION;
    match answer_by(policy, method, params) {
        // Misbehaving: a patient card is dismissed at once, as a client that takes none.
        _ if is_patient(params) && faults.dismisses_patient => {
            Some((dismissal(method), Duration::ZERO))
        }
        Some(answer) if patient || delay < timeout => Some((answer, delay)),
        // Nobody answers in time: LLeMbas takes the card down itself (misbehaving: it leaves
        // it up for ever).
        _ if !patient && !never_dismissed => Some((timed_out(method, params, faults), timeout)),
        // A patient card nobody answers stays up until it is settled.
        _ => None,
    }
}

/// What LLeMbas answers a card nobody answered in time. Misbehaving: a question or plan timed
/// out is answered as if the person had chosen (the first option of each question; the plan
/// approved).
fn timed_out(method: &str, params: &Value, faults: &Faults) -> Value {
    match method {
        methods::LEMBAS_QUESTION if faults.answers_timed_out => question::as_if_chosen(params),
        methods::LEMBAS_PLAN if faults.answers_timed_out => plan::as_if_approved(),
        _ => dismissal(method),
    }
}

/// The answer as a misbehaving client changes it.
fn misanswered(method: &str, answer: Value, faults: &Faults) -> Value {
    let mut answer = match method {
        methods::SESSION_REQUEST_PERMISSION if faults.unoffered_option => {
            request_permission::unoffered_option()
        }
        _ => answer,
    };
    if method == methods::LEMBAS_QUESTION && faults.answers_short {
        question::drop_one(&mut answer);
    }
    answer
}

/// A card's answer on its way: it waits its time, watching for the card to be settled.
struct Delivery {
    peer: Arc<Peer>,
    id: Value,
    chats: Arc<Chats>,
    method: String,
    /// The card's toolCallId, by which the device settles it.
    call: Option<String>,
    answer: Value,
    after: Duration,
    cancels_settled: bool,
    /// The session whose settled cards make this one cancelled (misbehaving).
    cancels_beside: Option<String>,
    answers_settled: bool,
    /// The session whose settled cards take this one down (misbehaving).
    by_session: Option<String>,
}

impl Delivery {
    async fn run(self) {
        let Delivery {
            peer,
            id,
            chats,
            method,
            call,
            answer,
            after,
            cancels_settled,
            cancels_beside,
            answers_settled,
            by_session,
        } = self;
        // A zero sleep still waits for the timer's next 1 ms tick: the default answer (no
        // delay) would cost a millisecond a card.
        if cancels_settled || cancels_beside.is_some() {
            let until = tokio::time::Instant::now() + after;
            while tokio::time::Instant::now() < until {
                let settled = call.as_deref().is_some_and(|c| chats.is_settled(c));
                let beside = !settled
                    && cancels_beside
                        .as_deref()
                        .is_some_and(|s| chats.is_session_settled(s));
                if (cancels_settled && settled) || beside {
                    peer.respond(&id, Ok(dismissal(&method)));
                    return;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        } else if !after.is_zero() {
            tokio::time::sleep(after).await;
        }
        // A card taken down is not answered.
        if call.as_deref().is_some_and(|c| chats.is_settled(c)) && !answers_settled {
            return;
        }
        if by_session
            .as_deref()
            .is_some_and(|s| chats.is_session_settled(s))
        {
            return;
        }
        peer.respond(&id, Ok(answer));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The default policy's answer.
    fn answer(method: &str, params: &Value) -> Option<Value> {
        answer_by(&CardPolicy::default(), method, params)
    }

    #[test]
    fn approvals_are_allowed_once_and_questions_get_the_recommended_option() {
        let card = json!({"options": [{"optionId": "deny", "kind": "reject_once"}, {"optionId": "once", "kind": "allow_once"}]});
        assert_eq!(
            answer(methods::SESSION_REQUEST_PERMISSION, &card),
            Some(json!({"outcome": {"outcome": "selected", "optionId": "once"}}))
        );
        let no_allow = json!({"options": [{"optionId": "deny", "kind": "reject_once"}]});
        assert_eq!(
            answer(methods::SESSION_REQUEST_PERMISSION, &no_allow),
            Some(json!({"outcome": {"outcome": "cancelled"}}))
        );
        let q = json!({"questions": [{"options": [{"label": "A"}, {"label": "B", "recommended": true}]}, {"options": []}]});
        assert_eq!(
            answer(methods::LEMBAS_QUESTION, &q),
            Some(
                json!({"outcome": "answered", "answers": [{"kind": "options", "labels": ["B"]}, {"kind": "skipped"}]})
            )
        );
        assert_eq!(
            answer(methods::LEMBAS_PLAN, &json!({})),
            Some(json!({"outcome": "approve", "mode": "edit"}))
        );
        assert_eq!(answer(methods::SESSION_NEW, &json!({})), None);
    }
}
