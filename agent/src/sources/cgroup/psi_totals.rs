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

use super::super::{fields, parse_u64, ParseError};

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
/// The file's first newline is found by one `memchr`; each line's total is read back from its
/// end, and what lies between the kind and ` total=` is checked (no `t`, no newline, ASCII) by
/// one pass without a branch a byte. `None` for anything else, which [`parse`] reads field by
/// field (the same totals for every file this accepts: a property test checks it).
pub fn kernel_form(b: &[u8]) -> Option<PsiTotals> {
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

/// One line of [`kernel_form`] (without its newline) into `out`.
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
