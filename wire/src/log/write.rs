//! Appending: records, new segments, the bound, reclaiming delivered space.

use std::fs;
use std::io::{self, IoSlice, Seek, SeekFrom, Write};
use std::sync::{Arc, MutexGuard, TryLockError};

use super::error::LogError;
use super::record::{tagged_header, Framing, RECORD_HEADER_BYTES, SEGMENT_HEADER_BYTES};
use super::segment;
use super::state::{lock, Segment, Writer};
use super::{Appended, Evicted, Log, Position};

impl Log {
    /// Appends one record; see [`Log::append_batch`].
    pub fn append(&self, payload: &[u8]) -> Result<Appended, LogError> {
        self.append_batch(&[payload])
    }

    /// Appends one record per payload, in order, with one write and (with
    /// [`LogOptions::sync`](super::LogOptions::sync)) one `fdatasync`: when this returns `Ok`,
    /// all of them are on disk. Empty payloads are skipped.
    ///
    /// On an error nothing of the batch is kept. A full filesystem is
    /// [`LogError::OutOfSpace`]; before giving up the log starts afresh when everything
    /// written so far is delivered, which frees the delivered segment.
    pub fn append_batch<P: AsRef<[u8]>>(&self, payloads: &[P]) -> Result<Appended, LogError> {
        let mut total = 0;
        let mut items = 0;
        for p in payloads {
            let len = p.as_ref().len() as u64;
            if len > self.opts.max_record_bytes {
                return Err(LogError::TooLarge {
                    bytes: len,
                    limit: self.opts.max_record_bytes,
                });
            }
            if len > 0 {
                total += RECORD_HEADER_BYTES + len;
                items += self.opts.count.map_or(0, |f| f(p.as_ref()));
            }
        }
        let mut w = lock(&self.writer);
        if total == 0 {
            let end = lock(&self.state).end;
            return Ok(Appended {
                start: end,
                end,
                evicted: Evicted::default(),
            });
        }
        if w.holds_data() && w.len - w.data_start >= self.opts.reclaim_bytes && self.drained(&w) {
            if let Err(e) = self.replace_delivered(&mut w) {
                tracing::warn!(error = %e, "log: cannot start a new segment in place of a delivered one");
            }
        }
        if w.file.is_none() {
            self.roll(&mut w, false)?;
        } else if w.holds_data() && w.len + total > self.opts.segment_bytes {
            if let Err(e) = self.roll(&mut w, false) {
                // keep appending to the segment we have rather than refuse the data
                tracing::warn!(error = %e, "log: cannot start a new segment; the current one grows past its size");
            }
        }
        let start = match self.write(&mut w, payloads, total) {
            Err(e) if e.is_out_of_space() && w.holds_data() && self.drained(&w) => {
                tracing::warn!(error = %e, "log: no space left; giving up the delivered segment and trying again");
                self.replace_delivered(&mut w)?;
                self.write(&mut w, payloads, total)?
            }
            r => r?,
        };
        let end = Position {
            segment: w.name,
            offset: w.len,
        };
        let mut st = lock(&self.state);
        st.end = end;
        if let Some(seg) = st.segments.get_mut(&w.name) {
            seg.len = w.len;
            seg.items += items;
        }
        drop(st);
        drop(w);
        let evicted = self.enforce_bound()?;
        Ok(Appended {
            start,
            end,
            evicted,
        })
    }

    /// Writes the records at the end of the valid data of the newest segment and syncs them.
    /// On failure cuts the file back (best effort: the next write starts at the same place
    /// whether or not the cut worked, so no half record stays between two whole ones).
    fn write<P: AsRef<[u8]>>(
        &self,
        w: &mut MutexGuard<'_, Writer>,
        payloads: &[P],
        total: u64,
    ) -> Result<Position, LogError> {
        let path = self.layout.segments.join(segment::file_name(w.name));
        let Some(file) = w.file.clone() else {
            return Err(LogError::io(&path, io::ErrorKind::NotFound.into()));
        };
        let headers: Vec<_> = payloads
            .iter()
            .map(AsRef::as_ref)
            .filter(|p| !p.is_empty())
            .map(tagged_header)
            .collect();
        let mut slices = Vec::with_capacity(headers.len() * 2);
        for (h, p) in headers
            .iter()
            .zip(payloads.iter().map(AsRef::as_ref).filter(|p| !p.is_empty()))
        {
            slices.push(IoSlice::new(h));
            slices.push(IoSlice::new(p));
        }
        let written = (|| {
            let mut f: &std::fs::File = &file;
            f.seek(SeekFrom::Start(w.len))?;
            let mut rest = &mut slices[..];
            while !rest.is_empty() {
                let n = f.write_vectored(rest)?;
                if n == 0 {
                    return Err(io::ErrorKind::WriteZero.into());
                }
                IoSlice::advance_slices(&mut rest, n);
            }
            if self.opts.sync {
                f.sync_data()?;
            }
            Ok(())
        })();
        if let Err(e) = written {
            // frees what the partial write took; the next write goes to `w.len` regardless
            let _ = file.set_len(w.len);
            return Err(LogError::io(&path, e));
        }
        let start = Position {
            segment: w.name,
            offset: w.len,
        };
        w.len += total;
        Ok(start)
    }

    /// Whether every registered cursor has delivered everything written.
    fn drained(&self, w: &Writer) -> bool {
        lock(&self.state).delivered(w.name, w.len)
    }

    /// Starts a new segment after the newest one. With `give_up_delivered`, when the new file
    /// does not fit, the newest segment (delivered: the caller checked) is deleted first and
    /// creating the new one tried again.
    pub(crate) fn roll(
        &self,
        w: &mut MutexGuard<'_, Writer>,
        give_up_delivered: bool,
    ) -> Result<(), LogError> {
        let next = if w.file.is_some() {
            w.name + w.len
        } else {
            w.name
        };
        let dir = &self.layout.segments;
        let file = match segment::create(dir, next, self.opts.sync) {
            Ok(f) => f,
            Err(e) if e.is_out_of_space() && give_up_delivered && w.file.is_some() => {
                let old = w.name;
                w.file = None;
                w.name = next;
                w.len = 0;
                let mut st = lock(&self.state);
                st.forget(old);
                st.end = Position {
                    segment: next,
                    offset: 0,
                };
                drop(st);
                let path = dir.join(segment::file_name(old));
                if let Err(e) = fs::remove_file(&path) {
                    tracing::warn!(path = %path.display(), error = %e, "log: cannot delete a delivered segment");
                }
                segment::create(dir, next, self.opts.sync)?
            }
            Err(e) => return Err(e),
        };
        let file = Arc::new(file);
        let mut st = lock(&self.state);
        st.segments.insert(
            next,
            Segment {
                file: Arc::clone(&file),
                framing: Framing::Tagged,
                data_start: SEGMENT_HEADER_BYTES,
                len: SEGMENT_HEADER_BYTES,
                items: 0,
            },
        );
        st.end = Position {
            segment: next,
            offset: SEGMENT_HEADER_BYTES,
        };
        drop(st);
        **w = Writer {
            file: Some(file),
            name: next,
            len: SEGMENT_HEADER_BYTES,
            data_start: SEGMENT_HEADER_BYTES,
        };
        Ok(())
    }

    /// Starts a new segment when the newest is delivered and holds at least `reclaim_bytes`,
    /// then releases the old one. Skipped while an append runs: that append checks first.
    pub(crate) fn reclaim(&self) -> Result<(), LogError> {
        let mut w = match self.writer.try_lock() {
            Ok(w) => w,
            Err(TryLockError::Poisoned(p)) => p.into_inner(),
            Err(TryLockError::WouldBlock) => return Ok(()),
        };
        let worth_it = w.file.is_some()
            && w.len > w.data_start
            && w.len - w.data_start >= self.opts.reclaim_bytes;
        if !worth_it || !self.drained(&w) {
            return Ok(());
        }
        self.replace_delivered(&mut w)
    }

    /// Starts a new segment in place of the newest, delivered one, and deletes that one (first,
    /// when the new file does not fit).
    fn replace_delivered(&self, w: &mut MutexGuard<'_, Writer>) -> Result<(), LogError> {
        self.roll(w, true)?;
        self.release(None)
    }

    /// Removes the oldest segments (never the newest) while the files exceed `max_bytes`;
    /// returns what the slowest cursor had not delivered of them.
    pub(crate) fn enforce_bound(&self) -> Result<Evicted, LogError> {
        let Some(max) = self.opts.max_bytes else {
            return Ok(Evicted::default());
        };
        let mut out = Evicted::default();
        loop {
            let mut st = lock(&self.state);
            let file_bytes: u64 = st.segments.values().map(|s| s.len).sum();
            if file_bytes <= max || st.segments.len() < 2 {
                break;
            }
            let Some((&name, seg)) = st.segments.iter().next() else {
                break;
            };
            let lost = match st.slowest_cursor() {
                Some(c) => st.after(c, name, seg),
                None => (seg.len - seg.data_start, seg.items),
            };
            st.forget(name);
            let ev = Evicted {
                segments: 1,
                bytes: lost.0,
                items: lost.1,
            };
            st.counters.evicted.add(ev);
            drop(st);
            out.add(ev);
            let path = self.layout.segments.join(segment::file_name(name));
            match fs::remove_file(&path) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(LogError::io(&path, e)),
            }
        }
        Ok(out)
    }
}
