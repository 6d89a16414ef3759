//! What the scheduler gave a run: the CPU of the collector and of the senders, the machine's
//! busy time, and how long the collector's threads were ready to run but waiting for a CPU
//! (`/proc/PID/task/*/schedstat`, second field). On a machine shared with other work the rate
//! is the CPU the bench gets divided by the CPU a line costs; these say which of the two moved.

use std::time::Instant;

/// One reading of the counters.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Sample {
    at: Instant,
    /// CPU seconds of the collector and of the bench (the senders).
    collector_s: f64,
    senders_s: f64,
    /// Seconds the collector's threads spent runnable but not running.
    collector_wait_s: f64,
    /// Busy and total CPU seconds of the whole machine.
    busy_s: f64,
    total_s: f64,
}

/// Reads the counters of the collector `pid` and of this process.
pub(crate) fn sample(pid: u32) -> Sample {
    let (busy_s, total_s) = machine();
    Sample {
        at: Instant::now(),
        collector_s: super::cpu_s(pid),
        senders_s: super::cpu_s(std::process::id()),
        collector_wait_s: run_queue_wait_s(pid),
        busy_s,
        total_s,
    }
}

/// The text for the report of the run between two samples.
pub(crate) fn describe(a: &Sample, b: &Sample) -> String {
    let dt = b.at.duration_since(a.at).as_secs_f64().max(1e-9);
    let cores = (b.total_s - a.total_s) / dt;
    format!(
        "cores used: collector {:.2} + senders {:.2} of the machine's {:.2} busy ({:.0} cores); \
         collector threads runnable but waiting for a CPU {:.2} cores; load average {}",
        (b.collector_s - a.collector_s) / dt,
        (b.senders_s - a.senders_s) / dt,
        (b.busy_s - a.busy_s) / dt,
        cores,
        (b.collector_wait_s - a.collector_wait_s) / dt,
        std::fs::read_to_string("/proc/loadavg")
            .unwrap_or_default()
            .split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" "),
    )
}

/// Run-queue wait of every thread of `pid`, in seconds (threads that ended are not counted).
fn run_queue_wait_s(pid: u32) -> f64 {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return 0.0;
    };
    tasks
        .flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("schedstat")).ok())
        .filter_map(|s| s.split_whitespace().nth(1)?.parse::<u64>().ok())
        .sum::<u64>() as f64
        / 1e9
}

/// Busy (all but idle and iowait) and total CPU seconds of the machine (`/proc/stat`, 100 ticks a
/// second).
fn machine() -> (f64, f64) {
    let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let v: Vec<u64> = stat
        .lines()
        .next()
        .unwrap_or("")
        .split_whitespace()
        .skip(1)
        .take(8)
        .filter_map(|x| x.parse().ok())
        .collect();
    let total: u64 = v.iter().sum();
    let idle = v.get(3).copied().unwrap_or(0) + v.get(4).copied().unwrap_or(0);
    ((total - idle) as f64 / 100.0, total as f64 / 100.0)
}
