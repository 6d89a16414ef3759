//! Job names as the directories have them: every job counted and named apart, and the name
//! gives the directory back, whatever its bytes (as the `fs` lines' `mount` tag,
//! agent/tests/it/mount_tags.rs).

use super::super::*;
use crate::sources::mountinfo::unescape_bytes;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use storwatch_wire::lp::{parse_line, Backend};

/// Names a container runtime or a script may give a cgroup: not UTF-8, differing only by a
/// trailing space, a backslash before a space or at the end, a newline, a tab.
const NAMES: [&[u8]; 17] = [
    b"plain",
    b"a b",
    b"a b ",
    b"x\\ y",
    b"x y",
    b"x\\",
    b"x",
    b"tab\there",
    b"new\nline",
    b"caf\xe9",
    b"caf\xc3\xa9",
    b"\xff\xfe",
    b"\xff\xfd",
    b"back\\134slash",
    b"back\\slash",
    b"comma,equals=",
    b"quote\"",
];

#[test]
fn every_job_name_is_kept_distinct_and_gives_its_directory_back() {
    let dir = tempfile::tempdir().expect("tempdir");
    let sys = dir.path().join("sys");
    let cg = sys.join("fs/cgroup");
    let base = cg.join("machine.slice");
    std::fs::create_dir_all(&base).expect("mkdir");
    std::fs::write(cg.join("cgroup.controllers"), "cpu io memory\n").expect("write");
    for (i, name) in NAMES.iter().enumerate() {
        let d = base.join(OsStr::from_bytes(name));
        std::fs::create_dir(&d).expect("mkdir");
        std::fs::write(d.join("cpu.stat"), format!("usage_usec {}\n", i * 1000)).expect("write");
        std::fs::write(d.join("cpu.max"), "100000 100000\n").expect("write");
    }
    let root = Root::new(dir.path().join("proc"), sys);
    let mut c = JobsCollector::new(
        JobsConfig {
            globs: vec!["machine.slice/*".to_owned()],
            ..JobsConfig::default()
        },
        std::time::Duration::from_secs(1),
        std::time::Duration::from_secs(10),
    );
    let mut errors = SourceErrors::new(&[CGROUP]);
    c.read(&root, 100, &mut errors);
    for (i, name) in NAMES.iter().enumerate() {
        let d = base.join(OsStr::from_bytes(name));
        std::fs::write(
            d.join("cpu.stat"),
            format!("usage_usec {}\n", i * 1000 + 500_000),
        )
        .expect("write");
    }
    c.read(&root, 1100, &mut errors);
    assert_eq!(c.pending.count, NAMES.len(), "every job counted");
    assert_eq!(errors.interval_sum(), 0);
    let mut w = LineWriter::new("wn042", &[]);
    c.write(&mut w, &root, 1);
    let text = String::from_utf8_lossy(w.as_bytes()).into_owned();
    let mut seen = std::collections::BTreeMap::new();
    for line in text.lines().filter(|l| l.starts_with("job,")) {
        let l = parse_line(line, Backend::V1).unwrap_or_else(|e| panic!("{line}: {e:?}"));
        let tag = l.tag("job").expect("job tag").to_owned();
        // the tag gives the directory back, and its own CPU time says it read that one
        let path = unescape_bytes(&tag);
        let name = path
            .strip_prefix(b"machine.slice/".as_slice())
            .unwrap_or_else(|| panic!("{tag}"));
        let i = NAMES
            .iter()
            .position(|n| *n == name)
            .unwrap_or_else(|| panic!("{tag} names no directory"));
        assert!(line.contains("cpu_s=0.5,"), "{line}");
        assert!(
            seen.insert(tag.clone(), i).is_none(),
            "{tag} twice:\n{text}"
        );
    }
    assert_eq!(seen.len(), NAMES.len(), "{text}");
}

#[test]
fn escaped_names_round_trip() {
    let mut out = String::new();
    for name in NAMES {
        out.clear();
        crate::sources::cgroup::jobs::escape_name_into(name, &mut out);
        assert!(!out.contains([' ', '\t', '\n']), "{out}");
        assert!(!out.ends_with('\\'), "{out}");
        assert_eq!(unescape_bytes(&out), name, "{out}");
    }
}
