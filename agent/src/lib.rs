//! storwatch-agent: samples block devices, NICs and storage health every second and reports
//! burst-preserving summaries as InfluxDB line protocol.
//!
//! Data flows one way: `sources` (kernel text → typed rows) → `rates` (two snapshots → per-second
//! values, iostat/sar formulas) → `summary` (1 s samples → report) → `collect` (one collector per
//! domain, driven by the `scheduler`) → line protocol (`storwatch_wire::lp`) → `sink` (stdout,
//! file, HTTP).

pub mod assemble;
pub mod clock;
pub mod collect;
pub mod command;
pub mod config;
pub mod duration;
pub mod event;
pub mod filter;
pub mod health;
pub mod prometheus;
pub mod rates;
pub mod root;
pub mod scheduler;
pub mod selfstat;
pub mod sink;
pub mod sources;
pub mod startup_code;
pub mod summary;
pub mod top;
