//! Per-job CPU efficiency and I/O stall over a report interval, from two readings of a job's
//! cgroup v2 files ([`crate::sources::cgroup`]). No I/O: the collector reads, this computes.
//!
//! * **Allocated cores** ([`allocated_cores`]): the smallest of the figures that apply —
//!   `cpu.max` quota ÷ period (a hard limit), the number of CPUs in `cpuset.cpus.effective`
//!   (Slurm's `ConstrainCores=yes` puts the job's cores there), and for HTCondor jobs
//!   `cpu.weight` ÷ 100 (HTCondor writes 100 × the slot's `Cpus`,
//!   `src/condor_starter.V6.1/vanilla_proc.cpp`). [`Cores::from`] says which one was used.
//!   A weight is a share, not a limit: an HTCondor job on an idle machine can run above 100 %.
//! * **CPU efficiency** ([`cpu_efficiency`]): Δ`usage_usec` ÷ (Δwall × allocated cores), as a
//!   fraction (0.5 = half the allocated cores busy); not clamped.
//! * **I/O rates** ([`io_rates`]): per device, the deltas of `io.stat`'s counters per second. A
//!   device line absent from the earlier reading had zero counters (the kernel prints a device
//!   once it has done I/O), and so did the counters missing from a line holding only a
//!   controller's keys. A counter that went down (a device removed and added again, a cgroup
//!   recreated under the same name) gives no rate, never a negative or a wrapped one.
//! * **Pressure share** ([`pressure_share`]): Δ`total` ÷ Δwall of a `*.pressure` line, the share
//!   of the interval in which some (or all) of the job's tasks were stalled. Clamped to 1:
//!   reading the file and the clock are not one instant, so a fully stalled job can come out a
//!   hair above.
//! * **A job that came or went** ([`interval`]): a job first seen in this interval started from
//!   zero counters, so its counters are its deltas, over the time since it was created (when
//!   known) or since the interval began ([`JobInterval::wall_usec`], an upper bound then, which
//!   makes its efficiency a lower bound). A job that vanished has no last reading: its rates
//!   are unknown, and the CPU time it used since its last reading is still in the batch
//!   system's parent cgroup's `cpu.stat`
//!   ([`crate::sources::cgroup::jobs::Discovery::parents`]).
//!
//! Reads from network storage (xrootd, NFS, CephFS) never show in `io.stat`: for those jobs,
//! low efficiency and `io.pressure` are the stall signal.

use crate::sources::cgroup::cpu_max::CpuMax;
use crate::sources::cgroup::cpu_stat::CpuStat;
use crate::sources::cgroup::cpuset::CpuSet;
use crate::sources::cgroup::io_stat::{IoCounters, DBYTES, DIOS, RBYTES, RIOS, WBYTES, WIOS};
use crate::sources::cgroup::jobs::BatchSystem;
use crate::sources::pressure::{Pressure, PsiLine};

/// Where the allocated cores came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CoresFrom {
    /// `cpu.max` quota ÷ period.
    CpuMax,
    /// The CPUs in `cpuset.cpus.effective`.
    Cpuset,
    /// HTCondor's `cpu.weight` ÷ 100.
    HtcondorCpuWeight,
}

/// The cores a job was given, and from which file.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Cores {
    /// Cores, possibly fractional (`cpu.max` 50000 100000 is 0.5).
    pub cores: f64,
    /// Which figure it is.
    pub from: CoresFrom,
}

/// The job's allocated cores: the smallest figure that applies; `None` when none does (no
/// quota, no cpuset, not HTCondor or no weight).
pub fn allocated_cores(
    system: BatchSystem,
    cpu_max: Option<&CpuMax>,
    cpuset: Option<&CpuSet>,
    cpu_weight: Option<u64>,
) -> Option<Cores> {
    let candidates = [
        cpu_max
            .and_then(CpuMax::cores)
            .map(|c| (c, CoresFrom::CpuMax)),
        cpuset
            .filter(|s| !s.is_empty())
            .map(|s| (s.count() as f64, CoresFrom::Cpuset)),
        cpu_weight
            .filter(|_| system == BatchSystem::Htcondor)
            .map(|w| (w as f64 / 100.0, CoresFrom::HtcondorCpuWeight)),
    ];
    candidates
        .into_iter()
        .flatten()
        .filter(|(c, _)| c.is_finite() && *c > 0.0)
        // First of equals wins: the order above is the preference.
        .fold(
            None,
            |best: Option<(f64, CoresFrom)>, (c, from)| match best {
                Some((b, _)) if b <= c => best,
                _ => Some((c, from)),
            },
        )
        .map(|(cores, from)| Cores { cores, from })
}

/// CPU efficiency: `cpu_usec` of CPU time over `wall_usec` of wall time on `cores` cores, as
/// a fraction. `None` for no wall time or no cores.
pub fn cpu_efficiency(cpu_usec: u64, wall_usec: u64, cores: f64) -> Option<f64> {
    if wall_usec == 0 || !cores.is_finite() || cores <= 0.0 {
        return None;
    }
    // A vanishingly small core count (a corrupt `cpu.max`) must not become infinity.
    Some(cpu_usec as f64 / (wall_usec as f64 * cores)).filter(|e| e.is_finite())
}

/// A counter's increase, `None` when it went down.
fn delta(prev: u64, cur: u64) -> Option<u64> {
    cur.checked_sub(prev)
}

/// Per-second rates of one device's `io.stat` counters over an interval.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct DeviceRates {
    /// Device major number.
    pub major: u32,
    /// Device minor number.
    pub minor: u32,
    /// Bytes read per second.
    pub read_bytes_per_s: Option<f64>,
    /// Bytes written per second.
    pub write_bytes_per_s: Option<f64>,
    /// Reads per second.
    pub reads_per_s: Option<f64>,
    /// Writes per second.
    pub writes_per_s: Option<f64>,
    /// Bytes discarded per second (5.0+).
    pub discard_bytes_per_s: Option<f64>,
    /// Discards per second (5.0+).
    pub discards_per_s: Option<f64>,
}

/// Rates per device between two `io.stat` readings `wall_usec` apart; `prev` is `None` for a
/// job first seen now (all counters from zero). Devices in `cur` order; a device only in `prev`
/// (removed) gets no rates.
pub fn io_rates(
    prev: Option<&[IoCounters]>,
    cur: &[IoCounters],
    wall_usec: u64,
) -> Vec<DeviceRates> {
    let mut out = Vec::new();
    io_rates_into(prev, cur, wall_usec, &mut out);
    out
}

/// [`io_rates`] into `out` (cleared): a vector reused from one interval to the next allocates
/// nothing.
pub fn io_rates_into(
    prev: Option<&[IoCounters]>,
    cur: &[IoCounters],
    wall_usec: u64,
    out: &mut Vec<DeviceRates>,
) {
    out.clear();
    if wall_usec == 0 {
        return;
    }
    let secs = wall_usec as f64 / 1e6;
    for c in cur {
        let p = prev.and_then(|p| p.iter().find(|p| (p.major, p.minor) == (c.major, c.minor)));
        let rate = |i: usize| {
            let now = c.get(i)?;
            let before = p.and_then(|p| p.get(i)).unwrap_or(0);
            delta(before, now).map(|d| d as f64 / secs)
        };
        out.push(DeviceRates {
            major: c.major,
            minor: c.minor,
            read_bytes_per_s: rate(RBYTES),
            write_bytes_per_s: rate(WBYTES),
            reads_per_s: rate(RIOS),
            writes_per_s: rate(WIOS),
            discard_bytes_per_s: rate(DBYTES),
            discards_per_s: rate(DIOS),
        });
    }
}

/// Share of `wall_usec` stalled between two `total=` readings (µs), 0–1; `None` when the total
/// went down or there is no wall time. `prev` is `None` for a job first seen now.
pub fn pressure_share(prev: Option<&PsiLine>, cur: &PsiLine, wall_usec: u64) -> Option<f64> {
    if wall_usec == 0 {
        return None;
    }
    let d = delta(prev.map_or(0, |p| p.total_us), cur.total_us)?;
    Some((d as f64 / wall_usec as f64).min(1.0))
}

/// `some` and `full` shares of one pressure file over an interval.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct PressureShares {
    /// Share of the interval with at least one task stalled.
    pub some: Option<f64>,
    /// Share with all non-idle tasks stalled (`None` for `cpu` before 5.13).
    pub full: Option<f64>,
}

fn shares(prev: Option<&Pressure>, cur: Option<&Pressure>, wall_usec: u64) -> PressureShares {
    let Some(cur) = cur else {
        return PressureShares::default();
    };
    // A job seen before but whose earlier file was unreadable has no baseline: no share.
    let line = |now: Option<PsiLine>, before: Option<Option<PsiLine>>| {
        let now = now?;
        match before {
            Some(b) => pressure_share(Some(&b?), &now, wall_usec),
            None => pressure_share(None, &now, wall_usec),
        }
    };
    PressureShares {
        some: line(cur.some, prev.map(|p| p.some)),
        full: line(cur.full, prev.map(|p| p.full)),
    }
}

/// One reading of a job's files, taken at `at_usec` on a monotonic clock.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct JobReading {
    /// When the files were read, µs on a monotonic clock.
    pub at_usec: u64,
    /// When the job's cgroup was created on the same clock, if known.
    pub created_usec: Option<u64>,
    /// `cpu.stat`.
    pub cpu: Option<CpuStat>,
    /// `io.stat` device lines, their counters.
    pub io: Option<Vec<IoCounters>>,
    /// `cpu.pressure`.
    pub cpu_pressure: Option<Pressure>,
    /// `io.pressure`.
    pub io_pressure: Option<Pressure>,
    /// `memory.pressure`.
    pub memory_pressure: Option<Pressure>,
    /// `memory.current`, bytes.
    pub memory_current: Option<u64>,
    /// `memory.peak`, bytes (5.19+).
    pub memory_peak: Option<u64>,
    /// Allocated cores ([`allocated_cores`]).
    pub cores: Option<Cores>,
}

/// Whether a job lasted through the interval.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Presence {
    /// Seen at both ends.
    Throughout,
    /// First seen at the end: created within the interval.
    Appeared,
    /// Seen at the start only: ended within the interval.
    Vanished,
}

/// What a job did over one interval.
#[derive(Debug, Clone, PartialEq)]
pub struct JobInterval {
    /// Whether it lasted through.
    pub presence: Presence,
    /// Wall time the deltas cover, µs (0 for a vanished job).
    pub wall_usec: u64,
    /// Whether `wall_usec` runs from the interval's start because the job's creation time is
    /// unknown: the job ran for at most that long, and its efficiency is a lower bound.
    pub wall_is_upper_bound: bool,
    /// CPU time used, µs.
    pub cpu_usec: Option<u64>,
    /// The cores used for the efficiency.
    pub cores: Option<Cores>,
    /// CPU efficiency ([`cpu_efficiency`]).
    pub efficiency: Option<f64>,
    /// Block I/O rates per device.
    pub io: Vec<DeviceRates>,
    /// I/O pressure.
    pub io_pressure: PressureShares,
    /// CPU pressure.
    pub cpu_pressure: PressureShares,
    /// Memory pressure.
    pub memory_pressure: PressureShares,
    /// `memory.current` at the end, bytes.
    pub memory_current: Option<u64>,
    /// `memory.peak` at the end, bytes.
    pub memory_peak: Option<u64>,
    /// Whether a batch system's parent cgroup holds this job, so that the parent's CPU time
    /// has it already (HTCondor's and Slurm's jobs); a glob's job is beside them. Set by the
    /// caller ([`interval`] knows no layout); false from [`interval`].
    pub in_parent: bool,
}

/// A job's interval from its reading at the start (`prev`) and at the end (`cur`) of a report
/// interval that began at `start_usec`. `None` when the job was seen at neither end.
pub fn interval(
    prev: Option<&JobReading>,
    cur: Option<&JobReading>,
    start_usec: u64,
) -> Option<JobInterval> {
    interval_with(prev, cur, start_usec, Vec::new())
}

/// [`interval`], its device rates written into `io` (cleared first): the vector of an interval
/// already reported, so that a reading of many jobs allocates none. `io` is dropped when the
/// job was seen at neither end.
pub fn interval_with(
    prev: Option<&JobReading>,
    cur: Option<&JobReading>,
    start_usec: u64,
    mut io: Vec<DeviceRates>,
) -> Option<JobInterval> {
    let (presence, wall_usec, upper) = match (prev, cur) {
        (None, None) => return None,
        (Some(_), None) => (Presence::Vanished, 0, false),
        (Some(p), Some(c)) => (
            Presence::Throughout,
            c.at_usec.saturating_sub(p.at_usec),
            false,
        ),
        (None, Some(c)) => {
            let since = c.created_usec.unwrap_or(start_usec);
            (
                Presence::Appeared,
                c.at_usec.saturating_sub(since),
                c.created_usec.is_none(),
            )
        }
    };
    io.clear();
    let mut out = JobInterval {
        presence,
        wall_usec,
        wall_is_upper_bound: upper,
        cpu_usec: None,
        cores: None,
        efficiency: None,
        io,
        io_pressure: PressureShares::default(),
        cpu_pressure: PressureShares::default(),
        memory_pressure: PressureShares::default(),
        memory_current: None,
        memory_peak: None,
        in_parent: false,
    };
    let Some(c) = cur else {
        return Some(out);
    };
    // For a job seen throughout, a file unreadable at the start leaves no baseline: no delta
    // rather than a delta from zero. For a job that appeared, zero is the baseline.
    out.cpu_usec = match (prev.map(|p| p.cpu), c.cpu) {
        (None, Some(now)) => Some(now.usage_usec),
        (Some(Some(before)), Some(now)) => delta(before.usage_usec, now.usage_usec),
        _ => None,
    };
    out.cores = c.cores;
    out.efficiency = out
        .cpu_usec
        .zip(c.cores)
        .and_then(|(cpu, cores)| cpu_efficiency(cpu, wall_usec, cores.cores));
    if let Some(now) = &c.io {
        match prev.map(|p| p.io.as_deref()) {
            None => io_rates_into(None, now, wall_usec, &mut out.io),
            Some(Some(before)) => io_rates_into(Some(before), now, wall_usec, &mut out.io),
            Some(None) => {}
        }
    }
    let pair = |before: Option<&Option<Pressure>>, now: &Option<Pressure>| match before {
        Some(None) => PressureShares::default(),
        before => shares(before.and_then(Option::as_ref), now.as_ref(), wall_usec),
    };
    out.io_pressure = pair(prev.map(|p| &p.io_pressure), &c.io_pressure);
    out.cpu_pressure = pair(prev.map(|p| &p.cpu_pressure), &c.cpu_pressure);
    out.memory_pressure = pair(prev.map(|p| &p.memory_pressure), &c.memory_pressure);
    out.memory_current = c.memory_current;
    out.memory_peak = c.memory_peak;
    Some(out)
}

/// The node's jobs over one interval: what the jobs seen at either end did. A job that began
/// and ended between two readings is in none of them; the batch system's parent cgroup
/// (`Discovery::parents`), put through [`interval`] like a job, counts it.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct NodeJobs {
    /// Jobs counted.
    pub jobs: usize,
    /// Σ CPU time ÷ Σ (wall × cores) over the jobs with both: the node's job efficiency.
    pub efficiency: Option<f64>,
    /// Σ (io `some` share × wall) ÷ Σ wall over the jobs with an io `some` share: the share of
    /// job time stalled on I/O.
    pub io_stalled_share: Option<f64>,
    /// Indexes of the jobs by io `some` share, highest first (ties by index), at most `top`.
    pub top_by_io_stall: Vec<usize>,
}

/// Sums a node's job intervals; `top` bounds the ranking.
pub fn node_jobs(intervals: &[JobInterval], top: usize) -> NodeJobs {
    node_jobs_of(intervals.iter(), top)
}

/// [`node_jobs`] over intervals held elsewhere (the collector's, beside their jobs): no copy
/// of them. Indexes count the intervals given.
pub fn node_jobs_of<'a>(intervals: impl Iterator<Item = &'a JobInterval>, top: usize) -> NodeJobs {
    let (mut cpu, mut capacity, mut stalled, mut wall) = (0.0, 0.0, 0.0, 0.0);
    let mut ranked: Vec<(usize, f64)> = Vec::new();
    let mut jobs = 0;
    for (i, j) in intervals.enumerate() {
        jobs += 1;
        if let (Some(c), Some(cores)) = (j.cpu_usec, j.cores) {
            if j.wall_usec > 0 {
                cpu += c as f64;
                capacity += j.wall_usec as f64 * cores.cores;
            }
        }
        if let Some(s) = j.io_pressure.some {
            stalled += s * j.wall_usec as f64;
            wall += j.wall_usec as f64;
            ranked.push((i, s));
        }
    }
    ranked.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    NodeJobs {
        jobs,
        efficiency: (capacity > 0.0).then(|| cpu / capacity),
        io_stalled_share: (wall > 0.0).then(|| stalled / wall),
        top_by_io_stall: ranked.into_iter().take(top).map(|(i, _)| i).collect(),
    }
}

/// The node's figures over one report interval, for the `jobs` line and `top`.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct NodeFigures {
    /// All jobs' CPU time over the interval, µs.
    pub cpu_usec: u64,
    /// The node's job efficiency: CPU time ÷ capacity (Σ wall × cores).
    pub efficiency: Option<f64>,
    /// Share of job time stalled on I/O ([`NodeJobs::io_stalled_share`]).
    pub io_some: Option<f64>,
    /// The io `full` share weighted by wall time, as `io_some`.
    pub io_full: Option<f64>,
    /// Jobs whose io `some` share is at least the stall threshold.
    pub stalled: usize,
    /// Indexes into the intervals given of the jobs most stalled on I/O, worst first.
    pub ranked: Vec<usize>,
}

/// The node's figures over the intervals of one reading, vanished jobs' included (their
/// presence says which): `dropped_capacity_usec` is Σ wall × cores of the jobs not read (over
/// the cap), `parents_cpu_usec` the batch systems' parents' CPU time over the interval (`None`:
/// no parent read at both ends), `interval_usec` the interval's length, `stall_threshold_pct`
/// the threshold of `stalled`, `top` the bound of the ranking. [`NodeFigures::ranked`] indexes
/// the intervals given.
pub fn node_figures<'a>(
    intervals: impl Iterator<Item = &'a JobInterval> + Clone,
    dropped_capacity_usec: f64,
    parents_cpu_usec: Option<u64>,
    interval_usec: u64,
    stall_threshold_pct: f64,
    top: usize,
) -> NodeFigures {
    // The intervals of the jobs present at the end, where they are (no copy).
    let present = || {
        intervals
            .clone()
            .filter(|iv| iv.presence != Presence::Vanished)
    };
    let n = node_jobs_of(present(), top);
    // node_jobs ranks the present jobs; map back to indexes of `intervals`.
    let present_idx: Vec<usize> = intervals
        .clone()
        .enumerate()
        .filter(|(_, iv)| iv.presence != Presence::Vanished)
        .map(|(i, _)| i)
        .collect();
    let ranked = n
        .top_by_io_stall
        .iter()
        .filter_map(|i| present_idx.get(*i).copied())
        .collect();
    let (mut full, mut full_wall) = (0.0, 0.0);
    // CPU time of the jobs read: those a parent holds, and those beside every parent.
    let (mut cpu, mut cpu_beside, mut capacity) = (0u64, 0u64, dropped_capacity_usec);
    let mut stalled = 0;
    for j in present() {
        if let Some(f) = j.io_pressure.full {
            full += f * j.wall_usec as f64;
            full_wall += j.wall_usec as f64;
        }
        if j.io_pressure
            .some
            .is_some_and(|s| s * 100.0 >= stall_threshold_pct)
        {
            stalled += 1;
        }
        if let (Some(c), Some(cores)) = (j.cpu_usec, j.cores) {
            if j.wall_usec > 0 {
                if j.in_parent {
                    cpu += c;
                } else {
                    cpu_beside += c;
                }
                capacity += j.wall_usec as f64 * cores.cores;
            }
        }
    }
    // A job that ended in the interval ran from the last reading that saw it until at most
    // this one: its cores over the interval count as capacity (an upper bound).
    for iv in intervals.filter(|iv| iv.presence == Presence::Vanished) {
        if let Some(c) = iv.cores {
            capacity += interval_usec as f64 * c.cores;
        }
    }
    // All jobs' CPU time: the parents' when they were read at both ends (it holds their jobs
    // that ended and those over the cap; never less than the jobs read in them), else the jobs
    // read; plus the jobs no parent holds (a glob's: containers, services), which no parent's
    // figure has.
    let cpu_usec = parents_cpu_usec.map_or(cpu, |pc| pc.max(cpu)) + cpu_beside;
    NodeFigures {
        cpu_usec,
        efficiency: (capacity > 0.0).then(|| cpu_usec as f64 / capacity),
        io_some: n.io_stalled_share,
        io_full: (full_wall > 0.0).then(|| full / full_wall),
        stalled,
        ranked,
    }
}

#[cfg(test)]
mod tests;
