//! What the agent undoes on its way out: the commands still running, and the private
//! directories its monitors made.
//!
//! A command runs in a process group of its own ([`super::Spawned`]), so nothing the agent's
//! own ending does reaches it: a `smartctl` hung on a dead disk would go on running after the
//! agent exits (and under systemd hold the stop for the whole `TimeoutStopSec`), and a monitor
//! thread's destructors do not run at exit. So every command started and not yet answered or
//! killed is registered here, and [`cleanup`] kills every registered group with `SIGKILL`, once,
//! on every way out: the end of `run` (SIGTERM, SIGINT), the end of `once` and its signals, an
//! error returned from `main`, and a panic. From then on no command starts
//! ([`super::CommandError::Stopping`]). The directories registered with [`remove_at_exit`]
//! (storcli's private working directory) are removed after the kill.
//!
//! The lock is held while a registered group is signalled: a command's id is the id of its
//! group, and it stays ours (the command unreaped) for as long as it is registered, so neither
//! [`cleanup`] nor [`super::Spawned::kill`] can signal a group whose id was handed to another
//! process since.

use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};
use std::thread::ThreadId;
use std::time::{Duration, Instant};

use rustix::process::Pid;

/// At exit, the killed commands are waited for at most this long (polled every 10 ms), so that
/// none is left as a zombie or outlives the agent by more than its own ending; one stuck in the
/// kernel on a hung device (it ends only when the kernel gives up on the device) is left with
/// `SIGKILL` pending, and the exit goes on.
pub const EXIT_WAIT: Duration = Duration::from_secs(2);

/// One command started and neither answered nor killed.
#[derive(Debug)]
struct Live {
    /// Its process id, the id of its group.
    pid: Pid,
    program: PathBuf,
    /// The thread that started it (a [`super::WorkerHandle`]'s).
    thread: ThreadId,
}

#[derive(Debug)]
struct Registry {
    /// Commands started and neither answered nor killed.
    live: Vec<Live>,
    /// Directories to remove at exit.
    dirs: Vec<PathBuf>,
    /// [`cleanup`] ran: no command starts any more.
    closed: bool,
    /// Commands being started: past [`begin_start`], not yet at [`register`]. A process
    /// forked while the agent exits would escape the kill, so [`cleanup`] waits for these.
    starting: usize,
}

static REGISTRY: Mutex<Registry> = Mutex::new(Registry {
    live: Vec::new(),
    dirs: Vec::new(),
    closed: false,
    starting: 0,
});

fn registry() -> std::sync::MutexGuard<'static, Registry> {
    REGISTRY.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Kills the process group `pid` leads, and `pid` itself should it have left the group
/// (`setsid`). Never waits.
pub(super) fn signal_kill(pid: Pid) {
    let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
    let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
}

/// Before a command is started: `false` once [`cleanup`] ran (then none is started: a
/// monitor's thread would otherwise fork one refused command after another until the process
/// ends, and the last one could outlive it). After `true`, [`register`] (or [`start_failed`])
/// must follow.
pub(super) fn begin_start() -> bool {
    let mut r = registry();
    if r.closed {
        return false;
    }
    r.starting += 1;
    true
}

/// A command announced by [`begin_start`] could not be started.
pub(super) fn start_failed() {
    let mut r = registry();
    r.starting = r.starting.saturating_sub(1);
}

/// Registers a command just started (after [`begin_start`]); `false` when [`cleanup`] ran in
/// between (the caller kills it).
pub(super) fn register(pid: Pid, program: &Path) -> bool {
    let mut r = registry();
    r.starting = r.starting.saturating_sub(1);
    if r.closed {
        return false;
    }
    r.live.push(Live {
        pid,
        program: program.to_owned(),
        thread: std::thread::current().id(),
    });
    true
}

/// Takes a command off the register before it is reaped; `false` when [`cleanup`] took it
/// (killed it and reaps it).
pub(super) fn unregister(pid: Pid) -> bool {
    let mut r = registry();
    let before = r.live.len();
    r.live.retain(|l| l.pid != pid);
    r.live.len() != before
}

/// Whether a command is registered (not taken by [`cleanup`]).
pub(super) fn is_live(pid: Pid) -> bool {
    registry().live.iter().any(|l| l.pid == pid)
}

/// Takes a command off the register and kills its group, under the lock; `false` when
/// [`cleanup`] took (and killed) it already.
pub(super) fn kill_registered(pid: Pid) -> bool {
    let mut r = registry();
    let before = r.live.len();
    r.live.retain(|l| l.pid != pid);
    if r.live.len() == before {
        return false;
    }
    signal_kill(pid);
    true
}

/// Kills the groups of the commands `thread` started that are still running, and leaves them
/// registered: the [`super::Spawned`] that owns each sees it end at its next poll and reaps it
/// (or [`cleanup`] does). For a [`super::WorkerHandle`] dropped while its thread is inside a
/// job's run (waiting for a hung command up to its timeout): the commands end at once, not
/// when the job gets back to the thread's loop. How many were signalled.
pub(super) fn kill_started_by(thread: ThreadId) -> usize {
    let r = registry();
    let mut n = 0;
    for l in r.live.iter().filter(|l| l.thread == thread) {
        signal_kill(l.pid);
        n += 1;
    }
    n
}

/// Has `dir` removed at exit (a monitor's private directory), unless [`keep_at_exit`] says
/// it is gone before.
pub fn remove_at_exit(dir: &Path) {
    let mut r = registry();
    if r.closed {
        // Too late to be cleaned up with the rest: not made.
        let _ = std::fs::remove_dir_all(dir);
        return;
    }
    r.dirs.push(dir.to_owned());
}

/// `dir` was removed by its owner: nothing to do for it at exit.
pub fn keep_at_exit(dir: &Path) {
    registry().dirs.retain(|d| d != dir);
}

/// What [`cleanup`] did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Cleaned {
    /// Commands killed (still running at exit).
    pub killed: usize,
    /// Of those and of the commands killed earlier, how many had not exited after
    /// [`EXIT_WAIT`] (stuck in the kernel).
    pub left: usize,
    /// Directories removed.
    pub dirs: usize,
}

/// Kills every command still running with its process group, removes the registered
/// directories, and waits at most `wait` for the killed commands to end; no command starts
/// after it. Safe to call more than once (the later calls find nothing to do), from any thread
/// but a signal handler.
pub fn cleanup(wait: Duration) -> Cleaned {
    let (live, dirs) = {
        let mut r = registry();
        r.closed = true;
        for l in &r.live {
            signal_kill(l.pid);
        }
        (std::mem::take(&mut r.live), std::mem::take(&mut r.dirs))
    };
    for l in &live {
        match rustix::process::waitpid(Some(l.pid), rustix::process::WaitOptions::NOHANG) {
            Ok(Some(_)) | Err(_) => {}
            Ok(None) => super::dying::keep_dying(l.pid, &l.program),
        }
    }
    // A command forked before the kill and not registered yet kills itself at `register`:
    // wait for that (a few milliseconds), so that the process does not end before it does.
    let deadline = Instant::now() + wait;
    while registry().starting > 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(1));
    }
    let mut removed = 0;
    for d in &dirs {
        if std::fs::remove_dir_all(d).is_ok() {
            removed += 1;
        }
    }
    let mut left = super::reap_dying();
    while left > 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
        left = super::reap_dying();
    }
    Cleaned {
        killed: live.len(),
        left,
        dirs: removed,
    }
}

/// [`cleanup`] with [`EXIT_WAIT`], and a log line of what it did.
pub fn cleanup_and_log() -> Cleaned {
    let c = cleanup(EXIT_WAIT);
    if c.killed > 0 {
        tracing::info!(
            "stopping: killed {} command(s) still running, with their process groups",
            c.killed
        );
    }
    if c.left > 0 {
        tracing::warn!(
            "stopping: {} killed command(s) had not exited after {EXIT_WAIT:?} (stuck on a hung device?); they end when the kernel lets them",
            c.left
        );
    }
    c
}

/// Runs [`cleanup`] when the process is about to die of a panic, before the panic's message
/// (the previous hook) is printed: with `panic = "abort"` (the release build) a panic on any
/// thread ends the process without running destructors; with unwinding, only a panic of the
/// main thread ends it (a monitor thread's panic is caught: its commands are dropped, and
/// killed, as it unwinds).
pub fn install_panic_hook() {
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let main = std::thread::current().name() == Some("main");
        if cfg!(panic = "abort") || main {
            cleanup(EXIT_WAIT);
        }
        previous(info);
    }));
}
