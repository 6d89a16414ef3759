//! A job is a cgroup instance, not a name: what tells a cgroup made again under a job's name
//! (HTCondor's slot for its next job) from the job before it, and what ends one and starts the
//! other ([`Tracked::restart`]); the paths of the walk's escaped listing as the file system
//! has them ([`fs_path`]); and the second look that tells a kernel with PSI off from a job that
//! ended while it was read ([`psi_is_off`]).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::{model, Done, Kept, Pending, Tracked};
use crate::health::jobs::JobReading;
use crate::root::JoinSized;
use crate::sources::cgroup::jobs::BatchSystem;

impl Tracked {
    /// The job's cgroup was removed and made again under its name: what is tracked from here
    /// on is a new job, first seen now (its age from `absent_at`). Returns the old job's last
    /// reading. Its kept files are closed (they are the old cgroup's) and the new one's opened
    /// at its reading; its cores are read again; its tags, the same, are kept.
    pub(super) fn restart(&mut self, absent_at: u64) -> Option<JobReading> {
        if let Some(k) = self.kept.as_mut() {
            **k = Kept::default();
        }
        self.cores = None;
        self.static_reads = 0;
        self.needs_baseline = false;
        self.absent_at = Some(absent_at);
        self.absent = 0;
        self.since_probe = 0;
        self.replaced = false;
        self.lost = false;
        self.own_usec = None;
        self.ino = dir_ino(&self.dir);
        let mut prev = self.prev.take();
        if let Some(io) = prev.as_mut().and_then(|p| p.io.take()) {
            self.spare_io = io;
        }
        prev
    }
}

/// A job that ended in the interval that began at `start_usec`, last read as `prev`: its
/// interval, with its cores for the node's capacity over the interval it ended in.
pub(super) fn push_ended(
    p: &mut Pending,
    root: &Arc<str>,
    prev: Option<&JobReading>,
    start_usec: u64,
    system: BatchSystem,
) {
    let Some(prev) = prev else { return };
    if let Some(mut iv) = model::interval(Some(prev), None, start_usec) {
        iv.cores = prev.cores;
        iv.in_parent = system != BatchSystem::Glob;
        p.done.push(Done {
            root: Arc::clone(root),
            iv,
        });
    }
}

/// The directory a path of the walk's listing names: the listing escapes names
/// ([`escape_name_into`]), the file system wants their bytes.
pub(super) fn fs_path(mount: &Path, rel: &str) -> PathBuf {
    if !rel.contains('\\') {
        return mount.join_sized(rel);
    }
    let bytes = crate::sources::mountinfo::unescape_bytes(rel);
    mount.join(<std::ffi::OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(&bytes))
}

/// [`fs_path`] into `out` (its buffer reused): the walk's, a directory listed.
pub(super) fn fs_path_into(mount: &Path, rel: &str, out: &mut PathBuf) {
    out.as_mut_os_string().clear();
    out.push(mount);
    if rel.is_empty() {
        return;
    }
    if !rel.contains('\\') {
        out.push(rel);
        return;
    }
    let bytes = crate::sources::mountinfo::unescape_bytes(rel);
    out.push(<std::ffi::OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(&bytes));
}

/// The inode of a directory, `None` when it is gone.
pub(super) fn dir_ino(dir: &Path) -> Option<u64> {
    std::fs::metadata(dir)
        .ok()
        .map(|m| std::os::unix::fs::MetadataExt::ino(&m))
}

/// Whether a pressure file that was missing or refused at a reading says that the kernel has
/// PSI off, looked at again now: refused (EOPNOTSUPP), or missing from a job directory that is
/// still there. A job that ended while it was read (its directory gone after its `cpu.stat`
/// was read), or whose cgroup was made again since (the file there now), says nothing of PSI.
/// Called only while the warning has not been given: a `stat` or two, once.
pub(super) fn psi_is_off(path: &Path) -> bool {
    match std::fs::read(path) {
        Ok(_) => false,
        Err(e) if e.raw_os_error() == Some(libc::EOPNOTSUPP) => true,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => path
            .parent()
            .is_some_and(|dir| dir.join_sized("cpu.stat").exists()),
        Err(_) => false,
    }
}
