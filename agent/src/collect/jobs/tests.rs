//! The collector on trees written by the tests: what the whole-agent tests (agent/tests/jobs.rs)
//! cannot time, a job whose directory goes while it is read.

use super::*;

fn tree() -> (tempfile::TempDir, Root) {
    let dir = tempfile::tempdir().expect("tempdir");
    let sys = dir.path().join("sys");
    let cg = sys.join("fs/cgroup");
    std::fs::create_dir_all(cg.join("system.slice/slurmstepd.scope/job_7/step_0")).expect("mkdir");
    std::fs::write(cg.join("cgroup.controllers"), "cpu io memory\n").expect("write");
    let root = Root::new(dir.path().join("proc"), sys);
    (dir, root)
}

fn job(root: &Root) -> PathBuf {
    root.sys("fs/cgroup/system.slice/slurmstepd.scope/job_7")
}

#[test]
fn a_job_whose_files_are_gone_when_read_has_ended_and_is_no_error() {
    let (_dir, root) = tree();
    let mut c = JobsCollector::new(
        JobsConfig::default(),
        std::time::Duration::from_secs(1),
        std::time::Duration::from_secs(10),
    );
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
    let mut c = JobsCollector::new(
        JobsConfig::default(),
        std::time::Duration::from_secs(1),
        std::time::Duration::from_secs(10),
    );
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

#[test]
fn job_and_slot_tags() {
    let root =
        "system.slice/htcondor/condor_var_lib_condor_execute_slot1_3@wn042.example.org.slice";
    let id = JobId::HtcondorSlotSlice("slot1_3@wn042.example.org".into());
    assert_eq!(
        job_tags(&id, root),
        (
            "condor_var_lib_condor_execute_slot1_3@wn042.example.org".into(),
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
    let dir = tempfile::tempdir().expect("tempdir");
    let cg = dir.path().join("sys/fs/cgroup");
    std::fs::create_dir_all(cg.join("system.slice/dcache.service")).expect("mkdir");
    std::fs::write(cg.join("cgroup.controllers"), "cpu io memory\n").expect("write");
    let root = Root::new(dir.path().join("proc"), dir.path().join("sys"));
    let mut c = JobsCollector::new(
        JobsConfig::default(),
        std::time::Duration::from_secs(1),
        std::time::Duration::from_secs(10),
    );
    let mut errors = SourceErrors::new(&[CGROUP]);
    c.read(&root, 100, &mut errors);
    c.read(&root, 1100, &mut errors);
    let mut w = LineWriter::new("ds01", &[]);
    c.write(&mut w, &root, 1);
    assert_eq!(w.lines(), 0);
    // an idle worker node: Slurm's directory, no job running
    std::fs::create_dir_all(cg.join("system.slice/slurmstepd.scope/system")).expect("mkdir");
    c.read(&root, 2100, &mut errors);
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
    let mut c = JobsCollector::new(
        cfg,
        std::time::Duration::from_secs(1),
        std::time::Duration::from_secs(10),
    );
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
