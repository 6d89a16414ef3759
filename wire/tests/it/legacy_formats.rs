//! A collector queue written by the code before the shared log (fixtures in
//! `tests/fixtures/legacy`, see PROVENANCE.md there), opened by the log: every record is
//! delivered exactly once to each output, with a torn tail and a damaged record too. The agent's
//! spool fixture is opened by the agent's spool tests (it renames the cursor file first).

#![allow(clippy::unwrap_used)]

use std::fs;
use std::path::{Path, PathBuf};

use storwatch_wire::log::{CursorId, Layout, Log, LogOptions};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/legacy")
        .join(name)
}

fn copy_dir(from: &Path, to: &Path) {
    fs::create_dir_all(to).unwrap();
    for e in fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &to.join(e.file_name()));
        } else {
            fs::copy(e.path(), to.join(e.file_name())).unwrap();
        }
    }
}

/// The queue options of the collector.
fn queue_options() -> LogOptions {
    LogOptions {
        segment_bytes: 64 << 20,
        max_record_bytes: 64 << 20,
        max_bytes: None,
        sync: true,
        sync_cursors: true,
        reclaim_bytes: 8 << 20,
        count: None,
    }
}

/// The record numbers (`host=nodeNN`) a cursor receives until nothing is left.
fn delivered(log: &Log, c: CursorId) -> Vec<u32> {
    let (mut out, mut ends, mut got) = (Vec::new(), Vec::new(), Vec::new());
    while let Some(b) = log
        .read(log.position(c), 300, usize::MAX, &mut out, &mut ends)
        .unwrap()
    {
        let mut from = 0;
        for &e in &ends {
            let text = std::str::from_utf8(&out[from..e]).unwrap();
            assert_eq!(text.lines().count(), 2, "{text}");
            let n = text.split("host=node").nth(1).unwrap()[..2]
                .parse()
                .unwrap();
            got.push(n);
            from = e;
        }
        log.ack(c, &b).unwrap();
    }
    got
}

#[test]
fn an_old_collector_queue_is_delivered_exactly_once_per_output() {
    let dir = tempfile::tempdir().unwrap();
    copy_dir(&fixture("collector-queue"), dir.path());
    let (log, rec) = Log::open(Layout::split(dir.path()), queue_options()).unwrap();
    assert_eq!((rec.legacy_segments, rec.converted_cursors), (4, 2));
    assert_eq!((rec.torn_bytes, rec.corrupt_records), (0, 0));
    let (archive, influx) = (
        log.cursor("archive").unwrap(),
        log.cursor("influx").unwrap(),
    );
    // positions carry over: the cursors were byte 2042 and 3078
    assert_eq!(log.position(archive).byte(), 2042);
    assert_eq!(log.position(influx).byte(), 3078);
    assert_eq!(
        log.end().byte(),
        4410 + 8,
        "a new segment after the old ones"
    );
    log.append(b"disk,host=node30,device=sda v=1i 1\nnet,host=node30 v=1i 1\n")
        .unwrap();
    assert_eq!(delivered(&log, influx), (21..=30).collect::<Vec<_>>());
    assert_eq!(delivered(&log, archive), (14..=30).collect::<Vec<_>>());
    // every old segment was delivered and deleted; the cursors are in the current format
    assert_eq!(
        fs::read_dir(dir.path().join("segments")).unwrap().count(),
        1
    );
    assert_eq!(
        fs::read(dir.path().join("cursors/influx.pos"))
            .unwrap()
            .len(),
        20
    );
}

#[test]
fn an_old_collector_queue_with_a_torn_tail_and_a_damaged_record() {
    let dir = tempfile::tempdir().unwrap();
    copy_dir(&fixture("collector-queue"), dir.path());
    let segs = dir.path().join("segments");
    // record 17 is the third of the segment at 2190; its payload gets a flipped byte
    let path = segs.join("00000000000000002190.seg");
    let mut bytes = fs::read(&path).unwrap();
    let mut at = 0;
    for _ in 0..2 {
        let len = u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap()) as usize;
        at += 8 + len;
    }
    assert!(bytes[at + 8..].starts_with(b"disk,host=node17"));
    bytes[at + 8 + 30] ^= 0x08;
    fs::write(&path, bytes).unwrap();
    // and the newest segment ends in half a record, as a crash in the middle of a write leaves
    let newest = segs.join("00000000000000004262.seg");
    let mut bytes = fs::read(&newest).unwrap();
    bytes.extend_from_slice(&[140, 0, 0, 0, 1, 2, 3, 4, b'd', b'i', b's', b'k']);
    fs::write(&newest, bytes).unwrap();

    let (log, rec) = Log::open(Layout::split(dir.path()), queue_options()).unwrap();
    assert_eq!(rec.torn_bytes, 12);
    let (archive, influx) = (
        log.cursor("archive").unwrap(),
        log.cursor("influx").unwrap(),
    );
    let want: Vec<u32> = (14..30).filter(|&n| n != 17).collect();
    assert_eq!(delivered(&log, archive), want);
    assert_eq!(delivered(&log, influx), (21..30).collect::<Vec<_>>());
    let st = log.stats();
    assert_eq!(st.corrupt_records, 1, "counted once for two readers");
    assert!(!newest.exists(), "delivered by both outputs: released");
}
