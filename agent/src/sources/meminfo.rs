//! `/proc/meminfo`: the page-cache state that explains write stalls (Dirty, Writeback).
//!
//! Kernel documentation: `Documentation/filesystems/proc.rst` ("meminfo"). Lines are
//! `Key:   123 kB` (`show_val_kb`; "kB" is KiB); a few (`HugePages_Total: 0`) have no unit.
//! The set of keys changes with kernel version and configuration, so unknown keys are ignored,
//! and only a malformed line for a key the agent reports is an error.

use super::{fields, parse_u64, ParseError};

/// The `/proc/meminfo` fields the agent reports, in kB (the file's unit; "kB" means KiB).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct MemInfo {
    /// `MemTotal`.
    pub total_kb: Option<u64>,
    /// `MemAvailable` (3.14+).
    pub available_kb: Option<u64>,
    /// `Cached`.
    pub cached_kb: Option<u64>,
    /// `Dirty`: waiting to be written back.
    pub dirty_kb: Option<u64>,
    /// `Writeback`: being written back now.
    pub writeback_kb: Option<u64>,
}

/// Parses the value after `Key:`: a number, optionally followed by `kB`.
fn kilobytes(rest: &str) -> Result<u64, &'static str> {
    let mut f = fields(rest);
    let value = f.next().ok_or("no value")?;
    let kb = parse_u64(value).ok_or("value is not an unsigned 64-bit integer")?;
    match (f.next(), f.next()) {
        (None | Some("kB"), None) => Ok(kb),
        _ => Err("expected `<number> kB`"),
    }
}

/// Parses `/proc/meminfo`; unknown keys are ignored.
pub fn parse(text: &str) -> Result<MemInfo, ParseError> {
    let mut out = MemInfo::default();
    for (i, line) in text.lines().enumerate() {
        // Lines without a colon name no key, so they cannot be about one we use.
        let Some((key, rest)) = line.split_once(':') else {
            continue;
        };
        let slot = match key.trim() {
            "MemTotal" => &mut out.total_kb,
            "MemAvailable" => &mut out.available_kb,
            "Cached" => &mut out.cached_kb,
            "Dirty" => &mut out.dirty_kb,
            "Writeback" => &mut out.writeback_kb,
            _ => continue,
        };
        let kb = kilobytes(rest).map_err(|why| ParseError::new(i + 1, line, why))?;
        *slot = Some(kb);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn snapshot_real_fixtures() {
        insta::glob!("../../fixtures/meminfo", "*.txt", |path| {
            let text = std::fs::read_to_string(path).expect("fixture is readable");
            insta::assert_debug_snapshot!(parse(&text));
        });
    }

    #[test]
    fn reads_the_keys_it_uses() {
        let m = parse(
            "MemTotal:       24683656 kB\nMemFree:        21605264 kB\nMemAvailable:   23914312 kB\n\
             Cached:          2445344 kB\nSwapCached:            0 kB\nDirty:            512300 kB\n\
             Writeback:            96 kB\nWritebackTmp:          0 kB\nHugePages_Total:       0\n",
        )
        .expect("valid");
        assert_eq!(
            m,
            MemInfo {
                total_kb: Some(24_683_656),
                available_kb: Some(23_914_312),
                cached_kb: Some(2_445_344),
                dirty_kb: Some(512_300),
                writeback_kb: Some(96),
            }
        );
    }

    #[test]
    fn absent_keys_stay_none() {
        // A 3.13 kernel has no MemAvailable.
        let m =
            parse("\nMemTotal: 100 kB\n\n   \nDirty: 1 kB\n\n").expect("blank lines are skipped");
        assert_eq!(
            (m.total_kb, m.available_kb, m.dirty_kb),
            (Some(100), None, Some(1))
        );
        assert_eq!(parse(""), Ok(MemInfo::default()));
    }

    #[test]
    fn malformed_lines_matter_only_for_keys_we_use() {
        let m =
            parse("Bogus: x kB\nMlocked:\nno colon here\nDirty: 5 kB\nHugePages_Total: -1 pages\n")
                .expect("unused keys are ignored");
        assert_eq!(m.dirty_kb, Some(5));
        let cases = [
            ("Dirty: x kB", "value is not an unsigned 64-bit integer"),
            ("Dirty:", "no value"),
            ("Dirty: -5 kB", "value is not an unsigned 64-bit integer"),
            (
                "Dirty: 18446744073709551616 kB",
                "value is not an unsigned 64-bit integer",
            ),
            ("Dirty: 5 MB", "expected `<number> kB`"),
            ("Dirty: 5 kB extra", "expected `<number> kB`"),
        ];
        for (line, reason) in cases {
            let e = parse(&format!("MemTotal: 1 kB\n{line}\n")).expect_err(line);
            assert_eq!(
                (e.line, e.text.as_str(), e.reason.as_str()),
                (2, line, reason)
            );
        }
    }

    #[test]
    fn unitless_value_is_accepted() {
        assert_eq!(parse("Writeback: 7").expect("valid").writeback_kb, Some(7));
    }

    proptest! {
        #[test]
        fn never_panics(text in "\\PC*") {
            let _ = parse(&text);
        }

        #[test]
        fn never_panics_on_near_misses(
            key in "MemTotal|Dirty|Writeback|Cached|x",
            value in "[0-9]{0,22}|-1|x",
            unit in "kB|MB|",
        ) {
            let _ = parse(&format!("{key}:   {value} {unit}\n"));
        }
    }
}
