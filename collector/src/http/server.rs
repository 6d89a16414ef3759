//! The listener: TCP or TLS (optionally mutual), a connection limit, the header-read timeout
//! and an idle timeout, serving the router over HTTP/1.1.
//!
//! Slow clients are bounded three ways: a request's headers must be complete within
//! `header_read_timeout_s` of its first byte (of the connection, for its first request), a body
//! within `body_timeout_s` (the handler answers 408), and a connection that moves no byte for
//! `idle_timeout_s` is closed. Beyond `max_connections` new connections are closed at once, so a
//! crowd of slow clients cannot take every file descriptor.
//!
//! A refused request is answered before its body is read (a stranger, a database not allowed, a
//! queue above its high watermark, a body declared too large) or while it is read (too large,
//! too slow). hyper then stops reading and would close the socket with the rest of the body
//! unread, and the kernel answers a close with unread data by a reset: a client that sends its
//! whole body before reading (Python's http.client, the agent) gets a broken pipe or a reset,
//! never the answer or its Retry-After. So the listener closes gracefully, as a web server's
//! "lingering close" does: once hyper is done with a connection, it ends its own side (the client
//! reads the answer, then end-of-stream) and reads and discards what the client still sends, up
//! to `max_body_bytes` and for at most [`LINGER_MAX`] (or `body_timeout_s`, when shorter), then
//! closes. A client still sending past either bound gets the reset (see docs/collector.md).
//!
//! The header and idle bounds are kept here, not by hyper: hyper's header-read timer also runs
//! while a keep-alive connection waits for its next request, which would close an agent's
//! connection between two reports (10 s apart) after `header_read_timeout_s` instead of
//! `idle_timeout_s`.

use std::future::Future;
use std::io;
use std::path::Path;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::TcpListener;
use tokio::sync::{watch, Semaphore};

use super::AppState;
use crate::config::{Limits, TlsConfig};

/// Longest a connection is kept open after its last answer to read and discard the rest of a
/// refused body (`body_timeout_s` when that is shorter).
pub const LINGER_MAX: Duration = Duration::from_secs(10);

/// Errors setting up TLS.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("{path}: {reason}")]
    File { path: String, reason: String },
    #[error("TLS configuration: {0}")]
    Rustls(#[from] rustls::Error),
    #[error("client CA: {0}")]
    Verifier(String),
}

fn file_err(path: &Path, e: impl std::fmt::Display) -> TlsError {
    TlsError::File {
        path: path.display().to_string(),
        reason: e.to_string(),
    }
}

/// Builds the TLS acceptor when a certificate and key are configured.
pub fn tls_acceptor(cfg: &TlsConfig) -> Result<Option<tokio_rustls::TlsAcceptor>, TlsError> {
    let (Some(cert), Some(key)) = (&cfg.cert_file, &cfg.key_file) else {
        return Ok(None);
    };
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert)
        .map_err(|e| file_err(cert, e))?
        .collect::<Result<_, _>>()
        .map_err(|e| file_err(cert, e))?;
    if chain.is_empty() {
        return Err(file_err(cert, "no certificate found"));
    }
    super::auth::check_secret_file(key).map_err(|e| file_err(key, e))?;
    let key = PrivateKeyDer::from_pem_file(key).map_err(|e| file_err(key, e))?;
    let builder = rustls::ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()?;
    let builder = match &cfg.client_ca_file {
        Some(ca) => {
            let mut roots = rustls::RootCertStore::empty();
            for c in CertificateDer::pem_file_iter(ca).map_err(|e| file_err(ca, e))? {
                roots.add(c.map_err(|e| file_err(ca, e))?)?;
            }
            if roots.is_empty() {
                return Err(file_err(ca, "no CA certificate found"));
            }
            let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
                Arc::new(roots),
                provider,
            )
            .build()
            .map_err(|e| TlsError::Verifier(e.to_string()))?;
            builder.with_client_cert_verifier(verifier)
        }
        None => builder.with_no_client_auth(),
    };
    let mut config = builder.with_single_cert(chain, key)?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Some(tokio_rustls::TlsAcceptor::from(Arc::new(config))))
}

/// What the watchdog of one connection needs to know, in milliseconds since the connection began.
struct ConnState {
    origin: Instant,
    /// The last time a byte moved either way.
    last: AtomicU64,
    /// When the request being read began (its first byte; 0 for the connection's first
    /// request), or [`ConnState::NONE`] while no request is being read.
    request_start: AtomicU64,
    /// The last request has been answered: the next byte read begins a new request. (Not set by
    /// a `100 Continue`, which hyper writes before the body is read.)
    between_requests: AtomicBool,
}

impl ConnState {
    const NONE: u64 = u64::MAX;

    fn new() -> Self {
        Self {
            origin: Instant::now(),
            last: AtomicU64::new(0),
            request_start: AtomicU64::new(0),
            between_requests: AtomicBool::new(false),
        }
    }

    fn now_ms(&self) -> u64 {
        self.origin.elapsed().as_millis() as u64
    }

    fn read_bytes(&self) {
        let now = self.now_ms();
        self.last.store(now, Ordering::Relaxed);
        if self.between_requests.swap(false, Ordering::Relaxed) {
            self.request_start.store(now, Ordering::Relaxed);
        }
    }

    fn wrote_bytes(&self) {
        self.last.store(self.now_ms(), Ordering::Relaxed);
    }

    /// hyper calls the service once a request's headers are complete.
    fn headers_complete(&self) {
        self.request_start.store(Self::NONE, Ordering::Relaxed);
    }

    /// The handler has answered; its response is being written.
    fn answered(&self) {
        self.between_requests.store(true, Ordering::Relaxed);
    }

    /// Why the connection must be closed now, if it must; else how long until it may have to be.
    fn check(&self, header: Duration, idle: Duration) -> Result<Duration, Closed> {
        let now = self.now_ms();
        let idle_ms = idle.as_millis() as u64;
        let quiet = now.saturating_sub(self.last.load(Ordering::Relaxed));
        if quiet >= idle_ms {
            return Err(Closed::Idle);
        }
        let mut next = idle_ms - quiet;
        let start = self.request_start.load(Ordering::Relaxed);
        if start != Self::NONE {
            let header_ms = header.as_millis() as u64;
            let reading = now.saturating_sub(start);
            if reading >= header_ms {
                return Err(Closed::Headers);
            }
            next = next.min(header_ms - reading);
        }
        Ok(Duration::from_millis(next.max(10)))
    }
}

#[derive(Debug, PartialEq)]
enum Closed {
    Idle,
    Headers,
}

/// A stream that tells its [`ConnState`] when bytes move.
struct Tracked<T> {
    inner: T,
    state: Arc<ConnState>,
}

/// The router, telling the connection's [`ConnState`] when a request's headers are complete.
struct Marked<S> {
    inner: S,
    state: Arc<ConnState>,
}

impl<S, R> hyper::service::Service<R> for Marked<S>
where
    S: hyper::service::Service<R>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<S::Response, S::Error>> + Send>>;
    fn call(&self, req: R) -> Self::Future {
        self.state.headers_complete();
        let answer = self.inner.call(req);
        let state = self.state.clone();
        Box::pin(async move {
            let r = answer.await;
            state.answered();
            r
        })
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for Tracked<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let r = Pin::new(&mut self.inner).poll_read(cx, buf);
        if buf.filled().len() > before {
            self.state.read_bytes();
        }
        r
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Tracked<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let r = Pin::new(&mut self.inner).poll_write(cx, buf);
        if matches!(r, Poll::Ready(Ok(n)) if n > 0) {
            self.state.wrote_bytes();
        }
        r
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

async fn serve_conn<T>(io: T, router: Router, app: Arc<AppState>, limits: Limits)
where
    T: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let metrics = app.metrics.clone();
    let state = Arc::new(ConnState::new());
    let tracked = Tracked {
        inner: io,
        state: state.clone(),
    };
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        // bounded by the watchdog below: hyper's timer would also cut idle keep-alive connections
        .header_read_timeout(None)
        .keep_alive(true)
        .max_buf_size((limits.max_line_bytes * 2).max(64 << 10));
    let service = Marked {
        inner: TowerToHyperService::new(router),
        state: state.clone(),
    };
    // hyper hands the socket back instead of closing it, for the lingering close below
    let conn = builder
        .serve_connection(TokioIo::new(tracked), service)
        .without_shutdown();
    let header = Duration::from_secs(limits.header_read_timeout_s.max(1));
    let idle = Duration::from_secs(limits.idle_timeout_s.max(1));
    let watchdog = async {
        loop {
            match state.check(header, idle) {
                Ok(wait) => tokio::time::sleep(wait).await,
                Err(why) => return why,
            }
        }
    };
    let parts = tokio::select! {
        r = conn => match r {
            Ok(parts) => parts,
            Err(e) => {
                tracing::debug!(error = %e, "connection ended with an error");
                return;
            }
        },
        why = watchdog => {
            match why {
                Closed::Idle => {
                    metrics.connections_idle_closed.fetch_add(1, Ordering::Relaxed);
                }
                Closed::Headers => {
                    metrics.header_timeouts.fetch_add(1, Ordering::Relaxed);
                }
            }
            return;
        }
    };
    // The limits in force now: `max_body_bytes` and `body_timeout_s` are applied on reload.
    let now = app.limits();
    let time = Duration::from_secs(now.body_timeout_s.max(1)).min(LINGER_MAX);
    // Only the socket and a count are kept across the linger (up to `LINGER_MAX` per
    // connection): hyper's read buffer, which may hold the start of a refused body (up to
    // twice `max_line_bytes`), and the service are freed now.
    let hyper::server::conn::http1::Parts {
        io,
        read_buf,
        service,
        ..
    } = parts;
    let already = read_buf.len();
    drop((read_buf, service));
    let io = io.into_inner().inner;
    match linger(io, already, now.max_body_bytes, time).await {
        Lingered::Closed => {}
        cut => tracing::debug!(why = ?cut, "connection closed with the client still sending"),
    }
}

/// How a lingering close ended.
#[derive(Debug, PartialEq)]
enum Lingered {
    /// The client closed its side (or an error ended the connection): nothing left unread.
    Closed,
    /// The client sent more than the bound.
    TooMuch,
    /// The client was still sending when the time was up.
    TimeUp,
}

/// The lingering close: ends the write side (after the answer hyper wrote), then reads and
/// discards until the client closes its side, at most `max_bytes` (counting `already`, bytes
/// hyper had read and not used) and for at most `time`. Dropping the stream then closes it.
async fn linger<T>(mut io: T, already: usize, max_bytes: usize, time: Duration) -> Lingered
where
    T: AsyncRead + AsyncWrite + Unpin,
{
    let deadline = tokio::time::Instant::now() + time;
    if !matches!(
        tokio::time::timeout_at(deadline, io.shutdown()).await,
        Ok(Ok(()))
    ) {
        return Lingered::Closed;
    }
    let mut left = max_bytes.saturating_sub(already);
    let mut buf = [0u8; 8192];
    loop {
        match tokio::time::timeout_at(deadline, io.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) => return Lingered::Closed,
            Ok(Ok(n)) if n > left => return Lingered::TooMuch,
            Ok(Ok(n)) => left -= n,
            Err(_) => return Lingered::TimeUp,
        }
    }
}

/// Accepts connections until `stop` turns true.
pub async fn serve(
    listener: TcpListener,
    app: Arc<AppState>,
    tls: Option<tokio_rustls::TlsAcceptor>,
    limits: Limits,
    mut stop: watch::Receiver<bool>,
) {
    let router = super::app(app.clone());
    let metrics = app.metrics.clone();
    let slots = Arc::new(Semaphore::new(limits.max_connections.max(1)));
    loop {
        let accepted = tokio::select! {
            a = listener.accept() => a,
            _ = stop.changed() => return,
        };
        let (tcp, peer) = match accepted {
            Ok(a) => a,
            Err(e) => {
                // Out of file descriptors and the like: wait a little rather than spin.
                tracing::warn!(error = %e, "accept failed");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let Ok(permit) = slots.clone().try_acquire_owned() else {
            metrics.connections_refused.fetch_add(1, Ordering::Relaxed);
            drop(tcp);
            continue;
        };
        let _ = tcp.set_nodelay(true);
        let router = router.clone();
        let limits = limits.clone();
        let app = app.clone();
        let tls = tls.clone();
        tokio::spawn(async move {
            let _permit = permit;
            match tls {
                None => serve_conn(tcp, router, app, limits).await,
                Some(acceptor) => {
                    let handshake = Duration::from_secs(limits.header_read_timeout_s.max(1));
                    match tokio::time::timeout(handshake, acceptor.accept(tcp)).await {
                        Ok(Ok(stream)) => serve_conn(stream, router, app, limits).await,
                        Ok(Err(e)) => {
                            tracing::info!(peer = %peer, error = %e, "TLS handshake failed")
                        }
                        Err(_) => tracing::info!(peer = %peer, "TLS handshake timed out"),
                    }
                }
            }
        });
    }
}
