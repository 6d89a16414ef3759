//! Block devices: `/proc/diskstats` every sample, what each device is (`/sys/block`) when it
//! appears, its queue tunables every five minutes at most; the `disk` and `disk_tunables` lines.
//!
//! Per device the collector keeps the last counters and the interval's accumulators
//! ([`DiskInterval`]); a report turns them into iostat -x's values over the interval plus the
//! bursts inside it (max, p95, seconds saturated). A device seen for the first time has no rate
//! until its second sample; one whose counters go backwards (replaced, reset) loses that second,
//! counted in `resets`; one that vanishes is forgotten.
//!
//! A line whose bytes are those the device had at the last sample (an idle disk, common on a
//! disk server) is not parsed again: its counters are the last ones, accounted as a parse of
//! them would be. A parse was ~2,000 instructions a row, the comparison is ~30.

use storwatch_wire::lp::{FieldKey, LineWriter, SeriesKey};

use super::{Collector, Live, ReportCx, SampleCx, SourceErrors, Watched};
use crate::config::Config;
use crate::filter::Filter;
use crate::rates::{self, DiskCounters, DiskRates};
use crate::root::{read_text_into, Root};
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
    /// Where its line is in the collector's `last` text (the previous sample's file), to know
    /// an unchanged line without parsing it.
    line: (usize, usize),
    /// How many bytes of that line are its head, `major minor name` (0: not known): a line
    /// that starts with the same bytes is the same device with the same numbers, and only its
    /// statistics are parsed.
    head: usize,
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
    /// Its `disk` line's measurement and tags, encoded once: none of them changes while the
    /// device is known.
    key: SeriesKey,
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
    /// The bytes `/proc/diskstats` is read into (kept between samples: neither zeroed nor
    /// copied, see [`read_text_into`]).
    buf: Vec<u8>,
    /// The previous sample's `/proc/diskstats` (and, past its end, an older one's): a line
    /// whose bytes are the same in this one (an idle device) holds the same counters, and is
    /// not parsed again. Every device's `line` points into it.
    last: Vec<u8>,
    scratch: Vec<f64>,
    generation: u64,
    /// Every device, in the order of the last `/proc/diskstats` (the kernel keeps it): a sample
    /// walks the file and this list together, a name comparison per device, and reads the
    /// states in memory order. A hash lookup per row cost a cache miss each on 250 devices.
    disks: Vec<DiskState>,
    /// Where each device is in `disks`, for a row out of order (a device added or removed).
    index: super::NameMap<usize>,
    /// Places in `disks` in the order of the devices' names (a report's order); emptied when
    /// the list changes, made again by the next report.
    by_name: Vec<usize>,
    /// A row of this sample was not where `disks` expected it: reorder them after it.
    out_of_place: bool,
    /// `/proc/diskstats` was missing at the last sample (warned once, until it is back).
    missing: bool,
    /// Lines taken as unchanged, not parsed, since creation.
    #[cfg(test)]
    reused: usize,
    /// Lines whose statistics alone were parsed (their head known), since creation.
    #[cfg(test)]
    heads: usize,
}

impl DiskCollector {
    /// A collector with `cfg`'s saturation threshold, tunables interval and exclusions.
    pub fn new(cfg: &Config) -> Self {
        Self {
            threshold: cfg.saturation_threshold_pct,
            tunables_interval_s: cfg.tunables_interval.as_secs_f64(),
            filter: Filter::excluding(&cfg.exclude_devices),
            buf: Vec::new(),
            last: Vec::new(),
            scratch: Vec::new(),
            generation: 0,
            disks: Vec::new(),
            index: super::NameMap::default(),
            by_name: Vec::new(),
            out_of_place: false,
            missing: false,
            #[cfg(test)]
            reused: 0,
            #[cfg(test)]
            heads: 0,
        }
    }

    /// Row number `n` of `/proc/diskstats`, whose line is at `line` in this sample's text, when
    /// it is the line of the device expected next: its bytes those of its line at the last
    /// sample (an idle device: the same counters, accounted as a parse of them would be), or
    /// its head the same bytes (a busy device: only the statistics parsed, and accounted as
    /// [`Self::row`] accounts a known device). False when it is neither, and the caller parses
    /// the whole line.
    fn known(
        &mut self,
        n: usize,
        text: &str,
        line: (usize, usize),
        next: &mut usize,
        itv: Option<u64>,
    ) -> bool {
        let Some(d) = self.disks.get_mut(*next) else {
            return false;
        };
        let (start, end) = d.line;
        let (new, old) = (
            text.as_bytes().get(line.0..line.1),
            self.last.get(start..end),
        );
        // The bytes hold the name and device numbers too: the same bytes are the same device
        // with the same counters and in-flight count.
        if new == old {
            d.row = n;
            d.line = line;
            d.seen = self.generation;
            let cur = d.prev;
            account(d, cur, itv);
            *next += 1;
            #[cfg(test)]
            {
                self.reused += 1;
            }
            return true;
        }
        // The same head: the same name and device numbers (those `d` holds), so what `row`
        // does for a device found in place with its numbers unchanged.
        let h = d.head;
        let same_head = match (new.and_then(|b| b.get(..h)), old.and_then(|b| b.get(..h))) {
            (Some(a), Some(b)) => h > 0 && a == b,
            _ => false,
        };
        if !same_head {
            return false;
        }
        let Some(stat) = diskstats::parse_stats_after(text, line.0 + h, line.1) else {
            return false;
        };
        d.row = n;
        d.line = line;
        d.seen = self.generation;
        d.in_flight = stat.in_flight;
        account(d, DiskCounters::from(&stat), itv);
        *next += 1;
        #[cfg(test)]
        {
            self.heads += 1;
        }
        true
    }

    /// Row number `n` of `/proc/diskstats`, whose line is at `line` in this sample's text and
    /// whose head (`major minor name`) is its first `head` bytes; `next` is where the row
    /// after the last one matched is expected in `disks`.
    #[allow(clippy::too_many_arguments)]
    fn row(
        &mut self,
        n: usize,
        row: &diskstats::DiskStat<'_>,
        line: (usize, usize),
        head: usize,
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
            d.line = line;
            d.head = head;
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
            account(d, cur, itv);
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
        let key = series_key(row.name, &info, kind);
        self.out_of_place |= *next != self.disks.len();
        self.index.insert(row.name.to_owned(), self.disks.len());
        self.by_name.clear();
        *next = self.disks.len() + 1;
        self.disks.push(DiskState {
            name: row.name.to_owned(),
            row: n,
            line,
            head,
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
            key,
            tunables_checked_s: None,
            tunables_reported_s: None,
        });
    }
}

/// How many bytes of the line at `start` in `text` come before the end of `name`, the device
/// name parsed from it (a part of `text`); 0 when it is not there.
fn head_of(text: &str, start: usize, name: &str) -> usize {
    let end = (name.as_ptr() as usize).wrapping_add(name.len());
    let line = (text.as_ptr() as usize).wrapping_add(start);
    match end.checked_sub(line) {
        Some(h) if start + h <= text.len() && !name.is_empty() => h,
        _ => 0,
    }
}

/// Accounts device `d`'s counters `cur` of this sample: their delta from the last sample's
/// into the interval; no rate without an interval, or when a counter went backwards.
fn account(d: &mut DiskState, cur: DiskCounters, itv: Option<u64>) {
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
}

impl Collector for DiskCollector {
    fn sources(&self) -> &'static [&'static str] {
        &[DISKSTATS, SYSBLOCK]
    }

    fn sample(&mut self, cx: &mut SampleCx<'_>) {
        self.generation += 1;
        let path = cx.root.proc("diskstats");
        let mut buf = std::mem::take(&mut self.buf);
        let read = read_text_into(&path, &mut buf);
        match (&read, self.missing) {
            (Ok(None), false) => {
                tracing::warn!(
                    path = %path.display(),
                    "no block device statistics: {} does not exist (wrong --proc-root, or a container without it); disks are not reported until it appears",
                    path.display()
                );
                self.missing = true;
            }
            (Ok(Some(_)), true) => {
                tracing::info!(path = %path.display(), "block device statistics are back");
                self.missing = false;
            }
            _ => {}
        }
        let mut read_text = false;
        match read {
            Ok(Some(text)) => {
                read_text = true;
                let mut next = 0;
                let mut n = 0;
                for (i, (start, line)) in diskstats::lines(text).enumerate() {
                    let at = (start, start + line.len());
                    if self.known(n, text, at, &mut next, cx.itv_cs) {
                        n += 1;
                        continue;
                    }
                    match diskstats::parse_line_in(i + 1, text, start, line) {
                        Ok(Some(row)) => {
                            let head = head_of(text, start, row.name);
                            let (itv, root) = (cx.itv_cs, cx.root);
                            self.row(n, &row, at, head, &mut next, itv, root, cx.errors);
                            n += 1;
                        }
                        Ok(None) => {}
                        Err(e) => cx.errors.count(DISKSTATS, &SourceError::parse(&path, e)),
                    }
                }
            }
            // No /proc/diskstats at all (a container without it): nothing to report.
            Ok(None) => {}
            Err(e) => cx.errors.count(DISKSTATS, &e),
        }
        if read_text {
            // This sample's text is the next one's last: every device seen in it points into
            // it (the bytes past the text's end are an older read's, never looked at).
            buf = std::mem::replace(&mut self.last, buf);
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
            self.by_name.clear();
            self.index.clear();
            for (i, d) in self.disks.iter().enumerate() {
                self.index.insert(d.name.clone(), i);
            }
        }
    }

    fn report(&mut self, w: &mut LineWriter, cx: &mut ReportCx<'_>) {
        let ts = cx.ts_ns;
        // Sorted by kernel name, so reports and snapshots are stable; the order is kept until
        // the list changes (a sort of 1,000 names was a tenth of the report's `disk` lines).
        if self.by_name.len() != self.disks.len() {
            let disks = &self.disks;
            self.by_name = (0..disks.len()).collect();
            self.by_name.sort_unstable_by(|&a, &b| {
                let name = |i: usize| disks.get(i).map(|d| d.name.as_str());
                name(a).cmp(&name(b))
            });
        }
        for &i in &self.by_name {
            let Some(d) = self.disks.get_mut(i) else {
                continue;
            };
            if d.interval.itv_cs > 0 {
                let r = rates::disk_rates(&d.interval.delta, d.interval.itv_cs);
                let util_p95 = d.interval.util.quantile(0.95, &mut self.scratch);
                let mut l = w.fields_of(&d.key, ts);
                l.r3(R_PER_S, r.r_per_s);
                l.r3(W_PER_S, r.w_per_s);
                l.r3(D_PER_S, r.d_per_s);
                l.r3(F_PER_S, r.f_per_s);
                l.r3(RKB_PER_S, r.rkb_per_s);
                l.r3(WKB_PER_S, r.wkb_per_s);
                l.r3(DKB_PER_S, r.dkb_per_s);
                l.r3(RRQM_PER_S, r.rrqm_per_s);
                l.r3(WRQM_PER_S, r.wrqm_per_s);
                l.r3(DRQM_PER_S, r.drqm_per_s);
                l.r3(RRQM_PCT, r.rrqm_pct);
                l.r3(WRQM_PCT, r.wrqm_pct);
                l.r3(DRQM_PCT, r.drqm_pct);
                l.r3(R_AWAIT_MS, r.r_await_ms);
                l.r3(W_AWAIT_MS, r.w_await_ms);
                l.r3(D_AWAIT_MS, r.d_await_ms);
                l.r3(F_AWAIT_MS, r.f_await_ms);
                l.r3(AWAIT_MS, r.await_ms);
                l.r3(RAREQ_SZ_KB, r.rareq_sz_kb);
                l.r3(WAREQ_SZ_KB, r.wareq_sz_kb);
                l.r3(DAREQ_SZ_KB, r.dareq_sz_kb);
                l.r3(AQU_SZ, r.aqu_sz);
                l.r3_opt(AQU_SZ_MAX, d.interval.aqu.max());
                l.r3(UTIL_PCT, r.util_pct);
                l.r3_opt(UTIL_MAX_PCT, d.interval.util.max());
                l.r3_opt(UTIL_P95_PCT, util_p95);
                l.f64(
                    SATURATED_S,
                    d.interval.util.seconds_at_or_above(self.threshold),
                );
                l.r3(SVCTM_MS, r.svctm_ms);
                l.u64(IN_FLIGHT, d.in_flight);
                l.f64(INTERVAL_S, d.interval.itv_cs as f64 / 100.0);
                l.u64(RESETS, u64::from(d.interval.resets));
                l.write();
            }
            d.interval.clear();
        }
        for &i in &self.by_name {
            if let Some(d) = self.disks.get_mut(i) {
                tunables(w, cx, self.tunables_interval_s, d);
            }
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

/// The `disk` line's measurement and tags of device `device`.
fn series_key(device: &str, info: &BlockInfo, kind: DeviceKind) -> SeriesKey {
    // The dm name for device-mapper devices, else the kernel name, as `display_name`.
    let name = info
        .dm_name
        .as_deref()
        .filter(|n| !n.is_empty())
        .unwrap_or(device);
    let rotational = match info.rotational {
        Some(true) => "1",
        Some(false) => "0",
        None => "",
    };
    SeriesKey::new(
        "disk",
        &[
            ("device", device),
            ("name", name),
            ("kind", kind.as_str()),
            ("rotational", rotational),
        ],
    )
}

// The `disk` line's field keys, checked when the program is compiled.
const R_PER_S: FieldKey = FieldKey::new("r_per_s");
const W_PER_S: FieldKey = FieldKey::new("w_per_s");
const D_PER_S: FieldKey = FieldKey::new("d_per_s");
const F_PER_S: FieldKey = FieldKey::new("f_per_s");
const RKB_PER_S: FieldKey = FieldKey::new("rkb_per_s");
const WKB_PER_S: FieldKey = FieldKey::new("wkb_per_s");
const DKB_PER_S: FieldKey = FieldKey::new("dkb_per_s");
const RRQM_PER_S: FieldKey = FieldKey::new("rrqm_per_s");
const WRQM_PER_S: FieldKey = FieldKey::new("wrqm_per_s");
const DRQM_PER_S: FieldKey = FieldKey::new("drqm_per_s");
const RRQM_PCT: FieldKey = FieldKey::new("rrqm_pct");
const WRQM_PCT: FieldKey = FieldKey::new("wrqm_pct");
const DRQM_PCT: FieldKey = FieldKey::new("drqm_pct");
const R_AWAIT_MS: FieldKey = FieldKey::new("r_await_ms");
const W_AWAIT_MS: FieldKey = FieldKey::new("w_await_ms");
const D_AWAIT_MS: FieldKey = FieldKey::new("d_await_ms");
const F_AWAIT_MS: FieldKey = FieldKey::new("f_await_ms");
const AWAIT_MS: FieldKey = FieldKey::new("await_ms");
const RAREQ_SZ_KB: FieldKey = FieldKey::new("rareq_sz_kb");
const WAREQ_SZ_KB: FieldKey = FieldKey::new("wareq_sz_kb");
const DAREQ_SZ_KB: FieldKey = FieldKey::new("dareq_sz_kb");
const AQU_SZ: FieldKey = FieldKey::new("aqu_sz");
const AQU_SZ_MAX: FieldKey = FieldKey::new("aqu_sz_max");
const UTIL_PCT: FieldKey = FieldKey::new("util_pct");
const UTIL_MAX_PCT: FieldKey = FieldKey::new("util_max_pct");
const UTIL_P95_PCT: FieldKey = FieldKey::new("util_p95_pct");
const SATURATED_S: FieldKey = FieldKey::new("saturated_s");
const SVCTM_MS: FieldKey = FieldKey::new("svctm_ms");
const IN_FLIGHT: FieldKey = FieldKey::new("in_flight");
const INTERVAL_S: FieldKey = FieldKey::new("interval_s");
const RESETS: FieldKey = FieldKey::new("resets");

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
    use crate::collect::{Live, ReportCx, SampleCx};

    fn sample(c: &mut DiskCollector, root: &Root, rows: &[&str], t: f64) {
        let line = |name: &&str| format!("   8       0 {name} 1 0 8 1 0 0 0 0 0 1 1 0 0 0 0 0 0\n");
        let text: String = rows.iter().map(line).collect();
        sample_text(c, root, &text, t);
    }

    fn sample_text(c: &mut DiskCollector, root: &Root, text: &str, t: f64) {
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

    /// A scratch root for one test.
    fn scratch_root(name: &str) -> (std::path::PathBuf, Root) {
        let dir =
            std::env::temp_dir().join(format!("storwatch-disk-{name}-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("proc")).expect("mkdir");
        let root = Root::new(dir.join("proc"), dir.join("sys"));
        (dir, root)
    }

    /// The `disk` lines of a report, and the `top` rows of the last sample.
    fn report_and_live(c: &mut DiskCollector, root: &Root, t: f64) -> (String, Vec<DiskNow>) {
        let mut w = LineWriter::new("h", &[]);
        let mut errors = SourceErrors::default();
        c.report(
            &mut w,
            &mut ReportCx {
                root,
                ts_ns: (t * 1e9) as i64,
                now_s: t,
                uptime_cs: 0,
                errors: &mut errors,
            },
        );
        let mut live = Live::default();
        c.live(&mut live);
        let text = String::from_utf8(w.take()).expect("utf8");
        (text, live.disks)
    }

    /// Samples of `/proc/diskstats` where devices sit idle (their lines repeat byte for byte),
    /// one counter moves, devices go and come back, a line changes shape or device numbers, and
    /// a line turns malformed and back: the collector that leaves the repeated lines unparsed
    /// must report every interval and every second as one that parses every line does, and
    /// must have left out the lines that repeat where it walks the file in step.
    #[test]
    fn an_unchanged_line_is_taken_as_its_last_parse_and_reports_the_same() {
        let sda = "   8       0 sda 100 1 800 50 200 2 1600 70 3 90 120 0 0 0 0 7 9";
        let sdb = "   8      16 sdb 5 0 40 1 6 0 48 2 0 3 3 0 0 0 0 0 0";
        let sdb_w = "   8      16 sdb 5 0 40 1 7 0 48 2 0 3 3 0 0 0 0 0 0"; // one more write
        let sdc = "   8      32 sdc 9 9 9 9 9 9 9 9 0 9 9 9 9 9 9 9 9";
        let dm = " 253       0 dm-0 10 0 80 4 10 0 80 4 1 8 8 0 0 0 0 0 0";
        let dm_q = " 253       0 dm-0 10 0 80 4 10 0 80 4 2 8 8 0 0 0 0 0 0"; // in flight only
        let sda_15 = "   8       0 sda 100 1 800 50 200 2 1600 70 3 90 120 0 0 0 0"; // another length
        let sda_moved = "   8      64 sda 100 1 800 50 200 2 1600 70 3 90 120 0 0 0 0 7 9";
        let sdc_bad = "   8      32 sdc 9 9 9 9 9 9 9 9 0 9 9 9 9 9 9 9 x";
        let sda_moved_r = "   8      64 sda 101 1 800 50 200 2 1600 70 3 90 120 0 0 0 0 7 9";
        let sdab = "   8      64 sdab 101 1 800 50 200 2 1600 70 3 90 120 0 0 0 0 7 9"; // a longer name
        let sdb_2sp = "   8      16 sdb  5 0 40 1 8 0 48 2 0 3 3 0 0 0 0 0 0"; // two spaces
                                                                               // The rows, then how many lines are left unparsed and how many have only their
                                                                               // statistics parsed (the same head as the device expected there).
        let steps: &[(&[&str], usize, usize)] = &[
            (&[sda, sdb, sdc, dm], 0, 0),
            (&[sda, sdb_w, sdc, dm], 3, 1),
            (&[sda, sdb_w, sdc, dm_q], 3, 1),
            (&[sda, sdc, dm_q], 2, 0), // sdb removed: sdc is parsed, it was not where sdb was
            (&[sda, sdc, dm_q], 3, 0),
            (&[sda, sdb, sdc, dm_q], 2, 0), // sdb back: a new device, no rate yet
            (&[sda_15, sdb, sdc, dm_q], 3, 1),
            (&[sda_15, sdb, sdc, dm_q], 4, 0),
            (&[sda, sdb, sdc, dm_q], 3, 1),
            (&[sda_moved, sdb, sdc, dm_q], 3, 0),
            (&[sda_moved, sdb, sdc_bad, dm_q], 2, 0),
            (&[sda_moved, sdb, sdc, dm_q], 2, 0),
            (&[sda_moved, "", sdb, sdc, dm_q], 4, 0), // a blank line between rows
            (&[dm_q, sdc, sdb, sda_moved], 0, 0),     // every row moved: none where expected
            (&[dm_q, sdc, sdb, sda_moved], 4, 0),
            (&[dm_q, sdc, sdb, sda_moved_r], 3, 1),
            (&[dm_q, sdc, sdb, sdab], 3, 0), // the head of sda, then more name
            (&[dm_q, sdc, sdb_2sp, sdab], 3, 0),
        ];
        let (dir, root) = scratch_root("reuse");
        let mut reusing = DiskCollector::new(&Config::default());
        let mut parsing = DiskCollector::new(&Config::default());
        for (i, (rows, reused, heads)) in steps.iter().enumerate() {
            let text: String = rows.iter().map(|r| format!("{r}\n")).collect();
            let t = i as f64;
            let before = (reusing.reused, reusing.heads);
            sample_text(&mut reusing, &root, &text, t);
            parsing.last.clear(); // nothing to compare with: every line is parsed
            sample_text(&mut parsing, &root, &text, t);
            assert_eq!((parsing.reused, parsing.heads), (0, 0));
            assert_eq!(
                reusing.reused - before.0,
                *reused,
                "lines left unparsed at step {i}"
            );
            assert_eq!(
                reusing.heads - before.1,
                *heads,
                "lines whose statistics alone were parsed at step {i}"
            );
            let with_rates = reusing.disks.iter().filter(|d| d.interval.itv_cs > 0);
            let mut names: Vec<String> = with_rates.map(|d| d.name.clone()).collect();
            names.sort();
            let got = report_and_live(&mut reusing, &root, t);
            let want = report_and_live(&mut parsing, &root, t);
            assert_eq!(got, want, "step {i}");
            // Every device with an interval, once, in the order of their names (the order is
            // kept between reports while no device comes or goes).
            let reported: Vec<&str> = got
                .0
                .lines()
                .filter_map(|l| l.split(',').find_map(|kv| kv.strip_prefix("device=")))
                .collect();
            assert_eq!(reported, names, "step {i}");
            assert!(!want.0.is_empty() || i == 0, "step {i} reports nothing");
        }
        std::fs::remove_dir_all(&dir).expect("cleanup");
    }
}
