//! The whole agent on a fixture root: `--proc-root`/`--sys-root` trees written by the test, two
//! snapshots whose deltas are known, and the exact line protocol that comes out.
//!
//! The disk server in these trees: `sda` (a spinning disk with partition `sda1`), `sdb` and `sdc`
//! (the two paths of multipath map `mpatha` = `dm-0`), `dm-1` (an LVM volume), `md0` (a RAID1),
//! `nvme0n1`, and NICs `eth0` (10 GbE, full duplex) and `lo`.

#![allow(clippy::unwrap_used)]

use std::fs;
use std::os::unix::fs::symlink;
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use storwatch_agent::collect::Live;
use storwatch_agent::config::Config;
use storwatch_agent::scheduler::Scheduler;
use storwatch_agent::sink::SinkStats;
use storwatch_test_support::process::signal;
use storwatch_test_support::wait::wait_for;
use storwatch_wire::lp::LineWriter;

struct Host {
    dir: PathBuf,
}

/// (major, minor, name, sysfs path under sys/block, rotational)
const DEVICES: &[(u32, u32, &str, &str)] = &[
    (8, 0, "sda", "sda"),
    (8, 1, "sda1", "sda/sda1"),
    (8, 16, "sdb", "sdb"),
    (8, 32, "sdc", "sdc"),
    (253, 0, "dm-0", "dm-0"),
    (253, 1, "dm-1", "dm-1"),
    (9, 0, "md0", "md0"),
    (259, 0, "nvme0n1", "nvme0n1"),
];

// write-then-rename, as the kernel's files appear to readers: whole or not at all
use storwatch_test_support::files::write_replacing as write;

impl Host {
    fn new(name: &str) -> Self {
        let dir =
            std::env::temp_dir().join(format!("storwatch-host-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        let h = Host { dir };
        h.write_sys();
        h
    }

    fn proc(&self) -> PathBuf {
        self.dir.join("proc")
    }

    fn sys(&self) -> PathBuf {
        self.dir.join("sys")
    }

    fn write_sys(&self) {
        let sys = self.sys();
        for (major, minor, name, path) in DEVICES {
            let d = sys.join("block").join(path);
            write(&d.join("dev"), &format!("{major}:{minor}\n"));
            write(&d.join("size"), "3907029168\n");
            if name.contains('1') && name.starts_with("sda") {
                write(&d.join("partition"), "1\n");
            } else {
                let rot = if name.starts_with("sd") { "1" } else { "0" };
                write(&d.join("queue/rotational"), &format!("{rot}\n"));
                write(&d.join("queue/read_ahead_kb"), "8192\n");
                write(&d.join("queue/scheduler"), "[mq-deadline] kyber bfq none\n");
                write(&d.join("queue/nr_requests"), "256\n");
                write(&d.join("queue/max_sectors_kb"), "1280\n");
            }
            let link = sys.join(format!("dev/block/{major}:{minor}"));
            fs::create_dir_all(link.parent().unwrap()).unwrap();
            symlink(format!("../../block/{path}"), &link).unwrap();
        }
        let dm0 = sys.join("block/dm-0");
        write(&dm0.join("dm/name"), "mpatha\n");
        write(
            &dm0.join("dm/uuid"),
            "mpath-3600a098038303053453f463045444b4f\n",
        );
        fs::create_dir_all(dm0.join("slaves")).unwrap();
        symlink("../../sdb", dm0.join("slaves/sdb")).unwrap();
        symlink("../../sdc", dm0.join("slaves/sdc")).unwrap();
        let dm1 = sys.join("block/dm-1");
        write(&dm1.join("dm/name"), "vg_data-lv_pool\n");
        write(
            &dm1.join("dm/uuid"),
            "LVM-k3nX9wq1Y8m2Zc4pQ7rT0sVbN5hJ6dF8aG1iK2lM3nO4pQ5rS6tU7vW8xY9z\n",
        );
        let eth0 = sys.join("class/net/eth0");
        write(&eth0.join("speed"), "10000\n");
        write(&eth0.join("duplex"), "full\n");
        write(&eth0.join("operstate"), "up\n");
        write(&eth0.join("mtu"), "9000\n");
        write(&eth0.join("carrier_changes"), "2\n");
        let lo = sys.join("class/net/lo");
        write(&lo.join("operstate"), "unknown\n");
        write(&lo.join("mtu"), "65536\n");
    }

    /// Writes the proc files for one instant. `t` scales every counter so that snapshot `t=1`
    /// minus `t=0` gives round per-second rates over the 1.00 s between them.
    fn write_proc(&self, uptime_cs: u64, diskstats: &str, netdev: &str, cpu: &str, psi_total: u64) {
        let p = self.proc();
        write(
            &p.join("uptime"),
            &format!("{}.{:02} 1234.56\n", uptime_cs / 100, uptime_cs % 100),
        );
        write(&p.join("diskstats"), diskstats);
        write(&p.join("net/dev"), netdev);
        write(
            &p.join("stat"),
            &format!("{cpu}\ncpu0 1 0 1 1 0 0 0 0 0 0\ncpu1 1 0 1 1 0 0 0 0 0 0\nintr 12345 0 0\nctxt 99\n"),
        );
        write(
            &p.join("meminfo"),
            "MemTotal:       263852076 kB\nMemFree:         1000000 kB\nMemAvailable:   200000000 kB\nBuffers:           12345 kB\nCached:         180000000 kB\nDirty:            524288 kB\nWriteback:         65536 kB\n",
        );
        write(
            &p.join("pressure/io"),
            &format!(
                "some avg10=12.50 avg60=8.00 avg300=2.00 total={psi_total}\nfull avg10=6.25 avg60=4.00 avg300=1.00 total={}\n",
                psi_total / 2
            ),
        );
    }

    fn snapshot_a(&self) {
        self.write_proc(
            100_000,
            "   8       0 sda 1000 100 80000 5000 2000 500 400000 20000 0 100000 300000 10 0 2048 10 50 100\n\
                8       1 sda1 900 90 72000 4500 1900 450 380000 19000 0 90000 280000 0 0 0 0 0 0\n\
                8      16 sdb 500 0 64000 2500 700 0 143360 7000 0 50000 90000 0 0 0 0 0 0\n\
                8      32 sdc 500 0 64000 2500 700 0 143360 7000 0 50000 90000 0 0 0 0 0 0\n\
              253       0 dm-0 1000 0 128000 5000 1400 0 286720 14000 0 60000 190000 0 0 0 0 0 0\n\
              253       1 dm-1 10 0 80 1 0 0 0 0 0 1 1 0 0 0 0 0 0\n\
                9       0 md0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n\
              259       0 nvme0n1 100 0 800 10 0 0 0 0 0 10 10 0 0 0 0 100 5\n\
                7       0 loop0 5 0 10 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n",
            NETDEV_A,
            "cpu  10000 0 2000 50000 1000 100 100 0 0 0",
            1_000_000,
        );
    }

    /// One second later (uptime +1.00 s): sda and dm-0 busy, eth0 at 80 % of its link.
    fn snapshot_b(&self) {
        self.write_proc(
            100_100,
            "   8       0 sda 1200 150 105600 6000 2300 800 438400 23000 0 100950 304500 11 1 3072 12 60 130\n\
                8       1 sda1 1100 140 97600 5500 2200 750 418400 22000 0 90950 284500 0 0 0 0 0 0\n\
                8      16 sdb 700 0 89600 3500 850 0 162560 8500 0 50990 94000 0 0 0 0 0 0\n\
                8      32 sdc 500 0 64000 2500 700 0 143360 7000 0 50000 90000 0 0 0 0 0 0\n\
              253       0 dm-0 1200 0 153600 6000 1550 0 305920 15500 0 61000 198000 0 0 0 0 0 0\n\
              253       1 dm-1 10 0 80 1 0 0 0 0 0 1 1 0 0 0 0 0 0\n\
                9       0 md0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n\
              259       0 nvme0n1 100 0 800 10 0 0 0 0 0 10 10 0 0 0 0 100 5\n\
                7       0 loop0 9 0 18 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n",
            NETDEV_B,
            "cpu  10040 0 2010 50100 1040 5 5 0 0 0",
            1_125_000,
        );
    }
}

impl Drop for Host {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.dir);
    }
}

const NETDEV_A: &str = "Inter-|   Receive                                                |  Transmit\n face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed\n    lo:  500000    5000    0    0    0     0          0         0   500000    5000    0    0    0     0       0          0\n  eth0: 2000000000 1500000    0    0    0     0          0       100 1000000000  800000    0    0    0     0       0          0\n";
const NETDEV_B: &str = "Inter-|   Receive                                                |  Transmit\n face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed\n    lo:  510000    5100    0    0    0     0          0         0   510000    5100    0    0    0     0       0          0\n  eth0: 3000000000 2200000    3   12    0     0          0       150 1500000000 1100000    0    0    0     0       0          0\n";

fn config(h: &Host) -> Config {
    Config {
        proc_root: h.proc(),
        sys_root: h.sys(),
        ..Config::default()
    }
}

fn report_text(s: &mut Scheduler) -> String {
    report_text_at(s, 1.0)
}

/// A report made `now_s` seconds after the agent started.
fn report_text_at(s: &mut Scheduler, now_s: f64) -> String {
    let mut w = LineWriter::new("ds01.example", &[("site".into(), "T2_EX".into())]);
    s.report(
        &mut w,
        1_700_000_010_000_000_000,
        now_s,
        SinkStats::default(),
    );
    String::from_utf8(w.take()).unwrap()
}

/// The agent line carries this process's own CPU time and memory: not reproducible.
fn without_agent_lines(text: &str) -> String {
    text.lines()
        .filter(|l| !l.starts_with("agent,"))
        .map(|l| format!("{l}\n"))
        .collect()
}

fn line<'a>(text: &'a str, prefix: &str) -> &'a str {
    text.lines()
        .find(|l| l.starts_with(prefix))
        .unwrap_or_else(|| panic!("no line starting {prefix:?} in\n{text}"))
}

fn field(line: &str, key: &str) -> String {
    let fields = line.split(' ').nth(1).unwrap();
    fields
        .split(',')
        .find_map(|kv| kv.strip_prefix(&format!("{key}=")))
        .unwrap_or_else(|| panic!("no field {key} in {line}"))
        .to_owned()
}

#[test]
fn report_from_two_snapshots_is_exact() {
    let h = Host::new("exact");
    h.snapshot_a();
    let mut s = Scheduler::new(&config(&h), Vec::new());
    s.sample(0.0);
    h.snapshot_b();
    s.sample(1.0);
    let text = report_text(&mut s);
    insta::assert_snapshot!(without_agent_lines(&text));

    // sda over 1.00 s: Δreads 200, Δsectors_read 25600 (12800 kB), Δread_ms 1000,
    // Δwrites 300, Δwrites_merged 300, Δsectors 38400, Δwrite_ms 3000, Δio_ms 950, Δqueue 4500
    let sda = line(&text, "disk,host=ds01.example,site=T2_EX,device=sda,");
    assert!(sda.contains(",name=sda,kind=disk,rotational=1 "), "{sda}");
    assert_eq!(field(sda, "r_per_s"), "200");
    assert_eq!(field(sda, "rkb_per_s"), "12800");
    assert_eq!(field(sda, "w_per_s"), "300");
    assert_eq!(field(sda, "wrqm_pct"), "50");
    assert_eq!(field(sda, "r_await_ms"), "5");
    assert_eq!(field(sda, "w_await_ms"), "10");
    assert_eq!(field(sda, "aqu_sz"), "4.5");
    assert_eq!(field(sda, "util_pct"), "95");
    assert_eq!(field(sda, "util_max_pct"), "95");
    assert_eq!(field(sda, "saturated_s"), "1");
    assert_eq!(field(sda, "f_per_s"), "10");
    assert_eq!(field(sda, "f_await_ms"), "3");
    // the multipath map is named and kinded; its idle path is idle; the LVM volume is lvm
    let dm0 = line(&text, "disk,host=ds01.example,site=T2_EX,device=dm-0,");
    assert!(dm0.contains(",name=mpatha,kind=mpath,"), "{dm0}");
    assert_eq!(field(dm0, "util_pct"), "100");
    assert!(
        line(&text, "disk,host=ds01.example,site=T2_EX,device=dm-1,")
            .contains(",name=vg_data-lv_pool,kind=lvm,")
    );
    assert!(line(&text, "disk,host=ds01.example,site=T2_EX,device=sda1,").contains(",kind=part,"));
    assert!(line(&text, "disk,host=ds01.example,site=T2_EX,device=md0,").contains(",kind=md,"));
    assert!(
        line(&text, "disk,host=ds01.example,site=T2_EX,device=nvme0n1,").contains(",kind=nvme,")
    );
    assert!(
        !text.contains("device=loop0"),
        "loop devices are excluded by default"
    );
    // eth0: 1e9 B/s in, 5e8 out on a 10 Gb/s full-duplex link = 80 %
    let eth0 = line(&text, "net,host=ds01.example,site=T2_EX,iface=eth0 ");
    assert_eq!(field(eth0, "rx_bytes_per_s"), "1000000000");
    assert_eq!(field(eth0, "rx_packets_per_s"), "700000");
    assert_eq!(field(eth0, "util_pct"), "80");
    assert_eq!(field(eth0, "rx_drops_per_s"), "12");
    assert_eq!(field(eth0, "speed_mbps"), "10000i");
    // CPU: Δ user 40, system 10, idle 100, iowait 40, irq+softirq −190 … a backwards irq counter
    // yields no CPU line rather than a negative share.
    assert!(!text.contains("\ncpu,"), "{text}");
    // PSI: Δ some total 125000 µs over 1 s = 12.5 %
    let psi = line(&text, "pressure,");
    assert_eq!(field(psi, "io_some_pct"), "12.5");
    assert_eq!(field(psi, "io_full_pct"), "6.25");
    let mem = line(&text, "mem,");
    assert_eq!(field(mem, "dirty_kb"), "524288i");
    // tunables of whole devices, not of partitions
    assert!(line(
        &text,
        "disk_tunables,host=ds01.example,site=T2_EX,device=sda,"
    )
    .contains("scheduler=\"mq-deadline\""));
    assert!(!text.contains("disk_tunables,host=ds01.example,site=T2_EX,device=sda1,"));
}

/// The `disk_tunables` line of sda.
const SDA_TUNABLES: &str = "disk_tunables,host=ds01.example,site=T2_EX,device=sda,";

/// A host after its first sample, with `tunables_interval` set to `interval_s` seconds, and its
/// first report (at 1 s), which carries sda's tunables.
fn tunables_host(name: &str, interval_s: u64) -> (Host, Scheduler) {
    let h = Host::new(name);
    h.snapshot_a();
    let mut cfg = config(&h);
    cfg.tunables_interval = std::time::Duration::from_secs(interval_s);
    let mut s = Scheduler::new(&cfg, Vec::new());
    s.sample(0.0);
    let first = report_text_at(&mut s, 1.0);
    assert!(
        line(&first, SDA_TUNABLES).contains("changed=false"),
        "{first}"
    );
    (h, s)
}

/// Tunables are read every five minutes (or every `tunables_interval` when shorter) and written
/// when they change and every `tunables_interval` (300 s by default): a quiet check does not make
/// the next report read them again.
#[test]
fn tunables_are_checked_every_five_minutes_and_written_when_changed() {
    let (h, mut s) = tunables_host("tunables", 300);
    let sda = SDA_TUNABLES;
    // not due yet
    assert!(!report_text_at(&mut s, 61.0).contains(sda));
    // changed after a check: seen at the next check, five minutes after the last one
    write(
        &h.sys().join("block/sda/queue/scheduler"),
        "mq-deadline kyber bfq [none]\n",
    );
    assert!(!report_text_at(&mut s, 121.0).contains(sda));
    assert!(!report_text_at(&mut s, 291.0).contains(sda));
    let seen = report_text_at(&mut s, 301.0);
    let changed = line(&seen, sda);
    assert!(changed.contains("scheduler=\"none\""), "{changed}");
    assert!(changed.contains("changed=true"), "{changed}");
    // written again after tunables_interval even when nothing changed
    assert!(!report_text_at(&mut s, 361.0).contains(sda));
    assert!(line(&report_text_at(&mut s, 601.0), sda).contains("changed=false"));
    // reports a few milliseconds early still find the check due
    assert!(line(&report_text_at(&mut s, 900.996), sda).contains("changed=false"));
    write(
        &h.sys().join("block/sda/queue/scheduler"),
        "[mq-deadline] kyber bfq none\n",
    );
    assert!(!report_text_at(&mut s, 1190.995).contains(sda));
    assert!(line(&report_text_at(&mut s, 1200.992), sda).contains("changed=true"));
}

/// The check is timed from the last reading, not from the last line: with lines due only every
/// hour, a quiet check at five minutes does not make every later report read them again (which
/// once cost 5,000 system calls a report on a 250-disk server).
#[test]
fn a_quiet_check_is_not_repeated_at_the_next_report() {
    let (h, mut s) = tunables_host("tunables-hourly", 3600);
    let sda = SDA_TUNABLES;
    assert!(
        !report_text_at(&mut s, 301.0).contains(sda),
        "a quiet check"
    );
    write(
        &h.sys().join("block/sda/queue/scheduler"),
        "mq-deadline kyber bfq [none]\n",
    );
    // due from the last line (300 s ago) it would be read, and written, here
    assert!(!report_text_at(&mut s, 311.0).contains(sda));
    assert!(!report_text_at(&mut s, 591.0).contains(sda));
    let seen = report_text_at(&mut s, 601.0);
    assert!(line(&seen, sda).contains("changed=true"), "{seen}");
}

/// A site that wants tunables sooner shortens `tunables_interval`: they are then read (and
/// written) that often.
#[test]
fn a_shorter_tunables_interval_reads_them_as_often() {
    let (h, mut s) = tunables_host("tunables-minute", 60);
    let sda = SDA_TUNABLES;
    write(&h.sys().join("block/sda/queue/read_ahead_kb"), "4096\n");
    assert!(!report_text_at(&mut s, 31.0).contains(sda));
    let seen = report_text_at(&mut s, 61.0);
    assert!(line(&seen, sda).contains("read_ahead_kb=4096i"), "{seen}");
    assert!(line(&seen, sda).contains("changed=true"), "{seen}");
}

#[test]
fn top_rows_and_counts_come_from_the_collectors() {
    let h = Host::new("live");
    h.snapshot_a();
    let mut s = Scheduler::new(&config(&h), Vec::new());
    let mut live = Live::default();
    s.sample(0.0);
    s.live(&mut live);
    assert!(live.disks.is_empty(), "no rate before the second sample");
    h.snapshot_b();
    s.sample(1.0);
    s.live(&mut live);
    let sda = live.disks.iter().find(|d| d.device == "sda").unwrap();
    assert_eq!(sda.rates.r_per_s, 200.0);
    assert_eq!(sda.rates.util_pct, 95.0);
    let dm0 = live.disks.iter().find(|d| d.device == "dm-0").unwrap();
    assert_eq!(dm0.name, "mpatha");
    assert_eq!(live.disks.len(), 8, "loop0 is excluded");
    let eth0 = live.nets.iter().find(|n| n.iface == "eth0").unwrap();
    assert_eq!(eth0.speed_mbps, Some(10_000));
    assert_eq!(eth0.rates.util_pct, Some(80.0));
    assert_eq!(live.nets.len(), 2);
    // the same collectors count what they track on the agent line
    let text = report_text(&mut s);
    let agent = line(&text, "agent,");
    assert_eq!(field(agent, "devices"), "8i");
    assert_eq!(field(agent, "interfaces"), "2i");
    // a report starts a new interval, not a new sample: top still shows the last second
    s.live(&mut live);
    assert_eq!(live.disks.len(), 8);
}

#[test]
fn a_malformed_line_costs_only_that_device() {
    let h = Host::new("malformed");
    h.snapshot_a();
    let mut s = Scheduler::new(&config(&h), Vec::new());
    s.sample(0.0);
    h.snapshot_b();
    let p = h.proc().join("diskstats");
    let good = fs::read_to_string(&p).unwrap();
    let broken = good.replace("8      16 sdb 700 0 89600", "8      16 sdb 7x0 0 89600");
    write(&p, &broken);
    s.sample(1.0);
    let text = report_text(&mut s);
    assert!(
        !text.contains("device=sdb,"),
        "the broken row is not reported"
    );
    assert!(text.contains("device=sda,"), "the others are");
    let src = line(
        &text,
        "agent_source,host=ds01.example,site=T2_EX,source=diskstats ",
    );
    assert_eq!(field(src, "errors"), "1i");
    let agent = line(&text, "agent,");
    assert_eq!(field(agent, "source_errors"), "1i");
}

/// The kernel keeps /proc/diskstats in a stable order and the collector walks it in step; rows
/// that come in another order (a device removed and added back) still find their own device.
#[test]
fn rows_in_another_order_keep_each_device_its_own_counters() {
    let disk_lines = |text: &str| -> Vec<String> {
        let mut v: Vec<String> = text
            .lines()
            .filter(|l| l.starts_with("disk,"))
            .map(str::to_owned)
            .collect();
        v.sort();
        v
    };
    let run = |name: &str, reorder: bool| {
        let h = Host::new(name);
        h.snapshot_a();
        let mut s = Scheduler::new(&config(&h), Vec::new());
        s.sample(0.0);
        h.snapshot_b();
        if reorder {
            let p = h.proc().join("diskstats");
            let b = fs::read_to_string(&p).unwrap();
            let mut rows: Vec<&str> = b.lines().collect();
            rows.reverse();
            rows.rotate_left(2);
            write(&p, &(rows.join("\n") + "\n"));
        }
        s.sample(1.0);
        disk_lines(&report_text(&mut s))
    };
    let in_order = run("order-same", false);
    assert!(in_order.len() >= 6, "{in_order:?}");
    assert_eq!(run("order-shuffled", true), in_order);
}

#[test]
fn devices_that_vanish_or_appear_and_counters_that_reset() {
    let h = Host::new("churn");
    h.snapshot_a();
    let mut s = Scheduler::new(&config(&h), Vec::new());
    s.sample(0.0);
    h.snapshot_b();
    // sdc vanishes, sdd appears, sda's counters reset (device replaced: all counters restart)
    let p = h.proc().join("diskstats");
    let b = fs::read_to_string(&p).unwrap();
    let churned: String = b
        .lines()
        .filter(|l| !l.contains(" sdc "))
        .map(|l| {
            if l.contains(" sda ") {
                "   8       0 sda 5 0 40 1 0 0 0 0 0 1 1 0 0 0 0 0 0".to_owned()
            } else {
                l.to_owned()
            }
        })
        .chain(std::iter::once(
            "   8      48 sdd 1 0 8 0 0 0 0 0 0 0 0 0 0 0 0 0 0".to_owned(),
        ))
        .map(|l| l + "\n")
        .collect();
    write(&p, &churned);
    s.sample(1.0);
    let text = report_text(&mut s);
    assert!(
        !text.contains("device=sdc,"),
        "vanished device not reported"
    );
    assert!(
        !text.contains("device=sdd,"),
        "a new device has no rate before its second sample"
    );
    assert!(
        !text.contains("disk,host=ds01.example,site=T2_EX,device=sda,"),
        "no rate across a reset"
    );
    assert!(text.contains("device=sdb,"));
    // next second: sda and sdd rate again from their new baselines, and the reset is counted
    // in the interval where it happened (already reported), not carried over.
    let later: String = churned
        .replace(
            " sda 5 0 40 1 0 0 0 0 0 1 1",
            " sda 105 0 840 101 0 0 0 0 0 501 501",
        )
        .replace(" sdd 1 0 8 0", " sdd 11 0 88 5")
        .to_owned();
    h.write_proc(
        100_200,
        &later,
        NETDEV_B,
        "cpu  10080 0 2020 50200 1080 10 10 0 0 0",
        1_250_000,
    );
    s.sample(2.0);
    let text = report_text(&mut s);
    let sda = line(&text, "disk,host=ds01.example,site=T2_EX,device=sda,");
    assert_eq!(field(sda, "r_per_s"), "100");
    assert_eq!(field(sda, "util_pct"), "50");
    let sdd = line(&text, "disk,host=ds01.example,site=T2_EX,device=sdd,");
    assert_eq!(field(sdd, "r_per_s"), "10");
    // and the CPU line appears once its counters move forward
    let cpu = line(&text, "cpu,");
    assert_eq!(field(cpu, "iowait_pct"), "20");
}

#[test]
fn missing_optional_sources_are_silent() {
    let h = Host::new("sparse");
    h.snapshot_a();
    fs::remove_file(h.proc().join("pressure/io")).unwrap();
    fs::remove_dir_all(h.sys().join("class/net/eth0")).unwrap();
    let mut s = Scheduler::new(&config(&h), Vec::new());
    s.sample(0.0);
    h.snapshot_b();
    fs::remove_file(h.proc().join("pressure/io")).unwrap();
    s.sample(1.0);
    let text = report_text(&mut s);
    assert!(!text.contains("pressure,"));
    let eth0 = line(&text, "net,host=ds01.example,site=T2_EX,iface=eth0 ");
    assert!(
        !eth0.contains("speed_mbps"),
        "no speed known, no %ifutil: {eth0}"
    );
    assert!(!eth0.contains("util_pct"), "{eth0}");
    assert!(
        !text.contains("agent_source"),
        "nothing counted as an error:\n{text}"
    );
}

fn agent_bin() -> &'static str {
    env!("CARGO_BIN_EXE_storwatch-agent")
}

#[test]
fn once_prints_one_report_for_the_fixture_root() {
    let h = Host::new("once");
    h.snapshot_a();
    let child = Command::new(agent_bin())
        .args([
            "once",
            "--sample-interval",
            "1s",
            "--report-interval",
            "2s",
            "--host",
            "ds01",
        ])
        .arg("--proc-root")
        .arg(h.proc())
        .arg("--sys-root")
        .arg(h.sys())
        .arg("--config")
        .arg(h.dir.join("absent.toml"))
        .output()
        .unwrap();
    // A named config file that does not exist is an error, said clearly.
    assert!(!child.status.success());
    let err = String::from_utf8_lossy(&child.stderr);
    assert!(err.contains("absent.toml"), "{err}");

    let child = Command::new(agent_bin())
        .args([
            "once",
            "--sample-interval",
            "1s",
            "--report-interval",
            "2s",
            "--host",
            "ds01",
            "--tag",
            "site=T2_EX",
        ])
        .arg("--proc-root")
        .arg(h.proc())
        .arg("--sys-root")
        .arg(h.sys())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // The agent's priming read happens at start; the change lands between it and the samples.
    std::thread::sleep(Duration::from_millis(500));
    h.snapshot_b();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let sda = line(&text, "disk,host=ds01,site=T2_EX,device=sda,");
    assert_eq!(field(sda, "r_per_s"), "200");
    assert_eq!(field(sda, "util_pct"), "95");
    let eth0 = line(&text, "net,host=ds01,site=T2_EX,iface=eth0 ");
    assert_eq!(field(eth0, "util_pct"), "80");
    let agent = line(&text, "agent,host=ds01,site=T2_EX,version=");
    assert!(agent.contains("samples=3i"), "{agent}");
    // every line is valid line protocol with a timestamp
    for l in text.lines() {
        let parsed: Vec<_> = influxdb_line_protocol::parse_lines(l).collect();
        assert!(parsed.len() == 1 && parsed[0].is_ok(), "{l}");
        assert!(parsed[0].as_ref().unwrap().timestamp.is_some());
    }
}

#[test]
fn bad_roots_and_configs_get_clear_errors() {
    let out = Command::new(agent_bin())
        .args(["once", "--proc-root", "/nonexistent/proc"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr)
        .contains("proc root /nonexistent/proc is not a directory"));
    let out = Command::new(agent_bin())
        .args([
            "once",
            "--sample-interval",
            "1s",
            "--report-interval",
            "1500ms",
        ])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("whole multiple"));
    let out = Command::new(agent_bin())
        .arg("--print-default-config")
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert_eq!(Config::parse(&text).unwrap(), Config::default());
}

/// A proc root without `diskstats` (a wrong `--proc-root`, a container): the agent says so,
/// naming the file, instead of reporting no disks in silence.
#[test]
fn missing_diskstats_is_a_warning_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let proc_root = dir.path().join("proc");
    fs::create_dir_all(&proc_root).unwrap();
    fs::create_dir_all(dir.path().join("sys")).unwrap();
    fs::write(proc_root.join("uptime"), "100.00 180.00\n").unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_storwatch-agent"))
        .arg("once")
        .arg("--proc-root")
        .arg(&proc_root)
        .arg("--sys-root")
        .arg(dir.path().join("sys"))
        .args(["--sample-interval", "100ms", "--report-interval", "200ms"])
        .args(["--output", "-"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let want = format!("{} does not exist", proc_root.join("diskstats").display());
    assert!(stderr.contains(&want), "{stderr}");
    assert_eq!(stderr.matches(&want).count(), 1, "warned once: {stderr}");
}

/// Run by hand by a user who may not create the spool (the packaged default is
/// /var/lib/storwatch/spool): a clear error that says what to do, not a bare EACCES.
#[test]
fn a_spool_this_user_may_not_create_is_a_clear_error() {
    let root = fs::read_to_string("/proc/self/status")
        .unwrap()
        .lines()
        .any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(2) == Some("0"));
    let dir = tempfile::tempdir().unwrap(); // 0700, owned by this user
    let spool = dir.path().join("state/spool");
    let mut cmd = if root {
        // as nobody, for whom the directory is closed
        let mut c = Command::new("setpriv");
        c.args(["--reuid=65534", "--regid=65534", "--clear-groups"])
            .arg(env!("CARGO_BIN_EXE_storwatch-agent"));
        c
    } else {
        fs::set_permissions(
            dir.path(),
            std::os::unix::fs::PermissionsExt::from_mode(0o500),
        )
        .unwrap();
        Command::new(env!("CARGO_BIN_EXE_storwatch-agent"))
    };
    let out = cmd
        .args([
            "once",
            "--sample-interval",
            "100ms",
            "--report-interval",
            "200ms",
        ])
        .args(["--output", "http://127.0.0.1:9/write?db=x", "--spool-dir"])
        .arg(&spool)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(stderr.contains("permission denied"), "{stderr}");
    assert!(stderr.contains("--spool-dir"), "{stderr}");
    assert!(stderr.contains(&spool.display().to_string()), "{stderr}");
}

/// As a site that writes reports to a file meets it: with a small `[file] max_file_bytes` the
/// file rotates to `.1` and `.2`, the oldest goes, every kept file stays within the cap, and
/// each holds whole reports (every line parses, each report ends with its `agent` line).
#[test]
fn a_file_output_rotates_at_the_cap_with_whole_reports() {
    let dir = tempfile::tempdir().unwrap();
    let (proc_root, sys_root) = storwatch_test_support::fixture_roots(dir.path());
    let roots = [
        "--proc-root".to_string(),
        proc_root.display().to_string(),
        "--sys-root".into(),
        sys_root.display().to_string(),
    ];
    // one report of this fixture host, to size the cap at two and a half reports
    let once = Command::new(agent_bin())
        .arg("once")
        .args(&roots)
        .args(["--output", "-"])
        .output()
        .unwrap();
    assert!(once.status.success(), "{once:?}");
    let cap = once.stdout.len() * 5 / 2;
    let config = dir.path().join("agent.toml");
    write(
        &config,
        &format!(
            "sample_interval = \"100ms\"\nreport_interval = \"200ms\"\n\
             [file]\nmax_file_bytes = {cap}\nkeep_files = 2\n"
        ),
    );
    let out = dir.path().join("out.lp");
    let mut child = Command::new(agent_bin())
        .arg("run")
        .arg("--config")
        .arg(&config)
        .args(&roots)
        .arg("--output")
        .arg(format!("file:{}", out.display()))
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let rotated = |n: u32| dir.path().join(format!("out.lp.{n}"));
    // the third file exists once the file was rotated twice; a few more rotations after that
    // (a report every 200 ms, two to a file)
    let ok = wait_for(Duration::from_secs(15), || rotated(2).exists());
    std::thread::sleep(Duration::from_millis(1500));
    signal(child.id(), "TERM");
    let status = child.wait().unwrap();
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
    assert!(ok, "no rotation: {stderr}");
    assert!(stderr.matches("file rotated").count() >= 4, "{stderr}");
    assert!(status.success(), "{status:?} {stderr}");
    assert!(!rotated(3).exists(), "keep_files = 2 kept a third");
    for path in [out.clone(), rotated(1), rotated(2)] {
        let text = fs::read_to_string(&path).unwrap();
        assert!(
            text.len() <= cap,
            "{}: {} > {cap}",
            path.display(),
            text.len()
        );
        assert!(text.ends_with('\n'), "{}: torn", path.display());
        for line in text.lines() {
            let parsed = storwatch_wire::lp::parse_line(line, storwatch_wire::lp::Backend::V1);
            assert!(parsed.is_ok(), "{}: {line:?}", path.display());
        }
        // whole reports: each file ends with the agent line that closes a report
        let last = text
            .lines()
            .rfind(|l| !l.starts_with("agent_source"))
            .unwrap();
        assert!(last.starts_with("agent,"), "{}: {last}", path.display());
    }
    // the agent's own line counts the rotations
    let text = fs::read_to_string(&out).unwrap();
    let agent = text.lines().rfind(|l| l.starts_with("agent,")).unwrap();
    let rotations: u64 = field(agent, "file_rotations")
        .trim_end_matches('i')
        .parse()
        .unwrap();
    assert!(rotations >= 2, "{agent}");
}
