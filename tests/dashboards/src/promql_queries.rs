//! Every query of the committed Prometheus dashboards, with Grafana's expansion of its
//! variables and macros, for any test that runs them.

use storwatch_test_support::workspace;

use crate::promql_files::{read_json, walk_panels, FILES};

/// One query of a Prometheus dashboard.
#[derive(Debug, Clone)]
pub struct PromqlQuery {
    /// the dashboard's file name (in `dashboards/prometheus/`)
    pub file: String,
    /// `variable $x`, `annotation "…"` or `panel "…" query "A"`
    pub what: String,
    /// the PromQL (a variable's `label_values(...)`)
    pub query: String,
    /// a panel's or an annotation's query (not a template variable's)
    pub panel: bool,
    /// an instant query (tables), else a range query
    pub instant: bool,
}

/// Every query of the committed Prometheus dashboards in `dashboards/prometheus/`: template
/// variables, annotations, panels (nested rows included).
pub fn promql_dashboard_queries() -> Vec<PromqlQuery> {
    let dir = workspace().join("dashboards/prometheus");
    let mut qs = Vec::new();
    for file in FILES {
        let d = read_json(&dir.join(file));
        for v in d["templating"]["list"].as_array().into_iter().flatten() {
            if v["type"] == "query" {
                let q = v["query"]["query"]
                    .as_str()
                    .or_else(|| v["query"].as_str())
                    .unwrap_or_default();
                qs.push(PromqlQuery {
                    file: file.to_string(),
                    what: format!("variable ${}", v["name"].as_str().unwrap_or_default()),
                    query: q.to_string(),
                    panel: false,
                    instant: true,
                });
            }
        }
        for a in d["annotations"]["list"].as_array().into_iter().flatten() {
            if let Some(e) = a["expr"].as_str() {
                qs.push(PromqlQuery {
                    file: file.to_string(),
                    what: format!("annotation {}", a["name"]),
                    query: e.to_string(),
                    panel: true,
                    instant: false,
                });
            }
        }
        let mut panels = Vec::new();
        walk_panels(
            d["panels"].as_array().map_or(&[], Vec::as_slice),
            &mut panels,
        );
        for p in panels {
            for t in p["targets"].as_array().into_iter().flatten() {
                qs.push(PromqlQuery {
                    file: file.to_string(),
                    what: format!("panel {} query {}", p["title"], t["refId"]),
                    query: t["expr"].as_str().unwrap_or_default().to_string(),
                    panel: true,
                    instant: t["instant"] == true,
                });
            }
        }
    }
    qs
}

/// Seconds of a Grafana interval (`10s`, `5m`, `1h`, `1d`); 0 when it is not one.
pub fn interval_seconds(interval: &str) -> u64 {
    let digits = interval.trim_end_matches(|c: char| c.is_ascii_alphabetic());
    let n: u64 = digits.parse().unwrap_or(0);
    let unit = match &interval[digits.len()..] {
        "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        _ => 0,
    };
    n * unit
}

/// The scrape interval the dashboards assume (= the agent's report interval).
pub const SCRAPE_INTERVAL_S: u64 = 10;

/// Grafana's expansion of a query of the Prometheus dashboards for host `host` (`$host`), every
/// site, device and virtual-drive device ("All": `.*`), panel interval `interval`
/// (`$__interval`), `$__rate_interval` as Grafana makes it with a 10 s scrape interval
/// (max(interval + scrape interval, 4 × scrape interval)) and a range of a quarter hour
/// (`$__range`, see [`expand_promql_range`]).
pub fn expand_promql(query: &str, host: &str, interval: &str) -> String {
    expand_promql_range(query, host, interval, "15m")
}

/// [`expand_promql`] with the dashboard's time range `range` (`$__range`, e.g. `15m`, `6h`).
pub fn expand_promql_range(query: &str, host: &str, interval: &str, range: &str) -> String {
    let i = interval_seconds(interval);
    let rate = (i + SCRAPE_INTERVAL_S).max(4 * SCRAPE_INTERVAL_S);
    query
        .replace("$__rate_interval", &format!("{rate}s"))
        .replace("$__interval", interval)
        .replace("$__range", range)
        .replace("$site", ".*")
        .replace("$device", ".*")
        .replace("$vd_device", ".*")
        .replace("$host", host)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expansion() {
        let q = r#"max_over_time(x{site=~"$site",host=~"$host",device=~"$device"}[$__interval]) + rate(y[$__rate_interval]) + z[$__range]"#;
        assert_eq!(
            expand_promql(q, "h1", "30s"),
            r#"max_over_time(x{site=~".*",host=~"h1",device=~".*"}[30s]) + rate(y[40s]) + z[15m]"#
        );
        assert!(expand_promql("rate(y[$__rate_interval])", "h", "1m").contains("[70s]"));
    }
}
