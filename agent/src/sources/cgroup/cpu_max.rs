//! `cpu.max` and `cpu.weight` of a cgroup v2 directory: the CPU bandwidth limit and the
//! proportional share.
//!
//! Kernel documentation: `Documentation/admin-guide/cgroup-v2.rst`, "CPU Interface Files".
//! `cpu.max` is `$MAX $PERIOD` in µs: the group may run `$MAX` µs in each `$PERIOD`, i.e.
//! `$MAX / $PERIOD` CPUs, and `max` means no limit (the default, `max 100000`). Docker's
//! `--cpus=2` writes `200000 100000`. `cpu.weight` is 1–10000, default 100. Neither Slurm nor
//! HTCondor sets `cpu.max` by default. HTCondor writes `100 × Cpus` of the slot into the job's
//! `cpu.weight` (`fi.cgroup_cpu_shares = 100 * numCores` in
//! `src/condor_starter.V6.1/vanilla_proc.cpp`, written by `ProcFamilyDirectCgroupV2`), so
//! there the weight tells the CPUs the job was given: a share, not a limit (an idle machine
//! lets a job use more).

use super::{fields, parse_u64, single_u64, ParseError};

/// `cpu.max`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CpuMax {
    /// Run time allowed per period, µs; `None` for `max` (no limit).
    pub quota_usec: Option<u64>,
    /// The period, µs.
    pub period_usec: u64,
}

impl CpuMax {
    /// CPUs the limit allows (`quota / period`); `None` without a limit.
    pub fn cores(&self) -> Option<f64> {
        // parse() refuses a zero period.
        self.quota_usec
            .map(|q| q as f64 / self.period_usec.max(1) as f64)
    }
}

/// Parses `cpu.max`.
pub fn parse(text: &str) -> Result<CpuMax, ParseError> {
    let mut lines = text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty());
    let Some((i, line)) = lines.next() else {
        return Err(ParseError::new(1, text, "cpu.max is empty"));
    };
    if let Some((j, extra)) = lines.next() {
        return Err(ParseError::new(j + 1, extra, "cpu.max has a second line"));
    }
    let err = |why: std::fmt::Arguments<'_>| ParseError::new(i + 1, line, why);
    let mut f = fields(line);
    let (Some(max), Some(period), None) = (f.next(), f.next(), f.next()) else {
        return Err(err(format_args!("expected `$MAX $PERIOD`")));
    };
    let quota_usec = match max {
        "max" => None,
        q => Some(
            parse_u64(q)
                .ok_or_else(|| err(format_args!("quota ({q:?}) is neither `max` nor a number")))?,
        ),
    };
    let period_usec = parse_u64(period)
        .filter(|&p| p > 0)
        .ok_or_else(|| err(format_args!("period ({period:?}) is not a positive number")))?;
    Ok(CpuMax {
        quota_usec,
        period_usec,
    })
}

/// Parses `cpu.weight`: 1–10000.
pub fn parse_weight(text: &str) -> Result<u64, ParseError> {
    let w = single_u64(text, "cpu.weight")?;
    if !(1..=10_000).contains(&w) {
        let line = text
            .lines()
            .find(|l| !l.trim().is_empty())
            .unwrap_or_default();
        let n = text
            .lines()
            .position(|l| !l.trim().is_empty())
            .map_or(1, |p| p + 1);
        return Err(ParseError::new(
            n,
            line,
            format_args!("cpu.weight ({w}) is outside 1–10000"),
        ));
    }
    Ok(w)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn snapshot_real_fixtures() {
        insta::glob!("../../../fixtures/cgroup/cpu-max", "*.txt", |path| {
            let text = std::fs::read_to_string(path).expect("fixture");
            let parsed = parse(&text);
            assert!(parsed.is_ok(), "{}: {parsed:?}", path.display());
            insta::assert_debug_snapshot!(parsed.map(|m| (m.cores(), m)));
        });
        insta::glob!("../../../fixtures/cgroup/cpu-weight", "*.txt", |path| {
            let text = std::fs::read_to_string(path).expect("fixture");
            let parsed = parse_weight(&text);
            assert!(parsed.is_ok(), "{}: {parsed:?}", path.display());
            insta::assert_debug_snapshot!(parsed);
        });
    }

    #[test]
    fn facts_per_fixture() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/cgroup/");
        let read = |name: &str| std::fs::read_to_string(format!("{dir}{name}")).expect("fixture");
        let m = parse(&read("cpu-max/telegraf-v2-48-cpu-quota-4800000-100000.txt")).expect("ok");
        assert_eq!(m.cores(), Some(48.0));
        let m = parse(&read("cpu-max/cgroup-exporter-slurm-job_4-max-100000.txt")).expect("ok");
        assert_eq!(
            (m.quota_usec, m.period_usec, m.cores()),
            (None, 100_000, None)
        );
        let m = parse(&read("cpu-max/synthetic-two-cores-200000-100000.txt")).expect("ok");
        assert_eq!(m.cores(), Some(2.0));
        let m = parse(&read("cpu-max/synthetic-half-core-50000-100000.txt")).expect("ok");
        assert_eq!(m.cores(), Some(0.5));
        assert_eq!(parse_weight(&read("cpu-weight/telegraf-v2-79.txt")), Ok(79));
        assert_eq!(
            parse_weight(&read("cpu-weight/cgroup-exporter-slurm-job_4-100.txt")),
            Ok(100)
        );
        assert_eq!(
            parse_weight(&read("cpu-weight/synthetic-htcondor-8-cpus-800.txt")),
            Ok(800)
        );
    }

    #[test]
    fn errors() {
        let cases = [
            ("max", 1, "expected `$MAX $PERIOD`"),
            ("max 100000 1", 1, "expected `$MAX $PERIOD`"),
            (
                "-1 100000",
                1,
                "quota (\"-1\") is neither `max` nor a number",
            ),
            ("max 0", 1, "period (\"0\") is not a positive number"),
            ("max max", 1, "period (\"max\") is not a positive number"),
            ("", 1, "cpu.max is empty"),
            ("max 100000\nmax 100000", 2, "cpu.max has a second line"),
        ];
        for (text, line, reason) in cases {
            let e = parse(text).expect_err(text);
            assert_eq!((e.line, e.reason.as_str()), (line, reason), "{text}");
        }
        let e = parse_weight("0\n").expect_err("zero");
        assert_eq!(
            (e.line, e.reason.as_str()),
            (1, "cpu.weight (0) is outside 1–10000")
        );
        let e = parse_weight("\n10001\n").expect_err("big");
        assert_eq!(
            (e.line, e.reason.as_str()),
            (2, "cpu.weight (10001) is outside 1–10000")
        );
        assert!(parse_weight("default 100\n").is_err());
    }

    proptest! {
        #[test]
        fn never_panics(text in "\\PC{0,60}") {
            let _ = parse(&text);
            let _ = parse_weight(&text);
        }
    }
}
