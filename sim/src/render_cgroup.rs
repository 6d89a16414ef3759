//! The cgroup v2 interface files of a worker node's jobs, as Linux 6.x writes them
//! (`Documentation/admin-guide/cgroup-v2.rst`, `Documentation/accounting/psi.rst`): each file's
//! text, by its path relative to the host root (`sys/fs/cgroup/…`).
//!
//! Every directory has `cgroup.controllers` (what its parent's `cgroup.subtree_control`
//! enables), `cgroup.subtree_control` and `cgroup.type`; a job's directory and the batch
//! system's parent have the counters (`cpu.stat`, `io.stat`, the three `*.pressure` files,
//! `memory.current`/`memory.peak`/`memory.stat`) and the limits (`cpu.max`, `cpu.weight`,
//! `cpuset.cpus`, `cpuset.cpus.effective`). Processes live in leaves only (cgroup v2's "no
//! internal processes" rule): the job's last sub-directory has the `cgroup.procs`. The
//! sub-directories' own counters are left out (the job's directory counts them, and a reader
//! takes that one): a worker's tree is rewritten every second, and each file costs a rename.

use std::fmt::Write as _;

use crate::model::jobs::{CgroupCounters, Cgroups, Job};
use crate::model::Psi;

/// Where the cgroup v2 hierarchy is mounted, relative to the host root.
pub const MOUNT: &str = "sys/fs/cgroup";

/// Controllers of the root (`cgroup.controllers` at the mount).
const ROOT_CONTROLLERS: &str = "cpuset cpu io memory hugetlb pids rdma misc\n";
/// What systemd enables below the root and batch systems below their own directory.
const ENABLED: &str = "cpuset cpu io memory pids\n";

/// `cpu.stat` (with the cpu controller enabled: the throttling and burst lines).
pub fn cpu_stat(c: &CgroupCounters) -> String {
    format!(
        "usage_usec {}\nuser_usec {}\nsystem_usec {}\nnr_periods {}\nnr_throttled {}\n\
         throttled_usec {}\nnr_bursts 0\nburst_usec 0\n",
        c.usage_usec, c.user_usec, c.system_usec, c.nr_periods, c.nr_throttled, c.throttled_usec
    )
}

/// `io.stat`: one line per device that has seen I/O (none before the first).
pub fn io_stat(c: &CgroupCounters, dev: (u32, u32)) -> String {
    if c.rios + c.wios == 0 {
        return String::new();
    }
    format!(
        "{}:{} rbytes={} wbytes={} rios={} wios={} dbytes=0 dios=0\n",
        dev.0, dev.1, c.rbytes, c.wbytes, c.rios, c.wios
    )
}

/// A `*.pressure` file: `some` and `full` lines.
pub fn pressure(some: &Psi, full: &Psi) -> String {
    let line = |name: &str, p: &Psi| {
        format!(
            "{name} avg10={:.2} avg60={:.2} avg300={:.2} total={}\n",
            p.avg10, p.avg60, p.avg300, p.total_us
        )
    };
    line("some", some) + &line("full", full)
}

/// `memory.stat`: the kernel's order, the lines a job's memory is made of.
pub fn memory_stat(c: &CgroupCounters) -> String {
    let cur = c.memory_current;
    let anon = cur / 100 * 78;
    let file = cur / 100 * 19;
    let kernel = cur - anon - file;
    let rows: [(&str, u64); 18] = [
        ("anon", anon),
        ("file", file),
        ("kernel", kernel),
        ("kernel_stack", kernel / 8),
        ("pagetables", kernel / 4),
        ("shmem", 0),
        ("file_mapped", file / 10),
        ("file_dirty", file / 50),
        ("file_writeback", 0),
        ("inactive_anon", anon / 3),
        ("active_anon", anon - anon / 3),
        ("inactive_file", file / 2),
        ("active_file", file - file / 2),
        ("unevictable", 0),
        ("workingset_refault_anon", 0),
        ("workingset_refault_file", c.pgmajfault / 4),
        ("pgfault", c.pgfault),
        ("pgmajfault", c.pgmajfault),
    ];
    let mut out = String::new();
    for (k, v) in rows {
        let _ = writeln!(out, "{k} {v}");
    }
    out
}

/// A CPU list as the kernel prints it (`0-63`, `4-7`, `5`).
fn cpu_list(first: u32, n: u32) -> String {
    match n {
        0 => "\n".to_owned(),
        1 => format!("{first}\n"),
        _ => format!("{first}-{}\n", first + n - 1),
    }
}

/// The directories between the mount and `dir` (exclusive), e.g. `system.slice` for
/// `system.slice/htcondor`.
fn ancestors(dir: &str) -> impl Iterator<Item = &str> {
    dir.match_indices('/').map(move |(i, _)| &dir[..i])
}

fn path(dir: &str, file: &str) -> String {
    if dir.is_empty() {
        format!("{MOUNT}/{file}")
    } else {
        format!("{MOUNT}/{dir}/{file}")
    }
}

/// A directory's `cgroup.*` files; `leaf_pids` for one that holds processes.
fn dir_files(out: &mut Vec<(String, String)>, dir: &str, leaf_pids: Option<&[u32]>) {
    out.push((path(dir, "cgroup.controllers"), ENABLED.to_owned()));
    out.push((path(dir, "cgroup.type"), "domain\n".to_owned()));
    match leaf_pids {
        Some(pids) => {
            out.push((path(dir, "cgroup.subtree_control"), String::new()));
            let mut procs = String::new();
            for p in pids {
                let _ = writeln!(procs, "{p}");
            }
            out.push((path(dir, "cgroup.procs"), procs));
        }
        None => {
            out.push((path(dir, "cgroup.subtree_control"), ENABLED.to_owned()));
            out.push((path(dir, "cgroup.procs"), String::new()));
        }
    }
}

/// The counters and limits of a job's directory or the batch system's parent.
fn counter_files(
    out: &mut Vec<(String, String)>,
    dir: &str,
    c: &CgroupCounters,
    dev: (u32, u32),
    limits: [String; 4],
) {
    out.push((path(dir, "cpu.stat"), cpu_stat(c)));
    out.push((path(dir, "io.stat"), io_stat(c, dev)));
    out.push((path(dir, "io.pressure"), pressure(&c.io_some, &c.io_full)));
    out.push((
        path(dir, "cpu.pressure"),
        pressure(&c.cpu_some, &c.cpu_full),
    ));
    out.push((
        path(dir, "memory.pressure"),
        pressure(&c.memory_some, &c.memory_full),
    ));
    out.push((
        path(dir, "memory.current"),
        format!("{}\n", c.memory_current),
    ));
    out.push((path(dir, "memory.peak"), format!("{}\n", c.memory_peak)));
    out.push((path(dir, "memory.stat"), memory_stat(c)));
    out.push((path(dir, "memory.max"), "max\n".to_owned()));
    let [cpu_max, weight, cpus, effective] = limits;
    out.push((path(dir, "cpu.max"), cpu_max));
    out.push((path(dir, "cpu.weight"), weight));
    out.push((path(dir, "cpuset.cpus"), cpus));
    out.push((path(dir, "cpuset.cpus.effective"), effective));
}

/// HTCondor sets the weight to 100 × the slot's cores and leaves the cpuset alone; Slurm
/// (`ConstrainCores=yes`) binds the job to its cores and leaves the weight at the default.
fn job_limits(j: &Job, htcondor: bool, ncpu: u32) -> [String; 4] {
    let cpu_max = match j.quota_usec {
        Some(q) => format!("{q} 100000\n"),
        None => "max 100000\n".to_owned(),
    };
    if htcondor {
        [
            cpu_max,
            format!("{}\n", 100 * j.cores),
            "\n".to_owned(),
            cpu_list(0, ncpu),
        ]
    } else {
        let cpus = cpu_list(j.cpu0, j.cores);
        [cpu_max, "100\n".to_owned(), cpus.clone(), cpus]
    }
}

/// Every file of the hierarchy, by path relative to the host root, in a stable order.
pub fn files(cg: &Cgroups) -> Vec<(String, String)> {
    let mut out = Vec::new();
    out.push((path("", "cgroup.controllers"), ROOT_CONTROLLERS.to_owned()));
    out.push((path("", "cgroup.subtree_control"), ENABLED.to_owned()));
    let htcondor = !cg.parent.contains("slurmstepd");
    let mut plain: Vec<&str> = cg.other_dirs.iter().map(String::as_str).collect();
    plain.extend(ancestors(&cg.parent));
    plain.sort_unstable();
    plain.dedup();
    for d in plain {
        dir_files(&mut out, d, None);
    }
    dir_files(&mut out, &cg.parent, None);
    let all = cpu_list(0, cg.ncpu);
    counter_files(
        &mut out,
        &cg.parent,
        &cg.parent_c,
        cg.disk,
        [
            "max 100000\n".to_owned(),
            "100\n".to_owned(),
            "\n".to_owned(),
            all,
        ],
    );
    for j in &cg.jobs {
        let leaf = j.subdirs.last();
        let pids: Vec<u32> = (0..=j.cores).map(|k| j.pid0 + k).collect();
        dir_files(&mut out, &j.dir, leaf.is_none().then_some(&pids[..]));
        counter_files(
            &mut out,
            &j.dir,
            &j.c,
            cg.disk,
            job_limits(j, htcondor, cg.ncpu),
        );
        for s in &j.subdirs {
            // Only the leaf holds processes. Its own counters are not written: the job's
            // directory counts them, and that is the one a reader takes.
            dir_files(&mut out, s, (Some(s) == leaf).then_some(&pids[..]));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists_print_like_the_kernel() {
        assert_eq!(cpu_list(0, 64), "0-63\n");
        assert_eq!(cpu_list(5, 1), "5\n");
        assert_eq!(cpu_list(3, 0), "\n");
    }

    #[test]
    fn ancestors_of_a_path() {
        let a: Vec<&str> = ancestors("system.slice/slurmstepd.scope/job_1").collect();
        assert_eq!(a, ["system.slice", "system.slice/slurmstepd.scope"]);
        assert_eq!(ancestors("init.scope").count(), 0);
    }

    #[test]
    fn no_io_stat_line_before_the_first_io() {
        let c = CgroupCounters::default();
        assert_eq!(io_stat(&c, (8, 0)), "");
    }
}
