//! Filesystem capacity: every mounted filesystem of `<proc-root>/self/mountinfo` that is not a
//! pseudo filesystem, measured with `statvfs(3)`; the `fs` lines.
//!
//! **When.** Capacity moves slowly and `statvfs` is a system call per mount, so a round — read the
//! mount table, map each filesystem to its block devices, `statvfs` each — runs every
//! `[fs] interval` (default 60 s, never more often than the report interval), not every second.
//! The round runs on a thread of its own: on a network filesystem whose server is gone, or a
//! FUSE mount whose daemon hangs, `statvfs` blocks, possibly for ever. The calls are made in a
//! child process, one per round (`statvfs::stat_apart_each`): a thread stuck in a FUSE request
//! cannot be killed, and would keep the agent from exiting. The round's thread waits for each
//! answer with `poll(2)` for `timeout_s`; a call that has not answered by then is counted as an
//! error naming the mount point, its child is SIGKILLed (reaped later, never waited for), and a
//! new child measures the rest, so the other filesystems are still in this round's lines. The
//! mount point is skipped while its killed child is still stuck (process-wide: a collector
//! rebuilt on SIGHUP skips it too). What has no deadline of its own (the mount table and sysfs,
//! a stand-in file) is watched from the sampling thread: a round's thread that made no progress
//! for twice `timeout_s` is given up on, its mount point skipped until the call returns, and the
//! round starts over at once on a fresh thread. `run` and `top` pick a round up in a later
//! sample; `once` and stepped tests wait for it in the sample that started it (inline), which
//! is the same round on the same thread with the same deadline: each hung mount point costs
//! `timeout_s` once.
//!
//! **Which.** Filesystem types in `exclude_fstypes` (globs; the default list is the kernel's
//! pseudo filesystems, tmpfs and container layers) and mount points in `exclude_mounts` are left
//! out. A filesystem mounted at several places (bind mounts, the same device twice) is measured
//! once, at its first mount of its root (`/` in mountinfo's fourth field), else its first mount.
//!
//! **Where it lives.** Each filesystem is mapped down the block-device stack as the `disk`
//! collector names devices: `device` is the kernel name of the mounted device (`dm-4`, `md127`,
//! `sdb1`, the name `/proc/diskstats` and the `disk` lines use), `kind` its kind, `md` the MD
//! arrays and `mpath` the multipath maps found below it through sysfs `slaves/` (a partition
//! counts its disk's), and `pool` the zpool of a ZFS dataset (its source up to the first `/`).
//!
//! **Fill rate.** Used bytes are kept per filesystem over `fill_window` (default 6 h, thinned to
//! about 60 points) and `fill_rate_bytes_per_s` is the least-squares slope through them and the
//! current reading; `time_to_full_s` is the available bytes over that rate when it is positive.
//! Both appear once the history spans a twelfth of the window (30 min by default), and start over
//! when the filesystem's size or device changes (grown, or another filesystem mounted there).

use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, Receiver, Sender, TryRecvError};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use serde::Deserialize;
use storwatch_wire::lp::LineWriter;

use super::{r3, Collector, ReportCx, SampleCx};
use crate::filter::Filter;
use crate::root::{read_optional, Root};
use crate::sources::mountinfo::{self, Mount};
use crate::sources::statvfs::{self, FsStat};
use crate::sources::sysblock::{self, DeviceKind};
use crate::sources::{diskstats, SourceError};

mod fill;
mod round;
mod statfs;

use fill::History;
use round::{give_up, progress, RoundCx, Worker};
pub use statfs::{FileStatfs, Statfs, SystemStatfs};

const MOUNTINFO: &str = "mountinfo";
const STATVFS: &str = "statvfs";
/// Nodes visited at most when walking down one filesystem's device stack.
const MAX_STACK: usize = 256;

/// `[fs]` in the agent's configuration.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct FsConfig {
    /// Report filesystem capacity at all.
    pub enabled: bool,
    /// How often the mounts are measured; the report interval when shorter.
    #[serde(with = "crate::duration")]
    pub interval: Duration,
    /// The span the fill rate is measured over.
    #[serde(with = "crate::duration")]
    pub fill_window: Duration,
    /// Seconds a `statvfs` call may take before its mount point is skipped.
    pub timeout_s: f64,
    /// Filesystem types not reported (globs).
    pub exclude_fstypes: Vec<String>,
    /// Mount points not reported (globs).
    pub exclude_mounts: Vec<String>,
    /// Where the host's `/` is (an agent in a container with the host's root at `/host`).
    pub rootfs: PathBuf,
    /// Take the numbers from this file (the simulator's stand-in) instead of `statvfs(3)`;
    /// empty: `statvfs(3)`.
    pub statvfs_file: PathBuf,
}

/// Pseudo and virtual filesystems: no capacity of their own worth an alert, or (autofs) a
/// mount that `statvfs` would trigger.
pub const DEFAULT_EXCLUDE_FSTYPES: [&str; 30] = [
    "autofs",
    "binfmt_misc",
    "bpf",
    "cgroup",
    "cgroup2",
    "configfs",
    "debugfs",
    "devpts",
    "devtmpfs",
    "efivarfs",
    "fuse.gvfsd-fuse",
    "fuse.lxcfs",
    "fusectl",
    "hugetlbfs",
    "mqueue",
    "nfsd",
    "nsfs",
    "overlay",
    "proc",
    "pstore",
    "ramfs",
    "rpc_pipefs",
    "securityfs",
    "selinuxfs",
    "squashfs",
    "sysfs",
    "tmpfs",
    "tracefs",
    "iso9660",
    "erofs",
];

/// Mount points under the kernel's and container runtimes' own trees.
pub const DEFAULT_EXCLUDE_MOUNTS: [&str; 6] = [
    "/proc/*",
    "/sys/*",
    "/dev/*",
    "/run/credentials/*",
    "/var/lib/docker/*",
    "/var/lib/containers/*",
];

impl Default for FsConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            interval: Duration::from_secs(60),
            fill_window: Duration::from_secs(6 * 3600),
            timeout_s: 5.0,
            exclude_fstypes: DEFAULT_EXCLUDE_FSTYPES.map(String::from).to_vec(),
            exclude_mounts: DEFAULT_EXCLUDE_MOUNTS.map(String::from).to_vec(),
            rootfs: PathBuf::from("/"),
            statvfs_file: PathBuf::new(),
        }
    }
}

/// Where a filesystem lives in the block-device stack.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Placement {
    /// Kernel name of the mounted block device.
    pub device: String,
    /// Its kind (`part`, `lvm`, `md`, `mpath`, `disk`, …).
    pub kind: String,
    /// MD arrays at or below it, comma-separated.
    pub md: String,
    /// Multipath maps (dm names) at or below it, comma-separated.
    pub mpath: String,
    /// The zpool of a ZFS dataset.
    pub pool: String,
}

/// One filesystem measured.
#[derive(Debug, Clone, PartialEq)]
pub struct FsReading {
    /// Mount point, escaped as in mountinfo.
    pub mount: String,
    /// Filesystem type.
    pub fstype: String,
    /// Device numbers (`st_dev`).
    pub devt: (u32, u32),
    /// Mounted read-only (mount option or `ST_RDONLY`).
    pub read_only: bool,
    /// Where it lives.
    pub place: Placement,
    /// Its numbers.
    pub stat: FsStat,
}

/// What one round found.
#[derive(Debug, Default)]
struct Round {
    /// Agent seconds when the round started.
    at_s: f64,
    readings: Vec<FsReading>,
    /// Errors to count: (source, message).
    errors: Vec<(&'static str, String)>,
}

/// The mounts to measure: excluded types and mount points dropped, one mount per filesystem.
pub fn select<'a>(mounts: &'a [Mount], cfg: &FsConfig) -> Vec<&'a Mount> {
    let mut chosen: BTreeMap<(u32, u32), usize> = BTreeMap::new();
    let mut order: Vec<&Mount> = Vec::new();
    let fstypes = Filter::excluding(&cfg.exclude_fstypes);
    let mount_points = Filter::excluding(&cfg.exclude_mounts);
    for m in mounts {
        if !fstypes.matches(&m.fstype)
            || !mount_points.matches(&m.mount_point)
            || !mount_points.matches(&m.path().to_string_lossy())
        {
            continue;
        }
        match chosen.get(&(m.major, m.minor)) {
            None => {
                chosen.insert((m.major, m.minor), order.len());
                order.push(m);
            }
            // A later mount of the filesystem's root wins over an earlier bind of a subtree.
            Some(&i) if order[i].root != "/" && m.root == "/" => order[i] = m,
            Some(_) => {}
        }
    }
    order
}

/// Kernel names by device numbers, from `/proc/diskstats`.
fn device_names(root: &Root) -> Result<BTreeMap<(u32, u32), String>, SourceError> {
    let path = root.proc("diskstats");
    let text = read_optional(&path)?.unwrap_or_default();
    Ok(diskstats::parse(&text)
        .rows
        .iter()
        .map(|d| ((d.major, d.minor), d.name.to_owned()))
        .collect())
}

/// Walks down from `name` through partitions' disks and `slaves/`, collecting MD arrays and
/// multipath maps. Below a multipath map are its paths, not more storage: the walk stops there.
pub fn place(root: &Root, name: &str, names: &BTreeMap<(u32, u32), String>) -> Placement {
    let devt_of = |n: &str| names.iter().find(|(_, v)| v.as_str() == n).map(|(k, _)| *k);
    let mut out = Placement {
        device: name.to_owned(),
        ..Placement::default()
    };
    let mut md = BTreeSet::new();
    let mut mpath = BTreeSet::new();
    let mut todo = vec![name.to_owned()];
    let mut seen = BTreeSet::new();
    while let Some(n) = todo.pop() {
        if !seen.insert(n.clone()) || seen.len() > MAX_STACK {
            continue;
        }
        let (major, minor) = devt_of(&n).unwrap_or((0, 0));
        let Ok(Some(info)) = sysblock::read_info(root, &n, major, minor) else {
            continue;
        };
        let kind = sysblock::classify(&n, info.dm_uuid.as_deref(), info.partition);
        if n == name {
            out.kind = kind.as_str().to_owned();
        }
        match kind {
            DeviceKind::Md => {
                md.insert(n.clone());
            }
            DeviceKind::Mpath => {
                mpath.insert(info.dm_name.clone().unwrap_or_else(|| n.clone()));
                continue;
            }
            _ => {}
        }
        if info.partition {
            // The disk a partition is on: the longest known name that starts its name.
            if let Some(disk) = names
                .values()
                .filter(|d| d.len() < n.len() && n.starts_with(d.as_str()))
                .max_by_key(|d| d.len())
            {
                todo.push(disk.clone());
            }
        }
        todo.extend(info.slaves.iter().cloned());
    }
    out.md = md.into_iter().collect::<Vec<_>>().join(",");
    out.mpath = mpath.into_iter().collect::<Vec<_>>().join(",");
    out
}

/// Capacity of the mounted filesystems.
pub struct FsCollector {
    cx: RoundCx,
    interval_s: f64,
    timeout: Duration,
    inline: bool,
    worker: Option<Worker>,
    in_flight: bool,
    /// Agent seconds of the round in flight (a round restarted without a stuck mount keeps it).
    round_at_s: f64,
    next_s: f64,
    latest: Option<Round>,
    history: BTreeMap<String, History>,
}

impl FsCollector {
    /// A collector measuring through `statvfs(3)` (or the configured stand-in file) at
    /// `cfg.interval`, at least `report_interval`. `inline` runs rounds on the sampling thread.
    pub fn new(cfg: FsConfig, root: Root, report_interval: Duration, inline: bool) -> Self {
        let statfs: Arc<dyn Statfs> = if cfg.statvfs_file.as_os_str().is_empty() {
            Arc::new(SystemStatfs {
                rootfs: cfg.rootfs.clone(),
                timeout: Duration::from_secs_f64(cfg.timeout_s.clamp(0.1, 3600.0)),
            })
        } else {
            Arc::new(FileStatfs {
                path: cfg.statvfs_file.clone(),
            })
        };
        Self::with_statfs(cfg, root, report_interval, inline, statfs)
    }

    /// The same with another source of numbers (tests).
    pub fn with_statfs(
        cfg: FsConfig,
        root: Root,
        report_interval: Duration,
        inline: bool,
        statfs: Arc<dyn Statfs>,
    ) -> Self {
        let interval_s = cfg.interval.max(report_interval).as_secs_f64();
        let timeout = Duration::from_secs_f64(cfg.timeout_s.clamp(0.1, 3600.0));
        Self {
            cx: RoundCx {
                root,
                cfg,
                statfs,
                stuck: Arc::default(),
            },
            interval_s,
            timeout,
            inline,
            worker: None,
            in_flight: false,
            round_at_s: 0.0,
            next_s: 0.0,
            latest: None,
            history: BTreeMap::new(),
        }
    }

    /// Asks a round's thread (a new one when there is none) for a round stamped `at_s`.
    fn start(&mut self, at_s: f64, errors: &mut super::SourceErrors) {
        if self.worker.is_none() {
            match Worker::spawn(self.cx.clone()) {
                Ok(w) => self.worker = Some(w),
                Err(e) => {
                    errors.count(STATVFS, &format!("cannot start the fs thread: {e}"));
                    return;
                }
            }
        }
        if let Some(w) = &self.worker {
            progress(&w.busy, None);
            if w.requests.send(at_s).is_ok() {
                self.in_flight = true;
                self.round_at_s = at_s;
            } else {
                self.worker = None;
            }
        }
    }

    /// Takes the round in flight when it is done, waiting for it up to `wait`; gives up on a
    /// thread that made no progress for `timeout`.
    fn collect(&mut self, wait: Duration, errors: &mut super::SourceErrors) {
        let Some(w) = &self.worker else {
            self.in_flight = false;
            return;
        };
        let got = if wait.is_zero() {
            w.rounds.try_recv().map_err(|e| match e {
                TryRecvError::Empty => mpsc::RecvTimeoutError::Timeout,
                TryRecvError::Disconnected => mpsc::RecvTimeoutError::Disconnected,
            })
        } else {
            w.rounds.recv_timeout(wait)
        };
        match got {
            Ok(r) => {
                // Counted when the round comes in, not when it is reported: a later round
                // (without the stuck mount) may replace it before the report.
                for (src, msg) in &r.errors {
                    errors.count(src, msg);
                }
                self.latest = Some(r);
                self.in_flight = false;
            }
            Err(mpsc::RecvTimeoutError::Timeout) => self.check_stuck(errors),
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                self.worker = None;
                self.in_flight = false;
            }
        }
    }

    /// Gives up on a round's thread that made no progress for `timeout`. Stuck in `statvfs`: its
    /// mount point is skipped until the call returns, and the round starts over at once on a new
    /// thread, so that the other filesystems are measured in this round still. Stuck elsewhere
    /// (reading the mount table or sysfs): the round is dropped.
    fn check_stuck(&mut self, errors: &mut super::SourceErrors) {
        let Some(w) = &self.worker else {
            return;
        };
        // `statvfs(3)` in a child answers by its own deadline (`timeout`, a `TimedOut` error);
        // this one, twice as long, is for what has none: the mount table or sysfs on a hung
        // filesystem, a stand-in file, a `Statfs` of the tests.
        let Some(mount) = give_up(&w.busy, &self.cx.stuck, self.timeout * 2) else {
            return;
        };
        // The stuck thread's channels go with it: it ends when its call returns.
        self.worker = None;
        self.in_flight = false;
        match mount {
            Some(mp) => {
                errors.count(
                    STATVFS,
                    &format!(
                        "statvfs {mp}: no answer within {:?}; skipped until it answers",
                        self.timeout * 2
                    ),
                );
                self.start(self.round_at_s, errors);
            }
            None => errors.count(
                MOUNTINFO,
                &format!(
                    "the filesystem round made no progress within {:?}; dropped",
                    self.timeout * 2
                ),
            ),
        }
    }
}

impl Collector for FsCollector {
    fn sources(&self) -> &'static [&'static str] {
        &[MOUNTINFO, STATVFS]
    }

    fn sample(&mut self, cx: &mut SampleCx<'_>) {
        if self.in_flight {
            self.collect(Duration::ZERO, cx.errors);
        }
        if !self.in_flight && cx.now_s >= self.next_s {
            self.next_s = cx.now_s + self.interval_s;
            self.start(cx.now_s, cx.errors);
        }
        // Inline (`once`, stepped tests): the round is waited for here, still on its own
        // thread and with the same deadline, so a hung mount costs `timeout_s` once and a
        // signal still ends the process.
        while self.inline && self.in_flight {
            self.collect(Duration::from_millis(50), cx.errors);
        }
    }

    fn report(&mut self, w: &mut LineWriter, cx: &mut ReportCx<'_>) {
        let Some(round) = self.latest.take() else {
            return;
        };
        let window_s = self.cx.cfg.fill_window.as_secs_f64();
        let mut seen = BTreeSet::new();
        for r in &round.readings {
            seen.insert(r.mount.clone());
            let fill = self
                .history
                .entry(r.mount.clone())
                .or_default()
                .add(round.at_s, r, window_s);
            let s = &r.stat;
            let ttf = fill
                .filter(|(rate, _)| *rate > 0.0)
                .map(|(rate, _)| r3(s.avail_bytes() as f64 / rate));
            w.line("fs", cx.ts_ns)
                .tag("mount", &r.mount)
                .tag("fstype", &r.fstype)
                .tag("device", &r.place.device)
                .tag("kind", &r.place.kind)
                .tag("md", &r.place.md)
                .tag("mpath", &r.place.mpath)
                .tag("pool", &r.place.pool)
                .field("size_bytes", s.size_bytes())
                .field("used_bytes", s.used_bytes())
                .field("avail_bytes", s.avail_bytes())
                .field_opt("used_pct", s.used_pct().map(r3))
                .field("inodes", s.files)
                .field("inodes_used", s.inodes_used())
                .field("inodes_free", s.favail)
                .field_opt("inodes_used_pct", s.inodes_used_pct().map(r3))
                .field("readonly", r.read_only)
                .field_opt("fill_rate_bytes_per_s", fill.map(|f| r3(f.0)))
                .field_opt("fill_window_s", fill.map(|f| r3(f.1)))
                .field_opt("time_to_full_s", ttf)
                .write();
        }
        // A filesystem no longer mounted (or skipped as stuck) starts over when it is back.
        self.history.retain(|k, _| seen.contains(k));
    }
}

#[cfg(test)]
mod tests {
    use super::round::{answered, lock, Progress, Stuck};
    use super::*;
    use crate::collect::SourceErrors;
    use std::collections::HashMap;

    /// Numbers per mount point, changed by the test between rounds.
    #[derive(Default)]
    struct FakeStatfs(Mutex<HashMap<String, FsStat>>);

    impl Statfs for FakeStatfs {
        fn statvfs(&self, mp: &str, _path: &Path) -> io::Result<FsStat> {
            lock(&self.0)
                .get(mp)
                .copied()
                .ok_or_else(|| io::Error::from(io::ErrorKind::PermissionDenied))
        }
    }

    fn gib(n: u64) -> u64 {
        n << 30
    }

    fn stat(size: u64, used: u64) -> FsStat {
        FsStat {
            frsize: 4096,
            blocks: size / 4096,
            bfree: (size - used) / 4096,
            bavail: (size - used) / 4096,
            files: 1000,
            ffree: 900,
            favail: 900,
            read_only: false,
        }
    }

    /// A disk server's tree: XFS on an LVM volume on md127 over two multipath maps, ext4 on
    /// sda1, a ZFS dataset, a bind mount and pseudo filesystems.
    fn tree() -> (tempfile::TempDir, Root) {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path();
        let w = |rel: &str, text: &str| {
            let path = p.join(rel);
            std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
            std::fs::write(path, text).expect("write");
        };
        w(
            "proc/self/mountinfo",
            "22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw\n\
             23 22 0:21 / /proc rw - proc proc rw\n\
             24 22 0:23 / /run rw - tmpfs tmpfs rw\n\
             25 22 253:5 / /srv/pool1 rw,noatime - xfs /dev/mapper/vg0-pool1 rw\n\
             26 22 253:5 /sub /export/pool1 rw,noatime - xfs /dev/mapper/vg0-pool1 rw\n\
             27 22 0:52 / /tank/data ro - zfs tank/data rw\n\
             28 22 0:60 / /net/home rw - nfs4 server:/home rw\n\
             oops\n",
        );
        w(
            "proc/diskstats",
            "   8       0 sda 1 0 0 0 0 0 0 0 0 0 0\n\
                8       1 sda1 1 0 0 0 0 0 0 0 0 0 0\n\
                8      16 sdb 1 0 0 0 0 0 0 0 0 0 0\n\
                8      32 sdc 1 0 0 0 0 0 0 0 0 0 0\n\
              253       0 dm-0 1 0 0 0 0 0 0 0 0 0 0\n\
              253       1 dm-1 1 0 0 0 0 0 0 0 0 0 0\n\
                9     127 md127 1 0 0 0 0 0 0 0 0 0 0\n\
              253       5 dm-5 1 0 0 0 0 0 0 0 0 0 0\n",
        );
        for (name, dev) in [
            ("sda", "8:0"),
            ("sdb", "8:16"),
            ("sdc", "8:32"),
            ("dm-0", "253:0"),
            ("dm-1", "253:1"),
            ("md127", "9:127"),
            ("dm-5", "253:5"),
        ] {
            w(&format!("sys/block/{name}/dev"), &format!("{dev}\n"));
            std::fs::create_dir_all(p.join(format!("sys/block/{name}/slaves"))).expect("mkdir");
        }
        w("sys/block/sda/sda1/dev", "8:1\n");
        w("sys/block/sda/sda1/partition", "1\n");
        w("sys/block/dm-0/dm/name", "mpatha\n");
        w("sys/block/dm-0/dm/uuid", "mpath-3600a0b80001\n");
        w("sys/block/dm-1/dm/name", "mpathb\n");
        w("sys/block/dm-1/dm/uuid", "mpath-3600a0b80002\n");
        w("sys/block/dm-0/slaves/sdb", "");
        w("sys/block/dm-1/slaves/sdc", "");
        w("sys/block/md127/slaves/dm-0", "");
        w("sys/block/md127/slaves/dm-1", "");
        w("sys/block/dm-5/dm/name", "vg0-pool1\n");
        w("sys/block/dm-5/dm/uuid", "LVM-abc\n");
        w("sys/block/dm-5/slaves/md127", "");
        let root = Root::new(p.join("proc"), p.join("sys"));
        (dir, root)
    }

    fn collector(root: Root, fake: Arc<FakeStatfs>, window: u64) -> FsCollector {
        let cfg = FsConfig {
            interval: Duration::from_secs(60),
            fill_window: Duration::from_secs(window),
            ..FsConfig::default()
        };
        FsCollector::with_statfs(cfg, root, Duration::from_secs(10), true, fake)
    }

    fn step(c: &mut FsCollector, root: &Root, t: f64, errors: &mut SourceErrors) -> String {
        let mut events = Vec::new();
        c.sample(&mut SampleCx {
            root,
            now_s: t,
            itv_cs: Some(100),
            uptime_cs: 0,
            events: &mut events,
            errors,
        });
        let mut w = LineWriter::new("ds01", &[]);
        c.report(
            &mut w,
            &mut ReportCx {
                root,
                ts_ns: 1_700_000_000_000_000_000 + (t as i64) * 1_000_000_000,
                now_s: t,
                uptime_cs: 0,
                errors,
            },
        );
        String::from_utf8(w.take()).expect("utf-8")
    }

    #[test]
    fn lines_with_their_place_in_the_stack() {
        let (_dir, root) = tree();
        let fake = Arc::new(FakeStatfs::default());
        {
            let mut m = lock(&fake.0);
            m.insert("/".into(), stat(gib(100), gib(40)));
            m.insert("/srv/pool1".into(), stat(gib(100_000), gib(96_000)));
            m.insert("/export/pool1".into(), stat(gib(100_000), gib(96_000)));
            m.insert("/tank/data".into(), stat(gib(5_000), gib(1_000)));
            // /net/home: no answer (PermissionDenied), counted.
        }
        let mut c = collector(root.clone(), fake, 3600);
        let mut errors = SourceErrors::new(c.sources());
        let out = step(&mut c, &root, 0.0, &mut errors);
        insta::assert_snapshot!(out);
        let counted = errors.take_interval();
        assert_eq!(counted, vec![(MOUNTINFO, 1, 1), (STATVFS, 1, 1)]);
    }

    /// Numbers per decoded path, and the calls it was given.
    #[derive(Default)]
    struct PathStatfs {
        sizes: HashMap<PathBuf, u64>,
        calls: Mutex<Vec<(String, PathBuf)>>,
    }

    impl Statfs for PathStatfs {
        fn statvfs(&self, mp: &str, path: &Path) -> io::Result<FsStat> {
            lock(&self.calls).push((mp.to_owned(), path.to_owned()));
            self.sizes
                .get(path)
                .map(|&size| stat(size, 0))
                .ok_or_else(|| io::Error::from(io::ErrorKind::NotFound))
        }
    }

    #[test]
    fn mount_points_that_differ_by_newline_or_space_are_two_series() {
        // As mountinfo prints /srv/a<newline>b, /srv/a<space>b, /srv/a<tab>b and /srv/a\b.
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path();
        std::fs::create_dir_all(p.join("proc/self")).expect("mkdir");
        std::fs::create_dir_all(p.join("sys")).expect("mkdir");
        std::fs::write(
            p.join("proc/self/mountinfo"),
            "30 1 0:40 / /srv/a\\012b rw - xfs /dev/x rw\n\
             31 1 0:41 / /srv/a\\040b rw - xfs /dev/y rw\n\
             32 1 0:42 / /srv/a\\011b rw - xfs /dev/z rw\n\
             33 1 0:43 / /srv/a\\134b rw - xfs /dev/w rw\n",
        )
        .expect("write");
        let root = Root::new(p.join("proc"), p.join("sys"));
        let statfs = Arc::new(PathStatfs {
            sizes: [
                ("/srv/a\nb", 1),
                ("/srv/a b", 2),
                ("/srv/a\tb", 3),
                ("/srv/a\\b", 4),
            ]
            .into_iter()
            .map(|(path, gb)| (PathBuf::from(path), gib(gb)))
            .collect(),
            calls: Mutex::default(),
        });
        let mut c = FsCollector::with_statfs(
            FsConfig::default(),
            root.clone(),
            Duration::from_secs(10),
            true,
            statfs.clone(),
        );
        let mut errors = SourceErrors::default();
        let out = step(&mut c, &root, 0.0, &mut errors);
        let mut series = BTreeMap::new();
        for line in out.lines() {
            let l = storwatch_wire::lp::parse_line(line, storwatch_wire::lp::Backend::V1)
                .expect("valid line protocol");
            let size = match l.field("size_bytes") {
                Some(storwatch_wire::lp::FieldValue::Integer(v)) => *v,
                other => panic!("{other:?} in {line}"),
            };
            series.insert(l.tag("mount").expect("mount tag").to_owned(), size >> 30);
        }
        // Four series, each with its own filesystem's numbers, and the mount point back from
        // each tag by undoing the escapes.
        let want: BTreeMap<String, i64> = [
            ("/srv/a\\012b", 1),
            ("/srv/a\\040b", 2),
            ("/srv/a\\011b", 3),
            ("/srv/a\\134b", 4),
        ]
        .into_iter()
        .map(|(m, gb)| (m.to_owned(), gb))
        .collect();
        assert_eq!(series, want, "{out}");
        for tag in series.keys() {
            assert!(
                statfs
                    .sizes
                    .contains_key(&PathBuf::from(mountinfo::unescape(tag))),
                "{tag}"
            );
        }
        let calls = lock(&statfs.calls).clone();
        assert!(
            calls.contains(&("/srv/a\\012b".into(), "/srv/a\nb".into())),
            "{calls:?}"
        );
    }

    #[test]
    fn fill_rate_and_time_to_full() {
        let (_dir, root) = tree();
        let fake = Arc::new(FakeStatfs::default());
        let mut c = collector(root.clone(), fake.clone(), 3600);
        let mut errors = SourceErrors::default();
        // 1 GiB per minute into /srv/pool1 with 4000 GiB left: 240,000 s to full.
        let mut last = String::new();
        for k in 0..=10u64 {
            lock(&fake.0).insert("/srv/pool1".into(), stat(gib(100_000), gib(96_000 + k)));
            last = step(&mut c, &root, k as f64 * 60.0, &mut errors);
            let has_rate = last.contains("fill_rate_bytes_per_s");
            // the rate appears once 5 min (a twelfth of the hour) are covered
            assert_eq!(has_rate, k >= 5, "k={k}: {last}");
        }
        let rate = gib(1) as f64 / 60.0;
        assert!(
            last.contains(&format!("fill_rate_bytes_per_s={}", r3(rate))),
            "{last}"
        );
        let ttf = r3(gib(100_000 - 96_010) as f64 / rate);
        assert!(last.contains(&format!("time_to_full_s={ttf}")), "{last}");
        // Grown by 10 TiB: the history starts over.
        lock(&fake.0).insert("/srv/pool1".into(), stat(gib(110_000), gib(96_011)));
        let out = step(&mut c, &root, 660.0, &mut errors);
        assert!(!out.contains("fill_rate"), "{out}");
        // Shrinking use: a negative rate, no time to full.
        for k in 12..=20u64 {
            lock(&fake.0).insert("/srv/pool1".into(), stat(gib(110_000), gib(96_011 - k)));
            last = step(&mut c, &root, k as f64 * 60.0, &mut errors);
        }
        assert!(last.contains("fill_rate_bytes_per_s=-"), "{last}");
        assert!(!last.contains("time_to_full_s"), "{last}");
    }

    #[test]
    fn rounds_run_at_the_interval_not_every_sample() {
        let (_dir, root) = tree();
        let fake = Arc::new(FakeStatfs::default());
        lock(&fake.0).insert("/".into(), stat(gib(100), gib(40)));
        let mut c = collector(root.clone(), fake, 3600);
        let mut errors = SourceErrors::default();
        let lines: Vec<usize> = (0..13)
            .map(|k| {
                step(&mut c, &root, f64::from(k) * 10.0, &mut errors)
                    .lines()
                    .count()
            })
            .collect();
        assert_eq!(lines, [1, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 1]);
    }

    /// A statvfs that never answers for one mount point, as on a dead NFS server.
    struct HangingStatfs {
        hang: String,
        release: Mutex<Option<Receiver<()>>>,
    }

    impl Statfs for HangingStatfs {
        fn statvfs(&self, mp: &str, _path: &Path) -> io::Result<FsStat> {
            if mp == self.hang {
                if let Some(rx) = lock(&self.release).take() {
                    let _ = rx.recv();
                }
            }
            Ok(stat(gib(100), gib(10)))
        }
    }

    #[test]
    fn a_hung_mount_is_skipped_and_the_others_measured() {
        let (_dir, root) = tree();
        let (release, rx) = mpsc::channel();
        let statfs = Arc::new(HangingStatfs {
            hang: "/net/home".into(),
            release: Mutex::new(Some(rx)),
        });
        let cfg = FsConfig {
            interval: Duration::from_secs(10),
            timeout_s: 0.1,
            ..FsConfig::default()
        };
        let mut c =
            FsCollector::with_statfs(cfg, root.clone(), Duration::from_secs(10), false, statfs);
        let mut errors = SourceErrors::default();
        let mut t = 0.0;
        let mut out = String::new();
        // Sample until a round without the hung mount has been reported.
        let start = Instant::now();
        while !out.contains("/tank/data") && start.elapsed() < Duration::from_secs(20) {
            std::thread::sleep(Duration::from_millis(20));
            out = step(&mut c, &root, t, &mut errors);
            t += 10.0;
        }
        assert!(out.contains("mount=/srv/pool1"), "{out}");
        assert!(!out.contains("/net/home"), "{out}");
        assert!(lock(&c.cx.stuck).contains("/net/home"));
        let counted = errors.take_interval();
        assert!(
            counted.iter().any(|(s, _, n)| *s == STATVFS && *n >= 1),
            "{counted:?}"
        );
        // The call returns: the mount point is measured again.
        release.send(()).expect("hung thread waits");
        let start = Instant::now();
        while lock(&c.cx.stuck).contains("/net/home") && start.elapsed() < Duration::from_secs(10) {
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(!lock(&c.cx.stuck).contains("/net/home"));
    }

    #[test]
    fn an_answer_racing_the_give_up_never_leaves_its_mount_stuck() {
        // The round's thread answers for /net/home just as the sampling thread finds it late.
        // Whichever comes first, a mount point that answered is not skipped afterwards: given
        // up on first, the answer takes it out of `stuck` and stops the thread; answered first,
        // the give-up finds progress (or blames the next call, which is the one in flight).
        let busy = || {
            Arc::new(Mutex::new(Progress {
                mount: Some("/net/home".into()),
                since: Instant::now() - Duration::from_secs(60),
                abandoned: false,
            }))
        };
        // In order, both ways.
        let (b, stuck) = (busy(), Stuck::default());
        assert_eq!(
            give_up(&b, &stuck, Duration::from_secs(1)),
            Some(Some("/net/home".into()))
        );
        assert!(lock(&stuck).contains("/net/home"));
        assert!(!answered(&b, &stuck, "/net/home", Some("/srv".into())));
        assert!(lock(&stuck).is_empty());
        let (b, stuck) = (busy(), Stuck::default());
        assert!(answered(&b, &stuck, "/net/home", Some("/srv".into())));
        assert_eq!(give_up(&b, &stuck, Duration::from_secs(1)), None);
        assert!(lock(&stuck).is_empty());
        // Racing: the answer is never lost whatever the interleaving.
        for _ in 0..2000 {
            let (b, stuck) = (busy(), Stuck::default());
            let go = Arc::new(std::sync::Barrier::new(2));
            let racer = {
                let (b, stuck, go) = (b.clone(), stuck.clone(), go.clone());
                std::thread::spawn(move || {
                    go.wait();
                    answered(&b, &stuck, "/net/home", None)
                })
            };
            go.wait();
            let gave_up = give_up(&b, &stuck, Duration::from_secs(1));
            let went_on = racer.join().expect("racer");
            assert!(!lock(&stuck).contains("/net/home"), "{gave_up:?} {went_on}");
            assert_eq!(went_on, !lock(&b).abandoned);
        }
    }

    #[test]
    fn inline_a_hung_mount_costs_the_timeout_once() {
        // `once`: the sample that starts the round returns with it, the hung mount given up
        // on after the timeout and the others measured in the same round.
        let (_dir, root) = tree();
        let (release, rx) = mpsc::channel();
        let statfs = Arc::new(HangingStatfs {
            hang: "/srv/pool1".into(),
            release: Mutex::new(Some(rx)),
        });
        let cfg = FsConfig {
            timeout_s: 0.2,
            ..FsConfig::default()
        };
        let mut c =
            FsCollector::with_statfs(cfg, root.clone(), Duration::from_secs(10), true, statfs);
        let mut errors = SourceErrors::default();
        let out = step(&mut c, &root, 0.0, &mut errors);
        for mp in ["mount=/,", "mount=/tank/data,", "mount=/net/home,"] {
            assert!(out.contains(mp), "{mp} missing:\n{out}");
        }
        assert!(!out.contains("/srv/pool1"), "{out}");
        let statvfs_errors = |e: &mut SourceErrors| {
            e.take_interval()
                .into_iter()
                .filter(|(s, _, _)| *s == STATVFS)
                .map(|(_, n, _)| n)
                .sum::<u64>()
        };
        assert_eq!(statvfs_errors(&mut errors), 1);
        // Skipped while stuck: the next round does not wait for it again.
        let out = step(&mut c, &root, 60.0, &mut errors);
        assert!(out.contains("mount=/tank/data,"), "{out}");
        assert_eq!(statvfs_errors(&mut errors), 0);
        release.send(()).expect("hung thread waits");
    }

    #[test]
    fn this_machines_filesystems() {
        // The real mount table and statvfs(3) of the machine running the test: at least the
        // filesystem holding this crate is reported, with sizes that add up.
        let root = Root::default();
        let mut c = FsCollector::new(
            FsConfig::default(),
            root.clone(),
            Duration::from_secs(10),
            true,
        );
        let mut errors = SourceErrors::default();
        let out = step(&mut c, &root, 0.0, &mut errors);
        assert!(
            !out.is_empty(),
            "no filesystem reported from /proc/self/mountinfo"
        );
        for line in out.lines() {
            let p = storwatch_wire::lp::parse_line(line, storwatch_wire::lp::Backend::V1)
                .expect("valid line protocol");
            assert_eq!(p.measurement, "fs");
            let num = |k: &str| match p.field(k) {
                Some(storwatch_wire::lp::FieldValue::Integer(v)) => *v as f64,
                Some(storwatch_wire::lp::FieldValue::Unsigned(v)) => *v as f64,
                Some(storwatch_wire::lp::FieldValue::Float(v)) => *v,
                other => panic!("{k}: {other:?} in {line}"),
            };
            assert!(
                num("used_bytes") + num("avail_bytes") <= num("size_bytes"),
                "{line}"
            );
        }
        let here = Path::new(env!("CARGO_MANIFEST_DIR"));
        let s = statvfs::stat(here).expect("statvfs of the crate directory");
        let size = format!("size_bytes={}i", s.size_bytes());
        assert!(
            out.contains(&size),
            "the crate's filesystem ({size}) not in:\n{out}"
        );
    }
}
