//! Block devices: `/proc/diskstats` every sample, what each device is (`/sys/block`) when it
//! appears, its queue tunables every five minutes at most; the `disk` and `disk_tunables` lines.
//!
//! Per device the collector keeps the last counters and the interval's accumulators
//! ([`DiskInterval`]); a report turns them into iostat -x's values over the interval plus the
//! bursts inside it (max, p95, seconds saturated). A device seen for the first time has no rate
//! until its second sample; one whose counters go backwards (replaced, reset) loses that second,
//! counted in `resets`; one that vanishes is forgotten.

use storwatch_wire::lp::LineWriter;

use super::{r3, Collector, Live, ReportCx, SampleCx, SourceErrors, Watched};
use crate::config::Config;
use crate::filter::Filter;
use crate::rates::{self, DiskCounters, DiskRates};
use crate::root::{read_into, Root};
use crate::sources::diskstats;
use crate::sources::sysblock::{self, BlockInfo, DeviceKind, Tunables};
use crate::sources::SourceError;
use crate::summary::DiskInterval;

/// How often block tunables are re-read at most (they are reported when changed, and every
/// `tunables_interval`; read that often when it is shorter). Five files per whole device: on a
/// 250-disk server a reading is 1,250 files, a fifth of the agent's file opens when it was done
/// every minute, for values that change a few times a year.
const TUNABLES_CHECK_S: f64 = 300.0;

/// Slack on the two periods above, for reports that come a little before their boundary.
const TUNABLES_SLACK_S: f64 = 1.0;

const DISKSTATS: &str = "diskstats";
const SYSBLOCK: &str = "sysblock";

/// Per-second values of one device from the last sample (for `top`).
#[derive(Debug, Clone, PartialEq)]
pub struct DiskNow {
    /// Kernel name.
    pub device: String,
    /// dm/md name or the kernel name.
    pub name: String,
    /// What it is.
    pub kind: DeviceKind,
    /// iostat -x values.
    pub rates: DiskRates,
}

#[derive(Debug)]
struct DiskState {
    /// Kernel name.
    name: String,
    /// Its row in the last `/proc/diskstats`.
    row: usize,
    major: u32,
    minor: u32,
    seen: u64,
    prev: DiskCounters,
    in_flight: u64,
    kind: DeviceKind,
    info: BlockInfo,
    interval: DiskInterval,
    /// The last sample's delta and interval, for `top`.
    last: Option<(DiskCounters, u64)>,
    tunables: Option<Tunables>,
    /// When the tunables were last read, and last written out.
    tunables_checked_s: Option<f64>,
    tunables_reported_s: Option<f64>,
}

impl DiskState {
    /// The dm name for device-mapper devices, else the kernel name.
    fn display_name(&self) -> &str {
        self.info
            .dm_name
            .as_deref()
            .filter(|n| !n.is_empty())
            .unwrap_or(&self.name)
    }
}

/// Every block device of the host (but the excluded ones).
pub struct DiskCollector {
    threshold: f64,
    tunables_interval_s: f64,
    filter: Filter,
    buf: String,
    scratch: Vec<f64>,
    generation: u64,
    /// Every device, in the order of the last `/proc/diskstats` (the kernel keeps it): a sample
    /// walks the file and this list together, a name comparison per device, and reads the
    /// states in memory order. A hash lookup per row cost a cache miss each on 250 devices.
    disks: Vec<DiskState>,
    /// Where each device is in `disks`, for a row out of order (a device added or removed).
    index: super::NameMap<usize>,
    /// A row of this sample was not where `disks` expected it: reorder them after it.
    out_of_place: bool,
    /// `/proc/diskstats` was missing at the last sample (warned once, until it is back).
    missing: bool,
}

impl DiskCollector {
    /// A collector with `cfg`'s saturation threshold, tunables interval and exclusions.
    pub fn new(cfg: &Config) -> Self {
        Self {
            threshold: cfg.saturation_threshold_pct,
            tunables_interval_s: cfg.tunables_interval.as_secs_f64(),
            filter: Filter::excluding(&cfg.exclude_devices),
            buf: String::with_capacity(64 * 1024),
            scratch: Vec::new(),
            generation: 0,
            disks: Vec::new(),
            index: super::NameMap::default(),
            out_of_place: false,
            missing: false,
        }
    }

    /// Row number `n` of `/proc/diskstats`; `next` is where the row after the last one matched
    /// is expected in `disks`.
    fn row(
        &mut self,
        n: usize,
        row: &diskstats::DiskStat<'_>,
        next: &mut usize,
        itv: Option<u64>,
        root: &Root,
        errors: &mut SourceErrors,
    ) {
        let cur = DiskCounters::from(row);
        let gen = self.generation;
        let at = match self.disks.get(*next) {
            Some(d) if d.name == row.name => Some(*next),
            _ => self.index.get(row.name).copied(),
        };
        if let Some((i, d)) = at.and_then(|i| Some((i, self.disks.get_mut(i)?))) {
            self.out_of_place |= i != *next;
            *next = i + 1;
            d.row = n;
            d.seen = gen;
            d.in_flight = row.in_flight;
            if (d.major, d.minor) != (row.major, row.minor) {
                // Same name, new device numbers: a different device. Start over.
                d.major = row.major;
                d.minor = row.minor;
                d.prev = cur;
                d.interval.resets += 1;
                d.last = None;
                return;
            }
            match (
                itv,
                itv.and_then(|itv| rates::disk_delta(&d.prev, &cur, itv)),
            ) {
                (Some(itv), Some(delta)) => {
                    let util = rates::disk_util_pct(&delta, itv);
                    let aqu = delta.queue_ms as f64 / itv as f64 / 10.0;
                    d.interval.add(&delta, itv, util, aqu);
                    d.last = Some((delta, itv));
                }
                (Some(_), None) => {
                    d.interval.resets += 1;
                    d.last = None;
                }
                (None, _) => d.last = None,
            }
            d.prev = cur;
            return;
        }
        if !self.filter.matches(row.name) {
            return;
        }
        // A device we have not seen: learn what it is (sysfs, once), no rate yet.
        let info = match sysblock::read_info(root, row.name, row.major, row.minor) {
            Ok(Some(info)) => info,
            Ok(None) => BlockInfo::default(),
            Err(e) => {
                errors.count(SYSBLOCK, &e);
                BlockInfo::default()
            }
        };
        let kind = sysblock::classify(row.name, info.dm_uuid.as_deref(), info.partition);
        self.out_of_place |= *next != self.disks.len();
        self.index.insert(row.name.to_owned(), self.disks.len());
        *next = self.disks.len() + 1;
        self.disks.push(DiskState {
            name: row.name.to_owned(),
            row: n,
            major: row.major,
            minor: row.minor,
            seen: gen,
            prev: cur,
            in_flight: row.in_flight,
            kind,
            info,
            interval: DiskInterval::default(),
            last: None,
            tunables: None,
            tunables_checked_s: None,
            tunables_reported_s: None,
        });
    }
}

impl Collector for DiskCollector {
    fn sources(&self) -> &'static [&'static str] {
        &[DISKSTATS, SYSBLOCK]
    }

    fn sample(&mut self, cx: &mut SampleCx<'_>) {
        self.generation += 1;
        let path = cx.root.proc("diskstats");
        let mut buf = std::mem::take(&mut self.buf);
        let read = read_into(&path, &mut buf);
        match (&read, self.missing) {
            (Ok(false), false) => {
                tracing::warn!(
                    path = %path.display(),
                    "no block device statistics: {} does not exist (wrong --proc-root, or a container without it); disks are not reported until it appears",
                    path.display()
                );
                self.missing = true;
            }
            (Ok(true), true) => {
                tracing::info!(path = %path.display(), "block device statistics are back");
                self.missing = false;
            }
            _ => {}
        }
        match read {
            Ok(true) => {
                let parsed = diskstats::parse(&buf);
                for e in &parsed.errors {
                    cx.errors
                        .count(DISKSTATS, &SourceError::parse(&path, e.clone()));
                }
                let mut next = 0;
                for (n, row) in parsed.rows.iter().enumerate() {
                    self.row(n, row, &mut next, cx.itv_cs, cx.root, cx.errors);
                }
            }
            // No /proc/diskstats at all (a container without it): nothing to report.
            Ok(false) => {}
            Err(e) => cx.errors.count(DISKSTATS, &e),
        }
        self.buf = buf;
        let gen = self.generation;
        let before = self.disks.len();
        self.disks.retain(|d| {
            if d.seen != gen {
                tracing::info!(device = %d.name, "block device vanished");
            }
            d.seen == gen
        });
        // Rows moved (a device added between others, or removed and added back): the list
        // takes the file's order again, so the next samples walk it in step.
        let moved = std::mem::take(&mut self.out_of_place);
        if moved {
            self.disks.sort_by_key(|d| d.row);
        }
        if moved || self.disks.len() != before {
            self.index.clear();
            for (i, d) in self.disks.iter().enumerate() {
                self.index.insert(d.name.clone(), i);
            }
        }
    }

    fn report(&mut self, w: &mut LineWriter, cx: &mut ReportCx<'_>) {
        let ts = cx.ts_ns;
        // Sorted by kernel name, so reports and snapshots are stable.
        let mut disks: Vec<&mut DiskState> = self.disks.iter_mut().collect();
        disks.sort_unstable_by(|a, b| a.name.cmp(&b.name));
        for d in &mut disks {
            if d.interval.itv_cs > 0 {
                let r = rates::disk_rates(&d.interval.delta, d.interval.itv_cs);
                let util_p95 = d.interval.util.quantile(0.95, &mut self.scratch);
                w.line("disk", ts)
                    .tag("device", &d.name)
                    .tag("name", d.display_name())
                    .tag("kind", d.kind.as_str())
                    .tag(
                        "rotational",
                        match d.info.rotational {
                            Some(true) => "1",
                            Some(false) => "0",
                            None => "",
                        },
                    )
                    .field("r_per_s", r3(r.r_per_s))
                    .field("w_per_s", r3(r.w_per_s))
                    .field("d_per_s", r3(r.d_per_s))
                    .field("f_per_s", r3(r.f_per_s))
                    .field("rkb_per_s", r3(r.rkb_per_s))
                    .field("wkb_per_s", r3(r.wkb_per_s))
                    .field("dkb_per_s", r3(r.dkb_per_s))
                    .field("rrqm_per_s", r3(r.rrqm_per_s))
                    .field("wrqm_per_s", r3(r.wrqm_per_s))
                    .field("drqm_per_s", r3(r.drqm_per_s))
                    .field("rrqm_pct", r3(r.rrqm_pct))
                    .field("wrqm_pct", r3(r.wrqm_pct))
                    .field("drqm_pct", r3(r.drqm_pct))
                    .field("r_await_ms", r3(r.r_await_ms))
                    .field("w_await_ms", r3(r.w_await_ms))
                    .field("d_await_ms", r3(r.d_await_ms))
                    .field("f_await_ms", r3(r.f_await_ms))
                    .field("await_ms", r3(r.await_ms))
                    .field("rareq_sz_kb", r3(r.rareq_sz_kb))
                    .field("wareq_sz_kb", r3(r.wareq_sz_kb))
                    .field("dareq_sz_kb", r3(r.dareq_sz_kb))
                    .field("aqu_sz", r3(r.aqu_sz))
                    .field_opt("aqu_sz_max", d.interval.aqu.max().map(r3))
                    .field("util_pct", r3(r.util_pct))
                    .field_opt("util_max_pct", d.interval.util.max().map(r3))
                    .field_opt("util_p95_pct", util_p95.map(r3))
                    .field(
                        "saturated_s",
                        d.interval.util.seconds_at_or_above(self.threshold),
                    )
                    .field("svctm_ms", r3(r.svctm_ms))
                    .field("in_flight", d.in_flight)
                    .field("interval_s", d.interval.itv_cs as f64 / 100.0)
                    .field("resets", d.interval.resets)
                    .write();
            }
            d.interval.clear();
        }
        for d in &mut disks {
            tunables(w, cx, self.tunables_interval_s, d);
        }
    }

    fn watched(&self, w: &mut Watched) {
        w.devices += self.disks.len() as u64;
    }

    fn live(&self, live: &mut Live) {
        live.disks.extend(self.disks.iter().filter_map(|d| {
            let (delta, itv) = d.last?;
            Some(DiskNow {
                device: d.name.clone(),
                name: d.display_name().to_owned(),
                kind: d.kind,
                rates: rates::disk_rates(&delta, itv),
            })
        }));
    }
}

/// Re-reads one whole device's tunables when due and writes its `disk_tunables` line when they
/// changed or were last reported `tunables_interval_s` ago.
fn tunables(
    w: &mut LineWriter,
    cx: &mut ReportCx<'_>,
    tunables_interval_s: f64,
    d: &mut DiskState,
) {
    // A partition shares its disk's queue.
    if d.info.partition {
        return;
    }
    let now_s = cx.now_s;
    // Due TUNABLES_CHECK_S after the last check, not after the last line: a quiet device is not
    // read at every report once the period has passed since its last line; and at once when its
    // line is due again. Reports come on the interval's boundaries, a few milliseconds either
    // side: a second of slack keeps a check 299.998 s after the last from waiting another report.
    let since = |t: Option<f64>| t.map_or(f64::INFINITY, |t| now_s - t + TUNABLES_SLACK_S);
    let stale = since(d.tunables_reported_s) >= tunables_interval_s;
    if since(d.tunables_checked_s) < TUNABLES_CHECK_S.min(tunables_interval_s) && !stale {
        return;
    }
    d.tunables_checked_s = Some(now_s);
    let t = match sysblock::read_tunables(cx.root, d.major, d.minor) {
        Ok(Some(t)) => t,
        Ok(None) => return,
        Err(e) => {
            cx.errors.count(SYSBLOCK, &e);
            return;
        }
    };
    let changed = d.tunables.as_ref() != Some(&t);
    if changed || stale {
        if changed && d.tunables.is_some() {
            tracing::info!(device = %d.name, old = ?d.tunables, new = ?t, "block tunables changed");
        }
        w.line("disk_tunables", cx.ts_ns)
            .tag("device", &d.name)
            .tag("name", d.display_name())
            .tag("kind", d.kind.as_str())
            .field_opt("read_ahead_kb", t.read_ahead_kb)
            .field_opt("scheduler", t.scheduler.as_deref())
            .field_opt("nr_requests", t.nr_requests)
            .field_opt("max_sectors_kb", t.max_sectors_kb)
            .field("changed", changed && d.tunables.is_some())
            .write();
        d.tunables_reported_s = Some(now_s);
    }
    d.tunables = Some(t);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::collect::SampleCx;

    fn sample(c: &mut DiskCollector, root: &Root, rows: &[&str], t: f64) {
        let line = |name: &&str| format!("   8       0 {name} 1 0 8 1 0 0 0 0 0 1 1 0 0 0 0 0 0\n");
        let text: String = rows.iter().map(line).collect();
        std::fs::write(root.proc("diskstats"), text).expect("write");
        let (mut events, mut errors) = (Vec::new(), SourceErrors::default());
        c.sample(&mut SampleCx {
            root,
            now_s: t,
            itv_cs: Some(100),
            uptime_cs: 0,
            events: &mut events,
            errors: &mut errors,
        });
    }

    fn order(c: &DiskCollector) -> Vec<&str> {
        c.disks.iter().map(|d| d.name.as_str()).collect()
    }

    /// The list follows the file: after a device is added between others, or the rows move,
    /// the next sample walks them in step again, and the name index still finds every one.
    #[test]
    fn the_devices_take_the_order_of_the_file() {
        let dir = std::env::temp_dir().join(format!("storwatch-disk-order-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("proc")).expect("mkdir");
        let root = Root::new(dir.join("proc"), dir.join("sys"));
        let mut c = DiskCollector::new(&Config::default());
        sample(&mut c, &root, &["sda", "sdb", "sdc"], 0.0);
        assert_eq!(order(&c), ["sda", "sdb", "sdc"]);
        sample(&mut c, &root, &["sda", "sda1", "sdb", "sdc"], 1.0);
        assert_eq!(order(&c), ["sda", "sda1", "sdb", "sdc"]);
        sample(&mut c, &root, &["sdc", "sdb", "sda1"], 2.0);
        assert_eq!(order(&c), ["sdc", "sdb", "sda1"]);
        for (i, d) in c.disks.iter().enumerate() {
            assert_eq!(c.index.get(&d.name), Some(&i), "{}", d.name);
        }
        assert_eq!(c.index.len(), 3);
        std::fs::remove_dir_all(&dir).expect("cleanup");
    }
}
