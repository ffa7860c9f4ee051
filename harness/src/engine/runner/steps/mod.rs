//! One function per kind of step, grouped by what it works on, and the dispatch from a step to
//! its function. Each says how its step ended ([`Outcome`]); the walk turns that into the
//! step's verdict.

mod answers;
mod expecting;
mod links;
mod off_link;
mod peer_process;
mod sending;

use tokio::time::Instant;

use super::Runner;
use crate::engine::verdict::Failure;
use crate::scenario::model::*;

/// How a step ended, before it becomes a verdict.
pub(super) enum Outcome {
    Passed,
    Failed(Box<Failure>),
    Error(String),
    NotApplicable(String),
    /// The finding the run waited for came while the step ran: it and the rest are skipped.
    Ended,
}

impl Outcome {
    /// A failure, boxed: it is large, and most outcomes carry none.
    pub(super) fn failed(failure: Failure) -> Outcome {
        Outcome::Failed(Box::new(failure))
    }
}

impl Runner {
    /// Does one step (a `when` aside: the walk unfolds it) and says how it ended.
    pub(super) async fn step(&mut self, step: &Step) -> Outcome {
        match step {
            Step::Notify(n) => self.notify(n).await,
            Step::Request(r) => self.request(r).await,
            Step::Start(st) => self.start(st).await,
            Step::Await(a) => self.await_answer(a).await,
            Step::Expect(e) => self.expect(e).await,
            Step::ExpectNone(e) => self.expect_none(e).await,
            Step::Check(c) => self.check(c),
            Step::ExpectLink(e) => self.expect_link(e).await,
            Step::AnyOrder(group) => self.any_order(group).await,
            Step::Reply(r) => self.reply(r).await,
            Step::Send(s) => self.send(s).await,
            Step::Wait(d) => {
                tokio::time::sleep(d.0).await;
                Outcome::Passed
            }
            Step::Close(c) => self.close(c).await,
            Step::Stall(pause) => match self.link(Instant::now() + self.default_timeout).await {
                Ok(peer) => {
                    peer.stall(pause.0);
                    Outcome::Passed
                }
                Err(f) => Outcome::failed(f),
            },
            Step::ExpectClose(e) => self.expect_close(e).await,
            Step::ExpectReconnect(e) => self.expect_reconnect(e).await,
            Step::ExpectNoReconnect(e) => self.expect_no_reconnect(e).await,
            Step::Dial(d) => self.dial(d).await,
            Step::Act(a) => self.act(a).await,
            // `when` is unfolded by `steps`.
            Step::When(_) => Outcome::Passed,
            Step::ExpectExit(e) => self.expect_exit(e).await,
            Step::ExpectOutput(e) => self.expect_output(e).await,
            Step::RestartPeer(_) => self.restart_peer().await,
            Step::WaitForSignal(w) => self.wait_for_signal(w).await,
        }
    }
}
