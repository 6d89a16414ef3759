//! The agent's own cost: CPU time (thread and process) and resident memory.
//!
//! These read the real kernel (`/proc/self`), never the configured root: a fixture tree describes
//! the monitored host, not this process.

use std::time::Duration;

fn clock(id: libc::clockid_t) -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec and `id` one of the CPU-time clocks Linux always
    // provides; clock_gettime writes nothing else.
    #[allow(unsafe_code)]
    let rc = unsafe { libc::clock_gettime(id, &mut ts) };
    if rc != 0 {
        return Duration::ZERO;
    }
    Duration::new(
        u64::try_from(ts.tv_sec).unwrap_or(0),
        u32::try_from(ts.tv_nsec).unwrap_or(0),
    )
}

/// CPU time consumed by the calling thread (ns resolution, unlike getrusage's ticks).
pub fn thread_cpu() -> Duration {
    clock(libc::CLOCK_THREAD_CPUTIME_ID)
}

/// CPU time consumed by the whole process, all threads (sink and command threads included).
pub fn process_cpu() -> Duration {
    clock(libc::CLOCK_PROCESS_CPUTIME_ID)
}

/// Resident set size in KiB: `VmRSS` of `/proc/self/status` (already in kB, whatever the page
/// size).
pub fn rss_kb() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = text.lines().find(|l| l.starts_with("VmRSS:"))?;
    line.split_ascii_whitespace().nth(1)?.parse().ok()
}

/// This machine's host name (from the real kernel), for the default `host` tag.
pub fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "localhost".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clocks_advance_and_rss_is_known() {
        let a = thread_cpu();
        let mut x = 0u64;
        for i in 0..2_000_000u64 {
            x = x.wrapping_add(i * i);
        }
        assert!(x > 0);
        assert!(thread_cpu() > a);
        assert!(process_cpu() >= thread_cpu());
        assert!(rss_kb().is_some_and(|k| k > 0));
        assert!(!hostname().is_empty());
    }
}
