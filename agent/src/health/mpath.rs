//! dm-multipath health: per-path state, transitions and flapping; per-map active versus
//! preferred path group; events when paths fail, come back, or a map loses its last path.
//!
//! Sources, cheapest first:
//!
//! * sysfs every sample: `/sys/block/dm-*/dm/{uuid,name}` (maps are the dm devices whose uuid
//!   starts `mpath-`; read once per device), `slaves/` (the paths), and each path's
//!   `device/state` (`running`, `offline`, `blocked`, `transport-offline`; NVMe: `live`);
//! * the kernel's map status and table (fail counts, `A`/`F`, the active group,
//!   `queue_if_no_path`): through the `DM_TABLE_STATUS` ioctl every sample when the agent runs on
//!   the real `/sys` and may open `/dev/mapper/control`; otherwise through `dmsetup status|table
//!   --target multipath` every `dmsetup_interval_s`, on a thread of its own (a fork+exec costs
//!   1-2 ms of CPU, too much for every second on a 200-disk server). On a fixture root the
//!   configured `dmsetup` program is always used, so tests point it at a script;
//! * multipathd, when it runs: `show maps json` over its socket (or the `multipathd` command)
//!   every `multipathd_interval_s`, for path-group priorities, checker states, vendor and
//!   product. Never required.
//!
//! A path is *up* when the kernel has not failed it (`A`) and its device state is `running`
//! (or `live`). A transition is a change between up and down. Between two slow `dmsetup` reads
//! a path can fail and come back unseen; the kernel's fail count still moves, so each failure
//! the count shows beyond those seen adds two transitions (down and up).
//!
//! The preferred group is the one with the highest priority (multipathd's group `pri`; ties go to
//! the lower number). Without multipathd it is group 1: multipath-tools sorts path groups by
//! priority before loading the table and loads it with group 1 as the initial group, and the
//! kernel's table text cannot say what the initial group was (`multipath_status()` prints the
//! current or next group in that position).

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Deserialize;

use crate::command::{CommandError, CommandRunner};
use crate::event::Event;
use crate::root::{list_dir, read_into, Root};
use crate::sources::dmmultipath::{self, ioctl::DmControl, DevT, MultipathStatus, MultipathTable};
use crate::sources::multipathd::{self, JsonMap};
use crate::sources::SourceError;
use storwatch_wire::lp::LineWriter;

use crate::collect::{Collector, ReportCx, SampleCx};

/// Configuration of the multipath monitor (`[mpath]`).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MpathConfig {
    /// Watch dm-multipath maps. A node without multipath maps stays silent either way.
    pub enabled: bool,
    /// Length of the sliding window in which path transitions are counted, seconds.
    pub flap_window_s: f64,
    /// A path is flapping while its window holds at least this many transitions.
    pub flap_threshold: u32,
    /// The `dmsetup` program, used when the device-mapper ioctl is not available (and always on
    /// a fixture root).
    pub dmsetup: PathBuf,
    /// Seconds between two `dmsetup status`/`table` runs.
    pub dmsetup_interval_s: f64,
    /// Deadline for one `dmsetup` or `multipathd` run, seconds; a hung command is killed.
    pub command_timeout_s: f64,
    /// Read the kernel through the `DM_TABLE_STATUS` ioctl when running on the real `/sys`.
    pub use_ioctl: bool,
    /// The device-mapper control device for the ioctl.
    pub dm_control: PathBuf,
    /// Ask multipathd for path-group priorities and checker states when it runs.
    pub use_multipathd: bool,
    /// Abstract unix socket name of multipathd (without the leading `@`).
    pub multipathd_socket: String,
    /// The `multipathd` program, asked when the socket cannot be reached; empty: socket only.
    pub multipathd: PathBuf,
    /// Seconds between two multipathd queries.
    pub multipathd_interval_s: f64,
}

impl Default for MpathConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            flap_window_s: 600.0,
            flap_threshold: 3,
            dmsetup: PathBuf::from("dmsetup"),
            dmsetup_interval_s: 30.0,
            command_timeout_s: 5.0,
            use_ioctl: true,
            dm_control: PathBuf::from("/dev/mapper/control"),
            use_multipathd: true,
            multipathd_socket: multipathd::SOCKET_NAME.to_owned(),
            multipathd: PathBuf::from("multipathd"),
            multipathd_interval_s: 30.0,
        }
    }
}

// ---------------------------------------------------------------------------------------------
// What one poll saw, and the state machine over successive polls.

/// One path as seen in one poll.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PathObservation {
    /// Kernel name (`sdc`), or `major:minor` when sysfs does not name it.
    pub name: String,
    /// Device number.
    pub dev: Option<DevT>,
    /// 1-based path group; 0 when unknown.
    pub group: u32,
    /// The kernel's `A` (true) / `F` (false); `None` before the first status read.
    pub dm_active: Option<bool>,
    /// The kernel's cumulative fail count.
    pub fail_count: Option<u64>,
    /// Whether `dm_active`/`fail_count` were read in this poll (not carried over).
    pub dm_fresh: bool,
    /// `/sys/block/<path>/device/state`.
    pub sysfs_state: Option<String>,
    /// multipathd's checker state (`ready`, `faulty`, `ghost`, …).
    pub checker: Option<String>,
    /// multipathd's path priority.
    pub priority: Option<i64>,
}

impl PathObservation {
    fn up(&self) -> bool {
        self.dm_active != Some(false)
            && !matches!(self.sysfs_state.as_deref(), Some(s) if s != "running" && s != "live")
    }

    /// `failed` when the kernel failed it, else a device state other than running, else
    /// `active`.
    fn state(&self) -> String {
        if self.dm_active == Some(false) {
            return "failed".into();
        }
        match self.sysfs_state.as_deref() {
            Some(s) if s != "running" && s != "live" => s.to_owned(),
            _ => "active".into(),
        }
    }
}

/// One map as seen in one poll.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct MapObservation {
    /// Map name (dm name).
    pub name: String,
    /// WWID (dm uuid without `mpath-`).
    pub wwid: Option<String>,
    /// Vendor (from multipathd).
    pub vendor: Option<String>,
    /// Product (from multipathd).
    pub product: Option<String>,
    /// Whether the table queues I/O when no path is left.
    pub queue_if_no_path: Option<bool>,
    /// Number of path groups (0 when the kernel view is not known yet).
    pub groups: u32,
    /// The group in state `A` (1-based).
    pub active_group: Option<u32>,
    /// Priority of each group, by index, when multipathd told us.
    pub group_priorities: Vec<Option<i64>>,
    /// The paths.
    pub paths: Vec<PathObservation>,
}

impl MapObservation {
    fn preferred_group(&self) -> Option<u32> {
        if self.groups == 0 {
            return None;
        }
        let best = self
            .group_priorities
            .iter()
            .enumerate()
            .filter_map(|(i, p)| p.map(|p| (i, p)))
            .fold(None::<(usize, i64)>, |acc, (i, p)| match acc {
                Some((_, bp)) if bp >= p => acc,
                _ => Some((i, p)),
            });
        Some(best.map_or(1, |(i, _)| u32::try_from(i + 1).unwrap_or(1)))
    }
}

#[derive(Debug, Clone)]
struct PathTrack {
    obs: PathObservation,
    up: bool,
    state: String,
    /// Up→down transitions seen since the last fresh fail count.
    downs_since_count: u64,
    interval_transitions: u64,
    window: VecDeque<f64>,
    flapping: bool,
}

#[derive(Debug, Clone)]
struct MapTrack {
    obs: MapObservation,
    paths: BTreeMap<String, PathTrack>,
    active: u32,
    max_active: u32,
    active_group: Option<u32>,
}

/// The multipath state machine: feed it one [`MapObservation`] list per poll.
#[derive(Debug, Clone)]
pub struct MpathDetector {
    window_s: f64,
    threshold: u32,
    maps: BTreeMap<String, MapTrack>,
}

fn ev(object: String, from: &str, to: &str, text: String) -> Event {
    Event {
        source: "mpath",
        object,
        from_state: from.to_owned(),
        to_state: to.to_owned(),
        text,
    }
}

impl MpathDetector {
    /// A detector counting transitions over `window_s` seconds, flapping at `threshold`.
    pub fn new(window_s: f64, threshold: u32) -> Self {
        Self {
            window_s,
            threshold: threshold.max(1),
            maps: BTreeMap::new(),
        }
    }

    /// Takes one poll's view at monotonic time `now_s`; state changes go to `events`.
    pub fn observe(&mut self, now_s: f64, maps: Vec<MapObservation>, events: &mut Vec<Event>) {
        let seen: BTreeSet<String> = maps.iter().map(|m| m.name.clone()).collect();
        // A flushed map is forgotten; its disappearance is an administrative act, not a fault.
        self.maps.retain(|name, _| seen.contains(name));
        for m in maps {
            let name = m.name.clone();
            match self.maps.get_mut(&name) {
                None => {
                    let paths = m
                        .paths
                        .iter()
                        .map(|p| (p.name.clone(), new_path(p)))
                        .collect::<BTreeMap<_, _>>();
                    let active = count_up(&paths);
                    self.maps.insert(
                        name,
                        MapTrack {
                            active_group: m.active_group,
                            obs: m,
                            paths,
                            active,
                            max_active: active,
                        },
                    );
                }
                Some(t) => {
                    update_map(t, m, now_s, self.window_s, self.threshold, events);
                }
            }
        }
    }

    /// Writes `mpath` and `mpath_path` lines for the interval and starts a new interval.
    pub fn report(&mut self, w: &mut LineWriter, ts_ns: i64) {
        for (name, t) in &mut self.maps {
            let paths = u32::try_from(t.paths.len()).unwrap_or(u32::MAX);
            let transitions: u64 = t.paths.values().map(|p| p.interval_transitions).sum();
            let flapping = t.paths.values().filter(|p| p.flapping).count() as u64;
            let preferred = t.obs.preferred_group();
            let on_preferred = match (t.active_group, preferred) {
                (Some(a), Some(p)) => Some(a == p),
                _ => None,
            };
            w.line("mpath", ts_ns)
                .tag("map", name)
                .tag("wwid", t.obs.wwid.as_deref().unwrap_or(""))
                .tag("vendor", t.obs.vendor.as_deref().unwrap_or(""))
                .tag("product", t.obs.product.as_deref().unwrap_or(""))
                .field("paths", paths)
                .field("paths_active", t.active)
                .field("paths_failed", paths.saturating_sub(t.active))
                .field("paths_lost", t.max_active.saturating_sub(t.active))
                .field("groups", t.obs.groups)
                .field_opt("active_group", t.active_group)
                .field_opt("preferred_group", preferred)
                .field_opt("on_preferred_group", on_preferred)
                .field_opt("queue_if_no_path", t.obs.queue_if_no_path)
                .field("transitions", transitions)
                .field("flapping_paths", flapping)
                .write();
            for (pname, p) in &mut t.paths {
                let group = if p.obs.group > 0 {
                    p.obs.group.to_string()
                } else {
                    String::new()
                };
                w.line("mpath_path", ts_ns)
                    .tag("map", name)
                    .tag("path", pname)
                    .tag("group", &group)
                    .field("active", p.up)
                    .field("state", p.state.as_str())
                    .field_opt("fail_count", p.obs.fail_count)
                    .field("transitions", p.interval_transitions)
                    .field("transitions_window", p.window.len() as u64)
                    .field("flapping", p.flapping)
                    .field_opt("checker", p.obs.checker.as_deref())
                    .field_opt("priority", p.obs.priority)
                    .write();
                p.interval_transitions = 0;
            }
        }
    }
}

fn new_path(p: &PathObservation) -> PathTrack {
    PathTrack {
        up: p.up(),
        state: p.state(),
        obs: p.clone(),
        downs_since_count: 0,
        interval_transitions: 0,
        window: VecDeque::new(),
        flapping: false,
    }
}

fn count_up(paths: &BTreeMap<String, PathTrack>) -> u32 {
    u32::try_from(paths.values().filter(|p| p.up).count()).unwrap_or(u32::MAX)
}

fn update_map(
    t: &mut MapTrack,
    m: MapObservation,
    now_s: f64,
    window_s: f64,
    threshold: u32,
    events: &mut Vec<Event>,
) {
    let map = m.name.clone();
    let seen: BTreeSet<&str> = m.paths.iter().map(|p| p.name.as_str()).collect();
    let total = m.paths.len();
    // A path taken out of the map (multipathd removes a dead path after dev_loss_tmo, or a
    // table reload drops it): say so, which also ends any flapping episode it was in.
    for (name, p) in t.paths.iter().filter(|(n, _)| !seen.contains(n.as_str())) {
        let flap = if p.flapping { " while flapping" } else { "" };
        events.push(ev(
            format!("{map}/{name}"),
            &p.state,
            "removed",
            format!("{map}: path {name} removed from the map{flap}; {total} left"),
        ));
    }
    t.paths.retain(|n, _| seen.contains(n.as_str()));
    for p in &m.paths {
        let Some(pt) = t.paths.get_mut(&p.name) else {
            // A path added to the map (rescan, table reload): its history starts now.
            t.paths.insert(p.name.clone(), new_path(p));
            continue;
        };
        let up = p.up();
        let state = p.state();
        let mut added = 0u64;
        if up != pt.up {
            added += 1;
            if !up {
                pt.downs_since_count += 1;
            }
            let active_now = m.paths.iter().filter(|q| q.up()).count();
            let group = if p.group > 0 {
                format!(" in group {}", p.group)
            } else {
                String::new()
            };
            let dev = p.dev.map(|d| format!(" ({d})")).unwrap_or_default();
            let why = if up {
                String::new()
            } else if p.dm_active == Some(false) {
                " (marked failed by dm-multipath)".to_owned()
            } else {
                format!(" (device state {state})")
            };
            let verb = if up { "reinstated" } else { "failed" };
            events.push(ev(
                format!("{map}/{}", p.name),
                &pt.state,
                &state,
                format!(
                    "{map}: path {}{dev}{group} {verb}{why}; {active_now} of {total} paths active",
                    p.name
                ),
            ));
        }
        // Failures the kernel counted that happened between two reads: down and back up.
        if p.dm_fresh {
            if let (Some(new), Some(old)) = (p.fail_count, pt.obs.fail_count) {
                if new > old {
                    let missed = (new - old).saturating_sub(pt.downs_since_count);
                    added += 2 * missed;
                }
            }
            pt.downs_since_count = 0;
        }
        for _ in 0..added.min(1000) {
            pt.window.push_back(now_s);
        }
        pt.interval_transitions += added;
        pt.up = up;
        pt.state = state;
        let fail_count = p.fail_count.or(pt.obs.fail_count);
        pt.obs = p.clone();
        pt.obs.fail_count = fail_count;
        while pt.window.front().is_some_and(|&t0| t0 <= now_s - window_s) {
            pt.window.pop_front();
        }
        let flapping = pt.window.len() >= threshold as usize;
        if flapping != pt.flapping {
            let (from, to, what) = if flapping {
                ("stable", "flapping", "started flapping")
            } else {
                ("flapping", "stable", "stopped flapping")
            };
            events.push(ev(
                format!("{map}/{}", p.name),
                from,
                to,
                format!(
                    "{map}: path {} {what}: {} transitions in the last {:.0} s",
                    p.name,
                    pt.window.len(),
                    window_s
                ),
            ));
            pt.flapping = flapping;
        }
    }

    let active = count_up(&t.paths);
    if active == 0 && t.active > 0 {
        let q = match m.queue_if_no_path {
            Some(true) => "; I/O is queued until a path returns",
            Some(false) => "; I/O fails",
            None => "",
        };
        events.push(ev(
            map.clone(),
            "active",
            "all paths lost",
            format!("{map}: lost its last path{q}"),
        ));
    } else if active > 0 && t.active == 0 && !t.paths.is_empty() {
        events.push(ev(
            map.clone(),
            "all paths lost",
            "active",
            format!("{map}: a path is back, {active} of {total} active"),
        ));
    }
    if let (Some(old), Some(new)) = (t.active_group, m.active_group) {
        if old != new {
            let pref = m
                .preferred_group()
                .map(|p| {
                    if p == new {
                        " (the preferred group)".to_owned()
                    } else {
                        format!(" (preferred: group {p})")
                    }
                })
                .unwrap_or_default();
            events.push(ev(
                map.clone(),
                &format!("group {old}"),
                &format!("group {new}"),
                format!("{map}: I/O switched from path group {old} to {new}{pref}"),
            ));
        }
    }
    if m.active_group.is_some() {
        t.active_group = m.active_group;
    }
    t.active = active;
    t.max_active = t.max_active.max(active);
    t.obs = m;
}

// ---------------------------------------------------------------------------------------------
// Reading: sysfs, the kernel (ioctl or dmsetup), multipathd.

/// A multipath map as sysfs shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct SysMap {
    dm: String,
    dev: Option<DevT>,
    name: String,
    wwid: String,
    slaves: Vec<SysPath>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct SysPath {
    name: String,
    dev: Option<DevT>,
    state: Option<String>,
}

/// Identity of a dm device, read once.
#[derive(Debug, Clone)]
struct DmIdent {
    mpath: Option<(String, String)>,
    dev: Option<DevT>,
}

/// The kernel's view of the maps from one `dmsetup` round.
type DmView = BTreeMap<String, (MultipathStatus, Option<MultipathTable>)>;

/// What the command thread hands over.
#[derive(Debug, Default)]
struct CommandRound {
    dm: Option<Result<(DmView, Option<SourceError>), SourceError>>,
    multipathd: Option<Vec<JsonMap>>,
}

struct Worker {
    rx: mpsc::Receiver<CommandRound>,
    stop: Arc<AtomicBool>,
}

impl Drop for Worker {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

enum Kernel {
    Unknown,
    Ioctl(DmControl),
    Commands,
}

/// The multipath monitor.
pub struct MpathMonitor {
    cfg: MpathConfig,
    runner: Arc<dyn CommandRunner>,
    detector: MpathDetector,
    kernel: Kernel,
    /// Run commands in `poll` instead of on a thread (tests, `once`).
    inline: bool,
    worker: Option<Worker>,
    next_dm_s: f64,
    next_mpd_s: f64,
    dm_view: Option<DmView>,
    dm_fresh: bool,
    tables: BTreeMap<String, (MultipathTable, f64)>,
    mpd: Vec<JsonMap>,
    idents: BTreeMap<String, DmIdent>,
    slaves: BTreeMap<String, SlaveCache>,
    /// The maps and their paths from the last directory scan, and the polls since.
    topology: Option<(Vec<SysMap>, u32)>,
    buf: String,
}

/// Polls between two scans of `/sys/block` and the maps' `slaves/`. Listing 250 directory
/// entries and 40 `slaves/` each second was a third of the agent's CPU on a 200-disk server;
/// between scans only each path's `device/state` is read (from a kept-open file), and a path whose
/// state file vanished forces a scan at once. A map that appears is seen within this many polls.
const TOPOLOGY_RESCAN_POLLS: u32 = 10;

impl std::fmt::Debug for MpathMonitor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MpathMonitor")
            .field("cfg", &self.cfg)
            .field("inline", &self.inline)
            .finish_non_exhaustive()
    }
}

impl MpathMonitor {
    /// A monitor running commands through `runner` on a thread of its own.
    pub fn new(cfg: MpathConfig, runner: Arc<dyn CommandRunner>) -> Self {
        Self {
            detector: MpathDetector::new(cfg.flap_window_s, cfg.flap_threshold),
            cfg,
            runner,
            kernel: Kernel::Unknown,
            inline: false,
            worker: None,
            next_dm_s: 0.0,
            next_mpd_s: 0.0,
            dm_view: None,
            dm_fresh: false,
            tables: BTreeMap::new(),
            mpd: Vec::new(),
            idents: BTreeMap::new(),
            slaves: BTreeMap::new(),
            topology: None,
            buf: String::new(),
        }
    }

    /// A monitor that runs its commands inside `poll` when they are due (by `now_s`), for
    /// one-shot runs and deterministic tests.
    pub fn new_inline(cfg: MpathConfig, runner: Arc<dyn CommandRunner>) -> Self {
        Self {
            inline: true,
            ..Self::new(cfg, runner)
        }
    }

    fn timeout(&self) -> Duration {
        Duration::from_secs_f64(self.cfg.command_timeout_s.clamp(0.1, 3600.0))
    }

    /// The multipath maps in sysfs, with their paths' device states.
    /// The maps and their paths with current path states, and the polls since the last directory
    /// scan. The caller hands them back with [`Self::keep_topology`] so that the next poll can
    /// reuse them without a copy.
    fn scan_sysfs(&mut self, root: &Root) -> Result<(Vec<SysMap>, u32), SourceError> {
        if let Some((mut maps, age)) = self.topology.take() {
            if age + 1 < TOPOLOGY_RESCAN_POLLS {
                let block = root.sys("block");
                let mut vanished = false;
                for p in maps.iter_mut().flat_map(|m| m.slaves.iter_mut()) {
                    let state = match self.slaves.get_mut(&p.name) {
                        Some(cache) => cache.read_state(&block.join(&p.name)),
                        None => None,
                    };
                    vanished |= p.state.is_some() && state.is_none();
                    p.state = state;
                }
                if !vanished {
                    return Ok((maps, age + 1));
                }
            }
        }
        Ok((self.scan_sysfs_dirs(root)?, 0))
    }

    fn keep_topology(&mut self, maps: Vec<SysMap>, age: u32) {
        self.topology = Some((maps, age));
    }

    fn scan_sysfs_dirs(&mut self, root: &Root) -> Result<Vec<SysMap>, SourceError> {
        let block = root.sys("block");
        let names = list_dir(&block)?.unwrap_or_default();
        let dms: Vec<&String> = names.iter().filter(|n| n.starts_with("dm-")).collect();
        self.idents.retain(|k, _| dms.contains(&k));
        let mut out = Vec::new();
        for dm in dms {
            let dir = block.join(dm);
            if !self.idents.contains_key(dm) {
                let ident = read_ident(&dir, &mut self.buf)?;
                self.idents.insert(dm.clone(), ident);
            }
            let Some(ident) = self.idents.get(dm) else {
                continue;
            };
            let Some((name, wwid)) = ident.mpath.clone() else {
                continue;
            };
            let dev = ident.dev;
            let mut slaves = Vec::new();
            for s in list_dir(&dir.join("slaves"))?.unwrap_or_default() {
                let sdir = block.join(&s);
                if !self.slaves.contains_key(&s) {
                    let dev = read_dev(&sdir.join("dev"), &mut self.buf)?;
                    self.slaves
                        .insert(s.clone(), SlaveCache { dev, state: None });
                }
                let Some(cache) = self.slaves.get_mut(&s) else {
                    continue;
                };
                let dev = cache.dev;
                let state = cache.read_state(&sdir);
                slaves.push(SysPath {
                    name: s,
                    dev,
                    state,
                });
            }
            out.push(SysMap {
                dm: dm.clone(),
                dev,
                name,
                wwid,
                slaves,
            });
        }
        // Slave names can be reused by another disk after a rescan: forget unknown ones.
        let live: BTreeSet<&str> = out
            .iter()
            .flat_map(|m| m.slaves.iter().map(|s| s.name.as_str()))
            .collect();
        self.slaves.retain(|k, _| live.contains(k.as_str()));
        Ok(out)
    }

    /// Status and table of every map through the ioctl; `None` when the ioctl failed.
    fn read_ioctl(&mut self, maps: &[SysMap], now_s: f64) -> Option<Result<DmView, SourceError>> {
        let Kernel::Ioctl(ctl) = &mut self.kernel else {
            return None;
        };
        let mut view = DmView::new();
        for m in maps {
            let Some(dev) = m.dev else { continue };
            let status = match ctl.status(dev, false) {
                Ok(t) => t,
                // The map went away between the sysfs scan and the ioctl.
                Err(e) if e.raw_os_error() == Some(libc::ENXIO) => continue,
                Err(e) => return Some(Err(SourceError::io(&self.cfg.dm_control, e))),
            };
            let Some(st) = status.iter().find(|t| t.target == "multipath") else {
                continue;
            };
            let status = match dmmultipath::parse_status_args(&st.args) {
                Ok(s) => s,
                Err(e) => {
                    let line = format!("{} {} multipath {}", st.start, st.length, st.args);
                    return Some(Err(SourceError::parse(
                        &self.cfg.dm_control,
                        crate::sources::ParseError::new(1, &line, e),
                    )));
                }
            };
            // The table changes only on a reload: re-read it when the path set differs, and
            // once a minute.
            let devs = |s: &MultipathStatus| -> Vec<DevT> {
                s.groups
                    .iter()
                    .flat_map(|g| g.paths.iter().map(|p| p.dev))
                    .collect()
            };
            let stale = match self.tables.get(&m.name) {
                Some((t, at)) => {
                    now_s - at > 60.0
                        || t.groups
                            .iter()
                            .flat_map(|g| g.paths.iter().map(|p| p.dev))
                            .collect::<Vec<_>>()
                            != devs(&status)
                }
                None => true,
            };
            if stale {
                if let Ok(t) = ctl.status(dev, true) {
                    if let Some(tt) = t.iter().find(|t| t.target == "multipath") {
                        if let Ok(table) = dmmultipath::parse_table_args(&tt.args) {
                            self.tables.insert(m.name.clone(), (table, now_s));
                        }
                    }
                }
            }
            let table = self.tables.get(&m.name).map(|(t, _)| t.clone());
            view.insert(m.name.clone(), (status, table));
        }
        self.tables.retain(|k, _| view.contains_key(k));
        Some(Ok(view))
    }

    fn start_worker(&mut self, need_dm: bool) {
        let (tx, rx) = mpsc::channel();
        let stop = Arc::new(AtomicBool::new(false));
        let stop2 = stop.clone();
        let cfg = self.cfg.clone();
        let runner = self.runner.clone();
        let timeout = self.timeout();
        let spawned = std::thread::Builder::new()
            .name("mpath-commands".into())
            .spawn(move || {
                let start = Instant::now();
                let (mut next_dm, mut next_mpd) = (0.0, 0.0);
                while !stop2.load(Ordering::Relaxed) {
                    let now = start.elapsed().as_secs_f64();
                    let mut round = CommandRound::default();
                    if need_dm && now >= next_dm {
                        round.dm = Some(run_dmsetup(&cfg, runner.as_ref(), timeout));
                        next_dm = now + cfg.dmsetup_interval_s.max(1.0);
                    }
                    if cfg.use_multipathd && now >= next_mpd {
                        round.multipathd = Some(run_multipathd(&cfg, runner.as_ref(), timeout));
                        next_mpd = now + cfg.multipathd_interval_s.max(1.0);
                    }
                    if (round.dm.is_some() || round.multipathd.is_some()) && tx.send(round).is_err()
                    {
                        return;
                    }
                    std::thread::sleep(Duration::from_millis(250));
                }
            });
        match spawned {
            Ok(_) => self.worker = Some(Worker { rx, stop }),
            Err(e) => tracing::warn!("mpath: cannot start the command thread: {e}"),
        }
    }

    /// Picks up (or, inline, runs) the commands that are due.
    fn commands(&mut self, now_s: f64, need_dm: bool) -> Result<(), SourceError> {
        if !need_dm && !self.cfg.use_multipathd {
            return Ok(());
        }
        let mut rounds = Vec::new();
        if self.inline {
            let mut round = CommandRound::default();
            let timeout = self.timeout();
            if need_dm && now_s >= self.next_dm_s {
                round.dm = Some(run_dmsetup(&self.cfg, self.runner.as_ref(), timeout));
                self.next_dm_s = now_s + self.cfg.dmsetup_interval_s;
            }
            if self.cfg.use_multipathd && now_s >= self.next_mpd_s {
                round.multipathd = Some(run_multipathd(&self.cfg, self.runner.as_ref(), timeout));
                self.next_mpd_s = now_s + self.cfg.multipathd_interval_s;
            }
            rounds.push(round);
        } else {
            if self.worker.is_none() {
                self.start_worker(need_dm);
            }
            if let Some(w) = &self.worker {
                while let Ok(r) = w.rx.try_recv() {
                    rounds.push(r);
                }
            }
        }
        let mut err = None;
        for r in rounds {
            match r.dm {
                Some(Ok((v, e))) => {
                    self.dm_view = Some(v);
                    self.dm_fresh = true;
                    if e.is_some() {
                        err = e;
                    }
                }
                Some(Err(e)) => err = Some(e),
                None => {}
            }
            if let Some(m) = r.multipathd {
                self.mpd = m;
            }
        }
        err.map_or(Ok(()), Err)
    }
}

/// A path device, with its `device/state` kept open: sysfs regenerates an attribute on every
/// read from offset 0, so one `pread` a second replaces open+read+close.
#[derive(Debug)]
struct SlaveCache {
    dev: Option<DevT>,
    state: Option<std::fs::File>,
}

impl SlaveCache {
    fn read_state(&mut self, dir: &Path) -> Option<String> {
        use std::os::unix::fs::FileExt;
        for attempt in 0..2 {
            if self.state.is_none() {
                self.state = std::fs::File::open(dir.join("device/state")).ok();
            }
            let f = self.state.as_ref()?;
            let mut b = [0u8; 64];
            match f.read_at(&mut b, 0) {
                Ok(n) => {
                    let text = b.get(..n).unwrap_or_default();
                    return Some(String::from_utf8_lossy(text).trim().to_owned());
                }
                // The device went away (ENODEV) or was replaced: reopen once by name.
                Err(_) if attempt == 0 => self.state = None,
                Err(_) => return None,
            }
        }
        None
    }
}

fn read_ident(dir: &Path, buf: &mut String) -> Result<DmIdent, SourceError> {
    let dev = read_dev(&dir.join("dev"), buf)?;
    let uuid = if read_into(&dir.join("dm/uuid"), buf)? {
        buf.trim().to_owned()
    } else {
        String::new()
    };
    let mpath = match uuid.strip_prefix("mpath-") {
        Some(wwid) => {
            let name = if read_into(&dir.join("dm/name"), buf)? {
                buf.trim().to_owned()
            } else {
                String::new()
            };
            let name = if name.is_empty() {
                wwid.to_owned()
            } else {
                name
            };
            Some((name, wwid.to_owned()))
        }
        None => None,
    };
    Ok(DmIdent { mpath, dev })
}

fn read_dev(path: &Path, buf: &mut String) -> Result<Option<DevT>, SourceError> {
    Ok(if read_into(path, buf)? {
        DevT::parse(buf.trim())
    } else {
        None
    })
}

/// `dmsetup status` and `table --target multipath`, joined by map name. A malformed line costs
/// only its own map: the others are kept and the first bad line comes back as the error.
fn run_dmsetup(
    cfg: &MpathConfig,
    runner: &dyn CommandRunner,
    timeout: Duration,
) -> Result<(DmView, Option<SourceError>), SourceError> {
    let status = runner.run(&cfg.dmsetup, &["status", "--target", "multipath"], timeout)?;
    let table = runner.run(&cfg.dmsetup, &["table", "--target", "multipath"], timeout)?;
    let status = dmmultipath::parse_status(&status);
    let mut table = dmmultipath::parse_table(&table);
    let first_error = status
        .errors
        .first()
        .or(table.errors.first())
        .cloned()
        .map(|e| SourceError::parse(&cfg.dmsetup, e));
    let mut view = DmView::new();
    for s in status.rows {
        let Some(name) = s.name.clone() else { continue };
        let t = table
            .rows
            .iter()
            .position(|t| t.name.as_deref() == Some(name.as_str()))
            .map(|i| table.rows.swap_remove(i));
        view.insert(name, (s, t));
    }
    Ok((view, first_error))
}

/// multipathd's maps: socket first, then the command; nothing when neither answers.
fn run_multipathd(
    cfg: &MpathConfig,
    runner: &dyn CommandRunner,
    timeout: Duration,
) -> Vec<JsonMap> {
    let text = match multipathd::query_socket(&cfg.multipathd_socket, "show maps json", timeout) {
        Ok(Some(t)) => Some(t),
        Ok(None) | Err(_) if cfg.multipathd.as_os_str().is_empty() => None,
        Ok(None) | Err(_) => {
            match runner.run(&cfg.multipathd, &["show", "maps", "json"], timeout) {
                Ok(t) => Some(t),
                Err(CommandError::NotFound(_)) => None,
                Err(e) => {
                    tracing::debug!("mpath: multipathd: {e}");
                    None
                }
            }
        }
    };
    let Some(text) = text else { return Vec::new() };
    match multipathd::parse_json(&text) {
        Ok(docs) => multipathd::json_maps(docs),
        Err(e) => {
            tracing::debug!("mpath: multipathd reply: {e}");
            Vec::new()
        }
    }
}

/// Joins sysfs, the kernel view and multipathd into observations.
fn build(
    sys: &[SysMap],
    dm: Option<&DmView>,
    dm_fresh: bool,
    mpd: &[JsonMap],
) -> Vec<MapObservation> {
    let mut out = Vec::new();
    for m in sys {
        let names: BTreeMap<DevT, &SysPath> = m
            .slaves
            .iter()
            .filter_map(|s| s.dev.map(|d| (d, s)))
            .collect();
        let jm = mpd
            .iter()
            .find(|j| j.name == m.name || j.uuid.as_deref() == Some(&m.wwid));
        let trim = |s: &Option<String>| {
            s.as_deref()
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
        };
        let checker = |dev: &str| -> (Option<String>, Option<i64>) {
            jm.and_then(|j| {
                j.path_groups
                    .iter()
                    .flat_map(|g| g.paths.iter())
                    .find(|p| p.dev == dev)
                    .map(|p| (p.chk_st.clone(), p.pri))
            })
            .unwrap_or((None, None))
        };
        let mut obs = MapObservation {
            name: m.name.clone(),
            wwid: Some(m.wwid.clone()),
            vendor: jm.and_then(|j| trim(&j.vend)),
            product: jm.and_then(|j| trim(&j.prod)),
            ..Default::default()
        };
        match dm.and_then(|v| v.get(&m.name)) {
            Some((status, table)) => {
                obs.groups = u32::try_from(status.groups.len()).unwrap_or(u32::MAX);
                obs.active_group = status.active_group();
                obs.queue_if_no_path = table.as_ref().map(MultipathTable::queue_if_no_path);
                obs.group_priorities = (1..=status.groups.len())
                    .map(|g| {
                        jm.and_then(|j| {
                            j.path_groups
                                .iter()
                                .find(|pg| pg.group.map(|x| x as usize) == Some(g))
                                .and_then(|pg| pg.pri)
                        })
                    })
                    .collect();
                for (gi, g) in status.groups.iter().enumerate() {
                    for p in &g.paths {
                        let sp = names.get(&p.dev);
                        let name = sp.map_or_else(|| p.dev.to_string(), |s| s.name.clone());
                        let (checker, priority) = checker(&name);
                        obs.paths.push(PathObservation {
                            name,
                            dev: Some(p.dev),
                            group: u32::try_from(gi + 1).unwrap_or(0),
                            dm_active: Some(p.active),
                            fail_count: Some(p.fail_count),
                            dm_fresh,
                            sysfs_state: sp.and_then(|s| s.state.clone()),
                            checker,
                            priority,
                        });
                    }
                }
            }
            None => {
                // No kernel view yet (first dmsetup round pending or failed): sysfs alone.
                for s in &m.slaves {
                    let (checker, priority) = checker(&s.name);
                    obs.paths.push(PathObservation {
                        name: s.name.clone(),
                        dev: s.dev,
                        sysfs_state: s.state.clone(),
                        checker,
                        priority,
                        ..Default::default()
                    });
                }
            }
        }
        out.push(obs);
    }
    out
}

impl MpathMonitor {
    /// Reads the subsystem once; state changes are appended to `events`. An absent subsystem
    /// is silent; a broken one is an error (the rest of the poll still goes on).
    pub fn poll(
        &mut self,
        root: &Root,
        now_s: f64,
        events: &mut Vec<Event>,
    ) -> Result<(), SourceError> {
        if !self.cfg.enabled {
            return Ok(());
        }
        let (sys, age) = self.scan_sysfs(root)?;
        if sys.is_empty() {
            // No multipath on this node (or every map flushed): silent, and forget old maps.
            self.detector.observe(now_s, Vec::new(), events);
            self.keep_topology(sys, age);
            return Ok(());
        }
        if matches!(self.kernel, Kernel::Unknown) {
            self.kernel = Kernel::Commands;
            if self.cfg.use_ioctl && root.sys_dir() == Path::new("/sys") {
                match DmControl::open(&self.cfg.dm_control) {
                    Ok(Some(c)) => self.kernel = Kernel::Ioctl(c),
                    Ok(None) => {}
                    Err(e) => tracing::info!(
                        "mpath: {}: {e}; reading maps with {} every {} s",
                        self.cfg.dm_control.display(),
                        self.cfg.dmsetup.display(),
                        self.cfg.dmsetup_interval_s
                    ),
                }
            }
        }
        let mut result = Ok(());
        self.dm_fresh = false;
        match self.read_ioctl(&sys, now_s) {
            Some(Ok(v)) => {
                self.dm_view = Some(v);
                self.dm_fresh = true;
            }
            Some(Err(e)) => result = Err(e),
            None => {}
        }
        let need_dm = matches!(self.kernel, Kernel::Commands);
        if let Err(e) = self.commands(now_s, need_dm) {
            result = Err(e);
        }
        let obs = build(&sys, self.dm_view.as_ref(), self.dm_fresh, &self.mpd);
        self.detector.observe(now_s, obs, events);
        self.keep_topology(sys, age);
        result
    }

    /// Writes this report interval's lines, stamped `ts_ns`.
    pub fn report(&mut self, w: &mut LineWriter, ts_ns: i64) {
        self.detector.report(w, ts_ns);
    }
}

impl Collector for MpathMonitor {
    fn sources(&self) -> &'static [&'static str] {
        &["mpath"]
    }

    fn sample(&mut self, cx: &mut SampleCx<'_>) {
        if let Err(e) = self.poll(cx.root, cx.now_s, cx.events) {
            cx.errors.count("mpath", &e);
        }
    }

    fn report(&mut self, w: &mut LineWriter, cx: &mut ReportCx<'_>) {
        MpathMonitor::report(self, w, cx.ts_ns);
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::command::{CapturedRunner, SystemRunner};

    fn path(name: &str, group: u32, active: bool, fails: u64) -> PathObservation {
        PathObservation {
            name: name.into(),
            dev: None,
            group,
            dm_active: Some(active),
            fail_count: Some(fails),
            dm_fresh: true,
            sysfs_state: Some("running".into()),
            checker: None,
            priority: None,
        }
    }

    fn map(paths: Vec<PathObservation>, active_group: u32, prios: &[i64]) -> MapObservation {
        MapObservation {
            name: "mpatha".into(),
            wwid: Some("3600a0b80".into()),
            vendor: None,
            product: None,
            queue_if_no_path: Some(true),
            groups: 2,
            active_group: Some(active_group),
            group_priorities: prios.iter().map(|p| Some(*p)).collect(),
            paths,
        }
    }

    fn text(w: &LineWriter) -> String {
        String::from_utf8(w.as_bytes().to_vec()).unwrap()
    }

    #[test]
    fn flapping_four_times_in_ten_minutes_then_clearing() {
        let mut d = MpathDetector::new(600.0, 3);
        let mut ev = Vec::new();
        let mut fails = 0;
        d.observe(
            0.0,
            vec![map(
                vec![path("sdb", 1, true, 0), path("sdc", 2, true, 0)],
                1,
                &[50, 10],
            )],
            &mut ev,
        );
        assert!(ev.is_empty(), "no events for the first look: {ev:?}");
        // sdb fails and comes back four times, 2 minutes apart.
        for k in 0..4 {
            let t = 120.0 * f64::from(k) + 10.0;
            fails += 1;
            d.observe(
                t,
                vec![map(
                    vec![path("sdb", 1, false, fails), path("sdc", 2, true, 0)],
                    1,
                    &[50, 10],
                )],
                &mut ev,
            );
            d.observe(
                t + 30.0,
                vec![map(
                    vec![path("sdb", 1, true, fails), path("sdc", 2, true, 0)],
                    1,
                    &[50, 10],
                )],
                &mut ev,
            );
        }
        let kinds: Vec<(String, String)> = ev
            .iter()
            .map(|e| (e.from_state.clone(), e.to_state.clone()))
            .collect();
        assert_eq!(kinds.iter().filter(|k| k.1 == "failed").count(), 4);
        assert_eq!(
            kinds
                .iter()
                .filter(|k| k.0 == "failed" && k.1 == "active")
                .count(),
            4
        );
        // The third transition (second failure) starts flapping, once.
        assert_eq!(kinds.iter().filter(|k| k.1 == "flapping").count(), 1);
        let start = ev.iter().position(|e| e.to_state == "flapping").unwrap();
        assert_eq!(
            ev[..start]
                .iter()
                .filter(
                    |e| e.source == "mpath" && (e.to_state == "failed" || e.to_state == "active")
                )
                .count(),
            3
        );
        let mut w = LineWriter::new("ds01", &[]);
        d.report(&mut w, 1);
        let out = text(&w);
        assert!(out.contains("mpath_path,host=ds01,map=mpatha,path=sdb,group=1 active=true,state=\"active\",fail_count=4i,transitions=8i,transitions_window=8i,flapping=true"), "{out}");
        assert!(out.contains("transitions=8i,flapping_paths=1i"), "{out}");
        // Transitions were at 10, 40, 130, 160, 250, 280, 370 and 400 s: the window holds three
        // of them until the one at 280 s is ten minutes old.
        ev.clear();
        d.observe(
            879.0,
            vec![map(
                vec![path("sdb", 1, true, 4), path("sdc", 2, true, 0)],
                1,
                &[50, 10],
            )],
            &mut ev,
        );
        assert!(ev.is_empty(), "still three in the window: {ev:?}");
        d.observe(
            881.0,
            vec![map(
                vec![path("sdb", 1, true, 4), path("sdc", 2, true, 0)],
                1,
                &[50, 10],
            )],
            &mut ev,
        );
        assert_eq!(ev.len(), 1, "{ev:?}");
        assert_eq!(
            (ev[0].from_state.as_str(), ev[0].to_state.as_str()),
            ("flapping", "stable")
        );
        let mut w = LineWriter::new("ds01", &[]);
        d.report(&mut w, 2);
        let out = text(&w);
        assert!(out.contains("path=sdb,group=1 active=true,state=\"active\",fail_count=4i,transitions=0i,transitions_window=2i,flapping=false"), "{out}");
    }

    #[test]
    fn failures_between_slow_reads_count_through_the_fail_count() {
        let mut d = MpathDetector::new(600.0, 3);
        let mut ev = Vec::new();
        d.observe(
            0.0,
            vec![map(vec![path("sdb", 1, true, 7)], 1, &[])],
            &mut ev,
        );
        // 30 s later dmsetup shows the path active again but failed twice meanwhile.
        d.observe(
            30.0,
            vec![map(vec![path("sdb", 1, true, 9)], 1, &[])],
            &mut ev,
        );
        assert_eq!(ev.len(), 1, "flapping from unseen failures: {ev:?}");
        assert_eq!(ev[0].to_state, "flapping");
        // A stale (carried-over) reading adds nothing; a reset count (table reload) neither.
        let mut stale = path("sdb", 1, true, 9);
        stale.dm_fresh = false;
        d.observe(31.0, vec![map(vec![stale], 1, &[])], &mut ev);
        d.observe(
            60.0,
            vec![map(vec![path("sdb", 1, true, 0)], 1, &[])],
            &mut ev,
        );
        let mut w = LineWriter::new("h", &[]);
        d.report(&mut w, 1);
        assert!(
            text(&w).contains("fail_count=0i,transitions=4i,transitions_window=4i"),
            "{}",
            text(&w)
        );
    }

    #[test]
    fn map_loses_a_path_switches_group_and_loses_the_last_path() {
        let mut d = MpathDetector::new(600.0, 3);
        let mut ev = Vec::new();
        let both = |a: bool, b: bool, g: u32| {
            map(
                vec![
                    path("sdb", 1, a, u64::from(!a)),
                    path("sdc", 2, b, u64::from(!b)),
                ],
                g,
                &[50, 10],
            )
        };
        d.observe(0.0, vec![both(true, true, 1)], &mut ev);
        d.observe(1.0, vec![both(false, true, 2)], &mut ev);
        assert_eq!(ev.len(), 2, "{ev:?}");
        assert_eq!(ev[0].object, "mpatha/sdb");
        assert_eq!(ev[0].text, "mpatha: path sdb in group 1 failed (marked failed by dm-multipath); 1 of 2 paths active");
        assert_eq!(
            (ev[1].from_state.as_str(), ev[1].to_state.as_str()),
            ("group 1", "group 2")
        );
        assert_eq!(
            ev[1].text,
            "mpatha: I/O switched from path group 1 to 2 (preferred: group 1)"
        );
        let mut w = LineWriter::new("ds01", &[]);
        d.report(&mut w, 5);
        assert_eq!(
            text(&w).lines().next().unwrap(),
            "mpath,host=ds01,map=mpatha,wwid=3600a0b80 paths=2i,paths_active=1i,paths_failed=1i,paths_lost=1i,groups=2i,active_group=2i,preferred_group=1i,on_preferred_group=false,queue_if_no_path=true,transitions=1i,flapping_paths=0i 5"
        );
        ev.clear();
        d.observe(2.0, vec![both(false, false, 2)], &mut ev);
        assert_eq!(ev.len(), 2, "{ev:?}");
        assert_eq!(ev[1].object, "mpatha");
        assert_eq!(ev[1].to_state, "all paths lost");
        assert_eq!(
            ev[1].text,
            "mpatha: lost its last path; I/O is queued until a path returns"
        );
        ev.clear();
        d.observe(3.0, vec![both(true, false, 1)], &mut ev);
        assert_eq!(
            ev.iter().map(|e| e.to_state.as_str()).collect::<Vec<_>>(),
            ["active", "active", "group 1"]
        );
    }

    #[test]
    fn a_removed_path_is_an_event_and_leaves_paths_lost() {
        let mut d = MpathDetector::new(600.0, 3);
        let mut ev = Vec::new();
        let two = vec![path("sdb", 1, true, 0), path("sdc", 2, true, 0)];
        d.observe(0.0, vec![map(two, 1, &[])], &mut ev);
        d.observe(
            1.0,
            vec![map(vec![path("sdb", 1, true, 0)], 1, &[])],
            &mut ev,
        );
        assert_eq!(ev.len(), 1, "{ev:?}");
        assert_eq!(
            (
                ev[0].object.as_str(),
                ev[0].from_state.as_str(),
                ev[0].to_state.as_str()
            ),
            ("mpatha/sdc", "active", "removed")
        );
        assert_eq!(ev[0].text, "mpatha: path sdc removed from the map; 1 left");
        let mut w = LineWriter::new("h", &[]);
        d.report(&mut w, 1);
        assert!(
            text(&w).contains("paths=1i,paths_active=1i,paths_failed=0i,paths_lost=1i"),
            "{}",
            text(&w)
        );
        // A flushed map is forgotten without events.
        ev.clear();
        d.observe(2.0, vec![], &mut ev);
        assert!(ev.is_empty());
    }

    #[test]
    fn preferred_group_follows_priorities_else_group_one() {
        let mut m = map(vec![], 1, &[10, 50]);
        assert_eq!(m.preferred_group(), Some(2));
        m.group_priorities = vec![Some(50), Some(50)];
        assert_eq!(m.preferred_group(), Some(1));
        m.group_priorities = vec![];
        assert_eq!(m.preferred_group(), Some(1));
        m.groups = 0;
        assert_eq!(m.preferred_group(), None);
    }

    #[test]
    fn device_state_alone_makes_a_transition() {
        let mut d = MpathDetector::new(600.0, 3);
        let mut ev = Vec::new();
        d.observe(
            0.0,
            vec![map(vec![path("sdb", 1, true, 0)], 1, &[])],
            &mut ev,
        );
        let mut p = path("sdb", 1, true, 0);
        p.sysfs_state = Some("transport-offline".into());
        d.observe(1.0, vec![map(vec![p], 1, &[])], &mut ev);
        assert_eq!(ev.len(), 2, "{ev:?}");
        assert_eq!(ev[0].to_state, "transport-offline");
        assert_eq!(ev[0].text, "mpatha: path sdb in group 1 failed (device state transport-offline); 0 of 1 paths active");
        assert_eq!(ev[1].to_state, "all paths lost");
    }

    /// A sysfs tree with one multipath map `mpatha` (dm-3) over sdb and sdc, plus an LVM volume.
    fn sysfs(dir: &Path, sdc_state: &str) {
        let w = |p: &str, s: &str| {
            let p = dir.join(p);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, s).unwrap();
        };
        w("block/dm-3/dev", "253:3\n");
        w("block/dm-3/dm/name", "mpatha\n");
        w(
            "block/dm-3/dm/uuid",
            "mpath-3600d0230000000000e13955cc3757803\n",
        );
        w("block/dm-3/slaves/sdb", "");
        w("block/dm-3/slaves/sdc", "");
        w("block/dm-0/dev", "253:0\n");
        w("block/dm-0/dm/name", "vg-root\n");
        w("block/dm-0/dm/uuid", "LVM-abc\n");
        w("block/sdb/dev", "8:16\n");
        w("block/sdb/device/state", "running\n");
        w("block/sdc/dev", "8:32\n");
        w("block/sdc/device/state", &format!("{sdc_state}\n"));
    }

    const STATUS_OK: &str =
        "mpatha: 0 2097152 multipath 2 0 0 0 2 1 A 0 1 2 8:16 A 0 0 1 E 0 1 2 8:32 A 0 0 1\n";
    const STATUS_FAILED: &str =
        "mpatha: 0 2097152 multipath 2 0 0 0 2 2 E 0 1 2 8:16 F 1 0 1 A 0 1 2 8:32 A 0 0 1\n";
    const TABLE: &str = "mpatha: 0 2097152 multipath 1 queue_if_no_path 1 alua 2 1 service-time 0 1 2 8:16 1 1 service-time 0 1 2 8:32 1 1\n";

    fn cfg() -> MpathConfig {
        MpathConfig {
            use_multipathd: false,
            ..MpathConfig::default()
        }
    }

    #[test]
    fn monitor_on_a_fixture_root_with_captured_dmsetup() {
        let tmp = tempfile::tempdir().unwrap();
        sysfs(tmp.path(), "running");
        let root = Root::new(tmp.path().join("proc"), tmp.path());
        let runner = CapturedRunner::new()
            .with("dmsetup status --target multipath", STATUS_OK)
            .with("dmsetup table --target multipath", TABLE);
        let mut m = MpathMonitor::new_inline(cfg(), Arc::new(runner));
        let mut ev = Vec::new();
        m.poll(&root, 0.0, &mut ev).unwrap();
        // sdc's device goes offline: seen through sysfs at once, without a dmsetup run.
        sysfs(tmp.path(), "offline");
        m.poll(&root, 1.0, &mut ev).unwrap();
        assert_eq!(ev.len(), 1, "{ev:?}");
        assert_eq!(ev[0].object, "mpatha/sdc");
        assert_eq!(
            ev[0].text,
            "mpatha: path sdc (8:32) in group 2 failed (device state offline); 1 of 2 paths active"
        );
        let mut w = LineWriter::new("ds01", &[]);
        m.report(&mut w, 7);
        insta::assert_snapshot!(text(&w));
    }

    #[test]
    fn monitor_with_a_fake_dmsetup_program() {
        let tmp = tempfile::tempdir().unwrap();
        sysfs(tmp.path(), "running");
        let root = Root::new(tmp.path().join("proc"), tmp.path());
        let status = tmp.path().join("status.txt");
        std::fs::write(&status, STATUS_OK).unwrap();
        std::fs::write(tmp.path().join("table.txt"), TABLE).unwrap();
        let script = tmp.path().join("dmsetup");
        std::fs::write(&script, format!("#!/bin/sh\ncd '{}' || exit 1\n[ \"$2 $3\" = '--target multipath' ] || exit 2\ncat \"$1.txt\"\n", tmp.path().display())).unwrap();
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        let c = MpathConfig {
            dmsetup: script,
            dmsetup_interval_s: 10.0,
            ..cfg()
        };
        let mut m = MpathMonitor::new_inline(c, Arc::new(SystemRunner));
        let mut ev = Vec::new();
        m.poll(&root, 0.0, &mut ev).unwrap();
        std::fs::write(&status, STATUS_FAILED).unwrap();
        // Not due yet: the kernel view is the old one.
        m.poll(&root, 5.0, &mut ev).unwrap();
        assert!(ev.is_empty(), "{ev:?}");
        m.poll(&root, 10.0, &mut ev).unwrap();
        let got: Vec<(&str, &str, &str)> = ev
            .iter()
            .map(|e| {
                (
                    e.object.as_str(),
                    e.from_state.as_str(),
                    e.to_state.as_str(),
                )
            })
            .collect();
        assert_eq!(
            got,
            [
                ("mpatha/sdb", "active", "failed"),
                ("mpatha", "group 1", "group 2")
            ]
        );
        let mut w = LineWriter::new("ds01", &[]);
        m.report(&mut w, 7);
        insta::assert_snapshot!(text(&w));
    }

    #[test]
    fn background_commands_are_picked_up() {
        let tmp = tempfile::tempdir().unwrap();
        sysfs(tmp.path(), "running");
        let root = Root::new(tmp.path().join("proc"), tmp.path());
        let runner = CapturedRunner::new()
            .with("dmsetup status --target multipath", STATUS_FAILED)
            .with("dmsetup table --target multipath", TABLE);
        let mut m = MpathMonitor::new(cfg(), Arc::new(runner));
        let mut ev = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut t = 0.0;
        loop {
            m.poll(&root, t, &mut ev).unwrap();
            if m.dm_view.is_some() || Instant::now() > deadline {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
            t += 0.02;
        }
        let mut w = LineWriter::new("h", &[]);
        m.report(&mut w, 1);
        assert!(text(&w).contains("active_group=2i"), "{}", text(&w));
    }

    #[test]
    fn broken_dmsetup_is_an_error_and_absent_multipath_is_silent() {
        let tmp = tempfile::tempdir().unwrap();
        sysfs(tmp.path(), "running");
        let root = Root::new(tmp.path().join("proc"), tmp.path());
        let runner = CapturedRunner::new()
            .with(
                "dmsetup status --target multipath",
                "mpatha: 0 1 multipath 2 0 0 0 1 1 A 0 1 0 8:16 Q 0\n",
            )
            .with("dmsetup table --target multipath", TABLE);
        let mut m = MpathMonitor::new_inline(cfg(), Arc::new(runner));
        let e = m.poll(&root, 0.0, &mut Vec::new()).unwrap_err();
        assert!(e.to_string().contains("line 1"), "{e}");
        // Sysfs alone still gives the paths.
        let mut w = LineWriter::new("h", &[]);
        m.report(&mut w, 1);
        assert!(
            text(&w).contains("mpath_path,host=h,map=mpatha,path=sdb active=true"),
            "{}",
            text(&w)
        );

        let empty = tempfile::tempdir().unwrap();
        let mut m = MpathMonitor::new_inline(cfg(), Arc::new(CapturedRunner::new()));
        m.poll(&Root::new(empty.path(), empty.path()), 0.0, &mut Vec::new())
            .unwrap();
        let mut w = LineWriter::new("h", &[]);
        m.report(&mut w, 1);
        assert!(w.as_bytes().is_empty());
    }

    #[test]
    fn one_bad_dmsetup_line_costs_only_its_map() {
        let status = format!("mpathx: 0 1 multipath 2 0 0 0 1 1 A 0 1 0 8:16 Q 0\n{STATUS_OK}");
        let runner = CapturedRunner::new()
            .with("dmsetup status --target multipath", status)
            .with("dmsetup table --target multipath", TABLE);
        let (view, err) = run_dmsetup(&cfg(), &runner, Duration::from_secs(1)).unwrap();
        assert_eq!(view.keys().collect::<Vec<_>>(), ["mpatha"]);
        assert!(view["mpatha"].1.is_some(), "table joined by name");
        let err = err.expect("the bad line is reported").to_string();
        assert!(
            err.contains("line 1") && err.contains("not A or F"),
            "{err}"
        );
        let missing = run_dmsetup(&cfg(), &CapturedRunner::new(), Duration::from_secs(1));
        assert!(matches!(
            missing,
            Err(SourceError::Command(CommandError::NotFound(_)))
        ));
    }

    #[test]
    fn multipathd_priorities_pick_the_preferred_group() {
        let sys = vec![SysMap {
            dm: "dm-3".into(),
            dev: None,
            name: "mpatha".into(),
            wwid: "3600".into(),
            slaves: vec![
                SysPath {
                    name: "sdb".into(),
                    dev: DevT::parse("8:16"),
                    state: Some("running".into()),
                },
                SysPath {
                    name: "sdc".into(),
                    dev: DevT::parse("8:32"),
                    state: Some("running".into()),
                },
            ],
        }];
        let mut dm = DmView::new();
        let s = dmmultipath::parse_status(STATUS_OK).rows.remove(0);
        let t = dmmultipath::parse_table(TABLE).rows.remove(0);
        dm.insert("mpatha".into(), (s, Some(t)));
        let json = r#"{"major_version":0,"minor_version":1,"maps":[{"name":"mpatha","uuid":"3600","vend":"PURE    ","prod":"FlashArray      ",
            "path_groups":[{"pri":10,"group":1,"paths":[{"dev":"sdb","chk_st":"ghost","pri":10}]},{"pri":50,"group":2,"paths":[{"dev":"sdc","chk_st":"ready","pri":50}]}]}]}"#;
        let mpd = multipathd::json_maps(multipathd::parse_json(json).unwrap());
        let obs = build(&sys, Some(&dm), true, &mpd);
        assert_eq!(obs[0].preferred_group(), Some(2));
        assert_eq!(obs[0].vendor.as_deref(), Some("PURE"));
        assert_eq!(obs[0].paths[0].checker.as_deref(), Some("ghost"));
        let mut d = MpathDetector::new(600.0, 3);
        d.observe(0.0, obs, &mut Vec::new());
        let mut w = LineWriter::new("h", &[]);
        d.report(&mut w, 1);
        insta::assert_snapshot!(text(&w));
    }

    /// CPU cost of one poll on a 200-path server (50 maps x 4 paths), kernel view from a slow
    /// dmsetup round (so polls in between read sysfs only), and of starting one process.
    #[test]
    #[ignore = "timing: cargo test --release -- --ignored --nocapture poll_cost"]
    fn poll_cost_200_paths() {
        let tmp = tempfile::tempdir().unwrap();
        let w = |p: String, s: String| {
            let p = tmp.path().join(p);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, s).unwrap();
        };
        let (mut status, mut table) = (String::new(), String::new());
        for m in 0..50u32 {
            w(format!("block/dm-{m}/dev"), format!("253:{m}\n"));
            w(format!("block/dm-{m}/dm/name"), format!("mpath{m}\n"));
            w(
                format!("block/dm-{m}/dm/uuid"),
                format!("mpath-3600{m:08}\n"),
            );
            let mut st = format!("mpath{m}: 0 1 multipath 2 0 0 0 2 1");
            let mut tb = format!("mpath{m}: 0 1 multipath 1 queue_if_no_path 1 alua 2 1");
            for g in 0..2u32 {
                st += if g == 0 { " A 0 2 2" } else { " E 0 2 2" };
                tb += " service-time 0 2 2";
                for p in 0..2u32 {
                    let minor = (m * 4 + g * 2 + p) * 16;
                    let name = format!("sd{}", minor / 16);
                    w(format!("block/dm-{m}/slaves/{name}"), String::new());
                    w(format!("block/{name}/dev"), format!("8:{minor}\n"));
                    w(format!("block/{name}/device/state"), "running\n".into());
                    st += &format!(" 8:{minor} A 0 0 1");
                    tb += &format!(" 8:{minor} 1 1");
                }
            }
            status += &(st + "\n");
            table += &(tb + "\n");
        }
        let root = Root::new(tmp.path().join("proc"), tmp.path());
        let runner = CapturedRunner::new()
            .with("dmsetup status --target multipath", status)
            .with("dmsetup table --target multipath", table);
        let mut m = MpathMonitor::new_inline(cfg(), Arc::new(runner));
        let mut ev = Vec::new();
        let cpu = crate::selfstat::thread_cpu;
        let c0 = cpu();
        m.poll(&root, 0.0, &mut ev).unwrap();
        println!(
            "first poll (dmsetup output parsed, 50 maps): {:?} CPU",
            cpu() - c0
        );
        let n = 300;
        let c0 = cpu();
        for i in 1..=n {
            m.poll(&root, f64::from(i) * 0.01, &mut ev).unwrap();
        }
        println!(
            "poll between dmsetup rounds, 50 maps / 200 paths: {:?} CPU",
            (cpu() - c0) / n
        );
        let c0 = cpu();
        let mut out = LineWriter::new("h", &[]);
        m.report(&mut out, 1);
        println!("report ({} lines): {:?} CPU", out.lines(), cpu() - c0);
        let t0 = Instant::now();
        for _ in 0..20 {
            SystemRunner
                .run(Path::new("/bin/true"), &[], Duration::from_secs(5))
                .unwrap();
        }
        println!(
            "one process start (/bin/true) through SystemRunner: {:?} wall",
            t0.elapsed() / 20
        );
        assert!(ev.is_empty());
    }

    proptest::proptest! {
        /// Any sequence of path states, fail counts and device states: no panic, flapping
        /// starts and stops alternate, and the map never has more active paths than paths.
        #[test]
        fn detector_sequences_stay_consistent(steps in proptest::collection::vec(
            (0.0f64..400.0, proptest::collection::vec(
                (proptest::bool::ANY, 0u64..6, proptest::bool::ANY, 0usize..4, 1u32..3), 0..4)),
            0..40)) {
            let mut d = MpathDetector::new(600.0, 3);
            let mut now = 0.0;
            let mut ev = Vec::new();
            for (dt, paths) in steps {
                now += dt;
                let obs: Vec<PathObservation> = paths.iter().enumerate().map(|(i, (a, fc, fresh, st, g))| {
                    let mut p = path(&format!("sd{i}"), *g, *a, *fc);
                    p.dm_fresh = *fresh;
                    p.sysfs_state = ["running", "offline", "blocked", "transport-offline"].get(*st).map(|s| (*s).to_owned());
                    p
                }).collect();
                d.observe(now, vec![map(obs, 1 + (now as u32 % 2), &[])], &mut ev);
                let mut w = LineWriter::new("h", &[]);
                d.report(&mut w, 1);
                for t in d.maps.values() {
                    proptest::prop_assert!(t.active as usize <= t.paths.len());
                    for p in t.paths.values() {
                        proptest::prop_assert_eq!(p.flapping, p.window.len() >= 3);
                    }
                }
            }
            let mut flapping: BTreeMap<&str, bool> = BTreeMap::new();
            for e in &ev {
                let f = flapping.entry(e.object.as_str()).or_insert(false);
                match e.to_state.as_str() {
                    "removed" => *f = false,
                    "flapping" | "stable" if e.from_state == "stable" || e.from_state == "flapping" => {
                        proptest::prop_assert_eq!(*f, e.to_state == "stable");
                        *f = e.to_state == "flapping";
                    }
                    _ => {}
                }
            }
        }
    }

    #[test]
    fn config_defaults_and_toml() {
        let c: MpathConfig = toml::from_str(
            "flap_window_s = 300\nflap_threshold = 4\ndmsetup = \"/usr/sbin/dmsetup\"\n",
        )
        .unwrap();
        assert_eq!(c.flap_window_s, 300.0);
        assert_eq!(c.flap_threshold, 4);
        assert_eq!(c.dmsetup_interval_s, 30.0);
        assert!(toml::from_str::<MpathConfig>("flap_windows = 3").is_err());
    }
}
