//! Delivery to an InfluxDB-compatible write URL: the collector, or InfluxDB v1/v2/v3 itself.
//!
//! `send()` only queues the batch in memory for the spool thread, which appends it to the
//! durable [`Spool`] (write + fdatasync) and wakes the delivery thread: the sampling loop never
//! waits for the network, nor for a disk that is slow to sync (the spool may well sit on a busy
//! disk of the very server being watched). Up to [`INBOX_MAX_BYTES`] wait in memory; beyond
//! that the oldest queued batches are dropped and counted. The delivery thread POSTs the spool
//! oldest-first, gzip'd, with `Authorization: Token …`, and moves the spool's cursor past a batch
//! only after a 2xx (or after a deliberate drop, below).
//!
//! Response handling:
//!
//! | answer | what happens |
//! | --- | --- |
//! | 2xx | delivered: acknowledged in the spool |
//! | 400 naming the bad lines (v1 `unable to parse …`/`dropped=N`, v3 partial-write JSON) | the good lines were written: the batch is acknowledged, the named lines counted in `dropped_lines` and logged |
//! | 400/422 without line details (v2 whole-batch reject) | a batch of several records is resent one record at a time; a single record still refused is dropped, counted and logged |
//! | 413 | as above: split into records, a single record still too large is dropped |
//! | 401, 403, 404, other 3xx/4xx | data kept; logged as an error (once a minute) because only an operator can fix it; the token file is re-read |
//! | 408, 425, 429, 5xx, timeout, refused | data kept; retried with capped exponential backoff and jitter, never sooner than `Retry-After` (seconds) |
//!
//! Resending is safe: every line carries its timestamp, and InfluxDB overwrites a point with the
//! same measurement, tag set and timestamp, so a replay never duplicates.
//!
//! The client is ureq (blocking, one thread, rustls with the ring provider); see
//! `docs/delivery.md` for why not reqwest + tokio.

use std::collections::VecDeque;
use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde::Deserialize;

use super::spool::{count_lines, Batch, Position, Spool, SpoolError, SpoolStats};
use super::{Sink, SinkError, SinkStats};

/// How the agent delivers to an `http(s)://` output (`[output.http]` in the config file).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HttpConfig {
    /// File holding the API token, sent as `Authorization: Token <token>` (InfluxDB v2/v3, the
    /// collector, and InfluxDB 1.8+ with `username:password` as the token). Surrounding
    /// whitespace is ignored; the file is read at start and again after a 401/403. Unset: no
    /// `Authorization` header (an open collector on loopback, or `u=`/`p=` in a v1 URL).
    pub token_file: Option<PathBuf>,
    /// Compress request bodies with gzip (`Content-Encoding: gzip`); line protocol shrinks about
    /// tenfold.
    pub gzip: bool,
    /// Directory of the durable spool holding batches until the server acknowledges them.
    pub spool_dir: PathBuf,
    /// Upper bound of the spool's files, bytes; beyond it the oldest data is dropped (counted in
    /// the `agent` measurement's `dropped_lines` and logged). At one 10 s report of a 200-disk
    /// server with its MD and multipath lines (~172 KB) the default holds about four hours.
    pub spool_max_bytes: u64,
    /// Whole-request timeout (connect, send, response), seconds.
    pub timeout_s: f64,
    /// Largest uncompressed request body, bytes, when a backlog is drained; a single batch larger
    /// than this still goes out alone.
    pub max_batch_bytes: usize,
    /// First retry delay after a failure, seconds; doubled on each further failure.
    pub backoff_min_s: f64,
    /// Cap of the retry delay, seconds.
    pub backoff_max_s: f64,
    /// PEM file of the CA certificates that sign the server's certificate; replaces the built-in
    /// Mozilla roots. Unset: the built-in roots.
    pub ca_file: Option<PathBuf>,
    /// PEM certificate chain presented to the server for mutual TLS (with `client_key_file`).
    pub client_cert_file: Option<PathBuf>,
    /// PEM private key (PKCS#8, PKCS#1 or SEC1) of `client_cert_file`.
    pub client_key_file: Option<PathBuf>,
}

impl Default for HttpConfig {
    fn default() -> Self {
        Self {
            token_file: None,
            gzip: true,
            spool_dir: PathBuf::from("/var/lib/storwatch/spool"),
            spool_max_bytes: 256 << 20,
            timeout_s: 10.0,
            max_batch_bytes: 1 << 20,
            backoff_min_s: 1.0,
            backoff_max_s: 60.0,
            ca_file: None,
            client_cert_file: None,
            client_key_file: None,
        }
    }
}

fn config_err(msg: impl Into<String>) -> SinkError {
    SinkError::Config(msg.into())
}

fn seconds(name: &str, v: f64) -> Result<Duration, SinkError> {
    if v.is_finite() && v > 0.0 && v <= 86_400.0 {
        Ok(Duration::from_secs_f64(v))
    } else {
        Err(config_err(format!(
            "{name} = {v}: expected seconds between 0 and 86400"
        )))
    }
}

/// The write API a URL speaks, told from its path (a reverse-proxy prefix is allowed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteApi {
    /// InfluxDB 1.x `/write?db=…` (also the collector).
    V1,
    /// InfluxDB 2.x `/api/v2/write?org=…&bucket=…` (also the collector and InfluxDB 3).
    V2,
    /// InfluxDB 3 `/api/v3/write_lp?db=…`.
    V3,
}

impl WriteApi {
    /// Tells the API from the URL's path and checks the query names a database or bucket.
    pub fn detect(url: &str) -> Result<Self, SinkError> {
        let uri: ureq::http::Uri = url
            .parse()
            .map_err(|e| config_err(format!("output URL {url:?}: {e}")))?;
        match uri.scheme_str() {
            Some("http") | Some("https") => {}
            _ => return Err(SinkError::BadSpec(url.to_owned())),
        }
        let path = uri.path().trim_end_matches('/');
        let (api, needs) = if path.ends_with("/api/v3/write_lp") {
            (Self::V3, "db")
        } else if path.ends_with("/api/v2/write") {
            (Self::V2, "bucket")
        } else if path.ends_with("/write") {
            (Self::V1, "db")
        } else {
            return Err(config_err(format!(
                "output URL {url:?}: path must end in /write (InfluxDB 1.x, collector), \
                 /api/v2/write (2.x) or /api/v3/write_lp (3.x)"
            )));
        };
        let has = uri.query().unwrap_or("").split('&').any(|kv| {
            let mut it = kv.splitn(2, '=');
            it.next() == Some(needs) && it.next().is_some_and(|v| !v.is_empty())
        });
        if !has {
            return Err(config_err(format!(
                "output URL {url:?}: the {api:?} write API needs `{needs}=` in the query"
            )));
        }
        Ok(api)
    }
}

/// What to do with a batch after the server answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// 2xx: acknowledged.
    Delivered,
    /// The server wrote the good lines and refused `lines` named ones.
    Partial {
        /// Lines refused.
        lines: u64,
    },
    /// Refused as a whole without line details (400/422).
    Rejected,
    /// 413: the body is too large for the server.
    TooLarge,
    /// Transient: try again later, not before `after` when the server said so.
    Retry {
        /// `Retry-After`, when given in seconds.
        after: Option<Duration>,
    },
    /// Needs an operator (auth, wrong URL): keep the data, retry slowly, log loudly.
    Keep,
}

/// Longest `Retry-After` honoured; a larger value is treated as this.
const MAX_RETRY_AFTER: Duration = Duration::from_secs(3600);

/// `Retry-After` in delta-seconds. The HTTP-date form is not used by InfluxDB or the collector
/// and falls back to the normal backoff.
pub fn parse_retry_after(v: &str) -> Option<Duration> {
    v.trim()
        .parse::<u64>()
        .ok()
        .map(|s| Duration::from_secs(s).min(MAX_RETRY_AFTER))
}

/// How many lines a 400 body says were refused, when it says so.
///
/// Understands InfluxDB 1.x (`{"error":"partial write: unable to parse '…': …"}`, one
/// `unable to parse` per bad line, or `… dropped=N`), InfluxDB 3's partial-write JSON
/// (`{"error":"…","data":[{"line_number":…},…]}`), the collector's
/// (`"partial write: line 3: …; accepted=N rejected=M"` with a `lines` array) and the same texts
/// in a v2-style `message`.
pub fn rejected_lines(body: &str) -> Option<u64> {
    if let Ok(v) = serde_json::from_str::<serde_json::Value>(body) {
        match v.get("data") {
            Some(serde_json::Value::Array(items)) if !items.is_empty() => {
                return Some(items.len() as u64)
            }
            Some(serde_json::Value::Object(o)) if o.contains_key("line_number") => return Some(1),
            _ => {}
        }
        for key in ["error", "message"] {
            if let Some(n) = v
                .get(key)
                .and_then(|e| e.as_str())
                .and_then(rejected_in_text)
            {
                return Some(n);
            }
        }
        return match v.get("lines") {
            Some(serde_json::Value::Array(items)) if !items.is_empty() => Some(items.len() as u64),
            _ => None,
        };
    }
    rejected_in_text(body)
}

/// The number after `key` (as in `dropped=3`), when positive.
fn count_after(text: &str, key: &str) -> Option<u64> {
    let (_, rest) = text.split_once(key)?;
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok().filter(|&n| n > 0)
}

fn rejected_in_text(text: &str) -> Option<u64> {
    // the collector states the exact count; its per-line list may be cut short
    if let Some(n) = count_after(text, "rejected=") {
        return Some(n);
    }
    let unparsable = text.matches("unable to parse").count() as u64;
    if unparsable > 0 {
        return Some(unparsable);
    }
    count_after(text, "dropped=")
}

/// Maps a response to what the delivery thread does next.
pub fn classify(status: u16, retry_after: Option<&str>, body: &str) -> Verdict {
    match status {
        200..=299 => Verdict::Delivered,
        400 => match rejected_lines(body) {
            Some(lines) => Verdict::Partial { lines },
            None => Verdict::Rejected,
        },
        422 => Verdict::Rejected,
        413 => Verdict::TooLarge,
        408 | 425 | 429 | 500..=599 => Verdict::Retry {
            after: retry_after.and_then(parse_retry_after),
        },
        _ => Verdict::Keep,
    }
}

/// Capped exponential backoff with "equal jitter": half the step fixed, half random, so a fleet
/// of agents that lost the server together does not come back in lockstep.
#[derive(Debug)]
struct Backoff {
    min: Duration,
    max: Duration,
    failures: u32,
}

impl Backoff {
    fn next(&mut self, retry_after: Option<Duration>) -> Duration {
        let step = self
            .min
            .saturating_mul(1u32 << self.failures.min(20))
            .min(self.max);
        self.failures = self.failures.saturating_add(1);
        let half = step / 2;
        let jittered = half + half.mul_f64(fastrand::f64());
        match retry_after {
            // the server's word is a floor; a little jitter on top spreads the fleet
            Some(after) => after.max(jittered) + (after / 4).mul_f64(fastrand::f64()),
            None => jittered,
        }
    }

    fn reset(&mut self) {
        self.failures = 0;
    }
}

/// Counters of the delivery thread, beyond the spool's own.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DeliveryStats {
    /// The spool's content and losses.
    pub spool: SpoolStats,
    /// Lines acknowledged with a 2xx.
    pub delivered_lines: u64,
    /// Requests answered with a 2xx.
    pub delivered_requests: u64,
    /// Lines the server refused as malformed (dropped, not retried).
    pub rejected_lines: u64,
    /// Lines of batches larger than the whole spool, refused by `send`.
    pub oversized_lines: u64,
    /// Lines that never reached the spool: queued batches dropped while the spool thread was
    /// stuck (a disk not syncing), or batches the spool could not write (disk full, I/O error).
    pub unspooled_lines: u64,
    /// Requests that failed (transport error or a non-2xx answer).
    pub failed_requests: u64,
    /// Status of the last answer, 0 before the first one or after a transport error.
    pub last_status: u16,
}

#[derive(Debug, Default)]
struct Counters {
    delivered_lines: AtomicU64,
    delivered_requests: AtomicU64,
    rejected_lines: AtomicU64,
    oversized_lines: AtomicU64,
    unspooled_lines: AtomicU64,
    failed_requests: AtomicU64,
    last_status: AtomicU64,
    /// The last attempt failed and delivery is backing off.
    failing: AtomicBool,
}

#[derive(Debug, Default)]
struct Signal {
    /// New data was spooled.
    kick: bool,
    /// Drain requested by `flush`.
    stop: bool,
}

/// Batches handed over by `send`, waiting for the spool thread.
#[derive(Debug, Default)]
struct Inbox {
    queue: VecDeque<Vec<u8>>,
    bytes: usize,
    /// The spool thread is appending a batch it took from the queue.
    in_flight: bool,
    /// No more batches: the spool thread drains the queue and exits.
    closed: bool,
}

/// Memory the queue in front of the spool may hold: about ten minutes of a 200-disk server's
/// reports (~50 KiB each), or a stalled disk's worth of them before the oldest go.
pub const INBOX_MAX_BYTES: usize = 16 << 20;

#[derive(Debug)]
struct Shared {
    inbox: Mutex<Inbox>,
    /// Notified when a batch is queued (spool thread) and when one has been spooled (waiters).
    inbox_cv: Condvar,
    /// The spool's stats as of its last change, read by `stats()` without waiting for the spool.
    spool_stats: Mutex<SpoolStats>,
    spool: Mutex<Spool>,
    signal: Mutex<Signal>,
    wake: Condvar,
    /// Notified after every acknowledged batch, for `flush`.
    progress: Condvar,
    counters: Counters,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // a panic elsewhere must not take delivery down with it; the data is still consistent
    // because every spool mutation is completed before the guard is released
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Shared {
    /// Runs `f` on the spool and refreshes the stats copy.
    fn with_spool<R>(&self, f: impl FnOnce(&mut Spool) -> R) -> R {
        let mut spool = lock(&self.spool);
        let r = f(&mut spool);
        *lock(&self.spool_stats) = spool.stats();
        r
    }

    fn spool_stats(&self) -> SpoolStats {
        *lock(&self.spool_stats)
    }

    fn kick(&self) {
        lock(&self.signal).kick = true;
        self.wake.notify_all();
    }

    fn stopping(&self) -> bool {
        lock(&self.signal).stop
    }

    /// Waits for new data (or stop) up to `timeout`.
    fn wait_for_work(&self, timeout: Duration) {
        let mut s = lock(&self.signal);
        let deadline = Instant::now() + timeout;
        while !s.kick && !s.stop {
            let now = Instant::now();
            if now >= deadline {
                break;
            }
            s = self
                .wake
                .wait_timeout(s, deadline - now)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
        s.kick = false;
    }

    /// Sleeps `d` unless asked to stop; new data does not cut a backoff short.
    fn pause(&self, d: Duration) {
        let mut s = lock(&self.signal);
        let deadline = Instant::now() + d;
        while !s.stop {
            let now = Instant::now();
            if now >= deadline {
                break;
            }
            s = self
                .wake
                .wait_timeout(s, deadline - now)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
    }
}

/// Logs a repeated condition at most once per interval, with how often it happened meanwhile.
#[derive(Debug, Default)]
struct Throttle {
    last: Option<Instant>,
    suppressed: u64,
}

impl Throttle {
    const EVERY: Duration = Duration::from_secs(60);

    /// `Some(suppressed since the last log)` when it is time to log again.
    fn ready(&mut self) -> Option<u64> {
        let now = Instant::now();
        if self
            .last
            .is_some_and(|t| now.duration_since(t) < Self::EVERY)
        {
            self.suppressed += 1;
            return None;
        }
        self.last = Some(now);
        Some(std::mem::take(&mut self.suppressed))
    }

    fn reset(&mut self) {
        *self = Self::default();
    }
}

fn read_token(path: &std::path::Path) -> Result<String, SinkError> {
    let text = std::fs::read_to_string(path).map_err(|source| SinkError::Io {
        target: format!("token file {}", path.display()),
        source,
    })?;
    let token = text.trim();
    if token.is_empty() {
        return Err(config_err(format!(
            "token file {} is empty",
            path.display()
        )));
    }
    if token.contains(['\r', '\n']) {
        return Err(config_err(format!(
            "token file {} holds more than one line",
            path.display()
        )));
    }
    Ok(token.to_owned())
}

fn read_pem(path: &std::path::Path) -> Result<Vec<u8>, SinkError> {
    std::fs::read(path).map_err(|source| SinkError::Io {
        target: path.display().to_string(),
        source,
    })
}

fn tls_config(cfg: &HttpConfig) -> Result<ureq::tls::TlsConfig, SinkError> {
    use ureq::tls::{parse_pem, Certificate, ClientCert, PemItem, PrivateKey, RootCerts};
    let mut b = ureq::tls::TlsConfig::builder().provider(ureq::tls::TlsProvider::Rustls);
    if let Some(ca) = &cfg.ca_file {
        let pem = read_pem(ca)?;
        let certs: Vec<Certificate<'static>> = parse_pem(&pem)
            .filter_map(|item| match item {
                Ok(PemItem::Certificate(c)) => Some(c),
                _ => None,
            })
            .collect();
        if certs.is_empty() {
            return Err(config_err(format!(
                "ca_file {}: no PEM certificate found",
                ca.display()
            )));
        }
        b = b.root_certs(RootCerts::new_with_certs(&certs));
    }
    match (&cfg.client_cert_file, &cfg.client_key_file) {
        (None, None) => {}
        (Some(cert), Some(key)) => {
            let pem = read_pem(cert)?;
            let chain: Vec<Certificate<'static>> = parse_pem(&pem)
                .filter_map(|item| match item {
                    Ok(PemItem::Certificate(c)) => Some(c),
                    _ => None,
                })
                .collect();
            if chain.is_empty() {
                return Err(config_err(format!(
                    "client_cert_file {}: no PEM certificate found",
                    cert.display()
                )));
            }
            let key_pem = read_pem(key)?;
            let key = PrivateKey::from_pem(&key_pem)
                .map_err(|e| config_err(format!("client_key_file {}: {e}", key.display())))?;
            b = b.client_cert(Some(ClientCert::new_with_certs(&chain, key)));
        }
        _ => {
            return Err(config_err(
                "client_cert_file and client_key_file must be given together",
            ))
        }
    }
    Ok(b.build())
}

/// Delivers batches to an InfluxDB-compatible write URL through a durable spool.
#[derive(Debug)]
pub struct HttpSink {
    shared: Arc<Shared>,
    spooler: Option<JoinHandle<()>>,
    worker: Option<JoinHandle<()>>,
    flush_timeout: Duration,
}

impl HttpSink {
    /// Checks the URL and configuration, opens the spool (picking up what an earlier run left
    /// undelivered) and starts the delivery thread.
    pub fn open(url: &str, cfg: &HttpConfig) -> Result<Self, SinkError> {
        let api = WriteApi::detect(url)?;
        let timeout = seconds("timeout_s", cfg.timeout_s)?;
        let backoff_min = seconds("backoff_min_s", cfg.backoff_min_s)?;
        let backoff_max = seconds("backoff_max_s", cfg.backoff_max_s)?;
        if backoff_max < backoff_min {
            return Err(config_err("backoff_max_s is smaller than backoff_min_s"));
        }
        if cfg.max_batch_bytes == 0 {
            return Err(config_err("max_batch_bytes must be positive"));
        }
        let https = url.starts_with("https://");
        if !https
            && (cfg.ca_file.is_some()
                || cfg.client_cert_file.is_some()
                || cfg.client_key_file.is_some())
        {
            return Err(config_err(
                "ca_file/client_cert_file/client_key_file need an https:// output URL",
            ));
        }
        let token = cfg.token_file.as_deref().map(read_token).transpose()?;
        if token.is_some() && !https && !is_loopback(url) {
            tracing::warn!(url, "sending a token over plain http to a remote host");
        }
        let agent_config = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(timeout))
            .max_redirects(0)
            .max_idle_connections(1)
            .max_idle_connections_per_host(1)
            .user_agent(concat!("storwatch-agent/", env!("CARGO_PKG_VERSION")))
            .tls_config(tls_config(cfg)?)
            .build();
        let agent = ureq::Agent::new_with_config(agent_config);

        let spool = Spool::open(&cfg.spool_dir, cfg.spool_max_bytes)?;
        let shared = Arc::new(Shared {
            inbox: Mutex::new(Inbox::default()),
            inbox_cv: Condvar::new(),
            spool_stats: Mutex::new(spool.stats()),
            spool: Mutex::new(spool),
            signal: Mutex::new(Signal::default()),
            wake: Condvar::new(),
            progress: Condvar::new(),
            counters: Counters::default(),
        });
        let worker = Worker {
            shared: Arc::clone(&shared),
            agent,
            url: url.to_owned(),
            api,
            token,
            token_file: cfg.token_file.clone(),
            gzip: cfg.gzip,
            max_batch_bytes: cfg.max_batch_bytes,
            backoff: Backoff {
                min: backoff_min,
                max: backoff_max,
                failures: 0,
            },
            body: Vec::new(),
            gz: Vec::new(),
            single_until: None,
            failing_since: None,
            transient_log: Throttle::default(),
            operator_log: Throttle::default(),
        };
        let spooler = {
            let shared = Arc::clone(&shared);
            std::thread::Builder::new()
                .name("storwatch-spool".into())
                .spawn(move || spool_run(&shared))
                .map_err(|source| SinkError::Io {
                    target: "spool thread".into(),
                    source,
                })?
        };
        let handle = std::thread::Builder::new()
            .name("storwatch-delivery".into())
            .spawn(move || worker.run())
            .map_err(|source| SinkError::Io {
                target: "delivery thread".into(),
                source,
            })?;
        tracing::info!(url, ?api, spool = %cfg.spool_dir.display(), "http output ready");
        Ok(Self {
            shared,
            spooler: Some(spooler),
            worker: Some(handle),
            flush_timeout: timeout,
        })
    }

    /// Spool and delivery counters.
    pub fn delivery_stats(&self) -> DeliveryStats {
        let c = &self.shared.counters;
        DeliveryStats {
            spool: self.shared.spool_stats(),
            delivered_lines: c.delivered_lines.load(Ordering::Relaxed),
            delivered_requests: c.delivered_requests.load(Ordering::Relaxed),
            rejected_lines: c.rejected_lines.load(Ordering::Relaxed),
            oversized_lines: c.oversized_lines.load(Ordering::Relaxed),
            unspooled_lines: c.unspooled_lines.load(Ordering::Relaxed),
            failed_requests: c.failed_requests.load(Ordering::SeqCst),
            last_status: c.last_status.load(Ordering::Relaxed) as u16,
        }
    }

    /// Waits until every batch `send` took is in the spool (written and synced), or `timeout`
    /// passes; true when so.
    pub fn wait_spooled(&self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        let mut inbox = lock(&self.shared.inbox);
        while !inbox.queue.is_empty() || inbox.in_flight {
            let now = Instant::now();
            if now >= deadline {
                return false;
            }
            inbox = self
                .shared
                .inbox_cv
                .wait_timeout(inbox, deadline - now)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
        true
    }

    /// Waits until everything sent is spooled and the spool is drained, or `timeout` passes;
    /// true when drained.
    pub fn wait_drained(&self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        if !self.wait_spooled(timeout) {
            return false;
        }
        self.shared.kick();
        let mut spool = lock(&self.shared.spool);
        loop {
            if spool.is_drained() {
                return true;
            }
            let now = Instant::now();
            if now >= deadline {
                return false;
            }
            spool = self
                .shared
                .progress
                .wait_timeout(spool, (deadline - now).min(Duration::from_millis(200)))
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
    }
}

fn is_loopback(url: &str) -> bool {
    url.parse::<ureq::http::Uri>()
        .ok()
        .and_then(|u| u.host().map(str::to_owned))
        .is_some_and(|h| h == "localhost" || h == "127.0.0.1" || h == "[::1]" || h == "::1")
}

impl Sink for HttpSink {
    /// Queues the batch for the spool thread; never waits for the disk or the network.
    fn send(&mut self, batch: &[u8]) -> Result<(), SinkError> {
        if batch.is_empty() {
            return Ok(());
        }
        let mut dropped = 0;
        {
            let mut inbox = lock(&self.shared.inbox);
            while inbox.bytes + batch.len() > INBOX_MAX_BYTES {
                let Some(old) = inbox.queue.pop_front() else {
                    break;
                };
                inbox.bytes -= old.len();
                dropped += count_lines(&old);
            }
            inbox.bytes += batch.len();
            inbox.queue.push_back(batch.to_vec());
        }
        self.shared.inbox_cv.notify_all();
        if dropped > 0 {
            self.shared
                .counters
                .unspooled_lines
                .fetch_add(dropped, Ordering::Relaxed);
            tracing::warn!(
                dropped_lines = dropped,
                "the spool thread is behind (a disk not syncing?): oldest queued reports dropped"
            );
        }
        Ok(())
    }

    /// Gives the delivery thread up to the request timeout to drain the spool, unless the server
    /// is failing anyway; whatever is left stays spooled for the next start.
    fn flush(&mut self) -> Result<(), SinkError> {
        if !self.wait_spooled(self.flush_timeout) {
            tracing::warn!("the spool is slow to sync: the last reports are spooled at exit");
        }
        let failing = self.shared.counters.failing.load(Ordering::SeqCst);
        if failing || !self.wait_drained(self.flush_timeout) {
            let s = self.shared.spool_stats();
            tracing::info!(
                pending_lines = s.pending_lines,
                pending_bytes = s.pending_bytes,
                "undelivered data stays in the spool for the next start"
            );
        }
        Ok(())
    }

    fn stats(&self) -> SinkStats {
        let d = self.delivery_stats();
        SinkStats {
            spool_bytes: d.spool.pending_bytes,
            dropped_lines: d.spool.overflow_dropped_lines
                + d.spool.corrupt_lines
                + d.rejected_lines
                + d.oversized_lines
                + d.unspooled_lines,
        }
    }
}

impl Drop for HttpSink {
    fn drop(&mut self) {
        // everything `send` took goes into the spool before the threads stop
        lock(&self.shared.inbox).closed = true;
        self.shared.inbox_cv.notify_all();
        if let Some(h) = self.spooler.take() {
            let _ = h.join();
        }
        lock(&self.shared.signal).stop = true;
        self.shared.wake.notify_all();
        if let Some(h) = self.worker.take() {
            // at most one request timeout: the thread checks `stop` between requests
            let _ = h.join();
        }
    }
}

/// The spool thread: appends each queued batch to the spool (write + fdatasync), oldest first,
/// and wakes the delivery thread. Exits once the inbox is closed and empty.
fn spool_run(shared: &Shared) {
    let mut errors = Throttle::default();
    let mut full = Throttle::default();
    loop {
        let batch = {
            let mut inbox = lock(&shared.inbox);
            loop {
                if let Some(b) = inbox.queue.pop_front() {
                    inbox.bytes -= b.len();
                    inbox.in_flight = true;
                    break Some(b);
                }
                if inbox.closed {
                    break None;
                }
                inbox = shared
                    .inbox_cv
                    .wait(inbox)
                    .unwrap_or_else(PoisonError::into_inner);
            }
        };
        let Some(batch) = batch else {
            return;
        };
        match shared.with_spool(|spool| spool.append(&batch)) {
            Ok(()) => full.reset(),
            Err(SpoolError::OutOfSpace { path, source }) if !lock(&shared.inbox).closed => {
                // Nothing was stored: keep the batch in memory, oldest first (the inbox's bound
                // still applies), and try again once space may be back.
                if let Some(suppressed) = full.ready() {
                    tracing::warn!(
                        path = %path.display(),
                        error = %source,
                        held_bytes = lock(&shared.inbox).bytes + batch.len(),
                        suppressed,
                        "spool filesystem full: reports are held in memory (up to {INBOX_MAX_BYTES} bytes) until space is back"
                    );
                }
                let mut inbox = lock(&shared.inbox);
                inbox.bytes += batch.len();
                inbox.queue.push_front(batch);
                inbox.in_flight = false;
                shared.inbox_cv.notify_all();
                let _ = shared
                    .inbox_cv
                    .wait_timeout_while(inbox, SPOOL_FULL_RETRY, |i| !i.closed)
                    .unwrap_or_else(PoisonError::into_inner);
                continue;
            }
            Err(SpoolError::TooLarge { bytes, limit }) => {
                let lines = count_lines(&batch);
                shared
                    .counters
                    .oversized_lines
                    .fetch_add(lines, Ordering::Relaxed);
                tracing::warn!(
                    bytes,
                    limit,
                    lines,
                    "batch larger than the whole spool: dropped"
                );
            }
            Err(e) => {
                let lines = count_lines(&batch);
                shared
                    .counters
                    .unspooled_lines
                    .fetch_add(lines, Ordering::Relaxed);
                if let Some(suppressed) = errors.ready() {
                    tracing::error!(error = %e, lines, suppressed, "cannot write the spool: report dropped");
                }
            }
        }
        lock(&shared.inbox).in_flight = false;
        shared.inbox_cv.notify_all();
        shared.kick();
    }
}

/// How long the spool thread waits before appending again after finding its filesystem full.
const SPOOL_FULL_RETRY: Duration = Duration::from_secs(5);
/// How long the idle thread sleeps before looking at the spool again without a wake-up.
const IDLE_POLL: Duration = Duration::from_secs(5);
/// Buffer capacity kept while idle.
const IDLE_BUFFER_BYTES: usize = 256 << 10;
/// Largest response body read (InfluxDB's error texts are short).
const MAX_RESPONSE_BYTES: u64 = 64 << 10;
/// gzip level: 1 compresses line protocol ~8x at a fraction of level 6's CPU (docs/delivery.md).
const GZIP_LEVEL: u32 = 1;

struct Worker {
    shared: Arc<Shared>,
    agent: ureq::Agent,
    url: String,
    api: WriteApi,
    token: Option<String>,
    token_file: Option<PathBuf>,
    gzip: bool,
    max_batch_bytes: usize,
    backoff: Backoff,
    body: Vec<u8>,
    gz: Vec<u8>,
    /// Send one record per request until the cursor passes this (after a whole-batch reject).
    single_until: Option<Position>,
    failing_since: Option<Instant>,
    transient_log: Throttle,
    operator_log: Throttle,
}

/// A server's answer.
struct Answer {
    status: u16,
    retry_after: Option<String>,
    body: String,
}

impl Worker {
    fn run(mut self) {
        while !self.shared.stopping() {
            let single = self.single_until.is_some();
            let peeked = {
                let max_records = if single { 1 } else { usize::MAX };
                let body = &mut self.body;
                let max_batch_bytes = self.max_batch_bytes;
                self.shared
                    .with_spool(|spool| spool.peek(max_batch_bytes, max_records, body))
            };
            let batch = match peeked {
                Ok(Some(b)) => b,
                Ok(None) => {
                    self.single_until = None;
                    // a drained backlog leaves batch-sized buffers; a 10 s report needs far less
                    if self.body.capacity() > IDLE_BUFFER_BYTES {
                        self.body = Vec::new();
                    }
                    if self.gz.capacity() > IDLE_BUFFER_BYTES {
                        self.gz = Vec::new();
                    }
                    self.shared.wait_for_work(IDLE_POLL);
                    continue;
                }
                Err(e) => {
                    if let Some(suppressed) = self.operator_log.ready() {
                        tracing::error!(error = %e, suppressed, "cannot read the spool");
                    }
                    let d = self.backoff.next(None);
                    self.shared.pause(d);
                    continue;
                }
            };
            if self.single_until.is_some_and(|until| batch.start >= until) {
                // past the batch that was refused as a whole: back to full batches
                self.single_until = None;
                continue;
            }
            let answer = self.post();
            let counters = &self.shared.counters;
            let verdict = match &answer {
                Ok(a) => {
                    counters
                        .last_status
                        .store(u64::from(a.status), Ordering::Relaxed);
                    classify(a.status, a.retry_after.as_deref(), &a.body)
                }
                Err(_) => {
                    counters.last_status.store(0, Ordering::Relaxed);
                    Verdict::Retry { after: None }
                }
            };
            if verdict != Verdict::Delivered {
                if matches!(verdict, Verdict::Retry { .. } | Verdict::Keep) {
                    // before the count, so whoever sees the failure also sees the state
                    counters.failing.store(true, Ordering::SeqCst);
                }
                counters.failed_requests.fetch_add(1, Ordering::SeqCst);
            }
            // only failures are logged: no formatting on the common path
            let why = match &answer {
                _ if verdict == Verdict::Delivered => String::new(),
                Ok(a) => format!("HTTP {}: {}", a.status, excerpt(&a.body)),
                Err(e) => e.clone(),
            };
            self.act(verdict, &batch, &why);
        }
    }

    fn act(&mut self, verdict: Verdict, batch: &Batch, why: &str) {
        let shared = Arc::clone(&self.shared);
        let counters = &shared.counters;
        match verdict {
            Verdict::Delivered => {
                // counters first: whoever waits for the spool to drain then sees them final
                counters
                    .delivered_lines
                    .fetch_add(batch.lines, Ordering::Relaxed);
                counters.delivered_requests.fetch_add(1, Ordering::Relaxed);
                counters.failing.store(false, Ordering::Relaxed);
                self.ack(batch);
                self.backoff.reset();
                if let Some(since) = self.failing_since.take() {
                    tracing::info!(
                        url = %self.url,
                        after_s = since.elapsed().as_secs(),
                        "delivery recovered; draining the spool"
                    );
                }
                self.transient_log.reset();
                self.operator_log.reset();
            }
            Verdict::Partial { lines } => {
                // the server kept the good lines; resending would only repeat the refusal
                let lines = lines.min(batch.lines);
                counters.failing.store(false, Ordering::Relaxed);
                counters.rejected_lines.fetch_add(lines, Ordering::Relaxed);
                counters
                    .delivered_lines
                    .fetch_add(batch.lines - lines, Ordering::Relaxed);
                self.ack(batch);
                tracing::warn!(url = %self.url, dropped_lines = lines, "server refused malformed lines; dropped them: {why}");
                self.backoff.reset();
            }
            Verdict::Rejected | Verdict::TooLarge if batch.records > 1 => {
                // find the culprit: resend the same data one record per request
                tracing::info!(
                    records = batch.records,
                    "batch refused as a whole; resending it record by record: {why}"
                );
                self.single_until = Some(batch.end);
            }
            Verdict::Rejected | Verdict::TooLarge => {
                counters.failing.store(false, Ordering::Relaxed);
                counters
                    .rejected_lines
                    .fetch_add(batch.lines, Ordering::Relaxed);
                self.ack(batch);
                tracing::error!(url = %self.url, dropped_lines = batch.lines, "server refused a batch; dropped it: {why}");
                self.backoff.reset();
            }
            Verdict::Retry { after } => {
                self.failing_since.get_or_insert_with(Instant::now);
                let d = self.backoff.next(after);
                if let Some(suppressed) = self.transient_log.ready() {
                    let spool = self.shared.spool_stats();
                    tracing::warn!(
                        url = %self.url,
                        retry_in_ms = d.as_millis() as u64,
                        spooled_lines = spool.pending_lines,
                        suppressed,
                        "delivery failed, data kept in the spool: {why}"
                    );
                }
                self.shared.pause(d);
            }
            Verdict::Keep => {
                self.failing_since.get_or_insert_with(Instant::now);
                let d = self.backoff.next(None);
                if let Some(suppressed) = self.operator_log.ready() {
                    let spool = self.shared.spool_stats();
                    tracing::error!(
                        url = %self.url,
                        api = ?self.api,
                        spooled_lines = spool.pending_lines,
                        suppressed,
                        "server refuses delivery (check the URL and token); data kept in the spool: {why}"
                    );
                }
                self.reload_token();
                self.shared.pause(d);
            }
        }
    }

    fn ack(&mut self, batch: &Batch) {
        let acked = self.shared.with_spool(|spool| spool.ack(batch));
        if let Err(e) = acked {
            // the cursor stays behind: the batch is sent again, which overwrites, not duplicates
            tracing::error!(error = %e, "cannot record delivery in the spool");
        }
        self.shared.progress.notify_all();
    }

    fn reload_token(&mut self) {
        let Some(path) = &self.token_file else {
            return;
        };
        match read_token(path) {
            Ok(t) if Some(&t) != self.token.as_ref() => {
                tracing::info!(path = %path.display(), "token file changed; using the new token");
                self.token = Some(t);
            }
            Ok(_) => {}
            Err(e) => tracing::error!(error = %e, "cannot re-read the token file"),
        }
    }

    fn post(&mut self) -> Result<Answer, String> {
        let mut req = self
            .agent
            .post(&self.url)
            .header("Content-Type", "text/plain; charset=utf-8");
        if let Some(t) = &self.token {
            req = req.header("Authorization", format!("Token {t}"));
        }
        let sent = if self.gzip {
            self.gz.clear();
            let mut enc = flate2::write::GzEncoder::new(
                std::mem::take(&mut self.gz),
                flate2::Compression::new(GZIP_LEVEL),
            );
            enc.write_all(&self.body).map_err(|e| e.to_string())?;
            self.gz = enc.finish().map_err(|e| e.to_string())?;
            req.header("Content-Encoding", "gzip").send(&self.gz[..])
        } else {
            req.send(&self.body[..])
        };
        // a drained backlog must not leave megabytes behind in the thread's buffers
        if self.body.capacity() > 2 * self.max_batch_bytes.max(1 << 16) {
            self.body = Vec::new();
        }
        if self.gz.capacity() > self.max_batch_bytes.max(1 << 16) {
            self.gz = Vec::new();
        }
        let mut resp = sent.map_err(|e| e.to_string())?;
        let status = resp.status().as_u16();
        let retry_after = resp
            .headers()
            .get("retry-after")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        // a 2xx counts even if its body is cut off; for errors the text is only for the log
        let body = resp
            .body_mut()
            .with_config()
            .limit(MAX_RESPONSE_BYTES)
            .lossy_utf8(true)
            .read_to_string()
            .unwrap_or_default();
        Ok(Answer {
            status,
            retry_after,
            body,
        })
    }
}

/// The start of a response body, on one line, for a log message.
fn excerpt(body: &str) -> String {
    let one_line: String = body
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .take(300)
        .collect();
    one_line.trim().to_owned()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn detects_the_write_api() {
        let ok = |u: &str| WriteApi::detect(u).unwrap();
        assert_eq!(ok("http://127.0.0.1:8086/write?db=storwatch"), WriteApi::V1);
        assert_eq!(
            ok("https://influx.example:8086/write?db=x&precision=ns&u=a&p=b"),
            WriteApi::V1
        );
        assert_eq!(
            ok("https://c.example/api/v2/write?org=site&bucket=storwatch"),
            WriteApi::V2
        );
        assert_eq!(
            ok("http://h:8181/api/v3/write_lp?db=storwatch&precision=auto"),
            WriteApi::V3
        );
        assert_eq!(ok("https://proxy.example/influx/write/?db=x"), WriteApi::V1);
        for bad in [
            "http://127.0.0.1:8086/write",
            "http://127.0.0.1:8086/write?db=",
            "http://h/api/v2/write?org=x",
            "http://h/api/v3/write_lp?bucket=x",
            "http://h/query?db=x",
            "http://h/",
            "ftp://h/write?db=x",
            "http://exa mple/write?db=x",
        ] {
            assert!(WriteApi::detect(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn classifies_answers() {
        assert_eq!(classify(204, None, ""), Verdict::Delivered);
        assert_eq!(classify(200, None, "{}"), Verdict::Delivered);
        // InfluxDB 1.x partial write: one "unable to parse" per bad line
        let v1 = r#"{"error":"partial write: unable to parse 'cpu,host=a': missing fields\nunable to parse 'x y': invalid field format dropped=0"}"#;
        assert_eq!(classify(400, None, v1), Verdict::Partial { lines: 2 });
        let conflict = r#"{"error":"partial write: field type conflict: input field \"v\" on measurement \"m\" is type float, already exists as type integer dropped=3"}"#;
        assert_eq!(classify(400, None, conflict), Verdict::Partial { lines: 3 });
        // InfluxDB 3 partial write
        let v3 = r#"{"error":"partial write of line protocol occurred","data":[{"original_line":"bad","line_number":2,"error_message":"x"}]}"#;
        assert_eq!(classify(400, None, v3), Verdict::Partial { lines: 1 });
        // the collector: exact count, even beyond the 20 lines it spells out
        let collector = r#"{"error":"partial write: line 2: unable to parse: missing fields; line 9: field type conflict: v is integer; and 25 more; accepted=3 rejected=27","lines":[{"line_number":2,"error_message":"x"}]}"#;
        assert_eq!(
            classify(400, None, collector),
            Verdict::Partial { lines: 27 }
        );
        let listed =
            r#"{"code":"invalid","message":"bad","lines":[{"line_number":2},{"line_number":5}]}"#;
        assert_eq!(classify(400, None, listed), Verdict::Partial { lines: 2 });
        // v2 whole-batch refusal without line details
        let v2 = r#"{"code":"invalid","message":"failed to parse line protocol"}"#;
        assert_eq!(classify(400, None, v2), Verdict::Rejected);
        assert_eq!(classify(400, None, "bad request"), Verdict::Rejected);
        assert_eq!(classify(422, None, "{}"), Verdict::Rejected);
        assert_eq!(classify(413, None, ""), Verdict::TooLarge);
        assert_eq!(
            classify(429, Some("7"), ""),
            Verdict::Retry {
                after: Some(Duration::from_secs(7))
            }
        );
        assert_eq!(
            classify(503, Some("Wed, 21 Oct 2015 07:28:00 GMT"), ""),
            Verdict::Retry { after: None }
        );
        assert_eq!(classify(500, None, ""), Verdict::Retry { after: None });
        for keep in [401, 403, 404, 301, 405] {
            assert_eq!(classify(keep, None, ""), Verdict::Keep, "{keep}");
        }
    }

    #[test]
    fn retry_after_is_capped() {
        assert_eq!(parse_retry_after(" 3 "), Some(Duration::from_secs(3)));
        assert_eq!(parse_retry_after("99999999"), Some(MAX_RETRY_AFTER));
        assert_eq!(parse_retry_after("-1"), None);
        assert_eq!(parse_retry_after(""), None);
    }

    #[test]
    fn backoff_grows_to_the_cap_with_jitter_and_honours_retry_after() {
        let mut b = Backoff {
            min: Duration::from_secs(1),
            max: Duration::from_secs(60),
            failures: 0,
        };
        let mut steps = Vec::new();
        for _ in 0..40 {
            steps.push(b.next(None));
        }
        for (i, d) in steps.iter().enumerate() {
            let step = Duration::from_secs(1u64 << i.min(6)).min(Duration::from_secs(60));
            assert!(*d >= step / 2 && *d <= step, "step {i}: {d:?}");
        }
        let d = b.next(Some(Duration::from_secs(120)));
        assert!(
            d >= Duration::from_secs(120) && d <= Duration::from_secs(150),
            "{d:?}"
        );
        b.reset();
        assert!(b.next(None) <= Duration::from_secs(1));
    }

    #[test]
    fn config_defaults_and_unknown_fields() {
        let c: HttpConfig = toml::from_str("").unwrap();
        assert_eq!(c, HttpConfig::default());
        assert!(c.gzip);
        assert_eq!(c.spool_max_bytes, 256 << 20);
        assert_eq!(c.spool_dir, PathBuf::from("/var/lib/storwatch/spool"));
        let c: HttpConfig = toml::from_str(
            "token_file = '/etc/storwatch/token'\ngzip = false\nspool_max_bytes = 1048576\n\
             timeout_s = 2.5\nca_file = '/etc/pki/site-ca.pem'",
        )
        .unwrap();
        assert_eq!(c.token_file, Some(PathBuf::from("/etc/storwatch/token")));
        assert!(!c.gzip);
        assert_eq!(c.timeout_s, 2.5);
        assert!(toml::from_str::<HttpConfig>("tokenfile = 'x'").is_err());
    }

    #[test]
    fn open_refuses_bad_settings() {
        let dir = tempfile::tempdir().unwrap();
        let base = HttpConfig {
            spool_dir: dir.path().join("spool"),
            ..HttpConfig::default()
        };
        let url = "http://127.0.0.1:9/write?db=x";
        let bad = [
            HttpConfig {
                timeout_s: 0.0,
                ..base.clone()
            },
            HttpConfig {
                backoff_min_s: 5.0,
                backoff_max_s: 1.0,
                ..base.clone()
            },
            HttpConfig {
                token_file: Some(dir.path().join("missing")),
                ..base.clone()
            },
            HttpConfig {
                ca_file: Some(dir.path().join("ca.pem")),
                ..base.clone()
            },
        ];
        for cfg in bad {
            assert!(HttpSink::open(url, &cfg).is_err(), "{cfg:?}");
        }
        let empty = dir.path().join("empty-token");
        std::fs::write(&empty, "\n").unwrap();
        let cfg = HttpConfig {
            token_file: Some(empty),
            ..base.clone()
        };
        assert!(HttpSink::open(url, &cfg).is_err());
        let https = "https://127.0.0.1:9/write?db=x";
        let no_pem = dir.path().join("not.pem");
        std::fs::write(&no_pem, "hello").unwrap();
        let cfg = HttpConfig {
            ca_file: Some(no_pem.clone()),
            ..base.clone()
        };
        assert!(HttpSink::open(https, &cfg).is_err());
        let cfg = HttpConfig {
            client_cert_file: Some(no_pem),
            ..base.clone()
        };
        assert!(HttpSink::open(https, &cfg).is_err());
    }

    proptest::proptest! {
        /// Whatever a server answers, classifying it neither panics nor claims zero lines.
        #[test]
        fn classify_never_panics(status in 100u16..600, body in ".{0,200}", retry in proptest::option::of(".{0,12}")) {
            if let Verdict::Partial { lines } = classify(status, retry.as_deref(), &body) {
                proptest::prop_assert!(lines > 0);
            }
        }
    }

    /// A disk that does not sync (the spool lock held, as by a thread stuck in fdatasync) never
    /// holds up `send` or `stats`; once it syncs again everything sent is spooled, and a queue
    /// over its bound drops the oldest batches, counted.
    #[test]
    fn send_never_waits_for_the_spool() {
        let dir = tempfile::tempdir().expect("tempdir");
        let cfg = HttpConfig {
            spool_dir: dir.path().to_path_buf(),
            ..HttpConfig::default()
        };
        // nothing listens on port 9 of loopback: delivery fails and data stays spooled
        let mut sink = HttpSink::open("http://127.0.0.1:9/write?db=x", &cfg).expect("open");
        let shared = Arc::clone(&sink.shared);
        let stuck = lock(&shared.spool);
        let (done_tx, done_rx) = std::sync::mpsc::channel();
        let sender = std::thread::spawn(move || {
            let line = b"m,host=h v=1i 1700000000000000000\n";
            for _ in 0..10 {
                sink.send(line).expect("send");
            }
            // one batch as large as the whole queue pushes the ten out
            let big = line.repeat(INBOX_MAX_BYTES / line.len());
            sink.send(&big).expect("send");
            let st = sink.stats();
            done_tx.send(st).expect("report");
            sink
        });
        let st = done_rx
            .recv_timeout(Duration::from_secs(30))
            .expect("send and stats returned while the spool was stuck");
        // (the spool thread may already hold the first batch, waiting for the disk)
        assert!(matches!(st.dropped_lines, 9 | 10), "{st:?}");
        drop(stuck);
        let sink = sender.join().expect("sender");
        assert!(sink.wait_spooled(Duration::from_secs(60)));
        let d = sink.delivery_stats();
        assert_eq!(d.unspooled_lines, st.dropped_lines);
        assert_eq!(
            d.spool.pending_lines + d.unspooled_lines,
            10 + (INBOX_MAX_BYTES / 34) as u64,
            "{d:?}"
        );
    }

    #[test]
    fn excerpt_is_one_short_line() {
        let e = excerpt(&format!("a\nb\t{}", "x".repeat(1000)));
        assert!(!e.contains('\n'));
        assert_eq!(e.chars().count(), 300);
    }
}
