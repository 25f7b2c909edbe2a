//! The accept loop. axum's own `serve` sets no timeouts, and 300 idle sockets exhausted a
//! 256-descriptor limit; this one serves HTTP/1.1 through hyper with:
//! - a header-read timeout, which hyper also runs while a keep-alive connection sits idle
//!   between requests (so it is the idle timeout too);
//! - caps on connections that have not yet authenticated, in all and per source address, with
//!   a reserve for the probes and agents ([`super::admission`]).
//!
//! The body-read timeout is the handlers' ([`super::read_body`]). Upgraded connections and
//! streamed responses are not cut by these: hyper times only the reading of request heads.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use std::convert::Infallible;

use axum::Router;
use axum::http::Request;
use hyper::body::Incoming;
use hyper::server::conn::http1::Builder;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio_rustls::TlsAcceptor;
use toolgate_domain::CancellationToken;
use tower::ServiceExt;

use toolgate_fleet::PeerCertificate;

use super::admission::{Admission, Connection, RESERVE_HEADER_READ, allowed_in_reserve};
use super::{AppState, mcp_endpoint};

/// Per-connection limits of plain HTTP requests.
#[derive(Clone, Copy, Debug)]
pub struct ConnectionLimits {
    /// Time to receive a request's head; also how long an idle keep-alive connection lives.
    pub header_read: Duration,
    /// Time to receive a request's whole body.
    pub body_read: Duration,
    /// Connections open at once that have not yet authenticated.
    pub max_unauthenticated: usize,
    /// Of those, how many one source address may hold.
    pub max_unauthenticated_per_address: usize,
    /// Past the cap, places kept for the probes and agents (see [`super::admission`]).
    pub reserved: usize,
}

impl Default for ConnectionLimits {
    fn default() -> Self {
        Self {
            header_read: Duration::from_secs(15),
            body_read: Duration::from_secs(30),
            max_unauthenticated: 128,
            max_unauthenticated_per_address: 64,
            reserved: 16,
        }
    }
}

/// A listener's TLS: its acceptor, and whether it asks for client certificates (the agent
/// listener with mutual TLS, docs/trust.md).
#[derive(Clone)]
pub struct ListenerTls {
    pub acceptor: TlsAcceptor,
    pub client_certificates: bool,
}

impl ListenerTls {
    /// Server-authenticated TLS only.
    pub fn server(acceptor: TlsAcceptor) -> Self {
        Self { acceptor, client_certificates: false }
    }
}

/// The answer a connection let in through the reserve gets for any other path.
fn reserve_refusal() -> axum::response::Response {
    let body = serde_json::json!({
        "error": "busy",
        "message": "the server is at its cap of connections that have not authenticated; retry shortly",
    });
    let mut response = super::json_response(axum::http::StatusCode::SERVICE_UNAVAILABLE, body.to_string());
    let headers = response.headers_mut();
    headers.insert(axum::http::header::RETRY_AFTER, axum::http::HeaderValue::from_static("1"));
    headers.insert(axum::http::header::CONNECTION, axum::http::HeaderValue::from_static("close"));
    response
}

/// Serves `app` on `listener` until `shutdown` resolves, then lets in-flight requests finish.
/// With `tls`, each connection's TLS handshake must end within the header-read timeout.
/// With `mcp`, requests to the MCP endpoint's paths go to it straight, ahead of the router:
/// the busiest route skips the router's per-request boxing and its extensions (the router
/// serves the same paths, with the same function, to in-process callers).
pub async fn serve(
    listener: TcpListener,
    app: Router,
    mcp: Option<Arc<AppState>>,
    limits: ConnectionLimits,
    tls: Option<ListenerTls>,
    shutdown: impl Future<Output = ()>,
) -> std::io::Result<()> {
    let admission = Admission::new(limits.max_unauthenticated, limits.max_unauthenticated_per_address, limits.reserved);
    // Shutdown: `stop` asks every connection to finish its request in flight and close; each
    // connection holds a `live` receiver, so `closed()` resolves when the last one is gone.
    let stop = CancellationToken::new();
    let (live_tx, live_rx) = watch::channel(());
    let mut builder = Builder::new();
    builder.timer(TokioTimer::new()).header_read_timeout(limits.header_read).keep_alive(true);
    let mut reserve_builder = builder.clone();
    reserve_builder.header_read_timeout(limits.header_read.min(RESERVE_HEADER_READ));
    tokio::pin!(shutdown);
    loop {
        let (stream, remote) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    // Out of descriptors, say: back off briefly rather than spin.
                    tracing::warn!("accept failed: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            _ = &mut shutdown => break,
        };
        // Every answer goes out at once: with Nagle's algorithm a large answer's last segment
        // waited for the client's delayed ACK (~40 ms per answer over one connection).
        if let Err(e) = stream.set_nodelay(true) {
            tracing::debug!(%remote, "could not set TCP_NODELAY: {e}");
        }
        let Some(mut connection) = admission.admit(remote) else {
            tracing::debug!(%remote, "too many unauthenticated connections (in all or from this address); closed");
            drop(stream);
            continue;
        };
        connection.over_tls = tls.is_some();
        let builder = if connection.reserved { reserve_builder.clone() } else { builder.clone() };
        let (app, mcp) = (app.clone(), mcp.clone());
        let (stop, live) = (stop.clone(), live_rx.clone());
        let tls = tls.clone();
        tokio::spawn(async move {
            let Some(tls) = tls else {
                let service = service(app, mcp, connection, None);
                serve_io(&builder, TokioIo::new(stream), service, stop, remote).await;
                drop(live);
                return;
            };
            match tokio::time::timeout(limits.header_read, tls.acceptor.accept(stream)).await {
                Ok(Ok(stream)) => {
                    // Only the agent listener asks for client certificates; what came is the hello's to judge.
                    let peer = tls
                        .client_certificates
                        .then(|| Arc::new(crate::trust::mutual_tls::peer_certificate(stream.get_ref().1)));
                    let service = service(app, mcp, connection, peer);
                    serve_io(&builder, TokioIo::new(stream), service, stop, remote).await
                }
                Ok(Err(e)) => tracing::debug!(%remote, "TLS handshake failed: {e}"),
                Err(_) => tracing::debug!(%remote, "TLS handshake timed out"),
            }
            drop(live);
        });
    }
    drop(listener);
    stop.cancel();
    drop(live_rx);
    live_tx.closed().await;
    Ok(())
}

/// Requests of one connection: to the MCP endpoint straight, the rest through the router,
/// with the connection's admission (and, on the agent listener, its client certificate).
fn service(
    app: Router,
    mcp: Option<Arc<AppState>>,
    connection: Connection,
    peer: Option<Arc<PeerCertificate>>,
) -> impl hyper::service::Service<Request<Incoming>, Response = axum::response::Response, Error = Infallible, Future: Send>
+ Clone
+ Send
+ 'static {
    hyper::service::service_fn(move |mut request: Request<Incoming>| {
        let (app, mcp, connection, peer) = (app.clone(), mcp.clone(), connection.clone(), peer.clone());
        async move {
            if connection.reserved && !allowed_in_reserve(request.uri().path()) {
                return Ok(reserve_refusal());
            }
            match mcp {
                Some(state) if mcp_endpoint::is_mcp_path(request.uri().path()) => {
                    Ok::<_, Infallible>(mcp_endpoint::exchange(&state, &connection, request).await)
                }
                _ => {
                    request.extensions_mut().insert(connection);
                    if let Some(peer) = peer {
                        request.extensions_mut().insert(peer);
                    }
                    app.oneshot(request).await
                }
            }
        }
    })
}

/// One connection, plain or TLS, until it ends or the server stops (then its request in
/// flight finishes first).
async fn serve_io<IO, S, B>(builder: &Builder, io: IO, service: S, stop: CancellationToken, remote: SocketAddr)
where
    IO: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
    S: hyper::service::HttpService<hyper::body::Incoming, ResBody = B>,
    S::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    B: http_body::Body + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let connection = builder.serve_connection(io, service).with_upgrades();
    tokio::pin!(connection);
    let ended = tokio::select! {
        ended = connection.as_mut() => ended,
        _ = stop.cancelled() => {
            connection.as_mut().graceful_shutdown();
            connection.await
        }
    };
    if let Err(e) = ended {
        tracing::debug!(%remote, "connection ended: {e}");
    }
}
