//! Batch jobs on a worker node: per-job CPU efficiency, block I/O and pressure from the job
//! cgroups of HTCondor, Slurm and configured globs under `<sys_root>/fs/cgroup` (cgroup v2); the
//! `job`, `job_io` and `jobs` lines. Layouts, fields and limits: `docs/metrics-jobs.md`.
//!
//! The tree is read **once per report interval**, not every second: at the sample that completes
//! the interval (and at the first sample, as the baseline), or at the report itself when it comes
//! early (a stop or a reload). Each reading walks the cgroup tree (not below the jobs already
//! known), finds the jobs with [`crate::sources::cgroup::jobs::discover`], reads each job's
//! files (kept open, within a budget of descriptors: [`read`]), and computes the interval from
//! the previous reading with [`crate::health::jobs`]. `top`, which never reports, gets a fresh
//! reading every report interval the same way.
//!
//! Allocated cores come from `cpu.max`, `cpuset.cpus.effective` and (HTCondor) `cpu.weight`,
//! read at a job's first two readings only: the batch system writes them just after it creates
//! the cgroup, and they do not change while the job runs.
//!
//! A job whose directory disappears while it is read (ENOENT, ENODEV) has ended: not an error.
//! Any other failure to read or parse is counted under the `cgroup` source. A host without
//! cgroup v2, and one whose kernel has PSI off (`psi=1` missing on RHEL 8), each get one log
//! line naming the cause and the fix; without PSI the rest goes on without the pressure fields.
//!
//! The clock is `/proc/uptime`, as for every other rate of the agent; on a tree without it, the
//! monotonic clock.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use storwatch_wire::lp::{FieldKey, LineWriter, SeriesKey};

use super::{Collector, Live, ReportCx, SampleCx, SourceErrors};
use crate::health::jobs::{
    self as model, Cores, CoresFrom, JobInterval, JobReading, NodeFigures, Presence,
};
use crate::root::{JoinSized, Root};
use crate::sources::cgroup::cpu_stat;
use crate::sources::cgroup::io_stat::IoDevice;
use crate::sources::cgroup::jobs::Discovery;
use crate::sources::cgroup::jobs::{
    discover, escape_name_into, BatchSystem, DiscoveryConfig, JobCgroup, JobId,
};
use crate::sources::SourceError;

mod instance;
mod read;
use instance::{dir_ino, fs_path, psi_is_off, push_ended};
use read::{read_parsed, Kept, ReadIo, KEPT};
use std::os::unix::fs::DirEntryExt;

/// The source name errors are counted under (`agent_source,source=cgroup`).
const CGROUP: &str = "cgroup";
/// Directory levels walked below the cgroup mount at most: HTCondor with `CGROUP_ALL_DAEMONS`
/// puts jobs 5 deep, a glidein inside a job a few more.
const MAX_DEPTH: usize = 12;
/// A node where no batch system's directory nor job has been seen since start, with no glob
/// configured (a disk server), walks the cgroup tree at every this many readings, not at each:
/// a walk lists every directory of the tree (on a disk server with 150 services ~40 % of the
/// agent's CPU, for nothing). A batch system started later is found within this many report
/// intervals (a minute at 10 s); from then on every reading walks.
const WALK_EVERY_OFF_WORKER: u8 = 6;
/// Jobs kept for `top`'s pane, by I/O stall.
pub const TOP_JOBS: usize = 10;
/// A job's cores are read at this many of its first readings.
const STATIC_READS: u8 = 2;
/// `statfs` type of cgroup v2's filesystem: its files are never replaced, only removed with
/// their directory.
const CGROUP2_SUPER_MAGIC: i64 = 0x6367_7270;

/// The `[jobs]` section.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct JobsConfig {
    /// Watch batch jobs' cgroups (default true). A host without cgroup v2 logs one line and
    /// stays silent.
    pub enabled: bool,
    /// Jobs read one by one at most (default 500). Jobs over the cap (the newest, in path order)
    /// get no `job` line; they are counted in `jobs.count` and `jobs.dropped`, their cores and
    /// wall time in the node's efficiency and their CPU time through the batch system's parent
    /// cgroup; one warning is logged the first time the cap is reached.
    pub max_jobs: usize,
    /// A job whose `io_some_pct` is at least this is counted in `jobs.stalled` (default 20).
    pub stall_threshold_pct: f64,
    /// HTCondor's `BASE_CGROUP` values (default `["htcondor"]`); one per slot type that sets
    /// its own.
    pub htcondor_base_cgroup: Vec<String>,
    /// More job directories: globs relative to the cgroup mount, `*` and `?` within one path
    /// component (`machine.slice/*.scope`); default none.
    pub globs: Vec<String>,
}

impl Default for JobsConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            max_jobs: 500,
            stall_threshold_pct: 20.0,
            htcondor_base_cgroup: vec!["htcondor".to_owned()],
            globs: Vec::new(),
        }
    }
}

impl JobsConfig {
    /// Checks what serde cannot.
    pub fn validate(&self) -> Result<(), String> {
        if !(0.0..=100.0).contains(&self.stall_threshold_pct) {
            return Err("[jobs] stall_threshold_pct must be between 0 and 100".into());
        }
        if self
            .htcondor_base_cgroup
            .iter()
            .any(|b| b.trim_matches('/').is_empty())
        {
            return Err("[jobs] htcondor_base_cgroup: a value is empty".into());
        }
        if self.globs.iter().any(|g| g.trim_matches('/').is_empty()) {
            return Err("[jobs] globs: a pattern is empty".into());
        }
        Ok(())
    }
}

/// One job as `top` shows it, from the last reading.
#[derive(Debug, Clone, PartialEq)]
pub struct JobNow {
    /// `htcondor`, `slurm` or `glob`.
    pub batch: &'static str,
    /// The `job` tag.
    pub job: String,
    /// A short name for a screen: HTCondor's slot, Slurm's job id, a glob's last component.
    pub label: String,
    /// Share of the interval with some task stalled on I/O, %.
    pub io_some_pct: Option<f64>,
    /// CPU efficiency, %.
    pub cpu_efficiency_pct: Option<f64>,
    /// Allocated cores.
    pub cores: Option<f64>,
    /// Block I/O, bytes per second, read and written.
    pub read_bytes_per_s: f64,
    /// Written.
    pub write_bytes_per_s: f64,
    /// `memory.current`, bytes.
    pub memory_current_bytes: Option<u64>,
}

/// The node's jobs as `top` shows them.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct JobsNow {
    /// Jobs running.
    pub count: usize,
    /// All jobs' CPU efficiency, %.
    pub cpu_efficiency_pct: Option<f64>,
    /// Share of job time stalled on I/O, %.
    pub io_stall_pct: Option<f64>,
    /// Jobs at or above the stall threshold.
    pub stalled: usize,
    /// The threshold, `[jobs] stall_threshold_pct`.
    pub stall_threshold_pct: f64,
    /// The jobs most stalled on I/O, worst first (at most [`TOP_JOBS`]).
    pub top: Vec<JobNow>,
}

/// A job being followed.
#[derive(Debug)]
struct Tracked {
    system: BatchSystem,
    job: String,
    slot: Option<String>,
    /// Its `job` line's measurement and tags (batch, job, slot, owner), encoded once: a job's
    /// tags never change.
    job_key: SeriesKey,
    /// Its `job_io` lines' measurement and tags, `device` included, by device: encoded at a
    /// device's first line (the name looked up then), kept while the job runs.
    io_keys: Vec<((u32, u32), SeriesKey)>,
    /// Its directory. No descriptor of it is held: the files are opened by path, so a job
    /// holds open files only when it has a share of the budget ([`KEPT`]'s, `kept`).
    dir: PathBuf,
    /// Other directories of the job (HTCondor's ssh_to_job), their CPU time added.
    also: Vec<PathBuf>,
    /// The files of [`KEPT`] kept open, when this job has a share of the open-file budget.
    kept: Option<Box<Kept>>,
    cores: Option<Cores>,
    static_reads: u8,
    /// The last reading; `None` while the job is over the cap.
    prev: Option<JobReading>,
    /// The `io.stat` rows of the reading before `prev`, their vector reused by the next one.
    spare_io: Vec<IoDevice>,
    /// Over the cap: not read, only counted.
    dropped: bool,
    /// Back under the cap: its next reading is a baseline, not an interval.
    needs_baseline: bool,
    /// The clock (µs) of the last reading without this job, when the agent saw it appear.
    absent_at: Option<u64>,
    /// Seen in the current reading.
    seen: bool,
    /// [`KEPT`]'s files found absent (bit = index), skipped until the next probe.
    absent: u8,
    /// Readings since absent files were last looked for ([`PROBE_EVERY`](read::PROBE_EVERY)).
    since_probe: u8,
    /// The inode of the job's directory when first seen: a job is a cgroup instance, not a
    /// name. HTCondor removes a slot's cgroup and makes it again under the same name for the
    /// next job in that slot; the new one has another inode (cgroupfs numbers each cgroup
    /// anew), which the walk's listing gives without a system call.
    ino: Option<u64>,
    /// The walk found another directory under this job's name: a new instance.
    replaced: bool,
    /// A kept descriptor answered that its cgroup is gone (ENODEV on cgroupfs): the
    /// directory may have been made again since the walk.
    lost: bool,
    /// The `usage_usec` of the job's own directory (without [`Self::also`]) at the last
    /// reading taken, and at the one just read: one cgroup's never goes down.
    own_usec: Option<u64>,
    own_usec_now: Option<u64>,
}

/// What one interval of one job gave, for its lines.
struct Done {
    root: String,
    iv: JobInterval,
}

/// What the last reading computed, kept for the report.
#[derive(Default)]
struct Pending {
    /// Whether this holds a reading not yet reported.
    fresh: bool,
    /// Intervals of the jobs read, by root (vanished ones included).
    done: Vec<Done>,
    count: usize,
    started: usize,
    ended: usize,
    dropped: usize,
    /// The batch systems' parents' CPU time over the interval, µs (`None`: no parent read at
    /// both ends).
    parents_cpu_usec: Option<u64>,
    /// Σ wall × cores of jobs not read (over the cap), µs.
    dropped_capacity_usec: f64,
    /// The interval's length, µs: this reading's clock minus the last one's.
    interval_usec: u64,
    /// The node's figures over `done`, computed once for `top` and the report.
    node: Option<NodeFigures>,
}

/// The jobs collector.
pub struct JobsCollector {
    cfg: JobsConfig,
    discovery: DiscoveryConfig,
    samples_per_report: u32,
    samples: u32,
    /// `<sys_root>/fs/cgroup`, set at the first reading.
    mount: Option<PathBuf>,
    /// Checked at the first reading: whether the mount is cgroup v2.
    v2: Option<bool>,
    jobs: BTreeMap<String, Tracked>,
    /// Parent directories' `usage_usec`, by path.
    parents: BTreeMap<String, u64>,
    /// The clock of the last reading, µs.
    last_at: Option<u64>,
    /// Device names by `major:minor`.
    devices: BTreeMap<(u32, u32), String>,
    pending: Pending,
    live: Option<JobsNow>,
    buf: String,
    paths: Vec<String>,
    paths_used: usize,
    /// The listing the last discovery was made from, and what it found: a listing unchanged
    /// since (no job came or went) needs no new one.
    found_paths: Vec<String>,
    found: Discovery,
    warned_cap: bool,
    warned_psi: bool,
    /// The read buffer of the kept descriptors.
    scratch: Vec<u8>,
    /// Whether the tree is something else than cgroupfs (a fixture, the simulator), where a
    /// kept file may have been replaced.
    stale_check: bool,
    /// Kept files checked one by one for a replacement (`fstat`), since start: what the
    /// directory check saves, for the tests.
    file_checks: u64,
    /// Lookups of [`KEPT`] files that found none, since start: what
    /// [`PROBE_EVERY`](read::PROBE_EVERY) saves, for the tests.
    absent_lookups: u64,
    /// A directory's times are trusted once older than this, s (1; the tests change it).
    settle_s: i64,
    /// Jobs that may keep their files open, and those that do.
    kept_budget: usize,
    kept_used: usize,
    /// A batch system's directory or a job was seen since start: a worker node, which gets a
    /// `jobs` line every report (a disk server gets none).
    worker: bool,
    /// Readings since the tree was last walked ([`WALK_EVERY_OFF_WORKER`]).
    since_walk: u8,
    /// Walks of the tree since start, for the tests.
    walks: u64,
    start: std::time::Instant,
}

impl JobsCollector {
    /// A collector reading once every `report_interval ÷ sample_interval` samples.
    pub fn new(cfg: JobsConfig, sample: std::time::Duration, report: std::time::Duration) -> Self {
        let samples_per_report = (report.as_nanos() / sample.as_nanos().max(1)).max(1);
        let discovery = DiscoveryConfig {
            htcondor_base: cfg.htcondor_base_cgroup.clone(),
            globs: cfg.globs.clone(),
        };
        Self {
            cfg,
            discovery,
            samples_per_report: u32::try_from(samples_per_report).unwrap_or(u32::MAX),
            samples: 0,
            mount: None,
            v2: None,
            jobs: BTreeMap::new(),
            parents: BTreeMap::new(),
            last_at: None,
            devices: BTreeMap::new(),
            pending: Pending::default(),
            live: None,
            buf: String::with_capacity(4096),
            paths: Vec::new(),
            paths_used: 0,
            found_paths: Vec::new(),
            found: Discovery::default(),
            warned_cap: false,
            warned_psi: false,
            worker: false,
            since_walk: 0,
            walks: 0,
            scratch: Vec::new(),
            stale_check: true,
            file_checks: 0,
            absent_lookups: 0,
            settle_s: 1,
            kept_budget: kept_budget(KEPT.len() + 1),
            kept_used: 0,
            start: std::time::Instant::now(),
        }
    }

    /// The clock of a reading, µs: `/proc/uptime` when readable, else monotonic.
    fn clock(&self, uptime_cs: u64) -> u64 {
        if uptime_cs > 0 {
            uptime_cs.saturating_mul(10_000)
        } else {
            u64::try_from(self.start.elapsed().as_micros()).unwrap_or(u64::MAX)
        }
    }

    /// Whether the mount is cgroup v2; logs once when it is not.
    fn check_v2(&mut self, root: &Root) -> bool {
        if let Some(v2) = self.v2 {
            return v2;
        }
        let mount = root.sys("fs/cgroup");
        let v2 = mount.join_sized("cgroup.controllers").exists();
        if !v2 {
            tracing::info!(
                "no cgroup v2 at {} (cgroup.controllers missing): per-job metrics off; \
                 boot with systemd.unified_cgroup_hierarchy=1 (the default from RHEL 9 and \
                 Debian 11) to have them, or set [jobs] enabled = false to silence this",
                mount.display()
            );
        }
        // f_type is an i64 here, an i32 or u32 elsewhere.
        #[allow(clippy::useless_conversion)]
        let on_cgroupfs =
            rustix::fs::statfs(&mount).is_ok_and(|f| i64::from(f.f_type) == CGROUP2_SUPER_MAGIC);
        self.stale_check = !on_cgroupfs;
        // Off cgroupfs a job with kept files holds its directory too (the rename check).
        self.kept_budget = kept_budget(KEPT.len() + usize::from(self.stale_check));
        self.mount = Some(mount);
        self.v2 = Some(v2);
        v2
    }

    /// Lists the directories below the mount into `self.paths` (relative, reusing the
    /// strings), not descending into jobs already known.
    fn walk(&mut self, mount: &Path, errors: &mut SourceErrors) {
        self.paths_used = 0;
        let mut stack: Vec<(String, usize)> = vec![(String::new(), 0)];
        while let Some((rel, depth)) = stack.pop() {
            let dir = if rel.is_empty() {
                mount.to_owned()
            } else {
                fs_path(mount, &rel)
            };
            let rd = match std::fs::read_dir(&dir) {
                Ok(rd) => rd,
                Err(e) if gone(&e) => continue,
                Err(e) => {
                    errors.count(CGROUP, &SourceError::io(&dir, e));
                    continue;
                }
            };
            for entry in rd {
                let Ok(entry) = entry else { continue };
                // cgroupfs gives the kind with the listing: no stat per entry.
                if !entry.file_type().is_ok_and(|t| t.is_dir()) {
                    continue;
                }
                let name = entry.file_name();
                let slot = if self.paths_used < self.paths.len() {
                    let s = &mut self.paths[self.paths_used];
                    s.clear();
                    s
                } else {
                    self.paths.push(String::new());
                    self.paths.last_mut().expect("just pushed")
                };
                if !rel.is_empty() {
                    slot.push_str(&rel);
                    slot.push('/');
                }
                // Every name kept, escaped where it must be (not UTF-8, spaces, backslashes).
                escape_name_into(
                    std::os::unix::ffi::OsStrExt::as_bytes(name.as_os_str()),
                    slot,
                );
                self.paths_used += 1;
                // A known job's directory under another inode: removed and made again.
                let known = match self.jobs.get_mut(slot.as_str()) {
                    Some(t) => {
                        t.replaced |= t.ino.is_some_and(|i| i != entry.ino());
                        true
                    }
                    None => false,
                };
                if depth + 1 < MAX_DEPTH && !known {
                    stack.push((slot.clone(), depth + 1));
                }
            }
        }
    }

    /// Takes one reading of every job and computes the interval since the previous one.
    fn read(&mut self, root: &Root, uptime_cs: u64, errors: &mut SourceErrors) {
        if !self.check_v2(root) {
            return;
        }
        let Some(mount) = self.mount.clone() else {
            return;
        };
        let at = self.clock(uptime_cs);
        self.since_walk = self.since_walk.saturating_add(1);
        let walk = self.worker
            || !self.discovery.globs.is_empty()
            || self.last_at.is_none()
            || self.since_walk >= WALK_EVERY_OFF_WORKER;
        if walk {
            self.since_walk = 0;
            self.walks += 1;
            self.walk(&mount, errors);
            let listed = self.paths.get(..self.paths_used).unwrap_or_default();
            if listed != self.found_paths.as_slice() || self.last_at.is_none() {
                self.found = discover(listed.iter().map(String::as_str), &self.discovery);
                self.found_paths.clone_from(&listed.to_vec());
            }
        }
        let found = std::mem::take(&mut self.found);
        self.worker |= !found.parents.is_empty() || !found.jobs.is_empty();
        let start_usec = self.last_at.unwrap_or(at);
        let baseline = self.last_at.is_none();

        // The batch systems' parents: all jobs' CPU time, those that came and went too.
        let mut parents_cpu: Option<u64> = None;
        let mut parents_now = BTreeMap::new();
        for (_, parent) in &found.parents {
            let path = fs_path(&mount, parent);
            if let Some(usage) = read_parsed(
                &path.join_sized("cpu.stat"),
                &mut self.buf,
                errors,
                cpu_stat::usage_usec,
            ) {
                if let Some(before) = self.parents.get(parent) {
                    if let Some(d) = usage.checked_sub(*before) {
                        parents_cpu = Some(parents_cpu.unwrap_or(0) + d);
                    }
                }
                parents_now.insert(parent.clone(), usage);
            }
        }
        // A daemon's own leaf inside a parent (the startd's): its CPU time is no job's.
        for daemon in &found.daemons {
            let path = fs_path(&mount, daemon);
            if let Some(usage) = read_parsed(
                &path.join_sized("cpu.stat"),
                &mut self.buf,
                errors,
                cpu_stat::usage_usec,
            ) {
                if let Some(before) = self.parents.get(daemon) {
                    if let Some(d) = usage.checked_sub(*before) {
                        parents_cpu = parents_cpu.map(|c| c.saturating_sub(d));
                    }
                }
                parents_now.insert(daemon.clone(), usage);
            }
        }
        self.parents = parents_now;

        for t in self.jobs.values_mut() {
            t.seen = false;
        }
        for job in &found.jobs {
            if let Some(t) = self.jobs.get_mut(&job.root) {
                t.seen = true;
            }
        }
        let mut p = Pending {
            fresh: !baseline,
            interval_usec: at.saturating_sub(start_usec),
            ..Pending::default()
        };
        // Jobs over the cap take the places freed by jobs that ended, oldest first; each needs
        // a reading of its own before it has an interval.
        let mut read_jobs = self.jobs.values().filter(|t| t.seen && !t.dropped).count();
        for t in self.jobs.values_mut().filter(|t| t.seen && t.dropped) {
            if read_jobs >= self.cfg.max_jobs {
                break;
            }
            t.dropped = false;
            t.needs_baseline = true;
            if self.kept_used < self.kept_budget {
                t.kept = Some(Box::default());
                self.kept_used += 1;
            }
            read_jobs += 1;
        }
        for job in &found.jobs {
            if self.jobs.contains_key(&job.root) {
                continue;
            }
            let dropped = read_jobs >= self.cfg.max_jobs;
            if !dropped {
                read_jobs += 1;
            }
            if !baseline {
                p.started += 1;
            }
            let absent_at = (!baseline).then_some(start_usec);
            let kept = !dropped && self.kept_used < self.kept_budget;
            self.kept_used += usize::from(kept);
            self.jobs.insert(
                job.root.clone(),
                Tracked::new(job, &mount, dropped, absent_at, kept),
            );
        }

        let mut vanished = Vec::new();
        let mut psi_missing: Option<PathBuf> = None;
        let now_s = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX));
        for (root_path, t) in &mut self.jobs {
            if !t.seen {
                if !baseline {
                    p.ended += 1;
                }
                vanished.push(root_path.clone());
                push_ended(&mut p, root_path, t.prev.as_ref(), start_usec, t.system);
                continue;
            }
            p.count += 1;
            if t.replaced && !baseline {
                // Removed and made again between two readings: the old job ended, a new one
                // started in the interval.
                p.ended += 1;
                p.started += 1;
                let old = t.restart(start_usec);
                push_ended(&mut p, root_path, old.as_ref(), start_usec, t.system);
            }
            if t.static_reads < STATIC_READS {
                t.read_cores(&mut self.buf, errors);
            }
            if t.dropped {
                p.dropped += 1;
                if let Some(c) = t.cores {
                    let since = t.absent_at.map_or(start_usec, |a| a.max(start_usec));
                    p.dropped_capacity_usec += at.saturating_sub(since) as f64 * c.cores;
                }
                continue;
            }
            let mut io = ReadIo {
                scratch: &mut self.scratch,
                stale_check: self.stale_check,
                check_files: false,
                now_s,
                settle_s: self.settle_s,
                file_checks: &mut self.file_checks,
                probe_absent: false,
                absent_lookups: &mut self.absent_lookups,
            };
            let mut reading = t.reading(at, &mut io, &mut self.buf, errors, &mut psi_missing);
            // Its cgroup gone under a kept descriptor (ENODEV), or its CPU time lower than at
            // the last reading (read by path from a cgroup made again since): a new instance,
            // if there is one, is read now rather than a reading late.
            let went_down = reading.is_some()
                && matches!((t.own_usec, t.own_usec_now), (Some(before), Some(now)) if now < before);
            if (reading.is_none() && std::mem::take(&mut t.lost)) || went_down {
                let old = t.restart(start_usec);
                t.read_cores(&mut self.buf, errors);
                let again = t.reading(at, &mut io, &mut self.buf, errors, &mut psi_missing);
                if again.is_some() && !baseline {
                    p.ended += 1;
                    p.started += 1;
                    push_ended(&mut p, root_path, old.as_ref(), start_usec, t.system);
                }
                reading = again;
            }
            match reading {
                Some(r) => {
                    t.own_usec = t.own_usec_now;
                    let rebaselined = std::mem::take(&mut t.needs_baseline);
                    if !baseline && !rebaselined {
                        if let Some(mut iv) = model::interval(t.prev.as_ref(), Some(&r), start_usec)
                        {
                            iv.in_parent = t.system != BatchSystem::Glob;
                            p.done.push(Done {
                                root: root_path.clone(),
                                iv,
                            });
                        }
                    } else if !baseline {
                        // Back under the cap: no interval of its own, but its CPU time over the
                        // interval is in the parents'; its cores over the interval (it was there,
                        // over the cap, at the start) are capacity, as for a job over the cap.
                        if let Some(c) = t.cores {
                            p.dropped_capacity_usec +=
                                at.saturating_sub(start_usec) as f64 * c.cores;
                        }
                    }
                    if let Some(old) = t.prev.replace(r).and_then(|p| p.io) {
                        t.spare_io = old;
                    }
                }
                // Gone while read: it ended (its CPU time is in the parent's).
                None => {
                    t.seen = false;
                    p.count -= 1;
                    if !baseline {
                        p.ended += 1;
                    }
                    vanished.push(root_path.clone());
                }
            }
        }
        for v in vanished {
            if self.jobs.remove(&v).is_some_and(|t| t.kept.is_some()) {
                self.kept_used = self.kept_used.saturating_sub(1);
            }
        }
        if p.dropped > 0 && !self.warned_cap {
            self.warned_cap = true;
            tracing::warn!(
                "{} jobs on this node, over [jobs] max_jobs = {}: {} are not read one by one \
                 (no job lines; counted in the jobs line's count, dropped and totals)",
                p.count,
                self.cfg.max_jobs,
                p.dropped
            );
        }
        if let (Some(path), false) = (psi_missing, self.warned_psi) {
            if psi_is_off(&path) {
                self.warned_psi = true;
                tracing::warn!(
                    "no cgroup pressure ({}): the kernel has PSI off; boot with psi=1 (RHEL 8 \
                 leaves it off by default) for the io/cpu/memory pressure fields; CPU \
                 efficiency, I/O rates and memory go on without them",
                    path.display()
                );
            }
        }
        p.parents_cpu_usec = parents_cpu;
        self.found = found;
        self.last_at = Some(at);
        if !baseline {
            p.node = Some(self.node(&p));
        }
        self.live = self.worker.then(|| self.live_of(&p));
        self.pending = p;
    }

    fn live_of(&self, p: &Pending) -> JobsNow {
        let computed;
        let node = match &p.node {
            Some(n) => n,
            None => {
                computed = self.node(p);
                &computed
            }
        };
        let mut top: Vec<JobNow> = Vec::new();
        for i in &node.ranked {
            let Some(d) = p.done.get(*i) else { continue };
            let Some(t) = self.jobs.get(&d.root) else {
                continue;
            };
            let (rb, wb, _, _) = io_sums(&d.iv);
            top.push(JobNow {
                batch: t.system.as_str(),
                job: t.job.clone(),
                label: t
                    .slot
                    .clone()
                    .unwrap_or_else(|| t.job.rsplit('/').next().unwrap_or(&t.job).to_owned()),
                io_some_pct: d.iv.io_pressure.some.map(|s| s * 100.0),
                cpu_efficiency_pct: d.iv.efficiency.map(|e| e * 100.0),
                cores: d.iv.cores.map(|c| c.cores),
                read_bytes_per_s: rb,
                write_bytes_per_s: wb,
                memory_current_bytes: d.iv.memory_current,
            });
        }
        JobsNow {
            count: p.count,
            cpu_efficiency_pct: node.efficiency.map(|e| e * 100.0),
            io_stall_pct: node.io_some.map(|s| s * 100.0),
            stalled: node.stalled,
            stall_threshold_pct: self.cfg.stall_threshold_pct,
            top,
        }
    }

    /// The node's figures over the jobs of `p` ([`model::node_figures`]).
    fn node(&self, p: &Pending) -> NodeFigures {
        model::node_figures(
            p.done.iter().map(|d| &d.iv),
            p.dropped_capacity_usec,
            p.parents_cpu_usec,
            p.interval_usec,
            self.cfg.stall_threshold_pct,
            TOP_JOBS,
        )
    }

    /// Writes the lines of the pending reading.
    fn write(&mut self, w: &mut LineWriter, root: &Root, ts: i64) {
        let mut p = std::mem::take(&mut self.pending);
        if !p.fresh {
            self.pending = p;
            return;
        }
        let node = p.node.take().unwrap_or_else(|| self.node(&p));
        for d in &p.done {
            if d.iv.presence == Presence::Vanished {
                continue; // the series ends with its job
            }
            let Some(t) = self.jobs.get_mut(&d.root) else {
                continue;
            };
            let age = t
                .absent_at
                .and_then(|a| self.last_at.map(|now| now.saturating_sub(a) as f64 / 1e6));
            let iv = &d.iv;
            let (rb, wb, ro, wo) = io_sums(iv);
            let has_io = !iv.io.is_empty();
            let pct = |v: Option<f64>| v.map(|v| r3(v * 100.0));
            w.line_of(&t.job_key, ts)
                .field_key_opt(K_CPU_EFFICIENCY_PCT, pct(iv.efficiency))
                .field_key_opt(K_CORES, iv.cores.map(|c| r3(c.cores)))
                .field_key_opt(K_CORES_FROM, iv.cores.map(|c| cores_from(c.from)))
                .field_key_opt(K_CPU_S, iv.cpu_usec.map(|u| r3(u as f64 / 1e6)))
                .field_key(K_INTERVAL_S, r3(iv.wall_usec as f64 / 1e6))
                .field_key_opt(K_IO_SOME_PCT, pct(iv.io_pressure.some))
                .field_key_opt(K_IO_FULL_PCT, pct(iv.io_pressure.full))
                .field_key_opt(K_CPU_SOME_PCT, pct(iv.cpu_pressure.some))
                .field_key_opt(K_MEMORY_SOME_PCT, pct(iv.memory_pressure.some))
                .field_key_opt(K_MEMORY_FULL_PCT, pct(iv.memory_pressure.full))
                .field_key_opt(K_MEMORY_CURRENT_BYTES, iv.memory_current)
                .field_key_opt(K_MEMORY_PEAK_BYTES, iv.memory_peak)
                .field_key_opt(K_READ_BYTES_PER_S, has_io.then(|| r3(rb)))
                .field_key_opt(K_WRITE_BYTES_PER_S, has_io.then(|| r3(wb)))
                .field_key_opt(K_READ_OPS_PER_S, has_io.then(|| r3(ro)))
                .field_key_opt(K_WRITE_OPS_PER_S, has_io.then(|| r3(wo)))
                .field_key_opt(K_AGE_S, age.map(r3))
                .write();
            for dev in &iv.io {
                let v = |x: Option<f64>| x.unwrap_or(0.0);
                if v(dev.read_bytes_per_s)
                    + v(dev.write_bytes_per_s)
                    + v(dev.reads_per_s)
                    + v(dev.writes_per_s)
                    <= 0.0
                {
                    continue;
                }
                let dev_id = (dev.major, dev.minor);
                let key = match t.io_keys.iter().position(|(id, _)| *id == dev_id) {
                    Some(i) => i,
                    None => {
                        let name = device_name(&mut self.devices, root, dev.major, dev.minor);
                        let key = SeriesKey::new(
                            "job_io",
                            &[
                                ("batch", t.system.as_str()),
                                ("job", &t.job),
                                ("device", name),
                            ],
                        );
                        t.io_keys.push((dev_id, key));
                        t.io_keys.len() - 1
                    }
                };
                let Some((_, key)) = t.io_keys.get(key) else {
                    continue;
                };
                w.line_of(key, ts)
                    .field_key_opt(K_READ_BYTES_PER_S, dev.read_bytes_per_s.map(r3))
                    .field_key_opt(K_WRITE_BYTES_PER_S, dev.write_bytes_per_s.map(r3))
                    .field_key_opt(K_READ_OPS_PER_S, dev.reads_per_s.map(r3))
                    .field_key_opt(K_WRITE_OPS_PER_S, dev.writes_per_s.map(r3))
                    .write();
            }
        }
        if !self.worker {
            return;
        }
        w.line("jobs", ts)
            .field("count", p.count as u64)
            .field("started", p.started as u64)
            .field("ended", p.ended as u64)
            .field("dropped", p.dropped as u64)
            .field_opt("cpu_efficiency_pct", node.efficiency.map(|e| r3(e * 100.0)))
            .field_opt("io_stall_pct", node.io_some.map(|s| r3(s * 100.0)))
            .field_opt("io_full_pct", node.io_full.map(|s| r3(s * 100.0)))
            .field("stalled", node.stalled as u64)
            .field("cpu_s", r3(node.cpu_usec as f64 / 1e6))
            .write();
    }
}

// The keys of the `job` and `job_io` fields (`docs/metrics-jobs.md`), checked when compiled:
// written without a check per field.
const K_CPU_EFFICIENCY_PCT: FieldKey = FieldKey::new("cpu_efficiency_pct");
const K_CORES: FieldKey = FieldKey::new("cores");
const K_CORES_FROM: FieldKey = FieldKey::new("cores_from");
const K_CPU_S: FieldKey = FieldKey::new("cpu_s");
const K_INTERVAL_S: FieldKey = FieldKey::new("interval_s");
const K_IO_SOME_PCT: FieldKey = FieldKey::new("io_some_pct");
const K_IO_FULL_PCT: FieldKey = FieldKey::new("io_full_pct");
const K_CPU_SOME_PCT: FieldKey = FieldKey::new("cpu_some_pct");
const K_MEMORY_SOME_PCT: FieldKey = FieldKey::new("memory_some_pct");
const K_MEMORY_FULL_PCT: FieldKey = FieldKey::new("memory_full_pct");
const K_MEMORY_CURRENT_BYTES: FieldKey = FieldKey::new("memory_current_bytes");
const K_MEMORY_PEAK_BYTES: FieldKey = FieldKey::new("memory_peak_bytes");
const K_READ_BYTES_PER_S: FieldKey = FieldKey::new("read_bytes_per_s");
const K_WRITE_BYTES_PER_S: FieldKey = FieldKey::new("write_bytes_per_s");
const K_READ_OPS_PER_S: FieldKey = FieldKey::new("read_ops_per_s");
const K_WRITE_OPS_PER_S: FieldKey = FieldKey::new("write_ops_per_s");
const K_AGE_S: FieldKey = FieldKey::new("age_s");

/// Jobs whose files may be kept open, `per_job` descriptors each: a quarter of the soft
/// open-file limit (on cgroupfs, [`KEPT`]'s 7 files a job: 146 jobs under the unit's
/// `LimitNOFILE=4096`, 36 at the usual 1024; elsewhere the job's directory as well, 8 a job); the
/// jobs past it are read by path, holding nothing open. These are all the descriptors jobs hold:
/// a job over `max_jobs` opens only its core files at its first readings, closed at once.
fn kept_budget(per_job: usize) -> usize {
    let soft = rustix::process::getrlimit(rustix::process::Resource::Nofile).current;
    let quarter = soft.map_or(usize::MAX, |s| usize::try_from(s / 4).unwrap_or(usize::MAX));
    quarter / per_job.max(1)
}

/// The device name of `major:minor`: the kernel name `/sys/dev/block` links to, looked up once.
fn device_name<'a>(
    devices: &'a mut BTreeMap<(u32, u32), String>,
    root: &Root,
    major: u32,
    minor: u32,
) -> &'a str {
    devices.entry((major, minor)).or_insert_with(|| {
        let link = root.sys(&format!("dev/block/{major}:{minor}"));
        std::fs::read_link(&link)
            .ok()
            .and_then(|t| t.file_name().and_then(|n| n.to_str()).map(str::to_owned))
            .unwrap_or_else(|| format!("{major}:{minor}"))
    })
}

/// [`super::r3`] (rounded to 3 decimals, halves away from zero), the same values, with the
/// rounding made on the integer part: `f64::round` is a library call on the baseline x86-64
/// target (no SSE4.1), ~40 instructions for each of the ~2,500 values of 100 jobs' lines.
fn r3(v: f64) -> f64 {
    let t = v * 1000.0;
    // From 2^52 on a double is a whole number already (and NaN, the infinities fail this).
    if t.abs().partial_cmp(&4_503_599_627_370_496.0) != Some(std::cmp::Ordering::Less) {
        return super::r3(v);
    }
    // Exact: the cast truncates a number below 2^52, and `t - whole` is representable.
    let whole = t as i64;
    let rest = t - whole as f64;
    let m = whole + i64::from(rest >= 0.5) - i64::from(rest <= -0.5);
    // `round` keeps the sign of a zero (-0.3 rounds to -0).
    let rounded = if m == 0 { 0.0f64.copysign(t) } else { m as f64 };
    rounded / 1000.0
}

/// Bytes and operations per second, read and written, summed over the devices.
fn io_sums(iv: &JobInterval) -> (f64, f64, f64, f64) {
    let mut s = (0.0, 0.0, 0.0, 0.0);
    for d in &iv.io {
        s.0 += d.read_bytes_per_s.unwrap_or(0.0);
        s.1 += d.write_bytes_per_s.unwrap_or(0.0);
        s.2 += d.reads_per_s.unwrap_or(0.0);
        s.3 += d.writes_per_s.unwrap_or(0.0);
    }
    s
}

fn cores_from(f: CoresFrom) -> &'static str {
    match f {
        CoresFrom::CpuMax => "cpu_max",
        CoresFrom::Cpuset => "cpuset",
        CoresFrom::HtcondorCpuWeight => "cpu_weight",
    }
}

/// The directory vanished (the job ended) while it was read.
fn gone(e: &std::io::Error) -> bool {
    e.kind() == std::io::ErrorKind::NotFound
        || matches!(e.raw_os_error(), Some(libc::ENODEV) | Some(libc::ENXIO))
}

/// A pressure file the kernel refuses to show: PSI off on a kernel that still lists the files
/// (RHEL 8's 4.18 without `psi=1`).
fn psi_off(e: &SourceError) -> bool {
    matches!(e, SourceError::Io { source, .. } if source.raw_os_error() == Some(libc::EOPNOTSUPP))
}

impl Tracked {
    fn new(
        job: &JobCgroup,
        mount: &Path,
        dropped: bool,
        absent_at: Option<u64>,
        kept: bool,
    ) -> Self {
        let (tag, slot) = job_tags(&job.job_id, &job.root);
        let owner = job.owner_uid.map(|u| u.to_string());
        let batch = job.system.as_str();
        let job_key = SeriesKey::new(
            "job",
            &[
                ("batch", batch),
                ("job", &tag),
                ("slot", slot.as_deref().unwrap_or("")),
                ("owner", owner.as_deref().unwrap_or("")),
            ],
        );
        Self {
            system: job.system,
            job: tag,
            slot,
            job_key,
            io_keys: Vec::new(),
            dir: fs_path(mount, &job.root),
            kept: kept.then(Box::default),
            also: job.also.iter().map(|a| fs_path(mount, a)).collect(),
            cores: None,
            static_reads: 0,
            prev: None,
            spare_io: Vec::new(),
            dropped,
            needs_baseline: false,
            absent_at,
            seen: true,
            absent: 0,
            since_probe: 0,
            ino: dir_ino(&fs_path(mount, &job.root)),
            replaced: false,
            lost: false,
            own_usec: None,
            own_usec_now: None,
        }
    }
}

/// The `job` and `slot` tags of a job: Slurm's job id or SLUID; for HTCondor the job's directory
/// name as the starter made it (`<execute dir>_<slot>`, without `.slice`) and the slot's name
/// before the `@` (`slot1_3`); for a glob the matched path.
fn job_tags(id: &JobId, root: &str) -> (String, Option<String>) {
    match id {
        JobId::HtcondorSlot(slot) | JobId::HtcondorSlotSlice(slot) => {
            let name = root.rsplit('/').next().unwrap_or(root);
            let name = name.strip_suffix(".slice").unwrap_or(name);
            let slot = slot.split('@').next().unwrap_or(slot);
            (name.to_owned(), Some(slot.to_owned()))
        }
        other => (other.tag(), None),
    }
}

impl Collector for JobsCollector {
    fn sources(&self) -> &'static [&'static str] {
        &[CGROUP]
    }

    fn sample(&mut self, cx: &mut SampleCx<'_>) {
        // The first sample takes the baseline; then one reading per report interval, at the
        // sample that completes it (a `top` that never reports gets one as well).
        self.samples += 1;
        if self.last_at.is_none() || self.samples >= self.samples_per_report {
            self.samples = 0;
            self.read(cx.root, cx.uptime_cs, cx.errors);
        }
    }

    fn report(&mut self, w: &mut LineWriter, cx: &mut ReportCx<'_>) {
        if !self.pending.fresh {
            // An early report (the first one, aligned on the clock; a stop; a reload): read now.
            self.samples = 0;
            self.read(cx.root, cx.uptime_cs, cx.errors);
        }
        if self.v2 == Some(true) {
            self.write(w, cx.root, cx.ts_ns);
        }
    }

    fn live(&self, live: &mut Live) {
        live.jobs.clone_from(&self.live);
    }
}

#[cfg(test)]
mod tests;
