//! The simulated fleet the dashboard and alert-rule tests share: one host per scenario, what
//! each must set off, and the agent settings that make each scenario's incident show within a
//! simulated quarter hour. Both rule sets (Grafana's InfluxQL in `alerts/storwatch-rules.yaml`
//! and Prometheus's PromQL in `alerts/prometheus/`) are held to the same [`Scenario::fires`].

use storwatch_sim::scenario::Kind;

/// Simulated seconds each scenario runs: every rule's window and `for` fit in it, the longest
/// being ten minutes of data held for five.
pub const SPAN_S: u32 = 900;
/// The calm before `sim-calm-then-storm`'s storm.
pub const CALM_S: u32 = 3600;
/// How long ago `sim-gone` last reported; the agent-silent rule's threshold is 300 s.
pub const GONE_AGO_S: i64 = 1200;

/// A scenario of the fleet and what it must set off.
pub struct Scenario {
    pub kind: Kind,
    /// the simulator's `--speed`: how much faster than real time the scenario's events come
    pub speed: f64,
    /// rules (uid without the `storwatch-` prefix) that must fire on this host
    pub fires: &'static [&'static str],
}

/// The fleet: one host per scenario, each stepped for [`SPAN_S`] simulated seconds.
pub const SCENARIOS: &[Scenario] = &[
    Scenario {
        kind: Kind::Healthy,
        speed: 1.0,
        fires: &[],
    },
    // the storm's clients overrun the server's receive side: ~9 rx drops/s on ens1f0
    Scenario {
        kind: Kind::WriteStorm,
        speed: 1.0,
        fires: &["disk-saturated", "nic-errors-drops"],
    },
    Scenario {
        kind: Kind::NicSaturation,
        speed: 1.0,
        fires: &["nic-line-rate", "nic-errors-drops"],
    },
    // a failure every 3-9 s instead of 30-90 s
    // with sdc down most of the time, mpatha's I/O runs on group 2 in more than 20 of 30 reports
    Scenario {
        kind: Kind::MultipathFlap,
        speed: 10.0,
        fires: &[
            "mpath-path-flapping",
            "mpath-path-down",
            "mpath-non-preferred",
        ],
    },
    // the second member fails after a minute instead of ten
    Scenario {
        kind: Kind::MdRebuild,
        speed: 10.0,
        fires: &["md-degraded", "md-rebuild-risk"],
    },
    Scenario {
        kind: Kind::MultipathDegraded,
        speed: 1.0,
        fires: &["mpath-non-preferred", "mpath-fewer-paths"],
    },
    // mpathd lost both paths with queue_if_no_path: its I/O hangs, and the map's device shows
    // the held requests in flight as %util 100
    Scenario {
        kind: Kind::MultipathHung,
        speed: 1.0,
        fires: &["mpath-hung-io", "mpath-path-down", "disk-saturated"],
    },
    Scenario {
        kind: Kind::MdDegraded,
        speed: 1.0,
        fires: &["md-degraded", "md-degraded-no-rebuild"],
    },
    // the agent calls a recovery stalled after 60 polls without progress
    Scenario {
        kind: Kind::MdStalled,
        speed: 1.0,
        fires: &["md-degraded", "md-rebuild-stalled"],
    },
    Scenario {
        kind: Kind::MdCheck,
        speed: 1.0,
        fires: &["md-mismatch-growing"],
    },
    Scenario {
        kind: Kind::ZpoolResilver,
        speed: 1.0,
        fires: &[
            "zpool-not-online",
            "zpool-checksum-errors",
            "zpool-capacity",
        ],
    },
    Scenario {
        kind: Kind::ZpoolCacheFaulted,
        speed: 1.0,
        fires: &["zpool-fault-under-online"],
    },
    Scenario {
        kind: Kind::ZpoolRaidz1Resilver,
        speed: 1.0,
        fires: &["zpool-not-online", "zpool-rebuild-risk"],
    },
    // the LUNs mix from minute 1 to 7 of every 10 at util 100 %: saturated too
    Scenario {
        kind: Kind::MixedRw,
        speed: 10.0,
        fires: &["disk-mixed-rw", "disk-saturated"],
    },
    // the staging jobs' writes and the computing jobs' reads on the one seeky HDD at util 100 %
    Scenario {
        kind: Kind::WorkerStaging,
        speed: 1.0,
        fires: &["disk-saturated", "disk-mixed-rw"],
    },
    // batch workers: healthy jobs under HTCondor and Slurm, and jobs reading over NFS from a
    // disk server in a write storm that runs on the same timeline
    Scenario {
        kind: Kind::WorkerHtcondor,
        speed: 1.0,
        fires: &[],
    },
    Scenario {
        kind: Kind::WorkerSlurm,
        speed: 1.0,
        fires: &[],
    },
    Scenario {
        kind: Kind::JobsIoStarved,
        speed: 1.0,
        fires: &["jobs-io-stall"],
    },
    // the healthy load's reads and writes (~78 and ~31 MB/s on a LUN) with 64 KiB readahead
    // push util past 80 %: the mixed-rw rule's busy device (the healthy host stays under 80 %)
    Scenario {
        kind: Kind::ReadaheadDrift,
        speed: 1.0,
        fires: &["disk-mixed-rw"],
    },
    Scenario {
        kind: Kind::FsFilling,
        speed: 1.0,
        fires: &["fs-fills-within-24h", "fs-above-95pct"],
    },
    // an hour's three 10 s bursts in the quarter hour: not the 10 min saturation rule's kind
    Scenario {
        kind: Kind::BurstSaturation,
        speed: 4.0,
        fires: &[],
    },
    // the RAID6 VD rebuilds onto its hot spare; another member grows pending sectors and media
    // errors from 150 s on instead of 10 min; the VDs serve 260 MB/s reads and 90 MB/s writes
    // each (r·w/(r+w)² = 0.19), busy with the rebuild: mixed and saturated
    Scenario {
        kind: Kind::HwraidRebuild,
        speed: 4.0,
        fires: &[
            "disk-saturated",
            "disk-mixed-rw",
            "raid-vd-degraded",
            "degraded-member-errors",
            "drive-sectors-growing",
            "drive-failing",
        ],
    },
    // the BBU fails after 2 min: both VDs fall from write-back to write-through, and their
    // 260 MB/s reads and 90 MB/s writes, the writes now waiting for the disks, saturate them
    Scenario {
        kind: Kind::HwraidCacheWt,
        speed: 1.0,
        fires: &[
            "raid-bbu-failed",
            "raid-cache-write-through",
            "disk-saturated",
            "disk-mixed-rw",
        ],
    },
    // the RAID6 VD has lost two members and the rebuild of one is frozen at 41 %: no redundancy
    // left and a survivor with media errors (rebuild risk ~0.55), the stall called after the
    // 5 min `[hwraid] stall_after` of this host ([`hwraid_toml`]); the frail survivor's pending
    // sectors grow every 30 s, the failed member's SMART says FAILED; reads reconstructed from
    // both parities keep `sdb` saturated under its 180 MB/s
    Scenario {
        kind: Kind::HwraidStalled,
        speed: 1.0,
        fires: &[
            "disk-saturated",
            "raid-vd-degraded",
            "raid-rebuild-stalled",
            "raid-rebuild-risk",
            "degraded-member-errors",
            "drive-sectors-growing",
            "drive-failing",
        ],
    },
    // nvme2n1's spare falls from 14 % below its 10 % threshold after 5 min; the four NVMe
    // drives' 900 MB/s reads and 600 MB/s writes each (r·w/(r+w)² = 0.24) keep them busy and the
    // 25 GbE link full
    Scenario {
        kind: Kind::NvmeWearout,
        speed: 1.0,
        fires: &[
            "drive-nvme-spare",
            "drive-failing",
            "disk-mixed-rw",
            "nic-line-rate",
        ],
    },
];

/// The host whose agent cannot read its drives, as one without the privilege to open them:
/// its smartctl exits with status 1 and prints nothing.
pub const DRIVES_UNREADABLE: Kind = Kind::ReadaheadDrift;

/// The agent's `[drive]` section: every minute on the scenarios whose drives change within the
/// quarter hour, else the default interval (one round, at the start); on
/// [`DRIVES_UNREADABLE`]'s host a smartctl that fails.
pub fn drive_toml(name: &str) -> &'static str {
    let changing = [
        Kind::HwraidRebuild,
        Kind::HwraidCacheWt,
        Kind::HwraidStalled,
        Kind::NvmeWearout,
    ];
    if changing.iter().any(|k| host(*k) == name) {
        "[drive]\ninterval = \"1m\"\n"
    } else if host(DRIVES_UNREADABLE) == name {
        "[drive]\nsmartctl = \"/bin/false\"\n"
    } else {
        ""
    }
}

/// The agent's `[hwraid]` section: on [`Kind::HwraidStalled`]'s host `stall_after` 5 min
/// instead of the default 2 h, so that the frozen rebuild is called stalled within the quarter
/// hour (after 5 min of the same percentage, leaving the stalled rule 10 min to fire); the
/// default elsewhere.
pub fn hwraid_toml(name: &str) -> &'static str {
    if host(Kind::HwraidStalled) == name {
        "[hwraid]\nstall_after = \"5m\"\n"
    } else {
        ""
    }
}

/// The host whose agent stopped 20 minutes ago.
pub const GONE: &str = "sim-gone";
/// What must fire on [`GONE`], and nothing else.
pub const GONE_FIRES: &[&str] = &["agent-silent"];
/// A disk server in a write storm after a calm hour: its await leaves its own baseline.
pub const CALM_THEN_STORM: &str = "sim-calm-then-storm";
/// What must fire on [`CALM_THEN_STORM`], and nothing else: the storm's saturation and drops as
/// on `sim-write-storm`, and the await far above the calm hour's.
pub const CALM_THEN_STORM_FIRES: &[&str] =
    &["disk-await-baseline", "disk-saturated", "nic-errors-drops"];

/// The simulated host of scenario `kind`: `sim-<scenario>`.
pub fn host(kind: Kind) -> String {
    format!("sim-{}", kind.name())
}

/// The agent's settings for host `name` that are not about where its reports go: a fill window
/// of 10 min (the rate appears after 50 s, so the quarter hour has time-to-full estimates), and
/// the host's [`drive_toml`] and [`hwraid_toml`].
pub fn host_toml(name: &str) -> String {
    format!(
        "[fs]\nfill_window = \"10m\"\n{}{}",
        drive_toml(name),
        hwraid_toml(name)
    )
}
