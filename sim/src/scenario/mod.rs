//! The named scenarios: each builds a host (its devices, maps, arrays, pools and NICs) and sets
//! its demand every second. The numbers are those of the incidents the sites describe; see
//! `docs/simulator.md`.
//!
//! `speed` compresses a scenario's timeline — the gaps between bursts, path failures, job
//! starts, the second member failure — while every tick stays one second of device time, so
//! counters stay physical and a 10 s burst stays 10 samples long.

use crate::model::{
    Demand, Device, Host, HostLoad, MdArray, MdMember, MdSync, MpathMap, MpathPath, NetDemand, Nic,
    Role, Service, Vdev, ZScan, Zpool, HDD_SEEKY, HDD_SEQ, RAID_LUN, SSD,
};

/// Every scenario, in `--list` order.
pub const ALL: [Kind; 25] = [
    Kind::Healthy,
    Kind::WriteStorm,
    Kind::MultipathFlap,
    Kind::MultipathDegraded,
    Kind::MultipathHung,
    Kind::MixedRw,
    Kind::BurstSaturation,
    Kind::MdRebuild,
    Kind::MdDegraded,
    Kind::MdStalled,
    Kind::MdCheck,
    Kind::ZpoolResilver,
    Kind::ZpoolCacheFaulted,
    Kind::ZpoolRaidz1Resilver,
    Kind::NicSaturation,
    Kind::WorkerStaging,
    Kind::ReadaheadDrift,
    Kind::FsFilling,
    Kind::HwraidRebuild,
    Kind::HwraidCacheWt,
    Kind::HwraidStalled,
    Kind::NvmeWearout,
    Kind::WorkerHtcondor,
    Kind::WorkerSlurm,
    Kind::JobsIoStarved,
];

/// A scenario's name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Healthy,
    WriteStorm,
    MultipathFlap,
    MultipathDegraded,
    MultipathHung,
    MixedRw,
    BurstSaturation,
    MdRebuild,
    MdDegraded,
    MdStalled,
    MdCheck,
    ZpoolResilver,
    ZpoolCacheFaulted,
    ZpoolRaidz1Resilver,
    NicSaturation,
    WorkerStaging,
    ReadaheadDrift,
    FsFilling,
    HwraidRebuild,
    HwraidCacheWt,
    HwraidStalled,
    NvmeWearout,
    WorkerHtcondor,
    WorkerSlurm,
    JobsIoStarved,
}

impl Kind {
    /// The name used on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Healthy => "healthy",
            Kind::WriteStorm => "write-storm",
            Kind::MultipathFlap => "multipath-flap",
            Kind::MultipathDegraded => "multipath-degraded",
            Kind::MultipathHung => "multipath-hung",
            Kind::MixedRw => "mixed-rw",
            Kind::BurstSaturation => "burst-saturation",
            Kind::MdRebuild => "md-rebuild",
            Kind::MdDegraded => "md-degraded",
            Kind::MdStalled => "md-stalled",
            Kind::MdCheck => "md-check",
            Kind::ZpoolResilver => "zpool-resilver",
            Kind::ZpoolCacheFaulted => "zpool-cache-faulted",
            Kind::ZpoolRaidz1Resilver => "zpool-raidz1-resilver",
            Kind::NicSaturation => "nic-saturation",
            Kind::WorkerStaging => "worker-staging",
            Kind::ReadaheadDrift => "readahead-drift",
            Kind::FsFilling => "fs-filling",
            Kind::HwraidRebuild => "hwraid-rebuild",
            Kind::HwraidCacheWt => "hwraid-cache-wt",
            Kind::HwraidStalled => "hwraid-stalled",
            Kind::NvmeWearout => "nvme-wearout",
            Kind::WorkerHtcondor => "worker-htcondor",
            Kind::WorkerSlurm => "worker-slurm",
            Kind::JobsIoStarved => "jobs-io-starved",
        }
    }

    /// One line on what the scenario shows.
    pub fn about(self) -> &'static str {
        match self {
            Kind::Healthy => "disk server, 2x12-disk RAID6 as 4 dual-path ALUA multipath LUNs, 10 GbE at ~40 %, disks ~25 % busy",
            Kind::WriteStorm => "350 concurrent writers: every LUN at 100 % util, await climbing past 2 s, NIC at ~15 % of 10 GbE",
            Kind::MultipathFlap => "one path of mpatha fails and is reinstated every 30-90 s (device offline/running, dm F/A, fail count), I/O bouncing between controllers",
            Kind::MultipathDegraded => "after a controller restart mpathb and mpathd stay on their non-preferred group (failback manual); mpathc lost one of its two paths for good",
            Kind::MultipathHung => "mpathd lost both its paths (the enclosure's two controller ports) and its table has queue_if_no_path: its I/O is held, nothing completes",
            Kind::MixedRw => "read streams joined by write streams on the same LUNs every 10 min: total throughput falls by ~60 %",
            Kind::BurstSaturation => "three 10 s bursts at 100 % util on mpathb per hour, hour mean util under 10 % (--speed compresses the hour)",
            Kind::MdRebuild => "MD RAID6 12+2 of 16 TB disks recovering one member at ~145 MB/s, a second member fails after 10 min",
            Kind::MdDegraded => "MD RAID6 12+2 with one member failed and no spare: degraded, no recovery running, waiting for a replacement disk",
            Kind::MdStalled => "MD RAID6 12+2 recovering a replaced member, the recovery stuck: speed 0, position frozen",
            Kind::MdCheck => "MD RAID6 12+2 running its monthly check, mismatch_cnt growing",
            Kind::ZpoolResilver => "raidz2 pool 87 % full, DEGRADED, resilvering a replaced disk at ~480 MB/s, checksum errors growing on one leaf",
            Kind::ZpoolCacheFaulted => "raidz2 pool ONLINE whose L2ARC SSD is FAULTED (too many errors)",
            Kind::ZpoolRaidz1Resilver => "raidz1 pool of 8 x 16 TB resilvering a replaced disk: no redundancy left until it finishes",
            Kind::NicSaturation => "10 GbE NIC transmitting at line rate (~98 %) with receive drops",
            Kind::WorkerStaging => "worker node, 16 jobs staging input on one HDD: bursts of 100 % util, iowait and PSI io high",
            Kind::ReadaheadDrift => "healthy disk server whose devices have read_ahead_kb 64 (the fleet has 8192): small reads, util twice as high",
            Kind::FsFilling => "healthy disk server whose /srv/mpatha fills at ~300 MB/s net (full in ~10 h) and whose /srv/mpathb is 96.5 % full",
            Kind::HwraidRebuild => "MegaRAID disk server, RAID6 VD degraded and rebuilding onto the hot spare; after 10 min another member of it grows pending sectors",
            Kind::HwraidCacheWt => "MegaRAID disk server whose BBU fails after 2 min: both VDs' cache falls from write-back to write-through",
            Kind::HwraidStalled => "MegaRAID disk server, RAID6 VD of 12 x 16 TB with two members gone (no redundancy left), the replacement's rebuild frozen at 41 %, a survivor with media errors and pending sectors growing",
            Kind::NvmeWearout => "NVMe node, one SSD past 100 % of its rated endurance, its spare falling below threshold (critical warning), media errors appearing",
            Kind::WorkerHtcondor => "worker node, HTCondor 24.8 jobs in cgroup v2 (.slice/.scope), 1-8 cores each, coming and going: CPU efficiency 85-95 %, io.pressure low",
            Kind::WorkerSlurm => "worker node, Slurm jobs in cgroup v2 (slurmstepd.scope/job_N/step_*), cores bound by cpuset: CPU efficiency 85-95 %, io.pressure low",
            Kind::JobsIoStarved => "worker node whose HTCondor jobs read over NFS from a disk server in the write-storm (same timeline): efficiency falling under 30 %, io.pressure some/full high",
        }
    }

    /// The scenario named `s`.
    pub fn parse(s: &str) -> Option<Kind> {
        ALL.iter().copied().find(|k| k.name() == s)
    }
}

mod drives;
mod hardware;
mod hwraid;
mod jobs;
mod md;
mod staging;
mod zpool;

use hardware::*;
pub use hardware::{sd_devt, sd_name};
use zpool::*;

/// A running scenario: its kind, timeline and event state.
pub struct Scenario {
    pub kind: Kind,
    speed: f64,
    tick: u64,
    /// multipath-flap: when the flapping path next fails, and until when it stays down.
    next_fail: u64,
    down_until: Option<u64>,
    /// burst-saturation: burst starts within the (compressed) hour, ticks.
    bursts: Vec<u64>,
    /// md-rebuild: when the second member fails.
    second_failure: u64,
    /// worker-staging: per job, `Some(end)` while staging, else the tick it next starts.
    jobs: Vec<(Option<u64>, u64)>,
    /// worker-htcondor, worker-slurm, jobs-io-starved: the batch system and its jobs.
    worker: Option<Box<jobs::Worker>>,
}

fn wave(t_s: f64) -> f64 {
    1.0 + 0.15 * (t_s * std::f64::consts::TAU / 1200.0).sin()
}

impl Scenario {
    /// A scenario of `kind` whose timeline runs `speed` times faster than real time.
    pub fn new(kind: Kind, speed: f64) -> Self {
        Self {
            kind,
            speed: if speed.is_finite() && speed >= 1.0 {
                speed
            } else {
                1.0
            },
            tick: 0,
            next_fail: 3,
            down_until: None,
            bursts: Vec::new(),
            second_failure: 0,
            jobs: Vec::new(),
            worker: None,
        }
    }

    /// Scenario seconds → ticks, at least one.
    fn ticks(&self, s: f64) -> u64 {
        ((s / self.speed).round() as u64).max(1)
    }

    /// The hour of burst-saturation in ticks: long enough for three 10 s bursts apart.
    fn hour_ticks(&self) -> u64 {
        self.ticks(3600.0).max(60)
    }

    /// Scenario time now, seconds.
    fn t_s(&self) -> f64 {
        self.tick as f64 * self.speed
    }

    /// Builds the host for this scenario, its counters filled with the history of its uptime.
    pub fn build(&mut self, name: &str, seed: u64) -> Host {
        let (ncpu, mem) = if self.kind == Kind::WorkerStaging || jobs::is_worker(self.kind) {
            (64, 256)
        } else {
            (32, 256)
        };
        let mut h = Host::new(name, ncpu, mem, seed);
        match self.kind {
            Kind::MdRebuild | Kind::MdDegraded | Kind::MdStalled | Kind::MdCheck => {
                self.build_md(&mut h)
            }
            Kind::ZpoolResilver => build_zpool(&mut h),
            Kind::ZpoolCacheFaulted => build_zpool_cache_faulted(&mut h),
            Kind::ZpoolRaidz1Resilver => build_zpool_raidz1(&mut h),
            Kind::WorkerStaging => self.build_worker(&mut h),
            Kind::HwraidRebuild => hwraid::build_hwraid(&mut h, true),
            Kind::HwraidCacheWt => hwraid::build_hwraid(&mut h, false),
            Kind::HwraidStalled => hwraid::build_hwraid_stalled(&mut h),
            Kind::NvmeWearout => hwraid::build_nvme(&mut h),
            Kind::WorkerHtcondor | Kind::WorkerSlurm | Kind::JobsIoStarved => {
                self.worker = Some(Box::new(jobs::Worker::build(self.kind, &mut h, self.speed)));
            }
            Kind::ReadaheadDrift => disk_server(&mut h, 64),
            Kind::MultipathDegraded => {
                disk_server(&mut h, 8192);
                degrade_paths(&mut h);
            }
            Kind::MultipathHung => {
                disk_server(&mut h, 8192);
                lose_all_paths(&mut h, "mpathd");
            }
            _ => disk_server(&mut h, 8192),
        }
        if self.kind == Kind::WriteStorm {
            // RAID6 read-modify-write of small interleaved writes from hundreds of streams:
            // each request costs the controller several ms.
            for d in &mut h.devices {
                if d.svc == RAID_LUN {
                    d.svc.overhead_ms = 2.5;
                }
            }
        }
        if self.kind == Kind::BurstSaturation {
            // Burst starts as a share of the (compressed) hour, so that bursts stay apart at
            // any speed.
            let hour = self.hour_ticks();
            for off in [30.0, 1400.0, 2650.0] {
                let j = h.rng.range(0.0, 120.0);
                let start = ((off + j) / 3600.0 * hour as f64) as u64;
                self.bursts.push(start);
            }
        }
        self.drive(&mut h);
        h.backfill();
        drives::default_smart(&mut h);
        h
    }

    /// Sets the host's demand and state for the coming second.
    pub fn drive(&mut self, h: &mut Host) {
        let t = self.t_s();
        drives::tick_drives(h);
        match self.kind {
            Kind::Healthy | Kind::MultipathDegraded | Kind::FsFilling | Kind::MultipathHung => {
                self.server_io(h, |k, rng| {
                    let f = wave(t) * rng.noise(0.2) * (0.8 + 0.1 * k as f64);
                    Demand::mbs(120.0 * f, 40.0 * f, 1024.0, 512.0)
                });
                h.load = base_load();
            }
            Kind::ReadaheadDrift => {
                // With 64 KiB readahead a sequential reader issues 64 KiB requests: the same
                // streams cost many more I/Os.
                self.server_io(h, |k, rng| {
                    let f = wave(t) * rng.noise(0.15) * (0.8 + 0.1 * k as f64);
                    Demand::mbs(75.0 * f, 30.0 * f, 64.0, 512.0)
                });
                h.load = HostLoad {
                    iowait_pct: 4.0,
                    psi_some_pct: 9.0,
                    psi_full_pct: 3.0,
                    ..base_load()
                };
            }
            Kind::WriteStorm => {
                // 350 writers, 64 KiB–256 KiB writes, more outstanding every second until
                // the clients' own limits: await climbs from ~100 ms to over 2 s.
                let outstanding = (40.0 + 1.5 * t).min(880.0);
                self.server_io(h, |_, rng| Demand {
                    outstanding,
                    ..Demand::mbs(20.0, 900.0 * rng.noise(0.1), 1024.0, 128.0)
                });
                h.load = HostLoad {
                    user_pct: 3.0,
                    system_pct: 9.0,
                    iowait_pct: 22.0,
                    softirq_pct: 2.0,
                    psi_some_pct: 65.0,
                    psi_full_pct: 45.0,
                    dirty_kb: 12_582_912.0 * h.rng.noise(0.1),
                    writeback_kb: 1_572_864.0 * h.rng.noise(0.3),
                };
            }
            Kind::MultipathFlap => {
                self.flap(h);
                let switching = self.tick == self.next_fail.saturating_sub(1)
                    || self.down_until == Some(self.tick + 1);
                self.server_io(h, |k, rng| {
                    // turbulent: throughput swings by more than half second to second
                    let mut f = wave(t) * rng.noise(0.6);
                    if k == 0 && switching {
                        f *= 0.15;
                    }
                    Demand::mbs(120.0 * f, 40.0 * f, 1024.0, 512.0)
                });
                h.load = base_load();
            }
            Kind::MixedRw => {
                let phase = t % 600.0;
                let mixing = (60.0..420.0).contains(&phase);
                let (r, w) = if mixing { (400.0, 350.0) } else { (450.0, 0.0) };
                // Interleaving reads and writes on the same spindles costs a seek per switch.
                let mix = if r + w > 0.0 {
                    2.0 * f64::min(r, w) / (r + w)
                } else {
                    0.0
                };
                for d in &mut h.devices {
                    if d.role == Role::Map {
                        d.svc.overhead_ms = RAID_LUN.overhead_ms + 4.0 * mix;
                    }
                }
                self.server_io(h, |_, rng| Demand {
                    outstanding: 64.0,
                    ..Demand::mbs(r * rng.noise(0.1), w * rng.noise(0.1), 1024.0, 1024.0)
                });
                h.load = HostLoad {
                    iowait_pct: if mixing { 9.0 } else { 3.0 },
                    psi_some_pct: if mixing { 30.0 } else { 6.0 },
                    psi_full_pct: if mixing { 15.0 } else { 2.0 },
                    ..base_load()
                };
            }
            Kind::BurstSaturation => {
                let hour = self.hour_ticks();
                let in_hour = self.tick % hour;
                let burst = self
                    .bursts
                    .iter()
                    .any(|&b| in_hour >= b && in_hour < b + 10);
                self.server_io(h, |k, rng| {
                    if k == 1 && burst {
                        Demand {
                            outstanding: 128.0,
                            ..Demand::mbs(1500.0, 40.0, 1024.0, 512.0)
                        }
                    } else {
                        let f = wave(t) * rng.noise(0.3);
                        Demand::mbs(40.0 * f, 15.0 * f, 1024.0, 512.0)
                    }
                });
                h.load = HostLoad {
                    iowait_pct: if burst { 12.0 } else { 1.0 },
                    psi_some_pct: if burst { 40.0 } else { 2.0 },
                    psi_full_pct: if burst { 20.0 } else { 0.5 },
                    ..base_load()
                };
            }
            Kind::MdRebuild | Kind::MdDegraded | Kind::MdStalled | Kind::MdCheck => {
                match self.kind {
                    Kind::MdRebuild => self.md_events(h),
                    Kind::MdCheck => self.md_check(h),
                    _ => {}
                }
                let f = wave(t) * h.rng.noise(0.2);
                h.demand("md0", Demand::mbs(150.0 * f, 60.0 * f, 1024.0, 1024.0));
                os_io(h);
                let (r, w) = (150.0 * f, 60.0 * f);
                set_nic(h, "ens1f0", w * 1e6, r * 1e6, 0.0);
                h.load = HostLoad {
                    system_pct: 7.0,
                    ..base_load()
                };
            }
            Kind::ZpoolResilver => {
                zpool_io(h, self.tick, self.ticks(25.0));
                h.load = HostLoad {
                    system_pct: 10.0,
                    iowait_pct: 3.0,
                    ..base_load()
                };
            }
            Kind::ZpoolCacheFaulted | Kind::ZpoolRaidz1Resilver => {
                pool_io(h, self.tick);
                h.load = HostLoad {
                    system_pct: 8.0,
                    iowait_pct: 2.0,
                    ..base_load()
                };
            }
            Kind::NicSaturation => {
                self.server_io(h, |_, rng| {
                    Demand::mbs(340.0 * rng.noise(0.08), 10.0, 1024.0, 512.0)
                });
                let drops = h.rng.range(20.0, 400.0);
                if let Some(n) = h.nic_mut("ens1f0") {
                    n.demand.rx_drop_ps = drops;
                }
                h.load = HostLoad {
                    softirq_pct: 7.0,
                    system_pct: 8.0,
                    ..base_load()
                };
            }
            Kind::WorkerStaging => self.worker(h),
            Kind::HwraidRebuild | Kind::HwraidCacheWt | Kind::HwraidStalled | Kind::NvmeWearout => {
                self.drive_hw(h)
            }
            Kind::WorkerHtcondor | Kind::WorkerSlurm | Kind::JobsIoStarved => {
                let tick = self.tick;
                if let Some(w) = &mut self.worker {
                    w.drive(h, tick);
                }
            }
        }
        self.tick += 1;
    }

    /// Sets the demand of the four LUNs (`f(k, rng)` for map `k`) and the data NIC's traffic
    /// from what the LUNs served last second (reads go out, writes came in).
    fn server_io(&self, h: &mut Host, mut f: impl FnMut(usize, &mut crate::model::Rand) -> Demand) {
        let mut rx = 0.0;
        let mut tx = 0.0;
        for k in 0..4usize {
            let d = f(k, &mut h.rng);
            let name = format!("dm-{k}");
            if let Some(dev) = h.dev_mut(&name) {
                dev.demand = d;
                let last = dev.last;
                if last.r_ios + last.w_ios > 0 {
                    tx += last.r_sect as f64 * 512.0;
                    rx += last.w_sect as f64 * 512.0;
                } else {
                    tx += d.r_iops * d.r_kb * 1024.0;
                    rx += d.w_iops * d.w_kb * 1024.0;
                }
            }
        }
        os_io(h);
        let drop = if self.kind == Kind::NicSaturation {
            h.nics
                .iter()
                .find(|n| n.name == "ens1f0")
                .map_or(0.0, |n| n.demand.rx_drop_ps)
        } else {
            0.0
        };
        // NFS/xrootd request overhead on top of the payload.
        set_nic(h, "ens1f0", rx * 1.02, tx * 1.02, drop);
    }

    /// multipath-flap: the first path of mpatha's preferred group fails for 5–20 s, then comes
    /// back; the next failure follows 30–90 s (scenario time) later.
    fn flap(&mut self, h: &mut Host) {
        let tick = self.tick;
        let mut change: Option<bool> = None;
        if let Some(until) = self.down_until {
            if tick >= until {
                self.down_until = None;
                let gap = h.rng.range(30.0, 90.0);
                self.next_fail = tick + self.ticks(gap);
                change = Some(false);
            }
        } else if tick >= self.next_fail {
            self.down_until = Some(tick + h.rng.int(5, 20));
            change = Some(true);
        }
        let Some(failed) = change else { return };
        let Some(m) = h.maps.first_mut() else { return };
        let Some(p) = m.groups.first_mut().and_then(|g| g.first_mut()) else {
            return;
        };
        p.failed = failed;
        if failed {
            p.fail_count += 1;
        }
        let dev = p.dev.clone();
        m.choose_group();
        if let Some(d) = h.dev_mut(&dev) {
            d.state = if failed { "offline" } else { "running" }.to_owned();
        }
    }
}

fn base_load() -> HostLoad {
    HostLoad {
        user_pct: 6.0,
        system_pct: 4.0,
        iowait_pct: 1.5,
        softirq_pct: 1.5,
        psi_some_pct: 3.0,
        psi_full_pct: 1.0,
        dirty_kb: 409_600.0,
        writeback_kb: 20_480.0,
    }
}

fn os_io(h: &mut Host) {
    for n in ["sda", "sdb"] {
        if h.dev(n).is_some_and(|d| !d.rotational) {
            let f = h.rng.noise(0.5);
            h.demand(n, Demand::mbs(0.2 * f, 1.0 * f, 16.0, 16.0));
        }
    }
    let mgmt = h.rng.noise(0.5) * 5e4;
    // local daemons talking to each other (rsyslog, the agent's own spool, sshd)
    if let Some(lo) = h.nic_mut("lo") {
        lo.demand.tx_bps = mgmt / 5.0;
    }
    if let Some(n) = h.nic_mut("eno1") {
        if n.speed_mbps == Some(1000) {
            n.demand = NetDemand {
                rx_bps: mgmt,
                tx_bps: mgmt * 2.0,
                ..NetDemand::default()
            };
        }
    }
}

fn set_nic(h: &mut Host, name: &str, rx: f64, tx: f64, drop: f64) {
    if let Some(n) = h.nic_mut(name) {
        n.demand = NetDemand {
            rx_bps: rx,
            tx_bps: tx,
            rx_drop_ps: drop,
            rx_err_ps: 0.0,
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sd_names_follow_the_kernel() {
        assert_eq!(sd_name(0), "sda");
        assert_eq!(sd_name(25), "sdz");
        assert_eq!(sd_name(26), "sdaa");
        assert_eq!(sd_devt(17), (65, 16));
    }

    #[test]
    fn every_name_parses_back() {
        for k in ALL {
            assert_eq!(Kind::parse(k.name()), Some(k));
        }
        assert_eq!(Kind::parse("nope"), None);
    }
}
