//! `/proc/pressure/io` (PSI, Linux 4.20+, `Documentation/accounting/psi.rst`).
//!
//! Two lines, `some avg10=0.00 avg60=0.00 avg300=0.00 total=0` and `full …`: the averages are
//! percentages of wall time with two decimals, `total` is microseconds stalled since boot. The
//! same format serves `/proc/pressure/{cpu,memory,irq}` and cgroup v2 `*.pressure` files; the
//! cpu file had no `full` line before 5.13 and the irq file has only `full`, so either line may be
//! missing. An average above 100% is impossible and makes the file an error. The lines may come
//! in any order; unknown `key=value` pairs are ignored so a kernel
//! adding one does not blind the agent.

use super::{fields, parse_u64, ParseError};

/// One `some` or `full` line.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct PsiLine {
    /// Share of wall time stalled, % over the last 10 s.
    pub avg10: f64,
    /// Over the last 60 s.
    pub avg60: f64,
    /// Over the last 300 s.
    pub avg300: f64,
    /// Total stall time, microseconds.
    pub total_us: u64,
}

/// The pressure file: `some` and, except for the CPU file before 5.13, `full`.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Pressure {
    /// At least one task stalled.
    pub some: Option<PsiLine>,
    /// All non-idle tasks stalled.
    pub full: Option<PsiLine>,
}

/// Parses an average: a non-negative decimal (`0.00`, `3.19`).
fn average(value: &str) -> Option<f64> {
    // f64::from_str also takes "inf", "NaN", "1e5" and signs, which no kernel prints.
    if value.is_empty()
        || !value.bytes().all(|b| b.is_ascii_digit() || b == b'.')
        || !value.bytes().any(|b| b.is_ascii_digit())
    {
        return None;
    }
    value.parse().ok()
}

/// Parses the `key=value` pairs after `some`/`full`.
fn psi_line(line: &str, line_no: usize) -> Result<PsiLine, ParseError> {
    let err = |reason: std::fmt::Arguments<'_>| ParseError::new(line_no, line, reason);
    let (mut avg10, mut avg60, mut avg300, mut total_us) = (None, None, None, None);
    for pair in fields(line).skip(1) {
        let Some((key, value)) = pair.split_once('=') else {
            return Err(err(format_args!("{pair:?} is not key=value")));
        };
        let slot = match key {
            "avg10" => &mut avg10,
            "avg60" => &mut avg60,
            "avg300" => &mut avg300,
            "total" => {
                total_us = Some(parse_u64(value).ok_or_else(|| {
                    err(format_args!(
                        "total ({value:?}) is not an unsigned 64-bit integer"
                    ))
                })?);
                continue;
            }
            _ => continue,
        };
        let avg = average(value)
            .ok_or_else(|| err(format_args!("{key} ({value:?}) is not a decimal number")))?;
        // A share of wall time cannot exceed 100%: such a file is corrupt, not a busy host.
        if avg > 100.0 {
            return Err(err(format_args!("{key} ({value:?}) is above 100%")));
        }
        *slot = Some(avg);
    }
    let missing = |key: &str| err(format_args!("missing {key}"));
    Ok(PsiLine {
        avg10: avg10.ok_or_else(|| missing("avg10"))?,
        avg60: avg60.ok_or_else(|| missing("avg60"))?,
        avg300: avg300.ok_or_else(|| missing("avg300"))?,
        total_us: total_us.ok_or_else(|| missing("total"))?,
    })
}

/// Parses a pressure file. Either line may be absent (`None`); an empty file is a [`Pressure`]
/// with neither, which the caller can tell from a file that is not there.
pub fn parse(text: &str) -> Result<Pressure, ParseError> {
    let mut out = Pressure::default();
    for (i, line) in text.lines().enumerate() {
        let Some(kind) = fields(line).next() else {
            continue;
        };
        let slot = match kind {
            "some" => &mut out.some,
            "full" => &mut out.full,
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
        *slot = Some(psi_line(line, i + 1)?);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn snapshot_real_fixtures() {
        insta::glob!("../../fixtures/pressure", "*.txt", |path| {
            let text = std::fs::read_to_string(path).expect("fixture is readable");
            insta::assert_debug_snapshot!(parse(&text));
        });
    }

    #[test]
    fn both_lines_in_either_order() {
        let p = parse("full avg10=1.50 avg60=0.25 avg300=0.00 total=7\nsome avg10=3.19 avg60=1.14 avg300=0.43 total=96968324\n")
            .expect("valid");
        assert_eq!(
            p.some,
            Some(PsiLine {
                avg10: 3.19,
                avg60: 1.14,
                avg300: 0.43,
                total_us: 96_968_324
            })
        );
        assert_eq!(
            p.full,
            Some(PsiLine {
                avg10: 1.5,
                avg60: 0.25,
                avg300: 0.0,
                total_us: 7
            })
        );
    }

    #[test]
    fn missing_lines_are_none() {
        let p = parse("some avg10=0.00 avg60=0.00 avg300=0.00 total=0").expect("valid");
        assert!(p.some.is_some() && p.full.is_none());
        let p = parse("full avg10=0.00 avg60=0.00 avg300=0.00 total=8494").expect("valid");
        assert!(p.some.is_none() && p.full.is_some());
        assert_eq!(parse(""), Ok(Pressure::default()));
        assert_eq!(parse("\n\n"), Ok(Pressure::default()));
    }

    #[test]
    fn a_hundred_percent_is_the_limit() {
        let p = parse("full avg10=100.00 avg60=99.99 avg300=100 total=1").expect("valid");
        assert_eq!(p.full.map(|l| (l.avg10, l.avg300)), Some((100.0, 100.0)));
    }

    #[test]
    fn unknown_keys_and_key_order_do_not_matter() {
        let p = parse("some total=5 avg300=0.30 avg10=0.10 avg60=0.20 avg1800=9.99 peak=x\n")
            .expect("valid");
        assert_eq!(
            p.some,
            Some(PsiLine {
                avg10: 0.1,
                avg60: 0.2,
                avg300: 0.3,
                total_us: 5
            })
        );
    }

    #[test]
    fn malformed_lines_are_errors() {
        let cases = [
            ("some avg10=0.00 avg60=0.00 avg300=0.00", "missing total"),
            ("some avg10=0.00 avg60=0.00 total=1", "missing avg300"),
            ("some", "missing avg10"),
            (
                "some avg10=abc avg60=0.00 avg300=0.00 total=1",
                "avg10 (\"abc\") is not a decimal number",
            ),
            (
                "some avg10=-1.00 avg60=0.00 avg300=0.00 total=1",
                "avg10 (\"-1.00\") is not a decimal number",
            ),
            (
                "some avg10=NaN avg60=0.00 avg300=0.00 total=1",
                "avg10 (\"NaN\") is not a decimal number",
            ),
            (
                "some avg10=. avg60=0.00 avg300=0.00 total=1",
                "avg10 (\".\") is not a decimal number",
            ),
            (
                "some avg10=0.00 avg60=0.00 avg300=0.00 total=1.5",
                "total (\"1.5\") is not an unsigned 64-bit integer",
            ),
            (
                "some avg10=0.00 avg60=0.00 avg300=0.00 total=18446744073709551616",
                "total (\"18446744073709551616\") is not an unsigned 64-bit integer",
            ),
            ("some avg10 0.00", "\"avg10\" is not key=value"),
            (
                "some avg10=0.00 avg60=100.01 avg300=0.00 total=1",
                "avg60 (\"100.01\") is above 100%",
            ),
            ("garbage", "\"garbage\" is neither `some` nor `full`"),
        ];
        for (text, reason) in cases {
            let e = parse(text).expect_err(text);
            assert_eq!((e.line, e.reason.as_str()), (1, reason), "{text}");
        }
        let e = parse("some avg10=0.00 avg60=0.00 avg300=0.00 total=1\n\nsome avg10=0.00 avg60=0.00 avg300=0.00 total=2\n")
            .expect_err("twice");
        assert_eq!((e.line, e.reason.as_str()), (3, "second `some` line"));
    }

    proptest! {
        #[test]
        fn never_panics(text in "\\PC*") {
            let _ = parse(&text);
        }

        #[test]
        fn never_panics_on_near_misses(
            kind in "some|full|x",
            pairs in proptest::collection::vec(("avg10|avg60|avg300|total|x", "[0-9.]{0,8}|-1|inf"), 0..6),
        ) {
            let line = pairs.iter().fold(kind, |acc, (k, v)| format!("{acc} {k}={v}"));
            let _ = parse(&line);
        }
    }
}
