//! The one HTTP client a process shares.

use std::sync::OnceLock;

/// The process's HTTP client (a cheap clone of one shared client).
///
/// Building a `reqwest::Client` loads the platform's root certificates, which costs far more than
/// a loopback request; a self-test or a fleet builds a double per case or per device, so they
/// all share one client, and its connection pool, instead of loading the roots thousands of
/// times. Per-request settings (timeouts, headers) go on each request, never on the client.
///
/// It keeps no idle connections: doubles come and go on ports the system hands out again, and
/// a connection kept from one run could carry the next run's request to a server that is gone
/// (or to the old run's handlers, still serving it). A loopback connection costs far less.
pub fn http_client() -> reqwest::Client {
    static CLIENT: OnceLock<reqwest::Client> = OnceLock::new();
    CLIENT
        .get_or_init(|| {
            reqwest::Client::builder()
                .pool_max_idle_per_host(0)
                .build()
                .unwrap_or_default()
        })
        .clone()
}
