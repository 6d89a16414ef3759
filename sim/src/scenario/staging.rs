//! The `worker-staging` scenario: a worker node whose jobs stage their input from the network
//! onto its local disk, then compute reading it back.

use super::*;

impl Scenario {
    pub(super) fn build_worker(&mut self, h: &mut Host) {
        let mut d = sd(0, Role::Disk, 7_814_037_168, HDD_SEEKY);
        d.model = "ST4000NM0035".to_owned();
        d.tunables.nr_requests = 64;
        h.devices.push(d);
        nics(h, 10_000, 1500);
        h.nics.retain(|n| n.name != "ens1f0");
        if let Some(n) = h.nic_mut("eno1") {
            n.speed_mbps = Some(10_000);
        }
        // A batch has just started: most jobs are staging their input.
        for j in 0..16u64 {
            let job = if j < 10 {
                (Some(h.rng.int(20, 60)), 0)
            } else {
                (None, self.ticks(h.rng.range(60.0, 900.0)))
            };
            self.jobs.push(job);
        }
    }

    /// worker-staging: 16 jobs; a job stages its input (≈40 MB/s from the network onto the
    /// local HDD) for 20–90 s, then computes for 5–20 min (scenario time) reading it back.
    pub(super) fn worker(&mut self, h: &mut Host) {
        let tick = self.tick;
        let mut staging = 0u32;
        let mut jobs = std::mem::take(&mut self.jobs);
        for job in &mut jobs {
            match job.0 {
                Some(end) if tick >= end => {
                    let gap = h.rng.range(300.0, 1200.0);
                    *job = (None, tick + self.ticks(gap));
                }
                None if tick >= job.1 => {
                    *job = (Some(tick + h.rng.int(20, 90)), 0);
                }
                _ => {}
            }
            if job.0.is_some() {
                staging += 1;
            }
        }
        self.jobs = jobs;
        let s = f64::from(staging);
        let computing = 16.0 - s;
        let d = Demand {
            outstanding: 16.0 + 8.0 * s,
            ..Demand::mbs(
                2.0 * computing + 5.0 * s,
                40.0 * s * h.rng.noise(0.2),
                128.0,
                512.0,
            )
        };
        h.demand("sda", d);
        let rx = 40e6 * s * h.rng.noise(0.2);
        set_nic(h, "eno1", rx, rx / 50.0 + 2e5, 0.0);
        let busy = (s / 2.0).min(1.0);
        h.load = HostLoad {
            user_pct: computing / 64.0 * 100.0 * 0.95,
            system_pct: 2.0 + s * 0.5,
            iowait_pct: (4.0 + 2.4 * s).min(45.0),
            softirq_pct: 1.0,
            psi_some_pct: (8.0 + 80.0 * busy).min(95.0),
            psi_full_pct: (3.0 + 50.0 * busy).min(60.0),
            dirty_kb: 262_144.0 + 2_097_152.0 * s,
            writeback_kb: 65_536.0 * s,
        };
    }
}
