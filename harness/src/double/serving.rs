//! A double's server: the port bound (or handed over by a restart), served with the guarded
//! transport's manners, and stopped so the port is free again.

use std::net::SocketAddr;
use std::sync::Arc;

/// Takes the listener a restart handed over (`bound`), or binds `listen`; gives it and the
/// address it has.
pub async fn bind(
    listen: SocketAddr,
    bound: Option<&Arc<std::net::TcpListener>>,
) -> std::io::Result<(tokio::net::TcpListener, SocketAddr)> {
    let listener = match bound {
        Some(bound) => bound
            .try_clone()
            .and_then(tokio::net::TcpListener::from_std)?,
        None => tokio::net::TcpListener::bind(listen).await?,
    };
    let addr = listener.local_addr()?;
    Ok((listener, addr))
}

/// Serves `app` on `listener` until the task is aborted. Connections that send no request, or
/// sit idle, are closed, and TCP_NODELAY is set (see [`crate::transport::guarded`]).
pub fn serve(
    listener: tokio::net::TcpListener,
    app: axum::Router,
    what: &'static str,
) -> tokio::task::JoinHandle<()> {
    let app = app.into_make_service_with_connect_info::<crate::transport::guarded::RemoteAddr>();
    let listener = crate::transport::guarded::GuardedListener::new(listener);
    tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, app).await {
            tracing::error!("{what} stopped: {e}");
        }
    })
}

/// Stops a server [`serve`] started, and waits until its listener is closed: the address is
/// free when this returns (a restart binds it again).
pub async fn stop(server: tokio::task::JoinHandle<()>) {
    server.abort();
    let _ = server.await;
}
