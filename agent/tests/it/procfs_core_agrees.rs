//! The agent's `/proc` parsers read the same numbers as the `procfs-core` crate, on every real
//! fixture and on the generated inputs of the benches (`benches/procfs_core.rs` times both).
//!
//! Where procfs-core cannot read a fixture at all, the test names it, so that the places where
//! the hand-written parsers accept more than the crate are written down rather than assumed.

use std::path::Path;

use procfs_core::net::InterfaceDeviceStatus;
use procfs_core::{DiskStat, ExplicitSystemInfo, FromBufRead, FromBufReadSI, IoPressure};
use procfs_core::{KernelStats, Meminfo};
use storwatch_agent::sources::{diskstats, meminfo, netdev, pressure, stat};

#[allow(dead_code)]
#[path = "../../benches/inputs/mod.rs"]
mod inputs;

/// `(file name, text)` of every `fixtures/<source>/*.txt`, sorted.
fn fixtures(source: &str) -> Vec<(String, String)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures")
        .join(source);
    let mut out: Vec<(String, String)> = std::fs::read_dir(&dir)
        .expect("fixture directory")
        .map(|e| e.expect("directory entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "txt"))
        .map(|p| {
            let name = p.file_name().expect("file name").to_string_lossy().into();
            (
                name,
                std::fs::read_to_string(&p).expect("fixture is readable"),
            )
        })
        .collect();
    out.sort();
    out
}

/// procfs-core reports an optional counter as `None`; the agent, as 0.
fn opt(v: Option<u64>) -> u64 {
    v.unwrap_or(0)
}

/// Compares line by line: procfs-core's `DiskStat::from_line` against the agent's row of the
/// same line. Returns the lines procfs-core rejects that the agent reads.
fn diskstats_agree(name: &str, text: &str) -> Vec<String> {
    let ours = diskstats::parse(text);
    let mut rows = ours.rows.iter();
    let mut only_ours = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() || ours.errors.iter().any(|e| e.line == i + 1) {
            continue;
        }
        let theirs = DiskStat::from_line(line);
        let row = rows.next().expect("one agent row per accepted line");
        let Ok(t) = theirs else {
            only_ours.push(format!("{name}: {line}"));
            continue;
        };
        assert_eq!(
            (i64::from(row.major), i64::from(row.minor), row.name),
            (i64::from(t.major), i64::from(t.minor), t.name.as_str()),
            "{name}: {line}"
        );
        assert_eq!(
            [
                row.reads,
                row.reads_merged,
                row.sectors_read,
                row.read_ms,
                row.writes,
                row.writes_merged,
                row.sectors_written,
                row.write_ms,
                row.in_flight,
                row.io_ms,
                row.queue_ms,
                row.discards,
                row.discards_merged,
                row.sectors_discarded,
                row.discard_ms,
                row.flushes,
                row.flush_ms,
            ],
            [
                t.reads,
                t.merged,
                t.sectors_read,
                t.time_reading,
                t.writes,
                t.writes_merged,
                t.sectors_written,
                t.time_writing,
                t.in_progress,
                t.time_in_progress,
                t.weighted_time_in_progress,
                opt(t.discards),
                opt(t.discards_merged),
                opt(t.sectors_discarded),
                opt(t.time_discarding),
                opt(t.flushes),
                opt(t.time_flushing),
            ],
            "{name}: {line}"
        );
    }
    assert!(rows.next().is_none(), "{name}: agent rows left over");
    only_ours
}

#[test]
fn diskstats_same_numbers() {
    let mut only_ours = Vec::new();
    for (name, text) in fixtures("diskstats") {
        only_ours.extend(diskstats_agree(&name, &text));
    }
    for devices in [250, 1000] {
        let text = inputs::diskstats_text(devices);
        assert_eq!(diskstats_agree("generated", &text), Vec::<String>::new());
    }
    // Partition lines of kernels before 2.6.25 carry 4 statistics (reads, sectors read, writes,
    // sectors written): procfs-core wants at least 11 and fails the whole file on them.
    assert!(!only_ours.is_empty());
    for line in &only_ours {
        let stats = line
            .split(": ")
            .nth(1)
            .map_or(0, |l| l.split_whitespace().count() - 3);
        assert_eq!(
            stats, 4,
            "procfs-core rejects a line the agent reads: {line}"
        );
    }
}

#[test]
fn netdev_same_numbers() {
    let mut rejected = Vec::new();
    let generated = ("generated".to_string(), inputs::netdev_text(16));
    for (name, text) in fixtures("netdev").into_iter().chain([generated]) {
        let ours = netdev::parse(&text);
        let theirs = match InterfaceDeviceStatus::from_buf_read(text.as_bytes()) {
            Ok(t) => t,
            Err(_) => {
                rejected.push(name);
                continue;
            }
        };
        assert_eq!(ours.rows.len(), theirs.0.len(), "{name}");
        for row in &ours.rows {
            let t = &theirs.0[row.iface];
            assert_eq!(
                [
                    row.rx_bytes,
                    row.rx_packets,
                    row.rx_errs,
                    row.rx_drop,
                    row.rx_fifo,
                    row.rx_frame,
                    row.rx_compressed,
                    row.rx_multicast,
                    row.tx_bytes,
                    row.tx_packets,
                    row.tx_errs,
                    row.tx_drop,
                    row.tx_fifo,
                    row.tx_colls,
                    row.tx_carrier,
                    row.tx_compressed,
                ],
                [
                    t.recv_bytes,
                    t.recv_packets,
                    t.recv_errs,
                    t.recv_drop,
                    t.recv_fifo,
                    t.recv_frame,
                    t.recv_compressed,
                    t.recv_multicast,
                    t.sent_bytes,
                    t.sent_packets,
                    t.sent_errs,
                    t.sent_drop,
                    t.sent_fifo,
                    t.sent_colls,
                    t.sent_carrier,
                    t.sent_compressed,
                ],
                "{name}: {}",
                row.iface
            );
        }
    }
    // Kernels before 2.6.? printed `eth0:6849280224` with no space once the byte counter was
    // 8+ digits wide: procfs-core splits on whitespace only and fails the file.
    assert_eq!(
        rejected,
        ["navajo-2006-old-kernel-glued-eth0-colon-counter-javadoc-stripped.txt"]
    );
}

#[test]
fn stat_same_numbers() {
    let system = ExplicitSystemInfo {
        boot_time_secs: 0,
        ticks_per_second: 100,
        page_size: 4096,
        is_little_endian: true,
    };
    for (name, text) in fixtures("stat") {
        let ours = stat::parse(&text).expect("fixture parses");
        let theirs = KernelStats::from_buf_read(text.as_bytes(), &system).expect(&name);
        let (c, t) = (ours.cpu, theirs.total);
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
            [
                t.user,
                t.nice,
                t.system,
                t.idle,
                opt(t.iowait),
                opt(t.irq),
                opt(t.softirq),
                opt(t.steal),
                opt(t.guest),
                opt(t.guest_nice)
            ],
            "{name}"
        );
        assert_eq!(ours.cpus as usize, theirs.cpu_time.len(), "{name}");
    }
}

#[test]
fn meminfo_same_numbers() {
    for (name, text) in fixtures("meminfo") {
        let ours = meminfo::parse(&text).expect("fixture parses");
        let theirs = Meminfo::from_buf_read(text.as_bytes()).expect(&name);
        // procfs-core converts kB to bytes.
        let kb = |bytes: u64| Some(bytes / 1024);
        assert_eq!(ours.total_kb, kb(theirs.mem_total), "{name}");
        assert_eq!(
            ours.available_kb,
            theirs.mem_available.and_then(kb),
            "{name}"
        );
        assert_eq!(ours.cached_kb, kb(theirs.cached), "{name}");
        assert_eq!(ours.dirty_kb, kb(theirs.dirty), "{name}");
        assert_eq!(ours.writeback_kb, kb(theirs.writeback), "{name}");
    }
}

#[test]
fn pressure_same_numbers() {
    let (mut rejected, mut we_reject) = (Vec::new(), Vec::new());
    for (name, text) in fixtures("pressure") {
        let Ok(ours) = pressure::parse(&text) else {
            we_reject.push(name);
            continue;
        };
        let Ok(theirs) = IoPressure::from_buf_read(text.as_bytes()) else {
            rejected.push(name);
            continue;
        };
        for (o, t) in [(ours.some, theirs.some), (ours.full, theirs.full)] {
            let o = o.expect("both lines");
            // procfs-core keeps the averages as f32; two decimals survive that.
            for (a, b) in [(o.avg10, t.avg10), (o.avg60, t.avg60), (o.avg300, t.avg300)] {
                assert!((a - f64::from(b)).abs() < 1e-4, "{name}: {a} vs {b}");
            }
            assert_eq!(o.total_us, t.total, "{name}");
        }
    }
    // procfs-core's IoPressure wants both lines; the irq file has only `full`.
    assert_eq!(rejected, ["node-exporter-irq-full-only-line.txt"]);
    // An average above 100 % (telegraf's synthetic fixture) is impossible: the agent refuses
    // the file, procfs-core takes it.
    assert_eq!(we_reject, ["telegraf-io-synthetic-round-numbers.txt"]);
    assert!(IoPressure::from_buf_read(
        fixtures("pressure")
            .iter()
            .find(|(n, _)| n == "telegraf-io-synthetic-round-numbers.txt")
            .map(|(_, t)| t.as_bytes())
            .expect("fixture")
    )
    .is_ok());
}
