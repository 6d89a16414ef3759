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
        self.proc.join_sized(rel)
    }

    /// `rel` (e.g. `"block/sda/queue/scheduler"`) under the sys root.
    pub fn sys(&self, rel: &str) -> PathBuf {
        self.sys.join_sized(rel)
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
/// The bytes land in a per-thread buffer that stays initialized between reads, then are checked
/// as UTF-8 and copied: `Read::read_to_string` on an unsized reader zero-fills its spare
/// capacity on every call, which cost more than the parse of most files.
pub fn read_into(path: &Path, buf: &mut String) -> Result<bool, SourceError> {
    read_file(path, buf, false)
}

/// [`read_into`] for a file the kernel prints in one piece: a sysfs attribute (one `show`
/// call fills at most a page, and one `read` returns all of it) or a one-record procfs file
/// (`uptime`, `pressure/*`, a pool's kstat `state`). Three system calls instead of four: the
/// read that would only find the end is left out (0.1–1.2 µs of the 5–10 µs a sysfs attribute
/// costs on the build VM, `bench/read-walk.c`).
///
/// Not for `/proc/diskstats`, `net/dev`, `mdstat` and the like: a seq_file of many records
/// answers a page at a time, so a short read there is not the end. A value file that fills the
/// buffer is read on to its end, as [`read_into`] does.
pub fn read_value_into(path: &Path, buf: &mut String) -> Result<bool, SourceError> {
    read_file(path, buf, true)
}

fn read_file(path: &Path, buf: &mut String, one_piece: bool) -> Result<bool, SourceError> {
    buf.clear();
    match std::fs::File::open(path) {
        Ok(file) => read_opened(&file, || path.to_owned(), buf, one_piece),
        Err(e) if absent(&e) => Ok(false),
        Err(e) => Err(SourceError::io(path, e)),
    }
}

/// Reads the open `file` into `buf` (already cleared); `path` names it in an error.
fn read_opened(
    file: &std::fs::File,
    path: impl Fn() -> PathBuf,
    buf: &mut String,
    one_piece: bool,
) -> Result<bool, SourceError> {
    SCRATCH.with_borrow_mut(|scratch| {
        let Some(filled) = fill(file, &path, scratch, one_piece)? else {
            return Ok(false);
        };
        match std::str::from_utf8(scratch.get(..filled).unwrap_or_default()) {
            Ok(text) => {
                buf.push_str(text);
                Ok(true)
            }
            Err(_) => Err(not_utf8(&path())),
        }
    })
}

/// Reads the open `file` into `bytes` from its start, over what an earlier read left there;
/// `Some(n)`: the file is `bytes[..n]`; `None`: it vanished as it was read.
fn fill(
    file: &std::fs::File,
    path: impl Fn() -> PathBuf,
    bytes: &mut Vec<u8>,
    one_piece: bool,
) -> Result<Option<usize>, SourceError> {
    let mut filled = 0;
    loop {
        if filled == bytes.len() {
            // Doubles, zero-filled once; the buffer keeps the largest file's size.
            bytes.resize(bytes.len().max(SCRATCH_START) * 2, 0);
        }
        match (&*file).read(bytes.get_mut(filled..).unwrap_or_default()) {
            Ok(0) => return Ok(Some(filled)),
            Ok(n) => {
                filled += n;
                if one_piece && filled < bytes.len() {
                    return Ok(Some(filled));
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            // sysfs attributes of a device that just vanished answer ENODEV/ENXIO on read.
            Err(e) if vanished(&e) => return Ok(None),
            Err(e) => return Err(SourceError::io(&path(), e)),
        }
    }
}

fn not_utf8(path: &Path) -> SourceError {
    SourceError::io(
        path,
        io::Error::new(
            io::ErrorKind::InvalidData,
            "stream did not contain valid UTF-8",
        ),
    )
}

/// [`read_into`] for a big file read every second by one reader that keeps the bytes
/// (`/proc/diskstats`: 146 KB on a 1,000-disk server): the file is read into `bytes` itself,
/// which keeps its length between reads (what is past the file's end is an earlier read's),
/// so that it is neither zero-filled nor copied again; the copy out of the shared buffer was
/// 4 % of the sampling thread's instructions at 1,000 disks. The text is `Ok(Some(text))`;
/// `Ok(None)` when the file does not exist (or vanished as it was read).
pub fn read_text_into<'a>(
    path: &Path,
    bytes: &'a mut Vec<u8>,
) -> Result<Option<&'a str>, SourceError> {
    let file = match std::fs::File::open(path) {
        Ok(file) => file,
        Err(e) if absent(&e) => return Ok(None),
        Err(e) => return Err(SourceError::io(path, e)),
    };
    let Some(filled) = fill(&file, || path.to_owned(), bytes, false)? else {
        return Ok(None);
    };
    match std::str::from_utf8(bytes.get(..filled).unwrap_or_default()) {
        Ok(text) => Ok(Some(text)),
        Err(_) => Err(not_utf8(path)),
    }
}

/// A sysfs directory kept open, whose value files are opened by name relative to it: the
/// kernel walks one or two path components instead of the whole path, and not through the
/// links of `/sys/block` and `/sys/class/net` each time (5.6 instead of 9.2 µs per attribute on
/// the build VM, `bench/read-walk.c`). For an MD array's `md/` (kept: its progress every few
/// seconds while it syncs, its members every 30) and a block device's directory during a
/// tunables reading (opened for its five files).
///
/// Opened on first use. When a file is not found through it, the directory is opened again by
/// its path once (an array stopped and assembled again under the same name is a new directory),
/// unless another file was just opened through it: within one poll a missing file (`sync_*` of a
/// raid0) is simply missing, and costs one failed `openat`.
#[derive(Debug)]
pub struct Dir {
    path: PathBuf,
    fd: Option<rustix::fd::OwnedFd>,
    /// When a file was last opened through `fd`.
    alive_at: Option<std::time::Instant>,
}

/// How long after a file opened through a [`Dir`] a missing one is taken as missing without
/// opening the directory again: longer than the reads of one poll, shorter than a sample.
pub(crate) const DIR_ALIVE_FOR: std::time::Duration = std::time::Duration::from_millis(50);

impl Dir {
    /// The directory at `path`, not opened yet.
    pub fn new(path: PathBuf) -> Self {
        Self {
            path,
            fd: None,
            alive_at: None,
        }
    }

    /// Where it is.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// [`read_value_into`] of `rel` (a name, or a short relative path) in this directory.
    pub fn read_value(&mut self, rel: &str, buf: &mut String) -> Result<bool, SourceError> {
        buf.clear();
        for fresh in [self.fd.is_none(), true] {
            if fresh {
                self.fd = self.open_dir();
                self.alive_at = None;
            }
            let Some(dir) = &self.fd else {
                // Not there (or not openable): as a plain read of the path says.
                return read_value_into(&self.path.join_sized(rel), buf);
            };
            use rustix::fs::{Mode, OFlags};
            match rustix::fs::openat(dir, rel, OFlags::RDONLY | OFlags::CLOEXEC, Mode::empty()) {
                Ok(fd) => {
                    self.alive_at = Some(std::time::Instant::now());
                    let file = std::fs::File::from(fd);
                    return read_opened(&file, || self.path.join_sized(rel), buf, true);
                }
                Err(e) => {
                    let e = io::Error::from(e);
                    if absent(&e) {
                        let alive = self.alive_at.is_some_and(|t| t.elapsed() < DIR_ALIVE_FOR);
                        if fresh || alive {
                            return Ok(false);
                        }
                        continue; // once more through a directory opened again by path
                    }
                    return Err(SourceError::io(&self.path.join_sized(rel), e));
                }
            }
        }
        Ok(false)
    }

    /// [`Self::read_value`] of `rel`, parsed by `parse`; `Ok(None)` when the file is absent, an
    /// error naming the file when it does not parse.
    pub fn parse_value<T>(
        &mut self,
        rel: &str,
        buf: &mut String,
        parse: fn(&str) -> Result<T, crate::sources::ParseError>,
    ) -> Result<Option<T>, SourceError> {
        if !self.read_value(rel, buf)? {
            return Ok(None);
        }
        parse(buf)
            .map(Some)
            .map_err(|e| SourceError::parse(&self.path.join_sized(rel), e))
    }

    fn open_dir(&self) -> Option<rustix::fd::OwnedFd> {
        use rustix::fs::{Mode, OFlags};
        let flags = OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC;
        rustix::fs::open(&self.path, flags, Mode::empty()).ok()
    }
}

/// Size the read buffer starts at: most files are one sysfs value or a few lines of /proc.
const SCRATCH_START: usize = 4096;

thread_local! {
    /// The read buffer of [`read_into`], initialized once and reused by every read of the thread.
    static SCRATCH: std::cell::RefCell<Vec<u8>> = std::cell::RefCell::new(vec![0; SCRATCH_START]);
}

/// `Path::join` with the capacity reserved up front: `join` copies the directory into a buffer
/// of its exact size and grows it for the name, an allocation, a reallocation and a copy each
/// time — hundreds of times in every rescan of `/sys/block`.
pub trait JoinSized {
    /// `self` joined with `name`, as `Path::join` does it.
    fn join_sized(&self, name: impl AsRef<Path>) -> PathBuf;
}

impl JoinSized for Path {
    fn join_sized(&self, name: impl AsRef<Path>) -> PathBuf {
        let name = name.as_ref();
        let mut path = PathBuf::with_capacity(self.as_os_str().len() + 1 + name.as_os_str().len());
        path.push(self);
        path.push(name);
        path
    }
}

/// Reads a small file into a new string; `Ok(None)` when it is absent.
pub fn read_optional(path: &Path) -> Result<Option<String>, SourceError> {
    let mut buf = String::new();
    Ok(read_into(path, &mut buf)?.then_some(buf))
}

/// [`read_value_into`] into a new string; `Ok(None)` when the file is absent.
pub fn read_value_optional(path: &Path) -> Result<Option<String>, SourceError> {
    let mut buf = String::new();
    Ok(read_value_into(path, &mut buf)?.then_some(buf))
}

/// Names in a directory, sorted; `Ok(None)` when the directory is absent.
pub fn list_dir(path: &Path) -> Result<Option<Vec<String>>, SourceError> {
    list_entries(path, |_| true)
}

/// The names of the directories in `path` (links to directories included), sorted; `None` when
/// `path` does not exist. The kind comes with the listing (`d_type`), so it costs no `stat` per
/// entry on procfs, sysfs and tmpfs.
pub fn list_subdirs(path: &Path) -> Result<Option<Vec<String>>, SourceError> {
    list_entries(path, |entry| match entry.file_type() {
        Ok(t) if t.is_symlink() => entry.path().is_dir(),
        Ok(t) => t.is_dir(),
        Err(_) => false,
    })
}

fn list_entries(
    path: &Path,
    keep: impl Fn(&std::fs::DirEntry) -> bool,
) -> Result<Option<Vec<String>>, SourceError> {
    let rd = match std::fs::read_dir(path) {
        Ok(rd) => rd,
        Err(e) if absent(&e) => return Ok(None),
        Err(e) => return Err(SourceError::io(path, e)),
    };
    let mut names = Vec::new();
    for entry in rd {
        let entry = entry.map_err(|e| SourceError::io(path, e))?;
        if !keep(&entry) {
            continue;
        }
        if let Some(name) = entry.file_name().to_str() {
            names.push(name.to_owned());
        }
    }
    names.sort_unstable();
    Ok(Some(names))
}

/// The file is not there, or its device went away while it was opened.
fn absent(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::NotFound || vanished(e)
}

fn vanished(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::ENODEV) | Some(libc::ENXIO))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The kept bytes give each read's text alone: a longer file, a shorter one after it (the
    /// older bytes past its end never show), one past the buffer's first size, an empty one,
    /// a missing one, and bytes that are not UTF-8 (an error naming the file; the next read
    /// is whole again).
    #[test]
    fn a_file_read_into_kept_bytes_is_that_file_alone() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("diskstats");
        let mut bytes = Vec::new();
        let big = "8 0 sda 1 2 3 4\n".repeat(3000);
        for text in ["a longer first text\n", "short\n", big.as_str(), "", "x"] {
            std::fs::write(&path, text).expect("fixture");
            let mut want = String::new();
            assert!(read_into(&path, &mut want).expect("read"));
            assert_eq!(read_text_into(&path, &mut bytes).expect("read"), Some(text));
            assert_eq!(want, text);
        }
        std::fs::write(&path, b"8 0 sd\xff 1\n").expect("fixture");
        let e = read_text_into(&path, &mut bytes).expect_err("not UTF-8");
        assert!(e.to_string().contains("diskstats"), "{e}");
        std::fs::write(&path, "8 0 sda 1 2 3 4\n").expect("fixture");
        assert_eq!(
            read_text_into(&path, &mut bytes).expect("read"),
            Some("8 0 sda 1 2 3 4\n")
        );
        let missing = dir.path().join("none");
        assert_eq!(read_text_into(&missing, &mut bytes).expect("absent"), None);
    }

    #[test]
    fn subdirectories_are_told_from_files_by_the_listing() {
        let dir = tempfile::tempdir().expect("tempdir");
        let d = dir.path();
        std::fs::create_dir(d.join("tank")).expect("fixture");
        std::fs::create_dir(d.join("backup")).expect("fixture");
        std::fs::write(d.join("arcstats"), "x\n").expect("fixture");
        std::os::unix::fs::symlink("tank", d.join("link-to-dir")).expect("fixture");
        std::os::unix::fs::symlink("arcstats", d.join("link-to-file")).expect("fixture");
        std::os::unix::fs::symlink("gone", d.join("dangling")).expect("fixture");
        assert_eq!(
            list_subdirs(d).ok().flatten().unwrap_or_default(),
            ["backup", "link-to-dir", "tank"]
        );
        assert_eq!(list_dir(d).ok().flatten().map(|n| n.len()), Some(6));
        assert_eq!(list_subdirs(&d.join("missing")).ok(), Some(None));
    }

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
    fn join_sized_joins_as_join_does() {
        for (dir, name) in [
            ("/sys/block/sda", "queue/scheduler"),
            ("/sys/block/sda/", "dev"),
            ("relative", "x"),
            ("", "x"),
            ("/a", "/abs"),
            ("/a", ""),
        ] {
            assert_eq!(Path::new(dir).join_sized(name), Path::new(dir).join(name));
        }
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

    #[test]
    fn value_files_are_read_whole_even_when_longer_than_a_read() {
        let dir = tempfile::tempdir().expect("tempdir");
        let big = dir.path().join("uevent");
        let text: String = (0..3000).map(|i| format!("KEY{i}=value {i}\n")).collect();
        std::fs::write(&big, &text).expect("write");
        let mut buf = String::new();
        assert!(matches!(read_value_into(&big, &mut buf), Ok(true)));
        assert_eq!(buf, text);
        let small = dir.path().join("state");
        std::fs::write(&small, "running\n").expect("write");
        assert!(matches!(read_value_into(&small, &mut buf), Ok(true)));
        assert_eq!(buf, "running\n");
        assert_eq!(
            read_value_optional(&dir.path().join("gone")).ok(),
            Some(None)
        );
    }

    /// The kernel's own value files, read in one piece, say what a read to the end says.
    #[test]
    fn real_sysfs_and_procfs_values_come_whole_in_one_read() {
        let mut files = vec![
            PathBuf::from("/sys/class/net/lo/mtu"),
            PathBuf::from("/sys/class/net/lo/operstate"),
            PathBuf::from("/proc/sys/kernel/ostype"),
        ];
        for disk in list_dir(Path::new("/sys/block"))
            .ok()
            .flatten()
            .unwrap_or_default()
        {
            for attr in [
                "dev",
                "size",
                "queue/scheduler",
                "queue/max_sectors_kb",
                "uevent",
            ] {
                files.push(Path::new("/sys/block").join(&disk).join(attr));
            }
        }
        let (mut whole, mut piece) = (String::new(), String::new());
        let mut read = 0;
        for f in &files {
            let a = read_into(f, &mut whole);
            let b = read_value_into(f, &mut piece);
            assert_eq!(a.is_ok(), b.is_ok(), "{}", f.display());
            assert_eq!(whole, piece, "{}", f.display());
            read += usize::from(matches!(b, Ok(true)));
        }
        assert!(read >= 3, "no kernel files here: {files:?}");
    }

    #[test]
    fn a_kept_directory_reads_its_files_and_follows_a_new_directory_at_its_path() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let md = tmp.path().join("md0/md");
        let mut dir = Dir::new(md.clone());
        let mut buf = String::from("old");
        // not there yet: absent, like a plain read
        assert!(matches!(dir.read_value("array_state", &mut buf), Ok(false)));
        assert!(buf.is_empty());
        std::fs::create_dir_all(md.join("dev-sdb1")).expect("mkdir");
        std::fs::write(md.join("array_state"), "clean\n").expect("write");
        std::fs::write(md.join("dev-sdb1/state"), "in_sync\n").expect("write");
        assert!(matches!(dir.read_value("array_state", &mut buf), Ok(true)));
        assert_eq!(buf, "clean\n");
        assert!(matches!(
            dir.read_value("dev-sdb1/state", &mut buf),
            Ok(true)
        ));
        assert_eq!(buf, "in_sync\n");
        assert!(matches!(dir.read_value("sync_speed", &mut buf), Ok(false)));
        // the array stopped and assembled again: a new directory at the same path, seen at the
        // next poll
        std::fs::remove_dir_all(tmp.path().join("md0")).expect("rm");
        std::thread::sleep(DIR_ALIVE_FOR * 2);
        std::fs::create_dir_all(&md).expect("mkdir");
        std::fs::write(md.join("array_state"), "active\n").expect("write");
        assert!(matches!(dir.read_value("array_state", &mut buf), Ok(true)));
        assert_eq!(buf, "active\n");
        // an unreadable value is an error naming the file
        std::fs::write(md.join("level"), b"raid\xff\n").expect("write");
        let e = dir.read_value("level", &mut buf);
        assert!(
            matches!(&e, Err(e) if e.to_string().contains("md0/md/level")),
            "{e:?}"
        );
        assert_eq!(dir.path(), md);
    }
}
