//! What the storwatch agent and collector share, so that both speak and store the same bytes:
//!
//! * [`lp`]: InfluxDB line protocol — the builder the agent writes its reports with, and the
//!   validator the collector checks every write with, one set of rules selectable per InfluxDB
//!   version;
//! * [`log`]: the segment log — CRC-framed records in segment files with a durable cursor —
//!   under the agent's spool and the collector's queue;
//! * [`rotate`]: an append-only file rotated by size, under the agent's `file:` output and the
//!   collector's dead-letter files.
//! * [`prom`]: the Prometheus names of a line's fields and tags, under the agent's `/metrics` and
//!   the collector's remote-write output, so both name a series alike.
//!
//! Nothing here knows about /proc, HTTP or InfluxDB servers: bytes in, bytes out, files on disk.

pub mod log;
pub mod lp;
pub mod prom;
pub mod rotate;
