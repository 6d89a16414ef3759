//! Batch jobs in cgroup v2: each job's directory and the counters its files show — CPU time
//! (`cpu.stat`), block I/O on the worker's local disk (`io.stat`), pressure stall totals
//! (`cpu.pressure`, `io.pressure`, `memory.pressure`) and memory (`memory.current`,
//! `memory.peak`, `memory.stat`) — and the batch system's parent directory, whose counters hold
//! every job's, those that already ended too.
//!
//! The scenario sets each job's [`JobLoad`] for the coming second; [`Cgroups::tick`] then
//! advances the counters by exactly one second of it, with the local disk's I/O of that second
//! (what the disk served, from the host's own model) shared out among the jobs by their demand,
//! so the jobs' `io.stat` add up to the disk's `/proc/diskstats` to the byte.

use super::{Psi, Second, SECTOR_BYTES};

/// What a job does in one second, set by the scenario.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct JobLoad {
    /// Share of the allocated cores busy (0.9 = 90 % of `cores` × 1 s of CPU time).
    pub cpu_frac: f64,
    /// Share of that CPU time spent in the kernel.
    pub system_frac: f64,
    /// PSI shares of the second, percent: some task of the job waited on I/O / all did.
    pub io_some_pct: f64,
    pub io_full_pct: f64,
    /// Waiting for a CPU (runnable, not running).
    pub cpu_some_pct: f64,
    pub cpu_full_pct: f64,
    /// Waiting on memory reclaim.
    pub memory_some_pct: f64,
    pub memory_full_pct: f64,
    /// Local-disk demand: bytes per second to read and to write, in requests of `req_kb`.
    pub read_bps: f64,
    pub write_bps: f64,
    /// Memory in use, bytes (`memory.current`).
    pub memory_bytes: f64,
}

/// A cgroup's cumulative counters, as its files show them.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct CgroupCounters {
    pub usage_usec: u64,
    pub user_usec: u64,
    pub system_usec: u64,
    /// `cpu.max` enforcement periods and throttling (0 without a quota).
    pub nr_periods: u64,
    pub nr_throttled: u64,
    pub throttled_usec: u64,
    /// `io.stat` on the local disk.
    pub rbytes: u64,
    pub wbytes: u64,
    pub rios: u64,
    pub wios: u64,
    pub io_some: Psi,
    pub io_full: Psi,
    pub cpu_some: Psi,
    pub cpu_full: Psi,
    pub memory_some: Psi,
    pub memory_full: Psi,
    pub memory_current: u64,
    pub memory_peak: u64,
    /// `memory.stat` `pgfault` and `pgmajfault`.
    pub pgfault: u64,
    pub pgmajfault: u64,
}

/// One job's cgroup.
#[derive(Debug, Clone, PartialEq)]
pub struct Job {
    /// The job's directory relative to the cgroup mount: its counters are the job's.
    pub dir: String,
    /// Directories below it (HTCondor's `.scope`, Slurm's steps and tasks), relative to the
    /// mount, parents before children; the last one holds the job's processes.
    pub subdirs: Vec<String>,
    /// Cores allocated (HTCondor `cpu.weight` = 100 × cores; Slurm `cpuset.cpus.effective`).
    pub cores: u32,
    /// First CPU of the job's cpuset (Slurm binds a job to `cpu0..cpu0+cores-1`).
    pub cpu0: u32,
    /// Its processes' pids: a wrapper (`condor_exec`, the batch script) and one worker per core
    /// from this one on.
    pub pid0: u32,
    /// `cpu.max` quota in µs per 100 000 µs period, if the batch system sets one.
    pub quota_usec: Option<u64>,
    /// The tick the job ends after (its directory is removed then).
    pub ends_at: u64,
    /// The job's own nature: what it does when nothing holds it up (the scenario derives
    /// each second's `load` from it).
    pub base: JobLoad,
    /// What it does in the coming second.
    pub load: JobLoad,
    pub c: CgroupCounters,
}

/// The cgroup v2 hierarchy of a worker node.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Cgroups {
    /// The batch system's own directory (`system.slice/htcondor`,
    /// `system.slice/slurmstepd.scope`): its counters are every job's that ever ran in it.
    pub parent: String,
    /// Directories that are no job and never change (`init.scope`, `user.slice`, the batch
    /// daemons' services), relative to the mount.
    pub other_dirs: Vec<String>,
    /// The parent's counters.
    pub parent_c: CgroupCounters,
    /// The jobs running now.
    pub jobs: Vec<Job>,
    /// Job directories removed since the tree was last written (their whole subtree).
    pub removed: Vec<String>,
    /// The local disk jobs read and write (`MAJ:MIN` in `io.stat`).
    pub disk: (u32, u32),
    /// Its name, to take what it served from the host's model.
    pub disk_name: String,
    /// Request size of the jobs' local I/O, KiB.
    pub req_kb: f64,
    /// CPUs of the node.
    pub ncpu: u32,
}

/// Integer shares of `total` in proportion to `weights` that add up to `total` exactly: each
/// gets the whole part of its share, the remainder goes one by one to the largest fractional
/// parts (Hamilton's method), so over many seconds every job gets its due.
fn split(total: u64, weights: &[f64]) -> Vec<u64> {
    let sum: f64 = weights.iter().filter(|w| **w > 0.0).sum();
    if sum <= 0.0 || !sum.is_finite() {
        return vec![0; weights.len()];
    }
    let exact: Vec<f64> = weights
        .iter()
        .map(|w| total as f64 * w.max(0.0) / sum)
        .collect();
    let mut out: Vec<u64> = exact.iter().map(|e| e.floor() as u64).collect();
    let mut left = total.saturating_sub(out.iter().sum());
    let mut order: Vec<usize> = (0..weights.len()).filter(|&i| weights[i] > 0.0).collect();
    order.sort_by(|&a, &b| {
        let fa = exact[a] - exact[a].floor();
        let fb = exact[b] - exact[b].floor();
        fb.total_cmp(&fa).then(a.cmp(&b))
    });
    for &i in order.iter().cycle() {
        if left == 0 {
            break;
        }
        out[i] += 1;
        left -= 1;
    }
    out
}

impl CgroupCounters {
    /// Adds one second of `load` on `cores` cores: CPU time, pressure, memory, and the local
    /// disk's `r`/`w` bytes and I/Os given to this cgroup.
    fn add_second(&mut self, load: &JobLoad, cores: u32, quota: Option<u64>, io: [u64; 4]) {
        let cpu = (load.cpu_frac.max(0.0) * f64::from(cores) * 1e6).round() as u64;
        let cpu = match quota {
            // a quota caps the CPU time per period; 10 periods of 100 ms in a second
            Some(q) => cpu.min(q * 10),
            None => cpu,
        };
        let sys = (cpu as f64 * load.system_frac.clamp(0.0, 1.0)).round() as u64;
        self.usage_usec += cpu;
        self.system_usec += sys;
        self.user_usec += cpu - sys;
        if let Some(q) = quota {
            self.nr_periods += 10;
            if cpu >= q * 10 {
                self.nr_throttled += 10;
                self.throttled_usec += 10 * 2_000;
            }
        }
        self.rbytes += io[0];
        self.wbytes += io[1];
        self.rios += io[2];
        self.wios += io[3];
        let full = |f: f64, s: f64| f.min(s);
        self.io_some.tick(load.io_some_pct);
        self.io_full
            .tick(full(load.io_full_pct, load.io_some_pct.clamp(0.0, 100.0)));
        self.cpu_some.tick(load.cpu_some_pct);
        self.cpu_full
            .tick(full(load.cpu_full_pct, load.cpu_some_pct.clamp(0.0, 100.0)));
        self.memory_some.tick(load.memory_some_pct);
        self.memory_full.tick(full(
            load.memory_full_pct,
            load.memory_some_pct.clamp(0.0, 100.0),
        ));
        self.memory_current = load.memory_bytes.max(0.0) as u64;
        self.memory_peak = self.memory_peak.max(self.memory_current);
        // a fault per 4 KiB page read or written anew, a major one per 64 read from disk
        self.pgfault += (io[0] + io[1]) / 4096;
        self.pgmajfault += io[0] / (4096 * 64);
    }
}

impl Cgroups {
    /// Advances every job's and the parent's counters by one second of the jobs' loads, with
    /// `disk` the local disk's served second (shared among the jobs by their demand).
    pub fn tick(&mut self, disk: Option<&Second>) {
        let d = disk.copied().unwrap_or_default();
        let rb = |w: &Job| w.load.read_bps.max(0.0);
        let wb = |w: &Job| w.load.write_bps.max(0.0);
        let rw: Vec<f64> = self.jobs.iter().map(rb).collect();
        let ww: Vec<f64> = self.jobs.iter().map(wb).collect();
        let r_ios = split(d.r_ios, &rw);
        let w_ios = split(d.w_ios, &ww);
        // sectors follow the I/Os (every request of the second has the same size)
        let as_f = |v: &[u64]| v.iter().map(|x| *x as f64).collect::<Vec<f64>>();
        let r_sect = split(d.r_sect, &as_f(&r_ios));
        let w_sect = split(d.w_sect, &as_f(&w_ios));
        let mut sum = [0u64; 4];
        let before = self.cpu_totals();
        let mut parent_max = JobLoad::default();
        for (i, j) in self.jobs.iter_mut().enumerate() {
            let io = [
                r_sect.get(i).copied().unwrap_or(0) * SECTOR_BYTES,
                w_sect.get(i).copied().unwrap_or(0) * SECTOR_BYTES,
                r_ios.get(i).copied().unwrap_or(0),
                w_ios.get(i).copied().unwrap_or(0),
            ];
            for (s, v) in sum.iter_mut().zip(io) {
                *s += v;
            }
            j.c.add_second(&j.load, j.cores, j.quota_usec, io);
            let l = &j.load;
            let m = &mut parent_max;
            m.io_some_pct = m.io_some_pct.max(l.io_some_pct);
            m.io_full_pct = m.io_full_pct.max(l.io_full_pct.min(l.io_some_pct));
            m.cpu_some_pct = m.cpu_some_pct.max(l.cpu_some_pct);
            m.cpu_full_pct = m.cpu_full_pct.max(l.cpu_full_pct.min(l.cpu_some_pct));
            m.memory_some_pct = m.memory_some_pct.max(l.memory_some_pct);
            m.memory_full_pct = m
                .memory_full_pct
                .max(l.memory_full_pct.min(l.memory_some_pct));
            m.memory_bytes += j.c.memory_current as f64;
        }
        // The parent's CPU time is its jobs' (what they added this second); its pressure is at
        // least the most stalled job's (a task of one of them stalled); its memory the sum.
        let (usage, system) = self.cpu_totals();
        let p = &mut self.parent_c;
        p.usage_usec += usage.saturating_sub(before.0);
        p.system_usec += system.saturating_sub(before.1);
        p.user_usec = p.usage_usec - p.system_usec.min(p.usage_usec);
        p.rbytes += sum[0];
        p.wbytes += sum[1];
        p.rios += sum[2];
        p.wios += sum[3];
        p.io_some.tick(parent_max.io_some_pct);
        p.io_full.tick(parent_max.io_full_pct);
        p.cpu_some.tick(parent_max.cpu_some_pct);
        p.cpu_full.tick(parent_max.cpu_full_pct);
        p.memory_some.tick(parent_max.memory_some_pct);
        p.memory_full.tick(parent_max.memory_full_pct);
        p.memory_current = parent_max.memory_bytes as u64;
        p.memory_peak = p.memory_peak.max(p.memory_current);
        p.pgfault += self
            .jobs
            .iter()
            .map(|j| u64::from(j.cores) * 200)
            .sum::<u64>();
    }

    /// Σ `usage_usec` and Σ `system_usec` of the running jobs.
    fn cpu_totals(&self) -> (u64, u64) {
        self.jobs.iter().fold((0, 0), |(u, s), j| {
            (u + j.c.usage_usec, s + j.c.system_usec)
        })
    }

    /// Removes the jobs whose end has come (after `tick`), remembering their directories for
    /// the tree; their counters stay in the parent's.
    pub fn end_jobs(&mut self, tick: u64) -> usize {
        let before = self.jobs.len();
        let mut gone = Vec::new();
        self.jobs.retain(|j| {
            if tick >= j.ends_at {
                gone.push(j.dir.clone());
                false
            } else {
                true
            }
        });
        self.removed.extend(gone);
        before - self.jobs.len()
    }

    /// Cores the running jobs hold.
    pub fn cores_used(&self) -> u32 {
        self.jobs.iter().map(|j| j.cores).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::split;

    #[test]
    fn shares_add_up_exactly() {
        assert_eq!(split(10, &[1.0, 1.0, 1.0]).iter().sum::<u64>(), 10);
        assert_eq!(split(7, &[0.0, 2.0, 1.0]), vec![0, 5, 2]);
        assert_eq!(split(2, &[1.0, 1.0, 1.2]), vec![1, 0, 1]);
        assert_eq!(split(5, &[0.0, 0.0]), vec![0, 0]);
        assert_eq!(split(0, &[1.0]), vec![0]);
        assert!(split(3, &[]).is_empty());
    }
}
