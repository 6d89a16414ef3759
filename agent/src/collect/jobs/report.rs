//! The `job`, `job_io` and `jobs` lines of a report, and what `top` shows of the jobs: from
//! the interval each tracked job's readings closed.

use std::collections::BTreeMap;
use std::sync::Arc;

use storwatch_wire::lp::{FieldKey, FieldText, LineWriter, SeriesKey};

use super::{JobNow, JobsCollector, JobsNow, Pending, TOP_JOBS};
use crate::health::jobs::{self as model, CoresFrom, JobInterval, NodeFigures, Presence};
use crate::root::Root;

impl JobsCollector {
    pub(super) fn live_of(&self, p: &Pending) -> JobsNow {
        let computed;
        let node = match &p.node {
            Some(n) => n,
            None => {
                computed = self.node(p);
                &computed
            }
        };
        let mut top: Vec<JobNow> = Vec::new();
        for i in &node.ranked {
            let Some(d) = p.done.get(*i) else { continue };
            let Some(t) = self.jobs.get(&*d.root) else {
                continue;
            };
            let (rb, wb, _, _) = io_sums(&d.iv);
            top.push(JobNow {
                batch: t.system.as_str(),
                job: t.job.clone(),
                label: t
                    .slot
                    .clone()
                    .unwrap_or_else(|| t.job.rsplit('/').next().unwrap_or(&t.job).to_owned()),
                io_some_pct: d.iv.io_pressure.some.map(|s| s * 100.0),
                cpu_efficiency_pct: d.iv.efficiency.map(|e| e * 100.0),
                cores: d.iv.cores.map(|c| c.cores),
                read_bytes_per_s: rb,
                write_bytes_per_s: wb,
                memory_current_bytes: d.iv.memory_current,
            });
        }
        JobsNow {
            count: p.count,
            cpu_efficiency_pct: node.efficiency.map(|e| e * 100.0),
            io_stall_pct: node.io_some.map(|s| s * 100.0),
            stalled: node.stalled,
            stall_threshold_pct: self.cfg.stall_threshold_pct,
            top,
        }
    }

    /// The node's figures over the jobs of `p` ([`model::node_figures`]).
    pub(super) fn node(&self, p: &Pending) -> NodeFigures {
        model::node_figures(
            p.done.iter().map(|d| &d.iv),
            p.dropped_capacity_usec,
            p.parents_cpu_usec,
            p.interval_usec,
            self.cfg.stall_threshold_pct,
            TOP_JOBS,
        )
    }

    /// Writes the lines of the pending reading.
    pub(super) fn write(&mut self, w: &mut LineWriter, root: &Root, ts: i64) {
        let mut p = std::mem::take(&mut self.pending);
        if !p.fresh {
            self.pending = p;
            return;
        }
        let node = p.node.take().unwrap_or_else(|| self.node(&p));
        // The intervals of the jobs present are in the map's order, one a job (the reading
        // walks the map in order), and hold its key: each is the next job of one pass over the
        // map with that key, told by pointer, not a lookup by path a job.
        let mut jobs = self.jobs.iter_mut();
        for d in &p.done {
            if d.iv.presence == Presence::Vanished {
                continue; // the series ends with its job
            }
            let Some(t) = jobs
                .by_ref()
                .find_map(|(k, t)| Arc::ptr_eq(k, &d.root).then_some(t))
            else {
                debug_assert!(false, "an interval out of the jobs' order: {}", d.root);
                break;
            };
            let age = t
                .absent_at
                .and_then(|a| self.last_at.map(|now| now.saturating_sub(a) as f64 / 1e6));
            let iv = &d.iv;
            let (rb, wb, ro, wo) = io_sums(iv);
            // Rounded to 3 decimals (`crate::collect::r3`) by the writer, as it writes them.
            let pct = |v: Option<f64>| v.map(|v| v * 100.0);
            let mut l = w.fields_of(&t.job_key, ts);
            l.r3_opt(K_CPU_EFFICIENCY_PCT, pct(iv.efficiency));
            if let Some(c) = iv.cores {
                l.r3(K_CORES, c.cores);
                l.text(cores_from(c.from));
            }
            l.r3_opt(K_CPU_S, iv.cpu_usec.map(|u| u as f64 / 1e6));
            l.r3(K_INTERVAL_S, iv.wall_usec as f64 / 1e6);
            l.r3_opt(K_IO_SOME_PCT, pct(iv.io_pressure.some));
            l.r3_opt(K_IO_FULL_PCT, pct(iv.io_pressure.full));
            l.r3_opt(K_CPU_SOME_PCT, pct(iv.cpu_pressure.some));
            l.r3_opt(K_MEMORY_SOME_PCT, pct(iv.memory_pressure.some));
            l.r3_opt(K_MEMORY_FULL_PCT, pct(iv.memory_pressure.full));
            l.u64_opt(K_MEMORY_CURRENT_BYTES, iv.memory_current);
            l.u64_opt(K_MEMORY_PEAK_BYTES, iv.memory_peak);
            if !iv.io.is_empty() {
                l.r3(K_READ_BYTES_PER_S, rb);
                l.r3(K_WRITE_BYTES_PER_S, wb);
                l.r3(K_READ_OPS_PER_S, ro);
                l.r3(K_WRITE_OPS_PER_S, wo);
            }
            l.r3_opt(K_AGE_S, age);
            l.write();
            for dev in &iv.io {
                let v = |x: Option<f64>| x.unwrap_or(0.0);
                if v(dev.read_bytes_per_s)
                    + v(dev.write_bytes_per_s)
                    + v(dev.reads_per_s)
                    + v(dev.writes_per_s)
                    <= 0.0
                {
                    continue;
                }
                let dev_id = (dev.major, dev.minor);
                let key = match t.io_keys.iter().position(|(id, _)| *id == dev_id) {
                    Some(i) => i,
                    None => {
                        let name = device_name(&mut self.devices, root, dev.major, dev.minor);
                        let key = SeriesKey::new(
                            "job_io",
                            &[
                                ("batch", t.system.as_str()),
                                ("job", &t.job),
                                ("device", name),
                            ],
                        );
                        t.io_keys.push((dev_id, key));
                        t.io_keys.len() - 1
                    }
                };
                let Some((_, key)) = t.io_keys.get(key) else {
                    continue;
                };
                let mut l = w.fields_of(key, ts);
                l.r3_opt(K_READ_BYTES_PER_S, dev.read_bytes_per_s);
                l.r3_opt(K_WRITE_BYTES_PER_S, dev.write_bytes_per_s);
                l.r3_opt(K_READ_OPS_PER_S, dev.reads_per_s);
                l.r3_opt(K_WRITE_OPS_PER_S, dev.writes_per_s);
                l.write();
            }
        }
        // Their rate vectors, for the next reading's intervals.
        self.spare_rates.extend(
            std::mem::take(&mut p.done)
                .into_iter()
                .map(|d| d.iv.io)
                .filter(|v| v.capacity() > 0),
        );
        if !self.worker {
            return;
        }
        w.line("jobs", ts)
            .field("count", p.count as u64)
            .field("started", p.started as u64)
            .field("ended", p.ended as u64)
            .field("dropped", p.dropped as u64)
            .field_opt("cpu_efficiency_pct", node.efficiency.map(|e| r3(e * 100.0)))
            .field_opt("io_stall_pct", node.io_some.map(|s| r3(s * 100.0)))
            .field_opt("io_full_pct", node.io_full.map(|s| r3(s * 100.0)))
            .field("stalled", node.stalled as u64)
            .field("cpu_s", r3(node.cpu_usec as f64 / 1e6))
            .write();
    }
}

// The keys of the `job` and `job_io` fields (`docs/metrics-jobs.md`), checked when compiled:
// written without a check per field.
const K_CPU_EFFICIENCY_PCT: FieldKey = FieldKey::new("cpu_efficiency_pct");
const K_CORES: FieldKey = FieldKey::new("cores");
const K_CPU_S: FieldKey = FieldKey::new("cpu_s");
const K_INTERVAL_S: FieldKey = FieldKey::new("interval_s");
const K_IO_SOME_PCT: FieldKey = FieldKey::new("io_some_pct");
const K_IO_FULL_PCT: FieldKey = FieldKey::new("io_full_pct");
const K_CPU_SOME_PCT: FieldKey = FieldKey::new("cpu_some_pct");
const K_MEMORY_SOME_PCT: FieldKey = FieldKey::new("memory_some_pct");
const K_MEMORY_FULL_PCT: FieldKey = FieldKey::new("memory_full_pct");
const K_MEMORY_CURRENT_BYTES: FieldKey = FieldKey::new("memory_current_bytes");
const K_MEMORY_PEAK_BYTES: FieldKey = FieldKey::new("memory_peak_bytes");
const K_READ_BYTES_PER_S: FieldKey = FieldKey::new("read_bytes_per_s");
const K_WRITE_BYTES_PER_S: FieldKey = FieldKey::new("write_bytes_per_s");
const K_READ_OPS_PER_S: FieldKey = FieldKey::new("read_ops_per_s");
const K_WRITE_OPS_PER_S: FieldKey = FieldKey::new("write_ops_per_s");
const K_AGE_S: FieldKey = FieldKey::new("age_s");

/// The device name of `major:minor`: the kernel name `/sys/dev/block` links to, looked up once.
fn device_name<'a>(
    devices: &'a mut BTreeMap<(u32, u32), String>,
    root: &Root,
    major: u32,
    minor: u32,
) -> &'a str {
    devices.entry((major, minor)).or_insert_with(|| {
        let link = root.sys(&format!("dev/block/{major}:{minor}"));
        std::fs::read_link(&link)
            .ok()
            .and_then(|t| t.file_name().and_then(|n| n.to_str()).map(str::to_owned))
            .unwrap_or_else(|| format!("{major}:{minor}"))
    })
}

/// [`crate::collect::r3`] (rounded to 3 decimals, halves away from zero), the same values, with the
/// rounding made on the integer part: `f64::round` is a library call on the baseline x86-64
/// target (no SSE4.1). The `job` and `job_io` lines' values are rounded by the writer
/// (`field_key_r3`, the same rounding); this serves the `jobs` line.
pub(super) fn r3(v: f64) -> f64 {
    let t = v * 1000.0;
    // From 2^52 on a double is a whole number already (and NaN, the infinities fail this).
    if t.abs().partial_cmp(&4_503_599_627_370_496.0) != Some(std::cmp::Ordering::Less) {
        return crate::collect::r3(v);
    }
    // Exact: the cast truncates a number below 2^52, and `t - whole` is representable.
    let whole = t as i64;
    let rest = t - whole as f64;
    let m = whole + i64::from(rest >= 0.5) - i64::from(rest <= -0.5);
    // `round` keeps the sign of a zero (-0.3 rounds to -0).
    let rounded = if m == 0 { 0.0f64.copysign(t) } else { m as f64 };
    rounded / 1000.0
}

/// Bytes and operations per second, read and written, summed over the devices.
pub(super) fn io_sums(iv: &JobInterval) -> (f64, f64, f64, f64) {
    let mut s = (0.0, 0.0, 0.0, 0.0);
    for d in &iv.io {
        s.0 += d.read_bytes_per_s.unwrap_or(0.0);
        s.1 += d.write_bytes_per_s.unwrap_or(0.0);
        s.2 += d.reads_per_s.unwrap_or(0.0);
        s.3 += d.writes_per_s.unwrap_or(0.0);
    }
    s
}

/// The `cores_from` field of each source of a job's cores, written as one constant.
fn cores_from(f: CoresFrom) -> &'static FieldText {
    const CPU_MAX: FieldText = FieldText::new("cores_from", "cpu_max");
    const CPUSET: FieldText = FieldText::new("cores_from", "cpuset");
    const CPU_WEIGHT: FieldText = FieldText::new("cores_from", "cpu_weight");
    match f {
        CoresFrom::CpuMax => &CPU_MAX,
        CoresFrom::Cpuset => &CPUSET,
        CoresFrom::HtcondorCpuWeight => &CPU_WEIGHT,
    }
}
