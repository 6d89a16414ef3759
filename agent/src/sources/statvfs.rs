//! Filesystem capacity: `statvfs(3)` on a mount point, and the text stand-in the simulator
//! writes in its place.
//!
//! `statvfs` returns counts of fragments (`f_frsize` bytes each: `f_blocks` in all, `f_bfree`
//! free, `f_bavail` free for unprivileged users — ext4 and XFS keep `f_bfree − f_bavail` back for
//! root), inodes (`f_files`, `f_ffree`, `f_favail`) and flags (`ST_RDONLY`). It is a system call,
//! not a file: on a local filesystem it answers from the superblock in microseconds, but on a
//! network filesystem whose server is gone it blocks — the collector calls it off the sampling
//! thread, with a deadline (see `collect/fs.rs`).
//!
//! A thread is not far enough: once a FUSE daemon has read a request, the kernel waits for its
//! answer uninterruptibly (`request_wait_answer`, D state), deaf to SIGTERM and SIGKILL, and a
//! process does not finish exiting while one of its threads is in that wait. So the agent makes
//! the calls in a child process of its own ([`stat_apart_each`]): a forked copy that closes
//! every inherited descriptor, calls `statvfs` on each mount point of the round in turn, writes
//! each one's numbers into a pipe as it returns, and exits. One fork a round, not one a mount:
//! the fork costs far more than the calls. A child stuck for ever holds nothing of the agent's
//! (no socket, no output, no lock), and the agent exits whenever it is told to.
//!
//! A host simulated under `--proc-root` has no real filesystems behind its mount table, so the
//! simulator writes the numbers into a file (`[fs] statvfs_file`), one line per mount point:
//!
//! ```text
//! # mount point (escaped as in mountinfo)  frsize blocks bfree bavail files ffree favail ro
//! /srv/pool1 4096 3906250000 1468750000 1468750000 1953125000 1953000000 1953000000 0
//! ```

use std::io;
use std::path::Path;

use super::{fields, parse_u64, ParseError, Rows};

/// One filesystem's capacity, in the units of `struct statvfs`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FsStat {
    /// Fragment size, bytes (the unit of the block counts).
    pub frsize: u64,
    /// Size, in fragments.
    pub blocks: u64,
    /// Free, in fragments (root included).
    pub bfree: u64,
    /// Free for unprivileged users, in fragments.
    pub bavail: u64,
    /// Inodes.
    pub files: u64,
    /// Free inodes.
    pub ffree: u64,
    /// Free inodes for unprivileged users.
    pub favail: u64,
    /// Mounted read-only (`ST_RDONLY`).
    pub read_only: bool,
}

impl FsStat {
    /// Size in bytes.
    pub fn size_bytes(&self) -> u64 {
        self.blocks.saturating_mul(self.frsize)
    }

    /// Used bytes (`blocks − bfree`, as df counts them).
    pub fn used_bytes(&self) -> u64 {
        self.blocks
            .saturating_sub(self.bfree)
            .saturating_mul(self.frsize)
    }

    /// Bytes an unprivileged user can still write.
    pub fn avail_bytes(&self) -> u64 {
        self.bavail.saturating_mul(self.frsize)
    }

    /// Used share as df's `Use%` computes it: used / (used + avail), so the space kept back for
    /// root counts as full. `None` for a filesystem with no blocks (some FUSE mounts).
    pub fn used_pct(&self) -> Option<f64> {
        let used = self.blocks.saturating_sub(self.bfree);
        let denom = used.saturating_add(self.bavail);
        (denom > 0).then(|| used as f64 * 100.0 / denom as f64)
    }

    /// Used inodes.
    pub fn inodes_used(&self) -> u64 {
        self.files.saturating_sub(self.ffree)
    }

    /// Used share of the inodes; `None` where the filesystem has no fixed count (btrfs, ZFS
    /// report 0 or a moving figure of 0 total).
    pub fn inodes_used_pct(&self) -> Option<f64> {
        (self.files > 0).then(|| self.inodes_used() as f64 * 100.0 / self.files as f64)
    }
}

/// `statvfs(3)` on `path`.
pub fn stat(path: &Path) -> io::Result<FsStat> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "path holds a NUL byte"))?;
    // SAFETY: `c` is a valid NUL-terminated string; `buf` is a plain C struct the call fills
    // and that is only read after it returned 0.
    #[allow(unsafe_code)]
    let (rc, buf) = unsafe {
        let mut buf: libc::statvfs = std::mem::zeroed();
        let rc = libc::statvfs(c.as_ptr(), &mut buf);
        (rc, buf)
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    // The field types differ between 32- and 64-bit targets; every value fits u64.
    #[allow(clippy::useless_conversion)]
    Ok(FsStat {
        frsize: u64::from(buf.f_frsize),
        blocks: u64::from(buf.f_blocks),
        bfree: u64::from(buf.f_bfree),
        bavail: u64::from(buf.f_bavail),
        files: u64::from(buf.f_files),
        ffree: u64::from(buf.f_ffree),
        favail: u64::from(buf.f_favail),
        read_only: buf.f_flag & libc::ST_RDONLY != 0,
    })
}

/// Numbers in the record a child writes: errno (0: success), then frsize, blocks, bfree, bavail,
/// files, ffree, `f_flag`.
const RECORD_WORDS: usize = 8;
const RECORD_BYTES: usize = RECORD_WORDS * 8;

/// `statvfs(3)` on `path` in a forked child process, so that a call that never returns (a hung
/// FUSE or NFS mount) leaves a stuck child behind instead of a thread the agent cannot exit
/// without. Blocks the calling thread until the child answers: the wait is an ordinary read of
/// a pipe, which any signal that ends the process interrupts.
pub fn stat_apart(path: &Path) -> io::Result<FsStat> {
    let mut out = Err(io::Error::other("no answer"));
    stat_apart_each(&[path], &mut |_, r| {
        out = r;
        true
    });
    out
}

/// [`stat_apart`] on each of `paths`, in order, all in one child (one fork a round, not one a
/// mount). `each(i, result)` gets every answer as it arrives, before the next call is waited
/// for, and says whether to go on; told to stop, the child is killed (it dies when its call in
/// progress returns). The child ends by itself after the last call, or at its next answer once
/// nobody reads any more.
pub fn stat_apart_each(paths: &[&Path], each: &mut dyn FnMut(usize, io::Result<FsStat>) -> bool) {
    let fail_all =
        |each: &mut dyn FnMut(usize, io::Result<FsStat>) -> bool, from: usize, e: &io::Error| {
            for i in from..paths.len() {
                if !each(i, Err(io::Error::new(e.kind(), e.to_string()))) {
                    return;
                }
            }
        };
    let (pid, rd) = match spawn_child(paths) {
        Ok(c) => c,
        Err(e) => return fail_all(each, 0, &e),
    };
    let mut rd = std::fs::File::from(rd);
    let mut stopped = false;
    for i in 0..paths.len() {
        let mut rec = [0u8; RECORD_BYTES];
        if let Err(e) = io::Read::read_exact(&mut rd, &mut rec) {
            let e = io::Error::new(e.kind(), format!("statvfs in a child process: {e}"));
            fail_all(each, i, &e);
            break;
        }
        if !each(i, decode(&rec)) {
            stopped = true;
            break;
        }
    }
    drop(rd);
    if stopped {
        // SAFETY: signals our own child, not yet reaped (its pid cannot have been reused).
        #[allow(unsafe_code)]
        unsafe {
            libc::kill(pid, libc::SIGKILL);
        }
    }
    reap(pid);
}

/// Forks the child that calls `statvfs` on each of `paths`; its pid and the reading end of the
/// pipe its records come through.
fn spawn_child(paths: &[&Path]) -> io::Result<(libc::pid_t, std::os::fd::OwnedFd)> {
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    use std::os::unix::ffi::OsStrExt;
    let c: Vec<std::ffi::CString> = paths
        .iter()
        .map(|p| {
            std::ffi::CString::new(p.as_os_str().as_bytes())
                .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "path holds a NUL byte"))
        })
        .collect::<io::Result<_>>()?;
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: `fds` has room for the two descriptors pipe2 writes.
    #[allow(unsafe_code)]
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: pipe2 succeeded: both descriptors are open and owned by nobody else.
    #[allow(unsafe_code)]
    let (rd, wr) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    let max_fd = open_files_limit();
    // SAFETY: the child only makes async-signal-safe system calls on memory prepared before
    // the fork (`c`, its own stack) and leaves with `_exit`: nothing that another thread of
    // this process could have held locked (the allocator, stdio) is touched after the fork.
    #[allow(unsafe_code)]
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(io::Error::last_os_error());
    }
    if pid == 0 {
        // SAFETY: as above; in the child, which never returns from here.
        #[allow(unsafe_code)]
        unsafe {
            child(&c, wr.as_raw_fd(), max_fd)
        }
    }
    Ok((pid, rd))
}

/// One record of the child's.
fn decode(rec: &[u8; RECORD_BYTES]) -> io::Result<FsStat> {
    let w = |i: usize| {
        let mut b = [0u8; 8];
        b.copy_from_slice(&rec[i * 8..i * 8 + 8]);
        u64::from_ne_bytes(b)
    };
    if w(0) != 0 {
        return Err(io::Error::from_raw_os_error(
            i32::try_from(w(0)).unwrap_or(libc::EIO),
        ));
    }
    Ok(FsStat {
        frsize: w(1),
        blocks: w(2),
        bfree: w(3),
        bavail: w(4),
        files: w(5),
        ffree: w(6),
        // statvfs(3) reports f_favail as f_ffree on Linux.
        favail: w(6),
        read_only: w(7) & libc::ST_RDONLY != 0,
    })
}

/// The highest descriptor number a child may have inherited, for closing them one by one
/// where `close_range(2)` is missing (Linux before 5.9).
fn open_files_limit() -> libc::c_int {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit fills the struct it is given.
    #[allow(unsafe_code)]
    let rc = unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) };
    if rc != 0 || lim.rlim_cur == libc::RLIM_INFINITY {
        return 65_536;
    }
    libc::c_int::try_from(lim.rlim_cur.min(1 << 20)).unwrap_or(65_536)
}

/// Waits for the child (it has answered or closed its pipe: it is exiting).
fn reap(pid: libc::pid_t) {
    loop {
        let mut status = 0;
        // SAFETY: waits for our own child; `status` is written by the call.
        #[allow(unsafe_code)]
        let rc = unsafe { libc::waitpid(pid, &mut status, 0) };
        if rc >= 0 || io::Error::last_os_error().kind() != io::ErrorKind::Interrupted {
            return;
        }
    }
}

/// The forked child: closes everything inherited but `out`, makes the calls, writes a record for
/// each as it returns, exits. Async-signal-safe calls only, and no allocation.
#[allow(unsafe_code)]
unsafe fn child(paths: &[std::ffi::CString], out: libc::c_int, max_fd: libc::c_int) -> ! {
    // The agent's output, sockets and files must not stay open in a child that may be stuck
    // for days.
    let close_all = |first: libc::c_int, last: libc::c_int| {
        if first > last {
            return;
        }
        if libc::syscall(libc::SYS_close_range, first, last, 0) != 0 {
            for fd in first..=last.min(max_fd) {
                libc::close(fd);
            }
        }
    };
    close_all(0, out - 1);
    close_all(out + 1, libc::c_int::MAX);
    for path in paths {
        // statvfs(3) is statfs(2) and a conversion of its result: glibc reads the mount table
        // only on kernels older than 2.6.36 (no ST_VALID in f_flags), musl never.
        let mut buf: libc::statvfs = std::mem::zeroed();
        let mut words = [0u64; RECORD_WORDS];
        if libc::statvfs(path.as_ptr(), &mut buf) != 0 {
            words[0] = u64::try_from(*libc::__errno_location()).unwrap_or(libc::EIO as u64);
        } else {
            // The field types differ between targets; every value fits u64.
            #[allow(clippy::useless_conversion)]
            {
                words[1] = u64::from(buf.f_frsize);
                words[2] = u64::from(buf.f_blocks);
                words[3] = u64::from(buf.f_bfree);
                words[4] = u64::from(buf.f_bavail);
                words[5] = u64::from(buf.f_files);
                words[6] = u64::from(buf.f_ffree);
                words[7] = u64::from(buf.f_flag);
            }
        }
        let mut rec = [0u8; RECORD_BYTES];
        for (i, w) in words.iter().enumerate() {
            rec[i * 8..i * 8 + 8].copy_from_slice(&w.to_ne_bytes());
        }
        let mut done = 0;
        while done < RECORD_BYTES {
            let n = libc::write(out, rec.as_ptr().add(done).cast(), RECORD_BYTES - done);
            if n > 0 {
                done += n as usize;
            } else if n < 0 && *libc::__errno_location() == libc::EINTR {
                continue;
            } else {
                // Nobody reads any more (the agent gave up or exited): done.
                libc::_exit(0);
            }
        }
    }
    libc::_exit(0)
}

/// Parses the simulator's stand-in file: `(mount point, numbers)` per line, the mount point
/// escaped as mountinfo prints it (and kept so: it is compared with mountinfo's).
pub fn parse_file(text: &str) -> Rows<(String, FsStat)> {
    let mut out = Rows::default();
    for (i, line) in text.lines().enumerate() {
        let t = line.trim();
        if t.is_empty() || t.starts_with('#') {
            continue;
        }
        let mut f = fields(t);
        let mp = f.next().unwrap_or_default();
        let nums: Vec<Option<u64>> = f.map(parse_u64).collect();
        match nums.as_slice() {
            [Some(frsize), Some(blocks), Some(bfree), Some(bavail), Some(files), Some(ffree), Some(favail), Some(ro)]
                if mp.starts_with('/') && bfree <= blocks && bavail <= bfree && ffree <= files =>
            {
                out.rows.push((
                    mp.to_owned(),
                    FsStat {
                        frsize: *frsize,
                        blocks: *blocks,
                        bfree: *bfree,
                        bavail: *bavail,
                        files: *files,
                        ffree: *ffree,
                        favail: *favail,
                        read_only: *ro != 0,
                    },
                ));
            }
            _ => out.errors.push(ParseError::new(
                i + 1,
                line,
                "expected: mount point, then frsize blocks bfree bavail files ffree favail ro \
                 as unsigned integers (bavail <= bfree <= blocks, ffree <= files)",
            )),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn df_arithmetic() {
        // 1000 blocks of 4 KiB, 300 free of which 250 for users: df shows 700 used, 250
        // available, Use% 700 / 950 = 73.7 %.
        let s = FsStat {
            frsize: 4096,
            blocks: 1000,
            bfree: 300,
            bavail: 250,
            files: 100,
            ffree: 40,
            favail: 40,
            read_only: false,
        };
        assert_eq!(s.size_bytes(), 4_096_000);
        assert_eq!(s.used_bytes(), 700 * 4096);
        assert_eq!(s.avail_bytes(), 250 * 4096);
        let pct = s.used_pct().expect("has blocks");
        assert!((pct - 73.684).abs() < 0.001, "{pct}");
        assert_eq!(s.inodes_used(), 60);
        assert_eq!(s.inodes_used_pct(), Some(60.0));
        assert_eq!(FsStat::default().used_pct(), None);
        assert_eq!(FsStat::default().inodes_used_pct(), None);
    }

    #[test]
    fn the_root_filesystem_of_this_machine() {
        let s = stat(Path::new("/")).expect("statvfs(/) works");
        assert!(s.frsize > 0 && s.blocks > 0, "{s:?}");
        assert!(s.bavail <= s.bfree && s.bfree <= s.blocks, "{s:?}");
        assert!(stat(Path::new("/nonexistent/storwatch")).is_err());
    }

    #[test]
    fn in_a_child_process_the_same_numbers() {
        // Two calls on a quiet filesystem may see other writers in between: the fixed numbers
        // must agree, the free counts only roughly.
        let here = Path::new(env!("CARGO_MANIFEST_DIR"));
        let a = stat(here).expect("statvfs in process");
        let b = stat_apart(here).expect("statvfs in a child");
        assert_eq!((a.frsize, a.blocks, a.files), (b.frsize, b.blocks, b.files));
        assert_eq!(a.read_only, b.read_only);
        assert!(b.bavail <= b.bfree && b.bfree <= b.blocks, "{b:?}");
        let e = stat_apart(Path::new("/nonexistent/storwatch")).expect_err("no such path");
        assert_eq!(e.kind(), io::ErrorKind::NotFound);
        assert!(stat_apart(Path::new("/a\0b")).is_err());
    }

    #[test]
    fn one_child_for_many_paths_each_answer_as_it_comes() {
        let here = Path::new(env!("CARGO_MANIFEST_DIR"));
        let missing = Path::new("/nonexistent/storwatch");
        let mut got = Vec::new();
        stat_apart_each(&[here, missing, Path::new("/")], &mut |i, r| {
            got.push((i, r.map_err(|e| e.kind())));
            true
        });
        assert_eq!(got.len(), 3, "{got:?}");
        assert!(got[0].1.as_ref().is_ok_and(|s| s.blocks > 0), "{got:?}");
        assert_eq!(got[1], (1, Err(io::ErrorKind::NotFound)));
        assert_eq!(got[2].0, 2);
        // Told to stop: no more answers.
        let mut n = 0;
        stat_apart_each(&[here, here, here], &mut |_, _| {
            n += 1;
            false
        });
        assert_eq!(n, 1);
    }

    #[test]
    fn stand_in_file() {
        let r = parse_file(
            "# comment\n/srv/a\\040b 4096 100 50 40 10 5 5 1\n\
             /bad 4096 100 150 40 10 5 5 0\nrel 1 1 1 1 1 1 1 0\n/short 1 2 3\n",
        );
        assert_eq!(r.rows.len(), 1);
        assert_eq!(r.rows[0].0, "/srv/a\\040b");
        assert!(r.rows[0].1.read_only);
        assert_eq!(
            r.errors.iter().map(|e| e.line).collect::<Vec<_>>(),
            [3, 4, 5]
        );
    }
}
