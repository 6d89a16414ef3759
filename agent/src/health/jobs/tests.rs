//! The arithmetic checked against numbers worked out by hand (in the comments).

use super::*;
use crate::sources::cgroup::io_stat::IoDevice;
use crate::sources::cgroup::{cpu_max, cpuset, io_stat};
use crate::sources::pressure;
use proptest::prelude::*;

const S: u64 = 1_000_000; // µs per second

fn close(a: Option<f64>, b: f64) -> bool {
    a.is_some_and(|a| (a - b).abs() < 1e-9)
}

fn cpu(usage: u64) -> Option<CpuStat> {
    Some(CpuStat {
        usage_usec: usage,
        ..CpuStat::default()
    })
}

fn io(text: &str) -> Option<Vec<IoCounters>> {
    let rows = io_stat::parse(text);
    assert_eq!(rows.errors, vec![]);
    Some(rows.rows.iter().map(IoCounters::from).collect())
}

fn psi(text: &str) -> Option<Pressure> {
    Some(pressure::parse(text).expect("valid"))
}

fn fixture(path: &str) -> String {
    std::fs::read_to_string(format!(
        "{}/fixtures/cgroup/{path}",
        env!("CARGO_MANIFEST_DIR")
    ))
    .expect("fixture")
}

#[test]
fn cores_are_the_smallest_figure_that_applies() {
    let max = cpu_max::parse("max 100000").expect("valid");
    let two = cpu_max::parse("200000 100000").expect("valid");
    let four = cpu_max::parse("400000 100000").expect("valid");
    let eight_cpus = cpuset::parse("0-3,8-11").expect("valid");
    let host = cpuset::parse("0-95").expect("valid");
    let one = cpuset::parse("0").expect("valid");
    let empty = cpuset::CpuSet::default();
    let c = |s, m, set, w| allocated_cores(s, m, set, w).map(|c| (c.cores, c.from));

    // Slurm ConstrainCores: the cpuset; the default weight 100 means nothing for Slurm.
    assert_eq!(
        c(BatchSystem::Slurm, Some(&max), Some(&eight_cpus), Some(100)),
        Some((8.0, CoresFrom::Cpuset))
    );
    assert_eq!(
        c(BatchSystem::Slurm, Some(&max), Some(&one), Some(100)),
        Some((1.0, CoresFrom::Cpuset))
    );
    // HTCondor: 800 / 100 = 8 cores, well under the 96-CPU cpuset of the whole machine.
    assert_eq!(
        c(BatchSystem::Htcondor, Some(&max), Some(&host), Some(800)),
        Some((8.0, CoresFrom::HtcondorCpuWeight))
    );
    // A container limited to 2 CPUs on 4: the quota.
    let four_cpus = cpuset::parse("0-3").expect("valid");
    assert_eq!(
        c(BatchSystem::Glob, Some(&two), Some(&four_cpus), None),
        Some((2.0, CoresFrom::CpuMax))
    );
    // Equal figures: cpu.max is named.
    assert_eq!(
        c(BatchSystem::Glob, Some(&four), Some(&four_cpus), None),
        Some((4.0, CoresFrom::CpuMax))
    );
    // Nothing that says: no efficiency rather than a guess.
    assert_eq!(c(BatchSystem::Slurm, Some(&max), None, Some(100)), None);
    assert_eq!(c(BatchSystem::Glob, None, Some(&empty), None), None);

    // Real files: telegraf's 48-CPU quota on its 96-CPU cpuset.
    let m = cpu_max::parse(&fixture(
        "cpu-max/telegraf-v2-48-cpu-quota-4800000-100000.txt",
    ))
    .expect("valid");
    let s = cpuset::parse(&fixture("cpuset/telegraf-v2-cpus.effective-0-95.txt")).expect("valid");
    assert_eq!(
        c(BatchSystem::Glob, Some(&m), Some(&s), Some(79)),
        Some((48.0, CoresFrom::CpuMax))
    );
}

#[test]
fn efficiency_by_hand() {
    // 36 s of CPU in 10 s on 8 cores: 36 / 80 = 0.45.
    assert!(close(cpu_efficiency(36 * S, 10 * S, 8.0), 0.45));
    // 1.5 s in 2 s on half a core (cpu.max 50000 100000): 1.5 / 1 = 1.5 — not clamped.
    assert!(close(cpu_efficiency(1_500_000, 2 * S, 0.5), 1.5));
    assert_eq!(cpu_efficiency(1, 0, 1.0), None);
    assert_eq!(cpu_efficiency(1, S, 0.0), None);
    assert_eq!(cpu_efficiency(1, S, f64::NAN), None);
}

#[test]
fn pressure_share_by_hand() {
    let line = |total_us| pressure::PsiLine {
        total_us,
        ..Default::default()
    };
    // 6.5 s stalled in 10 s.
    assert!(close(
        pressure_share(Some(&line(5_000_000)), &line(11_500_000), 10 * S),
        0.65
    ));
    // A hair over the interval: 1, not 1.00001.
    assert!(close(
        pressure_share(Some(&line(0)), &line(10_000_100), 10 * S),
        1.0
    ));
    assert_eq!(pressure_share(Some(&line(7)), &line(3), S), None, "reset");
    assert_eq!(pressure_share(None, &line(3), 0), None);
}

fn start() -> JobReading {
    JobReading {
        at_usec: 100 * S,
        cpu: cpu(1_000_000_000),
        io: io("8:0 rbytes=1000 wbytes=0 rios=1 wios=0 dbytes=0 dios=0\n\
                8:16 rbytes=0 wbytes=10000 rios=0 wios=3 dbytes=0 dios=0\n\
                253:0 rbytes=1 wbytes=1 rios=1 wios=1 dbytes=0 dios=0\n"),
        io_pressure: psi("some avg10=0.00 avg60=0.00 avg300=0.00 total=5000000\n\
                          full avg10=0.00 avg60=0.00 avg300=0.00 total=4000000\n"),
        cpu_pressure: psi("some avg10=0.00 avg60=0.00 avg300=0.00 total=100\n"),
        memory_pressure: psi("some avg10=0.00 avg60=0.00 avg300=0.00 total=7\n\
                              full avg10=0.00 avg60=0.00 avg300=0.00 total=7\n"),
        memory_current: Some(1 << 30),
        memory_peak: Some(2 << 30),
        cores: Some(Cores {
            cores: 8.0,
            from: CoresFrom::Cpuset,
        }),
        ..JobReading::default()
    }
}

fn end() -> JobReading {
    JobReading {
        at_usec: 110 * S,
        cpu: cpu(1_036_000_000),
        // 8:0 read 50 MiB more; 8:16's write counter went backwards; 259:0 is new;
        // 253:0 is gone.
        io: io(
            "8:0 rbytes=52429800 wbytes=0 rios=401 wios=0 dbytes=0 dios=0\n\
                8:16 rbytes=0 wbytes=5000 rios=0 wios=5 dbytes=0 dios=0\n\
                259:0 rbytes=4096 wbytes=0 rios=1 wios=0\n",
        ),
        io_pressure: psi("some avg10=0.00 avg60=0.00 avg300=0.00 total=11500000\n\
                          full avg10=0.00 avg60=0.00 avg300=0.00 total=6000000\n"),
        cpu_pressure: psi("some avg10=0.00 avg60=0.00 avg300=0.00 total=1000100\n"),
        memory_pressure: psi("some avg10=0.00 avg60=0.00 avg300=0.00 total=3\n\
                              full avg10=0.00 avg60=0.00 avg300=0.00 total=9\n"),
        memory_current: Some(3 << 30),
        memory_peak: Some(4 << 30),
        ..start()
    }
}

#[test]
fn a_job_through_the_interval() {
    let j = interval(Some(&start()), Some(&end()), 100 * S).expect("seen");
    assert_eq!(j.presence, Presence::Throughout);
    assert_eq!((j.wall_usec, j.wall_is_upper_bound), (10 * S, false));
    // 1_036_000_000 - 1_000_000_000 = 36 s of CPU on 8 cores in 10 s: 0.45.
    assert_eq!(j.cpu_usec, Some(36 * S));
    assert!(close(j.efficiency, 0.45));
    assert_eq!(j.cores.map(|c| c.from), Some(CoresFrom::Cpuset));

    let devs: Vec<(u32, u32)> = j.io.iter().map(|d| (d.major, d.minor)).collect();
    assert_eq!(devs, [(8, 0), (8, 16), (259, 0)], "253:0 is gone: no rates");
    let sda = j.io[0];
    // (52_429_800 - 1000) / 10 = 5_242_880 B/s = 5 MiB/s; (401 - 1) / 10 = 40 reads/s.
    assert!(close(sda.read_bytes_per_s, 5_242_880.0));
    assert!(close(sda.reads_per_s, 40.0));
    assert!(close(sda.write_bytes_per_s, 0.0));
    let sdb = j.io[1];
    assert_eq!(sdb.write_bytes_per_s, None, "counter went down");
    assert!(close(sdb.writes_per_s, 0.2));
    let nvme = j.io[2];
    // New device: its counters since zero, 4096 / 10.
    assert!(close(nvme.read_bytes_per_s, 409.6));
    assert_eq!(
        (nvme.discard_bytes_per_s, nvme.discards_per_s),
        (None, None),
        "pre-5.0 line"
    );

    // io: (11.5 - 5) / 10 = 0.65 some, (6 - 4) / 10 = 0.2 full.
    assert!(close(j.io_pressure.some, 0.65));
    assert!(close(j.io_pressure.full, 0.2));
    // cpu: (1_000_100 - 100) / 10 s = 0.1; no full line before 5.13.
    assert!(close(j.cpu_pressure.some, 0.1));
    assert_eq!(j.cpu_pressure.full, None);
    // memory some went backwards (7 -> 3): none; full 7 -> 9: 2 µs in 10 s.
    assert_eq!(j.memory_pressure.some, None);
    assert!(close(j.memory_pressure.full, 2e-7));
    assert_eq!(
        (j.memory_current, j.memory_peak),
        (Some(3 << 30), Some(4 << 30))
    );
}

#[test]
fn a_job_that_appeared_or_vanished() {
    let new = JobReading {
        at_usec: 110 * S,
        created_usec: Some(104 * S),
        cpu: cpu(3 * S),
        io: io("8:0 rbytes=6000000 wbytes=0 rios=6 wios=0 dbytes=0 dios=0\n"),
        io_pressure: psi("some avg10=0.00 avg60=0.00 avg300=0.00 total=1200000\n"),
        cores: Some(Cores {
            cores: 1.0,
            from: CoresFrom::HtcondorCpuWeight,
        }),
        ..JobReading::default()
    };
    // Created 6 s before the reading: 3 s of CPU on 1 core in 6 s = 0.5; 6 MB in 6 s.
    let j = interval(None, Some(&new), 100 * S).expect("seen");
    assert_eq!(j.presence, Presence::Appeared);
    assert_eq!((j.wall_usec, j.wall_is_upper_bound), (6 * S, false));
    assert!(close(j.efficiency, 0.5));
    assert!(close(j.io[0].read_bytes_per_s, 1_000_000.0));
    assert!(close(j.io_pressure.some, 0.2));

    // Creation time unknown: it ran at most the 10 s since the interval began, so at least
    // 3 / 10 = 0.3.
    let unknown = JobReading {
        created_usec: None,
        ..new.clone()
    };
    let j = interval(None, Some(&unknown), 100 * S).expect("seen");
    assert_eq!((j.wall_usec, j.wall_is_upper_bound), (10 * S, true));
    assert!(close(j.efficiency, 0.3));

    let gone = interval(Some(&start()), None, 100 * S).expect("seen");
    assert_eq!(gone.presence, Presence::Vanished);
    assert_eq!(
        (gone.wall_usec, gone.cpu_usec, gone.efficiency),
        (0, None, None)
    );
    assert!(gone.io.is_empty());
    assert_eq!(interval(None, None, 0), None);
}

#[test]
fn an_unreadable_file_at_the_start_leaves_no_baseline() {
    let before = JobReading {
        cpu: None,
        io: None,
        io_pressure: None,
        ..start()
    };
    let j = interval(Some(&before), Some(&end()), 100 * S).expect("seen");
    assert_eq!((j.cpu_usec, j.efficiency), (None, None));
    assert!(j.io.is_empty());
    assert_eq!(j.io_pressure, PressureShares::default());
    // The others still count.
    assert!(close(j.cpu_pressure.some, 0.1));
}

#[test]
fn the_node_by_hand() {
    let through = interval(Some(&start()), Some(&end()), 100 * S).expect("seen");
    let new = JobReading {
        at_usec: 110 * S,
        created_usec: Some(104 * S),
        cpu: cpu(3 * S),
        io_pressure: psi("some avg10=0.00 avg60=0.00 avg300=0.00 total=600000\n"),
        cores: Some(Cores {
            cores: 1.0,
            from: CoresFrom::Cpuset,
        }),
        ..JobReading::default()
    };
    let appeared = interval(None, Some(&new), 100 * S).expect("seen");
    let gone = interval(Some(&start()), None, 100 * S).expect("seen");
    let n = node_jobs(&[appeared, gone, through], 5);
    assert_eq!(n.jobs, 3);
    // (3 + 36) s of CPU over (6 s × 1 + 10 s × 8) = 39 / 86.
    assert!(close(n.efficiency, 39.0 / 86.0));
    // stalled: 0.1 × 6 s + 0.65 × 10 s = 7.1 s of 16 s of job time = 0.44375.
    assert!(close(n.io_stalled_share, 0.44375));
    assert_eq!(n.top_by_io_stall, [2, 0]);
    assert_eq!(node_jobs(&[], 5), NodeJobs::default());
    assert_eq!(
        node_jobs(&[through_clone()], 0).top_by_io_stall,
        Vec::<usize>::new()
    );
}

fn through_clone() -> JobInterval {
    interval(Some(&start()), Some(&end()), 100 * S).expect("seen")
}

/// A hand-made interval for the node's figures: `wall_s`, `cpu_s` and `cores`, io `some` and
/// `full` shares.
fn job_iv(
    presence: Presence,
    wall_s: u64,
    cpu_s: Option<u64>,
    cores: Option<f64>,
    some: Option<f64>,
    full: Option<f64>,
) -> JobInterval {
    JobInterval {
        presence,
        wall_usec: wall_s * S,
        wall_is_upper_bound: false,
        cpu_usec: cpu_s.map(|c| c * S),
        cores: cores.map(|cores| Cores {
            cores,
            from: CoresFrom::Cpuset,
        }),
        efficiency: None,
        io: Vec::new(),
        io_pressure: PressureShares { some, full },
        cpu_pressure: PressureShares::default(),
        memory_pressure: PressureShares::default(),
        memory_current: None,
        memory_peak: None,
        // batch jobs, in their parent: a glob's job is made by hand where a test needs one
        in_parent: true,
    }
}

/// One 10 s interval: two jobs through it, one that appeared 5 s before its end, two that
/// vanished (one with 4 cores, one whose cores were never read).
fn node_intervals() -> Vec<JobInterval> {
    use Presence::{Appeared, Throughout, Vanished};
    vec![
        job_iv(Throughout, 10, Some(15), Some(2.0), Some(0.5), Some(0.1)),
        job_iv(Vanished, 0, None, Some(4.0), None, None),
        job_iv(Throughout, 10, Some(5), Some(1.0), Some(0.25), Some(0.3)),
        job_iv(Appeared, 5, Some(2), Some(1.0), Some(0.8), Some(0.6)),
        job_iv(Vanished, 0, None, None, None, None),
    ]
}

#[test]
fn the_node_figures_by_hand() {
    let ivs = node_intervals();
    let fig = |parents: Option<u64>, threshold: f64, top: usize| {
        node_figures(ivs.iter(), 20.0 * S as f64, parents, 10 * S, threshold, top)
    };
    let n = fig(None, 25.0, 10);
    // CPU of the jobs read: 15 + 5 + 2 = 22 s.
    assert_eq!(n.cpu_usec, 22 * S);
    // Capacity: 20 (dropped) + 10 s × 2 + 10 s × 1 + 5 s × 1 + 10 s (the whole interval) × 4
    // (the vanished job) = 95 core-seconds; the vanished job without cores adds none.
    // 22 / 95.
    assert!(close(n.efficiency, 22.0 / 95.0));
    // some, wall-weighted: (0.5 × 10 + 0.25 × 10 + 0.8 × 5) / 25 = 11.5 / 25 = 0.46.
    assert!(close(n.io_some, 0.46));
    // full, wall-weighted: (0.1 × 10 + 0.3 × 10 + 0.6 × 5) / 25 = 7 / 25 = 0.28 (not the
    // plain mean, 1.0 / 3).
    assert!(close(n.io_full, 0.28));
    // At or above 25 %: 50, 25 (equal counts) and 80 = 3 jobs.
    assert_eq!(n.stalled, 3);
    // Ranked 0.8 (index 3), 0.5 (index 0), 0.25 (index 2): the vanished index 1 is skipped,
    // the indexes are those of the intervals given.
    assert_eq!(n.ranked, [3, 0, 2]);
    assert_eq!(fig(None, 25.0, 2).ranked, [3, 0]);
    // Threshold 50: 50 (equal) and 80 = 2 jobs; 50.5: 80 only = 1.
    assert_eq!(fig(None, 50.0, 10).stalled, 2);
    assert_eq!(fig(None, 50.5, 10).stalled, 1);
    // The parents' 30 s win over the jobs' 22 s: 30 / 95.
    let p = fig(Some(30 * S), 25.0, 10);
    assert_eq!(p.cpu_usec, 30 * S);
    assert!(close(p.efficiency, 30.0 / 95.0));
    // The parents' 10 s lose to the jobs' 22 s: 22 / 95, as without them.
    let p = fig(Some(10 * S), 25.0, 10);
    assert_eq!(p.cpu_usec, 22 * S);
    assert!(close(p.efficiency, 22.0 / 95.0));
}

#[test]
fn a_glob_jobs_cpu_adds_to_the_parents_not_the_larger_of_the_two() {
    use Presence::Throughout;
    // A batch job (7 s) in its parent, whose 20 s hold it and a job that ended; a container
    // found by a glob beside the parent used 9 s: 29 s in all, not max(20, 16) = 20.
    let mut container = job_iv(Throughout, 10, Some(9), Some(1.0), None, None);
    container.in_parent = false;
    let ivs = [
        job_iv(Throughout, 10, Some(7), Some(1.0), None, None),
        container,
    ];
    let n = node_figures(ivs.iter(), 0.0, Some(20 * S), 10 * S, 20.0, 10);
    assert_eq!(n.cpu_usec, 29 * S);
    assert!(close(n.efficiency, 29.0 / 20.0));
    // Without a parent read at both ends: the jobs read, 16 s.
    let n = node_figures(ivs.iter(), 0.0, None, 10 * S, 20.0, 10);
    assert_eq!(n.cpu_usec, 16 * S);
}

#[test]
fn a_vanished_jobs_cores_are_capacity_over_the_whole_interval() {
    let gone = [job_iv(Presence::Vanished, 0, None, Some(4.0), None, None)];
    // 4 cores over 10 s = 40 core-seconds; the parents' 20 s of CPU over it = 0.5.
    let n = node_figures(gone.iter(), 0.0, Some(20 * S), 10 * S, 20.0, 10);
    assert_eq!(n.cpu_usec, 20 * S);
    assert!(close(n.efficiency, 0.5));
    // Over a 20 s interval: 80 core-seconds, 20 / 80 = 0.25.
    let n = node_figures(gone.iter(), 0.0, Some(20 * S), 20 * S, 20.0, 10);
    assert!(close(n.efficiency, 0.25));
    // No job present: no shares, nothing stalled or ranked.
    assert_eq!((n.io_some, n.io_full, n.stalled), (None, None, 0));
    assert!(n.ranked.is_empty());
    // Nothing at all: no capacity, no efficiency.
    let none = node_figures([].iter(), 0.0, None, 10 * S, 20.0, 10);
    assert_eq!(none, NodeFigures::default());
}

proptest! {
    #[test]
    fn never_panics_nor_goes_negative(
        prev_usage in any::<u64>(), cur_usage in any::<u64>(),
        at0 in any::<u64>(), at1 in any::<u64>(), created in proptest::option::of(any::<u64>()),
        cores in proptest::option::of(-1.0f64..1e6),
        r0 in any::<u64>(), r1 in any::<u64>(), t0 in any::<u64>(), t1 in any::<u64>(),
    ) {
        let mk = |at, usage, rbytes, total| JobReading {
            at_usec: at,
            created_usec: created,
            cpu: cpu(usage),
            io: Some(vec![IoCounters::from(&IoDevice { major: 8, minor: 0, rbytes: Some(rbytes), ..IoDevice::default() })]),
            io_pressure: Some(Pressure { some: Some(pressure::PsiLine { total_us: total, ..Default::default() }), full: None }),
            cores: cores.map(|c| Cores { cores: c, from: CoresFrom::CpuMax }),
            ..JobReading::default()
        };
        let (p, c) = (mk(at0, prev_usage, r0, t0), mk(at1, cur_usage, r1, t1));
        for j in [interval(Some(&p), Some(&c), at0), interval(None, Some(&c), at0), interval(Some(&p), None, at0)].into_iter().flatten() {
            prop_assert!(j.efficiency.is_none_or(|e| e >= 0.0 && e.is_finite()));
            prop_assert!(j.io.iter().all(|d| d.read_bytes_per_s.is_none_or(|r| r >= 0.0)));
            prop_assert!(j.io_pressure.some.is_none_or(|s| (0.0..=1.0).contains(&s)));
        }
    }
}
