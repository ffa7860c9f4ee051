//! The steps that send: a notification, a request (answered now or `start`ed and awaited
//! later), a raw message, and the `reply` to a request a handler held.

use serde_json::{Value, json};
use tokio::time::Instant;

use super::Outcome;
use crate::engine::runner::Runner;
use crate::engine::runner::describe::Expected;
use crate::engine::verdict::Failure;
use crate::jsonrpc::RpcError;
use crate::scenario::Dur;
use crate::scenario::model::*;

impl Runner {
    pub(super) async fn notify(&self, n: &NotifyStep) -> Outcome {
        let (params, deadline) = match self.sendable(&n.method, &n.params, n.unlisted).await {
            Ok(ready) => ready,
            Err(outcome) => return outcome,
        };
        match self.link(deadline).await {
            Ok(peer) => {
                peer.notify(&n.method, params);
                Outcome::Passed
            }
            Err(f) => Outcome::failed(f),
        }
    }

    pub(super) async fn send(&self, s: &SendStep) -> Outcome {
        let peer = match self.link(Instant::now() + self.default_timeout).await {
            Ok(peer) => peer,
            Err(f) => return Outcome::failed(f),
        };
        if let Some(name) = &s.name
            && let Ok(mut marks) = self.start_marks.lock()
        {
            marks.insert(name.clone(), self.hub.inbox.last_seq());
        }
        match (&s.message, &s.text) {
            (Some(message), _) => match self.render(message) {
                Ok(m) => peer.send_value(m),
                Err(e) => return Outcome::Error(e),
            },
            (None, Some(text)) => peer.send_text(text.clone(), None),
            (None, None) => return Outcome::Error("`send` needs `message` or `text`".into()),
        }
        Outcome::Passed
    }

    pub(super) async fn request(&self, r: &RequestStep) -> Outcome {
        let timeout = self.timeout(r.timeout);
        let deadline = Instant::now() + timeout;
        let params = match self.render(r.params.as_ref().unwrap_or(&json!({}))) {
            Ok(p) => p,
            Err(e) => return Outcome::Error(e),
        };
        if !r.unlisted
            && let Err(unadmitted) = self
                .admit_request(&r.method, &params, &r.result, &r.answer, deadline)
                .await
        {
            return unadmitted.outcome(&r.rule, &r.method);
        }
        let peer = match self.link(deadline).await {
            Ok(peer) => peer,
            Err(f) => {
                return Outcome::failed(Failure {
                    rule: r.rule.clone(),
                    ..f
                });
            }
        };
        let remaining = deadline.saturating_duration_since(Instant::now());
        self.focus_on(peer.link());
        let answer = match peer.request(&r.method, params, remaining).await {
            Ok(answer) => answer,
            Err(e) => {
                return Outcome::failed(Failure {
                    rule: r.rule.clone(),
                    summary: e.to_string(),
                    awaited: Some(format!(
                        "the answer to `{}`, for {}",
                        r.method,
                        Dur(timeout)
                    )),
                    ..Failure::default()
                });
            }
        };
        let expected = Expected::of(&r.result, &r.error, &r.answer);
        self.judge_answer(&r.method, answer, expected, &r.capture, &r.rule)
    }

    pub(super) async fn start(&self, st: &StartStep) -> Outcome {
        let (params, deadline) = match self.sendable(&st.method, &st.params, st.unlisted).await {
            Ok(ready) => ready,
            Err(outcome) => return outcome,
        };
        let peer = match self.link(deadline).await {
            Ok(peer) => peer,
            Err(f) => return Outcome::failed(f),
        };
        let (method, timeout) = (st.method.clone(), self.timeout(st.timeout));
        self.focus_on(peer.link());
        if let Ok(mut marks) = self.start_marks.lock() {
            marks.insert(st.name.clone(), self.hub.inbox.last_seq());
        }
        // Sent now, in step order; only the wait for the answer runs on its own.
        let answer = tokio::spawn(peer.begin_request(&method, params, timeout));
        match self.started.lock() {
            Ok(mut started) => {
                started.insert(st.name.clone(), (st.method.clone(), timeout, answer));
                Outcome::Passed
            }
            Err(_) => Outcome::Error("started requests are unavailable".into()),
        }
    }

    pub(super) async fn reply(&self, r: &ReplyStep) -> Outcome {
        let Some(request) = self.vars().get(&r.to).cloned() else {
            return Outcome::Error(format!(
                "`reply.to`: no variable `{}` (capture the request with `$`)",
                r.to
            ));
        };
        let Some(id) = request.get("id").cloned() else {
            return Outcome::Error(format!(
                "`{}` is not a captured request: it has no `id`",
                r.to
            ));
        };
        let origin = self.origins.lock().ok().and_then(|o| o.get(&r.to).copied());
        let Some(link) = self.hub.take_held(&id, origin) else {
            return Outcome::Error(format!(
                "request {id} was not held: add a handler with `hold: true` for its method, or the default behaviour answers it first"
            ));
        };
        let Some(peer) = self.hub.link(link) else {
            return Outcome::Error(format!("link {link} is gone"));
        };
        let incoming = crate::jsonrpc::IncomingRequest {
            id: id.clone(),
            method: request
                .get("method")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string(),
            params: request.get("params").cloned().unwrap_or(Value::Null),
            raw: request.clone(),
        };
        let template = match (&r.result, &r.error) {
            (Some(result), _) => Ok(result.clone()),
            (None, Some(error)) => Err(error.clone()),
            (None, None) => return Outcome::Error("`reply` needs `result` or `error`".into()),
        };
        let outcome: Result<Value, RpcError> = self.hub.render_answer(&incoming, template);
        peer.respond(&id, outcome);
        Outcome::Passed
    }

    /// The params of a `notify` or `start`, substituted, and the step's deadline, once the
    /// message may go (`admit_send`); the step's outcome when it may not.
    async fn sendable(
        &self,
        method: &str,
        params: &Option<Value>,
        unlisted: bool,
    ) -> Result<(Value, Instant), Outcome> {
        let params = self
            .render(params.as_ref().unwrap_or(&json!({})))
            .map_err(Outcome::Error)?;
        let deadline = Instant::now() + self.default_timeout;
        self.admit_send(method, &params, unlisted, deadline).await?;
        Ok((params, deadline))
    }
}
