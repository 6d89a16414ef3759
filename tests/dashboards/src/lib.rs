//! Tests of the Grafana dashboards (`dashboards/`) and alert rules (`alerts/`): see `tests/lint.rs`.
