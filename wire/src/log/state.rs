//! The log's bookkeeping in memory: segments, cursors, counters.

use std::collections::{BTreeMap, BTreeSet};
use std::fs::File;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use super::record::Framing;
use super::{CursorId, Evicted, LogStats, Pending, Position};

/// Locks, recovering the data of a poisoned lock: every mutation under these locks leaves the
/// state consistent before anything that can panic.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The appending side: the newest segment.
#[derive(Debug)]
pub(crate) struct Writer {
    /// The newest segment's file; `None` when the next append must create segment `name`
    /// (after the log gave up a full, delivered segment and could not create the next yet).
    pub(crate) file: Option<Arc<File>>,
    pub(crate) name: u64,
    /// Valid bytes in it: appends write here.
    pub(crate) len: u64,
    /// Where its records start.
    pub(crate) data_start: u64,
}

impl Writer {
    /// Whether the newest segment holds records.
    pub(crate) fn holds_data(&self) -> bool {
        self.file.is_some() && self.len > self.data_start
    }
}

#[derive(Debug)]
pub(crate) struct Segment {
    /// Read handle (the newest segment's is also the writer's).
    pub(crate) file: Arc<File>,
    pub(crate) framing: Framing,
    pub(crate) data_start: u64,
    /// Valid (durable) bytes: readers stop here.
    pub(crate) len: u64,
    /// Items of its valid records, when the log counts items.
    pub(crate) items: u64,
}

#[derive(Debug)]
pub(crate) struct CursorState {
    pub(crate) name: String,
    pub(crate) pos: Position,
    /// Items of the records of `pos.segment` before `pos`.
    pub(crate) items_before: u64,
    /// Registered with `Log::cursor`: only these hold segments back and decide "delivered".
    pub(crate) registered: bool,
    /// Serialises the moves of this cursor, so its file never goes backwards.
    pub(crate) moving: Arc<Mutex<()>>,
}

#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub(crate) torn_bytes: u64,
    pub(crate) corrupt_records: u64,
    pub(crate) corrupt_bytes: u64,
    pub(crate) corrupt_items: u64,
    pub(crate) evicted: Evicted,
}

#[derive(Debug)]
pub(crate) struct State {
    pub(crate) segments: BTreeMap<u64, Segment>,
    pub(crate) cursors: Vec<CursorState>,
    /// The durable end.
    pub(crate) end: Position,
    /// Starts of the damaged regions already counted, so that each is counted once however many
    /// readers pass it.
    pub(crate) counted: BTreeSet<Position>,
    pub(crate) counters: Counters,
}

/// Whether `c` has passed all of segment `name` of `len` bytes.
pub(crate) fn passed(c: Position, name: u64, len: u64) -> bool {
    c.segment > name || (c.segment == name && c.offset >= len)
}

impl State {
    pub(crate) fn first(&self) -> Position {
        match self.segments.keys().next() {
            Some(&segment) => Position { segment, offset: 0 },
            None => self.end,
        }
    }

    pub(crate) fn locate(&self, byte: u64) -> Position {
        match self.segments.range(..=byte).next_back() {
            Some((&segment, _)) => Position {
                segment,
                offset: byte - segment,
            },
            None => match self.segments.keys().next() {
                Some(&segment) => Position { segment, offset: 0 },
                None => Position {
                    segment: byte,
                    offset: 0,
                },
            },
        }
    }

    /// Positions of the registered cursors.
    pub(crate) fn registered(&self) -> impl Iterator<Item = Position> + '_ {
        self.cursors.iter().filter(|c| c.registered).map(|c| c.pos)
    }

    /// The cursor whose view decides what is lost: the slowest registered one, or before any
    /// is registered (at open) the slowest known one.
    pub(crate) fn slowest_cursor(&self) -> Option<&CursorState> {
        let registered = self
            .cursors
            .iter()
            .filter(|c| c.registered)
            .min_by_key(|c| c.pos);
        registered.or_else(|| self.cursors.iter().min_by_key(|c| c.pos))
    }

    /// Position of [`State::slowest_cursor`]; the start of everything without cursors.
    pub(crate) fn slowest(&self) -> Position {
        self.slowest_cursor().map_or(Position::ZERO, |c| c.pos)
    }

    /// Whether every registered cursor (and there is one) has passed segment `name` of `len`.
    pub(crate) fn delivered(&self, name: u64, len: u64) -> bool {
        let mut any = false;
        for c in self.registered() {
            if !passed(c, name, len) {
                return false;
            }
            any = true;
        }
        any
    }

    /// What lies at or after `c` in segment `name`: (record bytes, items).
    pub(crate) fn after(&self, c: &CursorState, name: u64, seg: &Segment) -> (u64, u64) {
        if c.pos.segment < name {
            (seg.len - seg.data_start, seg.items)
        } else if c.pos.segment == name {
            let from = c.pos.offset.max(seg.data_start).min(seg.len);
            (seg.len - from, seg.items.saturating_sub(c.items_before))
        } else {
            (0, 0)
        }
    }

    pub(crate) fn pending(&self, id: CursorId) -> Pending {
        let Some(c) = self.cursors.get(id.0) else {
            return Pending::default();
        };
        let mut p = Pending::default();
        for (&name, seg) in self.segments.range(c.pos.segment..) {
            let (bytes, items) = self.after(c, name, seg);
            p.bytes += bytes;
            p.items += items;
        }
        p
    }

    pub(crate) fn stats(&self) -> LogStats {
        let c = &self.counters;
        LogStats {
            file_bytes: self.segments.values().map(|s| s.len).sum(),
            segments: self.segments.len() as u64,
            torn_bytes: c.torn_bytes,
            corrupt_records: c.corrupt_records,
            corrupt_bytes: c.corrupt_bytes,
            corrupt_items: c.corrupt_items,
            evicted: c.evicted,
        }
    }

    /// Forgets segment `name` (its file is the caller's to delete): cursors inside it move to
    /// the start of what follows.
    pub(crate) fn forget(&mut self, name: u64) -> Option<Segment> {
        let seg = self.segments.remove(&name)?;
        let next = self
            .segments
            .range(name..)
            .next()
            .map(|(&n, _)| n)
            .unwrap_or(name + seg.len);
        for c in &mut self.cursors {
            if c.pos.segment <= name {
                c.pos = Position {
                    segment: next,
                    offset: 0,
                };
                c.items_before = 0;
            }
        }
        self.counted.retain(|p| p.segment != name);
        Some(seg)
    }
}
