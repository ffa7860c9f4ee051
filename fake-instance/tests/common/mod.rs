//! What fake-instance's tests share: an `HttpState` of the test's own, served on a free
//! loopback port, so the test can read its journals; and fake-instance itself spawned with
//! options set by hand; the wait for its process to exit; the check that no process outlives a
//! run.

use std::process::Child;
use std::time::{Duration, Instant};

use fake_instance::http::HttpState;
use tokio::sync::oneshot;

#[allow(dead_code)] // each test file uses what it needs of this module
pub mod pids;
#[allow(dead_code)] // each test file uses what it needs of this module
pub mod process;
#[allow(dead_code)] // each test file uses what it needs of this module
pub mod spawned;

/// A served HTTP API; dropping it stops the server.
#[allow(dead_code)] // each test file uses what it needs of this module
pub struct Served {
    /// `http://127.0.0.1:PORT`.
    pub url: String,
    _stop: oneshot::Sender<()>,
}

/// Serves `state`'s routes until the returned value is dropped.
#[allow(dead_code)] // each test file uses what it needs of this module
pub async fn serve(state: HttpState) -> Served {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a port");
    let addr = listener.local_addr().expect("an address");
    let (stop, stop_rx) = oneshot::channel::<()>();
    let app = fake_instance::http::router(state);
    tokio::spawn(async move {
        let _ = axum::serve(listener, app)
            .with_graceful_shutdown(async {
                let _ = stop_rx.await;
            })
            .await;
    });
    Served {
        url: format!("http://{addr}"),
        _stop: stop,
    }
}

/// Waits for a fake-instance process, at most `limit`, killing it then; its exit code.
#[allow(dead_code)] // each test file uses what it needs of this module
pub fn wait(child: &mut Child, limit: Duration) -> i32 {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(status) = child.try_wait().expect("wait") {
            return status.code().unwrap_or(-1);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("fake-instance did not exit within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}
