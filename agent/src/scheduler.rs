//! The scheduler: one [`Scheduler::sample`] per sample interval, one [`Scheduler::report`] per
//! report interval, driving every collector on that clock.
//!
//! It keeps only what belongs to no domain: the clock (the interval between samples, from
//! `/proc/uptime` as sysstat takes it), the order of the collectors (the order of their lines),
//! the events they raise (logged and written after their lines), and the agent's own cost (the
//! `agent` and `agent_source` lines). What each domain reads and reports is in [`crate::collect`].
//!
//! Per sample the collectors read only what must be read every second — `/proc/diskstats`,
//! `/proc/net/dev`, and the health monitors' cheap files — into buffers they reuse. Everything
//! that changes rarely (what a device is, link speed, tunables, CPU, memory and PSI) is read when
//! a device appears or once per report. This is what keeps a 200-disk server's sample well under
//! a millisecond of CPU.

use std::time::{Duration, Instant};

use crate::assemble;
use crate::collect::{r3, Collector, Live, ReportCx, SampleCx, SourceErrors, Watched};
use crate::config::Config;
use crate::event::Event;
use crate::root::{read_value_into, Root};
use crate::selfstat;
use crate::sink::SinkStats;
use crate::sources::{uptime, SourceError};
use storwatch_wire::lp::LineWriter;

/// The scheduler's own source: the clock.
const UPTIME: &str = "uptime";

/// The collectors and the clock they are driven on.
pub struct Scheduler {
    root: Root,
    collectors: Vec<Box<dyn Collector>>,
    buf: String,
    prev_uptime_cs: Option<u64>,
    prev_clock: Option<Instant>,
    uptime_cs: u64,
    errors: SourceErrors,
    events: Vec<Event>,
    samples: u32,
    /// The next report covers only part of an interval (a stop or a reload flushes it).
    partial: bool,
    cycle_cpu_sum: Duration,
    cycle_cpu_max: Duration,
    process_cpu_at_report: Duration,
    started: Instant,
    /// Each collector's CPU time (this thread's clock) in the samples and the report of the
    /// interval, and the field it is written in (`disk_cpu_us`).
    collector_cpu: Vec<(String, Duration)>,
}

impl Scheduler {
    /// A scheduler for `cfg`: the host's own collectors ([`assemble::core`]: disks, interfaces,
    /// CPU/pressure/memory), then `collectors` (the storage-health ones,
    /// [`assemble::storage`]) in that order.
    pub fn new(cfg: &Config, collectors: Vec<Box<dyn Collector>>) -> Self {
        let mut all = assemble::core(cfg);
        all.extend(collectors);
        let mut errors = SourceErrors::new(&[UPTIME]);
        for c in &all {
            for n in c.sources() {
                errors.register(n);
            }
        }
        let collector_cpu = all
            .iter()
            .map(|c| (format!("{}_cpu_us", c.name()), Duration::ZERO))
            .collect();
        Self {
            root: Root::new(&cfg.proc_root, &cfg.sys_root),
            collector_cpu,
            collectors: all,
            buf: String::with_capacity(64),
            prev_uptime_cs: None,
            prev_clock: None,
            uptime_cs: 0,
            errors,
            events: Vec::new(),
            samples: 0,
            partial: false,
            cycle_cpu_sum: Duration::ZERO,
            cycle_cpu_max: Duration::ZERO,
            process_cpu_at_report: selfstat::process_cpu(),
            started: Instant::now(),
        }
    }

    /// The interval since the previous sample, in hundredths of a second: from `/proc/uptime`
    /// like sysstat, or the monotonic clock when uptime is unreadable.
    fn interval_cs(&mut self) -> Option<u64> {
        let now_clock = Instant::now();
        let clock_cs = self
            .prev_clock
            .map(|p| (now_clock.duration_since(p).as_millis() / 10) as u64);
        self.prev_clock = Some(now_clock);
        let path = self.root.proc("uptime");
        let up = match read_value_into(&path, &mut self.buf) {
            Ok(true) => match uptime::parse(&self.buf) {
                Ok(cs) => Some(cs),
                Err(e) => {
                    self.errors.count(UPTIME, &SourceError::parse(&path, e));
                    None
                }
            },
            Ok(false) => None,
            Err(e) => {
                self.errors.count(UPTIME, &e);
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
        let itv = self.interval_cs();
        let mut cx = SampleCx {
            root: &self.root,
            now_s,
            itv_cs: itv,
            uptime_cs: self.uptime_cs,
            events: &mut self.events,
            errors: &mut self.errors,
        };
        // Each collector's share: the clock read between two collectors ends one and starts
        // the next (one clock read per collector).
        let mut t = selfstat::thread_cpu();
        for (c, (_, cost)) in self.collectors.iter_mut().zip(&mut self.collector_cpu) {
            c.sample(&mut cx);
            let now = selfstat::thread_cpu();
            *cost += now.saturating_sub(t);
            t = now;
        }
        self.samples += 1;
        let spent = t.saturating_sub(cpu0);
        self.cycle_cpu_sum += spent;
        self.cycle_cpu_max = self.cycle_cpu_max.max(spent);
    }

    /// Fills `live` (emptied first) with every collector's rows from the last sample, for `top`.
    pub fn live(&self, live: &mut Live) {
        live.clear();
        for c in &self.collectors {
            c.live(live);
        }
    }

    /// Samples taken since the last report.
    pub fn pending_samples(&self) -> u32 {
        self.samples
    }

    /// Marks the next report as covering only part of an interval: its `agent` line gets
    /// `partial=true`, and each device's `interval_s` says how much it covers.
    pub fn mark_partial(&mut self) {
        self.partial = true;
    }

    /// Writes the report for the interval that ends now, stamped `ts_ns`, and starts the next:
    /// every collector's lines in order, the interval's events, then the agent's own lines.
    /// `sink` are the output's spool/drop counters for the agent line.
    pub fn report(&mut self, w: &mut LineWriter, ts_ns: i64, now_s: f64, sink: SinkStats) {
        let cpu0 = selfstat::thread_cpu();
        let lines_before = w.lines();
        let mut cx = ReportCx {
            root: &self.root,
            ts_ns,
            now_s,
            uptime_cs: self.uptime_cs,
            errors: &mut self.errors,
        };
        let mut t = cpu0;
        for (c, (_, cost)) in self.collectors.iter_mut().zip(&mut self.collector_cpu) {
            c.report(w, &mut cx);
            let now = selfstat::thread_cpu();
            *cost += now.saturating_sub(t);
            t = now;
        }
        for e in std::mem::take(&mut self.events) {
            let bad = is_bad_state(&e.to_state) || e.text.contains("checksum error");
            e.emit(w, ts_ns, bad);
        }
        let report_cpu = selfstat::thread_cpu().saturating_sub(cpu0);
        self.report_self(w, ts_ns, report_cpu, w.lines() - lines_before, sink);
    }

    /// The `agent` line (this process's cost and what it tracks) and one `agent_source` line
    /// per source that ever failed.
    fn report_self(
        &mut self,
        w: &mut LineWriter,
        ts: i64,
        report_cpu: Duration,
        lines: usize,
        sink: SinkStats,
    ) {
        let samples = self.samples.max(1);
        let process_cpu = selfstat::process_cpu();
        let process_delta = process_cpu.saturating_sub(self.process_cpu_at_report);
        self.process_cpu_at_report = process_cpu;
        let source_errors = self.errors.interval_sum();
        let mut watched = Watched::default();
        for c in &self.collectors {
            c.watched(&mut watched);
        }
        let mut line = w
            .line("agent", ts)
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
            .field_opt("partial", self.partial.then_some(true))
            .field("lines", lines as u64)
            .field("devices", watched.devices)
            .field("interfaces", watched.interfaces)
            .field("source_errors", source_errors)
            .field("spool_bytes", sink.spool_bytes)
            .field("dropped_lines", sink.dropped_lines)
            .field_opt("file_rotations", sink.file_rotations)
            .field("uptime_s", self.started.elapsed().as_secs());
        for (field, cost) in &mut self.collector_cpu {
            line = line.field(field.as_str(), r3(cost.as_secs_f64() * 1e6));
            *cost = Duration::ZERO;
        }
        line.write();
        for (name, interval, total) in self.errors.take_interval() {
            w.line("agent_source", ts)
                .tag("source", name)
                .field("errors", interval)
                .field("errors_total", total)
                .write();
        }
        self.samples = 0;
        self.partial = false;
        self.cycle_cpu_sum = Duration::ZERO;
        self.cycle_cpu_max = Duration::ZERO;
    }

    /// Errors counted per source since start: `(source, total)`.
    pub fn error_totals(&self) -> Vec<(String, u64)> {
        self.errors.totals()
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A collector of its own, as a new metric source would be: one source, one line per
    /// report, an event and an error per sample.
    struct Probe {
        samples: u64,
    }

    impl Collector for Probe {
        fn sources(&self) -> &'static [&'static str] {
            &["probe"]
        }

        fn sample(&mut self, cx: &mut SampleCx<'_>) {
            self.samples += 1;
            cx.errors.count("probe", &"probe file unreadable");
            cx.events.push(Event {
                source: "probe",
                object: format!("p{}", self.samples),
                from_state: "ok".into(),
                to_state: "failed".into(),
                text: "the probe failed".into(),
            });
        }

        fn report(&mut self, w: &mut LineWriter, cx: &mut ReportCx<'_>) {
            w.line("probe", cx.ts_ns)
                .field("samples", self.samples)
                .write();
        }

        fn watched(&self, w: &mut Watched) {
            w.devices += 40;
        }
    }

    #[test]
    fn a_collector_is_driven_in_order_and_its_errors_and_events_reported() {
        let dir = tempfile::tempdir().expect("tempdir");
        for d in ["proc", "sys"] {
            std::fs::create_dir(dir.path().join(d)).expect("mkdir");
        }
        let cfg = Config {
            proc_root: dir.path().join("proc"),
            sys_root: dir.path().join("sys"),
            ..Config::default()
        };
        let mut s = Scheduler::new(&cfg, vec![Box::new(Probe { samples: 0 })]);
        s.sample(0.0);
        s.sample(1.0);
        let mut w = LineWriter::new("h", &[]);
        s.report(&mut w, 7, 1.0, SinkStats::default());
        let text = String::from_utf8(w.take()).expect("utf8");
        // An empty host: the core collectors are silent; the probe's line, its two events,
        // then the agent's own lines.
        let kinds: Vec<&str> = text
            .lines()
            .map(|l| l.split(',').next().unwrap_or(""))
            .collect();
        assert_eq!(
            kinds,
            ["probe", "event", "event", "agent", "agent_source"],
            "{text}"
        );
        assert!(text.starts_with("probe,host=h samples=2i 7\n"), "{text}");
        assert!(text.contains("object=p2 "), "{text}");
        let agent = text.lines().nth(3).unwrap_or("");
        assert!(agent.contains(",devices=40i,interfaces=0i,"), "{agent}");
        assert!(agent.contains(",source_errors=2i,"), "{agent}");
        assert!(
            text.ends_with("agent_source,host=h,source=probe errors=2i,errors_total=2i 7\n"),
            "{text}"
        );
        let totals = s.error_totals();
        let names: Vec<&str> = totals.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(
            names,
            [
                "uptime",
                "diskstats",
                "sysblock",
                "netdev",
                "sysnet",
                "stat",
                "pressure",
                "meminfo",
                "probe"
            ]
        );
        // The next interval starts empty: no events carried over, errors counted afresh.
        let mut w = LineWriter::new("h", &[]);
        s.report(&mut w, 8, 2.0, SinkStats::default());
        let text = String::from_utf8(w.take()).expect("utf8");
        assert!(!text.contains("event,"), "{text}");
        assert!(text.contains("errors=0i,errors_total=2i"), "{text}");
    }

    /// A collector that spends at least `burn` of this thread's CPU in each sample.
    struct Burner {
        burn: Duration,
    }

    impl Collector for Burner {
        fn sources(&self) -> &'static [&'static str] {
            &["burner"]
        }

        fn sample(&mut self, _cx: &mut SampleCx<'_>) {
            let t0 = selfstat::thread_cpu();
            let mut x = 0u64;
            while selfstat::thread_cpu().saturating_sub(t0) < self.burn {
                x = std::hint::black_box(x.wrapping_add(1));
            }
        }

        fn report(&mut self, _w: &mut LineWriter, _cx: &mut ReportCx<'_>) {}
    }

    fn field_f64(line: &str, key: &str) -> Option<f64> {
        let fields = line.split(' ').nth(1)?;
        fields.split(',').find_map(|kv| {
            let (k, v) = kv.split_once('=')?;
            (k == key).then(|| v.trim_end_matches('i').parse().ok())?
        })
    }

    #[test]
    fn the_agent_line_carries_each_collectors_cpu_of_the_interval() {
        let dir = tempfile::tempdir().expect("tempdir");
        for d in ["proc", "sys"] {
            std::fs::create_dir(dir.path().join(d)).expect("mkdir");
        }
        let cfg = Config {
            proc_root: dir.path().join("proc"),
            sys_root: dir.path().join("sys"),
            ..Config::default()
        };
        let burn = Duration::from_millis(3);
        let mut s = Scheduler::new(&cfg, vec![Box::new(Burner { burn })]);
        s.sample(0.0);
        s.sample(1.0);
        let mut w = LineWriter::new("h", &[]);
        s.report(&mut w, 7, 1.0, SinkStats::default());
        let text = String::from_utf8(w.take()).expect("utf8");
        let agent = text
            .lines()
            .find(|l| l.starts_with("agent,"))
            .expect("agent line");
        for f in ["disk_cpu_us", "net_cpu_us", "host_cpu_us"] {
            assert!(
                field_f64(agent, f).is_some_and(|v| v >= 0.0),
                "{f}: {agent}"
            );
        }
        // two samples, each at least `burn` of the thread's clock
        let burner = field_f64(agent, "burner_cpu_us").expect("burner_cpu_us");
        assert!(burner >= 2.0 * burn.as_secs_f64() * 1e6, "{agent}");
        // every collector's share is inside the samples' and the report's total
        let cycle = field_f64(agent, "cycle_cpu_us").expect("cycle_cpu_us") * 2.0;
        let report = field_f64(agent, "report_cpu_us").expect("report_cpu_us");
        assert!(burner <= cycle + report + 1.0, "{agent}");
        // the next interval starts from zero
        let mut w = LineWriter::new("h", &[]);
        s.report(&mut w, 8, 2.0, SinkStats::default());
        let text = String::from_utf8(w.take()).expect("utf8");
        let agent = text
            .lines()
            .find(|l| l.starts_with("agent,"))
            .expect("agent line");
        assert!(
            field_f64(agent, "burner_cpu_us").is_some_and(|v| v < burn.as_secs_f64() * 1e6),
            "{agent}"
        );
    }

    #[test]
    fn collectors_are_named_after_their_domain() {
        assert_eq!(crate::collect::name_of(&["diskstats", "sysblock"]), "disk");
        assert_eq!(crate::collect::name_of(&["netdev", "sysnet"]), "net");
        assert_eq!(
            crate::collect::name_of(&["stat", "pressure", "meminfo"]),
            "host"
        );
        assert_eq!(crate::collect::name_of(&["smartctl"]), "drive");
        assert_eq!(crate::collect::name_of(&["storcli"]), "hwraid");
        assert_eq!(crate::collect::name_of(&["cgroup"]), "jobs");
        assert_eq!(crate::collect::name_of(&["mountinfo", "statvfs"]), "fs");
        assert_eq!(crate::collect::name_of(&["md"]), "md");
        assert_eq!(crate::collect::name_of(&[]), "collector");
    }
}
