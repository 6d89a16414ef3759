//! The durable queue: an append-only segment log with length + CRC framed records.
//!
//! Layout under the queue directory:
//!
//! ```text
//! segments/<start position, 20 digits>.seg   records, back to back
//! cursors/<output name>.pos                  per-output read position (8 bytes LE + CRC32)
//! ```
//!
//! A record is `[payload length: u32 LE][crc32 of payload: u32 LE][payload]`. A position is a
//! global byte offset: a segment named `N` holds positions `N..N+len`. Appends go through one
//! writer thread that takes every request waiting, writes them in one `write`, `fdatasync`s once
//! and only then answers them all (group commit), so one fsync covers many concurrent requests.
//!
//! On open, the last segment is scanned: a record that is cut short, has a zero or oversized
//! length, or fails its CRC with nothing valid after it is a torn tail (a write the crash
//! interrupted, never acknowledged) and is truncated away. A damaged record followed by valid
//! ones is corruption: readers skip it (searching forward for the next record whose CRC
//! matches) and count it, instead of stopping the queue.

use std::collections::BTreeMap;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::{mpsc, oneshot, watch};

use crate::metrics::Metrics;

/// Bytes of framing in front of every payload.
pub const HEADER_LEN: usize = 8;

/// Errors of the queue, with the path where the I/O failed.
#[derive(Debug, thiserror::Error)]
pub enum QueueError {
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: io::Error },
    #[error("queue writer has stopped")]
    Closed,
    #[error("record of {0} bytes exceeds the maximum record size")]
    TooLarge(usize),
}

fn io_err(path: &Path) -> impl FnOnce(io::Error) -> QueueError + '_ {
    move |source| QueueError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// What the scanner found at a position of a byte buffer.
#[derive(Debug, PartialEq, Eq)]
pub enum Scan {
    /// A valid record: payload at `payload_start..next`, next record at `next`.
    Record { payload_start: usize, next: usize },
    /// Damaged bytes from the position up to `next`, where a valid record starts.
    Corrupt { next: usize },
    /// Not enough bytes for a complete record (end of data, or a torn tail).
    Incomplete,
}

/// Frames `payload` as one record.
pub fn frame(payload: &[u8], out: &mut Vec<u8>) {
    let len = u32::try_from(payload.len()).unwrap_or(u32::MAX);
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(&crc32fast::hash(payload).to_le_bytes());
    out.extend_from_slice(payload);
}

fn header_at(buf: &[u8], pos: usize) -> Option<(usize, u32)> {
    let h = buf.get(pos..pos.checked_add(HEADER_LEN)?)?;
    let len = u32::from_le_bytes([h[0], h[1], h[2], h[3]]) as usize;
    let crc = u32::from_le_bytes([h[4], h[5], h[6], h[7]]);
    Some((len, crc))
}

/// Checks for a valid record at `pos`: `Some(next)` when length and CRC hold.
fn valid_at(buf: &[u8], pos: usize, max_record: usize) -> Option<usize> {
    let (len, crc) = header_at(buf, pos)?;
    if len == 0 || len > max_record {
        return None;
    }
    let start = pos + HEADER_LEN;
    let payload = buf.get(start..start.checked_add(len)?)?;
    (crc32fast::hash(payload) == crc).then_some(start + len)
}

/// Looks at the record starting at `pos` of `buf` (`buf` holds everything known to be written).
///
/// `complete` says whether `buf` reaches the end of the durable data: only then can a record that
/// runs past the end be called damaged rather than merely not read yet.
pub fn scan(buf: &[u8], pos: usize, max_record: usize) -> Scan {
    let Some((len, _)) = header_at(buf, pos) else {
        return Scan::Incomplete;
    };
    if let Some(next) = valid_at(buf, pos, max_record) {
        return Scan::Record {
            payload_start: pos + HEADER_LEN,
            next,
        };
    }
    let plausible = len != 0 && len <= max_record;
    if plausible && pos + HEADER_LEN + len > buf.len() {
        // The record may simply not be in `buf` yet.
        return Scan::Incomplete;
    }
    // Damaged: find the next position where a record validates.
    let mut p = pos + 1;
    while p + HEADER_LEN <= buf.len() {
        if valid_at(buf, p, max_record).is_some() {
            return Scan::Corrupt { next: p };
        }
        p += 1;
    }
    Scan::Incomplete
}

/// What recovery found when the queue was opened.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Recovery {
    /// Bytes cut from the end of the last segment (a write interrupted by a crash).
    pub torn_bytes: u64,
    /// Damaged regions found inside the log; their records are skipped.
    pub corrupt_records: u64,
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

struct AppendReq {
    payload: bytes::Bytes,
    done: oneshot::Sender<Result<u64, String>>,
}

/// The shared handle: appends, the durable end, cursors and segment housekeeping.
pub struct Queue {
    dir: PathBuf,
    opts: QueueOptions,
    tx: mpsc::UnboundedSender<AppendReq>,
    durable_end: watch::Receiver<u64>,
    /// Start positions of the segments on disk.
    segments: Arc<Mutex<BTreeMap<u64, ()>>>,
    first_pos: AtomicU64,
    metrics: Arc<Metrics>,
}

impl std::fmt::Debug for Queue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Queue").field("dir", &self.dir).finish()
    }
}

fn seg_name(start: u64) -> String {
    format!("{start:020}.seg")
}

fn list_segments(dir: &Path) -> Result<BTreeMap<u64, ()>, QueueError> {
    let mut out = BTreeMap::new();
    for entry in fs::read_dir(dir).map_err(io_err(dir))? {
        let entry = entry.map_err(io_err(dir))?;
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        if let Some(num) = name.strip_suffix(".seg") {
            if let Ok(start) = num.parse::<u64>() {
                out.insert(start, ());
            }
        }
    }
    Ok(out)
}

fn sync_dir(dir: &Path) -> Result<(), QueueError> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(io_err(dir))
}

/// Scans a whole segment file, returns (valid end, torn bytes, corrupt regions).
///
/// The file is read in 4 MiB windows, so opening a queue with a large backlog does not need
/// the segment's size in memory.
fn recover_segment(path: &Path, max_record: usize) -> Result<(u64, u64, u64), QueueError> {
    let mut f = File::open(path).map_err(io_err(path))?;
    let len = f.metadata().map_err(io_err(path))?.len();
    let mut buf: Vec<u8> = Vec::new();
    let mut chunk = vec![0u8; 4 << 20];
    let mut base = 0u64;
    let mut pos = 0usize;
    let mut eof = false;
    let mut corrupt = 0u64;
    loop {
        match scan(&buf, pos, max_record) {
            Scan::Record { next, .. } => pos = next,
            Scan::Corrupt { next } => {
                corrupt += 1;
                pos = next;
            }
            Scan::Incomplete if eof => break,
            Scan::Incomplete => {
                buf.drain(..pos);
                base += pos as u64;
                pos = 0;
                let n = f.read(&mut chunk).map_err(io_err(path))?;
                if n == 0 {
                    eof = true;
                } else {
                    buf.extend_from_slice(&chunk[..n]);
                }
            }
        }
    }
    let end = base + pos as u64;
    Ok((end, len.saturating_sub(end), corrupt))
}

impl Queue {
    /// Opens (or creates) the queue in `dir`, recovers the tail and starts the writer thread.
    pub fn open(
        dir: &Path,
        opts: QueueOptions,
        metrics: Arc<Metrics>,
    ) -> Result<(Arc<Queue>, Recovery), QueueError> {
        let seg_dir = dir.join("segments");
        fs::create_dir_all(&seg_dir).map_err(io_err(&seg_dir))?;
        fs::create_dir_all(dir.join("cursors")).map_err(io_err(dir))?;
        let mut segments = list_segments(&seg_dir)?;
        let mut recovery = Recovery::default();
        // Damage inside older segments is found (and counted) by the readers; only the last
        // segment can have a torn tail, since a segment is closed only after an fsync.
        let (active_start, active_len) = match segments.keys().next_back().copied() {
            Some(start) => {
                let path = seg_dir.join(seg_name(start));
                let (end, torn, corrupt) = recover_segment(&path, opts.max_record_bytes)?;
                if torn > 0 {
                    let f = OpenOptions::new()
                        .write(true)
                        .open(&path)
                        .map_err(io_err(&path))?;
                    f.set_len(end).map_err(io_err(&path))?;
                    f.sync_all().map_err(io_err(&path))?;
                    tracing::warn!(path = %path.display(), torn_bytes = torn, "truncated torn tail of the queue");
                }
                recovery.torn_bytes = torn;
                recovery.corrupt_records = corrupt;
                (start, end)
            }
            None => {
                segments.insert(0, ());
                File::create(seg_dir.join(seg_name(0))).map_err(io_err(&seg_dir))?;
                sync_dir(&seg_dir)?;
                (0, 0)
            }
        };
        metrics
            .queue_torn_bytes
            .fetch_add(recovery.torn_bytes, Ordering::Relaxed);
        let first = segments.keys().next().copied().unwrap_or(0);
        let end = active_start + active_len;
        let (end_tx, end_rx) = watch::channel(end);
        let (tx, rx) = mpsc::unbounded_channel();
        let segments = Arc::new(Mutex::new(segments));
        let path = seg_dir.join(seg_name(active_start));
        let file = OpenOptions::new()
            .append(true)
            .open(&path)
            .map_err(io_err(&path))?;
        let writer = Writer {
            seg_dir,
            file,
            active_start,
            active_len,
            opts: opts.clone(),
            end_tx,
            segments: segments.clone(),
            metrics: metrics.clone(),
        };
        std::thread::Builder::new()
            .name("queue-writer".into())
            .spawn(move || writer.run(rx))
            .map_err(io_err(dir))?;
        metrics.queue_end.store(end, Ordering::Relaxed);
        Ok((
            Arc::new(Queue {
                dir: dir.to_path_buf(),
                opts,
                tx,
                durable_end: end_rx,
                segments,
                first_pos: AtomicU64::new(first),
                metrics,
            }),
            recovery,
        ))
    }

    /// Appends one record and returns its end position once it is on disk (fsync'd).
    pub async fn append(&self, payload: impl Into<bytes::Bytes>) -> Result<u64, QueueError> {
        let payload: bytes::Bytes = payload.into();
        if payload.len() > self.opts.max_record_bytes {
            return Err(QueueError::TooLarge(payload.len()));
        }
        let (done, wait) = oneshot::channel();
        self.tx
            .send(AppendReq { payload, done })
            .map_err(|_| QueueError::Closed)?;
        match wait.await {
            Ok(Ok(end)) => Ok(end),
            Ok(Err(e)) => Err(QueueError::Io {
                path: self.dir.clone(),
                source: io::Error::other(e),
            }),
            Err(_) => Err(QueueError::Closed),
        }
    }

    /// The position up to which everything is on disk.
    pub fn durable_end(&self) -> u64 {
        *self.durable_end.borrow()
    }

    /// A receiver that changes whenever the durable end moves.
    pub fn watch_end(&self) -> watch::Receiver<u64> {
        self.durable_end.clone()
    }

    /// The first position still on disk (older segments were deleted).
    pub fn first_pos(&self) -> u64 {
        self.first_pos.load(Ordering::Relaxed)
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn max_record_bytes(&self) -> usize {
        self.opts.max_record_bytes
    }

    fn cursor_path(&self, name: &str) -> PathBuf {
        self.dir.join("cursors").join(format!("{name}.pos"))
    }

    /// The saved position of an output, or the oldest position when there is none (a new output
    /// gets the whole backlog; a damaged cursor file also falls back to that: resending is
    /// harmless because points are idempotent, losing them is not).
    pub fn load_cursor(&self, name: &str) -> u64 {
        let first = self.first_pos();
        let pos = fs::read(self.cursor_path(name)).ok().and_then(|b| {
            let b: [u8; 12] = b.try_into().ok()?;
            let pos = u64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]);
            let crc = u32::from_le_bytes([b[8], b[9], b[10], b[11]]);
            (crc32fast::hash(&b[..8]) == crc).then_some(pos)
        });
        match pos {
            Some(p) if p >= first && p <= self.durable_end() => p,
            Some(p) if p < first => first,
            // Beyond the durable end: the log lost its tail; restart from the oldest data.
            _ => first,
        }
    }

    /// Saves an output's position durably (write, fsync, rename).
    pub fn save_cursor(&self, name: &str, pos: u64) -> Result<(), QueueError> {
        let path = self.cursor_path(name);
        let tmp = path.with_extension("tmp");
        let mut b = pos.to_le_bytes().to_vec();
        b.extend_from_slice(&crc32fast::hash(&b).to_le_bytes());
        let mut f = File::create(&tmp).map_err(io_err(&tmp))?;
        f.write_all(&b).map_err(io_err(&tmp))?;
        f.sync_data().map_err(io_err(&tmp))?;
        fs::rename(&tmp, &path).map_err(io_err(&path))?;
        Ok(())
    }

    /// Deletes segments that every output has read past (`min_cursor`).
    pub fn release(&self, min_cursor: u64) -> Result<(), QueueError> {
        let seg_dir = self.dir.join("segments");
        let mut segs = self.segments.lock().unwrap_or_else(|e| e.into_inner());
        let starts: Vec<u64> = segs.keys().copied().collect();
        let mut removed = false;
        for pair in starts.windows(2) {
            let (start, next_start) = (pair[0], pair[1]);
            if next_start <= min_cursor {
                let path = seg_dir.join(seg_name(start));
                fs::remove_file(&path).map_err(io_err(&path))?;
                segs.remove(&start);
                removed = true;
            }
        }
        if let Some(first) = segs.keys().next() {
            self.first_pos.store(*first, Ordering::Relaxed);
        }
        if removed {
            sync_dir(&seg_dir)?;
        }
        Ok(())
    }

    /// Bytes on disk not yet read by the slowest output.
    pub fn backlog(&self, min_cursor: u64) -> u64 {
        self.durable_end().saturating_sub(min_cursor)
    }

    /// Reads records from `pos` up to the durable end, at most `max_bytes` of payload (but always
    /// at least one record), returning the payloads and the position after the last one.
    pub fn read_from(&self, pos: u64, max_bytes: usize) -> Result<(Vec<Vec<u8>>, u64), QueueError> {
        let end = self.durable_end();
        let mut pos = pos.max(self.first_pos());
        let mut out = Vec::new();
        let mut total = 0usize;
        let seg_dir = self.dir.join("segments");
        while pos < end && (out.is_empty() || total < max_bytes) {
            let (start, next_start) = {
                let segs = self.segments.lock().unwrap_or_else(|e| e.into_inner());
                let start = segs.range(..=pos).next_back().map(|(k, _)| *k).unwrap_or(0);
                let next = segs.range(pos + 1..).next().map(|(k, _)| *k);
                (start, next)
            };
            let seg_end = next_start.unwrap_or(end).min(end);
            if pos >= seg_end {
                // Past the valid end of a closed segment: continue in the next one.
                match next_start {
                    Some(n) if n > pos => {
                        pos = n;
                        continue;
                    }
                    _ => break,
                }
            }
            let path = seg_dir.join(seg_name(start));
            let mut f = File::open(&path).map_err(io_err(&path))?;
            let file_len = f.metadata().map_err(io_err(&path))?.len();
            let seg_valid_end = (seg_end - start).min(file_len);
            let off = pos - start;
            // Read enough for the records we want; a record larger than that is read whole.
            let want = ((max_bytes.saturating_sub(total)) as u64 + HEADER_LEN as u64 * 64)
                .max(HEADER_LEN as u64)
                .min(seg_valid_end - off);
            let mut buf = vec![0u8; want as usize];
            f.seek(SeekFrom::Start(off)).map_err(io_err(&path))?;
            f.read_exact(&mut buf).map_err(io_err(&path))?;
            let mut p = 0usize;
            let mut progressed = false;
            loop {
                match scan(&buf, p, self.opts.max_record_bytes) {
                    Scan::Record {
                        payload_start,
                        next,
                    } => {
                        out.push(buf[payload_start..next].to_vec());
                        total += next - payload_start;
                        p = next;
                        progressed = true;
                        if total >= max_bytes {
                            break;
                        }
                    }
                    Scan::Corrupt { next } => {
                        self.metrics
                            .queue_corrupt_records
                            .fetch_add(1, Ordering::Relaxed);
                        tracing::warn!(segment = %path.display(), offset = off + p as u64, skipped = next - p, "skipping a corrupt queue record");
                        p = next;
                        progressed = true;
                    }
                    Scan::Incomplete => break,
                }
            }
            if !progressed {
                let whole_rest = seg_valid_end - off;
                if (buf.len() as u64) < whole_rest {
                    // The first record is larger than what we read: read its full length.
                    let (len, _) = header_at(&buf, 0).unwrap_or((0, 0));
                    let need = (len as u64 + HEADER_LEN as u64).min(whole_rest);
                    if need > buf.len() as u64 && len <= self.opts.max_record_bytes {
                        let mut big = vec![0u8; need as usize];
                        f.seek(SeekFrom::Start(off)).map_err(io_err(&path))?;
                        f.read_exact(&mut big).map_err(io_err(&path))?;
                        if let Scan::Record {
                            payload_start,
                            next,
                        } = scan(&big, 0, self.opts.max_record_bytes)
                        {
                            out.push(big[payload_start..next].to_vec());
                            total += next - payload_start;
                            pos += next as u64;
                            continue;
                        }
                    }
                }
                // Nothing valid in the rest of this segment: count it once and move on.
                if next_start.is_some() || seg_end == end {
                    if whole_rest > 0 && next_start.is_some() {
                        self.metrics
                            .queue_corrupt_records
                            .fetch_add(1, Ordering::Relaxed);
                        tracing::warn!(segment = %path.display(), offset = off, "skipping a damaged segment tail");
                    }
                    match next_start {
                        Some(n) => {
                            pos = n;
                            continue;
                        }
                        None => break,
                    }
                }
                break;
            }
            pos += p as u64;
            if p as u64 == seg_valid_end - off {
                if let Some(n) = next_start {
                    pos = n;
                }
            }
        }
        Ok((out, pos))
    }
}

struct Writer {
    seg_dir: PathBuf,
    file: File,
    active_start: u64,
    active_len: u64,
    opts: QueueOptions,
    end_tx: watch::Sender<u64>,
    segments: Arc<Mutex<BTreeMap<u64, ()>>>,
    metrics: Arc<Metrics>,
}

impl Writer {
    fn run(mut self, mut rx: mpsc::UnboundedReceiver<AppendReq>) {
        while let Some(first) = rx.blocking_recv() {
            let mut batch = vec![first];
            // Everyone who arrived while the previous fsync ran shares this one.
            while let Ok(more) = rx.try_recv() {
                batch.push(more);
                if batch.len() >= 4096 {
                    break;
                }
            }
            let mut headers = Vec::with_capacity(batch.len());
            let mut ends = Vec::with_capacity(batch.len());
            let mut end = self.active_start + self.active_len;
            for req in &batch {
                let len = u32::try_from(req.payload.len()).unwrap_or(u32::MAX);
                let mut h = [0u8; HEADER_LEN];
                h[..4].copy_from_slice(&len.to_le_bytes());
                h[4..].copy_from_slice(&crc32fast::hash(&req.payload).to_le_bytes());
                headers.push(h);
                end += (HEADER_LEN + req.payload.len()) as u64;
                ends.push(end);
            }
            // Headers and payloads go out in one vectored write: no copy of the payloads.
            let mut slices = Vec::with_capacity(batch.len() * 2);
            for (h, req) in headers.iter().zip(&batch) {
                slices.push(io::IoSlice::new(h));
                slices.push(io::IoSlice::new(&req.payload));
            }
            let written = end - (self.active_start + self.active_len);
            let result = self.write_and_sync(&mut slices);
            match result {
                Ok(()) => {
                    self.active_len += written;
                    let end = self.active_start + self.active_len;
                    self.metrics.queue_end.store(end, Ordering::Relaxed);
                    self.metrics.queue_fsyncs.fetch_add(1, Ordering::Relaxed);
                    self.metrics
                        .queue_records
                        .fetch_add(batch.len() as u64, Ordering::Relaxed);
                    self.end_tx.send_replace(end);
                    for (req, end) in batch.into_iter().zip(ends) {
                        let _ = req.done.send(Ok(end));
                    }
                    if self.active_len >= self.opts.segment_bytes {
                        if let Err(e) = self.roll() {
                            tracing::error!(error = %e, "cannot start a new queue segment");
                        }
                    }
                }
                Err(e) => {
                    tracing::error!(error = %e, "queue write failed; requests answered with an error");
                    // Cut anything partially written so the log stays well-formed.
                    let _ = self.file.set_len(self.active_len);
                    for req in batch {
                        let _ = req.done.send(Err(e.to_string()));
                    }
                }
            }
        }
    }

    fn write_and_sync(&mut self, mut slices: &mut [io::IoSlice<'_>]) -> io::Result<()> {
        while !slices.is_empty() {
            let n = self.file.write_vectored(slices)?;
            if n == 0 {
                return Err(io::ErrorKind::WriteZero.into());
            }
            io::IoSlice::advance_slices(&mut slices, n);
        }
        if self.opts.fsync {
            self.file.sync_data()?;
        }
        Ok(())
    }

    fn roll(&mut self) -> Result<(), QueueError> {
        let start = self.active_start + self.active_len;
        let path = self.seg_dir.join(seg_name(start));
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .map_err(io_err(&path))?;
        sync_dir(&self.seg_dir)?;
        self.segments
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(start, ());
        self.file = file;
        self.active_start = start;
        self.active_len = 0;
        Ok(())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn rec(p: &[u8]) -> Vec<u8> {
        let mut v = Vec::new();
        frame(p, &mut v);
        v
    }

    #[test]
    fn scan_finds_records_corruption_and_torn_tails() {
        let mut buf = rec(b"one\n");
        let second = buf.len();
        buf.extend(rec(b"two\n"));
        buf.extend(rec(b"three\n"));
        assert_eq!(
            scan(&buf, 0, 1024),
            Scan::Record {
                payload_start: 8,
                next: second
            }
        );
        // Flip a payload byte of the second record: it is skipped up to the third.
        let mut bad = buf.clone();
        bad[second + 9] ^= 0xff;
        let third = second + rec(b"two\n").len();
        assert_eq!(scan(&bad, second, 1024), Scan::Corrupt { next: third });
        // A cut record at the end is incomplete, not corrupt.
        let cut = &buf[..buf.len() - 2];
        assert_eq!(scan(cut, third, 1024), Scan::Incomplete);
        // Zeros (a file extended by the filesystem but never written) are not records.
        assert_eq!(scan(&[0u8; 32], 0, 1024), Scan::Incomplete);
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
                corrupt_records: 0
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
}
