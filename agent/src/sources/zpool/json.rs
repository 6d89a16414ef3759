//! `zpool status -j [--json-int]` (OpenZFS ≥ 2.3).
//!
//! `{"output_version": {…}, "pools": {"<name>": {name, state, pool_guid, status, action,
//! scan_stats: {function, state, to_examine, examined, issued, processed, errors, …,
//! rebuild_stats?}, vdevs: {"<pool>": {vdev_type: "root", …, vdevs: {…}}}, logs?, l2cache?,
//! spares?, special?, dedup?, error_count}}}`.
//!
//! With `--json-int` numbers are JSON integers (bytes, epoch seconds); GUIDs are 64-bit and
//! half of them exceed `i64::MAX`, so every integer is read as `u64`. Without it every value
//! is a string: `"8.29G"`, `"Sun Nov 16 08:00:01 CET 2025"`, `"-"`; sizes are then converted
//! like the text ones. The vdev maps keep the order zpool printed them in (the tree order).
//! The example in `zpool-status(8)` prints vdev state `HEALTHY` where releases print `ONLINE`;
//! it is read as `ONLINE`.

use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde::Deserialize;

use super::{parse_size, Pool, Scan, ScanKind, ScanState, Vdev, VdevKind, ZpoolStatus};
use crate::sources::ParseError;

/// Parses `zpool status -j` output.
pub fn parse(text: &str) -> Result<ZpoolStatus, ParseError> {
    // With no pool imported zpool prints nothing, or its text message, even under -j.
    if text.trim().is_empty() || text.trim() == "no pools available" {
        return Ok(ZpoolStatus::default());
    }
    let doc: JStatus = serde_json::from_str(text).map_err(|e| {
        let line = e.line().max(1);
        let line_text = text.lines().nth(line - 1).unwrap_or_default();
        ParseError::new(line, line_text, format_args!("not zpool JSON: {e}"))
    })?;
    Ok(ZpoolStatus {
        pools: doc
            .pools
            .0
            .into_iter()
            .map(|(key, p)| pool(key, p))
            .collect(),
    })
}

/// A JSON value that is a number or a string holding one.
#[derive(Debug, Clone, PartialEq)]
enum Num {
    U(u64),
    F(f64),
    S(String),
}

impl Num {
    /// As an exact or suffixed size/count; `"-"` and dates are `None`.
    fn u64(&self) -> Option<u64> {
        match self {
            Self::U(u) => Some(*u),
            Self::F(f) if *f >= 0.0 && *f < 1.8e19 => Some(f.round() as u64),
            Self::F(_) => None,
            Self::S(s) => parse_size(s),
        }
    }

    fn text(&self) -> String {
        match self {
            Self::U(u) => u.to_string(),
            Self::F(f) => f.to_string(),
            Self::S(s) => s.clone(),
        }
    }
}

impl<'de> Deserialize<'de> for Num {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Num;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a number or a string")
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Num, E> {
                Ok(Num::U(v))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Num, E> {
                Ok(u64::try_from(v).map_or(Num::F(v as f64), Num::U))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Num, E> {
                Ok(Num::F(v))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Num, E> {
                Ok(Num::S(v.to_owned()))
            }
            fn visit_bool<E: de::Error>(self, v: bool) -> Result<Num, E> {
                Ok(Num::U(u64::from(v)))
            }
        }
        d.deserialize_any(V)
    }
}

/// A JSON object kept in document order.
#[derive(Debug)]
struct Ordered<T>(Vec<(String, T)>);

impl<T> Default for Ordered<T> {
    fn default() -> Self {
        Self(Vec::new())
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Ordered<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<T>(std::marker::PhantomData<T>);
        impl<'de, T: Deserialize<'de>> Visitor<'de> for V<T> {
            type Value = Ordered<T>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("an object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Ordered<T>, A::Error> {
                let mut out = Vec::new();
                while let Some((k, v)) = map.next_entry::<String, T>()? {
                    out.push((k, v));
                }
                Ok(Ordered(out))
            }
        }
        d.deserialize_map(V(std::marker::PhantomData))
    }
}

#[derive(Debug, Deserialize)]
struct JStatus {
    #[serde(default)]
    pools: Ordered<JPool>,
}

#[derive(Debug, Deserialize)]
struct JPool {
    name: Option<String>,
    #[serde(default)]
    state: String,
    pool_guid: Option<Num>,
    guid: Option<Num>,
    status: Option<String>,
    action: Option<String>,
    moreinfo: Option<String>,
    msgid: Option<String>,
    scan_stats: Option<JScan>,
    #[serde(default)]
    vdevs: Ordered<JVdev>,
    logs: Option<Ordered<JVdev>>,
    l2cache: Option<Ordered<JVdev>>,
    spares: Option<Ordered<JVdev>>,
    special: Option<Ordered<JVdev>>,
    dedup: Option<Ordered<JVdev>>,
    error_count: Option<Num>,
}

#[derive(Debug, Deserialize)]
struct JScan {
    function: Option<String>,
    state: Option<String>,
    start_time: Option<Num>,
    end_time: Option<Num>,
    to_examine: Option<Num>,
    examined: Option<Num>,
    issued: Option<Num>,
    processed: Option<Num>,
    errors: Option<Num>,
    scrub_pause: Option<Num>,
    rebuild_stats: Option<Ordered<serde_json::Map<String, serde_json::Value>>>,
}

#[derive(Debug, Deserialize)]
struct JVdev {
    name: Option<String>,
    vdev_type: Option<String>,
    guid: Option<Num>,
    state: Option<String>,
    nparity: Option<Num>,
    alloc_space: Option<Num>,
    total_space: Option<Num>,
    read_errors: Option<Num>,
    write_errors: Option<Num>,
    checksum_errors: Option<Num>,
    aux: Option<String>,
    #[serde(default)]
    vdevs: Ordered<JVdev>,
}

fn pool(key: String, p: JPool) -> Pool {
    let tidy = |s: Option<String>| {
        s.map(|t| t.split_whitespace().collect::<Vec<_>>().join(" "))
            .filter(|t| !t.is_empty())
    };
    let mut out = Pool {
        name: p.name.unwrap_or(key),
        guid: p.pool_guid.or(p.guid).and_then(|g| g.u64()),
        state: normalise_state(&p.state),
        // The man page example prints "status": "OK" for a healthy pool; releases omit it.
        status: tidy(p.status).filter(|s| s != "OK"),
        action: tidy(p.action),
        see: p.moreinfo.or(p.msgid),
        data_errors: p.error_count.and_then(|n| n.u64()),
        ..Pool::default()
    };
    if let Some(s) = p.scan_stats {
        out.scans = scans(s);
    }
    for (i, (key, v)) in p.vdevs.0.into_iter().enumerate() {
        let mut v = vdev(key, v);
        // The first entry of "vdevs" is the root; the man page example omits its vdev_type.
        if i == 0 {
            v.kind = VdevKind::Root;
        }
        out.config.push(v);
    }
    for (kind, section) in [
        (VdevKind::Logs, p.logs),
        (VdevKind::Cache, p.l2cache),
        (VdevKind::Spares, p.spares),
        (VdevKind::Special, p.special),
        (VdevKind::Dedup, p.dedup),
    ] {
        if let Some(members) = section {
            out.config.push(Vdev {
                name: kind.to_string(),
                kind,
                children: members.0.into_iter().map(|(k, v)| vdev(k, v)).collect(),
                ..Vdev::default()
            });
        }
    }
    // The JSON has no "(resilvering)" note. In spare-N and replacing-N the first child is the
    // original device and the later ones stand in for it; while a resilver or rebuild runs,
    // those are still being written.
    if out.scans.iter().any(|s| {
        s.state == ScanState::InProgress && matches!(s.kind, ScanKind::Resilver | ScanKind::Rebuild)
    }) {
        for v in &mut out.config {
            mark_resilvering(v);
        }
    }
    out
}

fn mark_resilvering(v: &mut Vdev) {
    if matches!(v.kind, VdevKind::Spare | VdevKind::Replacing) {
        for c in v.children.iter_mut().skip(1) {
            c.resilvering = c.children.is_empty();
        }
    }
    for c in &mut v.children {
        mark_resilvering(c);
    }
}

fn normalise_state(s: &str) -> String {
    if s == "HEALTHY" {
        "ONLINE".to_owned()
    } else {
        s.to_owned()
    }
}

fn vdev(key: String, v: JVdev) -> Vdev {
    let name = v.name.unwrap_or(key);
    let kind = match v.vdev_type.as_deref() {
        Some(t) => VdevKind::from_json_type(t, &name, v.nparity.and_then(|n| n.u64())),
        None => VdevKind::from_name(&name),
    };
    Vdev {
        kind,
        state: normalise_state(v.state.as_deref().unwrap_or_default()),
        read_errors: v.read_errors.and_then(|n| n.u64()),
        write_errors: v.write_errors.and_then(|n| n.u64()),
        cksum_errors: v.checksum_errors.and_then(|n| n.u64()),
        note: v.aux,
        alloc_bytes: v.alloc_space.and_then(|n| n.u64()),
        size_bytes: v.total_space.and_then(|n| n.u64()),
        guid: v.guid.and_then(|n| n.u64()),
        children: v.vdevs.0.into_iter().map(|(k, c)| vdev(k, c)).collect(),
        name,
        ..Vdev::default()
    }
}

fn scans(s: JScan) -> Vec<Scan> {
    let mut out = Vec::new();
    let kind = match s.function.as_deref() {
        Some("SCRUB") => Some(ScanKind::Scrub),
        Some("RESILVER") => Some(ScanKind::Resilver),
        Some("ERRORSCRUB") => Some(ScanKind::ErrorScrub),
        _ => None,
    };
    let paused = s.scrub_pause.as_ref().and_then(Num::u64).unwrap_or(0) > 0;
    let state = match s.state.as_deref() {
        Some("SCANNING") if paused => Some(ScanState::Paused),
        Some("SCANNING") => Some(ScanState::InProgress),
        Some("FINISHED") => Some(ScanState::Finished),
        Some("CANCELED") => Some(ScanState::Canceled),
        _ => None,
    };
    if let (Some(kind), Some(state)) = (kind, state) {
        let mut scan = Scan::new(kind, state);
        scan.total_bytes = s.to_examine.as_ref().and_then(Num::u64);
        scan.examined_bytes = s.examined.as_ref().and_then(Num::u64);
        scan.issued_bytes = s.issued.as_ref().and_then(Num::u64);
        scan.processed_bytes = s.processed.as_ref().and_then(Num::u64);
        scan.errors = s.errors.as_ref().and_then(Num::u64);
        let (start, end) = (
            s.start_time.as_ref().and_then(epoch),
            s.end_time.as_ref().and_then(epoch),
        );
        if state == ScanState::Finished || state == ScanState::Canceled {
            scan.duration_s = start.zip(end).and_then(|(a, b)| b.checked_sub(a));
            scan.time = s.end_time.as_ref().map(Num::text);
        } else {
            scan.time = s.start_time.as_ref().map(Num::text);
        }
        // For a finished scan issued/to_examine is not a progress figure (a resilver that
        // finished early prints 0.29 %).
        if matches!(state, ScanState::InProgress | ScanState::Paused) {
            scan.percent = percent(scan.issued_bytes, scan.total_bytes);
        }
        out.push(scan);
    }
    for (name, r) in s.rebuild_stats.map(|o| o.0).unwrap_or_default() {
        out.push(rebuild(name, &r));
    }
    out
}

/// Epoch seconds; the string-valued variant prints dates, which are not used for arithmetic.
fn epoch(n: &Num) -> Option<u64> {
    match n {
        Num::S(s) if !s.bytes().all(|b| b.is_ascii_digit()) => None,
        other => other.u64(),
    }
}

fn percent(done: Option<u64>, total: Option<u64>) -> Option<f64> {
    let (d, t) = (done?, total?);
    (t > 0).then(|| (d as f64 * 100.0 / t as f64).min(100.0))
}

/// One dRAID sequential rebuild (`scan_stats.rebuild_stats.<vdev>`). Releases have named
/// the fields both bare (`state`, `scanned`) and prefixed (`rebuild_state`,
/// `rebuild_scanned`); both are read.
fn rebuild(vdev_name: String, r: &serde_json::Map<String, serde_json::Value>) -> Scan {
    let get = |k: &str| {
        r.get(k)
            .or_else(|| r.get(&format!("rebuild_{k}")))
            .and_then(|v| Num::deserialize(v).ok())
    };
    let state = get("state").map(|n| n.text());
    let state = match state.as_deref() {
        Some("ACTIVE") => ScanState::InProgress,
        Some("CANCELED") => ScanState::Canceled,
        _ => ScanState::Finished,
    };
    let mut scan = Scan::new(ScanKind::Rebuild, state);
    scan.vdev = Some(vdev_name);
    scan.examined_bytes = get("scanned").and_then(|n| n.u64());
    scan.issued_bytes = get("issued").and_then(|n| n.u64());
    scan.total_bytes = get("to_scan").and_then(|n| n.u64());
    scan.processed_bytes = get("rebuilt").and_then(|n| n.u64());
    scan.errors = get("errors").and_then(|n| n.u64());
    if state == ScanState::InProgress {
        scan.percent = percent(scan.issued_bytes, scan.total_bytes);
    }
    scan
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn snapshot_real_fixtures() {
        insta::glob!("../../../fixtures/zpool-json", "*.txt", |path| {
            let text = std::fs::read_to_string(path).expect("fixture is readable");
            let rendered = match parse(&text) {
                Ok(s) => super::super::render(&s),
                Err(e) => format!("error: {e}\n"),
            };
            insta::assert_snapshot!(rendered);
        });
    }

    #[test]
    fn guids_above_i64_max_are_kept() {
        let s = parse(r#"{"pools":{"p":{"name":"p","state":"ONLINE","pool_guid":17068583395379267683,"vdevs":{"p":{"name":"p","vdev_type":"root","guid":17068583395379267683,"state":"ONLINE","read_errors":0,"write_errors":0,"checksum_errors":0}}}}}"#)
            .expect("parses");
        assert_eq!(s.pools[0].guid, Some(17_068_583_395_379_267_683));
        assert_eq!(s.pools[0].config[0].guid, Some(17_068_583_395_379_267_683));
    }

    #[test]
    fn malformed_json_names_the_line() {
        let e = parse("{\n  \"pools\": {\n    \"p\": {\"state\": \"ONLINE\",}\n  }\n}\n")
            .expect_err("trailing comma");
        assert_eq!(e.line, 3);
        assert_eq!(e.text, "    \"p\": {\"state\": \"ONLINE\",}");
        assert!(e.reason.starts_with("not zpool JSON"), "{}", e.reason);
        assert_eq!(parse(" \n"), Ok(ZpoolStatus::default()));
        assert_eq!(parse(r#"{"pools":{}}"#), Ok(ZpoolStatus::default()));
        assert_eq!(parse("no pools available\n"), Ok(ZpoolStatus::default()));
        let e = parse("  pool: tank\n state: ONLINE\n").expect_err("text");
        assert_eq!((e.line, e.text.as_str()), (1, "  pool: tank"));
        let e = parse(r#"{"pools":{"p":{"state":7}}}"#).expect_err("state is a number");
        assert_eq!(e.line, 1);
    }

    #[test]
    fn rebuild_stats_and_resilvering_substitutes() {
        let text = r#"{"pools":{"tank":{"name":"tank","state":"DEGRADED",
          "scan_stats":{"function":"RESILVER","state":"FINISHED","to_examine":100,"issued":100,
            "rebuild_stats":{"draid1:4d:11c:1s-0":{"name":"draid1:4d:11c:1s-0","state":"ACTIVE",
              "scanned":3859206193152,"issued":1748208222453,"to_scan":6740063801589,"rebuilt":358000000000,"errors":0}}},
          "vdevs":{"tank":{"vdev_type":"root","state":"DEGRADED","vdevs":{
            "draid1:4d:11c:1s-0":{"vdev_type":"draid","state":"DEGRADED","vdevs":{
              "spare-6":{"vdev_type":"spare","state":"DEGRADED","vdevs":{
                "sdg":{"vdev_type":"disk","state":"UNAVAIL"},
                "draid1-0-0":{"vdev_type":"dspare","state":"ONLINE"}}}}}}}}}}}"#;
        let s = parse(text).expect("parses");
        let p = &s.pools[0];
        assert_eq!(p.scans.len(), 2);
        let r = &p.scans[1];
        assert_eq!(
            (r.kind, r.state),
            (ScanKind::Rebuild, ScanState::InProgress)
        );
        assert_eq!(r.vdev.as_deref(), Some("draid1:4d:11c:1s-0"));
        assert_eq!(r.total_bytes, Some(6_740_063_801_589));
        let spare = &p.config[0].children[0].children[0];
        assert_eq!(spare.kind, VdevKind::Spare);
        assert!(!spare.children[0].resilvering);
        assert!(spare.children[1].resilvering);
        assert_eq!(spare.children[1].kind, VdevKind::DistributedSpare);
        assert_eq!(p.config[0].children[0].kind, VdevKind::Draid(1));
    }

    proptest! {
        #[test]
        fn never_panics(text in "\\PC{0,300}") {
            let _ = parse(&text);
        }

        #[test]
        fn never_panics_on_json_shaped_input(
            state in "[A-Z\"]{0,9}",
            n in any::<u64>(),
            s in "[0-9.KMGT,-]{0,6}",
        ) {
            let text = format!(r#"{{"pools":{{"p":{{"state":"{state}","error_count":"{s}","scan_stats":{{"function":"SCRUB","state":"SCANNING","issued":{n},"to_examine":"{s}"}},"vdevs":{{"p":{{"read_errors":{n},"vdevs":{{"m":{{"vdev_type":"raidz","name":"raidz{s}"}}}}}}}}}}}}}}"#);
            let _ = parse(&text);
        }
    }
}
