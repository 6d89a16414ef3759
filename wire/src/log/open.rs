//! Opening a log: find the segments and cursors, recover from a crash, pick the segment to
//! append to.

use std::collections::{BTreeMap, BTreeSet};
use std::fs::{self, File, OpenOptions};
use std::os::unix::fs::{DirBuilderExt, FileExt};
use std::path::Path;
use std::sync::{Arc, Mutex};

use super::cursor::{self, Saved};
use super::error::{at, LogError};
use super::record::{self, Framing, Item, Reader, SEGMENT_HEADER_BYTES, SEGMENT_MAGIC};
use super::segment;
use super::state::{Counters, CursorState, Segment, State, Writer};
use super::{Layout, Log, LogOptions, Position, Recovery};

fn create_dir(dir: &Path) -> Result<(), LogError> {
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(at(dir))
}

/// Opens segment `name`, finding its framing; `None` when it was too short to hold a record
/// and has been removed (or, the newest, rewritten as an empty segment).
fn open_segment(
    dir: &Path,
    name: u64,
    newest: bool,
    counters: &mut Counters,
) -> Result<Option<Segment>, LogError> {
    let path = dir.join(segment::file_name(name));
    let file = if newest {
        OpenOptions::new().read(true).write(true).open(&path)
    } else {
        File::open(&path)
    }
    .map_err(at(&path))?;
    let len = file.metadata().map_err(at(&path))?.len();
    if len < SEGMENT_HEADER_BYTES {
        // cut short while being created (or an empty queue segment of the older format):
        // nothing in it was ever acknowledged
        counters.torn_bytes += len;
        if !newest {
            fs::remove_file(&path).map_err(at(&path))?;
            return Ok(None);
        }
        return empty_segment(file, &path).map(Some);
    }
    let mut head = [0u8; 8];
    file.read_exact_at(&mut head, 0).map_err(at(&path))?;
    let (framing, data_start) = Framing::of_segment(&head);
    Ok(Some(Segment {
        file: Arc::new(file),
        framing,
        data_start,
        len,
        items: 0,
    }))
}

/// Makes `file` an empty segment of the current format.
fn empty_segment(file: File, path: &Path) -> Result<Segment, LogError> {
    file.set_len(0)
        .and_then(|()| file.write_all_at(SEGMENT_MAGIC, 0))
        .and_then(|()| file.sync_data())
        .map_err(at(path))?;
    Ok(Segment {
        file: Arc::new(file),
        framing: Framing::Tagged,
        data_start: SEGMENT_HEADER_BYTES,
        len: SEGMENT_HEADER_BYTES,
        items: 0,
    })
}

impl Log {
    /// Opens the log in `layout`, creating its directories (mode 0700) and first segment if
    /// needed, and recovers from whatever a crash left: see the [module](crate::log)
    /// documentation. Every cursor file found is loaded; [`Log::cursor`] registers the ones
    /// in use.
    pub fn open(layout: Layout, opts: LogOptions) -> Result<(Self, Recovery), LogError> {
        create_dir(&layout.segments)?;
        create_dir(&layout.cursors)?;
        let mut rec = Recovery::default();
        let mut counters = Counters::default();

        let names = segment::list(&layout.segments)?;
        let mut segments = BTreeMap::new();
        for (i, &name) in names.iter().enumerate() {
            let newest = i + 1 == names.len();
            if let Some(seg) = open_segment(&layout.segments, name, newest, &mut counters)? {
                rec.legacy_segments += u64::from(seg.framing == Framing::Plain);
                segments.insert(name, seg);
            }
        }

        let mut state = State {
            segments,
            cursors: Vec::new(),
            end: Position::ZERO,
            counted: BTreeSet::new(),
            counters,
        };
        for (name, saved) in cursor::load_all(&layout.cursors)? {
            let pos = match saved {
                Some(Saved::At(p)) => p,
                Some(Saved::Byte(b)) => {
                    rec.converted_cursors += 1;
                    state.locate(b)
                }
                None => {
                    tracing::warn!(dir = %layout.cursors.display(), cursor = %name, "log: damaged cursor file; that reader starts again from the oldest data");
                    Position::ZERO
                }
            };
            state.cursors.push(CursorState {
                name,
                pos,
                items_before: 0,
                registered: false,
                moving: Arc::new(Mutex::new(())),
            });
        }
        if rec.converted_cursors > 0 || rec.legacy_segments > 0 {
            tracing::info!(
                dir = %layout.segments.display(),
                legacy_segments = rec.legacy_segments,
                converted_cursors = rec.converted_cursors,
                "log: queue files in the format from before the shared segment log: read until delivered, cursors converted"
            );
        }

        let mut log = Self {
            writer: Mutex::new(Writer {
                file: None,
                name: 0,
                len: 0,
                data_start: SEGMENT_HEADER_BYTES,
            }),
            state: Mutex::new(state),
            layout,
            opts,
        };
        log.scan(&mut rec)?;
        log.start_writing(&mut rec)?;
        let evicted = log.enforce_bound()?;
        rec.evicted = evicted;
        let state = log.state.get_mut().unwrap_or_else(|e| e.into_inner());
        rec.torn_bytes = state.counters.torn_bytes;
        Ok((log, rec))
    }

    /// Reads the segments that need it (all when items are counted, else the newest): counts
    /// items, truncates a torn tail, counts damage beyond the slowest cursor.
    fn scan(&mut self, rec: &mut Recovery) -> Result<(), LogError> {
        let max_record = self.opts.max_record_bytes;
        let count = self.opts.count;
        let dir = self.layout.segments.clone();
        let state = self.state.get_mut().unwrap_or_else(|e| e.into_inner());
        let slowest = state.slowest();
        let newest = state.segments.keys().next_back().copied();
        let names: Vec<u64> = match count {
            Some(_) => state.segments.keys().copied().collect(),
            None => newest.into_iter().collect(),
        };
        let (mut payload, mut scratch) = (Vec::new(), Vec::new());
        for name in names {
            let Some(seg) = state.segments.get_mut(&name) else {
                continue;
            };
            let path = dir.join(segment::file_name(name));
            let file = Arc::clone(&seg.file);
            let mut reader = Reader::new(&file, seg.framing, seg.len, max_record);
            let mut off = seg.data_start;
            loop {
                payload.clear();
                let item = reader
                    .next(off, &mut payload, &mut scratch)
                    .map_err(at(&path))?;
                match item {
                    None => break,
                    Some(Item::Record { end, .. }) => {
                        let items = count.map_or(0, |f| f(&payload));
                        seg.items += items;
                        for c in &mut state.cursors {
                            if c.pos.segment == name && c.pos.offset >= end {
                                c.items_before += items;
                            }
                        }
                        off = end;
                    }
                    Some(Item::Damaged { start, end })
                        if Some(name) == newest && end == seg.len =>
                    {
                        tracing::warn!(path = %path.display(), offset = start, bytes = end - start, "log: truncating a torn tail left by a crash");
                        file.set_len(start)
                            .and_then(|()| file.sync_data())
                            .map_err(at(&path))?;
                        state.counters.torn_bytes += end - start;
                        seg.len = start;
                        break;
                    }
                    Some(Item::Damaged { start, end }) => {
                        let here = Position {
                            segment: name,
                            offset: start,
                        };
                        state.counted.insert(here);
                        if (Position {
                            segment: name,
                            offset: end,
                        }) > slowest
                        {
                            let items = match count {
                                Some(f) => {
                                    record::count_in(&file, start, end, f).map_err(at(&path))?
                                }
                                None => 0,
                            };
                            tracing::warn!(path = %path.display(), offset = start, bytes = end - start, items_estimate = items, "log: skipping a damaged record");
                            let c = &mut state.counters;
                            c.corrupt_records += 1;
                            c.corrupt_bytes += end - start;
                            c.corrupt_items += items;
                            rec.corrupt_records += 1;
                        }
                        off = end;
                    }
                }
            }
        }
        Ok(())
    }

    /// Chooses the segment to append to: the newest, unless there is none, it is in the older
    /// queue format, or a cursor points past it; then a new one numbered past all of them.
    fn start_writing(&mut self, rec: &mut Recovery) -> Result<(), LogError> {
        let sync = self.opts.sync;
        let dir = self.layout.segments.clone();
        let state = self.state.get_mut().unwrap_or_else(|e| e.into_inner());
        if let Some(mut e) = state.segments.last_entry() {
            if e.get().framing == Framing::Plain && e.get().len == 0 {
                // an older-format segment that held nothing valid: reuse it
                let path = dir.join(segment::file_name(*e.key()));
                let file = OpenOptions::new()
                    .write(true)
                    .open(&path)
                    .map_err(at(&path))?;
                let seg = empty_segment(file, &path)?;
                *e.get_mut() = Segment {
                    file: Arc::clone(&e.get().file),
                    ..seg
                };
                rec.legacy_segments -= 1;
            }
        }
        let newest = state
            .segments
            .iter()
            .next_back()
            .map(|(&n, s)| (n, s.len, s.framing));
        let end = newest.map_or(Position::ZERO, |(n, len, _)| Position {
            segment: n,
            offset: len,
        });
        let first = state.first();
        // numbered past every cursor, so that none can point into the new segment's data
        let mut floor = end.byte();
        let mut lost_tail = false;
        for c in &mut state.cursors {
            floor = floor.max(c.pos.byte());
            if newest.is_some() && c.pos > end {
                tracing::warn!(cursor = %c.name, segment = c.pos.segment, offset = c.pos.offset, "log: cursor past the end of the log; that reader starts again from the oldest data");
                c.pos = Position::ZERO;
                rec.reset_cursors += 1;
                lost_tail = true;
            }
            if c.pos < first {
                c.pos = first;
                c.items_before = 0;
            }
        }
        let writer = self.writer.get_mut().unwrap_or_else(|e| e.into_inner());
        match newest {
            Some((name, len, Framing::Tagged)) if !lost_tail => {
                writer.file = state.segments.get(&name).map(|s| Arc::clone(&s.file));
                writer.name = name;
                writer.len = len;
                writer.data_start = SEGMENT_HEADER_BYTES;
                state.end = end;
            }
            _ => {
                let file = Arc::new(segment::create(&dir, floor, sync)?);
                state.segments.insert(
                    floor,
                    Segment {
                        file: Arc::clone(&file),
                        framing: Framing::Tagged,
                        data_start: SEGMENT_HEADER_BYTES,
                        len: SEGMENT_HEADER_BYTES,
                        items: 0,
                    },
                );
                *writer = Writer {
                    file: Some(file),
                    name: floor,
                    len: SEGMENT_HEADER_BYTES,
                    data_start: SEGMENT_HEADER_BYTES,
                };
                state.end = Position {
                    segment: floor,
                    offset: SEGMENT_HEADER_BYTES,
                };
                if newest.is_none() {
                    // a log without segments: its cursors start at the new one
                    for c in &mut state.cursors {
                        c.pos = c.pos.max(Position {
                            segment: floor,
                            offset: 0,
                        });
                    }
                }
            }
        }
        Ok(())
    }
}
