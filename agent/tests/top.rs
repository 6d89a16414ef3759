//! `top` on simulated hosts: the screens the collectors' rows make at 80 and 200 columns
//! (snapshots; the simulator is stepped by hand, each step one second of uptime, so the
//! numbers are the same on every run), and the real binary drawing one screen into a pipe.

#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use storwatch_agent::collect::md::MdMonitor;
use storwatch_agent::collect::mpath::{MpathConfig, MpathMonitor};
use storwatch_agent::collect::zpool::{ZpoolConfig, ZpoolMonitor};
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
        Box::new(MpathMonitor::new_inline(
            MpathConfig {
                dmsetup: root.join("bin/dmsetup"),
                dmsetup_interval_s: 1.0,
                use_ioctl: false,
                use_multipathd: false,
                ..MpathConfig::default()
            },
            Arc::new(SystemRunner),
        )),
        Box::new(MdMonitor::new(cfg.md.clone(), cfg.risk)),
        Box::new(ZpoolMonitor::new_inline(
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
