//! cgroup v2 interface files of one cgroup directory, and the batch-system job cgroups found in a
//! listing of `/sys/fs/cgroup`.
//!
//! Kernel documentation: `Documentation/admin-guide/cgroup-v2.rst` (the interface files and
//! their formats: "flat keyed" `key value` lines, "nested keyed" `KEY k=v k=v` lines, single
//! values) and `Documentation/accounting/psi.rst` (the `*.pressure` files). One module per file
//! kind:
//!
//! | file | module | unit |
//! | --- | --- | --- |
//! | `cpu.stat` | [`cpu_stat`] | µs, counts |
//! | `io.stat` | [`io_stat`] | bytes, I/Os, per `MAJ:MIN` device |
//! | `memory.stat`, `memory.current`, `memory.peak` | [`memory`] | bytes (and page counts) |
//! | `cpuset.cpus.effective`, `cpuset.cpus` | [`cpuset`] | CPU numbers |
//! | `cpu.max`, `cpu.weight` | [`cpu_max`] | µs per period; weight 1–10000 |
//! | `cpu.pressure`, `io.pressure`, `memory.pressure` | [`super::pressure`] (same format as `/proc/pressure/*`); [`psi_totals`] for the `total=` counters only | µs stalled, % |
//!
//! Every counter is cumulative since the cgroup was created, and a cgroup's counters include
//! its descendants', living and removed: a removed child's CPU time stays in its parent's
//! `cpu.stat` (for `io.stat` only on recent kernels, which flush a removed group's I/O
//! statistics into its parent first). So a job's own directory is the one to read, and the
//! batch system's parent directory (`htcondor/`, `slurmstepd.scope/`) still counts the CPU
//! time of a job that came and went between two readings.
//! [`jobs`] tells which directories are jobs.
//!
//! Reads from network storage (xrootd, NFS, CephFS) are not block I/O and never show in
//! `io.stat`; a job waiting on them shows as low CPU efficiency and, for NFS/CephFS page-cache
//! misses, as `io.pressure`.

pub mod cpu_max;
pub mod cpu_stat;
pub mod cpuset;
pub mod io_stat;
pub mod jobs;
pub mod memory;
pub mod psi_totals;

use super::{fields, parse_u64, ParseError};

/// [`parse_u64`] of bytes: digits only, not empty, no overflow (no UTF-8 check to pay for).
pub(crate) fn digits(field: &[u8]) -> Option<u64> {
    if field.is_empty() {
        return None;
    }
    if field.len() <= 19 {
        // 19 digits fit a u64 whatever they are: no overflow check per digit, and the bytes'
        // check folded into one flag (no branch a digit).
        let mut v: u64 = 0;
        let mut bad = false;
        for &c in field {
            let d = c.wrapping_sub(b'0');
            bad |= d > 9;
            v = v.wrapping_mul(10).wrapping_add(u64::from(d));
        }
        return (!bad).then_some(v);
    }
    let mut v: u64 = 0;
    for &c in field {
        let d = c.wrapping_sub(b'0');
        if d > 9 {
            return None;
        }
        v = v.checked_mul(10)?.checked_add(u64::from(d))?;
    }
    Some(v)
}

/// [`single_u64`] of a file's bytes in the kernel's form (digits and a newline), with no UTF-8
/// check (such bytes are ASCII); `None` for anything else, which [`single_u64`] reads from the
/// text and gives the same value for every file this accepts.
pub fn single_u64_kernel(b: &[u8]) -> Option<u64> {
    digits(b.strip_suffix(b"\n").unwrap_or(b))
}

/// Parses a single-value file (`memory.current`, `memory.peak`, `cpu.weight`): one unsigned
/// integer and a newline. `what` names the file for the error.
pub(crate) fn single_u64(text: &str, what: &str) -> Result<u64, ParseError> {
    // The kernel's form, digits and a newline, without splitting into lines and fields.
    if let Some(v) = digits(text.strip_suffix('\n').unwrap_or(text).as_bytes()) {
        return Ok(v);
    }
    let mut lines = text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty());
    let Some((i, line)) = lines.next() else {
        return Err(ParseError::new(1, text, format_args!("{what} is empty")));
    };
    let mut f = fields(line);
    let (Some(value), None) = (f.next(), f.next()) else {
        return Err(ParseError::new(
            i + 1,
            line,
            format_args!("{what} holds more than one value"),
        ));
    };
    let v = parse_u64(value).ok_or_else(|| {
        ParseError::new(
            i + 1,
            line,
            format_args!("{what} ({value:?}) is not an unsigned 64-bit integer"),
        )
    })?;
    if let Some((j, extra)) = lines.next() {
        return Err(ParseError::new(
            j + 1,
            extra,
            format_args!("{what} has a second line"),
        ));
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::super::pressure;
    use super::single_u64;

    /// The cgroup `*.pressure` files are parsed by the `/proc/pressure` parser: same format,
    /// with the `full` line of `cpu.pressure` missing before 5.13.
    #[test]
    fn snapshot_pressure_fixtures() {
        insta::glob!("../../../fixtures/cgroup/pressure", "*.txt", |path| {
            let text = std::fs::read_to_string(path).expect("fixture");
            let parsed = pressure::parse(&text);
            assert!(parsed.is_ok(), "{}: {parsed:?}", path.display());
            insta::assert_debug_snapshot!(parsed);
        });
    }

    #[test]
    fn pressure_facts() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/cgroup/pressure/");
        let read = |name: &str| {
            let text = std::fs::read_to_string(format!("{dir}{name}")).expect("fixture");
            pressure::parse(&text).expect("parses")
        };
        let cpu = read("telegraf-v2-cpu.pressure-some-and-full.txt");
        assert_eq!(cpu.some.map(|l| l.total_us), Some(293_391_454));
        assert_eq!(cpu.full.map(|l| l.total_us), Some(277_111_656));
        let old = read("procfs-cpu-some-only-pre-5.13.txt");
        assert!(old.some.is_some() && old.full.is_none());
        let busy = read("build-machine-linux-6.18-root-cpu.pressure-some-98pct-full-zero.txt");
        assert_eq!(busy.some.map(|l| l.avg10), Some(98.05));
        assert_eq!(busy.full.map(|l| l.total_us), Some(0));
    }

    #[test]
    fn single_values() {
        assert_eq!(
            single_u64("13071106048\n", "memory.current"),
            Ok(13_071_106_048)
        );
        assert_eq!(single_u64("0", "memory.peak"), Ok(0));
        for f in [
            "",
            "0",
            "18446744073709551615",
            "18446744073709551616",
            "-1",
            "+1",
            "12a",
            "１２",
        ] {
            assert_eq!(super::digits(f.as_bytes()), super::parse_u64(f), "{f:?}");
        }
        let e = single_u64("", "memory.current").expect_err("empty");
        assert_eq!(e.reason, "memory.current is empty");
        let e = single_u64("max\n", "memory.current").expect_err("max");
        assert_eq!(
            (e.line, e.reason.as_str()),
            (
                1,
                "memory.current (\"max\") is not an unsigned 64-bit integer"
            )
        );
        let e = single_u64("1 2\n", "cpu.weight").expect_err("two");
        assert_eq!(e.reason, "cpu.weight holds more than one value");
        let e = single_u64("1\n2\n", "cpu.weight").expect_err("two lines");
        assert_eq!(
            (e.line, e.reason.as_str()),
            (2, "cpu.weight has a second line")
        );
        let e = single_u64("-5\n", "cpu.weight").expect_err("negative");
        assert_eq!(e.line, 1);
    }

    proptest::proptest! {
        /// Any bytes: what `parse_u64` reads of them as text.
        #[test]
        fn digits_are_parse_u64(b in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..25), d in "[0-9]{0,25}") {
            if let Ok(text) = std::str::from_utf8(&b) {
                proptest::prop_assert_eq!(super::digits(&b), super::parse_u64(text));
            } else {
                proptest::prop_assert_eq!(super::digits(&b), None);
            }
            proptest::prop_assert_eq!(super::digits(d.as_bytes()), super::parse_u64(&d));
        }

        /// Whatever the byte form accepts is ASCII and reads as the text does.
        #[test]
        fn single_values_of_bytes(b in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..24)) {
            if let Some(v) = super::single_u64_kernel(&b) {
                let text = std::str::from_utf8(&b);
                proptest::prop_assert!(text.is_ok());
                proptest::prop_assert_eq!(single_u64(text.unwrap_or_default(), "memory.current"), Ok(v));
            }
        }

        #[test]
        fn single_values_of_digits(v in proptest::prelude::any::<u64>(), nl in proptest::prelude::any::<bool>()) {
            let text = format!("{v}{}", if nl { "\n" } else { "" });
            proptest::prop_assert_eq!(super::single_u64_kernel(text.as_bytes()), Some(v));
            proptest::prop_assert_eq!(single_u64(&text, "memory.peak"), Ok(v));
        }
    }
}
