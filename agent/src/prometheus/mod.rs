//! Prometheus exposition: an optional listener that serves the latest reports at `/metrics` in
//! the Prometheus text format (version 0.0.4), for sites that scrape rather than push.
//!
//! [`exposition`] turns reports into the text format; the listener serves it.
//!
//! The listener is one thread serving one connection at a time: `GET /metrics` (any query
//! string), 404 for other paths, 405 for other methods; a client gets 5 s to send its request
//! (at most 8 KiB of headers) and to read the answer.

pub mod exposition;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use serde::Deserialize;

pub use exposition::{Exposition, KEEP_REPORTS};

/// Request headers read at most.
const MAX_REQUEST_BYTES: usize = 8 << 10;
/// Time a client gets to send its request and to read the answer.
const CLIENT_TIMEOUT: Duration = Duration::from_secs(5);

/// `[prometheus]` in the agent's configuration.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PrometheusConfig {
    /// Address to serve `/metrics` on (`"0.0.0.0:9634"`); empty: no listener.
    pub listen: String,
}

/// The running listener: give it each report with [`Exporter::update`].
#[derive(Debug, Clone)]
pub struct Exporter {
    state: Arc<Mutex<Exposition>>,
    page: Arc<Mutex<Arc<String>>>,
}

impl Exporter {
    /// Binds `listen` and serves `/metrics` from a thread of its own.
    pub fn start(listen: &str) -> std::io::Result<Exporter> {
        let listener = TcpListener::bind(listen)?;
        tracing::info!(listen = %listener.local_addr()?, "serving Prometheus metrics at /metrics");
        let exporter = Exporter {
            state: Arc::new(Mutex::new(Exposition::default())),
            page: Arc::new(Mutex::new(Arc::new(String::new()))),
        };
        let page = Arc::clone(&exporter.page);
        std::thread::Builder::new()
            .name("prometheus".into())
            .spawn(move || serve(&listener, &page))?;
        Ok(exporter)
    }

    /// Takes in a report and renders the page the next scrapes get.
    pub fn update(&self, report: &[u8]) {
        let text = String::from_utf8_lossy(report);
        let mut st = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        st.update(&text);
        let rendered = Arc::new(st.render());
        *self.page.lock().unwrap_or_else(PoisonError::into_inner) = rendered;
    }
}

fn serve(listener: &TcpListener, page: &Mutex<Arc<String>>) {
    for conn in listener.incoming() {
        match conn {
            Ok(stream) => {
                let body = Arc::clone(&page.lock().unwrap_or_else(PoisonError::into_inner));
                if let Err(e) = answer(stream, &body) {
                    tracing::debug!(error = %e, "prometheus: client went away");
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, "prometheus: accept failed");
                std::thread::sleep(Duration::from_millis(100));
            }
        }
    }
}

fn answer(mut stream: TcpStream, body: &str) -> std::io::Result<()> {
    stream.set_read_timeout(Some(CLIENT_TIMEOUT))?;
    stream.set_write_timeout(Some(CLIENT_TIMEOUT))?;
    let mut req = Vec::with_capacity(1024);
    let mut buf = [0u8; 1024];
    while !req.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = stream.read(&mut buf)?;
        if n == 0 {
            break;
        }
        req.extend_from_slice(buf.get(..n).unwrap_or_default());
        if req.len() > MAX_REQUEST_BYTES {
            return respond(&mut stream, "431 Request Header Fields Too Large", "");
        }
    }
    let line = String::from_utf8_lossy(&req);
    let mut parts = line.split_whitespace();
    let (method, target) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    let path = target.split('?').next().unwrap_or("");
    match (method, path) {
        ("GET", "/metrics") => respond(&mut stream, "200 OK", body),
        ("GET", _) => respond(&mut stream, "404 Not Found", "see /metrics\n"),
        _ => respond(&mut stream, "405 Method Not Allowed", ""),
    }
}

fn respond(stream: &mut TcpStream, status: &str, body: &str) -> std::io::Result<()> {
    let head = format!(
        "HTTP/1.1 {status}\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes())?;
    stream.write_all(body.as_bytes())?;
    stream.flush()
}
