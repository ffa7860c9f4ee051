//! The steps about the links themselves: closing one, waiting for one (first, again, or
//! never again), watching the peer close one, and dialling out.

use serde_json::{Value, json};
use tokio::time::Instant;

use super::Outcome;
use crate::engine::runner::{DialRequest, DialResult, Runner};
use crate::engine::verdict::Failure;
use crate::scenario::Dur;
use crate::scenario::model::*;
use crate::transport::CLOSE_NORMAL;

impl Runner {
    pub(super) async fn expect_link(&self, e: &ExpectLinkStep) -> Outcome {
        let deadline = Instant::now() + e.within.0;
        let waited = self
            .unless_exited(self.hub.wait_current(deadline), deadline)
            .await;
        let waited = match waited {
            Ok(waited) => waited,
            Err(exit) => {
                return self.exited(&e.rule, exit, format!("an open link, for {}", e.within));
            }
        };
        match waited {
            Some(peer) => {
                self.focus_on(peer.link());
                Outcome::Passed
            }
            None => Outcome::failed(Failure {
                rule: e.rule.clone(),
                summary: format!("the peer did not link within {}", e.within),
                awaited: Some(format!("an open link, for {}", e.within)),
                ..Failure::default()
            }),
        }
    }

    pub(super) async fn close(&self, c: &CloseStep) -> Outcome {
        match self.link(Instant::now() + self.default_timeout).await {
            Ok(peer) if c.drop => {
                peer.drop_link();
                Outcome::Passed
            }
            Ok(peer) if c.half => {
                peer.half_close();
                Outcome::Passed
            }
            Ok(peer) => {
                peer.close(
                    c.code.unwrap_or(CLOSE_NORMAL),
                    c.reason.as_deref().unwrap_or(""),
                );
                Outcome::Passed
            }
            Err(f) => Outcome::failed(f),
        }
    }

    pub(super) async fn expect_close(&self, e: &ExpectCloseStep) -> Outcome {
        let timeout = self.timeout(e.timeout);
        let deadline = Instant::now() + timeout;
        // The link the scenario last talked on, open or not: a peer may close it (say with 4400
        // right after a `dial`) before this step starts, and that close is what the step is
        // about, even when the peer has already dialled a new one. Before any, the newest.
        let focus = self.focus.load(std::sync::atomic::Ordering::Relaxed);
        let watched = self
            .hub
            .link(focus)
            .or_else(|| self.hub.links().last().map(|l| l.peer.clone()));
        let peer = match watched {
            Some(peer) => peer,
            None => match self.link(deadline).await {
                Ok(peer) => peer,
                Err(f) => {
                    return Outcome::failed(Failure {
                        rule: e.rule.clone(),
                        ..f
                    });
                }
            },
        };
        let wanted = match e.code {
            Some(code) => format!("the peer to close link {} with code {code}", peer.link()),
            None => format!("the peer to close link {}", peer.link()),
        };
        let closed = tokio::time::timeout_at(deadline, peer.closed()).await;
        let fail = |summary: String| {
            Outcome::failed(Failure {
                rule: e.rule.clone(),
                summary,
                awaited: Some(format!("{wanted}, for {}", Dur(timeout))),
                ..Failure::default()
            })
        };
        match closed {
            Err(_) => fail(format!("link {} stayed open", peer.link())),
            Ok(_) if peer.closed_by_us() => fail("we closed the link, not the peer".into()),
            Ok(info) => match (e.code, info) {
                (None, _) => Outcome::Passed,
                (Some(code), Some(info)) if info.code == code => Outcome::Passed,
                (Some(code), Some(info)) => fail(format!(
                    "closed with {} ({:?}), not {code}",
                    info.code, info.reason
                )),
                (Some(code), None) => fail(format!(
                    "vanished without a close frame, not a close with {code}"
                )),
            },
        }
    }

    /// The link a reconnect is measured from: the newest one that has ended or that we have
    /// asked to close (its close handshake may still be in flight), else the newest.
    fn reconnect_baseline(&self) -> u32 {
        let links = self.hub.links();
        links
            .iter()
            .rev()
            .find(|l| l.closed.is_some() || l.peer.closed_by_us())
            .or(links.last())
            .map(|l| l.peer.link())
            .unwrap_or(0)
    }

    pub(super) async fn expect_reconnect(&self, e: &ExpectReconnectStep) -> Outcome {
        let baseline = self.reconnect_baseline();
        let deadline = Instant::now() + e.within.0;
        let waited = self.hub.wait_links(deadline, |links| {
            links
                .iter()
                .find(|l| l.peer.link() > baseline)
                .map(|l| l.peer.link())
        });
        let found = match self.unless_exited(waited, deadline).await {
            Ok(found) => found,
            Err(exit) => {
                return self.exited(
                    &e.rule,
                    exit,
                    format!("a new link after link {baseline}, for {}", e.within),
                );
            }
        };
        match found {
            Some(link) => {
                self.focus_on(link);
                Outcome::Passed
            }
            None => Outcome::failed(Failure {
                rule: e.rule.clone(),
                summary: format!("the peer did not link again within {}", e.within),
                awaited: Some(format!(
                    "a new link after link {baseline}, for {}",
                    e.within
                )),
                ..Failure::default()
            }),
        }
    }

    pub(super) async fn expect_no_reconnect(&self, e: &ExpectNoReconnectStep) -> Outcome {
        let baseline = self.reconnect_baseline();
        let found = self
            .hub
            .wait_links(Instant::now() + e.duration.0, |links| {
                links
                    .iter()
                    .find(|l| l.peer.link() > baseline)
                    .map(|l| l.peer.link())
            })
            .await;
        match found {
            None => Outcome::Passed,
            Some(link) => Outcome::failed(Failure {
                rule: e.rule.clone(),
                summary: format!(
                    "the peer linked again (link {link}) though it should not for {}",
                    e.duration
                ),
                awaited: Some(format!(
                    "no new link after link {baseline}, for {}",
                    e.duration
                )),
                ..Failure::default()
            }),
        }
    }

    pub(super) async fn dial(&self, d: &DialStep) -> Outcome {
        let Some(dialer) = &self.dialer else {
            return Outcome::Error("this double does not dial".into());
        };
        let token = match &d.token {
            Some(t) => match self.render(&json!(t)) {
                Ok(Value::String(s)) => Some(s),
                Ok(other) => Some(other.to_string()),
                Err(e) => return Outcome::Error(e),
            },
            None => None,
        };
        let timeout = self.timeout(d.timeout);
        let result = dialer
            .dial(DialRequest {
                token,
                protocol: d.protocol,
                timeout,
            })
            .await;
        let fail = |summary: String| {
            Outcome::failed(Failure {
                rule: d.rule.clone(),
                summary,
                ..Failure::default()
            })
        };
        match (d.refused, result) {
            (None, DialResult::Linked(peer)) => {
                self.focus_on(peer.link());
                Outcome::Passed
            }
            (Some(status), DialResult::Refused(got)) if got == status => Outcome::Passed,
            (Some(status), DialResult::Linked(peer)) => {
                peer.close(CLOSE_NORMAL, "this dial should have been refused");
                fail(format!(
                    "the instance accepted a link it should have refused with {status}"
                ))
            }
            (Some(status), DialResult::Refused(got)) => {
                fail(format!("refused with {got}, not {status}"))
            }
            (None, DialResult::Refused(got)) => {
                fail(format!("the instance refused the link with {got}"))
            }
            (_, DialResult::Failed(why)) => fail(format!("the dial failed: {why}")),
        }
    }
}
