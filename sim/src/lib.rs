//! storwatch-sim: a host simulator for storwatch.
//!
//! It writes an evolving fake `/proc` + `/sys` tree once per second for a named incident
//! scenario (see [`scenario::ALL`]), plus stand-ins for `zpool` and `dmsetup`, so the real
//! agent runs on it through `--proc-root`/`--sys-root` with no md, multipath or ZFS on the
//! machine. [`sim::Sim`] is one host; [`sim::fleet`] many. [`agents`] runs many hosts' reports
//! through the agent's own HTTP sink and spool in one process, for a site-scale soak.
//!
//! Layout: `model` (the host and how demand becomes counters) → `scenario` (what each incident
//! asks of the host, second by second) → `render` (kernel and tool text formats; `fs`: the mounted filesystems) → `tree`
//! (atomic files under the root) → `sim` (stepping and the real-time loop).

pub mod agents;
pub mod files;
pub mod fs;
pub mod model;
pub mod render;
pub mod render_cgroup;
pub mod render_drive;
pub mod scenario;
pub mod sim;
pub mod tree;
