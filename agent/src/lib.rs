//! storwatch-agent: samples block devices, NICs and storage health every second and reports
//! burst-preserving summaries as InfluxDB line protocol.
//!
//! Data flows one way: `sources` (kernel text → typed rows) → `rates` (two snapshots → per-second
//! values, iostat/sar formulas) → `summary` (1 s samples → report) → `encode` (→ line protocol)
//! → `sink` (stdout, file, HTTP).

pub mod command;
pub mod config;
pub mod encode;
pub mod event;
pub mod health;
pub mod rates;
pub mod risk;
pub mod root;
pub mod sampler;
pub mod selfstat;
pub mod sink;
pub mod sources;
pub mod summary;
pub mod top;
