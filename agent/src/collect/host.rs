//! The host as a whole: CPU shares from `/proc/stat`, I/O pressure from `/proc/pressure/io`, page
//! cache from `/proc/meminfo`; the `cpu`, `pressure` and `mem` lines.
//!
//! All three are read once per report, not every second: `/proc/stat` is large on many-core
//! hosts, and the kernel already averages PSI. CPU and PSI shares are over the report interval,
//! from the previous report's reading; the first sample takes that reading as a baseline, so the
//! first report already has them.

use storwatch_wire::lp::LineWriter;

use super::{r3, Collector, ReportCx, SampleCx, SourceErrors};
use crate::rates::{self, CpuPct};
use crate::root::{read_into, read_value_into, Root};
use crate::sources::meminfo::{self, MemInfo};
use crate::sources::pressure::{self, Pressure};
use crate::sources::stat::{self, CpuTimes};
use crate::sources::SourceError;

const STAT: &str = "stat";
const PRESSURE: &str = "pressure";
const MEMINFO: &str = "meminfo";

/// One reading of the three files, with the shares since the previous one.
#[derive(Debug, Default)]
struct Reading {
    /// CPU shares and the number of CPUs; `None` without a previous reading to compare with.
    cpu: Option<(CpuPct, u32)>,
    /// Pressure, and the `some` and `full` shares of the interval.
    psi: Option<(Pressure, Option<f64>, Option<f64>)>,
    mem: Option<MemInfo>,
}

/// CPU, I/O pressure and memory of the host.
pub struct HostCollector {
    buf: String,
    prev_cpu: Option<CpuTimes>,
    /// The last pressure reading and `/proc/uptime` (cs) when it was taken.
    prev_psi: Option<(Pressure, u64)>,
}

impl Default for HostCollector {
    fn default() -> Self {
        Self::new()
    }
}

impl HostCollector {
    /// A collector with no baseline yet.
    pub fn new() -> Self {
        Self {
            buf: String::with_capacity(16 * 1024),
            prev_cpu: None,
            prev_psi: None,
        }
    }

    /// Reads the three files, counting what fails, and keeps this reading as the baseline of
    /// the next. An absent file (no PSI before 4.20 or with `psi=0`) is silent.
    fn read(&mut self, root: &Root, uptime_cs: u64, errors: &mut SourceErrors) -> Reading {
        let mut out = Reading::default();
        let mut buf = std::mem::take(&mut self.buf);
        let path = root.proc("stat");
        match read_into(&path, &mut buf) {
            Ok(true) => match stat::parse(&buf) {
                Ok(s) => {
                    out.cpu = self
                        .prev_cpu
                        .and_then(|prev| rates::cpu_pct(&prev, &s.cpu))
                        .map(|p| (p, s.cpus));
                    self.prev_cpu = Some(s.cpu);
                }
                Err(e) => errors.count(STAT, &SourceError::parse(&path, e)),
            },
            Ok(false) => {}
            Err(e) => errors.count(STAT, &e),
        }
        let path = root.proc("pressure/io");
        match read_value_into(&path, &mut buf) {
            Ok(true) => match pressure::parse(&buf) {
                Ok(p) => {
                    let (some_pct, full_pct) = match self.prev_psi {
                        Some((prev, up)) if uptime_cs > up => (
                            rates::psi_pct(prev.some, p.some, uptime_cs - up),
                            rates::psi_pct(prev.full, p.full, uptime_cs - up),
                        ),
                        _ => (None, None),
                    };
                    out.psi = Some((p, some_pct, full_pct));
                    self.prev_psi = Some((p, uptime_cs));
                }
                Err(e) => errors.count(PRESSURE, &SourceError::parse(&path, e)),
            },
            Ok(false) => {}
            Err(e) => errors.count(PRESSURE, &e),
        }
        let path = root.proc("meminfo");
        match read_into(&path, &mut buf) {
            Ok(true) => match meminfo::parse(&buf) {
                Ok(m) => out.mem = Some(m),
                Err(e) => errors.count(MEMINFO, &SourceError::parse(&path, e)),
            },
            Ok(false) => {}
            Err(e) => errors.count(MEMINFO, &e),
        }
        self.buf = buf;
        out
    }
}

impl Collector for HostCollector {
    fn sources(&self) -> &'static [&'static str] {
        &[STAT, PRESSURE, MEMINFO]
    }

    fn sample(&mut self, cx: &mut SampleCx<'_>) {
        // Until there is a CPU baseline, every sample tries to take one (with PSI's), so that
        // the first report has shares.
        if self.prev_cpu.is_none() {
            self.read(cx.root, cx.uptime_cs, cx.errors);
        }
    }

    fn report(&mut self, w: &mut LineWriter, cx: &mut ReportCx<'_>) {
        let ts = cx.ts_ns;
        let r = self.read(cx.root, cx.uptime_cs, cx.errors);
        if let Some((p, cpus)) = r.cpu {
            w.line("cpu", ts)
                .field("user_pct", r3(p.user_pct))
                .field("nice_pct", r3(p.nice_pct))
                .field("system_pct", r3(p.system_pct))
                .field("iowait_pct", r3(p.iowait_pct))
                .field("steal_pct", r3(p.steal_pct))
                .field("idle_pct", r3(p.idle_pct))
                .field("cpus", cpus)
                .write();
        }
        if let Some((p, some_pct, full_pct)) = r.psi {
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
        }
        if let Some(m) = r.mem {
            w.line("mem", ts)
                .field_opt("dirty_kb", m.dirty_kb)
                .field_opt("writeback_kb", m.writeback_kb)
                .field_opt("total_kb", m.total_kb)
                .field_opt("available_kb", m.available_kb)
                .field_opt("cached_kb", m.cached_kb)
                .write();
        }
    }
}
