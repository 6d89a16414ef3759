//! The one place that knows where the kernel's `/proc` and `/sys` trees are.
//!
//! Every source reads through a [`Root`], so the whole agent runs unchanged on a fixture tree
//! (`--proc-root tests/fixtures/host/proc --sys-root …/sys`), like node_exporter's
//! `--path.procfs`. There is no process-wide global: the root is passed down explicitly.

use std::io::{self, Read};
use std::path::{Path, PathBuf};

use crate::sources::SourceError;

/// The proc and sys trees the agent reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Root {
    proc: PathBuf,
    sys: PathBuf,
}

impl Default for Root {
    fn default() -> Self {
        Self::new("/proc", "/sys")
    }
}

impl Root {
    /// A root reading `proc` in place of `/proc` and `sys` in place of `/sys`.
    pub fn new(proc: impl Into<PathBuf>, sys: impl Into<PathBuf>) -> Self {
        Self {
            proc: proc.into(),
            sys: sys.into(),
        }
    }

    /// `rel` (e.g. `"diskstats"`, `"net/dev"`) under the proc root.
    pub fn proc(&self, rel: &str) -> PathBuf {
        self.proc.join(rel)
    }

    /// `rel` (e.g. `"block/sda/queue/scheduler"`) under the sys root.
    pub fn sys(&self, rel: &str) -> PathBuf {
        self.sys.join(rel)
    }

    /// The proc root itself.
    pub fn proc_dir(&self) -> &Path {
        &self.proc
    }

    /// The sys root itself.
    pub fn sys_dir(&self) -> &Path {
        &self.sys
    }
}

/// Reads `path` into `buf` (cleared first), reusing its allocation: the 1 s loop reads the same
/// handful of files every second and should not allocate a new buffer each time.
///
/// Returns `Ok(false)` when the file does not exist — for optional files (no `/proc/pressure` on an
/// old kernel, no `speed` on a virtual NIC) absence is normal, and the caller decides.
///
/// Four system calls per file — open, read, the read that finds the end, close — where
/// `File::read_to_string` adds an `fstat` and an `lseek` to size its buffer: a third of the
/// calls of the sampling loop, for files whose size sysfs and procfs report as 4096 or 0 anyway.
pub fn read_into(path: &Path, buf: &mut String) -> Result<bool, SourceError> {
    buf.clear();
    match std::fs::File::open(path) {
        Ok(f) => match Unsized(&f).read_to_string(buf) {
            Ok(_) => Ok(true),
            // sysfs attributes of a device that just vanished answer ENODEV/ENXIO on read.
            Err(e) if vanished(&e) => Ok(false),
            Err(e) => Err(SourceError::io(path, e)),
        },
        Err(e) if e.kind() == io::ErrorKind::NotFound || vanished(&e) => Ok(false),
        Err(e) => Err(SourceError::io(path, e)),
    }
}

/// A file read without asking for its size first (see [`read_into`]).
struct Unsized<'a>(&'a std::fs::File);

impl Read for Unsized<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let mut f: &std::fs::File = self.0;
        f.read(buf)
    }
}

/// Reads a small file into a new string; `Ok(None)` when it is absent.
pub fn read_optional(path: &Path) -> Result<Option<String>, SourceError> {
    let mut buf = String::new();
    Ok(read_into(path, &mut buf)?.then_some(buf))
}

/// Names in a directory, sorted; `Ok(None)` when the directory is absent.
pub fn list_dir(path: &Path) -> Result<Option<Vec<String>>, SourceError> {
    let rd = match std::fs::read_dir(path) {
        Ok(rd) => rd,
        Err(e) if e.kind() == io::ErrorKind::NotFound || vanished(&e) => return Ok(None),
        Err(e) => return Err(SourceError::io(path, e)),
    };
    let mut names = Vec::new();
    for entry in rd {
        let entry = entry.map_err(|e| SourceError::io(path, e))?;
        if let Some(name) = entry.file_name().to_str() {
            names.push(name.to_owned());
        }
    }
    names.sort_unstable();
    Ok(Some(names))
}

fn vanished(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::ENODEV) | Some(libc::ENXIO))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_joined_under_the_roots() {
        let r = Root::new("/tmp/p", "/tmp/s");
        assert_eq!(r.proc("net/dev"), PathBuf::from("/tmp/p/net/dev"));
        assert_eq!(
            r.sys("block/sda/size"),
            PathBuf::from("/tmp/s/block/sda/size")
        );
    }

    #[test]
    fn missing_file_is_not_an_error() {
        let mut buf = String::from("old");
        let found = read_into(Path::new("/nonexistent/storwatch/x"), &mut buf);
        assert!(matches!(found, Ok(false)));
        assert!(buf.is_empty());
        assert!(matches!(
            list_dir(Path::new("/nonexistent/storwatch")),
            Ok(None)
        ));
    }

    #[test]
    fn files_are_read_whole_into_the_reused_buffer() {
        let dir = tempfile::tempdir().expect("tempdir");
        let big = dir.path().join("diskstats");
        let text: String = (0..3000).map(|i| format!("8 {i} sd{i} 1 2 3\n")).collect();
        std::fs::write(&big, &text).expect("write");
        let mut buf = String::new();
        assert!(matches!(read_into(&big, &mut buf), Ok(true)));
        assert_eq!(buf, text);
        // Again, into the same allocation: the same text, not appended.
        assert!(matches!(read_into(&big, &mut buf), Ok(true)));
        assert_eq!(buf, text);
        let small = dir.path().join("state");
        std::fs::write(&small, "running\n").expect("write");
        assert!(matches!(read_into(&small, &mut buf), Ok(true)));
        assert_eq!(buf, "running\n");
        let bad = dir.path().join("bad");
        std::fs::write(&bad, b"ok\xff\xfe\n").expect("write");
        let r = read_into(&bad, &mut buf);
        assert!(
            matches!(&r, Err(e) if e.to_string().contains("bad: stream did not contain valid UTF-8")),
            "{r:?}"
        );
    }
}
