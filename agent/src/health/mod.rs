//! Storage health: multipath paths, MD arrays and zpools — state, state changes, derived risk.
//!
//! Each subsystem's monitor is a [`Collector`](crate::collect::Collector): the scheduler polls it
//! once per sample interval and asks it for its lines once per report interval. A monitor whose
//! subsystem is absent on the node (no md module, no ZFS, no multipath) stays silent; one whose
//! source is present but broken counts an error, and the rest of the sample goes on.

pub mod md;
pub mod mpath;
pub mod risk;
pub mod zpool;
