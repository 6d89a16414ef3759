//! The walk made again only when a directory it lists changed (`watch.rs`, `TreeWatch`): jobs
//! that start, end, or are made again under their name are seen at the next reading as when
//! every reading walked; what happens inside a known job's directory, or to its files, costs
//! no walk.

use super::super::*;
use super::{collector, job, job_files, tree};

/// A reading at `at` (µs of uptime ÷ 10⁴), and whether it walked.
fn read(c: &mut JobsCollector, root: &Root, at: u64, errors: &mut SourceErrors) -> bool {
    let walks = c.walks;
    c.read(root, at, errors);
    c.walks > walks
}

#[test]
fn a_worker_walks_only_when_a_listed_directory_changed_and_sees_every_job_come_and_go() {
    let (dir, root) = tree();
    let cg = dir
        .path()
        .join("sys/fs/cgroup/system.slice/slurmstepd.scope");
    job_files(&job(&root), 5_000_000, 100);
    let mut c = collector(JobsConfig::default());
    let mut errors = SourceErrors::new(&[CGROUP]);
    assert!(read(&mut c, &root, 100, &mut errors), "the baseline walks");
    assert!(c.tree.is_some(), "inotify");
    // the job found: the next walk lists the tree without descending into it
    assert!(read(&mut c, &root, 1100, &mut errors));
    assert!(!read(&mut c, &root, 2100, &mut errors), "nothing changed");
    // its files written, a step and a task made in it (the baseline walk listed its step_0:
    // no watch of it is left)
    std::fs::write(job(&root).join("memory.current"), "200\n").expect("write");
    std::fs::create_dir_all(job(&root).join("step_1/user/task_0")).expect("mkdir");
    std::fs::create_dir(job(&root).join("step_0/slurm")).expect("mkdir");
    assert!(
        !read(&mut c, &root, 3100, &mut errors),
        "inside a known job"
    );
    assert_eq!(c.pending.count, 1);

    // a job starts: found at the next reading, as when every reading walked
    let second = cg.join("job_8");
    std::fs::create_dir(&second).expect("mkdir");
    job_files(&second, 1_000_000, 100);
    assert!(read(&mut c, &root, 4100, &mut errors));
    assert_eq!((c.pending.count, c.pending.started), (2, 1));
    assert!(
        read(&mut c, &root, 5100, &mut errors),
        "the set of jobs changed"
    );
    assert!(!read(&mut c, &root, 6100, &mut errors));

    // a job ends
    std::fs::remove_dir_all(&second).expect("rm");
    assert!(read(&mut c, &root, 7100, &mut errors));
    assert_eq!((c.pending.count, c.pending.ended), (1, 1));

    // a job's directory removed and made again under its name (HTCondor's slot): a new job
    assert!(read(&mut c, &root, 8100, &mut errors));
    assert!(!read(&mut c, &root, 9100, &mut errors));
    std::fs::remove_dir_all(job(&root)).expect("rm");
    std::fs::create_dir_all(job(&root).join("step_0")).expect("mkdir");
    job_files(&job(&root), 1_000, 100);
    assert!(read(&mut c, &root, 10100, &mut errors));
    assert_eq!(
        (c.pending.count, c.pending.started, c.pending.ended),
        (1, 1, 1)
    );

    // a directory made anywhere the walk lists (a service): a walk, no job
    assert!(!read(&mut c, &root, 11100, &mut errors));
    std::fs::create_dir_all(dir.path().join("sys/fs/cgroup/system.slice/a.service"))
        .expect("mkdir");
    assert!(read(&mut c, &root, 12100, &mut errors));
    assert!(!read(&mut c, &root, 13100, &mut errors));
    // renamed, and below it
    std::fs::rename(
        dir.path().join("sys/fs/cgroup/system.slice/a.service"),
        dir.path().join("sys/fs/cgroup/system.slice/b.service"),
    )
    .expect("rename");
    assert!(read(&mut c, &root, 14100, &mut errors));
    std::fs::create_dir(dir.path().join("sys/fs/cgroup/system.slice/b.service/x")).expect("mkdir");
    assert!(read(&mut c, &root, 15100, &mut errors));
    assert_eq!(c.pending.count, 1);
    assert_eq!(errors.interval_sum(), 0);
}

/// Where no directory can be watched, every reading of a worker walks, as before.
#[test]
fn without_a_watch_a_worker_walks_at_every_reading() {
    let (_dir, root) = tree();
    job_files(&job(&root), 5_000_000, 100);
    let mut c = collector(JobsConfig::default());
    let mut errors = SourceErrors::new(&[CGROUP]);
    assert!(read(&mut c, &root, 100, &mut errors));
    c.tree = None;
    for at in [1100, 2100, 3100] {
        assert!(read(&mut c, &root, at, &mut errors));
    }
    assert_eq!(c.pending.count, 1);
}
