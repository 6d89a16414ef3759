//! The test, through the real path: two degraded RAID6 arrays (12+2, one member failed,
//! nothing rebuilding) on a fixture tree, the whole agent binary reading their disks through a
//! stand-in smartctl that prints real captured outputs. The arrays are identical except that
//! one survivor of the second prints a failing disk's output (SMART FAILED, 8 pending sectors,
//! 1975 reallocated): its `rebuild_risk` must be the model's figure for those survivors, many
//! times the first's, with one member at risk against none.

#![allow(clippy::unwrap_used)]

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use storwatch_agent::health::drive::member_afr;
use storwatch_agent::health::risk::{loss_probability_members, Exposure, RiskModel};
use storwatch_agent::sources::smartctl;

/// A clean mid-life disk (4772 power-on hours, nothing reallocated or pending).
const CLEAN: &str = "sce-ata-toshiba-mg09aca18te.json";
/// A failing disk: overall health FAILED, 197 pending 8, 5 reallocated 1975.
const FAILING: &str = "scrutiny-ata-hitachi-usbjmicron-FAILED-exit216.json";

fn agent_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn fixture(name: &str) -> PathBuf {
    agent_dir().join("fixtures/smartctl").join(name)
}

/// `sda`, …, `sdz`, `sdaa`, … as the kernel names them.
fn sd(i: usize) -> String {
    let mut n = i;
    let mut s = Vec::new();
    loop {
        s.push(b'a' + (n % 26) as u8);
        if n < 26 {
            break;
        }
        n = n / 26 - 1;
    }
    s.reverse();
    format!("sd{}", String::from_utf8(s).unwrap())
}

/// An mdstat line for a 14-member RAID6 over partition 1 of `disks`, slot `failed` faulty.
fn raid6(name: &str, disks: &[String], failed: usize) -> String {
    let members: Vec<String> = disks
        .iter()
        .enumerate()
        .rev()
        .map(|(i, d)| {
            if i == failed {
                format!("{d}1[{i}](F)")
            } else {
                format!("{d}1[{i}]")
            }
        })
        .collect();
    let map: String = (0..disks.len())
        .map(|i| if i == failed { '_' } else { 'U' })
        .collect();
    format!(
        "{name} : active raid6 {}\n      23440588800 blocks super 1.2 level 6, 512k chunk, algorithm 2 [{n}/{a}] [{map}]\n      \n",
        members.join(" "),
        n = disks.len(),
        a = disks.len() - 1,
    )
}

struct Host {
    proc_root: PathBuf,
    sys_root: PathBuf,
    config: PathBuf,
}

/// Two arrays of 14 disks each; `at_risk` is the disk of md1 that prints the failing output.
fn setup(dir: &Path, at_risk: &str) -> Host {
    setup_with(dir, at_risk, &fixture(FAILING))
}

/// [`setup`], with `at_risk` printing the output in `failing`.
fn setup_with(dir: &Path, at_risk: &str, failing: &Path) -> Host {
    let proc_root = storwatch_test_support::files::fixture_proc_root(dir);
    let md0: Vec<String> = (0..14).map(sd).collect();
    let md1: Vec<String> = (14..28).map(sd).collect();
    fs::write(
        proc_root.join("mdstat"),
        format!(
            "Personalities : [raid6] [raid5] [raid4]\n{}{}unused devices: <none>\n",
            raid6("md0", &md0, 1),
            raid6("md1", &md1, 1)
        ),
    )
    .unwrap();
    // The sys tree: each disk with its partition 1, held by its array.
    let sys_root = dir.join("sys");
    for (array, disks) in [("md0", &md0), ("md1", &md1)] {
        fs::create_dir_all(sys_root.join("block").join(array).join("slaves")).unwrap();
        for (i, d) in disks.iter().enumerate() {
            let minor = if array == "md0" { i } else { 14 + i } * 16;
            let disk = sys_root.join("block").join(d);
            let part = disk.join(format!("{d}1"));
            fs::create_dir_all(disk.join("holders")).unwrap();
            fs::create_dir_all(part.join("holders")).unwrap();
            fs::write(disk.join("dev"), format!("8:{minor}\n")).unwrap();
            fs::write(part.join("dev"), format!("8:{}\n", minor + 1)).unwrap();
            fs::write(part.join("partition"), "1\n").unwrap();
            fs::write(part.join("holders").join(array), "").unwrap();
        }
    }
    // The stand-in smartctl: the real output of a clean disk for every device but one.
    let smartctl = dir.join("smartctl");
    fs::write(
        &smartctl,
        format!(
            "#!/bin/sh\nfor dev; do :; done\ncase \"$dev\" in\n\
             /dev/{at_risk}) exec cat '{}';;\n\
             /dev/sd*) exec cat '{}';;\n\
             *) echo \"unexpected $dev\" >&2; exit 1;;\n\
             esac\n",
            failing.display(),
            fixture(CLEAN).display(),
        ),
    )
    .unwrap();
    fs::set_permissions(&smartctl, fs::Permissions::from_mode(0o755)).unwrap();
    let config = dir.join("agent.toml");
    fs::write(
        &config,
        format!(
            "[drive]\nsmartctl = \"{}\"\ntimeout = \"5s\"\nmax_running = 8\n",
            smartctl.display()
        ),
    )
    .unwrap();
    Host {
        proc_root,
        sys_root,
        config,
    }
}

fn once(h: &Host) -> String {
    let out = storwatch_test_support::process::agent_once(
        Path::new(env!("CARGO_BIN_EXE_storwatch-agent")),
        "ds01",
        &h.proc_root,
        &h.sys_root,
        &h.config,
    )
    .output()
    .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    String::from_utf8(out.stdout).unwrap()
}

/// The field `key` of the `measurement` line whose tags contain `tag`.
fn field(text: &str, measurement: &str, tag: &str, key: &str) -> Option<String> {
    let l = text
        .lines()
        .find(|l| l.starts_with(&format!("{measurement},")) && l.contains(tag))?;
    // tags and fields part at the first space not escaped (`model=TOSHIBA\ MG09…`)
    let b = l.as_bytes();
    let at = (1..b.len()).find(|&i| b[i] == b' ' && b[i - 1] != b'\\')?;
    let fields = l[at + 1..].split(' ').next()?;
    fields
        .split(',')
        .find_map(|kv| kv.strip_prefix(&format!("{key}=")))
        .map(str::to_owned)
}

fn float(text: &str, measurement: &str, tag: &str, key: &str) -> f64 {
    field(text, measurement, tag, key)
        .unwrap_or_else(|| panic!("{measurement} {tag} has no {key}:\n{text}"))
        .trim_end_matches('i')
        .parse()
        .unwrap()
}

/// The model's figure for 13 survivors, one parity left, nothing rebuilding (the open window).
fn expected(failing: usize) -> f64 {
    let model = RiskModel::default();
    let rate = |name: &str| {
        let h = smartctl::parse(&fs::read_to_string(fixture(name)).unwrap()).unwrap();
        member_afr(&model, Some(&h))
    };
    let mut rates = vec![rate(CLEAN); 13];
    for r in rates.iter_mut().take(failing) {
        *r = rate(FAILING);
    }
    loss_probability_members(
        &model,
        &Exposure {
            surviving: 13,
            redundancy_left: 1,
            window_h: None,
            bytes_to_read: None,
        },
        &rates,
    )
}

#[test]
fn a_survivor_with_pending_sectors_raises_its_arrays_rebuild_risk() {
    let dir = tempfile::tempdir().unwrap();
    // sdw: a survivor of md1 (slot 8)
    let h = setup(dir.path(), "sdw");
    let text = once(&h);

    let clean = float(&text, "md", "array=md0", "rebuild_risk");
    let risky = float(&text, "md", "array=md1", "rebuild_risk");
    assert_eq!(float(&text, "md", "array=md0", "members_at_risk"), 0.0);
    assert_eq!(float(&text, "md", "array=md1", "members_at_risk"), 1.0);
    assert_eq!(float(&text, "md", "array=md0", "redundancy_left"), 1.0);
    assert_eq!(float(&text, "md", "array=md1", "redundancy_left"), 1.0);

    // The model's own numbers: 13 clean survivors, and 12 clean with the failing one.
    let (want_clean, want_risky) = (expected(0), expected(1));
    assert!(
        (clean - want_clean).abs() <= 1e-9 * want_clean,
        "md0 {clean} vs {want_clean}"
    );
    assert!(
        (risky - want_risky).abs() <= 1e-9 * want_risky,
        "md1 {risky} vs {want_risky}"
    );
    // One failing survivor at the 100× cap multiplies a 13-survivor RAID6's risk about 16-fold
    // (its p ≈ 0.0376 over the week against ≈ 3.8e-4 for the others).
    assert!(risky > 10.0 * clean, "md1 {risky} vs md0 {clean}");
    eprintln!(
        "md rebuild_risk: clean survivors {clean:.4e}, one failing {risky:.4e} ({:.1}×)",
        risky / clean
    );

    // The drive lines carry each disk's own probability, the failing one far above the rest.
    let p_clean = float(&text, "drive", "device=sda,", "failure_probability");
    let p_failing = float(&text, "drive", "device=sdw,", "failure_probability");
    assert!(p_failing > 50.0 * p_clean, "{p_failing} vs {p_clean}");
    assert_eq!(
        field(&text, "drive", "device=sdw,", "health_ok").as_deref(),
        Some("false")
    );
}

/// The clean disk's real output with nothing changed but attribute 197's raw value (and the
/// string smartctl prints for it): the two arrays then differ in one survivor's pending sectors
/// only.
fn clean_with_pending(dir: &Path, pending: u64) -> PathBuf {
    let mut doc: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(fixture(CLEAN)).unwrap()).unwrap();
    let table = doc["ata_smart_attributes"]["table"].as_array_mut().unwrap();
    let attr = table.iter_mut().find(|a| a["id"] == 197).unwrap();
    assert_eq!(
        attr["raw"]["value"], 0,
        "the clean disk has no pending sectors"
    );
    attr["raw"]["value"] = pending.into();
    attr["raw"]["string"] = pending.to_string().into();
    let path = dir.join("clean-with-pending.json");
    fs::write(&path, serde_json::to_string_pretty(&doc).unwrap()).unwrap();
    path
}

#[test]
fn arrays_that_differ_only_in_one_survivors_pending_sectors() {
    let dir = tempfile::tempdir().unwrap();
    let pending = clean_with_pending(dir.path(), 8);
    let h = setup_with(dir.path(), "sdw", &pending);
    let text = once(&h);
    let clean = float(&text, "md", "array=md0", "rebuild_risk");
    let risky = float(&text, "md", "array=md1", "rebuild_risk");
    assert_eq!(float(&text, "md", "array=md0", "members_at_risk"), 0.0);
    assert_eq!(float(&text, "md", "array=md1", "members_at_risk"), 1.0);
    // Worked by hand from docs/drive-risk.md's defaults: the clean 18 TB disk at 4772 h runs at
    // the flat 2 %/year (age factor 1); 8 pending sectors multiply that by 16 × (1 + 0.5 ×
    // log10 8) ≈ 23.2. Over the open week (168 h) p = 1 − exp(−afr·M·168/8766): 3.83e-4 for a
    // clean survivor, 8.86e-3 for the pending one. RAID6 with one parity left loses data when 2
    // or more of the 13 survivors fail: md0 ≈ C(13,2)·p² ≈ 1.14e-5; md1 ≈ C(12,2)·p² + 12·p·p_pend
    // ≈ 9.7e-6 + 4.08e-5 ≈ 5.05e-5, 4.4 times md0.
    assert!((clean - 1.142e-5).abs() < 0.01e-5, "md0 {clean:.4e}");
    assert!((risky - 5.05e-5).abs() < 0.05e-5, "md1 {risky:.4e}");
    let ratio = risky / clean;
    assert!(
        (4.0..5.0).contains(&ratio),
        "md1 {risky:.4e} vs md0 {clean:.4e}: {ratio:.2}×"
    );
    eprintln!("pending sectors only: md0 {clean:.4e}, md1 {risky:.4e} ({ratio:.1}×)");
}

#[test]
fn the_same_failing_disk_as_the_arrays_failed_member_changes_nothing() {
    // The failing output on md1's failed member (sdp, slot 1): it is no survivor, so md1's risk
    // is md0's and nobody is at risk.
    let dir = tempfile::tempdir().unwrap();
    let h = setup(dir.path(), "sdp");
    let text = once(&h);
    let clean = float(&text, "md", "array=md0", "rebuild_risk");
    let other = float(&text, "md", "array=md1", "rebuild_risk");
    assert_eq!(clean, other);
    assert_eq!(float(&text, "md", "array=md1", "members_at_risk"), 0.0);
}

/// A real `zpool status` of a raidz2 with one of its six disks OFFLINE while a resilver runs
/// (3 days 01:35:30 to go), its leaves named by kernel name.
const RAIDZ2: &str = "offf-ovh3-raidz2-offline-leaf-while-resilver-runs.txt";

/// The same pool on a tree of six disks `sda`…`sdf`, a stand-in `zpool` printing it, and the
/// stand-in smartctl printing the failing output for `at_risk` (none when empty).
fn setup_pool(dir: &Path, at_risk: &str) -> Host {
    let mut h = setup(dir, at_risk);
    // no MD here: a pool of whole disks
    fs::remove_file(h.proc_root.join("mdstat")).unwrap();
    let kstat = h.proc_root.join("spl/kstat/zfs/rpool");
    fs::create_dir_all(&kstat).unwrap();
    fs::write(kstat.join("state"), "DEGRADED\n").unwrap();
    let sys_root = dir.join("sys-pool");
    for (i, d) in (0..6).map(sd).enumerate() {
        let disk = sys_root.join("block").join(&d);
        fs::create_dir_all(disk.join("holders")).unwrap();
        fs::write(disk.join("dev"), format!("8:{}\n", i * 16)).unwrap();
    }
    h.sys_root = sys_root;
    let zpool = dir.join("zpool");
    fs::write(
        &zpool,
        format!(
            "#!/bin/sh\ncase \"$1 $2\" in\n\
             \"status -j\") echo \"invalid option 'j'\" >&2; exit 2;;\n\
             \"status -p\") exec cat '{}';;\n\
             \"list -Hp\") printf 'rpool\\t58498535866368\\t58498535866368\\t0\\t-\\t-\\t0\\t100\\t1.00\\tDEGRADED\\t-\\n';;\n\
             *) exit 1;;\nesac\n",
            agent_dir().join("fixtures/zpool-status").join(RAIDZ2).display()
        ),
    )
    .unwrap();
    fs::set_permissions(&zpool, fs::Permissions::from_mode(0o755)).unwrap();
    let mut config = fs::read_to_string(&h.config).unwrap();
    config.push_str(&format!("\n[zpool]\nzpool = \"{}\"\n", zpool.display()));
    fs::write(&h.config, config).unwrap();
    h
}

#[test]
fn a_raidz2_survivor_with_pending_sectors_raises_the_vdevs_rebuild_risk() {
    let dir = tempfile::tempdir().unwrap();
    let clean_text = once(&setup_pool(&dir.path().join("clean"), "none"));
    let risky_text = once(&setup_pool(&dir.path().join("risky"), "sdc"));
    let vdev = "vdev=raidz2-0,";
    let clean = float(&clean_text, "zpool_vdev", vdev, "rebuild_risk");
    let risky = float(&risky_text, "zpool_vdev", vdev, "rebuild_risk");
    assert_eq!(
        float(&clean_text, "zpool_vdev", vdev, "members_at_risk"),
        0.0
    );
    assert_eq!(
        float(&risky_text, "zpool_vdev", vdev, "members_at_risk"),
        1.0
    );
    assert_eq!(
        float(&risky_text, "zpool_vdev", vdev, "redundancy_left"),
        1.0
    );
    // The model: five survivors, one parity left, over zpool's own ETA (3 days 01:35:30).
    let model = RiskModel::default();
    let rate = |name: &str| {
        let h = smartctl::parse(&fs::read_to_string(fixture(name)).unwrap()).unwrap();
        member_afr(&model, Some(&h))
    };
    let e = Exposure {
        surviving: 5,
        redundancy_left: 1,
        window_h: Some(264_930.0 / 3600.0),
        bytes_to_read: None,
    };
    let want_clean = loss_probability_members(&model, &e, &[rate(CLEAN); 5]);
    let mut rates = vec![rate(CLEAN); 5];
    rates[2] = rate(FAILING);
    let want_risky = loss_probability_members(&model, &e, &rates);
    assert!(
        (clean - want_clean).abs() <= 1e-9 * want_clean,
        "{clean} vs {want_clean}"
    );
    assert!(
        (risky - want_risky).abs() <= 1e-9 * want_risky,
        "{risky} vs {want_risky}"
    );
    assert!(risky > 10.0 * clean, "{risky} vs {clean}");
    eprintln!(
        "raidz2 rebuild_risk: clean survivors {clean:.4e}, one failing {risky:.4e} ({:.1}×)",
        risky / clean
    );
    // The pool's own figure is its worst vdev's.
    assert_eq!(
        float(&risky_text, "zpool", "pool=rpool", "rebuild_risk"),
        risky
    );
    // Each disk of the pool carries its name.
    for d in ["sda", "sdc", "sdf"] {
        let l = risky_text
            .lines()
            .find(|l| l.starts_with(&format!("drive,host=ds01,device={d},")))
            .unwrap_or_else(|| panic!("no drive line for {d}:\n{risky_text}"));
        assert!(l.contains(",pool=rpool"), "{l}");
    }
}
