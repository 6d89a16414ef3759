//! dm-multipath: reads the maps and their paths, feeds the [`MpathDetector`] and writes the
//! `mpath` and `mpath_path` lines.
//!
//! Sources, cheapest first:
//!
//! * sysfs every sample (`topology.rs`): `/sys/block/dm-*/dm/{uuid,name}` (maps are the dm
//!   devices whose uuid starts `mpath-`; read once per device), `slaves/` (the paths), and each
//!   path's `device/state` (`running`, `offline`, `blocked`, `transport-offline`; NVMe: `live`);
//! * the kernel's map status and table (fail counts, `A`/`F`, the active group,
//!   `queue_if_no_path`): through the `DM_TABLE_STATUS` ioctl every sample when the agent runs on
//!   the real `/sys` and may open `/dev/mapper/control` (`kernel.rs`); otherwise through `dmsetup
//!   status|table --target multipath` every `dmsetup_interval_s`, on a thread of its own (a
//!   fork+exec costs 1-2 ms of CPU, too much for every second on a 200-disk server; backed off
//!   while it is absent or fails, `commands.rs`). On a fixture root the configured `dmsetup`
//!   program is always used, so tests point it at a script;
//! * multipathd, when it runs: `show maps json` over its socket (or the `multipathd` command)
//!   every `multipathd_interval_s`, for path-group priorities, checker states, vendor and
//!   product. Never required. (`commands.rs`.)
//!
//! What the paths' states mean — transitions, flapping, the preferred group, events — is
//! [`crate::health::mpath`].

mod commands;
mod kernel;
mod topology;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::Deserialize;
use storwatch_wire::lp::LineWriter;

use crate::collect::{Collector, Live, ReportCx, SampleCx};
use crate::command::{CommandRunner, WorkerHandle};
use crate::event::Event;
use crate::health::mpath::{MapObservation, MpathDetector, PathObservation};
use crate::root::Root;
use crate::sources::dmmultipath::{ioctl::DmControl, DevT, MultipathTable};
use crate::sources::multipathd::{self, JsonMap};
use crate::sources::SourceError;
use commands::MpathWorker;
use kernel::{DmView, IoctlReader};
use topology::{SysMap, SysPath, Topology};

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

/// Where the kernel's view of the maps comes from, decided at the first poll that finds a map.
enum Kernel {
    Unknown,
    Ioctl(IoctlReader),
    Commands,
}

/// One map as `top` shows it: what its `mpath` line says, and which paths are down.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MpathNow {
    /// Map name.
    pub map: String,
    /// Paths.
    pub paths: u32,
    /// Paths up.
    pub active: u32,
    /// The paths that are down, with their state (`sdc failed`, `sdd offline`), by name.
    pub down: Vec<String>,
    /// Paths flapping now.
    pub flapping: u64,
    /// The group in use.
    pub active_group: Option<u32>,
    /// The group that should be in use.
    pub preferred_group: Option<u32>,
    /// The table queues I/O when no path is left.
    pub queue_if_no_path: Option<bool>,
    /// I/O is queued with no path left (see [`crate::health::mpath::MapState::hung_io`]).
    pub hung_io: Option<bool>,
}

/// The multipath monitor.
pub struct MpathCollector {
    cfg: MpathConfig,
    runner: Arc<dyn CommandRunner>,
    detector: MpathDetector,
    kernel: Kernel,
    /// Run commands in `poll` instead of on a thread (tests, `once`).
    inline: bool,
    worker: Option<WorkerHandle<MpathWorker>>,
    dm_view: Option<DmView>,
    dm_fresh: bool,
    mpd: Vec<JsonMap>,
    /// Something besides the path states may differ from what the detector last saw: a command
    /// round came in, the kernel's view moved, or the detector has not seen a view yet.
    view_moved: bool,
    topology: Topology,
}

impl std::fmt::Debug for MpathCollector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MpathCollector")
            .field("cfg", &self.cfg)
            .field("inline", &self.inline)
            .finish_non_exhaustive()
    }
}

impl MpathCollector {
    /// A monitor running commands through `runner` on a thread of its own.
    pub fn new(cfg: MpathConfig, runner: Arc<dyn CommandRunner>) -> Self {
        Self {
            detector: MpathDetector::new(cfg.flap_window_s, cfg.flap_threshold),
            cfg,
            runner,
            kernel: Kernel::Unknown,
            inline: false,
            worker: None,
            dm_view: None,
            dm_fresh: false,
            view_moved: true,
            mpd: Vec::new(),
            topology: Topology::default(),
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
        let (sys, age, states_moved) = self.topology.scan(root)?;
        if sys.is_empty() {
            // No multipath on this node (or every map flushed): silent, and forget old maps.
            self.detector.observe(now_s, Vec::new(), events);
            self.topology.keep(sys, age);
            self.view_moved = true;
            return Ok(());
        }
        if matches!(self.kernel, Kernel::Unknown) {
            self.kernel = Kernel::Commands;
            if self.cfg.use_ioctl && root.sys_dir() == Path::new("/sys") {
                match DmControl::open(&self.cfg.dm_control) {
                    Ok(Some(c)) => {
                        self.kernel =
                            Kernel::Ioctl(IoctlReader::new(c, self.cfg.dm_control.clone()))
                    }
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
        if let Kernel::Ioctl(reader) = &mut self.kernel {
            match reader.read(&sys, now_s) {
                Ok(v) => {
                    self.view_moved |= self.dm_view.as_ref() != Some(&v);
                    self.dm_view = Some(v);
                    self.dm_fresh = true;
                }
                Err(e) => result = Err(e),
            }
        }
        let need_dm = matches!(self.kernel, Kernel::Commands);
        if let Err(e) = self.commands(now_s, need_dm) {
            result = Err(e);
        }
        // The steady state of a healthy server: the same maps, path states and kernel view as
        // the last poll, and no transition in any path's window. Nothing the detector could
        // conclude has changed, so the observations (strings and maps for every path) are not
        // built again.
        let steady = age > 0 && !states_moved && !self.view_moved && self.detector.is_quiet();
        if !steady {
            let obs = build(&sys, self.dm_view.as_ref(), self.dm_fresh, &self.mpd);
            self.detector.observe(now_s, obs, events);
            self.view_moved = false;
        }
        self.topology.keep(sys, age);
        result
    }

    /// Writes this report interval's lines, stamped `ts_ns`, and starts a new interval.
    pub fn report(&mut self, w: &mut LineWriter, ts_ns: i64) {
        write_lines(&self.detector, w, ts_ns);
        self.detector.end_interval();
    }

    /// Picks up (or, inline, runs) the commands that are due.
    fn commands(&mut self, now_s: f64, need_dm: bool) -> Result<(), SourceError> {
        if !need_dm && !self.cfg.use_multipathd {
            return Ok(());
        }
        if self.worker.is_none() {
            let job = MpathWorker::new(&self.cfg, self.runner.clone(), need_dm, !self.inline);
            if self.inline {
                self.worker = Some(WorkerHandle::inline(job));
            } else {
                match WorkerHandle::spawn("mpath-commands", job) {
                    Ok(w) => self.worker = Some(w),
                    Err(e) => tracing::warn!("mpath: cannot start the command thread: {e}"),
                }
            }
        }
        let mut rounds = Vec::new();
        if let Some(w) = &mut self.worker {
            if !w.take(now_s, &mut rounds) {
                self.worker = None; // restarted on the next poll
            }
        }
        let mut err = None;
        for r in rounds {
            match r.dm {
                Some(Ok((v, e))) => {
                    self.dm_view = Some(v);
                    self.dm_fresh = true;
                    self.view_moved = true;
                    if e.is_some() {
                        err = e;
                    }
                }
                Some(Err(e)) => err = Some(e),
                None => {}
            }
            if let Some(m) = r.multipathd {
                self.mpd = m;
                self.view_moved = true;
            }
        }
        err.map_or(Ok(()), Err)
    }
}

impl Collector for MpathCollector {
    fn sources(&self) -> &'static [&'static str] {
        &["mpath"]
    }

    fn sample(&mut self, cx: &mut SampleCx<'_>) {
        if let Err(e) = self.poll(cx.root, cx.now_s, cx.events) {
            cx.errors.count("mpath", &e);
        }
    }

    fn report(&mut self, w: &mut LineWriter, cx: &mut ReportCx<'_>) {
        MpathCollector::report(self, w, cx.ts_ns);
    }

    fn live(&self, live: &mut Live) {
        live.maps.extend(self.detector.maps().map(|(name, t)| {
            MpathNow {
                map: name.clone(),
                paths: u32::try_from(t.paths.len()).unwrap_or(u32::MAX),
                active: t.active,
                down: t
                    .paths
                    .iter()
                    .filter(|(_, p)| !p.up)
                    .map(|(n, p)| format!("{n} {}", p.state))
                    .collect(),
                flapping: t.flapping_paths(),
                active_group: t.active_group,
                preferred_group: t.obs.preferred_group(),
                queue_if_no_path: t.obs.queue_if_no_path,
                hung_io: t.hung_io(),
            }
        }));
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
                obs.hw_handler = table.as_ref().and_then(|t| t.hw_handler.first().cloned());
                obs.features = table
                    .as_ref()
                    .filter(|t| !t.features.is_empty())
                    .map(|t| t.features.join(" "));
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

/// Writes the `mpath` and `mpath_path` lines of the interval.
fn write_lines(d: &MpathDetector, w: &mut LineWriter, ts_ns: i64) {
    for (name, t) in d.maps() {
        let paths = u32::try_from(t.paths.len()).unwrap_or(u32::MAX);
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
            .field_opt("preferred_group", t.obs.preferred_group())
            .field_opt("on_preferred_group", t.on_preferred_group())
            .field_opt("queue_if_no_path", t.obs.queue_if_no_path)
            .field("transitions", t.transitions())
            .field("flapping_paths", t.flapping_paths())
            .field_opt("hw_handler", t.obs.hw_handler.as_deref())
            .field_opt("features", t.obs.features.as_deref())
            .field_opt("hung_io", t.hung_io())
            .write();
        for (pname, p) in &t.paths {
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
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::command::{CapturedRunner, CommandError, SystemRunner};
    use crate::sources::dmmultipath;
    use commands::run_dmsetup;
    use std::time::{Duration, Instant};

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
            hw_handler: Some("alua".into()),
            features: Some("queue_if_no_path".into()),
            groups: 2,
            active_group: Some(active_group),
            group_priorities: prios.iter().map(|p| Some(*p)).collect(),
            paths,
        }
    }

    /// The detector's lines for the interval, as [`MpathCollector::report`] writes them.
    fn report(d: &mut MpathDetector, w: &mut LineWriter, ts_ns: i64) {
        write_lines(d, w, ts_ns);
        d.end_interval();
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
        report(&mut d, &mut w, 1);
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
        report(&mut d, &mut w, 2);
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
        report(&mut d, &mut w, 1);
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
        report(&mut d, &mut w, 5);
        assert_eq!(
            text(&w).lines().next().unwrap(),
            "mpath,host=ds01,map=mpatha,wwid=3600a0b80 paths=2i,paths_active=1i,paths_failed=1i,paths_lost=1i,groups=2i,active_group=2i,preferred_group=1i,on_preferred_group=false,queue_if_no_path=true,transitions=1i,flapping_paths=0i,hw_handler=\"alua\",features=\"queue_if_no_path\",hung_io=false 5"
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
        report(&mut d, &mut w, 1);
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

    /// A fixture root with mpatha's two paths running, and a monitor reading it with the
    /// captured dmsetup output.
    fn fixture_monitor(cfg: MpathConfig) -> (tempfile::TempDir, Root, MpathCollector) {
        let tmp = tempfile::tempdir().unwrap();
        sysfs(tmp.path(), "running");
        let root = Root::new(tmp.path().join("proc"), tmp.path());
        let runner = CapturedRunner::new()
            .with("dmsetup status --target multipath", STATUS_OK)
            .with("dmsetup table --target multipath", TABLE);
        (tmp, root, MpathCollector::new_inline(cfg, Arc::new(runner)))
    }

    #[test]
    fn monitor_on_a_fixture_root_with_captured_dmsetup() {
        let (tmp, root, mut m) = fixture_monitor(cfg());
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
    fn steady_polls_still_see_every_change_and_the_end_of_flapping() {
        let (tmp, root, mut m) = fixture_monitor(MpathConfig {
            flap_window_s: 30.0,
            ..cfg()
        });
        let mut ev = Vec::new();
        let mut seen = Vec::new();
        // Quiet polls (nothing is rebuilt), then sdc fails and returns twice, a poll apart at
        // odd moments between topology scans, then nothing moves for a minute.
        let flips = [
            (13, "offline"),
            (14, "running"),
            (17, "offline"),
            (18, "running"),
        ];
        for t in 0..80u32 {
            if let Some((_, state)) = flips.iter().find(|(at, _)| *at == t) {
                sysfs(tmp.path(), state);
            }
            m.poll(&root, f64::from(t), &mut ev).unwrap();
            seen.extend(ev.drain(..).map(|e| (t, e.to_state)));
        }
        let want: Vec<(u32, String)> = [
            (13, "offline"),
            (14, "active"),
            (17, "offline"),
            (17, "flapping"),
            (18, "active"),
            // the window (30 s) keeps two transitions from 44 s on: seen on a poll between two
            // topology scans (every 30 polls), where nothing else moved
            (44, "stable"),
        ]
        .iter()
        .map(|(t, s)| (*t, s.to_string()))
        .collect();
        assert_eq!(seen, want);
        assert!(m.detector.is_quiet());
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
        let mut m = MpathCollector::new_inline(c, Arc::new(SystemRunner));
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
        let mut m = MpathCollector::new(cfg(), Arc::new(runner));
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
        let mut m = MpathCollector::new_inline(cfg(), Arc::new(runner));
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
        let mut m = MpathCollector::new_inline(cfg(), Arc::new(CapturedRunner::new()));
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
        report(&mut d, &mut w, 1);
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
        let mut m = MpathCollector::new_inline(cfg(), Arc::new(runner));
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
                report(&mut d, &mut w, 1);
                for (_, t) in d.maps() {
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
