//! Drive health: `smartctl --json -a -n standby /dev/X` for every whole disk, on the monitor's
//! own thread, spread over a long interval; the `drive` lines.
//!
//! **When.** A round every `[drive] interval` (default 30 min) reads each disk once, the calls
//! spread evenly over the round ([`worker`]): a SMART read costs the drive a few commands and
//! smartctl some CPU, and a disk server's 100 disks need not be read in the same second. Each
//! call is killed with its process group after `timeout` (default 60 s) and its output is read
//! up to `max_output_bytes` (default 1 MiB; a real `-a` document is 5–60 kB); a call that hangs
//! is reported (a source error naming the device, `read_ok=false` on its line) and holds up no
//! other disk: the calls are polled, not waited for, and the next one starts on schedule.
//!
//! **Out of schedule.** When the MD monitor reports an array degraded (its `md` event to
//! `degraded`, `recovering` or `failed`, which this collector sees in the same sample, after
//! it), the array's member disks (`/sys/block/mdX/slaves`) are read at once: the drives that
//! must carry the rebuild are the ones whose condition matters now.
//!
//! **Standby.** `-n standby` keeps smartctl from spinning up a sleeping disk: it exits with
//! status 2 and says so, and the disk keeps its last reading, marked `asleep=true`. Not an
//! error.
//!
//! **Bad answers.** Output that is not smartctl JSON (also JSON without the fields every
//! smartctl prints), or JSON cut short, is a source error and
//! the last good reading stays (its age grows in `last_read_age_s`). smartctl not installed (or
//! not at the configured path): one info line at the first round, no error, no lines.
//!
//! **smartd's state.** With `[drive] smartd_state_dir`, a disk whose smartd `--jsonstate` file is
//! fresh is read from it and no smartctl runs for it (`smartd.rs`). A disk whose smartd
//! attribute log (`smartd -A`, `[drive] smartd_attrlog_prefix`) has a new line that changes
//! nothing its last smartctl reading depends on keeps that reading, refreshed, without a call,
//! for at most `smartd_attrlog_full_every - 1` rounds in a row (`attrlog.rs`).
//!
//! **Shared.** Each good reading, assessed by [`crate::health::drive`], is published in the
//! [`DriveBook`] ([`book`]) that the MD, zpool and RAID controller monitors read for their
//! `rebuild_risk` and `members_at_risk`; the pools' vdev names and the controllers' virtual
//! drives come back through it as the `pool` and `raid_vd` tags. A reading that differs from the
//! disk's previous one in health or medium error counts is an event
//! ([`crate::health::drive::events`]).
//!
//! Every report interval each disk's line is written from its latest reading, whether or not it
//! was read in that interval. Fields and tags: docs/metrics-drive.md.

mod attrlog;
mod disks;
mod line;
mod reading;
mod smartd;
mod worker;

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use serde::Deserialize;
use storwatch_wire::lp::{EncodedFields, LineWriter};

use super::fs::Placement;
use super::{Collector, ReportCx, SampleCx};
use crate::command::WorkerHandle;
use crate::filter::Filter;
use crate::health::risk::RiskModel;
use crate::root::Root;
use crate::sources::smartctl::DriveHealth;
#[cfg(test)]
use line::write_line;
use line::{keep_key, same_tags, write_kept, LineKey, Tags};
use reading::{ReadResult, Update};
use worker::{DriveWorker, Urgent, WorkerConfig};

use super::book::{BookEntry, BookView, DriveBook};
pub use reading::DriveError;

/// The source name errors are counted under.
const SOURCE: &str = "smartctl";

/// `[drive]` in the agent's configuration.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DriveConfig {
    /// Read drive health at all (default true; without smartctl nothing is read either way).
    pub enabled: bool,
    /// The smartctl program: a name looked up in `PATH` or a path (default `smartctl`).
    pub smartctl: PathBuf,
    /// Every disk is read once per interval, the calls spread evenly over it (default 30m).
    #[serde(with = "crate::duration")]
    pub interval: Duration,
    /// A call still running after this long is killed with its process group and reported
    /// (default 60s).
    #[serde(with = "crate::duration")]
    pub timeout: Duration,
    /// Standard output read from one call at most; past it the call is killed and reported
    /// (default 1 MiB).
    pub max_output_bytes: usize,
    /// Calls running at once at most (default 4): hung calls beyond this many delay the next
    /// ones until they are killed.
    pub max_running: usize,
    /// Disks not read: shell-style globs on kernel names (`sd*`, `nvme1n1`), or on the names
    /// of disks behind a MegaRAID controller (`bus/0:megaraid,*`).
    pub exclude: Vec<String>,
    /// Read the disks behind MegaRAID/PERC controllers (found with `smartctl --scan`, read with
    /// `-d megaraid,N`) when the kernel has one (default true).
    pub megaraid: bool,
    /// smartd's `--jsonstate` directory (`smartd -j DIR/smartd.`, smartmontools' development tree after 7.5): a disk
    /// whose state file there is fresh is read from it instead of running smartctl (default
    /// unset: always smartctl).
    pub smartd_state_dir: Option<PathBuf>,
    /// A state file modified longer ago than this is stale and smartctl reads the disk
    /// (default 1h: twice smartd's default 30-minute check interval).
    #[serde(with = "crate::duration")]
    pub smartd_state_max_age: Duration,
    /// A SAS disk's second call, `smartctl -l error` (its non-medium error count, printed only
    /// as text), is made every this many rounds (default 6: every 3 h at the default interval;
    /// 0 or 1: every round), and at once for a disk read out of schedule or without a count
    /// yet; the rounds between carry its last count, its age in `non_medium_errors_age_s`.
    pub sas_error_log_every: u32,
    /// `PREFIX` of smartd's attribute logs (`smartd -A PREFIX`, `PREFIX MODEL-SERIAL.ata.csv`;
    /// default `/var/lib/smartmontools/attrlog.`, built into Debian's, Ubuntu's and openSUSE's
    /// smartd; empty: not used). A disk whose log has a line written since its last smartctl
    /// reading that changes nothing the reading depends on is not read by smartctl that round
    /// (`attrlog.rs`).
    pub smartd_attrlog_prefix: PathBuf,
    /// A log modified longer ago than this is stale: smartctl reads the disk (default 1h).
    #[serde(with = "crate::duration")]
    pub smartd_attrlog_max_age: Duration,
    /// smartctl reads every disk at least every this many rounds whatever its log says (default
    /// 4: every 2 h at the default interval; 0 or 1: the logs are not used).
    pub smartd_attrlog_full_every: u32,
    /// SAS/SCSI disks are confirmed by their logs too (default false: their informational
    /// exceptions verdict and grown defect list are not in the log).
    pub smartd_attrlog_scsi: bool,
}

impl Default for DriveConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            smartctl: PathBuf::from("smartctl"),
            interval: Duration::from_secs(1800),
            timeout: Duration::from_secs(60),
            max_output_bytes: 1 << 20,
            max_running: 4,
            exclude: Vec::new(),
            megaraid: true,
            smartd_state_dir: None,
            smartd_state_max_age: Duration::from_secs(3600),
            sas_error_log_every: 6,
            smartd_attrlog_prefix: PathBuf::from("/var/lib/smartmontools/attrlog."),
            smartd_attrlog_max_age: Duration::from_secs(3600),
            smartd_attrlog_full_every: 4,
            smartd_attrlog_scsi: false,
        }
    }
}

/// What is known of one disk.
#[derive(Debug, Clone, Default)]
struct DriveState {
    place: Placement,
    /// The latest good reading, and when it was taken (collector seconds). Boxed as it came:
    /// inline, the readings of a 200-disk server made the map of the disks' states some
    /// 270 kB of half-filled tree nodes.
    health: Option<Box<DriveHealth>>,
    /// That reading assessed: what the book holds for the disk.
    entry: Option<BookEntry>,
    read_at_s: Option<f64>,
    /// When the reading was taken by smartctl (or smartd's state file), while smartd's
    /// attribute log has confirmed it since (`read_at_s` is then the confirming line's time).
    full_read_at_s: Option<f64>,
    /// The last call ended without an error: the drive was read, or found asleep (`None`
    /// before the first call ended).
    read_ok: Option<bool>,
    /// The last call found it asleep.
    asleep: bool,
    /// Why the last call failed, while `read_ok` is false.
    error: Option<String>,
    /// smartctl said this is a RAID controller's virtual drive (no line is written).
    behind_controller: bool,
    /// When the reading's non-medium error count was read by a SAS disk's `-l error` call
    /// (collector seconds), when it was.
    error_log_at_s: Option<f64>,
    /// Its `drive` line's measurement and tags, encoded: dropped when the placement is
    /// replaced or a reading with other tags replaces the last ([`line::same_tags`]), made
    /// again by the next report (and when the book's tags for it change).
    key: Option<LineKey>,
    /// The fields of its line that change only with its reading, its assessment or the
    /// outcome of a call, encoded by the last report: dropped whenever an update touches the
    /// drive ([`DriveCollector::apply`]), made again by the next report.
    fields: Option<EncodedFields>,
}

impl DriveState {
    /// Assesses reading `h` of disk `name` as the book's entry for it; true when the entry
    /// changed. The book is published again only then: a reading like the last one (the
    /// steady state of a healthy server) costs the other monitors' readers nothing.
    fn assess(&mut self, name: &str, h: &DriveHealth, risk: &RiskModel) -> bool {
        let entry = BookEntry::assess(name, h, risk);
        let changed = self.entry.as_ref() != Some(&entry);
        if changed {
            self.entry = Some(entry);
        }
        changed
    }
}

/// The drive monitor.
pub struct DriveCollector {
    cfg: DriveConfig,
    root: Root,
    inline: bool,
    worker: Option<WorkerHandle<DriveWorker>>,
    urgent: Urgent,
    drives: BTreeMap<String, DriveState>,
    /// Events of this report interval already looked at.
    events_seen: usize,
    /// Where the readings are published for the rebuild risks, and the pools read back.
    book: DriveBook,
    /// Each drive's rate and probability.
    risk: RiskModel,
    /// A drive's book entry changed (or a read drive went away) since the book was last
    /// published.
    dirty: bool,
    /// The book as the last report read it: while it is the same, no drive's book tags changed.
    reported: Option<Arc<BookView>>,
}

impl std::fmt::Debug for DriveCollector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DriveCollector")
            .field("cfg", &self.cfg)
            .field("running", &self.worker.is_some())
            .field("drives", &self.drives.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl DriveCollector {
    /// A monitor running smartctl on a thread of its own (started at the first sample).
    pub fn new(cfg: DriveConfig, root: Root) -> Self {
        Self {
            cfg,
            root,
            inline: false,
            worker: None,
            urgent: Arc::new(Mutex::new(Vec::new())),
            drives: BTreeMap::new(),
            events_seen: 0,
            book: DriveBook::new(false),
            risk: RiskModel::default(),
            dirty: false,
            reported: None,
        }
    }

    /// Publishes the readings in `book`, each drive's rate from `risk` (by default a book of
    /// its own and the default model).
    pub fn with_book(mut self, book: DriveBook, risk: RiskModel) -> Self {
        self.book = book;
        self.risk = risk;
        self
    }

    /// The book the readings are published in.
    pub fn book(&self) -> &DriveBook {
        &self.book
    }

    /// Publishes every read drive's entry.
    fn publish(&mut self) {
        let entries = self
            .drives
            .values()
            .filter_map(|s| s.entry.clone())
            .collect();
        self.book.publish(entries);
        self.dirty = false;
    }

    /// A monitor that runs a round's calls in the sample that finds the round due, all at once,
    /// waiting for them (each still bounded by the timeout): for `once` and stepped tests.
    pub fn new_inline(cfg: DriveConfig, root: Root) -> Self {
        Self {
            inline: true,
            ..Self::new(cfg, root)
        }
    }

    fn start_worker(&mut self) -> Result<(), std::io::Error> {
        let worker = DriveWorker::new(
            WorkerConfig {
                smartctl: self.cfg.smartctl.clone(),
                interval_s: self.cfg.interval.as_secs_f64().max(1.0),
                timeout: self.cfg.timeout.max(Duration::from_millis(100)),
                max_output_bytes: self.cfg.max_output_bytes.max(4096),
                max_running: self.cfg.max_running.max(1),
                filter: Filter::excluding(&self.cfg.exclude),
                megaraid: self.cfg.megaraid,
                inline: self.inline,
                smartd_state_dir: self.cfg.smartd_state_dir.clone(),
                smartd_state_max_age: self.cfg.smartd_state_max_age,
                sas_error_log_every: self.cfg.sas_error_log_every.max(1),
                attrlog: (!self.cfg.smartd_attrlog_prefix.as_os_str().is_empty()
                    && self.cfg.smartd_attrlog_full_every >= 2)
                    .then(|| attrlog::AttrlogConfig {
                        prefix: self.cfg.smartd_attrlog_prefix.clone(),
                        max_age: self.cfg.smartd_attrlog_max_age,
                        full_every: self.cfg.smartd_attrlog_full_every,
                        scsi: self.cfg.smartd_attrlog_scsi,
                    }),
            },
            self.root.clone(),
            Arc::clone(&self.urgent),
        );
        self.worker = Some(if self.inline {
            WorkerHandle::inline(worker)
        } else {
            WorkerHandle::spawn("storwatch-drive", worker)?
        });
        Ok(())
    }

    /// Asks for the members of arrays that degraded in this sample's events to be read now.
    fn watch_arrays(&mut self, cx: &SampleCx<'_>) {
        let new = cx.events.get(self.events_seen..).unwrap_or_default();
        self.events_seen = cx.events.len();
        let mut asked = Vec::new();
        for e in new {
            let bad = matches!(e.to_state.as_str(), "degraded" | "recovering" | "failed");
            let was_bad = matches!(e.from_state.as_str(), "degraded" | "recovering" | "failed");
            // `md0`, not `md0/sdc` (a member's event)
            if e.source == "md" && !e.object.contains('/') && bad && !was_bad {
                asked.extend(disks::array_disks(
                    &self.root,
                    &e.object,
                    self.drives.keys(),
                ));
            }
        }
        if asked.is_empty() {
            return;
        }
        tracing::info!(
            source = SOURCE,
            "reading {} at once: members of a degraded array",
            asked.join(", ")
        );
        self.urgent
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .extend(asked);
        if let Some(w) = &mut self.worker {
            w.wake();
        }
    }

    fn apply(
        &mut self,
        u: Update,
        now_s: f64,
        errors: &mut super::SourceErrors,
        events: &mut Vec<crate::event::Event>,
    ) {
        match u {
            Update::Disks(disks) => {
                // A round's list of the disks changes the book only when a read one is gone.
                let mut gone = false;
                // (a set: the list searched for each drive was 20,000 name comparisons a round
                // at 200 disks)
                let listed: BTreeSet<&str> = disks.iter().map(|d| d.name.as_str()).collect();
                self.drives.retain(|name, s| {
                    let keep = listed.contains(name.as_str());
                    gone |= !keep && s.entry.is_some();
                    keep
                });
                self.dirty |= gone;
                for d in disks {
                    let s = self.drives.entry(d.name).or_default();
                    if s.place != d.place {
                        s.place = d.place;
                        s.key = None;
                    }
                }
            }
            Update::Error(e) => errors.count(SOURCE, &e),
            Update::Confirmed { name, at, fresh } => {
                let t = if self.inline {
                    now_s
                } else {
                    now_s - at.elapsed().as_secs_f64()
                } - fresh.age_s;
                let Some(s) = self.drives.get_mut(&name) else {
                    return;
                };
                s.fields = None;
                let Some(was) = s.health.as_ref() else {
                    return;
                };
                // The last reading, with what the line refreshes; its tags are the same (the
                // line's key stays).
                let mut h = was.clone();
                fresh.apply(&mut h);
                crate::health::drive::events::changes(&name, was, &h, events);
                self.dirty |= s.assess(&name, &h, &self.risk);
                s.health = Some(h);
                if s.full_read_at_s.is_none() {
                    s.full_read_at_s = s.read_at_s;
                }
                s.read_at_s = Some(t);
                if fresh.non_medium {
                    s.error_log_at_s = Some(t);
                }
                s.read_ok = Some(true);
                s.asleep = false;
                s.error = None;
            }
            Update::Read {
                name,
                at,
                result,
                error_log_age_s,
            } => {
                // Inline, the answer belongs to this sample; from the thread, to when it came.
                let t = if self.inline {
                    now_s
                } else {
                    now_s - at.elapsed().as_secs_f64()
                };
                let Some(s) = self.drives.get_mut(&name) else {
                    return;
                };
                s.fields = None;
                match result {
                    ReadResult::Read(h) => {
                        if let Some(was) = &s.health {
                            crate::health::drive::events::changes(&name, was, &h, events);
                        }
                        // The same drive read again keeps its line's key (a round reads every
                        // drive: remade, each key was most of a reading's cost to the report).
                        if !s.health.as_ref().is_some_and(|was| same_tags(was, &h)) {
                            s.key = None;
                        }
                        self.dirty |= s.assess(&name, &h, &self.risk);
                        s.health = Some(h);
                        s.read_at_s = Some(t);
                        s.full_read_at_s = None;
                        s.error_log_at_s = error_log_age_s.map(|a| t - a);
                        s.read_ok = Some(true);
                        s.asleep = false;
                        s.error = None;
                    }
                    ReadResult::Asleep(mode) => {
                        tracing::debug!(source = SOURCE, "{name}: in {mode} mode, not read");
                        // not an error: the call did what it was asked, and the last
                        // reading stays
                        s.asleep = true;
                        s.read_ok = Some(true);
                        s.error = None;
                    }
                    ReadResult::BehindController(why) => {
                        // Said once: the virtual drive is no drive, and stays without a line.
                        if !s.behind_controller {
                            s.behind_controller = true;
                            tracing::info!(source = SOURCE, "{name}: not a drive: {why}");
                        }
                    }
                    ReadResult::Failed(e) => {
                        s.read_ok = Some(false);
                        s.asleep = false;
                        s.error = Some(e.to_string());
                        errors.count(SOURCE, &e);
                    }
                }
            }
        }
    }
}

impl Collector for DriveCollector {
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
                    .count(SOURCE, &format_args!("drive worker thread: {e}"));
                return;
            }
        }
        self.watch_arrays(cx);
        let mut updates = Vec::new();
        if let Some(w) = &mut self.worker {
            if !w.take(cx.now_s, &mut updates) {
                self.worker = None; // the thread is gone: a new one at the next sample
            }
        }
        for u in updates.into_iter().flatten() {
            self.apply(u, cx.now_s, cx.errors, cx.events);
        }
        if self.dirty {
            self.publish();
        }
    }

    fn report(&mut self, w: &mut LineWriter, cx: &mut ReportCx<'_>) {
        // The scheduler empties the events after the report.
        self.events_seen = 0;
        let book = self.book.view();
        // A drive's book tags change only with the book (a new view) or with its reading's
        // serial or WWN (which drops its key): under the view of the last report, a kept key
        // stands unlooked-at.
        let same = self
            .reported
            .as_ref()
            .is_some_and(|v| Arc::ptr_eq(v, &book));
        let mut pools = None;
        for (name, s) in &mut self.drives {
            if s.read_ok.is_none() {
                continue; // no call has ended yet: nothing to say
            }
            if !same || s.key.is_none() {
                let pools = pools.get_or_insert_with(|| book.pool_tags());
                let pool = pools.get(name).map_or("", String::as_str);
                let vd = s.health.as_ref().map_or("", |h| {
                    book.raid_vd_of(h.serial.as_deref(), h.wwn.as_deref())
                });
                keep_key(name, s, &Tags { pool, raid_vd: vd });
            }
            write_kept(w, cx.ts_ns, cx.now_s, s);
        }
        self.reported = Some(book);
    }
}

/// The decoded attribute 188 count. Seagate packs three 16-bit counters into its raw value
/// (smartmontools prints it `-v 188,raw16`): the count is the largest of the three (the total
/// of command timeouts, the others counting only the slow ones). Other makers' raw value is the
/// count itself.
pub fn command_timeouts(h: &DriveHealth) -> Option<u64> {
    let ata = h.ata.as_ref()?;
    let raw = ata.command_timeout_raw?;
    let seagate = h.model.as_deref().is_some_and(|m| {
        let m = m.trim_start();
        m.starts_with("ST") || m.to_ascii_lowercase().starts_with("seagate")
    });
    match ata.command_timeout_words {
        Some(words) if seagate => words.iter().copied().max().map(u64::from),
        _ => Some(raw),
    }
}

#[cfg(test)]
mod report_bench;
#[cfg(test)]
mod tests;
