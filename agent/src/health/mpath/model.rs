//! What one poll saw of a multipath map and its paths, and what the detector keeps of them
//! between polls.
//!
//! A path is *up* when the kernel has not failed it (`A`) and its device state is `running`
//! (or `live`). The preferred group is the one with the highest priority (multipathd's group
//! `pri`; ties go to the lower number). Without multipathd it is group 1: multipath-tools sorts
//! path groups by priority before loading the table and loads it with group 1 as the initial
//! group, and the kernel's table text cannot say what the initial group was
//! (`multipath_status()` prints the current or next group in that position).

use std::collections::{BTreeMap, VecDeque};

use crate::sources::dmmultipath::DevT;

/// One path as seen in one poll.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PathObservation {
    /// Kernel name (`sdc`), or `major:minor` when sysfs does not name it.
    pub name: String,
    /// Device number.
    pub dev: Option<DevT>,
    /// 1-based path group; 0 when unknown.
    pub group: u32,
    /// The kernel's `A` (true) / `F` (false); `None` before the first status read.
    pub dm_active: Option<bool>,
    /// The kernel's cumulative fail count.
    pub fail_count: Option<u64>,
    /// Whether `dm_active`/`fail_count` were read in this poll (not carried over).
    pub dm_fresh: bool,
    /// `/sys/block/<path>/device/state`.
    pub sysfs_state: Option<String>,
    /// multipathd's checker state (`ready`, `faulty`, `ghost`, …).
    pub checker: Option<String>,
    /// multipathd's path priority.
    pub priority: Option<i64>,
}

impl PathObservation {
    pub(super) fn up(&self) -> bool {
        self.dm_active != Some(false)
            && !matches!(self.sysfs_state.as_deref(), Some(s) if s != "running" && s != "live")
    }

    /// `failed` when the kernel failed it, else a device state other than running, else
    /// `active`.
    pub(super) fn state(&self) -> String {
        if self.dm_active == Some(false) {
            return "failed".into();
        }
        match self.sysfs_state.as_deref() {
            Some(s) if s != "running" && s != "live" => s.to_owned(),
            _ => "active".into(),
        }
    }
}

/// One map as seen in one poll.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct MapObservation {
    /// Map name (dm name).
    pub name: String,
    /// WWID (dm uuid without `mpath-`).
    pub wwid: Option<String>,
    /// Vendor (from multipathd).
    pub vendor: Option<String>,
    /// Product (from multipathd).
    pub product: Option<String>,
    /// Whether the table queues I/O when no path is left.
    pub queue_if_no_path: Option<bool>,
    /// The table's hardware handler (`alua`, `emc`, `rdac`), when it names one.
    pub hw_handler: Option<String>,
    /// The table's feature words as the kernel lists them (`queue_if_no_path`,
    /// `retain_attached_hw_handler`, `queue_mode bio`), when it lists any.
    pub features: Option<String>,
    /// Number of path groups (0 when the kernel view is not known yet).
    pub groups: u32,
    /// The group in state `A` (1-based).
    pub active_group: Option<u32>,
    /// Priority of each group, by index, when multipathd told us.
    pub group_priorities: Vec<Option<i64>>,
    /// The paths.
    pub paths: Vec<PathObservation>,
}

impl MapObservation {
    /// The group with the highest priority (ties to the lower number), group 1 without
    /// priorities; `None` while the kernel view is unknown.
    pub fn preferred_group(&self) -> Option<u32> {
        if self.groups == 0 {
            return None;
        }
        let best = self
            .group_priorities
            .iter()
            .enumerate()
            .filter_map(|(i, p)| p.map(|p| (i, p)))
            .fold(None::<(usize, i64)>, |acc, (i, p)| match acc {
                Some((_, bp)) if bp >= p => acc,
                _ => Some((i, p)),
            });
        Some(best.map_or(1, |(i, _)| u32::try_from(i + 1).unwrap_or(1)))
    }
}

/// One path as the detector keeps it between polls.
#[derive(Debug, Clone)]
pub struct PathState {
    /// The last observation, with the last known fail count when the latest had none.
    pub obs: PathObservation,
    /// Up in the last poll.
    pub up: bool,
    /// `active`, `failed`, or the device state when it is not running.
    pub state: String,
    /// Up↔down transitions in the current report interval.
    pub interval_transitions: u64,
    /// When the transitions in the sliding window happened (monotonic seconds).
    pub window: VecDeque<f64>,
    /// The window holds at least the flapping threshold of transitions.
    pub flapping: bool,
    /// Up→down transitions seen since the last fresh fail count.
    pub(super) downs_since_count: u64,
}

/// One map as the detector keeps it between polls.
#[derive(Debug, Clone)]
pub struct MapState {
    /// The last observation.
    pub obs: MapObservation,
    /// Its paths, by name.
    pub paths: BTreeMap<String, PathState>,
    /// Paths up in the last poll.
    pub active: u32,
    /// The most paths ever up at once (the map's healthy path count).
    pub max_active: u32,
    /// The group in use, as last known.
    pub active_group: Option<u32>,
}

impl MapState {
    /// Transitions of all paths in the current report interval.
    pub fn transitions(&self) -> u64 {
        self.paths.values().map(|p| p.interval_transitions).sum()
    }

    /// Paths flapping now.
    pub fn flapping_paths(&self) -> u64 {
        self.paths.values().filter(|p| p.flapping).count() as u64
    }

    /// Whether I/O to the map hangs: its table queues I/O while no path is left, so the
    /// processes on top block instead of getting errors. `None` while the table is unknown.
    pub fn hung_io(&self) -> Option<bool> {
        self.obs
            .queue_if_no_path
            .map(|q| q && !self.paths.is_empty() && self.active == 0)
    }

    /// Whether I/O goes through the preferred group; `None` when either group is unknown.
    pub fn on_preferred_group(&self) -> Option<bool> {
        match (self.active_group, self.obs.preferred_group()) {
            (Some(a), Some(p)) => Some(a == p),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn preferred_group_follows_priorities_else_group_one() {
        let mut m = MapObservation {
            groups: 2,
            active_group: Some(1),
            group_priorities: vec![Some(10), Some(50)],
            ..MapObservation::default()
        };
        assert_eq!(m.preferred_group(), Some(2));
        m.group_priorities = vec![Some(50), Some(50)];
        assert_eq!(m.preferred_group(), Some(1));
        m.group_priorities = vec![];
        assert_eq!(m.preferred_group(), Some(1));
        m.groups = 0;
        assert_eq!(m.preferred_group(), None);
    }
}
