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
//!   every attempt and the attempt repeated every `auth_retry_s`. A v1 output answering 404
//!   "database not found" for a database named by a request (`targets.allow`) is first sent
//!   `CREATE DATABASE` and the batch retried at once.
//! * 429, 5xx, timeouts, connection errors: retried with exponential backoff and full jitter,
//!   waiting at least what `Retry-After` asks (capped at `backoff_max_s`).
//!
//! Each queue record carries its target ([`Target`]): the default one goes to the output's
//! configured database, a named one to that database (see [`Output::url_for`]).
//!
//! Files: `output` (configuration → URL and credentials), `answer` (status and body → verdict),
//! `deliver` (batching, retries, splits), `dead_letter` (lines refused for good), and here the
//! loop that follows the queue from the output's cursor.

mod answer;
mod dead_letter;
mod deliver;
mod output;

use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use storwatch_wire::rotate::{RotateError, RotatingFile, Rotation};

use tokio::sync::watch;

use crate::config::ConfigError;
use crate::metrics::{Metrics, OutputMetrics};
use crate::queue::Queue;
use crate::target::Target;
pub use answer::{classify, named_lines, Verdict};
use output::out_err;
pub use output::Output;

/// Why a delivery stopped before finishing.
#[derive(Debug, thiserror::Error)]
pub enum ForwardError {
    #[error("shutting down")]
    Stopped,
    #[error("dead-letter file {0}")]
    DeadLetter(#[from] RotateError),
}

/// Sends batches of one output and handles its answers.
#[derive(Debug)]
pub struct Forwarder {
    pub output: Output,
    client: reqwest::Client,
    metrics: Arc<OutputMetrics>,
    dead_letter: Mutex<RotatingFile>,
    /// The dead-letter limits in force; replaced on SIGHUP, read at every write.
    dead_letter_rotation: Arc<RwLock<Rotation>>,
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
        let path = dead_letter_dir.join(format!("{}.lp", output.name));
        let rotation = Rotation::default();
        Ok(Forwarder {
            output,
            client,
            metrics,
            // 0600: refused lines are the sites' data, and their reasons may quote it.
            dead_letter: Mutex::new(RotatingFile::new(path, rotation, 0o600, true)),
            dead_letter_rotation: Arc::new(RwLock::new(rotation)),
        })
    }

    /// Follows `rotation` for the dead-letter file's size limits (the collector's
    /// `[dead_letter]` settings, replaced on reload) instead of the defaults.
    pub fn with_dead_letter_rotation(mut self, rotation: Arc<RwLock<Rotation>>) -> Self {
        self.dead_letter_rotation = rotation;
        self
    }

    pub fn dead_letter_path(&self) -> PathBuf {
        self.dead_letter
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .path()
            .to_path_buf()
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
            // Each record carries its target; consecutive records of one target go together.
            let mut groups: Vec<(Target, Vec<String>)> = Vec::new();
            for mut r in records {
                let Some((target, header)) =
                    Target::of_record(&r).map(|(t, lines)| (t, r.len() - lines.len()))
                else {
                    tracing::error!(output = %name, "queue record with a damaged target header skipped");
                    continue;
                };
                // The record becomes the text without a copy (the header, when there is one,
                // is shifted out).
                r.drain(..header);
                let text = String::from_utf8(r)
                    .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned());
                match groups.last_mut() {
                    Some((t, texts)) if *t == target => texts.push(text),
                    _ => groups.push((target, vec![text])),
                }
            }
            let mut failed = None;
            for (target, texts) in &groups {
                let lines: Vec<&str> = texts
                    .iter()
                    .flat_map(|t| storwatch_wire::lp::lines(t).map(|(_, l)| l))
                    .filter(|l| {
                        let t = l.trim();
                        !t.is_empty() && !t.starts_with('#')
                    })
                    .collect();
                if let Err(e) = self.deliver(&lines, target, &mut stop).await {
                    failed = Some(e);
                    break;
                }
            }
            match failed {
                None => {}
                Some(ForwardError::Stopped) => return,
                Some(e) => {
                    // Groups already delivered are sent again: points written twice overwrite.
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
