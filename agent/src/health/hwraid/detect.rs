//! Successive readings of the controllers → statuses with rebuild rate, ETA and stall, and
//! events: a controller's status, a battery/CacheVault, a VD's or PD's state changing, a rebuild
//! starting, finishing, stalling or moving again, a VD's cache falling from write-back to
//! write-through or coming back.
//!
//! No I/O: [`HwraidDetector::observe`] takes storcli's answers, parsed and merged, and the block
//! device each VD was tied to. The first reading is the baseline and announces nothing.

use std::collections::{BTreeMap, VecDeque};

use super::derive::{
    base_redundancy, battery_word, is_parity, pd_failed, pd_ok, pd_risk, pd_state_word,
    vd_state_known, vd_state_word, vd_word_known,
};
use super::model::{ControllerStatus, PdStatus, VdStatus};
use crate::event::Event;
use crate::health::risk::{loss_probability_members, Exposure, RiskModel};
use crate::sources::storcli::{Controller, PdState, PhysicalDrive, Slot, VdState, VirtualDrive};

mod transitions;

/// The source of the events.
const SOURCE: &str = "hwraid";

/// How the detector judges rebuilds and risk.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Params {
    /// A rebuild whose progress has not moved for this many seconds is stalled.
    pub stall_after_s: f64,
    /// Seconds of progress samples the ETA's rate is measured over, when storcli gives none.
    pub eta_window_s: f64,
    /// The rebuild-risk model.
    pub risk: RiskModel,
}

/// A drive's own rate from elsewhere — the drive monitor's smartctl reading of it — which is
/// preferred over the rate from storcli's counters.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MemberReading {
    /// Its annual failure rate.
    pub afr: f64,
    /// A condition raises its rate above the flat one.
    pub at_risk: bool,
    /// Its probability of failing within `[risk] open_window_h`.
    pub failure_probability: f64,
}

/// One rebuilding drive's progress over time.
#[derive(Debug, Clone, PartialEq)]
struct Progress {
    /// (seconds, percent), oldest first, within `eta_window_s`.
    samples: VecDeque<(f64, f64)>,
    /// When the percentage last moved (or was first seen).
    moved_s: f64,
}

/// The hardware RAID state machine: feed it one round of storcli answers per round.
#[derive(Debug)]
pub struct HwraidDetector {
    params: Params,
    polled: bool,
    controllers: Vec<ControllerStatus>,
    vds: Vec<VdStatus>,
    pds: Vec<PdStatus>,
    /// By `c0/252:3`, the drives rebuilding.
    progress: BTreeMap<String, Progress>,
}

impl HwraidDetector {
    /// A detector with these parameters and nothing seen.
    pub fn new(params: Params) -> Self {
        Self {
            params,
            polled: false,
            controllers: Vec::new(),
            vds: Vec::new(),
            pds: Vec::new(),
            progress: BTreeMap::new(),
        }
    }

    /// The parameters it judges by.
    pub fn params(&self) -> &Params {
        &self.params
    }

    /// Controllers as last observed, by number.
    pub fn controllers(&self) -> &[ControllerStatus] {
        &self.controllers
    }

    /// Virtual drives as last observed, by controller and number.
    pub fn vds(&self) -> &[VdStatus] {
        &self.vds
    }

    /// Physical drives as last observed, by controller and slot.
    pub fn pds(&self) -> &[PdStatus] {
        &self.pds
    }

    /// Takes one round's answers at monotonic time `now_s`; `devices` maps `c0/v1` to the block
    /// device it was tied to. State changes go to `events`.
    pub fn observe(
        &mut self,
        ctls: &[Controller],
        devices: &BTreeMap<String, String>,
        now_s: f64,
        events: &mut Vec<Event>,
    ) {
        self.observe_with(ctls, devices, &|_| None, now_s, events);
    }

    /// [`Self::observe`], with each drive's own reading from elsewhere where `reading` has one
    /// (the smartctl reading of the same drive, found by serial or WWN): it stands in for the
    /// rate storcli's counters give.
    pub fn observe_with(
        &mut self,
        ctls: &[Controller],
        devices: &BTreeMap<String, String>,
        reading: &dyn Fn(&PhysicalDrive) -> Option<MemberReading>,
        now_s: f64,
        events: &mut Vec<Event>,
    ) {
        let mut controllers = Vec::new();
        let mut vds = Vec::new();
        let mut pds = Vec::new();
        let mut rebuilding = Vec::new();
        for c in ctls {
            let Some(n) = c.controller else { continue };
            let ctl = format!("c{n}");
            let mut pd_by_slot: BTreeMap<Slot, PdStatus> = BTreeMap::new();
            // Drives `Rbld` whose `show rebuild` row says the rebuild is not running (`Paused`):
            // stalled at once, whatever the percentage did.
            let mut halted: Vec<Slot> = Vec::new();
            for d in &c.physical_drives {
                let key = format!("{ctl}/{}", d.slot);
                // The drive's row whatever its status: a paused rebuild still gives its
                // percentage.
                let row = c.rebuilds.iter().find(|r| r.slot == d.slot);
                let (mut pct, mut eta) = (None, None);
                if d.state == PdState::Rebuild {
                    rebuilding.push(key.clone());
                    pct = row.and_then(|r| r.progress_pct).map(f64::from);
                    eta = row.and_then(|r| r.time_left_s).map(|s| s as f64);
                    if let Some(p) = pct {
                        // Tracked whether or not storcli estimates the time left: the
                        // samples also tell a stall.
                        let from_rate = self.track(&key, p, now_s);
                        eta = eta.or(from_rate);
                        if self.track_stalled(&key, now_s) {
                            eta = None;
                        }
                    }
                    if row.is_some_and(|r| r.halted) {
                        halted.push(d.slot);
                        eta = None;
                    }
                }
                let risk = pd_risk(&self.params.risk, d);
                let (afr, at_risk, failure_probability) = match reading(d) {
                    Some(r) => (Some(r.afr), r.at_risk, Some(r.failure_probability)),
                    None => (
                        risk.read.then_some(risk.afr),
                        risk.read && risk.condition_multiplier > 1.0,
                        risk.read
                            .then(|| risk.failure_probability(self.params.risk.open_window_h)),
                    ),
                };
                let vd: Vec<String> = c
                    .virtual_drives
                    .iter()
                    .filter(|v| member_of(v, d))
                    .map(|v| format!("{ctl}/v{}", v.vd))
                    .collect();
                pd_by_slot.insert(
                    d.slot,
                    PdStatus {
                        controller: ctl.clone(),
                        slot: d.slot.to_string(),
                        did: d.did,
                        vd: vd.join(","),
                        serial: d.serial.clone(),
                        wwn: d.wwn.clone(),
                        model: d.model.clone(),
                        medium: d.medium.clone(),
                        interface: d.interface.clone(),
                        state: pd_state_word(&d.state),
                        ok: pd_ok(&d.state),
                        media_errors: d.media_errors,
                        other_errors: d.other_errors,
                        predictive_failures: d.predictive_failures,
                        smart_alert: d.smart_alert,
                        temperature_c: d.temperature_c,
                        rebuild_progress_pct: pct,
                        rebuild_eta_s: eta,
                        failure_probability,
                        afr,
                        at_risk,
                    },
                );
            }
            let mut ctl_vds = Vec::new();
            for v in &c.virtual_drives {
                let key = format!("{ctl}/v{}", v.vd);
                // Judged only on progress read in this round: a failed `show rebuild` call is
                // not a rebuild standing still.
                let stalled = c.physical_drives.iter().any(|d| {
                    d.state == PdState::Rebuild
                        && member_of(v, d)
                        && (halted.contains(&d.slot)
                            || pd_by_slot
                                .get(&d.slot)
                                .is_some_and(|p| p.rebuild_progress_pct.is_some())
                                && self.is_stalled(&format!("{ctl}/{}", d.slot), now_s))
                });
                ctl_vds.push(self.vd_status(
                    &ctl,
                    key.clone(),
                    v,
                    c,
                    &pd_by_slot,
                    devices.get(&key).cloned(),
                    stalled,
                ));
            }
            let (bbu_state, bbu_ok) = match c.batteries.first() {
                Some(b) => {
                    let (w, ok) = battery_word(&b.state);
                    (Some(w), Some(ok))
                }
                None => (None, None),
            };
            controllers.push(ControllerStatus {
                controller: ctl.clone(),
                model: c.model.clone(),
                serial: c.serial.clone(),
                status: c.controller_status.clone(),
                ok: c.controller_status.as_deref().map(|s| s == "Optimal"),
                vds: to_u32(ctl_vds.len()),
                vds_degraded: to_u32(ctl_vds.iter().filter(|v| v.degraded).count()),
                vds_offline: to_u32(ctl_vds.iter().filter(|v| v.state == "OfLn").count()),
                pds: to_u32(c.physical_drives.len()),
                pds_failed: to_u32(
                    c.physical_drives
                        .iter()
                        .filter(|d| pd_failed(&d.state))
                        .count(),
                ),
                roc_temperature_c: c.roc_temperature_c,
                bbu_present: !c.batteries.is_empty(),
                bbu_state,
                bbu_ok,
            });
            vds.extend(ctl_vds);
            pds.extend(pd_by_slot.into_values());
        }
        // Drives no longer rebuilding forget their progress.
        self.progress.retain(|k, _| rebuilding.contains(k));
        if self.polled {
            self.transitions(&controllers, &vds, &pds, events);
        } else {
            // The first round announces nothing but what nothing else would show: a VD in a
            // state the agent does not know has no redundancy figure to alert on.
            for v in vds.iter().filter(|v| !vd_word_known(&v.state)) {
                events.push(Event::new(
                    SOURCE,
                    v.vd.clone(),
                    "",
                    v.state.clone(),
                    unknown(v),
                ));
            }
        }
        self.polled = true;
        self.controllers = controllers;
        self.vds = vds;
        self.pds = pds;
    }

    /// Records a rebuilding drive's percentage; the ETA from its rate over the window, once it
    /// has moved.
    fn track(&mut self, key: &str, pct: f64, now_s: f64) -> Option<f64> {
        let window = self.params.eta_window_s.max(1.0);
        let p = self
            .progress
            .entry(key.to_owned())
            .or_insert_with(|| Progress {
                samples: VecDeque::new(),
                moved_s: now_s,
            });
        if p.samples.back().is_none_or(|&(_, last)| last != pct) {
            p.moved_s = now_s;
        }
        p.samples.push_back((now_s, pct));
        while p.samples.len() > 2 && p.samples.front().is_some_and(|&(t, _)| now_s - t > window) {
            p.samples.pop_front();
        }
        let (&(t0, p0), &(t1, p1)) = (p.samples.front()?, p.samples.back()?);
        let rate = (p1 - p0) / (t1 - t0);
        (rate.is_finite() && rate > 0.0).then(|| (100.0 - p1).max(0.0) / rate)
    }

    fn track_stalled(&self, key: &str, now_s: f64) -> bool {
        self.is_stalled(key, now_s)
    }

    fn is_stalled(&self, key: &str, now_s: f64) -> bool {
        self.progress
            .get(key)
            .is_some_and(|p| now_s - p.moved_s >= self.params.stall_after_s)
    }

    #[allow(clippy::too_many_arguments)]
    fn vd_status(
        &self,
        ctl: &str,
        key: String,
        v: &VirtualDrive,
        c: &Controller,
        pds: &BTreeMap<Slot, PdStatus>,
        device: Option<String>,
        stalled: bool,
    ) -> VdStatus {
        let members: Vec<&PdStatus> = c
            .physical_drives
            .iter()
            .filter(|d| member_of(v, d))
            .filter_map(|d| pds.get(&d.slot))
            .collect();
        let online: Vec<&PdStatus> = members
            .iter()
            .copied()
            // A copyback copies onto a drive from the spare that stood in: both hold the data.
            .filter(|d| d.state == "Onln" || d.state == "Cpybck")
            .collect();
        let rebuilding: Vec<&PdStatus> = members
            .iter()
            .copied()
            .filter(|d| d.state == "Rbld")
            .collect();
        let degraded = matches!(v.state, VdState::Degraded | VdState::PartiallyDegraded);
        let offline = v.state == VdState::Offline;
        // A state word whose meaning for redundancy is not known (`Rec`, a CacheCade VD's, a
        // new one): no redundancy figure and no risk rather than a guess that reads healthy.
        let known = vd_state_known(&v.state);
        // An optimal VD misses nothing, whatever state words its members show.
        let mut missing = if v.state == VdState::Optimal {
            0
        } else {
            members.len().saturating_sub(online.len())
        };
        let mut count = members.len();
        // A drive pulled from its slot is in no list: storcli's state still says one is gone.
        if (degraded || offline) && missing == 0 {
            missing = 1;
            count += 1;
        }
        let count = to_u32(count);
        let base = base_redundancy(&v.raid_level, count);
        // A spanned level whose TOPOLOGY says which drive is in which span: judged per span.
        let spans = if missing > 0 && !offline {
            spans_of(v, c, &members)
        } else {
            None
        };
        let redundancy_left = if !known {
            None
        } else if offline {
            Some(0)
        } else if let (Some(spans), Some(b)) = (&spans, base) {
            spans.iter().map(|s| b.saturating_sub(s.missing)).min()
        } else {
            base.map(|b| b.saturating_sub(to_u32(missing)))
        };
        let progress = rebuilding
            .iter()
            .filter_map(|d| d.rebuild_progress_pct)
            .reduce(f64::min);
        let eta = rebuilding
            .iter()
            .filter_map(|d| d.rebuild_eta_s)
            .reduce(f64::max);
        let at_risk = online.iter().filter(|d| d.at_risk).count();
        let member_bytes = members
            .iter()
            .filter_map(|d| c.drive(parse_slot(&d.slot)?).and_then(|p| p.size_bytes))
            .max();
        let rebuilding_now = !rebuilding.is_empty() && !stalled;
        let remaining = progress.map_or(1.0, |p| (100.0 - p).max(0.0) / 100.0);
        // The chance that more of `survivors` fail within the window than `left` absorbs.
        let loss = |survivors: &[&PdStatus], left: u32| {
            let reads = if is_parity(&v.raid_level) {
                survivors.len() as f64
            } else {
                1.0
            };
            let exposure = Exposure {
                surviving: to_u32(survivors.len()),
                redundancy_left: left,
                window_h: if rebuilding_now {
                    eta.map(|e| e / 3600.0)
                } else {
                    None
                },
                bytes_to_read: member_bytes.map(|b| (b as f64 * remaining * reads) as u64),
            };
            let afr: Vec<Option<f64>> = survivors.iter().map(|d| d.afr).collect();
            loss_probability_members(&self.params.risk, &exposure, &afr)
        };
        let rebuild_risk = if !known {
            None
        } else if offline {
            Some(1.0)
        } else if missing == 0 {
            Some(0.0)
        } else if let (Some(spans), Some(b)) = (&spans, base) {
            // Data is lost when one span loses more than it absorbs: each degraded span's
            // survivors on their own, combined as 1 − Π(1 − p_span). A span with nothing
            // missing adds nothing (two failures there within the window: second order).
            let survive: f64 = spans
                .iter()
                .filter(|s| s.missing > 0)
                .map(|s| match b.checked_sub(s.missing) {
                    Some(left) => 1.0 - loss(&s.online, left),
                    None => 0.0,
                })
                .product();
            Some((1.0 - survive).clamp(0.0, 1.0))
        } else {
            // Without a topology every survivor counts as if in the degraded span: an upper
            // bound for spanned levels.
            redundancy_left.map(|left| loss(&online, left))
        };
        let write_back_active = v
            .cache
            .as_ref()
            .and_then(|c| c.write)
            .map(|w| w.is_write_back());
        VdStatus {
            controller: ctl.to_owned(),
            vd: key,
            name: v.name.clone(),
            level: v.raid_level.clone(),
            device,
            state: vd_state_word(&v.state),
            ok: v.state == VdState::Optimal,
            degraded,
            redundancy_left,
            members: count,
            members_online: to_u32(online.len()),
            members_rebuilding: to_u32(rebuilding.len()),
            rebuild_progress_pct: progress,
            rebuild_eta_s: if stalled { None } else { eta },
            rebuild_stalled: stalled,
            rebuild_risk,
            members_at_risk: to_u32(at_risk),
            cache: v.cache.as_ref().map(|c| c.text.clone()),
            write_back_configured: v.write_cache_configured.map(|w| w.is_write_back()),
            write_back_active,
            size_bytes: v.size_bytes,
            member_slots: members
                .iter()
                .map(|d| (d.slot.clone(), d.state.clone()))
                .collect(),
        }
    }
}

/// The text of an event about a VD in a state the agent does not know.
fn unknown(v: &VdStatus) -> String {
    format!(
        "{} {} in state {}, which storwatch does not know: its redundancy and rebuild risk are unknown (not reported)",
        v.vd, v.level, v.state
    )
}

/// One span of a spanned VD (`Arr` of its drive group in the `TOPOLOGY` table).
struct Span<'a> {
    /// Its members `Onln` or `Cpybck`.
    online: Vec<&'a PdStatus>,
    /// Its drives that are not.
    missing: u32,
}

/// The spans of a RAID10/50/60 VD from its controller's `TOPOLOGY` rows; `None` for another
/// level, without rows for its drive group, or when they place none of the VD's missing
/// members (a topology that does not cover them tells nothing).
fn spans_of<'a>(
    v: &VirtualDrive,
    c: &Controller,
    members: &[&'a PdStatus],
) -> Option<Vec<Span<'a>>> {
    let level = v.raid_level.trim().to_ascii_uppercase();
    if !matches!(
        level.strip_prefix("RAID").unwrap_or(&level),
        "10" | "50" | "60"
    ) {
        return None;
    }
    let mut by_arr: BTreeMap<u32, Span<'a>> = BTreeMap::new();
    for t in c.topology.iter().filter(|t| t.dg == v.dg) {
        let span = by_arr.entry(t.arr).or_insert_with(|| Span {
            online: Vec::new(),
            missing: 0,
        });
        let member = t.slot.and_then(|slot| {
            let slot = slot.to_string();
            members.iter().copied().find(|m| m.slot == slot)
        });
        match member {
            Some(m) if m.state == "Onln" || m.state == "Cpybck" => span.online.push(m),
            _ => span.missing += 1,
        }
    }
    let placed = by_arr.values().any(|s| s.missing > 0);
    (by_arr.len() > 1 && placed).then(|| by_arr.into_values().collect())
}

/// Whether drive `d` is a member of `v`: listed in its `PDs for VD n`, or, without that list,
/// in its drive group; a hot spare (`DHS` dedicated to the group, `GHS`) never is.
fn member_of(v: &VirtualDrive, d: &PhysicalDrive) -> bool {
    if matches!(
        d.state,
        PdState::DedicatedHotSpare | PdState::GlobalHotSpare
    ) {
        return false;
    }
    if v.members.is_empty() {
        d.dg == Some(v.dg)
    } else {
        v.members.contains(&d.slot)
    }
}

fn parse_slot(s: &str) -> Option<Slot> {
    Slot::parse_eid_slt(s)
}

fn to_u32(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}
