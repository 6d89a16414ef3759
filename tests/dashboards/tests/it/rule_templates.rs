//! The Grafana rules' templates expand on every evaluation, not only while firing.
//!
//! Grafana expands a rule's annotations and labels for each result of each evaluation, with
//! `$values` holding the reduce/math/threshold values of that result. A result without values —
//! no data (a filesystem that is not filling has no `time_to_full_s`, a device with no 24 h
//! baseline yet, a collector not yet heartbeating), or an error — has no `$values.B`, and
//! `{{ humanizeDuration $values.B.Value }}` then fails: "can't convert <nil> to float". Grafana
//! logs "Error in expanding template" and keeps the template's raw text as the annotation, so an
//! error notification (execErrState Error) goes out with `{{ … }}` for its summary. Seen on
//! Grafana 12.4 (docs/deploy.md, "Grafana versions verified").
//!
//! So a value is written `{{ with $values.B }}{{ humanize .Value }}{{ else }}?{{ end }}`: `with`
//! takes a missing value as false. The Prometheus rule generator reads that form
//! (`tests/dashboards/src/promql_rules.rs`).

#![allow(clippy::unwrap_used)]

use std::path::PathBuf;

use serde_norway::Value as Yaml;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The `$values` references of template `t` that are not the `with $values.X` guard, or a
/// description of a malformed template.
fn unguarded_values(t: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = t;
    while let Some(open) = rest.find("{{") {
        let Some(close) = rest[open..].find("}}") else {
            out.push(format!("unclosed {{{{ in {t:?}"));
            break;
        };
        let action = rest[open + 2..open + close].trim().trim_matches('-').trim();
        rest = &rest[open + close + 2..];
        if !action.contains("$values") {
            continue;
        }
        let words: Vec<&str> = action.split_whitespace().collect();
        let guard = matches!(words.as_slice(), ["with", v] if v.strip_prefix("$values.").is_some_and(|r| !r.is_empty() && !r.contains('.')));
        if !guard {
            out.push(format!("{{{{ {action} }}}}"));
        }
    }
    out
}

#[test]
fn unguarded_values_are_found() {
    assert_eq!(
        unguarded_values("{{ $labels.host }} for {{ humanizeDuration $values.B.Value }}"),
        ["{{ humanizeDuration $values.B.Value }}"]
    );
    assert_eq!(
        unguarded_values("{{ $values.B.Value }} path(s)"),
        ["{{ $values.B.Value }}"]
    );
    assert!(unguarded_values(
        "{{ $labels.host }} for {{ with $values.B }}{{ humanizeDuration .Value }}{{ else }}?{{ end }}"
    )
    .is_empty());
    assert_eq!(
        unguarded_values("{{ with $values.B.Value }}x{{ end }}"),
        ["{{ with $values.B.Value }}"]
    );
    assert!(unguarded_values("no template").is_empty());
}

#[test]
fn rule_templates_expand_without_values() {
    let text = std::fs::read_to_string(root().join("alerts/storwatch-rules.yaml")).unwrap();
    let doc: Yaml = serde_norway::from_str(&text).unwrap();
    let mut errs = Vec::new();
    let mut n = 0;
    for g in doc["groups"].as_sequence().into_iter().flatten() {
        for r in g["rules"].as_sequence().into_iter().flatten() {
            n += 1;
            let uid = r["uid"].as_str().unwrap_or("?");
            for what in ["annotations", "labels"] {
                for (k, v) in r[what].as_mapping().into_iter().flatten() {
                    for bad in unguarded_values(v.as_str().unwrap_or("")) {
                        errs.push(format!(
                            "{uid}: {what} {}: {bad} fails when the evaluation has no value (no data, error); write {{{{ with $values.X }}}}…{{{{ .Value }}}}…{{{{ else }}}}?{{{{ end }}}}",
                            k.as_str().unwrap_or("?")
                        ));
                    }
                }
            }
        }
    }
    assert!(n >= 30, "only {n} rules read");
    assert!(errs.is_empty(), "{}", errs.join("\n"));
}
