//! Batch jobs on a worker node: per-job CPU efficiency, block I/O and pressure from the job
//! cgroups of HTCondor, Slurm and configured globs under `<sys_root>/fs/cgroup` (cgroup v2); the
//! `job`, `job_io` and `jobs` lines. Layouts, fields and limits: `docs/metrics-jobs.md`.
//!
//! The tree is read **once per report interval**, not every second: at the sample that completes
//! the interval (and at the first sample, as the baseline), or at the report itself when it comes
//! early (a stop or a reload). A reading walks the cgroup tree (not below the jobs already
//! known) when a directory of the last walk changed (`watch.rs`), finds the jobs with
//! [`crate::sources::cgroup::jobs::discover`], reads each job's files (kept open, within a
//! budget of descriptors: [`read`]), and computes the interval from the previous reading with
//! [`crate::health::jobs`]. `top`, which never reports, gets a fresh reading every report
//! interval the same way.
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
use std::sync::Arc;

use serde::Deserialize;
use storwatch_wire::lp::{LineWriter, SeriesKey};

use super::{Collector, Live, ReportCx, SampleCx, SourceErrors};
use crate::health::jobs::{
    self as model, Cores, DeviceRates, JobInterval, JobReading, NodeFigures,
};
use crate::root::{JoinSized, Root};
use crate::sources::cgroup::cpu_stat;
use crate::sources::cgroup::io_stat::IoCounters;
use crate::sources::cgroup::jobs::Discovery;
use crate::sources::cgroup::jobs::{
    discover, escape_name_into, BatchSystem, DiscoveryConfig, JobCgroup, JobId,
};
use crate::sources::SourceError;

mod instance;
mod read;
mod report;
mod sample;
mod watch;
use instance::{dir_ino, fs_path, psi_is_off, push_ended};
use read::{read_parsed, Kept, ReadIo, KEPT};

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
    spare_io: Vec<IoCounters>,
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
    /// The job's key in [`JobsCollector::jobs`], shared: no copy of the path a job a reading.
    root: Arc<str>,
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
    /// The jobs followed, by their directory's path relative to the mount (as the walk lists it).
    jobs: BTreeMap<Arc<str>, Tracked>,
    /// Device-rate vectors of intervals already reported, for the next reading's: a reading of
    /// many jobs allocates none.
    spare_rates: Vec<Vec<DeviceRates>>,
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
    /// Off cgroupfs, the inotify watch of the jobs' directories (`watch.rs`), made at the first
    /// reading; `None` on cgroupfs or when the kernel gives none (then the directories' times).
    watch: Option<watch::DirWatch>,
    /// Whether to try inotify off cgroupfs (true; the tests of the directories' times turn
    /// it off).
    use_watch: bool,
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
    /// The directories the walk lists, watched: a reading walks only when one changed
    /// (`watch.rs`); `None` where the kernel gives no inotify descriptor (then at every reading).
    tree: Option<watch::TreeWatch>,
    /// Jobs were added or removed since the last walk, which descends into the jobs it does not
    /// know: the next reading walks whatever the watch says.
    jobs_changed: bool,
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
            spare_rates: Vec::new(),
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
            tree: None,
            jobs_changed: true,
            walks: 0,
            scratch: Vec::new(),
            stale_check: true,
            watch: None,
            use_watch: true,
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
}

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
