//! The segment log under the agent's spool and the collector's queue: CRC-framed records in
//! append-only segment files, named cursors that remember what each reader has delivered, and
//! the recovery that makes a crash at any point cost at most a resend.
//!
//! What the two users choose is in [`LogOptions`] and [`Layout`]; what they do with it (the
//! agent's bound and line counts, the collector's group-commit thread and notifications) stays
//! in their code.
//!
//! # On disk
//!
//! ```text
//! <segments>/00000000000000000000.seg    segment files, named by a 20-digit number
//! <segments>/00000000000000065544.seg
//! <cursors>/<name>.pos                   one cursor file per reader
//! ```
//!
//! [`Layout::flat`] puts both in one directory (the agent's spool); [`Layout::split`] uses
//! `dir/segments/` and `dir/cursors/` (the collector's queue, which keeps other files in `dir`).
//!
//! **Segment.** The 8-byte magic `SWLOG001`, then records back to back. A segment's number is
//! the position of its first byte in the log's byte stream: the previous segment's number plus
//! the previous segment's length, so the numbers of a log written by this code are byte
//! offsets ([`Position::byte`]). Only the newest segment is appended to.
//!
//! **Record.** `"SWR1"` | payload length (u32 LE, 1 to `max_record_bytes`) | CRC32 (IEEE, as
//! `crc32fast`) of the four length bytes followed by the payload (u32 LE) | payload. The magic
//! lets a reader find the next record after damage without trusting a damaged length; the CRC
//! covers the length, so a flipped length bit cannot pass.
//!
//! **Cursor file.** 20 bytes: segment number (u64 LE), offset in that segment's file (u64 LE),
//! CRC32 of those 16 bytes (u32 LE): the first byte its reader has not delivered. It is written
//! to `<name>.tmp` and renamed over `<name>.pos`, so it is the old cursor or the new one, never
//! a mix. A cursor at the end of a segment equals the start of the next one.
//!
//! # Formats from before this log, still read
//!
//! * **Agent spool** (up to commit 0aad2bc): segments `<20-digit sequence number>.seg`
//!   starting with the magic `SWSPOOL1`, records framed exactly as above; cursor file `cursor`,
//!   20 bytes as above. The segments are read as they are (their numbers are not byte offsets,
//!   which only [`Position::byte`] would care about); the agent renames `cursor` to
//!   `cursor.pos` on its first start.
//! * **Collector queue** (up to commit 0aad2bc): `segments/<20-digit byte position>.seg` with
//!   no header, records `length (u32 LE) | CRC32 of the payload (u32 LE) | payload`; cursor
//!   files `cursors/<output>.pos` of 12 bytes: byte position (u64 LE), CRC32 of it (u32 LE).
//!   Such segments are read (damage skipped the same way, every byte a candidate start) until
//!   they are delivered and released; nothing is appended to them: on open a new segment
//!   starts after the last one. A 12-byte cursor is converted to a position when the log opens
//!   and written in the 20-byte format the next time it moves ([`Recovery::converted_cursors`]).
//!
//! # Durability
//!
//! * An append writes its records with one vectored `write` at the end of the valid data and,
//!   with [`LogOptions::sync`], one `fdatasync` before it returns: a record whose append
//!   returned `Ok` survives a crash or a power loss. Many records appended together
//!   ([`Log::append_batch`]) share that one fsync (the collector's group commit).
//! * A new segment is created with its header, fsync'd, and its directory fsync'd before a
//!   record goes into it, so the file itself survives a power loss.
//! * A failed append (including a full disk) is not acknowledged and leaves nothing a later
//!   append builds on: the file is cut back to the last whole record, and the next append
//!   writes at the end of the valid data whether or not the cut succeeded.
//! * A cursor file is fsync'd before its rename with [`LogOptions::sync_cursors`] (the
//!   collector). Without it (the agent) a power loss may bring back an older cursor or a
//!   damaged one: the reader then delivers again what it had delivered — at least once, never
//!   less. A damaged or missing cursor file means "from the oldest data kept".
//! * Deleting delivered segments is not fsync'd: a segment that comes back after a power loss
//!   is behind every cursor and is deleted again by the next release.
//!
//! # Recovery when the log is opened
//!
//! * **Torn tail**: bytes at the end of the newest segment that do not form a valid record (an
//!   append cut short by a crash, or a filesystem's zeros) were never acknowledged; they are
//!   truncated away and counted ([`Recovery::torn_bytes`]). A newest segment shorter than its
//!   header is rewritten with a header.
//! * **Damage inside**: a region that holds no valid record but has valid records after it
//!   (bad magic, impossible length, CRC mismatch) is skipped up to the next valid record,
//!   counted once ([`LogStats::corrupt_records`], `corrupt_bytes`, and `corrupt_items` as an
//!   estimate when the caller counts items) and logged. Intact records on both sides are
//!   delivered. With [`LogOptions::count`] set every segment is read at open (the agent, to
//!   count lines); otherwise only the newest, and readers find older damage when they reach it.
//! * **Cursors** pointing before the oldest segment move to it; a cursor past the end of the log
//!   (a lost tail) starts again from the oldest data, and the next segment is numbered past it
//!   so that it can never point into data it has not seen.
//!
//! # Space
//!
//! * [`Log::release`] deletes segments every registered cursor has passed (never the newest).
//! * When every registered cursor has reached the end and the newest segment holds at least
//!   [`LogOptions::reclaim_bytes`], a new segment is started and the delivered one deleted, so
//!   delivered data does not sit on disk until a segment fills.
//! * When an append finds no space and everything written is delivered, the log starts a new
//!   segment (deleting the delivered one first if even the new file does not fit) and tries
//!   once more; otherwise the append fails with [`LogError::OutOfSpace`] and the log stays as it
//!   was, ready to take the append again once space is back.
//! * With [`LogOptions::max_bytes`], when the segment files exceed the bound after an append,
//!   whole segments are removed oldest first, delivered or not, and what was lost is returned
//!   ([`Evicted`]) for the caller to count and log.

mod cursor;
mod error;
mod open;
mod read;
mod record;
mod release;
mod segment;
mod state;
#[cfg(test)]
mod tests;
mod write;

use std::path::{Path, PathBuf};
use std::sync::Mutex;

pub use error::{is_out_of_space, LogError};
pub use record::{RECORD_HEADER_BYTES, SEGMENT_HEADER_BYTES, SEGMENT_MAGIC};

use state::{lock, State, Writer};

/// A place in the log: a segment number and a byte offset in that segment's file.
///
/// Positions order as the data does. The end of one segment and the start of the next are the
/// same place written two ways; the log never relies on comparing such a pair.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Position {
    /// Segment number (its file name).
    pub segment: u64,
    /// Offset inside the segment file.
    pub offset: u64,
}

impl Position {
    /// Before everything.
    pub const ZERO: Self = Self {
        segment: 0,
        offset: 0,
    };

    /// The position as one byte offset of the log's stream: `segment + offset`. Exact for every
    /// segment this code creates and for the collector queue's older segments; meaningless for
    /// the agent spool's older sequence-numbered ones.
    pub fn byte(self) -> u64 {
        self.segment.saturating_add(self.offset)
    }
}

/// Where the log keeps its files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    /// Directory of the segment files.
    pub segments: PathBuf,
    /// Directory of the cursor files.
    pub cursors: PathBuf,
}

impl Layout {
    /// Segments and cursor files side by side in `dir`.
    pub fn flat(dir: &Path) -> Self {
        Self {
            segments: dir.to_owned(),
            cursors: dir.to_owned(),
        }
    }

    /// `dir/segments/` and `dir/cursors/`.
    pub fn split(dir: &Path) -> Self {
        Self {
            segments: dir.join("segments"),
            cursors: dir.join("cursors"),
        }
    }
}

/// What a user of the log chooses.
#[derive(Debug, Clone)]
pub struct LogOptions {
    /// An append that would take the newest segment past this size starts a new segment first
    /// (a single append larger than this still goes into one segment).
    pub segment_bytes: u64,
    /// The largest payload an append takes, and the largest length a reader believes.
    pub max_record_bytes: u64,
    /// Bound of all segment files together; past it, after an append, the oldest segments are
    /// removed whether delivered or not. `None`: no bound but the filesystem.
    pub max_bytes: Option<u64>,
    /// `fdatasync` every append before it returns (and new segments and their directory).
    /// Off only for benchmarks of the non-durable path.
    pub sync: bool,
    /// `fdatasync` cursor files before renaming them into place.
    pub sync_cursors: bool,
    /// A fully delivered newest segment holding at least this many bytes is replaced by a fresh
    /// one (and deleted).
    pub reclaim_bytes: u64,
    /// Items in a payload (the agent: lines), for the item counts in [`Batch`], [`Pending`],
    /// [`Evicted`] and the damage estimates. When set, opening reads every segment.
    pub count: Option<fn(&[u8]) -> u64>,
}

/// A cursor registered with [`Log::cursor`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CursorId(usize);

/// Records read by [`Log::read`]: pass it back to [`Log::ack`] once delivered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Batch {
    /// Position of the first record (or skipped damage) in the batch.
    pub start: Position,
    /// Position just past the last record (or skipped damage) in the batch.
    pub end: Position,
    /// Records in the batch (zero when it only skips damage).
    pub records: usize,
    /// Payload bytes.
    pub bytes: usize,
    /// Items in the payloads ([`LogOptions::count`]).
    pub items: u64,
    /// Items of the records that lie in `end.segment`.
    tail_items: u64,
}

/// What an append wrote and what the bound removed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Appended {
    /// Position of the first record written.
    pub start: Position,
    /// The end of the log after the append.
    pub end: Position,
    /// Undelivered data removed because the log exceeded [`LogOptions::max_bytes`].
    pub evicted: Evicted,
}

/// Undelivered data removed to keep the bound, as seen by the slowest cursor.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Evicted {
    /// Segment files removed.
    pub segments: u64,
    /// Record bytes (headers included) not yet delivered.
    pub bytes: u64,
    /// Items not yet delivered.
    pub items: u64,
}

impl Evicted {
    fn add(&mut self, o: Self) {
        self.segments += o.segments;
        self.bytes += o.bytes;
        self.items += o.items;
    }
}

/// What opening the log found and did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Recovery {
    /// Bytes of torn tail truncated (never acknowledged).
    pub torn_bytes: u64,
    /// Damaged regions found beyond the slowest cursor.
    pub corrupt_records: u64,
    /// Segments in the collector queue's format from before this log, read until delivered.
    pub legacy_segments: u64,
    /// Cursor files in the collector queue's format from before this log, converted.
    pub converted_cursors: u64,
    /// Cursors that pointed past the end of the log and start again from the oldest data.
    pub reset_cursors: u64,
    /// Undelivered data removed at open to keep the bound (a lowered `max_bytes`).
    pub evicted: Evicted,
}

/// The log's size and what it has lost since it was opened.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LogStats {
    /// Bytes of all segment files, delivered parts included: what the bound applies to.
    pub file_bytes: u64,
    /// Segment files.
    pub segments: u64,
    /// Torn bytes truncated at open.
    pub torn_bytes: u64,
    /// Damaged regions skipped (each usually one record), counted once.
    pub corrupt_records: u64,
    /// Bytes in the damaged regions.
    pub corrupt_bytes: u64,
    /// Items estimated in the damaged regions ([`LogOptions::count`] over their bytes).
    pub corrupt_items: u64,
    /// Data removed to keep the bound.
    pub evicted: Evicted,
}

/// What a cursor has not delivered yet.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Pending {
    /// Record bytes, headers included.
    pub bytes: u64,
    /// Items of the valid records.
    pub items: u64,
}

/// An open log: appends, reads, cursors and housekeeping; shared between threads by reference.
///
/// Appends are serialised among themselves; reads, cursor moves and releases run beside an
/// append without waiting for its fsync. One thread at a time moves a given cursor.
#[derive(Debug)]
pub struct Log {
    layout: Layout,
    opts: LogOptions,
    writer: Mutex<Writer>,
    state: Mutex<State>,
}

impl Log {
    /// Where the log keeps its files.
    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// The options it was opened with.
    pub fn options(&self) -> &LogOptions {
        &self.opts
    }

    /// The end of the durable data: everything before it was appended and synced.
    pub fn end(&self) -> Position {
        lock(&self.state).end
    }

    /// The start of the oldest segment kept (the end when there is none).
    pub fn first(&self) -> Position {
        lock(&self.state).first()
    }

    /// The position of byte offset `byte` of the log's stream, for logs whose segment numbers
    /// are byte offsets ([`Position::byte`]).
    pub fn locate(&self, byte: u64) -> Position {
        lock(&self.state).locate(byte)
    }

    /// Size and loss counters.
    pub fn stats(&self) -> LogStats {
        lock(&self.state).stats()
    }

    /// What cursor `id` has not delivered yet.
    pub fn pending(&self, id: CursorId) -> Pending {
        lock(&self.state).pending(id)
    }
}
