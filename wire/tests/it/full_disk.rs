//! The segment log on a real filesystem smaller than one segment: a 40 MiB tmpfs mounted in a
//! private mount namespace (`unshare`, as root or through a user namespace), so nothing is
//! mounted on the host and the mount goes away with the test process.
//!
//! The test re-runs this test binary inside the namespace, where the ignored `inside_*` tests
//! do the work on the tmpfs named by `STORWATCH_SMALL_FS`.

#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::process::Command;

use storwatch_wire::log::{CursorId, Layout, Log, LogError, LogOptions, Position};

const SMALL_FS: &str = "STORWATCH_SMALL_FS";
const MIB: usize = 1 << 20;

/// Runs the ignored test `test` of this binary with a fresh tmpfs of `size` mounted at a
/// directory named in `STORWATCH_SMALL_FS`. When namespaces are not available here it fails,
/// or, when `STORWATCH_ALLOW_SKIP` names `mount-namespace`, says SKIPPED and returns false.
fn in_small_fs(test: &str, size: &str) -> bool {
    let dir = tempfile::tempdir().unwrap();
    let exe = std::env::current_exe().unwrap();
    // the test's name in this binary: its module path less the crate's name
    let test = match module_path!().split_once("::") {
        Some((_, module)) => format!("{module}::{test}"),
        None => test.to_string(),
    };
    let root = std::fs::read_to_string("/proc/self/status")
        .unwrap()
        .lines()
        .any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(2) == Some("0"));
    let mut cmd = Command::new("unshare");
    if !root {
        cmd.args(["--user", "--map-root-user"]);
    }
    let script = r#"mount -t tmpfs -o "size=$1" storwatch-test "$2" || exit 97
exec "$3" --exact "$4" --ignored --nocapture --test-threads=1"#;
    let out = cmd
        .args([
            "--mount",
            "--propagation",
            "private",
            "sh",
            "-c",
            script,
            "sh",
            size,
        ])
        .arg(dir.path())
        .arg(&exe)
        .arg(&test)
        .env(SMALL_FS, dir.path())
        .output()
        .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    if !out.status.success() && (stderr.contains("unshare failed") || out.status.code() == Some(97))
    {
        storwatch_test_support::skip_or_fail(
            "mount-namespace",
            &format!("{test}: cannot mount a tmpfs in a private namespace here: {stderr}"),
        );
        return false;
    }
    assert!(out.status.success(), "{test} failed:\n{stdout}\n{stderr}");
    assert!(
        stdout.contains("1 passed"),
        "{test} did not run:\n{stdout}\n{stderr}"
    );
    println!("{stdout}");
    true
}

#[test]
fn full_disk_is_its_own_error_and_delivered_space_comes_back() {
    in_small_fs("inside_a_40_mib_tmpfs", "40m");
}

fn options(reclaim_bytes: u64) -> LogOptions {
    LogOptions {
        segment_bytes: 64 << 20, // larger than the filesystem
        max_record_bytes: 4 << 20,
        max_bytes: None,
        sync: true,
        sync_cursors: true,
        reclaim_bytes,
        count: None,
    }
}

fn record(i: usize, len: usize) -> Vec<u8> {
    let mut r = format!("record {i:06}\n").into_bytes();
    r.resize(len, b'a' + (i % 26) as u8);
    r
}

/// Appends `len`-byte records until the filesystem is full; returns how many went in.
fn fill(log: &Log, from: usize, len: usize) -> usize {
    for i in from.. {
        let before = log.end();
        match log.append(&record(i, len)) {
            Ok(_) => {}
            Err(e) => {
                assert!(e.is_out_of_space(), "{e}");
                assert!(matches!(e, LogError::OutOfSpace { .. }));
                assert_eq!(log.end(), before, "a failed append moves nothing");
                return i - from;
            }
        }
    }
    unreachable!()
}

/// Reads everything after the cursor, checks it is records `first..` of the given lengths in
/// order, and acknowledges it. Returns how many there were.
fn deliver(log: &Log, c: CursorId, mut next: usize) -> usize {
    let (mut out, mut ends) = (Vec::new(), Vec::new());
    let start = next;
    while let Some(b) = log
        .read(log.position(c), 8 * MIB, usize::MAX, &mut out, &mut ends)
        .unwrap()
    {
        let mut from = 0;
        for &e in &ends {
            let want = format!("record {next:06}\n");
            assert!(out[from..e].starts_with(want.as_bytes()), "record {next}");
            next += 1;
            from = e;
        }
        match log.ack(c, &b) {
            Ok(()) => {}
            // the cursor file did not fit: the cursor still moved, space is still freed
            Err(e) if e.is_out_of_space() => {}
            Err(e) => panic!("{e}"),
        }
    }
    next - start
}

fn segment_bytes(dir: &Path) -> u64 {
    std::fs::read_dir(dir.join("segments"))
        .unwrap()
        .map(|e| e.unwrap().metadata().unwrap().len())
        .sum()
}

#[test]
#[ignore = "needs the tmpfs that full_disk_is_its_own_error_and_delivered_space_comes_back mounts"]
fn inside_a_40_mib_tmpfs() {
    let Ok(fs) = std::env::var(SMALL_FS) else {
        eprintln!(
            "not inside the tmpfs: run full_disk_is_its_own_error_and_delivered_space_comes_back"
        );
        return;
    };
    let fs = Path::new(&fs);

    // 1. Full: its own error, nothing half-written, the log consistent across a reopen.
    let dir = fs.join("one");
    let (log, _) = Log::open(Layout::split(&dir), options(8 << 20)).unwrap();
    let c = log.cursor("out").unwrap();
    let n = fill(&log, 0, MIB);
    assert!((30..40).contains(&n), "{n} MiB records fit in 40 MiB");
    let end = log.end();
    assert_eq!(
        segment_bytes(&dir),
        end.offset,
        "no half record left in the file"
    );
    // smaller records still fit in what is left, right after the last whole record
    let small = fill(&log, n, 4096);
    assert!(small > 0);
    assert!(fill(&log, n + small, 4096) == 0);
    drop(log);
    let (log, rec) = Log::open(Layout::split(&dir), options(8 << 20)).unwrap();
    assert_eq!((rec.torn_bytes, rec.corrupt_records), (0, 0), "{rec:?}");
    let c = {
        let c2 = log.cursor("out").unwrap();
        assert_eq!(c, c2);
        c2
    };
    // nothing delivered: still full, still consistent
    assert_eq!(fill(&log, n + small, MIB), 0);
    // 2. Everything delivered: the segment is replaced and the space is back.
    assert_eq!(deliver(&log, c, 0), n + small);
    assert!(segment_bytes(&dir) < MIB as u64, "{}", segment_bytes(&dir));
    let kept = segment_bytes(&dir);
    let again = fill(&log, 0, MIB);
    assert!(again >= 30, "{again}");
    println!(
        "40 MiB tmpfs, 64 MiB segments: {n} records of 1 MiB and {small} of 4 KiB in, then \
         out of space; delivered: {kept} bytes of segments left, {again} records of 1 MiB in again"
    );
    assert_eq!(log.stats().corrupt_records, 0);
    assert_eq!(deliver(&log, c, 0), again);
    drop(log);
    std::fs::remove_dir_all(&dir).unwrap();

    // 3. Full and delivered before a restart, nothing reclaimed then (reclaiming off): the
    //    first append after the restart finds no space, gives up the delivered segment and
    //    goes in.
    let dir = fs.join("two");
    let (log, _) = Log::open(Layout::split(&dir), options(u64::MAX)).unwrap();
    let c = log.cursor("out").unwrap();
    let n = fill(&log, 0, MIB);
    assert_eq!(deliver(&log, c, 0), n);
    assert!(
        segment_bytes(&dir) > 30 * MIB as u64,
        "kept: reclaiming is off"
    );
    drop(log);
    let (log, _) = Log::open(Layout::split(&dir), options(u64::MAX)).unwrap();
    let c = log.cursor("out").unwrap();
    let before = log.end();
    let a = log.append(&record(0, MIB)).unwrap();
    assert!(
        a.start.segment > before.segment,
        "a new segment: {a:?} after {before:?}"
    );
    assert!(segment_bytes(&dir) < 2 * MIB as u64);
    assert_eq!(deliver(&log, c, 0), 1);
    drop(log);
    std::fs::remove_dir_all(&dir).unwrap();

    // 4. Full to the last page, so that even the cursor file does not fit when the reader
    //    acknowledges: the data counts as delivered in memory, the space is freed, and after a
    //    restart at worst the undelivered-on-disk part comes again, never less.
    let dir = fs.join("three");
    let (log, _) = Log::open(Layout::split(&dir), options(1 << 20)).unwrap();
    let c = log.cursor("out").unwrap();
    let n = fill(&log, 0, MIB);
    let n = n + fill(&log, n, 4096);
    let n = n + fill(&log, n, 100);
    assert_eq!(deliver(&log, c, 0), n);
    assert!(fill(&log, n, MIB) >= 30);
    drop(log);
    let (log, _) = Log::open(Layout::split(&dir), options(1 << 20)).unwrap();
    let c = log.cursor("out").unwrap();
    let p = log.position(c);
    assert!(p <= log.end() && p >= Position::ZERO);
    let redelivered = deliver(&log, c, n);
    assert!(redelivered >= 30, "{redelivered}");
}
