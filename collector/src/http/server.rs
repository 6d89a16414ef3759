//! The listener: TCP or TLS (optionally mutual), a connection limit, the header-read timeout
//! and an idle timeout, serving the router over HTTP/1.1.
//!
//! Slow clients are bounded three ways: headers must arrive within `header_read_timeout_s`
//! (hyper), a body within `body_timeout_s` (the handler answers 408), and a connection that
//! moves no byte for `idle_timeout_s` is closed here. Beyond `max_connections` new connections
//! are closed at once, so a crowd of slow clients cannot take every file descriptor.

use std::io;
use std::path::Path;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpListener;
use tokio::sync::{watch, Semaphore};

use crate::config::{Limits, TlsConfig};
use crate::metrics::Metrics;

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

/// A stream that remembers when it last moved a byte.
struct Tracked<T> {
    inner: T,
    last: Arc<AtomicU64>,
    origin: Instant,
}

impl<T> Tracked<T> {
    fn touch(&self) {
        self.last
            .store(self.origin.elapsed().as_millis() as u64, Ordering::Relaxed);
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
            self.touch();
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
            self.touch();
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

async fn serve_conn<T>(io: T, router: Router, limits: Limits, metrics: Arc<Metrics>)
where
    T: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let origin = Instant::now();
    let last = Arc::new(AtomicU64::new(0));
    let tracked = Tracked {
        inner: io,
        last: last.clone(),
        origin,
    };
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(Duration::from_secs(limits.header_read_timeout_s.max(1)))
        .keep_alive(true)
        .max_buf_size((limits.max_line_bytes * 2).max(64 << 10));
    let conn = builder.serve_connection(TokioIo::new(tracked), TowerToHyperService::new(router));
    let idle = Duration::from_secs(limits.idle_timeout_s.max(1));
    let watchdog = async {
        loop {
            tokio::time::sleep(idle / 4).await;
            let quiet = origin.elapsed().as_millis() as u64 - last.load(Ordering::Relaxed);
            if quiet >= idle.as_millis() as u64 {
                return;
            }
        }
    };
    tokio::select! {
        r = conn => {
            if let Err(e) = r {
                tracing::debug!(error = %e, "connection ended with an error");
            }
        }
        _ = watchdog => {
            metrics.connections_idle_closed.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// Accepts connections until `stop` turns true.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    tls: Option<tokio_rustls::TlsAcceptor>,
    limits: Limits,
    metrics: Arc<Metrics>,
    mut stop: watch::Receiver<bool>,
) {
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
        let metrics = metrics.clone();
        let tls = tls.clone();
        tokio::spawn(async move {
            let _permit = permit;
            match tls {
                None => serve_conn(tcp, router, limits, metrics).await,
                Some(acceptor) => {
                    let handshake = Duration::from_secs(limits.header_read_timeout_s.max(1));
                    match tokio::time::timeout(handshake, acceptor.accept(tcp)).await {
                        Ok(Ok(stream)) => serve_conn(stream, router, limits, metrics).await,
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
