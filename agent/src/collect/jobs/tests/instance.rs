//! A job is a cgroup instance, not a name: HTCondor removes a slot's cgroup when its job ends
//! and makes it again under the same name for the next job in that slot (`vanilla_proc.cpp`
//! names it after the execute directory and the slot, nothing of the job). On a tree written
//! here (tmpfs) and on real cgroupfs (cgroup v2, under a private directory).

use super::super::*;
use crate::health::jobs::Presence;
use std::path::Path;

const S: u64 = 1_000_000;
/// HTCondor 24.8+ under the packaged unit (`DelegateSubgroup=leaf`).
const BASE: &str = "system.slice/condor.service/htcondor";
const SLOT: &str = "_var_lib_condor_execute_slot1_1@wn042.example.org.slice";

fn collector() -> JobsCollector {
    JobsCollector::new(
        JobsConfig::default(),
        std::time::Duration::from_secs(1),
        std::time::Duration::from_secs(10),
    )
}

fn write_job(dir: &Path, usage_usec: u64, wbytes: u64) {
    std::fs::create_dir_all(dir).expect("mkdir");
    for (name, text) in [
        (
            "cpu.stat",
            format!("usage_usec {usage_usec}\nuser_usec {usage_usec}\nsystem_usec 0\n"),
        ),
        (
            "io.stat",
            format!("8:0 rbytes=0 wbytes={wbytes} rios=0 wios=1 dbytes=0 dios=0\n"),
        ),
        // one core: HTCondor writes 100 × the slot's Cpus
        ("cpu.weight", "100\n".to_owned()),
    ] {
        std::fs::write(dir.join(name), text).expect("write");
    }
}

fn write_parent(cg: &Path, usage_usec: u64) {
    std::fs::write(
        cg.join(BASE).join("cpu.stat"),
        format!("usage_usec {usage_usec}\nuser_usec {usage_usec}\nsystem_usec 0\n"),
    )
    .expect("write");
}

/// The interval of the job present at the end of the last reading.
fn present(c: &JobsCollector) -> &model::JobInterval {
    let present: Vec<&Done> = c
        .pending
        .done
        .iter()
        .filter(|d| d.iv.presence != Presence::Vanished)
        .collect();
    assert_eq!(present.len(), 1, "one job present");
    &present[0].iv
}

#[test]
fn a_slot_cgroup_made_again_under_its_name_ends_one_job_and_starts_another() {
    let dir = tempfile::tempdir().expect("tempdir");
    let sys = dir.path().join("sys");
    let cg = sys.join("fs/cgroup");
    std::fs::create_dir_all(cg.join("system.slice/condor.service/leaf")).expect("mkdir");
    std::fs::write(cg.join("cgroup.controllers"), "cpu io memory\n").expect("write");
    let root = Root::new(dir.path().join("proc"), sys);
    let job = cg.join(BASE).join(SLOT);
    let mut c = collector();
    let mut errors = SourceErrors::new(&[CGROUP]);

    // The old job: 500 s of CPU and 10 GB written so far; then half a core, 11 MB/s.
    write_job(&job, 500 * S, 10_000_000_000);
    write_parent(&cg, 500 * S);
    c.read(&root, 100_000, &mut errors);
    write_job(&job, 505 * S, 10_110_000_000);
    write_parent(&cg, 505 * S);
    c.read(&root, 101_000, &mut errors);
    assert_eq!((c.pending.started, c.pending.ended), (0, 0));
    assert!((present(&c).efficiency.expect("efficiency") - 0.5).abs() < 1e-9);

    // It used 2 s more and ended; the starter removed the slot's cgroup and made it again
    // for the next job, which used 6 s of CPU and wrote 600 MB (60 MB/s) by the reading.
    std::fs::remove_dir_all(&job).expect("rm");
    write_job(&job, 6 * S, 600_000_000);
    write_parent(&cg, 513 * S);
    c.read(&root, 102_000, &mut errors);
    let p = &c.pending;
    assert_eq!((p.count, p.started, p.ended), (1, 1, 1));
    let iv = present(&c);
    assert_eq!(iv.presence, Presence::Appeared);
    assert_eq!(iv.cpu_usec, Some(6 * S));
    assert_eq!(iv.wall_usec, 10 * S);
    assert!((iv.efficiency.expect("efficiency") - 0.6).abs() < 1e-9);
    let written: f64 = iv.io.iter().filter_map(|d| d.write_bytes_per_s).sum();
    assert!((written - 60e6).abs() < 1e-3, "{written}");
    // The node: the parent's 8 s (2 of the old job, 6 of the new) over the new job's 10
    // core-seconds and the old one's (counted the whole interval, an upper bound).
    let node = c.node(&c.pending);
    assert_eq!(node.cpu_usec, 8 * S);
    assert!((node.efficiency.expect("efficiency") - 0.4).abs() < 1e-9);
    // Its line: age_s starts again, from the last reading without it.
    let mut w = LineWriter::new("wn042", &[]);
    c.write(&mut w, &root, 1);
    let text = String::from_utf8_lossy(w.as_bytes()).into_owned();
    let line = text
        .lines()
        .find(|l| l.starts_with("job,"))
        .expect("a job line");
    assert!(line.contains("age_s=10"), "{line}");
    assert!(text.contains("started=1i,ended=1i"), "{text}");
    assert_eq!(errors.interval_sum(), 0);
}

#[test]
fn a_counter_that_went_down_is_a_new_instance_even_when_the_walk_missed_it() {
    // The walk saw the old directory; the new one was made before its files were read (a job
    // read by path sees the new cgroup's counters, lower than the old's).
    let dir = tempfile::tempdir().expect("tempdir");
    let sys = dir.path().join("sys");
    let cg = sys.join("fs/cgroup");
    std::fs::create_dir_all(cg.join(BASE)).expect("mkdir");
    std::fs::write(cg.join("cgroup.controllers"), "cpu io memory\n").expect("write");
    let root = Root::new(dir.path().join("proc"), sys);
    let job = cg.join(BASE).join(SLOT);
    let mut c = collector();
    c.kept_budget = 0; // read by path
    let mut errors = SourceErrors::new(&[CGROUP]);
    write_job(&job, 500 * S, 10_000_000_000);
    c.read(&root, 100_000, &mut errors);
    write_job(&job, 505 * S, 10_110_000_000);
    c.read(&root, 101_000, &mut errors);
    std::fs::remove_dir_all(&job).expect("rm");
    write_job(&job, 3 * S, 300_000_000);
    // as if the walk had listed the old directory
    let t = c.jobs.values_mut().next().expect("tracked");
    t.ino = super::super::dir_ino(&job);
    c.read(&root, 102_000, &mut errors);
    assert_eq!((c.pending.started, c.pending.ended), (1, 1));
    let iv = present(&c);
    assert_eq!(iv.cpu_usec, Some(3 * S));
    assert!((iv.efficiency.expect("efficiency") - 0.3).abs() < 1e-9);
}

/// A private directory under this machine's cgroup v2 mount, removed (deepest first) when
/// dropped; `None` only where no cgroup v2 hierarchy is mounted at all.
struct RealCgroup {
    top: PathBuf,
}

impl RealCgroup {
    fn new(name: &str) -> Option<Self> {
        let info = std::fs::read_to_string("/proc/self/mountinfo").expect("mountinfo");
        // `<id> <parent> <maj:min> <root> <mount point> <options> … - <fstype> …`
        let mount = info.lines().find_map(|l| {
            let (left, right) = l.split_once(" - ")?;
            (right.split(' ').next()? == "cgroup2").then(|| left.split(' ').nth(4))?
        })?;
        let top = Path::new(mount).join(format!("storwatch-test-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir(&top);
        std::fs::create_dir(&top).unwrap_or_else(|e| {
            panic!(
                "cgroup v2 is mounted at {mount} but {} cannot be made ({e}): these tests \
                 need root",
                top.display()
            )
        });
        Some(Self { top })
    }

    /// Runs a shell busy loop of `n` iterations inside `cgroup`, to its end.
    fn burn(cgroup: &Path, n: u32) {
        let procs = cgroup.join("cgroup.procs");
        let status = std::process::Command::new("sh")
            .arg("-c")
            .arg(format!(
                "echo $$ > '{}' && i=0 && while [ $i -lt {n} ]; do i=$((i+1)); done",
                procs.display()
            ))
            .status()
            .expect("sh");
        assert!(status.success(), "{status}");
    }

    /// Removes `dir` (no process left in it), retrying while the kernel still counts the
    /// process that just exited.
    fn rmdir(dir: &Path) {
        for _ in 0..200 {
            match std::fs::remove_dir(dir) {
                Ok(()) => return,
                Err(e) if e.raw_os_error() == Some(libc::EBUSY) => {
                    std::thread::sleep(std::time::Duration::from_millis(10));
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => return,
                Err(e) => panic!("rmdir {}: {e}", dir.display()),
            }
        }
        panic!("rmdir {}: still busy", dir.display());
    }
}

impl Drop for RealCgroup {
    fn drop(&mut self) {
        // deepest first: a cgroup is removed with rmdir, never with its files
        let mut dirs = vec![self.top.clone()];
        let mut i = 0;
        while i < dirs.len() {
            if let Ok(rd) = std::fs::read_dir(&dirs[i]) {
                for e in rd.flatten() {
                    if e.file_type().is_ok_and(|t| t.is_dir()) {
                        dirs.push(e.path());
                    }
                }
            }
            i += 1;
        }
        for d in dirs.iter().rev() {
            let _ = std::fs::remove_dir(d);
        }
    }
}

fn usage(dir: &Path) -> u64 {
    let text = std::fs::read_to_string(dir.join("cpu.stat")).expect("cpu.stat");
    cpu_stat::usage_usec(&text).expect("usage_usec")
}

/// The two ways a new instance shows on cgroupfs: the walk lists the slot under another inode,
/// or (made again after the walk) the old cgroup's kept descriptors answer ENODEV.
fn on_real_cgroupfs(walk_misses_it: bool) {
    let name = if walk_misses_it { "enodev" } else { "inode" };
    let Some(real) = RealCgroup::new(name) else {
        eprintln!("SKIPPED: no cgroup v2 hierarchy mounted on this host");
        return;
    };
    let tmp = tempfile::tempdir().expect("tempdir");
    let sys = tmp.path().join("sys");
    std::fs::create_dir_all(sys.join("fs")).expect("mkdir");
    std::os::unix::fs::symlink(&real.top, sys.join("fs/cgroup")).expect("symlink");
    let root = Root::new(tmp.path().join("proc"), sys);
    let base = real.top.join("system.slice/condor.service/htcondor");
    std::fs::create_dir_all(&base).expect("mkdir");
    let job = base.join(SLOT);
    std::fs::create_dir(&job).expect("mkdir");
    RealCgroup::burn(&job, 20_000);

    let mut c = collector();
    let mut errors = SourceErrors::new(&[CGROUP]);
    c.read(&root, 100_000, &mut errors);
    assert!(!c.stale_check, "a cgroup v2 mount is cgroupfs");
    assert!(
        c.jobs.values().all(|t| t.kept.is_some()),
        "its files kept open"
    );
    c.read(&root, 101_000, &mut errors);
    assert_eq!(c.pending.count, 1);

    // The job ends; the slot's cgroup is made again for the next one, which burns CPU.
    RealCgroup::rmdir(&job);
    std::fs::create_dir(&job).expect("mkdir");
    RealCgroup::burn(&job, 5_000);
    let new_usage = usage(&job);
    if walk_misses_it {
        // as if the walk had listed the old cgroup
        let t = c.jobs.values_mut().next().expect("tracked");
        t.ino = super::super::dir_ino(&job);
    }
    c.read(&root, 102_000, &mut errors);
    let p = &c.pending;
    assert_eq!((p.count, p.started, p.ended), (1, 1, 1));
    let iv = present(&c);
    assert_eq!(iv.presence, Presence::Appeared);
    // the new cgroup's CPU time since it was made, read at this reading, not one later
    assert_eq!(iv.cpu_usec, Some(new_usage));
    assert_eq!(errors.interval_sum(), 0);
    // the next reading: the new job throughout, read through its own descriptors
    c.read(&root, 103_000, &mut errors);
    let p = &c.pending;
    assert_eq!((p.count, p.started, p.ended), (1, 0, 0));
    assert_eq!(present(&c).cpu_usec, Some(usage(&job) - new_usage));
}

#[test]
fn on_real_cgroupfs_a_slot_made_again_is_told_by_its_inode() {
    on_real_cgroupfs(false);
}

#[test]
fn on_real_cgroupfs_a_slot_made_again_after_the_walk_is_told_by_enodev() {
    on_real_cgroupfs(true);
}

#[test]
fn an_ssh_session_that_ends_beside_a_job_is_no_new_instance() {
    // HTCondor 24.8+: condor_ssh_to_job's `<name>/sshd.slice` beside the job's `<name>.slice`,
    // its CPU time added to the job's; when the session ends the sum goes down, the job's own
    // counter does not.
    let dir = tempfile::tempdir().expect("tempdir");
    let sys = dir.path().join("sys");
    let cg = sys.join("fs/cgroup");
    std::fs::create_dir_all(cg.join(BASE)).expect("mkdir");
    std::fs::write(cg.join("cgroup.controllers"), "cpu io memory\n").expect("write");
    let root = Root::new(dir.path().join("proc"), sys);
    let job = cg.join(BASE).join(SLOT);
    let ssh = cg
        .join(BASE)
        .join(SLOT.strip_suffix(".slice").expect("slice"));
    let mut c = collector();
    let mut errors = SourceErrors::new(&[CGROUP]);
    write_job(&job, 100 * S, 0);
    write_job(&ssh.join("sshd.slice"), 50 * S, 0);
    // its directory's counter holds its sshd.slice's, as cgroupfs keeps it
    write_job(&ssh, 50 * S, 0);
    c.read(&root, 100_000, &mut errors);
    assert_eq!(c.jobs.len(), 1, "the ssh directory is the job's");
    write_job(&job, 105 * S, 0);
    std::fs::remove_dir_all(&ssh).expect("rm");
    c.read(&root, 101_000, &mut errors);
    assert_eq!((c.pending.started, c.pending.ended), (0, 0));
}
