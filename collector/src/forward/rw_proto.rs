//! The few protobuf pieces a remote-write request is written with: varints and `Label`
//! messages (prometheus/prompb `types.proto`: `Label { string name = 1; string value = 2; }`,
//! `TimeSeries { repeated Label labels = 1; repeated Sample samples = 2; }`), and the labels
//! read back from them for tests and tools.

/// Labels of one series without `__name__`, sorted by name, each name once.
pub type Labels = Vec<(String, String)>;

pub(super) fn varint_len(v: u64) -> usize {
    (64 - (v | 1).leading_zeros() as usize).div_ceil(7)
}

/// `v` as a varint at the start of `out` (at least 10 bytes); its length.
pub(super) fn write_varint(out: &mut [u8], mut v: u64) -> usize {
    let mut n = 0;
    while v >= 0x80 {
        out[n] = (v as u8) | 0x80;
        v >>= 7;
        n += 1;
    }
    out[n] = v as u8;
    n + 1
}

pub(super) fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// A `Label { name, value }` message as `TimeSeries` field 1.
pub(super) fn put_label(out: &mut Vec<u8>, name: &str, value: &str) {
    let (k, v) = (name.as_bytes(), value.as_bytes());
    let len = 2 + varint_len(k.len() as u64) + k.len() + varint_len(v.len() as u64) + v.len();
    out.push(0x0a);
    put_varint(out, len as u64);
    out.push(0x0a);
    put_varint(out, k.len() as u64);
    out.extend_from_slice(k);
    out.push(0x12);
    put_varint(out, v.len() as u64);
    out.extend_from_slice(v);
}

/// The labels of `Label` messages [`put_label`] wrote (bytes it did not write end them).
pub(super) fn read_labels(mut b: &[u8]) -> Labels {
    fn varint(b: &mut &[u8]) -> Option<usize> {
        let mut v = 0usize;
        for shift in (0..64).step_by(7) {
            let (c, rest) = b.split_first()?;
            *b = rest;
            v |= usize::from(c & 0x7f) << shift;
            if c & 0x80 == 0 {
                return Some(v);
            }
        }
        None
    }
    fn field<'b>(b: &mut &'b [u8], tag: u8) -> Option<&'b [u8]> {
        let (c, rest) = b.split_first()?;
        *b = rest;
        if *c != tag {
            return None;
        }
        let n = varint(b)?;
        let (f, rest) = (b.get(..n)?, b.get(n..)?);
        *b = rest;
        Some(f)
    }
    let mut out = Vec::new();
    while let Some(mut msg) = field(&mut b, 0x0a) {
        let (Some(k), Some(v)) = (field(&mut msg, 0x0a), field(&mut msg, 0x12)) else {
            break;
        };
        out.push((
            String::from_utf8_lossy(k).into_owned(),
            String::from_utf8_lossy(v).into_owned(),
        ));
    }
    out
}
