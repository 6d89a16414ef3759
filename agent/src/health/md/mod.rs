//! MD RAID arrays: state, rebuild progress and ETA, redundancy left, rebuild risk and events.
//!
//! * `model.rs`: what the `md` and `md_member` lines report about an array and its members;
//! * `derive.rs`: one reading (mdstat and sysfs, parsed) → an array's status;
//! * `detect.rs`: successive readings → events ([`MdDetector`]).
//!
//! Reading mdstat and sysfs and writing the lines is the collector's: [`crate::collect::md`].

mod derive;
mod detect;
mod model;

pub use detect::MdDetector;
pub use model::{ArrayState, ArrayStatus, MemberStatus};
