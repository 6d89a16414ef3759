//! The metric contract: every measurement storwatch writes, with its tags and fields, each
//! field's type, unit, meaning, Prometheus name, type and HELP, the alert rules that read it,
//! the rollups that keep it and the configuration that turns it on.
//!
//! The contract is data: `contract/common.yaml` (the tags on every line, the retention
//! policies) and one file per domain (`contract/host.yaml`, `md.yaml`, …), each naming the
//! document whose tables it generates. `cargo xtask gen` writes from it the field tables of
//! `docs/metrics*.md`, the HELP table of the agent's `/metrics`, and the rollups of the three
//! InfluxDB versions; `cargo xtask check` fails when any of them has drifted. The dashboards'
//! and rules' lint reads it, and a test runs the agent on every simulated scenario and fails on
//! a name the contract lacks.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde::Deserialize;

/// The whole contract.
#[derive(Debug, Clone)]
pub struct Contract {
    pub common: Common,
    /// The domain files, sorted by file name.
    pub domains: Vec<Domain>,
}

/// `contract/common.yaml`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Common {
    /// Tags on every line the agent writes (`host` and the usual `[tags]`).
    pub tags: Vec<Tag>,
    /// InfluxDB retention policies, finest first; the first is where writes land.
    pub retention_policies: Vec<RetentionPolicy>,
    /// The order of the continuous queries.
    pub rollup_order: Vec<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RetentionPolicy {
    pub name: String,
    pub duration: String,
    pub shard: String,
    /// The rollup's `GROUP BY time()`; absent for the raw level.
    pub interval: Option<String>,
    /// How often its continuous query runs, and over how far back.
    pub every: Option<String>,
    #[serde(rename = "for")]
    pub for_: Option<String>,
}

/// One `contract/<domain>.yaml`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Domain {
    /// The file, relative to the workspace (`contract/md.yaml`); set when loaded.
    #[serde(skip)]
    pub file: String,
    /// The document whose tables this file generates (`docs/metrics-md.md`).
    pub doc: String,
    pub measurements: Vec<Measurement>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Measurement {
    pub name: String,
    /// When a line is written (`one line per array`).
    pub what: String,
    /// The configuration that turns it on.
    pub enabled_by: String,
    /// Its own tags (the common ones not repeated).
    #[serde(default)]
    pub tags: Vec<Tag>,
    pub fields: Vec<Field>,
    /// Per retention policy, the continuous query's aggregates in order: `"mean util_pct"`,
    /// `"max util_pct as util_pct_10s_max"`.
    #[serde(default)]
    pub rollups: BTreeMap<String, Vec<String>>,
    /// A comment put before the measurement's first continuous query.
    pub rollup_comment: Option<String>,
    /// The tables of its document, as rows of names.
    #[serde(default)]
    pub tables: Vec<Table>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Tag {
    pub name: String,
    pub meaning: String,
    /// Example values, where the document has a column for them.
    pub unit: Option<String>,
    /// Where the value comes from, where the document has a column for it.
    pub source: Option<String>,
}

/// A field's line-protocol type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FieldType {
    Float,
    Integer,
    String,
    Boolean,
}

impl FieldType {
    pub fn as_str(self) -> &'static str {
        match self {
            FieldType::Float => "float",
            FieldType::Integer => "integer",
            FieldType::String => "string",
            FieldType::Boolean => "boolean",
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Field {
    pub name: String,
    #[serde(rename = "type")]
    pub ty: FieldType,
    /// The type column as the document writes it, when it says more than the type
    /// (`integer, °C`, `bool`).
    pub doc_type: Option<String>,
    /// The unit, as the document writes it (`ms`, `KiB/s`, `—`).
    pub unit: Option<String>,
    /// One line a sysadmin learns from (Markdown).
    pub meaning: String,
    /// The document's meaning cell when it is not `meaning` (an empty cell).
    pub doc_meaning: Option<String>,
    /// Where the value comes from, where the document has a column for it.
    pub source: Option<String>,
    /// The Prometheus metric: `storwatch_<measurement>_<field in base units>`, or for a string
    /// field the `_info` metric whose label it is.
    pub prom: String,
    /// `gauge`, `counter`, or `info label`.
    pub prom_type: String,
    /// The HELP line of the metric (numeric fields).
    pub help: Option<String>,
    /// The Grafana alert rules (uids) that read it.
    #[serde(default)]
    pub alerts: Vec<String>,
}

/// A table of a document: its header, and per row either one name (its cells are that tag's
/// or field's attributes, by `columns`) or cells as written (a row of several names, or a
/// heading row).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Table {
    pub header: String,
    pub separator: String,
    /// What each column shows: `kind` (the word `tag` or `field`), `name`, `type`, `unit`,
    /// `meaning`, `source`.
    pub columns: Vec<String>,
    pub rows: Vec<Row>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Row {
    pub tag: Option<String>,
    pub field: Option<String>,
    /// The cells as written, for a row that is not one name.
    pub cells: Option<Vec<String>>,
    /// The names such a row declares.
    #[serde(default)]
    pub tags: Vec<String>,
    #[serde(default)]
    pub fields: Vec<String>,
}

/// One aggregate of a continuous query.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rollup {
    /// `mean`, `max`, `min`, `sum`, `last`.
    pub func: String,
    pub source: String,
    pub output: String,
}

impl Rollup {
    /// `"mean util_pct"` or `"max util_pct as util_pct_10s_max"`.
    pub fn parse(s: &str) -> Result<Rollup, String> {
        let words: Vec<&str> = s.split_whitespace().collect();
        let (func, source, output) = match words[..] {
            [f, s] => (f, s, s),
            [f, s, "as", o] => (f, s, o),
            _ => {
                return Err(format!(
                    "rollup {s:?}: expected \"fn field\" or \"fn field as name\""
                ))
            }
        };
        if !matches!(func, "mean" | "max" | "min" | "sum" | "last") {
            return Err(format!(
                "rollup {s:?}: {func} is not mean, max, min, sum or last"
            ));
        }
        Ok(Rollup {
            func: func.to_string(),
            source: source.to_string(),
            output: output.to_string(),
        })
    }
}

impl Measurement {
    pub fn field(&self, name: &str) -> Option<&Field> {
        self.fields.iter().find(|f| f.name == name)
    }

    pub fn tag(&self, name: &str) -> Option<&Tag> {
        self.tags.iter().find(|t| t.name == name)
    }

    /// The continuous query's aggregates at retention policy `rp`, parsed.
    pub fn rollups_at(&self, rp: &str) -> Result<Vec<Rollup>, String> {
        self.rollups
            .get(rp)
            .map(|v| v.iter().map(|s| Rollup::parse(s)).collect())
            .unwrap_or(Ok(Vec::new()))
            .map_err(|e| format!("{}: {e}", self.name))
    }
}

impl Contract {
    /// The workspace's contract (`<workspace>/contract`).
    pub fn workspace_dir() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).to_path_buf()
    }

    /// Reads and checks the contract in `dir` (`common.yaml` and every other `*.yaml`).
    pub fn load(dir: &Path) -> Result<Contract, String> {
        let read =
            |p: &Path| std::fs::read_to_string(p).map_err(|e| format!("{}: {e}", p.display()));
        let common: Common = serde_norway::from_str(&read(&dir.join("common.yaml"))?)
            .map_err(|e| format!("contract/common.yaml: {e}"))?;
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .map_err(|e| format!("{}: {e}", dir.display()))?
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".yaml") && n != "common.yaml")
            .collect();
        names.sort();
        let mut domains = Vec::new();
        for n in names {
            let mut d: Domain = serde_norway::from_str(&read(&dir.join(&n))?)
                .map_err(|e| format!("contract/{n}: {e}"))?;
            d.file = format!("contract/{n}");
            domains.push(d);
        }
        let c = Contract { common, domains };
        let problems = c.problems();
        if problems.is_empty() {
            Ok(c)
        } else {
            Err(problems.join("\n"))
        }
    }

    /// The workspace's contract, or a panic naming what is wrong (for tests).
    pub fn workspace() -> Contract {
        Contract::load(&Contract::workspace_dir()).unwrap_or_else(|e| panic!("the contract: {e}"))
    }

    pub fn measurements(&self) -> impl Iterator<Item = &Measurement> {
        self.domains.iter().flat_map(|d| d.measurements.iter())
    }

    pub fn measurement(&self, name: &str) -> Option<&Measurement> {
        self.measurements().find(|m| m.name == name)
    }

    /// Whether `name` is a tag of measurement `m`: its own, or one on every line.
    pub fn is_tag(&self, m: &str, name: &str) -> bool {
        self.measurement(m).is_some_and(|x| {
            x.tag(name).is_some() || self.common.tags.iter().any(|t| t.name == name)
        })
    }

    pub fn is_field(&self, m: &str, name: &str) -> bool {
        self.measurement(m).is_some_and(|x| x.field(name).is_some())
    }

    /// The raw retention policy: where writes land.
    pub fn default_rp(&self) -> &str {
        self.common
            .retention_policies
            .first()
            .map_or("", |r| r.name.as_str())
    }

    /// What is inconsistent inside the contract: a name twice, a table row naming a name the
    /// measurement lacks or a name no row or document declares, a rollup of a field it lacks,
    /// a rollup level that is not a retention policy, a Prometheus name two numeric fields share
    /// (one family would hold both, and a sum over it count twice).
    pub fn problems(&self) -> Vec<String> {
        let mut errs = Vec::new();
        let mut seen = BTreeSet::new();
        let mut prom_names: BTreeMap<&str, String> = BTreeMap::new();
        let rps: Vec<&str> = self
            .common
            .retention_policies
            .iter()
            .map(|r| r.name.as_str())
            .collect();
        for d in &self.domains {
            for m in &d.measurements {
                let at = format!("{}: {}", d.file, m.name);
                if !seen.insert(m.name.as_str()) {
                    errs.push(format!("{at}: measurement declared twice"));
                }
                let mut names = BTreeSet::new();
                for n in m
                    .tags
                    .iter()
                    .map(|t| &t.name)
                    .chain(m.fields.iter().map(|f| &f.name))
                {
                    if !names.insert(n.as_str()) {
                        errs.push(format!("{at}: {n} declared twice"));
                    }
                }
                for f in &m.fields {
                    let numeric = f.ty != FieldType::String;
                    if numeric && !f.prom.is_empty() {
                        let here = format!("{}.{}", m.name, f.name);
                        if let Some(other) = prom_names.insert(f.prom.as_str(), here) {
                            errs.push(format!(
                                "{at}.{}: Prometheus name {} is also {other}'s",
                                f.name, f.prom
                            ));
                        }
                    }
                    if numeric && f.help.as_deref().is_none_or(str::is_empty) {
                        errs.push(format!("{at}.{}: a numeric field needs a help", f.name));
                    }
                    if f.meaning.trim().is_empty() {
                        errs.push(format!("{at}.{}: no meaning", f.name));
                    }
                }
                for t in &m.tables {
                    for r in &t.rows {
                        let named = r.tag.iter().chain(&r.tags).map(|n| (n, true));
                        let named =
                            named.chain(r.field.iter().chain(&r.fields).map(|n| (n, false)));
                        for (n, is_tag) in named {
                            let known = if is_tag {
                                m.tag(n).is_some() || self.common.tags.iter().any(|t| t.name == *n)
                            } else {
                                m.field(n).is_some()
                            };
                            if !known {
                                errs.push(format!(
                                    "{at}: a table row names {n}, which is not one of its {}",
                                    if is_tag { "tags" } else { "fields" }
                                ));
                            }
                        }
                        if r.cells.is_none() && r.tag.is_none() == r.field.is_none() {
                            errs.push(format!(
                                "{at}: a table row needs one tag, one field, or cells"
                            ));
                        }
                    }
                }
                for rp in m.rollups.keys() {
                    if !rps.contains(&rp.as_str()) || Some(&rp.as_str()) == rps.first() {
                        errs.push(format!(
                            "{at}: rollups at {rp}, which is not a rollup level ({rps:?})"
                        ));
                    }
                    match m.rollups_at(rp) {
                        Ok(calls) => {
                            for c in calls {
                                if m.field(&c.source).is_none() && !c.source.ends_with("_10s_max") {
                                    errs.push(format!(
                                        "{at}: {rp} rolls up {}, which is not one of its fields",
                                        c.source
                                    ));
                                }
                            }
                        }
                        Err(e) => errs.push(format!("{at}: {e}")),
                    }
                }
            }
        }
        for m in &self.common.rollup_order {
            if self.measurement(m).is_none_or(|x| x.rollups.is_empty()) {
                errs.push(format!(
                    "contract/common.yaml: rollup_order names {m}, which has no rollups"
                ));
            }
        }
        for m in self.measurements().filter(|m| !m.rollups.is_empty()) {
            if !self.common.rollup_order.contains(&m.name) {
                errs.push(format!(
                    "contract/common.yaml: rollup_order lacks {}",
                    m.name
                ));
            }
        }
        errs
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn the_workspace_contract_loads_and_is_consistent() {
        let c = Contract::workspace();
        assert!(c.measurements().count() >= 24);
        assert!(c.is_tag("disk", "host") && c.is_tag("disk", "device"));
        assert!(c.is_field("md", "rebuild_risk") && !c.is_field("md", "array"));
        assert_eq!(c.default_rp(), "raw");
    }

    #[test]
    fn rollup_entries_parse_and_bad_ones_are_named() {
        assert_eq!(
            Rollup::parse("max util_pct as util_pct_10s_max").unwrap(),
            Rollup {
                func: "max".into(),
                source: "util_pct".into(),
                output: "util_pct_10s_max".into()
            }
        );
        assert!(Rollup::parse("median x").unwrap_err().contains("median"));
        assert!(Rollup::parse("mean").is_err());
    }

    #[test]
    fn two_fields_with_one_prometheus_name_are_a_problem() {
        let mut c = Contract::workspace();
        let agent = c
            .domains
            .iter_mut()
            .flat_map(|d| d.measurements.iter_mut())
            .find(|m| m.name == "agent")
            .unwrap();
        let f = agent
            .fields
            .iter_mut()
            .find(|f| f.name == "source_errors")
            .unwrap();
        f.prom = "storwatch_agent_source_errors".into();
        let p = c.problems();
        assert!(
            p.iter().any(|e| e.contains(
                "agent.source_errors: Prometheus name storwatch_agent_source_errors is also agent_source.errors's"
            ) || e.contains("is also agent.source_errors's")),
            "{p:?}"
        );
    }

    #[test]
    fn a_row_naming_an_unknown_field_is_a_problem() {
        let mut c = Contract::workspace();
        let m = &mut c.domains[0].measurements[0];
        m.tables.push(Table {
            header: String::new(),
            separator: String::new(),
            columns: vec!["name".into()],
            rows: vec![Row {
                field: Some("no_such_field".into()),
                ..Row::default()
            }],
        });
        let p = c.problems();
        assert!(p.iter().any(|e| e.contains("no_such_field")), "{p:?}");
    }
}
