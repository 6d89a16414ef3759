//! Which cgroup v2 directories are batch jobs: HTCondor and Slurm job cgroups and configured
//! globs, found in a listing of the directories under `/sys/fs/cgroup`.
//!
//! [`discover`] is pure: it takes the directories' paths relative to the cgroup mount (as
//! `find /sys/fs/cgroup -type d` prints them, see [`paths_from_find`], or as `systemd-cgls` /
//! `systemctl status` draw them, see [`paths_from_systemd_cgls`]) and returns one
//! [`JobCgroup`] per job with the directory whose counters are the job's ([`JobCgroup::root`]).
//! A job's counters include every directory below its root, so everything below a job's root
//! belongs to the job and is never a job of its own: Slurm's `step_*`, `slurm`, `user`,
//! `task_*` directories, HTCondor's `.scope`, and what a pilot or glidein running inside the job
//! creates (PanDA's pilot makes `control` and `subprocesses` inside its job's cgroup,
//! PanDAWMS/pilot3 `pilot/util/cgroups.py`; ALICE's job agent makes sub-cgroups of its slot's
//! cgroup, CHEP 2024 as cited in DIRACGrid/DIRAC#7853; a glidein's own HTCondor makes a nested
//! `htcondor/…`).
//!
//! ## HTCondor (cgroup v2 since the 10.x series, HTCONDOR-1457; `ProcFamilyDirectCgroupV2`)
//!
//! The starter puts the job in a new child of `BASE_CGROUP` (default `htcondor`) made in the
//! parent of its own cgroup (`make_full_cgroup_name`,
//! `src/condor_utils/proc_family_direct_cgroup_v2.cpp`), named after the execute directory with
//! `/` turned into `_`, then `_`, then the slot's name (`src/condor_starter.V6.1/vanilla_proc.cpp`;
//! read at htcondor/htcondor@7491a145):
//!
//! * before 24.8: `<parent>/htcondor/condor_var_lib_condor_execute_slot1_1@wn042.example.org`
//!   (`condor` before the execute directory), the job's processes in it; `condor_ssh_to_job`
//!   adds `…/sshd` inside it.
//! * 24.8 and later (HTCONDOR-3008 and 79b26510, v24.8.1): no `condor` prefix, and the job's
//!   directory gets `.slice` with the processes in a leaf `.scope` of the same base name:
//!   `htcondor/_var_lib_condor_execute_slot1_1@wn042.example.org.slice/<same>.scope`, so that a
//!   pilot can make its own sub-cgroups beside the scope. `condor_ssh_to_job`'s sshd goes to
//!   `htcondor/<name>/sshd.slice/sshd.scope`, a sibling directory without `.slice`, reported as
//!   part of the same job ([`JobCgroup::also`]).
//!
//! `<parent>` is where the master's unit puts it: `system.slice` with a `condor.service` that
//! has no `DelegateSubgroup=` (before 23.8), `system.slice/condor.service` with the packaged
//! unit's `DelegateSubgroup=leaf` (HTCONDOR-2420, v23.8.1: the master runs in
//! `condor.service/leaf`).
//!
//! With `CGROUP_ALL_DAEMONS` (HTCONDOR-3032, v24.8.1) the master starts each daemon in
//! `<DAEMON>_for_<config with / as _>.slice` (`src/condor_master.V6/masterDaemon.cpp`) and the
//! startd each starter in `STARTER_<slot Name>.slice` (`src/condor_startd.V6/Starter.cpp`), so
//! each starter has its own `htcondor` directory:
//! `condor.service/STARTD_for__etc_condor_condor_config.slice/STARTER_slot1_1@wn042.example.org.slice/htcondor/<name>.slice`.
//! The starter's slice goes with its job: the parent is the startd's slice, whose counters keep
//! every starter's and job's, those that ended included; the startd's own leaf
//! (`STARTD_for_….scope`) is not a job's, [`Discovery::daemons`].
//!
//! The path shows the slot (`slot1_1@wn042.example.org`), not the cluster.proc id nor the
//! owner: the slot is the job's identity on the node ([`JobCgroup::job_id`]).
//! The `htcondor` directory holds every job's counters, including jobs that ended since the
//! last reading ([`Discovery::parents`]). HTCondor makes no `htcondor.slice`.
//!
//! ## Slurm (`cgroup/v2` plugin, 22.05+; `src/plugins/cgroup/v2/cgroup_v2.c`)
//!
//! slurmd asks systemd for `system.slice/slurmstepd.scope` (`<nodename>_slurmstepd.scope` when
//! built with `--enable-multiple-slurmd`); in it `system` holds idle slurmstepds and each job
//! has a directory with `step_<id>` (`step_0`, `step_batch`, `step_extern`,
//! `step_interactive`) below, each with `slurm` and `user/task_<n>` (`task_special`):
//!
//! * up to 25.11: `slurmstepd.scope/job_<jobid>` (doc `cgroup_v2.shtml`).
//! * 26.05 and later: the job directory is the job's SLUID, `s` and 13 Crockford base-32
//!   characters (`slurmstepd.scope/s5K1KKYAYG5D00`), which the numeric job id cannot be read
//!   from (`src/common/sluid.h`); `CgroupJobIdPaths=yes` in `cgroup.conf` restores `job_<jobid>`
//!   (CHANGELOG/slurm-26.05.md). [`JobId::Sluid`] says which one a job has.
//!
//! No owner is in a cgroup v2 Slurm path (v1 had `uid_<uid>`).
//!
//! ## Configured globs
//!
//! `*` matches any run of characters within one path component, `?` one character;
//! a pattern matches a directory whose path has exactly as many components
//! (`machine.slice/*.scope`, `user.slice/user-*.slice/session-*.scope`). A glob directory
//! that holds or is a batch-system job (or batch parent) is not taken, so a wide glob cannot
//! count a job twice; one inside a job is part of that job.
//!
//! Where a path shows a systemd user slice (`user-1000.slice`), its uid is the owner.

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Bound::{Excluded, Unbounded};

/// The batch system that made a job's cgroup.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum BatchSystem {
    /// HTCondor's starter.
    Htcondor,
    /// Slurm's slurmstepd.
    Slurm,
    /// A configured glob.
    Glob,
}

impl BatchSystem {
    /// Lower-case name for tags.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Htcondor => "htcondor",
            Self::Slurm => "slurm",
            Self::Glob => "glob",
        }
    }
}

/// How the path names the job, which tells the layout and the version it comes from.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum JobId {
    /// HTCondor before 24.8: `htcondor/<execute>_<slot>`; the slot's name.
    HtcondorSlot(String),
    /// HTCondor 24.8+: `htcondor/<execute>_<slot>.slice`; the slot's name.
    HtcondorSlotSlice(String),
    /// Slurm up to 25.11, or 26.05+ with `CgroupJobIdPaths=yes`: `job_<id>`.
    SlurmJobId(u64),
    /// Slurm 26.05+: the SLUID as the directory shows it (`s5K1KKYAYG5D00`).
    Sluid(String),
    /// A configured glob (its index in the configuration) and the matched path.
    Glob(usize, String),
}

impl JobId {
    /// The id as a tag value: slot name, job id, SLUID or path.
    pub fn tag(&self) -> String {
        match self {
            Self::HtcondorSlot(s) | Self::HtcondorSlotSlice(s) | Self::Sluid(s) => s.clone(),
            Self::SlurmJobId(n) => n.to_string(),
            Self::Glob(_, p) => p.clone(),
        }
    }
}

/// One job's cgroup.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobCgroup {
    /// Who made it.
    pub system: BatchSystem,
    /// How the path names it.
    pub job_id: JobId,
    /// Slurm: the steps below the job (`0`, `batch`, `extern`), sorted; empty otherwise.
    pub steps: Vec<String>,
    /// The uid of a `user-<uid>.slice` in the root's path, if any.
    pub owner_uid: Option<u32>,
    /// The job's directory, relative to the cgroup mount: its counters are the job's.
    pub root: String,
    /// Other top directories of the same job beside `root` (HTCondor 24.8+'s
    /// `condor_ssh_to_job` directory); add their counters to the root's.
    pub also: Vec<String>,
    /// Directories below `root` and `also` (steps, tasks, scopes, pilots' groups).
    pub sub_cgroups: usize,
}

/// What [`discover`] found.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Discovery {
    /// Jobs, sorted by root.
    pub jobs: Vec<JobCgroup>,
    /// The batch systems' own directories (`system.slice/htcondor`,
    /// `system.slice/slurmstepd.scope`), sorted: their counters include all their jobs, those
    /// that ended between two readings too.
    pub parents: Vec<(BatchSystem, String)>,
    /// Directories inside a parent that hold a daemon, not jobs (the startd's own
    /// `STARTD_for_….scope` in its slice with `CGROUP_ALL_DAEMONS`), sorted: their CPU time is
    /// taken off their parent's.
    pub daemons: Vec<String>,
}

/// What to look for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiscoveryConfig {
    /// HTCondor's `BASE_CGROUP` values, one per slot type that sets its own
    /// (`SLOT_TYPE_1.BASE_CGROUP`); a value may name a nested directory (`jobs/htcondor`).
    /// Default `["htcondor"]`.
    pub htcondor_base: Vec<String>,
    /// Extra job patterns, relative to the cgroup mount (default none).
    pub globs: Vec<String>,
}

impl Default for DiscoveryConfig {
    fn default() -> Self {
        Self {
            htcondor_base: vec!["htcondor".to_owned()],
            globs: Vec::new(),
        }
    }
}

/// What one path lies in: a batch system's parent directory and, below it, maybe a job.
struct Found {
    system: BatchSystem,
    /// Number of components of the batch system's parent directory.
    parent_len: usize,
    /// The job, if the path is in one: its id and the number of components of its root.
    job: Option<(JobId, usize)>,
}

/// HTCondor's slot name out of `<execute>_<slot>`: from the last `_slot<digit>`.
fn htcondor_slot(name: &str) -> String {
    let bytes = name.as_bytes();
    let mut at = None;
    for (i, _) in name.match_indices("_slot") {
        if bytes.get(i + 5).is_some_and(u8::is_ascii_digit) {
            at = Some(i + 1);
        }
    }
    // A starter whose slot has no usual name falls back to its pid: the whole name is the id.
    at.and_then(|i| name.get(i..)).unwrap_or(name).to_owned()
}

/// Whether `name` is a SLUID as `print_sluid()` writes it (`str2sluid()` also takes lower case
/// and O/I/L).
fn is_sluid(name: &str) -> bool {
    let b = name.as_bytes();
    b.len() == 14
        && matches!(b.first(), Some(b's' | b'S'))
        && b.iter().skip(1).all(|c| {
            c.is_ascii_digit() || (c.is_ascii_alphabetic() && !c.eq_ignore_ascii_case(&b'u'))
        })
}

fn is_slurmstepd_scope(c: &str) -> bool {
    c == "slurmstepd.scope" || c.ends_with("_slurmstepd.scope")
}

/// What the path of a directory (its components) says, by batch system. The first batch
/// directory on the path decides: whatever is below a job is the job's.
fn classify(c: &[&str], cfg: &DiscoveryConfig) -> Option<Found> {
    for (k, comp) in c.iter().enumerate() {
        // BASE_CGROUP may name a nested directory (`jobs/htcondor`).
        let base_len = cfg.htcondor_base.iter().find_map(|b| {
            let mut n = 0;
            for want in b.split('/').filter(|w| !w.is_empty()) {
                (c.get(k + n) == Some(&want)).then_some(())?;
                n += 1;
            }
            (n > 0).then_some(n)
        });
        if let Some(n) = base_len {
            // With `CGROUP_ALL_DAEMONS` the base is in the starter's own slice
            // (`STARTD_for_<config>.slice/STARTER_<slot>.slice/htcondor`), which the starter
            // removes with its job: the startd's slice above it keeps every job's counters.
            let in_starter = k >= 2
                && c.get(k.saturating_sub(1))
                    .is_some_and(|s| s.starts_with("STARTER_") && s.ends_with(".slice"));
            let startd_len = k.saturating_sub(1);
            let k = k + n - 1;
            let below = c.get(k + 1);
            let job = below.map(|dir| {
                let id = match dir.strip_suffix(".slice") {
                    Some(base) => JobId::HtcondorSlotSlice(htcondor_slot(base)),
                    None => JobId::HtcondorSlot(htcondor_slot(dir)),
                };
                (id, k + 2)
            });
            return Some(Found {
                system: BatchSystem::Htcondor,
                parent_len: if in_starter { startd_len } else { k + 1 },
                job,
            });
        }
        if is_slurmstepd_scope(comp) {
            // `system` (idle slurmstepds) and anything else that is no job id is not a job.
            let job = c.get(k + 1).and_then(|dir| {
                let id = match dir.strip_prefix("job_").and_then(super::parse_u64) {
                    Some(id) => JobId::SlurmJobId(id),
                    None if is_sluid(dir) => JobId::Sluid((*dir).to_owned()),
                    None => return None,
                };
                Some((id, k + 2))
            });
            return Some(Found {
                system: BatchSystem::Slurm,
                parent_len: k + 1,
                job,
            });
        }
    }
    None
}

/// Matches one path component against one glob component.
fn glob_component(pattern: &[u8], text: &[u8]) -> bool {
    // Iterative wildcard matching with backtracking to the last `*`; linear in practice.
    let (mut p, mut t) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while t < text.len() {
        match pattern.get(p) {
            Some(b'*') => {
                star = Some((p, t));
                p += 1;
            }
            Some(&c) if c == b'?' || text.get(t) == Some(&c) => {
                p += 1;
                t += 1;
            }
            _ => match star {
                Some((sp, st)) => {
                    p = sp + 1;
                    t = st + 1;
                    star = Some((sp, st + 1));
                }
                None => return false,
            },
        }
    }
    pattern
        .get(p..)
        .is_some_and(|rest| rest.iter().all(|&c| c == b'*'))
}

/// The uid of the first `user-<uid>.slice` component.
fn owner_uid(components: &[&str]) -> Option<u32> {
    components.iter().find_map(|c| {
        let uid = c.strip_prefix("user-")?.strip_suffix(".slice")?;
        u32::try_from(super::parse_u64(uid)?).ok()
    })
}

/// Normalises a listed path: no leading `./` or `/`, no trailing `/`, no empty components.
fn components(path: &str) -> Vec<&str> {
    path.split('/')
        .filter(|c| !c.is_empty() && *c != ".")
        .collect()
}

/// Finds the jobs among cgroup directories (paths relative to the cgroup mount). The order
/// of `dirs` does not matter and duplicates are harmless.
pub fn discover<'a>(dirs: impl IntoIterator<Item = &'a str>, cfg: &DiscoveryConfig) -> Discovery {
    let all: BTreeSet<Vec<&str>> = dirs
        .into_iter()
        .map(components)
        .filter(|c| !c.is_empty())
        .collect();

    // Batch-system jobs and parents first. In sorted order a job's root comes before everything
    // below it, and everything below it is the job's: those paths need no second look.
    let mut jobs: BTreeMap<Vec<&str>, (BatchSystem, JobId)> = BTreeMap::new();
    let mut parents: BTreeSet<(BatchSystem, Vec<&str>)> = BTreeSet::new();
    let mut last_root: Option<&[&str]> = None;
    for c in &all {
        if last_root.is_some_and(|r| c.starts_with(r)) {
            continue;
        }
        let Some(found) = classify(c, cfg) else {
            continue;
        };
        let parent = c.get(..found.parent_len).unwrap_or_default();
        if !parents.iter().any(|(_, p)| p[..] == *parent) {
            parents.insert((found.system, parent.to_vec()));
        }
        if let Some((id, n)) = found.job {
            let root = c.get(..n).unwrap_or_default();
            jobs.insert(root.to_vec(), (found.system, id));
            last_root = Some(root);
        }
    }
    // Globs: not over a batch job or parent (they would count it twice).
    let patterns: Vec<Vec<&str>> = cfg.globs.iter().map(|g| components(g)).collect();
    let batch_roots: Vec<Vec<&str>> = jobs
        .keys()
        .cloned()
        .chain(parents.iter().map(|(_, p)| p.clone()))
        .collect();
    for c in &all {
        for (i, pat) in patterns.iter().enumerate() {
            if pat.len() > c.len() || pat.is_empty() {
                continue;
            }
            let root = c.get(..pat.len()).unwrap_or_default();
            let matches = pat
                .iter()
                .zip(root)
                .all(|(p, t)| glob_component(p.as_bytes(), t.as_bytes()));
            if matches && !batch_roots.iter().any(|b| b.starts_with(root)) {
                jobs.entry(root.to_vec())
                    .or_insert((BatchSystem::Glob, JobId::Glob(i, root.join("/"))));
                break;
            }
        }
    }

    // A job inside another job is part of it (pilots, glideins); parents inside jobs likewise.
    // In sorted order a root's descendants follow it, so the last root kept is the only one
    // to compare with.
    let mut outer: Option<Vec<&str>> = None;
    jobs.retain(|r, _| {
        if outer.as_ref().is_some_and(|o| r.starts_with(o)) {
            return false;
        }
        outer = Some(r.clone());
        true
    });
    let roots: Vec<&Vec<&str>> = jobs.keys().collect();
    parents.retain(|(_, p)| !roots.iter().any(|o| o.len() < p.len() && p.starts_with(o)));

    // HTCondor 24.8+: `<name>` beside `<name>.slice` is the job's ssh_to_job directory.
    let joined: BTreeSet<String> = jobs.keys().map(|r| r.join("/")).collect();
    let mut also: BTreeMap<String, Vec<Vec<&str>>> = BTreeMap::new();
    jobs.retain(|r, (_, id)| {
        let slice = format!("{}.slice", r.join("/"));
        if matches!(id, JobId::HtcondorSlot(_)) && joined.contains(&slice) {
            also.entry(slice).or_default().push(r.clone());
            return false;
        }
        true
    });

    let out_jobs = jobs
        .into_iter()
        .map(|(root, (system, job_id))| {
            let extra = also.remove(&root.join("/")).unwrap_or_default();
            let sub_cgroups = below(&all, &root).count()
                + extra.iter().map(|e| below(&all, e).count()).sum::<usize>();
            let mut steps: Vec<String> = Vec::new();
            if system == BatchSystem::Slurm {
                steps = below(&all, &root)
                    .filter(|c| c.len() == root.len() + 1)
                    .filter_map(|c| c.last()?.strip_prefix("step_"))
                    .map(str::to_owned)
                    .collect();
            }
            JobCgroup {
                system,
                job_id,
                steps,
                owner_uid: owner_uid(&root),
                root: root.join("/"),
                also: extra.iter().map(|e| e.join("/")).collect(),
                sub_cgroups,
            }
        })
        .collect();
    // An HTCondor daemon's slice as a parent (the startd's): its processes live in the leaf of
    // the same name with `.scope` (`proc_family_direct_cgroup_v2.cpp`), no job's.
    let mut daemons = Vec::new();
    for (system, p) in &parents {
        let Some(name) = p.last().and_then(|n| n.strip_suffix(".slice")) else {
            continue;
        };
        if *system != BatchSystem::Htcondor {
            continue;
        }
        let scope = format!("{name}.scope");
        let mut leaf = p.clone();
        leaf.push(&scope);
        if all.contains(&leaf) {
            daemons.push(leaf.join("/"));
        }
    }
    Discovery {
        jobs: out_jobs,
        parents: parents.into_iter().map(|(s, p)| (s, p.join("/"))).collect(),
        daemons,
    }
}

/// The directories below `top`: in sorted order, the ones right after it.
fn below<'a, 'b>(
    all: &'a BTreeSet<Vec<&'b str>>,
    top: &'a Vec<&'b str>,
) -> impl Iterator<Item = &'a Vec<&'b str>> + 'a {
    all.range::<Vec<&str>, _>((Excluded(top), Unbounded))
        .take_while(move |c| c.starts_with(top))
}

/// Appends a directory's name to `out` as the tree's paths and the `job` tag carry it: as the
/// kernel escapes a mount point in mountinfo, a byte that is a space, a backslash or a control
/// character, or that is not part of valid UTF-8, becomes `\` and its three octal digits
/// (`\040`, `\134`, `\377`), so every name is kept, distinct and reversible
/// ([`crate::sources::mountinfo::unescape_bytes`]) — a tag value loses neither a trailing space
/// nor a backslash before a space. Other characters, non-ASCII letters included, stay as they are.
pub fn escape_name_into(name: &[u8], out: &mut String) {
    use std::fmt::Write as _;
    let plain = |b: u8| b > b' ' && b != b'\\' && b != 0x7f;
    // The usual name, printable ASCII but the backslash: nothing to escape. Checked by a fold
    // without an early exit (a few wide operations), not a branch a byte.
    if let Ok(text) = std::str::from_utf8(name) {
        let usual = name.iter().fold(true, |ok, &b| {
            ok & (b.wrapping_sub(0x21) < 0x5e) & (b != b'\\')
        });
        if usual {
            out.push_str(text);
            return;
        }
    }
    for chunk in name.utf8_chunks() {
        for c in chunk.valid().chars() {
            if c.is_ascii() && !plain(c as u8) {
                let _ = write!(out, "\\{:03o}", c as u8);
            } else {
                out.push(c);
            }
        }
        for b in chunk.invalid() {
            let _ = write!(out, "\\{b:03o}");
        }
    }
}

/// Paths relative to `mount` from `find <mount> -type d` output (one path per line). Lines
/// outside `mount` are taken as already relative; the mount itself is dropped.
pub fn paths_from_find<'a>(text: &'a str, mount: &str) -> Vec<&'a str> {
    let mount = mount.trim_end_matches('/');
    text.lines()
        .map(str::trim)
        .map(|l| match l.strip_prefix(mount) {
            Some(rest) if rest.is_empty() || rest.starts_with('/') => rest,
            _ => l,
        })
        .map(|l| l.trim_start_matches("./").trim_matches('/'))
        .filter(|l| !l.is_empty() && *l != ".")
        .collect()
}

/// Directory paths from a `systemd-cgls` or `systemctl status` tree. The tree's top is the
/// `CGroup: /path` line of `systemctl status` (or the root for `systemd-cgls`); entries are
/// drawn with `├─`/`└─`, two columns per level, a cgroup id (`(#1119)`) after a name is dropped;
/// process lines (`113630 slurmstepd: …`) are skipped.
pub fn paths_from_systemd_cgls(text: &str) -> Vec<String> {
    let mut base: Vec<String> = Vec::new();
    let mut stack: Vec<(usize, String)> = Vec::new();
    let mut top_col: Option<usize> = None;
    let mut out = Vec::new();
    for line in text.lines() {
        if let Some((_, path)) = line.split_once("CGroup: ") {
            base = components(path.trim())
                .into_iter()
                .map(str::to_owned)
                .collect();
            if !base.is_empty() {
                out.push(base.join("/"));
            }
            stack.clear();
            top_col = None;
            continue;
        }
        let glyph = ["├─", "└─"].iter().filter_map(|g| line.find(g)).min();
        let Some(byte_at) = glyph else {
            continue;
        };
        let col = line.get(..byte_at).map_or(0, |s| s.chars().count());
        let item = line.get(byte_at + "├─".len()..).unwrap_or_default().trim();
        let top = *top_col.get_or_insert(col);
        let depth = col.saturating_sub(top) / 2;
        // A process: "<pid> <command>". Directories never start with a pid and a space.
        let first = item.split(' ').next().unwrap_or_default();
        if item.contains(' ') && !first.is_empty() && first.bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        // Newer systemd-cgls prints the cgroup id after the name: `user.slice (#1119)`.
        let item = match item.rsplit_once(" (#") {
            Some((name, id))
                if id
                    .strip_suffix(')')
                    .is_some_and(|n| n.bytes().all(|b| b.is_ascii_digit())) =>
            {
                name
            }
            _ => item,
        };
        while stack.last().is_some_and(|(d, _)| *d >= depth) {
            stack.pop();
        }
        stack.push((depth, item.to_owned()));
        let path: Vec<&str> = base
            .iter()
            .map(String::as_str)
            .chain(stack.iter().map(|(_, n)| n.as_str()))
            .collect();
        out.push(path.join("/"));
    }
    out
}

#[cfg(test)]
mod tests;
