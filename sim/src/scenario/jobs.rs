//! Worker nodes running batch jobs in cgroup v2: `worker-htcondor`, `worker-slurm` and
//! `jobs-io-starved`.
//!
//! A worker has 64 CPUs (`jobs-io-starved`: 32), 256 GiB, a 3.84 TB SATA SSD `sda` for the jobs' scratch and a 10 GbE
//! `eno1`. Its batch system keeps it ~95 % full of jobs of 1, 4 or 8 cores; each job runs for
//! 10–60 min (scenario time), one in eight fails within 2–8 s (shorter than a report). Each
//! second a job's CPU time, pressure and memory follow its own nature ([`JobLoad`]); its local
//! I/O is what the SSD served of the job's demand. The host's `/proc/stat`, `/proc/pressure/io`,
//! diskstats and NIC follow from the jobs.
//!
//! `jobs-io-starved` is a worker whose jobs read their input over NFS (a dCache pNFS mount)
//! from a disk server in a write storm: the scenario runs the `write-storm` disk server itself,
//! on the same timeline (both start at scenario time 0, so in a fleet the two hosts' incidents
//! line up), and each second a job's read waits for what that server's LUNs took to serve a
//! request. Each of a job's streams reads a 1 MiB chunk (the server's await plus 1 ms on the
//! wire), then computes on it for 150 ms: stalled a share `s = L / (L + 150 ms)` of the time,
//! so CPU efficiency is `1 − s` of what the job would do, and `io.pressure` some is
//! `1 − (1 − s)^streams`, full `s^streams`. NFS reads are not block I/O: nothing shows in the
//! jobs' `io.stat` but their small local writes.

use super::hardware::sd;
use super::{Kind, Scenario};
use crate::model::jobs::{CgroupCounters, Cgroups, Job, JobLoad};
use crate::model::{Demand, Host, HostLoad, NetDemand, Nic, Psi, Rand, Role, SSD};

/// Compute per 1 MiB chunk of input, ms (the `jobs-io-starved` analysis jobs).
const COMPUTE_MS: f64 = 150.0;
/// The jobs' local I/O request size, KiB.
const REQ_KB: f64 = 512.0;

/// The batch system and the cgroup layout it makes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Batch {
    /// HTCondor 24.8+: `htcondor/<execute>_<slot>.slice/<execute>_<slot>.scope`.
    HtcondorSlice,
    /// HTCondor before 24.8: `htcondor/<execute>_<slot>`, the processes in it.
    HtcondorSlot,
    /// Slurm up to 25.11: `slurmstepd.scope/job_<id>/step_*/…`.
    Slurm,
}

/// A worker node's batch system and jobs.
pub(super) struct Worker {
    batch: Batch,
    speed: f64,
    /// The next slot number (HTCondor's dynamic slots count up) or job id.
    next_id: u64,
    /// The next job's first pid.
    next_pid: u32,
    /// `jobs-io-starved`: the disk server the jobs read from, and its scenario.
    server: Option<(Box<Scenario>, Host)>,
    /// The disk server's request latency last second, ms.
    pub(super) server_await_ms: f64,
}

/// Whether `kind` is one of the batch worker scenarios.
pub(super) fn is_worker(kind: Kind) -> bool {
    matches!(
        kind,
        Kind::WorkerHtcondor | Kind::WorkerSlurm | Kind::JobsIoStarved
    )
}

impl Worker {
    /// Builds the worker's devices, NICs and cgroup hierarchy with its first jobs.
    pub(super) fn build(kind: Kind, h: &mut Host, speed: f64) -> Worker {
        let mut d = sd(0, Role::Disk, 7_501_476_528, SSD);
        d.rotational = false;
        d.vendor = "ATA".to_owned();
        d.model = "SAMSUNG MZ7L33T8".to_owned();
        d.tunables.read_ahead_kb = 128;
        d.tunables.scheduler = "[none] mq-deadline kyber bfq".to_owned();
        let (disk, disk_name) = ((d.major, d.minor), d.name.clone());
        if kind == Kind::JobsIoStarved {
            // an older node of the analysis queue: 32 cores of single-core jobs
            h.cpus.truncate(32);
        }
        h.devices.push(d);
        for (name, speed_mbps, mtu) in [("lo", None, 65_536), ("eno1", Some(10_000), 9000)] {
            h.nics.push(Nic {
                name: name.to_owned(),
                speed_mbps,
                mtu,
                carrier_changes: 2,
                demand: NetDemand::default(),
                c: Default::default(),
            });
        }
        let batch = match kind {
            Kind::WorkerSlurm => Batch::Slurm,
            Kind::JobsIoStarved => Batch::HtcondorSlot,
            _ => Batch::HtcondorSlice,
        };
        let (parent, other) = match batch {
            Batch::Slurm => (
                "system.slice/slurmstepd.scope",
                vec![
                    "system.slice/slurmd.service",
                    "system.slice/slurmstepd.scope/system",
                ],
            ),
            // 24.8+ under the packaged unit's `DelegateSubgroup=leaf` (23.8+): the master in
            // `condor.service/leaf`, the jobs' base beside it
            Batch::HtcondorSlice => (
                "system.slice/condor.service/htcondor",
                vec![
                    "system.slice/condor.service",
                    "system.slice/condor.service/leaf",
                ],
            ),
            _ => ("system.slice/htcondor", vec!["system.slice/condor.service"]),
        };
        let mut other_dirs: Vec<String> = [
            "init.scope",
            "system.slice",
            "system.slice/sshd.service",
            "system.slice/storwatch-agent.service",
            "user.slice",
        ]
        .iter()
        .chain(&other)
        .map(|s| (*s).to_owned())
        .collect();
        other_dirs.sort();
        let ncpu = h.cpus.len() as u32;
        // The node has run jobs for its whole uptime: the parent's counters hold them.
        let up_s = h.uptime_s();
        let busy = f64::from(ncpu) * 0.9 * up_s as f64;
        let parent_c = CgroupCounters {
            usage_usec: (busy * 1e6) as u64,
            system_usec: (busy * 0.07e6) as u64,
            user_usec: (busy * 0.93e6) as u64,
            rbytes: up_s * 90_000_000,
            wbytes: up_s * 20_000_000,
            rios: up_s * 170,
            wios: up_s * 40,
            io_some: Psi {
                total_us: up_s * 40_000,
                ..Psi::default()
            },
            io_full: Psi {
                total_us: up_s * 10_000,
                ..Psi::default()
            },
            pgfault: up_s * 12_800,
            ..CgroupCounters::default()
        };
        h.cgroups = Some(Cgroups {
            parent: parent.to_owned(),
            other_dirs,
            parent_c,
            jobs: Vec::new(),
            removed: Vec::new(),
            disk,
            disk_name,
            req_kb: REQ_KB,
            ncpu,
        });
        let server = (kind == Kind::JobsIoStarved).then(|| {
            let mut sc = Scenario::new(Kind::WriteStorm, speed);
            let seed = h.rng.int(1, u64::MAX / 2);
            let host = sc.build("sim-write-storm-remote", seed);
            (Box::new(sc), host)
        });
        let next_id = match batch {
            Batch::Slurm => h.rng.int(4_180_000, 4_190_000),
            _ => 1,
        };
        let mut w = Worker {
            batch,
            speed,
            next_id,
            next_pid: h.rng.int(20_000, 90_000) as u32,
            server,
            server_await_ms: 0.0,
        };
        // The node is already full: its jobs started at random times before.
        w.fill(h, 0, true);
        w
    }

    fn ticks(&self, s: f64) -> u64 {
        ((s / self.speed).round() as u64).max(1)
    }

    /// Starts jobs until the node's cores are ~95 % taken (`warm`: with some of their run
    /// already behind them).
    fn fill(&mut self, h: &mut Host, tick: u64, warm: bool) {
        let starved = self.server.is_some();
        let ncpu = h.cpus.len() as u32;
        let Some(used) = h.cgroups.as_ref().map(Cgroups::cores_used) else {
            return;
        };
        let mut used = used;
        let target = ncpu * 95 / 100;
        // a few jobs at most per second: the schedd/slurmctld hands out matches in cycles
        let mut started = 0;
        while used < target && started < if warm { 200 } else { 3 } {
            let sizes: &[u32] = if starved {
                &[1, 1, 1, 2]
            } else {
                &[1, 1, 4, 8, 8]
            };
            let cores = sizes[h.rng.int(0, sizes.len() as u64 - 1) as usize];
            if used + cores > ncpu {
                break;
            }
            let Some(job) = self.new_job(h, cores, tick, warm) else {
                break;
            };
            used += cores;
            started += 1;
            if let Some(cg) = &mut h.cgroups {
                cg.jobs.push(job);
            }
        }
    }

    /// A new job of `cores` cores, `None` when no contiguous CPUs are free for a Slurm job.
    fn new_job(&mut self, h: &mut Host, cores: u32, tick: u64, warm: bool) -> Option<Job> {
        let ncpu = h.cpus.len() as u32;
        let cpu0 = if self.batch == Batch::Slurm {
            let cg = h.cgroups.as_ref()?;
            let mut busy = vec![false; ncpu as usize];
            for j in &cg.jobs {
                for c in j.cpu0..j.cpu0 + j.cores {
                    if let Some(b) = busy.get_mut(c as usize) {
                        *b = true;
                    }
                }
            }
            (0..=ncpu.saturating_sub(cores)).find(|&s| (s..s + cores).all(|c| !busy[c as usize]))?
        } else {
            0
        };
        let id = self.next_id;
        self.next_id += 1;
        let pid0 = self.next_pid;
        // a job's own processes, then a few the batch system forks for the next (wrappers)
        self.next_pid = (self.next_pid + cores + 7) % 4_000_000;
        if self.next_pid < 1000 {
            self.next_pid += 1000;
        }
        // vanilla_proc.cpp: `condor` and the execute directory with / as _ up to 24.7, the
        // execute directory alone from 24.8
        let exec = "condor_var_lib_condor_execute";
        let (dir, subdirs) = match self.batch {
            Batch::HtcondorSlice => {
                let exec = "_var_lib_condor_execute";
                let base = format!(
                    "system.slice/condor.service/htcondor/{exec}_slot1_{id}@{}",
                    h.name
                );
                let name = format!("{exec}_slot1_{id}@{}", h.name);
                let scope = format!("{base}.slice/{name}.scope");
                (format!("{base}.slice"), vec![scope])
            }
            Batch::HtcondorSlot => (
                format!("system.slice/htcondor/{exec}_slot1_{id}@{}", h.name),
                Vec::new(),
            ),
            Batch::Slurm => {
                let job = format!("system.slice/slurmstepd.scope/job_{id}");
                let subs = [
                    "step_batch",
                    "step_batch/slurm",
                    "step_batch/user",
                    "step_extern",
                    "step_extern/slurm",
                    "step_extern/user",
                    "step_extern/user/task_special",
                    "step_batch/user/task_0",
                ];
                let subdirs = subs.iter().map(|s| format!("{job}/{s}")).collect();
                (job, subdirs)
            }
        };
        let rng = &mut h.rng;
        // One job in eight fails at once (a bad input file, a missing proxy).
        let (life, age_s) = if rng.range(0.0, 1.0) < 0.125 && !warm {
            (rng.int(2, 8), 0)
        } else {
            let full = self.ticks(rng.range(600.0, 3600.0));
            if warm {
                let left = rng.int(1, full);
                (left, full - left)
            } else {
                (full, 0)
            }
        };
        let k = f64::from(cores);
        let base = JobLoad {
            cpu_frac: rng.range(0.87, 0.95),
            system_frac: rng.range(0.03, 0.08),
            io_some_pct: rng.range(1.0, 5.0),
            io_full_pct: 0.0,
            cpu_some_pct: rng.range(0.5, 3.0),
            cpu_full_pct: 0.0,
            memory_some_pct: 0.0,
            memory_full_pct: 0.0,
            read_bps: k * rng.range(0.8e6, 2.0e6),
            write_bps: k * rng.range(0.1e6, 0.4e6),
            memory_bytes: k * rng.range(1.5e9, 2.5e9),
        };
        // A job that has been running: its counters hold what it did so far.
        let a = age_s as f64;
        let cpu = base.cpu_frac * k * 1e6 * a;
        let psi = |pct: f64| Psi {
            avg10: pct,
            avg60: pct,
            avg300: pct,
            total_us: (pct * 10_000.0 * a) as u64,
        };
        let c = CgroupCounters {
            usage_usec: cpu as u64,
            system_usec: (cpu * base.system_frac) as u64,
            user_usec: (cpu * (1.0 - base.system_frac)) as u64,
            io_some: psi(base.io_some_pct),
            cpu_some: psi(base.cpu_some_pct),
            memory_current: base.memory_bytes as u64,
            memory_peak: base.memory_bytes as u64,
            ..CgroupCounters::default()
        };
        Some(Job {
            dir,
            subdirs,
            cores,
            cpu0,
            pid0,
            quota_usec: None,
            ends_at: tick + life,
            base,
            load: JobLoad::default(),
            c,
        })
    }

    /// Sets the jobs and the host for the coming second: jobs that ended are removed, new ones
    /// start, every job's load follows from its nature (and, starved, from the server).
    pub(super) fn drive(&mut self, h: &mut Host, tick: u64) {
        if let Some(cg) = &mut h.cgroups {
            // removed from the tree by the last write
            cg.removed.clear();
            cg.end_jobs(tick);
        }
        self.fill(h, tick, false);
        if let Some((sc, server)) = &mut self.server {
            // The server's scenario set its first second when it was built: from the next tick
            // on it steps as its own host would, one second per tick.
            if tick > 0 {
                server.tick();
                sc.drive(server);
            }
            // What a request to the server's LUNs took last second, the mean over the LUNs.
            let (mut ms, mut ios) = (0u64, 0u64);
            for d in server.devices.iter().filter(|d| d.role == Role::Map) {
                ms += d.last.r_ms + d.last.w_ms;
                ios += d.last.r_ios + d.last.w_ios;
            }
            self.server_await_ms = if ios > 0 { ms as f64 / ios as f64 } else { 0.0 };
        }
        let starved = self.server.is_some();
        let latency = self.server_await_ms + 1.0;
        let Some(cg) = &mut h.cgroups else { return };
        let mut rng = Rand::new(h.rng.int(0, u64::MAX));
        let (mut cpu, mut sys, mut stalled_cores) = (0.0, 0.0, 0.0);
        let (mut some_max, mut full_min) = (0.0f64, 100.0f64);
        let (mut r, mut w, mut rx) = (0.0, 0.0, 0.0);
        for j in &mut cg.jobs {
            let b = j.base;
            let k = f64::from(j.cores);
            let mut l = JobLoad {
                cpu_frac: b.cpu_frac * rng.noise(0.02),
                io_some_pct: b.io_some_pct * rng.noise(0.3),
                cpu_some_pct: b.cpu_some_pct * rng.noise(0.3),
                read_bps: b.read_bps * rng.noise(0.2),
                write_bps: b.write_bps * rng.noise(0.2),
                ..b
            };
            l.io_full_pct = l.io_some_pct * 0.3 / k;
            if starved {
                // Each stream waits `latency` for a chunk, then computes on it.
                let s = latency / (latency + COMPUTE_MS);
                l.cpu_frac = b.cpu_frac * (1.0 - s) * rng.noise(0.02);
                l.io_some_pct = 100.0 * (1.0 - (1.0 - s).powf(k));
                l.io_full_pct = 100.0 * s.powf(k);
                // page-cache misses under NFS: a little memory pressure, the cache thrashing
                l.memory_some_pct = 2.0 * s;
                // the input comes over NFS; only the outputs go to the scratch disk
                l.read_bps = 0.0;
                rx += k * 1_048_576.0 * 1000.0 / (latency + COMPUTE_MS);
                stalled_cores += k * s;
            } else {
                rx += k * 1.5e6;
                stalled_cores += k * l.io_some_pct / 100.0 * 0.2;
            }
            j.load = l;
            cpu += k * l.cpu_frac;
            sys += k * l.cpu_frac * l.system_frac;
            some_max = some_max.max(l.io_some_pct);
            full_min = full_min.min(l.io_full_pct);
            r += l.read_bps;
            w += l.write_bps;
        }
        if cg.jobs.is_empty() {
            full_min = 0.0;
        }
        let req = cg.req_kb;
        h.demand("sda", Demand::mbs(r / 1e6, w / 1e6, req, req));
        if let Some(n) = h.nic_mut("eno1") {
            n.demand = NetDemand {
                rx_bps: rx * 1.02,
                tx_bps: rx / 40.0 + w,
                ..NetDemand::default()
            };
        }
        let ncpu = h.cpus.len() as f64;
        let user_pct = (cpu - sys) / ncpu * 100.0;
        let system_pct = sys / ncpu * 100.0 + 0.5;
        h.load = HostLoad {
            user_pct,
            system_pct,
            // idle CPUs whose job waits on I/O count as iowait
            iowait_pct: (stalled_cores / ncpu * 100.0)
                .min(100.0 - user_pct - system_pct - 1.0)
                .max(0.0),
            softirq_pct: 0.5 + rx / 1.25e9 * 5.0,
            // the host's PSI: at least the most stalled job's; all tasks at once only when
            // even the least stalled job is
            psi_some_pct: (some_max * 1.2).min(99.0),
            psi_full_pct: full_min * 0.8,
            dirty_kb: 131_072.0 + w / 1024.0 * 5.0,
            writeback_kb: w / 1024.0,
        };
    }
}
