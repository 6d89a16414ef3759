//! Numbers written as line-protocol text: integers two digits at a time, and a float that is
//! a whole number of thousandths from its integer thousandths (every other float through
//! `Display`), into a growing buffer or a field's fixed buffer — the same text `Display` prints.

use std::io::Write as _;

/// Two decimal digits of every number below 100, `"00"` to `"99"`.
const DIGIT_PAIRS: &[u8; 200] = b"\
0001020304050607080910111213141516171819\
2021222324252627282930313233343536373839\
4041424344454647484950515253545556575859\
6061626364656667686970717273747576777879\
8081828384858687888990919293949596979899";

/// The two digits of `n` (below 100).
fn pair(n: u64) -> [u8; 2] {
    let i = (n % 100) as usize * 2;
    match DIGIT_PAIRS.get(i..i + 2) {
        Some(&[a, b]) => [a, b],
        _ => [b'0', b'0'],
    }
}

/// Appends the decimal digits of `v`, two at a time from a table (one division by 100 for two
/// digits): the digit-by-digit loop was ~45 instructions a number, a fifth of a field's cost in
/// the per-job lines. The same bytes as `Display` (a property test compares them).
pub(super) fn push_u64(buf: &mut Vec<u8>, mut v: u64) {
    let mut digits = [0u8; 20];
    let mut i = digits.len();
    while v >= 100 {
        let [a, b] = pair(v);
        v /= 100;
        i -= 2;
        if let Some(d) = digits.get_mut(i..i + 2) {
            d.copy_from_slice(&[a, b]);
        }
    }
    if v >= 10 {
        let [a, b] = pair(v);
        i -= 2;
        if let Some(d) = digits.get_mut(i..i + 2) {
            d.copy_from_slice(&[a, b]);
        }
    } else {
        i -= 1;
        if let Some(d) = digits.get_mut(i) {
            *d = b'0' + v as u8;
        }
    }
    buf.extend_from_slice(digits.get(i..).unwrap_or_default());
}

pub(super) fn push_i64(buf: &mut Vec<u8>, v: i64) {
    if v < 0 {
        buf.push(b'-');
    }
    push_u64(buf, v.unsigned_abs());
}

/// The eight decimal digits of `n` (below 10^8), zeros in front, as the numbers 0 to 9 in the
/// bytes of a word, the most significant digit in the lowest byte (first in memory): two groups
/// of four split in two pairs, then in digits, each step one multiplication for every group at
/// once (D. Lemire, "Converting integers to fixed-digit representations quickly", 2021).
#[inline]
fn eight_digits(n: u64) -> u64 {
    let merged = (n / 10_000) | ((n % 10_000) << 32);
    // x / 100 for x below 10^4, in each 32-bit half.
    let top = ((merged * 10_486) >> 20) & ((0x7f << 32) | 0x7f);
    let bottom = merged - 100 * top;
    let hundreds = (bottom << 16) + top;
    // x / 10 for x below 100, in each 16-bit quarter.
    let mut tens = (hundreds * 103) >> 10;
    tens &= (0xf << 48) | (0xf << 32) | (0xf << 16) | 0xf;
    tens + ((hundreds - 10 * tens) << 8)
}

/// Writes `n` (below 10^8) into `f` from `at` without its zeros in front (`0` for 0): eight
/// bytes stored at once, those past the last digit left for what follows to overwrite.
/// Returns where the digits end.
#[inline]
fn trimmed_at<const N: usize>(f: &mut [u8; N], at: usize, n: u64) -> usize {
    let d = eight_digits(n);
    // The digits' zeros in front are the word's low zero bytes; one digit at least.
    let zeros = ((d.trailing_zeros() / 8) as usize).min(7);
    let ascii = (d + 0x3030_3030_3030_3030) >> (zeros * 8);
    if let Some(w) = f.get_mut(at..at + 8) {
        w.copy_from_slice(&ascii.to_le_bytes());
    }
    at + 8 - zeros
}

/// Writes `n` (below 10^8) into `f` from `at` as eight digits, zeros in front.
#[inline]
fn eight_at<const N: usize>(f: &mut [u8; N], at: usize, n: u64) -> usize {
    if let Some(w) = f.get_mut(at..at + 8) {
        w.copy_from_slice(&(eight_digits(n) + 0x3030_3030_3030_3030).to_le_bytes());
    }
    at + 8
}

/// Writes the digits of `v` into `f` from `at`; returns where they end. Eight digits at a
/// time ([`eight_digits`]): the number of digits is not counted first, the zeros in front are
/// found in the word. `f` must hold 8 bytes past the last digit's place or `at + 8`, whichever
/// is further.
#[inline(always)]
fn u64_at<const N: usize>(f: &mut [u8; N], at: usize, v: u64) -> usize {
    if let Some(&digits) = SMALL.get(v as usize).filter(|_| v < 1000) {
        // Below 1000 (most of the agent's percentages, seconds and counts): one load.
        if let Some(w) = f.get_mut(at..at + 4) {
            w.copy_from_slice(&digits.to_le_bytes());
        }
        at + (digits >> 24) as usize
    } else if v < 1_000_000 {
        // Below a million: the thousands from the same table, then three digits, zeros in
        // front, from the decimals' table (its word past the `.`).
        let (high, low) = (v / 1000, v % 1000);
        let digits = SMALL.get(high as usize).copied().unwrap_or_default();
        let end = at + (digits >> 24) as usize;
        let three = DECIMALS.get(low as usize).copied().unwrap_or_default() >> 8;
        if let Some(w) = f.get_mut(at..at + 4) {
            w.copy_from_slice(&digits.to_le_bytes());
        }
        if let Some(w) = f.get_mut(end..end + 4) {
            w.copy_from_slice(&(three as u32).to_le_bytes());
        }
        end + 3
    } else if v < E8 {
        trimmed_at(f, at, v)
    } else {
        long_u64_at(f, at, v)
    }
}

/// The digits of each number below 1000 in a word's low three bytes (the first digit lowest)
/// and their count in its high byte, which is written too and left for what follows to
/// overwrite.
const SMALL: [u32; 1000] = {
    let mut t = [0u32; 1000];
    let mut i = 0;
    while i < 1000 {
        let d = [(i / 100) as u32, (i / 10 % 10) as u32, (i % 10) as u32];
        let len: u32 = if i >= 100 {
            3
        } else if i >= 10 {
            2
        } else {
            1
        };
        let mut word = len << 24;
        let mut k = 0;
        while k < len {
            word |= (b'0' as u32 + d[(3 - len + k) as usize]) << (8 * k);
            k += 1;
        }
        t[i] = word;
        i += 1;
    }
    t
};

const E8: u64 = 100_000_000;

/// [`u64_at`] of 10^8 and beyond, out of line: most values the agent writes are shorter.
#[inline(never)]
fn long_u64_at<const N: usize>(f: &mut [u8; N], at: usize, v: u64) -> usize {
    if v < E8 * E8 {
        let end = trimmed_at(f, at, v / E8);
        eight_at(f, end, v % E8)
    } else {
        let end = trimmed_at(f, at, v / (E8 * E8));
        let end = eight_at(f, end, v / E8 % E8);
        eight_at(f, end, v % E8)
    }
}

/// An integer field's value (`-`, digits, `i`) into `f` from `at`; returns where it ends.
#[inline(always)]
pub(super) fn i64_at<const N: usize>(f: &mut [u8; N], mut at: usize, v: i64) -> usize {
    debug_assert!(at + 30 <= N, "no room for an integer at {at} of {N}");
    if v < 0 {
        if let Some(d) = f.get_mut(at) {
            *d = b'-';
        }
        at += 1;
    }
    let end = u64_at(f, at, v.unsigned_abs());
    if let Some(d) = f.get_mut(end) {
        *d = b'i';
    }
    end + 1
}

/// A float of `m` thousandths ([`thousandths`]) into `f` from `at`, as [`push_f64`] writes it;
/// returns where it ends.
#[inline(always)]
pub(super) fn milli_at<const N: usize>(f: &mut [u8; N], mut at: usize, m: i64) -> usize {
    debug_assert!(at + 30 <= N, "no room for a float at {at} of {N}");
    if m < 0 {
        if let Some(d) = f.get_mut(at) {
            *d = b'-';
        }
        at += 1;
    }
    let m = m.unsigned_abs();
    let end = u64_at(f, at, m / 1000);
    let decimals = DECIMALS
        .get((m % 1000) as usize)
        .copied()
        .unwrap_or_default();
    if let Some(w) = f.get_mut(end..end + 4) {
        w.copy_from_slice(&(decimals as u32).to_le_bytes());
    }
    end + (decimals >> 32) as usize
}

/// For each number of thousandths below 1000, `.` and its three digits in a word's low four
/// bytes and, in its high half, how many of them are written: the trailing zeros are left out,
/// as `Display` does, and 0 writes nothing. One load where the digits' arithmetic and the
/// trailing zeros' count were ~25 instructions a value.
const DECIMALS: [u64; 1000] = {
    let mut t = [0u64; 1000];
    let mut i = 0;
    while i < 1000 {
        let (a, b, c) = (i as u64 / 100, i as u64 / 10 % 10, i as u64 % 10);
        let len: u64 = if i == 0 {
            0
        } else if c != 0 {
            4
        } else if b != 0 {
            3
        } else {
            2
        };
        t[i] = b'.' as u64
            | ((b'0' as u64 + a) << 8)
            | ((b'0' as u64 + b) << 16)
            | ((b'0' as u64 + c) << 24)
            | (len << 32);
        i += 1;
    }
    t
};

/// Appends a float exactly as `Display` would. The agent's rates are rounded to 3 decimals, and
/// such a value is printed from its integer thousandths — ten times cheaper than the general
/// shortest-representation algorithm, which still handles every other value. (Below 1e12 the
/// spacing of doubles is far finer than 0.001, so the 3-decimal form is the shortest one that
/// reads back to the same double, which is what `Display` prints.)
pub(super) fn push_f64(buf: &mut Vec<u8>, f: f64) {
    if let Some(m) = thousandths(f) {
        if m < 0 {
            buf.push(b'-');
        }
        let m = m.unsigned_abs();
        push_u64(buf, m / 1000);
        let frac = m % 1000;
        if frac != 0 {
            // Three digits, zeros in front; the trailing zeros are left out, as `Display` does.
            let [a, b] = pair(frac / 10);
            let c = b'0' + (frac % 10) as u8;
            let d = [b'.', a, b, c];
            let len = if c != b'0' {
                4
            } else if b != b'0' {
                3
            } else {
                2
            };
            buf.extend_from_slice(d.get(..len).unwrap_or_default());
        }
    } else {
        let _ = write!(buf, "{f}");
    }
}

/// `f` as a whole number of thousandths when it is exactly that (below 1e12 in magnitude, not
/// -0): `(f * 1000).round()` when that over 1000 is `f` again. The rounding is done on the
/// integer part (exact below 2^53), without `f64::round`, which is a library call on the
/// baseline x86-64 target (no SSE4.1 `roundsd`) and was a tenth of a field's cost.
pub(super) fn thousandths(f: f64) -> Option<i64> {
    // NaN is not below 1e12 either.
    if f.abs().partial_cmp(&1e12) != Some(std::cmp::Ordering::Less)
        || (f == 0.0 && f.is_sign_negative())
    {
        return None;
    }
    let t = f * 1000.0;
    // |t| < 1e15 < 2^53: the cast truncates exactly, and `t - whole` is exact.
    let whole = t as i64;
    let rest = t - whole as f64;
    let m = if rest >= 0.5 {
        whole + 1
    } else if rest <= -0.5 {
        whole - 1
    } else {
        whole
    };
    (m as f64 / 1000.0 == f).then_some(m)
}

/// `(v * 1000).round()` when the float it makes, `(v * 1000).round() / 1000` (a value rounded to
/// three decimals), is one [`thousandths`] gives back as this integer: below 1e12 in magnitude
/// and not -0 (`None` for NaN, the infinities, those and -0). One rounding instead of two for a
/// value rounded and then written: `(v * 1000).round() / 1000 * 1000` rounds back to the same
/// integer below 1e15 (the division and the product each err by half an ulp, together less
/// than a quarter at 1e15), so the float's thousandths are this integer, and
/// [`milli_at`] of it writes what [`push_f64`] writes of the float (a property test compares
/// them).
pub(super) fn rounded_thousandths(v: f64) -> Option<i64> {
    let t = v * 1000.0;
    // Below 1e15 - 1 the rounded value is at most 999_999_999_999_999 thousandths, below 1e12
    // as a float; NaN fails this too.
    if t.abs().partial_cmp(&999_999_999_999_999.0) != Some(std::cmp::Ordering::Less) {
        return None;
    }
    // |t| < 2^53: the cast truncates exactly, and `t - whole` is exact; halves away from zero,
    // as `f64::round`.
    let whole = t as i64;
    let rest = t - whole as f64;
    let m = whole + i64::from(rest >= 0.5) - i64::from(rest <= -0.5);
    // `round` keeps the sign of a zero: -0.0001 rounds to -0, which is written `-0`.
    if m == 0 && t.is_sign_negative() {
        return None;
    }
    Some(m)
}

/// Appends the first `len` bytes of `f`: the whole array is copied (a copy of a size known when
/// compiled, made without a call) and the rest cut off again — cheaper than a copy of `len`
/// bytes, which is a call to `memcpy`.
pub(super) fn append_prefix<const N: usize>(buf: &mut Vec<u8>, f: &[u8; N], len: usize) {
    let old = buf.len();
    buf.extend_from_slice(f);
    buf.truncate(old + len.min(N));
}

pub(super) fn saturate(u: u64) -> i64 {
    i64::try_from(u).unwrap_or(i64::MAX)
}
