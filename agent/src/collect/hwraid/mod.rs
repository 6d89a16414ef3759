//! Hardware RAID controllers (MegaRAID / PERC) through `storcli`/`storcli64`/`perccli`, on the
//! monitor's own thread: the `raid_controller`, `raid_vd` and `raid_pd` lines.
//!
//! **When.** A round every `[hwraid] interval` (default 60 s) runs one to four storcli calls
//! (`show all`; the VDs' and the drives' detail when `show all` leaves them open to change, or
//! every 10th and 5th round; rebuild progress while a drive rebuilds: [`worker`]), one after
//! the other, on a thread of its own: the
//! sampling loop never waits for storcli. Each call is killed with its process group after
//! `timeout` (default 60 s) and its output is read up to `max_output_bytes` (default 4 MiB; a
//! 24-drive controller's `show all` is 30–100 kB).
//!
//! **Without storcli** (none of `storcli64`, `storcli`, `perccli64`, `perccli` in `PATH`, nor the
//! configured program): one info line at the first round, no error, no lines.
//!
//! **Bad answers.** Output that is not storcli JSON, or JSON cut short, an answer naming no
//! controller, a call that hangs or prints too much: a source error (`storcli`), and the last
//! good state stays, reported with `read_ok=false`, the message in `read_error` and its age
//! growing in `last_read_age_s`. A controller's own `Failure` to a detail call is reported on
//! its line, its last good detail kept ([`detail`]).
//!
//! **No controller** (`No Controller found`): one info line in the log, one `raid_controller`
//! line with `controller=none` saying so, no error, and rounds ever less often (up to hourly).
//!
//! What the answers mean — redundancy, rebuild ETA and stall, risk, events — is
//! [`crate::health::hwraid`]; tying each VD to its `sdX` is [`tie`]. Fields and tags:
//! docs/metrics-hwraid.md.

mod detail;
mod first;
mod tie;
mod workdir;
mod worker;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;
use storwatch_wire::lp::LineWriter;

use super::book::DriveBook;
use super::{Collector, Live, ReportCx, SampleCx};
use crate::command::WorkerHandle;
use crate::health::hwraid::{HwraidDetector, MemberReading, Params, VdStatus};
use crate::health::risk::RiskModel;
use crate::root::Root;
use worker::{HwraidWorker, Update, WorkerConfig};

pub use worker::HwraidError;

/// The source name errors are counted under.
const SOURCE: &str = "storcli";

/// `[hwraid]` in the agent's configuration.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HwraidConfig {
    /// Read hardware RAID controllers at all (default true; without storcli nothing is read
    /// either way).
    pub enabled: bool,
    /// The storcli program, a name looked up in `PATH` or a path; empty (the default): the
    /// first of `storcli64`, `storcli`, `perccli64`, `perccli` in `PATH`, then
    /// `/opt/MegaRAID/storcli/storcli64` and `/opt/MegaRAID/perccli/perccli64`.
    pub storcli: PathBuf,
    /// A round of calls every this long (default 60s).
    #[serde(with = "crate::duration")]
    pub interval: Duration,
    /// A call still running after this long is killed with its process group and reported
    /// (default 60s).
    #[serde(with = "crate::duration")]
    pub timeout: Duration,
    /// Standard output read from one call at most; past it the call is killed and reported
    /// (default 4 MiB).
    pub max_output_bytes: usize,
    /// A rebuild whose progress has not moved for this long is `rebuild_stalled` (default 2h:
    /// storcli's progress is a whole percent, and 1 % of a 16 TB drive rebuilt at 50 MB/s
    /// under load takes 53 minutes).
    #[serde(with = "crate::duration")]
    pub stall_after: Duration,
}

impl Default for HwraidConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            storcli: PathBuf::new(),
            interval: Duration::from_secs(60),
            timeout: Duration::from_secs(60),
            max_output_bytes: 4 << 20,
            stall_after: Duration::from_secs(7200),
        }
    }
}

/// One virtual drive as `top` shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct VdNow {
    /// The VD, as its `raid_vd` line reports it.
    pub status: VdStatus,
}

/// The hardware RAID monitor.
pub struct HwraidCollector {
    cfg: HwraidConfig,
    root: Root,
    inline: bool,
    worker: Option<WorkerHandle<HwraidWorker>>,
    detector: HwraidDetector,
    /// The last round ended without an error (`None` before the first round ended).
    read_ok: Option<bool>,
    /// Why the last round failed, or which of its calls did.
    read_error: Option<String>,
    /// When the last good round ended (collector seconds).
    read_at_s: Option<f64>,
    /// `c0` → what went wrong with that controller's answers in the last round.
    failed: BTreeMap<String, Vec<String>>,
    /// storcli found no controller, and none has answered (its words): the one
    /// `raid_controller` line says so.
    no_controller: Option<String>,
    /// The drive monitor's readings, whose rate of a drive is preferred over storcli's counters.
    book: Option<DriveBook>,
}

impl std::fmt::Debug for HwraidCollector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HwraidCollector")
            .field("cfg", &self.cfg)
            .field("running", &self.worker.is_some())
            .field("read_ok", &self.read_ok)
            .finish()
    }
}

impl HwraidCollector {
    /// A monitor running storcli on a thread of its own (started at the first sample).
    pub fn new(cfg: HwraidConfig, risk: RiskModel, root: Root) -> Self {
        let params = Params {
            stall_after_s: cfg.stall_after.as_secs_f64(),
            eta_window_s: 3600.0,
            risk,
        };
        Self {
            cfg,
            root,
            inline: false,
            worker: None,
            detector: HwraidDetector::new(params),
            read_ok: None,
            read_error: None,
            read_at_s: None,
            failed: BTreeMap::new(),
            no_controller: None,
            book: None,
        }
    }

    /// Takes each drive's own rate from `book` (the drive monitor's smartctl reading of it,
    /// found by serial, then WWN) where it has one, rather than from storcli's counters; and
    /// publishes there which virtual drive each drive is a member of (the `drive` lines'
    /// `raid_vd` tag).
    pub fn with_book(mut self, book: DriveBook) -> Self {
        self.book = Some(book);
        self
    }

    /// A monitor that runs a due round in the sample that finds it due, waiting for it (each
    /// call still bounded by the timeout): for `once` and stepped tests.
    pub fn new_inline(cfg: HwraidConfig, risk: RiskModel, root: Root) -> Self {
        Self {
            inline: true,
            ..Self::new(cfg, risk, root)
        }
    }

    fn start_worker(&mut self) -> Result<(), std::io::Error> {
        let program = (!self.cfg.storcli.as_os_str().is_empty()).then(|| self.cfg.storcli.clone());
        let worker = HwraidWorker::new(
            WorkerConfig {
                program,
                interval_s: self.cfg.interval.as_secs_f64().max(1.0),
                timeout: self.cfg.timeout.max(Duration::from_millis(100)),
                max_output_bytes: self.cfg.max_output_bytes.max(4096),
            },
            self.root.clone(),
        );
        self.worker = Some(if self.inline {
            WorkerHandle::inline(worker)
        } else {
            WorkerHandle::spawn("storwatch-hwraid", worker)?
        });
        Ok(())
    }

    fn apply(&mut self, u: Update, cx: &mut SampleCx<'_>) {
        let Update::Round { at, result } = u;
        let t = if self.inline {
            cx.now_s
        } else {
            cx.now_s - at.elapsed().as_secs_f64()
        };
        match result {
            Ok(round) => {
                let view = self.book.as_ref().map(DriveBook::view);
                let window_h = self.detector.params().risk.open_window_h;
                let reading = |d: &crate::sources::storcli::PhysicalDrive| {
                    let v = view.as_deref()?;
                    let e = d
                        .serial
                        .as_deref()
                        .and_then(|s| v.by_serial(s))
                        .or_else(|| d.wwn.as_deref().and_then(|w| v.by_wwn(w)))?;
                    Some(MemberReading {
                        afr: e.afr,
                        at_risk: e.at_risk,
                        failure_probability: e.probability(window_h),
                    })
                };
                self.detector.observe_with(
                    &round.controllers,
                    &round.devices,
                    &reading,
                    t,
                    cx.events,
                );
                self.read_at_s = Some(t);
                if let Some(book) = &self.book {
                    // For the `raid_vd` tag of the drive monitor's lines of the same disks.
                    book.publish_raid_vds(
                        self.detector
                            .pds()
                            .iter()
                            .filter(|d| !d.vd.is_empty())
                            .map(|d| (d.serial.clone(), d.wwn.clone(), d.vd.clone()))
                            .collect(),
                    );
                }
                for e in &round.errors {
                    cx.errors.count(SOURCE, e);
                }
                self.read_ok = Some(round.errors.is_empty());
                self.read_error = (!round.errors.is_empty()).then(|| {
                    round
                        .errors
                        .iter()
                        .map(ToString::to_string)
                        .collect::<Vec<_>>()
                        .join(" / ")
                });
                for (c, msgs) in &round.failed {
                    for m in msgs {
                        cx.errors.count(SOURCE, &format_args!("{c}: {m}"));
                    }
                }
                self.failed = round.failed;
                self.no_controller = round.no_controller;
            }
            Err(e) => {
                cx.errors.count(SOURCE, &e);
                self.read_ok = Some(false);
                self.read_error = Some(e.to_string());
            }
        }
    }
}

impl Collector for HwraidCollector {
    fn sources(&self) -> &'static [&'static str] {
        &[SOURCE]
    }

    fn sample(&mut self, cx: &mut SampleCx<'_>) {
        if !self.cfg.enabled {
            return;
        }
        if self.worker.is_none() {
            if let Err(e) = self.start_worker() {
                cx.errors
                    .count(SOURCE, &format_args!("hwraid worker thread: {e}"));
                return;
            }
        }
        let mut updates = Vec::new();
        if let Some(w) = &mut self.worker {
            if !w.take(cx.now_s, &mut updates) {
                self.worker = None; // the thread is gone: a new one at the next sample
            }
        }
        for u in updates.into_iter().flatten() {
            self.apply(u, cx);
        }
    }

    fn report(&mut self, w: &mut LineWriter, cx: &mut ReportCx<'_>) {
        if self.read_ok.is_none() {
            return; // no round has ended yet (or there is no storcli): nothing to say
        }
        let age = self
            .read_at_s
            .map(|t| (cx.now_s - t).max(0.0).round() as i64);
        if let Some(msg) = &self.no_controller {
            // Not an error: storcli is installed where no controller is. One line says so.
            w.line("raid_controller", cx.ts_ns)
                .tag("controller", "none")
                .field("status", msg.as_str())
                .field("vds", 0_u32)
                .field("vds_degraded", 0_u32)
                .field("vds_offline", 0_u32)
                .field("pds", 0_u32)
                .field("pds_failed", 0_u32)
                .field("bbu_present", false)
                .field("read_ok", self.read_ok == Some(true))
                .field_opt("last_read_age_s", age)
                .field_opt("read_error", self.read_error.as_deref())
                .write();
        }
        for c in self.detector.controllers() {
            let failed = self.failed.get(&c.controller).map(|f| f.join(" / "));
            let error = match (&failed, &self.read_error) {
                (Some(f), Some(e)) => Some(format!("{f} / {e}")),
                (Some(f), None) => Some(f.clone()),
                (None, e) => e.clone(),
            };
            w.line("raid_controller", cx.ts_ns)
                .tag("controller", &c.controller)
                .tag("model", c.model.as_deref().unwrap_or_default())
                .tag("serial", c.serial.as_deref().unwrap_or_default())
                .field_opt("status", c.status.as_deref())
                .field_opt("ok", c.ok)
                .field("vds", c.vds)
                .field("vds_degraded", c.vds_degraded)
                .field("vds_offline", c.vds_offline)
                .field("pds", c.pds)
                .field("pds_failed", c.pds_failed)
                .field_opt("roc_temperature_c", c.roc_temperature_c)
                .field("bbu_present", c.bbu_present)
                .field_opt("bbu_state", c.bbu_state.as_deref())
                .field_opt("bbu_ok", c.bbu_ok)
                .field("read_ok", self.read_ok == Some(true) && failed.is_none())
                .field_opt("last_read_age_s", age)
                .field_opt("read_error", error.as_deref())
                .write();
        }
        for v in self.detector.vds() {
            w.line("raid_vd", cx.ts_ns)
                .tag("controller", &v.controller)
                .tag("vd", &v.vd)
                .tag("name", v.name.as_deref().unwrap_or_default())
                .tag("level", &v.level)
                .tag("device", v.device.as_deref().unwrap_or_default())
                .field("state", v.state.as_str())
                .field("ok", v.ok)
                .field("degraded", v.degraded)
                .field_opt("redundancy_left", v.redundancy_left)
                .field("members", v.members)
                .field("members_online", v.members_online)
                .field("members_rebuilding", v.members_rebuilding)
                .field_opt("rebuild_progress_pct", v.rebuild_progress_pct)
                .field_opt("rebuild_eta_s", v.rebuild_eta_s.map(|s| s.round() as i64))
                .field("rebuild_stalled", v.rebuild_stalled)
                .field_opt("rebuild_risk", v.rebuild_risk)
                .field("members_at_risk", v.members_at_risk)
                .field_opt("cache", v.cache.as_deref())
                .field_opt("write_back_configured", v.write_back_configured)
                .field_opt("write_back_active", v.write_back_active)
                .field_opt("size_bytes", v.size_bytes)
                .write();
        }
        for d in self.detector.pds() {
            w.line("raid_pd", cx.ts_ns)
                .tag("controller", &d.controller)
                .tag("slot", &d.slot)
                .tag("did", &d.did.map(|n| n.to_string()).unwrap_or_default())
                .tag("vd", &d.vd)
                .tag("serial", d.serial.as_deref().unwrap_or_default())
                .tag("model", d.model.as_deref().unwrap_or_default())
                .tag("medium", d.medium.as_deref().unwrap_or_default())
                .tag("interface", d.interface.as_deref().unwrap_or_default())
                .field("state", d.state.as_str())
                .field("ok", d.ok)
                .field_opt("media_errors", d.media_errors)
                .field_opt("other_errors", d.other_errors)
                .field_opt("predictive_failures", d.predictive_failures)
                .field_opt("smart_alert", d.smart_alert)
                .field_opt("temperature_c", d.temperature_c)
                .field_opt("rebuild_progress_pct", d.rebuild_progress_pct)
                .field_opt("rebuild_eta_s", d.rebuild_eta_s.map(|s| s.round() as i64))
                .field_opt("failure_probability", d.failure_probability)
                .write();
        }
    }

    fn live(&self, live: &mut Live) {
        live.raid_vds.extend(
            self.detector
                .vds()
                .iter()
                .map(|v| VdNow { status: v.clone() }),
        );
    }
}

#[cfg(test)]
mod tests;
