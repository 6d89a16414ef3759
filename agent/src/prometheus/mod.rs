//! Prometheus exposition: an optional listener that serves the latest reports at `/metrics` in
//! the Prometheus text format (version 0.0.4), for sites that scrape rather than push.
//!
//! [`exposition`] turns reports into the text format; `listener` serves it: `GET /metrics` (any
//! query string), 404 for other paths, 405 for other methods, every connection at once on one
//! thread, each with a deadline, their number capped (see `listener` for the limits).

pub mod exposition;
mod help;
mod http;
mod listener;
mod served;

use std::net::TcpListener;
use std::sync::Arc;

use serde::{Deserialize, Deserializer};

pub use exposition::{Exposition, KEEP_REPORTS};
pub use http::{MAX_REQUEST_BYTES, MAX_REQUEST_LINE};
pub use listener::{
    CLIENT_TIMEOUT, DEFAULT_MAX_CONNECTIONS, MAX_SEND_BUFFER, RECV_BUFFER, SEND_BUFFER,
    SEND_BUFFER_BUDGET,
};
pub use served::PAGE_KEPT;

/// `[prometheus]` in the agent's configuration.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PrometheusConfig {
    /// Address to serve `/metrics` on (`"0.0.0.0:9634"`); empty: no listener.
    pub listen: String,
    /// Connections open at once, at least 1 (default 2048); a new one beyond resets the open
    /// connection nearest its deadline (mostly the longest-waiting client that has not finished
    /// its request). Held below half the open-file limit.
    #[serde(deserialize_with = "at_least_one")]
    pub max_connections: usize,
}

impl Default for PrometheusConfig {
    fn default() -> Self {
        PrometheusConfig {
            listen: String::new(),
            max_connections: DEFAULT_MAX_CONNECTIONS,
        }
    }
}

fn at_least_one<'de, D: Deserializer<'de>>(d: D) -> Result<usize, D::Error> {
    match usize::deserialize(d)? {
        0 => Err(serde::de::Error::custom(
            "max_connections = 0 would refuse every scrape: at least 1",
        )),
        n => Ok(n),
    }
}

/// The running listener: give it each report with [`Exporter::update`].
#[derive(Debug, Clone)]
pub struct Exporter {
    source: Arc<served::Source>,
}

impl Exporter {
    /// Binds `cfg.listen` and serves `/metrics` from a thread of its own.
    pub fn start(cfg: &PrometheusConfig) -> std::io::Result<Exporter> {
        let listener = TcpListener::bind(&cfg.listen)?;
        let cap = listener::cap_within_file_limit(cfg.max_connections);
        tracing::info!(
            listen = %listener.local_addr()?,
            max_connections = cap,
            "serving Prometheus metrics at /metrics"
        );
        let source = Arc::new(served::Source::default());
        let event_loop = listener::EventLoop::new(listener, Arc::clone(&source), cap)?;
        std::thread::Builder::new()
            .name("prometheus".into())
            .spawn(move || event_loop.run())?;
        Ok(Exporter { source })
    }

    /// Takes in a report: the series it carries are kept, and the page is made from them when a
    /// scrape asks for it (see `served`).
    pub fn update(&self, report: &[u8]) {
        // the agent wrote it: UTF-8, checked at the validator's speed, not chunk by chunk
        let text = match std::str::from_utf8(report) {
            Ok(text) => std::borrow::Cow::Borrowed(text),
            Err(_) => String::from_utf8_lossy(report),
        };
        self.source.take_report(&text);
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn max_connections_defaults_to_2048_and_refuses_0() {
        let cfg: PrometheusConfig = toml::from_str("listen = \"127.0.0.1:9634\"\n").unwrap();
        assert_eq!(cfg.max_connections, DEFAULT_MAX_CONNECTIONS);
        let cfg: PrometheusConfig = toml::from_str("max_connections = 10\n").unwrap();
        assert_eq!(cfg.max_connections, 10);
        let err = toml::from_str::<PrometheusConfig>("max_connections = 0\n").unwrap_err();
        assert!(err.to_string().contains("at least 1"), "{err}");
    }
}
