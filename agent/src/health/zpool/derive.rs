//! What a pool's latest readings mean: health, capacity, error counts, scan progress with our
//! own rate and ETA, and per top-level vdev the redundancy left and the rebuild risk.
//!
//! Pool-level error counts are the devices' (leaves'), summed. `fault_under_online` is a
//! FAULTED/DEGRADED/UNAVAIL/REMOVED device in a pool whose state still reads ONLINE — what a pool
//! with a dead cache device or a faulted spare looks like. Capacity is compared with the
//! configured threshold (`capacity_over_85`: ZFS allocation slows as free space fragments).
//!
//! Per top-level vdev (data classes and logs): `redundancy_left` — parity for RAID-Z/dRAID,
//! copies − 1 for a mirror, 0 for a single device, minus members that do not hold their current
//! data: a leaf FAULTED/UNAVAIL/REMOVED/OFFLINE/DEGRADED, `(awaiting resilver)` or being
//! resilvered, a spare-N/replacing-N group none of whose devices holds it — and `rebuild_risk`
//! ([`crate::health::risk::loss_probability`]) over the window until our resilver ETA (the
//! tool's before we have two samples), or the open window when degraded with nothing
//! rebuilding.

use std::collections::BTreeMap;

use super::model::{scan_key, PoolReport, PoolState, VdevReport};
use crate::health::risk::{loss_probability, loss_with_members, Exposure, MemberRate, RiskModel};
use crate::sources::zpool::{is_failed_state, Pool, Scan, ScanKind, ScanState, Vdev, VdevKind};

/// Walks the config with each vdev's path (`tank/raidz2-0/sdk`) and parent name.
pub(super) fn walk<'a>(p: &'a Pool, f: &mut dyn FnMut(&'a Vdev, &str, &str, usize)) {
    fn rec<'a>(
        v: &'a Vdev,
        path: &str,
        parent: &str,
        depth: usize,
        f: &mut dyn FnMut(&'a Vdev, &str, &str, usize),
    ) {
        let here = if path.is_empty() {
            v.name.clone()
        } else {
            format!("{path}/{}", v.name)
        };
        f(v, &here, parent, depth);
        for c in &v.children {
            rec(c, &here, &v.name, depth + 1, f);
        }
    }
    for top in &p.config {
        // The root's path is the pool name; sections hang under it (`tank/logs/sdc`).
        let base = if top.kind == VdevKind::Root {
            String::new()
        } else {
            p.name.clone()
        };
        rec(top, &base, "", 0, f);
    }
}

/// What a member check needs to know about the top-level vdev around it.
#[derive(Debug, Clone, Copy)]
struct GroupCx {
    /// The top-level vdev is dRAID: a healing resilver writes to every disk of it, so a
    /// `(resilvering)` mark on a plain member says nothing about that member.
    draid: bool,
    /// No sequential rebuild of this dRAID vdev runs: its distributed spares already hold the
    /// columns they stand in for, whatever their marks.
    dspare_written: bool,
}

/// Whether a leaf device holds its current data: not FAULTED/UNAVAIL/REMOVED/OFFLINE, not
/// DEGRADED (too many errors: its data can no longer be trusted), not `(awaiting resilver)`,
/// and not `(resilvering)` unless the mark says nothing (see [`GroupCx`]). `in_group` is true
/// inside a `spare-N`/`replacing-N`, where the mark names the stand-in being written.
fn leaf_holds(v: &Vdev, cx: GroupCx, in_group: bool) -> bool {
    if is_failed_state(&v.state) || v.state == "DEGRADED" || v.awaiting_resilver {
        return false;
    }
    if v.resilvering {
        return if v.kind == VdevKind::DistributedSpare {
            cx.dspare_written
        } else {
            cx.draid && !in_group
        };
    }
    true
}

/// Whether a member of a redundancy group holds its data. A spare-N/replacing-N group does
/// when one of its devices does; a leaf by [`leaf_holds`].
fn member_ok(v: &Vdev, cx: GroupCx, in_group: bool) -> bool {
    match v.kind {
        // zpool marks a spare group UNAVAIL while the spare it took is not attached for real,
        // although that spare reads ONLINE: it holds nothing.
        VdevKind::Spare | VdevKind::Replacing if is_failed_state(&v.state) => false,
        VdevKind::Spare | VdevKind::Replacing => v.children.iter().any(|c| member_ok(c, cx, true)),
        _ if !v.children.is_empty() => !is_failed_state(&v.state),
        _ => leaf_holds(v, cx, in_group),
    }
}

/// The leaf that holds a surviving member's data: the member itself, or within a spare or
/// replacing group the first device that holds it.
fn data_leaf(v: &Vdev, cx: GroupCx) -> &Vdev {
    if v.children.is_empty() {
        return v;
    }
    v.children
        .iter()
        .find(|c| member_ok(c, cx, true))
        .map_or(v, |c| data_leaf(c, cx))
}

/// What the report says about pool `t` at `now_s`: capacity over `threshold` percent, and the
/// risk by `risk`, each surviving member of a redundancy vdev at its own rate from `rate` (by
/// leaf name as `zpool status` prints it; `None`: no reading, the flat rate).
pub(super) fn derive(
    t: &PoolState,
    now_s: f64,
    threshold: f64,
    risk: &RiskModel,
    rate: &dyn Fn(&str) -> Option<MemberRate>,
) -> PoolReport {
    let mut d = PoolReport {
        scan_kind: "none",
        scan_state: "none",
        ..PoolReport::default()
    };
    let status = t.status.as_ref();
    let root = status.and_then(Pool::root);
    d.health = t
        .kstat
        .clone()
        .or_else(|| status.map(|p| p.state.clone()).filter(|s| !s.is_empty()))
        .or_else(|| t.list.as_ref().map(|l| l.health.clone()));
    if let Some(l) = &t.list {
        d.size_bytes = l.size_bytes;
        d.alloc_bytes = l.alloc_bytes;
        d.free_bytes = l.free_bytes;
        d.fragmentation_pct = l.fragmentation_pct;
    }
    // JSON status carries the root's space when list failed.
    d.size_bytes = d.size_bytes.or(root.and_then(|r| r.size_bytes));
    d.alloc_bytes = d.alloc_bytes.or(root.and_then(|r| r.alloc_bytes));
    d.capacity_pct = match (d.alloc_bytes, d.size_bytes) {
        (Some(a), Some(s)) if s > 0 => Some(a as f64 * 100.0 / s as f64),
        _ => t.list.as_ref().and_then(|l| l.capacity_pct),
    };
    d.capacity_over = d.capacity_pct.map(|c| c > threshold);
    let Some(p) = status else {
        return d;
    };
    d.details = true;
    d.status_age_s = t.status_t.map(|st| (now_s - st).max(0.0));
    // Pool-level counters are the devices' (leaves'), summed: the root vdev's own counters
    // stay at 0 while a disk collects checksum errors, and an alert on the pool must see them.
    // The root's counters are on its zpool_vdev line.
    let mut sums: Option<[u64; 3]> = None;
    walk(p, &mut |v, _path, parent, depth| {
        let in_spares = parent == "spares" && depth == 1;
        if !v.children.is_empty() || v.kind.is_section() || in_spares {
            return;
        }
        if let (Some(r), Some(w), Some(c)) = (v.read_errors, v.write_errors, v.cksum_errors) {
            let s = sums.get_or_insert([0; 3]);
            s[0] = s[0].saturating_add(r);
            s[1] = s[1].saturating_add(w);
            s[2] = s[2].saturating_add(c);
        }
    });
    if let Some([r, w, c]) = sums {
        d.read_errors = Some(r);
        d.write_errors = Some(w);
        d.cksum_errors = Some(c);
    }
    d.data_errors = p.data_errors;

    let track_of = |s: &Scan| t.scans.get(&scan_key(s));
    let running = |s: &&Scan| s.state == ScanState::InProgress;
    if let Some(s) = p.primary_scan() {
        d.scan_kind = s.kind.as_str();
        d.scan_state = s.state.as_str();
        if matches!(s.state, ScanState::InProgress | ScanState::Paused) {
            // The tool's own percentage (from exact counts) when printed; ours from its rounded
            // sizes only when it printed none.
            d.scan_pct = s
                .percent
                .or_else(|| match (s.progress_bytes(), s.total_bytes) {
                    (Some(done), Some(total)) if total > 0 => {
                        Some((done as f64 * 100.0 / total as f64).min(100.0))
                    }
                    _ => None,
                });
        }
        if s.state == ScanState::InProgress {
            let tr = track_of(s);
            // Ours once two samples exist; the tool's pass rate before that.
            d.scan_rate_bps = tr.and_then(|tr| tr.rate_bps).or(s.rate_bps);
            d.scan_eta_s = tr.and_then(|tr| tr.eta_s);
            d.scan_tool_eta_s = s.tool_eta_s;
        }
    }
    // The window until redundancy is back, for a top-level vdev: the ETA of a rebuild of that
    // vdev, else of the pool's resilver; ours when we have two samples, the tool's before.
    let window = |s: &Scan| -> Option<f64> {
        track_of(s)
            .and_then(|tr| tr.eta_s)
            .or(s.tool_eta_s.map(|e| e as f64))
            .map(|secs| secs / 3600.0)
    };
    let remaining = |s: &Scan| -> Option<u64> {
        Some(
            s.total_bytes?
                .saturating_sub(s.progress_bytes().unwrap_or(0)),
        )
    };
    let pool_resilver = p
        .scans
        .iter()
        .filter(running)
        .find(|s| s.kind == ScanKind::Resilver);

    let health = d.health.clone().unwrap_or_default();
    let mut min_left: Option<u32> = None;
    let mut max_risk: Option<f64> = None;
    let mut tops: BTreeMap<*const Vdev, (u32, f64, Option<u32>)> = BTreeMap::new();
    // Log vdevs get their own figures on their `zpool_vdev` lines; only data vdevs make the
    // pool's (a lost log device loses in-flight synchronous writes, not the pool).
    let logs = p
        .section(VdevKind::Logs)
        .into_iter()
        .flat_map(|s| s.children.iter().map(|v| (v, false)));
    for (v, holds_data) in p.data_vdevs().map(|v| (v, true)).chain(logs) {
        if matches!(v.kind, VdevKind::Indirect | VdevKind::Other) {
            continue;
        }
        let rebuild =
            p.scans.iter().filter(running).find(|s| {
                s.kind == ScanKind::Rebuild && s.vdev.as_deref() == Some(v.name.as_str())
            });
        let draid = matches!(v.kind, VdevKind::Draid(_));
        let cx = GroupCx {
            draid,
            dspare_written: draid && rebuild.is_none(),
        };
        let grouped = matches!(
            v.kind,
            VdevKind::Mirror | VdevKind::Raidz(_) | VdevKind::Draid(_)
        );
        let members: Vec<&Vdev> = if grouped {
            v.children.iter().collect()
        } else {
            vec![v]
        };
        let design = if grouped {
            v.kind.design_redundancy(v.children.len())
        } else {
            0
        };
        let failed = members
            .iter()
            .filter(|m| {
                if grouped || matches!(m.kind, VdevKind::Spare | VdevKind::Replacing) {
                    !member_ok(m, cx, false)
                } else {
                    // A single-device vdev has no redundancy to lose: only a dead device loses
                    // its data (a DEGRADED one is still read).
                    is_failed_state(&m.state)
                }
            })
            .count();
        let failed = u32::try_from(failed).unwrap_or(u32::MAX);
        let surviving = u32::try_from(members.len())
            .unwrap_or(u32::MAX)
            .saturating_sub(failed);
        // Each surviving member's own rate, where its drive was read.
        let rates: Vec<Option<MemberRate>> = if grouped {
            members
                .iter()
                .filter(|m| member_ok(m, cx, false))
                .map(|m| rate(&data_leaf(m, cx).name))
                .collect()
        } else {
            Vec::new()
        };
        let at_risk = (!rates.iter().all(Option::is_none)).then(|| {
            u32::try_from(rates.iter().flatten().filter(|r| r.at_risk).count()).unwrap_or(0)
        });
        let (left, p_loss, at_risk) = if failed > design {
            // More members gone than the parity covers: the vdev's data is not all readable.
            (0, 1.0, at_risk)
        } else if failed == 0 {
            (design, 0.0, at_risk)
        } else {
            let scan = rebuild.or(pool_resilver);
            let exposure = Exposure {
                surviving,
                redundancy_left: design - failed,
                window_h: scan.and_then(window),
                bytes_to_read: scan.and_then(remaining).or(v.alloc_bytes).or(d.alloc_bytes),
            };
            match loss_with_members(risk, &exposure, &rates) {
                Some((p, n)) => (design - failed, p, Some(n)),
                None => (design - failed, loss_probability(risk, &exposure), None),
            }
        };
        if holds_data {
            min_left = Some(min_left.map_or(left, |m| m.min(left)));
            max_risk = Some(max_risk.map_or(p_loss, |m| m.max(p_loss)));
        }
        tops.insert(v as *const Vdev, (left, p_loss, at_risk));
    }
    d.redundancy_left = min_left;
    d.rebuild_risk = max_risk;

    let mut fault = false;
    walk(p, &mut |v, _path, parent, depth| {
        if v.kind == VdevKind::Root || v.kind.is_section() {
            return;
        }
        let in_spares = parent == "spares" && depth == 1;
        if !in_spares
            && matches!(
                v.state.as_str(),
                "FAULTED" | "DEGRADED" | "UNAVAIL" | "REMOVED"
            )
        {
            fault = true;
        }
        let top = tops.get(&(v as *const Vdev));
        d.vdevs.push(VdevReport {
            name: v.name.clone(),
            kind: v.kind.to_string(),
            parent: parent.to_owned(),
            state: v.state.clone(),
            read_errors: v.read_errors,
            write_errors: v.write_errors,
            cksum_errors: v.cksum_errors,
            note: v.note.clone(),
            redundancy_left: top.map(|t| t.0),
            rebuild_risk: top.map(|t| t.1),
            members_at_risk: top.and_then(|t| t.2),
        });
    });
    if let Some(r) = root {
        d.vdevs.insert(
            0,
            VdevReport {
                name: r.name.clone(),
                kind: r.kind.to_string(),
                parent: String::new(),
                state: r.state.clone(),
                read_errors: r.read_errors,
                write_errors: r.write_errors,
                cksum_errors: r.cksum_errors,
                note: r.note.clone(),
                redundancy_left: None,
                rebuild_risk: None,
                members_at_risk: None,
            },
        );
    }
    d.fault_under_online = health == "ONLINE" && fault;
    d
}
