//! Cursors: registering readers, moving them past what they delivered, and deleting what every
//! reader has passed.

use std::fs;
use std::io;
use std::sync::{Arc, Mutex};

use super::cursor;
use super::error::LogError;
use super::segment;
use super::state::{lock, passed, CursorState};
use super::{Batch, CursorId, Log, Position};

impl Log {
    /// Registers the reader `name` (its cursor file is `<name>.pos`) and returns its cursor.
    /// It starts where its file says, or at the oldest data when there is no file. Only
    /// registered cursors hold segments back; registering the same name again returns the same
    /// cursor.
    pub fn cursor(&self, name: &str) -> Result<CursorId, LogError> {
        if !cursor::valid_name(name) {
            return Err(LogError::io(
                &self.layout.cursors.join(name),
                io::Error::new(io::ErrorKind::InvalidInput, "not a usable cursor name"),
            ));
        }
        let mut st = lock(&self.state);
        if let Some(i) = st.cursors.iter().position(|c| c.name == name) {
            if let Some(c) = st.cursors.get_mut(i) {
                c.registered = true;
            }
            return Ok(CursorId(i));
        }
        let pos = st.first();
        st.cursors.push(CursorState {
            name: name.to_owned(),
            pos,
            items_before: 0,
            registered: true,
            moving: Arc::new(Mutex::new(())),
        });
        Ok(CursorId(st.cursors.len() - 1))
    }

    /// Where cursor `id` stands: the first byte its reader has not delivered.
    pub fn position(&self, id: CursorId) -> Position {
        lock(&self.state)
            .cursors
            .get(id.0)
            .map_or(Position::ZERO, |c| c.pos)
    }

    /// Marks `batch` as delivered (or deliberately dropped) by cursor `id`: moves the cursor to
    /// its end, saves the cursor file, deletes what every reader has passed and reclaims a
    /// delivered newest segment. A batch the cursor is already past (its segment was evicted
    /// meanwhile) changes nothing.
    ///
    /// When the cursor file cannot be written (a full disk) the cursor still moves in memory
    /// and space is still freed; the error is returned, and after a restart the reader
    /// delivers again from its last saved cursor.
    pub fn ack(&self, id: CursorId, batch: &Batch) -> Result<(), LogError> {
        self.advance(id, batch.end, Some(batch))
    }

    /// Moves cursor `id` forward to `to`, as [`Log::ack`] does; the cursor's item count is kept
    /// only by `ack`.
    pub fn seek(&self, id: CursorId, to: Position) -> Result<(), LogError> {
        self.advance(id, to, None)
    }

    fn advance(&self, id: CursorId, to: Position, batch: Option<&Batch>) -> Result<(), LogError> {
        let Some((moving, name)) = lock(&self.state)
            .cursors
            .get(id.0)
            .map(|c| (Arc::clone(&c.moving), c.name.clone()))
        else {
            return Ok(());
        };
        let guard = lock(&moving);
        let moved = {
            let mut st = lock(&self.state);
            match st.cursors.get_mut(id.0) {
                Some(c) if to > c.pos => {
                    match batch {
                        Some(b) if b.end.segment == c.pos.segment => c.items_before += b.tail_items,
                        Some(b) => c.items_before = b.tail_items,
                        None if to.segment != c.pos.segment => c.items_before = 0,
                        None => {}
                    }
                    c.pos = to;
                    true
                }
                _ => false,
            }
        };
        let saved = if moved {
            cursor::save(&self.layout.cursors, &name, to, self.opts.sync_cursors)
        } else {
            Ok(())
        };
        drop(guard);
        let released = self.release(None);
        let reclaimed = self.reclaim();
        saved.and(released).and(reclaimed)
    }

    /// Deletes the segments every registered cursor has passed, oldest first, never the newest
    /// one; with `limit`, only those that end at or before it too. Nothing is deleted while no
    /// cursor is registered.
    pub fn release(&self, limit: Option<Position>) -> Result<(), LogError> {
        let doomed: Vec<u64> = {
            let mut st = lock(&self.state);
            let newest = st.segments.keys().next_back().copied();
            let mut doomed = Vec::new();
            for (&name, seg) in &st.segments {
                let done = Some(name) != newest
                    && st.delivered(name, seg.len)
                    && limit.is_none_or(|l| passed(l, name, seg.len));
                if !done {
                    break;
                }
                doomed.push(name);
            }
            for &name in &doomed {
                st.forget(name);
            }
            doomed
        };
        for name in doomed {
            let path = self.layout.segments.join(segment::file_name(name));
            match fs::remove_file(&path) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(LogError::io(&path, e)),
            }
        }
        Ok(())
    }
}
