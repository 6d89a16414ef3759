//! A fast hasher for the maps looked up once or more per line (the learned field types, the
//! remote-write encoder's caches): FxHash's word-at-a-time multiply (rustc's own map hasher),
//! several times faster than std's SipHash on names of a few bytes.
//!
//! FxHash resists no chosen collisions; the keys here are names clients send. Each process
//! starts its hashes from a random state (std's own per-process keys), so a set of colliding
//! names cannot be worked out ahead of time against every collector, and the maps are bounded
//! (the type map's `max_fields`, the encoder's `MAX_CACHED`): the worst a client can do is slow
//! its own lookups.

use std::hash::{BuildHasher, Hasher};
use std::sync::OnceLock;

/// [`std::collections::HashMap`] with [`Fx`].
pub(crate) type FxMap<K, V> = std::collections::HashMap<K, V, FxBuild>;

/// FxHash's multiplier (64-bit).
const K: u64 = 0x51_7c_c1_b7_27_22_0a_95;

/// The hasher.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Fx(u64);

impl Fx {
    fn add(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(K);
    }
}

impl Hasher for Fx {
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            let mut w = [0u8; 8];
            w.copy_from_slice(c);
            self.add(u64::from_le_bytes(w));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut w = [0u8; 8];
            w[..rest.len()].copy_from_slice(rest);
            // the length keeps "a" and "a\0" apart
            self.add(u64::from_le_bytes(w) ^ ((rest.len() as u64) << 59));
        }
    }

    fn write_u8(&mut self, n: u8) {
        self.add(u64::from(n));
    }

    fn write_u32(&mut self, n: u32) {
        self.add(u64::from(n));
    }

    fn write_u64(&mut self, n: u64) {
        self.add(n);
    }

    fn write_usize(&mut self, n: usize) {
        self.add(n as u64);
    }

    fn finish(&self) -> u64 {
        // The multiply leaves the high bits well mixed and the low ones poorly; the map takes
        // its bucket from the low bits.
        self.0.rotate_left(26)
    }
}

/// Builds [`Fx`] hashers from this process's random start.
#[derive(Debug, Clone, Copy)]
pub(crate) struct FxBuild(u64);

impl Default for FxBuild {
    fn default() -> FxBuild {
        static SEED: OnceLock<u64> = OnceLock::new();
        FxBuild(*SEED.get_or_init(|| std::collections::hash_map::RandomState::new().hash_one(0u8)))
    }
}

impl BuildHasher for FxBuild {
    type Hasher = Fx;

    fn build_hasher(&self) -> Fx {
        Fx(self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_keys_hash_alike_and_near_keys_apart() {
        let b = FxBuild::default();
        assert_eq!(b.hash_one("disk"), b.hash_one(String::from("disk")));
        let names = [
            "a", "a\0", "ab", "ba", "util_pct", "util_pcu", "r_per_s", "w_per_s",
        ];
        let hashes: std::collections::HashSet<u64> = names.iter().map(|n| b.hash_one(n)).collect();
        assert_eq!(hashes.len(), names.len());
        // the low bits (the bucket) of names differing in one character differ
        let low: std::collections::HashSet<u64> = (0..64)
            .map(|i| b.hash_one(format!("sd{i}")) & 0xff)
            .collect();
        assert!(low.len() > 40, "{}", low.len());
    }

    /// The remote-write encoder keys its series by `label set << 32 | metric`: keys differing
    /// only in their high half must still spread over the buckets (the low bits), or every
    /// series of one metric probes one chain.
    #[test]
    fn keys_differing_only_in_their_high_half_spread_over_the_buckets() {
        let b = FxBuild::default();
        let buckets: std::collections::HashSet<u64> = (0..1024u64)
            .map(|set| b.hash_one((set << 32) | 3) & 1023)
            .collect();
        assert!(buckets.len() > 500, "{}", buckets.len());
    }
}
