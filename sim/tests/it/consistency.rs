//! The simulated kernel files keep the kernel's own invariants, second after second, in every
//! scenario: read back with the agent's parsers, every per-second delta must be one a real
//! kernel could produce.

#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;

use storwatch_agent::sources::{diskstats, dmmultipath, mdstat, netdev, uptime, zpool};
use storwatch_sim::scenario::{Kind, ALL};
use storwatch_sim::sim::{fleet, fleet_host_name, Sim};
use storwatch_test_support::scratch;

const WRAP: u64 = 1 << 32;

#[derive(Debug, Clone, Copy)]
struct Disk {
    r_ios: u64,
    r_sect: u64,
    r_ms: u64,
    w_ios: u64,
    w_sect: u64,
    w_ms: u64,
    in_flight: u64,
    io_ms: u64,
    queue_ms: u64,
    f_ms: u64,
    d_ms: u64,
}

fn disks(root: &Path) -> BTreeMap<String, Disk> {
    let text = fs::read_to_string(root.join("proc/diskstats")).unwrap();
    let parsed = diskstats::parse(&text);
    assert!(parsed.errors.is_empty(), "{:?}", parsed.errors);
    parsed
        .rows
        .iter()
        .map(|r| {
            (
                r.name.to_owned(),
                Disk {
                    r_ios: r.reads,
                    r_sect: r.sectors_read,
                    r_ms: r.read_ms,
                    w_ios: r.writes,
                    w_sect: r.sectors_written,
                    w_ms: r.write_ms,
                    in_flight: r.in_flight,
                    io_ms: r.io_ms,
                    queue_ms: r.queue_ms,
                    f_ms: r.flush_ms,
                    d_ms: r.discard_ms,
                },
            )
        })
        .collect()
}

/// Per-CPU jiffies (user … guest_nice) from /proc/stat.
fn cpus(root: &Path) -> Vec<u64> {
    let text = fs::read_to_string(root.join("proc/stat")).unwrap();
    text.lines()
        .filter(|l| l.starts_with("cpu") && !l.starts_with("cpu "))
        .map(|l| {
            l.split_whitespace()
                .skip(1)
                .take(8)
                .map(|v| v.parse::<u64>().unwrap())
                .sum()
        })
        .collect()
}

fn uptime_cs(root: &Path) -> u64 {
    uptime::parse(&fs::read_to_string(root.join("proc/uptime")).unwrap()).unwrap()
}

fn d32(a: u64, b: u64) -> u64 {
    (b + WRAP - a % WRAP) % WRAP
}

#[test]
fn every_scenario_keeps_the_kernels_invariants() {
    for kind in ALL {
        // in `scratch()` (tmpfs when there is one): each simulated second writes some 25 files
        // to new names and renames them over the old ones, and ext4's inode allocator then checks
        // the recently freed inodes before it hands out the next (`recently_deleted`), which made
        // these 1,000 seconds take ~26 s of system time on ext4 against ~1 s on tmpfs. What is
        // checked is the files' content, the same on either.
        let dir = scratch();
        let root = dir.path();
        let mut sim = Sim::new(root, kind, "h", 11, 30.0).unwrap();
        let mut prev = disks(root);
        let mut prev_cpu = cpus(root);
        let mut prev_up = uptime_cs(root);
        let mut prev_net_text = fs::read_to_string(root.join("proc/net/dev")).unwrap();
        for step in 0..40 {
            sim.step().unwrap();
            let ctx = format!("{} step {step}", kind.name());
            let up = uptime_cs(root);
            assert_eq!(up - prev_up, 100, "{ctx}: uptime advances 1.00 s");
            prev_up = up;
            let cpu = cpus(root);
            for (a, b) in prev_cpu.iter().zip(&cpu) {
                assert_eq!(
                    b - a,
                    100,
                    "{ctx}: a CPU's jiffies add up to 100 per second"
                );
            }
            prev_cpu = cpu;
            let cur = disks(root);
            assert_eq!(cur.len(), prev.len(), "{ctx}");
            for (name, c) in &cur {
                let p = prev[name];
                let ctx = format!("{ctx} {name}: {p:?} -> {c:?}");
                let io = d32(p.io_ms, c.io_ms);
                assert!(io <= 1000, "{ctx}: io_ms {io} in one second");
                let (r, w) = (c.r_ios - p.r_ios, c.w_ios - p.w_ios);
                let (rs, ws) = (c.r_sect - p.r_sect, c.w_sect - p.w_sect);
                // one request size per direction per second: sectors = I/Os x size
                assert!(r == 0 && rs == 0 || r > 0 && rs % r == 0, "{ctx}");
                assert!(w == 0 && ws == 0 || w > 0 && ws % w == 0, "{ctx}");
                let q = d32(p.queue_ms, c.queue_ms);
                let parts = d32(p.r_ms, c.r_ms)
                    + d32(p.w_ms, c.w_ms)
                    + d32(p.f_ms, c.f_ms)
                    + d32(p.d_ms, c.d_ms);
                assert_eq!(
                    q, parts,
                    "{ctx}: time_in_queue is the sum of the request times"
                );
                // I/O held with no completion (a multipath map queueing with no path left):
                // busy all second, requests in flight, no request time accounted until they end.
                let held = r == 0 && w == 0 && q == 0 && c.in_flight > 0;
                if held {
                    assert_eq!(io, 1000, "{ctx}: held I/O keeps the device busy");
                    continue;
                }
                assert!(
                    io <= q || q == 0 && io == 0,
                    "{ctx}: busy longer than queued"
                );
                // Little's law: requests in flight = mean queue = queue time / 1000 ms
                let little = (q as f64 / 1000.0).round() as i64;
                assert!(
                    (c.in_flight as i64 - little).abs() <= 1,
                    "{ctx}: in_flight {} vs queue {q} ms",
                    c.in_flight
                );
            }
            prev = cur;
            let net_text = fs::read_to_string(root.join("proc/net/dev")).unwrap();
            let net = netdev::parse(&net_text);
            let prev_net = netdev::parse(&prev_net_text);
            assert!(net.errors.is_empty());
            for (a, b) in prev_net.rows.iter().zip(&net.rows) {
                assert_eq!(a.iface, b.iface);
                assert!(
                    b.rx_bytes >= a.rx_bytes && b.tx_bytes >= a.tx_bytes,
                    "{ctx}"
                );
                assert!(
                    b.tx_packets >= a.tx_packets && b.rx_drop >= a.rx_drop,
                    "{ctx}"
                );
            }
            prev_net_text = net_text;
        }
        // the stand-ins print what the agent's parsers accept
        let run = |p: &str| fs::read_to_string(root.join("run").join(p)).unwrap();
        let mdtext = fs::read_to_string(root.join("proc/mdstat")).unwrap();
        mdstat::parse(&mdtext).unwrap_or_else(|e| panic!("{e:?}\n{mdtext}"));
        if matches!(
            kind,
            Kind::ZpoolResilver | Kind::ZpoolCacheFaulted | Kind::ZpoolRaidz1Resilver
        ) {
            let st = zpool::status::parse(&run("zpool-status.txt"))
                .unwrap_or_else(|e| panic!("{e:?}\n{}", run("zpool-status.txt")));
            assert_eq!(st.pools.len(), 1);
            let list = zpool::list::parse(&run("zpool-list.txt"));
            assert!(list.errors.is_empty() && list.rows.len() == 1);
        }
        if !matches!(
            kind,
            Kind::ZpoolResilver
                | Kind::ZpoolCacheFaulted
                | Kind::ZpoolRaidz1Resilver
                | Kind::MdRebuild
                | Kind::MdDegraded
                | Kind::MdStalled
                | Kind::MdCheck
                | Kind::WorkerStaging
                | Kind::HwraidRebuild
                | Kind::HwraidCacheWt
                | Kind::HwraidStalled
                | Kind::NvmeWearout
                | Kind::WorkerHtcondor
                | Kind::WorkerSlurm
                | Kind::JobsIoStarved
        ) {
            let st = dmmultipath::parse_status(&run("dmsetup-status.txt"));
            assert!(st.errors.is_empty(), "{:?}", st.errors);
            assert_eq!(st.rows.len(), 4);
            // every path the status lists is also in the table
            let paths = |t: &str| {
                t.split_whitespace()
                    .filter(|w| w.contains(':') && !w.ends_with(':'))
                    .count()
            };
            assert_eq!(
                paths(&run("dmsetup-status.txt")),
                paths(&run("dmsetup-table.txt"))
            );
            let tb = dmmultipath::parse_table(&run("dmsetup-table.txt"));
            assert!(tb.errors.is_empty(), "{:?}", tb.errors);
            assert_eq!(tb.rows.len(), 4);
        }
    }
}

#[test]
fn a_fleet_writes_one_tree_per_host_with_its_name() {
    let dir = scratch();
    let kinds = [Kind::Healthy, Kind::ReadaheadDrift];
    let mut sims = fleet(dir.path(), &kinds, 2, 5, 1.0).unwrap();
    assert_eq!(sims.len(), 4);
    for s in &mut sims {
        s.step().unwrap();
    }
    for k in kinds {
        for i in 0..2 {
            let name = fleet_host_name(k, i);
            let host = dir.path().join(&name);
            assert_eq!(
                fs::read_to_string(host.join("host")).unwrap(),
                format!("{name}\n")
            );
            let ra = fs::read_to_string(host.join("sys/block/dm-0/queue/read_ahead_kb")).unwrap();
            let want = if k == Kind::ReadaheadDrift {
                "64\n"
            } else {
                "8192\n"
            };
            assert_eq!(ra, want, "{name}");
        }
    }
    // a smaller fleet in the same place leaves no frozen hosts behind
    fleet(dir.path(), &[Kind::Healthy], 1, 5, 1.0).unwrap();
    assert!(dir.path().join("sim-healthy-01").is_dir());
    assert!(!dir.path().join("sim-healthy-02").exists());
    assert!(!dir.path().join("sim-readahead-drift-01").exists());
    let mut sims = fleet(dir.path(), &kinds, 2, 5, 1.0).unwrap();
    for s in &mut sims {
        s.step().unwrap();
    }
    // hosts of one scenario differ (own seeds), so a fleet is not one host repeated
    let a = fs::read_to_string(dir.path().join("sim-healthy-01/proc/diskstats")).unwrap();
    let b = fs::read_to_string(dir.path().join("sim-healthy-02/proc/diskstats")).unwrap();
    assert_ne!(a, b);
}

#[test]
fn the_binary_steps_and_lists() {
    let bin = env!("CARGO_BIN_EXE_storwatch-sim");
    let out = std::process::Command::new(bin)
        .arg("--list")
        .output()
        .unwrap();
    let list = String::from_utf8(out.stdout).unwrap();
    assert_eq!(list.lines().count(), ALL.len(), "{list}");
    let dir = tempfile::tempdir().unwrap();
    let st = std::process::Command::new(bin)
        .args(["--scenario", "md-rebuild", "--host", "ds17", "--steps", "3"])
        .arg("--root")
        .arg(dir.path())
        .status()
        .unwrap();
    assert!(st.success());
    assert_eq!(
        fs::read_to_string(dir.path().join("host")).unwrap(),
        "ds17\n"
    );
    let out = std::process::Command::new(dir.path().join("bin/zpool"))
        .args(["status", "-p"])
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout), "no pools available\n");
    let out = std::process::Command::new(dir.path().join("bin/zpool"))
        .args(["status", "-j", "--json-int"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "OpenZFS 2.2 refuses -j");
    let bad = std::process::Command::new(bin)
        .args(["--scenario", "no-such", "--once", "--root"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("healthy"));
}

#[test]
fn a_root_is_reused_cleanly_and_a_foreign_directory_refused() {
    let dir = scratch();
    let root = dir.path().join("h");
    Sim::new(&root, Kind::MdRebuild, "h", 1, 1.0).unwrap();
    assert!(root.join("sys/block/md0/md/sync_action").is_file());
    // the same root for another scenario: nothing of the array is left behind
    Sim::new(&root, Kind::Healthy, "h", 1, 1.0).unwrap();
    assert!(!root.join("sys/block/md0").exists());
    assert!(root.join("sys/block/dm-0/dm/name").is_file());
    let foreign = dir.path().join("foreign");
    fs::create_dir_all(&foreign).unwrap();
    fs::write(foreign.join("notes.txt"), "mine\n").unwrap();
    let err = Sim::new(&foreign, Kind::Healthy, "h", 1, 1.0)
        .err()
        .unwrap();
    assert!(
        err.to_string().contains("not written by storwatch-sim"),
        "{err}"
    );
    assert_eq!(
        fs::read_to_string(foreign.join("notes.txt")).unwrap(),
        "mine\n"
    );
}
