//! The daemon's misfortunes a scenario acts out: down for a while (refusing plugins), its
//! plugin links dropped, its browsers' network gone.

use std::sync::Arc;
use std::time::Duration;

use harness::jsonrpc::Peer;

use super::Daemon;

impl Daemon {
    /// Refuses plugins' dials for `span` (503), as a daemon that is down would.
    pub fn refuse_for(&self, span: Duration) {
        if let Ok(mut until) = self.refuse_until.lock() {
            *until = Some(tokio::time::Instant::now() + span);
        }
    }

    /// Whether the agent link refuses plugins now.
    pub fn refusing(&self) -> bool {
        self.refuse_until
            .lock()
            .is_ok_and(|u| u.is_some_and(|until| tokio::time::Instant::now() < until))
    }

    /// Closes every plugin link (the daemon drops them), with `code`; gives how many.
    pub fn drop_plugins(&self, code: u16) -> usize {
        // Every plugin link, those still in their handshake too.
        let peers: Vec<Arc<Peer>> = self
            .agents
            .lock()
            .map(|a| a.values().filter_map(|l| l.peer.clone()).collect())
            .unwrap_or_default();
        for peer in &peers {
            peer.close(code, "the daemon dropped the link");
        }
        peers.len()
    }

    /// Closes every browser's link at once (its network blinked). Gives how many there were
    /// and the sessions they were subscribed to.
    pub fn drop_browsers(&self, code: u16) -> (usize, Vec<String>) {
        // Out of the fan-out first, so what the web was shown stops growing before it is noted.
        let links: Vec<(Arc<Peer>, Option<String>)> = self
            .browsers
            .lock()
            .map(|mut b| b.drain().map(|(_, l)| (l.peer, l.subscribed)).collect())
            .unwrap_or_default();
        self.web.dropped();
        for (peer, _) in &links {
            peer.close(code, "the browser's network went away");
        }
        let subscribed = links.iter().filter_map(|(_, s)| s.clone()).collect();
        (links.len(), subscribed)
    }
}
