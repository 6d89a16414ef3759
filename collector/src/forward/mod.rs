//! Forwarding the queue to InfluxDB outputs (v1 `/write`, v2 `/api/v2/write`, v3
//! `/api/v3/write_lp`).
//!
//! Each output has its own cursor into the queue and advances it only after the output
//! acknowledged everything up to it (or the lines it refused went to the dead-letter file), so
//! a crash re-sends at most one batch — harmless, since a point written twice with the same
//! series and timestamp is overwritten, not duplicated.
//!
//! Answers, by status:
//! * 2xx: done.
//! * 400 / 422 (bad data): lines the answer names (v1 `unable to parse '…'` and field type
//!   conflicts, v3 partial-write JSON with `line_number`) go to the dead-letter file and the
//!   rest is sent again; when nothing is named the batch is split in two and each half retried,
//!   down to single lines, which are dead-lettered with the answer as the reason. One bad line
//!   therefore never blocks the queue.
//! * 413: the batch is split in two (a single line that is still too large is dead-lettered).
//! * 401 / 403 / 404: credentials or database are wrong; the data is kept, an error is logged at
//!   every attempt and the attempt repeated every `auth_retry_s`.
//! * 429, 5xx, timeouts, connection errors: retried with exponential backoff and full jitter,
//!   waiting at least what `Retry-After` asks (capped at `backoff_max_s`).

use std::io::Write as _;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use reqwest::header::{HeaderValue, AUTHORIZATION, CONTENT_ENCODING, CONTENT_TYPE, RETRY_AFTER};
use reqwest::{StatusCode, Url};
use tokio::sync::watch;

use crate::config::{Api, ConfigError, OutputConfig};
use crate::metrics::{Metrics, OutputMetrics};
use crate::queue::Queue;

/// An output ready to be written to.
#[derive(Debug, Clone)]
pub struct Output {
    pub name: String,
    pub api: Api,
    /// The full write URL, query included (`precision=ns` always).
    pub url: Url,
    pub auth: Option<HeaderValue>,
    pub gzip: bool,
    pub batch_lines: usize,
    pub batch_bytes: usize,
    pub timeout: Duration,
    pub backoff_min: Duration,
    pub backoff_max: Duration,
    pub auth_retry: Duration,
    pub ca_file: Option<PathBuf>,
    pub max_in_flight: usize,
}

fn out_err(url: &str, reason: impl Into<String>) -> ConfigError {
    ConfigError::Output {
        url: url.to_string(),
        reason: reason.into(),
    }
}

impl Output {
    /// Resolves an output's configuration: API version, full URL and credentials.
    pub fn resolve(cfg: &OutputConfig) -> Result<Output, ConfigError> {
        let mut url = Url::parse(&cfg.url).map_err(|e| out_err(&cfg.url, e.to_string()))?;
        if url.scheme() != "http" && url.scheme() != "https" {
            return Err(out_err(&cfg.url, "scheme must be http or https"));
        }
        let path = url.path().trim_end_matches('/').to_string();
        let from_path = if path.ends_with("/api/v2/write") {
            Some(Api::V2)
        } else if path.ends_with("/api/v3/write_lp") {
            Some(Api::V3)
        } else if path.ends_with("/write") {
            Some(Api::V1)
        } else {
            None
        };
        let api = cfg
            .api
            .or(from_path)
            .unwrap_or(if cfg.org.is_some() || cfg.bucket.is_some() {
                Api::V2
            } else {
                Api::V1
            });
        if from_path.is_none() {
            let suffix = match api {
                Api::V1 => "/write",
                Api::V2 => "/api/v2/write",
                Api::V3 => "/api/v3/write_lp",
            };
            url.set_path(&format!("{path}{suffix}"));
        }
        let present: Vec<String> = url.query_pairs().map(|(k, _)| k.into_owned()).collect();
        let has = |k: &str| present.iter().any(|p| p == k);
        {
            let mut q = url.query_pairs_mut();
            let mut need = |key: &str, val: &Option<String>, required: bool| match val {
                Some(v) if !has(key) => {
                    q.append_pair(key, v);
                    Ok(())
                }
                None if required && !has(key) => Err(out_err(&cfg.url, format!("needs {key}"))),
                _ => Ok(()),
            };
            match api {
                Api::V1 => {
                    need("db", &cfg.db, true)?;
                    need("rp", &cfg.rp, false)?;
                }
                Api::V2 => {
                    need("org", &cfg.org, false)?;
                    need("bucket", &cfg.bucket, true)?;
                }
                Api::V3 => need("db", &cfg.db, true)?,
            }
            if !has("precision") {
                let p = if api == Api::V3 { "nanosecond" } else { "ns" };
                q.append_pair("precision", p);
            }
        }
        let auth = match &cfg.token_file {
            Some(path) => {
                let token = std::fs::read_to_string(path).map_err(|e| {
                    out_err(&cfg.url, format!("token file {}: {e}", path.display()))
                })?;
                let token = token.trim();
                let value = if api == Api::V1 && token.contains(':') {
                    format!("Basic {}", base64_encode(token.as_bytes()))
                } else {
                    format!("Token {token}")
                };
                let mut v = HeaderValue::from_str(&value).map_err(|_| {
                    out_err(&cfg.url, "token holds characters not allowed in a header")
                })?;
                v.set_sensitive(true);
                Some(v)
            }
            None => None,
        };
        let name = match &cfg.name {
            Some(n) => n.clone(),
            None => {
                let db = cfg
                    .db
                    .as_ref()
                    .or(cfg.bucket.as_ref())
                    .map(|s| s.as_str())
                    .unwrap_or("");
                format!(
                    "{}_{}_{db}",
                    url.host_str().unwrap_or("host"),
                    url.port_or_known_default().unwrap_or(0)
                )
            }
        };
        let name: String = name
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        if cfg.batch_lines == 0 || cfg.batch_bytes == 0 {
            return Err(out_err(
                &cfg.url,
                "batch_lines and batch_bytes must be positive",
            ));
        }
        Ok(Output {
            name,
            api,
            url,
            auth,
            gzip: cfg.gzip,
            batch_lines: cfg.batch_lines,
            batch_bytes: cfg.batch_bytes,
            timeout: Duration::from_secs(cfg.timeout_s.max(1)),
            backoff_min: Duration::from_millis(cfg.backoff_min_ms.max(1)),
            backoff_max: Duration::from_secs(cfg.backoff_max_s.max(1)),
            auth_retry: Duration::from_secs(cfg.auth_retry_s.max(1)),
            ca_file: cfg.ca_file.clone(),
            max_in_flight: cfg.max_in_flight.clamp(1, 2),
        })
    }
}

fn base64_encode(input: &[u8]) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in input.chunks(3) {
        let b = [
            chunk.first().copied().unwrap_or(0),
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(A[((n >> (18 - 6 * i)) & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// What to do after an answer.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    Done,
    /// Retry after at least this long (from Retry-After), or the backoff.
    Retry(Option<Duration>),
    /// Credentials or target wrong: keep the data, retry slowly.
    Refused(String),
    /// Split the batch (413).
    TooLarge,
    /// Bad data: dead-letter the named lines (0-based indices into the batch) or bisect.
    BadData {
        reason: String,
        named: Vec<(usize, String)>,
    },
}

/// Reads an answer. `lines` is the batch that was sent, so that named lines can be found.
pub fn classify(
    api: Api,
    status: StatusCode,
    retry_after: Option<&str>,
    body: &str,
    lines: &[&str],
) -> Verdict {
    let retry_after = retry_after
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map(Duration::from_secs);
    let short: String = body.chars().take(500).collect();
    match status.as_u16() {
        200..=299 => Verdict::Done,
        401 | 403 | 404 => Verdict::Refused(format!("{status}: {short}")),
        413 => Verdict::TooLarge,
        400 | 422 => Verdict::BadData {
            reason: format!(
                "{status}: {}",
                error_text(body).chars().take(500).collect::<String>()
            ),
            named: named_lines(api, body, lines),
        },
        429 | 500..=599 | 408 => Verdict::Retry(retry_after),
        // Anything else (3xx, odd 4xx) is not the data's fault: keep it and retry slowly.
        _ => Verdict::Refused(format!("unexpected {status}: {short}")),
    }
}

/// The human part of an InfluxDB error body (`{"error": …}` for v1/v3, `{"message": …}` v2).
fn error_text(body: &str) -> String {
    match serde_json::from_str::<serde_json::Value>(body) {
        Ok(v) => v
            .get("error")
            .or_else(|| v.get("message"))
            .and_then(|e| e.as_str())
            .map(str::to_string)
            .unwrap_or_else(|| body.to_string()),
        Err(_) => body.to_string(),
    }
}

/// Lines a 400/422 answer names, as indices into `lines`, with the reason given for each.
pub fn named_lines(api: Api, body: &str, lines: &[&str]) -> Vec<(usize, String)> {
    let json = serde_json::from_str::<serde_json::Value>(body).ok();
    let mut out = Vec::new();
    // v3: {"error": "...", "data": [{"original_line": "...", "line_number": N, "error_message": "..."}]}
    // (v2 OSS answers a parse error with the whole batch refused; it gets bisected.)
    if let Some(data) = json
        .as_ref()
        .and_then(|v| v.get("data"))
        .and_then(|d| d.as_array())
    {
        for item in data {
            let n = item.get("line_number").and_then(|n| n.as_u64());
            let reason = item
                .get("error_message")
                .and_then(|m| m.as_str())
                .unwrap_or("rejected")
                .to_string();
            if let Some(n) = n.and_then(|n| usize::try_from(n).ok()).filter(|n| *n >= 1) {
                if n <= lines.len() {
                    out.push((n - 1, reason));
                }
            }
        }
        return out;
    }
    if api != Api::V1 {
        return out;
    }
    let text = error_text(body);
    // v1: "partial write: unable to parse '<line>': <reason>" (one per bad line).
    for (i, line) in lines.iter().enumerate() {
        let quoted = format!("unable to parse '{line}'");
        if let Some(pos) = text.find(&quoted) {
            let rest = text.get(pos + quoted.len()..).unwrap_or("");
            let reason = rest
                .trim_start_matches(": ")
                .lines()
                .next()
                .unwrap_or("")
                .to_string();
            out.push((i, format!("unable to parse: {reason}")));
        }
    }
    // v1: "field type conflict: input field \"f\" on measurement \"m\" is type float, already
    // exists as type integer dropped=N"
    if let Some(c) = text.find("field type conflict: input field \"") {
        let rest = text
            .get(c + "field type conflict: input field \"".len()..)
            .unwrap_or("");
        if let Some((field, rest)) = rest.split_once("\" on measurement \"") {
            if let Some((measurement, _)) = rest.split_once('"') {
                for (i, line) in lines.iter().enumerate() {
                    if out.iter().any(|(j, _)| *j == i) {
                        continue;
                    }
                    if line_has_field(line, measurement, field) {
                        out.push((i, format!("field type conflict: {field} on {measurement}")));
                    }
                }
            }
        }
    }
    out
}

fn line_has_field(line: &str, measurement: &str, field: &str) -> bool {
    match influxdb_line_protocol::parse_lines(line).next() {
        Some(Ok(p)) => {
            p.series.measurement.as_str() == measurement && p.field_value(field).is_some()
        }
        _ => false,
    }
}

/// Why a delivery stopped before finishing.
#[derive(Debug, thiserror::Error)]
pub enum ForwardError {
    #[error("shutting down")]
    Stopped,
    #[error("dead-letter file {path}: {source}")]
    DeadLetter {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// Sends batches of one output and handles its answers.
#[derive(Debug)]
pub struct Forwarder {
    pub output: Output,
    client: reqwest::Client,
    metrics: Arc<OutputMetrics>,
    dead_letter: PathBuf,
}

impl Forwarder {
    pub fn new(
        output: Output,
        metrics: Arc<OutputMetrics>,
        dead_letter_dir: PathBuf,
    ) -> Result<Forwarder, ConfigError> {
        let mut builder = reqwest::Client::builder()
            .timeout(output.timeout)
            .connect_timeout(Duration::from_secs(10))
            .pool_idle_timeout(Duration::from_secs(60));
        if let Some(ca) = &output.ca_file {
            let pem = std::fs::read(ca)
                .map_err(|e| out_err(output.url.as_str(), format!("{}: {e}", ca.display())))?;
            let certs = reqwest::Certificate::from_pem_bundle(&pem)
                .map_err(|e| out_err(output.url.as_str(), format!("{}: {e}", ca.display())))?;
            for c in certs {
                builder = builder.add_root_certificate(c);
            }
        }
        let client = builder
            .build()
            .map_err(|e| out_err(output.url.as_str(), e.to_string()))?;
        let dead_letter = dead_letter_dir.join(format!("{}.lp", output.name));
        Ok(Forwarder {
            output,
            client,
            metrics,
            dead_letter,
        })
    }

    pub fn dead_letter_path(&self) -> &std::path::Path {
        &self.dead_letter
    }

    async fn send(&self, lines: &[&str]) -> Verdict {
        let mut body = Vec::with_capacity(lines.iter().map(|l| l.len() + 1).sum());
        for l in lines {
            body.extend_from_slice(l.as_bytes());
            body.push(b'\n');
        }
        let mut req = self
            .client
            .post(self.output.url.clone())
            .header(CONTENT_TYPE, "text/plain; charset=utf-8");
        if self.output.gzip {
            let mut enc = flate2::write::GzEncoder::new(
                Vec::with_capacity(body.len() / 4),
                flate2::Compression::fast(),
            );
            if enc.write_all(&body).is_ok() {
                if let Ok(z) = enc.finish() {
                    body = z;
                    req = req.header(CONTENT_ENCODING, "gzip");
                }
            }
        }
        if let Some(auth) = &self.output.auth {
            req = req.header(AUTHORIZATION, auth.clone());
        }
        match req.body(body).send().await {
            Ok(resp) => {
                let status = resp.status();
                let retry_after = resp
                    .headers()
                    .get(RETRY_AFTER)
                    .and_then(|v| v.to_str().ok())
                    .map(str::to_string);
                let text = resp.text().await.unwrap_or_default();
                classify(
                    self.output.api,
                    status,
                    retry_after.as_deref(),
                    &text,
                    lines,
                )
            }
            Err(e) => {
                tracing::warn!(output = %self.output.name, error = %e, "write failed; will retry");
                Verdict::Retry(None)
            }
        }
    }

    fn backoff(&self, attempt: u32) -> Duration {
        let max = self.output.backoff_max.as_millis() as u64;
        let base = (self.output.backoff_min.as_millis() as u64)
            .saturating_mul(1u64 << attempt.min(20))
            .min(max);
        // Full jitter spreads out 600 nodes' worth of retries after an outage.
        Duration::from_millis(fastrand::u64(base / 2..=base.max(1)))
    }

    fn write_dead_letter(&self, entries: &[(&str, String)]) -> Result<(), ForwardError> {
        let err = |source| ForwardError::DeadLetter {
            path: self.dead_letter.clone(),
            source,
        };
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        let mut text = String::new();
        for (line, reason) in entries {
            let reason: String = reason.replace(['\n', '\r'], " ");
            text.push_str(&format!(
                "# unix_s={now} output={} reason={reason}\n{line}\n",
                self.output.name
            ));
        }
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.dead_letter)
            .map_err(err)?;
        f.write_all(text.as_bytes()).map_err(err)?;
        f.sync_data().map_err(err)?;
        self.metrics
            .dead_lettered
            .fetch_add(entries.len() as u64, Ordering::Relaxed);
        tracing::error!(output = %self.output.name, lines = entries.len(), file = %self.dead_letter.display(), "lines refused by the output written to the dead-letter file");
        Ok(())
    }

    async fn sleep(
        &self,
        d: Duration,
        stop: &mut watch::Receiver<bool>,
    ) -> Result<(), ForwardError> {
        if *stop.borrow() {
            return Err(ForwardError::Stopped);
        }
        tokio::select! {
            _ = tokio::time::sleep(d) => Ok(()),
            _ = stop.changed() => Err(ForwardError::Stopped),
        }
    }

    /// Delivers `lines` completely: every line is acknowledged by the output or dead-lettered.
    pub async fn deliver(
        &self,
        lines: &[&str],
        stop: &mut watch::Receiver<bool>,
    ) -> Result<(), ForwardError> {
        let mut stack: Vec<Vec<&str>> = Vec::new();
        let mut chunk = Vec::new();
        let mut bytes = 0;
        for l in lines {
            if !chunk.is_empty()
                && (chunk.len() >= self.output.batch_lines
                    || bytes + l.len() > self.output.batch_bytes)
            {
                stack.push(std::mem::take(&mut chunk));
                bytes = 0;
            }
            bytes += l.len() + 1;
            chunk.push(*l);
        }
        if !chunk.is_empty() {
            stack.push(chunk);
        }
        if stack.len() > 1 && self.output.max_in_flight > 1 {
            // Two halves in flight at once (InfluxDB ingests faster with concurrent writers);
            // the cursor still moves only after both are fully delivered.
            let second = stack.split_off(stack.len() / 2);
            let mut stop2 = stop.clone();
            let (a, b) = tokio::join!(
                self.deliver_chunks(stack, stop),
                self.deliver_chunks(second, &mut stop2)
            );
            return a.and(b);
        }
        self.deliver_chunks(stack, stop).await
    }

    async fn deliver_chunks(
        &self,
        mut stack: Vec<Vec<&str>>,
        stop: &mut watch::Receiver<bool>,
    ) -> Result<(), ForwardError> {
        stack.reverse();
        while let Some(chunk) = stack.pop() {
            let mut attempt = 0u32;
            loop {
                if *stop.borrow() {
                    return Err(ForwardError::Stopped);
                }
                match self.send(&chunk).await {
                    Verdict::Done => {
                        self.metrics.batches_sent.fetch_add(1, Ordering::Relaxed);
                        self.metrics
                            .lines_sent
                            .fetch_add(chunk.len() as u64, Ordering::Relaxed);
                        break;
                    }
                    Verdict::Retry(after) => {
                        self.metrics.retries.fetch_add(1, Ordering::Relaxed);
                        let wait = match after {
                            Some(a) => a.min(self.output.backoff_max).max(self.backoff(attempt)),
                            None => self.backoff(attempt),
                        };
                        attempt = attempt.saturating_add(1);
                        self.sleep(wait, stop).await?;
                    }
                    Verdict::Refused(msg) => {
                        self.metrics.auth_errors.fetch_add(1, Ordering::Relaxed);
                        tracing::error!(output = %self.output.name, url = %self.output.url, answer = %msg, retry_in_s = self.output.auth_retry.as_secs(), "output refuses the credentials or the target; data kept");
                        self.sleep(self.output.auth_retry, stop).await?;
                    }
                    Verdict::TooLarge => {
                        if chunk.len() > 1 {
                            self.metrics.splits.fetch_add(1, Ordering::Relaxed);
                            let (a, b) = chunk.split_at(chunk.len() / 2);
                            stack.push(b.to_vec());
                            stack.push(a.to_vec());
                        } else {
                            self.write_dead_letter(&[(
                                chunk[0],
                                "413: line too large for the output".into(),
                            )])?;
                        }
                        break;
                    }
                    Verdict::BadData { reason, named } => {
                        if chunk.len() == 1 {
                            self.write_dead_letter(&[(chunk[0], reason)])?;
                        } else if !named.is_empty() {
                            let entries: Vec<(&str, String)> = named
                                .iter()
                                .filter_map(|(i, r)| chunk.get(*i).map(|l| (*l, r.clone())))
                                .collect();
                            self.write_dead_letter(&entries)?;
                            let rest: Vec<&str> = chunk
                                .iter()
                                .enumerate()
                                .filter(|(i, _)| !named.iter().any(|(j, _)| j == i))
                                .map(|(_, l)| *l)
                                .collect();
                            // The rest is sent again: where the output already stored it, the
                            // same points are simply overwritten.
                            if !rest.is_empty() {
                                stack.push(rest);
                            }
                        } else {
                            let (a, b) = chunk.split_at(chunk.len() / 2);
                            stack.push(b.to_vec());
                            stack.push(a.to_vec());
                        }
                        break;
                    }
                }
            }
        }
        Ok(())
    }

    /// Follows the queue from this output's saved cursor until `stop` turns true.
    pub async fn run(self, queue: Arc<Queue>, all: Arc<Metrics>, mut stop: watch::Receiver<bool>) {
        let name = self.output.name.clone();
        let mut pos = queue.load_cursor(&name);
        self.metrics.cursor.store(pos, Ordering::Relaxed);
        let mut end_rx = queue.watch_end();
        tracing::info!(output = %name, url = %self.output.url, cursor = pos, "forwarding");
        loop {
            if *stop.borrow() {
                return;
            }
            if pos >= queue.durable_end() {
                tokio::select! {
                    r = end_rx.changed() => if r.is_err() { return },
                    _ = stop.changed() => return,
                }
                continue;
            }
            let q = queue.clone();
            let max = self.output.batch_bytes * self.output.max_in_flight.max(1);
            let read = tokio::task::spawn_blocking(move || q.read_from(pos, max)).await;
            let (records, next) = match read {
                Ok(Ok(r)) => r,
                Ok(Err(e)) => {
                    tracing::error!(output = %name, error = %e, "cannot read the queue; retrying");
                    if self.sleep(Duration::from_secs(1), &mut stop).await.is_err() {
                        return;
                    }
                    continue;
                }
                Err(_) => return,
            };
            let texts: Vec<String> = records
                .into_iter()
                .map(|r| {
                    String::from_utf8(r)
                        .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
                })
                .collect();
            let lines: Vec<&str> = texts
                .iter()
                .flat_map(|t| influxdb_line_protocol::split_lines(t))
                .filter(|l| {
                    let t = l.trim();
                    !t.is_empty() && !t.starts_with('#')
                })
                .collect();
            match self.deliver(&lines, &mut stop).await {
                Ok(()) => {}
                Err(ForwardError::Stopped) => return,
                Err(e) => {
                    tracing::error!(output = %name, error = %e, "cannot write the dead-letter file; retrying");
                    if self.sleep(Duration::from_secs(5), &mut stop).await.is_err() {
                        return;
                    }
                    continue;
                }
            }
            if let Err(e) = queue.save_cursor(&name, next) {
                tracing::error!(output = %name, error = %e, "cannot save the cursor");
            }
            pos = next;
            self.metrics.cursor.store(pos, Ordering::Relaxed);
            if let Err(e) = queue.release(all.min_cursor()) {
                tracing::warn!(error = %e, "cannot delete acknowledged segments");
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn cfg(url: &str) -> OutputConfig {
        OutputConfig {
            url: url.into(),
            ..OutputConfig::default()
        }
    }

    #[test]
    fn urls_and_api_versions() {
        let mut c = cfg("http://influx:8086");
        c.db = Some("storwatch".into());
        let o = Output::resolve(&c).unwrap();
        assert_eq!(o.api, Api::V1);
        assert_eq!(
            o.url.as_str(),
            "http://influx:8086/write?db=storwatch&precision=ns"
        );
        assert_eq!(o.name, "influx_8086_storwatch");
        let mut c = cfg("https://cloud.example/");
        c.org = Some("site".into());
        c.bucket = Some("sw".into());
        let o = Output::resolve(&c).unwrap();
        assert_eq!(o.api, Api::V2);
        assert_eq!(
            o.url.as_str(),
            "https://cloud.example/api/v2/write?org=site&bucket=sw&precision=ns"
        );
        let o = Output::resolve(&cfg("http://h:8181/api/v3/write_lp?db=x")).unwrap();
        assert_eq!(o.api, Api::V3);
        assert_eq!(
            o.url.as_str(),
            "http://h:8181/api/v3/write_lp?db=x&precision=nanosecond"
        );
        assert!(
            Output::resolve(&cfg("http://h:8086")).is_err(),
            "v1 without db"
        );
        assert!(Output::resolve(&cfg("ftp://h/write?db=x")).is_err());
        assert_eq!(base64_encode(b"user:secret"), "dXNlcjpzZWNyZXQ=");
        assert_eq!(base64_encode(b"ab"), "YWI=");
    }

    #[test]
    fn verdicts_per_status() {
        let l = ["m v=1 1", "bad line", "m v=2 2"];
        assert_eq!(
            classify(Api::V1, StatusCode::NO_CONTENT, None, "", &l),
            Verdict::Done
        );
        assert_eq!(
            classify(Api::V2, StatusCode::TOO_MANY_REQUESTS, Some("7"), "", &l),
            Verdict::Retry(Some(Duration::from_secs(7)))
        );
        assert_eq!(
            classify(Api::V2, StatusCode::SERVICE_UNAVAILABLE, None, "", &l),
            Verdict::Retry(None)
        );
        assert!(matches!(
            classify(Api::V2, StatusCode::UNAUTHORIZED, None, "", &l),
            Verdict::Refused(_)
        ));
        assert!(matches!(
            classify(Api::V1, StatusCode::NOT_FOUND, None, "", &l),
            Verdict::Refused(_)
        ));
        assert_eq!(
            classify(Api::V1, StatusCode::PAYLOAD_TOO_LARGE, None, "", &l),
            Verdict::TooLarge
        );
        // v1 partial write names the line
        let v1 =
            r#"{"error":"partial write: unable to parse 'bad line': missing fields dropped=1"}"#;
        match classify(Api::V1, StatusCode::BAD_REQUEST, None, v1, &l) {
            Verdict::BadData { named, .. } => assert_eq!(
                named,
                vec![(1, "unable to parse: missing fields dropped=1".to_string())]
            ),
            v => panic!("{v:?}"),
        }
        // v3 partial write JSON
        let v3 = r#"{"error":"partial write of line protocol occurred","data":[{"original_line":"bad line","line_number":2,"error_message":"No fields were provided"}]}"#;
        match classify(Api::V3, StatusCode::BAD_REQUEST, None, v3, &l) {
            Verdict::BadData { named, .. } => {
                assert_eq!(named, vec![(1, "No fields were provided".to_string())])
            }
            v => panic!("{v:?}"),
        }
        // v2 whole-batch 400 names nothing: bisect
        let v2 = r#"{"code":"invalid","message":"unable to parse 'bad line': missing fields"}"#;
        match classify(Api::V2, StatusCode::BAD_REQUEST, None, v2, &l) {
            Verdict::BadData { named, reason } => {
                assert!(named.is_empty());
                assert!(reason.contains("missing fields"));
            }
            v => panic!("{v:?}"),
        }
        let conflict = r#"{"error":"partial write: field type conflict: input field \"v\" on measurement \"m\" is type float, already exists as type integer dropped=2"}"#;
        match classify(Api::V1, StatusCode::BAD_REQUEST, None, conflict, &l) {
            Verdict::BadData { named, .. } => {
                assert_eq!(named.iter().map(|n| n.0).collect::<Vec<_>>(), vec![0, 2])
            }
            v => panic!("{v:?}"),
        }
    }
}
