//! The request the lines added make: the `WriteRequest` protobuf, or straight in snappy's
//! block format ([`super::super::rw_snappy`]), each label set's and metric's label bytes
//! written as copies of where they were written before in the request.

use super::super::rw_proto::{varint_len, write_varint};
use super::super::rw_snappy::{Out, TooBig};
use super::Encoder;

impl Encoder {
    /// Writes the `WriteRequest` protobuf of the samples added; the samples it holds.
    pub fn encode(&mut self) -> usize {
        let mut proto = std::mem::take(&mut self.proto);
        proto.clear();
        let count = self.write(&mut proto);
        self.proto = proto;
        self.sent = count;
        count
    }

    /// The protobuf [`Encoder::encode`] wrote.
    pub fn protobuf(&self) -> &[u8] {
        &self.proto
    }

    /// Writes the `WriteRequest` of the samples added in snappy's block format, straight
    /// ([`super::super::rw_snappy`]): the request body and the samples it holds.
    pub fn compress(&mut self) -> Result<(&[u8], usize), snap::Error> {
        let count = self.write_snappy();
        self.snappy.finish().map(|b| (b, count)).map_err(too_big)
    }

    /// [`Encoder::compress`] handing over the buffer the body was written into, the body
    /// starting at the position returned, with its samples; `next` is the buffer the next
    /// request is written into (the body is not copied out).
    pub fn compress_into(&mut self, next: Vec<u8>) -> Result<(Vec<u8>, usize, usize), snap::Error> {
        let count = self.write_snappy();
        self.snappy
            .finish_into(next)
            .map(|(buf, at)| (buf, at, count))
            .map_err(too_big)
    }

    /// The request written into the snappy writer: its samples.
    fn write_snappy(&mut self) -> usize {
        let mut out = std::mem::take(&mut self.snappy);
        out.start();
        let count = self.write(&mut out);
        self.snappy = out;
        self.sent = count;
        count
    }

    /// Writes the request's series into `out`, each label set's and metric's label bytes
    /// marked as written before where they were (for the snappy writer's copies); the
    /// samples.
    fn write(&mut self, out: &mut impl Out) -> usize {
        self.written = self.written.wrapping_add(1);
        let stamp = self.written;
        self.set_at
            .resize(self.label_sets.len(), Default::default());
        self.metric_at
            .resize(self.metrics.len(), Default::default());
        let mut count = 0;
        let (sets, metrics) = (&self.label_sets, &self.metrics);
        let (set_at, metric_at) = (&mut self.set_at, &mut self.metric_at);
        self.req.each_series(|key, samples| {
            let (lid, mid) = ((key >> 32) as usize, (key & 0xffff_ffff) as usize);
            let (Some(set), Some(metric)) = (sets.get(lid), metrics.get(mid)) else {
                return;
            };
            let size: usize = set.bytes.len()
                + metric.label.len()
                + samples
                    .iter()
                    .map(|(t, _)| 12 + varint_len(*t as u64))
                    .sum::<usize>();
            let mut head = [0u8; 11];
            head[0] = 0x0a;
            let n = 1 + write_varint(&mut head[1..], size as u64);
            out.put_first(&head, n);
            let at = &mut set_at[lid];
            let known = at.0 == stamp;
            let before = out.pos();
            if !set.before().is_empty() {
                out.again(set.before(), known.then_some(at.1));
            }
            let name = out.pos();
            let m = &mut metric_at[mid];
            out.again(&metric.label, (m.0 == stamp).then_some(m.1));
            *m = (stamp, name);
            let after = out.pos();
            out.again(set.after(), known.then_some(at.2));
            *at = (stamp, before, after);
            for (t, v) in samples {
                // TimeSeries.samples = 2: Sample { double value = 1; int64 timestamp = 2; }
                let mut b = [0u8; 22];
                b[0] = 0x12;
                b[2] = 0x09;
                b[3..11].copy_from_slice(&v.to_le_bytes());
                b[11] = 0x10;
                let n = write_varint(&mut b[12..], *t as u64);
                b[1] = (10 + n) as u8;
                out.put_first(&b, 12 + n);
            }
            count += samples.len();
        });
        count
    }
}

/// snappy's error for a request over its 4 GiB.
fn too_big(TooBig(n): TooBig) -> snap::Error {
    snap::Error::TooBig {
        given: n,
        max: u64::from(u32::MAX),
    }
}
