//! The simulated host — block devices, multipath maps, MD arrays, zpools, NICs, CPUs, pressure
//! and memory — and how one second of demand becomes kernel counters.
//!
//! A scenario sets a [`Demand`] on the devices a workload talks to (multipath maps, MD arrays,
//! plain disks) and the host-wide loads; [`Host::tick`] then serves one second: each device has a
//! [`Service`] model (per-request overhead plus transfer time), so utilisation, queue length and
//! await follow from the demand, and a device asked for more than it can do runs at 100 % with
//! the clients' outstanding requests queued (Little's law: await = queue / throughput). Maps pass
//! their I/O to the up paths of their active group; arrays to their members (plus recovery
//! traffic). The counters that result keep the kernel's invariants: `io_ms` ≤ 1000 per second,
//! `time_in_queue` = the sum of the per-direction times, sectors = I/Os × request size, and every
//! CPU's jiffies add up to 100 per second.

/// Kernel sectors are 512 bytes in `/proc/diskstats` whatever the device's block size.
pub const SECTOR_BYTES: u64 = 512;

/// What the clients of a device ask of it in one second.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Demand {
    /// Read requests per second.
    pub r_iops: f64,
    /// Write requests per second.
    pub w_iops: f64,
    /// Size of one read request, KiB.
    pub r_kb: f64,
    /// Size of one write request, KiB.
    pub w_kb: f64,
    /// Requests the clients keep outstanding when the device cannot keep up (0: the device's
    /// `nr_requests`).
    pub outstanding: f64,
}

impl Demand {
    /// A demand of `r_mbs`/`w_mbs` MB/s (10^6 bytes) in requests of `r_kb`/`w_kb` KiB.
    pub fn mbs(r_mbs: f64, w_mbs: f64, r_kb: f64, w_kb: f64) -> Self {
        let iops = |mbs: f64, kb: f64| {
            if kb > 0.0 {
                mbs * 1e6 / (kb * 1024.0)
            } else {
                0.0
            }
        };
        Self {
            r_iops: iops(r_mbs, r_kb),
            w_iops: iops(w_mbs, w_kb),
            r_kb,
            w_kb,
            outstanding: 0.0,
        }
    }

    /// The same request sizes at `f` times the rate.
    pub fn scaled(self, f: f64) -> Self {
        Self {
            r_iops: self.r_iops * f.max(0.0),
            w_iops: self.w_iops * f.max(0.0),
            ..self
        }
    }

    /// Two streams on one device: rates add, request sizes average by weight.
    pub fn plus(self, o: Demand) -> Self {
        let avg = |a: f64, ka: f64, b: f64, kb: f64| {
            if a + b > 0.0 {
                (a * ka + b * kb) / (a + b)
            } else {
                ka.max(kb)
            }
        };
        Self {
            r_iops: self.r_iops + o.r_iops,
            w_iops: self.w_iops + o.w_iops,
            r_kb: avg(self.r_iops, self.r_kb, o.r_iops, o.r_kb),
            w_kb: avg(self.w_iops, self.w_kb, o.w_iops, o.w_kb),
            outstanding: self.outstanding + o.outstanding,
        }
    }
}

/// How long a device takes per request: `overhead_ms` (seek, controller, RAID6
/// read-modify-write) plus the transfer at `kb_per_ms`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Service {
    /// Fixed cost of one request, ms.
    pub overhead_ms: f64,
    /// Transfer rate, KiB per ms (≈ MB/s).
    pub kb_per_ms: f64,
}

/// A 7200 rpm 16 TB SAS disk reading or writing large, mostly sequential requests (~250 MB/s
/// outer tracks, a short seek now and then).
pub const HDD_SEQ: Service = Service {
    overhead_ms: 0.8,
    kb_per_ms: 250.0,
};
/// The same disk under many interleaved streams: a seek per request.
pub const HDD_SEEKY: Service = Service {
    overhead_ms: 8.0,
    kb_per_ms: 200.0,
};
/// A LUN on a 12-disk RAID6 set behind a caching controller (10 data spindles, half of the
/// set's bandwidth per LUN when both of its LUNs are busy).
pub const RAID_LUN: Service = Service {
    overhead_ms: 0.5,
    kb_per_ms: 1000.0,
};
/// A SATA SSD (the OS disks).
pub const SSD: Service = Service {
    overhead_ms: 0.08,
    kb_per_ms: 500.0,
};

/// The cumulative counters of one `/proc/diskstats` line (times in ms, kept in 64 bits here;
/// the kernel prints the time fields as 32-bit values, see [`crate::render`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counters {
    pub r_ios: u64,
    pub r_merges: u64,
    pub r_sect: u64,
    pub r_ms: u64,
    pub w_ios: u64,
    pub w_merges: u64,
    pub w_sect: u64,
    pub w_ms: u64,
    pub in_flight: u64,
    pub io_ms: u64,
    pub queue_ms: u64,
    pub d_ios: u64,
    pub d_merges: u64,
    pub d_sect: u64,
    pub d_ms: u64,
    pub f_ios: u64,
    pub f_ms: u64,
}

/// One second of a device's work: the increments of its counters and its queue at the end.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Second {
    pub r_ios: u64,
    pub r_merges: u64,
    pub r_sect: u64,
    pub r_ms: u64,
    pub w_ios: u64,
    pub w_merges: u64,
    pub w_sect: u64,
    pub w_ms: u64,
    pub f_ios: u64,
    pub f_ms: u64,
    pub io_ms: u64,
    /// Requests in flight at the end of the second (≈ the mean queue, Little's law).
    pub in_flight: u64,
    /// Demand served, as a share of what was asked (1 when the device kept up).
    pub served: f64,
}

impl Second {
    /// The part `share` (0..=1) of this second, for one of several paths carrying it.
    pub fn share(&self, share: f64) -> Second {
        let s = |v: u64| (v as f64 * share).round() as u64;
        Second {
            r_ios: s(self.r_ios),
            r_merges: s(self.r_merges),
            r_sect: s(self.r_ios) * sect_per(self.r_sect, self.r_ios),
            r_ms: s(self.r_ms),
            w_ios: s(self.w_ios),
            w_merges: s(self.w_merges),
            w_sect: s(self.w_ios) * sect_per(self.w_sect, self.w_ios),
            w_ms: s(self.w_ms),
            f_ios: s(self.f_ios),
            f_ms: s(self.f_ms),
            io_ms: if share > 0.0 && self.io_ms > 0 {
                // A path carrying part of a busy map is busy most of the time as well.
                (self.io_ms as f64 * share.sqrt()).round() as u64
            } else {
                0
            },
            in_flight: s(self.in_flight),
            served: self.served,
        }
        .consistent()
    }

    /// Keeps the invariants a rounding may have broken: no busy time without I/O, `io_ms` ≤
    /// 1000 and ≤ the time the requests spent in the queue.
    fn consistent(mut self) -> Self {
        if self.r_ios + self.w_ios + self.f_ios == 0 {
            self.r_ms = 0;
            self.w_ms = 0;
            self.f_ms = 0;
            self.io_ms = 0;
            self.in_flight = 0;
        }
        if self.r_ios == 0 {
            self.r_ms = 0;
            self.r_sect = 0;
            self.r_merges = 0;
        }
        if self.w_ios == 0 {
            self.w_ms = 0;
            self.w_sect = 0;
            self.w_merges = 0;
        }
        self.io_ms = self.io_ms.min(1000).min(self.r_ms + self.w_ms + self.f_ms);
        self
    }
}

fn sect_per(sect: u64, ios: u64) -> u64 {
    sect.checked_div(ios).unwrap_or(0)
}

/// Small deterministic random numbers (the scenario's seed makes a run reproducible).
pub struct Rand(fastrand::Rng);

impl Rand {
    /// A generator for `seed`.
    pub fn new(seed: u64) -> Self {
        Self(fastrand::Rng::with_seed(seed))
    }

    /// Uniform in `[lo, hi)`.
    pub fn range(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * self.0.f64()
    }

    /// Uniform integer in `[lo, hi]`.
    pub fn int(&mut self, lo: u64, hi: u64) -> u64 {
        self.0.u64(lo..=hi.max(lo))
    }

    /// `v` rounded up or down at random so that the mean is `v` (keeps low rates honest).
    pub fn round(&mut self, v: f64) -> u64 {
        if v <= 0.0 || !v.is_finite() {
            return 0;
        }
        let f = v.floor();
        f as u64 + u64::from(self.0.f64() < v - f)
    }

    /// Multiplicative noise around 1 of relative width `w`.
    pub fn noise(&mut self, w: f64) -> f64 {
        1.0 + self.range(-w, w)
    }
}

/// Serves `d` on a device with `svc` for one second.
pub fn serve(d: Demand, svc: Service, nr_requests: u64, merge_frac: f64, rng: &mut Rand) -> Second {
    let svc_r = svc.overhead_ms + d.r_kb / svc.kb_per_ms;
    let svc_w = svc.overhead_ms + d.w_kb / svc.kb_per_ms;
    let busy_ms = d.r_iops * svc_r + d.w_iops * svc_w;
    // Below saturation an M/M/1 queue: mean queue ρ/(1−ρ). At or above, the device is busy the
    // whole second and serves what it can; the clients' outstanding requests wait in the queue.
    let (scale, util, queue) = if busy_ms <= 0.0 {
        (0.0, 0.0, 0.0)
    } else if busy_ms < 960.0 {
        let rho = busy_ms / 1000.0;
        (1.0, rho, rho / (1.0 - rho))
    } else {
        let q = if d.outstanding > 0.0 {
            d.outstanding
        } else {
            nr_requests as f64
        };
        (960.0 / busy_ms, 1.0, q.max(24.0))
    };
    let r_ios = rng.round(d.r_iops * scale);
    let w_ios = rng.round(d.w_iops * scale);
    let f_ios = if w_ios > 0 {
        rng.round(w_ios as f64 * 0.01 + 0.3)
    } else {
        0
    };
    let wr = r_ios as f64 * svc_r;
    let ww = w_ios as f64 * svc_w;
    // The time requests spent queued and in service, split by direction in proportion to their
    // service time; this makes time_in_queue / 1000 the mean queue (aqu-sz).
    let queue_ms = (queue.max(util) * 1000.0).round();
    let total_w = wr + ww;
    let (r_ms, w_ms) = if total_w > 0.0 {
        let r = (queue_ms * wr / total_w).round();
        (r as u64, (queue_ms - r).max(0.0) as u64)
    } else {
        (0, 0)
    };
    let sect = |kb: f64| ((kb * 2.0).round() as u64).max(1);
    Second {
        r_ios,
        r_merges: rng.round(r_ios as f64 * merge_frac),
        r_sect: r_ios * sect(d.r_kb),
        r_ms,
        w_ios,
        w_merges: rng.round(w_ios as f64 * merge_frac),
        w_sect: w_ios * sect(d.w_kb),
        w_ms,
        f_ios,
        f_ms: f_ios * svc.overhead_ms.ceil() as u64,
        io_ms: (util * 1000.0).round() as u64,
        in_flight: queue.round() as u64,
        served: if busy_ms > 0.0 { scale } else { 1.0 },
    }
    .consistent()
}

impl Counters {
    /// Adds one second of work.
    pub fn add(&mut self, s: &Second) {
        self.r_ios += s.r_ios;
        self.r_merges += s.r_merges;
        self.r_sect += s.r_sect;
        self.r_ms += s.r_ms;
        self.w_ios += s.w_ios;
        self.w_merges += s.w_merges;
        self.w_sect += s.w_sect;
        self.w_ms += s.w_ms;
        self.f_ios += s.f_ios;
        self.f_ms += s.f_ms;
        self.io_ms += s.io_ms;
        self.queue_ms += s.r_ms + s.w_ms + s.f_ms;
        self.in_flight = s.in_flight;
    }

    /// `n` seconds like `s`: the history a host has accumulated before the simulation starts.
    pub fn history(s: &Second, n: u64) -> Self {
        let mut c = Counters {
            r_ios: s.r_ios * n,
            r_merges: s.r_merges * n,
            r_sect: s.r_sect * n,
            r_ms: s.r_ms * n,
            w_ios: s.w_ios * n,
            w_merges: s.w_merges * n,
            w_sect: s.w_sect * n,
            w_ms: s.w_ms * n,
            f_ios: s.f_ios * n,
            f_ms: s.f_ms * n,
            io_ms: s.io_ms * n,
            ..Counters::default()
        };
        c.queue_ms = c.r_ms + c.w_ms + c.f_ms + c.d_ms;
        c
    }
}

/// Block-queue tunables (`/sys/block/<dev>/queue/*`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tunables {
    pub read_ahead_kb: u64,
    /// The whole `scheduler` line, the active one in brackets.
    pub scheduler: String,
    pub nr_requests: u64,
    pub max_sectors_kb: u64,
}

/// What a block device is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Role {
    /// A whole disk (or LUN) used directly.
    Disk,
    /// One path (`sdX`) of the multipath map `map` (its dm name).
    Path { map: String },
    /// A dm-multipath map (`dm-N`).
    Map,
    /// An MD array.
    Md,
}

/// One block device.
#[derive(Debug, Clone)]
pub struct Device {
    pub name: String,
    pub major: u32,
    pub minor: u32,
    pub role: Role,
    pub rotational: bool,
    pub size_sectors: u64,
    pub svc: Service,
    pub merge_frac: f64,
    pub tunables: Tunables,
    /// SCSI vendor/model for `sd` devices.
    pub vendor: String,
    pub model: String,
    /// `/sys/block/<sd>/device/state`: `running`, `offline`.
    pub state: String,
    /// dm name (`mpatha`) and uuid for maps.
    pub dm_name: Option<String>,
    pub dm_uuid: Option<String>,
    /// Devices this one is built on (`slaves/`) and those built on it (`holders/`).
    pub slaves: Vec<String>,
    pub holders: Vec<String>,
    /// This second's demand, set by the scenario (maps, arrays and plain disks).
    pub demand: Demand,
    pub c: Counters,
    pub last: Second,
}

impl Device {
    /// A device with sensible defaults for its kind.
    pub fn new(name: &str, major: u32, minor: u32, role: Role, size_sectors: u64) -> Self {
        let sd = name.starts_with("sd");
        Self {
            name: name.to_owned(),
            major,
            minor,
            role,
            rotational: sd,
            size_sectors,
            svc: HDD_SEQ,
            merge_frac: 0.05,
            tunables: Tunables {
                read_ahead_kb: 8192,
                scheduler: if sd {
                    "[mq-deadline] kyber bfq none".to_owned()
                } else {
                    "none".to_owned()
                },
                nr_requests: if sd { 256 } else { 128 },
                max_sectors_kb: 1280,
            },
            vendor: "SEAGATE".to_owned(),
            model: "ST16000NM004J".to_owned(),
            state: "running".to_owned(),
            dm_name: None,
            dm_uuid: None,
            slaves: Vec::new(),
            holders: Vec::new(),
            demand: Demand::default(),
            c: Counters::default(),
            last: Second::default(),
        }
    }
}

/// One path of a multipath map.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MpathPath {
    /// Kernel name of the path device (`sdc`).
    pub dev: String,
    pub major: u32,
    pub minor: u32,
    /// Failed in the kernel's view (`F` in `dmsetup status`).
    pub failed: bool,
    /// The kernel's cumulative fail count.
    pub fail_count: u64,
}

/// A dm-multipath map: path groups in priority order (group 1 is the preferred one, as
/// multipathd orders them by ALUA priority).
#[derive(Debug, Clone)]
pub struct MpathMap {
    /// dm name (`mpatha`).
    pub name: String,
    /// Kernel name of the map device (`dm-0`).
    pub dev: String,
    pub wwid: String,
    pub size_sectors: u64,
    pub groups: Vec<Vec<MpathPath>>,
    /// 1-based group the kernel sends I/O to.
    pub active_group: usize,
    /// multipathd's `failback manual`: the map stays on its current group while that has a
    /// path up, instead of going back to the preferred group (`failback immediate`).
    pub manual_failback: bool,
}

impl MpathMap {
    /// The first group (in priority order) with a path up: where dm-multipath sends I/O, with
    /// immediate failback. With manual failback the current group is kept while it has a path
    /// up.
    pub fn choose_group(&mut self) {
        let current_up = self
            .groups
            .get(self.active_group.saturating_sub(1))
            .is_some_and(|g| g.iter().any(|p| !p.failed));
        if self.manual_failback && current_up {
            return;
        }
        self.active_group = self
            .groups
            .iter()
            .position(|g| g.iter().any(|p| !p.failed))
            .map_or(1, |i| i + 1);
    }
}

/// One member of an MD array.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MdMember {
    pub dev: String,
    /// Role in the array (`slot`), `None` for a spare.
    pub slot: Option<u32>,
    /// The number in brackets in `/proc/mdstat` (the superblock's descriptor number).
    pub desc_nr: u32,
    /// `in_sync`, `faulty`, `spare` (a spare being rebuilt is `spare` until it is in sync).
    pub state: String,
    pub errors: u64,
}

/// A running resync/recovery.
#[derive(Debug, Clone, PartialEq)]
pub struct MdSync {
    /// `recover`, `resync`, `check`.
    pub action: String,
    /// Done so far, KiB per member.
    pub done_kb: f64,
    /// Speed, KiB/s (`sync_speed`).
    pub speed_kbps: f64,
}

/// An MD array.
#[derive(Debug, Clone)]
pub struct MdArray {
    /// `md0`.
    pub name: String,
    pub level: String,
    pub raid_disks: u32,
    pub parity: u32,
    pub chunk_kb: u64,
    /// Per-member size, KiB (`component_size`).
    pub component_kb: u64,
    pub members: Vec<MdMember>,
    pub sync: Option<MdSync>,
    pub mismatch_cnt: u64,
}

impl MdArray {
    /// Members that are out of the array or not yet in sync.
    pub fn degraded(&self) -> u32 {
        let in_sync = self
            .members
            .iter()
            .filter(|m| m.slot.is_some() && m.state == "in_sync")
            .count() as u32;
        self.raid_disks.saturating_sub(in_sync)
    }
}

/// One vdev in a pool's tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Vdev {
    pub name: String,
    pub state: String,
    pub read_errors: u64,
    pub write_errors: u64,
    pub cksum_errors: u64,
    /// Text after the counters (`(resilvering)`, `was /dev/…`).
    pub note: String,
    pub children: Vec<Vdev>,
}

impl Vdev {
    /// A leaf or interior vdev, healthy.
    pub fn new(name: &str, children: Vec<Vdev>) -> Self {
        Self {
            name: name.to_owned(),
            state: "ONLINE".to_owned(),
            read_errors: 0,
            write_errors: 0,
            cksum_errors: 0,
            note: String::new(),
            children,
        }
    }
}

/// A resilver or scrub in progress.
#[derive(Debug, Clone, PartialEq)]
pub struct ZScan {
    /// `resilver` or `scrub`.
    pub kind: String,
    /// Start, seconds since the epoch.
    pub start_epoch: u64,
    pub total_bytes: u64,
    pub scanned_bytes: f64,
    pub issued_bytes: f64,
    pub repaired_bytes: f64,
    /// Issue rate, bytes/s.
    pub issue_bps: f64,
    /// Scan (metadata walk) rate, bytes/s.
    pub scan_bps: f64,
}

/// A ZFS pool.
#[derive(Debug, Clone)]
pub struct Zpool {
    pub name: String,
    pub size_bytes: u64,
    pub alloc_bytes: u64,
    pub frag_pct: u64,
    pub health: String,
    pub root: Vdev,
    pub scan: Option<ZScan>,
    /// L2ARC devices (the `cache` section of `zpool status`).
    pub cache: Vec<Vdev>,
}

/// NIC counters as `/proc/net/dev` shows them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NetCounters {
    pub rx_bytes: u64,
    pub rx_packets: u64,
    pub rx_errs: u64,
    pub rx_drop: u64,
    pub rx_fifo: u64,
    pub rx_frame: u64,
    pub rx_compressed: u64,
    pub rx_multicast: u64,
    pub tx_bytes: u64,
    pub tx_packets: u64,
    pub tx_errs: u64,
    pub tx_drop: u64,
    pub tx_fifo: u64,
    pub tx_colls: u64,
    pub tx_carrier: u64,
    pub tx_compressed: u64,
}

/// What the network asks of a NIC in one second.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct NetDemand {
    /// Bytes per second arriving / to send.
    pub rx_bps: f64,
    pub tx_bps: f64,
    /// Packets dropped per second beyond what overload causes (ring-buffer overruns).
    pub rx_drop_ps: f64,
    pub rx_err_ps: f64,
}

/// A network interface.
#[derive(Debug, Clone)]
pub struct Nic {
    pub name: String,
    /// Mb/s; `None` for `lo`.
    pub speed_mbps: Option<u64>,
    pub mtu: u64,
    pub carrier_changes: u64,
    pub demand: NetDemand,
    pub c: NetCounters,
}

impl Nic {
    /// The most frame bytes per second the link carries (Ethernet preamble, gap and FCS are
    /// not counted in `/proc/net/dev`).
    pub fn line_bps(&self) -> Option<f64> {
        let mtu = self.mtu as f64;
        self.speed_mbps
            .map(|s| s as f64 * 1e6 / 8.0 * (mtu + 14.0) / (mtu + 38.0))
    }

    /// One second of traffic.
    pub fn tick(&mut self, rng: &mut Rand) {
        let d = self.demand;
        let data_pkt = (self.mtu.min(9000) as f64 + 14.0) * 0.97;
        let line = self.line_bps().unwrap_or(f64::INFINITY);
        let rx = d.rx_bps.min(line);
        let tx = d.tx_bps.min(line);
        // Bytes that arrived beyond line rate were never received; what the host could not
        // take off the ring is counted as dropped.
        let over_rx_pkts = ((d.rx_bps - rx).max(0.0) / data_pkt) * 0.02;
        let rx_pkts = rng.round(rx / data_pkt);
        let tx_pkts = rng.round(tx / data_pkt);
        // TCP acknowledges every second segment with a 66-byte frame.
        let ack_rx = tx_pkts / 2;
        let ack_tx = rx_pkts / 2;
        let c = &mut self.c;
        c.rx_packets += rx_pkts + ack_rx;
        c.rx_bytes += rng.round(rx) + ack_rx * 66;
        c.tx_packets += tx_pkts + ack_tx;
        c.tx_bytes += rng.round(tx) + ack_tx * 66;
        c.rx_drop += rng.round(d.rx_drop_ps + over_rx_pkts);
        c.rx_errs += rng.round(d.rx_err_ps);
        if self.speed_mbps.is_some() {
            c.rx_multicast += rng.round(0.3);
        }
        if self.speed_mbps.is_none() {
            // loopback: what goes out comes back in
            c.rx_bytes = c.tx_bytes;
            c.rx_packets = c.tx_packets;
        }
    }
}

/// Host-wide load for one second, set by the scenario.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct HostLoad {
    pub user_pct: f64,
    pub system_pct: f64,
    pub iowait_pct: f64,
    pub softirq_pct: f64,
    /// Share of the second some task waited on I/O (PSI `some`), percent.
    pub psi_some_pct: f64,
    /// Share of the second all non-idle tasks waited on I/O (PSI `full`), percent.
    pub psi_full_pct: f64,
    pub dirty_kb: f64,
    pub writeback_kb: f64,
}

/// Per-CPU jiffies: user nice system idle iowait irq softirq steal guest guest_nice.
pub type CpuJiffies = [u64; 10];

/// PSI state of one line (`some` or `full`).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Psi {
    pub avg10: f64,
    pub avg60: f64,
    pub avg300: f64,
    pub total_us: u64,
}

impl Psi {
    /// One second at `pct` percent stalled: the kernel's exponentially decaying averages.
    pub fn tick(&mut self, pct: f64) {
        let pct = pct.clamp(0.0, 100.0);
        for (avg, win) in [
            (&mut self.avg10, 10.0),
            (&mut self.avg60, 60.0),
            (&mut self.avg300, 300.0),
        ] {
            let k = (-1.0f64 / win).exp();
            *avg = *avg * k + pct * (1.0 - k);
        }
        self.total_us += (pct * 10_000.0).round() as u64;
    }
}

/// The whole simulated host.
pub struct Host {
    pub name: String,
    /// Seconds since the epoch of the current state (for zpool's "since" dates).
    pub epoch_s: u64,
    /// Uptime, hundredths of a second.
    pub uptime_cs: u64,
    pub devices: Vec<Device>,
    pub maps: Vec<MpathMap>,
    pub arrays: Vec<MdArray>,
    pub pools: Vec<Zpool>,
    pub nics: Vec<Nic>,
    pub cpus: Vec<CpuJiffies>,
    pub load: HostLoad,
    pub psi_some: Psi,
    pub psi_full: Psi,
    pub mem_total_kb: u64,
    pub rng: Rand,
}

impl Host {
    /// An empty host named `name`.
    pub fn new(name: &str, ncpu: usize, mem_gb: u64, seed: u64) -> Self {
        let mut rng = Rand::new(seed);
        // Up between 12 and 60 days, booted at a time derived from the seed.
        let uptime_s = rng.int(12 * 86_400, 60 * 86_400);
        Self {
            name: name.to_owned(),
            // The wall clock: zpool's "since" dates and /proc/stat's btime read like the
            // present. (Only those texts depend on it, not a counter.)
            epoch_s: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(1_763_000_000, |d| d.as_secs()),
            uptime_cs: uptime_s * 100,
            devices: Vec::new(),
            maps: Vec::new(),
            arrays: Vec::new(),
            pools: Vec::new(),
            nics: Vec::new(),
            cpus: vec![[0; 10]; ncpu.max(1)],
            load: HostLoad::default(),
            psi_some: Psi::default(),
            psi_full: Psi::default(),
            mem_total_kb: mem_gb * 1024 * 1024,
            rng,
        }
    }

    /// The device named `name`.
    pub fn dev(&self, name: &str) -> Option<&Device> {
        self.devices.iter().find(|d| d.name == name)
    }

    /// The device named `name`, to change.
    pub fn dev_mut(&mut self, name: &str) -> Option<&mut Device> {
        self.devices.iter_mut().find(|d| d.name == name)
    }

    /// Sets the demand on device `name`.
    pub fn demand(&mut self, name: &str, d: Demand) {
        if let Some(dev) = self.dev_mut(name) {
            dev.demand = d;
        }
    }

    /// The NIC named `name`, to change.
    pub fn nic_mut(&mut self, name: &str) -> Option<&mut Nic> {
        self.nics.iter_mut().find(|n| n.name == name)
    }

    /// Uptime in whole seconds.
    pub fn uptime_s(&self) -> u64 {
        self.uptime_cs / 100
    }

    /// Fills the counters with the history of `uptime` seconds at the current demand, so the
    /// first state looks like a host that has been running (called once, after the first
    /// demand is set).
    pub fn backfill(&mut self) {
        let n = self.uptime_s() * 2 / 5;
        let mut scratch = Rand::new(1);
        let seconds = self.serve_all(&mut scratch);
        for (d, s) in self.devices.iter_mut().zip(&seconds) {
            d.c = Counters::history(s, n);
        }
        for nic in &mut self.nics {
            let mut one = nic.clone();
            one.c = NetCounters::default();
            one.tick(&mut scratch);
            let c = one.c;
            nic.c = NetCounters {
                rx_bytes: c.rx_bytes * n,
                rx_packets: c.rx_packets * n,
                tx_bytes: c.tx_bytes * n,
                tx_packets: c.tx_packets * n,
                rx_drop: c.rx_drop * n / 50,
                rx_multicast: if nic.speed_mbps.is_some() { n / 4 } else { 0 },
                ..NetCounters::default()
            };
        }
        let up = self.uptime_s();
        let share = self.cpu_share(&mut scratch);
        for cpu in &mut self.cpus {
            for (j, v) in cpu.iter_mut().enumerate() {
                *v = share.get(j).copied().unwrap_or(0) * up;
            }
        }
        // PSI: the averages start where the current load keeps them.
        for (psi, pct) in [
            (&mut self.psi_some, self.load.psi_some_pct),
            (&mut self.psi_full, self.load.psi_full_pct),
        ] {
            psi.total_us = (pct * 10_000.0) as u64 * n;
            psi.avg10 = pct;
            psi.avg60 = pct;
            psi.avg300 = pct;
        }
    }

    /// One CPU's jiffies for one second: exactly 100, split by the host load.
    fn cpu_share(&self, rng: &mut Rand) -> CpuJiffies {
        let l = self.load;
        let mut j = [0u64; 10];
        let mut left = 100u64;
        // user, system, iowait, softirq; irq gets a jiffy now and then; idle takes the rest.
        for (idx, pct) in [
            (0, l.user_pct),
            (2, l.system_pct),
            (4, l.iowait_pct),
            (6, l.softirq_pct),
        ] {
            let noise = rng.noise(0.15);
            let v = rng.round(pct * noise).min(left);
            if let Some(slot) = j.get_mut(idx) {
                *slot = v;
            }
            left -= v;
        }
        let irq = u64::from(left > 0 && rng.range(0.0, 1.0) < 0.2);
        j[5] = irq;
        j[3] = left - irq;
        j
    }

    /// Serves every device's demand for one second; returns the seconds in device order.
    fn serve_all(&mut self, rng: &mut Rand) -> Vec<Second> {
        let mut out = vec![Second::default(); self.devices.len()];
        let idx = |devs: &[Device], name: &str| devs.iter().position(|d| d.name == name);
        // Plain disks and OS disks first.
        for (i, d) in self.devices.iter().enumerate() {
            if d.role == Role::Disk && !d.holders.iter().any(|h| h.starts_with("md")) {
                if let Some(o) = out.get_mut(i) {
                    *o = self.serve_dev(d, d.demand, rng);
                }
            }
        }
        // Multipath maps: the map serves, its active group's up paths carry it.
        for m in &mut self.maps {
            m.choose_group();
        }
        for m in &self.maps {
            let Some(mi) = idx(&self.devices, &m.dev) else {
                continue;
            };
            let Some(dev) = self.devices.get(mi) else {
                continue;
            };
            let group = m.groups.get(m.active_group.saturating_sub(1));
            let up: Vec<&MpathPath> = group
                .map(|g| g.iter().filter(|p| !p.failed).collect())
                .unwrap_or_default();
            let s = if up.is_empty() {
                // No path: queue_if_no_path holds the I/O, nothing completes.
                Second {
                    in_flight: dev.demand.outstanding.max(8.0) as u64,
                    ..Second::default()
                }
            } else {
                self.serve_dev(dev, dev.demand, rng)
            };
            let share = 1.0 / up.len().max(1) as f64;
            for p in &up {
                if let Some(pi) = idx(&self.devices, &p.dev) {
                    if let Some(o) = out.get_mut(pi) {
                        *o = s.share(share);
                    }
                }
            }
            if let Some(o) = out.get_mut(mi) {
                *o = s;
            }
        }
        // MD arrays: members serve their share plus recovery; the array completes what its
        // slowest member allows.
        for a in &self.arrays {
            let Some(ai) = idx(&self.devices, &a.name) else {
                continue;
            };
            let Some(adev) = self.devices.get(ai) else {
                continue;
            };
            let data = a.raid_disks.saturating_sub(a.parity).max(1) as f64;
            let user = adev.demand;
            let member_kb_r = user.r_kb.min(a.chunk_kb as f64);
            let member_kb_w = user.w_kb.min(a.chunk_kb as f64);
            // Each data byte lands on one member; writes also update the parity members.
            let per_member = Demand {
                r_iops: user.r_iops * user.r_kb / member_kb_r.max(1.0) / data,
                w_iops: user.w_iops * user.w_kb / member_kb_w.max(1.0) * (data + a.parity as f64)
                    / data
                    / a.raid_disks.max(1) as f64,
                r_kb: member_kb_r,
                w_kb: member_kb_w,
                outstanding: user.outstanding / data,
            };
            let sync_kb = a.sync.as_ref().map_or(0.0, |s| s.speed_kbps);
            let mut worst = 1.0f64;
            let mut max_io = 0u64;
            let mut r_await = 0.0f64;
            let mut w_await = 0.0f64;
            for m in &a.members {
                let Some(mi) = idx(&self.devices, &m.dev) else {
                    continue;
                };
                let Some(mdev) = self.devices.get(mi) else {
                    continue;
                };
                if m.state == "faulty" || mdev.state != "running" {
                    continue;
                }
                let mut d = if m.state == "in_sync" {
                    per_member
                } else {
                    // The member being rebuilt gets the array's writes for its slot only.
                    Demand {
                        r_iops: 0.0,
                        ..per_member
                    }
                };
                if sync_kb > 0.0 {
                    let rebuild = if m.state == "in_sync" {
                        Demand::mbs(sync_kb * 1.024 / 1000.0, 0.0, 1024.0, 1024.0)
                    } else {
                        Demand::mbs(0.0, sync_kb * 1.024 / 1000.0, 1024.0, 1024.0)
                    };
                    d = d.plus(rebuild);
                }
                let s = self.serve_dev(mdev, d, rng);
                worst = worst.min(s.served);
                max_io = max_io.max(s.io_ms);
                if s.r_ios > 0 {
                    r_await = r_await.max(s.r_ms as f64 / s.r_ios as f64);
                }
                if s.w_ios > 0 {
                    w_await = w_await.max(s.w_ms as f64 / s.w_ios as f64);
                }
                if let Some(o) = out.get_mut(mi) {
                    *o = s;
                }
            }
            let r_ios = rng.round(user.r_iops * worst);
            let w_ios = rng.round(user.w_iops * worst);
            let r_ms = (r_ios as f64 * r_await).round() as u64;
            let w_ms = (w_ios as f64 * w_await).round() as u64;
            let s = Second {
                r_ios,
                r_sect: r_ios * ((user.r_kb * 2.0).round() as u64),
                r_ms,
                w_ios,
                w_sect: w_ios * ((user.w_kb * 2.0).round() as u64),
                w_ms,
                io_ms: max_io,
                in_flight: ((r_ms + w_ms) as f64 / 1000.0).round() as u64,
                served: worst,
                ..Second::default()
            }
            .consistent();
            if let Some(o) = out.get_mut(ai) {
                *o = s;
            }
        }
        out
    }

    fn serve_dev(&self, d: &Device, demand: Demand, rng: &mut Rand) -> Second {
        if d.state != "running" {
            return Second::default();
        }
        serve(demand, d.svc, d.tunables.nr_requests, d.merge_frac, rng)
    }

    /// Advances the host by one second: counters, NICs, CPUs, pressure, uptime, rebuilds and
    /// scans.
    pub fn tick(&mut self) {
        let mut rng = Rand::new(self.rng.int(0, u64::MAX));
        let seconds = self.serve_all(&mut rng);
        for (d, s) in self.devices.iter_mut().zip(&seconds) {
            d.c.add(s);
            d.last = *s;
        }
        for nic in &mut self.nics {
            nic.tick(&mut rng);
        }
        for i in 0..self.cpus.len() {
            let share = self.cpu_share(&mut rng);
            if let Some(cpu) = self.cpus.get_mut(i) {
                for (v, add) in cpu.iter_mut().zip(share) {
                    *v += add;
                }
            }
        }
        self.psi_some.tick(self.load.psi_some_pct);
        self.psi_full
            .tick(self.load.psi_full_pct.min(self.load.psi_some_pct));
        for a in &mut self.arrays {
            let mut finished = false;
            if let Some(s) = &mut a.sync {
                s.done_kb = (s.done_kb + s.speed_kbps).min(a.component_kb as f64);
                finished = s.done_kb >= a.component_kb as f64;
            }
            if finished {
                a.sync = None;
                for m in &mut a.members {
                    if m.slot.is_some() && m.state == "spare" {
                        m.state = "in_sync".to_owned();
                    }
                }
            }
        }
        for p in &mut self.pools {
            if let Some(s) = &mut p.scan {
                s.issued_bytes = (s.issued_bytes + s.issue_bps).min(s.total_bytes as f64);
                s.scanned_bytes = (s.scanned_bytes + s.scan_bps).min(s.total_bytes as f64);
                s.repaired_bytes += s.issue_bps / 10.0;
            }
        }
        self.uptime_cs += 100;
        self.epoch_s += 1;
    }
}
