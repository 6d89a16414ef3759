//! `cpu.stat` of a cgroup v2 directory: CPU time used by the cgroup and its descendants.
//!
//! Kernel documentation: `Documentation/admin-guide/cgroup-v2.rst`, "CPU Interface Files". A
//! flat-keyed file, `key value` per line, all values cumulative:
//!
//! ```text
//! usage_usec 98701325189
//! user_usec 61355716211
//! system_usec 37345608977
//! core_sched.force_idle_usec 0
//! nr_periods 3936904
//! nr_throttled 6004
//! throttled_usec 19175137007
//! nr_bursts 0
//! burst_usec 0
//! ```
//!
//! `usage_usec`, `user_usec` and `system_usec` (µs) are always there, whether the `cpu`
//! controller is enabled for the cgroup or not (early 4.x kernels printed the file only with the
//! controller). The rest depend on kernel and configuration:
//! `nr_periods`, `nr_throttled`, `throttled_usec` (bandwidth control, printed only where the
//! `cpu` controller is enabled), `nr_bursts`/`burst_usec` (5.14+), `core_sched.force_idle_usec`
//! (5.18+, `CONFIG_SCHED_CORE` only) and `nice_usec` (6.13+, commit aefa398d93d5, printed
//! before `core_sched`). Those are `Option`. Keys this parser does not know (`run_delay_usec` on the
//! newest kernels) are ignored, value and all, so a new kernel does not blind the agent; a known
//! key with a malformed value or more than one value, given twice, or missing is an error.

use super::super::swar;
use super::{fields, parse_u64, ParseError};

/// The counters of one `cpu.stat`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CpuStat {
    /// CPU time, user and system, µs.
    pub usage_usec: u64,
    /// User CPU time, µs.
    pub user_usec: u64,
    /// System CPU time, µs.
    pub system_usec: u64,
    /// User time at a positive nice value, µs (6.13+).
    pub nice_usec: Option<u64>,
    /// Time a sibling hyperthread was forced idle by core scheduling, µs (5.18+,
    /// `CONFIG_SCHED_CORE`).
    pub core_sched_force_idle_usec: Option<u64>,
    /// Bandwidth-control periods that elapsed with runnable tasks (`cpu` controller enabled).
    pub nr_periods: Option<u64>,
    /// Periods in which the cgroup was throttled (`cpu.max` quota used up).
    pub nr_throttled: Option<u64>,
    /// Time throttled, µs.
    pub throttled_usec: Option<u64>,
    /// Periods in which a burst beyond the quota was used (5.14+).
    pub nr_bursts: Option<u64>,
    /// Time spent in bursts, µs (5.14+).
    pub burst_usec: Option<u64>,
}

/// Parses `cpu.stat`.
pub fn parse(text: &str) -> Result<CpuStat, ParseError> {
    let (mut usage, mut user, mut system) = (None, None, None);
    let mut out = CpuStat::default();
    let mut seen: Vec<&str> = Vec::with_capacity(12);
    for (i, line) in text.lines().enumerate() {
        let mut f = fields(line);
        let Some(key) = f.next() else {
            continue;
        };
        let slot = match key {
            "usage_usec" => &mut usage,
            "user_usec" => &mut user,
            "system_usec" => &mut system,
            "nice_usec" => &mut out.nice_usec,
            "core_sched.force_idle_usec" => &mut out.core_sched_force_idle_usec,
            "nr_periods" => &mut out.nr_periods,
            "nr_throttled" => &mut out.nr_throttled,
            "throttled_usec" => &mut out.throttled_usec,
            "nr_bursts" => &mut out.nr_bursts,
            "burst_usec" => &mut out.burst_usec,
            // What a newer kernel adds is not ours to judge, whatever its value looks like.
            _ => continue,
        };
        let err = |why: std::fmt::Arguments<'_>| ParseError::new(i + 1, line, why);
        let (Some(value), None) = (f.next(), f.next()) else {
            return Err(err(format_args!("expected `{key} <value>`")));
        };
        let v = parse_u64(value).ok_or_else(|| {
            err(format_args!(
                "{key} ({value:?}) is not an unsigned 64-bit integer"
            ))
        })?;
        if seen.contains(&key) {
            return Err(err(format_args!("second `{key}` line")));
        }
        seen.push(key);
        *slot = Some(v);
    }
    // A file cut short (a read racing the cgroup's removal, a truncated copy) lacks the first
    // keys; say which, on the line after the last one. Lines of keys not known here are
    // skipped, value and all.
    let end = text.lines().count() + 1;
    let missing = |key: &str| ParseError::new(end, "", format_args!("missing {key}"));
    out.usage_usec = usage.ok_or_else(|| missing("usage_usec"))?;
    out.user_usec = user.ok_or_else(|| missing("user_usec"))?;
    out.system_usec = system.ok_or_else(|| missing("system_usec"))?;
    Ok(out)
}

/// `usage_usec` alone, for a reader that needs nothing else (the per-job collector reads a
/// hundred `cpu.stat`s a report for this one number): the first line that starts with
/// `usage_usec` and a blank, its value found by a scan of bytes instead of a parse of every key
/// ([`parse`] takes ~6,000 instructions on a 9-key file, this ~150). The other lines are not
/// checked; when that line is missing or its value is not `usage_usec <digits>`, the answer is
/// [`parse`]'s, error and all.
pub fn usage_usec(text: &str) -> Result<u64, ParseError> {
    const KEY: &[u8] = b"usage_usec";
    let bytes = text.as_bytes();
    let mut at = 0;
    while let Some(line) = bytes.get(at..) {
        if line.is_empty() {
            break;
        }
        let end = line.iter().position(|&b| b == b'\n').unwrap_or(line.len());
        let this = line.get(..end).unwrap_or_default();
        if let Some(rest) = this.strip_prefix(KEY) {
            if let Some(v) = usage_value(rest) {
                return Ok(v);
            }
            break;
        }
        at += end + 1;
    }
    parse(text).map(|s| s.usage_usec)
}

/// [`usage_usec`] of a file's bytes as the kernel prints them (`usage_usec` first, one space,
/// the digits, a newline), with no UTF-8 check to pay for but an ASCII one of the rest; `None`
/// for anything else, which [`usage_usec`] reads from the text (the value is [`usage_usec`]'s
/// for every file this accepts: a property test checks it). For the per-job collector, which
/// has the bytes `pread` gave.
pub fn usage_usec_kernel(b: &[u8]) -> Option<u64> {
    const KEY: &[u8] = b"usage_usec ";
    let rest = b.strip_prefix(KEY)?;
    // Up to 19 digits eight at a time; a 20th (up to `u64::MAX`) by the digit loop.
    let (v, n) = match swar::number(rest, 0) {
        Some(found) => found,
        None => {
            let n = rest.iter().take_while(|c| c.is_ascii_digit()).count();
            (super::digits(rest.get(..n)?)?, n)
        }
    };
    // The other lines: ASCII, checked eight bytes at a time (the last word overlapping).
    let others = rest.get(n + 1..)?;
    if rest.get(n) != Some(&b'\n') || !ascii(others) {
        return None;
    }
    Some(v)
}

/// Whether every byte of `b` is ASCII: its words or-ed together, one test of their high bits.
fn ascii(b: &[u8]) -> bool {
    let mut acc = 0u64;
    let mut at = 0;
    while at < b.len() {
        acc |= swar::load(b, at);
        at += 8;
    }
    acc & 0x8080_8080_8080_8080 == 0
}

/// The value after `usage_usec`: one or more spaces or tabs, digits, nothing else but trailing
/// blanks. `None` for anything else (the full parser decides).
fn usage_value(rest: &[u8]) -> Option<u64> {
    let blank = |b: &u8| *b == b' ' || *b == b'\t';
    let start = rest.iter().position(|b| !blank(b))?;
    if start == 0 {
        return None; // `usage_usecs …`: another key
    }
    let digits = rest.get(start..)?;
    let len = digits
        .iter()
        .position(|b| !b.is_ascii_digit())
        .unwrap_or(digits.len());
    if !digits.get(len..)?.iter().all(blank) {
        return None;
    }
    super::digits(digits.get(..len)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn fixture(name: &str) -> CpuStat {
        let path = format!(
            "{}/fixtures/cgroup/cpu-stat/{name}",
            env!("CARGO_MANIFEST_DIR")
        );
        parse(&std::fs::read_to_string(&path).expect("fixture")).expect("parses")
    }

    #[test]
    fn snapshot_real_fixtures() {
        insta::glob!("../../../fixtures/cgroup/cpu-stat", "*.txt", |path| {
            let text = std::fs::read_to_string(path).expect("fixture");
            let parsed = parse(&text);
            assert!(parsed.is_ok(), "{}: {parsed:?}", path.display());
            insta::assert_debug_snapshot!(parsed);
        });
    }

    #[test]
    fn facts_per_fixture() {
        let t = fixture("telegraf-v2-throttled-6004-of-3936904-periods-force-idle-bursts.txt");
        assert_eq!(t.usage_usec, 98_701_325_189);
        assert_eq!(t.usage_usec, t.user_usec + t.system_usec + 1);
        assert_eq!(
            (t.nr_periods, t.nr_throttled),
            (Some(3_936_904), Some(6004))
        );
        assert_eq!(t.throttled_usec, Some(19_175_137_007));
        assert_eq!(t.core_sched_force_idle_usec, Some(0));
        assert_eq!(t.nice_usec, None);

        // No cpu controller in that cgroup: no bandwidth keys at all.
        let q = fixture("telegraf-qemu-machine-no-cpu-controller-4-keys.txt");
        assert_eq!(q.usage_usec, 614_953_149_468);
        assert_eq!(
            (q.nr_periods, q.nr_throttled, q.throttled_usec),
            (None, None, None)
        );
        assert_eq!((q.nr_bursts, q.burst_usec), (None, None));
        assert_eq!(q.core_sched_force_idle_usec, Some(0));

        let b = fixture("build-machine-linux-6.18-root-nice_usec-no-cpu-controller.txt");
        assert_eq!(b.nice_usec, Some(0));
        assert_eq!(b.core_sched_force_idle_usec, None);
        assert_eq!(b.nr_periods, None);

        // The Slurm job's usage includes its steps': job_4 ≥ job_4/step_0/user/task_0.
        let job = fixture("cgroup-exporter-slurm-job_4-9-keys.txt");
        let task = fixture("cgroup-exporter-slurm-task_0-leaf.txt");
        assert_eq!((job.usage_usec, task.usage_usec), (126_686, 110_667));
        assert!(job.usage_usec >= task.usage_usec);
        assert_eq!((job.nr_bursts, job.burst_usec), (Some(0), Some(0)));
    }

    #[test]
    fn unknown_keys_are_ignored() {
        let s = parse("usage_usec 5\nuser_usec 3\nsystem_usec 2\nrun_delay_usec 77\nfuture_key abc\nfuture two values\n")
            .expect("valid");
        assert_eq!(
            s,
            CpuStat {
                usage_usec: 5,
                user_usec: 3,
                system_usec: 2,
                ..CpuStat::default()
            }
        );
    }

    #[test]
    fn errors_carry_line_and_reason() {
        let cases = [
            (
                "usage_usec x\nuser_usec 3\nsystem_usec 2\n",
                1,
                "usage_usec (\"x\") is not an unsigned 64-bit integer",
            ),
            (
                "usage_usec 5\nuser_usec 3 4\nsystem_usec 2\n",
                2,
                "expected `user_usec <value>`",
            ),
            (
                "usage_usec 5\nuser_usec\nsystem_usec 2\n",
                2,
                "expected `user_usec <value>`",
            ),
            (
                "usage_usec 5\nuser_usec 3\nsystem_usec 2\nusage_usec 6\n",
                4,
                "second `usage_usec` line",
            ),
            (
                "usage_usec -1\nuser_usec 3\nsystem_usec 2\n",
                1,
                "usage_usec (\"-1\") is not an unsigned 64-bit integer",
            ),
            (
                "usage_usec 5\nuser_usec 3\nsystem_usec 2\nnr_periods 1.5\n",
                4,
                "nr_periods (\"1.5\") is not an unsigned 64-bit integer",
            ),
            // truncated: the read stopped after the first line
            ("usage_usec 5\n", 2, "missing user_usec"),
            ("", 1, "missing usage_usec"),
            ("<html>garbage</html>\n", 2, "missing usage_usec"),
            (
                "usage_usec\u{0}5\nuser_usec 3\nsystem_usec 2\n",
                4,
                "missing usage_usec",
            ),
        ];
        for (text, line, reason) in cases {
            let e = parse(text).expect_err(text);
            assert_eq!((e.line, e.reason.as_str()), (line, reason), "{text:?}");
        }
    }

    /// The fast path gives the full parser's `usage_usec` on every fixture, and its answer
    /// (value or error) whenever it has no clean `usage_usec` line.
    #[test]
    fn usage_usec_alone_agrees_with_the_full_parser() {
        insta::glob!("../../../fixtures/cgroup/cpu-stat", "*.txt", |path| {
            let text = std::fs::read_to_string(path).expect("fixture");
            assert_eq!(
                usage_usec(&text).ok(),
                parse(&text).ok().map(|s| s.usage_usec),
                "{}",
                path.display()
            );
        });
        // The kernel's form, from the bytes: every real fixture takes it.
        insta::glob!("../../../fixtures/cgroup/cpu-stat", "*.txt", |path| {
            let bytes = std::fs::read(path).expect("fixture");
            let text = std::str::from_utf8(&bytes).expect("UTF-8");
            assert_eq!(
                usage_usec_kernel(&bytes).ok_or(()),
                usage_usec(text).map_err(|_| ())
            );
        });
        assert_eq!(usage_usec_kernel(b"usage_usec 5\nuser_usec \xff\n"), None);
        assert_eq!(
            usage_usec_kernel(b"usage_usec 18446744073709551615\n"),
            Some(u64::MAX)
        );
        assert_eq!(
            usage_usec_kernel(b"usage_usec 18446744073709551616\n"),
            None
        );
        for text in [
            "user_usec 3\nusage_usec 5\nsystem_usec 2\n",
            "usage_usec\t5 \nuser_usec 3\nsystem_usec 2",
            "usage_usec  5\r\nuser_usec 3\r\nsystem_usec 2\r\n",
        ] {
            assert_eq!(usage_usec(text).ok(), Some(5), "{text:?}");
        }
        for (text, line, reason) in [
            (
                "usage_usec x\nuser_usec 3\nsystem_usec 2\n",
                1,
                "usage_usec (\"x\") is not an unsigned 64-bit integer",
            ),
            (
                "usage_usec 5 6\nuser_usec 3\nsystem_usec 2\n",
                1,
                "expected `usage_usec <value>`",
            ),
            (
                "usage_usecs 5\nuser_usec 3\nsystem_usec 2\n",
                4,
                "missing usage_usec",
            ),
            (
                "usage_usec 99999999999999999999\n",
                1,
                "usage_usec (\"99999999999999999999\") is not an unsigned 64-bit integer",
            ),
            ("", 1, "missing usage_usec"),
        ] {
            let e = usage_usec(text).expect_err(text);
            assert_eq!((e.line, e.reason.as_str()), (line, reason), "{text:?}");
        }
    }

    proptest! {
        #[test]
        fn never_panics(text in "\\PC{0,300}") {
            let _ = parse(&text);
            let _ = usage_usec(&text);
        }

        #[test]
        fn never_panics_on_near_misses(
            lines in proptest::collection::vec(
                ("usage_usec|user_usec|system_usec|nr_periods|nice_usec|x", "[0-9]{0,22}|-1|max| 1 2"),
                0..8,
            ),
        ) {
            let text: String = lines.iter().map(|(k, v)| format!("{k} {v}\n")).collect();
            let _ = parse(&text);
            // where the full parser reads the file, the fast path reads the same usage
            if let Ok(s) = parse(&text) {
                prop_assert_eq!(usage_usec(&text).ok(), Some(s.usage_usec));
            }
            if let Some(v) = usage_usec_kernel(text.as_bytes()) {
                prop_assert_eq!(usage_usec(&text), Ok(v));
            }
        }

        /// Whatever the byte scan accepts is valid UTF-8 and reads as [`usage_usec`] reads its
        /// text; a non-ASCII byte anywhere, or not the kernel's first line, is left to it.
        #[test]
        fn the_kernel_form_agrees_with_the_text(
            lines in proptest::collection::vec(
                ("usage_usec|user_usec|usage_usecs|x", "( |  |\t)", "[0-9]{0,22}|-1", "\n|\r\n| \n|"),
                0..5,
            ),
            junk in proptest::collection::vec(any::<u8>(), 0..3),
            junk_at in any::<usize>(),
        ) {
            let mut b: Vec<u8> = lines
                .iter()
                .map(|(k, sep, v, end)| format!("{k}{sep}{v}{end}"))
                .collect::<String>()
                .into_bytes();
            if !b.is_empty() {
                let at = junk_at % b.len();
                b.splice(at..at, junk);
            }
            if let Some(v) = usage_usec_kernel(&b) {
                let text = std::str::from_utf8(&b);
                prop_assert!(text.is_ok(), "{:?}", b);
                prop_assert_eq!(usage_usec(text.unwrap_or_default()), Ok(v));
            }
        }
    }
}
