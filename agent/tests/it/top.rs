//! `top` on simulated hosts: the screens the collectors' rows make at 80 and 200 columns
//! (snapshots; the simulator is stepped by hand, each step one second of uptime, so the
//! numbers are the same on every run), and the real binary drawing one screen into a pipe.

#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use storwatch_agent::collect::md::MdCollector;
use storwatch_agent::collect::mpath::{MpathCollector, MpathConfig};
use storwatch_agent::collect::zpool::{ZpoolCollector, ZpoolConfig};
use storwatch_agent::collect::{Collector, Live};
use storwatch_agent::command::SystemRunner;
use storwatch_agent::config::Config;
use storwatch_agent::scheduler::Scheduler;
use storwatch_agent::top::{self, View};
use storwatch_sim::scenario::Kind;
use storwatch_sim::sim::Sim;

fn config(root: &Path) -> Config {
    Config {
        proc_root: root.join("proc"),
        sys_root: root.join("sys"),
        ..Config::default()
    }
}

/// The health monitors on the simulator's stand-ins, running their commands inline so that
/// every sample has their answer.
fn monitors(root: &Path, cfg: &Config) -> Vec<Box<dyn Collector>> {
    vec![
        Box::new(MpathCollector::new_inline(
            MpathConfig {
                dmsetup: root.join("bin/dmsetup"),
                dmsetup_interval_s: 1.0,
                use_ioctl: false,
                use_multipathd: false,
                ..MpathConfig::default()
            },
            Arc::new(SystemRunner),
        )),
        Box::new(MdCollector::new(cfg.md.clone(), cfg.risk)),
        Box::new(ZpoolCollector::new_inline(
            ZpoolConfig {
                zpool: root.join("bin/zpool"),
                interval_s: 0.0,
                ..ZpoolConfig::default()
            },
            cfg.risk,
            Arc::new(SystemRunner),
        )),
    ]
}

/// What `top` gets after `steps` seconds of scenario `kind`.
fn live(kind: Kind, steps: u32) -> Live {
    let dir = tempfile::tempdir().unwrap();
    let mut sim = Sim::new(dir.path(), kind, "sim1", 7, 1.0).unwrap();
    let cfg = config(dir.path());
    let mut s = Scheduler::new(&cfg, monitors(dir.path(), &cfg));
    s.sample(0.0);
    for i in 1..=steps {
        sim.step().unwrap();
        s.sample(f64::from(i));
    }
    let errors: Vec<_> = s.error_totals().into_iter().filter(|e| e.1 > 0).collect();
    assert!(errors.is_empty(), "source errors {errors:?}");
    let mut live = Live::default();
    s.live(&mut live);
    live
}

/// The screen at `width`, with the keys line, checked to fit.
fn screen(live: &Live, width: usize) -> String {
    let view = View {
        threshold_pct: 95.0,
        width,
        footer: true,
        ..View::default()
    };
    let s = top::render("sim1", live, view);
    for l in s.lines() {
        assert!(l.chars().count() <= width, "wider than {width}: {l:?}\n{s}");
    }
    s
}

#[test]
fn md_rebuild_at_80_and_200_columns() {
    let live = live(Kind::MdRebuild, 5);
    assert_eq!(live.arrays.len(), 1);
    insta::assert_snapshot!("md_rebuild_80", screen(&live, 80));
    insta::assert_snapshot!("md_rebuild_200", screen(&live, 200));
}

/// A disk server with a map whose I/O hangs, and beside it the array of md-rebuild and the
/// pool of zpool-resilver: every kind of health row on one screen.
#[test]
fn every_health_domain_at_80_and_200_columns() {
    let mut live = live(Kind::MultipathHung, 3);
    assert!(!live.maps.is_empty());
    live.arrays = self::live(Kind::MdRebuild, 3).arrays;
    live.pools = self::live(Kind::ZpoolResilver, 3).pools;
    assert!(!live.pools.is_empty());
    insta::assert_snapshot!("health_80", screen(&live, 80));
    insta::assert_snapshot!("health_200", screen(&live, 200));
}

/// A disk server of the size `top` has to cope with, built from the simulator's parts: two OS
/// SSDs, 40 dual-path multipath maps over 80 LUN paths, eight 12-disk RAID6 arrays, two
/// raidz2 pools of eight disks and six spare disks (200 disks, 248 block devices), eight NICs
/// and `lo`. With `incident`, `md3` has lost a member and waits for a replacement, one path of
/// `mpathc` fails and comes back every second, and three spare disks are saturated.
struct BenchHost {
    host: storwatch_sim::model::Host,
    incident: bool,
    step: u64,
}

impl BenchHost {
    const MAPS: usize = 40;
    const ARRAYS: usize = 8;
    const POOLS: usize = 2;

    fn new(incident: bool) -> Self {
        use storwatch_sim::model::{
            Device, Host, MdArray, MdMember, MpathMap, MpathPath, Nic, Role, Vdev, Zpool, RAID_LUN,
            SSD,
        };
        use storwatch_sim::scenario::{sd_devt, sd_name};
        let mut h = Host::new("sim1", 64, 512, 11);
        let sd = |i: usize, role: Role| {
            let (major, minor) = sd_devt(i);
            Device::new(&sd_name(i), major, minor, role, 31_251_759_104)
        };
        let mut disks = Vec::new();
        for i in 0..2 {
            let mut d = sd(i, Role::Disk);
            d.rotational = false;
            d.svc = SSD;
            disks.push(d);
        }
        let mut dms = Vec::new();
        for k in 0..Self::MAPS {
            let map = format!("mpath{}", sd_name(k).trim_start_matches("sd"));
            let dm = format!("dm-{k}");
            let mut paths = Vec::new();
            for j in 0..2 {
                let mut p = sd(2 + 2 * k + j, Role::Path { map: map.clone() });
                p.svc = RAID_LUN;
                p.holders = vec![dm.clone()];
                paths.push(MpathPath {
                    dev: p.name.clone(),
                    major: p.major,
                    minor: p.minor,
                    failed: false,
                    fail_count: 0,
                });
                disks.push(p);
            }
            let wwid = format!("36d039ea0001a2b3c{k:08x}65f3a1b2c");
            let mut d = Device::new(&dm, 253, k as u32, Role::Map, 156_250_000_000);
            d.svc = RAID_LUN;
            d.rotational = true;
            d.dm_name = Some(map.clone());
            d.dm_uuid = Some(format!("mpath-{wwid}"));
            d.slaves = paths.iter().map(|p| p.dev.clone()).collect();
            dms.push(d);
            h.maps.push(MpathMap {
                name: map,
                dev: dm,
                wwid,
                size_sectors: 156_250_000_000,
                groups: paths.into_iter().map(|p| vec![p]).collect(),
                active_group: 1,
                manual_failback: false,
            });
        }
        let mut next = 2 + 2 * Self::MAPS;
        let mut mds = Vec::new();
        for a in 0..Self::ARRAYS {
            let name = format!("md{a}");
            let mut members = Vec::new();
            for slot in 0..12u32 {
                let mut d = sd(next, Role::Disk);
                next += 1;
                d.holders = vec![name.clone()];
                let failed = incident && a == 3 && slot == 5;
                if failed {
                    d.state = "offline".to_owned();
                }
                members.push(MdMember {
                    dev: d.name.clone(),
                    slot: Some(slot),
                    desc_nr: slot,
                    state: if failed { "faulty" } else { "in_sync" }.to_owned(),
                    errors: if failed { 37 } else { 0 },
                });
                disks.push(d);
            }
            let component_kb = 15_625_879_552u64;
            let mut md = Device::new(&name, 9, a as u32, Role::Md, component_kb * 2 * 10);
            md.rotational = false;
            md.slaves = members.iter().map(|m| m.dev.clone()).collect();
            mds.push(md);
            h.arrays.push(MdArray {
                name,
                level: "raid6".to_owned(),
                raid_disks: 12,
                parity: 2,
                chunk_kb: 512,
                component_kb,
                members,
                sync: None,
                mismatch_cnt: 0,
            });
        }
        for p in 0..Self::POOLS {
            let name = format!("tank{p}");
            let leaves = (0..8)
                .map(|_| {
                    let d = sd(next, Role::Disk);
                    next += 1;
                    let v = Vdev::new(&d.name, vec![]);
                    disks.push(d);
                    v
                })
                .collect();
            let size: u64 = 127_969_012_547_584;
            h.pools.push(Zpool {
                name: name.clone(),
                size_bytes: size,
                alloc_bytes: size / 100 * 61,
                frag_pct: 12,
                health: "ONLINE".to_owned(),
                root: Vdev::new(&name, vec![Vdev::new("raidz2-0", leaves)]),
                scan: None,
                cache: Vec::new(),
            });
        }
        while next < 200 {
            disks.push(sd(next, Role::Disk));
            next += 1;
        }
        // /proc/diskstats order: sd, then dm, then md
        h.devices = disks;
        h.devices.append(&mut dms);
        h.devices.append(&mut mds);
        let nic = |name: &str, speed_mbps: Option<u64>| Nic {
            name: name.to_owned(),
            speed_mbps,
            mtu: if name.starts_with("ens") { 9000 } else { 1500 },
            carrier_changes: 2,
            demand: Default::default(),
            c: Default::default(),
        };
        h.nics = vec![nic("lo", None), nic("eno1", Some(1000)), nic("eno2", None)];
        for port in [
            "ens1f0np0",
            "ens1f1np1",
            "ens2f0np0",
            "ens2f1np1",
            "ens3f0np0",
        ] {
            h.nics.push(nic(port, Some(25_000)));
        }
        h.nics.push(nic("ens3f1np1", None));
        let mut b = BenchHost {
            host: h,
            incident,
            step: 0,
        };
        b.drive();
        b.host.backfill();
        b
    }

    /// The demand of the coming second: every LUN, array and pool busy to a different degree
    /// (the same on every run), and the incident's changes.
    fn drive(&mut self) {
        use storwatch_sim::model::{Demand, NetDemand};
        let h = &mut self.host;
        let t = self.step as usize;
        let f = |i: usize| 0.25 + 0.7 * ((i * 37 + t * 11) % 100) as f64 / 100.0;
        for k in 0..Self::MAPS {
            let x = f(k);
            h.demand(
                &format!("dm-{k}"),
                Demand::mbs(300.0 * x, 100.0 * x, 1024.0, 512.0),
            );
        }
        for a in 0..Self::ARRAYS {
            let x = f(100 + a);
            h.demand(
                &format!("md{a}"),
                Demand::mbs(900.0 * x, 300.0 * x, 1024.0, 1024.0),
            );
        }
        let first_pool = 2 + 2 * Self::MAPS + 12 * Self::ARRAYS;
        for i in first_pool..200 {
            let x = f(i);
            let spare = i >= first_pool + 8 * Self::POOLS;
            let d = if self.incident && spare && i < first_pool + 8 * Self::POOLS + 3 {
                Demand::mbs(300.0, 20.0, 1024.0, 1024.0)
            } else if spare {
                Demand::mbs(2.0 * x, 1.0, 64.0, 64.0)
            } else {
                Demand::mbs(40.0 * x, 20.0 * x, 128.0, 128.0)
            };
            h.demand(&storwatch_sim::scenario::sd_name(i), d);
        }
        for n in ["sda", "sdb"] {
            h.demand(n, Demand::mbs(0.2, 1.5, 16.0, 16.0));
        }
        for (i, n) in h.nics.iter_mut().enumerate() {
            let x = f(200 + i);
            n.demand = match n.speed_mbps {
                Some(25_000) => NetDemand {
                    rx_bps: 6e8 * x,
                    tx_bps: 1.8e9 * x,
                    ..NetDemand::default()
                },
                Some(_) => NetDemand {
                    rx_bps: 2e5 * x,
                    tx_bps: 1e5 * x,
                    ..NetDemand::default()
                },
                None if n.name == "lo" => NetDemand {
                    rx_bps: 1e5,
                    tx_bps: 1e5,
                    ..NetDemand::default()
                },
                None => NetDemand::default(),
            };
        }
        if self.incident && t > 0 {
            // mpathc's first path: down on odd seconds, up on even ones
            let failed = t % 2 == 1;
            let mut dev = None;
            if let Some(m) = h.maps.iter_mut().find(|m| m.name == "mpathc") {
                if let Some(p) = m.groups.first_mut().and_then(|g| g.first_mut()) {
                    p.failed = failed;
                    p.fail_count += u64::from(failed);
                    dev = Some(p.dev.clone());
                }
                m.choose_group();
            }
            if let Some(d) = dev.and_then(|d| h.dev_mut(&d)) {
                d.state = if failed { "offline" } else { "running" }.to_owned();
            }
        }
    }

    /// What `top` gets after four seconds: two failures and two returns of the flapping path,
    /// which ends up.
    fn live(mut self) -> Live {
        use storwatch_sim::tree::{self, Tree};
        let dir = tempfile::tempdir().unwrap();
        let mut t = Tree::new(dir.path()).unwrap();
        tree::write_static(&mut t, &self.host).unwrap();
        tree::write_dynamic(&mut t, &self.host).unwrap();
        let cfg = config(dir.path());
        let mut s = Scheduler::new(&cfg, monitors(dir.path(), &cfg));
        s.sample(0.0);
        for i in 1..=4 {
            self.step += 1;
            self.host.tick();
            self.drive();
            tree::write_dynamic(&mut t, &self.host).unwrap();
            s.sample(f64::from(i));
        }
        let errors: Vec<_> = s.error_totals().into_iter().filter(|e| e.1 > 0).collect();
        assert!(errors.is_empty(), "source errors {errors:?}");
        let mut live = Live::default();
        s.live(&mut live);
        assert_eq!(live.maps.len(), Self::MAPS);
        assert_eq!(live.arrays.len(), Self::ARRAYS);
        assert_eq!(live.pools.len(), Self::POOLS);
        live
    }
}

/// The screen of a `cols` × `rows` terminal, checked to fit it: no line wider, no more lines,
/// the title on the first.
fn terminal(live: &Live, cols: usize, rows: usize, health: bool) -> String {
    let view = View {
        threshold_pct: 95.0,
        width: cols,
        height: Some(rows),
        footer: true,
        health,
        ..View::default()
    };
    let s = top::render("sim1", live, view);
    assert!(s.lines().count() <= rows, "more than {rows} lines:\n{s}");
    for l in s.lines() {
        assert!(l.chars().count() <= cols, "wider than {cols}: {l:?}\n{s}");
    }
    let title = s.lines().next().unwrap_or_default();
    assert!(
        title.contains("sim1 — 248 devices"),
        "not the title on row 1: {title:?}\n{s}"
    );
    s
}

/// The summary lines under the title, as one.
fn summary(screen: &str) -> String {
    let lines: Vec<&str> = screen
        .lines()
        .skip(1)
        .take_while(|l| !l.is_empty())
        .collect();
    lines.join(" · ")
}

/// The device rows of a screen, by their names.
fn device_rows(screen: &str) -> Vec<String> {
    screen
        .lines()
        .skip_while(|l| !l.starts_with("Device"))
        .skip(1)
        .take_while(|l| !l.is_empty() && !l.starts_with('…'))
        .map(|l| l.split_whitespace().next().unwrap_or_default().to_owned())
        .collect()
}

/// The devices by %util, busiest first, as `top` names their rows.
fn busiest(live: &Live) -> Vec<(String, f64)> {
    let mut v: Vec<(String, f64)> = live
        .disks
        .iter()
        .map(|d| (d.name.clone(), d.rates.util_pct))
        .collect();
    v.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    v
}

/// Each shown device is at least as busy as every device left out.
fn assert_busiest_shown(live: &Live, screen: &str, at_least: usize) {
    let shown = device_rows(screen);
    assert!(
        shown.len() >= at_least,
        "{} device rows, wanted {at_least}:\n{screen}",
        shown.len()
    );
    let all = busiest(live);
    let util = |n: &str| all.iter().find(|d| d.0 == n).map(|d| d.1);
    let least_shown = shown
        .iter()
        .filter_map(|n| util(n))
        .fold(f64::INFINITY, f64::min);
    let most_left_out = all
        .iter()
        .filter(|d| !shown.contains(&d.0))
        .map(|d| d.1)
        .fold(0.0, f64::max);
    assert!(
        least_shown >= most_left_out,
        "a busier device ({most_left_out}%) left out than one shown ({least_shown}%):\n{screen}"
    );
}

#[test]
fn a_healthy_200_disk_server_gets_a_summary_line_and_its_busiest_devices() {
    let live = BenchHost::new(false).live();
    for (cols, rows, at_least) in [(80, 24, 12), (200, 60, 40)] {
        let s = terminal(&live, cols, rows, true);
        let summary = summary(&s);
        assert!(
            summary.contains("md: 8 arrays clean")
                && summary.contains("mpath: 40 maps, 80 paths active")
                && summary.contains("zpool: 2 ONLINE"),
            "{summary:?}\n{s}"
        );
        // no row for a healthy object
        assert!(
            !s.lines()
                .any(|l| l.starts_with("MAP") || l.starts_with("ARRAY")),
            "{s}"
        );
        assert_busiest_shown(&live, &s, at_least);
        // the key `h` leaves the devices on the screen, and so does pressing it again
        let hidden = terminal(&live, cols, rows, false);
        assert_busiest_shown(&live, &hidden, at_least);
        insta::assert_snapshot!(format!("bench_healthy_{cols}x{rows}"), s);
    }
}

#[test]
fn an_incident_on_a_200_disk_server_gets_rows_at_80x24_and_200x60() {
    let live = BenchHost::new(true).live();
    let sat = ["sdgm", "sdgn", "sdgo"];
    for (name, util) in busiest(&live).iter().take(3) {
        assert!(
            *util >= 95.0 && sat.contains(&name.as_str()),
            "{name} {util}"
        );
    }
    for (cols, rows, at_least) in [(80, 24, 5), (200, 60, 30)] {
        let s = terminal(&live, cols, rows, true);
        let row = |k: &str| {
            s.lines()
                .find(|l| l.starts_with(k))
                .unwrap_or_else(|| panic!("no {k} row at {cols}x{rows}:\n{s}"))
                .to_owned()
        };
        let md3 = row("md3 ");
        assert!(md3.contains("degraded"), "{md3}");
        let mpathc = row("mpathc ");
        assert!(mpathc.contains("flapping"), "{mpathc}");
        let summary = summary(&s);
        assert!(
            summary.contains("md: 7 of 8 arrays clean")
                && summary.contains("mpath: 39 of 40 maps ok")
                && summary.contains("zpool: 2 ONLINE"),
            "{summary:?}\n{s}"
        );
        for d in sat {
            let r = row(&format!("{d} "));
            assert!(r.ends_with("SAT"), "{r}");
        }
        assert_busiest_shown(&live, &s, at_least);
        let hidden = terminal(&live, cols, rows, false);
        assert_busiest_shown(&live, &hidden, at_least);
        insta::assert_snapshot!(format!("bench_incident_{cols}x{rows}"), s);
    }
}

/// `storwatch-agent top` on the simulated host under `root`, sampling every 200 ms.
fn top_on(root: &Path) -> Command {
    let cfg = root.join("agent.toml");
    // filesystems are not drawn by top
    std::fs::write(&cfg, "[fs]\nenabled = false\n").unwrap();
    let mut c = Command::new(env!("CARGO_BIN_EXE_storwatch-agent"));
    c.args(["top", "--sample-interval", "200ms", "--host", "sim1"])
        .arg("--config")
        .arg(cfg)
        .arg("--proc-root")
        .arg(root.join("proc"))
        .arg("--sys-root")
        .arg(root.join("sys"))
        .env_remove("COLUMNS");
    c
}

/// Runs the real binary's `top --once` on an md-rebuild host while the simulator moves on
/// (each step a second of uptime, so the agent's two samples see the devices move).
fn run_top(extra: &[&str]) -> String {
    let dir = tempfile::tempdir().unwrap();
    let mut sim = Sim::new(dir.path(), Kind::MdRebuild, "sim1", 7, 1.0).unwrap();
    let child = top_on(dir.path())
        .arg("--once")
        .args(extra)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let done = Arc::new(AtomicBool::new(false));
    let stepper = {
        let done = Arc::clone(&done);
        std::thread::spawn(move || {
            while !done.load(Ordering::Relaxed) {
                sim.step().unwrap();
                std::thread::sleep(Duration::from_millis(50));
            }
        })
    };
    let out = child.wait_with_output().unwrap();
    done.store(true, Ordering::Relaxed);
    stepper.join().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn the_binary_fits_80_columns_and_shows_the_rebuild() {
    let text = run_top(&["--width", "80"]);
    for l in text.lines() {
        assert!(l.chars().count() <= 80, "{l:?}\n{text}");
    }
    let md0 = text
        .lines()
        .find(|l| l.starts_with("md0 "))
        .unwrap_or_else(|| panic!("no md0 row\n{text}"));
    assert!(
        md0.contains("recovering") && md0.contains("recover"),
        "{md0}"
    );
    assert!(md0.contains('%'), "{md0}");
    // the lowest-priority columns made room
    let header = text.lines().find(|l| l.starts_with("Device")).unwrap();
    assert!(
        header.contains("%util") && !header.contains("svctm"),
        "{header}"
    );
    // no escape sequences into a pipe, no keys line
    assert!(!text.contains('\x1b') && !text.contains("q quit"), "{text}");
}

#[test]
fn into_a_pipe_without_a_width_every_column_is_shown() {
    let text = run_top(&[]);
    let header = text.lines().find(|l| l.starts_with("Device")).unwrap();
    assert!(
        header.contains("svctm") && header.contains("%rrqm"),
        "{header}"
    );
    let text = run_top(&["--no-health", "--sort", "name"]);
    assert!(!text.contains("recovering"), "{text}");
    assert!(text.lines().next().unwrap().ends_with("by name"), "{text}");
}

/// A pseudo-terminal of `cols` × `rows` for the binary to draw on.
#[allow(unsafe_code)]
mod pty {
    use std::ffi::CStr;
    use std::fs::{File, OpenOptions};
    use std::os::fd::{AsRawFd, FromRawFd};
    use std::os::unix::fs::OpenOptionsExt;

    pub(crate) struct Pty {
        pub(crate) master: File,
        pub(crate) slave: File,
    }

    pub(crate) fn open(cols: u16, rows: u16) -> Pty {
        // SAFETY: plain calls on a descriptor this function owns; the name buffer outlives
        // ptsname_r, and the winsize TIOCSWINSZ reads lives across the call.
        unsafe {
            let m = libc::posix_openpt(libc::O_RDWR | libc::O_NOCTTY);
            assert!(m >= 0, "posix_openpt");
            let master = File::from_raw_fd(m);
            assert_eq!(libc::grantpt(m), 0);
            assert_eq!(libc::unlockpt(m), 0);
            let mut buf = [0 as libc::c_char; 128];
            assert_eq!(libc::ptsname_r(m, buf.as_mut_ptr(), buf.len()), 0);
            let name = CStr::from_ptr(buf.as_ptr()).to_str().unwrap().to_owned();
            let slave = OpenOptions::new()
                .read(true)
                .write(true)
                .custom_flags(libc::O_NOCTTY)
                .open(name)
                .unwrap();
            let ws = libc::winsize {
                ws_row: rows,
                ws_col: cols,
                ws_xpixel: 0,
                ws_ypixel: 0,
            };
            assert_eq!(libc::ioctl(slave.as_raw_fd(), libc::TIOCSWINSZ, &ws), 0);
            Pty { master, slave }
        }
    }

    /// The local modes of the terminal (`ICANON`, `ECHO`, …).
    pub(crate) fn lflag(f: &File) -> libc::tcflag_t {
        // SAFETY: tcgetattr writes one termios, which lives across the call.
        unsafe {
            let mut t: libc::termios = std::mem::zeroed();
            assert_eq!(libc::tcgetattr(f.as_raw_fd(), &mut t), 0);
            t.c_lflag
        }
    }
}

/// The text of a terminal's output: escape sequences and carriage returns removed.
fn plain(bytes: &[u8]) -> String {
    let s = String::from_utf8_lossy(bytes);
    let mut out = String::new();
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\x1b' => {
                // CSI: ESC [ parameters final-letter; a cleared screen starts a new line
                if chars.next_if_eq(&'[').is_some() {
                    for c in chars.by_ref() {
                        if c.is_ascii_alphabetic() {
                            if c == 'J' {
                                out.push('\n');
                            }
                            break;
                        }
                    }
                }
            }
            '\r' => {}
            c => out.push(c),
        }
    }
    out
}

/// Waits for `done`, at most `secs`: a hang fails the test instead of stalling the run.
fn wait_for(secs: u64, mut done: impl FnMut() -> bool) -> bool {
    let end = std::time::Instant::now() + Duration::from_secs(secs);
    while std::time::Instant::now() < end {
        if done() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    done()
}

#[test]
fn on_a_terminal_q_quits_and_gives_the_terminal_back() {
    use std::io::{Read, Write};
    use std::sync::Mutex;

    let dir = tempfile::tempdir().unwrap();
    let _sim = Sim::new(dir.path(), Kind::MdRebuild, "sim1", 7, 1.0).unwrap();
    let pty = pty::open(80, 40);
    let before = pty::lflag(&pty.slave);
    assert_ne!(before & libc::ICANON, 0);
    let mut child = top_on(dir.path())
        .stdin(pty.slave.try_clone().unwrap())
        .stdout(pty.slave.try_clone().unwrap())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let reader = {
        let seen = Arc::clone(&seen);
        let mut master = pty.master.try_clone().unwrap();
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            // EIO once every end of the slave is closed
            while let Ok(n @ 1..) = master.read(&mut buf) {
                seen.lock().unwrap().extend_from_slice(&buf[..n]);
            }
        })
    };
    let text = || plain(&seen.lock().unwrap());
    assert!(
        wait_for(60, || text().contains("q quit")),
        "no screen with keys:\n{}",
        text()
    );
    // keys arrive one by one, without echo
    assert_eq!(pty::lflag(&pty.slave) & (libc::ICANON | libc::ECHO), 0);
    let mut master = pty.master.try_clone().unwrap();
    master.write_all(b"n").unwrap();
    assert!(wait_for(60, || text().contains("by name")), "{}", text());
    master.write_all(b"q").unwrap();
    let exited = wait_for(60, || child.try_wait().unwrap().is_some());
    if !exited {
        child.kill().unwrap();
    }
    let status = child.wait().unwrap();
    let mut err = String::new();
    if let Some(mut e) = child.stderr.take() {
        e.read_to_string(&mut err).unwrap();
    }
    assert!(exited && status.success(), "{status:?} {err}\n{}", text());
    // the terminal is as it was, and the screen the shell had is back
    assert_eq!(pty::lflag(&pty.slave), before);
    assert!(
        wait_for(60, || seen
            .lock()
            .unwrap()
            .ends_with(b"\x1b[?25h\x1b[?1049l")),
        "{:?}",
        text()
    );
    let text = text();
    for l in text.lines() {
        assert!(l.chars().count() <= 80, "{l:?}\n{text}");
    }
    assert!(text.lines().any(|l| l.starts_with("md0 ")), "{text}");
    drop(pty);
    reader.join().unwrap();
}
