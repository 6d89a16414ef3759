//! The MD scenarios (`md-rebuild`, `md-degraded`, `md-stalled`, `md-check`): the RAID6 12+2
//! they run on, and how each second moves `md-rebuild`'s recovery and `md-check`'s check.

use super::*;

impl Scenario {
    pub(super) fn build_md(&mut self, h: &mut Host) {
        jbod(h, 14);
        let component_kb = 15_625_879_552u64;
        let mut members = Vec::new();
        // md-degraded and md-check have no member being rebuilt
        let replaced = matches!(self.kind, Kind::MdRebuild | Kind::MdStalled);
        for slot in 0..14u32 {
            let dev = sd_name(2 + slot as usize);
            let rebuilding = replaced && slot == 7;
            let failed = self.kind == Kind::MdDegraded && slot == 11;
            members.push(MdMember {
                dev: dev.clone(),
                slot: Some(slot),
                desc_nr: if rebuilding { 14 } else { slot },
                state: if rebuilding {
                    "spare"
                } else if failed {
                    "faulty"
                } else {
                    "in_sync"
                }
                .to_owned(),
                errors: if failed { 37 } else { 0 },
            });
            if failed {
                if let Some(d) = h.dev_mut(&dev) {
                    d.state = "offline".to_owned();
                }
            }
            if let Some(d) = h.dev_mut(&dev) {
                d.holders = vec!["md0".to_owned()];
            }
        }
        let done = h.rng.range(0.18, 0.30) * component_kb as f64;
        let sync = match self.kind {
            Kind::MdDegraded => None,
            Kind::MdStalled => Some(MdSync {
                action: "recover".to_owned(),
                done_kb: done,
                speed_kbps: 0.0,
            }),
            Kind::MdCheck => Some(MdSync {
                action: "check".to_owned(),
                done_kb: done,
                speed_kbps: 150_000.0,
            }),
            _ => Some(MdSync {
                action: "recover".to_owned(),
                done_kb: done,
                speed_kbps: 145_000.0,
            }),
        };
        h.arrays.push(MdArray {
            name: "md0".to_owned(),
            level: "raid6".to_owned(),
            raid_disks: 14,
            parity: 2,
            chunk_kb: 512,
            component_kb,
            members: members.clone(),
            sync,
            // a check reports what earlier checks found too
            mismatch_cnt: if self.kind == Kind::MdCheck { 256 } else { 0 },
        });
        let mut md = Device::new("md0", 9, 0, Role::Md, component_kb * 2 * 12);
        md.rotational = false;
        // md sets readahead to two full stripes: 2 × 12 data disks × 512 KiB.
        md.tunables.read_ahead_kb = 12_288;
        md.slaves = members.iter().map(|m| m.dev.clone()).collect();
        h.devices.push(md);
        self.second_failure = self.ticks(600.0);
    }

    /// md-rebuild: the recovery speed wanders; after 10 min (scenario time) a second member
    /// fails and recovery continues at a lower speed (double-parity reconstruction).
    pub(super) fn md_events(&mut self, h: &mut Host) {
        let tick = self.tick;
        let noise = h.rng.noise(0.08);
        let mut failed_dev = None;
        if let Some(a) = h.arrays.first_mut() {
            let second = tick >= self.second_failure;
            if let Some(s) = &mut a.sync {
                s.speed_kbps = if second { 118_000.0 } else { 145_000.0 } * noise;
            }
            if tick == self.second_failure {
                if let Some(m) = a.members.iter_mut().find(|m| m.slot == Some(11)) {
                    m.state = "faulty".to_owned();
                    m.errors = 37;
                    failed_dev = Some(m.dev.clone());
                }
            }
        }
        if let Some(dev) = failed_dev {
            if let Some(d) = h.dev_mut(&dev) {
                d.state = "offline".to_owned();
            }
        }
    }

    /// md-check: the check moves at ~150 MB/s (±8 %) and finds inconsistent stripes now and
    /// then: `mismatch_cnt` grows by 8 sectors (one 4 KiB stripe unit) every 20 s (scenario
    /// time).
    pub(super) fn md_check(&mut self, h: &mut Host) {
        let every = self.ticks(20.0);
        let tick = self.tick;
        let noise = h.rng.noise(0.08);
        if let Some(a) = h.arrays.first_mut() {
            if let Some(s) = &mut a.sync {
                s.speed_kbps = 150_000.0 * noise;
            }
            if tick > 0 && tick % every == 0 {
                a.mismatch_cnt += 8;
            }
        }
    }
}
