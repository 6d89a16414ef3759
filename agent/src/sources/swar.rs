//! Decimal counters and runs of spaces read eight bytes at a time (SWAR: SIMD within a
//! register), for the per-second parsers of files with many numbers a line (`/proc/diskstats`:
//! 20 numbers of 1–11 digits on each of ~1,000 rows on a disk server).
//!
//! A byte loop costs ~9 instructions a digit (load, test, multiply-add, bounds, loop); here a
//! word of eight bytes is loaded once, its leading digits found by a mask and `trailing_zeros`,
//! and up to eight digits turned into their value by three multiplications (the method of
//! simdjson and of Lemire's "parsing eight digits" posts). Reads never go past the slice: the
//! last seven bytes are loaded into a zero-padded word (zero is not a digit).
//!
//! Only plain decimal digits (`0`–`9`) count; a number of more than 19 digits is left to the
//! caller's general parser ([`number`] says `None`).

/// The same byte in all eight lanes.
const ONES: u64 = 0x0101_0101_0101_0101;

/// The eight bytes of `b` from `at`, little-endian (the byte at `at` is the lowest); past the
/// end of `b`, zero bytes.
#[inline(always)]
pub(crate) fn load(b: &[u8], at: usize) -> u64 {
    // `at + 8` wraps only for an `at` no slice reaches: then `get` says None as well.
    match b.get(at..at.wrapping_add(8)) {
        Some(&[b0, b1, b2, b3, b4, b5, b6, b7]) => {
            u64::from_le_bytes([b0, b1, b2, b3, b4, b5, b6, b7])
        }
        _ => load_short(b, at),
    }
}

/// [`load`] near the end of `b`: what is left, padded with zeros. Met once a line or a file
/// by the parsers of short files (a pressure file's last total, `io.stat`'s last counter): the
/// last eight bytes of `b` in one load, shifted so that the byte at `at` is the lowest (zeros
/// come in from the top); a loop only for a `b` shorter than eight bytes.
#[inline(never)]
fn load_short(b: &[u8], at: usize) -> u64 {
    if let Some(start) = b.len().checked_sub(8) {
        return match (b.get(start..), at.checked_sub(start)) {
            (Some(&[b0, b1, b2, b3, b4, b5, b6, b7]), Some(skip)) if skip < 8 => {
                u64::from_le_bytes([b0, b1, b2, b3, b4, b5, b6, b7]) >> (8 * skip)
            }
            _ => 0,
        };
    }
    let mut w = [0u8; 8];
    for (d, s) in w.iter_mut().zip(b.get(at..).unwrap_or_default()) {
        *d = *s;
    }
    u64::from_le_bytes(w)
}

/// How many of the eight bytes of `x` (from the lowest) are decimal digits before the first
/// byte that is not: 0 to 8.
#[inline(always)]
pub(crate) fn leading_digits(x: u64) -> u32 {
    // With `0` moved to zero (the xor), a byte is a digit when it is at most 9: then adding
    // 0x76 leaves its high bit clear, and any other byte has it set, either by the addition
    // (10–0x7f) or already (0x80–0xff, or-ed in). Only such a byte can carry into the next,
    // and what comes after the first non-digit does not matter. Four operations where the
    // test of both nibbles took seven: this runs for every counter of every parsed row.
    let t = x ^ (0x30 * ONES);
    let not_digit = (t.wrapping_add(0x76 * ONES) | t) & (0x80 * ONES);
    not_digit.trailing_zeros() / 8
}

/// The value of the first `k` (1 to 8) bytes of `x`, all digits, the first the most
/// significant.
#[inline(always)]
pub(crate) fn value(x: u64, k: u32) -> u64 {
    // The digits moved to the top bytes (those after them shifted out): leading zeros below.
    // `k` is 1 to 8 ([`leading_digits`], not 0); the shift wraps rather than panic on others,
    // whose value no caller uses.
    let v = (x & (0x0F * ONES)).wrapping_shl(8u32.wrapping_sub(k).wrapping_mul(8));
    // Pairs of digits into 16-bit lanes, pairs of those into 32-bit lanes, then the two halves.
    let v = (v.wrapping_mul(10 * 256 + 1) >> 8) & 0x00FF_00FF_00FF_00FF;
    let v = (v.wrapping_mul(100 * 65536 + 1) >> 16) & 0x0000_FFFF_0000_FFFF;
    v.wrapping_mul(10000 * (1 << 32) + 1) >> 32
}

/// Ten to the power of 0 to 8.
const POW10: [u64; 9] = [
    1,
    10,
    100,
    1_000,
    10_000,
    100_000,
    1_000_000,
    10_000_000,
    100_000_000,
];

/// The decimal number of 1 to 19 digits at `at` in `b` (19 digits always fit in a u64), and
/// where its digits end; `None` when there is no digit at `at` or more than 19 follow (which
/// the caller's general parser reads, and refuses when they overflow).
#[inline(always)]
pub(crate) fn number(b: &[u8], at: usize) -> Option<(u64, usize)> {
    let x = load(b, at);
    let k = leading_digits(x);
    if k == 0 {
        return None;
    }
    if k < 8 {
        // A lone digit (a third of `/proc/diskstats`' counters are a `0`) is its low nibble.
        let v = if k == 1 { x & 0x0F } else { value(x, k) };
        return Some((v, at + k as usize));
    }
    // Eight digits and maybe more: the next word holds up to eight more.
    let y = load(b, at + 8);
    let k = leading_digits(y);
    let high = value(x, 8);
    match k {
        0 => Some((high, at + 8)),
        8 => longer(
            b,
            at,
            high.wrapping_mul(100_000_000).wrapping_add(value(y, 8)),
        ),
        _ => Some((
            high.wrapping_mul(POW10.get(k as usize).copied().unwrap_or(1))
                .wrapping_add(value(y, k)),
            at + 8 + k as usize,
        )),
    }
}

/// [`number`] past its first 16 digits (worth `v`): up to three more.
#[cold]
#[inline(never)]
fn longer(b: &[u8], at: usize, v: u64) -> Option<(u64, usize)> {
    let z = load(b, at + 16);
    let k = leading_digits(z);
    if k > 3 {
        return None;
    }
    if k == 0 {
        return Some((v, at + 16));
    }
    let v = v
        .wrapping_mul(POW10.get(k as usize).copied().unwrap_or(1))
        .wrapping_add(value(z, k));
    Some((v, at + 16 + k as usize))
}

/// Where the run of spaces (0x20) from `at` in `b` ends (`at` when there is none).
#[inline(always)]
pub(crate) fn skip_spaces(b: &[u8], mut at: usize) -> usize {
    loop {
        // A space is a zero byte after the xor; the first other byte ends the run.
        let n = (load(b, at) ^ (0x20 * ONES)).trailing_zeros() / 8;
        at += n as usize;
        if n < 8 {
            return at;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The byte loop these stand for: digits from `at`, their value (wrapping) and end.
    fn by_bytes(b: &[u8], at: usize) -> (u64, usize) {
        let mut v = 0u64;
        let mut i = at;
        while let Some(d) = b.get(i).map(|c| c.wrapping_sub(b'0')).filter(|d| *d <= 9) {
            v = v.wrapping_mul(10).wrapping_add(u64::from(d));
            i += 1;
        }
        (v, i)
    }

    fn check(b: &[u8], at: usize) -> Result<(), TestCaseError> {
        let (v, end) = by_bytes(b, at);
        let digits = end - at;
        let want = (1..=19).contains(&digits).then_some((v, end));
        prop_assert_eq!(
            number(b, at),
            want,
            "{:?} at {}",
            String::from_utf8_lossy(b),
            at
        );
        let spaces = b
            .get(at..)
            .unwrap_or_default()
            .iter()
            .take_while(|c| **c == b' ')
            .count();
        prop_assert_eq!(skip_spaces(b, at), at + spaces);
        Ok(())
    }

    #[test]
    fn every_length_and_every_neighbour_of_a_digit() {
        // Every digit count 0..=18 at every offset of a word, ended by each byte that is
        // next to a digit in value (`/`, `:`), a space, the end, a NUL, UTF-8, and 0xff-like
        // bytes (as high as UTF-8 goes).
        for digits in 0..=26usize {
            for ends in ["", " ", "/", ":", "\0", "\n", "é", "\u{10ffff}", "x"] {
                for lead in 0..9usize {
                    let number: String = (0..digits)
                        .map(|i| char::from(b'1' + (i % 9) as u8))
                        .collect();
                    let text = format!("{}{number}{ends}0", " ".repeat(lead));
                    let b = text.as_bytes();
                    for at in 0..=b.len() + 1 {
                        check(b, at).expect("agrees with the byte loop");
                    }
                }
            }
        }
        assert_eq!(
            number(b"9999999999999999999", 0),
            Some((9_999_999_999_999_999_999, 19))
        );
        assert_eq!(number(b"99999999999999999999", 0), None);
        assert_eq!(number(b"000000000000000000000000", 0), None);
        assert_eq!(number(b"0000000000000000000 ", 0), Some((0, 19)));
        assert_eq!(number(b"", 0), None);
        assert_eq!(skip_spaces(b"", 3), 3);
    }

    /// Every byte value, after every count of digits, before any bytes (0xff ones carry when
    /// added to): the digits before the first other byte are counted, whatever follows it.
    #[test]
    fn leading_digits_stop_at_every_byte_that_is_not_one() {
        for digits in 0..8usize {
            for stop in 0..=255u8 {
                for after in [0x00u8, 0x30, 0x39, 0x8a, 0xff] {
                    let mut w = [after; 8];
                    for (i, d) in w.iter_mut().take(digits).enumerate() {
                        *d = b'0' + (i as u8 * 7) % 10;
                    }
                    w[digits] = stop;
                    let x = u64::from_le_bytes(w);
                    let want = if stop.is_ascii_digit() {
                        // The run goes on past the stop byte: as far as the bytes after it do.
                        digits
                            + 1
                            + w[digits + 1..]
                                .iter()
                                .take_while(|c| c.is_ascii_digit())
                                .count()
                    } else {
                        digits
                    };
                    assert_eq!(leading_digits(x) as usize, want, "{w:x?}");
                }
            }
        }
        assert_eq!(leading_digits(u64::from_le_bytes(*b"12345678")), 8);
    }

    /// Every place of every length, near the end above all: the bytes there, zeros past the end.
    #[test]
    fn a_word_is_the_bytes_at_its_place_and_zeros_past_the_end() {
        let all: Vec<u8> = (1..=40u8).map(|i| i.wrapping_mul(37) | 1).collect();
        for len in 0..=all.len() {
            let b = all.get(..len).unwrap_or_default();
            for at in (0..len + 10).chain([usize::MAX - 3, usize::MAX]) {
                let mut w = [0u8; 8];
                for (i, d) in w.iter_mut().enumerate() {
                    *d = at
                        .checked_add(i)
                        .and_then(|j| b.get(j))
                        .copied()
                        .unwrap_or(0);
                }
                assert_eq!(load(b, at), u64::from_le_bytes(w), "len {len} at {at}");
            }
        }
    }

    proptest! {
        #[test]
        fn numbers_and_spaces_agree_with_the_byte_loop(
            text in "([0-9]{0,20}[ /:a\\x00-\\x2f\\x3a-\\x7f]{0,3}|\\PC{0,3}){0,6}",
            at in 0usize..40,
        ) {
            check(text.as_bytes(), at)?;
        }
    }
}
