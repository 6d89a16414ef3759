//! The Prometheus rule file `alerts/prometheus/storwatch-rules.yml`, generated from one
//! definition: each Grafana rule of `alerts/storwatch-rules.yaml` gives an alerting rule its
//! name (the Grafana uid), group (`storwatch: ` and the Grafana group's name) and group interval, `for`, `severity` and `object` labels and
//! its summary, description and runbook; `alerts/prometheus/expressions.yaml` gives its PromQL
//! (by uid), and the recording rules, each placed at the start of a group.
//!
//! Grafana's templates become Prometheus's: `{{ .Labels.x }}` in labels is `{{ $labels.x }}`
//! (and a label that only copies the series' own, `host: '{{ .Labels.host }}'`, is left to the
//! series); `{{ $values.B.Value }}` is `{{ $value }}` and `{{ humanize $values.B.Value }}` is
//! `{{ $value | humanize }}` when `B` is the value the expression returns (the ref the
//! condition's threshold reads, or the entry's `value`); a summary that names another value
//! needs a `summary` of its own in expressions.yaml, or the generator refuses it.

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::path::Path;

use serde_norway::Value as Yaml;

/// The Grafana rules, relative to the workspace.
pub const GRAFANA_RULES: &str = "alerts/storwatch-rules.yaml";
/// The PromQL of each rule and the recording rules.
pub const EXPRESSIONS: &str = "alerts/prometheus/expressions.yaml";
/// The generated Prometheus rule file.
pub const RULES_FILE: &str = "alerts/prometheus/storwatch-rules.yml";

/// A recording rule.
#[derive(Debug, Clone, PartialEq)]
pub struct Recording {
    pub record: String,
    pub expr: String,
}

/// An alerting rule.
#[derive(Debug, Clone, PartialEq)]
pub struct Alert {
    /// the Grafana rule's uid
    pub alert: String,
    pub expr: String,
    /// Grafana's pending period, as written there (`5m`, `0s`)
    pub for_: String,
    pub labels: Vec<(String, String)>,
    pub annotations: Vec<(String, String)>,
}

/// A rule group: a Grafana group's name and interval, its recording rules, then its alerts.
#[derive(Debug, Clone, PartialEq)]
pub struct Group {
    pub name: String,
    pub interval: String,
    pub recording: Vec<Recording>,
    pub alerts: Vec<Alert>,
}

fn text<'a>(v: &'a Yaml, what: &str, problems: &mut Vec<String>) -> &'a str {
    match v.as_str() {
        Some(s) => s,
        None => {
            problems.push(format!("{what}: missing or not a string"));
            ""
        }
    }
}

/// `{{ with $values.X }}{{ f .Value }}{{ else }}…{{ end }}`, the form a Grafana template needs
/// for a value that an evaluation without data or with an error lacks
/// (`tests/dashboards/tests/it/rule_templates.rs`), as `{{ f $values.X.Value }}`. Any other
/// `with $values.X` block is an error.
fn unguard(t: &str) -> Result<String, String> {
    const OPEN: &str = "{{ with $values.";
    let bad = || {
        format!(
            "{t:?}: a `with $values.X` block other than \
             {{{{ with $values.X }}}}{{{{ [f] .Value }}}}[{{{{ else }}}}text]{{{{ end }}}}"
        )
    };
    let mut out = String::new();
    let mut rest = t;
    while let Some(i) = rest.find(OPEN) {
        out.push_str(&rest[..i]);
        let after = &rest[i + OPEN.len()..];
        let close = after.find("}}").ok_or_else(bad)?;
        let r = after[..close].trim();
        let body = after[close + 2..].strip_prefix("{{").ok_or_else(bad)?;
        let vclose = body.find("}}").ok_or_else(bad)?;
        let words: Vec<&str> = body[..vclose].split_whitespace().collect();
        let value = match words.as_slice() {
            [".Value"] => format!("{{{{ $values.{r}.Value }}}}"),
            [f, ".Value"] => format!("{{{{ {f} $values.{r}.Value }}}}"),
            _ => return Err(bad()),
        };
        let mut tail = &body[vclose + 2..];
        if let Some(e) = tail.strip_prefix("{{ else }}") {
            tail = &e[e.find("{{").ok_or_else(bad)?..];
        }
        rest = tail.strip_prefix("{{ end }}").ok_or_else(bad)?;
        out.push_str(&value);
    }
    out.push_str(rest);
    Ok(out)
}

/// Grafana's template `t` in Prometheus's: `.Labels.` is `$labels.`, and `$values.<r>.Value`
/// with `r` = `value_ref` is `$value` (a function applied to it becomes a pipe; the guarded
/// `{{ with $values.<r> }}` form too, as Prometheus's `$value` is always there). Another ref is
/// an error.
pub fn prom_template(t: &str, value_ref: Option<&str>) -> Result<String, String> {
    let t = &unguard(t)?;
    let mut out = String::new();
    let mut rest = t.as_str();
    while let Some(open) = rest.find("{{") {
        out.push_str(&rest[..open]);
        let Some(close) = rest[open..].find("}}") else {
            return Err(format!("unclosed {{{{ in {t:?}"));
        };
        let action = rest[open + 2..open + close].trim();
        rest = &rest[open + close + 2..];
        let action = action.replace(".Labels.", "$labels.");
        let words: Vec<&str> = action.split_whitespace().collect();
        fn is_value(w: &str) -> Option<&str> {
            w.strip_prefix("$values.")?.strip_suffix(".Value")
        }
        match words.as_slice() {
            [w] if is_value(w).is_some() => {
                let r = is_value(w).unwrap_or_default();
                if Some(r) != value_ref {
                    return Err(format!(
                        "{t:?} names ${r}, the expression returns {value_ref:?}"
                    ));
                }
                out.push_str("{{ $value }}");
            }
            [f, w] if is_value(w).is_some() => {
                let r = is_value(w).unwrap_or_default();
                if Some(r) != value_ref {
                    return Err(format!(
                        "{t:?} names ${r}, the expression returns {value_ref:?}"
                    ));
                }
                let _ = write!(out, "{{{{ $value | {f} }}}}");
            }
            _ if action.contains("$values.") => {
                return Err(format!("{t:?}: {action:?} not translated"));
            }
            _ => {
                let _ = write!(out, "{{{{ {action} }}}}");
            }
        }
    }
    out.push_str(rest);
    Ok(out)
}

/// The ref whose value a Grafana rule's condition reads: the input of its threshold
/// expression; `None` for a math condition.
fn condition_input(rule: &Yaml) -> Option<String> {
    let cond = rule["condition"].as_str()?;
    let node = rule["data"]
        .as_sequence()?
        .iter()
        .find(|d| d["refId"].as_str() == Some(cond))?;
    (node["model"]["type"].as_str() == Some("threshold"))
        .then(|| node["model"]["expression"].as_str().map(str::to_string))
        .flatten()
}

/// The rule groups from the two files under `root`, or every problem found: a Grafana rule
/// without an expression, an expression without a Grafana rule, a recording rule in a group
/// that does not exist, a template that cannot be translated.
pub fn rule_groups(root: &Path) -> Result<Vec<Group>, Vec<String>> {
    let read = |p: &str| -> Result<Yaml, Vec<String>> {
        let s = std::fs::read_to_string(root.join(p)).map_err(|e| vec![format!("{p}: {e}")])?;
        serde_norway::from_str(&s).map_err(|e| vec![format!("{p}: {e}")])
    };
    let grafana = read(GRAFANA_RULES)?;
    let exprs = read(EXPRESSIONS)?;
    let mut problems = Vec::new();
    let entries = exprs["rules"].as_mapping().cloned().unwrap_or_default();
    let mut used = BTreeSet::new();
    let mut groups = Vec::new();
    for g in grafana["groups"].as_sequence().into_iter().flatten() {
        let name = text(&g["name"], "a Grafana group's name", &mut problems).to_string();
        let mut group = Group {
            interval: text(&g["interval"], &format!("{name}: interval"), &mut problems).to_string(),
            name,
            recording: Vec::new(),
            alerts: Vec::new(),
        };
        for r in g["rules"].as_sequence().into_iter().flatten() {
            let uid = text(&r["uid"], "a Grafana rule's uid", &mut problems).to_string();
            let Some(entry) = entries.get(uid.as_str()) else {
                problems.push(format!("{uid}: no expression in {EXPRESSIONS}"));
                continue;
            };
            used.insert(uid.clone());
            if let Some(m) = entry.as_mapping() {
                for k in m.keys() {
                    let k = k.as_str().unwrap_or_default();
                    if !["expr", "value", "summary"].contains(&k) {
                        problems.push(format!("{uid}: unknown key {k:?} in {EXPRESSIONS}"));
                    }
                }
            }
            let expr = text(&entry["expr"], &format!("{uid}: expr"), &mut problems);
            let value_ref = entry["value"]
                .as_str()
                .map(str::to_string)
                .or_else(|| condition_input(r));
            let mut annotations = Vec::new();
            for key in ["summary", "description", "runbook_url"] {
                let own = (key == "summary")
                    .then(|| entry["summary"].as_str())
                    .flatten();
                let t = match own {
                    Some(s) => Ok(s.to_string()),
                    None => prom_template(
                        text(
                            &r["annotations"][key],
                            &format!("{uid}: {key}"),
                            &mut problems,
                        ),
                        value_ref.as_deref(),
                    ),
                };
                match t {
                    Ok(t) => annotations.push((key.to_string(), t)),
                    Err(e) => problems.push(format!("{uid}: {key}: {e}")),
                }
            }
            let mut labels = Vec::new();
            for (k, v) in r["labels"].as_mapping().into_iter().flatten() {
                let (Some(k), Some(v)) = (k.as_str(), v.as_str()) else {
                    problems.push(format!("{uid}: a label that is not a string"));
                    continue;
                };
                // the series carries the tag itself
                if v == format!("{{{{ .Labels.{k} }}}}") {
                    continue;
                }
                match prom_template(v, None) {
                    Ok(t) => labels.push((k.to_string(), t)),
                    Err(e) => problems.push(format!("{uid}: label {k}: {e}")),
                }
            }
            group.alerts.push(Alert {
                alert: uid.clone(),
                expr: expr.trim_end().to_string(),
                for_: text(&r["for"], &format!("{uid}: for"), &mut problems).to_string(),
                labels,
                annotations,
            });
        }
        groups.push(group);
    }
    for k in entries.keys() {
        let k = k.as_str().unwrap_or_default();
        if !used.contains(k) {
            problems.push(format!(
                "{EXPRESSIONS}: {k} has no Grafana rule in {GRAFANA_RULES}"
            ));
        }
    }
    for rec in exprs["recording"].as_sequence().into_iter().flatten() {
        let record = text(&rec["record"], "a recording rule's record", &mut problems);
        let group = text(&rec["group"], &format!("{record}: group"), &mut problems);
        let expr = text(&rec["expr"], &format!("{record}: expr"), &mut problems);
        match groups.iter_mut().find(|g| g.name == group) {
            Some(g) => g.recording.push(Recording {
                record: record.to_string(),
                expr: expr.trim_end().to_string(),
            }),
            None => problems.push(format!("{record}: no group {group:?} in {GRAFANA_RULES}")),
        }
    }
    if problems.is_empty() {
        Ok(groups)
    } else {
        Err(problems)
    }
}

/// A YAML scalar: plain when that cannot be misread, else single-quoted.
fn scalar(s: &str) -> String {
    let plain = s.chars().next().is_some_and(|c| c.is_ascii_alphanumeric())
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./".contains(c))
        && s.parse::<f64>().is_err()
        && !["true", "false", "null", "yes", "no", "on", "off", "y", "n"]
            .contains(&s.to_ascii_lowercase().as_str());
    if plain {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', "''"))
    }
}

/// `key: value` at `indent`, a multi-line value as a literal block.
fn field(out: &mut String, indent: &str, key: &str, value: &str) {
    if value.contains('\n') {
        let _ = writeln!(out, "{indent}{key}: |-");
        for line in value.lines() {
            if line.is_empty() {
                out.push('\n');
            } else {
                let _ = writeln!(out, "{indent}  {line}");
            }
        }
    } else {
        let _ = writeln!(out, "{indent}{key}: {}", scalar(value));
    }
}

/// A Prometheus group's name: the Grafana group's, which Grafana shows under the folder
/// `storwatch`, with `storwatch: ` before it, as Prometheus (and Grafana's list of a Prometheus
/// datasource's rules) shows a group with only its rule file's path above it.
pub fn prom_group_name(grafana_group: &str) -> String {
    format!("storwatch: {grafana_group}")
}

/// The rule file's text.
pub fn render(groups: &[Group]) -> String {
    let mut out = String::from(
        "# storwatch's alert rules for Prometheus: GENERATED, do not edit. One alerting rule per\n\
         # Grafana rule of alerts/storwatch-rules.yaml (name = its uid; group, interval, `for`,\n\
         # labels and annotations from there), the PromQL from alerts/prometheus/expressions.yaml;\n\
         # regenerate with `cargo xtask gen`. Load it with `rule_files:` in prometheus.yml\n\
         # (docs/prometheus.md); it expects the agents scraped with `job_name: storwatch` every 10 s.\n\
         groups:\n",
    );
    for g in groups {
        let _ = writeln!(out, "- name: {}", scalar(&prom_group_name(&g.name)));
        let _ = writeln!(out, "  interval: {}", scalar(&g.interval));
        out.push_str("  rules:\n");
        for r in &g.recording {
            let _ = writeln!(out, "  - record: {}", scalar(&r.record));
            field(&mut out, "    ", "expr", &r.expr);
        }
        for a in &g.alerts {
            let _ = writeln!(out, "  - alert: {}", scalar(&a.alert));
            field(&mut out, "    ", "expr", &a.expr);
            let _ = writeln!(out, "    for: {}", scalar(&a.for_));
            out.push_str("    labels:\n");
            for (k, v) in &a.labels {
                field(&mut out, "      ", k, v);
            }
            out.push_str("    annotations:\n");
            for (k, v) in &a.annotations {
                field(&mut out, "      ", k, v);
            }
        }
    }
    out
}

/// The rule file the definitions under `root` make.
pub fn generate(root: &Path) -> Result<String, Vec<String>> {
    rule_groups(root).map(|g| render(&g))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn templates_become_prometheus_ones() {
        let t = "{{ $labels.device }} on {{ $labels.host }}: {{ humanize $values.B.Value }} % ({{ $values.B.Value }})";
        assert_eq!(
            prom_template(t, Some("B")).unwrap(),
            "{{ $labels.device }} on {{ $labels.host }}: {{ $value | humanize }} % ({{ $value }})"
        );
        assert!(prom_template("{{ $values.RB.Value }}", Some("RA")).is_err());
        assert!(prom_template("{{ $values.B.Value }}", None).is_err());
        assert_eq!(
            prom_template(
                "{{ .Labels.array }}{{ if .Labels.vdev }}{{ .Labels.pool }}/{{ .Labels.vdev }}{{ end }}",
                None
            )
            .unwrap(),
            "{{ $labels.array }}{{ if $labels.vdev }}{{ $labels.pool }}/{{ $labels.vdev }}{{ end }}"
        );
        assert!(prom_template("{{ $labels.x", None).is_err());
    }

    #[test]
    fn guarded_values_become_prometheus_ones() {
        let t = "{{ $labels.host }} for {{ with $values.B }}{{ humanizeDuration .Value }}{{ else }}?{{ end }} ({{ with $values.B }}{{ .Value }}{{ end }})";
        assert_eq!(
            prom_template(t, Some("B")).unwrap(),
            "{{ $labels.host }} for {{ $value | humanizeDuration }} ({{ $value }})"
        );
        assert!(prom_template("{{ with $values.RB }}{{ .Value }}{{ end }}", Some("RA")).is_err());
        assert!(prom_template("{{ with $values.B }}{{ .Labels.x }}{{ end }}", Some("B")).is_err());
        assert!(prom_template("{{ with $values.B }}{{ .Value }}", Some("B")).is_err());
    }

    #[test]
    fn scalars_quote_what_yaml_would_misread() {
        assert_eq!(scalar("storwatch-disks"), "storwatch-disks");
        assert_eq!(
            scalar("alerts/runbooks/md-degraded.md"),
            "alerts/runbooks/md-degraded.md"
        );
        assert_eq!(scalar("5m"), "5m");
        assert_eq!(scalar("50"), "'50'");
        assert_eq!(scalar("off"), "'off'");
        assert_eq!(scalar("it's: {{ x }}"), "'it''s: {{ x }}'");
        assert_eq!(scalar("storwatch:a:b"), "'storwatch:a:b'");
    }
}
