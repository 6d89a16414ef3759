//! The log's mechanism: framing, recovery, cursors, release, the bound, reclaiming, the older
//! formats built byte by byte. Policies are tested with their users (agent spool, collector
//! queue); a real full filesystem in `wire/tests/it/full_disk.rs`.

#![allow(clippy::unwrap_used)]

use std::fs::{self, OpenOptions};
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use proptest::prelude::*;

use super::record::{tagged_header, LEGACY_SPOOL_MAGIC};
use super::*;

fn lines(payload: &[u8]) -> u64 {
    payload.iter().filter(|&&b| b == b'\n').count() as u64
}

fn opts() -> LogOptions {
    LogOptions {
        segment_bytes: 1 << 20,
        max_record_bytes: 1 << 20,
        max_bytes: None,
        sync: true,
        sync_cursors: true,
        reclaim_bytes: u64::MAX,
        count: Some(lines),
    }
}

fn open(dir: &Path, opts: LogOptions) -> (Log, Recovery, CursorId) {
    let (log, rec) = Log::open(Layout::flat(dir), opts).unwrap();
    let c = log.cursor("out").unwrap();
    (log, rec, c)
}

fn batch(i: usize, n: usize) -> Vec<u8> {
    (0..n)
        .flat_map(|l| format!("m,host=h{l} v={i}i {}\n", 1_000 + i).into_bytes())
        .collect()
}

/// Reads and acknowledges until nothing is left; every payload, in order.
fn drain(log: &Log, c: CursorId, max_bytes: usize) -> Vec<u8> {
    let (mut all, mut out, mut ends) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..100_000 {
        match log
            .read(log.position(c), max_bytes, usize::MAX, &mut out, &mut ends)
            .unwrap()
        {
            Some(b) => {
                all.extend_from_slice(&out);
                log.ack(c, &b).unwrap();
            }
            None => return all,
        }
    }
    panic!("drain did not end");
}

fn segment_files(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "seg"))
        .collect();
    v.sort();
    v
}

fn tagged(p: &[u8]) -> Vec<u8> {
    [tagged_header(p).as_slice(), p].concat()
}

fn plain(p: &[u8]) -> Vec<u8> {
    let mut v = (p.len() as u32).to_le_bytes().to_vec();
    v.extend_from_slice(&crc32fast::hash(p).to_le_bytes());
    v.extend_from_slice(p);
    v
}

#[test]
fn round_trip_reopen_and_pending() {
    let dir = tempfile::tempdir().unwrap();
    let (log, rec, c) = open(dir.path(), opts());
    assert_eq!(rec, Recovery::default());
    let mut want = Vec::new();
    for i in 0..3 {
        log.append(&batch(i, 2)).unwrap();
        want.extend_from_slice(&batch(i, 2));
    }
    let p = log.pending(c);
    assert_eq!(
        (p.bytes, p.items),
        (want.len() as u64 + 3 * RECORD_HEADER_BYTES, 6)
    );
    let (mut out, mut ends) = (Vec::new(), Vec::new());
    let b = log
        .read(log.position(c), 1 << 20, usize::MAX, &mut out, &mut ends)
        .unwrap()
        .unwrap();
    assert_eq!(out, want);
    assert_eq!((b.records, b.items, b.bytes), (3, 6, want.len()));
    let n = batch(0, 2).len();
    assert_eq!(ends, [n, 2 * n, 3 * n]);
    // not acknowledged: a reopen delivers everything again
    drop(log);
    let (log, _, c) = open(dir.path(), opts());
    assert_eq!(drain(&log, c, 1 << 20), want);
    assert_eq!(log.pending(c), Pending::default());
    drop(log);
    let (log, _, c) = open(dir.path(), opts());
    assert_eq!(log.pending(c), Pending::default());
    assert_eq!(drain(&log, c, 1 << 20), b"");
}

#[test]
fn read_respects_byte_and_record_limits() {
    let dir = tempfile::tempdir().unwrap();
    let (log, _, c) = open(dir.path(), opts());
    let one = batch(0, 10);
    for _ in 0..5 {
        log.append(&one).unwrap();
    }
    let (mut out, mut ends) = (Vec::new(), Vec::new());
    let at = log.position(c);
    // a record larger than the limit still comes alone
    let b = log
        .read(at, 1, usize::MAX, &mut out, &mut ends)
        .unwrap()
        .unwrap();
    assert_eq!((b.records, out.len()), (1, one.len()));
    let b = log
        .read(at, 2 * one.len() + 1, usize::MAX, &mut out, &mut ends)
        .unwrap()
        .unwrap();
    assert_eq!(b.records, 2);
    let b = log
        .read(at, 1 << 20, 3, &mut out, &mut ends)
        .unwrap()
        .unwrap();
    assert_eq!((b.records, b.items), (3, 30));
}

#[test]
fn batches_share_one_write_and_report_their_positions() {
    let dir = tempfile::tempdir().unwrap();
    let (log, _, c) = open(dir.path(), opts());
    let payloads = [batch(0, 1), Vec::new(), batch(1, 3)];
    let a = log.append_batch(&payloads).unwrap();
    assert_eq!(
        a.start,
        Position {
            segment: 0,
            offset: SEGMENT_HEADER_BYTES
        }
    );
    let written = 2 * RECORD_HEADER_BYTES + (payloads[0].len() + payloads[2].len()) as u64;
    assert_eq!(a.end.byte() - a.start.byte(), written);
    assert_eq!(log.end(), a.end);
    assert_eq!(drain(&log, c, 1 << 20), [batch(0, 1), batch(1, 3)].concat());
    let too_big = vec![b'x'; (1 << 20) + 1];
    let err = log
        .append_batch(&[b"fine\n".as_slice(), &too_big])
        .unwrap_err();
    assert!(matches!(err, LogError::TooLarge { .. }), "{err}");
    assert_eq!(log.end(), a.end, "nothing of a refused batch is written");
}

#[test]
fn torn_tail_is_truncated_and_appends_continue() {
    let dir = tempfile::tempdir().unwrap();
    let (log, _, _) = open(dir.path(), opts());
    log.append(&batch(0, 1)).unwrap();
    log.append(&batch(1, 1)).unwrap();
    drop(log);
    let seg = segment_files(dir.path()).pop().unwrap();
    let good_len = fs::metadata(&seg).unwrap().len();
    // a crash in the middle of the third record: header and part of the payload
    let mut f = OpenOptions::new().append(true).open(&seg).unwrap();
    f.write_all(&tagged(&batch(2, 1))[..25]).unwrap();
    drop(f);
    let (log, rec, c) = open(dir.path(), opts());
    assert_eq!((rec.torn_bytes, rec.corrupt_records), (25, 0));
    assert_eq!(log.stats().torn_bytes, 25);
    assert_eq!(fs::metadata(&seg).unwrap().len(), good_len);
    assert_eq!(log.pending(c).items, 2);
    log.append(&batch(2, 1)).unwrap();
    drop(log);
    let (log, rec, c) = open(dir.path(), opts());
    assert_eq!(rec, Recovery::default());
    assert_eq!(
        drain(&log, c, 1 << 20),
        [batch(0, 1), batch(1, 1), batch(2, 1)].concat()
    );
}

#[test]
fn torn_segment_header_is_rewritten() {
    let dir = tempfile::tempdir().unwrap();
    drop(open(dir.path(), opts()));
    let seg = segment_files(dir.path()).pop().unwrap();
    fs::write(&seg, b"SWL").unwrap();
    let (log, rec, c) = open(dir.path(), opts());
    assert_eq!(rec.torn_bytes, 3);
    log.append(&batch(0, 1)).unwrap();
    drop(log);
    let (log, _, _) = open(dir.path(), opts());
    let c2 = log.cursor("out").unwrap();
    assert_eq!(c, c2);
    assert_eq!(drain(&log, c2, 1 << 20), batch(0, 1));
}

/// Flips one byte `at` bytes into the `n`th record of the newest segment.
fn flip_in_record(dir: &Path, n: usize, at: u64) {
    let seg = segment_files(dir).pop().unwrap();
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .open(&seg)
        .unwrap();
    let len = file.metadata().unwrap().len();
    let mut r = record::Reader::new(&file, record::Framing::Tagged, len, 1 << 20);
    let mut off = SEGMENT_HEADER_BYTES;
    for _ in 0..n {
        off = r.record(off, &mut Vec::new()).unwrap().unwrap();
    }
    let mut b = [0u8; 1];
    file.read_exact_at(&mut b, off + at).unwrap();
    file.write_all_at(&[b[0] ^ 0x40], off + at).unwrap();
}

#[test]
fn damage_in_the_middle_is_skipped_and_counted_once() {
    // payload, CRC, length and magic damage all end the same way
    for at in [RECORD_HEADER_BYTES + 5, 9, 5, 1] {
        let dir = tempfile::tempdir().unwrap();
        let (log, _, _) = open(dir.path(), opts());
        for i in 0..3 {
            log.append(&batch(i, 4)).unwrap();
        }
        drop(log);
        flip_in_record(dir.path(), 1, at);
        let (log, rec, c) = open(dir.path(), opts());
        assert_eq!(
            (rec.corrupt_records, rec.torn_bytes),
            (1, 0),
            "flip at {at}"
        );
        let st = log.stats();
        assert_eq!(
            st.corrupt_bytes,
            batch(1, 4).len() as u64 + RECORD_HEADER_BYTES
        );
        assert_eq!(st.corrupt_items, 4);
        assert_eq!(log.pending(c).items, 8);
        // a second reader passes the same damage: still counted once
        let other = log.cursor("other").unwrap();
        let want = [batch(0, 4), batch(2, 4)].concat();
        assert_eq!(drain(&log, c, 1 << 20), want, "flip at {at}");
        assert_eq!(drain(&log, other, 1), want, "flip at {at}");
        assert_eq!(log.stats().corrupt_records, 1);
    }
}

#[test]
fn damage_found_by_readers_of_unscanned_segments_is_counted_once() {
    // without item counts only the newest segment is read at open
    let o = LogOptions {
        count: None,
        segment_bytes: 256,
        ..opts()
    };
    let dir = tempfile::tempdir().unwrap();
    let (log, _, _) = open(dir.path(), o.clone());
    for i in 0..12 {
        log.append(&batch(i, 2)).unwrap();
    }
    drop(log);
    let files = segment_files(dir.path());
    assert!(files.len() > 2);
    // damage the second record of the oldest segment
    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .open(&files[0])
        .unwrap();
    let at = SEGMENT_HEADER_BYTES + RECORD_HEADER_BYTES + batch(0, 2).len() as u64 + 20;
    f.write_all_at(b"#", at).unwrap();
    let (log, rec, a) = open(dir.path(), o);
    assert_eq!(rec.corrupt_records, 0);
    let b = log.cursor("b").unwrap();
    let got = drain(&log, a, 100);
    assert_eq!(drain(&log, b, 1 << 20), got);
    let want: Vec<u8> = (0..12)
        .filter(|&i| i != 1)
        .flat_map(|i| batch(i, 2))
        .collect();
    assert_eq!(got, want);
    assert_eq!(log.stats().corrupt_records, 1);
}

#[test]
fn damaged_last_record_of_the_newest_segment_is_a_torn_tail() {
    let dir = tempfile::tempdir().unwrap();
    let (log, _, _) = open(dir.path(), opts());
    log.append(&batch(0, 2)).unwrap();
    log.append(&batch(1, 2)).unwrap();
    drop(log);
    flip_in_record(dir.path(), 1, RECORD_HEADER_BYTES + 3);
    let (log, rec, c) = open(dir.path(), opts());
    assert_eq!(
        rec.torn_bytes,
        batch(1, 2).len() as u64 + RECORD_HEADER_BYTES
    );
    assert_eq!(rec.corrupt_records, 0);
    assert_eq!(drain(&log, c, 1 << 20), batch(0, 2));
}

#[test]
fn reopen_resumes_after_the_last_ack_across_segments() {
    let dir = tempfile::tempdir().unwrap();
    let o = LogOptions {
        segment_bytes: 16 << 10,
        ..opts()
    };
    let (log, _, c) = open(dir.path(), o.clone());
    let batches: Vec<Vec<u8>> = (0..300).map(|i| batch(i, 10)).collect();
    for b in &batches {
        log.append(b).unwrap();
    }
    assert!(log.stats().segments > 2);
    let (mut out, mut ends, mut delivered) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..2 {
        let b = log
            .read(log.position(c), 50_000, usize::MAX, &mut out, &mut ends)
            .unwrap()
            .unwrap();
        delivered.extend_from_slice(&out);
        log.ack(c, &b).unwrap();
    }
    let pending = log.pending(c);
    // the process dies here
    drop(log);
    let (log, _, c) = open(dir.path(), o.clone());
    assert_eq!(log.pending(c), pending);
    delivered.extend(drain(&log, c, 100_000));
    assert_eq!(delivered, batches.concat());
    // delivered segments are gone
    assert_eq!(segment_files(dir.path()).len(), 1);
    // a lost cursor file sends everything kept again, never less
    log.append(&batch(999, 1)).unwrap();
    drop(log);
    fs::remove_file(dir.path().join("out.pos")).unwrap();
    let (log, _, c) = open(dir.path(), o);
    assert!(log.pending(c).items >= 1);
    assert!(drain(&log, c, 1 << 20).ends_with(&batch(999, 1)));
}

#[test]
fn damaged_cursor_file_resends_rather_than_skips() {
    let dir = tempfile::tempdir().unwrap();
    let (log, _, c) = open(dir.path(), opts());
    log.append(&batch(0, 1)).unwrap();
    log.append(&batch(1, 1)).unwrap();
    let (mut out, mut ends) = (Vec::new(), Vec::new());
    let b = log
        .read(log.position(c), 1, 1, &mut out, &mut ends)
        .unwrap()
        .unwrap();
    log.ack(c, &b).unwrap();
    drop(log);
    fs::write(dir.path().join("out.pos"), b"garbage").unwrap();
    let (log, _, c) = open(dir.path(), opts());
    assert_eq!(drain(&log, c, 1 << 20), [batch(0, 1), batch(1, 1)].concat());
}

#[test]
fn segments_roll_and_release_waits_for_every_registered_cursor() {
    let dir = tempfile::tempdir().unwrap();
    let o = LogOptions {
        segment_bytes: 128,
        count: None,
        ..opts()
    };
    let (log, _) = Log::open(Layout::split(dir.path()), o.clone()).unwrap();
    let (fast, slow) = (log.cursor("fast").unwrap(), log.cursor("slow").unwrap());
    let mut ends = Vec::new();
    for i in 0..20 {
        ends.push(log.append(format!("m v={i} {i}\n").as_bytes()).unwrap().end);
    }
    let segs = log.stats().segments;
    assert!(segs > 3);
    // segments are named by the byte where they start
    let files = segment_files(&dir.path().join("segments"));
    for w in files.windows(2) {
        let name = |p: &Path| -> u64 { p.file_stem().unwrap().to_str().unwrap().parse().unwrap() };
        assert_eq!(
            name(&w[0]) + fs::metadata(&w[0]).unwrap().len(),
            name(&w[1])
        );
    }
    for e in &ends {
        let at = log.locate(e.byte());
        assert!(
            at == *e || (at.offset == 0 && at.byte() == e.byte()),
            "{e:?} {at:?}"
        );
    }
    log.seek(fast, ends[15]).unwrap();
    assert_eq!(
        log.stats().segments,
        segs,
        "the slow reader holds everything"
    );
    log.seek(slow, ends[9]).unwrap();
    let kept = log.stats().segments;
    assert!(kept < segs);
    assert!(log.first() <= ends[9] && log.first().byte() > 0);
    // a limit holds back what is past it
    let (log2, _) = {
        drop(log);
        Log::open(Layout::split(dir.path()), o).unwrap()
    };
    let (f2, s2) = (log2.cursor("fast").unwrap(), log2.cursor("slow").unwrap());
    assert_eq!((log2.position(f2), log2.position(s2)), (ends[15], ends[9]));
    let (mut out, mut e) = (Vec::new(), Vec::new());
    let b = log2
        .read(ends[9], 1 << 20, usize::MAX, &mut out, &mut e)
        .unwrap()
        .unwrap();
    assert_eq!(b.records, 10);
    log2.seek(s2, *ends.last().unwrap()).unwrap();
    log2.seek(f2, *ends.last().unwrap()).unwrap();
    assert_eq!(log2.stats().segments, 1, "only the newest segment is kept");
}

#[test]
fn a_delivered_newest_segment_is_replaced_once_large_enough() {
    let dir = tempfile::tempdir().unwrap();
    let o = LogOptions {
        reclaim_bytes: 64 << 10,
        ..opts()
    };
    let (log, _, c) = open(dir.path(), o.clone());
    let b = batch(0, 1000); // ~22 KB
    for _ in 0..30 {
        log.append(&b).unwrap();
        drain(&log, c, 1 << 20);
        let files = segment_files(dir.path());
        assert_eq!(files.len(), 1);
        assert!(fs::metadata(&files[0]).unwrap().len() < 64 << 10);
    }
    assert!(log.end().segment > 0, "segments were replaced");
    drop(log);
    let (log, _, c) = open(dir.path(), o);
    assert_eq!(log.pending(c), Pending::default());
}

#[test]
fn the_bound_evicts_the_oldest_segments_and_says_what_was_lost() {
    let dir = tempfile::tempdir().unwrap();
    let max = 16 << 10;
    let o = LogOptions {
        max_bytes: Some(max),
        segment_bytes: 4 << 10,
        ..opts()
    };
    let (log, _, c) = open(dir.path(), o);
    let (mut total, mut lost) = (0, 0);
    for i in 0..200 {
        let b = batch(i, 20);
        total += lines(&b);
        let a = log.append(&b).unwrap();
        lost += a.evicted.items;
        assert!(log.stats().file_bytes <= max, "bound kept after batch {i}");
    }
    let st = log.stats();
    assert!(lost > 0);
    assert_eq!(st.evicted.items, lost);
    assert_eq!(lost + log.pending(c).items, total);
    // what survives is the newest data, contiguous up to the last batch
    let got = String::from_utf8(drain(&log, c, 1 << 20)).unwrap();
    let first: usize = got
        .lines()
        .next()
        .and_then(|l| l.split(" v=").nth(1))
        .and_then(|v| v.split('i').next())
        .unwrap()
        .parse()
        .unwrap();
    let want: Vec<u8> = (first..200).flat_map(|i| batch(i, 20)).collect();
    assert_eq!(got.as_bytes(), want.as_slice());
}

#[test]
fn cursor_past_the_end_starts_again_and_new_data_is_numbered_past_it() {
    let dir = tempfile::tempdir().unwrap();
    let (log, _, c) = open(dir.path(), opts());
    log.append(&batch(0, 1)).unwrap();
    let end = log.end();
    log.seek(c, end).unwrap();
    drop(log);
    // the data the cursor had passed is gone (a restore from an older copy, say)
    let seg = segment_files(dir.path()).pop().unwrap();
    fs::write(&seg, LEGACY_SPOOL_MAGIC).unwrap();
    let (log, rec, c) = open(dir.path(), opts());
    assert_eq!(rec.reset_cursors, 1);
    assert!(log.end().segment >= end.byte());
    log.append(&batch(1, 1)).unwrap();
    assert_eq!(drain(&log, c, 1 << 20), batch(1, 1));
}

#[test]
fn a_log_without_segments_numbers_its_first_past_the_cursors() {
    let dir = tempfile::tempdir().unwrap();
    let (log, _, c) = open(dir.path(), opts());
    log.append(&batch(0, 1)).unwrap();
    log.seek(c, log.end()).unwrap();
    let end = log.end();
    drop(log);
    for f in segment_files(dir.path()) {
        fs::remove_file(f).unwrap();
    }
    let (log, rec, c) = open(dir.path(), opts());
    assert_eq!(rec.reset_cursors, 0);
    assert_eq!(log.end().segment, end.byte());
    log.append(&batch(1, 1)).unwrap();
    assert_eq!(drain(&log, c, 1 << 20), batch(1, 1));
}

#[test]
fn reads_run_beside_appends() {
    let dir = tempfile::tempdir().unwrap();
    let o = LogOptions {
        segment_bytes: 8 << 10,
        count: None,
        ..opts()
    };
    let (log, _, c) = open(dir.path(), o);
    let n = 400;
    std::thread::scope(|s| {
        s.spawn(|| {
            for i in 0..n {
                log.append_batch(&[batch(i, 1), batch(i, 2)]).unwrap();
            }
        });
        let (mut got, mut out, mut ends) = (0, Vec::new(), Vec::new());
        while got < 2 * n {
            if let Some(b) = log
                .read(log.position(c), 4096, usize::MAX, &mut out, &mut ends)
                .unwrap()
            {
                got += b.records;
                log.ack(c, &b).unwrap();
            }
        }
    });
    assert_eq!(log.stats().corrupt_records, 0);
    assert_eq!(log.pending(c), Pending::default());
}

/// A collector queue directory as the code before the shared log wrote it: segments of plain
/// records named by byte position, 12-byte cursors. Returns the payloads in order.
fn old_queue(dir: &Path, per_segment: usize, segments: usize) -> Vec<Vec<u8>> {
    fs::create_dir_all(dir.join("segments")).unwrap();
    fs::create_dir_all(dir.join("cursors")).unwrap();
    let mut start = 0u64;
    let mut all = Vec::new();
    for s in 0..segments {
        let mut bytes = Vec::new();
        for r in 0..per_segment {
            let p = batch(s * 100 + r, 2);
            bytes.extend(plain(&p));
            all.push(p);
        }
        fs::write(dir.join(format!("segments/{start:020}.seg")), &bytes).unwrap();
        start += bytes.len() as u64;
    }
    all
}

fn old_queue_cursor(dir: &Path, name: &str, byte: u64) {
    let mut b = byte.to_le_bytes().to_vec();
    b.extend_from_slice(&crc32fast::hash(&b).to_le_bytes());
    fs::write(dir.join(format!("cursors/{name}.pos")), b).unwrap();
}

#[test]
fn the_old_queue_format_is_delivered_once_with_its_damage() {
    let dir = tempfile::tempdir().unwrap();
    let payloads = old_queue(dir.path(), 5, 3);
    let rec_len = |i: usize| plain(&payloads[i]).len() as u64;
    // output "a" delivered two records, "b" none (no cursor file yet)
    old_queue_cursor(dir.path(), "a", rec_len(0) + rec_len(1));
    // a flipped byte in the 8th record (second segment), half a record at the end
    let second = dir.path().join(format!(
        "segments/{:020}.seg",
        (0..5).map(rec_len).sum::<u64>()
    ));
    let mut bytes = fs::read(&second).unwrap();
    let at = (rec_len(5) + rec_len(6)) as usize + 20;
    bytes[at] ^= 0x20;
    fs::write(&second, bytes).unwrap();
    let files = segment_files(&dir.path().join("segments"));
    let newest = files.last().unwrap();
    let mut f = OpenOptions::new().append(true).open(newest).unwrap();
    f.write_all(&plain(b"cut short\n")[..9]).unwrap();
    drop(f);

    let o = LogOptions {
        count: None,
        ..opts()
    };
    let (log, rec) = Log::open(Layout::split(dir.path()), o.clone()).unwrap();
    assert_eq!(
        (rec.torn_bytes, rec.legacy_segments, rec.converted_cursors),
        (9, 3, 1)
    );
    let (a, b) = (log.cursor("a").unwrap(), log.cursor("b").unwrap());
    // new data goes into a new segment of the current format, after the old ones
    let old_end: u64 = (0..15).map(rec_len).sum();
    let appended = log.append(b"new v=1i 1\n").unwrap();
    assert_eq!(
        appended.start,
        Position {
            segment: old_end,
            offset: SEGMENT_HEADER_BYTES
        }
    );
    let mut want: Vec<u8> = payloads
        .iter()
        .enumerate()
        .filter(|&(i, _)| i != 7)
        .flat_map(|(_, p)| p.clone())
        .collect();
    want.extend_from_slice(b"new v=1i 1\n");
    assert_eq!(drain(&log, b, 1 << 20), want);
    let skip = payloads[0].len() + payloads[1].len();
    assert_eq!(drain(&log, a, 333), want[skip..]);
    assert_eq!(log.stats().corrupt_records, 1);
    // delivered: the old segments are released, the cursors rewritten in the current format
    assert_eq!(segment_files(&dir.path().join("segments")).len(), 1);
    assert_eq!(
        fs::read(dir.path().join("cursors/a.pos")).unwrap().len(),
        20
    );
    drop(log);
    let (log, rec) = Log::open(Layout::split(dir.path()), o).unwrap();
    assert_eq!(rec, Recovery::default());
    let a = log.cursor("a").unwrap();
    assert_eq!(drain(&log, a, 1 << 20), b"");
}

#[test]
fn an_empty_old_queue_segment_becomes_a_current_one() {
    let dir = tempfile::tempdir().unwrap();
    fs::create_dir_all(dir.path().join("segments")).unwrap();
    fs::write(dir.path().join("segments/00000000000000000000.seg"), b"").unwrap();
    let o = LogOptions {
        count: None,
        ..opts()
    };
    let (log, rec) = Log::open(Layout::split(dir.path()), o).unwrap();
    assert_eq!(rec, Recovery::default());
    let c = log.cursor("x").unwrap();
    log.append(b"a\n").unwrap();
    assert_eq!(drain(&log, c, 100), b"a\n");
    let head = fs::read(dir.path().join("segments/00000000000000000000.seg")).unwrap();
    assert_eq!(&head[..8], SEGMENT_MAGIC);
    // nothing but garbage in the only segment, no header: all of it is a torn tail
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("00000000000000000007.seg"), [0xa5u8; 100]).unwrap();
    let (log, rec, c) = open(dir.path(), opts());
    assert_eq!((rec.torn_bytes, rec.legacy_segments), (100, 0));
    log.append(b"b\n").unwrap();
    assert_eq!(drain(&log, c, 100), b"b\n");
    assert_eq!(log.end().segment, 7);
}

#[test]
fn the_old_spool_format_is_read_as_it_is() {
    let dir = tempfile::tempdir().unwrap();
    // segments numbered 1, 2, 3 with the old magic; the cursor after the first record of 2
    let mut all = Vec::new();
    for id in 1..=3u64 {
        let mut bytes = LEGACY_SPOOL_MAGIC.to_vec();
        for r in 0..3 {
            let p = batch((id * 10 + r) as usize, 3);
            bytes.extend(tagged(&p));
            all.push(p);
        }
        fs::write(dir.path().join(format!("{id:020}.seg")), bytes).unwrap();
    }
    let cursor = Position {
        segment: 2,
        offset: SEGMENT_HEADER_BYTES + tagged(&all[3]).len() as u64,
    };
    fs::write(dir.path().join("out.pos"), cursor::encode(cursor)).unwrap();
    let (log, rec, c) = open(dir.path(), opts());
    assert_eq!(rec, Recovery::default());
    assert_eq!(log.position(c), cursor);
    assert_eq!(log.pending(c).items, 5 * 3);
    // appends continue in the newest old segment: its framing is the current one
    log.append(&batch(99, 1)).unwrap();
    assert_eq!(log.stats().segments, 3);
    let want = [all[4..].concat(), batch(99, 1)].concat();
    assert_eq!(drain(&log, c, 1 << 20), want);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    /// Whatever a segment holds, opening and draining neither panics nor loops, and the log
    /// takes appends afterwards.
    #[test]
    fn any_segment_content_opens_and_drains(
        body in proptest::collection::vec(any::<u8>(), 0..2048),
        with_magic in any::<bool>(),
        with_record in any::<bool>(),
        split in any::<bool>(),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let layout = if split { Layout::split(dir.path()) } else { Layout::flat(dir.path()) };
        let o = if split { LogOptions { count: None, ..opts() } } else { opts() };
        fs::create_dir_all(&layout.segments).unwrap();
        if with_record {
            let (log, _) = Log::open(layout.clone(), o.clone()).unwrap();
            log.append(b"ok v=1i 1\n").unwrap();
            drop(log);
            let seg = segment_files(&layout.segments).pop().unwrap();
            let mut f = OpenOptions::new().append(true).open(seg).unwrap();
            f.write_all(&body).unwrap();
        } else {
            let mut content = Vec::new();
            if with_magic {
                content.extend_from_slice(SEGMENT_MAGIC);
            }
            content.extend_from_slice(&body);
            fs::write(layout.segments.join("00000000000000000007.seg"), &content).unwrap();
        }
        let (log, _) = Log::open(layout, o).unwrap();
        let c = log.cursor("out").unwrap();
        let got = drain(&log, c, 4096);
        if with_record {
            prop_assert!(got.starts_with(b"ok v=1i 1\n"));
        }
        log.append(b"after v=1i 2\n").unwrap();
        let got = drain(&log, c, 4096);
        prop_assert!(got.ends_with(b"after v=1i 2\n"));
    }
}
