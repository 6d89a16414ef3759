//! storwatch-collector: receives InfluxDB line protocol from the site's agents (and any
//! InfluxDB client), authenticates and validates it, makes it durable in an fsync'd queue before
//! acknowledging, and forwards it to one or more InfluxDB outputs (v1, v2, v3 write APIs).
//!
//! * [`http`] — the routes (`/write`, `/api/v2/write`, `/api/v3/write_lp`, `/query`, `/ping`,
//!   `/health`, `/metrics`), tokens
//!   and rate limits, the listener (TLS/mTLS, timeouts, connection limit)
//! * [`ingest`] — body decoding, line validation (`storwatch_wire::lp`), the field-type map
//! * [`queue`] — the segment log with group commit
//! * [`target`] — the database a request names, checked against `targets.allow`, kept with
//!   its lines in the queue
//! * [`client`] — the outputs' HTTP client (hyper over rustls) and their URLs
//! * [`forward`] — batching, retries, per-status handling and dead letters towards InfluxDB
//! * [`heartbeat`] — last-seen per host
//! * [`metrics`] — counters and their Prometheus text
//! * [`start`] — wires it all together from a [`config::Config`]

pub mod client;
pub mod config;
pub mod forward;
mod hash;
pub mod heartbeat;
pub mod http;
pub mod ingest;
pub mod metrics;
pub mod queue;
pub mod target;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use storwatch_wire::lp::Backends;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::config::{Config, ConfigError};
use crate::forward::{Forwarder, Output};
use crate::heartbeat::LastSeen;
use crate::http::auth::{self, RateLimiter, Tokens};
use crate::http::{server, AppState};
use crate::ingest::{TypeMap, TypeMapError};
use crate::metrics::Metrics;
use crate::queue::{Queue, QueueError, QueueOptions};
use crate::target::Targets;

/// Why the collector cannot start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("listen address {0:?} is not an IP:port")]
    Listen(String),
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("token file {path}: {reason}")]
    Tokens { path: PathBuf, reason: String },
    #[error("no tokens configured: give --token-file, or --insecure-open on a loopback address")]
    NoTokens,
    #[error("--insecure-open is only allowed on a loopback address, not {0}")]
    OpenNotLoopback(SocketAddr),
    #[error("no outputs configured: give --output URL")]
    NoOutputs,
    #[error("two outputs are named {0:?}; give them distinct names")]
    DuplicateOutput(String),
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error(transparent)]
    Queue(#[from] QueueError),
    #[error("{path}: {source}")]
    Dir {
        path: std::path::PathBuf,
        source: std::io::Error,
    },
    #[error(transparent)]
    Types(#[from] TypeMapError),
    #[error(transparent)]
    Tls(#[from] server::TlsError),
    #[error("targets.allow: {0}")]
    Targets(#[from] target::TargetError),
}

/// A running collector.
#[derive(Debug)]
pub struct Collector {
    /// The address actually bound (useful with port 0).
    pub addr: SocketAddr,
    pub state: Arc<AppState>,
    /// The configuration it runs with (tokens follow reloads).
    config: Config,
    /// The dead-letter files' size limits every forwarder reads (replaced on reload).
    dead_letter_rotation: Arc<std::sync::RwLock<storwatch_wire::rotate::Rotation>>,
    stop: watch::Sender<bool>,
    tasks: Vec<JoinHandle<()>>,
}

impl Collector {
    /// Applies a new configuration (SIGHUP): the token file is read again — a token is rotated
    /// without a restart — and the settings a request or a heartbeat reads are replaced (see
    /// [`reloadable`]); every other setting that differs is named in a warning as taking effect
    /// at the next restart. A token file that cannot be used (missing, unparsable, open to
    /// other users, empty when the collector is not open) keeps the tokens in use; the other
    /// settings are applied all the same.
    pub fn reload(&mut self, new: Config) {
        match load_tokens(&new, self.addr) {
            Ok(tokens) => {
                let n = tokens.as_ref().map_or(0, Tokens::len);
                *self.state.tokens.write().unwrap_or_else(|e| e.into_inner()) = tokens;
                self.config.token_file = new.token_file.clone();
                self.config.insecure_open = new.insecure_open;
                tracing::info!(tokens = n, "configuration reloaded: tokens replaced");
            }
            Err(e) => {
                tracing::error!(error = %e, "reload: the tokens in use are kept");
            }
        }
        let (applied, changed, later) = reloadable(&self.config, &new);
        let st = &self.state;
        st.limiter.set(
            applied.limits.rate_limit_lines_per_s,
            applied.limits.rate_limit_burst_lines,
        );
        st.last_seen.set_limits(
            applied.heartbeat.max_hosts,
            applied.heartbeat.forget_after_s,
        );
        *st.limits.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(applied.limits.clone());
        *st.queue_cfg.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(applied.queue.clone());
        *self
            .dead_letter_rotation
            .write()
            .unwrap_or_else(|e| e.into_inner()) = applied.dead_letter;
        if new.targets != self.config.targets {
            match Targets::new(&new.targets.allow, st.targets().own()) {
                Ok(t) => {
                    *st.targets.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(t);
                    self.config.targets = new.targets.clone();
                    tracing::info!("reload: applied targets.allow");
                }
                Err(e) => tracing::error!(error = %e, "reload: targets.allow kept"),
            }
        }
        self.config = Config {
            targets: self.config.targets.clone(),
            ..applied
        };
        if !changed.is_empty() {
            tracing::info!(settings = changed.join(", "), "reload: applied");
        }
        if !later.is_empty() {
            tracing::warn!(
                settings = later.join(", "),
                "changed in the configuration; they take effect at the next restart"
            );
        }
    }
    /// Stops accepting, stops the forwarders after their current attempt, and waits a moment
    /// for them. Nothing is lost either way: acknowledged data is already on disk.
    pub async fn shutdown(self) {
        let _ = self.stop.send(true);
        for t in self.tasks {
            let _ = tokio::time::timeout(Duration::from_secs(5), t).await;
        }
    }
}

/// What a reload does with `new` over the running `old`: the configuration to run with (the
/// settings read per request or per heartbeat taken from `new`, every other one kept from
/// `old`), the names of the settings applied, and those that need a restart.
///
/// Applied at once: `limits.max_body_bytes`, `max_line_bytes`, `max_future_s`, `max_past_s`,
/// `body_timeout_s`, `rate_limit_lines_per_s`, `rate_limit_burst_lines`; `targets.allow` (in
/// [`Collector::reload`], as a bad name keeps the list in use);
/// `queue.high_watermark_bytes`, `retry_after_s`; `heartbeat.max_hosts`, `forget_after_s`;
/// `dead_letter.max_file_bytes`, `keep_files`.
/// At the next restart: `listen`, `queue_dir`, `outputs`, `tls`, `limits.max_decompressed_bytes`
/// (it sizes the queue's records), `header_read_timeout_s`, `idle_timeout_s`, `max_connections`,
/// `max_inflight_body_bytes`, `listen_backlog`; `queue.segment_bytes`; `heartbeat.interval_s`,
/// `measurement`, `host_tag`.
pub fn reloadable(old: &Config, new: &Config) -> (Config, Vec<&'static str>, Vec<&'static str>) {
    let mut run = old.clone();
    let mut applied = Vec::new();
    let mut later = Vec::new();
    macro_rules! live {
        ($($section:ident . $field:ident),* $(,)?) => {$(
            if new.$section.$field != old.$section.$field {
                run.$section.$field = new.$section.$field.clone();
                applied.push(concat!(stringify!($section), ".", stringify!($field)));
            }
        )*};
    }
    macro_rules! restart {
        ($($section:ident . $field:ident),* $(,)?) => {$(
            if new.$section.$field != old.$section.$field {
                later.push(concat!(stringify!($section), ".", stringify!($field)));
            }
        )*};
    }
    live!(
        limits.max_body_bytes,
        limits.max_line_bytes,
        limits.max_future_s,
        limits.max_past_s,
        limits.body_timeout_s,
        limits.rate_limit_lines_per_s,
        limits.rate_limit_burst_lines,
        queue.high_watermark_bytes,
        queue.retry_after_s,
        heartbeat.max_hosts,
        heartbeat.forget_after_s,
        dead_letter.max_file_bytes,
        dead_letter.keep_files,
    );
    restart!(
        limits.max_decompressed_bytes,
        limits.header_read_timeout_s,
        limits.idle_timeout_s,
        limits.max_connections,
        limits.max_inflight_body_bytes,
        limits.listen_backlog,
        queue.segment_bytes,
        heartbeat.interval_s,
        heartbeat.measurement,
        heartbeat.host_tag,
    );
    if new.listen != old.listen {
        later.push("listen");
    }
    if new.queue_dir != old.queue_dir {
        later.push("queue_dir");
    }
    if new.outputs != old.outputs {
        later.push("outputs");
    }
    if new.tls != old.tls {
        later.push("tls");
    }
    // A setting added without being sorted above still gets named.
    for (section, differs) in [
        ("limits", new.limits != run.limits),
        ("queue", new.queue != run.queue),
        ("heartbeat", new.heartbeat != run.heartbeat),
        ("dead_letter", new.dead_letter != run.dead_letter),
    ] {
        if differs && !later.iter().any(|l| l.starts_with(section)) {
            later.push(section);
        }
    }
    (run, applied, later)
}

fn load_tokens(cfg: &Config, addr: SocketAddr) -> Result<Option<Tokens>, StartError> {
    let loopback = addr.ip().is_loopback();
    if cfg.insecure_open && !loopback {
        return Err(StartError::OpenNotLoopback(addr));
    }
    let tokens = match &cfg.token_file {
        Some(path) if cfg.insecure_open && !path.exists() => None,
        Some(path) => Some(
            auth::load_token_file(path).map_err(|reason| StartError::Tokens {
                path: path.clone(),
                reason,
            })?,
        ),
        None => None,
    };
    match tokens {
        Some(t) if !t.is_empty() => Ok(Some(t)),
        _ if cfg.insecure_open => {
            tracing::warn!(listen = %addr, "running OPEN: no token is required (loopback only)");
            Ok(None)
        }
        _ => Err(StartError::NoTokens),
    }
}

/// Now, in nanoseconds since the Unix epoch.
pub(crate) fn now_ns() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

/// Opens the queue, starts the forwarders, the heartbeat and the listener.
pub async fn start(cfg: Config) -> Result<Collector, StartError> {
    let addr: SocketAddr = cfg
        .listen
        .parse()
        .map_err(|_| StartError::Listen(cfg.listen.clone()))?;
    let tokens = load_tokens(&cfg, addr)?;
    if cfg.outputs.is_empty() {
        return Err(StartError::NoOutputs);
    }
    let mut outputs = Vec::new();
    for o in &cfg.outputs {
        let out = Output::resolve(o)?;
        if outputs.iter().any(|x: &Output| x.name == out.name) {
            return Err(StartError::DuplicateOutput(out.name));
        }
        outputs.push(out);
    }
    // A remote-write output takes whatever an InfluxDB output takes: only those decide the rules
    // (none but remote-write outputs: 1.x's).
    let backends = Backends::of(
        &outputs
            .iter()
            .filter(|o| o.kind == config::OutputType::Influxdb)
            .map(|o| o.backend)
            .collect::<Vec<_>>(),
    );
    tracing::info!(versions = %backends.names(), "lines are validated by the rules of InfluxDB");
    let targets = Targets::new(
        &cfg.targets.allow,
        outputs.iter().map(Output::own_target).collect(),
    )?;
    let tls = server::tls_acceptor(&cfg.tls)?;

    let metrics = Arc::new(Metrics::default());
    let opts = QueueOptions {
        segment_bytes: cfg.queue.segment_bytes.max(1 << 20),
        // Accepted text can grow a little over the body (timestamps added), never 2x.
        max_record_bytes: cfg
            .limits
            .max_decompressed_bytes
            .saturating_mul(2)
            .max(1 << 20),
        fsync: true,
    };
    let (queue, recovery) = Queue::open(&cfg.queue_dir, opts, metrics.clone())?;
    if recovery.torn_bytes > 0 || recovery.corrupt_records > 0 {
        tracing::warn!(
            torn_bytes = recovery.torn_bytes,
            corrupt_records = recovery.corrupt_records,
            "queue recovered"
        );
    }
    let types = TypeMap::load(&cfg.queue_dir)?;
    let last_seen = Arc::new(
        LastSeen::load(Some(&cfg.queue_dir))
            .with_limits(cfg.heartbeat.max_hosts, cfg.heartbeat.forget_after_s),
    );
    let dead_dir = cfg.queue_dir.join("dead-letter");
    std::os::unix::fs::DirBuilderExt::mode(std::fs::DirBuilder::new().recursive(true), 0o700)
        .create(&dead_dir)
        .map_err(|source| StartError::Dir {
            path: dead_dir.clone(),
            source,
        })?;

    let (stop_tx, stop_rx) = watch::channel(false);
    let mut tasks = Vec::new();
    // Register every output's cursor before any forwarder runs, so segment release sees all.
    let mut forwarders = Vec::new();
    let dead_letter_rotation = Arc::new(std::sync::RwLock::new(cfg.dead_letter));
    for out in outputs {
        let om = metrics.add_output(&out.name);
        om.cursor.store(
            queue.load_cursor(&out.name),
            std::sync::atomic::Ordering::Relaxed,
        );
        forwarders.push(
            Forwarder::new(out, om, dead_dir.clone())?
                .with_dead_letter_rotation(dead_letter_rotation.clone()),
        );
    }
    for f in forwarders {
        tasks.push(tokio::spawn(f.run(
            queue.clone(),
            metrics.clone(),
            stop_rx.clone(),
        )));
    }

    if cfg.heartbeat.interval_s > 0 {
        let (q, ls, m, hb) = (
            queue.clone(),
            last_seen.clone(),
            metrics.clone(),
            cfg.heartbeat.clone(),
        );
        let mut stop = stop_rx.clone();
        tasks.push(tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_secs(hb.interval_s));
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            tick.tick().await;
            loop {
                tokio::select! {
                    _ = tick.tick() => {}
                    _ = stop.changed() => return,
                }
                let text = ls.heartbeat(&hb.measurement, &hb.host_tag, now_ns());
                if text.is_empty() {
                    continue;
                }
                let n = text.lines().count() as u64;
                match q.append(text.into_bytes()).await {
                    Ok(_) => {
                        m.heartbeat_lines
                            .fetch_add(n, std::sync::atomic::Ordering::Relaxed);
                    }
                    Err(e) => tracing::error!(error = %e, "cannot queue the heartbeat"),
                }
            }
        }));
    }

    let state = Arc::new(AppState {
        tokens: std::sync::RwLock::new(tokens),
        limiter: RateLimiter::new(
            cfg.limits.rate_limit_lines_per_s,
            cfg.limits.rate_limit_burst_lines,
        ),
        queue,
        types,
        last_seen,
        metrics: metrics.clone(),
        limits: std::sync::RwLock::new(Arc::new(cfg.limits.clone())),
        queue_cfg: std::sync::RwLock::new(Arc::new(cfg.queue.clone())),
        host_tag: cfg.heartbeat.host_tag.clone(),
        backends,
        targets: std::sync::RwLock::new(Arc::new(targets)),
        work_slots: tokio::sync::Semaphore::new(http::validation_slots()),
        inflight_kib: tokio::sync::Semaphore::new(
            (cfg.limits.max_inflight_body_bytes / 1024).max(1),
        ),
    });
    // std's and tokio's bind listen with a backlog of 128: too short for a fleet reconnecting
    // at once after a restart (SYN retries cost each agent 1, 3, 7 s).
    let socket = if addr.is_ipv4() {
        tokio::net::TcpSocket::new_v4()
    } else {
        tokio::net::TcpSocket::new_v6()
    }
    .and_then(|s| s.set_reuseaddr(true).map(|()| s))
    .and_then(|s| s.bind(addr).map(|()| s))
    .map_err(|source| StartError::Bind { addr, source })?;
    let listener = socket
        .listen(cfg.limits.listen_backlog.max(1))
        .map_err(|source| StartError::Bind { addr, source })?;
    let bound = listener
        .local_addr()
        .map_err(|source| StartError::Bind { addr, source })?;
    tasks.push(tokio::spawn(server::serve(
        listener,
        state.clone(),
        tls,
        cfg.limits.clone(),
        stop_rx,
    )));
    tracing::info!(listen = %bound, tls = cfg.tls.cert_file.is_some(), "collector ready");
    Ok(Collector {
        addr: bound,
        state,
        config: cfg,
        dead_letter_rotation,
        stop: stop_tx,
        tasks,
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_reload_applies_what_requests_read_and_names_what_needs_a_restart() {
        let old = Config::default();
        let mut new = old.clone();
        new.limits.max_body_bytes = 1 << 20;
        new.limits.rate_limit_lines_per_s = 10;
        new.heartbeat.max_hosts = 50;
        new.queue.retry_after_s = 3;
        new.limits.max_connections = 10;
        new.limits.max_decompressed_bytes = 1 << 30;
        new.heartbeat.interval_s = 5;
        new.dead_letter.keep_files = 2;
        new.listen = "0.0.0.0:9999".into();
        let (run, applied, later) = reloadable(&old, &new);
        assert_eq!(
            applied,
            [
                "limits.max_body_bytes",
                "limits.rate_limit_lines_per_s",
                "queue.retry_after_s",
                "heartbeat.max_hosts",
                "dead_letter.keep_files"
            ]
        );
        assert_eq!(run.dead_letter.keep_files, 2);
        assert_eq!(
            later,
            [
                "limits.max_decompressed_bytes",
                "limits.max_connections",
                "heartbeat.interval_s",
                "listen"
            ]
        );
        assert_eq!(run.limits.max_body_bytes, 1 << 20);
        assert_eq!(run.heartbeat.max_hosts, 50);
        assert_eq!(run.limits.max_connections, old.limits.max_connections);
        assert_eq!(
            run.limits.max_decompressed_bytes,
            old.limits.max_decompressed_bytes
        );
        assert_eq!(run.listen, old.listen);
        let (_, applied, later) = reloadable(&old, &old);
        assert!(applied.is_empty() && later.is_empty());
    }
}
