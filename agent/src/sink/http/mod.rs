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

mod answer;
mod config;
mod worker;

pub use answer::{classify, parse_retry_after, rejected_lines, Verdict};
use config::*;
pub use config::{HttpConfig, WriteApi};
use worker::*;

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
    /// When the last failed request ended (its answer read, or its error met): what a wait
    /// before the next attempt counts from.
    pub last_failure_at: Option<Instant>,
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
    last_failure_at: Mutex<Option<Instant>>,
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

/// The HTTP client's buffer for a request (its head, then its body in pieces of this size) and
/// for a response, held by the pooled connection between reports. ureq's default, 128 KiB each,
/// zero-filled when first used, kept ~260 kB resident for a server's short answers and a gzipped
/// report of ~30 kB at 200 disks (docs/performance.md); an uncompressed report goes out in more
/// writes of this size.
pub const REQUEST_BUFFER_BYTES: usize = 32 << 10;
/// See [`REQUEST_BUFFER_BYTES`]: a response's body (an error text, read up to 64 KiB) goes
/// through this buffer, and its head must fit in it: a longer head is a failed request ("response
/// header too large"), retried with the report kept in the spool.
pub const RESPONSE_BUFFER_BYTES: usize = 16 << 10;

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
            .output_buffer_size(REQUEST_BUFFER_BYTES)
            .input_buffer_size(RESPONSE_BUFFER_BYTES)
            // a head that fills the buffer is too large (ureq would otherwise wait for more)
            .max_response_header_size(RESPONSE_BUFFER_BYTES - 1)
            .user_agent(concat!("storwatch-agent/", env!("CARGO_PKG_VERSION")))
            .tls_config(tls_config(cfg)?)
            .build();
        let agent = ureq::Agent::new_with_config(agent_config);

        let spool = open_spool(cfg)?;
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
            last_failure_at: *lock(&c.last_failure_at),
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

/// Opens the spool, saying where state goes when it is created, and what to do when this user
/// may not create it (`run` by hand as a non-root user with the packaged default).
fn open_spool(cfg: &HttpConfig) -> Result<Spool, SinkError> {
    let dir = &cfg.spool_dir;
    let created = !dir.exists();
    match Spool::open(dir, cfg.spool_max_bytes) {
        Ok(spool) => {
            if created {
                tracing::info!(dir = %dir.display(), "created the spool: reports wait here until the server has them");
            }
            Ok(spool)
        }
        Err(SpoolError::Io { path, source })
            if source.kind() == std::io::ErrorKind::PermissionDenied =>
        {
            Err(SinkError::Config(format!(
                "cannot use the spool directory {} ({}: permission denied): run as root as the \
                 packaged unit does, or give --spool-dir (or [http] spool_dir) a directory this \
                 user may write, e.g. ~/.local/state/storwatch/spool",
                dir.display(),
                path.display()
            )))
        }
        Err(e) => Err(e.into()),
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
            file_rotations: None,
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

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::answer::MAX_RETRY_AFTER;
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

    /// A fleet told "come back in 2 s" comes back between 2 and 2.5 s, spread over that span,
    /// never sooner; the server's word wins over a longer backoff of the agent's own only when
    /// it is the longer.
    #[test]
    fn retry_after_is_a_floor_and_retries_are_spread_above_it() {
        let after = Duration::from_secs(2);
        let waits: Vec<Duration> = (0..200)
            .map(|_| {
                let mut b = Backoff {
                    min: Duration::from_millis(50),
                    max: Duration::from_millis(200),
                    failures: 0,
                };
                b.next(Some(after))
            })
            .collect();
        let (lo, hi) = (
            waits.iter().min().copied().unwrap(),
            waits.iter().max().copied().unwrap(),
        );
        assert!(lo >= after && hi <= after + after / 4, "{lo:?} … {hi:?}");
        // 200 draws cover most of the half-second window
        assert!(hi - lo >= Duration::from_millis(400), "{lo:?} … {hi:?}");
        // a backoff already longer than Retry-After keeps its own length
        let mut b = Backoff {
            min: Duration::from_secs(8),
            max: Duration::from_secs(60),
            failures: 0,
        };
        let d = b.next(Some(Duration::from_secs(1)));
        assert!(
            d >= Duration::from_secs(4) && d <= Duration::from_millis(8250),
            "{d:?}"
        );
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
