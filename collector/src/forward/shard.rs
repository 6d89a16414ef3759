//! A remote-write output's batches cut by series into shards, as Prometheus's own queue manager
//! shards its samples: each batch of the queue becomes up to `max_in_flight` requests, one per
//! shard, sent at once, and a line goes to the shard its series hashes to — so all the samples
//! of one series are in one request of the batch, and the batches go out one after the other
//! (the next batch's requests start once every request of the one before is delivered). A
//! series' samples therefore reach the receiver in the queue's order, which Prometheus and
//! Mimir need (they refuse a sample older than its series' newest), while several requests are
//! in flight.
//!
//! The series is the line's measurement and tag set as written, tags in any order. Two lines
//! whose different keys come to one Prometheus series (tags `a-b` and `a_b`, which are one
//! label) may fall in two shards of one batch and land in either order.
//!
//! The cursor is unchanged: a batch's requests are its parts, the cursor moves over a prefix of
//! delivered parts, and only the batch's last part carries the end of the records the batch
//! completes, so a record is passed only when every shard has delivered everything up to it.

use std::sync::Arc;

use super::Chunk;

/// A line's shard among `shards`: a hash of its measurement and of its tags, the tags in any
/// order. Each part is hashed eight bytes at a time (one multiply a word, as [`crate::hash`]'s),
/// then mixed whole.
pub(super) fn shard_of(line: &str, shards: usize) -> usize {
    if shards <= 1 {
        return 0;
    }
    let b = line.as_bytes();
    // A series key without a backslash (what agents write) ends at the first space and its
    // parts at its commas: the same parts as the walk below, each found by its words, the
    // commas in a word told by a few operations on it
    let key_end = memchr::memchr(b' ', b).unwrap_or(b.len());
    if memchr::memchr(b'\\', &b[..key_end]).is_none() {
        let (end, h) = part_hash(b, 0, key_end);
        let measurement = mix(h);
        let (mut tags, mut at) = (0u64, end);
        while at < key_end {
            let (end, h) = part_hash(b, at + 1, key_end);
            // summed: the same tags in another order give the same hash
            tags = tags.wrapping_add(mix(h));
            at = end;
        }
        return (mix(measurement ^ tags) % shards as u64) as usize;
    }
    walk_shard_of(b, shards)
}

/// Bytes 0x01 and 0x80 in every lane of a word.
const LOW: u64 = 0x0101_0101_0101_0101;
const HIGH: u64 = 0x8080_8080_8080_8080;

/// The part of `b` from `start` up to the first comma or `end`: where it ends, and its
/// [`hash_bytes`].
#[inline(always)]
fn part_hash(b: &[u8], start: usize, end: usize) -> (usize, u64) {
    let (mut h, mut i) = (0u64, start);
    loop {
        let w = word(b, i);
        // the first byte that is a comma: its lane's high bit is the lowest one set (a lane
        // above a comma may be marked too, which the first one hides)
        let x = w ^ (LOW * u64::from(b','));
        let commas = x.wrapping_sub(LOW) & !x & HIGH;
        let n = ((commas.trailing_zeros() / 8) as usize).min(end - i);
        if n < 8 {
            let last = if n == 0 {
                0
            } else {
                w & (u64::MAX >> (64 - 8 * n))
            };
            let h = (h.rotate_left(5) ^ last ^ ((n as u64) << 59)).wrapping_mul(K);
            return (i + n, h);
        }
        h = (h.rotate_left(5) ^ w).wrapping_mul(K);
        i += 8;
    }
}

/// The eight bytes of `b` from `i`, little-endian, zeros past its end.
#[inline(always)]
fn word(b: &[u8], i: usize) -> u64 {
    match b.get(i..i + 8) {
        Some(w) => u64::from_le_bytes(w.try_into().unwrap_or([0; 8])),
        None => {
            let mut a = [0u8; 8];
            let rest = b.get(i..).unwrap_or_default();
            a[..rest.len()].copy_from_slice(rest);
            u64::from_le_bytes(a)
        }
    }
}

/// [`shard_of`] of any line: its series key's parts found by a walk over its bytes, a
/// backslash escaping the byte after it.
fn walk_shard_of(b: &[u8], shards: usize) -> usize {
    let (mut measurement, mut tags) = (None, 0u64);
    let (mut start, mut i) = (0, 0);
    loop {
        while i < b.len() {
            match KIND[b[i] as usize] {
                PART => i += 1,
                ESCAPE => i += 2,
                _ => break,
            }
        }
        let end = i.min(b.len());
        let h = mix(hash_bytes(&b[start..end]));
        match measurement {
            None => measurement = Some(h),
            // summed: the same tags in another order give the same hash
            Some(_) => tags = tags.wrapping_add(h),
        }
        if end >= b.len() || b[end] == b' ' {
            break;
        }
        i = end + 1;
        start = i;
    }
    (mix(measurement.unwrap_or(0) ^ tags) % shards as u64) as usize
}

const PART: u8 = 0;
const END: u8 = 1;
const ESCAPE: u8 = 2;

/// A comma or a space ends a part of the series key, a backslash escapes the next byte.
const KIND: [u8; 256] = {
    let mut t = [PART; 256];
    t[b',' as usize] = END;
    t[b' ' as usize] = END;
    t[b'\\' as usize] = ESCAPE;
    t
};

/// splitmix64's finaliser.
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// FxHash's multiplier (64-bit).
const K: u64 = 0x51_7c_c1_b7_27_22_0a_95;

/// The bytes eight at a time, the last word padded and marked with its length.
fn hash_bytes(p: &[u8]) -> u64 {
    let mut h = 0u64;
    let mut words = p.chunks_exact(8);
    for w in &mut words {
        let mut a = [0u8; 8];
        a.copy_from_slice(w);
        h = (h.rotate_left(5) ^ u64::from_le_bytes(a)).wrapping_mul(K);
    }
    let rest = words.remainder();
    let mut a = [0u8; 8];
    a[..rest.len()].copy_from_slice(rest);
    (h.rotate_left(5) ^ u64::from_le_bytes(a) ^ ((rest.len() as u64) << 59)).wrapping_mul(K)
}

/// The batches of one read cut into shards: each batch's lines by [`shard_of`], its parts in
/// shard order, numbered within the read, of one group (`next_group`, counted on); only the last
/// part of a batch completes what the batch completed.
pub(super) fn split(chunks: Vec<Chunk>, shards: usize, next_group: &mut u64) -> Vec<Chunk> {
    let mut out: Vec<Chunk> = Vec::with_capacity(chunks.len() * shards);
    let mut parts: Vec<Chunk> = Vec::with_capacity(shards);
    for c in chunks {
        let group = *next_group;
        *next_group += 1;
        parts.clear();
        for shard in 0..shards {
            parts.push(Chunk {
                shard,
                read: c.read,
                index: 0,
                completes: None,
                reach: c.reach,
                resent: c.resent,
                target: c.target.clone(),
                parts: Vec::new(),
                count: 0,
                group,
            });
        }
        for (text, ranges) in &c.parts {
            for r in ranges {
                let Some(line) = text.get(r.clone()) else {
                    continue;
                };
                let Some(p) = parts.get_mut(shard_of(line, shards)) else {
                    continue;
                };
                match p.parts.last_mut() {
                    Some((t, rs)) if Arc::ptr_eq(t, text) => rs.push(r.clone()),
                    _ => p.parts.push((text.clone(), vec![r.clone()])),
                }
                p.count += 1;
            }
        }
        let first = out.len();
        for mut p in parts.drain(..).filter(|p| p.count > 0) {
            p.index = out.len();
            out.push(p);
        }
        // (a batch without lines, which none is, would complete nothing)
        if let Some(last) = out.get_mut(first..).and_then(|s| s.last_mut()) {
            last.completes = c.completes;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_series_is_one_shard_whatever_the_order_of_its_tags() {
        for n in [2, 3, 4, 8] {
            for i in 0..200 {
                let a = format!("disk,host=n{i},device=sd{} util=1 1", i % 7);
                let b = format!("disk,device=sd{},host=n{i} util=2,x=3 2", i % 7);
                assert_eq!(shard_of(&a, n), shard_of(&b, n));
            }
        }
        assert_eq!(shard_of("m,a=1 v=1", 1), 0);
    }

    /// A key without a backslash goes where the walk over its bytes sends it (tags, none,
    /// empty parts, no fields after it, no space at all).
    #[test]
    fn the_quick_cut_of_a_plain_key_is_the_walks() {
        let mut rng = fastrand::Rng::with_seed(5);
        let alphabet = b"ab,= =x1";
        for _ in 0..20_000 {
            let len = rng.usize(0..40);
            let line: String = (0..len)
                .map(|_| alphabet[rng.usize(..alphabet.len())] as char)
                .collect();
            for n in [2, 3, 4, 7] {
                assert_eq!(
                    shard_of(&line, n),
                    walk_shard_of(line.as_bytes(), n),
                    "{line:?}"
                );
            }
        }
        let line = "disk,host=node001,device=sd12,name=sd12,kind=disk,rotational=1 r=1 1";
        assert_eq!(shard_of(line, 4), walk_shard_of(line.as_bytes(), 4));
    }

    /// A part's hash by its words is [`hash_bytes`] of its bytes, whatever its length, where
    /// it ends (a comma, the end given, the end of the line) and the bytes after it.
    #[test]
    fn a_part_hashed_by_words_is_hashed_as_its_bytes() {
        let mut rng = fastrand::Rng::with_seed(7);
        let alphabet = b"ab,,xyz0";
        for _ in 0..20_000 {
            let len = rng.usize(0..40);
            let line: Vec<u8> = (0..len)
                .map(|_| alphabet[rng.usize(..alphabet.len())])
                .collect();
            let start = rng.usize(0..=len);
            let end = rng.usize(start..=len);
            let (at, h) = part_hash(&line, start, end);
            let stop = line[start..end]
                .iter()
                .position(|c| *c == b',')
                .map_or(end, |p| start + p);
            assert_eq!(at, stop, "{line:?} {start}..{end}");
            assert_eq!(h, hash_bytes(&line[start..stop]), "{line:?} {start}..{end}");
        }
    }

    #[test]
    fn series_spread_over_the_shards() {
        let mut counts = [0usize; 4];
        for h in 0..100 {
            for d in 0..24 {
                counts[shard_of(&format!("disk,host=node{h:03},device=sd{d} v=1"), 4)] += 1;
            }
        }
        // 2,400 series: each shard within a fifth of a quarter
        assert!(counts.iter().all(|c| (480..=720).contains(c)), "{counts:?}");
        // the measurement counts, and an escaped comma is part of its tag
        assert_ne!(
            (0..64)
                .map(|i| shard_of(&format!("a,h={i} v=1"), 8))
                .collect::<Vec<_>>(),
            (0..64)
                .map(|i| shard_of(&format!("b,h={i} v=1"), 8))
                .collect::<Vec<_>>()
        );
    }
}
