//! A dead mount never blocks the agent: `once`, `top` and `run` on this machine's real `/proc`
//! with a real FUSE filesystem mounted whose statfs never answers (`tests/fuse/hangfs.c`, built
//! here with libfuse3) — what a hung NFS server or a stuck CVMFS/EOS client looks like.
//!
//! Once the daemon has read the request, the kernel waits for its answer uninterruptibly: a
//! thread of the agent calling `statvfs` there could not be killed, and the agent could not
//! exit. Each test mounts its own filesystem in a private mount namespace (`unshare --mount`),
//! so that nothing else on the machine — other tests, other processes — ever sees the hung
//! mount, and the agent is started inside that namespace with the real `/proc`. The guard
//! detaches the mount and kills the daemon on every exit of a test, failed ones included, which
//! aborts the FUSE connection and releases every caller still waiting on it.
//!
//! Needs root, `/dev/fuse`, `unshare` (util-linux), a C compiler and libfuse3 (`libfuse3-dev
//! fuse3 pkg-config`; `scripts/test.sh` installs them). Skipped, saying so, only where FUSE is
//! impossible (no `/dev/fuse`).

#![allow(clippy::unwrap_used)]

use std::fs;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use storwatch_test_support::files::write_replacing as write;
use storwatch_test_support::process::{in_private_mounts, signal};
use storwatch_test_support::wait::wait_for;

/// Seconds a statvfs may take before its mount is skipped, in these tests (default 5).
const TIMEOUT_S: f64 = 1.0;

/// The hung filesystem's daemon, compiled once per run into the target's scratch directory.
fn hangfs() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fuse/hangfs.c");
        let bin = Path::new(env!("CARGO_TARGET_TMPDIR")).join("hangfs");
        let flags = Command::new("pkg-config")
            .args(["--cflags", "--libs", "fuse3"])
            .output()
            .expect("pkg-config (apt-get install pkg-config libfuse3-dev; scripts/test.sh does)");
        assert!(
            flags.status.success(),
            "libfuse3 not found by pkg-config (apt-get install libfuse3-dev fuse3; scripts/test.sh \
             does): {}",
            String::from_utf8_lossy(&flags.stderr)
        );
        let flags = String::from_utf8(flags.stdout).unwrap();
        let out = Command::new("cc")
            .args(["-O2", "-Wall", "-o"])
            .arg(&bin)
            .arg(&src)
            .args(flags.split_whitespace())
            .output()
            .expect("run cc");
        assert!(
            out.status.success(),
            "cc hangfs.c: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        bin
    })
}

/// FUSE is impossible here: say so and skip.
fn no_fuse() -> bool {
    if Path::new("/dev/fuse").exists() {
        return false;
    }
    storwatch_test_support::skip_or_fail(
        "fuse",
        "/dev/fuse does not exist on this machine; FUSE cannot mount here",
    );
    true
}

/// A hung FUSE mount in a mount namespace of its own, and an agent started inside it.
struct DeadMount {
    dir: tempfile::TempDir,
    /// Where it is mounted, as mountinfo prints it (the path has no characters to escape).
    mount: String,
    /// The agent's `[fs] timeout_s`.
    timeout_s: f64,
    /// More of the agent's configuration: top-level settings, then more of `[fs]`.
    config: (String, String),
}

impl DeadMount {
    fn new() -> DeadMount {
        let dir = tempfile::tempdir().unwrap();
        let mnt = dir.path().join("dead");
        fs::create_dir(&mnt).unwrap();
        let mount = mnt.to_str().unwrap().to_owned();
        assert!(!mount.contains([' ', '\t', '\n', '\\']), "{mount}");
        DeadMount {
            dir,
            mount,
            timeout_s: TIMEOUT_S,
            config: (String::new(), String::new()),
        }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// `storwatch-agent ARGS` in a new private mount namespace where the hung filesystem is
    /// mounted (and, with `second`, another whose root getattr hangs too), started once the
    /// mounts are in mountinfo; its stdout and stderr go to files.
    fn agent(&self, args: &[&str], second: bool) -> Agent {
        let second_mnt = self.path("dead2");
        fs::create_dir_all(&second_mnt).unwrap();
        // `exec` makes the agent the process the test holds: signals reach it directly.
        let script = r#"
            set -e
            "$HANGFS" -f -o fsname=storwatch-hang,subtype=hangfs "$MNT" 2>>"$DIR/hangfs.log" &
            echo $! > "$DIR/hangfs.pid"
            if [ -n "$MNT2" ]; then
                "$HANGFS" --hang-getattr -f -o fsname=storwatch-hang2,subtype=hangfs "$MNT2" \
                    2>>"$DIR/hangfs.log" &
                echo $! >> "$DIR/hangfs.pid"
            fi
            i=0
            until grep -qF " $MNT " /proc/self/mountinfo \
                && { [ -z "$MNT2" ] || grep -qF " $MNT2 " /proc/self/mountinfo; }; do
                i=$((i + 1))
                if [ $i -gt 200 ]; then echo "hangfs did not mount" >&2; exit 97; fi
                sleep 0.05
            done
            exec "$@"
        "#;
        let config = self.path("agent.toml");
        self.write_config();
        let child = in_private_mounts(script)
            .arg(env!("CARGO_BIN_EXE_storwatch-agent"))
            .args(args)
            .arg("--config")
            .arg(&config)
            .env("HANGFS", hangfs())
            .env("MNT", &self.mount)
            .env(
                "MNT2",
                if second {
                    second_mnt.to_str().unwrap()
                } else {
                    ""
                },
            )
            .env("DIR", self.dir.path())
            .env("RUST_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(fs::File::create(self.path("stdout")).unwrap())
            .stderr(fs::File::create(self.path("stderr")).unwrap())
            .spawn()
            .expect("run unshare (util-linux)");
        Agent(child)
    }

    /// Writes the agent's configuration file (read again on SIGHUP).
    fn write_config(&self) {
        write(
            &self.path("agent.toml"),
            &format!(
                "{}\n[fs]\ntimeout_s = {:?}\n{}\n",
                self.config.0, self.timeout_s, self.config.1
            ),
        );
    }

    /// The daemons' process ids (written before the agent starts).
    fn daemons(&self) -> Vec<u32> {
        fs::read_to_string(self.path("hangfs.pid"))
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.trim().parse().ok())
            .collect()
    }

    /// Waits until the daemon has been sent `n` statfs requests, which it never answers.
    fn wait_statfs(&self, n: usize) {
        assert!(
            wait_for(Duration::from_secs(20), || self
                .log("hangfs.log")
                .matches("statfs")
                .count()
                >= n),
            "the daemon got no statfs request: {}",
            self.log("hangfs.log")
        );
    }

    fn log(&self, name: &str) -> String {
        fs::read_to_string(self.path(name)).unwrap_or_default()
    }
}

impl Drop for DeadMount {
    /// Detaches the mounts and kills the daemons: the FUSE connections are aborted and every
    /// caller stuck in them gets ENOTCONN, so nothing is left hanging whatever the test did.
    fn drop(&mut self) {
        for pid in self.daemons() {
            for mnt in [self.mount.clone(), self.path("dead2").display().to_string()] {
                let _ = Command::new("nsenter")
                    .args(["-t", &pid.to_string(), "-m", "umount", "-l", &mnt])
                    .stderr(Stdio::null())
                    .status();
            }
            let _ = Command::new("kill")
                .args(["-KILL", &pid.to_string()])
                .stderr(Stdio::null())
                .status();
        }
    }
}

/// The agent's process, SIGKILLed when a test ends without having seen it exit. Declared after
/// its [`DeadMount`], it is dropped first: an agent stuck in the kernel dies once the mount's
/// guard has aborted the connection.
struct Agent(Child);

impl Agent {
    fn id(&self) -> u32 {
        self.0.id()
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        if matches!(self.0.try_wait(), Ok(None)) {
            let _ = self.0.kill();
        }
    }
}

/// Waits up to `secs` for `child` to exit; SIGKILLs it and fails the test otherwise. A child
/// stuck in the kernel cannot be reaped until the guard has aborted the FUSE connection, so the
/// failing path does not wait for it.
fn exits_within(agent: &mut Agent, secs: u64, what: &str, m: &DeadMount) -> ExitStatus {
    let child = &mut agent.0;
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(secs) {
        if let Some(st) = child.try_wait().unwrap() {
            return st;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let state = fs::read_to_string(format!("/proc/{}/status", child.id()))
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with("State:"))
        .unwrap_or_default()
        .to_owned();
    panic!(
        "{what} did not exit within {secs} s ({state}); stderr:\n{}\nstdout:\n{}",
        m.log("stderr"),
        m.log("stdout")
    );
}

/// `once` returns in bounded time with the other measurements printed and each dead mount
/// counted as a `statvfs` error naming it; no `fs` line for them.
#[test]
fn once_reports_the_rest_and_the_dead_mounts() {
    if no_fuse() {
        return;
    }
    let m = DeadMount::new();
    let mut agent = m.agent(&["once", "--report-interval", "3s"], true);
    // Each dead mount costs the timeout once (1 s each here); the interval 3 s.
    let st = exits_within(&mut agent, 30, "once", &m);
    let out = m.log("stdout");
    let err = m.log("stderr");
    assert!(st.success(), "{st}: {err}");
    for measurement in ["cpu,", "mem,", "net,", "agent,"] {
        assert!(
            out.lines().any(|l| l.starts_with(measurement)),
            "no {measurement} line:\n{out}"
        );
    }
    // This machine's other filesystems are measured in the same round.
    assert!(
        out.lines().any(|l| l.starts_with("fs,")),
        "no fs line:\n{out}"
    );
    assert!(!out.contains("fstype=fuse.hangfs"), "{out}");
    let second = m.path("dead2").display().to_string();
    let errors = out
        .lines()
        .find(|l| l.starts_with("agent_source,") && l.contains("source=statvfs"))
        .unwrap_or_else(|| panic!("no statvfs error line:\n{out}"));
    assert!(errors.contains(" errors=2i"), "{errors}");
    // Logged as any source error: the first of the interval (the count carries the rest).
    assert!(
        [&m.mount, &second]
            .iter()
            .any(|mnt| err.contains(&format!("statvfs {mnt}: no answer within 1s"))),
        "neither dead mount named:\n{err}"
    );
}

/// SIGTERM and SIGINT end `once` while its statvfs is stuck in the dead mount (a deadline of a
/// minute: the signal comes while `once` is still waiting for the call).
#[test]
fn sigterm_and_sigint_end_once_stuck_on_a_dead_mount() {
    if no_fuse() {
        return;
    }
    for (name, number) in [("TERM", libc::SIGTERM), ("INT", libc::SIGINT)] {
        let mut m = DeadMount::new();
        m.timeout_s = 60.0;
        let mut agent = m.agent(&["once", "--report-interval", "60s"], false);
        m.wait_statfs(1);
        signal(agent.id(), name);
        let st = exits_within(&mut agent, 10, &format!("once after SIG{name}"), &m);
        assert_eq!(st.signal(), Some(number), "{st}");
    }
}

/// `top` draws its screens and exits, a dead mount or not.
#[test]
fn top_draws_and_exits() {
    if no_fuse() {
        return;
    }
    let m = DeadMount::new();
    let mut agent = m.agent(&["top", "-n", "2", "--no-clear", "--width", "200"], false);
    let st = exits_within(&mut agent, 30, "top -n 2", &m);
    let out = m.log("stdout");
    assert!(st.success(), "{st}: {}", m.log("stderr"));
    assert_eq!(
        out.matches("storwatch top —").count(),
        2,
        "two screens:\n{out}"
    );
    // The round was sent into the dead mount: the test is about the hung case.
    m.wait_statfs(1);
}

/// `run` goes on sampling and reporting with the dead mount skipped, and SIGTERM still ends it
/// with the unfinished interval written.
#[test]
fn run_reports_and_ends_on_sigterm() {
    if no_fuse() {
        return;
    }
    let m = DeadMount::new();
    let out = m.path("out.lp");
    let output = format!("file:{}", out.display());
    let mut agent = m.agent(
        &[
            "run",
            "--sample-interval",
            "250ms",
            "--report-interval",
            "1s",
            "--output",
            &output,
        ],
        false,
    );
    let read = || fs::read_to_string(&out).unwrap_or_default();
    // The dead mount counted in one report; the round started over without it, and the other
    // filesystems in the next one.
    let has = |text: &str, start: &str, what: &str| {
        text.lines()
            .any(|l| l.starts_with(start) && l.contains(what))
    };
    assert!(
        wait_for(Duration::from_secs(20), || {
            let text = read();
            has(&text, "agent_source,", "source=statvfs") && has(&text, "fs,", "mount=")
        }),
        "no statvfs error or no fs line reported:\n{}\n{}",
        read(),
        m.log("stderr")
    );
    signal(agent.id(), "TERM");
    let st = exits_within(&mut agent, 10, "run after SIGTERM", &m);
    assert!(st.success(), "{st}: {}", m.log("stderr"));
    assert!(!read().contains("fstype=fuse.hangfs"), "{}", read());
}

/// Threads of process `pid`.
fn threads(pid: u32) -> usize {
    fs::read_dir(format!("/proc/{pid}/task"))
        .map(|d| d.count())
        .unwrap_or(0)
}

/// The child processes of `pid` forked for `statvfs`, other than those in `except`.
fn children_now(pid: u32, except: &[u32]) -> Vec<u32> {
    let mut out = Vec::new();
    for e in fs::read_dir("/proc").unwrap().flatten() {
        let Some(child) = e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        let status = fs::read_to_string(e.path().join("status")).unwrap_or_default();
        let ppid = status
            .lines()
            .find_map(|l| l.strip_prefix("PPid:"))
            .and_then(|v| v.trim().parse::<u32>().ok());
        // Forked by the round's thread, whose name a child keeps (the drive and multipath
        // monitors run smartctl and dmsetup, which are not counted).
        let forked_for_fs = status.lines().any(|l| l == "Name:\tstorwatch-fs");
        if ppid == Some(pid) && forked_for_fs && !except.contains(&child) {
            out.push(child);
        }
    }
    out.sort_unstable();
    out
}

/// The children that stay: in each of five looks 50 ms apart (a round's child that answers
/// comes and goes within milliseconds).
fn children(pid: u32, except: &[u32]) -> Vec<u32> {
    let mut out = children_now(pid, except);
    for _ in 0..4 {
        std::thread::sleep(Duration::from_millis(50));
        let now = children_now(pid, except);
        out.retain(|c| now.contains(c));
    }
    out
}

/// A signal mask line of /proc/PID/status (`SigCgt`, `ShdPnd`, …) as bits.
fn sig_mask(pid: u32, name: &str) -> u64 {
    fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix(name))
        .and_then(|v| u64::from_str_radix(v.trim_start_matches(':').trim(), 16).ok())
        .unwrap_or(0)
}

fn bit(sig: libc::c_int) -> u64 {
    1 << (sig - 1)
}

/// SIGHUP with a changed configuration, again and again, while a mount is dead: the agent's
/// threads and child processes do not grow (each reload used to leave a round thread blocked
/// for ever on a pipe and one more child hung in the mount). The one child stuck in the mount
/// has been sent SIGKILL, does not catch SIGTERM, SIGINT or SIGHUP (the agent's handlers, which
/// would only set a flag in its memory), and is reaped once the mount answers.
#[test]
fn reloads_add_no_thread_and_no_child() {
    if no_fuse() {
        return;
    }
    let mut m = DeadMount::new();
    m.config = ("host = \"r0\"".into(), "interval = \"1s\"".into());
    let out = m.path("out.lp");
    let output = format!("file:{}", out.display());
    let mut agent = m.agent(
        &[
            "run",
            "--sample-interval",
            "250ms",
            "--report-interval",
            "1s",
            "--output",
            &output,
        ],
        false,
    );
    let pid = agent.id();
    let read = || fs::read_to_string(&out).unwrap_or_default();
    assert!(
        wait_for(Duration::from_secs(20), || read().lines().any(|l| l
            .starts_with("agent_source,")
            && l.contains("source=statvfs"))),
        "the dead mount was not counted:\n{}\n{}\n{}",
        read(),
        m.log("stderr"),
        m.log("hangfs.log")
    );
    // A round after the one that gave up (fs interval 1 s), settled.
    std::thread::sleep(Duration::from_millis(1500));
    let daemons = m.daemons();
    let (threads0, children0) = (threads(pid), children(pid, &daemons));
    assert_eq!(
        children0.len(),
        1,
        "one child stuck in the mount: {children0:?}"
    );
    let mut seen = Vec::new();
    for k in 1..=4 {
        m.config.0 = format!("host = \"r{k}\"");
        m.write_config();
        signal(pid, "HUP");
        let host = format!("host=r{k}");
        assert!(
            wait_for(Duration::from_secs(20), || read().contains(&host)),
            "reload {k} not applied:\n{}",
            m.log("stderr")
        );
        // Long enough for a round after the reload to hang on the mount and be given up on.
        std::thread::sleep(Duration::from_millis(2500));
        seen.push((threads(pid), children(pid, &daemons).len()));
    }
    let (threads1, children1) = (threads(pid), children(pid, &daemons));
    eprintln!(
        "threads {threads0} -> {seen:?} -> {threads1}; children {}",
        children1.len()
    );
    assert!(
        threads1 <= threads0,
        "threads grew over 4 reloads: {threads0} -> {seen:?}"
    );
    assert_eq!(children1, children0, "children after 4 reloads: {seen:?}");
    let stuck = children0[0];
    let caught = sig_mask(stuck, "SigCgt");
    for sig in [libc::SIGTERM, libc::SIGINT, libc::SIGHUP] {
        assert_eq!(
            caught & bit(sig),
            0,
            "the child catches signal {sig}: {caught:x}"
        );
    }
    let pending = sig_mask(stuck, "ShdPnd") | sig_mask(stuck, "SigPnd");
    assert_ne!(
        pending & bit(libc::SIGKILL),
        0,
        "no SIGKILL sent: {pending:x}"
    );
    // The mount answers (the connection aborted): the killed child exits and is reaped, no
    // zombie kept.
    for d in &daemons {
        let _ = Command::new("nsenter")
            .args(["-t", &d.to_string(), "-m", "umount", "-l", &m.mount])
            .stderr(Stdio::null())
            .status();
        let _ = Command::new("kill")
            .args(["-KILL", &d.to_string()])
            .stderr(Stdio::null())
            .status();
    }
    assert!(
        wait_for(Duration::from_secs(10), || children(pid, &daemons)
            .is_empty()),
        "the killed child was not reaped: {:?}",
        children(pid, &daemons)
    );
    signal(pid, "TERM");
    let st = exits_within(&mut agent, 10, "run after SIGTERM", &m);
    assert!(st.success(), "{st}: {}", m.log("stderr"));
}
