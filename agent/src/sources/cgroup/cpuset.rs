//! `cpuset.cpus.effective` (and `cpuset.cpus`) of a cgroup v2 directory: the CPUs its tasks
//! may run on.
//!
//! Kernel documentation: `Documentation/admin-guide/cgroup-v2.rst`, "Cpuset Interface Files".
//! A list of CPU numbers and ranges, `0-4,6,8-10`, on one line. `cpuset.cpus.effective` is what
//! the parent granted and is never empty where the cpuset controller is enabled; `cpuset.cpus`
//! is what was asked for, and empty means "the same as the parent". Slurm's task/cgroup with
//! `ConstrainCores=yes` writes the job's cores here; HTCondor does not (the job's cpuset is the
//! whole machine), so for HTCondor jobs the CPU count comes from `cpu.weight`
//! ([`super::cpu_max`]). The same list format is used by `/sys/devices/system/cpu/online`.

use super::{parse_u64, ParseError};

/// A set of CPUs as inclusive ranges, sorted and merged.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CpuSet {
    /// `(first, last)` CPU numbers, inclusive, ascending, not overlapping nor adjacent.
    pub ranges: Vec<(u32, u32)>,
}

impl CpuSet {
    /// Number of CPUs in the set.
    pub fn count(&self) -> u64 {
        self.ranges
            .iter()
            .map(|&(a, b)| u64::from(b) - u64::from(a) + 1)
            .sum()
    }

    /// Whether the set is empty (`cpuset.cpus` inheriting from the parent).
    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }
}

fn cpu(s: &str) -> Option<u32> {
    u32::try_from(parse_u64(s)?).ok()
}

/// Parses a CPU list. An empty file (or a lone newline) is the empty set.
pub fn parse(text: &str) -> Result<CpuSet, ParseError> {
    let mut lines = text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty());
    let Some((i, line)) = lines.next() else {
        return Ok(CpuSet::default());
    };
    if let Some((j, extra)) = lines.next() {
        return Err(ParseError::new(j + 1, extra, "a CPU list has one line"));
    }
    let err = |why: std::fmt::Arguments<'_>| ParseError::new(i + 1, line, why);
    let mut ranges = Vec::new();
    for item in line.trim().split(',') {
        let (a, b) = match item.split_once('-') {
            Some((a, b)) => (cpu(a), cpu(b)),
            None => (cpu(item), cpu(item)),
        };
        let (Some(a), Some(b)) = (a, b) else {
            return Err(err(format_args!("{item:?} is not a CPU number or range")));
        };
        if a > b {
            return Err(err(format_args!("range {item:?} runs backwards")));
        }
        ranges.push((a, b));
    }
    ranges.sort_unstable();
    let mut merged: Vec<(u32, u32)> = Vec::with_capacity(ranges.len());
    for (a, b) in ranges {
        match merged.last_mut() {
            // Overlapping or adjacent: the kernel never prints that, but a CPU counts once.
            Some(last) if u64::from(a) <= u64::from(last.1) + 1 => last.1 = last.1.max(b),
            _ => merged.push((a, b)),
        }
    }
    Ok(CpuSet { ranges: merged })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn snapshot_real_fixtures() {
        insta::glob!("../../../fixtures/cgroup/cpuset", "*.txt", |path| {
            let text = std::fs::read_to_string(path).expect("fixture");
            let parsed = parse(&text);
            assert!(parsed.is_ok(), "{}: {parsed:?}", path.display());
            insta::assert_debug_snapshot!(parsed.map(|s| (s.count(), s)));
        });
    }

    #[test]
    fn facts_per_fixture() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/cgroup/cpuset/");
        let count = |name: &str| {
            let text = std::fs::read_to_string(format!("{dir}{name}")).expect("fixture");
            parse(&text).expect("parses").count()
        };
        assert_eq!(count("telegraf-v2-cpus.effective-0-95.txt"), 96);
        assert_eq!(count("cgroup-exporter-slurm-job_4-cpus.effective-0.txt"), 1);
        assert_eq!(
            count("cgroup-exporter-slurmstepd-scope-cpus.effective-0-3.txt"),
            4
        );
        assert_eq!(
            count("cgroup-exporter-slurmstepd-scope-cpuset.cpus-empty.txt"),
            0
        );
        assert_eq!(count("kernel-doc-cpuset.cpus-0-4_6_8-10.txt"), 9);
        assert_eq!(count("opencontainers-cgroups-test-0-2_7_12-14.txt"), 7);
    }

    #[test]
    fn ranges_merge_and_count_once() {
        let s = parse("0-3,8-11\n").expect("valid");
        assert_eq!((s.count(), s.ranges.clone()), (8, vec![(0, 3), (8, 11)]));
        let s = parse("8-11,0-3,4").expect("valid");
        assert_eq!(s.ranges, vec![(0, 4), (8, 11)]);
        let s = parse("0-5,2-3,5").expect("valid");
        assert_eq!((s.count(), s.ranges), (6, vec![(0, 5)]));
        let s = parse("4294967295").expect("valid");
        assert_eq!(s.count(), 1);
        assert!(parse("\n").expect("empty").is_empty());
    }

    #[test]
    fn errors() {
        let cases = [
            ("8-7", "range \"8-7\" runs backwards"),
            ("0-3,", "\"\" is not a CPU number or range"),
            ("0-", "\"0-\" is not a CPU number or range"),
            ("a-b", "\"a-b\" is not a CPU number or range"),
            ("0-3 8", "\"0-3 8\" is not a CPU number or range"),
            ("-1", "\"-1\" is not a CPU number or range"),
            ("4294967296", "\"4294967296\" is not a CPU number or range"),
            ("0-1-2", "\"0-1-2\" is not a CPU number or range"),
        ];
        for (text, reason) in cases {
            let e = parse(text).expect_err(text);
            assert_eq!((e.line, e.reason.as_str()), (1, reason), "{text}");
        }
        let e = parse("0-3\n4\n").expect_err("two lines");
        assert_eq!((e.line, e.reason.as_str()), (2, "a CPU list has one line"));
    }

    proptest! {
        #[test]
        fn never_panics(text in "\\PC{0,100}") {
            let _ = parse(&text);
        }

        #[test]
        fn count_is_the_number_of_distinct_cpus(cpus in proptest::collection::btree_set(0u32..200, 0..40)) {
            let text: Vec<String> = cpus.iter().map(u32::to_string).collect();
            let set = parse(&text.join(",")).expect("valid");
            prop_assert_eq!(set.count(), cpus.len() as u64);
        }
    }
}
