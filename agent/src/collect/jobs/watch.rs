//! Off cgroupfs, the rename check by inotify: one watch on each job's directory, and one `read`
//! of the inotify descriptor a reading, instead of a `statx` of each job's directory. On any
//! tree, the walk's directories watched ([`TreeWatch`]): the tree is listed again only when
//! one of them changed.
//!
//! On cgroupfs a kept file is never replaced, and nothing is checked. On any other tree (the
//! simulator's, a fixture, a tmpfs bench) a file of a job's directory may be replaced by a
//! rename, which leaves a kept descriptor on the old file. What tells it: a rename, link, unlink
//! or creation in a directory is reported by inotify on a watch of that directory
//! (`IN_MOVED_TO`, `IN_MOVED_FROM`, `IN_CREATE`, `IN_DELETE`; inotify(7)), whatever the file
//! system's clock — unlike the directory's times, which a change within the same tick can leave
//! equal. Writes in place (`IN_MODIFY`, the kernel's way with its files and the bench's ticker's)
//! are not asked for: they cost no event. So a reading where no job's directory changed costs
//! one `read` that answers `EAGAIN`, and a job whose directory changed has its kept files
//! checked one by one ([`Tracked::files_may_be_replaced`](super::Tracked)) as before.
//!
//! A watch is of an inode, not a name. When a job's directory is removed (a slot's cgroup made
//! again under its name), the kernel ends its watch (`IN_DELETE_SELF`, then `IN_IGNORED`); a
//! directory renamed away keeps it (`IN_MOVE_SELF`). Either way the job's watch is lost: its
//! files are checked and its directory watched again by name at its next reading, so the new
//! directory, not the old one, is the one watched.
//!
//! Limits: watches count against `fs.inotify.max_user_watches` (8,192 on older kernels, more
//! by memory since 5.11) and the descriptor against `fs.inotify.max_user_instances` (128). A job
//! whose watch cannot be added, and every job when the descriptor cannot be made, falls back to
//! the `statx` of its directory at each reading (nothing logged: only the cost differs). The
//! kernel's event queue (`fs.inotify.max_queued_events`, 16,384) overflowing (`IN_Q_OVERFLOW`)
//! has every job's files checked at the next reading.

use std::mem::MaybeUninit;
use std::path::Path;

use rustix::fd::OwnedFd;
use rustix::fs::inotify::{self, CreateFlags, ReadFlags, WatchFlags};

/// Events of a job's directory that may have replaced a kept file, or moved the directory.
const WATCHED: WatchFlags = WatchFlags::CREATE
    .union(WatchFlags::DELETE)
    .union(WatchFlags::MOVED_FROM)
    .union(WatchFlags::MOVED_TO)
    .union(WatchFlags::DELETE_SELF)
    .union(WatchFlags::MOVE_SELF)
    .union(WatchFlags::ONLYDIR);

/// The watch of a job's directory ended or no longer names it: watch it again by name.
const LOST: ReadFlags = ReadFlags::IGNORED
    .union(ReadFlags::DELETE_SELF)
    .union(ReadFlags::MOVE_SELF)
    .union(ReadFlags::UNMOUNT);

/// One inotify descriptor for the jobs' directories, and what its events said since the last
/// [`DirWatch::drain`].
#[derive(Debug)]
pub(super) struct DirWatch {
    fd: OwnedFd,
    /// Watches with an event, sorted.
    changed: Vec<i32>,
    /// Watches whose directory went (removed, moved away, unmounted), sorted.
    lost: Vec<i32>,
    /// The kernel's queue overflowed: events were lost, every job is checked.
    overflow: bool,
    /// Events read since start, for the tests.
    pub(super) events: u64,
}

/// What a job's watch says at a reading.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Seen {
    /// No event since the last reading: no kept file was replaced.
    Unchanged,
    /// Something was created, removed or renamed in the directory: check the kept files.
    Changed,
    /// The watch no longer stands for the directory by its name: watch it again and check.
    Lost,
}

impl DirWatch {
    /// A non-blocking inotify descriptor; `None` when the kernel refuses one (no inotify, the
    /// user's instances used up).
    pub(super) fn new() -> Option<Self> {
        let fd = inotify::init(CreateFlags::NONBLOCK | CreateFlags::CLOEXEC).ok()?;
        Some(Self {
            fd,
            changed: Vec::new(),
            lost: Vec::new(),
            overflow: false,
            events: 0,
        })
    }

    /// Watches `dir`; `None` when it cannot be (gone, not a directory, the user's watches used
    /// up). Watching a directory watched already gives its watch again.
    pub(super) fn add(&self, dir: &Path) -> Option<i32> {
        inotify::add_watch(&self.fd, dir, WATCHED).ok()
    }

    /// Reads every event queued since the last call: one `read` answering `EAGAIN` when nothing
    /// changed.
    pub(super) fn drain(&mut self) {
        self.changed.clear();
        self.lost.clear();
        self.overflow = false;
        // Room for 16 events with a name of NAME_MAX; more are read in further rounds.
        let mut buf = [MaybeUninit::<u8>::uninit(); 4096];
        let mut reader = inotify::Reader::new(&self.fd, &mut buf);
        loop {
            let event = match reader.next() {
                Ok(e) => e,
                // EAGAIN: nothing more; anything else (EINTR aside) would come back at the
                // next reading: then every job is checked rather than trusted.
                Err(rustix::io::Errno::INTR) => continue,
                Err(rustix::io::Errno::AGAIN) => break,
                Err(_) => {
                    self.overflow = true;
                    break;
                }
            };
            self.events += 1;
            let flags = event.events();
            if flags.contains(ReadFlags::QUEUE_OVERFLOW) {
                self.overflow = true;
            }
            if flags.intersects(LOST) {
                self.lost.push(event.wd());
            }
            self.changed.push(event.wd());
        }
        for v in [&mut self.changed, &mut self.lost] {
            v.sort_unstable();
            v.dedup();
        }
    }

    /// What the events read by the last [`DirWatch::drain`] say of the watch `wd`.
    pub(super) fn seen(&self, wd: i32) -> Seen {
        if self.lost.binary_search(&wd).is_ok() {
            Seen::Lost
        } else if self.overflow || self.changed.binary_search(&wd).is_ok() {
            Seen::Changed
        } else {
            Seen::Unchanged
        }
    }
}

/// Events in a directory the walk lists that may change the listing: a subdirectory made,
/// removed or renamed in it, or the directory itself gone — the events a job's directory is
/// watched for.
const TREE: WatchFlags = WATCHED;

/// The directories the walk lists (not the jobs' own, which it does not descend into once
/// known), watched so that a reading lists the tree again only when one of them changed.
///
/// On cgroupfs a directory's times do not move when a cgroup is made or removed in it (kernfs
/// keeps no times of its own for a directory nobody set them on: its `mtime` stays the one it
/// was made with), and its link count alone would miss a job that ended and another that
/// started between two readings. `mkdir(2)`, `rmdir(2)` and `rename(2)` go through the VFS,
/// which reports them to inotify on the parent's watch (`IN_CREATE`, `IN_DELETE`, `IN_MOVED_*`),
/// on cgroupfs as on any other file system; batch systems and systemd make and remove cgroups
/// that way. Files written in place (the kernel's counters, the bench's ticker) cost no event.
///
/// A directory is watched before it is listed, so a change after its listing is an event for
/// the next reading, and a change before it is in the listing. Watches of directories the last
/// walk did not list (below a job found since, or gone) are removed. A reading lists the tree
/// again when a watched directory had an event, when the kernel's queue overflowed, when a
/// directory of the last walk could not be watched or listed, or when the set of jobs changed
/// since (the walk descends into jobs it does not know yet).
#[derive(Debug)]
pub(super) struct TreeWatch {
    fd: OwnedFd,
    /// Watches of the directories the last walk listed, sorted.
    wds: Vec<i32>,
    /// The walk in progress's, as they are added.
    next: Vec<i32>,
    /// A directory of the last walk could not be watched: the next reading walks.
    incomplete: bool,
}

impl TreeWatch {
    /// A non-blocking inotify descriptor of its own; `None` when the kernel refuses one.
    pub(super) fn new() -> Option<Self> {
        let fd = inotify::init(CreateFlags::NONBLOCK | CreateFlags::CLOEXEC).ok()?;
        Some(Self {
            fd,
            wds: Vec::new(),
            next: Vec::new(),
            incomplete: true,
        })
    }

    /// Whether a directory of the last walk changed since it was watched: reads every event
    /// queued (one `read` answering `EAGAIN` when none).
    pub(super) fn changed(&mut self) -> bool {
        let mut changed = self.incomplete;
        let mut buf = [MaybeUninit::<u8>::uninit(); 4096];
        let mut reader = inotify::Reader::new(&self.fd, &mut buf);
        loop {
            match reader.next() {
                Ok(e) => {
                    // Events of watches removed since (their `IN_IGNORED`) say nothing.
                    changed |= e.events().contains(ReadFlags::QUEUE_OVERFLOW)
                        || self.wds.binary_search(&e.wd()).is_ok();
                }
                Err(rustix::io::Errno::INTR) => {}
                Err(rustix::io::Errno::AGAIN) => break,
                Err(_) => {
                    changed = true;
                    break;
                }
            }
        }
        changed
    }

    /// A walk begins: the directories it lists are watched with [`TreeWatch::add`].
    pub(super) fn begin(&mut self) {
        self.next.clear();
        self.incomplete = false;
    }

    /// Watches `dir`, which the walk is about to list.
    pub(super) fn add(&mut self, dir: &Path) {
        match inotify::add_watch(&self.fd, dir, TREE) {
            Ok(wd) => self.next.push(wd),
            Err(_) => self.incomplete = true,
        }
    }

    /// A directory of the walk could not be listed (an error other than its being gone): the
    /// next reading walks again, as every reading did, and counts the error again.
    pub(super) fn missed(&mut self) {
        self.incomplete = true;
    }

    /// The walk ended: the watches of directories it did not list are removed.
    pub(super) fn end(&mut self) {
        self.next.sort_unstable();
        self.next.dedup();
        for wd in &self.wds {
            if self.next.binary_search(wd).is_err() {
                // Gone with its directory already, or below a job now: either way not ours.
                let _ = inotify::remove_watch(&self.fd, *wd);
            }
        }
        std::mem::swap(&mut self.wds, &mut self.next);
    }
}
