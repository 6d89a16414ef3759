//! Successive readings of the pools → events: pool state changes, vdev state changes, scans
//! starting, pausing, resuming or finishing, checksum errors appearing or growing on a device;
//! and the samples of each running scan for our own rate and ETA (the tool's own ETA is wrong on
//! dRAID sequential rebuilds and wild early in any scan).
//!
//! At the first sight of a pool only what needs attention is announced (a bad state, a running
//! scan, existing checksum errors), so a restart does not replay the history of a healthy node.
//! What the readings mean now — capacity, redundancy, risk — is `derive.rs`.

use std::collections::{BTreeMap, VecDeque};

use super::derive::{derive, walk};
use super::model::{scan_key, PoolReport, PoolState, ScanProgress};
use crate::event::Event;
use crate::health::risk::{MemberRate, RiskModel};
use crate::sources::zpool::{is_bad_state, Pool, PoolList, ScanState, VdevKind, ZpoolStatus};

/// Samples of a running scan kept for its rate: the last ten minutes.
const RATE_WINDOW_S: f64 = 600.0;

/// The zpool state machine: kstat states, `zpool list` rows and `zpool status` in, events out;
/// [`ZpoolDetector::reports`] says what each pool's readings mean now.
#[derive(Debug)]
pub struct ZpoolDetector {
    threshold_pct: f64,
    risk: RiskModel,
    now_s: f64,
    pools: BTreeMap<String, PoolState>,
}

fn set_health(name: &str, t: &mut PoolState, new: &str, events: &mut Vec<Event>) -> bool {
    let changed = t.health.as_deref() != Some(new);
    match t.health.as_deref() {
        None if is_bad_state(new) => events.push(Event::new(
            "zpool",
            name.to_owned(),
            "",
            new,
            format!("pool {name} is {new}"),
        )),
        Some(old) if old != new => events.push(Event::new(
            "zpool",
            name.to_owned(),
            old,
            new,
            format!("pool {name} changed from {old} to {new}"),
        )),
        _ => {}
    }
    t.health = Some(new.to_owned());
    changed
}

impl ZpoolDetector {
    /// A detector flagging capacity above `threshold_pct` and computing risk with `risk`.
    pub fn new(threshold_pct: f64, risk: RiskModel) -> Self {
        Self {
            threshold_pct,
            risk,
            now_s: 0.0,
            pools: BTreeMap::new(),
        }
    }

    /// The kstat states of all pools; returns true when a pool appeared, vanished or changed
    /// state (the details are then fetched at once).
    pub fn observe_kstat(&mut self, states: &[(String, String)], events: &mut Vec<Event>) -> bool {
        let mut changed = false;
        for (name, state) in states {
            // Every second, for every pool: nothing to do while it reads as it did.
            if let Some(t) = self.pools.get(name) {
                if t.kstat.as_ref() == Some(state) && t.health.as_ref() == Some(state) {
                    continue;
                }
            }
            let t = self.pools.entry(name.clone()).or_default();
            t.kstat = Some(state.clone());
            changed |= set_health(name, t, state, events);
        }
        let gone: Vec<String> = self
            .pools
            .iter()
            .filter(|(n, t)| t.kstat.is_some() && !states.iter().any(|(s, _)| s == *n))
            .map(|(n, _)| n.clone())
            .collect();
        self.forget(gone, events) || changed
    }

    /// The rows of one `zpool list`: each pool's space (a pool missing from it has none).
    pub fn observe_list(&mut self, rows: &[PoolList]) {
        for t in self.pools.values_mut() {
            t.list = None;
        }
        for r in rows {
            self.pools.entry(r.name.clone()).or_default().list = Some(r.clone());
        }
    }

    /// One `zpool status`, taken at `t_s` (monotonic seconds): vdev states and checksum errors,
    /// scans and their rates; state changes go to `events`.
    pub fn observe_status(&mut self, st: &ZpoolStatus, t_s: f64, events: &mut Vec<Event>) {
        for p in st.pools.iter().filter(|p| !p.name.is_empty()) {
            let t = self.pools.entry(p.name.clone()).or_default();
            if t.kstat.is_none() && !p.state.is_empty() {
                set_health(&p.name, t, &p.state, events);
            }
            observe_vdevs(&p.name, p, t, events);
            observe_scans(&p.name, p, t, t_s, events);
            t.status = Some(p.clone());
            t.status_t = Some(t_s);
        }
        // Without kstat (another OS, a test) the status output is the list of pools.
        let gone: Vec<String> = self
            .pools
            .iter()
            .filter(|(n, t)| {
                t.kstat.is_none() && t.status.is_some() && !st.pools.iter().any(|p| &p.name == *n)
            })
            .map(|(n, _)| n.clone())
            .collect();
        self.forget(gone, events);
    }

    /// Forgets the pools named in `gone`, each with an event; true when one of them was known.
    fn forget(&mut self, gone: Vec<String>, events: &mut Vec<Event>) -> bool {
        let mut forgot = false;
        for name in gone {
            if let Some(t) = self.pools.remove(&name) {
                let from = t.health.unwrap_or_default();
                events.push(Event::new(
                    "zpool",
                    name.clone(),
                    &from,
                    "",
                    format!("pool {name} is no longer imported"),
                ));
                forgot = true;
            }
        }
        forgot
    }

    /// Sets the monotonic time of the latest poll (the age of the details is measured from it).
    pub fn set_now(&mut self, now_s: f64) {
        self.now_s = now_s;
    }

    /// The pools known, by name.
    pub fn pools(&self) -> impl Iterator<Item = &String> {
        self.pools.keys()
    }

    /// What the report says about each pool now, by name, every member at the flat rate.
    pub fn reports(&self) -> impl Iterator<Item = (&String, PoolReport)> + '_ {
        self.reports_with(&|_| None)
    }

    /// What the report says about each pool now, by name, each surviving member of a
    /// redundancy vdev at its own rate from `rate` (by leaf name as `zpool status` prints it).
    pub fn reports_with<'a>(
        &'a self,
        rate: &'a dyn Fn(&str) -> Option<MemberRate>,
    ) -> impl Iterator<Item = (&'a String, PoolReport)> + 'a {
        self.pools.iter().map(move |(name, t)| {
            (
                name,
                derive(t, self.now_s, self.threshold_pct, &self.risk, rate),
            )
        })
    }

    /// Every pool's vdev leaves as `zpool status` names them (devices, spares, cache and log
    /// devices), by pool: what names a drive's `pool`.
    pub fn leaves(&self) -> BTreeMap<String, Vec<String>> {
        let mut out = BTreeMap::new();
        for (name, t) in &self.pools {
            let Some(p) = t.status.as_ref() else {
                continue;
            };
            let mut leaves = Vec::new();
            walk(p, &mut |v, _path, _parent, _depth| {
                if v.children.is_empty() && v.kind != VdevKind::Root && !v.kind.is_section() {
                    leaves.push(v.name.clone());
                }
            });
            out.insert(name.clone(), leaves);
        }
        out
    }
}

fn observe_vdevs(pool: &str, p: &Pool, t: &mut PoolState, events: &mut Vec<Event>) {
    let mut seen_states = BTreeMap::new();
    let mut seen_cksum = BTreeMap::new();
    walk(p, &mut |v, path, _parent, _depth| {
        // The root vdev mirrors the pool state, already announced; sections have none.
        if v.kind == VdevKind::Root || v.kind.is_section() || v.state.is_empty() {
            return;
        }
        match t.vdev_states.get(path) {
            None if is_bad_state(&v.state) => {
                events.push(Event::new(
                    "zpool",
                    path.to_owned(),
                    "",
                    &v.state,
                    format!("{pool}: {} is {}", v.name, v.state),
                ));
            }
            Some(old) if *old != v.state => events.push(Event::new(
                "zpool",
                path.to_owned(),
                old,
                &v.state,
                format!("{pool}: {} changed from {old} to {}", v.name, v.state),
            )),
            _ => {}
        }
        seen_states.insert(path.to_owned(), v.state.clone());
        if let (true, Some(c)) = (v.children.is_empty(), v.cksum_errors) {
            let prev = t.cksum.get(path).copied();
            let grew = match prev {
                None => c > 0,
                Some(p) => c > p,
            };
            if grew {
                let from = prev.map(|p| p.to_string()).unwrap_or_default();
                events.push(Event::new(
                    "zpool",
                    path.to_owned(),
                    &from,
                    c.to_string(),
                    format!(
                        "{pool}: checksum errors on {} {} {c}",
                        v.name,
                        if prev.is_some() {
                            format!("grew from {from} to")
                        } else {
                            "at".to_owned()
                        }
                    ),
                ));
            }
            seen_cksum.insert(path.to_owned(), c);
        }
    });
    t.vdev_states = seen_states;
    t.cksum = seen_cksum;
}

fn observe_scans(pool: &str, p: &Pool, t: &mut PoolState, t_s: f64, events: &mut Vec<Event>) {
    let mut next = BTreeMap::new();
    for s in &p.scans {
        let key = scan_key(s);
        let prev = t.scans.remove(&key);
        let prev_state = prev.as_ref().map(|p| p.state);
        let object = match &s.vdev {
            Some(v) => format!("{pool}/{v}"),
            None => pool.to_owned(),
        };
        let what = s.kind.as_str();
        let from = prev_state.map_or("", ScanState::as_str);
        let mut track = prev.unwrap_or(ScanProgress {
            state: s.state,
            samples: VecDeque::new(),
            rate_bps: None,
            eta_s: None,
        });
        if s.state == ScanState::InProgress {
            if prev_state != Some(ScanState::InProgress) {
                let verb = if prev_state == Some(ScanState::Paused) {
                    "resumed"
                } else {
                    "started"
                };
                events.push(Event::new(
                    "zpool",
                    object.clone(),
                    from,
                    s.state.as_str(),
                    format!("{what} {verb} on {object}"),
                ));
                track.samples.clear();
            }
            if let Some(done) = s.progress_bytes() {
                // A restarted scan (progress went backwards) starts a new rate.
                if track.samples.back().is_some_and(|&(_, d)| done < d) {
                    track.samples.clear();
                }
                if !track.samples.back().is_some_and(|&(bt, _)| t_s <= bt) {
                    track.samples.push_back((t_s, done));
                }
                while track.samples.len() > 2
                    && track
                        .samples
                        .front()
                        .is_some_and(|&(ft, _)| ft < t_s - RATE_WINDOW_S)
                {
                    track.samples.pop_front();
                }
            }
            track.rate_bps = match (track.samples.front(), track.samples.back()) {
                (Some(&(t0, d0)), Some(&(t1, d1))) if t1 > t0 => {
                    Some(d1.saturating_sub(d0) as f64 / (t1 - t0))
                }
                _ => None,
            };
            track.eta_s = match (track.rate_bps, s.total_bytes, track.samples.back()) {
                (Some(r), Some(total), Some(&(_, done))) if r > 0.0 => {
                    Some(total.saturating_sub(done) as f64 / r)
                }
                _ => None,
            };
        } else {
            if prev_state.is_some_and(|ps| ps != s.state) && prev_state != Some(ScanState::Finished)
            {
                let errors = s
                    .errors
                    .map(|e| format!(", {e} errors"))
                    .unwrap_or_default();
                events.push(Event::new(
                    "zpool",
                    object.clone(),
                    from,
                    s.state.as_str(),
                    format!("{what} {} on {object}{errors}", s.state.as_str()),
                ));
            }
            track.samples.clear();
            track.rate_bps = None;
            track.eta_s = None;
        }
        track.state = s.state;
        next.insert(key, track);
    }
    t.scans = next;
}
