//! The health pane: the MD arrays, multipath maps and zpools of the host, healthy ones counted
//! in one summary line, the others in full rows, the worst first.
//!
//! Healthy means nothing to look at: an array `clean` with no sync running, no failed member
//! and no stall; a map whose paths are all up, none flapping, on its preferred group, its I/O
//! moving; a pool `ONLINE` with no scan running, no device down or annotated and no error
//! counted. Everything else gets a row, a running check or scrub included: it shows its
//! progress and ETA and explains the load on its disks.

use crate::collect::{Live, MdNow, MpathNow, PoolNow};
use crate::health::md::ArrayState;
use crate::health::zpool::PoolReport;

use super::cells::{eta, health_table, pct, risk};
use super::table::{self, num, text, Cell, Row, Table};

/// The objects of the pane that get rows, each kind the worst first.
#[derive(Debug, Default)]
pub(super) struct Unhealthy<'a> {
    pub(super) arrays: Vec<&'a MdNow>,
    pub(super) maps: Vec<&'a MpathNow>,
    pub(super) pools: Vec<&'a PoolNow>,
}

impl<'a> Unhealthy<'a> {
    pub(super) fn of(live: &'a Live) -> Self {
        let mut arrays: Vec<&MdNow> = live.arrays.iter().filter(|a| !array_ok(a)).collect();
        arrays.sort_by(|a, b| {
            let k = |a: &MdNow| {
                let s = &a.status;
                let state = match s.state {
                    ArrayState::Failed => 0,
                    ArrayState::Degraded => 1,
                    ArrayState::Recovering if s.stalled => 2,
                    ArrayState::Recovering => 3,
                    ArrayState::Inactive => 4,
                    ArrayState::Clean => 5,
                };
                (state, s.redundancy_left.unwrap_or(u32::MAX))
            };
            k(a).cmp(&k(b))
                .then_with(|| a.status.array.cmp(&b.status.array))
        });
        let mut maps: Vec<&MpathNow> = live.maps.iter().filter(|m| !map_ok(m)).collect();
        maps.sort_by(|a, b| {
            map_state(a)
                .cmp(&map_state(b))
                .then_with(|| a.map.cmp(&b.map))
        });
        let mut pools: Vec<&PoolNow> = live.pools.iter().filter(|p| !pool_ok(p)).collect();
        pools.sort_by(|a, b| {
            pool_rank(&a.report)
                .cmp(&pool_rank(&b.report))
                .then_with(|| a.pool.cmp(&b.pool))
        });
        Self {
            arrays,
            maps,
            pools,
        }
    }
}

fn array_ok(a: &MdNow) -> bool {
    let s = &a.status;
    s.state == ArrayState::Clean
        && !s.stalled
        && s.failed == 0
        && matches!(s.sync_action.as_str(), "idle" | "")
        && s.sync_pct.is_none()
}

/// What a map's row says about it, the worst first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum MapState {
    Hung,
    NoPath,
    Degraded,
    Flapping,
    Ok,
}

impl MapState {
    pub(super) fn word(self) -> &'static str {
        match self {
            MapState::Hung => "HUNG I/O",
            MapState::NoPath => "no path",
            MapState::Degraded => "degraded",
            MapState::Flapping => "flapping",
            MapState::Ok => "ok",
        }
    }
}

pub(super) fn map_state(m: &MpathNow) -> MapState {
    if m.hung_io == Some(true) {
        MapState::Hung
    } else if m.active == 0 && m.paths > 0 {
        MapState::NoPath
    } else if m.active < m.paths {
        MapState::Degraded
    } else if m.flapping > 0 {
        MapState::Flapping
    } else {
        MapState::Ok
    }
}

fn off_preferred(m: &MpathNow) -> bool {
    matches!((m.active_group, m.preferred_group), (Some(a), Some(p)) if a != p)
}

fn map_ok(m: &MpathNow) -> bool {
    map_state(m) == MapState::Ok && !off_preferred(m) && m.down.is_empty()
}

fn pool_ok(p: &PoolNow) -> bool {
    let r = &p.report;
    let errors = [r.read_errors, r.write_errors, r.cksum_errors]
        .iter()
        .any(|e| e.is_some_and(|e| e > 0));
    r.health.as_deref() == Some("ONLINE")
        && !matches!(r.scan_state, "in_progress" | "paused")
        && !errors
        && pool_notes(r).is_empty()
}

/// Pools the worst first: lost, then degraded, then the rest.
fn pool_rank(r: &PoolReport) -> u8 {
    match r.health.as_deref() {
        Some("FAULTED" | "UNAVAIL" | "SUSPENDED") => 0,
        Some("DEGRADED") => 1,
        Some("ONLINE") => 3,
        _ => 2,
    }
}

/// The summary of each kind present, e.g. `md: 7 of 8 arrays clean`,
/// `mpath: 40 maps, 80 paths active`, `zpool: 2 ONLINE`; nothing for a kind the host has not.
pub(super) fn summary(live: &Live) -> Vec<String> {
    let mut parts = Vec::new();
    let of = |good: usize, all: usize| {
        if good == all {
            all.to_string()
        } else {
            format!("{good} of {all}")
        }
    };
    if !live.arrays.is_empty() {
        let clean = live
            .arrays
            .iter()
            .filter(|a| a.status.state == ArrayState::Clean)
            .count();
        let n = live.arrays.len();
        let what = if n == 1 { "array" } else { "arrays" };
        parts.push(format!("md: {} {what} clean", of(clean, n)));
    }
    if !live.maps.is_empty() {
        let n = live.maps.len();
        let ok = live.maps.iter().filter(|m| map_ok(m)).count();
        let paths: u32 = live.maps.iter().map(|m| m.paths).sum();
        let active: u32 = live.maps.iter().map(|m| m.active).sum();
        let what = if n == 1 { "map" } else { "maps" };
        let maps = if ok == n {
            format!("{n} {what}")
        } else {
            format!("{ok} of {n} {what} ok")
        };
        let path_word = if paths == 1 { "path" } else { "paths" };
        parts.push(format!(
            "mpath: {maps}, {} {path_word} active",
            of(active as usize, paths as usize)
        ));
    }
    if !live.pools.is_empty() {
        let n = live.pools.len();
        let online = live
            .pools
            .iter()
            .filter(|p| p.report.health.as_deref() == Some("ONLINE"))
            .count();
        parts.push(format!("zpool: {} ONLINE", of(online, n)));
    }
    parts.extend(super::hwraid::summary(live));
    parts
}

/// `parts` joined by ` · ` into lines of at most `width` columns; a part too long for a line
/// of its own ends in `…`.
pub(super) fn pack(parts: &[String], width: usize) -> Vec<String> {
    const SEP: &str = " · ";
    let mut lines: Vec<String> = Vec::new();
    for p in parts {
        let p = table::ellipsize(p, width);
        match lines.last_mut() {
            Some(l) if table::width_of(l) + table::width_of(SEP) + table::width_of(&p) <= width => {
                l.push_str(SEP);
                l.push_str(&p);
            }
            _ => lines.push(p),
        }
    }
    lines
}

pub(super) fn md_table(arrays: &[&MdNow]) -> Table {
    let cols = vec![
        text("level", 6, 4),
        text("state", 10, 0),
        num("disks", 5, 1),
        text("sync", 7, 1),
        num("done", 6, 0),
        num("MB/s", 6, 5),
        num("eta", 7, 1),
        num("redund", 6, 2),
        num("risk", 6, 2),
        num("mismatch", 8, 6),
    ];
    let rows = arrays
        .iter()
        .map(|a| {
            let s = &a.status;
            let running = s.sync_pct.is_some();
            let mut notes: Vec<(String, bool)> = Vec::new();
            if s.stalled {
                notes.push(("STALLED".to_owned(), true));
            }
            for m in &a.members {
                let role = m.role();
                if role != "active" && role != "spare" {
                    notes.push((format!("{} {role}", m.name), m.failed));
                }
            }
            Row {
                key: s.array.clone(),
                cells: vec![
                    Cell::text(s.level.as_str()),
                    Cell::Text(s.state.as_str().to_owned(), s.state != ArrayState::Clean),
                    Cell::text(format!("{}/{}", s.active, s.members)),
                    // a sync that waits (`delayed`, `pending`) says so too
                    Cell::text(if s.sync_action == "idle" {
                        "-"
                    } else {
                        s.sync_action.as_str()
                    }),
                    pct(s.sync_pct),
                    s.sync_speed_kbps
                        .filter(|_| running)
                        .map_or(Cell::None, |k| Cell::Num(k as f64 * 1024.0 / 1e6, 1)),
                    eta(s.sync_eta_s),
                    s.redundancy_left
                        .map_or(Cell::None, |r| Cell::Text(r.to_string(), r == 0)),
                    risk(s.rebuild_risk),
                    s.mismatch_cnt
                        .map_or(Cell::None, |m| Cell::Num(m as f64, 0)),
                ],
                tail: notes,
            }
        })
        .collect();
    health_table("ARRAY", cols, rows, "members")
}

pub(super) fn mpath_table(maps: &[&MpathNow]) -> Table {
    let cols = vec![
        text("state", 8, 0),
        num("paths", 5, 0),
        num("group", 5, 2),
        num("pref", 4, 2),
        num("flap", 4, 1),
        text("queue", 5, 3),
    ];
    let rows = maps
        .iter()
        .map(|m| {
            let state = map_state(m).word();
            let mut notes: Vec<(String, bool)> = Vec::new();
            if let (Some(a), Some(p)) = (m.active_group, m.preferred_group) {
                if a != p {
                    notes.push(("not on preferred group".to_owned(), false));
                }
            }
            notes.extend(m.down.iter().map(|d| (d.clone(), false)));
            let group = |g: Option<u32>| g.map_or(Cell::None, |g| Cell::Num(f64::from(g), 0));
            Row {
                key: m.map.clone(),
                cells: vec![
                    Cell::Text(state.to_owned(), state != "ok"),
                    Cell::text(format!("{}/{}", m.active, m.paths)),
                    group(m.active_group),
                    group(m.preferred_group),
                    Cell::Num(m.flapping as f64, 0),
                    Cell::text(match m.queue_if_no_path {
                        Some(true) => "yes",
                        Some(false) => "no",
                        None => "-",
                    }),
                ],
                tail: notes,
            }
        })
        .collect();
    health_table("MAP", cols, rows, "notes")
}

pub(super) fn pool_table(pools: &[&PoolNow]) -> Table {
    let cols = vec![
        text("health", 9, 0),
        num("cap", 4, 3),
        text("scan", 8, 1),
        num("done", 6, 0),
        num("eta", 7, 1),
        num("redund", 6, 2),
        num("risk", 6, 2),
        num("err r/w/c", 9, 4),
    ];
    let rows = pools
        .iter()
        .map(|p| {
            let r = &p.report;
            let running = matches!(r.scan_state, "in_progress" | "paused");
            let notes = pool_notes(r);
            let health = r.health.clone().unwrap_or_else(|| "-".to_owned());
            let errs = match (r.read_errors, r.write_errors, r.cksum_errors) {
                (None, None, None) => Cell::None,
                (a, b, c) => {
                    let f = |x: Option<u64>| x.map_or_else(|| "-".to_owned(), |x| x.to_string());
                    Cell::text(format!("{}/{}/{}", f(a), f(b), f(c)))
                }
            };
            Row {
                key: p.pool.clone(),
                cells: vec![
                    Cell::Text(health.clone(), health != "ONLINE"),
                    r.capacity_pct
                        .map_or(Cell::None, |c| Cell::text(format!("{c:.0}%"))),
                    Cell::text(if running { r.scan_kind } else { "-" }),
                    pct(r.scan_pct.filter(|_| running)),
                    eta(r
                        .scan_eta_s
                        .or(r.scan_tool_eta_s.map(|s| s as f64))
                        .filter(|_| r.scan_state == "in_progress")),
                    r.redundancy_left
                        .map_or(Cell::None, |x| Cell::Text(x.to_string(), x == 0)),
                    risk(r.rebuild_risk),
                    errs,
                ],
                tail: notes,
            }
        })
        .collect();
    health_table("POOL", cols, rows, "vdevs")
}

/// What a pool's row notes: a paused scan, and the devices that are not ONLINE or that zpool
/// annotates.
fn pool_notes(r: &PoolReport) -> Vec<(String, bool)> {
    let mut notes: Vec<(String, bool)> = Vec::new();
    if r.scan_state == "paused" {
        notes.push(("scan paused".to_owned(), false));
    }
    // Devices that are not ONLINE or that zpool annotates (`(resilvering)`), and
    // vdevs above them that are down themselves: a DEGRADED raidz only says that one
    // of its devices is, which its own note says better.
    for v in r.vdevs.iter().filter(|v| !v.parent.is_empty()) {
        let leaf = !r.vdevs.iter().any(|c| c.parent == v.name);
        let odd = match v.state.as_str() {
            "ONLINE" | "AVAIL" | "INUSE" | "" => false,
            "DEGRADED" => leaf,
            _ => true,
        };
        let note = v.note.as_deref().filter(|_| leaf).map(|n| {
            if n.starts_with('(') {
                n.to_owned()
            } else {
                format!("({n})")
            }
        });
        // A device zpool cannot open is named by its GUID, and its note says what
        // it was (`was /dev/sdj1`): the old name is the one a reader knows.
        let (name, note) = match v.note.as_deref().and_then(|n| n.strip_prefix("was ")) {
            Some(was) if leaf => (was.trim_start_matches("/dev/").to_owned(), None),
            _ => (v.name.clone(), note),
        };
        match (odd, note) {
            (true, Some(n)) => notes.push((format!("{name} {} {n}", v.state), true)),
            (true, None) => notes.push((format!("{name} {}", v.state), true)),
            (false, Some(n)) => notes.push((format!("{name} {n}"), false)),
            (false, None) => {}
        }
    }
    notes
}
