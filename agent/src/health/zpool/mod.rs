//! ZFS pools over time: state, errors, scans with our own rate and ETA, capacity, redundancy
//! left and the risk of losing data before a resilver restores it.
//!
//! * `model.rs`: what is kept of a pool between readings, and what the report says about it
//!   ([`PoolReport`], [`VdevReport`]);
//! * `derive.rs`: a pool's readings → its report: capacity, error sums, scan progress,
//!   redundancy left and rebuild risk per top-level vdev;
//! * `detect.rs`: successive readings → events, and scan rates ([`ZpoolDetector`]).
//!
//! Reading kstat and running `zpool`, and writing the lines, is the collector's:
//! [`crate::collect::zpool`].

mod derive;
mod detect;
mod model;

pub use detect::ZpoolDetector;
pub use model::{PoolReport, VdevReport};
