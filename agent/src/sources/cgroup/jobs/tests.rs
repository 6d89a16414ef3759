use super::*;
use proptest::prelude::*;

/// The directories of a tree fixture: `find` output (lines starting with `/`) or a
/// `systemctl status`/`systemd-cgls` drawing.
fn listing(text: &str) -> Vec<String> {
    if text.lines().next().is_some_and(|l| l.starts_with('/')) {
        paths_from_find(text, "/sys/fs/cgroup")
            .into_iter()
            .map(str::to_owned)
            .collect()
    } else {
        paths_from_systemd_cgls(text)
    }
}

fn tree(name: &str) -> Vec<String> {
    let path = format!(
        "{}/fixtures/cgroup/trees/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    listing(&std::fs::read_to_string(path).expect("fixture"))
}

fn config() -> DiscoveryConfig {
    DiscoveryConfig {
        globs: vec!["user.slice/user-*.slice/session-*.scope".to_owned()],
        ..DiscoveryConfig::default()
    }
}

fn found(name: &str) -> Discovery {
    let dirs = tree(name);
    discover(dirs.iter().map(String::as_str), &config())
}

#[test]
fn snapshot_trees() {
    insta::glob!("../../../../fixtures/cgroup/trees", "*.txt", |path| {
        let text = std::fs::read_to_string(path).expect("fixture");
        let dirs = listing(&text);
        assert!(!dirs.is_empty(), "{}", path.display());
        insta::assert_debug_snapshot!((
            &dirs,
            discover(dirs.iter().map(String::as_str), &config())
        ));
    });
}

#[test]
fn slurm_job_ids_steps_and_user_sessions() {
    let d = found("cgroup-exporter-slurm-job_4-steps-0-extern-find.txt");
    assert_eq!(
        d.parents,
        [(
            BatchSystem::Slurm,
            "system.slice/slurmstepd.scope".to_owned()
        )]
    );
    let slurm: Vec<&JobCgroup> = d
        .jobs
        .iter()
        .filter(|j| j.system == BatchSystem::Slurm)
        .collect();
    assert_eq!(slurm.len(), 1, "`system` is no job, steps belong to job_4");
    let job = slurm[0];
    assert_eq!(job.job_id, JobId::SlurmJobId(4));
    assert_eq!(job.root, "system.slice/slurmstepd.scope/job_4");
    assert_eq!(job.steps, ["0", "extern"]);
    // step_0, its slurm, user, user/task_0, and the same four under step_extern
    assert_eq!(job.sub_cgroups, 8);
    assert_eq!(job.owner_uid, None);
    let sessions: Vec<(&str, Option<u32>)> = d
        .jobs
        .iter()
        .filter(|j| j.system == BatchSystem::Glob)
        .map(|j| (j.root.as_str(), j.owner_uid))
        .collect();
    assert_eq!(
        sessions,
        [
            ("user.slice/user-20821.slice/session-133.scope", Some(20821)),
            ("user.slice/user-20821.slice/session-157.scope", Some(20821)),
        ]
    );
}

#[test]
fn slurm_before_and_after_26_05() {
    let old = found("slurm-doc-pre-26.05-systemctl-status-job_3385-three-steps.txt");
    let new = found("slurm-doc-26.05-systemctl-status-sluid-s5K1KKYAYG5D00.txt");
    assert_eq!(old.jobs.len(), 1);
    assert_eq!(new.jobs.len(), 1);
    assert_eq!(old.jobs[0].job_id, JobId::SlurmJobId(3385));
    assert_eq!(
        new.jobs[0].job_id,
        JobId::Sluid("s5K1KKYAYG5D00".to_owned())
    );
    assert_eq!(
        new.jobs[0].root,
        "system.slice/slurmstepd.scope/s5K1KKYAYG5D00"
    );
    for d in [&old, &new] {
        assert_eq!(d.jobs[0].steps, ["0", "extern", "interactive"]);
        // three steps, each with slurm, user and user/task_0
        assert_eq!(d.jobs[0].sub_cgroups, 12);
    }
    let multi = found("slurm-multiple-slurmd-nodename-prefix-job-ids-find.txt");
    assert_eq!(
        multi.parents,
        [(
            BatchSystem::Slurm,
            "system.slice/node01_slurmstepd.scope".to_owned()
        )]
    );
    assert_eq!(multi.jobs.len(), 1);
    assert_eq!(multi.jobs[0].job_id, JobId::SlurmJobId(4242));
    assert_eq!(multi.jobs[0].steps, ["batch"]);
    assert_eq!(multi.jobs[0].sub_cgroups, 5);
}

#[test]
fn htcondor_before_23_8_slot_dirs_in_system_slice_with_pilot_groups() {
    let d =
        found("htcondor-pre-23.8-system.slice-htcondor-slot-dirs-pilot-subgroups-sshd-find.txt");
    assert_eq!(
        d.parents,
        [(BatchSystem::Htcondor, "system.slice/htcondor".to_owned())]
    );
    let ids: Vec<(String, usize)> = d
        .jobs
        .iter()
        .map(|j| (j.job_id.tag(), j.sub_cgroups))
        .collect();
    assert_eq!(
        ids,
        [
            ("slot2@wn042.example.org".to_owned(), 0),
            ("slot1_1@wn042.example.org".to_owned(), 2),
            ("slot1_2@wn042.example.org".to_owned(), 1),
        ]
    );
    assert!(d
        .jobs
        .iter()
        .all(|j| matches!(j.job_id, JobId::HtcondorSlot(_))));
    assert_eq!(
        d.jobs[0].root,
        "system.slice/htcondor/condor_scratch_condor_execute_slot2@wn042.example.org"
    );
}

#[test]
fn htcondor_24_8_slice_scope_glidein_and_ssh_to_job() {
    // HTCondor 24.8+ (vanilla_proc.cpp: `<base>/<EXECUTE with / as _>_<slot Name>`, no
    // `condor` prefix since 79b26510, v24.8.1) under the packaged unit's
    // `DelegateSubgroup=leaf` (condor.service since 5ab1b794, v23.8.1): the jobs are in
    // `condor.service/htcondor`, beside the master's `leaf`.
    let d = found("htcondor-24.8-condor.service-leaf-slice-scope-glidein-inside-sshd-find.txt");
    let base = "system.slice/condor.service/htcondor";
    // The glidein's own `htcondor` inside slot1_2's slice is part of slot1_2, not a parent.
    assert_eq!(d.parents, [(BatchSystem::Htcondor, base.to_owned())]);
    assert_eq!(d.jobs.len(), 3);
    let e = "_var_lib_condor_execute";
    let j1 = &d.jobs[0];
    assert_eq!(
        j1.job_id,
        JobId::HtcondorSlotSlice("slot1_1@wn042.example.org".to_owned())
    );
    assert_eq!(
        j1.root,
        format!("{base}/{e}_slot1_1@wn042.example.org.slice")
    );
    assert_eq!(j1.sub_cgroups, 1);
    let j2 = &d.jobs[1];
    assert_eq!(j2.job_id.tag(), "slot1_2@wn042.example.org");
    // its scope, the glidein's htcondor, the glidein job's slice and scope
    assert_eq!(j2.sub_cgroups, 4);
    let j3 = &d.jobs[2];
    assert_eq!(j3.job_id.tag(), "slot1_3@wn042.example.org");
    assert_eq!(j3.also, [format!("{base}/{e}_slot1_3@wn042.example.org")]);
    // its scope, plus sshd.slice and sshd.scope under the ssh_to_job directory
    assert_eq!(j3.sub_cgroups, 3);
}

#[test]
fn htcondor_23_8_to_24_7_slot_dirs_under_the_delegated_unit() {
    let d = found("htcondor-23.8-24.7-condor.service-leaf-slot-dirs-find.txt");
    assert_eq!(
        d.parents,
        [(
            BatchSystem::Htcondor,
            "system.slice/condor.service/htcondor".to_owned()
        )]
    );
    let ids: Vec<(String, Vec<String>)> = d
        .jobs
        .iter()
        .map(|j| (j.job_id.tag(), j.also.clone()))
        .collect();
    assert_eq!(
        ids,
        [
            ("slot1_1@wn042.example.org".to_owned(), vec![]),
            ("slot1_2@wn042.example.org".to_owned(), vec![]),
        ]
    );
    assert_eq!(
        d.jobs[0].root,
        "system.slice/condor.service/htcondor/condor_var_lib_condor_execute_slot1_1@wn042.example.org"
    );
}

#[test]
fn htcondor_cgroup_all_daemons_the_startd_slice_is_the_parent() {
    // Starter.cpp: `STARTER_<slot Name>` (the name has the host), each a slice with its own
    // `htcondor` base, removed with the starter: the startd's slice above keeps the counters.
    let d = found("htcondor-24.8-cgroup-all-daemons-startd-starter-slices-find.txt");
    let startd = "system.slice/condor.service/STARTD_for__etc_condor_condor_config.slice";
    let ids: Vec<String> = d.jobs.iter().map(|j| j.job_id.tag()).collect();
    assert_eq!(
        ids,
        ["slot1_1@wn042.example.org", "slot1_2@wn042.example.org"]
    );
    assert_eq!(
        d.jobs[0].root,
        format!(
            "{startd}/STARTER_slot1_1@wn042.example.org.slice/htcondor/\
             _var_lib_condor_execute_slot1_1@wn042.example.org.slice"
        )
    );
    assert_eq!(d.parents, [(BatchSystem::Htcondor, startd.to_owned())]);
    assert_eq!(
        d.daemons,
        [format!(
            "{startd}/STARTD_for__etc_condor_condor_config.scope"
        )]
    );
}

#[test]
fn htcondor_base_cgroup_per_slot_type_and_nested() {
    let dirs = [
        "system.slice/hiprio",
        "system.slice/hiprio/x_slot1_1@wn.slice",
        "system.slice/jobs/htcondor/x_slot2_1@wn.slice",
        "system.slice/jobs/htcondor/x_slot2_1@wn.slice/x_slot2_1@wn.scope",
        "system.slice/jobs/other/x_slot3_1@wn.slice",
        "system.slice/htcondor/x_slot4_1@wn",
    ];
    let cfg = DiscoveryConfig {
        htcondor_base: vec![
            "hiprio".to_owned(),
            "/jobs/htcondor/".to_owned(),
            String::new(),
        ],
        globs: Vec::new(),
    };
    let d = discover(dirs, &cfg);
    let found: Vec<(String, usize)> = d
        .jobs
        .iter()
        .map(|j| (j.job_id.tag(), j.sub_cgroups))
        .collect();
    assert_eq!(
        found,
        [("slot1_1@wn".to_owned(), 0), ("slot2_1@wn".to_owned(), 1)]
    );
    let parents: Vec<&str> = d.parents.iter().map(|(_, p)| p.as_str()).collect();
    assert_eq!(
        parents,
        ["system.slice/hiprio", "system.slice/jobs/htcondor"]
    );
}

#[test]
fn htcondor_slot_names() {
    assert_eq!(
        htcondor_slot("condor_var_lib_condor_execute_slot1_1@wn042.example.org"),
        "slot1_1@wn042.example.org"
    );
    // An execute directory with "slot" in it: the last `_slot<digit>` wins.
    assert_eq!(
        htcondor_slot("condor_slot9_execute_slot1_12@wn"),
        "slot1_12@wn"
    );
    assert_eq!(
        htcondor_slot("EXECUTE_UNKNOWN_31337"),
        "EXECUTE_UNKNOWN_31337"
    );
    assert_eq!(htcondor_slot("x_slot"), "x_slot");
}

#[test]
fn sluids() {
    assert!(is_sluid("s5K1KKYAYG5D00"));
    assert!(is_sluid("sEKNKTV3WPV500"));
    assert!(is_sluid("S5k1kkyayg5d00"));
    assert!(!is_sluid("system"));
    assert!(!is_sluid("s5K1KKYAYG5D0"));
    assert!(!is_sluid("s5K1KKYAYG5D0U"));
    assert!(!is_sluid("x5K1KKYAYG5D00"));
    assert!(!is_sluid("s5K1KKYAY_5D00"));
}

#[test]
fn globs() {
    assert!(glob_component(b"*", b""));
    assert!(glob_component(b"user-*.slice", b"user-1000.slice"));
    assert!(!glob_component(b"user-*.slice", b"user-1000.scope"));
    assert!(glob_component(b"docker-?*.scope", b"docker-ab.scope"));
    assert!(!glob_component(b"docker-?*.scope", b"docker-.scope"));
    assert!(glob_component(b"*a*b*", b"xxaxxbxx"));
    assert!(!glob_component(b"a", b"ab"));

    // A glob over the batch systems' directories takes nothing of theirs, one inside a job is
    // part of the job, and one inside another glob's directory is part of that.
    let dirs = tree("cgroup-exporter-slurm-job_4-steps-0-extern-find.txt");
    let wide = DiscoveryConfig {
        globs: vec![
            "system.slice/*".to_owned(),
            "*/*/*/*".to_owned(),
            "user.slice/*/*".to_owned(),
            "*".to_owned(),
        ],
        ..DiscoveryConfig::default()
    };
    let d = discover(dirs.iter().map(String::as_str), &wide);
    let roots: Vec<(&str, BatchSystem)> =
        d.jobs.iter().map(|j| (j.root.as_str(), j.system)).collect();
    assert_eq!(
        roots,
        [
            ("system.slice/slurmstepd.scope/job_4", BatchSystem::Slurm),
            ("user.slice", BatchSystem::Glob),
        ]
    );
}

#[test]
fn listings() {
    let find = "/sys/fs/cgroup\n/sys/fs/cgroup/a\n/sys/fs/cgroup/a/b/\n./c\nd\n/sys/fs/cgroupx\n\n";
    assert_eq!(
        paths_from_find(find, "/sys/fs/cgroup/"),
        ["a", "a/b", "c", "d", "sys/fs/cgroupx"]
    );
    let cgls = "Control group /:\n-.slice\n├─user.slice (#1119)\n│ └─user-1000.slice\n│   └─session-2.scope (#4242)\n│     └─1234 sshd: me\n└─system.slice\n  └─2 3\n";
    assert_eq!(
        paths_from_systemd_cgls(cgls),
        [
            "user.slice",
            "user.slice/user-1000.slice",
            "user.slice/user-1000.slice/session-2.scope",
            "system.slice",
        ]
    );
}

proptest! {
    #[test]
    fn never_panics_and_no_job_inside_another(
        dirs in proptest::collection::vec(
            proptest::collection::vec(
                prop_oneof![
                    4 => proptest::sample::select(vec![
                        "htcondor", "slurmstepd.scope", "n1_slurmstepd.scope", "job_7", "job_x",
                        "s5K1KKYAYG5D00", "system", "step_0", "step_batch", "user", "task_0",
                        "x_slot1_1@h", "x_slot1_1@h.slice", "x_slot1_1@h.scope", "sshd.slice",
                        "user-1000.slice", "user.slice", "system.slice", ".", "",
                    ]).prop_map(str::to_owned),
                    1 => "\\PC{0,4}",
                ],
                1..6,
            ),
            0..30,
        ),
        globs in proptest::collection::vec(
            prop_oneof![
                proptest::sample::select(vec!["*", "*/*", "*/*/*", "*/*/*/*", "*/*/*/*/*", "system.slice/*", "user.slice/*/*"])
                    .prop_map(str::to_owned),
                "[a-z*?/.-]{0,12}",
            ],
            0..4,
        ),
    ) {
        let paths: Vec<String> = dirs.iter().map(|c| c.join("/")).collect();
        let cfg = DiscoveryConfig { globs, ..DiscoveryConfig::default() };
        let d = discover(paths.iter().map(String::as_str), &cfg);
        for a in &d.jobs {
            prop_assert!(paths.iter().any(|p| components(p).join("/").starts_with(&a.root)));
            for b in &d.jobs {
                let nested = b.root.starts_with(&format!("{}/", a.root));
                prop_assert!(!nested, "{} inside {}", b.root, a.root);
            }
        }
        let _ = paths_from_systemd_cgls(&paths.join("\n"));
        let _ = paths_from_find(&paths.join("\n"), "/sys/fs/cgroup");
    }

    #[test]
    fn cgls_never_panics(text in "[├└│─ \\n0-9a-z.:/]{0,200}") {
        let _ = paths_from_systemd_cgls(&text);
    }
}

/// The escaping before its fast path's fold: the oracle of the property test below.
fn escape_name_into_oracle(name: &[u8], out: &mut String) {
    use std::fmt::Write as _;
    let plain = |b: u8| b > b' ' && b != b'\\' && b != 0x7f;
    if name.iter().all(|b| plain(*b) && b.is_ascii()) {
        out.push_str(std::str::from_utf8(name).unwrap_or_default());
        return;
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

proptest! {
    /// Any name, and names near the usual ones: the escaping of the oracle.
    #[test]
    fn escaping_is_the_oracles(
        any_name in proptest::collection::vec(any::<u8>(), 0..40),
        usual in "[ -~]{0,40}",
        odd in proptest::collection::vec(prop_oneof![Just(0u8), Just(b' '), Just(b'\\'), Just(0x7f), Just(0x80), Just(0xff), Just(b'a')], 0..6),
    ) {
        for name in [any_name.clone(), usual.clone().into_bytes(), [usual.as_bytes(), &odd].concat()] {
            let (mut got, mut want) = (String::from("x/"), String::from("x/"));
            escape_name_into(&name, &mut got);
            escape_name_into_oracle(&name, &mut want);
            prop_assert_eq!(got, want);
        }
    }
}
