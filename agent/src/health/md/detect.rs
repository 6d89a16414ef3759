//! Successive readings of the arrays → events: an array appearing, vanishing or changing
//! state, a check/resync/repair/reshape starting or ending, a run stalling or moving again,
//! `mismatch_cnt` growing, a member added, failing, changing role or removed.
//!
//! No I/O: [`MdDetector::observe`] takes parsed mdstat and sysfs; what each array's reading means
//! (state, progress, redundancy, risk) is [`super::derive`].

use std::collections::BTreeMap;

use super::derive::{derive, derive_members, member_risk, members_recovering, Params, Run};
use super::model::{ArrayState, ArrayStatus, MemberStatus};
use crate::event::Event;
use crate::health::risk::{Exposure, MemberRate, RiskModel};
use crate::sources::mdstat::{MdArray, MdMember, Mdstat};
use crate::sources::mdsys::{MdDev, MdSys};

/// One array and what the detector remembers of it.
#[derive(Debug, Clone, PartialEq)]
struct Tracked {
    status: ArrayStatus,
    members: Vec<MemberStatus>,
    run: Option<Run>,
    /// The last `mismatch_cnt` announced by an event (or first seen).
    mismatch_told: Option<u64>,
    /// A growth was announced during the running check/repair/resync.
    mismatch_told_in_run: bool,
    /// The poll that last listed the array.
    seen_in: u64,
    /// While a run is tracked: what `members` were derived from, so that the next poll derives
    /// them only when it changed.
    members_from: Option<MembersFrom>,
    /// The mdstat and sysfs reading this state was derived from; `None` while a run is tracked,
    /// when the next poll derives the status again whatever it reads (copying the reading every
    /// second for nothing was a third of the detector's work on a syncing array).
    input: Option<(MdArray, Option<MdSys>)>,
    /// What the rebuild risk was computed from, while degraded or recovering.
    exposure: Option<Exposure>,
}

/// The MD state machine: feed it one poll's mdstat and sysfs per poll.
#[derive(Debug)]
pub struct MdDetector {
    params: Params,
    arrays: BTreeMap<String, Tracked>,
    polled: bool,
    /// Polls so far.
    poll_no: u64,
}

impl MdDetector {
    /// A detector calling a run `stalled` after `stall_polls` polls without movement, measuring
    /// the ETA's rate over `eta_window_s` seconds and the rebuild risk with `risk`.
    pub fn new(stall_polls: u32, eta_window_s: f64, risk: RiskModel) -> Self {
        Self {
            params: Params {
                stall_polls,
                eta_window_s,
                risk,
            },
            arrays: BTreeMap::new(),
            polled: false,
            poll_no: 0,
        }
    }

    /// The arrays as last observed, by name, with their members.
    pub fn arrays(&self) -> impl Iterator<Item = (&ArrayStatus, &[MemberStatus])> {
        self.arrays
            .values()
            .map(|t| (&t.status, t.members.as_slice()))
    }

    /// One array as last observed.
    pub fn array(&self, name: &str) -> Option<&ArrayStatus> {
        self.arrays.get(name).map(|t| &t.status)
    }

    /// Array `name`'s rebuild risk from each surviving member's own rate, `rate` giving a
    /// member's (by its kernel name, `sdc1`; `None`: no reading, the flat rate), and the number
    /// of survivors at risk. `None` when the array is unknown or inactive, or none of its
    /// survivors has a reading: its status' flat-rate risk stands.
    pub fn member_risk(
        &self,
        name: &str,
        rate: &dyn Fn(&str) -> Option<MemberRate>,
    ) -> Option<(Option<f64>, u32)> {
        let t = self.arrays.get(name)?;
        member_risk(
            &t.status,
            &t.members,
            t.exposure.as_ref(),
            &self.params.risk,
            rate,
        )
    }

    /// Takes one poll's view at monotonic time `now_s`: mdstat and the sysfs of the arrays
    /// whose sysfs could be read. State changes go to `events`; the first poll is the baseline
    /// and announces nothing.
    pub fn observe<'s>(
        &mut self,
        mdstat: &Mdstat,
        sys: impl Fn(&str) -> Option<&'s MdSys>,
        now_s: f64,
        events: &mut Vec<Event>,
    ) {
        let first = !self.polled;
        self.polled = true;
        self.poll_no += 1;
        let poll_no = self.poll_no;
        for a in &mdstat.arrays {
            let s = sys(&a.name);
            if let Some(p) = self.arrays.get_mut(&a.name) {
                if p.seen_in == poll_no {
                    // The same name twice in one mdstat: the first one counts.
                    continue;
                }
                // The same reading as the last poll with nothing running: the status is a pure
                // function of the reading then (no progress samples, no clock), so it, the
                // members and the events would come out the same. Most arrays, most seconds.
                let same = p
                    .input
                    .as_ref()
                    .is_some_and(|(pa, ps)| pa == a && ps.as_ref() == s);
                if p.run.is_none() && same {
                    p.seen_in = poll_no;
                    continue;
                }
                observe_again(p, a, s, now_s, poll_no, &self.params, events);
                continue;
            }
            let members = derive_members(a, s);
            let mut run = None;
            let (status, exposure) = derive(a, s, &members, &mut run, now_s, &self.params);
            if !first {
                events.push(Event::new(
                    "md",
                    status.array.clone(),
                    "",
                    status.state.as_str(),
                    format!(
                        "{} appeared: {} with {} members, {}",
                        status.array,
                        if status.level.is_empty() {
                            "no level"
                        } else {
                            &status.level
                        },
                        status.members,
                        status.state.as_str()
                    ),
                ));
            }
            let input = run.is_none().then(|| (a.clone(), s.cloned()));
            let members_from = run.is_some().then(|| MembersFrom::of(a, s));
            self.arrays.insert(
                a.name.clone(),
                Tracked {
                    mismatch_told: status.mismatch_cnt,
                    mismatch_told_in_run: false,
                    status,
                    members,
                    members_from,
                    run,
                    seen_in: poll_no,
                    input,
                    exposure,
                },
            );
        }
        let gone: Vec<String> = self
            .arrays
            .iter()
            .filter(|(_, t)| t.seen_in != poll_no)
            .map(|(k, _)| k.clone())
            .collect();
        for name in gone {
            if let Some(t) = self.arrays.remove(&name) {
                events.push(Event::new(
                    "md",
                    name.clone(),
                    t.status.state.as_str(),
                    "",
                    format!("{name} vanished (stopped or removed)"),
                ));
            }
        }
    }
}

/// A known array's new reading `a` (and sysfs `s`), when it has to be derived again: the status,
/// members and events, in place.
fn observe_again(
    p: &mut Tracked,
    a: &MdArray,
    s: Option<&MdSys>,
    now_s: f64,
    poll_no: u64,
    params: &Params,
    events: &mut Vec<Event>,
) {
    // A running sync is derived every poll, but its members rarely change: they are derived
    // again only when what they come from does.
    let same_members = p.members_from.as_ref().is_some_and(|f| f.matches(a, s));
    let members = if same_members {
        std::mem::take(&mut p.members)
    } else {
        derive_members(a, s)
    };
    // Taken, not copied: a long run holds `eta_window_s` of samples.
    let mut run = p.run.take();
    let (status, exposure) = derive(a, s, &members, &mut run, now_s, params);
    transitions(p, &status, (!same_members).then_some(&members[..]), events);
    (p.mismatch_told, p.mismatch_told_in_run) = mismatch_growth(p, &status, events);
    p.input = run.is_none().then(|| (a.clone(), s.cloned()));
    if run.is_none() {
        p.members_from = None;
    } else if !same_members {
        p.members_from = Some(MembersFrom::of(a, s));
    }
    p.status = status;
    p.members = members;
    p.run = run;
    p.seen_in = poll_no;
    p.exposure = exposure;
}

/// What an array's members are derived from ([`derive_members`]): its mdstat members, whether
/// it recovers, and its sysfs members.
#[derive(Debug, Clone, PartialEq)]
struct MembersFrom {
    members: Vec<MdMember>,
    recovering: bool,
    devs: Option<Vec<MdDev>>,
}

impl MembersFrom {
    fn of(a: &MdArray, s: Option<&MdSys>) -> Self {
        Self {
            members: a.members.clone(),
            recovering: members_recovering(a),
            devs: s.map(|s| s.devs.clone()),
        }
    }

    /// `MembersFrom::of(a, s) == *self`, without building one.
    fn matches(&self, a: &MdArray, s: Option<&MdSys>) -> bool {
        self.recovering == members_recovering(a)
            && self.members == a.members
            && self.devs.as_deref() == s.map(|s| s.devs.as_slice())
    }
}

/// Events between the previous and the new view of one array.
/// `members` is `None` when they are the same as `prev`'s (then no member changed).
fn transitions(
    prev: &Tracked,
    now: &ArrayStatus,
    members: Option<&[MemberStatus]>,
    events: &mut Vec<Event>,
) {
    let name = &now.array;
    let was = &prev.status;
    if was.state != now.state {
        let text = match (was.state, now.state) {
            (_, ArrayState::Degraded) => format!(
                "{name} is degraded: {} of {} members working, {} more failure(s) tolerated",
                now.active,
                now.members,
                now.redundancy_left.unwrap_or(0)
            ),
            (_, ArrayState::Recovering) => format!(
                "{name} is rebuilding: {} of {} members working, {} more failure(s) tolerated",
                now.active,
                now.members,
                now.redundancy_left.unwrap_or(0)
            ),
            (ArrayState::Recovering, ArrayState::Clean) => {
                format!("{name} finished rebuilding: redundancy restored")
            }
            (_, ArrayState::Clean) => {
                format!("{name} is clean: all {} members working", now.members)
            }
            (_, ArrayState::Failed) => format!(
                "{name} has failed: {} of {} members working, more lost than {} can absorb",
                now.active, now.members, now.level
            ),
            (_, ArrayState::Inactive) => format!("{name} is inactive"),
        };
        events.push(Event::new(
            "md",
            name.clone(),
            was.state.as_str(),
            now.state.as_str(),
            text,
        ));
    }
    // Check, resync, repair and reshape runs; a recovery is told by the state events above.
    let sync_kind = |s: &str| matches!(s, "resync" | "check" | "repair" | "reshape");
    if was.sync_action != now.sync_action {
        if sync_kind(&was.sync_action) {
            let text = match (was.sync_action.as_str(), now.mismatch_cnt) {
                ("check" | "repair", Some(m)) => format!(
                    "{name}: {} ended ({} now), mismatch_cnt {m}",
                    was.sync_action, now.sync_action
                ),
                _ => format!(
                    "{name}: {} ended ({} now)",
                    was.sync_action, now.sync_action
                ),
            };
            events.push(sync_event(name, was, now, text));
        }
        if sync_kind(&now.sync_action) {
            let text = format!("{name}: {} started", now.sync_action);
            events.push(sync_event(name, was, now, text));
        }
    }
    if was.stalled != now.stalled {
        let (from, to, text) = if now.stalled {
            (
                "progressing",
                "stalled",
                format!(
                    "{name}: {} has not moved at {:.1}%",
                    now.sync_action,
                    now.sync_pct.unwrap_or(0.0)
                ),
            )
        } else {
            (
                "stalled",
                "progressing",
                format!("{name}: {} moves again", now.sync_action),
            )
        };
        events.push(Event::new("md", name.clone(), from, to, text));
    }
    let Some(members) = members else {
        return;
    };
    // Every member of every array each second: the event's name is only built for an event.
    let object = |m: &MemberStatus| format!("{name}/{}", m.name);
    for m in members {
        let before = prev.members.iter().find(|p| p.name == m.name);
        let Some(before) = before else {
            events.push(Event::new(
                "md",
                object(m),
                "",
                m.role(),
                format!("{} added to {name} as {}", m.name, m.role()),
            ));
            continue;
        };
        // The role follows from these three alone: unchanged, nothing to compare.
        if before.state == m.state && before.failed == m.failed && before.spare == m.spare {
            continue;
        }
        let (r0, r1) = (before.role(), m.role());
        if r0 == r1 {
            continue;
        }
        let text = match (r0, r1) {
            (_, "failed") => format!("{} failed in {name}", m.name),
            ("spare", _) => format!("spare {} activated in {name}: now {r1}", m.name),
            _ => format!("{} in {name}: {r0} -> {r1}", m.name),
        };
        events.push(Event::new("md", object(m), r0, r1, text));
    }
    for p in &prev.members {
        if !members.iter().any(|m| m.name == p.name) {
            events.push(Event::new(
                "md",
                format!("{name}/{}", p.name),
                p.role(),
                "removed",
                format!("{} removed from {name}", p.name),
            ));
        }
    }
}

/// A `mismatch_cnt` growth event, at most one while a check/repair/resync runs (the count can
/// climb every second for hours on a bad array) plus one with the final count when it ends.
/// Returns the value now announced and whether it was announced during the run.
fn mismatch_growth(
    prev: &Tracked,
    now: &ArrayStatus,
    events: &mut Vec<Event>,
) -> (Option<u64>, bool) {
    let counting = |a: &str| matches!(a, "check" | "repair" | "resync");
    let running = counting(&now.sync_action);
    let ended = counting(&prev.status.sync_action) && !running;
    let started = running && !counting(&prev.status.sync_action);
    let in_run = prev.mismatch_told_in_run && !started;
    let (Some(told), Some(after)) = (prev.mismatch_told, now.mismatch_cnt) else {
        return (now.mismatch_cnt, false);
    };
    if after <= told {
        // Equal, or reset to 0 by a new check: nothing grew.
        return (Some(after), in_run && running);
    }
    if running && in_run {
        return (Some(told), true);
    }
    let during = if running {
        now.sync_action.as_str()
    } else if ended {
        prev.status.sync_action.as_str()
    } else {
        "idle"
    };
    events.push(Event::new(
        "md",
        now.array.clone(),
        format!("mismatch_cnt={told}"),
        format!("mismatch_cnt={after}"),
        format!(
            "{}: mismatch_cnt grew from {told} to {after} sectors ({during})",
            now.array
        ),
    ));
    (Some(after), running)
}

fn sync_event(name: &str, was: &ArrayStatus, now: &ArrayStatus, text: String) -> Event {
    Event::new(
        "md",
        name,
        was.sync_action.clone(),
        now.sync_action.clone(),
        text,
    )
}
