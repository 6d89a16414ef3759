//! The hardware RAID rows of the health pane: virtual drives that are not optimal, or whose
//! write-back cache fell to write-through, the worst first; optimal ones counted in the summary.

use crate::collect::{Live, VdNow};

use super::cells::{eta, health_table, pct, risk};
use super::table::{num, text, Cell, Row, Table};

/// Nothing to look at: `Optl`, nothing rebuilding, the cache as configured.
fn vd_ok(v: &VdNow) -> bool {
    let s = &v.status;
    s.ok && s.members_rebuilding == 0 && !cache_fell(v)
}

fn cache_fell(v: &VdNow) -> bool {
    v.status.write_back_configured == Some(true) && v.status.write_back_active == Some(false)
}

/// VDs the worst first: offline, degraded with the least redundancy, stalled, rebuilding,
/// then the rest (a fallen cache).
fn rank(v: &VdNow) -> (u8, u32) {
    let s = &v.status;
    let state = if s.state == "OfLn" {
        0
    } else if s.degraded && s.members_rebuilding == 0 {
        1
    } else if s.rebuild_stalled {
        2
    } else if s.degraded || s.members_rebuilding > 0 {
        3
    } else if !s.ok {
        4
    } else {
        5
    };
    (state, s.redundancy_left.unwrap_or(u32::MAX))
}

/// The VDs that get rows, the worst first.
pub(super) fn unhealthy(live: &Live) -> Vec<&VdNow> {
    let mut v: Vec<&VdNow> = live.raid_vds.iter().filter(|v| !vd_ok(v)).collect();
    v.sort_by(|a, b| {
        rank(a)
            .cmp(&rank(b))
            .then_with(|| a.status.vd.cmp(&b.status.vd))
    });
    v
}

/// `raid: 3 of 4 VDs optimal`; nothing on a host without a controller.
pub(super) fn summary(live: &Live) -> Option<String> {
    let n = live.raid_vds.len();
    if n == 0 {
        return None;
    }
    let ok = live.raid_vds.iter().filter(|v| v.status.ok).count();
    let what = if n == 1 { "VD" } else { "VDs" };
    Some(if ok == n {
        format!("raid: {n} {what} optimal")
    } else {
        format!("raid: {ok} of {n} {what} optimal")
    })
}

/// The table of the VDs that get rows: state, members, rebuild progress and ETA, redundancy,
/// risk, cache; the members not online and a fallen cache in the notes.
pub(super) fn table(vds: &[&VdNow]) -> Table {
    let cols = vec![
        text("level", 6, 4),
        text("state", 6, 0),
        text("dev", 5, 3),
        num("disks", 5, 1),
        num("done", 6, 0),
        num("eta", 7, 1),
        num("redund", 6, 2),
        num("risk", 6, 2),
        text("cache", 6, 5),
    ];
    let rows = vds
        .iter()
        .map(|v| {
            let s = &v.status;
            let mut notes: Vec<(String, bool)> = Vec::new();
            if s.rebuild_stalled {
                notes.push(("STALLED".to_owned(), true));
            }
            if cache_fell(v) {
                notes.push(("WB→WT".to_owned(), true));
            }
            for (slot, state) in &s.member_slots {
                if state != "Onln" {
                    notes.push((format!("{slot} {state}"), state != "Rbld"));
                }
            }
            Row {
                key: s.vd.clone(),
                cells: vec![
                    Cell::text(s.level.as_str()),
                    Cell::Text(s.state.clone(), !s.ok),
                    s.device.as_deref().map_or(Cell::None, Cell::text),
                    Cell::text(format!("{}/{}", s.members_online, s.members)),
                    pct(s.rebuild_progress_pct),
                    eta(s.rebuild_eta_s),
                    s.redundancy_left
                        .map_or(Cell::None, |r| Cell::Text(r.to_string(), r == 0)),
                    risk(s.rebuild_risk),
                    s.cache.as_deref().map_or(Cell::None, Cell::text),
                ],
                tail: notes,
            }
        })
        .collect();
    health_table("VD", cols, rows, "drives")
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::path::Path;

    use crate::collect::{Live, VdNow};
    use crate::health::hwraid::{HwraidDetector, Params};
    use crate::health::risk::RiskModel;
    use crate::sources::storcli;

    fn parse(name: &str) -> Vec<storcli::Controller> {
        let text = std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("fixtures/storcli")
                .join(name),
        )
        .expect("fixture");
        storcli::parse(&text).expect("parses")
    }

    #[test]
    fn a_rebuilding_vd_gets_a_row_and_the_summary_counts_it() {
        let mut c = parse("edited-netdata-c0-show-all-raid6-dgrd-pd-252-3-rbld.json");
        c[0].rebuilds = parse("synthetic-c0-eall-sall-show-rebuild-252-3-37pct.json")[0]
            .rebuilds
            .clone();
        let mut d = HwraidDetector::new(Params {
            stall_after_s: 7200.0,
            eta_window_s: 3600.0,
            risk: RiskModel::default(),
        });
        let devices = BTreeMap::from([("c0/v0".to_owned(), "sda".to_owned())]);
        d.observe(&c, &devices, 0.0, &mut Vec::new());
        let live = Live {
            raid_vds: d
                .vds()
                .iter()
                .map(|v| VdNow { status: v.clone() })
                .collect(),
            ..Live::default()
        };
        let screen = super::super::render("ds01", &live, super::super::View::default());
        assert!(screen.contains("raid: 0 of 1 VD optimal"), "{screen}");
        let row = screen
            .lines()
            .find(|l| l.starts_with("c0/v0"))
            .unwrap_or_else(|| panic!("no VD row in\n{screen}"));
        for want in [
            "RAID6",
            "Dgrd",
            "sda",
            "5/6",
            "37.0%",
            "5h12m",
            "252:3 Rbld",
        ] {
            assert!(row.contains(want), "{want} not in {row}");
        }
    }
}
