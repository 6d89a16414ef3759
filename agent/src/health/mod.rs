//! Storage health: multipath paths, MD arrays and zpools — state, state changes, derived risk.
//!
//! Each subsystem is a [`Monitor`]. The sampler polls every monitor once per sample interval and
//! asks each for its lines once per report interval. A monitor whose subsystem is absent on the
//! node (no md module, no ZFS, no multipath) stays silent; one whose source is present but broken
//! returns an error, which the sampler counts and logs, and the rest of the sample goes on.

use crate::encode::LineWriter;
use crate::event::Event;
use crate::root::Root;
use crate::sources::SourceError;

pub mod md;
pub mod mpath;
pub mod zpool;

/// One storage subsystem watched over time.
pub trait Monitor: Send {
    /// The source name used in error counts and logs (`md`, `mpath`, `zpool`).
    fn source(&self) -> &'static str;

    /// Reads the subsystem. `now_s` is monotonic seconds since the agent started (for windows,
    /// rates and ETAs). State changes are appended to `events`. Must not block for long: anything
    /// slow (a `zpool` command) runs on the monitor's own thread and is picked up here.
    fn poll(&mut self, root: &Root, now_s: f64, events: &mut Vec<Event>)
        -> Result<(), SourceError>;

    /// Writes this report interval's lines, stamped `ts_ns`, and starts a new interval.
    fn report(&mut self, w: &mut LineWriter, ts_ns: i64);
}
