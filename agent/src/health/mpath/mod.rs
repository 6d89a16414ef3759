//! dm-multipath health: per-path state, transitions and flapping; per-map active versus
//! preferred path group; events when paths fail, come back, or a map loses its last path.
//!
//! * `model.rs`: what one poll saw of a map and its paths ([`MapObservation`]) and what is kept
//!   of them between polls ([`MapState`]);
//! * `detect.rs`: successive observations → transitions, flapping, events ([`MpathDetector`]).
//!
//! Reading sysfs, the kernel's map status and multipathd, and writing the lines, is the
//! collector's: [`crate::collect::mpath`].

mod detect;
mod model;

pub use detect::MpathDetector;
pub use model::{MapObservation, MapState, PathObservation, PathState};
