//! `io.stat` as `blkcg_print_one_stat()` prints it, read in one pass: [`super::counters_into`]'s
//! first try.

use super::super::super::swar;
use super::IoCounters;

/// [`super::counters_into`]'s first try: every line as `blkcg_print_one_stat()` prints it and nothing
/// else — `MAJ:MIN`, ` rbytes= wbytes= rios= wios=` and (5.0+) ` dbytes= dios=`, each with up
/// to 19 digits, then the newline (or the file's end) — read by one pass that matches each key
/// with its space where the format puts it (one load and a compare of eight bytes) and each
/// number eight digits at a time (`sources::swar`): no search for the line's end. `false` for
/// anything else (the controllers' keys, another spacing, 20 digits), `out` then partly
/// written; what it accepts is ASCII and reads as the text parser reads it.
pub(super) fn shown_into(b: &[u8], out: &mut Vec<IoCounters>) -> bool {
    let mut at = 0;
    while at < b.len() {
        let Some((c, next)) = shown_line(b, at) else {
            return false;
        };
        out.push(c);
        at = next;
    }
    true
}

/// One line of [`shown_into`] from `at`: its counters and where the next line starts.
#[inline(always)]
fn shown_line(b: &[u8], at: usize) -> Option<(IoCounters, usize)> {
    let (major, at) = swar::number(b, at)?;
    (b.get(at) == Some(&b':')).then_some(())?;
    let (minor, at) = swar::number(b, at + 1)?;
    let mut c = IoCounters {
        major: u32::try_from(major).ok()?,
        minor: u32::try_from(minor).ok()?,
        ..IoCounters::default()
    };
    let (rbytes, at) = keyed(b, at, b" rbytes=")?;
    let (wbytes, at) = keyed(b, at, b" wbytes=")?;
    let (rios, at) = keyed(b, at, b" rios=")?;
    let (wios, at) = keyed(b, at, b" wios=")?;
    let at = match b.get(at) {
        None => return Some((counted(c, [rbytes, wbytes, rios, wios, 0, 0], 0b1111), at)),
        Some(b'\n') => {
            c = counted(c, [rbytes, wbytes, rios, wios, 0, 0], 0b1111);
            return Some((c, at + 1));
        }
        Some(_) => at,
    };
    let (dbytes, at) = keyed(b, at, b" dbytes=")?;
    let (dios, at) = keyed(b, at, b" dios=")?;
    c = counted(c, [rbytes, wbytes, rios, wios, dbytes, dios], 0b11_1111);
    match b.get(at) {
        None => Some((c, at)),
        Some(b'\n') => Some((c, at + 1)),
        Some(_) => None,
    }
}

#[inline(always)]
fn counted(mut c: IoCounters, values: [u64; 6], present: u8) -> IoCounters {
    c.values = values;
    c.present = present;
    c
}

/// `key` (2 to 8 bytes: a space, the name and `=`) at `at`, then its number: the number and
/// where its digits end. The key is one masked compare of eight bytes (past the end of `b`,
/// zero bytes, which match none of the key's).
#[inline(always)]
fn keyed<const N: usize>(b: &[u8], at: usize, key: &[u8; N]) -> Option<(u64, usize)> {
    let mut want = [0u8; 8];
    for (w, k) in want.iter_mut().zip(key) {
        *w = *k;
    }
    let mask = u64::MAX >> (64 - 8 * N.clamp(1, 8));
    (swar::load(b, at) & mask == u64::from_le_bytes(want)).then_some(())?;
    swar::number(b, at + N)
}

#[cfg(test)]
mod tests {
    use super::super::{parse, IoCounters};
    use super::shown_into;
    use proptest::prelude::*;

    /// The counters the text parser reads, and its errors' count.
    fn counters_of_text(b: &[u8]) -> (Vec<IoCounters>, usize) {
        let rows = parse(std::str::from_utf8(b).unwrap_or("\u{fffd}"));
        (
            rows.rows.iter().map(IoCounters::from).collect(),
            rows.errors.len(),
        )
    }

    proptest! {
        /// The kernel's lines, any counters of up to 19 digits, with or without the discards,
        /// the last newline or not: read by the pass over `blkcg_print_one_stat()`'s layout,
        /// as the text parser reads them; whatever that pass accepts of near misses, too.
        #[test]
        fn the_shown_layout_is_read_as_the_text(
            rows in proptest::collection::vec(
                (0u32..4096, 0u32..1_048_576, proptest::collection::vec(0u64..10_000_000_000_000_000_000, 6), any::<bool>()),
                1..5,
            ),
            last_newline in any::<bool>(),
            near in proptest::collection::vec(
                ("[0-9]{0,3}:[0-9]{0,3}|8:0", proptest::collection::vec(("rbytes|wbytes|rios|wios|dbytes|dios|x", "[0-9]{0,21}"), 0..7), "( |  )", "|\n|\n\n| \n"),
                0..4,
            ),
        ) {
            let mut text = String::new();
            for (major, minor, v, discards) in &rows {
                text.push_str(&format!("{major}:{minor} rbytes={} wbytes={} rios={} wios={}", v[0], v[1], v[2], v[3]));
                if *discards {
                    text.push_str(&format!(" dbytes={} dios={}", v[4], v[5]));
                }
                text.push('\n');
            }
            if !last_newline {
                text.pop();
            }
            let mut out = Vec::new();
            prop_assert!(shown_into(text.as_bytes(), &mut out), "{}", text);
            prop_assert_eq!((out, 0), counters_of_text(text.as_bytes()));
            let near: String = near
                .iter()
                .map(|(dev, pairs, sep, end)| {
                    let l = pairs.iter().fold(dev.clone(), |acc, (k, v)| format!("{acc}{sep}{k}={v}"));
                    format!("{l}{end}")
                })
                .collect();
            let mut out = Vec::new();
            if shown_into(near.as_bytes(), &mut out) {
                prop_assert!(std::str::from_utf8(near.as_bytes()).is_ok());
                prop_assert_eq!((out, 0), counters_of_text(near.as_bytes()), "{:?}", near);
            }
        }

    }
}
