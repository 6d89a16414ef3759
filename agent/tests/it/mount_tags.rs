//! The `fs` lines' `mount` tag keeps every mount point apart and reversible: real tmpfs mounts
//! at directories whose names hold a newline, a space, a tab and a backslash, in a private mount
//! namespace (`unshare --mount`), measured by the real binary from the real `/proc`.

#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::fs;
use std::path::PathBuf;

use storwatch_agent::collect::fs::DEFAULT_EXCLUDE_FSTYPES;
use storwatch_agent::sources::mountinfo::unescape;
use storwatch_test_support::files::write_replacing as write;
use storwatch_test_support::in_private_mounts;
use storwatch_wire::lp::{parse_line, Backend, FieldValue};

#[test]
fn newline_space_tab_and_backslash_mount_points_are_four_series() {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().to_str().unwrap().to_owned();
    assert!(!base.contains([' ', '\t', '\n', '\\']), "{base}");
    // name, how mountinfo prints it, MiB of its tmpfs
    let mounts = [
        ("x\ny", "x\\012y", 1),
        ("x y", "x\\040y", 2),
        ("x\ty", "x\\011y", 3),
        ("x\\y", "x\\134y", 4),
    ];
    for (name, _, _) in &mounts {
        fs::create_dir(dir.path().join(name)).unwrap();
    }
    let fstypes: Vec<String> = DEFAULT_EXCLUDE_FSTYPES
        .iter()
        .filter(|t| **t != "tmpfs")
        .map(|t| format!("{t:?}"))
        .collect();
    let config = dir.path().join("agent.toml");
    write(
        &config,
        &format!("[fs]\nexclude_fstypes = [{}]\n", fstypes.join(", ")),
    );
    let script = r#"
        set -e
        i=0
        for d in "$D1" "$D2" "$D3" "$D4"; do
            i=$((i + 1))
            mount -t tmpfs -o "size=${i}m" "storwatch-test-$i" "$d"
        done
        exec "$@"
    "#;
    let path = |i: usize| dir.path().join(mounts[i].0);
    let out = in_private_mounts(script)
        .arg(env!("CARGO_BIN_EXE_storwatch-agent"))
        .args(["once", "--report-interval", "1s", "--config"])
        .arg(&config)
        .env("D1", path(0))
        .env("D2", path(1))
        .env("D3", path(2))
        .env("D4", path(3))
        .output()
        .expect("run unshare (util-linux)");
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        out.status.success(),
        "{}: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let mut got: BTreeMap<String, i64> = BTreeMap::new();
    for line in text.lines().filter(|l| l.starts_with("fs,")) {
        let l = parse_line(line, Backend::V1).unwrap();
        let mount = l.tag("mount").unwrap();
        if !mount.starts_with(&base) {
            continue;
        }
        let Some(FieldValue::Integer(size)) = l.field("size_bytes") else {
            panic!("no size in {line}");
        };
        assert!(
            got.insert(mount.to_owned(), *size >> 20).is_none(),
            "{mount} twice:\n{text}"
        );
    }
    let want: BTreeMap<String, i64> = mounts
        .iter()
        .map(|(_, esc, mib)| (format!("{base}/{esc}"), *mib))
        .collect();
    // One series per mount point, each with its own filesystem's size: statvfs was called on
    // the decoded path.
    assert_eq!(got, want, "{text}");
    // And the tag gives the path back.
    for (i, (name, esc, _)) in mounts.iter().enumerate() {
        assert_eq!(
            PathBuf::from(unescape(&format!("{base}/{esc}"))),
            path(i),
            "{name:?}"
        );
    }
}
