//! Hardware RAID (MegaRAID / PERC through `storcli`): each virtual drive (VD) is a redundancy
//! set like an MD array — redundancy left, rebuild progress, ETA and stall, the risk of losing
//! data before the rebuild ends, events — plus the controller, its physical drives (PDs), its
//! battery or CacheVault and the write-cache policy in effect. No I/O.
//!
//! * `model.rs`: what the `raid_controller`, `raid_vd` and `raid_pd` lines report;
//! * `derive.rs`: one reading (storcli's answers, parsed and merged) → those statuses: the
//!   redundancy of a level, a PD's failure probability from its own counters, the cache
//!   judgement;
//! * `detect.rs`: successive readings → rebuild rate, ETA, stall and events
//!   ([`HwraidDetector`]).
//!
//! Running storcli and tying a VD to its block device is the collector's:
//! [`crate::collect::hwraid`].

mod derive;
mod detect;
mod model;

pub use derive::{base_redundancy, pd_risk, pd_state_word, vd_state_word};
pub use detect::{HwraidDetector, MemberReading, Params};
pub use model::{ControllerStatus, PdStatus, VdStatus};

#[cfg(test)]
mod tests;
