//! `cargo xtask gen` writes every generated file of the workspace from its source;
//! `cargo xtask check` fails when one has drifted, and on the shape rules.
//!
//! Generated from the metric contract (`contract/*.yaml`, crate `storwatch-contract`):
//! * the field tables of `docs/metrics*.md`, between their `<!-- generated from … -->` markers
//!   (the prose around them stays hand-written) — [`docs`];
//! * the HELP table of the agent's `/metrics` (`agent/src/prometheus/help.rs`) — [`help`];
//! * the rollups of the three InfluxDB versions: the continuous queries of
//!   `deploy/influxdb/setup.influxql`, the 2.x tasks `deploy/influxdb/v2/tasks/*.flux` and the
//!   3.x plugin's table in `deploy/influxdb/v3/storwatch_rollups.py` — [`influx`].
//!
//! And from their own definitions, by the generators of `storwatch-dashboards-tests`: the
//! PromQL dashboards and alert rules — [`promql`].
//!
//! `check` also holds the Prometheus names of the contract to the ones the agent's exposition
//! and the collector's remote write make (`storwatch_wire::prom`), and enforces the shape
//! rules ([`shape`]): no non-test source file over 600 lines, no import cycle between the
//! modules of a crate, no upward import between the agent's layers; and that the agent's
//! dependencies have the same features built alone as with the workspace ([`features`]).

mod docs;
mod features;
mod help;
mod hot_text;
mod influx;
mod promql;
mod shape;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use storwatch_contract::{Contract, FieldType};

/// A generated file: its path in the workspace and its whole text.
#[derive(Debug)]
pub(crate) struct Output {
    pub(crate) path: String,
    pub(crate) text: String,
}

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map_or_else(|| PathBuf::from("."), Path::to_path_buf)
}

/// Everything generated: from the contract, and the PromQL dashboards and rules.
fn outputs(root: &Path, c: &Contract) -> Result<Vec<Output>, String> {
    let mut out = docs::outputs(root, c)?;
    out.push(help::output(c));
    out.extend(influx::outputs(root, c)?);
    out.extend(promql::outputs(root)?);
    Ok(out)
}

/// Files in the generated directories that no output names (a task of a measurement that lost
/// its rollups).
fn stale(root: &Path, outs: &[Output]) -> Vec<String> {
    let dir = influx::TASKS_DIR;
    let Ok(entries) = std::fs::read_dir(root.join(dir)) else {
        return Vec::new();
    };
    let mut stale: Vec<String> = entries
        .filter_map(Result::ok)
        .map(|e| format!("{dir}/{}", e.file_name().to_string_lossy()))
        .filter(|p| p.ends_with(".flux") && !outs.iter().any(|o| o.path == *p))
        .collect();
    stale.sort();
    stale
}

/// The contract's Prometheus names against the ones `storwatch_wire::prom` makes (the agent's
/// `/metrics` and the collector's remote write): a renamed field, or a changed naming rule,
/// shows here.
fn prom_name_problems(c: &Contract) -> Vec<String> {
    let mut errs = Vec::new();
    for m in c.measurements() {
        let base = storwatch_wire::prom::metric_name(&m.name);
        for f in &m.fields {
            let (want, kind) = if f.ty == FieldType::String {
                (format!("{base}_info"), "info label")
            } else {
                let name = format!(
                    "{base}_{}",
                    storwatch_wire::prom::field_metric(&m.name, &f.name).0
                );
                let kind = if name.ends_with("_total") {
                    "counter"
                } else {
                    "gauge"
                };
                (name, kind)
            };
            if f.prom != want || f.prom_type != kind {
                errs.push(format!(
                    "{}.{}: the contract says {} ({}), storwatch_wire::prom makes {want} ({kind})",
                    m.name, f.name, f.prom, f.prom_type
                ));
            }
        }
    }
    errs
}

fn gen(root: &Path) -> Result<(), String> {
    let c = Contract::load(&root.join("contract"))?;
    let outs = outputs(root, &c)?;
    let mut written = 0;
    for o in &outs {
        let path = root.join(&o.path);
        if std::fs::read_to_string(&path).ok().as_deref() != Some(o.text.as_str()) {
            std::fs::write(&path, &o.text).map_err(|e| format!("{}: {e}", o.path))?;
            println!("wrote {}", o.path);
            written += 1;
        }
    }
    for s in stale(root, &outs) {
        std::fs::remove_file(root.join(&s)).map_err(|e| format!("{s}: {e}"))?;
        println!("removed {s}");
    }
    println!(
        "xtask gen: {} files from the contract, {written} changed",
        outs.len()
    );
    Ok(())
}

fn check(root: &Path) -> Vec<String> {
    let c = match Contract::load(&root.join("contract")) {
        Ok(c) => c,
        Err(e) => return vec![e],
    };
    let mut errs = Vec::new();
    match outputs(root, &c) {
        Ok(outs) => {
            for o in &outs {
                let now = std::fs::read_to_string(root.join(&o.path)).unwrap_or_default();
                if now != o.text {
                    errs.push(format!(
                        "{} is not what the contract makes{}: run `cargo xtask gen`",
                        o.path,
                        first_difference(&now, &o.text)
                    ));
                }
            }
            for s in stale(root, &outs) {
                errs.push(format!(
                    "{s} is generated by nothing: run `cargo xtask gen`"
                ));
            }
        }
        Err(e) => errs.push(e),
    }
    errs.extend(docs::unmentioned(root, &c));
    errs.extend(prom_name_problems(&c));
    errs.extend(shape::problems(root));
    errs.extend(hot_text::problems(root));
    errs.extend(features::problems(root));
    errs
}

/// ` (line N: "…" where the contract makes "…")`, or "" when one is a prefix of the other.
fn first_difference(now: &str, want: &str) -> String {
    let (a, b): (Vec<&str>, Vec<&str>) = (now.lines().collect(), want.lines().collect());
    for i in 0..a.len().max(b.len()) {
        let (x, y) = (
            a.get(i).copied().unwrap_or(""),
            b.get(i).copied().unwrap_or(""),
        );
        if x != y {
            let cut = |s: &str| s.chars().take(100).collect::<String>();
            return format!(
                " (line {}: {:?} where the contract makes {:?})",
                i + 1,
                cut(x),
                cut(y)
            );
        }
    }
    String::new()
}

fn main() -> ExitCode {
    let root = workspace();
    match std::env::args().nth(1).as_deref() {
        Some("gen") => match gen(&root) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("xtask gen: {e}");
                ExitCode::FAILURE
            }
        },
        Some("check") => {
            let errs = check(&root);
            for e in &errs {
                eprintln!("{e}");
            }
            if errs.is_empty() {
                println!("xtask check: generated files match their sources; shape rules hold");
                ExitCode::SUCCESS
            } else {
                eprintln!("xtask check: {} problems", errs.len());
                ExitCode::FAILURE
            }
        }
        _ => {
            eprintln!("usage: cargo xtask gen | check");
            ExitCode::from(2)
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_prometheus_name_the_wire_spells_otherwise_is_named() {
        let mut c = Contract::workspace();
        assert!(prom_name_problems(&c).is_empty());
        let f = c.domains[0].measurements[0].fields.first_mut().unwrap();
        f.prom = "storwatch_wrong".to_string();
        let errs = prom_name_problems(&c);
        assert_eq!(errs.len(), 1, "{errs:?}");
        assert!(errs[0].contains("storwatch_wrong"), "{errs:?}");
    }

    #[test]
    fn the_first_difference_is_shown() {
        assert_eq!(
            first_difference("a\nb\n", "a\nc\n"),
            " (line 2: \"b\" where the contract makes \"c\")"
        );
        assert_eq!(first_difference("a\n", "a\n"), "");
    }
}
