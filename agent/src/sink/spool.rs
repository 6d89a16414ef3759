//! The agent's durable spool: a bounded directory of segment files holding the line-protocol
//! batches that the write URL has not acknowledged yet.
//!
//! Layout of `spool_dir`:
//!
//! * `00000000000000000001.seg`, `…02.seg`, …: segments, oldest first. Each starts with the
//!   8-byte magic `SWSPOOL1` followed by records. The last segment is the one appended to.
//! * `cursor`: the first undelivered byte, `(segment id, offset)` plus a CRC, replaced by rename
//!   after each acknowledged batch.
//!
//! A record is `"SWR1"`, the payload length (u32 LE), the CRC32 of length and payload (u32 LE),
//! then the payload: one batch handed to `send()`, complete lines each ending in `\n`. The
//! magic lets a reader find the next record after a corrupt one without trusting a damaged
//! length.
//!
//! Durability: `append` writes the record and `fdatasync`s the segment before it returns, so a
//! batch the sampling loop handed over survives a crash or power loss. At one report per 10 s
//! that is one fsync per 10 s, which is cheap; a busier caller should batch before appending.
//! The cursor is not synced: after a crash it may point at a batch that was already delivered,
//! which is then sent again. That is harmless because every line carries its own timestamp and
//! InfluxDB overwrites a point with the same series and timestamp instead of duplicating it.
//!
//! Damage found when the spool is opened:
//!
//! * a torn tail (a record cut short by a crash, at the end of the newest segment) is truncated
//!   away and counted in `torn_bytes`: it was never acknowledged to the caller;
//! * a corrupt record anywhere else (bad magic, impossible length, CRC mismatch) is skipped up to
//!   the next valid record and counted in `corrupt_records`/`corrupt_bytes`, with the newlines
//!   in the skipped bytes as an estimate of the lines lost (`corrupt_lines`).
//!
//! A fully delivered segment is deleted; the active one is replaced by a fresh segment once it
//! is delivered and over 1 MiB, so a healthy agent keeps little on disk.
//!
//! Bound: when the segment files exceed `max_bytes`, whole segments are removed oldest first and
//! their undelivered lines counted in `overflow_dropped_lines`, with a warning in the log.
//! Segments are `max_bytes / 16` (64 KiB to 16 MiB, at most a quarter of the bound), so one drop
//! frees about 1/16 of the spool.
//!
//! One agent per spool directory: the directory is not locked, the agent's unit runs once.

use std::collections::VecDeque;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, FileExt};
use std::path::{Path, PathBuf};

/// Magic at the start of every segment file.
const SEGMENT_MAGIC: &[u8; 8] = b"SWSPOOL1";
/// Bytes before the first record of a segment.
pub const SEGMENT_HEADER_BYTES: u64 = SEGMENT_MAGIC.len() as u64;
/// Magic at the start of every record.
const RECORD_MAGIC: &[u8; 4] = b"SWR1";
/// Magic, length and CRC.
pub const RECORD_HEADER_BYTES: u64 = 12;
/// Largest payload a record may hold; a longer length field marks a corrupt record.
pub const MAX_RECORD_BYTES: u64 = 64 << 20;
/// A fully delivered active segment at least this large is replaced by a fresh one.
const RETIRE_DRAINED_BYTES: u64 = 1 << 20;
const CURSOR_FILE: &str = "cursor";
const CURSOR_TMP: &str = "cursor.tmp";
const SEGMENT_SUFFIX: &str = ".seg";

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
    /// The batch cannot fit in the spool at all.
    #[error("batch of {bytes} bytes does not fit in a spool of {limit} bytes")]
    TooLarge {
        /// Size of the batch.
        bytes: u64,
        /// The largest batch this spool takes.
        limit: u64,
    },
}

fn io_err(path: &Path) -> impl FnOnce(io::Error) -> SpoolError + '_ {
    move |source| SpoolError::Io {
        path: path.to_owned(),
        source,
    }
}

/// A byte position in the spool: a segment id and an offset inside that segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Position {
    /// Segment id (the file name's number).
    pub segment: u64,
    /// Offset inside the segment file.
    pub offset: u64,
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
    /// Lines of the records stored in `end.segment`.
    tail_lines: u64,
}

#[derive(Debug)]
struct Segment {
    id: u64,
    /// Bytes in the file (only valid data after open; appends extend it).
    len: u64,
    /// Lines in the segment's valid records.
    lines: u64,
    /// Length checked at open; damage found later, beyond this, has not been counted yet.
    verified_len: u64,
}

/// The spool directory, opened for appending and delivery.
#[derive(Debug)]
pub struct Spool {
    dir: PathBuf,
    max_bytes: u64,
    segment_bytes: u64,
    /// Oldest first, never empty; the last one is appended to.
    segments: VecDeque<Segment>,
    active: File,
    cursor: Position,
    /// Lines before the cursor inside the cursor's segment.
    delivered_lines: u64,
    stats: SpoolStats,
}

/// Lines in a batch: newlines, plus one for an unterminated last line.
pub fn count_lines(payload: &[u8]) -> u64 {
    let newlines = payload.iter().filter(|&&b| b == b'\n').count() as u64;
    match payload.last() {
        Some(b'\n') | None => newlines,
        Some(_) => newlines + 1,
    }
}

fn segment_name(id: u64) -> String {
    format!("{id:020}{SEGMENT_SUFFIX}")
}

fn parse_segment_name(name: &str) -> Option<u64> {
    let digits = name.strip_suffix(SEGMENT_SUFFIX)?;
    if digits.len() != 20 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// Reads the record at `off` and appends its payload to `buf`; `None` (and `buf` unchanged) when
/// no valid record starts there.
fn read_record_at(
    file: &File,
    off: u64,
    file_len: u64,
    buf: &mut Vec<u8>,
) -> io::Result<Option<u64>> {
    if off.saturating_add(RECORD_HEADER_BYTES) > file_len {
        return Ok(None);
    }
    let mut hdr = [0u8; RECORD_HEADER_BYTES as usize];
    file.read_exact_at(&mut hdr, off)?;
    let [m0, m1, m2, m3, l0, l1, l2, l3, c0, c1, c2, c3] = hdr;
    if [m0, m1, m2, m3] != *RECORD_MAGIC {
        return Ok(None);
    }
    let len_bytes = [l0, l1, l2, l3];
    let len = u64::from(u32::from_le_bytes(len_bytes));
    let crc = u32::from_le_bytes([c0, c1, c2, c3]);
    let end = off + RECORD_HEADER_BYTES + len;
    if len > MAX_RECORD_BYTES || end > file_len {
        return Ok(None);
    }
    let mark = buf.len();
    buf.resize(mark + len as usize, 0);
    let payload = buf.get_mut(mark..).unwrap_or_default();
    file.read_exact_at(payload, off + RECORD_HEADER_BYTES)?;
    let mut h = crc32fast::Hasher::new();
    h.update(&len_bytes);
    h.update(payload);
    if h.finalize() != crc {
        buf.truncate(mark);
        return Ok(None);
    }
    Ok(Some(end))
}

/// Offset of the next record magic at or after `from`, before `to`.
fn find_magic(file: &File, from: u64, to: u64) -> io::Result<Option<u64>> {
    let mut chunk = vec![0u8; 64 << 10];
    let mut at = from;
    while at.saturating_add(RECORD_MAGIC.len() as u64) <= to {
        let n = (to - at).min(chunk.len() as u64) as usize;
        let window = chunk.get_mut(..n).unwrap_or_default();
        file.read_exact_at(window, at)?;
        if let Some(i) = window
            .windows(RECORD_MAGIC.len())
            .position(|w| w == RECORD_MAGIC)
        {
            return Ok(Some(at + i as u64));
        }
        // keep the last three bytes: a magic may straddle two chunks
        at += (n as u64)
            .saturating_sub(RECORD_MAGIC.len() as u64 - 1)
            .max(1);
    }
    Ok(None)
}

fn count_newlines_in(file: &File, start: u64, end: u64) -> io::Result<u64> {
    let mut chunk = vec![0u8; 64 << 10];
    let mut at = start;
    let mut n = 0;
    while at < end {
        let len = (end - at).min(chunk.len() as u64) as usize;
        let window = chunk.get_mut(..len).unwrap_or_default();
        file.read_exact_at(window, at)?;
        n += window.iter().filter(|&&b| b == b'\n').count() as u64;
        at += len as u64;
    }
    Ok(n)
}

/// What starts at a position of a segment.
enum Item {
    /// A valid record ending at `end`, payload appended to the caller's buffer.
    Record { end: u64 },
    /// Bytes up to `end` hold no valid record (`end` is the next valid record or the file end).
    Garbage { end: u64 },
}

fn next_item(file: &File, pos: u64, file_len: u64, buf: &mut Vec<u8>) -> io::Result<Option<Item>> {
    if pos >= file_len {
        return Ok(None);
    }
    if let Some(end) = read_record_at(file, pos, file_len, buf)? {
        return Ok(Some(Item::Record { end }));
    }
    let mark = buf.len();
    let mut from = pos + 1;
    while let Some(candidate) = find_magic(file, from, file_len)? {
        if read_record_at(file, candidate, file_len, buf)?.is_some() {
            buf.truncate(mark);
            return Ok(Some(Item::Garbage { end: candidate }));
        }
        from = candidate + 1;
    }
    Ok(Some(Item::Garbage { end: file_len }))
}

fn encode_cursor(pos: Position) -> [u8; 20] {
    let mut out = [0u8; 20];
    let mut body = [0u8; 16];
    body[..8].copy_from_slice(&pos.segment.to_le_bytes());
    body[8..].copy_from_slice(&pos.offset.to_le_bytes());
    out[..16].copy_from_slice(&body);
    out[16..].copy_from_slice(&crc32fast::hash(&body).to_le_bytes());
    out
}

fn decode_cursor(bytes: &[u8]) -> Option<Position> {
    let bytes: &[u8; 20] = bytes.try_into().ok()?;
    let [s0, s1, s2, s3, s4, s5, s6, s7, o0, o1, o2, o3, o4, o5, o6, o7, c0, c1, c2, c3] = *bytes;
    let seg = [s0, s1, s2, s3, s4, s5, s6, s7];
    let off = [o0, o1, o2, o3, o4, o5, o6, o7];
    let mut h = crc32fast::Hasher::new();
    h.update(&seg);
    h.update(&off);
    (h.finalize() == u32::from_le_bytes([c0, c1, c2, c3])).then(|| Position {
        segment: u64::from_le_bytes(seg),
        offset: u64::from_le_bytes(off),
    })
}

impl Spool {
    /// Opens (creating if needed) the spool in `dir`, bounded to `max_bytes` of segment files.
    ///
    /// Scans every segment: truncates a torn tail, counts corrupt records, and resumes after the
    /// last acknowledged batch, so undelivered batches of a previous run are delivered again.
    pub fn open(dir: &Path, max_bytes: u64) -> Result<Self, SpoolError> {
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(io_err(dir))?;
        // at least room for a segment header and one small record
        let max_bytes = max_bytes.max(4096);
        let segment_bytes = (max_bytes / 16)
            .clamp(64 << 10, 16 << 20)
            .min(max_bytes / 4);

        let mut ids = Vec::new();
        for entry in fs::read_dir(dir).map_err(io_err(dir))? {
            let entry = entry.map_err(io_err(dir))?;
            if let Some(id) = entry.file_name().to_str().and_then(parse_segment_name) {
                ids.push(id);
            }
        }
        ids.sort_unstable();

        let cursor_path = dir.join(CURSOR_FILE);
        let saved = fs::read(&cursor_path).ok().and_then(|b| decode_cursor(&b));

        let mut stats = SpoolStats::default();
        let mut segments = VecDeque::new();
        let mut cursor: Option<Position> = None;
        let mut delivered_lines = 0;
        let last_id = ids.last().copied();
        let mut buf = Vec::new();
        for &id in &ids {
            let path = dir.join(segment_name(id));
            if saved.is_some_and(|c| id < c.segment) {
                // fully delivered before the last run stopped; its deletion was not recorded
                fs::remove_file(&path).map_err(io_err(&path))?;
                continue;
            }
            let file = OpenOptions::new()
                .read(true)
                .write(true)
                .open(&path)
                .map_err(io_err(&path))?;
            let mut file_len = file.metadata().map_err(io_err(&path))?.len();
            let is_last = Some(id) == last_id;
            if file_len < SEGMENT_HEADER_BYTES {
                // cut short while being created: nothing in it was ever acknowledged
                stats.torn_bytes += file_len;
                if !is_last {
                    fs::remove_file(&path).map_err(io_err(&path))?;
                    continue;
                }
                file.set_len(0).map_err(io_err(&path))?;
                file.write_all_at(SEGMENT_MAGIC, 0).map_err(io_err(&path))?;
                file.sync_data().map_err(io_err(&path))?;
                file_len = SEGMENT_HEADER_BYTES;
            }
            // where this segment's undelivered data starts
            let resume = match saved {
                Some(c) if c.segment == id => c.offset.max(SEGMENT_HEADER_BYTES),
                _ => SEGMENT_HEADER_BYTES,
            };
            let mut seg = Segment {
                id,
                len: file_len,
                lines: 0,
                verified_len: file_len,
            };
            let mut seg_cursor = None;
            let mut seg_delivered = 0;
            let mut pos = SEGMENT_HEADER_BYTES;
            loop {
                buf.clear();
                match next_item(&file, pos, file_len, &mut buf).map_err(io_err(&path))? {
                    None => break,
                    Some(Item::Record { end }) => {
                        let lines = count_lines(&buf);
                        seg.lines += lines;
                        if end <= resume {
                            seg_delivered += lines;
                        } else if seg_cursor.is_none() {
                            seg_cursor = Some(pos);
                        }
                        pos = end;
                    }
                    Some(Item::Garbage { end }) => {
                        if is_last && end == file_len {
                            tracing::warn!(
                                path = %path.display(),
                                offset = pos,
                                bytes = end - pos,
                                "spool: truncating a torn tail left by a crash"
                            );
                            stats.torn_bytes += end - pos;
                            file.set_len(pos).map_err(io_err(&path))?;
                            file.sync_data().map_err(io_err(&path))?;
                            seg.len = pos;
                            seg.verified_len = pos;
                            break;
                        }
                        if end > resume {
                            let lines =
                                count_newlines_in(&file, pos, end).map_err(io_err(&path))?;
                            tracing::warn!(
                                path = %path.display(),
                                offset = pos,
                                bytes = end - pos,
                                lines_estimate = lines,
                                "spool: skipping a corrupt record"
                            );
                            stats.corrupt_records += 1;
                            stats.corrupt_bytes += end - pos;
                            stats.corrupt_lines += lines;
                        }
                        pos = end;
                    }
                }
            }
            if cursor.is_none() {
                // the first surviving segment holds the resume point
                cursor = Some(Position {
                    segment: id,
                    offset: seg_cursor.unwrap_or(seg.len),
                });
                delivered_lines = seg_delivered;
            }
            segments.push_back(seg);
        }

        let (segments, active, cursor) = match segments.back() {
            Some(last) => {
                let path = dir.join(segment_name(last.id));
                let active = OpenOptions::new()
                    .append(true)
                    .open(&path)
                    .map_err(io_err(&path))?;
                let cursor = cursor.unwrap_or(Position {
                    segment: last.id,
                    offset: SEGMENT_HEADER_BYTES,
                });
                (segments, active, cursor)
            }
            None => {
                let id = saved.map_or(1, |c| c.segment.saturating_add(1)).max(1);
                let active = create_segment(dir, id)?;
                let mut segments = VecDeque::new();
                segments.push_back(Segment {
                    id,
                    len: SEGMENT_HEADER_BYTES,
                    lines: 0,
                    verified_len: SEGMENT_HEADER_BYTES,
                });
                let cursor = Position {
                    segment: id,
                    offset: SEGMENT_HEADER_BYTES,
                };
                (segments, active, cursor)
            }
        };
        let mut spool = Self {
            dir: dir.to_owned(),
            max_bytes,
            segment_bytes,
            segments,
            active,
            cursor,
            delivered_lines,
            stats,
        };
        spool.gc()?;
        spool.enforce_limit()?;
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
        let mut s = self.stats;
        let mut file_bytes = 0;
        let mut pending_bytes = 0;
        let mut pending_lines = 0;
        for seg in &self.segments {
            file_bytes += seg.len;
            if seg.id > self.cursor.segment {
                pending_bytes += seg.len - SEGMENT_HEADER_BYTES;
                pending_lines += seg.lines;
            } else if seg.id == self.cursor.segment {
                pending_bytes += seg.len.saturating_sub(self.cursor.offset);
                pending_lines += seg.lines.saturating_sub(self.delivered_lines);
            }
        }
        s.file_bytes = file_bytes;
        s.pending_bytes = pending_bytes;
        s.pending_lines = pending_lines;
        s.segments = self.segments.len() as u64;
        s
    }

    /// True when every record has been acknowledged.
    pub fn is_drained(&self) -> bool {
        self.stats().pending_bytes == 0
    }

    /// Appends one batch as a record and syncs it to disk before returning.
    ///
    /// When the segment files then exceed the bound, the oldest segments are removed (their
    /// undelivered lines counted and logged).
    pub fn append(&mut self, payload: &[u8]) -> Result<(), SpoolError> {
        if payload.is_empty() {
            return Ok(());
        }
        let len = payload.len() as u64;
        let record_bytes = RECORD_HEADER_BYTES + len;
        let limit =
            MAX_RECORD_BYTES.min(self.max_bytes - SEGMENT_HEADER_BYTES - RECORD_HEADER_BYTES);
        if len > limit {
            return Err(SpoolError::TooLarge { bytes: len, limit });
        }
        let active_len = self.segments.back().map_or(0, |s| s.len);
        if active_len > SEGMENT_HEADER_BYTES && active_len + record_bytes > self.segment_bytes {
            self.rotate()?;
        }
        let Some(seg) = self.segments.back_mut() else {
            return Ok(()); // unreachable: segments is never empty
        };
        let path = self.dir.join(segment_name(seg.id));
        let len32 = (len as u32).to_le_bytes();
        let mut h = crc32fast::Hasher::new();
        h.update(&len32);
        h.update(payload);
        let mut record = Vec::with_capacity(record_bytes as usize);
        record.extend_from_slice(RECORD_MAGIC);
        record.extend_from_slice(&len32);
        record.extend_from_slice(&h.finalize().to_le_bytes());
        record.extend_from_slice(payload);
        let written = self
            .active
            .write_all(&record)
            .and_then(|()| self.active.sync_data());
        if let Err(source) = written {
            // leave no half record behind for the next append to follow
            let _ = self.active.set_len(seg.len);
            return Err(SpoolError::Io { path, source });
        }
        seg.len += record_bytes;
        seg.lines += count_lines(payload);
        self.enforce_limit()
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
        out.clear();
        let mut batch: Option<Batch> = None;
        let first = self.cursor.segment;
        let ids: Vec<u64> = self
            .segments
            .iter()
            .filter(|s| s.id >= first)
            .map(|s| s.id)
            .collect();
        for id in ids {
            let Some(seg) = self.segments.iter().find(|s| s.id == id) else {
                continue;
            };
            let (len, verified_len) = (seg.len, seg.verified_len);
            let mut pos = if id == self.cursor.segment {
                self.cursor.offset
            } else {
                SEGMENT_HEADER_BYTES
            };
            if pos >= len {
                continue;
            }
            let path = self.dir.join(segment_name(id));
            let file = File::open(&path).map_err(io_err(&path))?;
            loop {
                let mark = out.len();
                match next_item(&file, pos, len, out).map_err(io_err(&path))? {
                    None => break,
                    Some(Item::Record { end }) => {
                        let here = Position {
                            segment: id,
                            offset: end,
                        };
                        match &mut batch {
                            Some(b) => {
                                if out.len() > max_bytes || b.records >= max_records {
                                    out.truncate(mark);
                                    return Ok(batch);
                                }
                                let lines = count_lines(out.get(mark..).unwrap_or_default());
                                if b.end.segment != id {
                                    b.tail_lines = 0;
                                }
                                b.records += 1;
                                b.lines += lines;
                                b.tail_lines += lines;
                                b.end = here;
                            }
                            None => {
                                let lines = count_lines(out.get(mark..).unwrap_or_default());
                                batch = Some(Batch {
                                    start: Position {
                                        segment: id,
                                        offset: pos,
                                    },
                                    end: here,
                                    records: 1,
                                    lines,
                                    tail_lines: lines,
                                });
                            }
                        }
                        pos = end;
                    }
                    Some(Item::Garbage { end }) => {
                        if batch.is_some() {
                            // deliver what precedes it; the next peek skips it
                            return Ok(batch);
                        }
                        let mut skipped_lines = 0;
                        if end > verified_len {
                            // damaged after open (the file was changed under us): count it now
                            skipped_lines =
                                count_newlines_in(&file, pos, end).map_err(io_err(&path))?;
                            tracing::warn!(
                                path = %path.display(),
                                offset = pos,
                                bytes = end - pos,
                                "spool: skipping a corrupt record"
                            );
                            self.stats.corrupt_records += 1;
                            self.stats.corrupt_bytes += end - pos;
                            self.stats.corrupt_lines += skipped_lines;
                        }
                        if id == self.cursor.segment {
                            self.delivered_lines += skipped_lines;
                        } else {
                            self.delivered_lines = skipped_lines;
                        }
                        self.cursor = Position {
                            segment: id,
                            offset: end,
                        };
                        pos = end;
                    }
                }
            }
        }
        Ok(batch)
    }

    /// Marks a batch from [`peek`](Self::peek) as delivered (or deliberately dropped): moves the
    /// cursor past it and deletes segments that hold nothing undelivered.
    ///
    /// A batch whose segment was removed meanwhile (spool full) is ignored.
    pub fn ack(&mut self, batch: &Batch) -> Result<(), SpoolError> {
        if batch.end <= self.cursor {
            return Ok(());
        }
        if batch.end.segment == self.cursor.segment {
            self.delivered_lines += batch.tail_lines;
        } else {
            self.delivered_lines = batch.tail_lines;
        }
        self.cursor = batch.end;
        self.gc()?;
        if let Some(active) = self.segments.back() {
            let drained = self.cursor.segment == active.id && self.cursor.offset >= active.len;
            if drained && active.len >= RETIRE_DRAINED_BYTES {
                // start afresh so delivered data does not sit on disk until the segment fills
                self.rotate()?;
            }
        }
        self.save_cursor()
    }

    fn save_cursor(&self) -> Result<(), SpoolError> {
        let tmp = self.dir.join(CURSOR_TMP);
        fs::write(&tmp, encode_cursor(self.cursor)).map_err(io_err(&tmp))?;
        let path = self.dir.join(CURSOR_FILE);
        fs::rename(&tmp, &path).map_err(io_err(&path))
    }

    /// Deletes leading segments that are fully delivered (never the active one).
    fn gc(&mut self) -> Result<(), SpoolError> {
        while self.segments.len() > 1 {
            let Some(front) = self.segments.front() else {
                break;
            };
            let done = front.id < self.cursor.segment
                || (front.id == self.cursor.segment && self.cursor.offset >= front.len);
            if !done {
                break;
            }
            let path = self.dir.join(segment_name(front.id));
            match fs::remove_file(&path) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(source) => return Err(SpoolError::Io { path, source }),
            }
            self.segments.pop_front();
            if let Some(next) = self.segments.front() {
                if next.id > self.cursor.segment {
                    self.cursor = Position {
                        segment: next.id,
                        offset: SEGMENT_HEADER_BYTES,
                    };
                    self.delivered_lines = 0;
                }
            }
        }
        Ok(())
    }

    /// Removes the oldest segments while the files exceed the bound.
    fn enforce_limit(&mut self) -> Result<(), SpoolError> {
        while self.segments.len() > 1 && self.stats().file_bytes > self.max_bytes {
            let Some(front) = self.segments.pop_front() else {
                break;
            };
            let (lines, bytes) = if front.id == self.cursor.segment {
                (
                    front.lines.saturating_sub(self.delivered_lines),
                    front.len.saturating_sub(self.cursor.offset),
                )
            } else if front.id > self.cursor.segment {
                (front.lines, front.len - SEGMENT_HEADER_BYTES)
            } else {
                (0, 0)
            };
            let path = self.dir.join(segment_name(front.id));
            fs::remove_file(&path).map_err(io_err(&path))?;
            self.stats.overflow_dropped_lines += lines;
            tracing::warn!(
                path = %path.display(),
                dropped_lines = lines,
                dropped_bytes = bytes,
                max_bytes = self.max_bytes,
                "spool full: dropped the oldest undelivered data"
            );
            if let Some(next) = self.segments.front() {
                if next.id > self.cursor.segment {
                    self.cursor = Position {
                        segment: next.id,
                        offset: SEGMENT_HEADER_BYTES,
                    };
                    self.delivered_lines = 0;
                }
            }
        }
        Ok(())
    }

    fn rotate(&mut self) -> Result<(), SpoolError> {
        let id = self.segments.back().map_or(1, |s| s.id + 1);
        self.active = create_segment(&self.dir, id)?;
        self.segments.push_back(Segment {
            id,
            len: SEGMENT_HEADER_BYTES,
            lines: 0,
            verified_len: SEGMENT_HEADER_BYTES,
        });
        self.gc()
    }
}

/// Creates a segment with its header, synced together with the directory entry.
fn create_segment(dir: &Path, id: u64) -> Result<File, SpoolError> {
    let path = dir.join(segment_name(id));
    let mut file = OpenOptions::new()
        .create_new(true)
        .append(true)
        .open(&path)
        .map_err(io_err(&path))?;
    file.write_all(SEGMENT_MAGIC)
        .and_then(|()| file.sync_data())
        .map_err(io_err(&path))?;
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(io_err(dir))?;
    Ok(file)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use proptest::prelude::*;

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
    fn torn_tail_is_truncated_and_appends_continue() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Spool::open(dir.path(), 1 << 20).unwrap();
        s.append(&batch(0, 1)).unwrap();
        s.append(&batch(1, 1)).unwrap();
        drop(s);
        let seg = segment_files(dir.path()).pop().unwrap();
        let good_len = fs::metadata(&seg).unwrap().len();
        // a crash in the middle of writing a third record: header and part of the payload
        let mut f = OpenOptions::new().append(true).open(&seg).unwrap();
        let len = 40u32;
        f.write_all(RECORD_MAGIC).unwrap();
        f.write_all(&len.to_le_bytes()).unwrap();
        f.write_all(&[0, 0, 0, 0]).unwrap();
        f.write_all(b"m,host=x v=1i").unwrap();
        drop(f);
        let mut s = Spool::open(dir.path(), 1 << 20).unwrap();
        let st = s.stats();
        assert_eq!(st.torn_bytes, RECORD_HEADER_BYTES + 13);
        assert_eq!((st.corrupt_records, st.pending_lines), (0, 2));
        assert_eq!(fs::metadata(&seg).unwrap().len(), good_len);
        s.append(&batch(2, 1)).unwrap();
        drop(s);
        let mut s = Spool::open(dir.path(), 1 << 20).unwrap();
        let want = [batch(0, 1), batch(1, 1), batch(2, 1)].concat();
        assert_eq!(drain(&mut s, 1 << 20), want);
    }

    #[test]
    fn torn_segment_header_is_rewritten() {
        let dir = tempfile::tempdir().unwrap();
        drop(Spool::open(dir.path(), 1 << 20).unwrap());
        let seg = segment_files(dir.path()).pop().unwrap();
        fs::write(&seg, b"SWS").unwrap();
        let mut s = Spool::open(dir.path(), 1 << 20).unwrap();
        assert_eq!(s.stats().torn_bytes, 3);
        s.append(&batch(0, 1)).unwrap();
        drop(s);
        let mut s = Spool::open(dir.path(), 1 << 20).unwrap();
        assert_eq!(drain(&mut s, 1 << 20), batch(0, 1));
    }

    /// Flips one byte at `at` bytes into the `n`th record of the only segment.
    fn flip_in_record(dir: &Path, n: usize, at: u64) {
        let seg = segment_files(dir).pop().unwrap();
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(&seg)
            .unwrap();
        let file_len = file.metadata().unwrap().len();
        let mut off = SEGMENT_HEADER_BYTES;
        let mut buf = Vec::new();
        for _ in 0..n {
            off = read_record_at(&file, off, file_len, &mut buf)
                .unwrap()
                .unwrap();
        }
        let mut b = [0u8; 1];
        file.read_exact_at(&mut b, off + at).unwrap();
        file.write_all_at(&[b[0] ^ 0x40], off + at).unwrap();
    }

    #[test]
    fn corrupt_record_in_the_middle_is_skipped_and_counted() {
        // payload, CRC, length and magic damage all end the same way
        for at in [RECORD_HEADER_BYTES + 5, 9, 7, 1] {
            let dir = tempfile::tempdir().unwrap();
            let mut s = Spool::open(dir.path(), 1 << 20).unwrap();
            for i in 0..3 {
                s.append(&batch(i, 4)).unwrap();
            }
            drop(s);
            flip_in_record(dir.path(), 1, at);
            let mut s = Spool::open(dir.path(), 1 << 20).unwrap();
            let st = s.stats();
            assert_eq!(st.corrupt_records, 1, "flip at {at}");
            assert_eq!(
                st.corrupt_bytes,
                batch(1, 4).len() as u64 + RECORD_HEADER_BYTES
            );
            assert_eq!(st.corrupt_lines, 4);
            assert_eq!(st.torn_bytes, 0);
            assert_eq!(st.pending_lines, 8);
            let want = [batch(0, 4), batch(2, 4)].concat();
            assert_eq!(drain(&mut s, 1 << 20), want, "flip at {at}");
            // counted once, not again while delivering
            assert_eq!(s.stats().corrupt_records, 1);
        }
    }

    #[test]
    fn corrupt_last_record_of_the_newest_segment_counts_as_torn() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Spool::open(dir.path(), 1 << 20).unwrap();
        s.append(&batch(0, 2)).unwrap();
        s.append(&batch(1, 2)).unwrap();
        drop(s);
        flip_in_record(dir.path(), 1, RECORD_HEADER_BYTES + 3);
        let mut s = Spool::open(dir.path(), 1 << 20).unwrap();
        let st = s.stats();
        assert_eq!(
            st.torn_bytes,
            batch(1, 2).len() as u64 + RECORD_HEADER_BYTES
        );
        assert_eq!(st.corrupt_records, 0);
        assert_eq!(drain(&mut s, 1 << 20), batch(0, 2));
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
        fs::remove_file(dir.path().join(CURSOR_FILE)).unwrap();
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
        fs::write(dir.path().join(CURSOR_FILE), b"garbage").unwrap();
        let mut s = Spool::open(dir.path(), 1 << 20).unwrap();
        assert_eq!(drain(&mut s, 1 << 20), [batch(0, 1), batch(1, 1)].concat());
    }

    #[test]
    fn cursor_round_trips_and_rejects_damage() {
        let p = Position {
            segment: 7,
            offset: 12345,
        };
        let enc = encode_cursor(p);
        assert_eq!(decode_cursor(&enc), Some(p));
        let mut bad = enc;
        bad[3] ^= 1;
        assert_eq!(decode_cursor(&bad), None);
        assert_eq!(decode_cursor(&enc[..19]), None);
    }

    #[test]
    fn counts_lines() {
        assert_eq!(count_lines(b""), 0);
        assert_eq!(count_lines(b"a\n"), 1);
        assert_eq!(count_lines(b"a\nb"), 2);
        assert_eq!(parse_segment_name("00000000000000000042.seg"), Some(42));
        assert_eq!(parse_segment_name("42.seg"), None);
        assert_eq!(parse_segment_name("cursor"), None);
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
                fs::write(dir.path().join(segment_name(1)), &content).unwrap();
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
}
