//! Forwarding the queue to InfluxDB outputs (v1 `/write`, v2 `/api/v2/write`, v3
//! `/api/v3/write_lp`) and Prometheus remote-write receivers ([`remote_write`]: the same queue,
//! cursor, window, retries and dead letters; only the request and the reading of its answer
//! differ).
//!
//! Each output has its own cursor into the queue and advances it only after the output
//! acknowledged everything up to it (or the lines it refused went to the dead-letter file), so
//! a crash re-sends the batches that were in flight (`max_in_flight`) and the delivered part of
//! a record cut across batches — harmless, since a point written twice with the same series
//! and timestamp is overwritten, not duplicated (a remote-write receiver that refuses the
//! resent samples as out of order is counted apart: `resent`).
//!
//! Answers, by status:
//! * 2xx: done.
//! * 400 / 422 (bad data): lines the answer names (v1 `unable to parse '…'` and field type
//!   conflicts, v3 partial-write JSON with `line_number`) go to the dead-letter file and the
//!   rest is sent again; when nothing is named the batch is split in two and the first half
//!   sent: the second is sent after it only when the first was refused too, and split unsent
//!   when the first was accepted (the refused line must be in it); down to single lines, which
//!   are sent alone and dead-lettered with the answer as the reason. One bad line therefore
//!   never blocks the queue, and costs about 1.5 requests per halving (docs/collector.md).
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
//! `deliver` (batching, retries, splits), `dead_letter` (lines refused for good), `resent`
//! (resent lines refused as already stored),
//! `remote_write` (lines as remote-write requests, their answers), and here the
//! loop that follows the queue from the output's cursor.

mod answer;
mod batches;
mod buffers;
mod dead_letter;
mod deliver;
mod output;
pub mod remote_write;
mod resent;
mod rw_encode;
mod rw_proto;
mod rw_series;
mod rw_snappy;
mod shard;

use std::collections::VecDeque;
use std::ops::Range;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use storwatch_wire::rotate::{RotateError, RotatingFile, Rotation};

use tokio::sync::watch;
use tokio::task::JoinSet;

use crate::config::{ConfigError, OutputType};
use crate::metrics::{Metrics, OutputMetrics};
use crate::queue::Queue;
use crate::target::Target;
pub use answer::{classify, named_lines, Verdict};
use buffers::Buffers;
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
    client: crate::client::Client,
    metrics: Arc<OutputMetrics>,
    dead_letter: Mutex<RotatingFile>,
    /// The dead-letter limits in force; replaced on SIGHUP, read at every write.
    dead_letter_rotation: Arc<RwLock<Rotation>>,
    /// Log lines about resent lines refused, and about refused requests, kept few.
    quiet_resent: Mutex<resent::Quiet>,
    quiet_refusals: Mutex<resent::Quiet>,
    quiet_dead_letters: Mutex<resent::Quiet>,
    /// A remote-write output's request encoders, one per shard, kept with their buffers and
    /// name caches: a shard's requests always hold the same series, so each encoder learns
    /// only its own shard's names.
    encoders: Vec<Mutex<remote_write::Encoder>>,
    /// The buffers its request bodies and its reads of the queue are written into, used
    /// again ([`buffers`]).
    bodies: Buffers,
    reads: Buffers,
}

impl Forwarder {
    pub fn new(
        output: Output,
        metrics: Arc<OutputMetrics>,
        dead_letter_dir: PathBuf,
    ) -> Result<Forwarder, ConfigError> {
        let mut builder = crate::client::Client::builder()
            .timeout(output.timeout)
            .connect_timeout(Duration::from_secs(10))
            .pool_idle_timeout(Duration::from_secs(60));
        if let Some(ca) = &output.ca_file {
            let pem = std::fs::read(ca)
                .map_err(|e| out_err(output.url.as_str(), format!("{}: {e}", ca.display())))?;
            builder = builder
                .add_root_pem(&pem)
                .map_err(|e| out_err(output.url.as_str(), format!("{}: {e}", ca.display())))?;
        }
        let client = builder
            .build()
            .map_err(|e| out_err(output.url.as_str(), e.to_string()))?;
        let path = dead_letter_dir.join(format!("{}.lp", output.name));
        let rotation = Rotation::default();
        Ok(Forwarder {
            client,
            metrics,
            // 0600: refused lines are the sites' data, and their reasons may quote it.
            dead_letter: Mutex::new(RotatingFile::new(path, rotation, 0o600, true)),
            dead_letter_rotation: Arc::new(RwLock::new(rotation)),
            quiet_resent: Mutex::default(),
            quiet_refusals: Mutex::default(),
            quiet_dead_letters: Mutex::default(),
            encoders: (0..output.max_in_flight.max(1))
                .map(|_| Mutex::default())
                .collect(),
            bodies: Buffers::bodies(),
            reads: Buffers::reads(),
            output,
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
    ///
    /// Up to `max_in_flight` batches are in flight at once, across reads of the queue: the next
    /// read is made while earlier batches are still being sent, so the output never waits for
    /// the collector between batches. The cursor moves over a contiguous prefix of batches
    /// every one of which was acknowledged or dead-lettered, to the end of the last record they
    /// complete, so a crash re-sends what was in flight (and the rest of a record cut across
    /// batches), never skips anything.
    ///
    /// How far requests were sent is kept beside the cursor ([`Queue::save_sent_mark`]): after
    /// a restart, lines up to there are a resend, and a remote-write receiver refusing them for
    /// their time refuses samples it stored before the crash — counted apart, not dead-lettered.
    pub async fn run(self, queue: Arc<Queue>, all: Arc<Metrics>, mut stop: watch::Receiver<bool>) {
        let this = Arc::new(self);
        let name = this.output.name.clone();
        let window = this.output.max_in_flight.max(1);
        // a remote-write output's batches go out cut into shards by series, one batch at a time
        let shards = if this.output.kind == OutputType::PrometheusRemoteWrite {
            window
        } else {
            1
        };
        let (mut next_group, mut sending_group) = (0u64, None);
        // `pos`: the saved cursor, the end of the delivered prefix; `read_pos`: where the next
        // read starts (ahead of `pos` by what is read and not yet delivered).
        let mut pos = queue.load_cursor(&name);
        let mut read_pos = pos;
        let mut sent_mark = queue.load_sent_mark(&name).unwrap_or(0);
        // lines before this position were sent before a restart (a mark past the queue's end
        // is not this queue's)
        let resend_until = sent_mark.min(queue.durable_end()).max(pos);
        this.metrics.cursor.store(pos, Ordering::Relaxed);
        let mut end_rx = queue.watch_end();
        tracing::info!(output = %name, url = %this.output.url, cursor = pos, resend_bytes = resend_until - pos, "forwarding");
        // Reads not yet delivered whole, oldest first; `first` numbers the front one.
        let mut reads: VecDeque<Pending> = VecDeque::new();
        let mut first: u64 = 0;
        let mut ready: VecDeque<Chunk> = VecDeque::new();
        let mut tasks: JoinSet<(u64, usize, Result<(), ForwardError>)> = JoinSet::new();
        loop {
            if *stop.borrow() {
                return;
            }
            // Read ahead once every batch read so far is handed out.
            if ready.is_empty() && reads.len() <= window && read_pos < queue.durable_end() {
                let q = queue.clone();
                let max = this.output.batch_bytes * window;
                let from = read_pos;
                let buf = this.reads.take();
                let read =
                    tokio::task::spawn_blocking(move || q.read_records_into(from, max, buf)).await;
                match read {
                    Ok(Ok(read)) => {
                        let seq = first + reads.len() as u64;
                        let next = read.next;
                        let (mut chunks, text) = this.chunks(read, from, resend_until, seq);
                        if shards > 1 {
                            chunks = shard::split(chunks, shards, &mut next_group);
                        }
                        reads.push_back(Pending {
                            next,
                            text,
                            done: 0,
                            batches: chunks.iter().map(|c| (false, c.completes)).collect(),
                        });
                        ready.extend(chunks);
                        read_pos = next.max(read_pos);
                    }
                    Ok(Err(e)) => {
                        tracing::error!(output = %name, error = %e, "cannot read the queue; retrying");
                        if this.sleep(Duration::from_secs(1), &mut stop).await.is_err() {
                            return;
                        }
                        continue;
                    }
                    Err(_) => return,
                }
            }
            while tasks.len() < window {
                // a batch's shards start together, once the batch before is delivered whole
                if shards > 1
                    && !tasks.is_empty()
                    && ready.front().map(|c| c.group) != sending_group
                {
                    break;
                }
                let Some(chunk) = ready.pop_front() else {
                    break;
                };
                sending_group = Some(chunk.group);
                if chunk.reach > sent_mark {
                    sent_mark = chunk.reach;
                    if let Err(e) = queue.save_sent_mark(&name, sent_mark) {
                        tracing::warn!(output = %name, error = %e, "cannot save how far requests were sent");
                    }
                }
                let (fwd, mut stop) = (this.clone(), stop.clone());
                tasks.spawn(async move {
                    let url = fwd.output.url_for(&chunk.target);
                    let lines = chunk.lines();
                    let r = fwd
                        .deliver_chunks(
                            &url,
                            &chunk.target,
                            vec![lines],
                            chunk.resent,
                            chunk.shard,
                            &mut stop,
                        )
                        .await;
                    (chunk.read, chunk.index, r)
                });
            }
            // A read that held nothing to send (only damaged records) is done at once.
            this.advance(&queue, &all, &mut reads, &mut first, &mut pos);
            if tasks.is_empty() {
                if ready.is_empty() && read_pos >= queue.durable_end() {
                    tokio::select! {
                        r = end_rx.changed() => if r.is_err() { return },
                        _ = stop.changed() => return,
                    }
                }
                continue;
            }
            let done = tokio::select! {
                d = tasks.join_next() => d,
                _ = stop.changed() => return,
            };
            let failed = match done {
                Some(Ok((seq, index, Ok(())))) => {
                    if let Some(b) = seq
                        .checked_sub(first)
                        .and_then(|i| reads.get_mut(i as usize))
                        .and_then(|p| p.batches.get_mut(index))
                    {
                        b.0 = true;
                    }
                    this.advance(&queue, &all, &mut reads, &mut first, &mut pos);
                    None
                }
                Some(Ok((_, _, Err(ForwardError::Stopped)))) => return,
                Some(Ok((_, _, Err(e)))) => Some(e.to_string()),
                Some(Err(e)) => Some(format!("delivery task ended: {e}")),
                None => None,
            };
            if let Some(e) = failed {
                // Everything after the saved cursor is sent again (batches already delivered
                // are overwritten with the same points); the other batches in flight are
                // abandoned first, so that nothing is sent twice at once.
                tracing::error!(output = %name, error = %e, "cannot write the dead-letter file; retrying");
                tasks.abort_all();
                while tasks.join_next().await.is_some() {}
                reads.clear();
                ready.clear();
                first = 0;
                read_pos = pos;
                if this.sleep(Duration::from_secs(5), &mut stop).await.is_err() {
                    return;
                }
            }
        }
    }

    /// Keeps the buffer of a read whose batches are all delivered (dropped: no batch holds its
    /// text any more) for the next read.
    fn give_read_buf(&self, read: Pending) {
        if let Some(text) = read.text.and_then(|t| Arc::try_unwrap(t).ok()) {
            self.reads.give(text.into_bytes());
        }
    }

    /// Moves the cursor over the batches at the front that are delivered, to the end of the
    /// last record they complete (over a whole read once all its batches are), saves it and
    /// frees the segments every output has passed.
    fn advance(
        &self,
        queue: &Queue,
        all: &Metrics,
        reads: &mut VecDeque<Pending>,
        first: &mut u64,
        pos: &mut u64,
    ) {
        let before = *pos;
        while let Some(p) = reads.front_mut() {
            while let Some(&(true, completes)) = p.batches.get(p.done) {
                if let Some(end) = completes {
                    *pos = (*pos).max(end);
                }
                p.done += 1;
            }
            if p.done < p.batches.len() {
                break;
            }
            *pos = (*pos).max(p.next);
            if let Some(p) = reads.pop_front() {
                self.give_read_buf(p);
            }
            *first += 1;
        }
        if *pos == before {
            return;
        }
        if let Err(e) = queue.save_cursor(&self.output.name, *pos) {
            tracing::error!(output = %self.output.name, error = %e, "cannot save the cursor");
        }
        self.metrics.cursor.store(*pos, Ordering::Relaxed);
        if let Err(e) = queue.release(all.min_cursor()) {
            tracing::warn!(error = %e, "cannot delete acknowledged segments");
        }
    }
}

/// A read of the queue being delivered: the cursor may move to `next` once its batches and
/// every earlier read are delivered, and to a batch's end of record once it and every batch
/// before it are.
#[derive(Debug)]
struct Pending {
    next: u64,
    /// The read's text, the batches' when they are ranges of one text.
    text: Option<Arc<String>>,
    /// Per batch: delivered, and the end of the last record it completes.
    batches: Vec<(bool, Option<u64>)>,
    /// Batches at the front delivered and passed.
    done: usize,
}

/// One batch: lines of one target, as ranges into the text of the records they came from.
#[derive(Debug)]
struct Chunk {
    /// The number of the read it came from, and its own within the read.
    read: u64,
    index: usize,
    /// The position past the last record whose last line is in it.
    completes: Option<u64>,
    /// The position past the record of its last line: how far sending it sends.
    reach: u64,
    /// Its lines were sent before a restart.
    resent: bool,
    target: Target,
    parts: Vec<(Arc<String>, Vec<Range<usize>>)>,
    count: usize,
    /// The batch it is a shard of (remote write, [`shard`]): the shards of one batch are sent
    /// together.
    group: u64,
    /// Its shard (0 when batches are not cut): the encoder that writes its requests.
    shard: usize,
}

impl Chunk {
    fn lines(&self) -> Vec<&str> {
        let mut out = Vec::with_capacity(self.count);
        for (text, ranges) in &self.parts {
            out.extend(ranges.iter().filter_map(|r| text.get(r.clone())));
        }
        out
    }
}
