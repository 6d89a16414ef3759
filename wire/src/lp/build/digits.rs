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

/// Writes the digits of `v` into `f` from `at`; returns where they end. The digits are counted
/// first and written from the right, two at a time ([`push_u64`]'s, in place).
fn u64_at<const N: usize>(f: &mut [u8; N], at: usize, mut v: u64) -> usize {
    let end = at + v.checked_ilog10().map_or(1, |l| l as usize + 1);
    let mut i = end;
    while v >= 10 {
        let [a, b] = pair(v);
        v /= 100;
        i -= 2;
        if let Some(d) = f.get_mut(i..i + 2) {
            d.copy_from_slice(&[a, b]);
        }
    }
    if i > at {
        if let Some(d) = f.get_mut(at) {
            *d = b'0' + v as u8;
        }
    }
    end
}

/// An integer field's value (`-`, digits, `i`) into `f` from `at`; returns where it ends.
pub(super) fn i64_at<const N: usize>(f: &mut [u8; N], mut at: usize, v: i64) -> usize {
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
pub(super) fn milli_at<const N: usize>(f: &mut [u8; N], mut at: usize, m: i64) -> usize {
    if m < 0 {
        if let Some(d) = f.get_mut(at) {
            *d = b'-';
        }
        at += 1;
    }
    let m = m.unsigned_abs();
    let end = u64_at(f, at, m / 1000);
    let frac = m % 1000;
    if frac == 0 {
        return end;
    }
    let [a, b] = pair(frac / 10);
    let c = b'0' + (frac % 10) as u8;
    if let Some(d) = f.get_mut(end..end + 4) {
        d.copy_from_slice(&[b'.', a, b, c]);
    }
    end + if c != b'0' {
        4
    } else if b != b'0' {
        3
    } else {
        2
    }
}

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
