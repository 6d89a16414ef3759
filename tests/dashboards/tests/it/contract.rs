//! Every measurement, tag and field the agent writes is in the metric contract (`contract/*.yaml`):
//! the agent's library runs every simulator scenario, and each name it writes, with its type,
//! must be declared there. A field the contract lacks fails here with its measurement and an
//! example line.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;

use storwatch_contract::Contract;
use storwatch_dashboards_tests::fleet::{host, host_toml};
use storwatch_dashboards_tests::history;
use storwatch_sim::scenario::ALL;
use storwatch_wire::lp::{parse_line, Backend, FieldValue};

/// (measurement, name) -> (`tag` or the field's type, an example line)
type Observed = BTreeMap<(String, String), (String, String)>;

/// What the agent wrote on every scenario (five simulated minutes each): per measurement, per
/// tag or field name, its kind and an example line.
fn observed() -> Observed {
    let mut out = BTreeMap::new();
    for kind in ALL {
        let name = host(kind);
        for report in history(kind, &name, 300, &host_toml(&name)) {
            for line in report.lines() {
                let p = parse_line(line, Backend::V1).unwrap();
                let m = p.measurement.to_string();
                for (t, _) in &p.tags {
                    out.entry((m.clone(), t.to_string()))
                        .or_insert(("tag".to_string(), line.to_string()));
                }
                for (f, v) in &p.fields {
                    let ty = match v {
                        FieldValue::Float(_) => "float",
                        FieldValue::Integer(_) | FieldValue::Unsigned(_) => "integer",
                        FieldValue::String(_) => "string",
                        FieldValue::Boolean(_) => "boolean",
                    };
                    out.entry((m.clone(), f.to_string()))
                        .or_insert((ty.to_string(), line.to_string()));
                }
            }
        }
    }
    out
}

/// Each name written that the contract lacks, or declares otherwise (a tag as a field, another
/// type).
fn undeclared(seen: &Observed, c: &Contract) -> Vec<String> {
    let mut errs = Vec::new();
    for ((m, n), (kind, line)) in seen {
        let Some(decl) = c.measurement(m) else {
            errs.push(format!(
                "measurement {m} is not in the contract (contract/*.yaml): {line}"
            ));
            continue;
        };
        if kind == "tag" {
            if !c.is_tag(m, n) {
                errs.push(format!("{m}: tag {n} is not in the contract: {line}"));
            }
            continue;
        }
        match decl.field(n) {
            None => errs.push(format!(
                "{m}: field {n} ({kind}) is not in the contract: {line}"
            )),
            Some(f) if f.ty.as_str() != kind => errs.push(format!(
                "{m}.{n}: the contract says {}, the agent writes {kind}: {line}",
                f.ty.as_str()
            )),
            Some(_) => {}
        }
    }
    errs
}

#[test]
fn every_name_the_agent_writes_is_in_the_contract() {
    let c = Contract::workspace();
    let seen = observed();
    // the scenarios cover every domain: a run that wrote nothing would pass for nothing
    for m in [
        "disk",
        "net",
        "md",
        "mpath_path",
        "zpool_vdev",
        "drive",
        "raid_pd",
        "job",
        "fs",
    ] {
        assert!(
            seen.keys().any(|(x, _)| x == m),
            "no {m} line in any scenario"
        );
    }
    let errs = undeclared(&seen, &c);
    assert!(
        errs.is_empty(),
        "names the agent writes that the contract lacks: add them to contract/*.yaml and run \
         `cargo xtask gen`:\n{}",
        errs.join("\n")
    );
}

#[test]
fn an_unknown_field_or_a_wrong_type_is_caught() {
    let c = Contract::workspace();
    let mut seen = Observed::new();
    let line = "disk,host=a,device=sda r_per_s=1,brand_new=2i 1".to_string();
    for (n, kind) in [
        ("device", "tag"),
        ("r_per_s", "float"),
        ("brand_new", "integer"),
    ] {
        seen.insert(("disk".into(), n.into()), (kind.into(), line.clone()));
    }
    seen.insert(
        ("disk".into(), "util_pct".into()),
        ("string".into(), line.clone()),
    );
    seen.insert(
        ("nosuch".into(), "x".into()),
        ("float".into(), line.clone()),
    );
    seen.insert(("disk".into(), "colour".into()), ("tag".into(), line));
    let errs = undeclared(&seen, &c);
    assert_eq!(errs.len(), 4, "{errs:#?}");
    assert!(errs.iter().any(|e| e.contains("field brand_new")));
    assert!(errs
        .iter()
        .any(|e| e.contains("util_pct: the contract says float")));
    assert!(errs.iter().any(|e| e.contains("measurement nosuch")));
    assert!(errs.iter().any(|e| e.contains("tag colour")));
}
