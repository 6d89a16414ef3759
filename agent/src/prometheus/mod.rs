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

use std::net::TcpListener;
use std::sync::{Arc, Mutex, PoisonError};

use serde::{Deserialize, Deserializer};

pub use exposition::{Exposition, KEEP_REPORTS};
pub use http::{MAX_REQUEST_BYTES, MAX_REQUEST_LINE};
pub use listener::{
    CLIENT_TIMEOUT, DEFAULT_MAX_CONNECTIONS, MAX_SEND_BUFFER, RECV_BUFFER, SEND_BUFFER,
    SEND_BUFFER_BUDGET,
};

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
    state: Arc<Mutex<Exposition>>,
    page: listener::Page,
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
        let page: listener::Page = Arc::new(Mutex::new(http::answer("200 OK", b"")));
        let event_loop = listener::EventLoop::new(listener, Arc::clone(&page), cap)?;
        std::thread::Builder::new()
            .name("prometheus".into())
            .spawn(move || event_loop.run())?;
        Ok(Exporter {
            state: Arc::new(Mutex::new(Exposition::default())),
            page,
        })
    }

    /// Takes in a report and renders the page the next scrapes get: the whole answer, made here
    /// once per report rather than per scrape. When no scrape is sending the page, it is
    /// written over in place (a scrape that comes meanwhile waits for the lock, the few
    /// milliseconds of the rendering), so that the agent holds one page, not two; else the new
    /// one is made beside it, and the scrape frees the old one when it is sent.
    pub fn update(&self, report: &[u8]) {
        // the agent wrote it: UTF-8, checked at the validator's speed, not chunk by chunk
        let text = match std::str::from_utf8(report) {
            Ok(text) => std::borrow::Cow::Borrowed(text),
            Err(_) => String::from_utf8_lossy(report),
        };
        let mut exposition = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        exposition.update(&text);
        let mut page = self.page.lock().unwrap_or_else(PoisonError::into_inner);
        match Arc::get_mut(&mut page) {
            Some(only) => only.render_again(|out| exposition.render_into(out)),
            None => {
                let room = Vec::with_capacity(page.as_bytes().len() + (64 << 10));
                *page = Arc::new(http::answer_in(room, |out| exposition.render_into(out)));
            }
        }
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

    #[test]
    fn a_page_being_sent_is_left_as_it_is_and_an_idle_one_is_written_over() {
        let cfg = PrometheusConfig {
            listen: "127.0.0.1:0".into(),
            ..PrometheusConfig::default()
        };
        let x = Exporter::start(&cfg).unwrap();
        let page = |x: &Exporter| Arc::clone(&x.page.lock().unwrap());
        let text = |a: &http::Answer| String::from_utf8_lossy(a.as_bytes()).into_owned();
        x.update(b"disk,device=sda util_pct=1 1\n");
        let first = page(&x);
        assert!(text(&first).ends_with("storwatch_disk_util_percent{device=\"sda\"} 1\n"));
        // a scrape holds the page: the next report's page is another, this one unchanged
        x.update(b"disk,device=sda util_pct=2 2\n");
        let second = page(&x);
        assert!(!Arc::ptr_eq(&first, &second));
        assert!(
            text(&first).ends_with("{device=\"sda\"} 1\n"),
            "{}",
            text(&first)
        );
        assert!(
            text(&second).ends_with("{device=\"sda\"} 2\n"),
            "{}",
            text(&second)
        );
        // nobody holds it: written over where it is, the same answer as a new page would be
        let at = second.as_bytes().as_ptr();
        drop((first, second));
        x.update(b"disk,device=sda util_pct=3 3\n");
        let third = page(&x);
        assert_eq!(
            third.as_bytes().as_ptr(),
            at,
            "the same buffer (the same head length)"
        );
        let mut e = Exposition::default();
        for r in ["util_pct=1 1", "util_pct=2 2", "util_pct=3 3"] {
            e.update(&format!("disk,device=sda {r}\n"));
        }
        assert_eq!(
            third.as_bytes(),
            http::answer("200 OK", e.render().as_bytes()).as_bytes()
        );
    }
}
