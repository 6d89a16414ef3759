//! Off cgroupfs, the rename check by inotify (`watch.rs`): a job's kept files are checked only
//! after something changed in its directory, and a directory removed and made again under the
//! job's name is the one watched from then on.

use super::super::*;
use super::{collector, job, job_files, memory_current, replace, tree};

#[test]
fn a_watched_directory_has_its_files_checked_only_after_a_change_in_it() {
    let (_dir, root) = tree();
    job_files(&job(&root), 5, 100);
    // The default settle time: the directory's times, a moment old, would not be trusted, and
    // every kept file would be checked at every reading. The watch needs no settling.
    let mut c = collector(JobsConfig::default());
    let mut errors = SourceErrors::new(&[CGROUP]);
    c.read(&root, 100, &mut errors);
    assert!(c.watch.is_some(), "inotify off cgroupfs");
    assert_eq!(memory_current(&c), Some(100));
    c.read(&root, 200, &mut errors);
    assert_eq!(c.file_checks, 0, "nothing changed: no file checked");
    // rewritten in place (the kernel's way, and the bench's): no event, the descriptor reads it
    std::fs::write(job(&root).join("memory.current"), "200\n").expect("write");
    c.read(&root, 300, &mut errors);
    assert_eq!((memory_current(&c), c.file_checks), (Some(200), 0));
    // replaced by a rename, within the same second: each kept file checked, the new one read
    replace(&job(&root).join("memory.current"), "300\n");
    c.read(&root, 400, &mut errors);
    assert_eq!((memory_current(&c), c.file_checks), (Some(300), 7));
    c.read(&root, 500, &mut errors);
    assert_eq!((memory_current(&c), c.file_checks), (Some(300), 7));
    // a file removed, and one made in the directory: checked again
    std::fs::remove_file(job(&root).join("memory.peak")).expect("rm");
    c.read(&root, 600, &mut errors);
    assert_eq!(c.file_checks, 14);
    // made again: the six kept files checked (the one found absent waits for its probe)
    std::fs::write(job(&root).join("memory.peak"), "2000\n").expect("write");
    c.read(&root, 700, &mut errors);
    assert_eq!(c.file_checks, 20);
    c.read(&root, 800, &mut errors);
    assert_eq!(c.file_checks, 20);
    assert_eq!(errors.interval_sum(), 0);
}

/// The lifecycle that matters most: HTCondor removes a slot's cgroup when its job ends and
/// makes it again under the same name for the next. The old directory's watch ends with it; the
/// new directory is watched, so that a file replaced in it later is seen.
#[test]
fn a_job_directory_removed_and_made_again_is_watched_anew() {
    let (_dir, root) = tree();
    job_files(&job(&root), 5_000_000, 100);
    let mut c = collector(JobsConfig::default());
    let mut errors = SourceErrors::new(&[CGROUP]);
    c.read(&root, 100, &mut errors);
    c.read(&root, 1100, &mut errors);
    assert_eq!((c.pending.started, c.pending.ended), (0, 0));
    let old_wd = c.jobs.values().next().and_then(|t| t.kept.as_ref()?.wd);
    assert!(old_wd.is_some());

    std::fs::remove_dir_all(job(&root)).expect("rm");
    std::fs::create_dir_all(job(&root).join("step_0")).expect("mkdir");
    job_files(&job(&root), 1_000_000, 400);
    c.read(&root, 2100, &mut errors);
    assert_eq!((c.pending.started, c.pending.ended), (1, 1));
    assert_eq!(memory_current(&c), Some(400));
    let new_wd = c.jobs.values().next().and_then(|t| t.kept.as_ref()?.wd);
    assert!(
        new_wd.is_some() && new_wd != old_wd,
        "{old_wd:?} {new_wd:?}"
    );

    let checks = c.file_checks;
    c.read(&root, 3100, &mut errors);
    assert_eq!(
        c.file_checks, checks,
        "the new directory unchanged: nothing checked"
    );
    assert_eq!((c.pending.started, c.pending.ended), (0, 0));
    // a file of the new directory replaced: seen through its watch
    replace(&job(&root).join("memory.current"), "500\n");
    c.read(&root, 4100, &mut errors);
    assert_eq!(memory_current(&c), Some(500));
    assert_eq!(c.file_checks, checks + 7);
    assert_eq!(errors.interval_sum(), 0);
}

/// The same, made again after the walk listed the old directory (so the walk's inode does not
/// tell): the old watch's end has the kept files checked, found unlinked and opened again, and
/// the new cgroup's lower counter makes it a new instance at once.
#[test]
fn a_job_directory_made_again_after_the_walk_is_read_anew_through_its_lost_watch() {
    let (_dir, root) = tree();
    job_files(&job(&root), 5_000_000, 100);
    let mut c = collector(JobsConfig::default());
    let mut errors = SourceErrors::new(&[CGROUP]);
    c.read(&root, 100, &mut errors);
    c.read(&root, 1100, &mut errors);
    std::fs::remove_dir_all(job(&root)).expect("rm");
    std::fs::create_dir_all(job(&root).join("step_0")).expect("mkdir");
    job_files(&job(&root), 1_000_000, 400);
    // as if the walk had listed the old directory
    let t = c.jobs.values_mut().next().expect("tracked");
    t.ino = super::super::dir_ino(&job(&root));
    c.read(&root, 2100, &mut errors);
    assert_eq!((c.pending.started, c.pending.ended), (1, 1));
    assert_eq!(memory_current(&c), Some(400));
    // and the new directory is the one watched
    c.read(&root, 3100, &mut errors);
    replace(&job(&root).join("memory.current"), "500\n");
    c.read(&root, 4100, &mut errors);
    assert_eq!(memory_current(&c), Some(500));
    assert_eq!(errors.interval_sum(), 0);
}

/// More events than the kernel queues (`fs.inotify.max_queued_events`): the queue's overflow
/// has every job's files checked, as the events lost might have said.
#[test]
fn an_overflowed_event_queue_has_every_job_checked() {
    let max: usize = std::fs::read_to_string("/proc/sys/fs/inotify/max_queued_events")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(16_384);
    assert!(
        max <= 1 << 20,
        "max_queued_events {max}: too many events to make"
    );
    let (dir, root) = tree();
    job_files(&job(&root), 5, 100);
    // a second job, whose directory sees the events
    let other = root.sys("fs/cgroup/system.slice/slurmstepd.scope/job_8");
    std::fs::create_dir_all(&other).expect("mkdir");
    job_files(&other, 5, 100);
    let mut c = collector(JobsConfig::default());
    let mut errors = SourceErrors::new(&[CGROUP]);
    c.read(&root, 100, &mut errors);
    c.read(&root, 200, &mut errors);
    assert_eq!(c.file_checks, 0);
    // each creation and removal is an event of job_8's watch
    let scratch = other.join("scratch");
    for _ in 0..max / 2 + 1 {
        std::fs::write(&scratch, "").expect("write");
        std::fs::remove_file(&scratch).expect("rm");
    }
    c.read(&root, 300, &mut errors);
    // job_7's directory had no event of its own: checked for the overflow alone
    assert_eq!(c.file_checks, 14);
    c.read(&root, 400, &mut errors);
    assert_eq!(c.file_checks, 14);
    drop(dir);
}
