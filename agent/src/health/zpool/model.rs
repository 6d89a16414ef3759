//! What the zpool detector keeps of each pool between readings, and what the `zpool` and
//! `zpool_vdev` lines report about it.

use std::collections::{BTreeMap, VecDeque};

use crate::sources::zpool::{Pool, PoolList, Scan, ScanState};

/// A scan (scrub, resilver, rebuild) and our own rate and ETA of it.
#[derive(Debug, Clone)]
pub(super) struct ScanProgress {
    pub(super) state: ScanState,
    /// (time, progress bytes) of the running scan.
    pub(super) samples: VecDeque<(f64, u64)>,
    pub(super) rate_bps: Option<f64>,
    pub(super) eta_s: Option<f64>,
}

/// One pool, as the readings so far left it.
#[derive(Debug, Default)]
pub(super) struct PoolState {
    /// The state in `/proc/spl/kstat/zfs/<pool>/state`.
    pub(super) kstat: Option<String>,
    /// The health last announced (for state-change events).
    pub(super) health: Option<String>,
    /// The pool in the last `zpool status`.
    pub(super) status: Option<Pool>,
    /// When that status was taken (monotonic seconds).
    pub(super) status_t: Option<f64>,
    /// The pool's row in the last `zpool list`.
    pub(super) list: Option<PoolList>,
    /// Each vdev's state, by path (`tank/raidz2-0/sdk`).
    pub(super) vdev_states: BTreeMap<String, String>,
    /// Each leaf's checksum errors, by path.
    pub(super) cksum: BTreeMap<String, u64>,
    /// The scans, by [`scan_key`].
    pub(super) scans: BTreeMap<String, ScanProgress>,
}

/// A scan's key in [`PoolState::scans`]: its kind, and its vdev for a dRAID rebuild.
pub(super) fn scan_key(s: &Scan) -> String {
    match &s.vdev {
        Some(v) => format!("{} {v}", s.kind.as_str()),
        None => s.kind.as_str().to_owned(),
    }
}

/// What the `zpool_vdev` line says about one vdev.
#[derive(Debug, Clone, PartialEq)]
pub struct VdevReport {
    /// Its name in the config (`sdk`, `raidz2-0`, `logs`, the pool's name for the root).
    pub name: String,
    /// `disk`, `mirror`, `raidz2`, `draid1`, `spare`, `replacing`, …
    pub kind: String,
    /// The name of the vdev it sits under; empty for the root.
    pub parent: String,
    /// `ONLINE`, `DEGRADED`, `FAULTED`, `UNAVAIL`, `REMOVED`, `OFFLINE`, `AVAIL`, `INUSE`, …
    pub state: String,
    /// Read errors.
    pub read_errors: Option<u64>,
    /// Write errors.
    pub write_errors: Option<u64>,
    /// Checksum errors.
    pub cksum_errors: Option<u64>,
    /// The text zpool printed after the counters: `too many errors`, `was /dev/sdf1`,
    /// `(awaiting resilver)`, `(resilvering)`, `(repairing)`, `cannot open`, `currently in use`;
    /// JSON `aux` (`ERR_EXCEEDED`, …).
    pub note: Option<String>,
    /// Further member failures a top-level data vdev can absorb; `None` on other vdevs.
    pub redundancy_left: Option<u32>,
    /// Probability of losing the top-level vdev's data before redundancy is restored.
    pub rebuild_risk: Option<f64>,
    /// Surviving members of a redundancy vdev whose drive shows a condition that raises its
    /// failure rate; `None` on other vdevs and when none of the survivors' drives was read.
    pub members_at_risk: Option<u32>,
}

/// Everything reported for one pool.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct PoolReport {
    /// Health: kstat's state, else `zpool status`'s, else `zpool list`'s.
    pub health: Option<String>,
    /// Size, bytes.
    pub size_bytes: Option<u64>,
    /// Allocated, bytes.
    pub alloc_bytes: Option<u64>,
    /// Free, bytes.
    pub free_bytes: Option<u64>,
    /// Allocated, percent of the size.
    pub capacity_pct: Option<f64>,
    /// Free-space fragmentation, percent.
    pub fragmentation_pct: Option<f64>,
    /// Read errors of the devices (leaves), summed.
    pub read_errors: Option<u64>,
    /// Write errors of the devices, summed.
    pub write_errors: Option<u64>,
    /// Checksum errors of the devices, summed.
    pub cksum_errors: Option<u64>,
    /// Files with permanent errors.
    pub data_errors: Option<u64>,
    /// `zpool status` has answered for this pool: the fields below are known.
    pub details: bool,
    /// `scrub`, `resilver`, `rebuild`, `error_scrub` or `none`.
    pub scan_kind: &'static str,
    /// `in_progress`, `paused`, `finished`, `canceled` or `none`.
    pub scan_state: &'static str,
    /// Progress of a running or paused scan, percent.
    pub scan_pct: Option<f64>,
    /// Our rate of the running scan, bytes/s (the tool's before we have two samples).
    pub scan_rate_bps: Option<f64>,
    /// Our estimate of the running scan's seconds left.
    pub scan_eta_s: Option<f64>,
    /// The tool's own "to go" for the running scan, seconds.
    pub scan_tool_eta_s: Option<u64>,
    /// The least redundancy left of the top-level data vdevs.
    pub redundancy_left: Option<u32>,
    /// The highest rebuild risk of the top-level data vdevs.
    pub rebuild_risk: Option<f64>,
    /// A device is FAULTED/DEGRADED/UNAVAIL/REMOVED while the pool reads ONLINE.
    pub fault_under_online: bool,
    /// Capacity above the configured threshold.
    pub capacity_over: Option<bool>,
    /// Seconds since `zpool status` answered.
    pub status_age_s: Option<f64>,
    /// The vdevs, root first, in config order.
    pub vdevs: Vec<VdevReport>,
}
