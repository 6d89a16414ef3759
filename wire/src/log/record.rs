//! Record framing and the reader that walks the records of one segment file, skipping damage.
//!
//! Two framings exist (see the module documentation of [`crate::log`] for the bytes):
//! [`Framing::Tagged`], which every segment this code creates uses, and [`Framing::Plain`], the
//! collector queue's framing before the shared log, still read until such segments are delivered.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;

/// Magic at the start of every segment this code creates.
pub const SEGMENT_MAGIC: &[u8; 8] = b"SWLOG001";
/// Magic of the agent's spool segments before the shared log: the same framing, still read.
pub(crate) const LEGACY_SPOOL_MAGIC: &[u8; 8] = b"SWSPOOL1";
/// Bytes before the first record of a segment with a header.
pub const SEGMENT_HEADER_BYTES: u64 = SEGMENT_MAGIC.len() as u64;
/// Magic at the start of every record.
pub(crate) const RECORD_MAGIC: &[u8; 4] = b"SWR1";
/// Bytes of framing in front of each payload: magic, length and CRC.
pub const RECORD_HEADER_BYTES: u64 = 12;
/// Header bytes of a [`Framing::Plain`] record: length and CRC.
const PLAIN_HEADER_BYTES: u64 = 8;
/// Window read while searching for the next valid record after damage.
const RESYNC_CHUNK: usize = 64 << 10;

/// How the records of a segment are framed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Framing {
    /// `"SWR1"`, length (u32 LE), CRC32 of length and payload (u32 LE), payload.
    Tagged,
    /// Length (u32 LE), CRC32 of the payload (u32 LE), payload: the collector's queue before the
    /// shared log. Read only.
    Plain,
}

impl Framing {
    /// The framing a segment's first eight bytes announce, and where its records start.
    pub(crate) fn of_segment(head: &[u8; 8]) -> (Self, u64) {
        if head == SEGMENT_MAGIC || head == LEGACY_SPOOL_MAGIC {
            (Self::Tagged, SEGMENT_HEADER_BYTES)
        } else {
            // A queue segment from before the shared log has no header: records from byte 0.
            // Its first record cannot look like a magic: the length would be over 1 GiB.
            (Self::Plain, 0)
        }
    }

    pub(crate) fn header_len(self) -> u64 {
        match self {
            Self::Tagged => RECORD_HEADER_BYTES,
            Self::Plain => PLAIN_HEADER_BYTES,
        }
    }

    /// Length and CRC from a header, if it has the shape of one (magic, non-zero length).
    fn parse(self, h: &[u8]) -> Option<(u64, u32)> {
        let word = |i: usize| -> Option<[u8; 4]> { h.get(i..i + 4)?.try_into().ok() };
        let (len, crc) = match self {
            Self::Tagged => {
                if word(0)? != *RECORD_MAGIC {
                    return None;
                }
                (word(4)?, word(8)?)
            }
            Self::Plain => (word(0)?, word(4)?),
        };
        let len = u64::from(u32::from_le_bytes(len));
        (len > 0).then_some((len, u32::from_le_bytes(crc)))
    }

    fn crc(self, payload: &[u8]) -> u32 {
        match self {
            Self::Tagged => {
                let len = (payload.len() as u32).to_le_bytes();
                let mut h = crc32fast::Hasher::new();
                h.update(&len);
                h.update(payload);
                h.finalize()
            }
            Self::Plain => crc32fast::hash(payload),
        }
    }

    /// The first offset in `window` where a header of this framing may start.
    fn candidate(self, window: &[u8]) -> Option<usize> {
        match self {
            Self::Tagged => window
                .windows(RECORD_MAGIC.len())
                .position(|w| w == RECORD_MAGIC),
            // no magic to look for: every byte may start a record
            Self::Plain => (!window.is_empty()).then_some(0),
        }
    }
}

/// The header of a [`Framing::Tagged`] record holding `payload`.
pub(crate) fn tagged_header(payload: &[u8]) -> [u8; RECORD_HEADER_BYTES as usize] {
    let mut h = [0u8; RECORD_HEADER_BYTES as usize];
    h[..4].copy_from_slice(RECORD_MAGIC);
    h[4..8].copy_from_slice(&(payload.len() as u32).to_le_bytes());
    h[8..].copy_from_slice(&Framing::Tagged.crc(payload).to_le_bytes());
    h
}

/// What starts at an offset of a segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Item {
    /// A valid record from `start` to `end`; its payload was appended to the caller's buffer.
    Record { start: u64, end: u64 },
    /// Bytes from `start` to `end` hold no valid record; `end` is where the next valid record
    /// starts, or the end of the readable data.
    Damaged { start: u64, end: u64 },
}

/// Reads the records of one segment file up to `end`, by offset.
///
/// Each payload is read with one `pread` that also fetches the next record's header, so a run of
/// records costs one system call each.
pub(crate) struct Reader<'a> {
    file: &'a File,
    framing: Framing,
    end: u64,
    max_record: u64,
    /// Header bytes already read, and the offset they were read at.
    ahead: Option<(u64, [u8; RECORD_HEADER_BYTES as usize])>,
}

impl<'a> Reader<'a> {
    /// A reader of `file`'s records below `end` (the valid or durable end of the segment).
    pub(crate) fn new(file: &'a File, framing: Framing, end: u64, max_record: u64) -> Self {
        Self {
            file,
            framing,
            end,
            max_record,
            ahead: None,
        }
    }

    /// Length and CRC of the record whose header is at `at`, if the header is plausible: the
    /// right shape, a length the log takes, and a record that ends before `end`.
    pub(crate) fn header(&mut self, at: u64) -> io::Result<Option<(u64, u32)>> {
        let hl = self.framing.header_len();
        if at.saturating_add(hl) > self.end {
            return Ok(None);
        }
        let mut h = [0u8; RECORD_HEADER_BYTES as usize];
        let h = h.get_mut(..hl as usize).unwrap_or_default();
        match self.ahead {
            Some((off, bytes)) if off == at => {
                h.copy_from_slice(bytes.get(..hl as usize).unwrap_or_default())
            }
            _ => self.file.read_exact_at(h, at)?,
        }
        Ok(self
            .framing
            .parse(h)
            .filter(|&(len, _)| len <= self.max_record && at + hl + len <= self.end))
    }

    /// Appends the payload of the record at `at` (whose header gave `len` and `crc`) to `out`.
    /// False, with `out` as it was, when the CRC does not match.
    pub(crate) fn payload(
        &mut self,
        at: u64,
        len: u64,
        crc: u32,
        out: &mut Vec<u8>,
    ) -> io::Result<bool> {
        let hl = self.framing.header_len();
        let start = at + hl;
        let next = start + len;
        // fetch the next header along with this payload when there is one
        let extra = if next + hl <= self.end { hl } else { 0 };
        let mark = out.len();
        out.resize(mark + (len + extra) as usize, 0);
        let buf = out.get_mut(mark..).unwrap_or_default();
        if let Err(e) = self.file.read_exact_at(buf, start) {
            out.truncate(mark);
            return Err(e);
        }
        if extra > 0 {
            let mut h = [0u8; RECORD_HEADER_BYTES as usize];
            let tail = buf.get(len as usize..).unwrap_or_default();
            h.get_mut(..tail.len())
                .unwrap_or_default()
                .copy_from_slice(tail);
            self.ahead = Some((next, h));
        }
        out.truncate(mark + len as usize);
        let payload = out.get(mark..).unwrap_or_default();
        if self.framing.crc(payload) != crc {
            out.truncate(mark);
            return Ok(false);
        }
        Ok(true)
    }

    /// Appends the payload of the record at `at` to `out` and returns its end, if a valid
    /// record starts there.
    pub(crate) fn record(&mut self, at: u64, out: &mut Vec<u8>) -> io::Result<Option<u64>> {
        let Some((len, crc)) = self.header(at)? else {
            return Ok(None);
        };
        let end = at + self.framing.header_len() + len;
        Ok(self.payload(at, len, crc, out)?.then_some(end))
    }

    /// Where the next valid record after `at` starts, or `end`: the reader does not trust a
    /// damaged length, it looks for the next header whose length and CRC check out.
    pub(crate) fn resync(&mut self, at: u64, scratch: &mut Vec<u8>) -> io::Result<u64> {
        let hl = self.framing.header_len();
        let mut chunk = vec![0u8; RESYNC_CHUNK];
        let mut base = at + 1;
        while base + hl <= self.end {
            let n = (self.end - base).min(chunk.len() as u64) as usize;
            let window = chunk.get_mut(..n).unwrap_or_default();
            self.file.read_exact_at(window, base)?;
            let mut i = 0;
            while let Some(k) = self.framing.candidate(window.get(i..).unwrap_or_default()) {
                let c = i + k;
                let Some(h) = window.get(c..c + hl as usize) else {
                    break; // looked at again with the next window
                };
                let abs = base + c as u64;
                let plausible = self
                    .framing
                    .parse(h)
                    .filter(|&(len, _)| len <= self.max_record && abs + hl + len <= self.end);
                if let Some((len, crc)) = plausible {
                    scratch.clear();
                    let ok = self.payload(abs, len, crc, scratch)?;
                    scratch.clear();
                    if ok {
                        return Ok(abs);
                    }
                }
                i = c + 1;
            }
            if base + n as u64 >= self.end {
                break;
            }
            // keep the last header's worth of bytes: a header may straddle two windows
            base += (n as u64).saturating_sub(hl - 1).max(1);
        }
        Ok(self.end)
    }

    /// The record or damaged region at `at`, `None` at the end.
    pub(crate) fn next(
        &mut self,
        at: u64,
        out: &mut Vec<u8>,
        scratch: &mut Vec<u8>,
    ) -> io::Result<Option<Item>> {
        if at >= self.end {
            return Ok(None);
        }
        if let Some(end) = self.record(at, out)? {
            return Ok(Some(Item::Record { start: at, end }));
        }
        let end = self.resync(at, scratch)?;
        Ok(Some(Item::Damaged { start: at, end }))
    }
}

/// Applies `count` to the bytes of `[start, end)` of `file`, 64 KiB at a time: an estimate of
/// the items lost in a damaged region.
pub(crate) fn count_in(
    file: &File,
    start: u64,
    end: u64,
    count: fn(&[u8]) -> u64,
) -> io::Result<u64> {
    let mut chunk = vec![0u8; RESYNC_CHUNK];
    let (mut at, mut n) = (start, 0);
    while at < end {
        let len = (end - at).min(chunk.len() as u64) as usize;
        let window = chunk.get_mut(..len).unwrap_or_default();
        file.read_exact_at(window, at)?;
        n += count(window);
        at += len as u64;
    }
    Ok(n)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use std::io::Write;

    fn tagged(p: &[u8]) -> Vec<u8> {
        let mut v = tagged_header(p).to_vec();
        v.extend_from_slice(p);
        v
    }

    fn plain(p: &[u8]) -> Vec<u8> {
        let mut v = (p.len() as u32).to_le_bytes().to_vec();
        v.extend_from_slice(&crc32fast::hash(p).to_le_bytes());
        v.extend_from_slice(p);
        v
    }

    fn file_with(bytes: &[u8]) -> File {
        let mut f = tempfile::tempfile().unwrap();
        f.write_all(bytes).unwrap();
        f
    }

    /// Every item of `bytes` read with `framing`, payloads joined by `|`.
    fn walk(bytes: &[u8], framing: Framing) -> (Vec<Item>, String) {
        let f = file_with(bytes);
        let mut r = Reader::new(&f, framing, bytes.len() as u64, 1 << 20);
        let (mut out, mut scratch, mut items) = (Vec::new(), Vec::new(), Vec::new());
        let mut at = 0;
        while let Some(item) = r.next(at, &mut out, &mut scratch).unwrap() {
            at = match item {
                Item::Record { end, .. } | Item::Damaged { end, .. } => end,
            };
            if matches!(item, Item::Record { .. }) {
                out.push(b'|');
            }
            items.push(item);
        }
        (items, String::from_utf8(out).unwrap())
    }

    #[test]
    fn tagged_records_with_damage_between() {
        let (a, b, c) = (tagged(b"one"), tagged(b"two"), tagged(b"three"));
        let mut bytes = [a.clone(), b.clone(), c.clone()].concat();
        // a flipped payload byte in the middle record
        bytes[a.len() + 13] ^= 0x20;
        let (items, text) = walk(&bytes, Framing::Tagged);
        assert_eq!(text, "one|three|");
        let (a, b) = (a.len() as u64, b.len() as u64);
        assert_eq!(
            items,
            [
                Item::Record { start: 0, end: a },
                Item::Damaged {
                    start: a,
                    end: a + b
                },
                Item::Record {
                    start: a + b,
                    end: bytes.len() as u64
                },
            ]
        );
    }

    #[test]
    fn plain_records_with_damage_between() {
        let (a, b, c) = (plain(b"one\n"), plain(b"two\n"), plain(b"three\n"));
        let mut bytes = [a.clone(), b.clone(), c].concat();
        bytes[a.len() + 1] ^= 0x55; // the length of the middle record
        let (items, text) = walk(&bytes, Framing::Plain);
        assert_eq!(text, "one\n|three\n|");
        assert_eq!(items.len(), 3);
        assert_eq!(
            items[1],
            Item::Damaged {
                start: a.len() as u64,
                end: (a.len() + b.len()) as u64
            }
        );
    }

    #[test]
    fn a_cut_record_at_the_end_is_one_damaged_region() {
        let a = tagged(b"whole");
        let bytes = [a.clone(), tagged(b"cut short")[..10].to_vec()].concat();
        let (items, text) = walk(&bytes, Framing::Tagged);
        assert_eq!(text, "whole|");
        assert_eq!(
            items[1],
            Item::Damaged {
                start: a.len() as u64,
                end: bytes.len() as u64
            }
        );
        // zeros, as a filesystem leaves after a crash, are not records in either framing
        for framing in [Framing::Tagged, Framing::Plain] {
            let (items, _) = walk(&[0u8; 100], framing);
            assert_eq!(items, [Item::Damaged { start: 0, end: 100 }]);
        }
    }

    #[test]
    fn resync_finds_a_header_across_window_boundaries() {
        // garbage that puts the next record's magic across the first 64 KiB window's end
        let mut bytes = vec![b'x'; RESYNC_CHUNK - 2];
        let rec = tagged(b"after the garbage");
        bytes.extend_from_slice(&rec);
        let (items, text) = walk(&bytes, Framing::Tagged);
        assert_eq!(text, "after the garbage|");
        assert_eq!(
            items[0],
            Item::Damaged {
                start: 0,
                end: (RESYNC_CHUNK - 2) as u64
            }
        );
        let mut bytes = vec![0xffu8; RESYNC_CHUNK + 3];
        bytes.extend_from_slice(&plain(b"plain after\n"));
        let (_, text) = walk(&bytes, Framing::Plain);
        assert_eq!(text, "plain after\n|");
    }

    #[test]
    fn oversized_and_zero_lengths_are_not_headers() {
        let f = file_with(&[tagged(b"x"), vec![0u8; 64]].concat());
        let mut r = Reader::new(&f, Framing::Tagged, 77, 4);
        assert_eq!(r.header(0).unwrap(), Some((1, Framing::Tagged.crc(b"x"))));
        let big = tagged(b"12345");
        let f = file_with(&big);
        let mut r = Reader::new(&f, Framing::Tagged, big.len() as u64, 4);
        assert_eq!(r.header(0).unwrap(), None);
        assert_eq!(Framing::Plain.parse(&[0u8; 8]), None);
    }

    #[test]
    fn segment_heads() {
        assert_eq!(Framing::of_segment(b"SWLOG001"), (Framing::Tagged, 8));
        assert_eq!(Framing::of_segment(b"SWSPOOL1"), (Framing::Tagged, 8));
        let mut head = [0u8; 8];
        head.copy_from_slice(&plain(b"m v=1 1\n")[..8]);
        assert_eq!(Framing::of_segment(&head), (Framing::Plain, 0));
    }
}
