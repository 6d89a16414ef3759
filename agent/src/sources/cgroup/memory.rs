//! `memory.stat`, `memory.current` and `memory.peak` of a cgroup v2 directory.
//!
//! Kernel documentation: `Documentation/admin-guide/cgroup-v2.rst`, "Memory Interface Files".
//! `memory.current` is the memory charged to the cgroup and its descendants now, `memory.peak`
//! (5.19+) the most it has been since the cgroup was created; both are single values in bytes.
//! `memory.stat` is flat-keyed (`anon 2471755776`): amounts in bytes, event counters (`pgfault`,
//! `pgmajfault`, `workingset_refault_file`) as counts. Its key set grows with nearly every
//! kernel and depends on configuration (`anon_thp` needs `CONFIG_TRANSPARENT_HUGEPAGE`), so every
//! key is `Option` and unknown keys are ignored, value and all.
//!
//! What the job view needs from it: `file_dirty`/`file_writeback` (writes the job has not yet
//! pushed to the disk: page-cache writes show in `io.stat` only when written back),
//! `pgmajfault` and `workingset_refault_file` (reads that had to go back to storage), and
//! `anon`/`file` to split `memory.current`.

use super::{fields, parse_u64, single_u64, ParseError};

/// The `memory.stat` keys the agent uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct MemoryStat {
    /// Anonymous memory, bytes.
    pub anon: Option<u64>,
    /// Page cache, bytes.
    pub file: Option<u64>,
    /// Kernel memory (slab, stacks, page tables), bytes (5.18+).
    pub kernel: Option<u64>,
    /// Shared memory (tmpfs, shm), bytes.
    pub shmem: Option<u64>,
    /// Page cache modified and not yet written back, bytes.
    pub file_dirty: Option<u64>,
    /// Page cache being written back, bytes.
    pub file_writeback: Option<u64>,
    /// Page cache on the inactive list, bytes.
    pub inactive_file: Option<u64>,
    /// Page cache on the active list, bytes.
    pub active_file: Option<u64>,
    /// Page faults, count.
    pub pgfault: Option<u64>,
    /// Major page faults (read from storage), count.
    pub pgmajfault: Option<u64>,
    /// Evicted page-cache pages read back in, count.
    pub workingset_refault_file: Option<u64>,
}

/// Parses `memory.stat`.
pub fn parse_stat(text: &str) -> Result<MemoryStat, ParseError> {
    let mut out = MemoryStat::default();
    for (i, line) in text.lines().enumerate() {
        let mut f = fields(line);
        let Some(key) = f.next() else {
            continue;
        };
        let slot = match key {
            "anon" => &mut out.anon,
            "file" => &mut out.file,
            "kernel" => &mut out.kernel,
            "shmem" => &mut out.shmem,
            "file_dirty" => &mut out.file_dirty,
            "file_writeback" => &mut out.file_writeback,
            "inactive_file" => &mut out.inactive_file,
            "active_file" => &mut out.active_file,
            "pgfault" => &mut out.pgfault,
            "pgmajfault" => &mut out.pgmajfault,
            "workingset_refault_file" => &mut out.workingset_refault_file,
            _ => continue,
        };
        let err = |why: std::fmt::Arguments<'_>| ParseError::new(i + 1, line, why);
        let (Some(value), None) = (f.next(), f.next()) else {
            return Err(err(format_args!("expected `{key} <value>`")));
        };
        if slot.is_some() {
            return Err(err(format_args!("second `{key}` line")));
        }
        *slot = Some(parse_u64(value).ok_or_else(|| {
            err(format_args!(
                "{key} ({value:?}) is not an unsigned 64-bit integer"
            ))
        })?);
    }
    Ok(out)
}

/// Parses `memory.current`: bytes.
pub fn parse_current(text: &str) -> Result<u64, ParseError> {
    single_u64(text, "memory.current")
}

/// Parses `memory.peak`: bytes (5.19+).
pub fn parse_peak(text: &str) -> Result<u64, ParseError> {
    single_u64(text, "memory.peak")
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn read(dir: &str, name: &str) -> String {
        let path = format!(
            "{}/fixtures/cgroup/{dir}/{name}",
            env!("CARGO_MANIFEST_DIR")
        );
        std::fs::read_to_string(path).expect("fixture")
    }

    #[test]
    fn snapshot_real_fixtures() {
        insta::glob!("../../../fixtures/cgroup/memory-stat", "*.txt", |path| {
            let text = std::fs::read_to_string(path).expect("fixture");
            let parsed = parse_stat(&text);
            assert!(parsed.is_ok(), "{}: {parsed:?}", path.display());
            insta::assert_debug_snapshot!(parsed);
        });
        insta::glob!("../../../fixtures/cgroup/memory-value", "*.txt", |path| {
            let text = std::fs::read_to_string(path).expect("fixture");
            let parsed = parse_current(&text);
            assert!(parsed.is_ok(), "{}: {parsed:?}", path.display());
            // The bytes as the kernel printed them take the per-job collector's byte form.
            assert_eq!(
                super::super::single_u64_kernel(text.as_bytes()).ok_or(()),
                parsed.clone().map_err(|_| ()),
                "{}",
                path.display()
            );
            insta::assert_debug_snapshot!(parsed);
        });
    }

    #[test]
    fn facts_per_fixture() {
        let t = parse_stat(&read("memory-stat", "telegraf-v2-96-cpu-host-slab-2gb.txt"))
            .expect("parses");
        assert_eq!(t.anon, Some(2_471_755_776));
        assert_eq!(t.file, Some(8_532_865_024));
        assert_eq!(t.file_dirty, Some(319_488));
        assert_eq!(t.pgmajfault, Some(8497));
        assert_eq!(t.workingset_refault_file, Some(629_356));
        // the two LRU lists hold all but a few pages of `file`
        let lists = t.inactive_file.zip(t.active_file).map(|(a, b)| a + b);
        assert_eq!(lists, Some(8_532_860_928));
        assert!(lists <= t.file);

        let s =
            parse_stat(&read("memory-stat", "cgroup-exporter-slurm-job_4.txt")).expect("parses");
        assert_eq!(
            (s.anon, s.file, s.kernel),
            (Some(2_260_992), Some(516_096), Some(2_756_608))
        );

        let cur = parse_current(&read(
            "memory-value",
            "cgroup-exporter-slurm-job_4-memory.current.txt",
        ));
        let peak = parse_peak(&read(
            "memory-value",
            "cgroup-exporter-slurm-job_4-memory.peak.txt",
        ));
        assert_eq!((cur, peak), (Ok(5_660_672), Ok(7_229_440)));
        let cur = parse_current(&read("memory-value", "telegraf-v2-memory.current-13gb.txt"));
        let peak = parse_peak(&read("memory-value", "telegraf-v2-memory.peak-87gb.txt"));
        assert_eq!((cur, peak), (Ok(13_071_106_048), Ok(87_302_021_120)));
    }

    #[test]
    fn errors() {
        let e = parse_stat("anon 1\nfile x\n").expect_err("bad value");
        assert_eq!(
            (e.line, e.reason.as_str()),
            (2, "file (\"x\") is not an unsigned 64-bit integer")
        );
        let e = parse_stat("anon 1\nanon 2\n").expect_err("twice");
        assert_eq!((e.line, e.reason.as_str()), (2, "second `anon` line"));
        let e = parse_stat("anon\n").expect_err("cut");
        assert_eq!((e.line, e.reason.as_str()), (1, "expected `anon <value>`"));
        assert_eq!(
            parse_stat("zswapped 5\nnew_key x y\n"),
            Ok(MemoryStat::default())
        );
        assert_eq!(
            parse_peak("").map_err(|e| e.reason),
            Err("memory.peak is empty".to_owned())
        );
    }

    proptest! {
        #[test]
        fn never_panics(text in "\\PC{0,300}") {
            let _ = parse_stat(&text);
            let _ = parse_current(&text);
        }
    }
}
