//! The dashboards for a Prometheus datasource (`dashboards/prometheus/*.json`), generated from
//! the InfluxQL ones (`dashboards/*.json`) and the PromQL of each of their queries
//! (`dashboards/prometheus/queries.yaml`).
//!
//! The layout has one definition: rows, panels, titles, descriptions, units, thresholds, grid
//! positions, overrides and links are the InfluxQL dashboard's. Only what differs by language
//! comes from `queries.yaml`: per panel and InfluxQL refId the PromQL targets (a table's field
//! becomes one instant query, its value column renamed to the field's name; a panel's several
//! `AS` columns become several targets), per template variable its `label_values()` query, per
//! annotation its PromQL or the reason it has none, and per panel an optional description. The
//! retention-policy variable `$rp` is dropped: resolution is the engine's.
//!
//! [`generate`] makes the dashboards; `tests/it/promql_dashboards.rs` holds the committed files to
//! it (`cargo xtask gen` writes them) and runs every query on a real Prometheus.
//! [`promql_dashboard_queries`] and [`expand_promql`] give every query of the committed files
//! with Grafana's expansion of its variables and macros, for any test that runs them.

use std::collections::BTreeMap;
use std::fmt;

use serde::Deserialize;
use serde_json::{json, Map, Value as Json};
use storwatch_test_support::workspace;

use crate::promql_files::{read_json, walk_panels_mut, FILES};
pub use crate::promql_repoint::prom_uid;
use crate::promql_repoint::{repoint_datasources, repoint_links};

/// The datasource uid the provisioning gives the Prometheus datasource.
pub const DATASOURCE_UID: &str = "storwatch-prometheus";

/// `queries.yaml`: fragments (`%{name}` in an expression) and the PromQL of each dashboard.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Definition {
    #[serde(default)]
    pub defs: BTreeMap<String, String>,
    pub dashboards: BTreeMap<String, DashboardDef>,
}

/// The PromQL of one dashboard.
#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct DashboardDef {
    /// template variable name -> `label_values(...)` query
    #[serde(default)]
    pub variables: BTreeMap<String, String>,
    /// annotation name -> its PromQL, or why it has none
    #[serde(default)]
    pub annotations: BTreeMap<String, AnnotationDef>,
    /// panel id -> InfluxQL refId -> its PromQL targets
    #[serde(default)]
    pub panels: BTreeMap<u64, PanelDef>,
}

/// One panel: the targets of each InfluxQL refId, and what else differs.
#[derive(Debug, Deserialize, Default)]
pub struct PanelDef {
    /// replaces the InfluxQL panel's description
    #[serde(default)]
    pub description: Option<String>,
    /// InfluxQL refId -> its counterpart
    #[serde(flatten)]
    pub refs: BTreeMap<String, RefDef>,
}

/// The PromQL counterpart of one InfluxQL target.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub enum RefDef {
    /// one PromQL target per column
    Targets(Vec<TargetDef>),
    /// answered by another refId's targets (say why)
    Covered { covered_by: String, reason: String },
}

/// One PromQL target.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TargetDef {
    pub expr: String,
    /// a time series' legend
    #[serde(default)]
    pub legend: Option<String>,
    /// a table's column: the value column is renamed to it
    #[serde(default)]
    pub col: Option<String>,
    /// a table's string columns, from an `_info` metric's labels: the value column is hidden
    #[serde(default)]
    pub info: bool,
    /// a state timeline's `_info` series: the label (last in the legend) that holds the state
    /// the InfluxQL panel's value mappings color; each mapping becomes an override of the series
    /// named after that state
    #[serde(default)]
    pub state: Option<String>,
}

/// An annotation's PromQL, or the reason it has none.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AnnotationDef {
    #[serde(default)]
    pub expr: Option<String>,
    #[serde(default)]
    pub title: Option<String>,
    #[serde(default)]
    pub text: Option<String>,
    #[serde(default)]
    pub tags: Option<String>,
    /// why there is no PromQL counterpart
    #[serde(default)]
    pub none: Option<String>,
}

/// What is wrong with the definition against the InfluxQL dashboards.
#[derive(Debug)]
pub struct DefinitionErrors(pub Vec<String>);

impl fmt::Display for DefinitionErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for e in &self.0 {
            writeln!(f, "{e}")?;
        }
        Ok(())
    }
}

impl std::error::Error for DefinitionErrors {}

/// `dashboards/prometheus/queries.yaml`.
pub fn definition() -> Definition {
    let path = workspace().join("dashboards/prometheus/queries.yaml");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_norway::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// `%{name}` fragments of `defs` written out (fragments may use fragments).
fn substitute(expr: &str, defs: &BTreeMap<String, String>) -> Result<String, String> {
    let mut out = expr.to_string();
    for _ in 0..8 {
        if !out.contains("%{") {
            return Ok(out);
        }
        for (k, v) in defs {
            out = out.replace(&format!("%{{{k}}}"), v);
        }
    }
    Err(format!("unknown or recursive fragment in {expr:?}"))
}

/// `s` with the characters a JavaScript regex gives a meaning escaped.
fn regex_escape(s: &str) -> String {
    let mut out = String::new();
    for c in s.chars() {
        if "\\^$.|?*+()[]{}/".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// The overrides that color a state timeline's `_info` series (value 1, the state in the series'
/// name, after `prefix`) as the InfluxQL panel's value `mappings` color the state's text.
fn state_overrides(mappings: &Json, prefix: &str) -> Vec<Json> {
    let mut out = Vec::new();
    let fixed =
        |color: &Json| json!({"id": "color", "value": {"mode": "fixed", "fixedColor": color}});
    for m in mappings.as_array().into_iter().flatten() {
        match m["type"].as_str() {
            Some("value") => {
                for (state, r) in m["options"].as_object().into_iter().flatten() {
                    out.push(json!({
                        "matcher": {"id": "byRegexp", "options": format!(".*{}{}$", regex_escape(prefix), regex_escape(state))},
                        "properties": [
                            fixed(&r["color"]),
                            {"id": "mappings", "value": [{"type": "value", "options": {"1": {"text": state, "color": r["color"], "index": 0}}}]}
                        ]
                    }));
                }
            }
            Some("regex") => {
                let pattern = m["options"]["pattern"].as_str().unwrap_or_default();
                out.push(json!({
                    "matcher": {"id": "byRegexp", "options": format!(".*{}({pattern})$", regex_escape(prefix))},
                    "properties": [fixed(&m["options"]["result"]["color"])]
                }));
            }
            _ => {}
        }
    }
    out
}

fn target(refid: &str, t: &TargetDef, expr: String, table: bool) -> Json {
    let mut m = Map::new();
    m.insert("refId".into(), json!(refid));
    m.insert(
        "datasource".into(),
        json!({"type": "prometheus", "uid": "${DS_STORWATCH}"}),
    );
    m.insert("editorMode".into(), json!("code"));
    m.insert("expr".into(), json!(expr));
    if table {
        m.insert("format".into(), json!("table"));
        m.insert("instant".into(), json!(true));
        m.insert("range".into(), json!(false));
        m.insert("legendFormat".into(), json!("__auto"));
    } else {
        m.insert("format".into(), json!("time_series"));
        m.insert("instant".into(), json!(false));
        m.insert("range".into(), json!(true));
        m.insert(
            "legendFormat".into(),
            json!(t.legend.clone().unwrap_or_else(|| "__auto".into())),
        );
    }
    Json::Object(m)
}

/// The Prometheus twin of one InfluxQL dashboard, or what the definition lacks or names wrongly.
pub fn generate_one(
    file: &str,
    influx: &Json,
    def: &DashboardDef,
    defs: &BTreeMap<String, String>,
    uids: &[String],
) -> Result<Json, Vec<String>> {
    let mut errors = Vec::new();
    let mut d = influx.clone();
    let uid = influx["uid"].as_str().unwrap_or_default().to_string();
    d["uid"] = json!(prom_uid(&uid));
    d["title"] = json!(format!(
        "{} (Prometheus)",
        influx["title"].as_str().unwrap_or_default()
    ));
    if let Some(tags) = d["tags"].as_array_mut() {
        tags.push(json!("prometheus"));
    }
    d["__inputs"] = json!([{
        "name": "DS_STORWATCH",
        "label": "storwatch Prometheus",
        "description": "the Prometheus (or Prometheus-compatible engine) that scrapes the agents' /metrics, PromQL",
        "type": "datasource",
        "pluginId": "prometheus",
        "pluginName": "Prometheus"
    }]);
    if let Some(req) = d["__requires"].as_array_mut() {
        for r in req.iter_mut() {
            if r["id"] == "influxdb" {
                *r = json!({"type": "datasource", "id": "prometheus", "name": "Prometheus", "version": "1.0.0"});
            }
        }
    }
    // dashboard links: the Prometheus set only
    if let Some(links) = d["links"].as_array_mut() {
        for l in links.iter_mut() {
            if let Some(tags) = l.get_mut("tags").and_then(Json::as_array_mut) {
                tags.push(json!("prometheus"));
            }
        }
    }
    repoint_datasources(&mut d);
    repoint_links(&mut d, uids);
    let ex = |e: &str, errors: &mut Vec<String>| match substitute(e, defs) {
        Ok(s) => s,
        Err(msg) => {
            errors.push(format!("{file}: {msg}"));
            e.to_string()
        }
    };

    // template variables: $rp dropped, the datasource Prometheus, queries label_values()
    let mut seen_vars = Vec::new();
    let mut vars = Vec::new();
    for v in influx["templating"]["list"]
        .as_array()
        .into_iter()
        .flatten()
    {
        let name = v["name"].as_str().unwrap_or_default();
        if name == "rp" {
            continue;
        }
        let mut v = v.clone();
        repoint_datasources(&mut v);
        if v["type"] == "datasource" {
            v["query"] = json!("prometheus");
            v["label"] = json!("Prometheus");
            v["current"] =
                json!({"selected": true, "text": "storwatch Prometheus", "value": DATASOURCE_UID});
        } else if v["type"] == "query" {
            seen_vars.push(name.to_string());
            match def.variables.get(name) {
                Some(q) => {
                    let q = ex(q, &mut errors);
                    v["query"] =
                        json!({"query": q, "refId": "PrometheusVariableQueryEditor-VariableQuery"});
                    v["definition"] = json!(q);
                }
                None => errors.push(format!("{file}: variable ${name} has no PromQL")),
            }
        }
        vars.push(v);
    }
    for name in def.variables.keys() {
        if !seen_vars.contains(name) {
            errors.push(format!(
                "{file}: variable ${name} is not in the InfluxQL dashboard"
            ));
        }
    }
    d["templating"]["list"] = Json::Array(vars);

    // annotations
    let mut seen_ann = Vec::new();
    let mut anns = Vec::new();
    for a in influx["annotations"]["list"]
        .as_array()
        .into_iter()
        .flatten()
    {
        if !a["query"].is_string() {
            anns.push(a.clone());
            continue;
        }
        let name = a["name"].as_str().unwrap_or_default().to_string();
        seen_ann.push(name.clone());
        match def.annotations.get(&name) {
            Some(AnnotationDef {
                expr: Some(e),
                title,
                text,
                tags,
                none: None,
            }) => {
                let mut m = Map::new();
                m.insert("name".into(), json!(name));
                m.insert(
                    "datasource".into(),
                    json!({"type": "prometheus", "uid": "${DS_STORWATCH}"}),
                );
                m.insert("enable".into(), a["enable"].clone());
                m.insert("iconColor".into(), a["iconColor"].clone());
                m.insert("expr".into(), json!(ex(e, &mut errors)));
                m.insert("step".into(), json!("10s"));
                m.insert(
                    "titleFormat".into(),
                    json!(title.clone().unwrap_or_default()),
                );
                m.insert("textFormat".into(), json!(text.clone().unwrap_or_default()));
                m.insert("tagKeys".into(), json!(tags.clone().unwrap_or_default()));
                m.insert("useValueForTime".into(), json!(false));
                anns.push(Json::Object(m));
            }
            Some(AnnotationDef {
                expr: None,
                none: Some(_),
                ..
            }) => {}
            Some(_) => errors.push(format!(
                "{file}: annotation {name:?}: give either expr or none (the reason)"
            )),
            None => errors.push(format!("{file}: annotation {name:?} has no PromQL")),
        }
    }
    for name in def.annotations.keys() {
        if !seen_ann.contains(name) {
            errors.push(format!(
                "{file}: annotation {name:?} is not in the InfluxQL dashboard"
            ));
        }
    }
    d["annotations"]["list"] = Json::Array(anns);

    // panels
    let mut seen_panels = Vec::new();
    if let Some(panels) = d["panels"].as_array_mut() {
        walk_panels_mut(panels, &mut |p| {
            let id = p["id"].as_u64().unwrap_or_default();
            let title = p["title"].as_str().unwrap_or_default().to_string();
            let Some(old) = p.get("targets").and_then(Json::as_array).cloned() else {
                return;
            };
            seen_panels.push(id);
            let Some(pdef) = def.panels.get(&id) else {
                errors.push(format!("{file}: panel {id} {title:?} has no PromQL"));
                return;
            };
            if let Some(desc) = &pdef.description {
                p["description"] = json!(desc);
            }
            let table = p["type"] == "table";
            let mut targets = Vec::new();
            let mut rename = Map::new();
            let mut exclude = Map::new();
            let old_refs: Vec<String> = old
                .iter()
                .map(|t| t["refId"].as_str().unwrap_or_default().to_string())
                .collect();
            for r in &old_refs {
                match pdef.refs.get(r) {
                    None => errors.push(format!(
                        "{file}: panel {id} {title:?} query {r:?} has no PromQL"
                    )),
                    Some(RefDef::Covered { covered_by, .. }) => {
                        if !old_refs.contains(covered_by) || covered_by == r {
                            errors.push(format!(
                                "{file}: panel {id} {title:?} query {r:?}: covered_by {covered_by:?} is not another query of the panel"
                            ));
                        }
                    }
                    Some(RefDef::Targets(ts)) => {
                        if ts.is_empty() {
                            errors.push(format!(
                                "{file}: panel {id} {title:?} query {r:?}: no targets"
                            ));
                        }
                        for (i, t) in ts.iter().enumerate() {
                            let refid = match (&t.col, t.info) {
                                (Some(c), _) if table => format!("{r}_{c}"),
                                (_, true) if table => format!("{r}_info{}", i + 1),
                                _ if ts.len() == 1 => r.clone(),
                                _ => format!("{r}{}", i + 1),
                            };
                            if table {
                                match (&t.col, t.info) {
                                    (Some(c), false) => {
                                        rename.insert(format!("Value #{refid}"), json!(c));
                                    }
                                    (None, true) => {
                                        exclude.insert(format!("Value #{refid}"), json!(true));
                                    }
                                    _ => errors.push(format!(
                                        "{file}: panel {id} {title:?} query {r:?}: a table's target needs col or info"
                                    )),
                                }
                            }
                            let e = ex(&t.expr, &mut errors);
                            targets.push(target(&refid, t, e, table));
                            if let Some(label) = &t.state {
                                let legend = t.legend.as_deref().unwrap_or_default();
                                match legend.strip_suffix(&format!("{{{{{label}}}}}")) {
                                    Some(rest) => {
                                        let prefix = rest.rsplit("}}").next().unwrap_or_default();
                                        let extra = state_overrides(
                                            &p["fieldConfig"]["defaults"]["mappings"],
                                            prefix,
                                        );
                                        if let Some(o) = p["fieldConfig"]["overrides"].as_array_mut() {
                                            o.extend(extra);
                                        }
                                    }
                                    None => errors.push(format!(
                                        "{file}: panel {id} {title:?} query {r:?}: the legend must end with {{{{{label}}}}}"
                                    )),
                                }
                            }
                        }
                    }
                }
            }
            for r in pdef.refs.keys() {
                if !old_refs.contains(r) {
                    errors.push(format!("{file}: panel {id} {title:?} has no query {r:?}"));
                }
            }
            if table {
                if targets.len() == 1 {
                    let only = targets[0]["refId"].as_str().unwrap_or_default().to_string();
                    if let Some(c) = rename.remove(&format!("Value #{only}")) {
                        rename.insert("Value".into(), c);
                    }
                    if exclude.remove(&format!("Value #{only}")).is_some() {
                        exclude.insert("Value".into(), json!(true));
                    }
                }
                for l in ["Time", "__name__", "job", "instance"] {
                    exclude.insert(l.into(), json!(true));
                }
                let exprs = targets.iter().filter_map(|t| t["expr"].as_str());
                for (from, to) in crate::promql_labels::table_label_renames(exprs) {
                    rename.insert(from, json!(to));
                }
                let mut trans: Vec<Json> =
                    p["transformations"].as_array().cloned().unwrap_or_default();
                let merge_at = trans.iter().position(|t| t["id"] == "merge");
                let organize = json!({"id": "organize", "options": {
                    "excludeByName": exclude, "renameByName": rename, "indexByName": {}}});
                match merge_at {
                    Some(i) => trans.insert(i + 1, organize),
                    None => {
                        trans.insert(0, organize);
                        trans.insert(0, json!({"id": "merge", "options": {}}));
                    }
                }
                p["transformations"] = Json::Array(trans);
            } else if p.get("interval").is_none() {
                // the scrape (= report) interval: a range shorter than it may hold no sample
                p["interval"] = json!("10s");
            }
            p["targets"] = Json::Array(targets);
        });
    }
    for id in def.panels.keys() {
        if !seen_panels.contains(id) {
            errors.push(format!(
                "{file}: panel {id} is not a panel with queries of the InfluxQL dashboard"
            ));
        }
    }
    if errors.is_empty() {
        Ok(d)
    } else {
        Err(errors)
    }
}

/// Every Prometheus dashboard as it should be committed: file name and pretty JSON.
pub fn generate() -> Result<Vec<(String, String)>, DefinitionErrors> {
    let def = definition();
    let dir = workspace().join("dashboards");
    let influx: Vec<(String, Json)> = FILES
        .iter()
        .map(|f| (f.to_string(), read_json(&dir.join(f))))
        .collect();
    let uids: Vec<String> = influx
        .iter()
        .filter_map(|(_, d)| d["uid"].as_str().map(str::to_string))
        .collect();
    let mut errors = Vec::new();
    for name in def.dashboards.keys() {
        if !FILES.contains(&name.as_str()) {
            errors.push(format!("{name}: not a dashboard of dashboards/"));
        }
    }
    let empty = DashboardDef::default();
    let mut out = Vec::new();
    for (file, d) in &influx {
        let ddef = def.dashboards.get(file).unwrap_or(&empty);
        match generate_one(file, d, ddef, &def.defs, &uids) {
            Ok(j) => {
                let mut text = serde_json::to_string_pretty(&j).unwrap_or_default();
                text.push('\n');
                out.push((file.clone(), text));
            }
            Err(e) => errors.extend(e),
        }
    }
    if errors.is_empty() {
        Ok(out)
    } else {
        Err(DefinitionErrors(errors))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fragments() {
        let defs = BTreeMap::from([
            ("a".to_string(), "x{%{b}}".to_string()),
            ("b".to_string(), "host=~\"$host\"".to_string()),
        ]);
        assert_eq!(
            substitute("max(%{a})", &defs).unwrap(),
            "max(x{host=~\"$host\"})"
        );
        assert!(substitute("%{nope}", &defs).is_err());
    }

    fn influx() -> Json {
        json!({
            "uid": "storwatch-x", "title": "storwatch / X", "tags": ["storwatch"],
            "__inputs": [], "__requires": [{"type": "datasource", "id": "influxdb"}],
            "links": [{"type": "dashboards", "tags": ["storwatch"]}],
            "templating": {"list": [
                {"name": "DS_STORWATCH", "type": "datasource", "query": "influxdb"},
                {"name": "rp", "type": "custom", "query": "raw,rp_1m,rp_1h"},
                {"name": "host", "type": "query", "datasource": {"type": "influxdb", "uid": "${DS_STORWATCH}"},
                 "query": "SHOW TAG VALUES FROM \"agent\" WITH KEY = \"host\""}]},
            "annotations": {"list": [
                {"name": "storage events", "query": "SELECT \"text\" FROM \"$rp\".\"event\"", "enable": true, "iconColor": "red"}]},
            "panels": [
                {"type": "row", "id": 1, "title": "r", "panels": []},
                {"type": "timeseries", "id": 2, "title": "t", "links": [{"url": "/d/storwatch-x?var-rp=$rp"}],
                 "datasource": {"type": "influxdb", "uid": "${DS_STORWATCH}"},
                 "targets": [{"refId": "A", "query": "SELECT 1"}, {"refId": "B", "query": "SELECT 2"}]},
                {"type": "table", "id": 3, "title": "tab",
                 "transformations": [{"id": "sortBy", "options": {}}],
                 "targets": [{"refId": "A", "query": "SELECT 3"}]}]
        })
    }

    fn gen(def: &str) -> Result<Json, Vec<String>> {
        let def: DashboardDef = serde_norway::from_str(def).unwrap();
        let defs = BTreeMap::from([("h".to_string(), "host=~\"$host\"".to_string())]);
        generate_one(
            "x.json",
            &influx(),
            &def,
            &defs,
            &["storwatch-x".to_string()],
        )
    }

    const FULL: &str = r#"
variables: {host: 'label_values(up{%{h}}, host)'}
annotations: {storage events: {none: 'events are not on /metrics'}}
panels:
  2:
    A: [{expr: 'a{%{h}}', legend: '{{device}} a'}, {expr: 'b', legend: 'b'}]
    B: {covered_by: A, reason: 'one query'}
  3:
    A: [{col: x, expr: 'x'}, {info: true, expr: 'y_info'}]
"#;

    #[test]
    fn a_complete_definition_makes_the_twin() {
        let d = gen(FULL).unwrap();
        assert_eq!(d["uid"], "storwatch-x-prom");
        assert_eq!(d["title"], "storwatch / X (Prometheus)");
        let vars = d["templating"]["list"].as_array().unwrap();
        assert_eq!(vars.len(), 2, "$rp dropped: {vars:?}");
        assert_eq!(vars[0]["current"]["value"], DATASOURCE_UID);
        assert_eq!(
            vars[1]["definition"],
            "label_values(up{host=~\"$host\"}, host)"
        );
        assert_eq!(d["annotations"]["list"].as_array().unwrap().len(), 0);
        let p = &d["panels"][1];
        assert_eq!(p["targets"][0]["refId"], "A1");
        assert_eq!(p["targets"][0]["expr"], "a{host=~\"$host\"}");
        assert_eq!(p["targets"][1]["legendFormat"], "b");
        assert_eq!(p["datasource"]["type"], "prometheus");
        assert_eq!(p["links"][0]["url"], "/d/storwatch-x-prom");
        let t = &d["panels"][2];
        assert_eq!(t["targets"][0]["instant"], true);
        assert_eq!(t["targets"][0]["format"], "table");
        assert_eq!(t["transformations"][0]["id"], "merge");
        assert_eq!(
            t["transformations"][1]["options"]["renameByName"]["Value #A_x"],
            "x"
        );
        assert_eq!(
            t["transformations"][1]["options"]["excludeByName"]["Value #A_info2"],
            true
        );
        assert_eq!(t["transformations"][2]["id"], "sortBy");
        assert!(!serde_json::to_string(&d).unwrap().contains("influxdb"));
    }

    #[test]
    fn a_state_timeline_colors_each_state_as_the_influxql_mappings() {
        let mappings = json!([
            {"type": "value", "options": {"failed": {"color": "red", "index": 0}, "a.b": {"color": "green", "index": 1}}},
            {"type": "regex", "options": {"pattern": ".*WT.*", "result": {"color": "orange", "index": 2}}}
        ]);
        let o = state_overrides(&mappings, " cache ");
        assert_eq!(o.len(), 3);
        let by_name: BTreeMap<String, &Json> = o
            .iter()
            .map(|x| (x["matcher"]["options"].as_str().unwrap().to_string(), x))
            .collect();
        let f = by_name[".* cache failed$"];
        assert_eq!(f["properties"][0]["value"]["fixedColor"], "red");
        assert_eq!(
            f["properties"][1]["value"][0]["options"]["1"]["text"],
            "failed"
        );
        assert!(by_name.contains_key(".* cache a\\.b$"));
        assert!(by_name.contains_key(".* cache (.*WT.*)$"));
    }

    #[test]
    fn what_the_definition_lacks_or_names_wrongly_is_an_error() {
        let cases = [
            (
                FULL.replace("    B: {covered_by: A, reason: 'one query'}\n", ""),
                r#"panel 2 "t" query "B" has no PromQL"#,
            ),
            (FULL.replace("covered_by: A", "covered_by: B"), "covered_by"),
            (
                FULL.replace("  3:\n    A: [", "  9:\n    A: ["),
                "panel 9 is not",
            ),
            (
                FULL.replace(
                    "  3:\n    A: [",
                    "  3:\n    C: [{col: z, expr: z}]\n    A: [",
                ),
                r#"has no query "C""#,
            ),
            (
                FULL.replace("{col: x, expr: 'x'}", "{expr: 'x'}"),
                "needs col or info",
            ),
            (
                FULL.replace("variables: {host", "variables: {hosts"),
                "variable $host has no PromQL",
            ),
            (
                FULL.replace("storage events: {none", "other: {none"),
                r#"annotation "storage events" has no PromQL"#,
            ),
            (
                FULL.replace("a{%{h}}", "a{%{nope}}"),
                "unknown or recursive fragment",
            ),
        ];
        for (def, want) in cases {
            let errors = gen(&def).expect_err(want);
            assert!(
                errors.iter().any(|e| e.contains(want)),
                "{want}: {errors:?}"
            );
        }
    }
}
