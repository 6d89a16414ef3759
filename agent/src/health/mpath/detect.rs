//! The multipath state machine: per-path transitions and flapping, per-map paths lost, last
//! path lost and back, and path-group switches, from one [`MapObservation`] list per poll.
//!
//! A transition is a change between up and down. Between two slow `dmsetup` reads a path can
//! fail and come back unseen; the kernel's fail count still moves, so each failure the count
//! shows beyond those seen adds two transitions (down and up). A path is flapping while its
//! sliding window holds at least the threshold of transitions.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use super::model::{MapObservation, MapState, PathObservation, PathState};
use crate::event::Event;

/// The multipath state machine: feed it one [`MapObservation`] list per poll.
#[derive(Debug, Clone)]
pub struct MpathDetector {
    window_s: f64,
    threshold: u32,
    maps: BTreeMap<String, MapState>,
    /// [`Self::is_quiet`] as of the last observation (only an observation changes it).
    quiet: bool,
}

impl MpathDetector {
    /// A detector counting transitions over `window_s` seconds, flapping at `threshold`.
    pub fn new(window_s: f64, threshold: u32) -> Self {
        Self {
            window_s,
            threshold: threshold.max(1),
            maps: BTreeMap::new(),
            quiet: true,
        }
    }

    /// Takes one poll's view at monotonic time `now_s`; state changes go to `events`.
    pub fn observe(&mut self, now_s: f64, maps: Vec<MapObservation>, events: &mut Vec<Event>) {
        // A flushed map is forgotten; its disappearance is an administrative act, not a fault.
        self.maps
            .retain(|name, _| maps.iter().any(|m| &m.name == name));
        for m in maps {
            match self.maps.get_mut(&m.name) {
                None => {
                    let name = m.name.clone();
                    let paths = m
                        .paths
                        .iter()
                        .map(|p| (p.name.clone(), new_path(p)))
                        .collect::<BTreeMap<_, _>>();
                    let active = count_up(&paths);
                    self.maps.insert(
                        name,
                        MapState {
                            active_group: m.active_group,
                            obs: m,
                            paths,
                            active,
                            max_active: active,
                        },
                    );
                }
                Some(t) => {
                    update_map(t, m, now_s, self.window_s, self.threshold, events);
                }
            }
        }
        self.quiet = self
            .maps
            .values()
            .flat_map(|m| m.paths.values())
            .all(|p| p.window.is_empty() && p.downs_since_count == 0);
    }

    /// The maps as last observed, by name.
    pub fn maps(&self) -> impl Iterator<Item = (&String, &MapState)> {
        self.maps.iter()
    }

    /// No path has a transition in its flapping window or a failure not yet matched by the
    /// kernel's count: observing the same view again would change nothing and tell nothing.
    pub fn is_quiet(&self) -> bool {
        self.quiet
    }

    /// Starts a new report interval: the per-interval transition counts go back to 0.
    pub fn end_interval(&mut self) {
        for p in self.maps.values_mut().flat_map(|m| m.paths.values_mut()) {
            p.interval_transitions = 0;
        }
    }
}

fn new_path(p: &PathObservation) -> PathState {
    PathState {
        up: p.up(),
        state: p.state(),
        obs: p.clone(),
        downs_since_count: 0,
        interval_transitions: 0,
        window: VecDeque::new(),
        flapping: false,
    }
}

fn count_up(paths: &BTreeMap<String, PathState>) -> u32 {
    u32::try_from(paths.values().filter(|p| p.up).count()).unwrap_or(u32::MAX)
}

fn update_map(
    t: &mut MapState,
    m: MapObservation,
    now_s: f64,
    window_s: f64,
    threshold: u32,
    events: &mut Vec<Event>,
) {
    // The steady state of a healthy server: the same view as last poll and no path with a
    // transition in its window, so nothing can change and no event is due. (Most polls; the
    // full comparison below allocates for every path.)
    if t.obs == m
        && t.paths.len() == m.paths.len()
        && t.paths
            .values()
            .all(|p| p.window.is_empty() && p.downs_since_count == 0)
    {
        return;
    }
    let map = m.name.clone();
    let seen: BTreeSet<&str> = m.paths.iter().map(|p| p.name.as_str()).collect();
    let total = m.paths.len();
    // A path taken out of the map (multipathd removes a dead path after dev_loss_tmo, or a
    // table reload drops it): say so, which also ends any flapping episode it was in.
    for (name, p) in t.paths.iter().filter(|(n, _)| !seen.contains(n.as_str())) {
        let flap = if p.flapping { " while flapping" } else { "" };
        events.push(Event::new(
            "mpath",
            format!("{map}/{name}"),
            &p.state,
            "removed",
            format!("{map}: path {name} removed from the map{flap}; {total} left"),
        ));
    }
    t.paths.retain(|n, _| seen.contains(n.as_str()));
    for p in &m.paths {
        let Some(pt) = t.paths.get_mut(&p.name) else {
            // A path added to the map (rescan, table reload): its history starts now.
            t.paths.insert(p.name.clone(), new_path(p));
            continue;
        };
        let up = p.up();
        let state = p.state();
        let mut added = 0u64;
        if up != pt.up {
            added += 1;
            if !up {
                pt.downs_since_count += 1;
            }
            let active_now = m.paths.iter().filter(|q| q.up()).count();
            let group = if p.group > 0 {
                format!(" in group {}", p.group)
            } else {
                String::new()
            };
            let dev = p.dev.map(|d| format!(" ({d})")).unwrap_or_default();
            let why = if up {
                String::new()
            } else if p.dm_active == Some(false) {
                " (marked failed by dm-multipath)".to_owned()
            } else {
                format!(" (device state {state})")
            };
            let verb = if up { "reinstated" } else { "failed" };
            events.push(Event::new(
                "mpath",
                format!("{map}/{}", p.name),
                &pt.state,
                &state,
                format!(
                    "{map}: path {}{dev}{group} {verb}{why}; {active_now} of {total} paths active",
                    p.name
                ),
            ));
        }
        // Failures the kernel counted that happened between two reads: down and back up.
        if p.dm_fresh {
            if let (Some(new), Some(old)) = (p.fail_count, pt.obs.fail_count) {
                if new > old {
                    let missed = (new - old).saturating_sub(pt.downs_since_count);
                    added += 2 * missed;
                }
            }
            pt.downs_since_count = 0;
        }
        for _ in 0..added.min(1000) {
            pt.window.push_back(now_s);
        }
        pt.interval_transitions += added;
        pt.up = up;
        pt.state = state;
        let fail_count = p.fail_count.or(pt.obs.fail_count);
        pt.obs = p.clone();
        pt.obs.fail_count = fail_count;
        while pt.window.front().is_some_and(|&t0| t0 <= now_s - window_s) {
            pt.window.pop_front();
        }
        let flapping = pt.window.len() >= threshold as usize;
        if flapping != pt.flapping {
            let (from, to, what) = if flapping {
                ("stable", "flapping", "started flapping")
            } else {
                ("flapping", "stable", "stopped flapping")
            };
            events.push(Event::new(
                "mpath",
                format!("{map}/{}", p.name),
                from,
                to,
                format!(
                    "{map}: path {} {what}: {} transitions in the last {:.0} s",
                    p.name,
                    pt.window.len(),
                    window_s
                ),
            ));
            pt.flapping = flapping;
        }
    }

    let active = count_up(&t.paths);
    if active == 0 && t.active > 0 {
        let q = match m.queue_if_no_path {
            Some(true) => "; I/O is queued until a path returns",
            Some(false) => "; I/O fails",
            None => "",
        };
        events.push(Event::new(
            "mpath",
            map.clone(),
            "active",
            "all paths lost",
            format!("{map}: lost its last path{q}"),
        ));
    } else if active > 0 && t.active == 0 && !t.paths.is_empty() {
        events.push(Event::new(
            "mpath",
            map.clone(),
            "all paths lost",
            "active",
            format!("{map}: a path is back, {active} of {total} active"),
        ));
    }
    if let (Some(old), Some(new)) = (t.active_group, m.active_group) {
        if old != new {
            let pref = m
                .preferred_group()
                .map(|p| {
                    if p == new {
                        " (the preferred group)".to_owned()
                    } else {
                        format!(" (preferred: group {p})")
                    }
                })
                .unwrap_or_default();
            events.push(Event::new(
                "mpath",
                map.clone(),
                format!("group {old}"),
                format!("group {new}"),
                format!("{map}: I/O switched from path group {old} to {new}{pref}"),
            ));
        }
    }
    if m.active_group.is_some() {
        t.active_group = m.active_group;
    }
    t.active = active;
    t.max_active = t.max_active.max(active);
    t.obs = m;
}
