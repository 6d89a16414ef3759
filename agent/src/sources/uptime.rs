//! `/proc/uptime`: seconds since boot with two decimals. sysstat takes its interval from here
//! (in hundredths of a second), so rates divide by the same interval iostat would.

//!
//! The kernel prints `"%lu.%02lu %lu.%02lu\n"`: seconds since boot and the sum of idle time over
//! all CPUs. Only the first is used; the second is checked so that garbage is noticed. Other
//! numbers of decimals are scaled to hundredths (`12.3` → 1230, `12.345` → 1234, truncating).

use super::{fields, ParseError};

/// Parses `seconds[.fraction]` into hundredths of a second.
fn hundredths(field: &str) -> Result<u64, &'static str> {
    let (whole, frac) = match field.split_once('.') {
        Some((w, f)) => (w, Some(f)),
        None => (field, None),
    };
    if whole.is_empty() || !whole.bytes().all(|b| b.is_ascii_digit()) {
        return Err("is not a decimal number");
    }
    let mut cents: u64 = 0;
    if let Some(frac) = frac {
        if frac.is_empty() || !frac.bytes().all(|b| b.is_ascii_digit()) {
            return Err("is not a decimal number");
        }
        // The first two decimals, padded with zeros; further ones are truncated.
        let mut digits = frac
            .bytes()
            .map(|b| u64::from(b - b'0'))
            .chain(std::iter::repeat(0));
        let tenths = digits.next().unwrap_or(0);
        let hundredths = digits.next().unwrap_or(0);
        cents = tenths * 10 + hundredths;
    }
    whole
        .parse::<u64>()
        .ok()
        .and_then(|s| s.checked_mul(100))
        .and_then(|s| s.checked_add(cents))
        .ok_or("does not fit in 64 bits as hundredths")
}

/// Parses the first number of `/proc/uptime` into hundredths of a second, exactly (no float).
pub fn parse(text: &str) -> Result<u64, ParseError> {
    let mut lines = text
        .lines()
        .enumerate()
        .filter(|(_, l)| fields(l).next().is_some());
    let Some((i, line)) = lines.next() else {
        return Err(ParseError::new(1, text, "empty"));
    };
    let mut f = fields(line);
    let up = f.next().unwrap_or_default();
    let uptime = hundredths(up)
        .map_err(|why| ParseError::new(i + 1, line, format_args!("uptime ({up:?}) {why}")))?;
    if let Some(idle) = f.next() {
        hundredths(idle).map_err(|why| {
            ParseError::new(i + 1, line, format_args!("idle time ({idle:?}) {why}"))
        })?;
    }
    if f.next().is_some() {
        return Err(ParseError::new(i + 1, line, "more than two numbers"));
    }
    if let Some((j, extra)) = lines.next() {
        return Err(ParseError::new(j + 1, extra, "more than one line"));
    }
    Ok(uptime)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn snapshot_real_fixtures() {
        insta::glob!("../../fixtures/uptime", "*.txt", |path| {
            let text = std::fs::read_to_string(path).expect("fixture is readable");
            insta::assert_debug_snapshot!(parse(&text));
        });
    }

    #[test]
    fn two_decimals_are_exact() {
        assert_eq!(parse("350735.47 234388.90\n"), Ok(35_073_547));
        assert_eq!(parse("0.00 0.00\n"), Ok(0));
        assert_eq!(parse("0.07 0.01"), Ok(7));
    }

    #[test]
    fn other_decimal_counts_scale_to_hundredths() {
        assert_eq!(parse("12.3 1.0"), Ok(1230));
        assert_eq!(parse("12.345 1.0"), Ok(1234));
        assert_eq!(parse("12.999999"), Ok(1299));
        assert_eq!(parse("12"), Ok(1200));
        assert_eq!(parse("  \n12.5\t3.25 \n"), Ok(1250));
    }

    #[test]
    fn garbage_is_an_error() {
        for bad in [
            "",
            "\n\n",
            "abc 1.0",
            "-1.00 2.00",
            "1.2.3 4",
            ".5 1",
            "5. 1",
            "1e3 1",
            "+1.00 1",
            "1.00 x",
            "1.00 2.00 3.00",
            "1.00 2.00\n3.00 4.00",
            "18446744073709551616.00 0",
        ] {
            assert!(parse(bad).is_err(), "{bad:?} parsed");
        }
        let e = parse("\n1.00 x\n").expect_err("bad idle");
        assert_eq!(
            (e.line, e.reason.as_str()),
            (2, "idle time (\"x\") is not a decimal number")
        );
        let e = parse("184467440737095517.00 0").expect_err("overflow");
        assert_eq!(
            e.reason,
            "uptime (\"184467440737095517.00\") does not fit in 64 bits as hundredths"
        );
        assert_eq!(
            parse("184467440737095516.15 0"),
            Ok(18_446_744_073_709_551_615)
        );
    }

    proptest! {
        #[test]
        fn never_panics(text in "\\PC*") {
            let _ = parse(&text);
        }

        #[test]
        fn kernel_format_round_trips(secs in 0u64..=u64::MAX / 100 - 1, cents in 0u64..100) {
            let text = format!("{secs}.{cents:02} 1.00\n");
            prop_assert_eq!(parse(&text), Ok(secs * 100 + cents));
        }
    }
}
