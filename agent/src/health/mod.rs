//! Storage health: multipath paths, MD arrays and zpools — what their state is, what changed
//! (events, flapping, stalls) and what it means (redundancy left, rebuild risk).
//!
//! One folder per domain, with no I/O: the state types (`model.rs`), what one reading means
//! (`derive.rs`, where there is something to derive) and what successive readings say
//! (`detect.rs`, the domain's detector). The collectors in [`crate::collect`] read the kernel
//! and the tools, feed the detectors and write the report lines. [`risk`] is the probability of
//! losing data before redundancy is restored, shared by MD and zpool.

pub mod drive;
pub mod hwraid;
pub mod jobs;
pub mod md;
pub mod mpath;
pub mod risk;
pub mod zpool;
