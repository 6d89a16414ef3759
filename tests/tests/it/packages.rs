//! The EL9 rpms as a site installs them: `scripts/check-packages.sh` builds both from the
//! workspace's binaries with the real rpmbuild, installs them into a scratch rpm database and
//! checks that `rpm -qf` names the owner of /etc/storwatch and /var/lib/storwatch and that
//! `rpm -V` finds the modes it packaged (0755 and 0700, root:root).
#![allow(clippy::unwrap_used)]

use std::process::Command;

use storwatch_test_support::*;

#[test]
fn rpms_own_their_directories_and_verify() {
    let agent = binary("storwatch-agent", "storwatch-agent");
    let collector = binary("storwatch-collector", "storwatch-collector");
    assert_eq!(
        agent.parent(),
        collector.parent(),
        "binaries from one build"
    );
    let out = Command::new(workspace().join("scripts/check-packages.sh"))
        .arg("--bin")
        .arg(agent.parent().unwrap())
        .output()
        .expect("run scripts/check-packages.sh");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "check-packages failed\n{stdout}\n{stderr}"
    );
    for line in [
        "ok   drwx------ /var/lib/storwatch",
        "rpm -qf /var/lib/storwatch: storwatch-agent",
        "rpm -V: nothing changed",
        "== packages own their directories",
    ] {
        assert!(stdout.contains(line), "no {line:?} in\n{stdout}");
    }
    let etc = stdout
        .lines()
        .find(|l| l.starts_with("rpm -qf /etc/storwatch:"))
        .unwrap();
    assert!(
        etc.contains("storwatch-agent") && etc.contains("storwatch-collector"),
        "{etc}"
    );
}
