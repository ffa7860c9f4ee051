//! A fake web UI (spec, "Transport 3"): what a browser with the lvmh page open does by
//! itself. It opens `/ws?token=`, opens the first online session the list shows (subscribes,
//! then loads its page from `GET /api/sessions/:id/events`), tracks the last seq it saw, and
//! when its link drops it opens it again, subscribes again and fetches what came after that
//! seq. It is the peer of a fake daemon's scenario that judges a web UI (`peer: {web_ui:
//! true}`); its misbehaviour of `lvmh.web.resubscribe` subscribes again but fetches nothing.

use std::sync::Arc;
use std::time::Duration;

use harness::lvmh::{BROWSER_PATH, kinds, rules};
use harness::rules::Misbehaviours;
use harness::transport::{CloseInfo, FrameLimits, Incoming, Outgoing, ws_client};
use serde_json::{Value, json};
use tokio::sync::watch;

/// How long a dial may take.
const DIAL_WITHIN: Duration = Duration::from_secs(5);

/// The pause before dialing again, at first; it doubles up to [`REDIAL_MAX`].
const REDIAL_FIRST: Duration = Duration::from_millis(20);

/// The longest pause between two dials.
const REDIAL_MAX: Duration = Duration::from_secs(2);

/// The most pages one fetch reads (a page holds what the daemon's `limit` allows).
const PAGES_MAX: usize = 1_000;

/// How the fake web UI runs.
#[derive(Debug, Clone)]
pub struct WebUiConfig {
    /// The daemon's base URL (`http://host:port`).
    pub base: String,
    /// `LVMH_TOKEN`, as the page keeps it.
    pub token: String,
    /// Each link's frame limits.
    pub limits: FrameLimits,
    /// The rules it breaks.
    pub misbehave: Misbehaviours,
}

/// A running fake web UI; it stops when dropped.
pub struct WebUi {
    stop: watch::Sender<bool>,
}

impl Drop for WebUi {
    fn drop(&mut self) {
        self.stop.send_replace(true);
    }
}

/// What the page knows.
#[derive(Default)]
struct Page {
    /// The session it shows.
    session: Option<String>,
    /// The last seq it saw of that session.
    last_seq: u64,
}

impl WebUi {
    /// Opens the page: the web UI runs in the background until dropped.
    pub fn start(config: WebUiConfig) -> WebUi {
        let (stop, stopped) = watch::channel(false);
        tokio::spawn(run(Arc::new(config), stopped));
        WebUi { stop }
    }
}

async fn run(config: Arc<WebUiConfig>, mut stopped: watch::Receiver<bool>) {
    let http = harness::transport::http_client();
    let mut page = Page::default();
    let mut pause = REDIAL_FIRST;
    let url = format!(
        "{}{BROWSER_PATH}?token={}",
        config.base.replacen("http", "ws", 1),
        query_value(&config.token)
    );
    while !*stopped.borrow() {
        let request = ws_client::ClientRequest {
            url: url.clone(),
            bearer_token: None,
            headers: Vec::new(),
            timeout: DIAL_WITHIN,
        };
        let mut connection = match ws_client::connect(request, config.limits).await {
            Ok(connection) => connection,
            Err(e) => {
                tracing::debug!("the web UI's link did not open: {e}");
                tokio::select! {
                    () = tokio::time::sleep(pause) => {}
                    _ = stopped.changed() => return,
                }
                pause = (pause * 2).min(REDIAL_MAX);
                continue;
            }
        };
        // Back on a session it showed: subscribe again and fetch what it missed.
        if let Some(session) = page.session.clone() {
            send(
                &connection,
                &json!({"type": kinds::SUBSCRIBE, "sessionId": session}),
            );
            if config
                .misbehave
                .breaks_way(rules::WEB_RESUBSCRIBE, "from_zero")
            {
                // Misbehaving: fetches every event again, not those after the last it saw.
                page.last_seq = 0;
            }
            if !config.misbehave.breaks(rules::WEB_RESUBSCRIBE) {
                fetch(&http, &config, &mut page, &session).await;
            }
        }
        loop {
            let incoming = tokio::select! {
                incoming = connection.incoming.recv() => incoming,
                _ = stopped.changed() => {
                    let _ = connection.outgoing.send(Outgoing::Close(CloseInfo {
                        code: harness::transport::CLOSE_NORMAL,
                        reason: "the page is closed".into(),
                    }));
                    return;
                }
            };
            match incoming {
                Some(Incoming::Text(text)) => {
                    // A link that says something is a link: the next drop redials at once.
                    pause = REDIAL_FIRST;
                    let Ok(frame) = serde_json::from_str::<Value>(&text) else {
                        continue;
                    };
                    take(&http, &config, &connection, &mut page, &frame).await;
                }
                Some(Incoming::Closed(_)) | None => break,
                Some(_) => {}
            }
        }
        // A daemon that opens and closes at once is not dialled in a tight loop.
        tokio::select! {
            () = tokio::time::sleep(pause) => {}
            _ = stopped.changed() => return,
        }
        pause = (pause * 2).min(REDIAL_MAX);
    }
}

/// `text` as a URL query's value.
pub fn query_value(text: &str) -> String {
    percent_encoding::utf8_percent_encode(text, percent_encoding::NON_ALPHANUMERIC).to_string()
}

/// What the page does with one of the daemon's frames.
async fn take(
    http: &reqwest::Client,
    config: &WebUiConfig,
    connection: &harness::transport::Connection,
    page: &mut Page,
    frame: &Value,
) {
    match frame.get("type").and_then(Value::as_str) {
        Some(kinds::SESSION_LIST) if page.session.is_none() => {
            let online = frame["sessions"].as_array().and_then(|sessions| {
                sessions
                    .iter()
                    .find(|s| s["online"] == true)
                    .and_then(|s| s["id"].as_str())
            });
            if let Some(session) = online.map(str::to_string) {
                // The person opens the session: subscribe, then load the page.
                send(
                    connection,
                    &json!({"type": kinds::SUBSCRIBE, "sessionId": session}),
                );
                page.session = Some(session.clone());
                fetch(http, config, page, &session).await;
            }
        }
        Some(kinds::EVENTS) if frame["sessionId"].as_str() == page.session.as_deref() => {
            let seqs = frame["events"].as_array().into_iter().flatten();
            if let Some(last) = seqs.filter_map(|e| e["seq"].as_u64()).max() {
                page.last_seq = page.last_seq.max(last);
            }
        }
        _ => {}
    }
}

/// Fetches the session's events after the last seq seen, page by page.
async fn fetch(http: &reqwest::Client, config: &WebUiConfig, page: &mut Page, session: &str) {
    for _ in 0..PAGES_MAX {
        let url = format!(
            "{}/api/sessions/{session}/events?after={}",
            config.base, page.last_seq
        );
        let answer = http
            .get(&url)
            .bearer_auth(&config.token)
            .timeout(DIAL_WITHIN)
            .send()
            .await;
        let events: Vec<Value> = match answer {
            Ok(answer) => answer.json().await.unwrap_or_default(),
            Err(e) => {
                tracing::debug!("the web UI's fetch failed: {e}");
                return;
            }
        };
        match events.iter().filter_map(|e| e["seq"].as_u64()).max() {
            Some(last) if last > page.last_seq => page.last_seq = last,
            _ => return,
        }
    }
}

fn send(connection: &harness::transport::Connection, frame: &Value) {
    let _ = connection.outgoing.send(Outgoing::Text(frame.to_string()));
}
