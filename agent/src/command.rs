//! Running external tools (`zpool`, `dmsetup`, `multipathd`) with a timeout.
//!
//! `zpool status` can hang for minutes on a pool with a dead device, so every command runs with a
//! deadline and is killed when it passes it, with its whole process group (a tool run through a
//! wrapper script leaves nothing behind); the sampling loop never waits on one: collectors that
//! use commands run them through a [`WorkerHandle`], on a thread of its own at the worker's own
//! interval (or, for `once` and tests stepping simulated time, inline in the poll that finds them
//! due). Tests replace the tool with captured output through [`CapturedRunner`], and whole-agent
//! tests point the configured tool path at a script that prints a fixture — the real
//! [`SystemRunner`] then runs unchanged.

pub mod at_exit;
mod dying;
mod spawned;
mod worker;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

pub use dying::{dying, reap_dying, MAX_DYING};
pub use spawned::{set_c_locale, Finished, Spawned};
pub use worker::{Worker, WorkerHandle};

/// Why a command produced no usable output.
#[derive(Debug, thiserror::Error)]
pub enum CommandError {
    /// The program is not installed (the subsystem is absent: not an error for the caller).
    #[error("{0}: not found")]
    NotFound(PathBuf),
    /// It could not be started or read.
    #[error("{program}: {source}")]
    Io {
        /// The program.
        program: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// It ran past its deadline and was killed.
    #[error("{program}: no answer within {timeout:?}, killed")]
    Timeout {
        /// The program.
        program: PathBuf,
        /// The deadline it missed.
        timeout: Duration,
    },
    /// It printed more than [`MAX_OUTPUT_BYTES`] and was killed; its output is not used.
    #[error("{program}: more than {limit} bytes of output, killed (the last good reading stays)")]
    TooMuchOutput {
        /// The program.
        program: PathBuf,
        /// The cap it passed.
        limit: usize,
    },
    /// Not started: [`MAX_DYING`] commands killed earlier have not exited yet (stuck in the
    /// kernel on a hung device); a new one would most likely hang with them.
    #[error(
        "{program}: not started: {dying} killed commands have not exited yet (a hung device?)"
    )]
    TooManyDying {
        /// The program.
        program: PathBuf,
        /// The killed commands not yet exited.
        dying: usize,
    },
    /// Not started: the agent is stopping ([`at_exit::cleanup`] ran).
    #[error("{program}: not started: the agent is stopping")]
    Stopping {
        /// The program.
        program: PathBuf,
    },
    /// It exited non-zero.
    #[error("{program}: exit status {status}: {stderr}")]
    Failed {
        /// The program.
        program: PathBuf,
        /// Its exit code (-1 when killed by a signal).
        status: i32,
        /// The first 300 bytes of its standard error.
        stderr: String,
    },
}

/// Standard output read from a command at most: 8 MiB, some ten times the `zpool status -p` of
/// a 1,000-disk pool. A tool printing more (a broken build, a loop) is killed rather than read
/// into the agent's memory (its unit allows 128 MiB).
pub const MAX_OUTPUT_BYTES: usize = 8 << 20;

/// Whether `program` can be run: an existing file when it names a path, else a file of that
/// name in a `PATH` directory.
pub fn found(program: &Path) -> bool {
    if program.components().count() > 1 {
        return program.is_file();
    }
    std::env::var_os("PATH").is_some_and(|paths| {
        std::env::split_paths(&paths)
            .any(|d| !d.as_os_str().is_empty() && d.join(program).is_file())
    })
}

/// Runs a program and returns its standard output.
pub trait CommandRunner: Send + Sync {
    /// Runs `program args…`, killing it after `timeout`.
    fn run(&self, program: &Path, args: &[&str], timeout: Duration)
        -> Result<String, CommandError>;
}

/// Runs real processes.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemRunner;

impl CommandRunner for SystemRunner {
    fn run(
        &self,
        program: &Path,
        args: &[&str],
        timeout: Duration,
    ) -> Result<String, CommandError> {
        // In a process group of its own, killed whole at the deadline: a tool run through a
        // wrapper script leaves nothing behind holding the pipe (see [`Spawned`]).
        let mut child = Spawned::start(program, args, MAX_OUTPUT_BYTES)?;
        let deadline = Instant::now() + timeout;
        let fin = loop {
            if let Some(r) = child.poll() {
                break r?;
            }
            if Instant::now() >= deadline {
                child.kill();
                return Err(child.timeout_error(timeout));
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        if fin.status != 0 {
            return Err(CommandError::Failed {
                program: program.to_owned(),
                status: fin.status,
                stderr: fin.stderr,
            });
        }
        Ok(fin.stdout)
    }
}

/// Answers from captured output, keyed by `"program arg arg"` (program by file name only).
/// For tests of collectors that use commands.
#[derive(Debug, Default, Clone)]
pub struct CapturedRunner {
    outputs: BTreeMap<String, String>,
}

impl CapturedRunner {
    /// An empty runner: every command is "not found".
    pub fn new() -> Self {
        Self::default()
    }

    /// Registers `output` as the answer to `command` (e.g. `"zpool status -p"`).
    pub fn with(mut self, command: &str, output: impl Into<String>) -> Self {
        self.outputs.insert(command.to_owned(), output.into());
        self
    }
}

impl CommandRunner for CapturedRunner {
    fn run(
        &self,
        program: &Path,
        args: &[&str],
        _timeout: Duration,
    ) -> Result<String, CommandError> {
        let name = program
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default();
        let mut key = name.to_owned();
        for a in args {
            key.push(' ');
            key.push_str(a);
        }
        self.outputs
            .get(&key)
            .cloned()
            .ok_or_else(|| CommandError::NotFound(program.to_owned()))
    }
}

/// For tests: a process its parent cannot reap for a while after it is killed, as one stuck in
/// the kernel on a hung disk.
#[cfg(test)]
pub(crate) mod held {
    use std::io::BufRead;
    use std::process::{Child, ChildStdin, Command, Stdio};

    /// Holds a process traced (`PTRACE_SEIZE`) until its standard input closes.
    const TRACER: &str = r#"
import ctypes, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.ptrace.restype = ctypes.c_long
PTRACE_SEIZE = 0x4206
if libc.ptrace(ctypes.c_long(PTRACE_SEIZE), ctypes.c_long(int(sys.argv[1])), None, None) != 0:
    sys.exit("PTRACE_SEIZE: errno %d" % ctypes.get_errno())
print("seized", flush=True)
sys.stdin.read()
"#;

    /// A process held traced by a `python3` tracer that never waits for it: once killed it is
    /// a zombie only the tracer may reap, so its parent cannot reap it (and a blocking `wait`
    /// blocks) until the tracer lets go, when this is dropped.
    pub(crate) struct Held {
        tracer: Child,
        stdin: Option<ChildStdin>,
    }

    impl Held {
        /// Starts holding `pid` (a child of this process); panics when it cannot.
        pub(crate) fn new(pid: u32) -> Self {
            let mut tracer = Command::new("python3")
                .args(["-c", TRACER, &pid.to_string()])
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .spawn()
                .expect("python3 runs");
            let mut line = String::new();
            let out = tracer.stdout.take().expect("piped");
            std::io::BufReader::new(out)
                .read_line(&mut line)
                .expect("the tracer answers");
            assert_eq!(line.trim(), "seized", "the tracer holds {pid}");
            let stdin = tracer.stdin.take();
            Self { tracer, stdin }
        }
    }

    impl Drop for Held {
        fn drop(&mut self) {
            self.stdin = None;
            let _ = self.tracer.wait();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::{mpsc, Arc};

    #[test]
    fn runs_and_captures_stdout() {
        let out = SystemRunner.run(
            Path::new("/bin/sh"),
            &["-c", "echo hello"],
            Duration::from_secs(5),
        );
        assert_eq!(out.ok().as_deref(), Some("hello\n"));
    }

    #[test]
    fn missing_program_is_not_found() {
        let r = SystemRunner.run(Path::new("/nonexistent/zpool"), &[], Duration::from_secs(1));
        assert!(matches!(r, Err(CommandError::NotFound(_))));
    }

    #[test]
    fn nonzero_exit_is_failed_with_stderr() {
        let r = SystemRunner.run(
            Path::new("/bin/sh"),
            &["-c", "echo broken >&2; echo badly >&2; exit 3"],
            Duration::from_secs(5),
        );
        match r {
            Err(CommandError::Failed { status, stderr, .. }) => {
                assert_eq!(status, 3);
                assert_eq!(stderr, "broken / badly");
            }
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn a_gigabyte_of_output_is_cut_off_not_read() {
        let r = SystemRunner.run(
            Path::new("sh"),
            &["-c", "yes 'pool: tank' | head -c 1073741824"],
            Duration::from_secs(60),
        );
        assert!(
            matches!(r, Err(CommandError::TooMuchOutput { limit, .. }) if limit == MAX_OUTPUT_BYTES),
            "{r:?}"
        );
        // just under the cap is read whole
        let r = SystemRunner
            .run(
                Path::new("sh"),
                &["-c", &format!("head -c {} /dev/zero", MAX_OUTPUT_BYTES)],
                Duration::from_secs(60),
            )
            .expect("a full read");
        assert_eq!(r.len(), MAX_OUTPUT_BYTES);
    }

    /// A command's pipes are read by its owner's polls: no thread is started for it (two a
    /// call were most of what a smartctl call cost the agent). Its output, several times the
    /// pipe's 64 KiB, is read whole and its standard error kept.
    #[test]
    fn a_command_starts_no_thread_and_its_output_is_read_by_the_polls() {
        let readers = || {
            std::fs::read_dir("/proc/self/task")
                .expect("tasks")
                .filter_map(|e| std::fs::read_to_string(e.ok()?.path().join("comm")).ok())
                // the kernel keeps 15 bytes of a thread's name: `storwatch-cmd-o`
                .filter(|c| c.starts_with("storwatch-cmd"))
                .count()
        };
        let mut s = Spawned::start(
            Path::new("/bin/sh"),
            &[
                "-c",
                "echo oops >&2; sleep 0.3; head -c 300000 /dev/zero | tr '\\0' x",
            ],
            1 << 20,
        )
        .expect("started");
        // (a thread names itself once it runs: looked for over 100 ms, while the command sleeps)
        for _ in 0..20 {
            assert_eq!(readers(), 0, "a thread reads the command's output");
            std::thread::sleep(Duration::from_millis(5));
        }
        let fin = poll_until(&mut s, Duration::from_secs(10))
            .expect("answered")
            .expect("read");
        assert_eq!(fin.stdout.len(), 300_000);
        assert!(fin.stdout.bytes().all(|b| b == b'x'));
        assert_eq!(fin.stderr, "oops");
        assert_eq!(fin.status, 0);
    }

    #[test]
    fn hung_program_is_killed_at_the_deadline() {
        let r = SystemRunner.run(Path::new("/bin/sleep"), &["30"], Duration::from_millis(200));
        assert!(matches!(r, Err(CommandError::Timeout { .. })));
    }

    /// Polls until `s` answers or `within` passes.
    fn poll_until(s: &mut Spawned, within: Duration) -> Option<Result<Finished, CommandError>> {
        let deadline = Instant::now() + within;
        while Instant::now() < deadline {
            if let Some(r) = s.poll() {
                return Some(r);
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        None
    }

    #[test]
    fn spawned_hands_back_output_and_a_nonzero_status() {
        let mut s = Spawned::start(
            Path::new("/bin/sh"),
            &["-c", "echo '{\"a\":1}'; echo warned >&2; exit 64"],
            1024,
        )
        .expect("started");
        let r = poll_until(&mut s, Duration::from_secs(10)).expect("finished");
        assert_eq!(
            r.expect("ran"),
            Finished {
                status: 64,
                stdout: "{\"a\":1}\n".into(),
                stderr: "warned".into()
            }
        );
        assert!(s.poll().is_none(), "answers once");
        assert!(matches!(
            Spawned::start(Path::new("/nonexistent/smartctl"), &[], 10),
            Err(CommandError::NotFound(_))
        ));
    }

    #[test]
    fn spawned_in_a_directory_runs_there_and_a_missing_one_is_no_missing_program() {
        let dir = tempfile::tempdir().expect("tempdir");
        let dir = dir.path().canonicalize().expect("canonical");
        let mut s =
            Spawned::start_in(Path::new("/bin/pwd"), &["-P"], Some(&dir), 1024).expect("started");
        let r = poll_until(&mut s, Duration::from_secs(10)).expect("finished");
        assert_eq!(r.expect("ran").stdout, format!("{}\n", dir.display()));
        // A relative path with a directory in it is found from the working directory.
        std::fs::create_dir(dir.join("bin")).expect("mkdir");
        std::fs::copy("/bin/pwd", dir.join("bin/here")).expect("copy");
        let mut s = Spawned::start_in(Path::new("bin/here"), &[], Some(&dir), 1024)
            .expect("started from the directory");
        let r = poll_until(&mut s, Duration::from_secs(10)).expect("finished");
        assert_eq!(r.expect("ran").status, 0);
        let gone = dir.join("gone");
        match Spawned::start_in(Path::new("/bin/pwd"), &[], Some(&gone), 1024) {
            Err(CommandError::Io { program, source }) => {
                assert_eq!(program, Path::new("/bin/pwd"));
                assert!(source.to_string().contains("gone"), "{source}");
            }
            other => panic!("{other:?}"),
        }
    }

    /// Whether process `pid` exists (a zombie counts).
    fn alive(pid: u32) -> bool {
        Path::new(&format!("/proc/{pid}")).exists()
    }

    #[test]
    fn killing_a_spawned_script_kills_what_it_started() {
        let dir = tempfile::tempdir().expect("tempdir");
        let pidfile = dir.path().join("pid");
        // The shell waits on a sleep that holds the output pipe: killing the shell alone
        // would leave the sleep, and the thread reading the pipe, for 1000 s.
        let script = format!("sleep 1000 & echo $! > {}; wait", pidfile.display());
        let mut s = Spawned::start(Path::new("/bin/sh"), &["-c", &script], 1024).expect("started");
        let deadline = Instant::now() + Duration::from_secs(10);
        let sleep_pid = loop {
            if let Some(p) = std::fs::read_to_string(&pidfile)
                .ok()
                .and_then(|t| t.trim().parse::<u32>().ok())
            {
                break p;
            }
            assert!(
                Instant::now() < deadline,
                "the script never started its sleep"
            );
            std::thread::sleep(Duration::from_millis(5));
        };
        assert!(s.poll().is_none(), "still running");
        s.kill();
        let deadline = Instant::now() + Duration::from_secs(10);
        while alive(sleep_pid) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(
            !alive(sleep_pid),
            "the sleep the script started was killed too"
        );
        assert!(s.poll().is_none(), "a killed command answers nothing");
    }

    #[test]
    fn a_spawned_flood_is_cut_at_its_limit() {
        let mut s = Spawned::start(
            Path::new("/bin/sh"),
            &["-c", "yes | head -c 2147483648"],
            1 << 20,
        )
        .expect("started");
        let r = poll_until(&mut s, Duration::from_secs(30)).expect("answered");
        assert!(
            matches!(r, Err(CommandError::TooMuchOutput { limit, .. }) if limit == 1 << 20),
            "{r:?}"
        );
    }

    #[test]
    fn a_hung_wrapper_script_is_killed_with_what_it_started() {
        let dir = tempfile::tempdir().expect("tempdir");
        let pidfile = dir.path().join("pid");
        let script = format!("sleep 1000 & echo $! > {}; wait", pidfile.display());
        let r = SystemRunner.run(
            Path::new("/bin/sh"),
            &["-c", &script],
            Duration::from_millis(500),
        );
        assert!(matches!(r, Err(CommandError::Timeout { .. })), "{r:?}");
        let pid = std::fs::read_to_string(&pidfile).expect("the script ran");
        let deadline = Instant::now() + Duration::from_secs(10);
        while alive(pid.trim().parse().expect("a pid")) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(
            !alive(pid.trim().parse().expect("a pid")),
            "the script's sleep outlived the timeout"
        );
    }

    /// The state letter of process `pid` (`Z` for a zombie), `None` once it is reaped.
    fn state(pid: u32) -> Option<char> {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        stat.rsplit_once(')')?.1.trim_start().chars().next()
    }

    #[test]
    fn an_exited_command_stays_unreaped_while_its_group_may_be_signalled() {
        let dir = tempfile::tempdir().expect("tempdir");
        let pidfile = dir.path().join("pid");
        // The shell exits at once; the sleep it leaves holds the output pipe.
        let script = format!("sleep 1000 & echo $! > {}; exit 0", pidfile.display());
        let mut s = Spawned::start(Path::new("/bin/sh"), &["-c", &script], 1024).expect("started");
        let leader = s.id();
        let deadline = Instant::now() + Duration::from_secs(10);
        while state(leader) != Some('Z') && Instant::now() < deadline {
            assert!(s.poll().is_none(), "the pipe is still held");
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(s.poll().is_none(), "the pipe is still held");
        // Polled after its exit and still a zombie: its id (the group's) is not reused before
        // the kill below signals the group.
        assert_eq!(
            state(leader),
            Some('Z'),
            "the exited leader is left unreaped"
        );
        let sleep_pid: u32 = std::fs::read_to_string(&pidfile)
            .expect("the script ran")
            .trim()
            .parse()
            .expect("a pid");
        s.kill();
        let deadline = Instant::now() + Duration::from_secs(10);
        while (alive(sleep_pid) || alive(leader)) && Instant::now() < deadline {
            reap_dying();
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(!alive(sleep_pid), "the helper holding the pipe was killed");
        assert!(!alive(leader), "the leader was reaped");
    }

    #[test]
    fn kill_does_not_wait_for_a_command_that_cannot_be_reaped_yet() {
        let mut s = Spawned::start(Path::new("sleep"), &["1000"], 1024).expect("started");
        let pid = s.id();
        let held = held::Held::new(pid);
        // Let the tracer go after 10 s whatever happens, so that a kill that waits ends.
        let released = Arc::new(AtomicBool::new(false));
        let (release, release_rx) = mpsc::channel::<()>();
        let releaser = {
            let released = Arc::clone(&released);
            std::thread::spawn(move || {
                let _ = release_rx.recv_timeout(Duration::from_secs(10));
                released.store(true, Ordering::SeqCst);
                drop(held);
            })
        };
        s.kill();
        assert!(
            !released.load(Ordering::SeqCst),
            "kill() returned only once the command could be reaped"
        );
        assert!(alive(pid), "the command is not reaped yet");
        assert!(dying() >= 1, "it is counted among the dying");
        assert!(s.poll().is_none(), "a killed command answers nothing");
        let _ = release.send(());
        releaser.join().expect("released");
        // Later polls reap it: no zombie is left behind.
        let deadline = Instant::now() + Duration::from_secs(10);
        while alive(pid) && Instant::now() < deadline {
            reap_dying();
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(!alive(pid), "reaped by a later poll, no zombie left");
        drop(s);
    }

    #[test]
    fn captured_runner_answers_by_command_line() {
        let r = CapturedRunner::new().with("zpool status -p", "pool: tank\n");
        let out = r.run(
            Path::new("/sbin/zpool"),
            &["status", "-p"],
            Duration::from_secs(1),
        );
        assert_eq!(out.ok().as_deref(), Some("pool: tank\n"));
        assert!(r
            .run(Path::new("zpool"), &["list"], Duration::from_secs(1))
            .is_err());
    }

    /// Counts its runs; due every `interval_s`; tells the test when it is dropped.
    struct Every {
        interval_s: f64,
        next_s: f64,
        runs: u32,
        _alive: mpsc::Sender<()>,
    }

    impl Worker for Every {
        type Output = (u32, bool);

        fn run_due(&mut self, now_s: f64, woken: bool) -> Option<(u32, bool)> {
            if !woken && now_s < self.next_s {
                return None;
            }
            self.runs += 1;
            self.next_s = now_s + self.interval_s;
            Some((self.runs, woken))
        }

        fn next_due_s(&self) -> f64 {
            self.next_s
        }
    }

    fn every(interval_s: f64) -> (Every, mpsc::Receiver<()>) {
        let (tx, rx) = mpsc::channel();
        let job = Every {
            interval_s,
            next_s: 0.0,
            runs: 0,
            _alive: tx,
        };
        (job, rx)
    }

    #[test]
    fn inline_worker_runs_what_is_due_by_the_callers_clock() {
        let (job, _alive) = every(10.0);
        let mut w = WorkerHandle::inline(job);
        assert!(w.is_inline());
        let mut out = Vec::new();
        assert!(w.take(0.0, &mut out));
        assert!(w.take(9.9, &mut out));
        assert_eq!(out, [(1, false)]);
        w.wake();
        assert!(w.take(9.95, &mut out));
        assert!(w.take(10.0, &mut out), "a wake-up counts once");
        assert!(w.take(19.95, &mut out));
        assert_eq!(out, [(1, false), (2, true), (3, false)]);
    }

    /// A job waiting on its thread for a command that ignores SIGTERM and never answers, up to
    /// a deadline of its own (as the RAID controller monitor waits for storcli): dropping the
    /// worker kills the command at once, not when the job's deadline passes.
    struct Hangs {
        pidfile: PathBuf,
        started: mpsc::Sender<()>,
    }

    impl Worker for Hangs {
        type Output = ();

        fn run_due(&mut self, _now_s: f64, _woken: bool) -> Option<()> {
            let script = format!(
                "trap '' TERM; sleep 1000 & echo \"$$ $!\" > {}; wait",
                self.pidfile.display()
            );
            let mut s = Spawned::start(Path::new("/bin/sh"), &["-c", &script], 1024).ok()?;
            let _ = self.started.send(());
            let deadline = Instant::now() + Duration::from_secs(60);
            while Instant::now() < deadline {
                if s.poll().is_some() {
                    return Some(());
                }
                std::thread::sleep(Duration::from_millis(10));
            }
            None
        }

        fn next_due_s(&self) -> f64 {
            f64::INFINITY
        }
    }

    #[test]
    fn dropping_a_worker_kills_the_commands_its_thread_waits_for() {
        let dir = tempfile::tempdir().expect("tempdir");
        let pidfile = dir.path().join("pids");
        let (started, started_rx) = mpsc::channel();
        let w = WorkerHandle::spawn(
            "test-hangs",
            Hangs {
                pidfile: pidfile.clone(),
                started,
            },
        )
        .expect("thread");
        started_rx
            .recv_timeout(Duration::from_secs(10))
            .expect("the command started");
        let deadline = Instant::now() + Duration::from_secs(10);
        let pids: Vec<u32> = loop {
            let pids: Vec<u32> = std::fs::read_to_string(&pidfile)
                .unwrap_or_default()
                .split_whitespace()
                .filter_map(|p| p.parse().ok())
                .collect();
            if pids.len() == 2 || Instant::now() > deadline {
                break pids;
            }
            std::thread::sleep(Duration::from_millis(5));
        };
        assert_eq!(pids.len(), 2, "the script and its sleep");
        let t = Instant::now();
        drop(w);
        assert!(t.elapsed() < Duration::from_millis(500), "the drop waited");
        let running = |p: u32| state(p).is_some_and(|s| s != 'Z');
        let deadline = Instant::now() + Duration::from_secs(5);
        while pids.iter().any(|p| running(*p)) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        let left: Vec<u32> = pids.iter().copied().filter(|p| running(*p)).collect();
        for p in &left {
            let _ = std::process::Command::new("kill")
                .args(["-KILL", &p.to_string()])
                .status();
        }
        assert!(
            left.is_empty(),
            "still running 5 s after the drop: {left:?}"
        );
    }

    #[test]
    fn thread_worker_answers_on_its_own_and_ends_when_dropped() {
        let (job, alive) = every(3600.0);
        let mut w = WorkerHandle::spawn("test-commands", job).expect("thread");
        assert!(!w.is_inline());
        let mut out = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(10);
        while out.is_empty() && Instant::now() < deadline {
            assert!(w.take(0.0, &mut out));
            std::thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(out, [(1, false)], "the first run is due at once");
        // The next is an hour away: only a wake-up brings it now.
        w.wake();
        while out.len() < 2 && Instant::now() < deadline {
            assert!(w.take(0.0, &mut out));
            std::thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(out, [(1, false), (2, true)]);
        drop(w);
        assert_eq!(
            alive.recv_timeout(Duration::from_secs(10)),
            Err(mpsc::RecvTimeoutError::Disconnected),
            "the thread ended and dropped its job"
        );
    }
}
