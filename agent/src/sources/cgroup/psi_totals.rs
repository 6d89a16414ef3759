//! The `total=` counters of a cgroup's `cpu.pressure`, `io.pressure` or `memory.pressure`
//! (`Documentation/accounting/psi.rst`), without the averages.
//!
//! The per-job collector reads three pressure files of every job each report and needs only
//! the totals (µs stalled since the cgroup was created): its shares are over the report interval,
//! from two readings, not the kernel's 10/60/300 s averages. Parsing the three averages of both
//! lines as floats was four fifths of the full parser's cost ([`crate::sources::pressure::parse`],
//! ~4,600 instructions a file); this reads the two integers only. The format and its rules are
//! the full parser's: `some` and `full` lines in either order, either absent (`cpu.pressure`
//! has no `full` before 5.13), a line twice or of another kind an error.

use super::super::{fields, parse_u64, swar, ParseError};

/// The `total=` of the `some` and the `full` line, µs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PsiTotals {
    /// Some task stalled.
    pub some_us: Option<u64>,
    /// All non-idle tasks stalled.
    pub full_us: Option<u64>,
}

/// Parses the totals of a pressure file.
pub fn parse(text: &str) -> Result<PsiTotals, ParseError> {
    match kernel_form(text.as_bytes()) {
        Some(t) => Ok(t),
        None => by_fields(text),
    }
}

/// A file's bytes as the kernel prints them (`psi_show()`: `some avg10=… avg60=… avg300=…
/// total=N` and perhaps a `full` line, each ended by a newline), read with no UTF-8 check, only
/// ASCII: [`parse`]'s fast path, and the per-job collector's on the bytes `pread` gave (three
/// files a job at every reading; the field-by-field parser cost ~1,600 instructions a file).
/// First by [`shown`], the layout `psi_show()` prints byte for byte; then, for any other
/// spacing of the same fields, by a scan: the file's first newline found by one `memchr`, each
/// line's total read back from its end, and what lies between the kind and ` total=` checked
/// (no `t`, no newline, ASCII) by one pass without a branch a byte. `None` for anything else,
/// which [`parse`] reads field by field (the same totals for every file this accepts: a
/// property test checks it).
pub fn kernel_form(b: &[u8]) -> Option<PsiTotals> {
    shown(b).or_else(|| scanned(b))
}

/// The file as `psi_show()` prints it: `"%s avg10=%lu.%02lu avg60=%lu.%02lu avg300=%lu.%02lu
/// total=%llu\n"`, `some` then perhaps `full` (or `full` alone), nothing else. Every byte is
/// matched where the format puts it — a line whose averages are all `0.00` by one compare of its
/// 45 bytes before the total ([`idle`]), else the literals eight bytes at a time and each
/// average as 1 to 3 digits, a point and two digits; the total as up to 19 digits
/// (`sources::swar`) — so no search and no pass over the averages: ~190 instructions a file of
/// two idle lines, ~440 with averages, against ~550 for [`scanned`]. What it accepts is ASCII
/// and gives [`by_fields`] the same totals (its fields are the kind, three `avgN=` and
/// `total=`).
pub fn shown(b: &[u8]) -> Option<PsiTotals> {
    let mut out = PsiTotals::default();
    let mut at = 0;
    // `some`, then `full` but where the kernel keeps none (the root's `cpu.pressure` before
    // 5.13); `full` alone in `irq.pressure`.
    if swar::load(b, 0) == SOME {
        at = shown_line(b, 0, SOME, &mut out.some_us)?;
    }
    if at < b.len() {
        at = shown_line(b, at, FULL, &mut out.full_us)?;
    }
    (at == b.len() && at > 0).then_some(out)
}

const SOME: u64 = u64::from_le_bytes(*b"some avg");
const FULL: u64 = u64::from_le_bytes(*b"full avg");

/// One line of [`shown`] from `at`, starting with `kind` (its first eight bytes), its total
/// into `slot`; where the next line starts.
#[inline(always)]
fn shown_line(b: &[u8], at: usize, kind: u64, slot: &mut Option<u64>) -> Option<usize> {
    (swar::load(b, at) == kind).then_some(())?;
    let at = match idle(b, at) {
        Some(at) => at,
        None => averages(b, at + 8)?,
    };
    let (total, at) = swar::number(b, at)?;
    (b.get(at) == Some(&b'\n')).then_some(())?;
    *slot = Some(total);
    Some(at + 1)
}

/// The line's head up to its total when every average is `0.00` (a cgroup that did not stall
/// in the last five minutes: most jobs' `memory.pressure`, many `full` lines): the 45 bytes
/// `some avg10=0.00 avg60=0.00 avg300=0.00 total=` (or `full …`, the kind checked by the
/// caller) compared as six words, where the total starts.
#[inline(always)]
fn idle(b: &[u8], at: usize) -> Option<usize> {
    const IDLE: &[u8; 45] = b"some avg10=0.00 avg60=0.00 avg300=0.00 total=";
    let head: &[u8; 45] = b.get(at..at.checked_add(45)?)?.try_into().ok()?;
    let word = |s: &[u8; 45], i: usize| {
        let mut w = [0u8; 8];
        for (d, c) in w.iter_mut().zip(s.iter().skip(i)) {
            *d = *c;
        }
        u64::from_le_bytes(w)
    };
    // From byte 8 on (the kind is the caller's); the last word overlaps the one before.
    let differs = [8, 16, 24, 32, 37]
        .iter()
        .fold(0, |acc, &i| acc | (word(head, i) ^ word(IDLE, i)));
    (differs == 0).then_some(at + 45)
}

/// The three averages of [`shown_line`] and ` total=`, from `at` (after `some avg`): where
/// the total starts.
#[inline(always)]
fn averages(b: &[u8], at: usize) -> Option<usize> {
    let at = literal(b, at, b"10=")?;
    let at = average(b, at)?;
    let at = literal(b, at, b" avg60=")?;
    let at = average(b, at)?;
    let at = literal(b, at, b" avg300=")?;
    let at = average(b, at)?;
    literal(b, at, b" total=")
}

/// `lit` (1 to 8 bytes, no zero byte) at `at`: where it ends. One load and a masked compare;
/// past the end of `b` the load gives zero bytes, which match no byte of `lit`.
#[inline(always)]
fn literal<const N: usize>(b: &[u8], at: usize, lit: &[u8; N]) -> Option<usize> {
    let mut want = [0u8; 8];
    for (w, l) in want.iter_mut().zip(lit) {
        *w = *l;
    }
    let mask = u64::MAX >> (64 - 8 * N.clamp(1, 8));
    (swar::load(b, at) & mask == u64::from_le_bytes(want)).then_some(at + N)
}

/// An average as `%lu.%02lu` prints it at `at` (1 to 3 digits, `.`, 2 digits): where it ends.
#[inline(always)]
fn average(b: &[u8], at: usize) -> Option<usize> {
    let x = swar::load(b, at);
    let k = swar::leading_digits(x);
    if !(1..=3).contains(&k) {
        return None;
    }
    let after = x >> (8 * k);
    ((after & 0xff) == u64::from(b'.') && swar::leading_digits(after >> 8) >= 2)
        .then_some(at + k as usize + 3)
}

/// [`kernel_form`] past [`shown`]: any spacing between the kind and ` total=`.
fn scanned(b: &[u8]) -> Option<PsiTotals> {
    let mut out = PsiTotals::default();
    let first = memchr::memchr(b'\n', b)?;
    kernel_line(b.get(..first)?, &mut out)?;
    let rest = b.get(first + 1..)?;
    if let Some((last, line)) = rest.split_last() {
        // A second line, the last: no newline inside it (checked with its middle).
        if *last != b'\n' {
            return None;
        }
        kernel_line(line, &mut out)?;
    }
    Some(out)
}

/// One line of [`scanned`] (without its newline) into `out`.
fn kernel_line(line: &[u8], out: &mut PsiTotals) -> Option<()> {
    const TOTAL: &[u8; 7] = b" total=";
    let slot = match line.get(..5)? {
        b"some " => &mut out.some_us,
        b"full " => &mut out.full_us,
        _ => return None,
    };
    if slot.is_some() {
        return None;
    }
    let n = line.iter().rev().take_while(|c| c.is_ascii_digit()).count();
    let head_len = line.len().checked_sub(n)?;
    let mid_len = head_len.checked_sub(5 + TOTAL.len())?;
    let total: &[u8; 7] = line.get(5 + mid_len..head_len)?.try_into().ok()?;
    if total != TOTAL {
        return None;
    }
    // The averages: no other `total=` (they hold no `t`), no line end, ASCII. Folded without
    // an early exit, which the compiler makes a few wide operations.
    let mid = line.get(5..5 + mid_len)?;
    let bad = mid.iter().fold(false, |bad, &c| {
        bad | (c == b't') | (c == b'\n') | (c >= 0x80)
    });
    if bad {
        return None;
    }
    *slot = Some(super::digits(line.get(head_len..)?)?);
    Some(())
}

/// The field-by-field parser: any order of `some`/`full`, any spacing, errors with their line.
fn by_fields(text: &str) -> Result<PsiTotals, ParseError> {
    let mut out = PsiTotals::default();
    for (i, line) in text.lines().enumerate() {
        let mut f = fields(line);
        let Some(kind) = f.next() else {
            continue;
        };
        let slot = match kind {
            "some" => &mut out.some_us,
            "full" => &mut out.full_us,
            other => {
                return Err(ParseError::new(
                    i + 1,
                    line,
                    format_args!("{other:?} is neither `some` nor `full`"),
                ))
            }
        };
        if slot.is_some() {
            return Err(ParseError::new(
                i + 1,
                line,
                format_args!("second `{kind}` line"),
            ));
        }
        let total = f
            .find_map(|pair| pair.strip_prefix("total="))
            .ok_or_else(|| ParseError::new(i + 1, line, "missing total"))?;
        *slot = Some(parse_u64(total).ok_or_else(|| {
            ParseError::new(
                i + 1,
                line,
                format_args!("total ({total:?}) is not an unsigned 64-bit integer"),
            )
        })?);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sources::pressure;
    use proptest::prelude::*;

    /// On every pressure file of the corpus, the totals the full parser reads.
    #[test]
    fn the_totals_of_the_full_parser_on_every_fixture() {
        // The files as the kernel printed them take the byte scan.
        let mut kernel = 0;
        let mut printed = 0;
        for dir in ["fixtures/cgroup/pressure", "fixtures/pressure"] {
            let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(dir);
            let mut n = 0;
            for entry in std::fs::read_dir(&dir).expect("fixtures") {
                let path = entry.expect("entry").path();
                let text = std::fs::read_to_string(&path).expect("fixture");
                // a file the full parser refuses (an average above 100 %) has no totals to
                // compare with
                let Ok(full) = pressure::parse(&text) else {
                    continue;
                };
                let t = parse(&text).expect("valid");
                if let Some(k) = kernel_form(text.as_bytes()) {
                    assert_eq!(k, t, "{}", path.display());
                    kernel += 1;
                }
                if let Some(k) = shown(text.as_bytes()) {
                    assert_eq!(k, t, "{}", path.display());
                    printed += 1;
                }
                assert_eq!(
                    t.some_us,
                    full.some.map(|l| l.total_us),
                    "{}",
                    path.display()
                );
                assert_eq!(
                    t.full_us,
                    full.full.map(|l| l.total_us),
                    "{}",
                    path.display()
                );
                n += 1;
            }
            assert!(n > 0, "no fixtures in {}", dir.display());
        }
        assert!(kernel > 5, "{kernel} files in the kernel's form");
        // every one of them as psi_show() prints it (the others were edited by hand)
        assert_eq!(printed, kernel, "{printed} files in psi_show()'s layout");
    }

    #[test]
    fn errors_name_the_line() {
        let e = parse("some avg10=0.00 total=5\nsome total=6\n").expect_err("twice");
        assert_eq!((e.line, e.reason.as_str()), (2, "second `some` line"));
        let e = parse("some avg10=0.00\n").expect_err("no total");
        assert_eq!(e.reason, "missing total");
        let e = parse("full total=-1\n").expect_err("negative");
        assert_eq!(e.line, 1);
        let e = parse("half total=1\n").expect_err("kind");
        assert!(e.reason.contains("neither"), "{e}");
        assert_eq!(parse(""), Ok(PsiTotals::default()));
    }

    proptest! {
        #[test]
        fn never_panics(text in "\\PC*") {
            let _ = parse(&text);
        }

        /// Whatever the scan accepts, the field-by-field parser reads the same totals from.
        #[test]
        fn the_scan_agrees_with_the_fields(
            lines in proptest::collection::vec(
                ("(some|full|som|fulll| some)", "( avg10=[0-9]{1,3}\\.[0-9]{2}){0,1}( avg60=[0-9t.]{1,4}){0,1}", "( total=| total= | total=t|  total=|total=)", "[0-9]{0,21}", "(\n|\r\n| \n|\n\n|)"),
                0..4,
            )
        ) {
            let text: String = lines
                .iter()
                .map(|(k, avgs, t, n, end)| format!("{k}{avgs}{t}{n}{end}"))
                .collect();
            if let Some(fast) = kernel_form(text.as_bytes()) {
                prop_assert_eq!(Ok(fast), by_fields(&text), "{:?}", text);
            }
        }

        /// Whatever the byte scan of the kernel's form accepts is valid UTF-8, and the text
        /// parser reads the same totals from it; anything else it leaves to that parser.
        #[test]
        fn the_kernel_form_agrees_with_the_parser(
            lines in proptest::collection::vec(
                ("(some|full|som|fulll| some)", "( avg10=[0-9]{0,3}[.t]?[0-9]{0,2}){0,1}( avg60=[0-9t.]{1,4}){0,1}( avg300=[0-9]{1,3}\\.[0-9]{2}){0,1}", "( total=| total= | total=t|  total=|total=)", "[0-9]{0,21}", "(\n|\r\n| \n|\n\n|)"),
                0..4,
            ),
            junk in proptest::collection::vec(any::<u8>(), 0..3),
            junk_at in any::<usize>(),
        ) {
            let mut bytes: Vec<u8> = lines
                .iter()
                .map(|(k, avgs, t, n, end)| format!("{k}{avgs}{t}{n}{end}"))
                .collect::<String>()
                .into_bytes();
            // Now and then a byte that is not the format's, or not UTF-8.
            if !bytes.is_empty() {
                let at = junk_at % bytes.len();
                bytes.splice(at..at, junk);
            }
            if let Some(fast) = kernel_form(&bytes) {
                let text = std::str::from_utf8(&bytes);
                prop_assert!(text.is_ok(), "{:?}", bytes);
                prop_assert_eq!(Ok(fast), by_fields(text.unwrap_or_default()), "{:?}", bytes);
            }
        }

        /// Whatever the layout of `psi_show()` accepts, the field-by-field parser reads the same
        /// totals from; the kernel's lines with any averages and totals take it.
        #[test]
        fn the_shown_layout_agrees_with_the_fields(
            lines in proptest::collection::vec(
                ("(some|full|som|fulll| some)", "( avg10=[0-9]{0,4}[.t]?[0-9]{0,3}){0,1}( avg60=[0-9]{1,3}\\.[0-9]{2}){0,1}( avg300=[0-9t.]{1,5}){0,1}", "( total=| total= | total=t|  total=|total=)", "[0-9]{0,21}", "(\n|\r\n| \n|\n\n|)"),
                0..4,
            ),
            junk in proptest::collection::vec(any::<u8>(), 0..3),
            junk_at in any::<usize>(),
            avgs in proptest::collection::vec(0u32..10_100, 6),
            some in 0u64..10_000_000_000_000_000_000,
            full in 0u64..10_000_000_000_000_000_000,
            with_full in any::<bool>(),
        ) {
            let mut bytes: Vec<u8> = lines
                .iter()
                .map(|(k, avgs, t, n, end)| format!("{k}{avgs}{t}{n}{end}"))
                .collect::<String>()
                .into_bytes();
            if !bytes.is_empty() {
                let at = junk_at % bytes.len();
                bytes.splice(at..at, junk);
            }
            if let Some(fast) = shown(&bytes) {
                let text = std::str::from_utf8(&bytes);
                prop_assert!(text.is_ok(), "{:?}", bytes);
                prop_assert_eq!(Ok(fast), by_fields(text.unwrap_or_default()), "{:?}", bytes);
            }
            let avg = |i: usize| format!("{}.{:02}", avgs[i] / 100, avgs[i] % 100);
            let mut text = format!("some avg10={} avg60={} avg300={} total={some}\n", avg(0), avg(1), avg(2));
            if with_full {
                text.push_str(&format!("full avg10={} avg60={} avg300={} total={full}\n", avg(3), avg(4), avg(5)));
            }
            let want = PsiTotals { some_us: Some(some), full_us: with_full.then_some(full) };
            prop_assert_eq!(shown(text.as_bytes()), Some(want), "{}", text);
            prop_assert_eq!(by_fields(&text), Ok(want));
        }

        #[test]
        fn kernel_lines_take_the_scan(some in any::<u64>(), full in any::<u64>(), a in 0u32..10_000) {
            let text = format!(
                "some avg10={}.{:02} avg60=0.00 avg300=0.00 total={some}\nfull avg10=0.00 avg60=0.00 avg300=0.00 total={full}\n",
                a / 100, a % 100
            );
            let want = PsiTotals { some_us: Some(some), full_us: Some(full) };
            prop_assert_eq!(kernel_form(text.as_bytes()), Some(want));
            prop_assert_eq!(by_fields(&text), Ok(want));
        }
    }
}
