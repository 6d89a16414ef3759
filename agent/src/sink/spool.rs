//! The agent's durable spool: the line-protocol batches the write URL has not acknowledged
//! yet, kept in the shared segment log ([`storwatch_wire::log`]) in `spool_dir`, bounded.
//!
//! Layout of `spool_dir` (the log's "flat" layout; the bytes are described in the log):
//!
//! * `<20-digit number>.seg`: segments, oldest first; the newest is appended to;
//! * `delivery.pos`: the first undelivered byte, replaced by rename after each acknowledged
//!   batch.
//!
//! A record is one batch handed to `send()`: complete lines, each ending in `\n`.
//!
//! Durability: `append` writes the record and `fdatasync`s the segment before it returns, so a
//! batch the sampling loop handed over survives a crash or power loss. At one report per 10 s
//! that is one fsync per 10 s. The cursor is not synced: after a crash it may point at a batch
//! that was already delivered, which is then sent again. That is harmless because every line
//! carries its own timestamp and InfluxDB overwrites a point with the same series and timestamp
//! instead of duplicating it.
//!
//! Damage found when the spool is opened: a torn tail (a record cut short by a crash) is
//! truncated away and counted in `torn_bytes`; a corrupt record anywhere else is skipped up to
//! the next valid record and counted in `corrupt_records`/`corrupt_bytes`, with the newlines in
//! the skipped bytes as an estimate of the lines lost (`corrupt_lines`).
//!
//! A fully delivered segment is deleted; the active one is replaced by a fresh segment once it
//! is delivered and over 1 MiB, so a healthy agent keeps little on disk.
//!
//! Bound: when the segment files exceed `max_bytes`, whole segments are removed oldest first and
//! their undelivered lines counted in `overflow_dropped_lines`, with a warning in the log.
//! Segments are `max_bytes / 16` (64 KiB to 16 MiB, at most a quarter of the bound), so one drop
//! frees about 1/16 of the spool.
//!
//! A spool written by an earlier release (`SWSPOOL1` segments and a `cursor` file) is read as it
//! is: its cursor file is renamed to `delivery.pos` on the first start, with a log line.
//!
//! One agent per spool directory: the directory is not locked, the agent's unit runs once.

use std::io;
use std::path::{Path, PathBuf};

use storwatch_wire::log::{self, CursorId, Layout, Log, LogError, LogOptions};

pub use storwatch_wire::log::Position;

/// Largest payload a record may hold; a longer length field marks a corrupt record.
pub const MAX_RECORD_BYTES: u64 = 64 << 20;
/// A fully delivered active segment at least this large is replaced by a fresh one.
const RETIRE_DRAINED_BYTES: u64 = 1 << 20;
/// The reader's name: its cursor file is `delivery.pos`.
const CURSOR_NAME: &str = "delivery";
/// The cursor file of releases before the shared log.
const LEGACY_CURSOR_FILE: &str = "cursor";
#[cfg(test)]
const CURSOR_NAME_FILE: &str = "delivery.pos";

/// A failure of the spool's own files.
#[derive(Debug, thiserror::Error)]
pub enum SpoolError {
    /// Reading, writing or syncing a spool file failed.
    #[error("spool {path}: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The underlying error.
        source: io::Error,
    },
    /// The spool's filesystem is full: the batch was not stored.
    #[error("spool {path}: no space left: {source}")]
    OutOfSpace {
        /// The file or directory.
        path: PathBuf,
        /// The underlying error.
        source: io::Error,
    },
    /// The batch cannot fit in the spool at all.
    #[error("batch of {bytes} bytes does not fit in a spool of {limit} bytes")]
    TooLarge {
        /// Size of the batch.
        bytes: u64,
        /// The largest batch this spool takes.
        limit: u64,
    },
}

impl From<LogError> for SpoolError {
    fn from(e: LogError) -> Self {
        match e {
            LogError::Io { path, source } => Self::Io { path, source },
            LogError::OutOfSpace { path, source } => Self::OutOfSpace { path, source },
            LogError::TooLarge { bytes, limit } => Self::TooLarge { bytes, limit },
        }
    }
}

/// Counters describing the spool's content and the data it lost.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SpoolStats {
    /// Record bytes (headers included) not yet acknowledged.
    pub pending_bytes: u64,
    /// Lines not yet acknowledged.
    pub pending_lines: u64,
    /// Bytes of all segment files, delivered parts included: what the bound applies to.
    pub file_bytes: u64,
    /// Segment files on disk.
    pub segments: u64,
    /// Undelivered lines removed because the spool was full.
    pub overflow_dropped_lines: u64,
    /// Corrupt regions skipped (each usually one record).
    pub corrupt_records: u64,
    /// Bytes in the skipped corrupt regions.
    pub corrupt_bytes: u64,
    /// Newlines in the skipped corrupt regions: an estimate of the lines lost.
    pub corrupt_lines: u64,
    /// Bytes of torn tails truncated at open (never acknowledged to the caller).
    pub torn_bytes: u64,
}

/// Batches handed out by [`Spool::peek`], to be passed back to [`Spool::ack`] after a 2xx.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Batch {
    /// Position of the first record in the batch.
    pub start: Position,
    /// Position just past the last record in the batch.
    pub end: Position,
    /// Records in the batch.
    pub records: usize,
    /// Lines in the batch.
    pub lines: u64,
    inner: log::Batch,
}

/// The spool directory, opened for appending and delivery.
#[derive(Debug)]
pub struct Spool {
    dir: PathBuf,
    log: Log,
    cursor: CursorId,
    /// Scratch for the record ends of a peek.
    ends: Vec<usize>,
}

/// Lines in a batch: newlines, plus one for an unterminated last line.
pub fn count_lines(payload: &[u8]) -> u64 {
    let n = payload.iter().filter(|&&b| b == b'\n').count() as u64;
    n + u64::from(payload.last().is_some_and(|&b| b != b'\n'))
}

impl Spool {
    /// Opens (creating if needed) the spool in `dir`, bounded to `max_bytes` of segment files.
    ///
    /// Recovers a torn tail, counts corrupt records, and resumes after the last acknowledged
    /// batch, so undelivered batches of a previous run are delivered again.
    pub fn open(dir: &Path, max_bytes: u64) -> Result<Self, SpoolError> {
        // at least room for a segment header and one small record
        let max_bytes = max_bytes.max(4096);
        let segment_bytes = (max_bytes / 16)
            .clamp(64 << 10, 16 << 20)
            .min(max_bytes / 4);
        adopt_legacy_cursor(dir)?;
        let opts = LogOptions {
            segment_bytes,
            max_record_bytes: MAX_RECORD_BYTES
                .min(max_bytes - log::SEGMENT_HEADER_BYTES - log::RECORD_HEADER_BYTES),
            max_bytes: Some(max_bytes),
            sync: true,
            sync_cursors: false,
            reclaim_bytes: RETIRE_DRAINED_BYTES,
            count: Some(count_lines),
        };
        let (log, recovery) = Log::open(Layout::flat(dir), opts)?;
        let cursor = log.cursor(CURSOR_NAME)?;
        let spool = Self {
            dir: dir.to_owned(),
            log,
            cursor,
            ends: Vec::new(),
        };
        let lost = recovery.evicted;
        if lost.items > 0 {
            tracing::warn!(
                dir = %dir.display(),
                dropped_lines = lost.items,
                max_bytes,
                "spool larger than its bound: dropped the oldest undelivered data"
            );
        }
        let s = spool.stats();
        if s.pending_lines > 0 {
            tracing::info!(
                dir = %dir.display(),
                pending_lines = s.pending_lines,
                pending_bytes = s.pending_bytes,
                "spool: undelivered data from an earlier run will be sent"
            );
        }
        Ok(spool)
    }

    /// The spool directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Content and loss counters.
    pub fn stats(&self) -> SpoolStats {
        let l = self.log.stats();
        let p = self.log.pending(self.cursor);
        SpoolStats {
            pending_bytes: p.bytes,
            pending_lines: p.items,
            file_bytes: l.file_bytes,
            segments: l.segments,
            overflow_dropped_lines: l.evicted.items,
            corrupt_records: l.corrupt_records,
            corrupt_bytes: l.corrupt_bytes,
            corrupt_lines: l.corrupt_items,
            torn_bytes: l.torn_bytes,
        }
    }

    /// True when every record has been acknowledged.
    pub fn is_drained(&self) -> bool {
        self.log.pending(self.cursor).bytes == 0
    }

    /// Appends one batch as a record and syncs it to disk before returning.
    ///
    /// When the segment files then exceed the bound, the oldest segments are removed (their
    /// undelivered lines counted and logged). A full filesystem is
    /// [`SpoolError::OutOfSpace`]: nothing was stored, and the same batch can be appended again
    /// once space is back.
    pub fn append(&mut self, payload: &[u8]) -> Result<(), SpoolError> {
        let appended = self.log.append(payload)?;
        let lost = appended.evicted;
        if lost.segments > 0 {
            tracing::warn!(
                dir = %self.dir.display(),
                dropped_lines = lost.items,
                dropped_bytes = lost.bytes,
                max_bytes = self.log.options().max_bytes.unwrap_or(0),
                "spool full: dropped the oldest undelivered data"
            );
        }
        Ok(())
    }

    /// Reads undelivered records, oldest first, into `out` (which is cleared): at least one
    /// record when any is pending, then more while `out` stays within `max_bytes` and the batch
    /// within `max_records`. Corrupt records at the head are skipped.
    pub fn peek(
        &mut self,
        max_bytes: usize,
        max_records: usize,
        out: &mut Vec<u8>,
    ) -> Result<Option<Batch>, SpoolError> {
        loop {
            let from = self.log.position(self.cursor);
            let Some(b) =
                self.log
                    .read(from, max_bytes, max_records.max(1), out, &mut self.ends)?
            else {
                return Ok(None);
            };
            if b.records == 0 {
                // only damage at the head: step over it and look again
                self.log.ack(self.cursor, &b)?;
                continue;
            }
            return Ok(Some(Batch {
                start: b.start,
                end: b.end,
                records: b.records,
                lines: b.items,
                inner: b,
            }));
        }
    }

    /// Marks a batch from [`peek`](Self::peek) as delivered (or deliberately dropped): moves the
    /// cursor past it and deletes segments that hold nothing undelivered.
    ///
    /// A batch whose segment was removed meanwhile (spool full) is ignored.
    pub fn ack(&mut self, batch: &Batch) -> Result<(), SpoolError> {
        self.log.ack(self.cursor, &batch.inner)?;
        Ok(())
    }
}

/// Renames the cursor file of a spool from before the shared log (`cursor`, the same 20 bytes)
/// to the log's name for the agent's reader, once.
fn adopt_legacy_cursor(dir: &Path) -> Result<(), SpoolError> {
    let old = dir.join(LEGACY_CURSOR_FILE);
    let new = dir.join(format!("{CURSOR_NAME}.pos"));
    if old.is_file() && !new.exists() {
        std::fs::rename(&old, &new).map_err(|source| SpoolError::Io {
            path: old.clone(),
            source,
        })?;
        tracing::info!(dir = %dir.display(), "spool written by an earlier release: its cursor file is now {CURSOR_NAME}.pos");
    }
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::fs::{self, OpenOptions};
    use std::io::Write;
    use std::path::PathBuf;
    use storwatch_wire::log::{RECORD_HEADER_BYTES, SEGMENT_MAGIC};

    fn batch(i: usize, lines: usize) -> Vec<u8> {
        let mut out = Vec::new();
        for l in 0..lines {
            out.extend_from_slice(format!("m,host=h{l} v={i}i {}\n", 1_000 + i).as_bytes());
        }
        out
    }

    /// Peeks and acks until nothing is pending; returns every payload in order.
    fn drain(spool: &mut Spool, max_bytes: usize) -> Vec<u8> {
        let mut all = Vec::new();
        let mut buf = Vec::new();
        for _ in 0..100_000 {
            match spool.peek(max_bytes, usize::MAX, &mut buf).unwrap() {
                Some(b) => {
                    all.extend_from_slice(&buf);
                    spool.ack(&b).unwrap();
                }
                None => return all,
            }
        }
        panic!("drain did not terminate");
    }

    fn segment_files(dir: &Path) -> Vec<PathBuf> {
        let mut v: Vec<PathBuf> = fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "seg"))
            .collect();
        v.sort();
        v
    }

    #[test]
    fn round_trip_and_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Spool::open(dir.path(), 1 << 20).unwrap();
        let mut want = Vec::new();
        for i in 0..3 {
            let b = batch(i, 2);
            s.append(&b).unwrap();
            want.extend_from_slice(&b);
        }
        let st = s.stats();
        assert_eq!(st.pending_lines, 6);
        assert_eq!(
            st.pending_bytes,
            want.len() as u64 + 3 * RECORD_HEADER_BYTES
        );
        let mut buf = Vec::new();
        let b = s.peek(1 << 20, usize::MAX, &mut buf).unwrap().unwrap();
        assert_eq!(buf, want);
        assert_eq!((b.records, b.lines), (3, 6));
        // not acked yet: a reopen delivers everything again
        drop(s);
        let mut s = Spool::open(dir.path(), 1 << 20).unwrap();
        assert_eq!(drain(&mut s, 1 << 20), want);
        assert!(s.is_drained());
        drop(s);
        let mut s = Spool::open(dir.path(), 1 << 20).unwrap();
        assert_eq!(s.stats().pending_lines, 0);
        assert_eq!(drain(&mut s, 1 << 20), b"");
    }

    #[test]
    fn peek_respects_byte_and_record_limits() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Spool::open(dir.path(), 1 << 20).unwrap();
        let one = batch(0, 10);
        for _ in 0..5 {
            s.append(&one).unwrap();
        }
        let mut buf = Vec::new();
        // a record larger than the limit still goes out alone
        let b = s.peek(1, usize::MAX, &mut buf).unwrap().unwrap();
        assert_eq!((b.records, buf.len()), (1, one.len()));
        let b = s
            .peek(2 * one.len() + 1, usize::MAX, &mut buf)
            .unwrap()
            .unwrap();
        assert_eq!(b.records, 2);
        let b = s.peek(1 << 20, 3, &mut buf).unwrap().unwrap();
        assert_eq!((b.records, b.lines), (3, 30));
    }

    #[test]
    fn full_spool_drops_the_oldest_segments() {
        let dir = tempfile::tempdir().unwrap();
        let max = 64 << 10;
        let mut s = Spool::open(dir.path(), max).unwrap();
        let n = 200;
        let mut total_lines = 0;
        for i in 0..n {
            let b = batch(i, 20);
            total_lines += count_lines(&b);
            s.append(&b).unwrap();
            assert!(s.stats().file_bytes <= max, "bound kept after batch {i}");
        }
        let st = s.stats();
        assert!(st.overflow_dropped_lines > 0);
        assert_eq!(st.overflow_dropped_lines + st.pending_lines, total_lines);
        assert!(st.segments > 1);
        let got = drain(&mut s, 1 << 20);
        let got = String::from_utf8(got).unwrap();
        assert_eq!(got.lines().count() as u64, st.pending_lines);
        // what survives is the newest data, contiguous up to the last batch
        let first: usize = got
            .lines()
            .next()
            .and_then(|l| l.split(" v=").nth(1))
            .and_then(|v| v.split('i').next())
            .unwrap()
            .parse()
            .unwrap();
        assert!(first > 0);
        let want: Vec<u8> = (first..n).flat_map(|i| batch(i, 20)).collect();
        assert_eq!(got.as_bytes(), want.as_slice());
        // delivered segments are gone, only the active one is left
        assert_eq!(segment_files(dir.path()).len(), 1);
    }

    #[test]
    fn drained_spool_does_not_keep_delivered_data_on_disk() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Spool::open(dir.path(), 256 << 20).unwrap();
        let b = batch(0, 2000); // ~50 KB
        for _ in 0..30 {
            s.append(&b).unwrap();
            drain(&mut s, 1 << 20);
        }
        let files = segment_files(dir.path());
        assert_eq!(files.len(), 1);
        assert!(fs::metadata(&files[0]).unwrap().len() < RETIRE_DRAINED_BYTES);
        assert!(s.stats().file_bytes < RETIRE_DRAINED_BYTES);
        // and nothing is pending after a reopen
        drop(s);
        assert!(Spool::open(dir.path(), 256 << 20).unwrap().is_drained());
    }

    #[test]
    fn batch_larger_than_the_spool_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Spool::open(dir.path(), 8192).unwrap();
        let err = s.append(&vec![b'x'; 9000]).unwrap_err();
        assert!(matches!(err, SpoolError::TooLarge { .. }), "{err}");
        assert!(s.is_drained());
    }

    #[test]
    fn reopen_after_crash_resumes_after_the_last_ack() {
        let dir = tempfile::tempdir().unwrap();
        let max = 1 << 20;
        let mut s = Spool::open(dir.path(), max).unwrap();
        // enough to span several segments (64 KiB each)
        let batches: Vec<Vec<u8>> = (0..300).map(|i| batch(i, 30)).collect();
        for b in &batches {
            s.append(b).unwrap();
        }
        assert!(s.stats().segments > 2);
        let mut buf = Vec::new();
        let mut delivered = Vec::new();
        for _ in 0..2 {
            let b = s.peek(50_000, usize::MAX, &mut buf).unwrap().unwrap();
            delivered.extend_from_slice(&buf);
            s.ack(&b).unwrap();
        }
        let pending = s.stats().pending_lines;
        // the process dies here: nothing is flushed or closed
        drop(s);
        let mut s = Spool::open(dir.path(), max).unwrap();
        assert_eq!(s.stats().pending_lines, pending);
        delivered.extend(drain(&mut s, 100_000));
        assert_eq!(delivered, batches.concat());
        // a lost cursor file means everything left is sent again, never less
        let mut s2 = Spool::open(dir.path(), max).unwrap();
        s2.append(&batch(999, 1)).unwrap();
        drop(s2);
        fs::remove_file(dir.path().join(CURSOR_NAME_FILE)).unwrap();
        let mut s3 = Spool::open(dir.path(), max).unwrap();
        assert!(s3.stats().pending_lines >= 1);
        assert!(drain(&mut s3, 1 << 20).ends_with(&batch(999, 1)));
    }

    #[test]
    fn damaged_cursor_file_resends_rather_than_skips() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Spool::open(dir.path(), 1 << 20).unwrap();
        s.append(&batch(0, 1)).unwrap();
        s.append(&batch(1, 1)).unwrap();
        let mut buf = Vec::new();
        let b = s.peek(1, usize::MAX, &mut buf).unwrap().unwrap();
        s.ack(&b).unwrap();
        drop(s);
        fs::write(dir.path().join(CURSOR_NAME_FILE), b"garbage").unwrap();
        let mut s = Spool::open(dir.path(), 1 << 20).unwrap();
        assert_eq!(drain(&mut s, 1 << 20), [batch(0, 1), batch(1, 1)].concat());
    }

    #[test]
    fn counts_lines() {
        assert_eq!(count_lines(b""), 0);
        assert_eq!(count_lines(b"a\n"), 1);
        assert_eq!(count_lines(b"a\nb"), 2);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        /// Whatever a segment file holds, opening and draining the spool neither panics nor loops.
        #[test]
        fn any_segment_content_opens_and_drains(
            body in proptest::collection::vec(any::<u8>(), 0..2048),
            with_magic in any::<bool>(),
            with_record in any::<bool>(),
        ) {
            let dir = tempfile::tempdir().unwrap();
            let mut content = Vec::new();
            if with_magic {
                content.extend_from_slice(SEGMENT_MAGIC);
            }
            content.extend_from_slice(&body);
            if with_record {
                let mut s = Spool::open(dir.path(), 1 << 20).unwrap();
                s.append(b"ok v=1i 1\n").unwrap();
                drop(s);
                let seg = segment_files(dir.path()).pop().unwrap();
                let mut f = OpenOptions::new().append(true).open(seg).unwrap();
                f.write_all(&body).unwrap();
            } else {
                fs::write(dir.path().join(format!("{:020}.seg", 1)), &content).unwrap();
            }
            let mut s = Spool::open(dir.path(), 1 << 20).unwrap();
            let got = drain(&mut s, 4096);
            if with_record {
                prop_assert!(got.starts_with(b"ok v=1i 1\n"));
            }
            s.append(b"after v=1i 2\n").unwrap();
            let got = drain(&mut s, 4096);
            prop_assert!(got.ends_with(b"after v=1i 2\n"));
        }
    }

    fn record(i: u64) -> Vec<u8> {
        format!(
            "disk,host=node{i:02},device=sda util_pct={i}.5,r_per_s={i}i {t}\nnet,host=node{i:02},iface=eth0 rx_bytes_per_s={i}i {t}\n",
            t = 1_700_000_000_000_000_000u64 + i * 10_000_000_000
        )
        .into_bytes()
    }

    /// A spool written by the release before the shared log (fixture and its provenance in
    /// wire/tests/fixtures/legacy): every pending batch is delivered once, new batches follow,
    /// and nothing comes back after a restart.
    #[test]
    fn spool_of_an_earlier_release_is_delivered_exactly_once() {
        let dir = tempfile::tempdir().unwrap();
        let fixture =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../wire/tests/fixtures/legacy/agent-spool");
        for e in fs::read_dir(&fixture).unwrap() {
            let e = e.unwrap();
            fs::copy(e.path(), dir.path().join(e.file_name())).unwrap();
        }
        let mut s = Spool::open(dir.path(), 8192).unwrap();
        assert!(dir.path().join(CURSOR_NAME_FILE).is_file());
        assert!(!dir.path().join(LEGACY_CURSOR_FILE).exists());
        let st = s.stats();
        assert_eq!(st.pending_lines, 32);
        assert_eq!((st.torn_bytes, st.corrupt_records), (0, 0));
        let want: Vec<u8> = (14..30).flat_map(record).collect();
        assert_eq!(drain(&mut s, 1000), want);
        s.append(&record(30)).unwrap();
        assert_eq!(drain(&mut s, 1000), record(30));
        drop(s);
        let mut s = Spool::open(dir.path(), 8192).unwrap();
        assert!(s.is_drained());
        assert_eq!(drain(&mut s, 1000), b"");
    }
}
