//! Dialling the instance: discovery read before every dial (the protocol to say comes from it),
//! the link with the device token, and the redial loop with exponential backoff and jitter.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use harness::engine::Hub;
use harness::engine::runner::{DialRequest, DialResult, Dialer};
use harness::jsonrpc::Peer;
use harness::lembas::{CLOSE_PROTOCOL_MISMATCH, DISCOVERY_PATH, LINK_PATH};
use harness::rules::ids;
use harness::transport::FrameLimits;
use harness::transport::ws_client::{ClientRequest, ConnectError, connect};
use serde_json::Value;

use crate::agent::AgentModel;
use crate::monitor;

/// How the device picks the protocol it says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProtocolChoice {
    /// From discovery, as the spec says.
    Auto,
    /// Always this one (for tests of an instance's refusal).
    Fixed(u8),
}

/// Dials one instance for one device.
pub struct DeviceDialer {
    /// The instance's base URL (`http://host:port`).
    pub instance: String,
    /// The device token.
    pub token: String,
    /// How the protocol is chosen.
    pub protocol: ProtocolChoice,
    /// Where links go.
    pub hub: Arc<Hub>,
    /// The agent, told each link's protocol before the link opens.
    pub model: Arc<AgentModel>,
    /// HTTP for discovery.
    pub http: reqwest::Client,
    /// Frame limits of each link.
    pub limits: FrameLimits,
    /// Set while the device closes its link for changed limits (it dials again at once).
    pub relinking: std::sync::atomic::AtomicBool,
    /// One dial at a time, so each link's protocol reaches its own hello.
    pub dialling: tokio::sync::Mutex<()>,
    /// What the first discovery allowed (kept only when misbehaving on purpose).
    pub first_allowed: std::sync::Mutex<Option<u8>>,
    /// What the last discovery allowed, and when it was read: kept for a minute only by a
    /// device breaking `device.discovery.every_dial` in its way `cached`.
    pub cached_allowed: std::sync::Mutex<Option<(std::time::Instant, u8)>>,
}

/// Why the device stopped dialling.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stopped {
    /// The instance closed with 4400: different link protocols. Not redialled.
    ProtocolMismatch,
    /// The instance refused the token. Not redialled.
    Unauthorized,
    /// This side closed the link.
    ByUs,
    /// It stopped dialling though it should not have (only when misbehaving).
    GaveUp,
}

impl DeviceDialer {
    async fn discovery(&self, timeout: Duration) -> Result<Value, String> {
        let url = format!("{}{DISCOVERY_PATH}", self.instance.trim_end_matches('/'));
        let response = self
            .http
            .get(&url)
            .timeout(timeout)
            .send()
            .await
            .map_err(|e| format!("discovery at {url}: {e}"))?;
        let status = response.status();
        if !status.is_success() {
            return Err(format!("discovery at {url} answered {status}"));
        }
        discovery_body(response)
            .await
            .map_err(|e| format!("discovery at {url}: {e}"))
    }

    fn link_url(&self) -> String {
        let base = self.instance.trim_end_matches('/');
        let ws = if let Some(rest) = base.strip_prefix("https://") {
            format!("wss://{rest}")
        } else if let Some(rest) = base.strip_prefix("http://") {
            format!("ws://{rest}")
        } else {
            base.to_string()
        };
        format!("{ws}{LINK_PATH}")
    }

    /// Reads discovery, then dials once.
    pub async fn dial_once(&self, request: DialRequest) -> DialResult {
        let _one_at_a_time = self.dialling.lock().await;
        let discovery = match self.discovery(request.timeout).await {
            Ok(d) => d,
            Err(why) => return DialResult::Failed(why),
        };
        let (read, findings) = monitor::check_discovery(&discovery);
        for finding in findings {
            self.hub.findings().push(finding);
        }
        let mut allowed = read.map(|d| d.protocol_for_device()).unwrap_or(1);
        if self.model.breaks(ids::DEVICE_DISCOVERY_EVERY_DIAL) {
            // Misbehaving: what the first discovery allowed, for good.
            let mut first = self.first_allowed.lock().unwrap_or_else(|p| p.into_inner());
            allowed = *first.get_or_insert(allowed);
        }
        if self
            .model
            .breaks_way(ids::DEVICE_DISCOVERY_EVERY_DIAL, "cached")
        {
            // Misbehaving: what a discovery allowed holds for a minute, over every dial in it.
            let mut cached = self
                .cached_allowed
                .lock()
                .unwrap_or_else(|p| p.into_inner());
            match *cached {
                Some((read, said)) if read.elapsed() < Duration::from_secs(60) => allowed = said,
                _ => *cached = Some((std::time::Instant::now(), allowed)),
            }
        }
        let protocol = request.protocol.unwrap_or(match self.protocol {
            ProtocolChoice::Auto => allowed,
            ProtocolChoice::Fixed(p) => p,
        });
        if let Ok(mut vars) = self.hub.vars.lock() {
            vars.set("link_protocol", serde_json::json!(protocol));
        }
        self.model.set_next_protocol(protocol);
        let mut url = self.link_url();
        if self.model.breaks_way(ids::DEVICE_LINK_DIAL, "wrong_path") {
            // Misbehaving: the link dialled at a path the spec does not name.
            url.push('s');
        }
        let client = ClientRequest {
            url,
            // Misbehaving: the token is left out, as a device that forgot its login would.
            bearer_token: (!self.model.breaks(ids::DEVICE_LINK_DIAL))
                .then(|| request.token.unwrap_or_else(|| self.token.clone())),
            headers: Vec::new(),
            timeout: request.timeout,
        };
        match connect(client, self.limits).await {
            Ok(connection) => DialResult::Linked(self.hub.attach(connection)),
            Err(ConnectError::Refused { status, .. }) => DialResult::Refused(status),
            Err(e) => DialResult::Failed(e.to_string()),
        }
    }

    /// Keeps the device linked: dials, and after a drop dials again with exponential backoff
    /// and jitter, until a 4400, a 401, or a close of our own.
    pub async fn keep_linked(
        &self,
        initial: Duration,
        cap: Duration,
        dial_timeout: Duration,
    ) -> Stopped {
        let mut backoff = initial;
        loop {
            // Boxed: a dial's future (discovery, the connect, the handshake) is large, and held
            // inline it would make the whole wait of a linked device as large.
            let dialled = Box::pin(self.dial_once(DialRequest {
                token: None,
                protocol: None,
                timeout: dial_timeout,
            }));
            match dialled.await {
                DialResult::Linked(peer) => {
                    backoff = initial;
                    let stopped = self.until_closed(&peer).await;
                    // Closed for changed limits: dial again at once, with the new ones.
                    if self
                        .relinking
                        .swap(false, std::sync::atomic::Ordering::Relaxed)
                    {
                        continue;
                    }
                    if let Some(stopped) = stopped {
                        return stopped;
                    }
                }
                DialResult::Refused(401) => return Stopped::Unauthorized,
                DialResult::Refused(status) => {
                    tracing::info!("the link was refused with {status}; dialling again")
                }
                DialResult::Failed(why) => tracing::info!("dial failed: {why}; dialling again"),
            }
            // Jitter spreads a fleet's redials after an instance restart.
            let jitter = harness::random::between(0.5, 1.0);
            tokio::time::sleep(backoff.mul_f64(jitter)).await;
            backoff = (backoff * 2).min(cap);
        }
    }

    /// Waits for the link to end; says whether that stops the device (`None`: dial again).
    async fn until_closed(&self, peer: &Arc<Peer>) -> Option<Stopped> {
        let close = peer.closed().await;
        if peer.closed_by_us() {
            return Some(Stopped::ByUs);
        }
        // Misbehaving: a close for a restart (1012) read as a 4400.
        let as_4400 = self.model.breaks_way(ids::DEVICE_LINK_REDIAL, "as_4400");
        let mismatch = close.is_some_and(|info| {
            info.code == CLOSE_PROTOCOL_MISMATCH || (as_4400 && info.code == 1012)
        });
        match mismatch {
            true if !self.model.breaks(ids::DEVICE_LINK_NO_REDIAL_4400) => {
                Some(Stopped::ProtocolMismatch)
            }
            // A device that never redials just goes quiet, as a broken CLI would.
            _ if self.model.breaks(ids::DEVICE_LINK_REDIAL) => Some(Stopped::GaveUp),
            _ => None,
        }
    }
}

/// The most of a discovery body the device reads: a few hundred bytes is all the spec's fields
/// take, and an instance that sends more must not make the device keep it (it is read again on
/// every dial).
pub const MAX_DISCOVERY_BYTES: usize = 64 * 1024;

/// A discovery answer's body as JSON, read a chunk at a time and given up past
/// [`MAX_DISCOVERY_BYTES`].
async fn discovery_body(mut response: reqwest::Response) -> Result<Value, String> {
    let too_big = || format!("the body is larger than {MAX_DISCOVERY_BYTES} bytes");
    if response
        .content_length()
        .is_some_and(|n| n > MAX_DISCOVERY_BYTES as u64)
    {
        return Err(too_big());
    }
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(|e| e.to_string())? {
        if body.len() + chunk.len() > MAX_DISCOVERY_BYTES {
            return Err(too_big());
        }
        body.extend_from_slice(&chunk);
    }
    serde_json::from_slice(&body).map_err(|e| format!("not JSON: {e}"))
}

/// Reads an instance's discovery and says which protocol a correct device would speak to it,
/// trying again until `patience` runs out (the instance under test may still be starting).
pub async fn probe_protocol(instance: &str, patience: Duration) -> Result<u8, String> {
    let url = format!("{}{DISCOVERY_PATH}", instance.trim_end_matches('/'));
    let http = harness::transport::http_client();
    let deadline = tokio::time::Instant::now() + patience;
    loop {
        let attempt = async {
            let response = http
                .get(&url)
                .timeout(Duration::from_secs(5))
                .send()
                .await
                .map_err(|e| e.to_string())?;
            let body = discovery_body(response).await?;
            harness::lembas::Discovery::from_value(&body)
                .map(|d| d.protocol_for_device())
                .map_err(|e| e.to_string())
        };
        match attempt.await {
            Ok(protocol) => return Ok(protocol),
            Err(why) if tokio::time::Instant::now() >= deadline => {
                return Err(format!("discovery at {url}: {why}"));
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    }
}

impl DeviceDialer {
    /// The device's limits changed: once no session is working, close the link and dial again
    /// at once, so the client hears the new limits (spec, `_lembas/hello`).
    pub async fn relink(&self, sessions: &crate::sessions::Sessions) {
        // Not while a session works, nor before the answers of turns just ended are on the
        // wire: the client would lose them with the link.
        let waits = !sessions.registry().breaks(ids::DEVICE_LIMITS_WAIT);
        if sessions
            .registry()
            .breaks_way(ids::DEVICE_LIMITS_WAIT, "cancels_turn")
        {
            // Misbehaving: the running turns are cancelled, so the link closes sooner.
            sessions.registry().cancel_all().await;
        }
        // A request the device holds on purpose (a scenario's `hold`) is not waited for long.
        let mut answers_for = Duration::ZERO;
        const ANSWERS_GRACE: Duration = Duration::from_secs(2);
        const TICK: Duration = Duration::from_millis(50);
        loop {
            if !waits {
                break;
            }
            if sessions.registry().any_working().await {
                answers_for = Duration::ZERO;
            } else if answers_for < ANSWERS_GRACE
                && self.hub.current().is_some_and(|p| p.unanswered() > 0)
            {
                answers_for += TICK;
            } else {
                break;
            }
            tokio::time::sleep(TICK).await;
        }
        if let Some(peer) = self.hub.current() {
            self.relinking
                .store(true, std::sync::atomic::Ordering::Relaxed);
            peer.close(
                harness::transport::CLOSE_NORMAL,
                "the device's limits changed",
            );
        }
    }
}

impl Dialer for DeviceDialer {
    fn dial<'a>(
        &'a self,
        request: DialRequest,
    ) -> Pin<Box<dyn Future<Output = DialResult> + Send + 'a>> {
        Box::pin(self.dial_once(request))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// An instance whose discovery never ends: 16 KiB chunks of spaces (valid JSON padding), with
    /// no length said, for as long as the reader reads.
    async fn endless_discovery() -> String {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let address = listener.local_addr().expect("address");
        tokio::spawn(async move {
            while let Ok((mut socket, _)) = listener.accept().await {
                tokio::spawn(async move {
                    let mut request = [0u8; 4096];
                    let _ = socket.read(&mut request).await;
                    let head = "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n";
                    if socket.write_all(head.as_bytes()).await.is_err() {
                        return;
                    }
                    let chunk = format!("4000\r\n{}\r\n", " ".repeat(0x4000));
                    while socket.write_all(chunk.as_bytes()).await.is_ok() {}
                });
            }
        });
        format!("http://{address}")
    }

    #[tokio::test]
    async fn a_discovery_body_past_the_cap_is_given_up_not_kept() {
        let instance = endless_discovery().await;
        let why = probe_protocol(&instance, Duration::ZERO)
            .await
            .expect_err("an endless body is refused");
        assert!(why.contains("larger than"), "{why}");
    }
}
