//! Killed commands that have not exited yet: a process stuck in the kernel on a hung device is
//! kept here after `SIGKILL`, reaped by later polls, and counted, so that no new command starts
//! while too many are still there.

use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

/// Killed commands that have not exited yet, at most. A process stuck in the kernel (`smartctl`
/// in an `SG_IO` ioctl on a hung disk, `zpool status` on a dead pool: state `D`) does not end
/// at `SIGKILL` until the kernel gives up on the device, a minute or more: [`super::Spawned::kill`]
/// does not wait for it but keeps it here, and later polls reap it. While this many are still
/// there no new command is started ([`super::CommandError::TooManyDying`]).
pub const MAX_DYING: usize = 64;

/// From this many killed commands not yet exited on, each new one is logged as a warning.
const DYING_WARN: usize = 8;

/// One command killed and not yet reaped.
#[derive(Debug)]
struct Dying {
    pid: rustix::process::Pid,
    program: PathBuf,
    killed: Instant,
}

/// The killed commands not yet reaped, of the whole process (commands are killed from several
/// threads, and from `Drop`).
static DYING: Mutex<Vec<Dying>> = Mutex::new(Vec::new());

/// Reaps the killed commands that have exited since (never blocks); how many are left.
pub fn reap_dying() -> usize {
    let mut dying = DYING.lock().unwrap_or_else(PoisonError::into_inner);
    dying.retain(|d| {
        match rustix::process::waitpid(Some(d.pid), rustix::process::WaitOptions::NOHANG) {
            Ok(None) => true,
            Ok(Some(_)) => {
                let waited = d.killed.elapsed();
                if waited >= Duration::from_secs(1) {
                    tracing::info!(
                        "{} (pid {}): exited {waited:.1?} after it was killed",
                        d.program.display(),
                        d.pid.as_raw_nonzero()
                    );
                }
                false
            }
            // ECHILD: not ours to wait for any more; nothing else can fail with a valid pid.
            Err(_) => false,
        }
    });
    dying.len()
}

/// Keeps a killed command that has not exited yet, for [`reap_dying`].
pub(super) fn keep_dying(pid: rustix::process::Pid, program: &Path) {
    let mut dying = DYING.lock().unwrap_or_else(PoisonError::into_inner);
    dying.push(Dying {
        pid,
        program: program.to_owned(),
        killed: Instant::now(),
    });
    if dying.len() >= DYING_WARN {
        tracing::warn!(
            "{} killed commands have not exited yet (stuck on a hung device?); no new command starts at {MAX_DYING}",
            dying.len()
        );
    }
}

/// Killed commands that have not exited yet (after reaping those that have).
pub fn dying() -> usize {
    reap_dying()
}
