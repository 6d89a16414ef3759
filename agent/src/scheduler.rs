//! The scheduler: one [`Scheduler::sample`] per sample interval, one [`Scheduler::report`] per
//! report interval, driving every collector on that clock.
//!
//! Per sample the agent reads only what must be read every second — `/proc/uptime`,
//! `/proc/diskstats`, `/proc/net/dev`, and the health monitors' cheap files — into buffers it
//! reuses, and keeps per device a copy of the last counters and the interval's accumulators.
//! Everything that changes rarely (what a device is, link speed, tunables, CPU, memory and PSI) is
//! read when a device appears or once per report. This is what keeps a 200-disk server's sample
//! well under a millisecond of CPU.

use std::collections::HashMap;
use std::time::Duration;

use crate::collect::{Collector, ReportCx, SampleCx, SourceErrors};
use crate::config::{glob_match, Config};
use crate::event::Event;
use crate::rates::{self, DiskCounters, DiskRates, NetCounters, NetRates};
use crate::root::{read_into, Root};
use crate::selfstat;
use crate::sources::diskstats;
use crate::sources::netdev;
use crate::sources::sysblock::{self, BlockInfo, DeviceKind, Tunables};
use crate::sources::sysnet::{self, NetInfo};
use crate::sources::{meminfo, pressure, stat, uptime, ParseError, SourceError};
use crate::summary::{DiskInterval, NetInterval};
use storwatch_wire::lp::LineWriter;

/// How often block tunables are re-read (they are reported when changed, and every
/// `tunables_interval`).
const TUNABLES_CHECK_S: f64 = 60.0;

/// The sources the agent counts errors for, in the order of the `agent_source` lines.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Src {
    Uptime,
    Diskstats,
    Sysblock,
    Netdev,
    Sysnet,
    Stat,
    Pressure,
    Meminfo,
}

const SOURCES: [(Src, &str); 8] = [
    (Src::Uptime, "uptime"),
    (Src::Diskstats, "diskstats"),
    (Src::Sysblock, "sysblock"),
    (Src::Netdev, "netdev"),
    (Src::Sysnet, "sysnet"),
    (Src::Stat, "stat"),
    (Src::Pressure, "pressure"),
    (Src::Meminfo, "meminfo"),
];

#[derive(Debug)]
struct DiskState {
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
    tunables_reported_s: Option<f64>,
}

#[derive(Debug)]
struct NetState {
    seen: u64,
    prev: NetCounters,
    info: NetInfo,
    interval: NetInterval,
    last: Option<(NetCounters, u64)>,
}

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

/// Per-second values of one interface from the last sample (for `top`).
#[derive(Debug, Clone, PartialEq)]
pub struct NetNow {
    /// Interface name.
    pub iface: String,
    /// Link speed, Mb/s.
    pub speed_mbps: Option<u64>,
    /// sar -n DEV/EDEV values.
    pub rates: NetRates,
}

/// Everything the agent remembers between samples.
pub struct Scheduler {
    root: Root,
    threshold: f64,
    tunables_interval_s: f64,
    exclude_devices: Vec<String>,
    exclude_interfaces: Vec<String>,
    collectors: Vec<Box<dyn Collector>>,
    buf: String,
    buf2: String,
    scratch: Vec<f64>,
    generation: u64,
    prev_uptime_cs: Option<u64>,
    prev_clock: Option<std::time::Instant>,
    disks: HashMap<String, DiskState>,
    nets: HashMap<String, NetState>,
    prev_cpu: Option<stat::CpuTimes>,
    prev_psi: Option<(pressure::Pressure, u64)>,
    uptime_cs: u64,
    errors: SourceErrors,
    events: Vec<Event>,
    samples: u32,
    cycle_cpu_sum: Duration,
    cycle_cpu_max: Duration,
    process_cpu_at_report: Duration,
    started: std::time::Instant,
}

impl Scheduler {
    /// A scheduler for `cfg`: the host's disks, interfaces, CPU, pressure and memory, then
    /// `collectors` (the storage-health ones, [`crate::collect::storage`]) in that order.
    pub fn new(cfg: &Config, collectors: Vec<Box<dyn Collector>>) -> Self {
        let mut errors = SourceErrors::new(SOURCES.iter().map(|(_, n)| n));
        for c in &collectors {
            for n in c.sources() {
                errors.register(n);
            }
        }
        Self {
            root: Root::new(&cfg.proc_root, &cfg.sys_root),
            threshold: cfg.saturation_threshold_pct,
            tunables_interval_s: cfg.tunables_interval.as_secs_f64(),
            exclude_devices: cfg.exclude_devices.clone(),
            exclude_interfaces: cfg.exclude_interfaces.clone(),
            collectors,
            buf: String::with_capacity(64 * 1024),
            buf2: String::with_capacity(4096),
            scratch: Vec::new(),
            generation: 0,
            prev_uptime_cs: None,
            prev_clock: None,
            disks: HashMap::new(),
            nets: HashMap::new(),
            prev_cpu: None,
            prev_psi: None,
            uptime_cs: 0,
            errors,
            events: Vec::new(),
            samples: 0,
            cycle_cpu_sum: Duration::ZERO,
            cycle_cpu_max: Duration::ZERO,
            process_cpu_at_report: selfstat::process_cpu(),
            started: std::time::Instant::now(),
        }
    }

    fn src_error(&mut self, src: Src, err: &dyn std::fmt::Display) {
        if let Some((_, name)) = SOURCES.iter().find(|(s, _)| *s == src) {
            self.errors.count(name, err);
        }
    }

    fn parse_errors(&mut self, src: Src, path: &str, errs: &[ParseError]) {
        for e in errs {
            let full = SourceError::parse(&self.root.proc(path), e.clone());
            self.src_error(src, &full);
        }
    }

    /// The interval since the previous sample, in hundredths of a second: from `/proc/uptime`
    /// like sysstat, or the monotonic clock when uptime is unreadable.
    fn interval_cs(&mut self) -> Option<u64> {
        let now_clock = std::time::Instant::now();
        let clock_cs = self
            .prev_clock
            .map(|p| (now_clock.duration_since(p).as_millis() / 10) as u64);
        self.prev_clock = Some(now_clock);
        let path = self.root.proc("uptime");
        let up = match read_into(&path, &mut self.buf2) {
            Ok(true) => match uptime::parse(&self.buf2) {
                Ok(cs) => Some(cs),
                Err(e) => {
                    self.src_error(Src::Uptime, &SourceError::parse(&path, e));
                    None
                }
            },
            Ok(false) => None,
            Err(e) => {
                self.src_error(Src::Uptime, &e);
                None
            }
        };
        match up {
            Some(cs) => {
                let prev = self.prev_uptime_cs.replace(cs);
                self.uptime_cs = cs;
                // uptime standing still or going back (a restored fixture, a VM snapshot): no rates.
                prev.and_then(|p| cs.checked_sub(p)).filter(|d| *d > 0)
            }
            None => clock_cs.filter(|d| *d > 0),
        }
    }

    /// Takes one sample; `now_s` is monotonic seconds since start (for the health monitors).
    pub fn sample(&mut self, now_s: f64) {
        let cpu0 = selfstat::thread_cpu();
        self.generation += 1;
        let itv = self.interval_cs();
        if self.prev_cpu.is_none() {
            // Baseline for the first report's CPU and PSI shares.
            let mut scratch = LineWriter::new("", &[]);
            self.report_host(&mut scratch, 0);
        }
        self.sample_disks(itv);
        self.sample_nets(itv);
        let mut cx = SampleCx {
            root: &self.root,
            now_s,
            itv_cs: itv,
            uptime_cs: self.uptime_cs,
            events: &mut self.events,
            errors: &mut self.errors,
        };
        for c in &mut self.collectors {
            c.sample(&mut cx);
        }
        self.samples += 1;
        let spent = selfstat::thread_cpu().saturating_sub(cpu0);
        self.cycle_cpu_sum += spent;
        self.cycle_cpu_max = self.cycle_cpu_max.max(spent);
    }

    fn excluded(patterns: &[String], name: &str) -> bool {
        patterns.iter().any(|p| glob_match(p, name))
    }

    fn sample_disks(&mut self, itv: Option<u64>) {
        let path = self.root.proc("diskstats");
        let mut buf = std::mem::take(&mut self.buf);
        match read_into(&path, &mut buf) {
            Ok(true) => {
                let parsed = diskstats::parse(&buf);
                if !parsed.errors.is_empty() {
                    self.parse_errors(Src::Diskstats, "diskstats", &parsed.errors);
                }
                for row in &parsed.rows {
                    self.disk_row(row, itv);
                }
            }
            // No /proc/diskstats at all (a container without it): nothing to report.
            Ok(false) => {}
            Err(e) => self.src_error(Src::Diskstats, &e),
        }
        self.buf = buf;
        let gen = self.generation;
        self.disks.retain(|name, d| {
            if d.seen != gen {
                tracing::info!(device = %name, "block device vanished");
            }
            d.seen == gen
        });
    }

    fn disk_row(&mut self, row: &diskstats::DiskStat<'_>, itv: Option<u64>) {
        let cur = DiskCounters::from(row);
        let gen = self.generation;
        if let Some(d) = self.disks.get_mut(row.name) {
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
            match (itv, rates::disk_delta(&d.prev, &cur)) {
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
        if Self::excluded(&self.exclude_devices, row.name) {
            return;
        }
        // A device we have not seen: learn what it is (sysfs, once), no rate yet.
        let info = match sysblock::read_info(&self.root, row.name, row.major, row.minor) {
            Ok(Some(info)) => info,
            Ok(None) => BlockInfo::default(),
            Err(e) => {
                self.src_error(Src::Sysblock, &e);
                BlockInfo::default()
            }
        };
        let kind = sysblock::classify(row.name, info.dm_uuid.as_deref(), info.partition);
        self.disks.insert(
            row.name.to_owned(),
            DiskState {
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
                tunables_reported_s: None,
            },
        );
    }

    fn sample_nets(&mut self, itv: Option<u64>) {
        let path = self.root.proc("net/dev");
        let mut buf = std::mem::take(&mut self.buf);
        match read_into(&path, &mut buf) {
            Ok(true) => {
                let parsed = netdev::parse(&buf);
                if !parsed.errors.is_empty() {
                    self.parse_errors(Src::Netdev, "net/dev", &parsed.errors);
                }
                for row in &parsed.rows {
                    self.net_row(row, itv);
                }
            }
            Ok(false) => {}
            Err(e) => self.src_error(Src::Netdev, &e),
        }
        self.buf = buf;
        let gen = self.generation;
        self.nets.retain(|_, n| n.seen == gen);
    }

    fn net_row(&mut self, row: &netdev::NetDev<'_>, itv: Option<u64>) {
        let cur = NetCounters::from(row);
        let gen = self.generation;
        if let Some(n) = self.nets.get_mut(row.iface) {
            n.seen = gen;
            match (itv, rates::net_delta(&n.prev, &cur)) {
                (Some(itv), Some(delta)) => {
                    let r = rates::net_rates(&delta, itv, n.info.speed_mbps, n.info.duplex);
                    n.interval.delta.add(&delta);
                    n.interval.itv_cs += itv;
                    if let Some(u) = r.util_pct {
                        n.interval.util.push(u, itv);
                    }
                    n.interval.rx_bytes_per_s.push(r.rx_bytes_per_s, itv);
                    n.interval.tx_bytes_per_s.push(r.tx_bytes_per_s, itv);
                    n.last = Some((delta, itv));
                }
                (Some(_), None) => {
                    n.interval.resets += 1;
                    n.last = None;
                }
                (None, _) => n.last = None,
            }
            n.prev = cur;
            return;
        }
        if Self::excluded(&self.exclude_interfaces, row.iface) {
            return;
        }
        let info = self.read_net_info(row.iface);
        self.nets.insert(
            row.iface.to_owned(),
            NetState {
                seen: gen,
                prev: cur,
                info,
                interval: NetInterval::default(),
                last: None,
            },
        );
    }

    fn read_net_info(&mut self, iface: &str) -> NetInfo {
        match sysnet::read(&self.root, iface) {
            Ok(info) => info,
            Err(e) => {
                self.src_error(Src::Sysnet, &e);
                NetInfo::default()
            }
        }
    }

    /// Per-second values from the last sample, sorted by %util (highest first), for `top`.
    pub fn disks_now(&self) -> Vec<DiskNow> {
        let mut v: Vec<DiskNow> = self
            .disks
            .iter()
            .filter_map(|(dev, d)| {
                let (delta, itv) = d.last?;
                Some(DiskNow {
                    device: dev.clone(),
                    name: display_name(dev, d),
                    kind: d.kind,
                    rates: rates::disk_rates(&delta, itv),
                })
            })
            .collect();
        v.sort_by(|a, b| {
            b.rates
                .util_pct
                .total_cmp(&a.rates.util_pct)
                .then_with(|| a.device.cmp(&b.device))
        });
        v
    }

    /// Per-second interface values from the last sample, busiest first, for `top`.
    pub fn nets_now(&self) -> Vec<NetNow> {
        let mut v: Vec<NetNow> = self
            .nets
            .iter()
            .filter_map(|(iface, n)| {
                let (delta, itv) = n.last?;
                Some(NetNow {
                    iface: iface.clone(),
                    speed_mbps: n.info.speed_mbps,
                    rates: rates::net_rates(&delta, itv, n.info.speed_mbps, n.info.duplex),
                })
            })
            .collect();
        v.sort_by(|a, b| {
            let ka = a.rates.rx_bytes_per_s + a.rates.tx_bytes_per_s;
            let kb = b.rates.rx_bytes_per_s + b.rates.tx_bytes_per_s;
            kb.total_cmp(&ka).then_with(|| a.iface.cmp(&b.iface))
        });
        v
    }

    /// Writes the report for the interval that ends now, stamped `ts_ns`, and starts the next.
    /// `sink_stats` are the output's spool/drop counters for the agent line.
    pub fn report(
        &mut self,
        w: &mut LineWriter,
        ts_ns: i64,
        now_s: f64,
        sink: crate::sink::SinkStats,
    ) {
        let cpu0 = selfstat::thread_cpu();
        let lines_before = w.lines();
        self.report_disks(w, ts_ns, now_s);
        self.report_nets(w, ts_ns);
        self.report_host(w, ts_ns);
        let mut cx = ReportCx {
            root: &self.root,
            ts_ns,
            now_s,
            uptime_cs: self.uptime_cs,
            errors: &mut self.errors,
        };
        for c in &mut self.collectors {
            c.report(w, &mut cx);
        }
        for e in std::mem::take(&mut self.events) {
            let bad = is_bad_state(&e.to_state) || e.text.contains("checksum error");
            e.emit(w, ts_ns, bad);
        }
        let report_cpu = selfstat::thread_cpu().saturating_sub(cpu0);
        self.report_self(w, ts_ns, report_cpu, w.lines() - lines_before, sink);
    }

    fn report_disks(&mut self, w: &mut LineWriter, ts: i64, now_s: f64) {
        let mut names: Vec<String> = self.disks.keys().cloned().collect();
        names.sort_unstable();
        for name in &names {
            let Some(d) = self.disks.get_mut(name) else {
                continue;
            };
            if d.interval.itv_cs > 0 {
                let r = rates::disk_rates(&d.interval.delta, d.interval.itv_cs);
                let util_p95 = d.interval.util.quantile(0.95, &mut self.scratch);
                let dname = display_name(name, d);
                w.line("disk", ts)
                    .tag("device", name)
                    .tag("name", &dname)
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
        self.report_tunables(w, ts, now_s, &names);
    }

    fn report_tunables(&mut self, w: &mut LineWriter, ts: i64, now_s: f64, names: &[String]) {
        for name in names {
            let Some(d) = self.disks.get(name) else {
                continue;
            };
            if d.info.partition {
                continue;
            }
            let due_check = d
                .tunables_reported_s
                .is_none_or(|t| now_s - t >= TUNABLES_CHECK_S.min(self.tunables_interval_s));
            if !due_check {
                continue;
            }
            let (major, minor) = (d.major, d.minor);
            let read = sysblock::read_tunables(&self.root, major, minor);
            let Some(d) = self.disks.get_mut(name) else {
                continue;
            };
            let t = match read {
                Ok(Some(t)) => t,
                Ok(None) => continue,
                Err(e) => {
                    self.src_error(Src::Sysblock, &e);
                    continue;
                }
            };
            let changed = d.tunables.as_ref() != Some(&t);
            let stale = d
                .tunables_reported_s
                .is_none_or(|r| now_s - r >= self.tunables_interval_s);
            if changed || stale {
                if changed && d.tunables.is_some() {
                    tracing::info!(device = %name, old = ?d.tunables, new = ?t, "block tunables changed");
                }
                let dname = display_name(name, d);
                w.line("disk_tunables", ts)
                    .tag("device", name)
                    .tag("name", &dname)
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
    }

    fn report_nets(&mut self, w: &mut LineWriter, ts: i64) {
        let mut names: Vec<String> = self.nets.keys().cloned().collect();
        names.sort_unstable();
        for name in &names {
            // Link speed, duplex and state change rarely; refresh them once per report.
            let info = self.read_net_info(name);
            let Some(n) = self.nets.get_mut(name) else {
                continue;
            };
            n.info = info;
            if n.interval.itv_cs > 0 {
                let r = rates::net_rates(
                    &n.interval.delta,
                    n.interval.itv_cs,
                    n.info.speed_mbps,
                    n.info.duplex,
                );
                w.line("net", ts)
                    .tag("iface", name)
                    .field("rx_bytes_per_s", r3(r.rx_bytes_per_s))
                    .field("tx_bytes_per_s", r3(r.tx_bytes_per_s))
                    .field_opt(
                        "rx_bytes_max_per_s",
                        n.interval.rx_bytes_per_s.max().map(r3),
                    )
                    .field_opt(
                        "tx_bytes_max_per_s",
                        n.interval.tx_bytes_per_s.max().map(r3),
                    )
                    .field("rx_packets_per_s", r3(r.rx_packets_per_s))
                    .field("tx_packets_per_s", r3(r.tx_packets_per_s))
                    .field("rx_compressed_per_s", r3(r.rx_compressed_per_s))
                    .field("tx_compressed_per_s", r3(r.tx_compressed_per_s))
                    .field("rx_multicast_per_s", r3(r.rx_multicast_per_s))
                    .field("rx_errors_per_s", r3(r.rx_errors_per_s))
                    .field("tx_errors_per_s", r3(r.tx_errors_per_s))
                    .field("rx_drops_per_s", r3(r.rx_drops_per_s))
                    .field("tx_drops_per_s", r3(r.tx_drops_per_s))
                    .field("collisions_per_s", r3(r.collisions_per_s))
                    .field("tx_carrier_per_s", r3(r.tx_carrier_per_s))
                    .field("rx_frame_per_s", r3(r.rx_frame_per_s))
                    .field("rx_fifo_per_s", r3(r.rx_fifo_per_s))
                    .field("tx_fifo_per_s", r3(r.tx_fifo_per_s))
                    .field_opt("speed_mbps", n.info.speed_mbps)
                    .field_opt("util_pct", r.util_pct.map(r3))
                    .field_opt("util_max_pct", n.interval.util.max().map(r3))
                    .field_opt("operstate", n.info.operstate.as_deref())
                    .field_opt("carrier_changes", n.info.carrier_changes)
                    .field_opt("mtu", n.info.mtu)
                    .field("interval_s", n.interval.itv_cs as f64 / 100.0)
                    .write();
            }
            n.interval.clear();
        }
    }

    fn report_host(&mut self, w: &mut LineWriter, ts: i64) {
        // CPU, from /proc/stat between two reports (the file is large on many-core hosts:
        // reading it once per report rather than per second).
        let path = self.root.proc("stat");
        let mut buf = std::mem::take(&mut self.buf);
        match read_into(&path, &mut buf) {
            Ok(true) => match stat::parse(&buf) {
                Ok(s) => {
                    if let Some(p) = self.prev_cpu.and_then(|prev| rates::cpu_pct(&prev, &s.cpu)) {
                        w.line("cpu", ts)
                            .field("user_pct", r3(p.user_pct))
                            .field("nice_pct", r3(p.nice_pct))
                            .field("system_pct", r3(p.system_pct))
                            .field("iowait_pct", r3(p.iowait_pct))
                            .field("steal_pct", r3(p.steal_pct))
                            .field("idle_pct", r3(p.idle_pct))
                            .field("cpus", s.cpus)
                            .write();
                    }
                    self.prev_cpu = Some(s.cpu);
                }
                Err(e) => self.src_error(Src::Stat, &SourceError::parse(&path, e)),
            },
            Ok(false) => {}
            Err(e) => self.src_error(Src::Stat, &e),
        }
        // I/O pressure (absent before 4.20 or with psi=0: silent).
        let path = self.root.proc("pressure/io");
        match read_into(&path, &mut buf) {
            Ok(true) => match pressure::parse(&buf) {
                Ok(p) => {
                    let uptime = self.uptime_cs;
                    let share = |cur: Option<pressure::PsiLine>,
                                 prev: Option<pressure::PsiLine>,
                                 itv: u64| {
                        let (c, p) = (cur?, prev?);
                        let d = c.total_us.checked_sub(p.total_us)?;
                        (itv > 0).then(|| d as f64 / (itv as f64 * 10_000.0) * 100.0)
                    };
                    let (some_pct, full_pct) = match self.prev_psi {
                        Some((prev, up)) if uptime > up => (
                            share(p.some, prev.some, uptime - up),
                            share(p.full, prev.full, uptime - up),
                        ),
                        _ => (None, None),
                    };
                    w.line("pressure", ts)
                        .field_opt("io_some_avg10", p.some.map(|l| l.avg10))
                        .field_opt("io_some_avg60", p.some.map(|l| l.avg60))
                        .field_opt("io_some_total_us", p.some.map(|l| l.total_us))
                        .field_opt("io_some_pct", some_pct.map(r3))
                        .field_opt("io_full_avg10", p.full.map(|l| l.avg10))
                        .field_opt("io_full_avg60", p.full.map(|l| l.avg60))
                        .field_opt("io_full_total_us", p.full.map(|l| l.total_us))
                        .field_opt("io_full_pct", full_pct.map(r3))
                        .write();
                    self.prev_psi = Some((p, uptime));
                }
                Err(e) => self.src_error(Src::Pressure, &SourceError::parse(&path, e)),
            },
            Ok(false) => {}
            Err(e) => self.src_error(Src::Pressure, &e),
        }
        let path = self.root.proc("meminfo");
        match read_into(&path, &mut buf) {
            Ok(true) => match meminfo::parse(&buf) {
                Ok(m) => {
                    w.line("mem", ts)
                        .field_opt("dirty_kb", m.dirty_kb)
                        .field_opt("writeback_kb", m.writeback_kb)
                        .field_opt("total_kb", m.total_kb)
                        .field_opt("available_kb", m.available_kb)
                        .field_opt("cached_kb", m.cached_kb)
                        .write();
                }
                Err(e) => self.src_error(Src::Meminfo, &SourceError::parse(&path, e)),
            },
            Ok(false) => {}
            Err(e) => self.src_error(Src::Meminfo, &e),
        }
        self.buf = buf;
    }

    fn report_self(
        &mut self,
        w: &mut LineWriter,
        ts: i64,
        report_cpu: Duration,
        lines: usize,
        sink: crate::sink::SinkStats,
    ) {
        let samples = self.samples.max(1);
        let process_cpu = selfstat::process_cpu();
        let process_delta = process_cpu.saturating_sub(self.process_cpu_at_report);
        self.process_cpu_at_report = process_cpu;
        let source_errors = self.errors.interval_sum();
        w.line("agent", ts)
            .tag("version", env!("CARGO_PKG_VERSION"))
            .field(
                "cycle_cpu_us",
                r3(self.cycle_cpu_sum.as_secs_f64() * 1e6 / f64::from(samples)),
            )
            .field(
                "cycle_cpu_max_us",
                r3(self.cycle_cpu_max.as_secs_f64() * 1e6),
            )
            .field("report_cpu_us", r3(report_cpu.as_secs_f64() * 1e6))
            .field("process_cpu_us", r3(process_delta.as_secs_f64() * 1e6))
            .field_opt("rss_kb", selfstat::rss_kb())
            .field("samples", self.samples)
            .field("lines", lines as u64)
            .field("devices", self.disks.len() as u64)
            .field("interfaces", self.nets.len() as u64)
            .field("source_errors", source_errors)
            .field("spool_bytes", sink.spool_bytes)
            .field("dropped_lines", sink.dropped_lines)
            .field("uptime_s", self.started.elapsed().as_secs())
            .write();
        for (name, interval, total) in self.errors.take_interval() {
            w.line("agent_source", ts)
                .tag("source", name)
                .field("errors", interval)
                .field("errors_total", total)
                .write();
        }
        self.samples = 0;
        self.cycle_cpu_sum = Duration::ZERO;
        self.cycle_cpu_max = Duration::ZERO;
    }

    /// Errors counted per source since start: `(source, total)`.
    pub fn error_totals(&self) -> Vec<(String, u64)> {
        self.errors.totals()
    }
}

/// Rounds a rate to 3 decimals: finer digits are noise from the interval's jitter and would only
/// lengthen every line (Display then prints the shortest exact form, e.g. `3.184`).
fn r3(v: f64) -> f64 {
    (v * 1000.0).round() / 1000.0
}

fn display_name(dev: &str, d: &DiskState) -> String {
    d.info
        .dm_name
        .clone()
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| dev.to_owned())
}

/// States that call for a warning in the log rather than an info line.
fn is_bad_state(s: &str) -> bool {
    let s = s.to_ascii_lowercase();
    [
        "fail",
        "degraded",
        "faulted",
        "unavail",
        "offline",
        "removed",
        "suspended",
        "flapping",
        "lost",
        "stalled",
        "mismatch",
    ]
    .iter()
    .any(|b| s.contains(b))
}
