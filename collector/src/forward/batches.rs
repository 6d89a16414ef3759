//! A read of the queue cut into batches ([`Chunk`]s): lines of one target, as ranges into the
//! text they were read in, at most `batch_lines` lines and `batch_bytes` bytes each.
//!
//! The read's payloads are one buffer ([`Read`]); it becomes the batches' text as it is,
//! without a copy: each record's target header (binary) is overwritten with spaces, after
//! which the buffer is UTF-8 wherever the ingest's lines are, and its lines are ranges of it.
//! A buffer that is not UTF-8 all the same, or whose records do not each begin and end between
//! characters (a record damaged in a way its CRC missed), is cut record by record, each one's
//! text on its own, invalid bytes replaced, as every read was before. (Each record was copied
//! out of the read into a buffer of its own, and moved down over its header: every byte of
//! every read written twice, into pages faulted in anew.)

use std::ops::Range;
use std::sync::Arc;

use super::{Chunk, Forwarder};
use crate::queue::Read;
use crate::target::Target;

/// One record of a read: its target, where its lines are in the read's buffer, whether it
/// starts before `resend_until`, its end in the queue.
struct Record {
    target: Target,
    lines: Range<usize>,
    resent: bool,
    end: u64,
}

impl Forwarder {
    /// The records of one read (made from `from`) as batches of at most `batch_lines` lines and
    /// `batch_bytes` bytes, each of one target (consecutive records of one target share
    /// batches), none holding lines from both sides of `resend_until`; and the read's text when
    /// the batches' lines are ranges of one.
    pub(super) fn chunks(
        &self,
        read: Read,
        from: u64,
        resend_until: u64,
        seq: u64,
    ) -> (Vec<Chunk>, Option<Arc<String>>) {
        let Read {
            mut buf,
            bounds,
            ends,
            ..
        } = read;
        let mut records = Vec::with_capacity(bounds.len());
        let (mut start, mut at) = (0, from);
        for (&bound, end) in bounds.iter().zip(ends) {
            let Some(rec) = buf.get_mut(start..bound) else {
                break;
            };
            let resent = at < resend_until;
            at = end;
            match Target::of_record(rec).map(|(t, lines)| (t, rec.len() - lines.len())) {
                Some((target, header)) => {
                    if let Some(h) = rec.get_mut(..header) {
                        h.fill(b' ');
                    }
                    records.push(Record {
                        target,
                        lines: start + header..bound,
                        resent,
                        end,
                    });
                }
                None => {
                    tracing::error!(output = %self.output.name, "queue record with a damaged target header skipped");
                    rec.fill(b' ');
                }
            }
            start = bound;
        }
        // the whole buffer as the text when it is UTF-8 and every record's lines start and end
        // between characters (each record was UTF-8 when the ingest took it)
        let whole = String::from_utf8(buf)
            .map_err(|e| e.into_bytes())
            .and_then(|text| {
                let between = |i: usize| text.is_char_boundary(i);
                if records
                    .iter()
                    .all(|r| between(r.lines.start) && between(r.lines.end))
                {
                    Ok(Arc::new(text))
                } else {
                    Err(text.into_bytes())
                }
            });
        let mut cut = Cut {
            fwd: self,
            out: Vec::new(),
            bytes: 0,
            seq,
        };
        for r in records {
            match &whole {
                Ok(text) => cut.record(text, r.lines, r.target, r.resent, r.end),
                Err(buf) => {
                    let lines = buf.get(r.lines).unwrap_or_default();
                    let text = Arc::new(String::from_utf8_lossy(lines).into_owned());
                    let all = 0..text.len();
                    cut.record(&text, all, r.target, r.resent, r.end);
                }
            }
        }
        (cut.out, whole.ok())
    }
}

/// The batches of a read being cut.
struct Cut<'f> {
    fwd: &'f Forwarder,
    out: Vec<Chunk>,
    /// bytes in the last batch
    bytes: usize,
    seq: u64,
}

impl Cut<'_> {
    /// Adds the lines of `text[lines]`, one record of `target` ending at `end` in the queue.
    fn record(
        &mut self,
        text: &Arc<String>,
        lines: Range<usize>,
        target: Target,
        resent: bool,
        end: u64,
    ) {
        let (batch_lines, batch_bytes) = (self.fwd.output.batch_lines, self.fwd.output.batch_bytes);
        let base = text.as_ptr() as usize;
        // whether the last batch can take this record's lines, as far as its target and side
        // of `resend_until` go: the same for all of them (compared once a record, not once a
        // line)
        let mut joins = self
            .out
            .last()
            .is_some_and(|c| c.target == target && c.resent == resent);
        let out = &mut self.out;
        for (_, l) in storwatch_wire::lp::lines(text.get(lines).unwrap_or_default()) {
            let t = l.trim();
            if t.is_empty() || t.starts_with('#') {
                continue;
            }
            let full = match out.last() {
                Some(c) => !joins || c.count >= batch_lines || self.bytes + l.len() > batch_bytes,
                None => true,
            };
            if full {
                joins = true;
                out.push(Chunk {
                    read: self.seq,
                    index: out.len(),
                    target: target.clone(),
                    parts: Vec::new(),
                    count: 0,
                    completes: None,
                    reach: end,
                    resent,
                    group: 0,
                    shard: 0,
                });
                self.bytes = 0;
            }
            let Some(c) = out.last_mut() else { continue };
            let start = l.as_ptr() as usize - base;
            let range = start..start + l.len();
            match c.parts.last_mut() {
                Some((t, ranges)) if Arc::ptr_eq(t, text) => ranges.push(range),
                _ => c.parts.push((text.clone(), vec![range])),
            }
            c.count += 1;
            c.reach = end;
            self.bytes += l.len() + 1;
        }
        // the record's last line is in the last batch: delivering it (and all before)
        // delivers the record
        if let Some(c) = out.last_mut() {
            c.completes = Some(end);
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::config::OutputConfig;
    use crate::forward::Output;
    use crate::metrics::Metrics;

    fn forwarder(dir: &std::path::Path, batch_lines: usize) -> Forwarder {
        let cfg = OutputConfig {
            name: Some("cut".into()),
            url: "http://127.0.0.1:9/".into(),
            db: Some("sw".into()),
            batch_lines,
            ..OutputConfig::default()
        };
        let m = Metrics::default().add_output("cut");
        Forwarder::new(Output::resolve(&cfg).unwrap(), m, dir.to_path_buf()).unwrap()
    }

    /// A read of `records` (each a target, `None` for none, and its text), the k-th ending at
    /// queue position 100 × (k + 1).
    fn read(records: &[(Option<Target>, &[u8])]) -> Read {
        let (mut buf, mut bounds, mut ends) = (Vec::new(), Vec::new(), Vec::new());
        for (k, (target, text)) in records.iter().enumerate() {
            let text = bytes::Bytes::copy_from_slice(text);
            match target {
                Some(t) => buf.extend_from_slice(&t.record(text)),
                None => buf.extend_from_slice(&text),
            }
            bounds.push(buf.len());
            ends.push(100 * (k as u64 + 1));
        }
        Read {
            buf,
            bounds,
            ends,
            next: 100 * records.len() as u64,
        }
    }

    /// A batch: its target's database, whether resent, its lines, where it reaches and what it
    /// completes.
    type Batch = (String, bool, Vec<String>, u64, Option<u64>);

    /// Each batch.
    fn cut(fwd: &Forwarder, read: Read, resend_until: u64) -> Vec<Batch> {
        fwd.chunks(read, 0, resend_until, 7)
            .0
            .into_iter()
            .map(|c| {
                let lines = c.lines().iter().map(|l| l.to_string()).collect();
                (c.target.db.clone(), c.resent, lines, c.reach, c.completes)
            })
            .collect()
    }

    fn t(db: &str) -> Option<Target> {
        Some(Target {
            db: db.into(),
            rp: String::new(),
        })
    }

    /// Records with and without a target header, a damaged header (skipped, its position
    /// still counted for what is resent), comments and blank lines, a record's lines split
    /// across batches: the lines of each batch are the records' lines, in order, with their
    /// targets; the same when a record is not UTF-8, whose invalid byte is replaced.
    #[test]
    fn a_read_is_cut_into_batches_of_its_records_lines() {
        let dir = tempfile::tempdir().unwrap();
        let fwd = forwarder(dir.path(), 2);
        let records: Vec<(Option<Target>, &[u8])> = vec![
            (t("site"), b"a v=1 1\nb v=2 2\nc v=3 3\n"),
            (None, b"# a comment\n\nd v=4 4\n"),
            (t("site"), b"e v=5 5"),
            (None, b"\xFFT\x09cut"),
            (t("other"), b"f v=6 6\n"),
        ];
        let want = vec![
            (
                "site".to_string(),
                true,
                vec!["a v=1 1".to_string(), "b v=2 2".into()],
                100,
                None,
            ),
            ("site".into(), true, vec!["c v=3 3".into()], 100, Some(100)),
            // it starts at 100, before `resend_until`
            ("".into(), true, vec!["d v=4 4".into()], 200, Some(200)),
            ("site".into(), false, vec!["e v=5 5".into()], 300, Some(300)),
            (
                "other".into(),
                false,
                vec!["f v=6 6".into()],
                500,
                Some(500),
            ),
        ];
        assert_eq!(cut(&fwd, read(&records), 150), want);

        // one record with a byte that is not UTF-8: every record read on its own
        let mut bad = records.clone();
        bad[1] = (None, b"# a comment\n\nd v=4 \xFE4\n");
        let mut want_bad = want.clone();
        want_bad[2].2 = vec!["d v=4 \u{FFFD}4".into()];
        assert_eq!(cut(&fwd, read(&bad), 150), want_bad);

        // a character cut between two records: the buffer is UTF-8, each record is not
        let split: Vec<(Option<Target>, &[u8])> =
            vec![(None, b"g s=\"\xC3"), (None, b"\xA9\" 7\nh v=8 8\n")];
        let want_split = vec![(
            "".to_string(),
            false,
            vec![
                "g s=\"\u{FFFD}".to_string(),
                "\u{FFFD}\" 7".into(),
                "h v=8 8".into(),
            ],
            200,
            Some(200),
        )];
        assert_eq!(cut(&forwarder(dir.path(), 10), read(&split), 0), want_split);
    }

    /// A read's buffer is kept for the next read once no batch holds its text, and only then;
    /// not when the read used less than a quarter of it, nor when its batches are of texts of
    /// their own (a read cut record by record).
    #[test]
    fn a_read_buffer_is_kept_for_the_next_read_once_its_batches_are_gone() {
        let dir = tempfile::tempdir().unwrap();
        let fwd = forwarder(dir.path(), 2);
        let pending = |text| crate::forward::Pending {
            next: 0,
            text,
            batches: Vec::new(),
            done: 0,
        };
        let records: Vec<(Option<Target>, &[u8])> =
            vec![(t("site"), b"a v=1 1\nb v=2 2\nc v=3 3\n")];
        let r = read(&records);
        let (ptr, cap) = (r.buf.as_ptr(), r.buf.capacity());
        let (batches, text) = fwd.chunks(r, 0, 0, 1);
        // a batch still holds the text: not kept
        fwd.give_read_buf(pending(text.clone()));
        assert_eq!(fwd.reads.take().capacity(), 0);
        drop(batches);
        fwd.give_read_buf(pending(text));
        let again = fwd.reads.take();
        assert!(again.is_empty());
        assert_eq!((again.as_ptr(), again.capacity()), (ptr, cap));
        // the next read is made into it
        let mut r = read(&records);
        let mut kept = again;
        kept.extend_from_slice(&r.buf);
        r.buf = kept;
        assert_eq!(fwd.chunks(r, 0, 0, 2).0.len(), 2);

        // mostly unused
        let mut r = read(&records);
        r.buf.reserve(r.buf.len() * 8);
        let (batches, text) = fwd.chunks(r, 0, 0, 3);
        drop(batches);
        fwd.give_read_buf(pending(text));
        assert_eq!(fwd.reads.take().capacity(), 0);

        // cut record by record: no text of the read's
        let bad: Vec<(Option<Target>, &[u8])> = vec![(None, b"d v=\xFE4\n")];
        let (batches, text) = fwd.chunks(read(&bad), 0, 0, 4);
        assert!(text.is_none() && batches.len() == 1);
    }
}
