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
//! (no socket, no output, no lock), and the agent exits whenever it is told to. The agent waits
//! for each answer with `poll(2)` up to a deadline; a late child is SIGKILLed (it dies at once
//! in a killable wait, when the mount answers in a FUSE one), reaped later with `WNOHANG`, and
//! its path not tried again until then.
//!
//! A host simulated under `--proc-root` has no real filesystems behind its mount table, so the
//! simulator writes the numbers into a file (`[fs] statvfs_file`), one line per mount point:
//!
//! ```text
//! # mount point (escaped as in mountinfo)  frsize blocks bfree bavail files ffree favail ro
//! /srv/pool1 4096 3906250000 1468750000 1468750000 1953125000 1953000000 1953000000 0
//! ```

use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

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

/// `statvfs(3)` on `path`, in this process: it blocks for as long as the filesystem does, so
/// only the tests use it (to compare with the child's numbers); the agent calls [`stat_apart`].
#[cfg(test)]
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

/// Children abandoned with SIGKILL, and the path each was stuck in.
///
/// Process-wide on purpose: they are children of the process, not of a collector, and a
/// collector rebuilt on SIGHUP must still skip a path whose call has not returned (a child in
/// an uninterruptible FUSE wait lives until the mount answers; forking another there each
/// reload would leak one process a reload). Bounded by [`MAX_ABANDONED`].
static ABANDONED: std::sync::Mutex<Vec<(libc::pid_t, PathBuf)>> = std::sync::Mutex::new(Vec::new());

/// Abandoned children kept at most; with that many still stuck, no further child is forked
/// (each one is a task of the unit's `TasksMax`).
pub const MAX_ABANDONED: usize = 16;

fn abandoned() -> std::sync::MutexGuard<'static, Vec<(libc::pid_t, PathBuf)>> {
    ABANDONED
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Reaps the abandoned children that have exited (`WNOHANG`: never waits).
fn reap_abandoned() {
    abandoned().retain(|&(pid, _)| {
        let mut status = 0;
        // SAFETY: polls our own child; `status` is written by the call.
        #[allow(unsafe_code)]
        let rc = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
        // 0: still running; -1 (ECHILD): reaped elsewhere or not ours any more.
        rc == 0
    });
}

/// Whether a child abandoned on `path` is still stuck in its call: the path is not tried again
/// until it has returned (a killed child of a hung FUSE mount exits when the mount answers; one
/// of a killable NFS wait at once, and the path is tried again in the next round).
pub fn still_stuck(path: &Path) -> bool {
    reap_abandoned();
    abandoned().iter().any(|(_, p)| p == path)
}

/// The abandoned children still running (tests, and the count a site may ask about).
pub fn stuck_children() -> usize {
    reap_abandoned();
    abandoned().len()
}

/// `statvfs(3)` on `path` in a forked child process, so that a call that never returns (a hung
/// FUSE or NFS mount) leaves a stuck child behind instead of a thread the agent cannot exit
/// without; given up on after `deadline`.
pub fn stat_apart(path: &Path, deadline: Duration) -> io::Result<FsStat> {
    let mut out = Err(io::Error::other("no answer"));
    stat_apart_each(&[path], deadline, &mut |_, r| {
        out = r;
        true
    });
    out
}

/// [`stat_apart`] on each of `paths`, in order, all in one child (one fork a round, not one a
/// mount). `each(i, result)` gets every answer as it arrives, before the next call is waited
/// for, and says whether to go on; told to stop, the child is killed.
///
/// The answer to each call is waited for with `poll(2)` for at most `deadline` (from the
/// previous answer): a call that has not answered by then gets a `TimedOut` error, its child is
/// SIGKILLed and left to be reaped later (`WNOHANG`, [`still_stuck`]), and a new child measures
/// the paths after it. No thread ever waits longer than `deadline` for one call.
pub fn stat_apart_each(
    paths: &[&Path],
    deadline: Duration,
    each: &mut dyn FnMut(usize, io::Result<FsStat>) -> bool,
) {
    let mut from = 0;
    while from < paths.len() {
        match stat_child_round(&paths[from..]) {
            Err(e) => {
                for i in from..paths.len() {
                    if !each(i, Err(io::Error::new(e.kind(), e.to_string()))) {
                        return;
                    }
                }
                return;
            }
            Ok(mut child) => {
                let mut next = None;
                for i in from..paths.len() {
                    match child.answer(deadline) {
                        Answer::Record(r) => {
                            if !each(i, r) {
                                return; // `child` dropped: killed and reaped
                            }
                        }
                        Answer::Late => {
                            child.abandon(paths[i]);
                            let e = io::Error::new(
                                io::ErrorKind::TimedOut,
                                format!("no answer within {deadline:?}"),
                            );
                            if !each(i, Err(e)) {
                                return;
                            }
                            next = Some(i + 1);
                            break;
                        }
                        Answer::Failed(e) => {
                            let e = io::Error::new(
                                e.kind(),
                                format!("statvfs in a child process: {e}"),
                            );
                            for j in i..paths.len() {
                                if !each(j, Err(io::Error::new(e.kind(), e.to_string()))) {
                                    return;
                                }
                            }
                            return;
                        }
                    }
                }
                match next {
                    Some(n) => from = n,
                    None => return,
                }
            }
        }
    }
}

/// What came out of the pipe.
enum Answer {
    Record(io::Result<FsStat>),
    /// Nothing within the deadline.
    Late,
    /// The child died or the pipe failed.
    Failed(io::Error),
}

/// A child measuring paths, SIGKILLed and reaped when dropped (unless abandoned).
struct Child {
    pid: libc::pid_t,
    rd: std::fs::File,
    abandoned: bool,
    /// Calls it has not answered yet.
    left: usize,
}

impl Child {
    /// The next record, waiting for it at most `deadline`.
    fn answer(&mut self, deadline: Duration) -> Answer {
        let end = Instant::now() + deadline;
        let mut rec = [0u8; RECORD_BYTES];
        let mut got = 0;
        while got < RECORD_BYTES {
            let left = end.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Answer::Late;
            }
            let timeout = rustix::event::Timespec {
                tv_sec: i64::try_from(left.as_secs()).unwrap_or(i64::MAX),
                tv_nsec: i64::from(left.subsec_nanos()),
            };
            let mut fds = [rustix::event::PollFd::new(
                &self.rd,
                rustix::event::PollFlags::IN,
            )];
            match rustix::event::poll(&mut fds, Some(&timeout)) {
                Ok(0) | Err(rustix::io::Errno::INTR) => continue,
                Ok(_) => {}
                Err(e) => return Answer::Failed(e.into()),
            }
            match io::Read::read(&mut self.rd, &mut rec[got..]) {
                Ok(0) => {
                    return Answer::Failed(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "the child exited without answering",
                    ))
                }
                Ok(n) => got += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Answer::Failed(e),
            }
        }
        self.left = self.left.saturating_sub(1);
        Answer::Record(decode(&rec))
    }

    /// Kills the child stuck on `path` and leaves it to be reaped later.
    fn abandon(&mut self, path: &Path) {
        kill(self.pid);
        self.abandoned = true;
        abandoned().push((self.pid, path.to_owned()));
    }
}

impl Drop for Child {
    fn drop(&mut self) {
        if self.abandoned {
            return;
        }
        if self.left == 0 {
            // It has answered everything and is exiting: reaped now.
            loop {
                let mut status = 0;
                // SAFETY: waits for our own child; `status` is written by the call.
                #[allow(unsafe_code)]
                let rc = unsafe { libc::waitpid(self.pid, &mut status, 0) };
                if rc >= 0 || io::Error::last_os_error().kind() != io::ErrorKind::Interrupted {
                    return;
                }
            }
        }
        // Told to stop (it may be in a call that never returns): killed, and reaped now if it
        // has gone, else later with the abandoned ones — never waited for here.
        kill(self.pid);
        let mut status = 0;
        // SAFETY: polls our own child; `status` is written by the call.
        #[allow(unsafe_code)]
        let rc = unsafe { libc::waitpid(self.pid, &mut status, libc::WNOHANG) };
        if rc == 0 {
            abandoned().push((self.pid, PathBuf::new()));
        }
    }
}

fn kill(pid: libc::pid_t) {
    // SAFETY: signals our own child, not yet reaped (its pid cannot have been reused).
    #[allow(unsafe_code)]
    unsafe {
        libc::kill(pid, libc::SIGKILL);
    }
}

/// Forks a child for `paths`, unless too many abandoned ones are still stuck.
fn stat_child_round(paths: &[&Path]) -> io::Result<Child> {
    reap_abandoned();
    let stuck = abandoned().len();
    if stuck >= MAX_ABANDONED {
        return Err(io::Error::other(format!(
            "{stuck} statvfs children still stuck in earlier calls; no further one is started \
             until one ends"
        )));
    }
    let (pid, rd) = spawn_child(paths)?;
    Ok(Child {
        pid,
        rd: std::fs::File::from(rd),
        abandoned: false,
        left: paths.len(),
    })
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

/// The forked child: closes everything inherited but `out`, makes the calls, writes a record for
/// each as it returns, exits. Async-signal-safe calls only (sigaction, sigprocmask, close,
/// statfs, write, _exit), and no allocation.
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
    // The agent's handlers for SIGTERM, SIGINT, SIGHUP (and SIGUSR1/2) only set flags in this
    // copy's memory that nobody reads: back to the default action, so that SIGTERM (systemctl
    // stop signals the whole cgroup) ends a child in a killable wait, and with nothing blocked.
    let mut dfl: libc::sigaction = std::mem::zeroed();
    dfl.sa_sigaction = libc::SIG_DFL;
    libc::sigemptyset(&mut dfl.sa_mask);
    for sig in [
        libc::SIGTERM,
        libc::SIGINT,
        libc::SIGHUP,
        libc::SIGUSR1,
        libc::SIGUSR2,
    ] {
        libc::sigaction(sig, &dfl, std::ptr::null_mut());
    }
    let mut none: libc::sigset_t = std::mem::zeroed();
    libc::sigemptyset(&mut none);
    libc::sigprocmask(libc::SIG_SETMASK, &none, std::ptr::null_mut());
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

    /// A deadline no call on a healthy filesystem comes near.
    const T: Duration = Duration::from_secs(30);

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
        let b = stat_apart(here, T).expect("statvfs in a child");
        assert_eq!((a.frsize, a.blocks, a.files), (b.frsize, b.blocks, b.files));
        assert_eq!(a.read_only, b.read_only);
        assert!(b.bavail <= b.bfree && b.bfree <= b.blocks, "{b:?}");
        let e = stat_apart(Path::new("/nonexistent/storwatch"), T).expect_err("no such path");
        assert_eq!(e.kind(), io::ErrorKind::NotFound);
        assert!(stat_apart(Path::new("/a\0b"), T).is_err());
    }

    #[test]
    fn one_child_for_many_paths_each_answer_as_it_comes() {
        let here = Path::new(env!("CARGO_MANIFEST_DIR"));
        let missing = Path::new("/nonexistent/storwatch");
        let mut got = Vec::new();
        stat_apart_each(&[here, missing, Path::new("/")], T, &mut |i, r| {
            got.push((i, r.map_err(|e| e.kind())));
            true
        });
        assert_eq!(got.len(), 3, "{got:?}");
        assert!(got[0].1.as_ref().is_ok_and(|s| s.blocks > 0), "{got:?}");
        assert_eq!(got[1], (1, Err(io::ErrorKind::NotFound)));
        assert_eq!(got[2].0, 2);
        // Told to stop: no more answers.
        let mut n = 0;
        stat_apart_each(&[here, here, here], T, &mut |_, _| {
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
