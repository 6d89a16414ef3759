//! Where the numbers of a mount point come from: `statvfs(3)` of the host (each call in a
//! child process, with a deadline) or, for tests and fixture trees, a file of answers.

use super::*;

/// Where the numbers of a mount point come from.
pub trait Statfs: Send + Sync {
    /// Capacity of the filesystem mounted at `path` (of the host's namespace), whose mount point
    /// mountinfo prints as `mount_point` (escaped, as in the `mount` tag).
    fn statvfs(&self, mount_point: &str, path: &Path) -> io::Result<FsStat>;

    /// Each of `mounts` (mount point as printed, path) in order, `each(i, result)` called with
    /// every answer as it comes and saying whether to go on. By default one call after another.
    fn statvfs_each(
        &self,
        mounts: &[(&str, &Path)],
        each: &mut dyn FnMut(usize, io::Result<FsStat>) -> bool,
    ) {
        for (i, (mp, path)) in mounts.iter().enumerate() {
            if !each(i, self.statvfs(mp, path)) {
                return;
            }
        }
    }

    /// Whether an earlier call on this mount point is known to be still stuck, so that it is
    /// not tried again (`statvfs_each` gave up on it itself). By default none is.
    fn still_stuck(&self, _mount_point: &str, _path: &Path) -> bool {
        false
    }
}

/// `statvfs(3)` under `rootfs`.
#[derive(Debug, Clone)]
pub struct SystemStatfs {
    /// Where the host's `/` is.
    pub rootfs: PathBuf,
    /// How long one call is waited for (`timeout_s`).
    pub timeout: Duration,
}

impl Statfs for SystemStatfs {
    fn statvfs(&self, _mount_point: &str, path: &Path) -> io::Result<FsStat> {
        // In a child process: a hung FUSE mount would otherwise hold a thread of the agent in
        // an uninterruptible wait, and the agent could not exit (see sources/statvfs.rs).
        statvfs::stat_apart(&self.under_rootfs(path), self.timeout)
    }

    fn statvfs_each(
        &self,
        mounts: &[(&str, &Path)],
        each: &mut dyn FnMut(usize, io::Result<FsStat>) -> bool,
    ) {
        // One child for the round: a fork costs far more than the calls.
        let paths: Vec<PathBuf> = mounts.iter().map(|(_, p)| self.under_rootfs(p)).collect();
        let refs: Vec<&Path> = paths.iter().map(PathBuf::as_path).collect();
        statvfs::stat_apart_each(&refs, self.timeout, each);
    }

    fn still_stuck(&self, _mount_point: &str, path: &Path) -> bool {
        statvfs::still_stuck(&self.under_rootfs(path))
    }
}

impl SystemStatfs {
    fn under_rootfs(&self, path: &Path) -> PathBuf {
        self.rootfs.join(path.strip_prefix("/").unwrap_or(path))
    }
}

/// The simulator's stand-in: numbers per mount point (escaped as in mountinfo) in a file, read
/// on each call.
#[derive(Debug, Clone)]
pub struct FileStatfs {
    /// The file.
    pub path: PathBuf,
}

impl Statfs for FileStatfs {
    fn statvfs(&self, mount_point: &str, _path: &Path) -> io::Result<FsStat> {
        let text = std::fs::read_to_string(&self.path)?;
        statvfs::parse_file(&text)
            .rows
            .into_iter()
            .find(|(mp, _)| mp == mount_point)
            .map(|(_, s)| s)
            .ok_or_else(|| {
                io::Error::new(
                    io::ErrorKind::NotFound,
                    format!("not in {}", self.path.display()),
                )
            })
    }
}
