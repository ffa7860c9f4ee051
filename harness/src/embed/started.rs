//! What a double says once it is up: to the command that runs it, where it listens, where its
//! control API does and its progress ([`Ready`]); to a test that embeds it, those and its hands
//! ([`Started`]).

use std::net::SocketAddr;
use std::sync::Arc;

use crate::engine::Progress;

/// What a double tells whoever runs it once it is up: where it listens (fake-instance), where
/// its control API listens (`--control`), and its progress, for `--events`.
#[derive(Debug, Clone)]
pub struct Ready {
    /// The instance's address (fake-instance only).
    pub addr: Option<SocketAddr>,
    /// The control API's address, when asked for.
    pub control: Option<SocketAddr>,
    /// How the run is getting on.
    pub progress: Arc<Progress>,
}

/// What a running double hands whoever embeds it, once it is up: where it listens (an address
/// for a double that serves, nothing for one that dials), its hands for actions from Rust (none
/// for a double whose actions are not taken from a test), its control API and its progress.
#[derive(Debug)]
pub struct Started<A, W = ()> {
    /// Where it listens.
    pub addr: W,
    /// Its hands, for actions from Rust.
    pub actor: Option<Arc<A>>,
    /// Where its control API listens.
    pub control: Option<SocketAddr>,
    /// How the run is getting on.
    pub progress: Arc<Progress>,
}

impl<A> Started<A, SocketAddr> {
    /// What the command that runs a double that serves is told.
    pub fn ready(&self) -> Ready {
        self.ready_at(Some(self.addr))
    }
}

impl<A> Started<A> {
    /// What the command that runs a double that dials is told.
    pub fn ready(&self) -> Ready {
        self.ready_at(None)
    }
}

impl<A, W> Started<A, W> {
    fn ready_at(&self, addr: Option<SocketAddr>) -> Ready {
        Ready {
            addr,
            control: self.control,
            progress: self.progress.clone(),
        }
    }
}
