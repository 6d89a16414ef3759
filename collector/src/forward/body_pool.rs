//! Request bodies written into buffers used again, not allocated anew for each request.
//!
//! A body is a few hundred kB to a few MB (a batch's lines, or its remote-write request). Made
//! in a new `Vec` each time, it was written into memory the allocator had just given back to
//! the kernel when the last body was freed, so every page of every body was faulted in and
//! zeroed again: under `perf`, a fifth of a remote-write drain's CPU went to those page faults.
//! A buffer handed to the HTTP client as the body comes back here when the client drops it
//! (the request answered, failed or timed out), and the next body is written into it, its pages
//! still in place.

use std::sync::{Arc, Mutex, PoisonError};

use bytes::Bytes;

use super::output::MAX_IN_FLIGHT;

/// Buffers kept at most: as many as an output can use at once, a body in flight and the next
/// one's buffer held by its shard's encoder for each of up to `max_in_flight` requests, and an
/// InfluxDB body's gzip pair. The pool never holds more than were in use at once: this only
/// bounds what is kept after a burst.
const KEPT: usize = 2 * MAX_IN_FLIGHT + 2;

/// A buffer that grew past this is not kept (one burst of outsized bodies is not held for
/// good): well above a body of the default `batch_bytes` (2 MiB of line protocol, or its
/// remote-write request).
const MAX_KEPT_BYTES: usize = 8 << 20;

/// Buffers for one output's request bodies.
#[derive(Debug, Clone, Default)]
pub(super) struct BodyPool(Arc<Mutex<Vec<Vec<u8>>>>);

impl BodyPool {
    /// An empty buffer, kept from an earlier body when one is free.
    pub(super) fn take(&self) -> Vec<u8> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .pop()
            .unwrap_or_default()
    }

    /// Keeps `buf` for a later body (emptied), unless enough are kept or it is outsized.
    pub(super) fn give(&self, mut buf: Vec<u8>) {
        if buf.capacity() == 0 || buf.capacity() > MAX_KEPT_BYTES {
            return;
        }
        buf.clear();
        let mut kept = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if kept.len() < KEPT {
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
        self.0.lock().unwrap_or_else(PoisonError::into_inner).len()
    }
}

/// A body's buffer, given back to its pool when the body is dropped.
struct Owned {
    buf: Vec<u8>,
    pool: BodyPool,
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
        let pool = BodyPool::default();
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

    /// At most `KEPT` buffers are kept, none that grew past `MAX_KEPT_BYTES`, none empty.
    #[test]
    fn only_so_many_buffers_are_kept() {
        let pool = BodyPool::default();
        let bodies: Vec<Bytes> = (0..KEPT + 3)
            .map(|i| pool.body(vec![i as u8; 1000], 0))
            .collect();
        drop(bodies);
        assert_eq!(pool.kept(), KEPT);
        let pool = BodyPool::default();
        drop(pool.body(Vec::with_capacity(MAX_KEPT_BYTES + 1), 0));
        drop(pool.body(Vec::new(), 0));
        assert_eq!(pool.kept(), 0);
    }
}
