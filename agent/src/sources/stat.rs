//! `/proc/stat`: the aggregate `cpu` line (jiffies in user, nice, system, idle, iowait, irq,
//! softirq, steal, guest, guest_nice) and the number of `cpuN` lines.

use super::ParseError;

/// The aggregate CPU times, in USER_HZ ticks. Fields a kernel does not print are 0.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CpuTimes {
    /// Time in user mode (includes guest on most kernels).
    pub user: u64,
    /// Time in user mode at low priority.
    pub nice: u64,
    /// Time in kernel mode.
    pub system: u64,
    /// Idle time.
    pub idle: u64,
    /// Idle while I/O was outstanding.
    pub iowait: u64,
    /// Servicing hard interrupts.
    pub irq: u64,
    /// Servicing soft interrupts.
    pub softirq: u64,
    /// Stolen by the hypervisor.
    pub steal: u64,
    /// Running guests (already counted in user).
    pub guest: u64,
    /// Running niced guests (already counted in nice).
    pub guest_nice: u64,
}

/// What the agent uses of `/proc/stat`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Stat {
    /// The `cpu` line.
    pub cpu: CpuTimes,
    /// Number of `cpuN` lines.
    pub cpus: u32,
}

/// Parses `/proc/stat`; an error when there is no well-formed `cpu` line.
pub fn parse(text: &str) -> Result<Stat, ParseError> {
    let _ = text;
    unimplemented!("stat::parse")
}
