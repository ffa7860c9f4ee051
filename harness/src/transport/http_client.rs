//! The one HTTP client a runtime shares.

use std::collections::VecDeque;
use std::sync::Mutex;

/// The HTTP client of the current tokio runtime (a cheap clone of one shared client).
///
/// Building a `reqwest::Client` loads the platform's root certificates, which costs far more than
/// a loopback request; a self-test or a fleet builds a double per case or per device, so they
/// all share one client instead of loading the roots thousands of times. Per-request settings
/// (timeouts, headers) go on each request, never on the client.
///
/// One a runtime, not one a process: what a client sets going lives on the runtime that first
/// used it, so a client shared with a runtime that has since ended (a test's) hangs the requests
/// of another. And it keeps no idle connections: doubles come and go on ports the system hands
/// out again, and a kept connection could carry one run's request to another run's server.
///
/// The clients of the latest 32 runtimes are kept: a process that makes runtime
/// after runtime (a test suite, each test on its own) does not keep a client for every one that
/// has ended; a runtime whose client was let go builds another when it asks again.
pub fn http_client() -> reqwest::Client {
    static CLIENTS: Mutex<VecDeque<(Option<tokio::runtime::Id>, reqwest::Client)>> =
        Mutex::new(VecDeque::new());
    let runtime = tokio::runtime::Handle::try_current().ok().map(|h| h.id());
    let mut clients = CLIENTS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some((_, client)) = clients.iter().find(|(id, _)| *id == runtime) {
        return client.clone();
    }
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        .build()
        .unwrap_or_default();
    if clients.len() >= RUNTIMES_KEPT {
        clients.pop_front();
    }
    clients.push_back((runtime, client.clone()));
    client
}

/// How many runtimes' clients [`http_client`] keeps.
const RUNTIMES_KEPT: usize = 32;
