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
mod drive;
mod io;
pub mod jobs;
mod storage;

pub use drive::*;
pub use io::*;
pub use storage::*;

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
    /// SMART data of the disks, and a hardware RAID controller (`drive.rs`).
    pub drives: Drives,
    /// The cgroup v2 hierarchy of a worker's batch jobs (`None`: no jobs written).
    pub cgroups: Option<jobs::Cgroups>,
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
            drives: Drives::default(),
            cgroups: None,
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
                // No path: queue_if_no_path holds the I/O, nothing completes. The kernel counts
                // the device busy all second (io_ticks advance while requests are in flight);
                // time_in_queue only grows as requests complete, so it stays put.
                Second {
                    in_flight: dev.demand.outstanding.max(8.0) as u64,
                    io_ms: 1000,
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
        if let Some(cg) = &mut self.cgroups {
            let disk = self.devices.iter().find(|d| d.name == cg.disk_name);
            cg.tick(disk.map(|d| &d.last));
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
