//! Opening a run and taking its port, which the LLeMbas instance and the lvmh daemon do alike:
//! the journal and the run's directory first, then the address (or the socket a restart keeps).

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;

use harness::double::Opened;

use super::start_error::StartError;

/// The run opened and its listener bound, with the address it listens on.
pub(crate) async fn open_listening(
    journal: Option<&Path>,
    listen: SocketAddr,
    bound: Option<&Arc<std::net::TcpListener>>,
) -> Result<(Opened, tokio::net::TcpListener, SocketAddr), StartError> {
    let opened = Opened::open(journal, false)?;
    let (listener, addr) = harness::double::bind(listen, bound)
        .await
        .map_err(|source| StartError::Listen {
            addr: listen,
            source,
        })?;
    Ok((opened, listener, addr))
}
