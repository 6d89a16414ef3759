//! The PromQL rules and dashboards, made by the generators of `storwatch-dashboards-tests`
//! (`tests/dashboards/src/promql_*.rs`): the Prometheus dashboards `dashboards/prometheus/*.json`
//! from the InfluxQL dashboards and `dashboards/prometheus/queries.yaml`, and the Prometheus rule
//! file from the Grafana rules and `alerts/prometheus/expressions.yaml`. The tests there only
//! check what is committed.

use std::path::Path;

use storwatch_dashboards_tests::{promql_dashboards, promql_rules};

use crate::Output;

pub(crate) fn outputs(root: &Path) -> Result<Vec<Output>, String> {
    let mut out: Vec<Output> = promql_dashboards::generate()
        .map_err(|e| format!("dashboards/prometheus/queries.yaml:\n{e}"))?
        .into_iter()
        .map(|(file, text)| Output {
            path: format!("dashboards/prometheus/{file}"),
            text,
        })
        .collect();
    out.push(Output {
        path: promql_rules::RULES_FILE.to_string(),
        text: promql_rules::generate(root).map_err(|e| e.join("\n"))?,
    });
    Ok(out)
}
