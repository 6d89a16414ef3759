//! The jobs pane of a worker node: one line for the node (jobs running, their CPU efficiency,
//! the share of their time stalled on I/O) under the health summary, and the jobs most stalled
//! on I/O, the worst first, in a table above the devices'. Both come from the last reading of
//! the job cgroups, which is taken once per report interval
//! ([`crate::collect::jobs`]): the pane changes every report interval, not every second.
//!
//! Reads from network storage (xrootd, NFS, CephFS) are not in a job's rkB/s; a job waiting on
//! them shows as low efficiency and, for NFS and CephFS, as I/O stall.

use crate::collect::{JobNow, JobsNow, Live};

use super::table::{num, text, Cell, Row, Table, Tail};

/// The node's line, when job cgroups were read.
pub(super) fn node_line(live: &Live) -> Option<String> {
    let j = live.jobs.as_ref()?;
    let pct = |v: Option<f64>| v.map_or_else(|| "-".to_owned(), |v| format!("{v:.1}%"));
    let what = if j.count == 1 { "job" } else { "jobs" };
    let mut s = format!(
        "jobs: {} {what}, CPU efficiency {}, I/O stall {}",
        j.count,
        pct(j.cpu_efficiency_pct),
        pct(j.io_stall_pct)
    );
    if j.stalled > 0 {
        s.push_str(&format!(", {} stalled", j.stalled));
    }
    Some(s)
}

/// The jobs of the table: those stalled on I/O at all, the worst first (the collector ranks
/// them).
pub(super) fn ranked(live: &Live) -> Vec<&JobNow> {
    live.jobs
        .as_ref()
        .map(|j: &JobsNow| {
            j.top
                .iter()
                .filter(|r| r.io_some_pct.is_some_and(|s| s > 0.0))
                .collect()
        })
        .unwrap_or_default()
}

/// The table of `jobs`; one at or above `[jobs] stall_threshold_pct` is flagged `STALL`.
pub(super) fn table(live: &Live, jobs: &[&JobNow]) -> Table {
    let threshold_pct = live.jobs.as_ref().map_or(100.0, |j| j.stall_threshold_pct);
    let cols = vec![
        text("batch", 8, 6),
        num("%iowait", 8, 1),
        num("%eff", 7, 1),
        num("cores", 6, 3),
        num("rMB/s", 8, 2),
        num("wMB/s", 8, 2),
        num("memMB", 8, 4),
    ];
    let rows = jobs
        .iter()
        .map(|j| {
            let stalled = j.io_some_pct.is_some_and(|s| s >= threshold_pct);
            Row {
                key: j.label.clone(),
                cells: vec![
                    Cell::text(j.batch),
                    Cell::opt(j.io_some_pct, 1),
                    Cell::opt(j.cpu_efficiency_pct, 1),
                    Cell::opt(j.cores, 1),
                    Cell::Num(j.read_bytes_per_s / 1e6, 2),
                    Cell::Num(j.write_bytes_per_s / 1e6, 2),
                    Cell::opt(j.memory_current_bytes.map(|b| b as f64 / 1e6), 0),
                ],
                tail: if stalled {
                    vec![("STALL".to_owned(), true)]
                } else {
                    Vec::new()
                },
            }
        })
        .collect();
    Table {
        key_head: "Job",
        key_max: 20,
        cols,
        tail: Some(Tail {
            head: "flag",
            reserve: usize::MAX,
            sep: " ",
        }),
        rows,
    }
}

#[cfg(test)]
mod tests {
    use super::super::{render, table::width_of, View};
    use super::*;
    use crate::collect::DiskNow;
    use crate::rates::DiskRates;
    use crate::sources::sysblock::DeviceKind;

    fn job(label: &str, batch: &'static str, io: f64, eff: f64, cores: f64) -> JobNow {
        JobNow {
            batch,
            job: label.to_owned(),
            label: label.to_owned(),
            io_some_pct: Some(io),
            cpu_efficiency_pct: Some(eff),
            cores: Some(cores),
            read_bytes_per_s: 181_000_000.0 * io / 100.0,
            write_bytes_per_s: 2_500_000.0,
            memory_current_bytes: Some(3_900_000_000),
        }
    }

    /// A 24-slot worker node staging input from a saturated local disk: three jobs stalled,
    /// nine waiting a little, the rest not at all (not in the table).
    fn node() -> Live {
        let mut top: Vec<JobNow> = (0..12)
            .map(|i| {
                let io = [
                    71.5, 64.0, 22.25, 12.0, 9.5, 7.0, 5.0, 3.0, 2.0, 1.0, 0.5, 0.0,
                ][i];
                job(&format!("slot1_{}", i + 1), "htcondor", io, 95.0 - io, 8.0)
            })
            .collect();
        top.truncate(crate::collect::jobs::TOP_JOBS);
        let disks = (0..6)
            .map(|i| DiskNow {
                device: format!("sd{}", char::from(b'a' + i)),
                name: format!("sd{}", char::from(b'a' + i)),
                kind: DeviceKind::Disk,
                rates: DiskRates {
                    r_per_s: 900.0 - f64::from(i) * 100.0,
                    rkb_per_s: 180_000.0,
                    util_pct: 100.0 - f64::from(i) * 15.0,
                    ..DiskRates::default()
                },
            })
            .collect();
        Live {
            disks,
            jobs: Some(JobsNow {
                count: 24,
                cpu_efficiency_pct: Some(71.234),
                io_stall_pct: Some(18.5),
                stalled: 3,
                stall_threshold_pct: 20.0,
                top,
            }),
            ..Live::default()
        }
    }

    fn screen(live: &Live, cols: usize, rows: Option<usize>) -> String {
        let s = render(
            "wn042",
            live,
            View {
                width: cols,
                height: rows,
                ..View::default()
            },
        );
        for l in s.lines() {
            assert!(width_of(l) <= cols, "{cols} columns: {l:?}\n{s}");
        }
        if let Some(rows) = rows {
            // the title stays even on a screen of no height
            assert!(s.lines().count() <= rows.max(1), "{rows} rows:\n{s}");
        }
        // the title on row 1 (cut to the width)
        let title = s.lines().next().unwrap_or_default();
        assert!(
            ["storwatch top", "wn042"]
                .iter()
                .any(|t| t.starts_with(title.trim_end_matches('…')) || title.starts_with(t)),
            "{s}"
        );
        s
    }

    #[test]
    fn a_worker_node_shows_its_jobs_line_and_the_most_stalled_jobs_first() {
        let live = node();
        let s = screen(&live, 200, None);
        assert!(s.contains("jobs: 24 jobs, CPU efficiency 71.2%, I/O stall 18.5%, 3 stalled"));
        let first = s.find("slot1_1 ").expect("slot1_1");
        let second = s.find("slot1_2 ").expect("slot1_2");
        assert!(first < second, "{s}");
        // the stalled ones flagged; a job not waiting at all is not in the table
        assert_eq!(s.matches("STALL").count(), 3, "{s}");
        assert!(!s.contains("slot1_12"), "{s}");
        insta::assert_snapshot!("jobs_200", s);
        insta::assert_snapshot!("jobs_80x24", screen(&live, 80, Some(24)));
    }

    #[test]
    fn no_screen_is_too_small_for_the_pane() {
        let live = node();
        for rows in 0..40 {
            for cols in [1, 20, 40, 80, 132] {
                screen(&live, cols, Some(rows));
            }
        }
        // no jobs read: no line, no table
        let s = screen(&Live::default(), 80, Some(24));
        assert!(!s.contains("jobs:"), "{s}");
    }
}
