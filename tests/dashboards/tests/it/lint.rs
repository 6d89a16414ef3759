//! Lint of the Grafana dashboards (`dashboards/*.json`) and alert rules (`alerts/*.yaml`).
//!
//! * every file parses; dashboard and rule uids are unique;
//! * every datasource reference is the dashboards' `${DS_STORWATCH}` input/variable, the
//!   provisioned `storwatch-influxdb`, Grafana's own annotations or the expression engine;
//! * every rule's condition, and every expression's input, names a refId of the rule;
//! * every measurement, tag and field a query names is in the metric contract (`contract/*.yaml`,
//!   from which the tables of `docs/metrics*.md` are generated), and each field lists the rules
//!   that read it;
//! * template variables used in queries are defined, `$tag_x` aliases name a GROUP BY tag, and
//!   each runbook a rule points to exists;
//! * every table column is coloured by its own rule (green only for the good value of a boolean
//!   or state, no "higher is worse" list on a lower-is-worse field, no range-start Time column),
//!   no `$variable` sits where Grafana's InfluxDB frontend escapes it as a regex, and every
//!   dashboard opens on a row of stats and the list of the alerts firing.
//!
//! Every failure names the file, the panel or rule, and the offending name.
#![allow(clippy::unwrap_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde_json::{json, Value as Json};
use serde_norway::Value as Yaml;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn read(rel: &str) -> String {
    std::fs::read_to_string(root().join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

fn files(dir: &str, ext: &str) -> Vec<String> {
    let mut out: Vec<String> = std::fs::read_dir(root().join(dir))
        .unwrap_or_else(|e| panic!("{dir}: {e}"))
        .map(|e| {
            e.expect("dir entry")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .filter(|n| n.ends_with(ext))
        .map(|n| format!("{dir}/{n}"))
        .collect();
    out.sort();
    out
}

// ------------------------------------------------------------------------------------------
// The contract: measurements with their tags and fields, from contract/*.yaml.

#[derive(Debug, Default, Clone)]
struct Measurement {
    tags: BTreeSet<String>,
    fields: BTreeSet<String>,
    /// each field's type (`boolean`, `string`, `integer`, `float`)
    types: BTreeMap<String, String>,
}

#[derive(Debug, Default)]
struct Contract {
    global_tags: BTreeSet<String>,
    /// measurements the agent writes: they carry `host` and the configured tags
    agent: BTreeSet<String>,
    measurements: BTreeMap<String, Measurement>,
    /// the retention policies of the InfluxDB setup, in its order
    retention_policies: Vec<String>,
    /// the one writes land in (`raw`)
    default_rp: String,
    /// per rollup policy, per measurement: each field it keeps and the function that makes it
    /// from the finer level (`mean`, `max`, `min`, `sum`, `last`)
    rollups: BTreeMap<String, BTreeMap<String, BTreeMap<String, String>>>,
}

impl Contract {
    fn is_tag(&self, m: &str, name: &str) -> bool {
        (self.agent.contains(m) && self.global_tags.contains(name))
            || self
                .measurements
                .get(m)
                .is_some_and(|x| x.tags.contains(name))
    }
    fn is_field(&self, m: &str, name: &str) -> bool {
        self.measurements
            .get(m)
            .is_some_and(|x| x.fields.contains(name))
    }
}

/// The contract, from `contract/*.yaml` (crate `storwatch-contract`): every measurement with
/// its tags, fields and types, the retention policies, and per rollup level and measurement each
/// field it keeps with the function that makes it from the finer level. The measurements of
/// `contract/collector.yaml` are the collector's: they carry no configured tags.
fn contract() -> Contract {
    let yaml = storwatch_contract::Contract::workspace();
    let mut c = Contract {
        global_tags: yaml.common.tags.iter().map(|t| t.name.clone()).collect(),
        ..Contract::default()
    };
    for d in &yaml.domains {
        for m in &d.measurements {
            if d.file != "contract/collector.yaml" {
                c.agent.insert(m.name.clone());
            }
            let e = c.measurements.entry(m.name.clone()).or_default();
            e.tags.extend(m.tags.iter().map(|t| t.name.clone()));
            for f in &m.fields {
                e.fields.insert(f.name.clone());
                e.types.insert(f.name.clone(), f.ty.as_str().to_string());
            }
        }
    }
    let rps = &yaml.common.retention_policies;
    c.retention_policies = rps.iter().map(|r| r.name.clone()).collect();
    c.default_rp = yaml.default_rp().to_string();
    for rp in rps.iter().skip(1) {
        for m in yaml.measurements() {
            for r in m.rollups_at(&rp.name).unwrap() {
                c.rollups
                    .entry(rp.name.clone())
                    .or_default()
                    .entry(m.name.clone())
                    .or_default()
                    .insert(r.output, r.func);
            }
        }
    }
    c
}

/// The InfluxDB setup the dashboards' retention policies must exist in.
const SETUP: &str = "deploy/influxdb/setup.influxql";

#[test]
fn contract_is_read_from_its_yaml() {
    let c = contract();
    let expect = |m: &str, tags: &[&str], fields: &[&str]| {
        for t in tags {
            assert!(
                c.is_tag(m, t),
                "{m}: tag {t} missing from the parsed contract: {c:#?}"
            );
        }
        for f in fields {
            assert!(
                c.is_field(m, f),
                "{m}: field {f} missing from the parsed contract"
            );
        }
    };
    expect(
        "disk",
        &["host", "site", "device", "kind"],
        &["util_max_pct", "r_per_s", "f_per_s", "saturated_s"],
    );
    expect(
        "disk_tunables",
        &["device", "name", "kind"],
        &["read_ahead_kb", "scheduler"],
    );
    expect(
        "net",
        &["iface"],
        &["rx_bytes_per_s", "util_pct", "speed_mbps"],
    );
    expect("mem", &[], &["dirty_kb", "cached_kb"]);
    expect(
        "event",
        &["source", "object"],
        &["text", "from_state", "to_state"],
    );
    expect(
        "agent",
        &["version"],
        &["uptime_s", "devices", "interfaces"],
    );
    expect("agent_source", &["source"], &["errors", "errors_total"]);
    expect(
        "md",
        &["array", "level"],
        &["rebuild_risk", "sync_eta_s", "stalled"],
    );
    expect("md_member", &["array", "member"], &["state", "errors"]);
    // fields after a bold row of the table (`| **NVMe** | | |`)
    expect(
        "drive",
        &["device", "serial", "md", "pool"],
        &["health_ok", "pending_sectors", "media_errors", "read_ok"],
    );
    // rows that say what they name (`| tag | \`vd\` |`), two names in a row
    expect(
        "raid_vd",
        &["host", "site", "controller", "vd", "level", "device"],
        &[
            "state",
            "rebuild_risk",
            "members_at_risk",
            "write_back_active",
        ],
    );
    expect(
        "raid_pd",
        &["slot", "serial", "model"],
        &["state", "media_errors"],
    );
    assert!(!c.is_field("raid_vd", "vd") && !c.is_tag("raid_vd", "state"));
    expect(
        "mpath",
        &["map", "wwid", "vendor"],
        &["paths_lost", "on_preferred_group"],
    );
    expect(
        "mpath_path",
        &["map", "path", "group"],
        &["transitions_window", "priority"],
    );
    expect(
        "zpool",
        &["pool"],
        &["health", "capacity_over_85", "scan_eta_s"],
    );
    expect(
        "zpool_vdev",
        &["pool", "vdev", "kind", "parent"],
        &["cksum_errors", "state"],
    );
    expect(
        "collector_heartbeat",
        &["host"],
        &["last_seen_s", "age_s", "lines"],
    );
    // the InfluxDB setup: three levels, raw the default, and how each rollup makes its fields
    assert_eq!(c.retention_policies, ["raw", "rp_1m", "rp_1h"]);
    assert_eq!(c.default_rp, "raw");
    assert_eq!(
        c.rollups.keys().collect::<Vec<_>>(),
        ["rp_1h", "rp_1m"],
        "{:#?}",
        c.rollups
    );
    for (rp, ms) in &c.rollups {
        assert!(ms.len() >= 16, "{rp}: {:?}", ms.keys());
        let f = |m: &str, field: &str| ms[m].get(field).map(String::as_str);
        assert_eq!(f("disk", "util_pct"), Some("mean"), "{rp}");
        assert_eq!(f("disk", "util_max_pct"), Some("max"), "{rp}");
        assert_eq!(f("disk", "saturated_s"), Some("sum"), "{rp}");
        assert_eq!(f("disk", "util_pct_10s_max"), Some("max"), "{rp}");
        assert_eq!(f("md", "redundancy_left"), Some("min"), "{rp}");
        assert_eq!(f("md", "state"), Some("last"), "{rp}");
        assert_eq!(f("collector_heartbeat", "lines"), Some("sum"), "{rp}");
        assert_eq!(f("disk", "drqm_pct"), None, "{rp}");
    }
    // values in parentheses are not names, and a tag is not a field
    assert!(!c.is_tag("event", "mpath") && !c.is_field("event", "mpath"));
    assert!(!c.is_field("disk", "device"));
    assert!(!c.measurements.contains_key("Where"));
}

// ------------------------------------------------------------------------------------------
// InfluxQL: which measurement, tags and fields a query names.

#[derive(Debug, PartialEq)]
enum Tok {
    Ident(String),
    /// a double-quoted retention policy before a measurement: `"$rp"` in `"$rp"."disk"`
    Rp(String),
    Word(String),
    Var(String),
    Str,
    Regex,
    Punct(char),
    Op(String),
}

fn tokenize(q: &str) -> Result<Vec<Tok>, String> {
    let chars: Vec<char> = q.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    let take_until = |i: &mut usize, end: char| -> Result<String, String> {
        let start = *i + 1;
        let mut j = start;
        while j < chars.len() && chars[j] != end {
            if chars[j] == '\\' {
                j += 1;
            }
            j += 1;
        }
        if j >= chars.len() {
            return Err(format!("unterminated {end}"));
        }
        *i = j + 1;
        Ok(chars[start..j].iter().collect())
    };
    while i < chars.len() {
        let ch = chars[i];
        if ch.is_whitespace() {
            i += 1;
        } else if ch == '"' {
            let id = take_until(&mut i, '"')?;
            if chars.get(i) == Some(&'.') {
                if chars.get(i + 1) != Some(&'"') {
                    return Err(format!(
                        "the measurement after \"{id}\". must be double-quoted too"
                    ));
                }
                out.push(Tok::Rp(id));
                i += 1;
            } else {
                out.push(Tok::Ident(id));
            }
        } else if ch == '\'' {
            take_until(&mut i, '\'')?;
            out.push(Tok::Str);
        } else if ch == '/' && matches!(out.last(), Some(Tok::Op(o)) if o == "=~" || o == "!~") {
            let re = take_until(&mut i, '/')?;
            out.push(Tok::Regex);
            // template variables inside the regex (`/^$host$/`); a `$` anchor names nothing
            for part in re.split('$').skip(1) {
                let name: String = part
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                if !name.is_empty() {
                    out.push(Tok::Var(name));
                }
            }
        } else if ch == '$' {
            let start = i + 1;
            i += 1;
            while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            out.push(Tok::Var(chars[start..i].iter().collect()));
        } else if ch.is_ascii_alphanumeric() || ch == '_' || ch == '.' {
            let start = i;
            while i < chars.len()
                && (chars[i].is_ascii_alphanumeric() || chars[i] == '_' || chars[i] == '.')
            {
                i += 1;
            }
            out.push(Tok::Word(chars[start..i].iter().collect()));
        } else if "=!<>~".contains(ch) {
            let start = i;
            while i < chars.len() && "=!<>~".contains(chars[i]) {
                i += 1;
            }
            out.push(Tok::Op(chars[start..i].iter().collect()));
        } else {
            out.push(Tok::Punct(ch));
            i += 1;
        }
    }
    Ok(out)
}

const KEYWORDS: &[&str] = &[
    "select", "from", "where", "group", "by", "and", "or", "as", "fill", "none", "null",
    "previous", "linear", "true", "false", "show", "tag", "values", "with", "key", "order", "desc",
    "asc", "limit", "slimit", "time", "tz",
];

#[derive(Debug, Default)]
struct QueryNames {
    measurement: Option<String>,
    /// every measurement of the FROM clause (`FROM "md", "zpool_vdev", "raid_vd"`: an alert
    /// rule over arrays of three kinds at once, each series its own alert instance)
    measurements: Vec<String>,
    /// the retention policy named before the measurement (`$rp` for the variable), if any
    retention_policy: Option<String>,
    group_by_tags: Vec<String>,
    variables: Vec<String>,
    /// the fields and tags the SELECT reads, each with the function around it (`max`, `sum`,
    /// `count_distinct` for `count(distinct(..))`, "" when read bare)
    selected: Vec<(String, String)>,
    /// the fields and tags the WHERE clause compares
    filtered: Vec<String>,
}

/// The function call directly around token `i` (`"max"` for `max("x")`), "" when none.
fn function_around(toks: &[Tok], i: usize) -> String {
    let call = |j: Option<usize>| -> Option<String> {
        let j = j?;
        match (toks.get(j), toks.get(j + 1)) {
            (Some(Tok::Word(f)), Some(Tok::Punct('('))) => Some(f.to_ascii_lowercase()),
            _ => None,
        }
    };
    match call(i.checked_sub(2)) {
        Some(f) if f == "distinct" && call(i.checked_sub(4)).as_deref() == Some("count") => {
            "count_distinct".to_string()
        }
        Some(f) => f,
        None => String::new(),
    }
}

/// Checks one InfluxQL query against the contract; returns what it names, or the problems.
fn check_query(q: &str, c: &Contract) -> Result<QueryNames, Vec<String>> {
    let toks = tokenize(q).map_err(|e| vec![format!("cannot tokenize: {e}")])?;
    let mut errs = Vec::new();
    let mut names = QueryNames::default();
    let mut clause = "";
    let mut key: Option<String> = None;
    for (i, t) in toks.iter().enumerate() {
        let prev_word = |w: &str| matches!(i.checked_sub(1).and_then(|p| toks.get(p)), Some(Tok::Word(x)) if x.eq_ignore_ascii_case(w));
        let next_is_paren = matches!(toks.get(i + 1), Some(Tok::Punct('(')));
        match t {
            Tok::Word(w) => {
                let lw = w.to_ascii_lowercase();
                match lw.as_str() {
                    "select" => clause = "select",
                    "from" => {
                        clause = "from";
                        let named = match toks.get(i + 1) {
                            Some(Tok::Ident(_)) => true,
                            Some(Tok::Rp(_)) => matches!(toks.get(i + 2), Some(Tok::Ident(_))),
                            _ => false,
                        };
                        if !named {
                            errs.push("FROM must name one double-quoted measurement, optionally after a double-quoted retention policy (\"$rp\".\"disk\")".to_string());
                        }
                    }
                    "where" => clause = "where",
                    "by" if prev_word("group") => clause = "group",
                    "key" if prev_word("with") => clause = "key",
                    _ => {}
                }
                let numeric = w.chars().next().is_some_and(|c| c.is_ascii_digit());
                if !next_is_paren && !numeric && !KEYWORDS.contains(&lw.as_str()) {
                    errs.push(format!(
                        "unquoted identifier {w}: quote measurement, tag and field names"
                    ));
                }
            }
            Tok::Var(v) if !v.is_empty() && v != "timeFilter" && !v.starts_with("__") => {
                names.variables.push(v.clone());
            }
            Tok::Rp(rp) => {
                if !prev_word("from") {
                    errs.push(format!("retention policy \"{rp}\" is not right after FROM"));
                }
                match rp.strip_prefix('$') {
                    Some(v) => names.variables.push(v.to_string()),
                    None if !c.retention_policies.iter().any(|r| r == rp) => errs.push(format!(
                        "retention policy \"{rp}\" is not created by {SETUP} ({:?})",
                        c.retention_policies
                    )),
                    None => {}
                }
                names.retention_policy = Some(rp.clone());
            }
            Tok::Ident(id) => {
                if prev_word("as") {
                    continue;
                }
                match clause {
                    "from" => {
                        names.measurement.get_or_insert_with(|| id.clone());
                        names.measurements.push(id.clone());
                    }
                    "select" => names.selected.push((function_around(&toks, i), id.clone())),
                    "where" => names.filtered.push(id.clone()),
                    "group" => names.group_by_tags.push(id.clone()),
                    "key" => key = Some(id.clone()),
                    _ => errs.push(format!("identifier \"{id}\" outside any clause")),
                }
            }
            _ => {}
        }
    }
    if names.measurements.is_empty() {
        errs.push("no measurement (FROM \"...\")".to_string());
        return Err(errs);
    }
    let undocumented: Vec<&String> = names
        .measurements
        .iter()
        .filter(|m| !c.measurements.contains_key(*m))
        .collect();
    for m in &undocumented {
        errs.push(format!(
            "measurement \"{m}\" is not in the documented contract"
        ));
    }
    if !undocumented.is_empty() {
        return Err(errs);
    }
    // what the query selects and compares must be in each measurement it reads (a series
    // without it would be empty); a GROUP BY tag in one of them at least
    for m in &names.measurements {
        let selected = names.selected.iter().map(|(_, s)| s);
        for s in selected.chain(&names.filtered) {
            if !c.is_field(m, s) && !c.is_tag(m, s) {
                errs.push(format!("\"{s}\" is neither a field nor a tag of \"{m}\""));
            }
        }
        for (f, s) in &names.selected {
            if !f.is_empty() && c.is_tag(m, s) && !c.is_field(m, s) {
                errs.push(format!(
                    "{f}(\"{s}\"): \"{s}\" is a tag of \"{m}\" and InfluxQL functions read fields only (the column stays empty); GROUP BY it instead"
                ));
            }
        }
    }
    for t in names.group_by_tags.iter().chain(&key) {
        if !names.measurements.iter().any(|m| c.is_tag(m, t)) {
            errs.push(format!(
                "\"{t}\" is not a tag of {} (GROUP BY / WITH KEY)",
                names
                    .measurements
                    .iter()
                    .map(|m| format!("\"{m}\""))
                    .collect::<Vec<_>>()
                    .join(" or ")
            ));
        }
    }
    if errs.is_empty() {
        Ok(names)
    } else {
        Err(errs)
    }
}

/// What makes a panel or annotation query wrong at one of the levels the `$rp` variable selects:
/// it must read a measurement with rollups through `"$rp".`, and mean the same thing on the
/// 10 s reports as on the 1 min and 1 h rollups: every field it reads exists in each rollup, no
/// `count()` (it counts rows: reports on raw, minutes or hours on the rollups), `sum()` only of
/// a field the rollups sum, and such a field (seconds or events within an interval) only through
/// `sum()`.
fn rollup_problems(names: &QueryNames, c: &Contract) -> Vec<String> {
    let mut errs = Vec::new();
    let Some(m) = names.measurement.as_deref() else {
        return errs;
    };
    let levels: Vec<(&String, &BTreeMap<String, String>)> = c
        .retention_policies
        .iter()
        .filter_map(|rp| c.rollups.get(rp)?.get(m).map(|f| (rp, f)))
        .collect();
    let rp = names.retention_policy.as_deref();
    if levels.is_empty() {
        // the panel reads the 10 s reports at every level, and says so in its query
        if rp != Some(c.default_rp.as_str()) {
            errs.push(format!(
                "\"{m}\" has no rollups: write FROM \"{raw}\".\"{m}\" (the 10 s reports, whatever $rp says)",
                raw = c.default_rp
            ));
        }
        return errs;
    }
    if rp != Some("$rp") {
        errs.push(format!(
            "\"{m}\" has rollups ({}): write FROM \"$rp\".\"{m}\" so that the Resolution variable picks the level",
            levels.iter().map(|(rp, _)| rp.as_str()).collect::<Vec<_>>().join(", ")
        ));
        return errs;
    }
    let reads = names.selected.iter().map(|(f, x)| (f.as_str(), x, true));
    let reads = reads.chain(names.filtered.iter().map(|x| ("", x, false)));
    for (func, field, in_select) in reads {
        if c.is_tag(m, field) {
            continue;
        }
        for (rp, fields) in &levels {
            let Some(rolled) = fields.get(field.as_str()) else {
                errs.push(format!(
                    "\"{field}\" is not kept in {rp}.{m}: add it to the continuous query or leave the panel on raw"
                ));
                continue;
            };
            if !in_select {
                continue;
            }
            if func == "count" {
                errs.push(format!(
                    "count(\"{field}\") counts rows, which are 10 s reports on raw and {rp}'s intervals there; sum(\"interval_s\") or sum() of a counted field means the same at every level"
                ));
            } else if func == "sum" && rolled != "sum" {
                errs.push(format!(
                    "sum(\"{field}\") adds up one value per row, but {rp} keeps {rolled}() of it per interval: the total depends on the level (mean() * sum(\"interval_s\") is the amount over the range)"
                ));
            } else if rolled == "sum" && func != "sum" {
                errs.push(format!(
                    "{func}(\"{field}\"): {rp} sums \"{field}\" over its interval, so only sum() of it means the same at every level"
                ));
            }
        }
    }
    errs
}

#[test]
fn rollup_check_rejects_what_changes_meaning_with_the_level() {
    let c = contract();
    let problems = |q: &str| rollup_problems(&check_query(q, &c).expect(q), &c);
    let ok = |q: &str| assert_eq!(problems(q), Vec::<String>::new(), "{q}");
    let bad = |q: &str, needle: &str| {
        let errs = problems(q);
        assert!(errs.iter().any(|e| e.contains(needle)), "{q}: {errs:?}");
    };
    ok(
        r#"SELECT max("util_max_pct"), sum("saturated_s"), mean("util_pct") FROM "$rp"."disk" WHERE "kind" = 'disk' AND $timeFilter GROUP BY "device""#,
    );
    ok(
        r#"SELECT mean("rx_drops_per_s") * sum("interval_s") AS "d" FROM "$rp"."net" WHERE $timeFilter"#,
    );
    ok(r#"SELECT count(distinct("read_ahead_kb")) FROM "$rp"."disk_tunables" WHERE $timeFilter"#);
    ok(r#"SELECT last("state") FROM "$rp"."md_member" WHERE "state" <> 'in_sync' AND $timeFilter"#);
    // the jobs of one node are rolled up, each job's own lines are not
    ok(
        r#"SELECT max("count"), sum("started"), max("stalled"), mean("io_stall_pct") FROM "$rp"."jobs" WHERE $timeFilter"#,
    );
    ok(r#"SELECT mean("io_some_pct") FROM "raw"."job" WHERE $timeFilter GROUP BY "job""#);
    bad(
        r#"SELECT mean("io_some_pct") FROM "$rp"."job" WHERE $timeFilter"#,
        r#"write FROM "raw"."job""#,
    );
    bad(
        r#"SELECT sum("read_bytes_per_s") FROM "job_io" WHERE $timeFilter"#,
        r#"write FROM "raw"."job_io""#,
    );
    bad(
        r#"SELECT mean("io_stall_pct") FROM "jobs" WHERE $timeFilter"#,
        r#"write FROM "$rp"."jobs""#,
    );
    bad(
        r#"SELECT max("started") FROM "$rp"."jobs" WHERE $timeFilter"#,
        "only sum() of it",
    );
    bad(
        r#"SELECT max("util_max_pct") FROM "disk" WHERE $timeFilter"#,
        r#"write FROM "$rp"."disk""#,
    );
    bad(
        r#"SELECT max("util_max_pct") FROM "raw"."disk" WHERE $timeFilter"#,
        r#"write FROM "$rp"."disk""#,
    );
    bad(
        r#"SELECT count("util_pct") FROM "$rp"."disk" WHERE $timeFilter"#,
        "counts rows",
    );
    bad(
        r#"SELECT sum("rx_drops_per_s") FROM "$rp"."net" WHERE $timeFilter"#,
        "keeps mean() of it",
    );
    bad(
        r#"SELECT last("lines") FROM "$rp"."collector_heartbeat" WHERE $timeFilter"#,
        "only sum() of it",
    );
    bad(
        r#"SELECT mean("drqm_pct") FROM "$rp"."disk" WHERE $timeFilter"#,
        "not kept in rp_1m.disk",
    );
    bad(
        r#"SELECT max("util_max_pct") FROM "$rp"."disk" WHERE "drqm_pct" > 0 AND $timeFilter"#,
        "not kept in rp_1h.disk",
    );
}

#[test]
fn query_check_rejects_what_the_agent_does_not_emit() {
    let c = contract();
    let ok = r#"SELECT max("util_max_pct") AS "u" FROM "disk" WHERE "host" =~ /^$host$/ AND "kind" = 'disk' AND $timeFilter GROUP BY time($__interval), "device" fill(none)"#;
    let names = check_query(ok, &c).unwrap();
    assert_eq!(names.measurement.as_deref(), Some("disk"));
    assert_eq!(names.group_by_tags, vec!["device".to_string()]);
    assert_eq!(names.variables, vec!["host".to_string()]);
    assert_eq!(names.retention_policy, None);
    let names = check_query(&ok.replace(r#"FROM "disk""#, r#"FROM "$rp"."disk""#), &c).unwrap();
    assert_eq!(names.measurement.as_deref(), Some("disk"));
    assert_eq!(names.retention_policy.as_deref(), Some("$rp"));
    assert_eq!(names.variables, vec!["rp".to_string(), "host".to_string()]);
    assert_eq!(
        names.selected,
        vec![("max".to_string(), "util_max_pct".to_string())]
    );
    let names = check_query(&ok.replace(r#"FROM "disk""#, r#"FROM "rp_1h"."disk""#), &c).unwrap();
    assert_eq!(names.retention_policy.as_deref(), Some("rp_1h"));
    // several measurements: what is read must be in each, a GROUP BY tag in one at least
    let both = r#"SELECT max("rebuild_risk") FROM "md", "zpool_vdev" WHERE "rebuild_risk" > 0 AND $timeFilter GROUP BY "host", "array", "pool", "vdev""#;
    let names = check_query(both, &c).unwrap();
    assert_eq!(names.measurements, ["md", "zpool_vdev"]);
    let bad = |q: &str, needle: &str| {
        let errs = check_query(q, &c).expect_err(q);
        assert!(errs.iter().any(|e| e.contains(needle)), "{q}: {errs:?}");
    };
    bad(
        r#"SELECT mean("util") FROM "disk" WHERE $timeFilter"#,
        "\"util\" is neither",
    );
    bad(
        r#"SELECT mean("util_pct") FROM "disks" WHERE $timeFilter"#,
        "measurement \"disks\"",
    );
    bad(
        r#"SELECT mean("util_pct") FROM "disk" WHERE $timeFilter GROUP BY "util_max_pct""#,
        "not a tag",
    );
    bad(
        r#"SELECT mean(util_pct) FROM "disk""#,
        "unquoted identifier util_pct",
    );
    bad(
        r#"SELECT max("sync_pct") FROM "md", "zpool_vdev" WHERE $timeFilter"#,
        "\"sync_pct\" is neither a field nor a tag of \"zpool_vdev\"",
    );
    bad(
        r#"SELECT max("rebuild_risk") FROM "md", "zpool_vdev" WHERE "scan" = 'none' AND $timeFilter"#,
        "\"scan\" is neither a field nor a tag of \"md\"",
    );
    bad(
        r#"SELECT max("rebuild_risk") FROM "md", "zpool_vdev" GROUP BY "iface""#,
        "\"iface\" is not a tag of \"md\" or \"zpool_vdev\"",
    );
    bad(
        r#"SELECT max("rebuild_risk") FROM "md", "disks" GROUP BY "array""#,
        "measurement \"disks\"",
    );
    bad(
        r#"SELECT mean("age_s") FROM "collector_heartbeat" GROUP BY "iface""#,
        "\"iface\" is not a tag",
    );
    bad(
        r#"SHOW TAG VALUES FROM "net" WITH KEY = "device""#,
        "\"device\" is not a tag",
    );
    bad(
        r#"SELECT "x" FROM (SELECT mean("util_pct") AS "x" FROM "disk")"#,
        "FROM must name",
    );
    bad(
        r#"SELECT mean("util_pct") FROM "$rp".disk WHERE $timeFilter"#,
        "must be double-quoted too",
    );
    bad(
        r#"SELECT mean("util_pct") FROM "rp_10s"."disk" WHERE $timeFilter"#,
        "retention policy \"rp_10s\" is not created",
    );
    bad(
        r#"SELECT mean("util_pct") FROM "disk" WHERE "$rp"."host" = 'a' AND $timeFilter"#,
        "not right after FROM",
    );
}

// ------------------------------------------------------------------------------------------
// Dashboards

const DS_VAR: &str = "${DS_STORWATCH}";
const DS_UID: &str = "storwatch-influxdb";

fn check_datasources(v: &Json, at: &str, errs: &mut Vec<String>) {
    match v {
        Json::Object(map) => {
            for (k, x) in map {
                if k == "datasource" {
                    let ok = match x {
                        Json::String(s) => s == DS_VAR || s == DS_UID,
                        Json::Object(o) => {
                            let uid = o.get("uid").and_then(Json::as_str).unwrap_or("");
                            let ty = o.get("type").and_then(Json::as_str).unwrap_or("");
                            (ty == "influxdb" && (uid == DS_VAR || uid == DS_UID))
                                || (ty == "grafana" && uid == "-- Grafana --")
                        }
                        _ => false,
                    };
                    if !ok {
                        errs.push(format!(
                            "{at}: datasource reference {x} is neither {DS_VAR} nor {DS_UID}"
                        ));
                    }
                } else {
                    check_datasources(x, at, errs);
                }
            }
        }
        Json::Array(a) => a.iter().for_each(|x| check_datasources(x, at, errs)),
        _ => {}
    }
}

fn all_panels(panels: &[Json]) -> Vec<&Json> {
    let mut out = Vec::new();
    for p in panels {
        out.push(p);
        if let Some(inner) = p.get("panels").and_then(Json::as_array) {
            out.extend(all_panels(inner));
        }
    }
    out
}

fn s<'a>(v: &'a Json, k: &str) -> &'a str {
    v.get(k).and_then(Json::as_str).unwrap_or("")
}

/// The `rp` variable: a custom variable, shown, offering the setup's retention policies in its
/// order (finest first) with the default policy selected, as Grafana exports one.
fn check_rp_variable(file: &str, vars: &[&Json], c: &Contract, errs: &mut Vec<String>) {
    let Some(v) = vars.iter().find(|v| s(v, "name") == "rp") else {
        errs.push(format!(
            "{file}: no template variable $rp (the retention policy the panels read)"
        ));
        return;
    };
    let at = format!("{file}: variable $rp");
    let want = c.retention_policies.join(",");
    if s(v, "type") != "custom" || s(v, "query") != want {
        errs.push(format!(
            "{at}: must be of type custom with query {want:?} ({SETUP})"
        ));
    }
    if v.get("hide").and_then(Json::as_u64) != Some(0) || s(v, "label").is_empty() {
        errs.push(format!("{at}: must be shown (hide 0) with a label"));
    }
    if v.get("multi") == Some(&Json::Bool(true)) || v.get("includeAll") == Some(&Json::Bool(true)) {
        errs.push(format!("{at}: one policy at a time (no multi, no All)"));
    }
    let options: Vec<(&str, &str, bool)> = v["options"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|o| {
            (
                s(o, "text"),
                s(o, "value"),
                o.get("selected") == Some(&Json::Bool(true)),
            )
        })
        .collect();
    let expected: Vec<(&str, &str, bool)> = c
        .retention_policies
        .iter()
        .map(|rp| (rp.as_str(), rp.as_str(), *rp == c.default_rp))
        .collect();
    if options != expected {
        errs.push(format!(
            "{at}: options {options:?}, expected {expected:?} with the default policy selected"
        ));
    }
    let current = &v["current"];
    if s(current, "value") != c.default_rp || s(current, "text") != c.default_rp {
        errs.push(format!(
            "{at}: current must be the default policy {:?}, is {current}",
            c.default_rp
        ));
    }
}

#[test]
fn dashboards_are_valid_and_name_only_documented_metrics() {
    let c = contract();
    let mut errs = Vec::new();
    let mut uids: BTreeMap<String, String> = BTreeMap::new();
    let dashboards = files("dashboards", ".json");
    assert!(
        dashboards.len() >= 4,
        "expected at least 4 dashboards, found {dashboards:?}"
    );
    let mut queries = 0;
    for file in &dashboards {
        let d: Json = match serde_json::from_str(&read(file)) {
            Ok(d) => d,
            Err(e) => {
                errs.push(format!("{file}: not JSON: {e}"));
                continue;
            }
        };
        let uid = s(&d, "uid");
        if uid.is_empty() || uid.len() > 40 {
            errs.push(format!(
                "{file}: uid {uid:?} missing or longer than 40 characters"
            ));
        }
        if let Some(other) = uids.insert(uid.to_string(), file.clone()) {
            errs.push(format!("{file}: uid {uid} also used by {other}"));
        }
        if s(&d, "title").is_empty()
            || d.get("schemaVersion").and_then(Json::as_u64).unwrap_or(0) < 36
        {
            errs.push(format!("{file}: title or schemaVersion (>= 36) missing"));
        }
        let input_ok = d["__inputs"].as_array().is_some_and(|a| {
            a.iter().any(|i| {
                s(i, "name") == "DS_STORWATCH"
                    && s(i, "type") == "datasource"
                    && s(i, "pluginId") == "influxdb"
            })
        });
        if !input_ok {
            errs.push(format!(
                "{file}: no __inputs datasource DS_STORWATCH of plugin influxdb"
            ));
        }
        check_datasources(&d, file, &mut errs);
        let vars: Vec<&Json> = d["templating"]["list"]
            .as_array()
            .map(|a| a.iter().collect())
            .unwrap_or_default();
        let var_names: BTreeSet<&str> = vars.iter().map(|v| s(v, "name")).collect();
        if !vars.iter().any(|v| {
            s(v, "name") == "DS_STORWATCH"
                && s(v, "type") == "datasource"
                && s(v, "query") == "influxdb"
        }) {
            errs.push(format!(
                "{file}: no templating datasource variable DS_STORWATCH"
            ));
        }
        check_rp_variable(file, &vars, &c, &mut errs);
        // `panel`: a panel or annotation query, which must read the level `$rp` selects (the
        // variables' SHOW TAG VALUES read InfluxDB's index, the same for every policy)
        let mut check = |q: &str, at: String, alias: &str, panel: bool, errs: &mut Vec<String>| {
            queries += 1;
            match check_query(q, &c) {
                Ok(names) => {
                    if names.measurements.len() > 1 {
                        errs.push(format!("{at}: reads {:?}: a dashboard query reads one measurement (its Resolution level is picked per measurement)\n    query: {q}", names.measurements));
                    }
                    if panel {
                        errs.extend(
                            rollup_problems(&names, &c)
                                .into_iter()
                                .map(|e| format!("{at}: {e}\n    query: {q}")),
                        );
                    }
                    for v in &names.variables {
                        if !var_names.contains(v.as_str()) {
                            errs.push(format!("{at}: variable ${v} is not defined in templating"));
                        }
                    }
                    for part in alias.split("$tag_").skip(1) {
                        let tag: String = part
                            .chars()
                            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                            .collect();
                        if !names.group_by_tags.contains(&tag) {
                            errs.push(format!(
                                "{at}: alias $tag_{tag} but the query does not GROUP BY \"{tag}\""
                            ));
                        }
                    }
                }
                Err(es) => {
                    errs.extend(es.into_iter().map(|e| format!("{at}: {e}\n    query: {q}")))
                }
            }
        };
        for v in &vars {
            if s(v, "type") == "query" {
                check(
                    s(v, "query"),
                    format!("{file}: variable ${}", s(v, "name")),
                    "",
                    false,
                    &mut errs,
                );
            }
        }
        for a in d["annotations"]["list"].as_array().into_iter().flatten() {
            if !s(a, "query").is_empty() {
                check(
                    s(a, "query"),
                    format!("{file}: annotation {:?}", s(a, "name")),
                    "",
                    true,
                    &mut errs,
                );
            }
        }
        let mut ids = BTreeSet::new();
        for p in all_panels(d["panels"].as_array().map(Vec::as_slice).unwrap_or(&[])) {
            let title = s(p, "title");
            let id = p.get("id").and_then(Json::as_u64).unwrap_or(0);
            if !ids.insert(id) {
                errs.push(format!("{file}: panel {title:?}: id {id} not unique"));
            }
            // a row holds panels; the alert list reads Grafana's alert rules, not the datasource
            if matches!(s(p, "type"), "row" | "alertlist") {
                continue;
            }
            let targets = p["targets"].as_array().map(Vec::as_slice).unwrap_or(&[]);
            if targets.is_empty() {
                errs.push(format!("{file}: panel {title:?} has no query"));
            }
            let mut refs = BTreeSet::new();
            for t in targets {
                let r = s(t, "refId");
                let at = format!("{file}: panel {title:?} query {r}");
                if !refs.insert(r) {
                    errs.push(format!("{at}: refId not unique in the panel"));
                }
                if t.get("rawQuery") != Some(&Json::Bool(true)) {
                    errs.push(format!("{at}: rawQuery is not true"));
                }
                check(s(t, "query"), at, s(t, "alias"), true, &mut errs);
            }
        }
    }
    assert!(
        errs.is_empty(),
        "{} problem(s) in the dashboards:\n{}",
        errs.len(),
        errs.join("\n")
    );
    assert!(queries > 40, "only {queries} queries found");
}

// ------------------------------------------------------------------------------------------
// Alert rules

fn y<'a>(v: &'a Yaml, k: &str) -> &'a Yaml {
    v.get(k).unwrap_or(&Yaml::Null)
}
fn ys<'a>(v: &'a Yaml, k: &str) -> &'a str {
    y(v, k).as_str().unwrap_or("")
}

/// The refIds an expression reads: `$X` in a math expression, the bare refId otherwise.
fn expression_inputs(model: &Yaml) -> Vec<String> {
    let e = ys(model, "expression");
    if ys(model, "type") == "math" {
        e.split('$')
            .skip(1)
            .map(|p| {
                p.chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect()
            })
            .collect()
    } else {
        vec![e.to_string()]
    }
}

/// The series labels a label's template reads: every `.Labels.x` in it
/// (`{{ .Labels.array }}{{ if .Labels.vdev }}…{{ end }}`).
fn labels_used(v: &str) -> Vec<String> {
    v.split(".Labels.")
        .skip(1)
        .map(|p| {
            p.chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect()
        })
        .collect()
}

#[test]
fn labels_used_are_read_from_templates() {
    assert_eq!(labels_used("{{ .Labels.host }}"), ["host"]);
    assert_eq!(
        labels_used("{{ .Labels.array }}{{ if .Labels.vdev }}{{ .Labels.pool }}/{{ end }}"),
        ["array", "vdev", "pool"]
    );
    assert!(labels_used("critical").is_empty());
}

/// The rule fields Grafana's file provisioning puts through environment-variable expansion
/// (`pkg/services/provisioning/alerting/rules_types.go`: every `values.StringValue`, and the
/// labels map). The query models and the annotations are taken raw.
fn interpolated_fields(r: &Yaml) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = [
        "uid",
        "title",
        "condition",
        "for",
        "noDataState",
        "execErrState",
        "dashboardUid",
    ]
    .iter()
    .map(|k| (k.to_string(), ys(r, k).to_string()))
    .collect();
    for (k, v) in y(r, "labels").as_mapping().into_iter().flatten() {
        out.push((
            format!("label {}", k.as_str().unwrap_or("")),
            v.as_str().unwrap_or("").to_string(),
        ));
    }
    for d in y(r, "data").as_sequence().into_iter().flatten() {
        for k in ["refId", "queryType", "datasourceUid"] {
            out.push((format!("data {k}"), ys(d, k).to_string()));
        }
    }
    out
}

/// Why Grafana would not provision `v` as written: a `$` not doubled is an environment
/// variable to Grafana (`{{ $labels.host }}` in a label becomes `{{ .host }}`, which fails at
/// evaluation).
fn env_interpolated(v: &str) -> Option<String> {
    let lone = v.split("$$").any(|part| part.contains('$'));
    lone.then(|| {
        format!("{v:?}: Grafana expands $NAME here from its environment; write .Labels.x for $labels.x, $$ for a literal $")
    })
}

#[test]
fn env_interpolation_is_caught() {
    assert!(env_interpolated("{{ $labels.host }}").is_some());
    assert!(env_interpolated("{{ .Labels.host }}").is_none());
    assert!(env_interpolated("costs $$5").is_none());
    assert!(env_interpolated("5m").is_none());
}

#[test]
fn alert_rules_are_valid_and_name_only_documented_metrics() {
    let c = contract();
    let mut errs = Vec::new();
    let mut uids: BTreeMap<String, String> = BTreeMap::new();
    let rule_files = files("alerts", ".yaml");
    assert!(!rule_files.is_empty(), "no alerts/*.yaml");
    let mut rules = 0;
    for file in &rule_files {
        let doc: Yaml = match serde_norway::from_str(&read(file)) {
            Ok(d) => d,
            Err(e) => {
                errs.push(format!("{file}: not YAML: {e}"));
                continue;
            }
        };
        if y(&doc, "apiVersion").as_u64() != Some(1) {
            errs.push(format!("{file}: apiVersion is not 1"));
        }
        for g in y(&doc, "groups").as_sequence().into_iter().flatten() {
            let gname = ys(g, "name");
            if gname.is_empty() || ys(g, "folder").is_empty() || ys(g, "interval").is_empty() {
                errs.push(format!(
                    "{file}: group {gname:?} needs name, folder and interval"
                ));
            }
            // Grafana's alert list shows the group under the folder `storwatch`: a name for
            // people ("Disks", "MD RAID"), not a slug repeating the folder
            if !gname.starts_with(|c: char| c.is_ascii_uppercase()) || gname.contains("storwatch") {
                errs.push(format!(
                    "{file}: group {gname:?}: name it for people, capitalised and without the folder's name (\"Disks\", \"MD RAID\")"
                ));
            }
            for (k, v) in ["name", "folder", "interval"].map(|k| (k, ys(g, k))) {
                if let Some(e) = env_interpolated(v) {
                    errs.push(format!("{file}: group {gname:?} {k}: {e}"));
                }
            }
            for r in y(g, "rules").as_sequence().into_iter().flatten() {
                rules += 1;
                let uid = ys(r, "uid");
                let at = format!("{file}: rule {uid} ({:?})", ys(r, "title"));
                for (k, v) in interpolated_fields(r) {
                    if let Some(e) = env_interpolated(&v) {
                        errs.push(format!("{at}: {k}: {e}"));
                    }
                }
                if uid.is_empty() || uid.len() > 40 || ys(r, "title").is_empty() {
                    errs.push(format!(
                        "{at}: uid (at most 40 characters) and title are required"
                    ));
                }
                if let Some(other) = uids.insert(uid.to_string(), file.clone()) {
                    errs.push(format!("{at}: uid also used in {other}"));
                }
                let data = y(r, "data").as_sequence().map(Vec::as_slice).unwrap_or(&[]);
                let refs: BTreeSet<&str> = data.iter().map(|d| ys(d, "refId")).collect();
                if refs.len() != data.len() {
                    errs.push(format!("{at}: refIds not unique"));
                }
                let cond = ys(r, "condition");
                if !refs.contains(cond) {
                    errs.push(format!(
                        "{at}: condition {cond:?} names no refId of {refs:?}"
                    ));
                }
                for d in data {
                    let r_id = ys(d, "refId");
                    let model = y(d, "model");
                    let qat = format!("{at} data {r_id}");
                    if ys(model, "refId") != r_id {
                        errs.push(format!("{qat}: model.refId differs"));
                    }
                    match ys(d, "datasourceUid") {
                        "__expr__" => {
                            for input in expression_inputs(model) {
                                if !refs.contains(input.as_str()) || input == r_id {
                                    errs.push(format!("{qat}: expression reads {input:?}, not another refId of the rule"));
                                }
                            }
                        }
                        DS_UID => {
                            if y(model, "rawQuery").as_bool() != Some(true)
                                || ys(model, "resultFormat") != "time_series"
                            {
                                errs.push(format!(
                                    "{qat}: rawQuery true and resultFormat time_series required"
                                ));
                            }
                            if y(y(d, "relativeTimeRange"), "from").as_u64().unwrap_or(0) == 0 {
                                errs.push(format!("{qat}: relativeTimeRange.from missing"));
                            }
                            let q = ys(model, "query");
                            match check_query(q, &c) {
                                Ok(names) => {
                                    if !names.variables.is_empty() {
                                        errs.push(format!("{qat}: template variables {:?} do not exist in alert rules", names.variables));
                                    }
                                    if !q.contains("$timeFilter") {
                                        errs.push(format!("{qat}: no $timeFilter"));
                                    }
                                    // labels come from the series: each templated label must be grouped by
                                    for (k, v) in y(r, "labels").as_mapping().into_iter().flatten()
                                    {
                                        let v = v.as_str().unwrap_or("");
                                        for tag in labels_used(v) {
                                            if !names.group_by_tags.contains(&tag) {
                                                errs.push(format!("{qat}: label {k:?} uses .Labels.{tag}, which the query does not GROUP BY"));
                                            }
                                        }
                                    }
                                    let m = names.measurement.as_deref().unwrap_or("");
                                    if c.is_tag(m, "site") && ys(y(r, "labels"), "site").is_empty()
                                    {
                                        errs.push(format!("{qat}: \"{m}\" has a site tag but the rule has no site label"));
                                    }
                                }
                                Err(es) => errs.extend(
                                    es.into_iter()
                                        .map(|e| format!("{qat}: {e}\n    query: {q}")),
                                ),
                            }
                        }
                        other => errs.push(format!(
                            "{qat}: datasourceUid {other:?} is neither {DS_UID} nor __expr__"
                        )),
                    }
                }
                let labels = y(r, "labels");
                if !matches!(ys(labels, "severity"), "critical" | "warning" | "info") {
                    errs.push(format!("{at}: severity label must be critical, warning or info (the policies route on it)"));
                }
                for l in ["host", "object"] {
                    if ys(labels, l).is_empty() {
                        errs.push(format!("{at}: label {l} missing"));
                    }
                }
                let ann = y(r, "annotations");
                if !ys(ann, "summary").contains("{{ $labels.") {
                    errs.push(format!(
                        "{at}: summary does not name the object with $labels"
                    ));
                }
                let runbook = ys(ann, "runbook_url");
                if !runbook.starts_with("alerts/runbooks/") || !root().join(runbook).is_file() {
                    errs.push(format!(
                        "{at}: runbook_url {runbook:?} is not a file under alerts/runbooks/"
                    ));
                }
                if ys(r, "for").is_empty() {
                    errs.push(format!("{at}: `for` missing"));
                }
            }
        }
    }
    assert!(
        errs.is_empty(),
        "{} problem(s) in the alert rules:\n{}",
        errs.len(),
        errs.join("\n")
    );
    assert!(rules >= 19, "only {rules} rules");
}

#[test]
fn every_runbook_belongs_to_a_rule_and_thresholds_are_documented() {
    let rules = read("alerts/storwatch-rules.yaml");
    let readme = read("alerts/README.md");
    let mut errs = Vec::new();
    // the README's count of rules and groups is the file's
    let doc: Yaml = serde_norway::from_str(&rules).unwrap();
    let groups = y(&doc, "groups")
        .as_sequence()
        .map(Vec::as_slice)
        .unwrap_or(&[]);
    let n: usize = groups
        .iter()
        .map(|g| y(g, "rules").as_sequence().map_or(0, Vec::len))
        .sum();
    let said = format!(
        "holds {n} Grafana-managed alert rules in {} groups",
        groups.len()
    );
    if !readme
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .contains(&said)
    {
        errs.push(format!("alerts/README.md: does not say it {said}"));
    }
    for rb in files("alerts/runbooks", ".md") {
        if !rules.contains(&format!("runbook_url: {rb}")) {
            errs.push(format!("{rb}: no rule points to it"));
        }
        let name = rb.rsplit('/').next().unwrap_or("").trim_end_matches(".md");
        if !readme.contains(&format!("`storwatch-{name}`")) {
            errs.push(format!(
                "alerts/README.md: rule storwatch-{name} not documented"
            ));
        }
    }
    assert!(errs.is_empty(), "{}", errs.join("\n"));
}

// ------------------------------------------------------------------------------------------
// Colours: green means good, red means bad, column by column

/// Fields where the lower value is the worse one: a threshold list that turns red as they grow
/// paints the worst case green (redundancy 0 green, 2 red).
const LOWER_IS_WORSE: &[&str] = &[
    "redundancy_left",
    "cpu_efficiency_pct",
    "available_spare_pct",
];
/// Booleans that are good when true; the others in a coloured column are bad when true, but
/// for those that say nothing good or bad either way.
const GOOD_WHEN_TRUE: &[&str] = &[
    "health_ok",
    "read_ok",
    "ok",
    "bbu_ok",
    "on_preferred_group",
    "write_back_active",
];
const NEUTRAL_BOOLEANS: &[&str] = &[
    "asleep",
    "queue_if_no_path",
    "bbu_present",
    "write_back_configured",
];
/// State words that mean redundancy or data lost.
const BAD_WORDS: &[&str] = &[
    "failed", "faulty", "degraded", "DEGRADED", "FAULTED", "UNAVAIL", "Dgrd", "OfLn", "Offln",
    "Failed", "UBad", "Msng", "offline",
];
/// Probabilities of loss: a palette would draw the first of them in its first colour, green.
const RISKS: &[&str] = &["rebuild_risk", "failure_probability"];

/// One column of a table query: the field read, its measurement and the column's name.
#[derive(Debug, PartialEq)]
struct Column {
    measurement: String,
    field: String,
    name: String,
}

/// The columns a table query selects (`last("rebuild_progress_pct") AS "sync_pct"`): the first
/// double-quoted name of each SELECT item and its `AS` name (the field itself without one).
fn table_columns(q: &str) -> Vec<Column> {
    let upper = q.to_ascii_uppercase();
    let (Some(sel), Some(from)) = (upper.find("SELECT "), upper.find(" FROM ")) else {
        return Vec::new();
    };
    let rest = &q[from + 6..];
    let measurement = rest
        .split_whitespace()
        .next()
        .unwrap_or("")
        .rsplit('.')
        .next()
        .unwrap_or("")
        .trim_matches('"')
        .to_string();
    let mut items = Vec::new();
    let (mut depth, mut start) = (0i32, sel + 7);
    let select = &q[..from];
    for (i, ch) in select.char_indices().skip(sel + 7) {
        match ch {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                items.push(&select[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    items.push(&select[start..]);
    items
        .into_iter()
        .filter_map(|item| {
            let quoted: Vec<&str> = item.split('"').skip(1).step_by(2).collect();
            let field = quoted.first()?.to_string();
            let name = match item.to_ascii_uppercase().find(" AS ") {
                Some(_) => quoted.last()?.to_string(),
                None => field.clone(),
            };
            Some(Column {
                measurement: measurement.clone(),
                field,
                name,
            })
        })
        .collect()
}

/// What Grafana applies to column `col` of table panel `p`: the panel's defaults, then each
/// override naming the column, property by property (`custom.cellOptions`, `thresholds`, …).
fn column_config(p: &Json, col: &str) -> BTreeMap<String, (Json, bool)> {
    let mut m = BTreeMap::new();
    let d = &p["fieldConfig"]["defaults"];
    for k in ["thresholds", "color", "mappings", "unit"] {
        if let Some(v) = d.get(k) {
            m.insert(k.to_string(), (v.clone(), false));
        }
    }
    if let Some(v) = d["custom"].get("cellOptions") {
        m.insert("custom.cellOptions".to_string(), (v.clone(), false));
    }
    for o in p["fieldConfig"]["overrides"]
        .as_array()
        .into_iter()
        .flatten()
    {
        if s(&o["matcher"], "id") == "byName" && s(&o["matcher"], "options") == col {
            for prop in o["properties"].as_array().into_iter().flatten() {
                m.insert(s(prop, "id").to_string(), (prop["value"].clone(), true));
            }
        }
    }
    m
}

/// The color a value mapping gives `word`, if any.
fn mapped_color<'a>(mappings: &'a Json, word: &str) -> Option<&'a str> {
    mappings.as_array().into_iter().flatten().find_map(|m| {
        (s(m, "type") == "value")
            .then(|| m["options"].get(word))
            .flatten()
            .map(|r| s(r, "color"))
    })
}

fn is_green(color: &str) -> bool {
    color.contains("green")
}

fn is_red(color: &str) -> bool {
    color.contains("red")
}

/// What is wrong with the colours of one table column: green for a bad value, red for a good
/// one, a state or boolean without the mapping that colours it, one threshold list for every
/// column.
fn column_colour_problems(p: &Json, col: &Column, ty: &str) -> Vec<String> {
    let cfg = column_config(p, &col.name);
    let get = |k: &str| cfg.get(k).map(|(v, _)| v).unwrap_or(&Json::Null);
    let own = |k: &str| cfg.get(k).is_some_and(|(_, own)| *own);
    let cell = s(get("custom.cellOptions"), "type");
    if !matches!(cell, "color-text" | "color-background") {
        return Vec::new();
    }
    let name = &col.name;
    let mut errs = Vec::new();
    let mappings = get("mappings");
    let mode = s(get("color"), "mode");
    let steps: Vec<(&str, Option<f64>)> = get("thresholds")["steps"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|st| (s(st, "color"), st["value"].as_f64()))
        .collect();
    let base = steps.first().map(|x| x.0).unwrap_or("green");
    match ty {
        "boolean" => {
            let good = GOOD_WHEN_TRUE.contains(&col.field.as_str());
            let neutral = NEUTRAL_BOOLEANS.contains(&col.field.as_str());
            for (word, truth) in [("true", true), ("false", false), ("1", true), ("0", false)] {
                match mapped_color(mappings, word) {
                    None => errs.push(format!("boolean column {name:?} has no value mapping for {word} (it would take the color of the first threshold)")),
                    Some(c) if neutral && (is_green(c) || is_red(c)) => errs.push(format!("{name:?} = {word} says neither good nor bad, but is mapped {c}")),
                    Some(c) if !neutral && truth == good && !is_green(c) => errs.push(format!("{name:?} = {word} is the good value, mapped {c}")),
                    Some(c) if !neutral && truth != good && is_green(c) => errs.push(format!("{name:?} = {word} is the bad value, mapped green")),
                    _ => {}
                }
            }
        }
        "string" => {
            if mappings.as_array().is_none_or(|a| a.is_empty()) {
                errs.push(format!("state column {name:?} is coloured without value mappings: every word takes the first threshold's color"));
            }
            if mode != "fixed" && is_green(base) {
                errs.push(format!("state column {name:?}: a word without a mapping is green (the first threshold)"));
            }
            for w in BAD_WORDS {
                if mapped_color(mappings, w).is_some_and(is_green) {
                    errs.push(format!("state column {name:?}: {w} is mapped green"));
                }
            }
        }
        _ if mode == "thresholds" => {
            if !own("thresholds") {
                errs.push(format!("numeric column {name:?} is coloured by the panel's one threshold list: give it its own (an override)"));
            }
            if LOWER_IS_WORSE.contains(&col.field.as_str()) {
                if steps.last().is_some_and(|x| is_red(x.0)) || is_green(base) {
                    errs.push(format!(
                        "{name:?}: lower is worse, but its thresholds go from {base} up to red"
                    ));
                }
            } else if is_red(base) {
                errs.push(format!(
                    "{name:?}: higher is worse, but its lowest values are red"
                ));
            }
        }
        _ => {}
    }
    errs
}

/// A `$variable` outside an InfluxQL regex literal but between two slashes: Grafana's InfluxDB
/// frontend takes any text between two `/` for a regex and escapes the variable's value there
/// (`sum("x") * 10000 / $__interval_ms AS "a", … / $__interval_ms` fails in the browser with
/// `found \, expected identifier`).
fn variables_escaped_as_regex(q: &str) -> Vec<String> {
    let b = q.as_bytes();
    // the spans of the regex literals (`=~ /…/`, `!~ /…/`)
    let mut spans = Vec::new();
    let mut i = 0;
    while i + 1 < b.len() {
        if (b[i] == b'=' || b[i] == b'!') && b[i + 1] == b'~' {
            let mut j = i + 2;
            while j < b.len() && b[j] == b' ' {
                j += 1;
            }
            if j < b.len() && b[j] == b'/' {
                let mut k = j + 1;
                while k < b.len() && !(b[k] == b'/' && b[k - 1] != b'\\') {
                    k += 1;
                }
                spans.push((j, k));
                i = k;
            }
        }
        i += 1;
    }
    let mut out = Vec::new();
    for (at, _) in q.match_indices('$') {
        let name: String = q[at + 1..]
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        if name.is_empty() || spans.iter().any(|&(s, e)| s < at && at < e) {
            continue;
        }
        if q[..at].contains('/') && q[at..].contains('/') {
            out.push(format!("${name} lies between two slashes outside a regex: Grafana escapes it as a regex (use one division per query and no regex after it)"));
        }
    }
    out
}

/// The colour and layout problems of one dashboard.
fn dashboard_colour_problems(file: &str, d: &Json, c: &Contract) -> Vec<String> {
    let mut errs = Vec::new();
    for p in all_panels(d["panels"].as_array().map(Vec::as_slice).unwrap_or(&[])) {
        let at = format!("{file}: panel {:?}", s(p, "title"));
        let queries: Vec<&str> = p["targets"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|t| s(t, "query"))
            .collect();
        for q in &queries {
            errs.extend(
                variables_escaped_as_regex(q)
                    .into_iter()
                    .map(|e| format!("{at}: {e}")),
            );
        }
        match s(p, "type") {
            "table" => {
                let time_hidden = p["transformations"].as_array().is_some_and(|tr| {
                    tr.iter().any(|t| {
                        s(t, "id") == "organize"
                            && t["options"]["excludeByName"]["Time"] == Json::Bool(true)
                    })
                });
                if !time_hidden {
                    errs.push(format!("{at}: the Time column (the range's start on every row) is not excluded by an organize transformation"));
                }
                let mut seen = BTreeSet::new();
                for q in &queries {
                    for col in table_columns(q) {
                        if !seen.insert(col.name.clone()) {
                            continue;
                        }
                        let ty = c
                            .measurements
                            .get(&col.measurement)
                            .and_then(|m| m.types.get(&col.field))
                            .map(String::as_str)
                            .unwrap_or("");
                        errs.extend(
                            column_colour_problems(p, &col, ty)
                                .into_iter()
                                .map(|e| format!("{at}: {e}")),
                        );
                    }
                }
            }
            "status-history" => {
                let base = s(
                    &p["fieldConfig"]["defaults"]["thresholds"]["steps"][0],
                    "color",
                );
                if is_green(base) {
                    errs.push(format!("{at}: its lowest values are green: an idle (or just failed) device is not a good one"));
                }
            }
            _ => {
                let risk = queries
                    .iter()
                    .any(|q| RISKS.iter().any(|r| q.contains(&format!("(\"{r}\")"))));
                let mode = s(&p["fieldConfig"]["defaults"]["color"], "mode");
                if risk && (mode.is_empty() || mode.starts_with("palette")) {
                    errs.push(format!("{at}: a risk drawn in a palette (the first series green): give it a fixed or shades color"));
                }
            }
        }
    }
    errs
}

/// What the first screen lacks: a row of stats at the top (at least four, each coloured by its
/// thresholds) and the list of the alerts firing.
fn first_screen_problems(file: &str, d: &Json) -> Vec<String> {
    let top: Vec<&Json> = d["panels"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|p| p["gridPos"]["y"].as_u64().is_some_and(|y| y < 9))
        .collect();
    let stats = top
        .iter()
        .filter(|p| {
            s(p, "type") == "stat"
                && s(&p["fieldConfig"]["defaults"]["color"], "mode") == "thresholds"
        })
        .count();
    let mut errs = Vec::new();
    if stats < 4 {
        errs.push(format!(
            "{file}: {stats} stat panel(s) coloured by thresholds on the first screen (y < 9): the page opens without a summary"
        ));
    }
    if !top.iter().any(|p| s(p, "type") == "alertlist") {
        errs.push(format!("{file}: no alert list on the first screen"));
    }
    errs
}

#[test]
fn dashboards_colour_good_green_and_bad_red() {
    let c = contract();
    let mut errs = Vec::new();
    for file in files("dashboards", ".json") {
        let d: Json = serde_json::from_str(&read(&file)).unwrap();
        errs.extend(dashboard_colour_problems(&file, &d, &c));
        errs.extend(first_screen_problems(&file, &d));
    }
    assert!(
        errs.is_empty(),
        "{} colour problem(s) in the dashboards:\n{}",
        errs.len(),
        errs.join("\n")
    );
}

#[test]
fn contract_has_the_types_of_the_fields() {
    let c = contract();
    let ty = |m: &str, f: &str| c.measurements[m].types.get(f).cloned().unwrap_or_default();
    assert_eq!(ty("drive", "health_ok"), "boolean");
    assert_eq!(ty("raid_vd", "degraded"), "boolean");
    assert_eq!(ty("md", "degraded"), "integer");
    assert_eq!(ty("md", "state"), "string");
    assert_eq!(ty("mpath_path", "flapping"), "boolean");
    assert_eq!(ty("raid_controller", "bbu_state"), "string");
}

#[test]
fn colour_check_rejects_what_misleads_the_person_on_call() {
    let c = contract();
    // the site overview's arrays table and the disk server's drives table as they were: one
    // "higher is worse" threshold list for every column, strings unmapped, Time shown
    let table = |q: &str, defaults: Json, overrides: Json| {
        json!({"panels": [{"type": "table", "title": "t", "targets": [{"query": q}],
            "fieldConfig": {"defaults": defaults, "overrides": overrides}}]})
    };
    let one_list = json!({"thresholds": {"steps": [{"color": "green", "value": null},
        {"color": "orange", "value": 0.001}, {"color": "red", "value": 0.01}]},
        "color": {"mode": "thresholds"}, "custom": {"cellOptions": {"type": "color-text"}}});
    let arrays = table(
        r#"SELECT last("state") AS "state", last("redundancy_left") AS "redundancy_left" FROM "$rp"."md" WHERE $timeFilter GROUP BY "host", "array""#,
        one_list.clone(),
        json!([]),
    );
    let errs = dashboard_colour_problems("x", &arrays, &c).join("\n");
    for want in [
        "Time column",
        "state column \"state\" is coloured without value mappings",
        "a word without a mapping is green",
        "\"redundancy_left\": lower is worse",
        "\"redundancy_left\" is coloured by the panel's one threshold list",
    ] {
        assert!(errs.contains(want), "{want:?} not in:\n{errs}");
    }
    let drives = table(
        r#"SELECT last("health_ok") AS "health_ok" FROM "$rp"."drive" WHERE $timeFilter GROUP BY "device""#,
        one_list,
        json!([]),
    );
    let errs = dashboard_colour_problems("x", &drives, &c).join("\n");
    assert!(
        errs.contains("boolean column \"health_ok\" has no value mapping for 0"),
        "{errs}"
    );
    // a flapping path mapped the wrong way round
    let flapping = table(
        r#"SELECT last("flapping") AS "flapping" FROM "$rp"."mpath_path" WHERE $timeFilter GROUP BY "path""#,
        json!({"custom": {"cellOptions": {"type": "color-text"}}}),
        json!([{"matcher": {"id": "byName", "options": "flapping"}, "properties": [{"id": "mappings",
            "value": [{"type": "value", "options": {"true": {"color": "green"}, "false": {"color": "red"},
            "1": {"color": "green"}, "0": {"color": "red"}}}]}]}]),
    );
    let errs = dashboard_colour_problems("x", &flapping, &c).join("\n");
    assert!(
        errs.contains("\"flapping\" = true is the bad value, mapped green"),
        "{errs}"
    );
    assert!(
        errs.contains("\"flapping\" = false is the good value, mapped red"),
        "{errs}"
    );
    // the risk line in the palette's green, the heat map's idle green
    let risk = json!({"panels": [{"type": "timeseries", "title": "r", "targets": [{"query":
        r#"SELECT max("rebuild_risk") FROM "$rp"."md" WHERE $timeFilter GROUP BY time($__interval)"#}],
        "fieldConfig": {"defaults": {"color": {"mode": "palette-classic"}}}},
        {"type": "status-history", "title": "h", "targets": [],
        "fieldConfig": {"defaults": {"thresholds": {"steps": [{"color": "green", "value": null}]}}}}]});
    let errs = dashboard_colour_problems("x", &risk, &c).join("\n");
    assert!(errs.contains("a risk drawn in a palette"), "{errs}");
    assert!(errs.contains("an idle (or just failed) device"), "{errs}");
}

#[test]
fn a_page_without_a_summary_is_caught() {
    let open_rows = json!({"panels": [
        {"type": "row", "title": "Network", "gridPos": {"y": 0}},
        {"type": "timeseries", "title": "NIC", "gridPos": {"y": 1}}]});
    let errs = first_screen_problems("x", &open_rows).join("\n");
    assert!(errs.contains("0 stat panel(s)"), "{errs}");
    assert!(errs.contains("no alert list"), "{errs}");
}

#[test]
fn a_variable_between_two_slashes_is_caught() {
    let was = r#"SELECT sum("read_bytes_per_s") * 10000 / $__interval_ms AS "read", sum("write_bytes_per_s") * 10000 / $__interval_ms AS "write" FROM "raw"."job_io" WHERE "host" =~ /^$host$/ AND $timeFilter GROUP BY time($__interval), "device" fill(none)"#;
    let errs = variables_escaped_as_regex(was);
    assert_eq!(errs.len(), 2, "{errs:?}");
    assert!(errs[0].starts_with("$__interval_ms"));
    // one division, and the host compared without a regex after it
    let now = r#"SELECT sum("read_bytes_per_s") * 10000 / $__interval_ms AS "read" FROM "raw"."job_io" WHERE "host" = '$host' AND $timeFilter GROUP BY time($__interval), "device" fill(none)"#;
    assert_eq!(variables_escaped_as_regex(now), Vec::<String>::new());
    // variables inside regex literals are what Grafana should escape
    let regex = r#"SELECT max("util_max_pct") FROM "$rp"."disk" WHERE "host" =~ /^$host$/ AND "device" !~ /^$device$/ AND $timeFilter"#;
    assert_eq!(variables_escaped_as_regex(regex), Vec::<String>::new());
}

/// The fields each Grafana alert rule's queries read: (measurement, field) -> rule uids.
fn fields_read_by_rules(c: &Contract) -> BTreeMap<(String, String), BTreeSet<String>> {
    let mut read_by: BTreeMap<(String, String), BTreeSet<String>> = BTreeMap::new();
    for file in files("alerts", ".yaml") {
        let doc: Yaml = serde_norway::from_str(&read(&file)).unwrap();
        for g in y(&doc, "groups").as_sequence().into_iter().flatten() {
            for r in y(g, "rules").as_sequence().into_iter().flatten() {
                let uid = ys(r, "uid");
                for d in y(r, "data").as_sequence().into_iter().flatten() {
                    let q = ys(y(d, "model"), "query");
                    let Ok(names) = (if q.is_empty() {
                        Err(Vec::new())
                    } else {
                        check_query(q, c)
                    }) else {
                        continue;
                    };
                    let reads = names.selected.iter().map(|(_, f)| f).chain(&names.filtered);
                    for f in reads {
                        for m in names.measurements.iter().filter(|m| c.is_field(m, f)) {
                            read_by
                                .entry((m.clone(), f.clone()))
                                .or_default()
                                .insert(uid.to_string());
                        }
                    }
                }
            }
        }
    }
    read_by
}

#[test]
fn the_contract_names_the_rules_that_read_each_field() {
    let c = contract();
    let read_by = fields_read_by_rules(&c);
    assert!(
        read_by.contains_key(&("md".to_string(), "degraded".to_string())),
        "{read_by:#?}"
    );
    let yaml = storwatch_contract::Contract::workspace();
    let mut errs = Vec::new();
    for m in yaml.measurements() {
        for f in &m.fields {
            let said: BTreeSet<String> = f.alerts.iter().cloned().collect();
            let key = (m.name.clone(), f.name.clone());
            let real = read_by.get(&key).cloned().unwrap_or_default();
            if said != real {
                errs.push(format!(
                    "{}.{}: the contract says alerts {said:?}, the rules that read it are {real:?}",
                    m.name, f.name
                ));
            }
        }
    }
    assert!(
        errs.is_empty(),
        "contract/*.yaml `alerts` out of date:\n{}",
        errs.join("\n")
    );
}
