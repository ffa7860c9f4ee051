//! What the device's three cards (`session/request_permission`, `_lembas/question`,
//! `_lembas/plan`) have in common: who may be asked, sending the card and waiting for its answer
//! within the approval timeout, the race with the person at a terminal that shares the session,
//! and `_lembas/permission/settled`, which only this wait sends (the card is taken down when the
//! turn is cancelled, the wait runs out, or the terminal answered first). Each card's room says
//! what its card holds and how its answer is read.

use std::time::Duration;

use harness::finding::Finding;
use harness::jsonrpc::{RequestError, RpcError};
use harness::lembas::methods;
use harness::rules::{Misbehaviours, ids};
use serde_json::{Value, json};
use tokio::sync::oneshot;

use crate::completion::ToolOutcome;
use crate::events::Client;
use crate::registry::Registry;
use crate::terminal_card::{CardAnswer, TerminalCard};

/// How the person at the terminal answers a card of one kind: from the card as sent.
pub(crate) type AtTerminal = fn(&Value, CardAnswer) -> Value;

/// What a card's request came to on the link.
type Web = Result<Result<Value, RpcError>, RequestError>;

/// What a misbehaving device gets wrong in every card; all off by default.
#[derive(Debug, Clone, Copy, Default)]
struct Faults {
    /// Questions and plans go to any client, whatever its protocol.
    asks_all: bool,
    /// A client that refused a question still gets plans.
    plans_still_asked: bool,
    /// A client that answered method-not-found is asked again.
    keeps_asking: bool,
    /// The card of a terminal-shared session says it is not patient.
    impatient: bool,
    /// The card of a terminal-shared session says nothing of patience.
    patience_absent: bool,
    /// A question or plan answered at the terminal first still waits for the web card.
    web_wins_later: bool,
    /// A question or plan answered at the terminal first: the model hears nobody answered.
    terminal_dropped: bool,
    /// No settled when the terminal answered first.
    unsettled_at_terminal: bool,
    /// The settled after a terminal's answer names a toolCallId of no card.
    settles_other_call: bool,
    /// No settled when the wait runs out.
    unsettled_on_timeout: bool,
    /// Questions and plans left up after the device stopped waiting.
    question_left_up: bool,
    /// A question or plan's settled names another session.
    settles_other_session: bool,
}

impl Faults {
    fn of(m: &Misbehaviours) -> Faults {
        Faults {
            asks_all: m.breaks(ids::DEVICE_QUESTION_PROTOCOL),
            plans_still_asked: m.breaks_way(ids::DEVICE_QUESTION_DOWNGRADE, "plans_still"),
            keeps_asking: m.breaks(ids::DEVICE_QUESTION_DOWNGRADE),
            impatient: m.breaks(ids::DEVICE_CARD_PATIENT),
            patience_absent: m.breaks_way(ids::DEVICE_CARD_PATIENT, "absent"),
            web_wins_later: m.breaks(ids::DEVICE_CARD_FIRST_WINS),
            terminal_dropped: m.breaks_way(ids::DEVICE_CARD_FIRST_WINS, "dropped"),
            unsettled_at_terminal: m.breaks(ids::DEVICE_CARD_SETTLED_TERMINAL),
            settles_other_call: m.breaks_way(ids::DEVICE_CARD_SETTLED_TERMINAL, "other_call"),
            unsettled_on_timeout: m.breaks(ids::DEVICE_CARD_TIMEOUT),
            question_left_up: m.breaks(ids::DEVICE_QUESTION_TIMEOUT),
            settles_other_session: m.breaks_way(ids::DEVICE_QUESTION_TIMEOUT, "other_session"),
        }
    }
}

/// Whether `client` may be asked questions and plans now (`capability`: `ask` or `plan`).
pub(crate) fn may_ask(registry: &Registry, client: &Client, capability: &str) -> bool {
    let faults = Faults::of(&registry.config.misbehave);
    // Misbehaving: a client that refused a question still gets plans.
    let still_asked = capability == "plan" && faults.plans_still_asked;
    registry.has(capability)
        && (faults.asks_all
            || (client.lembas() && client.protocol() >= 2 && (client.asks() || still_asked)))
}

/// Sends the cards of one session's turn to its client.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Asker<'a> {
    /// The sessions a card belongs to, and how the device behaves.
    pub(crate) registry: &'a Registry,
    /// Who is asked.
    pub(crate) client: &'a Client,
    /// The session whose turn asks.
    pub(crate) session_id: &'a str,
    faults: Faults,
}

impl<'a> Asker<'a> {
    /// The cards of session `session_id`'s turn, to `client`, with the device's misbehaviours
    /// resolved.
    pub(crate) fn new(registry: &'a Registry, client: &'a Client, session_id: &'a str) -> Self {
        Asker {
            registry,
            client,
            session_id,
            faults: Faults::of(&registry.config.misbehave),
        }
    }

    /// Whether the client may be asked questions and plans now.
    pub(crate) fn may_ask(&self, capability: &str) -> bool {
        may_ask(self.registry, self.client, capability)
    }

    /// The client answered a question or plan with method-not-found: it is treated as protocol
    /// 1 from now on.
    pub(crate) fn refused(&self) {
        if !self.faults.keeps_asking {
            self.client.stop_asking();
        }
    }

    /// Asks the client, waiting at most the approval timeout. `None`: no answer in time, and
    /// the card has been settled.
    ///
    /// In a session a terminal shares, the card is also shown at the terminal (`patient`), and
    /// the first answer wins: when the person there answers first (after
    /// `terminal_answers_after`), the client is told to take its card down, and the model is
    /// given what `at_terminal` makes of that answer.
    pub(crate) async fn ask(
        &self,
        card: Card<'_>,
        params: Value,
        at_terminal: AtTerminal,
    ) -> Result<Option<Value>, i64> {
        let wait: Duration = self.registry.config.approval_timeout;
        // A cancelled turn stops waiting for its card too (and takes it down).
        let mut cancelled = match self.registry.live_session(self.session_id) {
            Some(live) => live
                .state
                .lock()
                .await
                .running
                .as_ref()
                .map(|r| r.cancelled()),
            None => None,
        };
        let on_cancel = async move {
            match &mut cancelled {
                Some(rx) => {
                    let _ = rx.wait_for(|c| *c).await;
                }
                None => std::future::pending::<()>().await,
            }
        };
        tokio::select! {
            asked = self.ask_or_terminal(card, params, wait, at_terminal) => asked,
            () = on_cancel => {
                if self.client.lembas() {
                    self.settle(self.session_id, card.call_id);
                }
                Ok(None)
            }
        }
    }

    /// [`Self::ask`], without the turn's cancel.
    async fn ask_or_terminal(
        &self,
        card: Card<'_>,
        mut params: Value,
        wait: Duration,
        at_terminal: AtTerminal,
    ) -> Result<Option<Value>, i64> {
        let shared = self.registry.is_terminal_session(self.session_id);
        params["_meta"]["lembas"]["patient"] = json!(shared && !self.faults.impatient);
        if shared && self.faults.patience_absent {
            // Misbehaving: the cards of a terminal-shared session say nothing of patience.
            if let Some(lembas) = params["_meta"]["lembas"].as_object_mut() {
                lembas.remove("patient");
            }
        }
        let answered = if shared {
            match self
                .raced_with_terminal(card, params, wait, at_terminal)
                .await
            {
                Ok(answered) => answered,
                Err(at_terminal) => return Ok(at_terminal),
            }
        } else {
            self.client.peer().request(card.method, params, wait).await
        };
        self.read_reply(card, answered)
    }

    /// A card shown at the terminal too: the first answer wins. `Err`: the terminal's answer
    /// came first, as the model is given it.
    async fn raced_with_terminal(
        &self,
        card: Card<'_>,
        params: Value,
        wait: Duration,
        at_terminal: AtTerminal,
    ) -> Result<Web, Option<Value>> {
        let (tx, answered_there) = oneshot::channel();
        if let Ok(mut cards) = self.registry.terminal_cards.lock() {
            cards.push(TerminalCard {
                call_id: card.call_id.to_string(),
                answer: tx,
            });
        }
        let timer = self.registry.config.terminal_answers_after;
        let terminal = async move {
            match timer {
                Some(after) => {
                    tokio::time::sleep(after).await;
                    Some(CardAnswer::Allow)
                }
                None => answered_there.await.ok(),
            }
        };
        let peer = self.client.peer();
        let web = peer.request(card.method, params.clone(), wait);
        tokio::pin!(web);
        let first = tokio::select! {
            answered = &mut web => Ok(answered),
            Some(answer) = terminal => Err(answer),
        };
        // Misbehaving: a question or plan answered at the terminal first still waits for the
        // web card, whose later answer wins.
        let first = match first {
            Err(_) if card.is_question_or_plan() && self.faults.web_wins_later => Ok(web.await),
            first => first,
        };
        if let Ok(mut cards) = self.registry.terminal_cards.lock() {
            cards.retain(|c| c.call_id != card.call_id);
        }
        let answer = match first {
            Ok(answered) => return Ok(answered),
            Err(answer) => answer,
        };
        if self.client.lembas() && !self.faults.unsettled_at_terminal {
            // Misbehaving: the settled names a toolCallId of no card.
            let named = match self.faults.settles_other_call {
                true => format!("{}_other", card.call_id),
                false => card.call_id.to_string(),
            };
            self.settle(self.session_id, &named);
        }
        if card.is_question_or_plan() && self.faults.terminal_dropped {
            // Misbehaving: the terminal's first answer is dropped; the model hears nobody
            // answered.
            return Err(None);
        }
        Err(Some(at_terminal(&params, answer)))
    }

    /// What the client's reply to a card comes to: its answer, its error's code, or `None` when
    /// nobody answered in time (and the card is settled).
    fn read_reply(&self, card: Card<'_>, answered: Web) -> Result<Option<Value>, i64> {
        match answered {
            Ok(Ok(answer)) => Ok(Some(answer)),
            Ok(Err(error)) => Err(error.code),
            Err(RequestError::Timeout { .. }) => {
                // `_lembas` notifications are for a LLeMbas client only.
                // Misbehaving: questions and plans left up after the device stopped waiting.
                let keeps_card_up = card.is_question_or_plan() && self.faults.question_left_up;
                if self.faults.unsettled_on_timeout || keeps_card_up || !self.client.lembas() {
                    return Ok(None);
                }
                // Misbehaving: a question or plan's settled names another session.
                let session = match card.is_question_or_plan() && self.faults.settles_other_session
                {
                    true => format!("{}_other", self.session_id),
                    false => self.session_id.to_string(),
                };
                self.settle(&session, card.call_id);
                Ok(None)
            }
            // A device's own cards go after initialize: its gate holds nothing.
            Err(RequestError::Closed { .. } | RequestError::Held { .. }) => Ok(None),
        }
    }

    /// Tells the (LLeMbas) client to take the card of tool call `call_id` down.
    fn settle(&self, session_id: &str, call_id: &str) {
        self.client.peer().notify(
            methods::LEMBAS_PERMISSION_SETTLED,
            json!({ "sessionId": session_id, "toolCallId": call_id }),
        );
    }
}

/// Which card is asked: its method, and the tool call it is for.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Card<'a> {
    /// The card's method.
    pub(crate) method: &'a str,
    /// The tool call the card is for.
    pub(crate) call_id: &'a str,
}

impl Card<'_> {
    /// A question or a plan, which the spec's first-answer-wins and timeout wording covers
    /// beside approvals.
    fn is_question_or_plan(&self) -> bool {
        self.method != methods::SESSION_REQUEST_PERMISSION
    }
}

/// The finding for an answer to `card` of `method` that the spec does not allow.
pub(crate) fn wrong_answer(method: &str, card: &Value, answer: &Value, why: String) -> Finding {
    Finding::new(
        ids::INSTANCE_CARD_ANSWER,
        format!("the answer to `{method}` {why}"),
    )
    .with_detail(format!("card: {card}\nanswer: {answer}"))
}

/// A tool's outcome with a fixed text.
pub(crate) fn outcome(text: &str, ran: bool) -> ToolOutcome {
    ToolOutcome {
        text: text.into(),
        ran,
    }
}
