//! Tests of the Grafana dashboards (`dashboards/`) and alert rules (`alerts/`):
//! `tests/lint.rs` holds them to the documented metrics and Grafana's provisioning rules,
//! `tests/queries.rs` runs them against a real InfluxDB filled by the agent on simulated hosts.
