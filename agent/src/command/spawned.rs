//! One command started and not waited for ([`Spawned`]): its own process group, non-blocking
//! pipes read at each poll, a cap on what it may print, and what it left when it ran to its end
//! ([`Finished`]).

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use super::dying::{keep_dying, reap_dying, MAX_DYING};
use super::{at_exit, CommandError};

/// What a command that ran to its end left: its exit status and what it printed. A tool whose
/// exit status is a bit mask with output worth reading either way (`smartctl`) is run through
/// [`Spawned`], which hands both back instead of calling a non-zero status a failure.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finished {
    /// Its exit code (-1 when it was ended by a signal).
    pub status: i32,
    /// Its standard output, lossily decoded.
    pub stdout: String,
    /// The first 300 characters of its standard error, lines joined with ` / `.
    pub stderr: String,
}

/// A command started and not waited for: its owner polls it ([`Spawned::poll`]) and kills it
/// ([`Spawned::kill`]) when it passes the owner's deadline, so that one thread can keep several
/// running and none of them can hold it up.
///
/// The command runs in a process group of its own, and killing it kills the group: a tool
/// started through a wrapper script (or one that forks helpers) leaves no child behind holding
/// the output pipe open. Its pipes are non-blocking and read by each [`Spawned::poll`] (no
/// thread per command: starting two threads for every call was most of what a call cost the
/// agent); between polls a command whose output outgrows the pipe (64 KiB) waits for the next
/// one. Standard output is read up to `limit` bytes; past that the group is killed and the run
/// is [`CommandError::TooMuchOutput`]. Standard error is kept to its first 4 KiB, the rest read
/// and dropped. Dropping a `Spawned` that has not finished kills it.
#[derive(Debug)]
pub struct Spawned {
    program: PathBuf,
    child: std::process::Child,
    limit: usize,
    /// Standard output, until its end was read (then `out_eof`) or the command was killed.
    stdout: Option<std::process::ChildStdout>,
    out: Vec<u8>,
    out_eof: bool,
    /// More than `limit` bytes were printed.
    overflowed: bool,
    stderr: Option<std::process::ChildStderr>,
    err: Vec<u8>,
    err_eof: bool,
    /// The command has exited: seen with `WNOWAIT`, so that it stays a zombie, unreaped, and
    /// its process id (the group's id) cannot be given to another process until `done`.
    exited: bool,
    /// It answered or was killed; it is reaped (or left to [`reap_dying`]).
    done: bool,
}

impl Spawned {
    /// Starts `program args…` with standard input closed, in a new process group.
    pub fn start(program: &Path, args: &[&str], limit: usize) -> Result<Self, CommandError> {
        Self::start_in(program, args, None, limit)
    }

    /// [`Spawned::start`], in working directory `dir` when given (set by the runner, so that no
    /// shell is started only to change directory). A relative `program` with a directory in it
    /// is found from `dir`, not from the agent's directory. A `dir` that is not there is an
    /// [`CommandError::Io`] naming it, not a missing program.
    pub fn start_in(
        program: &Path,
        args: &[&str],
        dir: Option<&Path>,
        limit: usize,
    ) -> Result<Self, CommandError> {
        use std::os::unix::process::CommandExt;
        let dying = reap_dying();
        if dying >= MAX_DYING {
            return Err(CommandError::TooManyDying {
                program: program.to_owned(),
                dying,
            });
        }
        if !at_exit::begin_start() {
            return Err(CommandError::Stopping {
                program: program.to_owned(),
            });
        }
        let mut cmd = Command::new(program);
        cmd.args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0);
        if let Some(dir) = dir {
            cmd.current_dir(dir);
        }
        c_locale(&mut cmd);
        let mut child = match cmd.spawn() {
            Ok(c) => c,
            Err(e)
                if e.kind() == std::io::ErrorKind::NotFound && dir.is_some_and(|d| !d.is_dir()) =>
            {
                at_exit::start_failed();
                let dir = dir.map_or_else(String::new, |d| d.display().to_string());
                return Err(CommandError::Io {
                    program: program.to_owned(),
                    source: std::io::Error::new(e.kind(), format!("working directory {dir}: {e}")),
                });
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                at_exit::start_failed();
                return Err(CommandError::NotFound(program.to_owned()));
            }
            Err(source) => {
                at_exit::start_failed();
                return Err(CommandError::Io {
                    program: program.to_owned(),
                    source,
                });
            }
        };
        // Registered at once, so that the agent's ending kills it (see [`at_exit`]); refused
        // once the agent is stopping, and then killed here.
        let pid = i32::try_from(child.id())
            .ok()
            .and_then(rustix::process::Pid::from_raw);
        let Some(pid) = pid else {
            // (a child's id is a positive i32: not reached)
            at_exit::start_failed();
            let _ = child.kill();
            return Err(CommandError::Io {
                program: program.to_owned(),
                source: std::io::Error::other("no process id"),
            });
        };
        if !at_exit::register(pid, program) {
            at_exit::signal_kill(pid);
            keep_dying(pid, program);
            return Err(CommandError::Stopping {
                program: program.to_owned(),
            });
        }
        let stdout = child.stdout.take();
        let stderr = child.stderr.take();
        let mut s = Self {
            program: program.to_owned(),
            child,
            limit,
            stdout,
            // a smartctl `-a` document is 5–60 kB: one allocation for most
            out: Vec::with_capacity(limit.saturating_add(1).min(64 << 10)),
            out_eof: false,
            overflowed: false,
            stderr,
            err: Vec::new(),
            err_eof: false,
            exited: false,
            done: false,
        };
        let nonblocking = |fd: rustix::fd::BorrowedFd<'_>| -> std::io::Result<()> {
            let flags = rustix::fs::fcntl_getfl(fd)?;
            rustix::fs::fcntl_setfl(fd, flags | rustix::fs::OFlags::NONBLOCK)?;
            Ok(())
        };
        use std::os::fd::AsFd;
        let set = match (&s.stdout, &s.stderr) {
            (Some(o), Some(e)) => nonblocking(o.as_fd()).and_then(|()| nonblocking(e.as_fd())),
            _ => Err(std::io::Error::other("no pipe to read its output")),
        };
        if let Err(source) = set {
            s.kill();
            return Err(CommandError::Io {
                program: program.to_owned(),
                source,
            });
        }
        Ok(s)
    }

    /// Reads what the command printed since the last call, without blocking: standard output
    /// up to one byte past the limit (then `overflowed`), standard error's first 4 KiB (the
    /// rest dropped, so a chatty tool does not block on a full pipe).
    fn drain(&mut self) {
        use std::io::ErrorKind::{Interrupted, WouldBlock};
        if !self.out_eof && !self.overflowed {
            match &mut self.stdout {
                Some(s) => {
                    let room = (self.limit as u64 + 1).saturating_sub(self.out.len() as u64);
                    match s.by_ref().take(room).read_to_end(&mut self.out) {
                        Ok(_) if self.out.len() > self.limit => {
                            self.overflowed = true;
                            self.out = Vec::new();
                        }
                        Ok(_) => self.out_eof = true,
                        Err(e) if matches!(e.kind(), WouldBlock | Interrupted) => {}
                        Err(_) => self.out_eof = true, // as a closed pipe
                    }
                }
                None => self.out_eof = true,
            }
        }
        if !self.err_eof {
            match &mut self.stderr {
                Some(s) => {
                    let mut scratch = [0u8; 4096];
                    loop {
                        match s.read(&mut scratch) {
                            Ok(0) => {
                                self.err_eof = true;
                                break;
                            }
                            Ok(n) => {
                                let keep = n.min(4096usize.saturating_sub(self.err.len()));
                                self.err.extend_from_slice(&scratch[..keep]);
                            }
                            Err(e) if e.kind() == Interrupted => {}
                            Err(e) if e.kind() == WouldBlock => break,
                            Err(_) => {
                                self.err_eof = true;
                                break;
                            }
                        }
                    }
                }
                None => self.err_eof = true,
            }
        }
    }

    /// The process id of the command (and of its process group).
    pub fn id(&self) -> u32 {
        self.child.id()
    }

    /// `None` while it runs; its result once it has exited and its output is read, or once it
    /// printed more than the limit (then it is killed). Never blocks. Also reaps the killed
    /// commands that have exited since ([`reap_dying`]).
    pub fn poll(&mut self) -> Option<Result<Finished, CommandError>> {
        reap_dying();
        if self.done {
            return None;
        }
        if !self.exited {
            use rustix::process::{waitid, WaitId, WaitIdOptions};
            let Some(pid) = self.pid() else {
                self.kill();
                return Some(Err(CommandError::Io {
                    program: self.program.clone(),
                    source: std::io::Error::other("no process id"),
                }));
            };
            let opts = WaitIdOptions::EXITED | WaitIdOptions::NOHANG | WaitIdOptions::NOWAIT;
            match waitid(WaitId::Pid(pid), opts) {
                Ok(Some(_)) => self.exited = true,
                Ok(None) => {}
                Err(e) => {
                    // No child of ours any more: reaped by the agent's cleanup as it stops.
                    let taken = !at_exit::is_live(pid);
                    self.kill();
                    return Some(Err(if taken {
                        CommandError::Stopping {
                            program: self.program.clone(),
                        }
                    } else {
                        CommandError::Io {
                            program: self.program.clone(),
                            source: e.into(),
                        }
                    }));
                }
            }
        }
        // Read after looking at its exit, so that an exited command's output is read to its end
        // in this same poll.
        self.drain();
        if self.overflowed {
            self.kill();
            return Some(Err(CommandError::TooMuchOutput {
                program: self.program.clone(),
                limit: self.limit,
            }));
        }
        if !self.exited {
            return None;
        }
        // Exited; its output is complete when the pipe is closed (a helper it left behind may
        // still hold it: then this waits for the owner's deadline like a hung command).
        if !(self.out_eof && self.err_eof) {
            return None;
        }
        self.done = true;
        if let Some(pid) = self.pid() {
            if !at_exit::unregister(pid) {
                // The agent is stopping: killed, and reaped, by its cleanup.
                self.stdout = None;
                self.stderr = None;
                return Some(Err(CommandError::Stopping {
                    program: self.program.clone(),
                }));
            }
        }
        // Exited (seen above): this reaps the zombie at once.
        let status = self.child.try_wait().ok().flatten();
        if status.is_none() {
            if let Some(pid) = self.pid() {
                keep_dying(pid, &self.program);
            }
        }
        self.stdout = None;
        self.stderr = None;
        let out = std::mem::take(&mut self.out);
        let err = std::mem::take(&mut self.err);
        let status = status.and_then(|s| s.code()).unwrap_or(-1);
        Some(Ok(Finished {
            status,
            // valid UTF-8 (the rule) is moved, not copied
            stdout: String::from_utf8(out)
                .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned()),
            stderr: short_stderr(&err),
        }))
    }

    /// Kills the command's whole process group, without waiting for it: a command stuck in the
    /// kernel on a hung device does not end at `SIGKILL` until the kernel gives up on the
    /// device, and the caller (the drive monitor's one thread, a collector's deadline) must not
    /// wait for that. A command not ended yet is kept to be reaped by later polls
    /// ([`reap_dying`], called by [`Spawned::start`] and [`Spawned::poll`]). Its pipes are
    /// closed.
    pub fn kill(&mut self) {
        if self.done {
            return;
        }
        self.done = true;
        self.stdout = None;
        self.stderr = None;
        self.out = Vec::new();
        let Some(pid) = self.pid() else {
            return;
        };
        // The command is unreaped until `done` (its exit is only looked at with `WNOWAIT`), so
        // its id, the group's id, is still ours: the kernel does not hand the id of a process
        // that is not reaped to another process. Killing the group also ends a helper left
        // holding the pipe after the command itself exited. Not when the agent's cleanup took
        // it: that killed it, and may have reaped it.
        if !at_exit::kill_registered(pid) {
            return;
        }
        match rustix::process::waitpid(Some(pid), rustix::process::WaitOptions::NOHANG) {
            Ok(Some(_)) | Err(_) => {}
            Ok(None) => keep_dying(pid, &self.program),
        }
        reap_dying();
    }

    /// The command's id as a [`rustix::process::Pid`].
    fn pid(&self) -> Option<rustix::process::Pid> {
        i32::try_from(self.child.id())
            .ok()
            .and_then(rustix::process::Pid::from_raw)
    }

    /// The error a caller reports when it kills the command at its deadline.
    pub fn timeout_error(&self, timeout: Duration) -> CommandError {
        CommandError::Timeout {
            program: self.program.clone(),
            timeout,
        }
    }
}

impl Drop for Spawned {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Whether the agent's own environment already says `LC_ALL=C`.
fn has_c_locale() -> bool {
    std::env::var_os("LC_ALL").is_some_and(|v| v == "C")
}

/// Every command runs with `LC_ALL=C`, so that what it prints (numbers, messages) is in the
/// form the parsers read. Asking `Command` for one variable makes std copy the agent's whole
/// environment into a map, and from it a new array, for every child (some 1,900 instructions
/// a variable, docs/performance.md); a command that inherits the environment as it is costs none of
/// that. So the agent puts `LC_ALL=C` into its own environment once, at start
/// ([`set_c_locale`]), and a command is given the variable only when it is not there
/// (the tests' processes, a library user).
fn c_locale(cmd: &mut Command) {
    if !has_c_locale() {
        cmd.env("LC_ALL", "C");
    }
}

/// Puts `LC_ALL=C` into the agent's own environment, which every command it starts inherits
/// ([`Spawned`]): the environment each child gets is the one it got when the variable was
/// added per child. To be called at the start of `main`, before any thread exists: changing
/// the environment while another thread reads it (`getenv`) is undefined behaviour. The agent
/// calls `setlocale` nowhere, so its own formatting does not change.
pub fn set_c_locale() {
    if !has_c_locale() {
        std::env::set_var("LC_ALL", "C");
    }
}

/// A tool's standard error as one log line: its first 300 characters, lines joined.
fn short_stderr(err: &[u8]) -> String {
    let mut stderr = String::from_utf8_lossy(err).into_owned();
    stderr.truncate(
        stderr
            .char_indices()
            .nth(300)
            .map_or(stderr.len(), |(i, _)| i),
    );
    stderr
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join(" / ")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The environment a command printed (`env`), sorted: the order of the variables is not
    /// part of it.
    fn printed_env(fin: &Finished) -> Vec<String> {
        let mut v: Vec<String> = fin.stdout.lines().map(str::to_owned).collect();
        v.sort();
        v
    }

    /// Run by [`a_command_gets_the_environment_it_got_before`] in a process of its own, with the
    /// environment that test gives it: a command started by [`Spawned`] prints the same
    /// environment as one started as every command was before, `LC_ALL=C` added per child.
    #[test]
    #[ignore = "run by a_command_gets_the_environment_it_got_before, in a process of its own"]
    fn env_probe() {
        let Some(mode) = std::env::var_os("STORWATCH_ENV_PROBE") else {
            return;
        };
        if mode == "set" {
            // as `main` does (the test harness runs this test on a thread of its own while its
            // main thread waits: nothing else reads the environment)
            set_c_locale();
        }
        let env = Path::new("/usr/bin/env");
        let before = Command::new(env)
            .env("LC_ALL", "C")
            .output()
            .expect("env runs");
        let before = Finished {
            status: 0,
            stdout: String::from_utf8(before.stdout).expect("utf-8"),
            stderr: String::new(),
        };
        let mut child = Spawned::start(env, &[], 1 << 20).expect("env starts");
        let now = loop {
            if let Some(r) = child.poll() {
                break r.expect("env ran");
            }
            std::thread::sleep(Duration::from_millis(5));
        };
        assert_eq!(printed_env(&now), printed_env(&before));
        assert!(printed_env(&now).contains(&"LC_ALL=C".to_owned()));
        // With LC_ALL=C already the agent's, the command asks std for no change: std hands
        // the child the environment as it is, with no copy.
        let mut cmd = Command::new(env);
        c_locale(&mut cmd);
        let asked: Vec<_> = cmd.get_envs().collect();
        if mode == "set" || std::env::var_os("LC_ALL").is_some_and(|v| v == "C") {
            assert!(asked.is_empty(), "{asked:?}");
        } else {
            assert_eq!(asked.len(), 1, "{asked:?}");
        }
        println!("probe {mode:?}: {} variables", printed_env(&now).len());
    }

    /// The environment a command gets, with `LC_ALL` absent from the agent's, another locale,
    /// `C` already, and set by [`set_c_locale`] as `main` does: each time the agent's own with
    /// `LC_ALL=C`, as when the variable was added for every child.
    #[test]
    fn a_command_gets_the_environment_it_got_before() {
        let exe = std::env::current_exe().expect("test binary");
        for (mode, lc_all) in [
            ("absent", None),
            ("other", Some("de_DE.UTF-8")),
            ("c", Some("C")),
            ("set", None),
        ] {
            let mut probe = Command::new(&exe);
            probe
                .args([
                    "--exact",
                    "command::spawned::tests::env_probe",
                    "--ignored",
                    "--nocapture",
                    "--test-threads=1",
                ])
                .env("STORWATCH_ENV_PROBE", mode)
                .env("STORWATCH_ENV_PROBE_EXTRA", "a=b c\tdé")
                .env_remove("LC_ALL");
            if let Some(v) = lc_all {
                probe.env("LC_ALL", v);
            }
            let out = probe.output().expect("probe runs");
            let said = String::from_utf8_lossy(&out.stdout);
            assert!(
                out.status.success() && said.contains("1 passed") && said.contains("probe"),
                "{mode}: {said}\n{}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }
}
