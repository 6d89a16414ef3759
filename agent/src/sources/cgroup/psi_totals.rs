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
    }
}
