//! The dashboards' and rules' tests: lint against the metric contract, every query on a real
//! InfluxDB or Prometheus filled by a simulated fleet, the rollups, the installer.
//!
//! One test binary for all of them, each file a module (`cargo test -p <crate> --test it
//! <module>::`): one binary links once, where a binary per file linked the crate and its
//! dependencies again for each. Tests of different modules run at the same time in one process:
//! each module's fixed ports are its own (no other module of this binary uses them), and no test
//! changes what the process shares (its environment, working directory, umask, signal handlers).

mod browser_check;
mod contract;
mod grafana_check;
mod install;
mod lint;
mod promql_dashboards;
mod promql_rules;
mod queries;
mod rollups;
mod rollups_v2_v3;
mod rule_templates;
