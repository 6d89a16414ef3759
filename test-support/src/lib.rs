//! What every storwatch test shares, one copy of each:
//!
//! * [`influxd`]: a throw-away InfluxDB 1.x on 127.0.0.1 (`scripts/influxd-test.sh`), set up as
//!   a site sets it up (`deploy/influxdb/setup.sh`) when a test asks;
//! * [`collector`]: the collector binary as a child process, its clock set back when a test needs
//!   a host last seen long ago;
//! * [`http`]: a small blocking HTTP/1.1 client, and a scripted HTTP/1.1 server that records what
//!   it was sent;
//! * [`process`]: the workspace's binaries, and child processes killed on drop;
//! * [`files`]: the workspace root, fixture roots for the agent, and scratch directories on tmpfs;
//! * [`wait`]: waiting for a condition, and the wall clock;
//! * [`pki`]: a CA and certificates made with `openssl`, for TLS tests;
//! * [`ports`]: ports for the tests' servers, never handed to two test processes at once;
//! * [`reports`]: small synthetic reports whose arrival can be checked point by point;
//! * [`lp`]: the fields of a line of line protocol;
//! * [`prometheus`]: a throw-away Prometheus on 127.0.0.1 and its instant queries.
//!
//! It depends on no workspace crate, so that the agent's and the collector's own tests can use
//! it. Everything here panics with a clear message instead of returning errors: a failure is the
//! test's failure.
#![allow(clippy::unwrap_used)]

pub mod collector;
pub mod files;
pub mod http;
pub mod influxd;
pub mod lp;
pub mod pki;
pub mod ports;
pub mod process;
pub mod prometheus;
pub mod promtool;
pub mod reports;
pub mod skip;
pub mod wait;

pub use collector::Collector;
pub use files::{fixture_roots, scratch, workspace};
pub use http::{gzip, http, post_form, urlencode};
pub use influxd::Influxd;
pub use ports::free_port;
pub use process::{binary, in_private_mounts, telegraf, Proc};
pub use prometheus::Prometheus;
pub use promtool::{promtool, promtool_ok};
pub use skip::skip_or_fail;
pub use wait::{now_ms, now_ns, now_s, wait_for, wait_until};
