//! The rollups of the three InfluxDB versions, from each measurement's `rollups` in the
//! contract:
//! * 1.x: the retention policies and continuous queries of `deploy/influxdb/setup.influxql`
//!   (the comments before the first continuous query stay hand-written);
//! * 2.x: one task per continuous query, `deploy/influxdb/v2/tasks/<level>_<measurement>.flux`;
//! * 3.x: the `ROLLUPS` table of the Processing Engine plugin
//!   `deploy/influxdb/v3/storwatch_rollups.py`, between its `GENERATED` markers.

use std::fmt::Write as _;
use std::path::Path;

use storwatch_contract::{Contract, RetentionPolicy, Rollup};

use crate::Output;

pub(crate) const SETUP: &str = "deploy/influxdb/setup.influxql";
pub(crate) const TASKS_DIR: &str = "deploy/influxdb/v2/tasks";
pub(crate) const PLUGIN: &str = "deploy/influxdb/v3/storwatch_rollups.py";
const DB: &str = "storwatch";

/// One continuous query.
struct Cq<'a> {
    /// `1m`, `1h`
    level: &'a str,
    from_rp: &'a str,
    into: &'a RetentionPolicy,
    measurement: &'a str,
    comment: Option<&'a str>,
    calls: Vec<Rollup>,
}

impl Cq<'_> {
    fn name(&self) -> String {
        format!("cq_{}_{}", self.level, self.measurement)
    }
}

fn queries(c: &Contract) -> Result<Vec<Cq<'_>>, String> {
    let rps = &c.common.retention_policies;
    let mut out = Vec::new();
    for (i, into) in rps.iter().enumerate().skip(1) {
        let level = into
            .interval
            .as_deref()
            .ok_or_else(|| format!("contract/common.yaml: {} has no interval", into.name))?;
        for name in &c.common.rollup_order {
            let m = c
                .measurement(name)
                .ok_or_else(|| format!("rollup_order: no measurement {name}"))?;
            let calls = m.rollups_at(&into.name)?;
            if calls.is_empty() {
                continue;
            }
            out.push(Cq {
                level,
                from_rp: &rps[i - 1].name,
                into,
                measurement: &m.name,
                comment: if i == 1 {
                    m.rollup_comment.as_deref()
                } else {
                    None
                },
                calls,
            });
        }
    }
    Ok(out)
}

fn influxql(cq: &Cq<'_>) -> String {
    let mut s = String::new();
    if let Some(c) = cq.comment {
        s.push_str(c);
        s.push('\n');
    }
    let rp = cq.into;
    let _ = writeln!(s, "CREATE CONTINUOUS QUERY \"{}\" ON \"{DB}\"", cq.name());
    let _ = writeln!(
        s,
        "RESAMPLE EVERY {} FOR {}",
        rp.every.as_deref().unwrap_or_default(),
        rp.for_.as_deref().unwrap_or_default()
    );
    s.push_str("BEGIN\n  SELECT\n");
    let calls: Vec<String> = cq
        .calls
        .iter()
        .map(|r| format!("    {}(\"{}\") AS \"{}\"", r.func, r.source, r.output))
        .collect();
    s.push_str(&calls.join(",\n"));
    s.push('\n');
    let _ = writeln!(s, "  INTO \"{DB}\".\"{}\".\"{}\"", rp.name, cq.measurement);
    let _ = writeln!(
        s,
        "  FROM \"{DB}\".\"{}\".\"{}\"",
        cq.from_rp, cq.measurement
    );
    let _ = writeln!(s, "  GROUP BY time({}), *", cq.level);
    s.push_str("END;\n");
    s
}

fn retention_policy(rp: &RetentionPolicy, default: bool) -> String {
    format!(
        "CREATE RETENTION POLICY \"{}\" ON \"{DB}\" DURATION {} REPLICATION 1 SHARD DURATION {}{};",
        rp.name,
        rp.duration,
        rp.shard,
        if default { " DEFAULT" } else { "" }
    )
}

/// setup.influxql: its hand-written head (retention policy lines made again), then every
/// continuous query.
fn setup(old: &str, c: &Contract, cqs: &[Cq<'_>]) -> Result<String, String> {
    let head_end = old
        .find("CREATE CONTINUOUS QUERY")
        .ok_or_else(|| format!("{SETUP}: no continuous query to start from"))?;
    let mut rps = c.common.retention_policies.iter().enumerate();
    let mut out = String::new();
    for line in old[..head_end].split_inclusive('\n') {
        if line.starts_with("CREATE RETENTION POLICY ") {
            let (i, rp) = rps
                .next()
                .ok_or_else(|| format!("{SETUP}: more retention policies than the contract"))?;
            out.push_str(&retention_policy(rp, i == 0));
            out.push('\n');
        } else {
            out.push_str(line);
        }
    }
    if rps.next().is_some() {
        return Err(format!(
            "{SETUP}: fewer CREATE RETENTION POLICY lines than the contract's policies"
        ));
    }
    let body: Vec<String> = cqs.iter().map(influxql).collect();
    out.push_str(&body.join("\n"));
    Ok(out)
}

/// One InfluxDB 2.x task: the same window, schedule, source, target and fields.
fn flux(cq: &Cq<'_>) -> String {
    let mut plain: Vec<(&str, Vec<&str>)> = Vec::new();
    let mut renamed: Vec<&Rollup> = Vec::new();
    for r in &cq.calls {
        if r.source == r.output {
            match plain.iter_mut().find(|(f, _)| *f == r.func) {
                Some((_, v)) => v.push(&r.source),
                None => plain.push((&r.func, vec![&r.source])),
            }
        } else {
            renamed.push(r);
        }
    }
    // The 1 h level runs one minute after the hour so that the 1 min rollup of the hour's last
    // minute exists; offset delays the run without moving the window (now() is still the hour).
    let offset = if cq.level == "1h" { "1m" } else { "0s" };
    let (name, m, from, into) = (cq.name(), cq.measurement, cq.from_rp, &cq.into.name);
    let every = cq.into.every.as_deref().unwrap_or_default();
    let for_ = cq.into.for_.as_deref().unwrap_or_default();
    let mut s = String::new();
    let _ = writeln!(
        s,
        "// storwatch: {name} of {SETUP} as an InfluxDB 2.x task."
    );
    let _ = writeln!(
        s,
        "// \"{m}\" in {DB}/{from} -> {level} windows -> \"{m}\" in {DB}/{into}, every {every} over the last {for_}.",
        level = cq.level
    );
    s.push_str("// Generated from contract/*.yaml by `cargo xtask gen`: edit the contract, not this file.\n");
    let _ = writeln!(
        s,
        "option task = {{name: \"storwatch_{}\", every: {every}, offset: {offset}}}",
        &name[3..]
    );
    s.push('\n');
    let _ = writeln!(s, "data = from(bucket: \"{DB}/{from}\")");
    let _ = writeln!(s, "    |> range(start: -{for_})");
    let _ = writeln!(s, "    |> filter(fn: (r) => r._measurement == \"{m}\")");
    s.push('\n');
    s.push_str(
        "// One aggregate over the fields named; the window's start is the row's time, as in\n\
         // InfluxQL, and every tag is kept (to() writes the string columns as tags: GROUP BY *).\n\
         rollup = (tables=<-, fields, fn) =>\n    tables\n\
         \x20       |> filter(fn: (r) => contains(value: r._field, set: fields))\n",
    );
    let _ = writeln!(
        s,
        "        |> aggregateWindow(every: {}, fn: fn, timeSrc: \"_start\", createEmpty: false)",
        cq.level
    );
    s.push_str("\nunion(\n    tables: [\n");
    for (func, fields) in &plain {
        let names: Vec<String> = fields.iter().map(|f| format!("\"{f}\"")).collect();
        let _ = writeln!(
            s,
            "        data |> rollup(fields: [{}], fn: {func}),",
            names.join(", ")
        );
    }
    for r in renamed {
        let _ = writeln!(
            s,
            "        data |> rollup(fields: [\"{}\"], fn: {}) |> map(fn: (r) => ({{r with _field: \"{}\"}})),",
            r.source, r.func, r.output
        );
    }
    let _ = writeln!(s, "    ],\n)\n    |> to(bucket: \"{DB}/{into}\")");
    s
}

/// The plugin's `ROLLUPS = [...]`.
fn plugin_table(cqs: &[Cq<'_>]) -> String {
    let mut s = String::from("ROLLUPS = [\n");
    for cq in cqs {
        let _ = writeln!(
            s,
            "    (\"{}\", \"{}\", \"{}\", \"{}\", \"{}\", [",
            cq.level, cq.from_rp, cq.measurement, cq.into.name, cq.measurement
        );
        for r in &cq.calls {
            let _ = writeln!(
                s,
                "        (\"{}\", \"{}\", \"{}\"),",
                r.func, r.source, r.output
            );
        }
        s.push_str("    ]),\n");
    }
    s.push_str("]\n");
    s
}

fn plugin(old: &str, cqs: &[Cq<'_>]) -> Result<String, String> {
    let (begin, end) = ("# BEGIN GENERATED ROLLUPS\n", "# END GENERATED ROLLUPS\n");
    let (head, rest) = old
        .split_once(begin)
        .ok_or_else(|| format!("{PLUGIN}: no {begin:?}"))?;
    let (_, tail) = rest
        .split_once(end)
        .ok_or_else(|| format!("{PLUGIN}: no {end:?}"))?;
    Ok(format!("{head}{begin}{}{end}{tail}", plugin_table(cqs)))
}

pub(crate) fn outputs(root: &Path, c: &Contract) -> Result<Vec<Output>, String> {
    let read = |p: &str| std::fs::read_to_string(root.join(p)).map_err(|e| format!("{p}: {e}"));
    let cqs = queries(c)?;
    let mut out = vec![
        Output {
            path: SETUP.to_string(),
            text: setup(&read(SETUP)?, c, &cqs)?,
        },
        Output {
            path: PLUGIN.to_string(),
            text: plugin(&read(PLUGIN)?, &cqs)?,
        },
    ];
    for cq in &cqs {
        out.push(Output {
            path: format!("{TASKS_DIR}/{}.flux", &cq.name()[3..]),
            text: flux(cq),
        });
    }
    Ok(out)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_renamed_aggregate_is_a_map_in_flux_and_an_alias_in_influxql() {
        let c = Contract::workspace();
        let cqs = queries(&c).unwrap();
        let disk = cqs.iter().find(|q| q.name() == "cq_1m_disk").unwrap();
        let q = influxql(disk);
        assert!(
            q.contains("    max(\"util_pct\") AS \"util_pct_10s_max\""),
            "{q}"
        );
        assert!(q.ends_with("  GROUP BY time(1m), *\nEND;\n"));
        let f = flux(disk);
        assert!(
            f.contains("map(fn: (r) => ({r with _field: \"util_pct_10s_max\"}))"),
            "{f}"
        );
        assert!(f.contains("offset: 0s"));
        let hourly = cqs.iter().find(|q| q.name() == "cq_1h_disk").unwrap();
        assert!(flux(hourly).contains("offset: 1m"));
        assert!(influxql(hourly).contains("FROM \"storwatch\".\"rp_1m\".\"disk\""));
    }

    #[test]
    fn the_plugin_keeps_what_is_outside_its_markers() {
        let c = Contract::workspace();
        let cqs = queries(&c).unwrap();
        let old = "head\n# BEGIN GENERATED ROLLUPS\nold\n# END GENERATED ROLLUPS\ntail\n";
        let new = plugin(old, &cqs).unwrap();
        assert!(new.starts_with("head\n# BEGIN GENERATED ROLLUPS\nROLLUPS = [\n"));
        assert!(new.ends_with("]\n# END GENERATED ROLLUPS\ntail\n"));
        assert!(plugin("no markers", &cqs).is_err());
    }
}
