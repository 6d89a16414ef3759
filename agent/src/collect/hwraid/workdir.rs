//! The hardware RAID worker's private working directory for storcli (which writes its log
//! files into the directory it runs in): made per agent, emptied after each call, removed when
//! dropped, and the ones agents that ended left behind swept.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// The monitor's private working directory for storcli, removed when dropped.
#[derive(Debug)]
pub(super) struct WorkDir(PathBuf);

impl WorkDir {
    /// `$TMPDIR/storwatch-storcli-<pid>-<n>`, mode 0700, made anew (a leftover of the same name,
    /// from a process with the same id, is emptied).
    pub(super) fn new() -> std::io::Result<Self> {
        use std::os::unix::fs::DirBuilderExt;
        static N: AtomicU64 = AtomicU64::new(0);
        static SWEPT: std::sync::Once = std::sync::Once::new();
        SWEPT.call_once(|| sweep_stale(&std::env::temp_dir()));
        let path = std::env::temp_dir().join(format!(
            "storwatch-storcli-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        match std::fs::DirBuilder::new().mode(0o700).create(&path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(e),
        }
        // Removed however the agent ends, also when this monitor's thread never gets to drop it.
        crate::command::at_exit::remove_at_exit(&path);
        let w = Self(path);
        w.empty();
        Ok(w)
    }

    /// Where storcli runs.
    pub(super) fn path(&self) -> &Path {
        &self.0
    }

    /// `program` as it is started in the directory: a relative path names a file from the
    /// agent's directory, not the private one (`None` when the agent's directory is unknown).
    pub(super) fn program(program: &Path) -> Option<PathBuf> {
        if program.is_relative() && program.components().count() > 1 {
            Some(std::env::current_dir().ok()?.join(program))
        } else {
            Some(program.to_owned())
        }
    }

    /// Removes what storcli left there (`storcli.log`, `MegaSAS.log`, …).
    pub(super) fn empty(&self) {
        let Ok(entries) = std::fs::read_dir(&self.0) else {
            return;
        };
        for e in entries.flatten() {
            let p = e.path();
            let _ = if e.file_type().is_ok_and(|t| t.is_dir()) {
                std::fs::remove_dir_all(&p)
            } else {
                std::fs::remove_file(&p)
            };
        }
    }
}

/// Removes the working directories in `tmp` left by agents that ended without removing theirs
/// (killed, or ended by a path that skips the monitor's drop): `storwatch-storcli-<pid>-<n>`
/// whose process no longer exists and which belong to this user. A directory of a live agent,
/// this one or another, is left alone. Run once per process, before its first directory.
pub(super) fn sweep_stale(tmp: &Path) {
    use std::os::unix::fs::MetadataExt;
    let Ok(entries) = std::fs::read_dir(tmp) else {
        return;
    };
    let uid = rustix::process::geteuid().as_raw();
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix("storwatch-storcli-"))
            .and_then(|rest| rest.split_once('-'))
            .and_then(|(pid, n)| n.parse::<u64>().ok().and(pid.parse::<i32>().ok()))
        else {
            continue;
        };
        let Ok(meta) = std::fs::symlink_metadata(e.path()) else {
            continue;
        };
        if !meta.is_dir() || meta.uid() != uid || alive(pid) {
            continue;
        }
        let _ = std::fs::remove_dir_all(e.path());
    }
}

/// Whether process `pid` exists (signal 0: it exists unless the kernel says there is no such
/// process; one of another user answers EPERM and counts as alive).
pub(super) fn alive(pid: i32) -> bool {
    let Some(pid) = rustix::process::Pid::from_raw(pid) else {
        return false;
    };
    !matches!(
        rustix::process::test_kill_process(pid),
        Err(rustix::io::Errno::SRCH)
    )
}

impl Drop for WorkDir {
    fn drop(&mut self) {
        crate::command::at_exit::keep_at_exit(&self.0);
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Whether the process `pid`, a call killed at its timeout, has exited: it is a zombie, or
/// already reaped (by [`crate::command::reap_dying`], which this calls first), so no longer our
/// child. Never waits.
pub(super) fn exited(pid: u32) -> bool {
    use rustix::process::{waitid, Pid, WaitId, WaitIdOptions};
    crate::command::reap_dying();
    let Some(pid) = i32::try_from(pid).ok().and_then(Pid::from_raw) else {
        return true;
    };
    let opts = WaitIdOptions::EXITED | WaitIdOptions::NOHANG | WaitIdOptions::NOWAIT;
    // ECHILD: reaped already.
    !matches!(waitid(WaitId::Pid(pid), opts), Ok(None))
}
