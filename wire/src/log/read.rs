//! Reading records from a position on.

use std::fs::File;
use std::ops::Bound;
use std::path::Path;
use std::sync::Arc;

use super::error::{at, LogError};
use super::record::{self, Framing, Reader};
use super::segment;
use super::state::lock;
use super::{Batch, Log, Position};

/// A segment to read from, taken out of the state so that reading holds no lock.
struct Open {
    name: u64,
    file: Arc<File>,
    framing: Framing,
    len: u64,
}

impl Log {
    /// Reads records from `from` on into `out` (cleared first): one record at least when any
    /// is there, then more while `out` stays within `max_bytes` and the batch within
    /// `max_records`. `ends` (cleared first) receives, per record, where its payload ends in
    /// `out`. `None` when there is nothing after `from`.
    ///
    /// Damaged regions are skipped, counted once and logged; a batch may consist of skipped
    /// damage only (`records == 0`): acknowledging it moves the cursor past.
    pub fn read(
        &self,
        from: Position,
        max_bytes: usize,
        max_records: usize,
        out: &mut Vec<u8>,
        ends: &mut Vec<usize>,
    ) -> Result<Option<Batch>, LogError> {
        self.read_marked(from, max_bytes, max_records, out, ends, None)
    }

    /// [`Log::read`], and in `marks` (cleared first), per record, the position just past it in
    /// the log: a reader that acknowledges part of a batch moves its cursor to one of them.
    pub fn read_marked(
        &self,
        from: Position,
        max_bytes: usize,
        max_records: usize,
        out: &mut Vec<u8>,
        ends: &mut Vec<usize>,
        mut marks: Option<&mut Vec<Position>>,
    ) -> Result<Option<Batch>, LogError> {
        out.clear();
        ends.clear();
        if let Some(m) = marks.as_deref_mut() {
            m.clear();
        }
        let mut batch: Option<Batch> = None;
        let mut pos = from;
        let mut scratch = Vec::new();
        while let Some(seg) = self.segment_at(&mut pos) {
            let path = self.layout.segments.join(segment::file_name(seg.name));
            let hl = seg.framing.header_len();
            let mut reader =
                Reader::new(&seg.file, seg.framing, seg.len, self.opts.max_record_bytes);
            let mut off = pos.offset;
            while off < seg.len {
                let here = Position {
                    segment: seg.name,
                    offset: off,
                };
                if let Some((len, crc)) = reader.header(off).map_err(at(&path))? {
                    if let Some(b) = &batch {
                        if b.records > 0
                            && (out.len() + len as usize > max_bytes || b.records >= max_records)
                        {
                            return Ok(batch);
                        }
                    }
                    let mark = out.len();
                    if reader.payload(off, len, crc, out).map_err(at(&path))? {
                        let end = off + hl + len;
                        let items = self
                            .opts
                            .count
                            .map_or(0, |f| f(out.get(mark..).unwrap_or_default()));
                        ends.push(out.len());
                        if let Some(m) = marks.as_deref_mut() {
                            m.push(Position {
                                segment: seg.name,
                                offset: end,
                            });
                        }
                        let b = batch.get_or_insert(Batch::empty(here));
                        b.reach(seg.name, end, items);
                        b.records += 1;
                        b.bytes += len as usize;
                        off = end;
                        continue;
                    }
                }
                let end = reader.resync(off, &mut scratch).map_err(at(&path))?;
                self.note_damage(&seg.file, &path, here, end)?;
                batch
                    .get_or_insert(Batch::empty(here))
                    .reach(seg.name, end, 0);
                off = end;
            }
            pos = Position {
                segment: seg.name,
                offset: seg.len,
            };
        }
        Ok(batch)
    }

    /// The segment holding the data at or after `pos`, with `pos` moved to the first byte to
    /// read in it (past a header, into the next segment at the end of one).
    fn segment_at(&self, pos: &mut Position) -> Option<Open> {
        let st = lock(&self.state);
        let mut range = st.segments.range(pos.segment..);
        loop {
            let (&name, seg) = range.next()?;
            if name != pos.segment {
                *pos = Position {
                    segment: name,
                    offset: 0,
                };
            }
            let off = pos.offset.max(seg.data_start);
            if off < seg.len {
                pos.offset = off;
                return Some(Open {
                    name,
                    file: Arc::clone(&seg.file),
                    framing: seg.framing,
                    len: seg.len,
                });
            }
            range = st.segments.range((Bound::Excluded(name), Bound::Unbounded));
        }
    }

    /// Counts the damaged region at `here` unless a reader (or the open) already did.
    fn note_damage(
        &self,
        file: &File,
        path: &Path,
        here: Position,
        end: u64,
    ) -> Result<(), LogError> {
        if !lock(&self.state).counted.insert(here) {
            return Ok(());
        }
        let items = match self.opts.count {
            Some(f) => record::count_in(file, here.offset, end, f).map_err(at(path))?,
            None => 0,
        };
        let bytes = end - here.offset;
        tracing::warn!(path = %path.display(), offset = here.offset, bytes, items_estimate = items, "log: skipping a damaged record");
        let mut st = lock(&self.state);
        st.counters.corrupt_records += 1;
        st.counters.corrupt_bytes += bytes;
        st.counters.corrupt_items += items;
        Ok(())
    }
}

impl Batch {
    fn empty(start: Position) -> Self {
        Self {
            start,
            end: start,
            records: 0,
            bytes: 0,
            items: 0,
            tail_items: 0,
        }
    }

    /// Extends the batch to `end` of segment `name`, adding `items`.
    fn reach(&mut self, name: u64, end: u64, items: u64) {
        if self.end.segment != name {
            self.tail_items = 0;
        }
        self.items += items;
        self.tail_items += items;
        self.end = Position {
            segment: name,
            offset: end,
        };
    }
}
