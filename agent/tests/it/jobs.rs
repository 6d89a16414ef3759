//! Batch jobs' cgroups as the real binary reads them: `storwatch-agent run --sys-root <tree>`
//! on cgroup v2 trees laid out as the corpus's listings show (agent/fixtures/cgroup/trees) and
//! filled with the corpus's real files (agent/fixtures/cgroup), whose counters the test moves on
//! by one step of 10 s of `/proc/uptime` after each report the agent writes. Every counter grows
//! linearly with uptime, so each job's efficiency, pressure and rates are known exactly.
//!
//! The states are written between two readings (the agent reads the tree at the end of each
//! report interval, and the test writes the next state as soon as it sees the report), so the
//! agent never sees half a state.

#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use storwatch_test_support::files::{scratch, workspace, write_replacing as write};
use storwatch_test_support::lp::fields;
use storwatch_test_support::process::{binary, signal, Proc};

/// Uptime seconds a step adds.
const STEP_S: u64 = 10;
/// Uptime at step 0.
const UPTIME0_S: u64 = 350_000;

fn corpus(rel: &str) -> String {
    std::fs::read_to_string(workspace().join("agent/fixtures/cgroup").join(rel)).unwrap()
}

/// Directories of a corpus listing, relative to the cgroup mount.
fn listing(name: &str) -> Vec<String> {
    corpus(&format!("trees/{name}"))
        .lines()
        .filter_map(|l| l.trim().strip_prefix("/sys/fs/cgroup/"))
        .map(str::to_owned)
        .collect()
}

/// Adds `add` to the number after `key` (`usage_usec `, `total=`) on the lines starting with
/// `line_prefix`.
fn bump(text: &str, line_prefix: &str, key: &str, add: u64) -> String {
    let mut out = String::new();
    for line in text.lines() {
        let mut l = line.to_owned();
        if line.starts_with(line_prefix) {
            if let Some(at) = line.find(key) {
                let start = at + key.len();
                let end = line[start..]
                    .find(|c: char| !c.is_ascii_digit())
                    .map_or(line.len(), |e| start + e);
                let n: u64 = line[start..end].parse().unwrap();
                l = format!("{}{}{}", &line[..start], n + add, &line[end..]);
            }
        }
        out.push_str(&l);
        out.push('\n');
    }
    out
}

/// What a job does, per second of uptime.
#[derive(Clone)]
struct Job {
    /// Directory relative to the cgroup mount.
    root: String,
    /// Files that give its cores: (file name, corpus path).
    cores: Vec<(&'static str, &'static str)>,
    /// Cores busy.
    busy: f64,
    /// Shares of time stalled: io some, io full, cpu some, memory some, memory full.
    io_some: f64,
    io_full: f64,
    cpu_some: f64,
    mem_some: f64,
    mem_full: f64,
    /// Bytes read per second on 8:0 and written on 253:2; ops read and written per second.
    read_bps: u64,
    write_bps: u64,
    read_ops: u64,
    write_ops: u64,
    /// Present from this step, until before this one.
    from: u64,
    until: Option<u64>,
    /// Steps it ran before its first listed step (a job made just after a reading has one
    /// step's work at the next).
    born_before: u64,
}

impl Job {
    fn new(root: &str) -> Self {
        Job {
            root: root.to_owned(),
            cores: vec![
                (
                    "cpuset.cpus.effective",
                    "cpuset/cgroup-exporter-slurmstepd-scope-cpus.effective-0-3.txt",
                ),
                (
                    "cpu.max",
                    "cpu-max/cgroup-exporter-slurm-job_4-max-100000.txt",
                ),
                (
                    "cpu.weight",
                    "cpu-weight/cgroup-exporter-slurm-job_4-100.txt",
                ),
            ],
            busy: 3.0,
            io_some: 0.25,
            io_full: 0.1,
            cpu_some: 0.05,
            mem_some: 0.02,
            mem_full: 0.01,
            read_bps: 1 << 20,
            write_bps: 1 << 19,
            read_ops: 64,
            write_ops: 16,
            from: 0,
            until: None,
            born_before: 0,
        }
    }

    fn alive(&self, step: u64) -> bool {
        step >= self.from && self.until.is_none_or(|u| step < u)
    }

    /// CPU µs used by `step` (0 before it started).
    fn cpu_usec(&self, step: u64) -> u64 {
        let s = step.min(self.until.map_or(u64::MAX, |u| u - 1));
        if s < self.from {
            return 0;
        }
        let base: u64 = 126_686; // the corpus's usage_usec
        base + ((s - self.from + self.born_before) as f64 * STEP_S as f64 * self.busy * 1e6) as u64
    }
}

/// A worker node's trees, moved on one step at a time.
struct Node {
    dir: tempfile::TempDir,
    proc: PathBuf,
    sys: PathBuf,
    jobs: Vec<Job>,
    /// Directories of the layout besides the jobs' (parents, services, steps).
    dirs: Vec<String>,
    /// Batch parents whose cpu.stat sums their jobs'.
    parents: Vec<String>,
    /// CPU µs of jobs that came and went between two readings, by the step they are counted at.
    short: Vec<(u64, u64)>,
    psi: bool,
    v2: bool,
    step: u64,
}

impl Node {
    fn new(dirs: Vec<String>, parents: &[&str], jobs: Vec<Job>) -> Node {
        let dir = scratch();
        let proc = dir.path().join("proc");
        let sys = dir.path().join("sys");
        // the block devices of the corpus's io.stat, named as sysfs links them
        for (num, name) in [
            ("8:0", "sda"),
            ("253:0", "dm-0"),
            ("253:2", "dm-2"),
            ("253:3", "dm-3"),
        ] {
            write(&sys.join(format!("block/{name}/dev")), &format!("{num}\n"));
            std::fs::create_dir_all(sys.join("dev/block")).unwrap();
            let link = sys.join(format!("dev/block/{num}"));
            if !link.exists() {
                std::os::unix::fs::symlink(format!("../../block/{name}"), link).unwrap();
            }
        }
        Node {
            dir,
            proc,
            sys,
            jobs,
            dirs,
            parents: parents.iter().map(|p| (*p).to_owned()).collect(),
            short: Vec::new(),
            psi: true,
            v2: true,
            step: 0,
        }
    }

    fn cg(&self) -> PathBuf {
        self.sys.join("fs/cgroup")
    }

    /// Writes the state of `self.step`.
    fn write(&self) {
        let s = self.step;
        write(
            &self.proc.join("uptime"),
            &format!("{}.00 1000.00\n", UPTIME0_S + s * STEP_S),
        );
        let cg = self.cg();
        std::fs::create_dir_all(&cg).unwrap();
        if self.v2 {
            write(
                &cg.join("cgroup.controllers"),
                "cpuset cpu io memory pids\n",
            );
        }
        for d in &self.dirs {
            std::fs::create_dir_all(cg.join(d)).unwrap();
        }
        let cpu_stat = corpus("cpu-stat/cgroup-exporter-slurm-job_4-9-keys.txt");
        for p in &self.parents {
            let mut total: u64 = self.jobs.iter().map(|j| j.cpu_usec(s)).sum();
            total += self
                .short
                .iter()
                .filter(|(at, _)| *at <= s)
                .map(|(_, u)| u)
                .sum::<u64>();
            let text = bump(&cpu_stat, "usage_usec", "usage_usec ", total - 126_686);
            write(&cg.join(p).join("cpu.stat"), &text);
        }
        for j in &self.jobs {
            let d = cg.join(&j.root);
            if !j.alive(s) {
                // A directory another job lives in (a slot made again for the next job) is
                // removed only at the step its job ends, and made again by the next one.
                let shared = self.jobs.iter().any(|o| o.root == j.root && o.alive(s));
                if d.exists() && (!shared || j.until == Some(s)) {
                    std::fs::remove_dir_all(&d).unwrap();
                }
                continue;
            }
            let secs = (s - j.from + j.born_before) * STEP_S;
            let us = |share: f64| (secs as f64 * share * 1e6) as u64;
            write(
                &d.join("cpu.stat"),
                &bump(
                    &cpu_stat,
                    "usage_usec",
                    "usage_usec ",
                    j.cpu_usec(s) - 126_686,
                ),
            );
            let mut io = corpus("io-stat/cgroup-exporter-slurmstepd-scope-4-devices-dm-and-sd.txt");
            io = bump(&io, "8:0 ", "rbytes=", j.read_bps * secs);
            io = bump(&io, "8:0 ", "rios=", j.read_ops * secs);
            io = bump(&io, "253:2 ", "wbytes=", j.write_bps * secs);
            io = bump(&io, "253:2 ", "wios=", j.write_ops * secs);
            write(&d.join("io.stat"), &io);
            if self.psi {
                let p = corpus("pressure/build-machine-linux-6.18-root-io.pressure.txt");
                let p = bump(
                    &bump(&p, "some", "total=", us(j.io_some)),
                    "full",
                    "total=",
                    us(j.io_full),
                );
                write(&d.join("io.pressure"), &p);
                let p = corpus("pressure/telegraf-v2-cpu.pressure-some-and-full.txt");
                write(
                    &d.join("cpu.pressure"),
                    &bump(&p, "some", "total=", us(j.cpu_some)),
                );
                let p = corpus("pressure/telegraf-v2-memory.pressure.txt");
                let p = bump(
                    &bump(&p, "some", "total=", us(j.mem_some)),
                    "full",
                    "total=",
                    us(j.mem_full),
                );
                write(&d.join("memory.pressure"), &p);
            }
            write(
                &d.join("memory.current"),
                &corpus("memory-value/cgroup-exporter-slurm-job_4-memory.current.txt"),
            );
            write(
                &d.join("memory.peak"),
                &corpus("memory-value/cgroup-exporter-slurm-job_4-memory.peak.txt"),
            );
            for (name, from) in &j.cores {
                write(&d.join(name), &corpus(from));
            }
        }
    }
}

/// One report: its lines.
type Report = Vec<String>;

/// The agent running on a node, the node moved on one step after each report.
struct Run {
    agent: Proc,
    out: PathBuf,
    seen: usize,
    reports: Vec<Report>,
}

impl Run {
    fn start(node: &Node, config: &str) -> Run {
        node.write();
        let dir = node.dir.path();
        let cfg = dir.join("agent.toml");
        std::fs::write(&cfg, config).unwrap();
        let out = dir.join("out.lp");
        let agent = Proc::spawn(
            "agent",
            &dir.join("agent.log"),
            Command::new(binary("storwatch-agent", "storwatch-agent"))
                .arg("run")
                .arg("--config")
                .arg(&cfg)
                .arg("--proc-root")
                .arg(&node.proc)
                .arg("--sys-root")
                .arg(&node.sys)
                .args([
                    "--sample-interval",
                    "250ms",
                    "--report-interval",
                    "1s",
                    "--host",
                    "wn042",
                ])
                .arg("--output")
                .arg(format!("file:{}", out.display()))
                .env("RUST_LOG", "info"),
        );
        Run {
            agent,
            out,
            seen: 0,
            reports: Vec::new(),
        }
    }

    /// Waits for the next report (its `agent` line ends it).
    fn next(&mut self) -> Report {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let text = std::fs::read_to_string(&self.out).unwrap_or_default();
            let lines: Vec<&str> = text.lines().collect();
            if let Some(end) = lines
                .iter()
                .enumerate()
                .skip(self.seen)
                .find(|(_, l)| l.starts_with("agent,"))
                .map(|(i, _)| i)
            {
                let r: Report = lines[self.seen..=end]
                    .iter()
                    .map(|l| (*l).to_owned())
                    .collect();
                self.seen = end + 1;
                self.reports.push(r.clone());
                return r;
            }
            assert!(
                Instant::now() < deadline,
                "no report in 20 s; agent log:\n{}",
                self.agent.log_tail(30)
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Runs `steps` steps: after each report, `change` may alter the node, then the next state
    /// is written. Returns the reports whose interval is one whole step (the first two cover
    /// the baseline).
    fn steps(
        &mut self,
        node: &mut Node,
        steps: u64,
        mut change: impl FnMut(&mut Node),
    ) -> Vec<Report> {
        let mut whole = Vec::new();
        for _ in 0..steps {
            let r = self.next();
            if node.step >= 1 {
                whole.push(r);
            }
            node.step += 1;
            change(node);
            node.write();
        }
        whole.push(self.next());
        whole
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.agent.log).unwrap_or_default()
    }

    fn stop(self) -> String {
        signal(self.agent.id(), "TERM");
        std::thread::sleep(Duration::from_millis(300));
        self.log()
    }
}

/// The lines of `measurement` in `report`.
fn lines<'a>(report: &'a Report, measurement: &str) -> Vec<&'a str> {
    let prefix = format!("{measurement},");
    report
        .iter()
        .filter(|l| l.starts_with(&prefix))
        .map(String::as_str)
        .collect()
}

/// The tags of a line.
fn tags(line: &str) -> BTreeMap<String, String> {
    let head = line.split(' ').next().unwrap();
    head.split(',')
        .skip(1)
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
}

fn num(line: &str, key: &str) -> f64 {
    let f = fields(line);
    let v = f.get(key).unwrap_or_else(|| panic!("no {key} in {line}"));
    v.trim_end_matches('i').parse().unwrap()
}

/// The job line whose `job` tag is `job`.
fn job_line<'a>(report: &'a Report, job: &str) -> Option<&'a str> {
    lines(report, "job")
        .into_iter()
        .find(|l| tags(l).get("job").map(String::as_str) == Some(job))
}

const SCOPE: &str = "system.slice/slurmstepd.scope";

fn slurm_node() -> Node {
    let dirs = listing("cgroup-exporter-slurm-job_4-steps-0-extern-find.txt");
    let mut j4 = Job::new(&format!("{SCOPE}/job_4"));
    // job_4's own files: a Slurm job constrained to CPU 0, using 0.75 of it
    j4.cores = vec![
        (
            "cpuset.cpus.effective",
            "cpuset/cgroup-exporter-slurm-job_4-cpus.effective-0.txt",
        ),
        (
            "cpu.max",
            "cpu-max/cgroup-exporter-slurm-job_4-max-100000.txt",
        ),
        (
            "cpu.weight",
            "cpu-weight/cgroup-exporter-slurm-job_4-100.txt",
        ),
    ];
    j4.busy = 0.75;
    let j5 = Job::new(&format!("{SCOPE}/job_5"));
    let dirs = dirs
        .into_iter()
        .filter(|d| !d.starts_with(&format!("{SCOPE}/job_4")))
        .collect();
    Node::new(dirs, &[SCOPE], vec![j4, j5])
}

#[test]
fn a_slurm_node_reports_each_job_and_the_node_and_a_job_that_ends_ends_its_series() {
    let mut node = slurm_node();
    // job_5 ends after step 2; job_6 starts at step 3; a job that came and went between two
    // readings used 4 s of CPU, counted at step 3.
    node.jobs[1].until = Some(3);
    let mut j6 = Job::new(&format!("{SCOPE}/job_6"));
    j6.from = 3;
    node.jobs.push(j6);
    node.short.push((3, 4_000_000));
    let mut run = Run::start(&node, "");
    let reports = run.steps(&mut node, 4, |_| {});
    let log = run.stop();

    // report 0: steps 0→1, both jobs throughout
    let r = &reports[0];
    let j4 = job_line(r, "4").unwrap_or_else(|| panic!("no job 4 in {r:#?}\n{log}"));
    let t = tags(j4);
    assert_eq!(t.get("batch").map(String::as_str), Some("slurm"), "{j4}");
    assert_eq!(t.get("host").map(String::as_str), Some("wn042"), "{j4}");
    assert!(!t.contains_key("slot") && !t.contains_key("owner"), "{j4}");
    // 0.75 core busy on the one CPU of cpuset.cpus.effective ("0")
    assert_eq!(num(j4, "cpu_efficiency_pct"), 75.0, "{j4}");
    assert_eq!(num(j4, "cores"), 1.0, "{j4}");
    assert_eq!(fields(j4)["cores_from"], "\"cpuset\"", "{j4}");
    assert_eq!(num(j4, "cpu_s"), 7.5, "{j4}");
    assert_eq!(num(j4, "interval_s"), 10.0, "{j4}");
    assert_eq!(num(j4, "io_some_pct"), 25.0, "{j4}");
    assert_eq!(num(j4, "io_full_pct"), 10.0, "{j4}");
    assert_eq!(num(j4, "cpu_some_pct"), 5.0, "{j4}");
    assert_eq!(num(j4, "memory_some_pct"), 2.0, "{j4}");
    assert_eq!(num(j4, "memory_full_pct"), 1.0, "{j4}");
    assert_eq!(num(j4, "memory_current_bytes"), 5_660_672.0, "{j4}");
    assert_eq!(num(j4, "memory_peak_bytes"), 7_229_440.0, "{j4}");
    assert_eq!(num(j4, "read_bytes_per_s"), 1_048_576.0, "{j4}");
    assert_eq!(num(j4, "write_bytes_per_s"), 524_288.0, "{j4}");
    assert_eq!(num(j4, "read_ops_per_s"), 64.0, "{j4}");
    assert_eq!(num(j4, "write_ops_per_s"), 16.0, "{j4}");
    assert!(
        !fields(j4).contains_key("age_s"),
        "running before the agent: {j4}"
    );
    // job_5: 3 cores busy of the 4 in 0-3
    let j5 = job_line(r, "5").unwrap();
    assert_eq!(num(j5, "cpu_efficiency_pct"), 75.0, "{j5}");
    assert_eq!(num(j5, "cores"), 4.0, "{j5}");
    // per device, by kernel name: reads on sda, writes on dm-2
    let io: Vec<&str> = lines(r, "job_io");
    let sda = io
        .iter()
        .find(|l| tags(l).get("job").map(String::as_str) == Some("4") && tags(l)["device"] == "sda")
        .unwrap_or_else(|| panic!("{io:#?}"));
    assert_eq!(num(sda, "read_bytes_per_s"), 1_048_576.0, "{sda}");
    assert_eq!(num(sda, "write_bytes_per_s"), 0.0, "{sda}");
    assert!(io.iter().any(|l| tags(l)["device"] == "dm-2"), "{io:#?}");
    assert!(
        !io.iter().any(|l| tags(l)["device"] == "dm-3"),
        "no I/O on dm-3: {io:#?}"
    );
    let n = lines(r, "jobs");
    assert_eq!(n.len(), 1, "{r:#?}");
    let n = n[0];
    assert_eq!(num(n, "count"), 2.0, "{n}");
    assert_eq!(
        (num(n, "started"), num(n, "ended"), num(n, "dropped")),
        (0.0, 0.0, 0.0),
        "{n}"
    );
    // (7.5 + 30) CPU s over (1 + 4) cores × 10 s
    assert_eq!(num(n, "cpu_efficiency_pct"), 75.0, "{n}");
    assert_eq!(num(n, "cpu_s"), 37.5, "{n}");
    assert_eq!(num(n, "io_stall_pct"), 25.0, "{n}");
    assert_eq!(num(n, "io_full_pct"), 10.0, "{n}");
    assert_eq!(num(n, "stalled"), 2.0, "{n}");

    // report 2: steps 2→3: job_5 ended (no line: its series ends), job_6 started, and the
    // short job's 4 s are in the node's CPU time through slurmstepd.scope's cpu.stat
    let r = &reports[2];
    assert!(job_line(r, "5").is_none(), "{r:#?}");
    assert!(
        lines(r, "job_io").iter().all(|l| tags(l)["job"] != "5"),
        "{r:#?}"
    );
    let n = lines(r, "jobs")[0];
    assert_eq!(
        (num(n, "count"), num(n, "started"), num(n, "ended")),
        (2.0, 1.0, 1.0),
        "{n}"
    );
    let j6 = job_line(r, "6").unwrap_or_else(|| panic!("{r:#?}"));
    // new: its counters from zero are its interval; it appeared within the last 10 s
    assert_eq!(num(j6, "cpu_s"), 0.127, "{j6}");
    assert_eq!(num(j6, "age_s"), 10.0, "{j6}");
    // job_4 7.5 s + job_6 0.126686 s + the short job's 4 s
    assert_eq!(num(n, "cpu_s"), 11.627, "{n}");
    // report 3: job_6 throughout, ages
    let r = &reports[3];
    let j6 = job_line(r, "6").unwrap_or_else(|| panic!("{r:#?}"));
    assert_eq!(num(j6, "cpu_efficiency_pct"), 75.0, "{j6}");
    assert_eq!(num(j6, "age_s"), 20.0, "{j6}");
    assert!(job_line(r, "5").is_none(), "{r:#?}");
    // nothing counted as a source error: a job's directory that went is no error
    assert!(run_reports_have_no_cgroup_errors(&reports), "{reports:#?}");
    assert!(!log.contains("cgroup v2"), "{log}");
}

fn run_reports_have_no_cgroup_errors(reports: &[Report]) -> bool {
    reports
        .iter()
        .flatten()
        .all(|l| !(l.starts_with("agent_source,") && l.contains("source=cgroup")))
}

fn htcondor_node() -> Node {
    let dirs =
        listing("htcondor-24.8-condor.service-leaf-slice-scope-glidein-inside-sshd-find.txt");
    let base = format!("{CONDOR}/_var_lib_condor_execute_");
    let weight8 = vec![
        ("cpu.weight", "cpu-weight/synthetic-htcondor-8-cpus-800.txt"),
        (
            "cpu.max",
            "cpu-max/cgroup-exporter-slurm-job_4-max-100000.txt",
        ),
        (
            "cpuset.cpus.effective",
            "cpuset/telegraf-v2-cpus.effective-0-95.txt",
        ),
    ];
    let mut jobs = Vec::new();
    for (i, busy, io_some) in [(1, 6.0, 0.05), (2, 2.0, 0.6), (3, 8.0, 0.3)] {
        let mut j = Job::new(&format!("{base}slot1_{i}@wn042.example.org.slice"));
        j.cores = weight8.clone();
        j.busy = busy;
        j.io_some = io_some;
        jobs.push(j);
    }
    Node::new(dirs, &[CONDOR], jobs)
}

/// HTCondor's base under the packaged unit (`DelegateSubgroup=leaf`, 23.8+).
const CONDOR: &str = "system.slice/condor.service/htcondor";

/// 8 cores: HTCondor's `cpu.weight` (100 × the slot's Cpus).
fn weight8() -> Vec<(&'static str, &'static str)> {
    vec![
        ("cpu.weight", "cpu-weight/synthetic-htcondor-8-cpus-800.txt"),
        (
            "cpu.max",
            "cpu-max/cgroup-exporter-slurm-job_4-max-100000.txt",
        ),
    ]
}

#[test]
fn a_slot_made_again_for_the_next_job_ends_one_job_and_starts_another() {
    // slot1_1's job ends after step 2; the starter removes its cgroup and makes it again
    // under the same name for the next job, which ran 3 cores and wrote 60 MB/s from just
    // after the reading of step 2.
    let mut node = htcondor_node();
    let root = node.jobs[0].root.clone();
    node.jobs[0].until = Some(3);
    let mut next = Job::new(&root);
    next.cores = weight8();
    next.busy = 3.0;
    next.write_bps = 60_000_000;
    next.from = 3;
    next.born_before = 1;
    node.jobs.push(next);
    let mut run = Run::start(&node, "");
    let reports = run.steps(&mut node, 4, |_| {});
    let log = run.stop();
    let slot = "_var_lib_condor_execute_slot1_1@wn042.example.org";
    // steps 2→3: the new job
    let r = &reports[2];
    let n = lines(r, "jobs")[0];
    assert_eq!(
        (num(n, "count"), num(n, "started"), num(n, "ended")),
        (3.0, 1.0, 1.0),
        "{r:#?}\n{log}"
    );
    let j = job_line(r, slot).unwrap();
    // its CPU since it was made (the corpus's 0.127 s and 30 s), not the difference of two
    // jobs' counters; its age from the last reading
    assert_eq!(num(j, "cpu_s"), 30.127, "{j}");
    assert_eq!(num(j, "age_s"), 10.0, "{j}");
    assert!(num(j, "write_bytes_per_s") >= 60_000_000.0, "{j}");
    // the node: the three jobs' CPU (slot1_1's old job ended at its last reading: its CPU is
    // in the parent) over 8 cores each of the three jobs and the one that ended
    let cpu = 30.126686 + 2.0 * 10.0 + 8.0 * 10.0;
    assert_eq!(num(n, "cpu_s"), (cpu * 1000.0_f64).round() / 1000.0, "{n}");
    // steps 3→4: the new job throughout, 3 of its 8 cores
    let j = job_line(&reports[3], slot).unwrap();
    assert_eq!(num(j, "cpu_efficiency_pct"), 37.5, "{j}");
    assert_eq!(num(j, "write_bytes_per_s"), 60_000_000.0, "{j}");
    assert_eq!(num(j, "age_s"), 20.0, "{j}");
}

#[test]
fn with_cgroup_all_daemons_a_short_jobs_cpu_stays_in_the_startds_slice() {
    // Each starter's slice, with its `htcondor` and job, goes when the job ends: only the
    // startd's slice keeps the CPU of a job that came and went between two readings.
    let dirs = listing("htcondor-24.8-cgroup-all-daemons-startd-starter-slices-find.txt");
    let startd = "system.slice/condor.service/STARTD_for__etc_condor_condor_config.slice";
    let mut jobs = Vec::new();
    for (i, busy) in [(1, 4.0), (2, 4.8)] {
        let mut j = Job::new(&format!(
            "{startd}/STARTER_slot1_{i}@wn042.example.org.slice/htcondor/\
             _var_lib_condor_execute_slot1_{i}@wn042.example.org.slice"
        ));
        j.cores = weight8();
        j.busy = busy;
        jobs.push(j);
    }
    let dirs = dirs
        .into_iter()
        .filter(|d| !d.contains("/htcondor/"))
        .collect();
    let mut node = Node::new(dirs, &[startd], jobs);
    // a job of 16 s of CPU, in and out between the readings of steps 1 and 2
    node.short.push((2, 16_000_000));
    // the startd itself: 1 s, then 0.5 s of CPU a step in its own scope, inside the
    // parent's figure (which the harness makes of the `short` entries and the jobs')
    node.short.push((0, 1_000_000));
    for step in 1..=3 {
        node.short.push((step, 500_000));
    }
    let scope = node
        .cg()
        .join(startd)
        .join("STARTD_for__etc_condor_condor_config.scope");
    let write_startd = move |step: u64| {
        write(
            &scope.join("cpu.stat"),
            &format!(
                "usage_usec {}\nuser_usec 0\nsystem_usec 0\n",
                1_000_000 + step * 500_000
            ),
        );
    };
    write_startd(0);
    let mut run = Run::start(&node, "");
    let reports = run.steps(&mut node, 2, |n| write_startd(n.step));
    let log = run.stop();
    let n = lines(&reports[1], "jobs")[0];
    // steps 1→2: 40 + 48 s of the two jobs and the short job's 16 s, the startd's 0.5 s left
    // out, over 2 × 8 cores × 10 s
    assert_eq!(num(n, "cpu_s"), 104.0, "{n}\n{log}");
    assert_eq!(num(n, "cpu_efficiency_pct"), 65.0, "{n}");
}

#[test]
fn an_htcondor_node_names_slots_uses_the_weight_and_ranks_nothing_twice() {
    let mut node = htcondor_node();
    let mut run = Run::start(&node, "");
    let reports = run.steps(&mut node, 2, |_| {});
    let log = run.stop();
    let r = &reports[0];
    let jobs = lines(r, "job");
    // three jobs: the glidein inside slot1_2 and slot1_3's ssh_to_job directory are theirs
    assert_eq!(jobs.len(), 3, "{r:#?}\n{log}");
    let j = job_line(r, "_var_lib_condor_execute_slot1_2@wn042.example.org").unwrap();
    let t = tags(j);
    assert_eq!(t["batch"], "htcondor", "{j}");
    assert_eq!(t["slot"], "slot1_2", "{j}");
    // 2 of the 8 cores HTCondor gave it (cpu.weight 800), not of the 96-CPU cpuset
    assert_eq!(num(j, "cores"), 8.0, "{j}");
    assert_eq!(fields(j)["cores_from"], "\"cpu_weight\"", "{j}");
    assert_eq!(num(j, "cpu_efficiency_pct"), 25.0, "{j}");
    assert_eq!(num(j, "io_some_pct"), 60.0, "{j}");
    let n = lines(r, "jobs")[0];
    // (6 + 2 + 8) of 24 cores
    assert_eq!(num(n, "cpu_efficiency_pct"), 66.667, "{n}");
    // (0.05 + 0.6 + 0.3) / 3
    assert_eq!(num(n, "io_stall_pct"), 31.667, "{n}");
    assert_eq!(num(n, "stalled"), 2.0, "{n}");
}

#[test]
fn over_max_jobs_the_extra_jobs_are_counted_not_read_and_warned_once() {
    let mut node = htcondor_node();
    let mut run = Run::start(&node, "[jobs]\nmax_jobs = 2\n");
    let reports = run.steps(&mut node, 2, |_| {});
    let log = run.stop();
    for r in &reports {
        assert_eq!(lines(r, "job").len(), 2, "{r:#?}");
        let n = lines(r, "jobs")[0];
        assert_eq!((num(n, "count"), num(n, "dropped")), (3.0, 1.0), "{n}");
        // the third job's CPU (through the parent) and cores are in the node's efficiency
        assert_eq!(num(n, "cpu_efficiency_pct"), 66.667, "{n}");
        assert_eq!(num(n, "cpu_s"), 160.0, "{n}");
    }
    assert_eq!(log.matches("max_jobs").count(), 1, "{log}");
}

#[test]
fn a_job_back_under_the_cap_brings_its_cores_with_the_cpu_the_parent_counts() {
    // slot1_1 ends at step 3: slot1_3, over the cap until then, takes its place, its first
    // reading a baseline. Its CPU of that interval is in the parent's; its 8 cores must be too.
    let mut node = htcondor_node();
    node.jobs[0].until = Some(3);
    let mut run = Run::start(&node, "[jobs]\nmax_jobs = 2\n");
    let reports = run.steps(&mut node, 4, |_| {});
    let log = run.stop();
    let r = &reports[2];
    let n = lines(r, "jobs")[0];
    assert_eq!(
        (num(n, "count"), num(n, "ended")),
        (2.0, 1.0),
        "{r:#?}\n{log}"
    );
    // CPU: slot1_2's 2 cores busy and slot1_3's 8 (through the parent) over 10 s = 100 s, of
    // 8 cores each of slot1_2, slot1_3 and slot1_1 (ended in the interval) = 240 core-s
    assert_eq!(num(n, "cpu_s"), 100.0, "{n}");
    assert_eq!(num(n, "cpu_efficiency_pct"), 41.667, "{n}");
    // the next interval: both read throughout
    let n = lines(&reports[3], "jobs")[0];
    assert_eq!(num(n, "cpu_efficiency_pct"), 62.5, "{n}");
}

#[test]
fn over_max_jobs_the_agent_holds_no_descriptor_per_job() {
    // 200 jobs, 5 read: the agent's open files stay those of 5 jobs (7 each), whatever the
    // number of jobs over the cap.
    let jobs = (100..300)
        .map(|n| Job::new(&format!("{SCOPE}/job_{n}")))
        .collect();
    let mut node = Node::new(vec![SCOPE.to_owned()], &[SCOPE], jobs);
    let mut run = Run::start(&node, "[jobs]\nmax_jobs = 5\n");
    let reports = run.steps(&mut node, 2, |_| {});
    let fds = std::fs::read_dir(format!("/proc/{}/fd", run.agent.id()))
        .unwrap()
        .count();
    let log = run.stop();
    let n = lines(&reports[1], "jobs")[0];
    assert_eq!(
        (num(n, "count"), num(n, "dropped")),
        (200.0, 195.0),
        "{n}\n{log}"
    );
    assert_eq!(lines(&reports[1], "job").len(), 5, "{n}");
    // 35 kept files, and the agent's own (logs, output, clock, ...): far from one per job
    assert!(
        fds < 35 + 40,
        "{fds} open files with 200 jobs, max_jobs = 5"
    );
}

#[test]
fn with_psi_off_one_warning_and_efficiency_and_io_go_on() {
    let mut node = slurm_node();
    node.psi = false;
    let mut run = Run::start(&node, "");
    let reports = run.steps(&mut node, 2, |_| {});
    let log = run.stop();
    let r = &reports[0];
    let j4 = job_line(r, "4").unwrap_or_else(|| panic!("{r:#?}\n{log}"));
    assert_eq!(num(j4, "cpu_efficiency_pct"), 75.0, "{j4}");
    assert_eq!(num(j4, "read_bytes_per_s"), 1_048_576.0, "{j4}");
    let f = fields(j4);
    assert!(
        !f.contains_key("io_some_pct") && !f.contains_key("memory_some_pct"),
        "{j4}"
    );
    let n = lines(r, "jobs")[0];
    assert!(!fields(n).contains_key("io_stall_pct"), "{n}");
    assert_eq!(num(n, "cpu_efficiency_pct"), 75.0, "{n}");
    assert_eq!(log.matches("psi=1").count(), 1, "{log}");
    assert!(run_reports_have_no_cgroup_errors(&reports), "{reports:#?}");
}

#[test]
fn without_cgroup_v2_one_line_and_the_rest_of_the_agent_goes_on() {
    let mut node = slurm_node();
    node.v2 = false;
    let mut run = Run::start(&node, "");
    let reports = run.steps(&mut node, 1, |_| {});
    let log = run.stop();
    for r in &reports {
        assert!(
            lines(r, "job").is_empty() && lines(r, "jobs").is_empty(),
            "{r:#?}"
        );
        assert_eq!(lines(r, "agent").len(), 1, "{r:#?}");
    }
    assert_eq!(log.matches("no cgroup v2").count(), 1, "{log}");
    assert!(run_reports_have_no_cgroup_errors(&reports), "{reports:#?}");
}

#[test]
fn promtool_accepts_the_jobs_metrics() {
    let mut node = htcondor_node();
    let port = 18_547;
    let mut run = Run::start(
        &node,
        &format!("[prometheus]\nlisten = \"127.0.0.1:{port}\"\n"),
    );
    let _ = run.steps(&mut node, 2, |_| {});
    let page = storwatch_test_support::http::http(
        &format!("http://127.0.0.1:{port}/metrics"),
        "GET",
        &[],
        b"",
    )
    .1;
    run.stop();
    for name in [
        "storwatch_job_cpu_efficiency_percent{",
        "storwatch_job_io_some_percent{",
        "storwatch_job_read_bytes_per_second{",
        "storwatch_job_memory_peak_bytes{",
        "storwatch_job_io_read_ops_per_second{",
        "storwatch_jobs_io_stall_percent{",
        "storwatch_jobs_cpu_seconds{",
        "storwatch_jobs_number{",
    ] {
        assert!(page.contains(name), "{name} missing:\n{page}");
    }
    storwatch_test_support::promtool_ok(&["check", "metrics"], Some(page.as_bytes()));
}
