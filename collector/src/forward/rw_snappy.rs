//! A remote-write request written straight into snappy's block format, without writing the
//! protobuf first and searching it for repeats: the encoder knows what repeats. A line's ten
//! series carry the same label bytes ten times over, and a metric's `__name__` label comes
//! back in every label set that has it, so those bytes are written as snappy copies of where
//! they were written before in the request, and everything else (series headers, samples, a
//! label set's or metric's first bytes in the request) as literals. Snappy's compressor
//! (`snap`) spent about 3,300 instructions a line of ten samples finding those repeats again
//! by hashing every byte, after the protobuf had been written out (another 3,800).
//!
//! The format (github.com/google/snappy, `format_description.txt`): the uncompressed length as
//! a varint, then elements: a literal (tag `00`, its length in the tag's upper six bits below
//! 60, else in the 1–4 bytes that follow) or a copy of 1–64 bytes from an offset back in the
//! output (tag `10` with a 2-byte offset, `11` with a 4-byte one). The compressor of the
//! reference implementation only makes offsets within its 64 KiB block; its decoder, Go's
//! (Prometheus, VictoriaMetrics) and `snap`'s take any offset within the output so far, which
//! a copy of a label written further back uses. Tests: every request of the encoder's tests
//! decompressed by `snap` is the protobuf, and the receivers' tests decode it for real.

/// Where a request's bytes go: the protobuf itself ([`Vec<u8>`]) or [`Snappy`].
pub(super) trait Out {
    /// Bytes written so far, uncompressed.
    fn pos(&self) -> u64;
    /// Bytes not written before (as far as the writer knows).
    fn put(&mut self, b: &[u8]);
    /// The first `n` bytes of `b`, not written before: the array copied whole (a copy of a
    /// size known when compiled, no call) and cut back to `n`.
    fn put_first<const N: usize>(&mut self, b: &[u8; N], n: usize);
    /// Bytes written before, the same, at uncompressed position `at` when `Some`.
    fn again(&mut self, b: &[u8], at: Option<u64>);
}

impl Out for Vec<u8> {
    fn pos(&self) -> u64 {
        self.len() as u64
    }

    fn put(&mut self, b: &[u8]) {
        self.extend_from_slice(b);
    }

    fn put_first<const N: usize>(&mut self, b: &[u8; N], n: usize) {
        self.extend_from_slice(b.get(..n).unwrap_or(b));
    }

    fn again(&mut self, b: &[u8], _at: Option<u64>) {
        self.extend_from_slice(b);
    }
}

/// Room left before the elements for the uncompressed length (a varint of a `u32`).
const HEAD: usize = 5;

/// Copies shorter than this are written as literals (a copy costs three bytes).
const MIN_COPY: usize = 4;

/// A literal is written in place after a 1-byte tag (a length of up to 65,536, moved up by two
/// bytes for a 2-byte length when over 60); one that would grow past this is ended first.
const MAX_LITERAL: usize = 1 << 16;

/// Snappy's block format, written element by element, its buffer kept from one request to the
/// next.
#[derive(Debug, Default)]
pub(super) struct Snappy {
    out: Vec<u8>,
    /// where the literal being written starts (its 1-byte tag), if one is
    lit: Option<usize>,
    pos: u64,
}

/// The request is over the format's 4 GiB.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct TooBig(pub u64);

impl Snappy {
    /// Starts a request.
    pub(super) fn start(&mut self) {
        self.out.clear();
        self.out.resize(HEAD, 0);
        self.lit = None;
        self.pos = 0;
    }

    /// Ends the request: the block, its uncompressed length first.
    pub(super) fn finish(&mut self) -> Result<&[u8], TooBig> {
        let at = self.seal()?;
        Ok(&self.out[at..])
    }

    /// Ends the request and hands over its buffer, the block starting at the position
    /// returned; `next` is the buffer the next request is written into.
    pub(super) fn finish_into(&mut self, next: Vec<u8>) -> Result<(Vec<u8>, usize), TooBig> {
        let at = self.seal()?;
        Ok((std::mem::replace(&mut self.out, next), at))
    }

    /// Ends the last literal and writes the uncompressed length before the elements: where
    /// the block starts in the buffer.
    fn seal(&mut self) -> Result<usize, TooBig> {
        self.end_literal();
        let len = u32::try_from(self.pos).map_err(|_| TooBig(self.pos))?;
        let mut v = [0u8; HEAD];
        let mut n = 0;
        let mut x = len;
        while x >= 0x80 {
            v[n] = (x as u8) | 0x80;
            x >>= 7;
            n += 1;
        }
        v[n] = x as u8;
        n += 1;
        let at = HEAD - n;
        self.out[at..HEAD].copy_from_slice(&v[..n]);
        Ok(at)
    }

    /// Writes the literal's tag: one byte for up to 60 bytes, else a byte and a 2-byte length
    /// (the bytes moved up by two: only a literal over 60 bytes, a label set's or metric's
    /// first in the request, pays the move).
    #[inline]
    fn end_literal(&mut self) {
        let Some(at) = self.lit.take() else {
            return;
        };
        let n = self.out.len() - at - 1;
        match self.out.get_mut(at) {
            Some(tag) if (1..=60).contains(&n) => *tag = ((n - 1) as u8) << 2,
            _ => self.end_long_literal(at, n),
        }
    }

    /// [`Snappy::end_literal`] of an empty literal or one over 60 bytes.
    #[cold]
    fn end_long_literal(&mut self, at: usize, n: usize) {
        if n == 0 {
            self.out.truncate(at);
        } else {
            let m = ((n - 1) as u16).to_le_bytes();
            self.out.extend_from_slice(&[0, 0]);
            self.out.copy_within(at + 1..at + 1 + n, at + 3);
            self.out[at] = 61 << 2;
            self.out[at + 1] = m[0];
            self.out[at + 2] = m[1];
        }
    }

    /// Room in a literal for `n` more bytes: the open one's, or a new one (opened) when none
    /// is; false when the open one is too full.
    #[inline]
    fn room_for(&mut self, n: usize) -> bool {
        match self.lit {
            Some(at) => self.out.len() - at - 1 + n <= MAX_LITERAL,
            None => {
                self.lit = Some(self.out.len());
                self.out.push(0);
                n <= MAX_LITERAL
            }
        }
    }

    /// [`Out::put`] past a literal's [`MAX_LITERAL`] bytes: one literal after another.
    #[cold]
    fn put_new(&mut self, mut b: &[u8]) {
        loop {
            let at = match self.lit {
                Some(at) => at,
                None => {
                    let at = self.out.len();
                    self.out.push(0);
                    self.lit = Some(at);
                    at
                }
            };
            let room = MAX_LITERAL - (self.out.len() - at - 1);
            if b.len() <= room {
                self.out.extend_from_slice(b);
                return;
            }
            self.out.extend_from_slice(&b[..room]);
            b = &b[room..];
            self.end_literal();
        }
    }
}

impl Out for Snappy {
    #[inline]
    fn pos(&self) -> u64 {
        self.pos
    }

    #[inline]
    fn put(&mut self, b: &[u8]) {
        if b.is_empty() {
            return;
        }
        self.pos += b.len() as u64;
        if self.room_for(b.len()) {
            self.out.extend_from_slice(b);
        } else {
            self.put_new(b);
        }
    }

    #[inline]
    fn put_first<const N: usize>(&mut self, b: &[u8; N], n: usize) {
        let n = n.min(N);
        if n == 0 {
            return;
        }
        if !self.room_for(N) {
            return self.put(&b[..n]);
        }
        self.pos += n as u64;
        self.out.extend_from_slice(b);
        self.out.truncate(self.out.len() - (N - n));
    }

    #[inline(always)]
    fn again(&mut self, b: &[u8], at: Option<u64>) {
        // the common copy: from less than 64 KiB back, in elements of 64 bytes and the rest
        if let Some(at) = at {
            let offset = self.pos.wrapping_sub(at);
            if b.len() >= MIN_COPY && at < self.pos && offset <= 0xffff {
                self.end_literal();
                self.pos += b.len() as u64;
                let o = (offset as u16).to_le_bytes();
                let mut left = b.len();
                while left > 64 {
                    self.out.extend_from_slice(&[(63 << 2) | 0b10, o[0], o[1]]);
                    left -= 64;
                }
                self.out
                    .extend_from_slice(&[(((left - 1) as u8) << 2) | 0b10, o[0], o[1]]);
                return;
            }
        }
        self.again_long(b, at);
    }
}

impl Snappy {
    /// [`Out::again`] of more than 64 bytes or from further than 64 KiB back, or a literal.
    fn again_long(&mut self, b: &[u8], at: Option<u64>) {
        let offset = match at {
            Some(at) if b.len() >= MIN_COPY && at < self.pos => self.pos - at,
            _ => return self.put(b),
        };
        let Ok(offset) = u32::try_from(offset) else {
            return self.put(b);
        };
        self.end_literal();
        self.pos += b.len() as u64;
        // each piece has the same offset: source and destination move on together
        let mut left = b.len();
        while left > 0 {
            let n = left.min(64);
            let tag = ((n - 1) as u8) << 2;
            match u16::try_from(offset) {
                Ok(o) => {
                    let o = o.to_le_bytes();
                    self.out.extend_from_slice(&[tag | 0b10, o[0], o[1]]);
                }
                Err(_) => {
                    let o = offset.to_le_bytes();
                    self.out
                        .extend_from_slice(&[tag | 0b11, o[0], o[1], o[2], o[3]]);
                }
            }
            left -= n;
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// Literals of every length class, copies near and far (past 64 KiB, past 64 bytes),
    /// short repeats left literal: `snap`'s decoder gives back exactly what was written.
    #[test]
    fn what_is_written_decompresses_to_the_bytes_given() {
        let mut s = Snappy::default();
        let mut want: Vec<u8> = Vec::new();
        let mut rng = fastrand::Rng::with_seed(3);
        for round in 0..4 {
            s.start();
            want.clear();
            let mut marks: Vec<(u64, Vec<u8>)> = Vec::new();
            for i in 0..2_000 {
                let at = s.pos();
                let len = match i % 7 {
                    0 => rng.usize(1..60),
                    1 => rng.usize(60..300),
                    2 if round == 3 => rng.usize(70_000..80_000),
                    _ => rng.usize(1..30),
                };
                if i % 3 == 0 && !marks.is_empty() {
                    let (from, bytes) = marks[rng.usize(..marks.len())].clone();
                    s.again(&bytes, Some(from));
                    want.extend_from_slice(&bytes);
                    marks.push((at, bytes));
                } else if len <= 22 && i % 2 == 0 {
                    // as a series' head or sample is written
                    let mut a = [0u8; 22];
                    rng.fill(&mut a);
                    s.put_first(&a, len);
                    want.extend_from_slice(&a[..len]);
                    marks.push((at, a[..len].to_vec()));
                } else {
                    let bytes: Vec<u8> = (0..len).map(|_| rng.u8(..)).collect();
                    s.put(&bytes);
                    want.extend_from_slice(&bytes);
                    marks.push((at, bytes));
                }
                assert_eq!(s.pos(), want.len() as u64);
            }
            let block = s.finish().unwrap().to_vec();
            assert_eq!(snap::raw::decompress_len(&block).unwrap(), want.len());
            assert_eq!(
                snap::raw::Decoder::new().decompress_vec(&block).unwrap(),
                want
            );
        }
        // an empty request
        s.start();
        assert_eq!(s.finish().unwrap(), &[0]);
    }
}
