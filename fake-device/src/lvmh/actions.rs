//! What an lvmh scenario run by fake-device makes happen besides the link: a person at the pi
//! session (typing, renaming, quitting), and the web UI as a fake browser in front of the
//! daemon under test (its REST API, its browser WebSocket, a page reload), so a daemon's tests
//! need no browser (spec, "Transport 2" and "Transport 3").

use std::sync::Arc;
use std::time::Duration;

use harness::engine::{ActError, TypedActor};
use harness::lvmh::plugin::Plugin;
use harness::lvmh::{BROWSER_PATH, envelope::is_persisted};
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::time::Instant;

/// One action of an lvmh scenario run by fake-device.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum PluginAction {
    /// A person types this into the pi session: the agent runs it as it runs a web prompt.
    TypePrompt(String),
    /// Waits until the agent is idle with no prompt waiting. Gives `{lastSeq, replayed}`: the
    /// last seq the plugin gave out, and how many events the last welcome had it resend.
    Settle {},
    /// The session is renamed: a `session_info` event.
    RenameSession(String),
    /// This many tool updates at once (a long tool's output).
    Burst(usize),
    /// pi shuts down: `bye`, and no more dials.
    Quit {},
    /// The plugin's network goes away: its link closes at once and it dials again only after
    /// `for` (the agent goes on, its events kept for the replay).
    Unplug {
        /// How long it stays away.
        #[serde(rename = "for")]
        span: harness::scenario::Dur,
    },
    /// The fake browser reloads the session's page: it pages through `GET
    /// /api/sessions/:id/events` until it has every persisted event the plugin sent before
    /// this step (or the step's timeout passes), and compares. Gives `{seqs, missing, altered,
    /// duplicates, out_of_order, over_limit, updates, lastSeq}`: `missing`, the seqs of
    /// persisted kinds the daemon does not serve; `altered`, those it serves other than the
    /// plugin sent them (a field gone or changed); `over_limit`, whether a page held more than
    /// `page`; `updates`, how many `message_update` it served.
    Reload {
        /// Ask for at most this many events a page (the API's `limit`).
        #[serde(default)]
        page: Option<u64>,
    },
    /// The fake browser calls the REST API. Gives `{status, body}`.
    Api {
        /// `GET`, `POST` or `DELETE`.
        method: String,
        /// The path (`/api/sessions`), with any query.
        path: String,
        /// A JSON body.
        #[serde(default)]
        body: Option<Value>,
        /// The token to send (default: the run's); `null` sends none.
        #[serde(default = "own_token")]
        token: Option<String>,
    },
    /// The fake browser opens the browser WebSocket (`/ws?token=`); it becomes the newest
    /// link, so `send` and `expect` steps speak on it. Gives `{status, closed}`: 101 when it
    /// opened, else the refusal's HTTP status.
    Browser {
        /// The token in the query (default: the run's); `null` sends none.
        #[serde(default = "own_token")]
        token: Option<String>,
    },
    /// Dials the agent link once more with this token, as another plugin would. Gives
    /// `{status, closed}`: the refusal's status, or 101 and whether the daemon closed the link
    /// within a second without a word (the other way the spec lets it refuse); a link that
    /// stays open is closed again here.
    AgentDial {
        /// The token (`null`: none).
        token: Option<String>,
    },
}

fn own_token() -> Option<String> {
    Some(OWN_TOKEN.into())
}

/// How long a dial that opened waits to see whether the daemon closes it (a refusal).
const REFUSAL_CLOSE: Duration = Duration::from_secs(1);

/// A reload stops asking this long before its step's deadline, so its last answer is judged
/// rather than cut off.
const RELOAD_LAST_CALL: Duration = Duration::from_millis(250);

/// Stands for the run's own token in an action written without one.
const OWN_TOKEN: &str = "\u{0}own";

/// The hands of an lvmh fake-device run.
#[allow(missing_docs)] // fields whose names say it all go undocumented
pub struct PluginActor {
    pub plugin: Arc<Plugin>,
    /// The daemon's base URL (`http://host:port`).
    pub base: String,
    /// The run's token.
    pub token: String,
    /// The HTTP client.
    pub http: reqwest::Client,
    /// The shapes of the daemon's answers.
    pub shapes: harness::shapes::ShapeWatch,
}

impl TypedActor for PluginActor {
    type Action = PluginAction;
    const WHO: &'static str = "the fake plugin";

    async fn act_typed(&self, action: PluginAction, timeout: Duration) -> Result<Value, ActError> {
        self.act_now(action, timeout).await
    }
}

impl PluginActor {
    fn token<'t>(&'t self, written: &'t Option<String>) -> Option<&'t str> {
        match written.as_deref() {
            Some(OWN_TOKEN) => Some(&self.token),
            other => other,
        }
    }

    /// Does `action`, within `timeout`.
    pub async fn act_now(
        &self,
        action: PluginAction,
        timeout: Duration,
    ) -> Result<Value, ActError> {
        let deadline = Instant::now() + timeout;
        match action {
            PluginAction::TypePrompt(text) => match self.plugin.type_prompt(&text) {
                true => Ok(json!({})),
                false => Err("the agent's prompt queue is full".into()),
            },
            PluginAction::Settle {} => {
                while !self.plugin.is_idle() {
                    if Instant::now() >= deadline {
                        return Err(format!(
                            "the agent was still busy after {timeout:?} (last seq {})",
                            self.plugin.last_seq()
                        )
                        .into());
                    }
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
                Ok(json!({
                    "lastSeq": self.plugin.last_seq(),
                    "replayed": self.plugin.replayed(),
                }))
            }
            PluginAction::RenameSession(name) => {
                self.plugin.rename(&name);
                Ok(json!({}))
            }
            PluginAction::Burst(count) => {
                self.plugin.burst(count.min(1_000_000));
                Ok(json!({ "lastSeq": self.plugin.last_seq() }))
            }
            PluginAction::Quit {} => {
                self.plugin.quit();
                Ok(json!({}))
            }
            PluginAction::Unplug { span } => {
                self.plugin.unplug(span.0);
                Ok(json!({}))
            }
            PluginAction::Reload { page } => self.reload(page, deadline).await,
            PluginAction::Api {
                method,
                path,
                body,
                token,
            } => {
                let (status, body) = self
                    .call(&method, &path, body.as_ref(), self.token(&token), deadline)
                    .await?;
                Ok(json!({ "status": status, "body": body }))
            }
            PluginAction::Browser { token } => {
                let token = self.token(&token).map(str::to_string);
                // A browser with another token is a refusal to see (on the upgrade or by a
                // close): its link is not kept.
                let own = token.as_deref() == Some(self.token.as_str());
                let mut url = format!("{}{BROWSER_PATH}", self.base.replacen("http", "ws", 1));
                if let Some(token) = token {
                    url.push_str(&format!("?token={}", super::web_ui::query_value(&token)));
                }
                self.open(url, None, deadline, own).await
            }
            PluginAction::AgentDial { token } => {
                let url = self.plugin.config().url.clone();
                let token = self.token(&token).map(str::to_string);
                self.open(url, token, deadline, false).await
            }
        }
    }

    /// Opens a WebSocket; one that opens is kept on the hub (`keep`) or closed at once.
    async fn open(
        &self,
        url: String,
        bearer: Option<String>,
        deadline: Instant,
        keep: bool,
    ) -> Result<Value, ActError> {
        let request = harness::transport::ws_client::ClientRequest {
            url,
            bearer_token: bearer,
            headers: Vec::new(),
            timeout: deadline.saturating_duration_since(Instant::now()),
        };
        match harness::transport::ws_client::connect(request, self.plugin.config().limits).await {
            Ok(connection) if keep => {
                self.plugin.hub().attach(connection);
                Ok(json!({ "status": 101, "closed": false }))
            }
            Ok(mut connection) => {
                // The spec lets a daemon refuse a wrong token by closing the link it opened:
                // a link that closes before it says anything within a moment is that.
                let closed = tokio::time::timeout(REFUSAL_CLOSE, async {
                    match connection.incoming.recv().await {
                        Some(harness::transport::Incoming::Closed(_)) | None => true,
                        Some(_) => false,
                    }
                })
                .await
                .unwrap_or(false);
                let _ = connection
                    .outgoing
                    .send(harness::transport::Outgoing::Close(
                        harness::transport::CloseInfo {
                            code: harness::transport::CLOSE_NORMAL,
                            reason: "only a dial".into(),
                        },
                    ));
                Ok(json!({ "status": 101, "closed": closed }))
            }
            Err(harness::transport::ws_client::ConnectError::Refused { status, .. }) => {
                Ok(json!({ "status": status, "closed": true }))
            }
            Err(e) => Err(format!("the daemon could not be reached: {e}").into()),
        }
    }

    async fn call(
        &self,
        method: &str,
        path: &str,
        body: Option<&Value>,
        token: Option<&str>,
        deadline: Instant,
    ) -> Result<(u16, Value), ActError> {
        let method = reqwest::Method::from_bytes(method.to_uppercase().as_bytes())
            .map_err(|_| ActError::Failed(format!("`{method}` is not an HTTP method")))?;
        let mut request = self
            .http
            .request(method.clone(), format!("{}{path}", self.base))
            .timeout(deadline.saturating_duration_since(Instant::now()));
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        if let Some(body) = body {
            request = request.json(body);
        }
        let response = request
            .send()
            .await
            .map_err(|e| ActError::Failed(format!("the daemon did not answer: {e}")))?;
        let status = response.status().as_u16();
        let bytes = response
            .bytes()
            .await
            .map_err(|e| ActError::Failed(format!("the daemon's answer broke off: {e}")))?;
        let json = serde_json::from_slice(&bytes);
        let is_json = json.is_ok();
        let body =
            json.unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()));
        self.judge_answer(&method, path, status, &body, is_json);
        Ok((status, body))
    }

    /// Every answer the fake browser gets is judged: a success by its route's shape, an error
    /// by the spec's error body (spec, "Transport 2": `{"error": "message"}`).
    fn judge_answer(
        &self,
        method: &reqwest::Method,
        path: &str,
        status: u16,
        body: &Value,
        is_json: bool,
    ) {
        let route = harness::lvmh::api_route(method.as_str(), path);
        let findings = self.plugin.hub().findings();
        if let Some(finding) =
            harness::lvmh::gitlab::token_shown(body, &format!("the answer to `{route}`"))
        {
            findings.push(finding.with_detail(harness::size::cut_clone(body).to_string()));
        }
        if (200..300).contains(&status) {
            for finding in self.shapes.check_response(&route, body) {
                findings.push(finding);
            }
            return;
        }
        let worded = is_json && body.get("error").is_some_and(Value::is_string);
        if !worded {
            let came = harness::size::cut_clone(body).to_string();
            findings.push(
                harness::finding::Finding::new(
                    harness::lvmh::rules::ERRORS,
                    format!(
                        "`{route}` answered {status} without the error body `{{\"error\": \"…\"}}`"
                    ),
                )
                .with_detail(format!("received: {came}")),
            );
        }
    }

    /// How many events came that are no event of the session a route named: those of another
    /// session among `page` (this session's), and any served for a session the daemon does not
    /// have (for which no events, or a refusal, are both right).
    async fn foreign_events(
        &self,
        session: &str,
        page: &[Value],
        deadline: Instant,
    ) -> Result<usize, ActError> {
        let mixed_in = page.iter().filter(|e| e["sessionId"] != session).count();
        let path = format!("/api/sessions/{session}-not-here/events?after=0");
        let (_, body) = self
            .call("GET", &path, None, Some(&self.token), deadline)
            .await?;
        let unknown = body.as_array().map_or(0, Vec::len);
        Ok(mixed_in + unknown)
    }

    /// A page reload: every persisted event, paged, until it holds all the plugin sent before
    /// now or the deadline passes; then what it lacks and what it has too much of.
    async fn reload(&self, page: Option<u64>, deadline: Instant) -> Result<Value, ActError> {
        // What the daemon can have: the persisted kinds among the events that went out.
        let delivered = self.plugin.delivered();
        let wanted: Vec<u64> = self
            .plugin
            .sent()
            .iter()
            .filter(|(seq, kind)| is_persisted(kind) && delivered.contains(seq))
            .map(|(seq, _)| *seq)
            .collect();
        let session = self.plugin.session_id();
        loop {
            let mut events: Vec<Value> = Vec::new();
            let mut after = 0u64;
            let mut over_limit = false;
            loop {
                let mut path = format!("/api/sessions/{session}/events?after={after}");
                if let Some(limit) = page {
                    path.push_str(&format!("&limit={limit}"));
                }
                let (status, body) = self
                    .call("GET", &path, None, Some(&self.token), deadline)
                    .await?;
                let Value::Array(batch) = body else {
                    return Err(format!("{path} answered {status} with no list: {body}").into());
                };
                let Some(last) = batch.last().and_then(|e| e["seq"].as_u64()) else {
                    break;
                };
                over_limit |= page.is_some_and(|p| batch.len() as u64 > p);
                events.extend(batch);
                // Until an empty page: a daemon's own default limit cuts a page too.
                if last <= after {
                    break;
                }
                after = last;
            }
            let seqs: Vec<u64> = events.iter().filter_map(|e| e["seq"].as_u64()).collect();
            let served: std::collections::HashSet<u64> = seqs.iter().copied().collect();
            let missing: Vec<u64> = wanted
                .iter()
                .copied()
                .filter(|s| !served.contains(s))
                .collect();
            // What the daemon lacks when the step's time is nearly up is the answer: it had
            // the time to persist it.
            if missing.is_empty() || Instant::now() + RELOAD_LAST_CALL >= deadline {
                let foreign = self.foreign_events(&session, &events, deadline).await?;
                let mut seen = std::collections::BTreeSet::new();
                let duplicates: Vec<u64> =
                    seqs.iter().copied().filter(|s| !seen.insert(*s)).collect();
                let updates = events
                    .iter()
                    .filter(|e| e["type"] == harness::lvmh::kinds::MESSAGE_UPDATE)
                    .count();
                return Ok(json!({
                    "seqs": seqs,
                    "missing": missing,
                    "altered": self.plugin.altered(&events),
                    "duplicates": duplicates,
                    "out_of_order": seqs.windows(2).any(|w| w[0] >= w[1]),
                    "over_limit": over_limit,
                    "updates": updates,
                    "lastSeq": seqs.iter().max().copied().unwrap_or(0),
                    "foreign": foreign,
                }));
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}
