//! Buffers used again, not allocated anew: request bodies and reads of the queue.
//!
//! A body is a few hundred kB to a few MB (a batch's lines, or its remote-write request), a read
//! of a backlog up to `batch_bytes` × `max_in_flight`. Made in a new `Vec` each time, each was
//! written into memory the allocator had just given back to the kernel when the last one was
//! freed, so every page was faulted in and zeroed again: under `perf`, a fifth of a
//! remote-write drain's CPU went to those page faults. A buffer handed to the HTTP client as the
//! body comes back here when the client drops it (the request answered, failed or timed out),
//! a read's once its batches are delivered, and the next body or read is written into it, its
//! pages still in place. A buffer the last use filled less than a quarter of is not kept: an
//! output that caught up sends and reads a few reports at a time, and keeps no buffer the size
//! of a backlog's.

use std::sync::{Arc, Mutex, PoisonError};

use bytes::Bytes;

use super::output::MAX_IN_FLIGHT;

/// Body buffers kept at most: as many as an output can use at once, a body in flight and the
/// next one's buffer held by its shard's encoder for each of up to `max_in_flight` requests,
/// and an InfluxDB body's gzip pair. A pool never holds more than were in use at once: this
/// only bounds what is kept after a burst.
const BODIES_KEPT: usize = 2 * MAX_IN_FLIGHT + 2;

/// A body buffer that grew past this is not kept (one burst of outsized bodies is not held for
/// good): well above a body of the default `batch_bytes` (2 MiB of line protocol, or its
/// remote-write request).
const MAX_BODY_BYTES: usize = 8 << 20;

/// Buffers of one kind for one output.
#[derive(Debug, Clone)]
pub(super) struct Buffers {
    kept: Arc<Mutex<Vec<Vec<u8>>>>,
    /// kept at most, and the largest capacity kept
    most: usize,
    max_bytes: usize,
}

impl Buffers {
    /// For request bodies ([`Buffers::body`]).
    pub(super) fn bodies() -> Self {
        Self::new(BODIES_KEPT, MAX_BODY_BYTES)
    }

    /// For reads of the queue: one, the next read's (a read is bounded by the output's
    /// `batch_bytes` × `max_in_flight`).
    pub(super) fn reads() -> Self {
        Self::new(1, usize::MAX)
    }

    fn new(most: usize, max_bytes: usize) -> Self {
        Buffers {
            kept: Arc::default(),
            most,
            max_bytes,
        }
    }

    /// An empty buffer, kept from an earlier use when one is free.
    pub(super) fn take(&self) -> Vec<u8> {
        self.kept
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .pop()
            .unwrap_or_default()
    }

    /// Keeps `buf`, as its last use left it, for a later one (emptied), unless enough are kept,
    /// it is outsized, or that use filled less than a quarter of it.
    pub(super) fn give(&self, mut buf: Vec<u8>) {
        let cap = buf.capacity();
        if cap == 0 || cap > self.max_bytes || buf.len() < cap / 4 {
            return;
        }
        buf.clear();
        let mut kept = self.kept.lock().unwrap_or_else(PoisonError::into_inner);
        if kept.len() < self.most {
            kept.push(buf);
        }
    }

    /// `buf[start..]` as a body, `buf` given back here when the body is dropped.
    pub(super) fn body(&self, buf: Vec<u8>, start: usize) -> Bytes {
        let start = start.min(buf.len());
        Bytes::from_owner(Owned {
            buf,
            pool: self.clone(),
        })
        .slice(start..)
    }

    /// Buffers kept now.
    #[cfg(test)]
    fn kept(&self) -> usize {
        self.kept
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }
}

/// A body's buffer, given back to its pool when the body is dropped.
struct Owned {
    buf: Vec<u8>,
    pool: Buffers,
}

impl AsRef<[u8]> for Owned {
    fn as_ref(&self) -> &[u8] {
        &self.buf
    }
}

impl Drop for Owned {
    fn drop(&mut self) {
        self.pool.give(std::mem::take(&mut self.buf));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A body is the bytes written from `start`; its buffer comes back, emptied and with its
    /// capacity, once every clone of the body is dropped, and the next body is written into it.
    #[test]
    fn a_body_buffer_comes_back_when_the_body_is_dropped() {
        let pool = Buffers::bodies();
        let mut buf = pool.take();
        buf.extend_from_slice(b"\0\0\0head and body");
        let (ptr, cap) = (buf.as_ptr(), buf.capacity());
        let body = pool.body(buf, 3);
        assert_eq!(&body[..], b"head and body");
        let clone = body.clone();
        drop(body);
        assert_eq!(pool.kept(), 0, "a clone of the body still holds it");
        assert_eq!(&clone.slice(5..)[..], b"and body");
        drop(clone);
        assert_eq!(pool.kept(), 1);
        let again = pool.take();
        assert!(again.is_empty());
        assert_eq!((again.as_ptr(), again.capacity()), (ptr, cap));
        // a start past the end is an empty body, not a panic
        assert!(pool.body(again, 100).is_empty());
    }

    /// At most `BODIES_KEPT` body buffers are kept (one read buffer), none that grew past
    /// `MAX_BODY_BYTES`, none empty, none its last use filled less than a quarter of.
    #[test]
    fn only_so_many_buffers_are_kept() {
        let pool = Buffers::bodies();
        let bodies: Vec<Bytes> = (0..BODIES_KEPT + 3)
            .map(|i| pool.body(vec![i as u8; 1000], 0))
            .collect();
        drop(bodies);
        assert_eq!(pool.kept(), BODIES_KEPT);
        let pool = Buffers::bodies();
        drop(pool.body(vec![0; MAX_BODY_BYTES + 1], 0));
        drop(pool.body(Vec::new(), 0));
        assert_eq!(pool.kept(), 0);
        let filled = |n: fn(usize) -> usize| {
            let mut b = Vec::with_capacity(4000);
            b.resize(n(b.capacity()), 0u8);
            b
        };
        pool.give(filled(|cap| cap / 4 - 1));
        assert_eq!(pool.kept(), 0, "less than a quarter used");
        pool.give(filled(|cap| cap / 4));
        assert_eq!(pool.kept(), 1);

        let reads = Buffers::reads();
        reads.give(vec![1; 100]);
        reads.give(vec![2; 100]);
        assert_eq!(reads.kept(), 1);
    }
}
