//! The two threads behind `send()`: the spool thread (queue -> spool) and the delivery thread
//! (spool -> server).

use super::*;

/// Capped exponential backoff with "equal jitter": half the step fixed, half random, so a fleet
/// of agents that lost the server together does not come back in lockstep.
#[derive(Debug)]
pub(super) struct Backoff {
    pub(super) min: Duration,
    pub(super) max: Duration,
    pub(super) failures: u32,
}

impl Backoff {
    pub(super) fn next(&mut self, retry_after: Option<Duration>) -> Duration {
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

    pub(super) fn reset(&mut self) {
        self.failures = 0;
    }
}

/// The spool thread: appends each queued batch to the spool (write + fdatasync), oldest first,
/// and wakes the delivery thread. Exits once the inbox is closed and empty.
pub(super) fn spool_run(shared: &Shared) {
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
pub(super) const SPOOL_FULL_RETRY: Duration = Duration::from_secs(5);
/// How long the idle thread sleeps before looking at the spool again without a wake-up.
pub(super) const IDLE_POLL: Duration = Duration::from_secs(5);
/// Largest response body read (InfluxDB's error texts are short).
pub(super) const MAX_RESPONSE_BYTES: u64 = 64 << 10;
/// gzip level: 1 compresses line protocol ~8x at a fraction of level 6's CPU (docs/delivery.md).
pub(super) const GZIP_LEVEL: u32 = 1;

pub(super) struct Worker {
    pub(super) shared: Arc<Shared>,
    pub(super) agent: ureq::Agent,
    pub(super) url: String,
    pub(super) api: WriteApi,
    pub(super) token: Option<String>,
    pub(super) token_file: Option<PathBuf>,
    pub(super) gzip: bool,
    pub(super) max_batch_bytes: usize,
    pub(super) backoff: Backoff,
    pub(super) body: Vec<u8>,
    pub(super) gz: Vec<u8>,
    /// Send one record per request until the cursor passes this (after a whole-batch reject).
    pub(super) single_until: Option<Position>,
    pub(super) failing_since: Option<Instant>,
    pub(super) transient_log: Throttle,
    pub(super) operator_log: Throttle,
}

/// A server's answer.
pub(super) struct Answer {
    status: u16,
    retry_after: Option<String>,
    body: String,
}

impl Worker {
    pub(super) fn run(mut self) {
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
                    // Nothing to send: the request's buffers go until the next report. Kept,
                    // they held a copy of the last report for the whole interval (~245 kB at 200
                    // disks, its gzip ~30 kB more); made again, a report's body is one mapping
                    // of its size (above malloc's mmap threshold) filled by one read of the
                    // spool, once a report interval.
                    self.body = Vec::new();
                    self.gz = Vec::new();
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
                // before the count too: whoever sees the failure sees when it ended
                *lock(&counters.last_failure_at) = Some(Instant::now());
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

    pub(super) fn act(&mut self, verdict: Verdict, batch: &Batch, why: &str) {
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

    pub(super) fn ack(&mut self, batch: &Batch) {
        let acked = self.shared.with_spool(|spool| spool.ack(batch));
        if let Err(e) = acked {
            // the cursor stays behind: the batch is sent again, which overwrites, not duplicates
            tracing::error!(error = %e, "cannot record delivery in the spool");
        }
        self.shared.progress.notify_all();
    }

    pub(super) fn reload_token(&mut self) {
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

    pub(super) fn post(&mut self) -> Result<Answer, String> {
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
pub(super) fn excerpt(body: &str) -> String {
    let one_line: String = body
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .take(300)
        .collect();
    one_line.trim().to_owned()
}
