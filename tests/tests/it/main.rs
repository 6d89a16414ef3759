//! End-to-end tests across the binaries: agent, collector, InfluxDB and Prometheus, the packages,
//! the shipped scripts, and the soak.
//!
//! One test binary for all of them, each file a module (`cargo test -p <crate> --test it
//! <module>::`): one binary links once, where a binary per file linked the crate and its
//! dependencies again for each. Tests of different modules run at the same time in one process:
//! each module's fixed ports are its own (no other module of this binary uses them), and no test
//! changes what the process shares (its environment, working directory, umask, signal handlers).

mod agent_collector_influx;
mod agent_delivery_influxdb;
mod agent_prometheus;
mod agent_refusals;
mod agent_spool_across_outages;
mod packages;
mod smoke_scripts;
mod soak;
