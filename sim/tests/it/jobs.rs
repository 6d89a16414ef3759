//! The worker scenarios' cgroup v2 trees, read back the way the agent reads them: the
//! directories listed and put through the agent's job discovery, each job's files through the
//! agent's parsers, two readings through the agent's per-job interval and node sums
//! (`storwatch_agent::health::jobs`). The jobs must show the efficiency and I/O stall the
//! scenario intends, and their counters must add up to the node's own.

#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;

use storwatch_agent::health::jobs::{
    allocated_cores, interval, node_jobs, JobInterval, JobReading, NodeJobs, Presence,
};
use storwatch_agent::sources::cgroup::jobs::{discover, BatchSystem, DiscoveryConfig, JobId};
use storwatch_agent::sources::cgroup::{cpu_max, cpu_stat, cpuset, io_stat, memory};
use storwatch_agent::sources::{diskstats, pressure, stat};
use storwatch_sim::scenario::Kind;
use storwatch_sim::sim::Sim;

const MOUNT: &str = "sys/fs/cgroup";

/// Every directory below the cgroup mount, relative to it.
fn dirs(root: &Path) -> Vec<String> {
    fn walk(base: &Path, dir: &Path, out: &mut Vec<String>) {
        for e in fs::read_dir(dir).unwrap() {
            let e = e.unwrap();
            if e.file_type().unwrap().is_dir() {
                let p = e.path();
                out.push(p.strip_prefix(base).unwrap().to_str().unwrap().to_owned());
                walk(base, &p, out);
            }
        }
    }
    let base = root.join(MOUNT);
    let mut out = Vec::new();
    walk(&base, &base, &mut out);
    out
}

/// One cgroup directory's files, parsed by the agent's parsers (every one must parse).
fn reading(root: &Path, rel: &str, system: BatchSystem, at_usec: u64) -> JobReading {
    let dir = root.join(MOUNT).join(rel);
    let read = |f: &str| fs::read_to_string(dir.join(f)).unwrap();
    let io = io_stat::parse(&read("io.stat"));
    assert!(io.errors.is_empty(), "{rel}: {:?}", io.errors);
    let cpu_max = cpu_max::parse(&read("cpu.max")).unwrap();
    let cpuset = cpuset::parse(&read("cpuset.cpus.effective")).unwrap();
    let weight = cpu_max::parse_weight(&read("cpu.weight")).unwrap();
    assert!(
        memory::parse_stat(&read("memory.stat")).is_ok(),
        "{rel}: memory.stat"
    );
    JobReading {
        at_usec,
        created_usec: None,
        cpu: Some(cpu_stat::parse(&read("cpu.stat")).unwrap()),
        io: Some(io.rows.iter().map(io_stat::IoCounters::from).collect()),
        cpu_pressure: Some(pressure::parse(&read("cpu.pressure")).unwrap()),
        io_pressure: Some(pressure::parse(&read("io.pressure")).unwrap()),
        memory_pressure: Some(pressure::parse(&read("memory.pressure")).unwrap()),
        memory_current: Some(memory::parse_current(&read("memory.current")).unwrap()),
        memory_peak: Some(memory::parse_peak(&read("memory.peak")).unwrap()),
        cores: allocated_cores(system, Some(&cpu_max), Some(&cpuset), Some(weight)),
    }
}

/// What the agent would see at one instant: each job's reading by its root, the parent's, the
/// local disk's bytes read and written, and the CPUs' busy jiffies.
struct Snapshot {
    jobs: BTreeMap<String, (JobId, JobReading)>,
    parent: JobReading,
    system: BatchSystem,
    disk_bytes: (u64, u64),
    busy_jiffies: u64,
}

fn snapshot(sim: &Sim, t_s: u64) -> Snapshot {
    let root = sim.root();
    let listed = dirs(root);
    let found = discover(
        listed.iter().map(String::as_str),
        &DiscoveryConfig::default(),
    );
    assert_eq!(found.parents.len(), 1, "{:?}", found.parents);
    let (system, parent_dir) = found.parents[0].clone();
    let at = t_s * 1_000_000;
    let cg = sim.host().cgroups.as_ref().unwrap();
    // discovery finds exactly the simulator's jobs, each with its sub-cgroups below it
    let mut want: Vec<&str> = cg.jobs.iter().map(|j| j.dir.as_str()).collect();
    want.sort_unstable();
    let got: Vec<&str> = found.jobs.iter().map(|j| j.root.as_str()).collect();
    assert_eq!(got, want);
    assert_eq!(parent_dir, cg.parent);
    let jobs = found
        .jobs
        .iter()
        .map(|j| {
            assert!(j.also.is_empty());
            (
                j.root.clone(),
                (j.job_id.clone(), reading(root, &j.root, system, at)),
            )
        })
        .collect();
    let text = fs::read_to_string(root.join("proc/diskstats")).unwrap();
    let ds = diskstats::parse(&text);
    let sda = ds.rows.iter().find(|r| r.name == "sda").unwrap();
    let st = stat::parse(&fs::read_to_string(root.join("proc/stat")).unwrap()).unwrap();
    Snapshot {
        jobs,
        parent: reading(root, &parent_dir, system, at),
        system,
        disk_bytes: (sda.sectors_read * 512, sda.sectors_written * 512),
        busy_jiffies: st.cpu.user + st.cpu.system,
    }
}

/// The agent's intervals of every job seen at either end, and the node's sums.
fn intervals(a: &Snapshot, b: &Snapshot, start_usec: u64) -> (Vec<JobInterval>, NodeJobs) {
    let mut roots: Vec<&String> = a.jobs.keys().chain(b.jobs.keys()).collect();
    roots.sort();
    roots.dedup();
    let iv: Vec<JobInterval> = roots
        .into_iter()
        .filter_map(|r| {
            interval(
                a.jobs.get(r).map(|x| &x.1),
                b.jobs.get(r).map(|x| &x.1),
                start_usec,
            )
        })
        .collect();
    let node = node_jobs(&iv, 5);
    (iv, node)
}

fn run(kind: Kind, speed: f64, seconds: u64, every: u64) -> Vec<Snapshot> {
    let dir = tempfile::tempdir().unwrap();
    let mut sim = Sim::new(dir.path(), kind, "wn042", 11, speed).unwrap();
    let mut out = vec![snapshot(&sim, 0)];
    for t in 1..=seconds {
        sim.step().unwrap();
        if t % every == 0 {
            out.push(snapshot(&sim, t));
        }
    }
    out
}

/// The healthy workers' jobs: efficiency 85–95 % on every report, little I/O stall, jobs coming
/// and going (some within one report), and the node's numbers adding up.
fn healthy(kind: Kind, system: BatchSystem) {
    // speed 20: jobs of 30 s to 3 min, so two minutes see many start and end
    let snaps = run(kind, 20.0, 120, 10);
    let (mut appeared, mut vanished, mut unseen) = (0, 0, 0);
    for w in snaps.windows(2) {
        let (a, b) = (&w[0], &w[1]);
        assert_eq!(a.system, system);
        let start = a.parent.at_usec;
        let (iv, node) = intervals(a, b, start);
        // Jobs that ran through the interval show their efficiency; one that appeared is
        // measured from the interval's start (its creation time unknown here), a lower bound.
        let through: Vec<JobInterval> = iv
            .iter()
            .filter(|j| j.presence == Presence::Throughout)
            .cloned()
            .collect();
        let eff = node_jobs(&through, 5).efficiency.unwrap();
        assert!((0.85..=0.95).contains(&eff), "{kind:?}: efficiency {eff}");
        assert!(node.efficiency.unwrap() <= eff + 1e-9);
        let stall = node.io_stalled_share.unwrap();
        assert!(stall < 0.08, "{kind:?}: io stall {stall}");
        appeared += iv
            .iter()
            .filter(|j| j.presence == Presence::Appeared)
            .count();
        vanished += iv
            .iter()
            .filter(|j| j.presence == Presence::Vanished)
            .count();
        // the parent counts every job's CPU time: also that of the jobs that ended within the
        // interval (after their last reading) and of those that came and went between the two
        // readings (in neither of them)
        let wall = b.parent.at_usec - a.parent.at_usec;
        let parent = interval(Some(&a.parent), Some(&b.parent), start).unwrap();
        let jobs_cpu: u64 = iv.iter().filter_map(|j| j.cpu_usec).sum();
        let parent_cpu = parent.cpu_usec.unwrap();
        assert!(parent_cpu >= jobs_cpu, "{parent_cpu} < {jobs_cpu}");
        if parent_cpu > jobs_cpu + 1_000_000 {
            unseen += 1;
        }
        // the jobs' block I/O is the local disk's, to the byte
        let pio = &parent.io;
        assert_eq!(pio.len(), 1, "{pio:?}");
        let d = |v: Option<f64>| (v.unwrap() * wall as f64 / 1e6).round() as u64;
        assert_eq!(
            (d(pio[0].read_bytes_per_s), d(pio[0].write_bytes_per_s)),
            (
                b.disk_bytes.0 - a.disk_bytes.0,
                b.disk_bytes.1 - a.disk_bytes.1
            )
        );
        assert_eq!((pio[0].major, pio[0].minor), (8, 0));
        // and their CPU time is the node's (user + system jiffies, 10 ms each), within the
        // per-CPU rounding of /proc/stat
        let jiffies_usec = (b.busy_jiffies - a.busy_jiffies) * 10_000;
        let ratio = jiffies_usec as f64 / parent_cpu as f64;
        assert!(
            (0.95..1.08).contains(&ratio),
            "{kind:?}: /proc/stat / jobs {ratio}"
        );
    }
    assert!(
        appeared >= 5 && vanished >= 5,
        "{appeared} appeared, {vanished} vanished"
    );
    assert!(unseen >= 1, "no CPU time of an ended job in the parent's");
}

#[test]
fn htcondor_worker_jobs_run_at_85_to_95_pct() {
    healthy(Kind::WorkerHtcondor, BatchSystem::Htcondor);
    let s = run(Kind::WorkerHtcondor, 1.0, 0, 1);
    let (id, r) = s[0].jobs.values().next().unwrap();
    assert!(matches!(id, JobId::HtcondorSlotSlice(_)), "{id:?}");
    // HTCondor's cores come from cpu.weight (the cpuset is the whole node)
    assert_eq!(
        r.cores.map(|c| c.from),
        Some(storwatch_agent::health::jobs::CoresFrom::HtcondorCpuWeight)
    );
}

#[test]
fn slurm_worker_jobs_run_at_85_to_95_pct() {
    healthy(Kind::WorkerSlurm, BatchSystem::Slurm);
    let s = run(Kind::WorkerSlurm, 1.0, 0, 1);
    let cores_from: Vec<_> = s[0]
        .jobs
        .values()
        .map(|(id, r)| {
            assert!(matches!(id, JobId::SlurmJobId(_)), "{id:?}");
            r.cores.map(|c| c.from)
        })
        .collect();
    assert!(cores_from
        .iter()
        .all(|c| *c == Some(storwatch_agent::health::jobs::CoresFrom::Cpuset)));
}

/// The starved worker's jobs stall more and more as the write storm's await climbs: efficiency
/// falls below 30 %, io.pressure some and full above 60 %, and no read shows in io.stat (the
/// input comes over NFS).
#[test]
fn starved_jobs_follow_the_write_storm() {
    let snaps = run(Kind::JobsIoStarved, 1.0, 80, 10);
    let mut effs = Vec::new();
    for w in snaps.windows(2) {
        let (iv, node) = intervals(&w[0], &w[1], w[0].parent.at_usec);
        effs.push(node.efficiency.unwrap());
        let last = w[1].parent.at_usec == 80_000_000;
        if last {
            let stall = node.io_stalled_share.unwrap();
            assert!(stall > 0.6, "io stall {stall}");
            let full: Vec<f64> = iv
                .iter()
                .filter(|j| j.presence == Presence::Throughout)
                .filter_map(|j| j.io_pressure.full)
                .collect();
            let mean = full.iter().sum::<f64>() / full.len() as f64;
            assert!(mean > 0.5, "io full {mean}");
            for j in &iv {
                assert!(
                    j.io.iter()
                        .all(|d| d.read_bytes_per_s.unwrap_or(0.0) == 0.0),
                    "{:?}",
                    j.io
                );
            }
        }
    }
    eprintln!("jobs-io-starved: node efficiency per report {effs:.2?}");
    let (first, last) = (effs[0], effs[effs.len() - 1]);
    assert!(last < 0.3, "efficiency at 80 s {last} ({effs:?})");
    assert!(first > last + 0.2, "efficiency not falling: {effs:?}");
    assert_eq!(snaps[0].system, BatchSystem::Htcondor);
    let (id, _) = snaps[0].jobs.values().next().unwrap();
    assert!(matches!(id, JobId::HtcondorSlot(_)), "{id:?}");
}

/// Σ (read + write ms) and Σ (reads + writes) of the disk server's multipath maps.
fn lun_ms_ios(root: &Path) -> (u64, u64) {
    let text = fs::read_to_string(root.join("proc/diskstats")).unwrap();
    let ds = diskstats::parse(&text);
    ds.rows
        .iter()
        .filter(|r| r.name.starts_with("dm-"))
        .fold((0, 0), |(ms, ios), r| {
            (ms + r.read_ms + r.write_ms, ios + r.reads + r.writes)
        })
}

/// Started together (a fleet, as the quickstart starts it), the starved worker's jobs wait what
/// the write-storm host's LUNs take: the latency their I/O stall implies (a single-core job
/// stalled `s = L / (L + 150 ms)` of the time) follows the storm host's own await, second for
/// second of the same timeline.
#[test]
fn the_starved_worker_and_the_write_storm_share_one_timeline() {
    let dir = tempfile::tempdir().unwrap();
    let kinds = [Kind::WriteStorm, Kind::JobsIoStarved];
    let mut sims = storwatch_sim::sim::fleet(dir.path(), &kinds, 1, 3, 1.0).unwrap();
    let mut before: Option<(Snapshot, (u64, u64))> = None;
    let mut pairs = Vec::new();
    for t in 1..=60u64 {
        for s in sims.iter_mut() {
            s.step().unwrap();
        }
        if t % 20 != 0 && t != 10 {
            continue;
        }
        let now = (snapshot(&sims[1], t), lun_ms_ios(sims[0].root()));
        if let Some((a, (ms0, ios0))) = &before {
            let (b, (ms1, ios1)) = &now;
            let storm_await = (ms1 - ms0) as f64 / (ios1 - ios0) as f64;
            let (iv, _) = intervals(a, b, a.parent.at_usec);
            // single-core jobs that ran through: their io some share is their stall
            let s: Vec<f64> = iv
                .iter()
                .filter(|j| j.presence == Presence::Throughout)
                .filter(|j| j.cores.map(|c| c.cores) == Some(1.0))
                .filter_map(|j| j.io_pressure.some)
                .collect();
            assert!(!s.is_empty());
            let s = s.iter().sum::<f64>() / s.len() as f64;
            let implied = 150.0 * s / (1.0 - s) - 1.0;
            pairs.push((t, storm_await, implied));
        }
        before = Some(now);
    }
    eprintln!("(t, write-storm LUN await ms, await the starved jobs wait ms): {pairs:.0?}");
    for &(_, storm, implied) in &pairs {
        let ratio = implied / storm;
        assert!((0.7..1.4).contains(&ratio), "{pairs:.0?}");
    }
    assert!(
        pairs.windows(2).all(|w| w[1].1 > w[0].1 && w[1].2 > w[0].2),
        "{pairs:.0?}"
    );
}
