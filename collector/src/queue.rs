//! The durable queue: the collector's side of the shared segment log ([`storwatch_wire::log`]).
//!
//! Layout under the queue directory (see the log's documentation for the bytes):
//!
//! ```text
//! segments/<20-digit number>.seg   CRC-framed records, back to back
//! cursors/<output name>.pos        per-output read position
//! ```
//!
//! What this module adds to the log: positions as one byte number (the log's stream offset, what
//! the metrics and `/health` count backlog in), and one writer thread that takes every request
//! waiting, appends them as one batch — one `write`, one `fdatasync` — and only then answers
//! them all (group commit), so one fsync covers many concurrent requests.
//!
//! Recovery (a torn tail cut, damage skipped and counted), segments released once every output
//! has passed them, a delivered active segment reclaimed, the queue format of earlier releases
//! read until delivered: all in the log. A full filesystem is [`QueueError::OutOfSpace`]: the
//! write is not acknowledged, nothing acknowledged is touched, and appends work again once
//! space is back. Whether the queue is full, as `/health` says it, is [`Space`]'s to decide.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use storwatch_wire::log::{CursorId, Layout, Log, LogError, LogOptions, Position};
use tokio::sync::{mpsc, oneshot, watch};

use crate::metrics::Metrics;

/// Errors of the queue.
#[derive(Debug, thiserror::Error)]
pub enum QueueError {
    #[error(transparent)]
    Log(#[from] LogError),
    /// The filesystem of the queue is full: the write was not stored.
    #[error("queue filesystem full: {0}")]
    OutOfSpace(String),
    /// A write failed for another reason.
    #[error("queue write failed: {0}")]
    Write(String),
    #[error("queue writer has stopped")]
    Closed,
    #[error("record of {0} bytes exceeds the maximum record size")]
    TooLarge(usize),
}

impl QueueError {
    /// True when the write failed only for lack of space: worth retrying later.
    pub fn is_out_of_space(&self) -> bool {
        match self {
            Self::OutOfSpace(_) => true,
            Self::Log(e) => e.is_out_of_space(),
            _ => false,
        }
    }
}

/// What recovery found when the queue was opened.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Recovery {
    /// Bytes cut from the end of the last segment (a write interrupted by a crash).
    pub torn_bytes: u64,
    /// Damaged regions found inside the log; their records are skipped.
    pub corrupt_records: u64,
    /// Segments in the format of earlier releases, read until delivered.
    pub legacy_segments: u64,
}

/// Queue settings.
#[derive(Debug, Clone)]
pub struct QueueOptions {
    /// A new segment starts once the current one reaches this size.
    pub segment_bytes: u64,
    /// The largest payload accepted (and believed when reading a length).
    pub max_record_bytes: usize,
    /// fsync before acknowledging. Only benchmarks of the non-durable path turn this off.
    pub fsync: bool,
}

impl Default for QueueOptions {
    fn default() -> Self {
        Self {
            segment_bytes: 64 << 20,
            max_record_bytes: 64 << 20,
            fsync: true,
        }
    }
}

/// A fully delivered active segment at least this large is replaced by a fresh one, so that
/// delivered data does not wait for the segment to fill before its space comes back.
const RECLAIM_BYTES: u64 = 4 << 20;

struct AppendReq {
    payload: bytes::Bytes,
    done: oneshot::Sender<Result<u64, QueueError>>,
}

/// The shared handle: appends, the durable end, cursors and segment housekeeping.
/// Records read from the queue ([`Queue::read_records`]).
#[derive(Debug)]
pub struct Read {
    /// The records' payloads, one after another.
    pub buf: Vec<u8>,
    /// Where each record's payload ends in `buf`.
    pub bounds: Vec<usize>,
    /// The position past each record.
    pub ends: Vec<u64>,
    /// The position past the read (past damage skipped after the last record too).
    pub next: u64,
}

impl Read {
    /// Each record's payload.
    pub fn records(&self) -> impl Iterator<Item = &[u8]> + '_ {
        let starts = std::iter::once(0).chain(self.bounds.iter().copied());
        starts
            .zip(&self.bounds)
            .map(|(start, &end)| self.buf.get(start..end).unwrap_or_default())
    }
}

pub struct Queue {
    dir: PathBuf,
    opts: QueueOptions,
    log: Arc<Log>,
    tx: mpsc::UnboundedSender<AppendReq>,
    durable_end: watch::Receiver<u64>,
    cursors: Mutex<HashMap<String, CursorId>>,
    metrics: Arc<Metrics>,
    space: Arc<Space>,
}

impl std::fmt::Debug for Queue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Queue").field("dir", &self.dir).finish()
    }
}

impl Queue {
    /// Opens (or creates) the queue in `dir`, recovers the tail and starts the writer thread.
    pub fn open(
        dir: &Path,
        opts: QueueOptions,
        metrics: Arc<Metrics>,
    ) -> Result<(Arc<Queue>, Recovery), QueueError> {
        let log_opts = LogOptions {
            segment_bytes: opts.segment_bytes,
            max_record_bytes: opts.max_record_bytes as u64,
            max_bytes: None,
            sync: opts.fsync,
            sync_cursors: true,
            reclaim_bytes: RECLAIM_BYTES.min(opts.segment_bytes),
            count: None,
        };
        let (log, rec) = Log::open(Layout::split(dir), log_opts)?;
        if rec.legacy_segments > 0 || rec.converted_cursors > 0 {
            tracing::info!(
                segments = rec.legacy_segments,
                cursors = rec.converted_cursors,
                "queue written by an earlier release: its segments are read until delivered, its cursors converted"
            );
        }
        let recovery = Recovery {
            torn_bytes: rec.torn_bytes,
            corrupt_records: rec.corrupt_records,
            legacy_segments: rec.legacy_segments,
        };
        metrics
            .queue_torn_bytes
            .fetch_add(recovery.torn_bytes, Ordering::Relaxed);
        metrics
            .queue_corrupt_records
            .store(log.stats().corrupt_records, Ordering::Relaxed);
        let log = Arc::new(log);
        let end = log.end().byte();
        let (end_tx, end_rx) = watch::channel(end);
        let (tx, rx) = mpsc::unbounded_channel();
        let space = Arc::new(Space::default());
        let writer = Writer {
            log: log.clone(),
            end_tx,
            metrics: metrics.clone(),
            space: space.clone(),
        };
        std::thread::Builder::new()
            .name("queue-writer".into())
            .spawn(move || writer.run(rx))
            .map_err(|e| QueueError::Write(format!("cannot start the queue writer: {e}")))?;
        metrics.queue_end.store(end, Ordering::Relaxed);
        Ok((
            Arc::new(Queue {
                dir: dir.to_path_buf(),
                opts,
                log,
                tx,
                durable_end: end_rx,
                cursors: Mutex::new(HashMap::new()),
                metrics,
                space,
            }),
            recovery,
        ))
    }

    /// Appends one record and returns the end of the queue once it is on disk (fsync'd).
    pub async fn append(&self, payload: impl Into<bytes::Bytes>) -> Result<u64, QueueError> {
        let payload: bytes::Bytes = payload.into();
        if payload.len() > self.opts.max_record_bytes {
            return Err(QueueError::TooLarge(payload.len()));
        }
        let (done, wait) = oneshot::channel();
        self.tx
            .send(AppendReq { payload, done })
            .map_err(|_| QueueError::Closed)?;
        wait.await.unwrap_or(Err(QueueError::Closed))
    }

    /// The position up to which everything is on disk.
    pub fn durable_end(&self) -> u64 {
        self.log.end().byte()
    }

    /// A receiver that changes whenever appends move the durable end.
    pub fn watch_end(&self) -> watch::Receiver<u64> {
        self.durable_end.clone()
    }

    /// The first position still on disk (older segments were deleted).
    pub fn first_pos(&self) -> u64 {
        self.log.first().byte()
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn max_record_bytes(&self) -> usize {
        self.opts.max_record_bytes
    }

    /// The log's cursor of output `name`, registered on first use: from then on segments are
    /// released only once this output has passed them too.
    fn cursor(&self, name: &str) -> Result<CursorId, QueueError> {
        let mut map = self.cursors.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(id) = map.get(name) {
            return Ok(*id);
        }
        let id = self.log.cursor(name)?;
        map.insert(name.to_owned(), id);
        Ok(id)
    }

    /// The saved position of an output, or the oldest position when there is none (a new output
    /// gets the whole backlog; a damaged cursor file also falls back to that: resending is
    /// harmless because points are idempotent, losing them is not).
    pub fn load_cursor(&self, name: &str) -> u64 {
        match self.cursor(name) {
            Ok(id) => self.log.position(id).byte(),
            Err(e) => {
                tracing::error!(output = %name, error = %e, "no cursor for this output; reading from the oldest data");
                self.first_pos()
            }
        }
    }

    /// Saves an output's position durably (write, fsync, rename) and frees what every output
    /// has passed.
    pub fn save_cursor(&self, name: &str, pos: u64) -> Result<(), QueueError> {
        let id = self.cursor(name)?;
        let first = self.first_pos();
        let moved = self.log.seek(id, self.log.locate(pos));
        self.freed_since(first);
        moved?;
        Ok(())
    }

    /// Deletes segments that every output has read past (`min_cursor`).
    pub fn release(&self, min_cursor: u64) -> Result<(), QueueError> {
        let first = self.first_pos();
        let released = self.log.release(Some(self.log.locate(min_cursor)));
        self.freed_since(first);
        released?;
        Ok(())
    }

    /// Tells [`Space`] what deleting delivered segments freed since the oldest position kept
    /// was `first` (segments are named by their first byte, so that is the bytes deleted).
    fn freed_since(&self, first: u64) {
        let freed = self.first_pos().saturating_sub(first);
        if freed > 0 {
            self.space.room_for(freed, &self.metrics);
        }
    }

    /// Bytes on disk not yet read by the slowest output.
    pub fn backlog(&self, min_cursor: u64) -> u64 {
        self.durable_end().saturating_sub(min_cursor)
    }

    /// Reads records from `pos` up to the durable end, at most `max_bytes` of payload (but always
    /// at least one record), returning the payloads and the position after the last one.
    pub fn read_from(&self, pos: u64, max_bytes: usize) -> Result<(Vec<Vec<u8>>, u64), QueueError> {
        self.read_records(pos, max_bytes)
            .map(|r| (r.records().map(<[u8]>::to_vec).collect(), r.next))
    }

    /// [`Queue::read_from`], with the position past each record, so that an output may move
    /// its cursor over the records it delivered before the whole read is.
    pub fn read_records(&self, pos: u64, max_bytes: usize) -> Result<Read, QueueError> {
        self.read_records_into(pos, max_bytes, Vec::new())
    }

    /// [`Queue::read_records`] into `buf` (emptied first: a buffer of an earlier read).
    pub fn read_records_into(
        &self,
        pos: u64,
        max_bytes: usize,
        mut buf: Vec<u8>,
    ) -> Result<Read, QueueError> {
        let end = self.log.end();
        let from = self.log.locate(pos).max(self.log.first());
        let mut ends = Vec::new();
        let mut marks = Vec::new();
        let batch = self.log.read_marked(
            from,
            max_bytes.max(1),
            usize::MAX,
            &mut buf,
            &mut ends,
            Some(&mut marks),
        )?;
        self.metrics
            .queue_corrupt_records
            .store(self.log.stats().corrupt_records, Ordering::Relaxed);
        let Some(batch) = batch else {
            // Nothing between `pos` and the end read before: skip to that end (a fresh
            // segment's header is all there is).
            return Ok(Read {
                buf: Vec::new(),
                bounds: Vec::new(),
                ends: Vec::new(),
                next: end.byte().max(pos),
            });
        };
        Ok(Read {
            buf,
            bounds: ends,
            ends: marks.into_iter().map(|m| m.byte()).collect(),
            next: batch.end.byte(),
        })
    }

    /// The position up to which an output has sent requests (a hint kept beside its cursor:
    /// lines between the cursor and it were sent before a crash, and may be stored already).
    pub fn load_sent_mark(&self, name: &str) -> Option<u64> {
        std::fs::read_to_string(self.sent_mark_path(name))
            .ok()?
            .trim()
            .parse()
            .ok()
    }

    /// Saves [`Queue::load_sent_mark`]'s hint: written and renamed, not fsync'd — it survives
    /// the process being killed, and a power cut that loses it only loses the hint. Private
    /// (0600) like every other file of the queue directory.
    pub fn save_sent_mark(&self, name: &str, pos: u64) -> std::io::Result<()> {
        use std::io::Write;
        use std::os::unix::fs::OpenOptionsExt;
        let path = self.sent_mark_path(name);
        let tmp = path.with_extension("sent.tmp");
        std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&tmp)?
            .write_all(pos.to_string().as_bytes())?;
        std::fs::rename(&tmp, &path)
    }

    fn sent_mark_path(&self, name: &str) -> PathBuf {
        self.dir.join(format!("{name}.sent"))
    }

    /// Position `byte` as the log's [`Position`] (for tests and tools).
    pub fn locate(&self, byte: u64) -> Position {
        self.log.locate(byte)
    }
}

/// Whether the queue's filesystem is full: the `queue_full` flag of `/health` and `/metrics`.
///
/// An append refused for lack of space sets it and remembers the size of the largest request
/// refused since. It clears only once there is room for such a request again: an append at
/// least that large was stored, or the queue deleted at least that many bytes of delivered
/// segments. A smaller append that still fits in what is left (the collector's own heartbeat
/// every few seconds, a short request) does not clear it: a write like the one refused would
/// be refused again. An I/O error other than a full filesystem leaves it as it was.
#[derive(Debug, Default)]
struct Space {
    /// Payload bytes of the largest request refused while full; `None` while not full.
    refused: Mutex<Option<u64>>,
}

impl Space {
    /// A request of `largest` payload bytes (the largest of its batch) was refused for space.
    fn refused(&self, largest: u64, metrics: &Metrics) {
        let mut r = self.refused.lock().unwrap_or_else(|e| e.into_inner());
        *r = Some(r.map_or(largest, |old| old.max(largest)));
        metrics.queue_full.store(true, Ordering::Relaxed);
    }

    /// `bytes` were found free: appended, or deleted from the queue.
    fn room_for(&self, bytes: u64, metrics: &Metrics) {
        let mut r = self.refused.lock().unwrap_or_else(|e| e.into_inner());
        if r.is_some_and(|needed| bytes >= needed) {
            *r = None;
            metrics.queue_full.store(false, Ordering::Relaxed);
        }
    }
}

struct Writer {
    log: Arc<Log>,
    end_tx: watch::Sender<u64>,
    metrics: Arc<Metrics>,
    space: Arc<Space>,
}

impl Writer {
    fn run(self, mut rx: mpsc::UnboundedReceiver<AppendReq>) {
        while let Some(first) = rx.blocking_recv() {
            let mut batch = vec![first];
            // Everyone who arrived while the previous fsync ran shares this one.
            while let Ok(more) = rx.try_recv() {
                batch.push(more);
                if batch.len() >= 4096 {
                    break;
                }
            }
            let payloads: Vec<&[u8]> = batch.iter().map(|r| r.payload.as_ref()).collect();
            let stored_bytes: u64 = payloads.iter().map(|p| p.len() as u64).sum();
            let largest = payloads.iter().map(|p| p.len() as u64).max().unwrap_or(0);
            match self.log.append_batch(&payloads) {
                Ok(appended) => {
                    let end = appended.end.byte();
                    self.metrics.queue_end.store(end, Ordering::Relaxed);
                    self.metrics.queue_fsyncs.fetch_add(1, Ordering::Relaxed);
                    self.metrics
                        .queue_records
                        .fetch_add(batch.len() as u64, Ordering::Relaxed);
                    self.space.room_for(stored_bytes, &self.metrics);
                    self.end_tx.send_replace(end);
                    for req in batch {
                        let _ = req.done.send(Ok(end));
                    }
                }
                Err(e) => {
                    let full = e.is_out_of_space();
                    if full {
                        self.space.refused(largest, &self.metrics);
                        self.metrics
                            .queue_full_refusals
                            .fetch_add(batch.len() as u64, Ordering::Relaxed);
                        tracing::warn!(error = %e, "queue filesystem full; writes are refused with 503 until space is back");
                    } else {
                        tracing::error!(error = %e, "queue write failed; requests answered with an error");
                    }
                    let text = e.to_string();
                    for req in batch {
                        let err = if full {
                            QueueError::OutOfSpace(text.clone())
                        } else {
                            QueueError::Write(text.clone())
                        };
                        let _ = req.done.send(Err(err));
                    }
                }
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::target::Target;

    use std::fs::{self, OpenOptions};
    use std::io::Write;

    /// A record as the log frames it: magic, length, CRC of length and payload, payload.
    fn rec(p: &[u8]) -> Vec<u8> {
        let len = (p.len() as u32).to_le_bytes();
        let mut h = crc32fast::Hasher::new();
        h.update(&len);
        h.update(p);
        let mut v = b"SWR1".to_vec();
        v.extend_from_slice(&len);
        v.extend_from_slice(&h.finalize().to_le_bytes());
        v.extend_from_slice(p);
        v
    }

    fn seg_name(start: u64) -> String {
        format!("{start:020}.seg")
    }

    fn open(dir: &Path) -> (Arc<Queue>, Recovery) {
        Queue::open(dir, QueueOptions::default(), Arc::new(Metrics::default())).unwrap()
    }

    #[tokio::test]
    async fn append_read_reopen_and_recover_torn_tail() {
        let dir = tempfile::tempdir().unwrap();
        let (q, rec0) = open(dir.path());
        assert_eq!(rec0, Recovery::default());
        let e1 = q.append(b"a v=1 1\n".to_vec()).await.unwrap();
        let e2 = q.append(b"a v=2 2\n".to_vec()).await.unwrap();
        assert!(e2 > e1);
        let (recs, next) = q.read_from(0, 1 << 20).unwrap();
        assert_eq!(recs, vec![b"a v=1 1\n".to_vec(), b"a v=2 2\n".to_vec()]);
        assert_eq!(next, e2);
        drop(q);
        // Simulate a torn write: half a record at the end.
        let seg = dir.path().join("segments").join(seg_name(0));
        let mut f = OpenOptions::new().append(true).open(&seg).unwrap();
        f.write_all(&rec(b"a v=3 3\n")[..10]).unwrap();
        drop(f);
        let (q, r) = open(dir.path());
        assert_eq!(r.torn_bytes, 10);
        assert_eq!(q.durable_end(), e2);
        let e3 = q.append(b"a v=4 4\n".to_vec()).await.unwrap();
        let (recs, next) = q.read_from(0, 1 << 20).unwrap();
        assert_eq!(recs.len(), 3);
        assert_eq!(next, e3);
    }

    #[tokio::test]
    async fn recovery_reads_large_segments_in_windows() {
        let dir = tempfile::tempdir().unwrap();
        let (q, _) = open(dir.path());
        let big = vec![b'x'; 1_500_000];
        for _ in 0..4 {
            q.append(big.clone()).await.unwrap();
        }
        let end = q.durable_end();
        drop(q);
        // A torn record across the 4 MiB window boundary is still found and cut.
        let seg = dir.path().join("segments").join(seg_name(0));
        let mut f = OpenOptions::new().append(true).open(&seg).unwrap();
        f.write_all(&rec(&big)[..700_000]).unwrap();
        drop(f);
        let (q, r) = open(dir.path());
        assert_eq!(
            r,
            Recovery {
                torn_bytes: 700_000,
                ..Recovery::default()
            }
        );
        assert_eq!(q.durable_end(), end);
        let (recs, _) = q.read_from(0, 1 << 30).unwrap();
        assert_eq!(recs.len(), 4);
    }

    #[tokio::test]
    async fn corrupt_record_is_skipped_and_counted() {
        let dir = tempfile::tempdir().unwrap();
        let (q, _) = open(dir.path());
        q.append(b"a v=1 1\n".to_vec()).await.unwrap();
        let e2 = q.append(b"a v=2 2\n".to_vec()).await.unwrap();
        q.append(b"a v=3 3\n".to_vec()).await.unwrap();
        drop(q);
        let seg = dir.path().join("segments").join(seg_name(0));
        let mut bytes = fs::read(&seg).unwrap();
        bytes[(e2 - 3) as usize] ^= 0x55;
        fs::write(&seg, bytes).unwrap();
        let (q, r) = open(dir.path());
        assert_eq!(r.corrupt_records, 1);
        assert_eq!(r.torn_bytes, 0);
        let (recs, _) = q.read_from(0, 1 << 20).unwrap();
        assert_eq!(recs, vec![b"a v=1 1\n".to_vec(), b"a v=3 3\n".to_vec()]);
        assert_eq!(q.metrics.queue_corrupt_records.load(Ordering::Relaxed), 1);
    }

    #[tokio::test]
    async fn segments_roll_read_across_and_release() {
        let dir = tempfile::tempdir().unwrap();
        let opts = QueueOptions {
            segment_bytes: 64,
            ..QueueOptions::default()
        };
        let (q, _) = Queue::open(dir.path(), opts.clone(), Arc::new(Metrics::default())).unwrap();
        let mut ends = vec![];
        for i in 0..20 {
            ends.push(
                q.append(format!("m v={i} {i}\n").into_bytes())
                    .await
                    .unwrap(),
            );
        }
        let mut pos = 0;
        let mut n = 0;
        while pos < q.durable_end() {
            let (recs, next) = q.read_from(pos, 30).unwrap();
            n += recs.len();
            pos = next;
        }
        assert_eq!(n, 20);
        q.save_cursor("out", ends[9]).unwrap();
        assert_eq!(q.load_cursor("out"), ends[9]);
        q.release(ends[9]).unwrap();
        assert!(q.first_pos() > 0 && q.first_pos() <= ends[9]);
        let (recs, _) = q.read_from(ends[9], 1 << 20).unwrap();
        assert_eq!(recs.len(), 10);
        drop(q);
        let (q, r) = Queue::open(dir.path(), opts, Arc::new(Metrics::default())).unwrap();
        assert_eq!(r, Recovery::default());
        assert_eq!(q.durable_end(), *ends.last().unwrap());
        assert_eq!(q.load_cursor("out"), ends[9]);
    }

    fn full(m: &Metrics) -> bool {
        m.queue_full.load(Ordering::Relaxed)
    }

    /// What the full filesystem's flag goes by: a smaller append that still fits (the
    /// heartbeat) does not clear it; room for the largest request refused does.
    #[test]
    fn full_flag_clears_only_with_room_for_what_was_refused() {
        let m = Metrics::default();
        let space = Space::default();
        space.room_for(100, &m);
        assert!(!full(&m));
        space.refused(250_000, &m);
        assert!(full(&m));
        // The heartbeat refused as well, then stored in what is left.
        space.refused(4_000, &m);
        space.room_for(4_000, &m);
        assert!(
            full(&m),
            "a heartbeat fitting does not make room for the refused write"
        );
        space.room_for(249_999, &m);
        assert!(full(&m));
        space.room_for(250_000, &m);
        assert!(!full(&m));
        // Set again; a batch of requests stored together counts as one append.
        space.refused(10, &m);
        space.room_for(10, &m);
        assert!(!full(&m));
    }

    /// Delivered segments deleted (an output caught up) are room as well, by their size.
    #[tokio::test]
    async fn full_flag_clears_when_delivered_segments_free_the_room() {
        let dir = tempfile::tempdir().unwrap();
        let opts = QueueOptions {
            segment_bytes: 64,
            ..QueueOptions::default()
        };
        let m = Arc::new(Metrics::default());
        let (q, _) = Queue::open(dir.path(), opts, m.clone()).unwrap();
        let mut ends = vec![];
        for i in 0..20 {
            ends.push(
                q.append(format!("m v={i} {i}\n").into_bytes())
                    .await
                    .unwrap(),
            );
        }
        q.load_cursor("out");
        // Needs less than the first ten records' segments hold.
        q.space.refused(100, &m);
        q.save_cursor("out", ends[9]).unwrap();
        q.release(ends[9]).unwrap();
        assert!(q.first_pos() >= 100, "{}", q.first_pos());
        assert!(!full(&m));
        // Needs more than the rest holds.
        let first = q.first_pos();
        q.space.refused(1 << 20, &m);
        q.save_cursor("out", ends[19]).unwrap();
        q.release(ends[19]).unwrap();
        assert!(q.first_pos() > first);
        assert!(full(&m), "less was freed than the refused write needs");
    }

    fn record(i: u64) -> Vec<u8> {
        format!(
            "disk,host=node{i:02},device=sda util_pct={i}.5,r_per_s={i}i {t}\nnet,host=node{i:02},iface=eth0 rx_bytes_per_s={i}i {t}\n",
            t = 1_700_000_000_000_000_000u64 + i * 10_000_000_000
        )
        .into_bytes()
    }

    fn copy_dir(from: &Path, to: &Path) {
        fs::create_dir_all(to).unwrap();
        for e in fs::read_dir(from).unwrap() {
            let e = e.unwrap();
            if e.file_type().unwrap().is_dir() {
                copy_dir(&e.path(), &to.join(e.file_name()));
            } else {
                fs::copy(e.path(), to.join(e.file_name())).unwrap();
            }
        }
    }

    fn drain(q: &Queue, name: &str) -> Vec<Vec<u8>> {
        let mut pos = q.load_cursor(name);
        let mut got = Vec::new();
        while pos < q.durable_end() {
            let (recs, next) = q.read_from(pos, 300).unwrap();
            got.extend(recs);
            pos = next;
            q.save_cursor(name, pos).unwrap();
        }
        got
    }

    /// Records naming their target and records of the default target (the format of earlier
    /// releases) side by side, across a restart: each comes back with its own target.
    #[tokio::test]
    async fn records_keep_their_target_across_a_restart() {
        let dir = tempfile::tempdir().unwrap();
        let telegraf = Target {
            db: "telegraf".into(),
            rp: String::new(),
        };
        let site = Target::parse("site/rp_1m").unwrap();
        let recs = [
            (Target::default(), record(1)),
            (telegraf.clone(), record(2)),
            (site.clone(), record(3)),
            (Target::default(), record(4)),
        ];
        {
            let (q, _) = open(dir.path());
            for (t, r) in &recs {
                q.append(t.record(bytes::Bytes::from(r.clone())))
                    .await
                    .unwrap();
            }
        }
        let (q, rec) = open(dir.path());
        assert_eq!(rec, Recovery::default());
        q.load_cursor("influx");
        let got: Vec<(Target, Vec<u8>)> = drain(&q, "influx")
            .iter()
            .map(|r| {
                let (t, lines) = Target::of_record(r).unwrap();
                (t, lines.to_vec())
            })
            .collect();
        assert_eq!(got, recs);
    }

    /// A queue written by the release before the shared log (fixture and its provenance in
    /// wire/tests/fixtures/legacy): every pending record is delivered once to each output,
    /// new records follow, and nothing comes back after a restart.
    #[tokio::test]
    async fn queue_of_an_earlier_release_is_delivered_exactly_once() {
        let dir = tempfile::tempdir().unwrap();
        let fixture = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../wire/tests/fixtures/legacy/collector-queue");
        copy_dir(&fixture, dir.path());
        let opts = QueueOptions {
            segment_bytes: 1024,
            ..QueueOptions::default()
        };
        let (q, r) = Queue::open(dir.path(), opts.clone(), Arc::new(Metrics::default())).unwrap();
        assert_eq!(r.legacy_segments, 4);
        assert_eq!((r.torn_bytes, r.corrupt_records), (0, 0));
        // Both cursors registered before either moves, as the collector does at start.
        q.load_cursor("archive");
        q.load_cursor("influx");
        let archived = drain(&q, "archive");
        assert_eq!(archived, (14..30).map(record).collect::<Vec<_>>());
        // Their records carry no target: the default one, the lines unchanged.
        for r in &archived {
            assert_eq!(Target::of_record(r), Some((Target::default(), &r[..])));
        }
        assert_eq!(
            drain(&q, "influx"),
            (21..30).map(record).collect::<Vec<_>>()
        );
        q.append(record(30)).await.unwrap();
        assert_eq!(drain(&q, "archive"), vec![record(30)]);
        assert_eq!(drain(&q, "influx"), vec![record(30)]);
        drop(q);
        let (q, _) = Queue::open(dir.path(), opts, Arc::new(Metrics::default())).unwrap();
        q.load_cursor("archive");
        q.load_cursor("influx");
        assert!(drain(&q, "archive").is_empty());
        assert!(drain(&q, "influx").is_empty());
        // Every legacy segment was delivered by both outputs and released.
        let left: Vec<_> = fs::read_dir(dir.path().join("segments"))
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert!(
            left.iter().all(|n| n.as_str() > "00000000000000004262.seg"),
            "{left:?}"
        );
    }
}
