//! One reading of an array (its mdstat entry and, where readable, its sysfs) → its
//! [`ArrayStatus`]: state, the running operation's progress, ETA and stall, redundancy left and
//! the rebuild risk.
//!
//! Where mdstat and sysfs both have a value, sysfs wins — except for the sync position and
//! speed: sysfs `sync_completed` is a checkpoint the kernel moves only every 1/16 of the device or
//! every 5 minutes, against the same limit as mdstat's `(done/total)` counts, so mdstat's live
//! counts drive progress, ETA and stall detection and `sync_completed` is the fallback; mdstat's
//! `speed=` is the kernel's `sync_speed` (the same computation, md.c), read in the same file every
//! second, so it is preferred and sysfs is the fallback.
//!
//! The ETA is ours: the rate between the oldest and newest progress samples of the current run
//! within `eta_window_s`; until the samples show movement (one sample, or polls faster than the
//! position moves), the kernel's speed. A run whose position has not moved for `stall_polls`
//! polls is `stalled`, and has no ETA.
//!
//! Redundancy left is the members the array can still lose without losing data: raid1 and
//! multipath `n − 1`, raid10 `copies − 1` (near × far; losing a member is counted against every
//! block, which is the conservative reading), raid4/5 `1`, raid6 `2`, raid0/linear `0`, minus
//! the degraded slots. The rebuild risk ([`crate::health::risk`]) is 0 for an array that is not
//! degraded, 1 for one that has lost more than it can, and otherwise the model's probability
//! over the ETA of a running recovery or, with none running, the model's open window.

use std::collections::VecDeque;

use super::model::{ArrayState, ArrayStatus, MemberStatus};
use crate::health::risk::{loss_probability, loss_with_members, Exposure, MemberRate, RiskModel};
use crate::sources::mdstat::{MdArray, SyncAction, WaitReason};
use crate::sources::mdsys::{MdSys, Slot, SyncCompleted};

/// What the derivation needs besides the readings.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Params {
    /// Polls without movement after which a running operation is `stalled`.
    pub(super) stall_polls: u32,
    /// Seconds of progress samples the ETA's rate is measured over.
    pub(super) eta_window_s: f64,
    /// The rebuild-risk model.
    pub(super) risk: RiskModel,
}

/// The position of a running operation.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Position {
    done_kb: u64,
    total_kb: u64,
    /// From mdstat's live counts (true) or sysfs's checkpoint (false).
    live: bool,
}

/// Progress samples of one run.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Run {
    action: String,
    total_kb: u64,
    samples: VecDeque<(f64, u64)>,
    still_polls: u32,
}

/// The status of array `a` from mdstat and its sysfs `s`, with `members` already derived;
/// `run` carries the running operation's progress samples from poll to poll.
pub(super) fn derive(
    a: &MdArray,
    s: Option<&MdSys>,
    members: &[MemberStatus],
    run: &mut Option<Run>,
    now_s: f64,
    params: &Params,
) -> (ArrayStatus, Option<Exposure>) {
    let level = s
        .and_then(|s| s.level.clone())
        .or_else(|| a.level.clone())
        .unwrap_or_default();
    let listed = members
        .iter()
        .filter(|m| !m.spare && !m.state.split(',').any(|w| w == "journal"))
        .count();
    let slots = s
        .and_then(|s| s.raid_disks)
        .map(|r| r.disks)
        .or(a.raid_disks)
        .unwrap_or(if a.active {
            to_u32(listed)
        } else {
            to_u32(members.len())
        });
    let failed = to_u32(members.iter().filter(|m| m.failed).count());
    let spare = to_u32(members.iter().filter(|m| m.spare).count());
    let broken = s.and_then(|s| s.array_state.as_deref()) == Some("broken");
    let mut degraded = s
        .and_then(|s| s.degraded)
        .or_else(|| Some(a.raid_disks?.saturating_sub(a.working_disks?)))
        .unwrap_or(failed);
    if broken {
        degraded = degraded.max(1);
    }
    if !a.active {
        degraded = 0;
    }
    let base = base_redundancy(&level, slots, a);
    let running = running_action(a, s);
    let recovering = matches!(running, Some(SyncAction::Recover));
    let state = if !a.active {
        ArrayState::Inactive
    } else if broken || base.is_some_and(|b| degraded > b && level != "raid10") {
        ArrayState::Failed
    } else if degraded > 0 && recovering {
        ArrayState::Recovering
    } else if degraded > 0 {
        ArrayState::Degraded
    } else {
        ArrayState::Clean
    };
    let sync_action = sync_action_word(a, s, running.as_ref());
    let position = running.as_ref().and_then(|_| position(a, s));
    let speed = a
        .progress
        .as_ref()
        .and_then(|p| p.speed_kbps)
        .or_else(|| s.and_then(|s| s.sync_speed_kbps));

    // Track the run: a new action, a new total or a position going backwards starts over.
    let (eta, stalled, pct) = match (&running, position) {
        (Some(action), Some(pos)) => {
            let r = match run.take() {
                Some(r)
                    if r.action == action.as_str()
                        && r.total_kb == pos.total_kb
                        && !matches!(r.samples.back(), Some(&(_, d)) if d > pos.done_kb) =>
                {
                    r
                }
                _ => Run {
                    action: action.as_str().to_owned(),
                    total_kb: pos.total_kb,
                    samples: VecDeque::new(),
                    still_polls: 0,
                },
            };
            let r = run.insert(r);
            let moved = r.samples.back().map(|&(_, d)| d) != Some(pos.done_kb);
            // The sysfs checkpoint moves only every 1/16 of the device or 5 minutes: without
            // mdstat's live counts, only the kernel's speed can say nothing moves.
            let still = !r.samples.is_empty() && if pos.live { !moved } else { speed == Some(0) };
            r.still_polls = if still {
                r.still_polls.saturating_add(1)
            } else {
                0
            };
            r.samples.push_back((now_s, pos.done_kb));
            while r.samples.len() > 2
                && r.samples
                    .get(1)
                    .is_some_and(|&(t, _)| now_s - t >= params.eta_window_s)
            {
                r.samples.pop_front();
            }
            let stalled = r.still_polls >= params.stall_polls.max(1);
            let remaining = pos.total_kb.saturating_sub(pos.done_kb) as f64;
            let eta = if stalled {
                None
            } else {
                // Our own rate once the samples show movement; until then (one sample, or
                // polls faster than the position moves) the kernel's speed.
                eta_from(&r.samples, remaining)
                    .or_else(|| speed.filter(|&v| v > 0).map(|v| remaining / v as f64))
            };
            let pct = if pos.total_kb > 0 {
                100.0 * (pos.done_kb as f64 / pos.total_kb as f64).min(1.0)
            } else {
                0.0
            };
            (eta, stalled, Some(pct))
        }
        _ => {
            *run = None;
            (None, false, None)
        }
    };

    let redundancy_left = match (a.active, base) {
        (true, Some(b)) => Some(b.saturating_sub(degraded)),
        _ => None,
    };
    // An inactive array serves nothing: none of its members is active.
    let active = if a.active {
        slots.saturating_sub(degraded)
    } else {
        0
    };
    let mut exposure = None;
    let rebuild_risk = match state {
        ArrayState::Inactive => None,
        ArrayState::Failed => Some(1.0),
        ArrayState::Clean => Some(0.0),
        ArrayState::Degraded | ArrayState::Recovering => redundancy_left.map(|left| {
            let remaining = match (state, position) {
                (ArrayState::Recovering, Some(p)) if p.total_kb > 0 => {
                    1.0 - (p.done_kb as f64 / p.total_kb as f64).min(1.0)
                }
                _ => 1.0,
            };
            let component_kb = s
                .and_then(|s| s.component_size_kb)
                .or_else(|| component_from_mdstat(a, &level, slots));
            let bytes =
                component_kb.map(|kb| (remaining * kb as f64 * 1024.0 * f64::from(active)) as u64);
            let window_h = match state {
                ArrayState::Recovering => eta.map(|e| e / 3600.0),
                _ => None,
            };
            let e = Exposure {
                surviving: active,
                redundancy_left: left,
                window_h,
                bytes_to_read: bytes,
            };
            exposure = Some(e);
            loss_probability(&params.risk, &e)
        }),
    };
    let status = ArrayStatus {
        array: a.name.clone(),
        level,
        members: slots,
        active,
        failed,
        spare,
        degraded,
        state,
        sync_action,
        sync_pct: pct,
        sync_speed_kbps: running.as_ref().and(speed),
        sync_eta_s: eta,
        mismatch_cnt: s.and_then(|s| s.mismatch_cnt),
        redundancy_left,
        rebuild_risk,
        stalled,
    };
    (status, exposure)
}

/// Whether a member without flags or sysfs reads `active` rather than `in_sync`: the array
/// recovers, or waits to.
pub(super) fn members_recovering(a: &MdArray) -> bool {
    a.progress
        .as_ref()
        .is_some_and(|p| p.action == SyncAction::Recover)
        || a.waiting.is_some() && a.working_disks < a.raid_disks
}

/// The members that hold the array's data now: in a slot, not failed, not being rebuilt, not a
/// spare, journal or replacement still being written.
pub(super) fn is_survivor(m: &MemberStatus) -> bool {
    m.role() == "active"
}

/// The array's rebuild risk with each survivor's own rate from `rate` (by member name), and how
/// many survivors are at risk. `None` when no survivor's drive has a reading: the flat-rate
/// figure of the status stands and the count is unknown.
pub(super) fn member_risk(
    status: &ArrayStatus,
    members: &[MemberStatus],
    exposure: Option<&Exposure>,
    risk: &RiskModel,
    rate: &dyn Fn(&str) -> Option<MemberRate>,
) -> Option<(Option<f64>, u32)> {
    if status.state == ArrayState::Inactive {
        return None;
    }
    let rates: Vec<Option<MemberRate>> = members
        .iter()
        .filter(|m| is_survivor(m))
        .map(|m| rate(&m.name))
        .collect();
    match exposure {
        Some(e) => loss_with_members(risk, e, &rates).map(|(p, n)| (Some(p), n)),
        None => {
            if rates.iter().all(Option::is_none) {
                return None;
            }
            let n = rates.iter().flatten().filter(|r| r.at_risk).count();
            Some((status.rebuild_risk, u32::try_from(n).unwrap_or(u32::MAX)))
        }
    }
}

fn to_u32(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// Member failures the level tolerates when every slot works.
fn base_redundancy(level: &str, slots: u32, a: &MdArray) -> Option<u32> {
    match level {
        "raid1" | "multipath" => Some(slots.saturating_sub(1)),
        // mdstat always prints the raid10 layout; without it, mdadm's default is 2 near copies.
        "raid10" => Some(a.raid10.map_or(2, |l| l.copies()).saturating_sub(1)),
        "raid4" | "raid5" => Some(1),
        "raid6" => Some(2),
        "raid0" | "linear" | "faulty" => Some(0),
        _ => None,
    }
}

/// The running operation: sysfs `sync_action` when it says one runs, else mdstat's progress.
fn running_action(a: &MdArray, s: Option<&MdSys>) -> Option<SyncAction> {
    if !a.active {
        return None;
    }
    if let Some(act) = s.and_then(|s| s.sync_action.clone()) {
        let waiting =
            a.waiting.is_some() || s.and_then(|s| s.sync_completed) == Some(SyncCompleted::Delayed);
        return (act.is_running() && !waiting).then_some(act);
    }
    a.progress.as_ref().map(|p| p.action.clone())
}

fn sync_action_word(a: &MdArray, s: Option<&MdSys>, running: Option<&SyncAction>) -> String {
    if let Some(w) = &a.waiting {
        return match &w.reason {
            WaitReason::Delayed => "delayed".into(),
            WaitReason::Pending => "pending".into(),
            WaitReason::Remote => "remote".into(),
            WaitReason::Other(o) => o.to_ascii_lowercase(),
        };
    }
    if s.and_then(|s| s.sync_completed) == Some(SyncCompleted::Delayed) {
        return "delayed".into();
    }
    if let Some(r) = running {
        return r.as_str().to_owned();
    }
    match s.and_then(|s| s.sync_action.as_ref()) {
        Some(SyncAction::Frozen) => "frozen".into(),
        _ => "idle".into(),
    }
}

/// The position of the running operation: mdstat's live counts, else the sysfs checkpoint.
fn position(a: &MdArray, s: Option<&MdSys>) -> Option<Position> {
    if let Some((done_kb, total_kb)) = a.progress.as_ref().and_then(|p| p.counts()) {
        return Some(Position {
            done_kb,
            total_kb,
            live: true,
        });
    }
    match s.and_then(|s| s.sync_completed) {
        Some(SyncCompleted::Progress {
            done_sectors,
            total_sectors,
        }) => Some(Position {
            done_kb: done_sectors / 2,
            total_kb: total_sectors / 2,
            live: false,
        }),
        _ => None,
    }
}

/// Seconds left at the rate between the oldest and newest samples.
fn eta_from(samples: &VecDeque<(f64, u64)>, remaining_kb: f64) -> Option<f64> {
    let (&(t0, d0), &(t1, d1)) = (samples.front()?, samples.back()?);
    let dt = t1 - t0;
    if dt <= 0.0 || d1 <= d0 {
        return None;
    }
    Some(remaining_kb / ((d1 - d0) as f64 / dt))
}

/// KiB per member when sysfs has no `component_size`: from the array size and the level.
fn component_from_mdstat(a: &MdArray, level: &str, slots: u32) -> Option<u64> {
    if let Some(p) = &a.progress {
        // Recovery and check count against the member size.
        if matches!(p.action, SyncAction::Recover | SyncAction::Check) {
            return p.total_kb;
        }
    }
    let blocks = a.blocks_kb?;
    let n = u64::from(slots);
    match level {
        "raid1" | "multipath" => Some(blocks),
        "raid4" | "raid5" => blocks.checked_div(n.checked_sub(1)?),
        "raid6" => blocks.checked_div(n.checked_sub(2)?),
        "raid10" => {
            let copies = u64::from(a.raid10.map_or(2, |l| l.copies()));
            blocks.saturating_mul(copies).checked_div(n)
        }
        _ => None,
    }
}

/// Members from mdstat's list, with sysfs's state where it has the member.
pub(super) fn derive_members(a: &MdArray, s: Option<&MdSys>) -> Vec<MemberStatus> {
    let recovering = members_recovering(a);
    let mut out: Vec<MemberStatus> = Vec::with_capacity(a.members.len());
    for m in &a.members {
        if out.iter().any(|o| o.name == m.name) {
            // The same device listed twice cannot be; keep the first.
            continue;
        }
        let dev = s.and_then(|s| s.devs.iter().find(|d| d.name == m.name));
        let status = match dev {
            Some(d) => {
                let failed = d.has("faulty");
                // mdstat's `(S)` and sysfs `slot` print the same kernel field (raid_disk < 0);
                // should they disagree, the `(S)` wins.
                let in_slot = matches!(d.slot, Some(Slot::Role(_))) && !m.flags.spare;
                let spare = d.has("spare") && !in_slot && !failed;
                let words: Vec<&str> = d
                    .state
                    .iter()
                    .map(|w| {
                        if w == "spare" && in_slot {
                            "rebuilding"
                        } else {
                            w.as_str()
                        }
                    })
                    .collect();
                MemberStatus {
                    name: m.name.clone(),
                    state: words.join(","),
                    failed,
                    spare,
                    errors: d.errors,
                }
            }
            None => {
                let f = &m.flags;
                let mut words = Vec::new();
                if f.faulty {
                    words.push("faulty");
                }
                if f.journal {
                    words.push("journal");
                }
                if f.spare && !f.faulty {
                    words.push("spare");
                }
                if f.replacement {
                    words.push("replacement");
                }
                if words.is_empty() {
                    words.push(if recovering { "active" } else { "in_sync" });
                }
                if f.write_mostly {
                    words.push("write_mostly");
                }
                MemberStatus {
                    name: m.name.clone(),
                    state: words.join(","),
                    failed: f.faulty,
                    spare: f.spare && !f.faulty,
                    errors: None,
                }
            }
        };
        out.push(status);
    }
    out
}
