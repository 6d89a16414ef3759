//! The collector on trees written by the tests: what the whole-agent tests (agent/tests/it/jobs.rs)
//! cannot time, a job whose directory goes while it is read.

use super::read::{DirTimes, PROBE_EVERY};
use super::report::r3;
use super::*;

mod instance;
mod names;
mod tree;
mod watch;

fn tree() -> (tempfile::TempDir, Root) {
    let dir = tempfile::tempdir().expect("tempdir");
    let sys = dir.path().join("sys");
    let cg = sys.join("fs/cgroup");
    std::fs::create_dir_all(cg.join("system.slice/slurmstepd.scope/job_7/step_0")).expect("mkdir");
    std::fs::write(cg.join("cgroup.controllers"), "cpu io memory\n").expect("write");
    let root = Root::new(dir.path().join("proc"), sys);
    (dir, root)
}

/// A collector as the agent makes it by default: 1 s samples, 10 s reports.
fn collector(cfg: JobsConfig) -> JobsCollector {
    JobsCollector::new(
        cfg,
        std::time::Duration::from_secs(1),
        std::time::Duration::from_secs(10),
    )
}

/// A disk server's tree: a storage service, no batch system.
fn disk_server() -> (tempfile::TempDir, Root) {
    let dir = tempfile::tempdir().expect("tempdir");
    let cg = dir.path().join("sys/fs/cgroup");
    std::fs::create_dir_all(cg.join("system.slice/dcache.service")).expect("mkdir");
    std::fs::write(cg.join("cgroup.controllers"), "cpu io memory\n").expect("write");
    let root = Root::new(dir.path().join("proc"), dir.path().join("sys"));
    (dir, root)
}

fn job(root: &Root) -> PathBuf {
    root.sys("fs/cgroup/system.slice/slurmstepd.scope/job_7")
}

#[test]
fn a_job_whose_files_are_gone_when_read_has_ended_and_is_no_error() {
    let (_dir, root) = tree();
    let mut c = collector(JobsConfig::default());
    let mut errors = SourceErrors::new(&[CGROUP]);
    // listed, but its files already gone (the kernel removed the directory after the walk)
    c.read(&root, 100, &mut errors);
    assert!(c.jobs.is_empty(), "{:?}", c.jobs.keys().collect::<Vec<_>>());
    assert_eq!(errors.interval_sum(), 0);
    // now with its files, then gone between two readings
    std::fs::write(
        job(&root).join("cpu.stat"),
        "usage_usec 5\nuser_usec 3\nsystem_usec 2\n",
    )
    .expect("write");
    c.read(&root, 200, &mut errors);
    assert_eq!(c.jobs.len(), 1);
    std::fs::remove_dir_all(job(&root)).expect("rm");
    c.read(&root, 300, &mut errors);
    assert!(c.jobs.is_empty());
    assert_eq!((c.pending.ended, c.pending.count), (1, 0));
    assert_eq!(errors.interval_sum(), 0);
}

#[test]
fn a_malformed_file_is_a_source_error_and_the_job_goes_on() {
    let (_dir, root) = tree();
    let mut c = collector(JobsConfig::default());
    let mut errors = SourceErrors::new(&[CGROUP]);
    std::fs::write(
        job(&root).join("cpu.stat"),
        "usage_usec 5\nuser_usec 3\nsystem_usec 2\n",
    )
    .expect("write");
    std::fs::write(job(&root).join("memory.current"), "lots\n").expect("write");
    c.read(&root, 100, &mut errors);
    assert_eq!(c.jobs.len(), 1);
    assert_eq!(errors.interval_sum(), 1, "{:?}", errors.take_interval());
}

/// The files are parsed from their bytes, without a UTF-8 check when in the kernel's form: a
/// file with a byte that is not UTF-8 anywhere, even after what is read of it, is still the
/// source error a reader of its text gives, and the job's other files are read.
#[test]
fn a_file_not_utf8_is_a_source_error_as_its_text_was() {
    let (_dir, root) = tree();
    let mut c = collector(JobsConfig::default());
    let mut errors = SourceErrors::new(&[CGROUP]);
    let dir = job(&root);
    let good_psi = "some avg10=0.00 avg60=0.00 avg300=0.00 total=5\n\
                    full avg10=0.00 avg60=0.00 avg300=0.00 total=2\n";
    std::fs::write(dir.join("cpu.stat"), b"usage_usec 5\nuser_usec \xff\n").expect("write");
    std::fs::write(
        dir.join("io.stat"),
        b"8:0 rbytes=1 wbytes=2 rios=3 wios=4\n8:\xff\n",
    )
    .expect("write");
    std::fs::write(
        dir.join("io.pressure"),
        b"some avg10=0.00 avg60=0.00 avg300=0.00 total=5\nfull \xff\n",
    )
    .expect("write");
    std::fs::write(dir.join("cpu.pressure"), good_psi).expect("write");
    std::fs::write(dir.join("memory.current"), b"12\xff\n").expect("write");
    std::fs::write(dir.join("memory.peak"), "4096\n").expect("write");
    c.read(&root, 100, &mut errors);
    assert_eq!(c.jobs.len(), 1);
    assert_eq!(errors.interval_sum(), 4, "{:?}", errors.take_interval());
    let r = c
        .jobs
        .values()
        .next()
        .and_then(|t| t.prev.clone())
        .expect("read");
    assert_eq!(r.cpu, None);
    assert_eq!(r.io, None);
    assert_eq!(r.io_pressure, None);
    assert_eq!(r.memory_current, None);
    assert_eq!(
        r.cpu_pressure.and_then(|p| p.full).map(|l| l.total_us),
        Some(2)
    );
    assert_eq!(r.memory_peak, Some(4096));
    // The same files in the kernel's form: every value, no error.
    std::fs::write(dir.join("cpu.stat"), "usage_usec 7\nuser_usec 3\n").expect("write");
    std::fs::write(dir.join("io.stat"), "8:0 rbytes=1 wbytes=2 rios=3 wios=4\n").expect("write");
    std::fs::write(dir.join("io.pressure"), good_psi).expect("write");
    std::fs::write(dir.join("memory.current"), "12\n").expect("write");
    let mut errors = SourceErrors::new(&[CGROUP]);
    c.read(&root, 1100, &mut errors);
    assert_eq!(errors.interval_sum(), 0, "{:?}", errors.take_interval());
    let r = c
        .jobs
        .values()
        .next()
        .and_then(|t| t.prev.clone())
        .expect("read");
    assert_eq!(r.cpu.map(|s| s.usage_usec), Some(7));
    assert_eq!(r.io.map(|d| d.len()), Some(1));
    assert_eq!(
        r.io_pressure.and_then(|p| p.some).map(|l| l.total_us),
        Some(5)
    );
    assert_eq!(r.memory_current, Some(12));
}

#[test]
fn job_and_slot_tags() {
    let root = "system.slice/condor.service/htcondor/\
                _var_lib_condor_execute_slot1_3@wn042.example.org.slice";
    let id = JobId::HtcondorSlotSlice("slot1_3@wn042.example.org".into());
    assert_eq!(
        job_tags(&id, root),
        (
            "_var_lib_condor_execute_slot1_3@wn042.example.org".into(),
            Some("slot1_3".into())
        )
    );
    assert_eq!(
        job_tags(&JobId::SlurmJobId(1234), "x/job_1234"),
        ("1234".into(), None)
    );
    assert_eq!(
        job_tags(&JobId::Sluid("s5K1KKYAYG5D00".into()), "x/s5K1KKYAYG5D00"),
        ("s5K1KKYAYG5D00".into(), None)
    );
}

#[test]
fn a_node_without_batch_jobs_writes_no_jobs_line_and_a_worker_always_does() {
    let (dir, root) = disk_server();
    let cg = dir.path().join("sys/fs/cgroup");
    let mut c = collector(JobsConfig::default());
    let mut errors = SourceErrors::new(&[CGROUP]);
    c.read(&root, 100, &mut errors);
    c.read(&root, 1100, &mut errors);
    let mut w = LineWriter::new("ds01", &[]);
    c.write(&mut w, &root, 1);
    assert_eq!(w.lines(), 0);
    // an idle worker node: Slurm's directory, no job running; found at the next walk (a node
    // without a batch system walks the tree every WALK_EVERY_OFF_WORKER readings)
    std::fs::create_dir_all(cg.join("system.slice/slurmstepd.scope/system")).expect("mkdir");
    let (walks, mut at) = (c.walks, 2100);
    while c.walks == walks {
        assert!(at < 2100 + 1000 * u64::from(WALK_EVERY_OFF_WORKER));
        c.read(&root, at, &mut errors);
        at += 1000;
    }
    c.write(&mut w, &root, 2);
    let text = String::from_utf8_lossy(w.as_bytes()).into_owned();
    assert!(
        text.starts_with(
            "jobs,host=ds01 count=0i,started=0i,ended=0i,dropped=0i,stalled=0i,cpu_s=0 2\n"
        ),
        "{text}"
    );
    assert_eq!(errors.interval_sum(), 0);
}

#[test]
fn a_configured_glob_makes_jobs_tagged_with_their_path_and_owner() {
    let dir = tempfile::tempdir().expect("tempdir");
    let cg = dir.path().join("sys/fs/cgroup");
    let job = cg.join("user.slice/user-1000.slice/session-4.scope");
    std::fs::create_dir_all(&job).expect("mkdir");
    std::fs::write(cg.join("cgroup.controllers"), "cpu io memory\n").expect("write");
    std::fs::write(job.join("cpu.max"), "50000 100000\n").expect("write");
    let root = Root::new(dir.path().join("proc"), dir.path().join("sys"));
    let cfg = JobsConfig {
        globs: vec!["user.slice/user-*.slice/session-*.scope".into()],
        ..JobsConfig::default()
    };
    let mut c = collector(cfg);
    let mut errors = SourceErrors::new(&[CGROUP]);
    for (t, usage) in [(100, 1_000_000u64), (1100, 3_000_000)] {
        std::fs::write(
            job.join("cpu.stat"),
            format!("usage_usec {usage}\nuser_usec {usage}\nsystem_usec 0\n"),
        )
        .expect("write");
        c.read(&root, t, &mut errors);
    }
    let mut w = LineWriter::new("ui01", &[]);
    c.write(&mut w, &root, 3);
    let text = String::from_utf8_lossy(w.as_bytes()).into_owned();
    // 2 s of CPU in 10 s on half a core (cpu.max 50000/100000)
    assert!(
        text.starts_with(
            "job,host=ui01,batch=glob,job=user.slice/user-1000.slice/session-4.scope,owner=1000 \
             cpu_efficiency_pct=40,cores=0.5,cores_from=\"cpu_max\",cpu_s=2,interval_s=10 3\n"
        ),
        "{text}"
    );
    assert!(text.contains("\njobs,host=ui01 count=1i,"), "{text}");
    assert_eq!(errors.interval_sum(), 0);
}

#[test]
fn the_integer_rounding_gives_the_values_of_r3() {
    let mut values = vec![
        0.0,
        -0.0,
        0.0003,
        -0.0003,
        0.0005,
        -0.0005,
        0.4999,
        1e12,
        -1e12,
        4.6e12,
        1e300,
        f64::MAX,
        f64::MIN_POSITIVE,
        f64::INFINITY,
        f64::NEG_INFINITY,
    ];
    // Halves and their neighbours around every thousandth of a few units, and a spread of
    // magnitudes the lines carry (rates in bytes per second, shares in %).
    for k in -20_000i64..20_000 {
        let base = k as f64 / 1000.0;
        values.extend([
            base,
            base + 0.0005,
            base + 0.000_499_999,
            base + 0.000_500_001,
        ]);
    }
    let mut x = 1.234_567_891e-6;
    while x < 1e16 {
        values.extend([x, -x, x * 1.000_7, x / 3.0]);
        x *= 1.37;
    }
    for v in values {
        let (new, old) = (r3(v), super::super::r3(v));
        assert_eq!(new.to_bits(), old.to_bits(), "{v:e}: {new} against {old}");
    }
    assert!(r3(f64::NAN).is_nan());
}

/// Writes `text` to `path` the way the simulator does: a new file renamed over the old one.
fn replace(path: &Path, text: &str) {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, text).expect("write");
    std::fs::rename(&tmp, path).expect("rename");
}

fn job_files(dir: &Path, usage: u64, current: u64) {
    for (name, text) in [
        ("cpu.stat", format!("usage_usec {usage}\nuser_usec 0\nsystem_usec 0\n")),
        ("io.stat", "8:0 rbytes=1 wbytes=2 rios=3 wios=4 dbytes=0 dios=0\n".into()),
        ("io.pressure", "some avg10=0.00 avg60=0.00 avg300=0.00 total=1\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=1\n".into()),
        ("cpu.pressure", "some avg10=0.00 avg60=0.00 avg300=0.00 total=1\n".into()),
        ("memory.pressure", "some avg10=0.00 avg60=0.00 avg300=0.00 total=1\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=1\n".into()),
        ("memory.current", format!("{current}\n")),
        ("memory.peak", "1000\n".into()),
    ] {
        replace(&dir.join(name), &text);
    }
}

fn memory_current(c: &JobsCollector) -> Option<u64> {
    c.jobs.values().next()?.prev.as_ref()?.memory_current
}

#[test]
fn off_cgroupfs_a_file_replaced_by_a_rename_is_read_again_and_an_unchanged_directory_checks_no_file(
) {
    let (_dir, root) = tree();
    job_files(&job(&root), 5, 100);
    let mut c = collector(JobsConfig::default());
    // the directories' times, as where no inotify watch can be had (`watch.rs`)
    c.use_watch = false;
    // the directory's times trusted at once (the default waits until they are a second old)
    c.settle_s = -1_000;
    let mut errors = SourceErrors::new(&[CGROUP]);
    c.read(&root, 100, &mut errors);
    assert!(c.stale_check, "a temporary directory is not cgroupfs");
    assert_eq!(memory_current(&c), Some(100));
    // nothing replaced: one look at the directory, no file checked
    c.read(&root, 200, &mut errors);
    assert_eq!(c.file_checks, 0);
    // rewritten in place (as the kernel's files are): the kept descriptor reads it
    std::fs::write(job(&root).join("memory.current"), "200\n").expect("write");
    c.read(&root, 300, &mut errors);
    assert_eq!((memory_current(&c), c.file_checks), (Some(200), 0));
    // replaced by a rename: the directory changed, each kept file is checked, the new one read
    std::thread::sleep(std::time::Duration::from_millis(50));
    replace(&job(&root).join("memory.current"), "300\n");
    c.read(&root, 400, &mut errors);
    assert_eq!((memory_current(&c), c.file_checks), (Some(300), 7));
    // and then trusted again
    c.read(&root, 500, &mut errors);
    assert_eq!((memory_current(&c), c.file_checks), (Some(300), 7));
    assert_eq!(errors.interval_sum(), 0);
}

#[test]
fn a_directory_changed_within_the_last_second_is_not_trusted() {
    let (_dir, root) = tree();
    job_files(&job(&root), 5, 100);
    let mut c = collector(JobsConfig::default());
    c.use_watch = false;
    let mut errors = SourceErrors::new(&[CGROUP]);
    // as the simulator rewrites a tree every second: its times are always fresh, so every
    // kept file is checked at every reading
    for (i, at) in [100, 200, 300].into_iter().enumerate() {
        replace(&job(&root).join("memory.current"), &format!("{at}\n"));
        c.read(&root, at, &mut errors);
        assert_eq!(memory_current(&c), Some(at));
        assert_eq!(c.file_checks, 7 * i as u64);
    }
}

#[test]
fn a_file_a_job_lacks_is_looked_for_again_only_at_its_probe() {
    let (_dir, root) = tree();
    let mut c = collector(JobsConfig::default());
    let mut errors = SourceErrors::new(&[CGROUP]);
    let cpu = |usec: u64| format!("usage_usec {usec}\nuser_usec {usec}\nsystem_usec 0\n");
    // A job of a hybrid host: cpu.stat and the pressure files, no io or memory controller.
    std::fs::write(job(&root).join("cpu.stat"), cpu(0)).expect("write");
    for f in ["io.pressure", "cpu.pressure", "memory.pressure"] {
        std::fs::write(
            job(&root).join(f),
            "some avg10=0.00 avg60=0.00 avg300=0.00 total=0\n\
             full avg10=0.00 avg60=0.00 avg300=0.00 total=0\n",
        )
        .expect("write");
    }
    c.read(&root, 100, &mut errors);
    // io.stat, memory.current and memory.peak looked for once each
    assert_eq!(c.absent_lookups, 3);
    let mut at = 100;
    for _ in 1..PROBE_EVERY - 1 {
        at += 1000;
        c.read(&root, at, &mut errors);
    }
    assert_eq!(c.absent_lookups, 3, "looked for again before the probe");
    // The io controller enabled for the running job: its io.stat shows at the probe.
    std::fs::write(
        job(&root).join("io.stat"),
        "8:0 rbytes=4096 wbytes=0 rios=1 wios=0 dbytes=0 dios=0\n",
    )
    .expect("write");
    at += 1000;
    c.read(&root, at, &mut errors);
    let t = c.jobs.values().next().expect("the job");
    assert!(
        t.prev.as_ref().is_some_and(|r| r.io.is_some()),
        "io.stat read at the probe"
    );
    // memory.* still absent: looked for once more each, at the probe
    assert_eq!(c.absent_lookups, 5);
    assert_eq!(errors.interval_sum(), 0);
}

#[test]
fn a_directory_time_is_trusted_only_once_more_than_the_settle_time_old() {
    let at = |m: i64, c: i64| DirTimes {
        mtime: (m, 999_999_999),
        ctime: (c, 0),
        linked: true,
    };
    let now = 1_000;
    // this second and the one before may still see a change with the same times
    assert!(!at(now, now).settled(now, 1));
    assert!(!at(now - 1, now - 1).settled(now, 1));
    assert!(at(now - 2, now - 2).settled(now, 1));
    // both times count: an old mtime with a fresh ctime (a rename over a file) is not settled
    assert!(!at(now - 10, now).settled(now, 1));
    assert!(!at(now, now - 10).settled(now, 1));
    // a longer settle time, and a clock far from the epoch's start
    assert!(!at(now - 5, now - 5).settled(now, 5));
    assert!(at(now - 6, now - 6).settled(now, 5));
    assert!(!at(0, 0).settled(0, 1));
}

#[test]
fn a_node_without_a_batch_system_walks_the_tree_every_few_readings_and_a_worker_when_it_changed() {
    let (dir, root) = disk_server();
    let cg = dir.path().join("sys/fs/cgroup");
    let mut c = collector(JobsConfig::default());
    let mut errors = SourceErrors::new(&[CGROUP]);
    let mut at = 100;
    let mut read = |c: &mut JobsCollector| {
        at += 1000;
        c.read(&root, at, &mut errors);
    };
    // a disk server: the baseline walks, then one reading in WALK_EVERY_OFF_WORKER at most
    for _ in 0..WALK_EVERY_OFF_WORKER {
        read(&mut c);
    }
    assert_eq!(c.walks, 1, "walked before its turn");
    // Slurm starts, with a job: found at the next walk, at most WALK_EVERY_OFF_WORKER readings on
    let job = cg.join("system.slice/slurmstepd.scope/job_9");
    std::fs::create_dir_all(&job).expect("mkdir");
    std::fs::write(
        job.join("cpu.stat"),
        "usage_usec 5\nuser_usec 5\nsystem_usec 0\n",
    )
    .expect("write");
    read(&mut c);
    assert_eq!(c.walks, 2);
    assert_eq!(c.jobs.len(), 1, "the job found at the walk");
    // a worker walks at every reading where its tree changed: once more for the job found
    // (the walk then descends into it no more), then not while nothing changes
    for _ in 0..3 {
        read(&mut c);
    }
    assert_eq!(c.walks, 3);
    let job = cg.join("system.slice/slurmstepd.scope/job_10");
    std::fs::create_dir(&job).expect("mkdir");
    std::fs::write(job.join("cpu.stat"), "usage_usec 5\n").expect("write");
    read(&mut c);
    assert_eq!((c.walks, c.jobs.len()), (4, 2));
    // and a node with a glob configured too, from the start
    let mut g = collector(JobsConfig {
        globs: vec!["machine.slice/*.scope".into()],
        ..JobsConfig::default()
    });
    for _ in 0..3 {
        read(&mut g);
    }
    assert_eq!(g.walks, 2);
    let vm = cg.join("machine.slice/vm1.scope");
    std::fs::create_dir_all(&vm).expect("mkdir");
    std::fs::write(vm.join("cpu.stat"), "usage_usec 5\n").expect("write");
    read(&mut g);
    assert_eq!((g.walks, g.jobs.len()), (3, 3), "the glob's job found");
}

#[test]
fn a_missing_pressure_file_says_psi_is_off_only_while_its_job_is_there() {
    let (_dir, root) = tree();
    let dir = job(&root);
    std::fs::write(dir.join("cpu.stat"), "usage_usec 5\n").expect("write");
    let io = dir.join("io.pressure");
    // PSI off: the job's directory is there, its pressure file is not
    assert!(psi_is_off(&io));
    // the file there after all (a cgroup made again since the reading): no
    std::fs::write(&io, "some avg10=0.00 avg60=0.00 avg300=0.00 total=1\n").expect("write");
    assert!(!psi_is_off(&io));
    // the job ended between its cpu.stat and its pressure files: no
    std::fs::remove_dir_all(&dir).expect("rm");
    assert!(!psi_is_off(&io));
}

#[test]
fn a_job_that_vanishes_between_its_cpu_stat_and_its_pressure_files_raises_no_psi_warning() {
    // The job's files kept open off cgroupfs; its directory removed, all but cpu.stat, which
    // another link keeps: the next reading reads cpu.stat through its descriptor and finds the
    // pressure files gone — what a job ending during the reading gives on cgroupfs.
    let (dir, root) = tree();
    let j = job(&root);
    job_files(&j, 100, 5);
    let mut c = collector(JobsConfig::default());
    let mut errors = SourceErrors::new(&[CGROUP]);
    c.read(&root, 100, &mut errors);
    let keep = dir.path().join("cpu.stat.link");
    std::fs::hard_link(j.join("cpu.stat"), &keep).expect("link");
    // as if the walk had seen it: the jobs read are those of the last discovery
    let found = discover(["system.slice/slurmstepd.scope/job_7"], &c.discovery);
    std::fs::remove_dir_all(&j).expect("rm");
    c.found = found;
    c.since_walk = 0;
    c.worker = false;
    c.discovery.globs.clear();
    // no walk at this reading (a node without a batch system walks every few): the job is
    // read as discovered last
    c.read(&root, 1100, &mut errors);
    assert!(
        !c.warned_psi,
        "a job that ended mid-reading is no PSI-off kernel"
    );
}
