//! Where a collector's commands run: the [`Worker`] trait (the commands one collector runs and
//! when they are due) and the [`WorkerHandle`] that runs a worker on a thread of its own or
//! inline, in the collector's polls.

use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender, TryRecvError};
use std::time::{Duration, Instant};

use super::at_exit;

/// The commands one collector runs, and when they are due.
pub trait Worker: Send + 'static {
    /// What one run hands back to the collector.
    type Output: Send + 'static;

    /// Runs the commands due at `now_s` (seconds on the worker's clock), or whatever a wake-up
    /// asks for when `woken`; `None` when nothing was due.
    fn run_due(&mut self, now_s: f64, woken: bool) -> Option<Self::Output>;

    /// When the next command is due, on the same clock.
    fn next_due_s(&self) -> f64;
}

/// The longest a handle's thread sleeps without asking its worker again.
const MAX_SLEEP: Duration = Duration::from_secs(3600);

/// Where a collector's [`Worker`] runs: on a thread of its own (the daemon: the sampling
/// loop never waits for a hung tool), or inline, in the poll that finds a command due (`once`,
/// and tests that step simulated time, where a thread answering in real time would fall
/// behind). The thread ends when the handle is dropped.
pub enum WorkerHandle<W: Worker> {
    /// On its own thread; its clock is the seconds since the thread started.
    Thread {
        /// What the thread's runs answered.
        outputs: Receiver<W::Output>,
        /// Asks the thread for a run at once.
        wake: Sender<()>,
        /// The thread: the commands it started are killed when the handle is dropped.
        thread: std::thread::ThreadId,
    },
    /// In [`WorkerHandle::take`]; its clock is the `now_s` the collector passes.
    Inline {
        /// The worker.
        worker: W,
        /// A run was asked for at the next poll.
        woken: bool,
    },
}

impl<W: Worker> WorkerHandle<W> {
    /// A handle running `worker` in the collector's polls.
    pub fn inline(worker: W) -> Self {
        Self::Inline {
            worker,
            woken: false,
        }
    }

    /// A handle running `worker` on a thread named `name`.
    pub fn spawn(name: &str, mut worker: W) -> std::io::Result<Self> {
        let (out_tx, outputs) = mpsc::channel();
        let (wake, wake_rx) = mpsc::channel::<()>();
        let handle = std::thread::Builder::new()
            .name(name.to_owned())
            .spawn(move || {
                let start = Instant::now();
                let mut woken = false;
                loop {
                    let now = start.elapsed().as_secs_f64();
                    if let Some(out) = worker.run_due(now, woken) {
                        if out_tx.send(out).is_err() {
                            return; // the collector is gone
                        }
                    }
                    let wait = worker.next_due_s() - start.elapsed().as_secs_f64();
                    let wait = Duration::try_from_secs_f64(wait.max(0.0))
                        .map_or(MAX_SLEEP, |d| d.min(MAX_SLEEP));
                    match wake_rx.recv_timeout(wait) {
                        Ok(()) => {
                            woken = true;
                            // Several wake-ups while a command ran are one reason to run again.
                            while wake_rx.try_recv().is_ok() {}
                        }
                        Err(RecvTimeoutError::Timeout) => woken = false,
                        Err(RecvTimeoutError::Disconnected) => return,
                    }
                }
            })?;
        Ok(Self::Thread {
            outputs,
            wake,
            thread: handle.thread().id(),
        })
    }

    /// Whether the worker runs in the collector's polls.
    pub fn is_inline(&self) -> bool {
        matches!(self, Self::Inline { .. })
    }

    /// Asks for a run at once: on the thread now, inline at the next [`Self::take`].
    pub fn wake(&mut self) {
        match self {
            Self::Thread { wake, .. } => {
                let _ = wake.send(());
            }
            Self::Inline { woken, .. } => *woken = true,
        }
    }

    /// Appends what the worker answered since the last call to `out` — inline, after running
    /// what is due at `now_s`. `false` when the thread is gone (it panicked): the collector
    /// starts a new worker.
    pub fn take(&mut self, now_s: f64, out: &mut Vec<W::Output>) -> bool {
        match self {
            Self::Thread { outputs, .. } => loop {
                match outputs.try_recv() {
                    Ok(o) => out.push(o),
                    Err(TryRecvError::Empty) => return true,
                    Err(TryRecvError::Disconnected) => return false,
                }
            },
            Self::Inline { worker, woken } => {
                out.extend(worker.run_due(now_s, *woken));
                *woken = false;
                true
            }
        }
    }
}

impl<W: Worker> Drop for WorkerHandle<W> {
    /// The thread ends at its next look at the wake-up channel (closed with the handle), which a
    /// worker waiting for a hung command reaches only at that command's deadline: so the commands
    /// it started are killed now, with their groups (a reload replaces the workers; their calls
    /// must not run on beside the new ones).
    fn drop(&mut self) {
        if let Self::Thread { thread, .. } = self {
            let killed = at_exit::kill_started_by(*thread);
            if killed > 0 {
                tracing::debug!("{killed} command(s) of a stopped worker killed");
            }
        }
    }
}
