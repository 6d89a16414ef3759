//! `/proc/stat`: the aggregate `cpu` line (jiffies in user, nice, system, idle, iowait, irq,
//! softirq, steal, guest, guest_nice) and the number of `cpuN` lines.
//!
//! Kernel documentation: `Documentation/filesystems/proc.rst` ("1.8 Miscellaneous kernel
//! statistics in /proc/stat"). Units are USER_HZ ticks (1/100 s on every common architecture).
//! The line grew over time: 4 values before 2.5.41, iowait/irq/softirq in 2.5.41 (7), steal in
//! 2.6.11 (8), guest in 2.6.24 (9), guest_nice in 2.6.33 (10). Missing values are 0; values past
//! the 10th (none yet) are ignored if numeric.

use super::{fields, parse_u64, ParseError};

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

/// Values the oldest kernels print on the `cpu` line.
const MIN_CPU_VALUES: usize = 4;

/// Parses the numbers after `cpu`.
fn cpu_times(line: &str, line_no: usize) -> Result<CpuTimes, ParseError> {
    let mut v = [0u64; 10];
    let mut count = 0usize;
    for (i, field) in fields(line).skip(1).enumerate() {
        let n = parse_u64(field).ok_or_else(|| {
            let why = if field.bytes().all(|b| b.is_ascii_digit()) {
                "does not fit in 64 bits"
            } else {
                "is not an unsigned integer"
            };
            ParseError::new(
                line_no,
                line,
                format_args!("value {} ({field:?}) {why}", i + 1),
            )
        })?;
        if let Some(slot) = v.get_mut(i) {
            *slot = n;
        }
        count = i + 1;
    }
    if count < MIN_CPU_VALUES {
        return Err(ParseError::new(
            line_no,
            line,
            format_args!("{count} values on the cpu line; expected at least {MIN_CPU_VALUES}"),
        ));
    }
    let [user, nice, system, idle, iowait, irq, softirq, steal, guest, guest_nice] = v;
    Ok(CpuTimes {
        user,
        nice,
        system,
        idle,
        iowait,
        irq,
        softirq,
        steal,
        guest,
        guest_nice,
    })
}

/// Parses `/proc/stat`; an error when there is no well-formed `cpu` line.
///
/// Only the aggregate line is checked: the per-CPU lines are counted, not parsed, and the other
/// lines (`intr`, `ctxt`, …) are not the agent's business.
pub fn parse(text: &str) -> Result<Stat, ParseError> {
    let mut cpu = None;
    let mut cpus = 0u32;
    for (i, line) in text.lines().enumerate() {
        let Some(key) = fields(line).next() else {
            continue;
        };
        if key == "cpu" {
            if cpu.is_some() {
                return Err(ParseError::new(i + 1, line, "second aggregate cpu line"));
            }
            cpu = Some(cpu_times(line, i + 1)?);
        } else if key
            .strip_prefix("cpu")
            .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
        {
            cpus = cpus.saturating_add(1);
        }
    }
    let cpu =
        cpu.ok_or_else(|| ParseError::new(1, text.lines().next().unwrap_or(""), "no cpu line"))?;
    Ok(Stat { cpu, cpus })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn snapshot_real_fixtures() {
        insta::glob!("../../fixtures/stat", "*.txt", |path| {
            let text = std::fs::read_to_string(path).expect("fixture is readable");
            insta::assert_debug_snapshot!(parse(&text));
        });
    }

    #[test]
    fn ten_values_in_kernel_order() {
        let s = parse("cpu  1 2 3 4 5 6 7 8 9 10\ncpu0 1 2 3 4 5 6 7 8 9 10\ncpu1 0 0 0 0 0 0 0 0 0 0\nintr 5 1 2\n")
            .expect("valid");
        let c = s.cpu;
        assert_eq!(
            [
                c.user,
                c.nice,
                c.system,
                c.idle,
                c.iowait,
                c.irq,
                c.softirq,
                c.steal,
                c.guest,
                c.guest_nice
            ],
            [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]
        );
        assert_eq!(s.cpus, 2);
    }

    #[test]
    fn older_kernels_print_fewer_values() {
        // 2.4: user nice system idle.
        let s = parse("cpu  100 2 30 400\ncpu0 100 2 30 400\n").expect("valid");
        assert_eq!((s.cpu.idle, s.cpu.iowait, s.cpu.steal), (400, 0, 0));
        // 2.6.11 … 2.6.23: up to steal.
        let s = parse("cpu 1 2 3 4 5 6 7 8\n").expect("valid");
        assert_eq!((s.cpu.steal, s.cpu.guest, s.cpus), (8, 0, 0));
    }

    #[test]
    fn extra_numeric_values_are_ignored() {
        let s = parse("cpu 1 2 3 4 5 6 7 8 9 10 11 12\n").expect("valid");
        assert_eq!(s.cpu.guest_nice, 10);
    }

    #[test]
    fn the_cpu_line_need_not_come_first() {
        let s = parse("\nbtime 1\n\ncpu0 1 2 3 4\ncpu 1 2 3 4\n").expect("valid");
        assert_eq!((s.cpu.idle, s.cpus), (4, 1));
    }

    #[test]
    fn errors() {
        let e = parse("").expect_err("empty");
        assert_eq!(e.reason, "no cpu line");
        let e = parse("cpu0 1 2 3 4\nintr 0\n").expect_err("no aggregate");
        assert_eq!(e.reason, "no cpu line");
        let e = parse("ctxt 1\ncpu  1 2 3\n").expect_err("truncated");
        assert_eq!(
            (e.line, e.reason.as_str()),
            (2, "3 values on the cpu line; expected at least 4")
        );
        let e = parse("cpu 1 2 x 4\n").expect_err("non-numeric");
        assert_eq!(e.reason, "value 3 (\"x\") is not an unsigned integer");
        let e = parse("cpu 1 2 18446744073709551616 4\n").expect_err("overflow");
        assert_eq!(
            e.reason,
            "value 3 (\"18446744073709551616\") does not fit in 64 bits"
        );
        let e = parse("cpu 1 2 3 4\ncpu 1 2 3 4\n").expect_err("twice");
        assert_eq!(
            (e.line, e.reason.as_str()),
            (2, "second aggregate cpu line")
        );
        // `cpufreq` or `cpu_x` are not per-CPU lines.
        assert_eq!(
            parse("cpu 1 2 3 4\ncpufreq 1\ncpu_x 2\n")
                .expect("valid")
                .cpus,
            0
        );
    }

    proptest! {
        #[test]
        fn never_panics(text in "\\PC*") {
            let _ = parse(&text);
        }

        #[test]
        fn never_panics_on_cpu_lines(values in proptest::collection::vec("[0-9]{1,22}|x|-1", 0..14)) {
            let _ = parse(&format!("cpu  {}\n", values.join(" ")));
        }
    }
}
