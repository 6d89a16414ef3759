//! Hardware RAID and drive health (the SMART data itself: [`super::drives`]): the scenarios
//! of a MegaRAID disk server (`hwraid-rebuild`, `hwraid-cache-wt`, `hwraid-stalled`) and of an
//! NVMe node wearing out (`nvme-wearout`).

use super::drives::{alnum, blank, samsung_nvme, seagate_wwn, NVME_3T84};
use super::*;
use crate::model::{Bbu, Controller, DriveProtocol, NvmeLog, Pd, PdRebuild, Rand, Vd};

/// An 8 TB SATA disk (Seagate Exos 7E8), bytes.
const HDD_8TB: u64 = 8_001_563_222_016;
/// A 16 TB SATA disk (Seagate Exos X16), bytes.
const HDD_16TB: u64 = 16_000_900_661_248;
/// An NVMe SSD: a few tens of µs per request, ~3 GB/s.
const NVME: Service = Service {
    overhead_ms: 0.02,
    kb_per_ms: 3000.0,
};
/// Drives of the MegaRAID scenarios: enclosure 64 (an expander backplane), device id = 20 +
/// slot.
const EID: u32 = 64;
const DID_BASE: u32 = 20;
/// hwraid-rebuild: the failed slot (its hot spare rebuilds in its place), the hot spare, and
/// the member of the same VD that grows pending sectors after 10 min.
const FAILED_SLOT: u32 = 3;
const SPARE_SLOT: u32 = 24;
const WEAK_SLOT: u32 = 7;
/// hwraid-stalled: the slot whose replacement rebuilds (frozen), the member that failed during
/// that rebuild (`Offln`), and the survivor with media errors the rebuild keeps retrying on.
const STALLED_SLOT: u32 = 3;
const SECOND_SLOT: u32 = 9;
const FRAIL_SLOT: u32 = 7;
/// hwraid-stalled: how far the frozen rebuild got, and the rate the controller still credits it
/// with at the start (bytes/s), which falls as `1 / (1 + t / 60 s)`: the percentage never moves
/// (~0.1 GB in an hour against 160 GB per percent) and storcli's time left grows.
const STALLED_AT: f64 = 0.4137;
const TRICKLE_BPS: f64 = 4e6;
/// nvme-wearout: the drive that wears out.
const WORN: &str = "nvme2n1";

/// The OS SSD `sda` of the scenarios' servers (a Samsung PM893 960 GB).
fn os_ssd(h: &mut Host) {
    let mut os = sd(0, Role::Disk, SSD_960_SECT, SSD);
    os.rotational = false;
    os.vendor = "ATA".to_owned();
    os.model = "SAMSUNG MZ7L3960".to_owned();
    os.tunables.read_ahead_kb = 128;
    h.devices.push(os);
}

/// [`os_ssd`] on the chipset's AHCI port (SCSI host 1), beside a MegaRAID controller (host 0).
fn os_ssd_on_ahci(h: &mut Host) {
    os_ssd(h);
    h.drives
        .scsi
        .insert("sda".into(), ((1, 0, 0, 0), "ahci".into()));
}

/// A SATA disk model of the MegaRAID scenarios' backplanes.
struct Hdd {
    model: &'static str,
    serial_prefix: &'static str,
    firmware: &'static str,
    capacity_bytes: u64,
    /// Gigabytes read over its years in service: drawn from this range; written, a share of it.
    gb_read: (f64, f64),
    written_share: f64,
}

const EXOS_7E8: Hdd = Hdd {
    model: "ST8000NM000A-2KE101",
    serial_prefix: "WKD",
    firmware: "SN04",
    capacity_bytes: HDD_8TB,
    gb_read: (180_000.0, 420_000.0),
    written_share: 0.35,
};

const EXOS_X16: Hdd = Hdd {
    model: "ST16000NM001G-2KK103",
    serial_prefix: "ZL2",
    firmware: "SN03",
    capacity_bytes: HDD_16TB,
    gb_read: (300_000.0, 700_000.0),
    written_share: 0.3,
};

impl Hdd {
    /// A healthy disk of this model in `slot` of enclosure [`EID`], in storcli's `state`.
    fn pd(
        &self,
        rng: &mut Rand,
        up_s: u64,
        slot: u32,
        state: &str,
        dg: Option<u32>,
        row: Option<u32>,
    ) -> Pd {
        let mut m = blank(DriveProtocol::Ata, rng, up_s);
        m.model = self.model.into();
        m.serial = format!("{}{}", self.serial_prefix, alnum(rng, 5));
        m.wwn = Some(seagate_wwn(rng));
        m.firmware = self.firmware.into();
        m.capacity_bytes = self.capacity_bytes;
        m.rotation_rpm = 7200;
        m.gb_read = rng.range(self.gb_read.0, self.gb_read.1);
        m.gb_written = m.gb_read * self.written_share;
        Pd {
            eid: EID,
            slot,
            did: DID_BASE + slot,
            state: state.to_owned(),
            dg,
            row,
            interface: "SATA".into(),
            medium: "HDD".into(),
            media_errors: 0,
            other_errors: 0,
            predictive_failures: 0,
            smart_alert: false,
            rebuild: None,
            smart: m,
        }
    }
}

/// What a failed disk's SMART data and controller counters say.
struct Failure {
    reallocated: u64,
    /// Pending sectors, all of them offline uncorrectable too.
    pending: u64,
    /// Reported uncorrectable errors, each one in the error log.
    uncorrect: u64,
    media_errors: u64,
    other_errors: u64,
    predictive_failures: u64,
}

/// Marks `pd` failed: its SMART check fails, the controller raises its SMART alert.
fn failed(pd: &mut Pd, f: Failure) {
    let s = &mut pd.smart;
    s.passed = false;
    s.reallocated = f.reallocated;
    s.pending = f.pending;
    s.offline_uncorrectable = f.pending;
    s.reported_uncorrect = f.uncorrect;
    s.error_log_entries = f.uncorrect;
    pd.media_errors = f.media_errors;
    pd.other_errors = f.other_errors;
    pd.predictive_failures = f.predictive_failures;
    pd.smart_alert = true;
}

/// The `n`-th read error of the disk in `slot`: 8 more pending sectors, one more uncorrectable
/// error logged and media error counted, every 4th time 8 more offline uncorrectable.
fn read_error(c: &mut Controller, slot: u32, n: u64) {
    if let Some(p) = c.pds.iter_mut().find(|p| p.slot == slot) {
        let s = &mut p.smart;
        s.pending += 8;
        s.reported_uncorrect += 1;
        s.error_log_entries += 1;
        if n % 4 == 3 {
            s.offline_uncorrectable += 8;
        }
        p.media_errors += 1;
    }
}

/// The rate the controller credits every rebuilding disk with, bytes/s.
fn set_rebuild_rate(c: &mut Controller, bps: f64) {
    for p in &mut c.pds {
        if let Some(r) = &mut p.rebuild {
            r.rate_bps = bps;
        }
    }
}

/// VD `vd` (drive group `vd`, `data<vd>`): a RAID6 of 12 `disk_bytes` disks with a 256 KiB
/// strip, write-back, exposed as `sd<1 + vd>` (SCSI 0:2:vd:0, a `model` LUN).
fn raid6_vd(
    h: &mut Host,
    model: &str,
    vd: u32,
    disk_bytes: u64,
    members: Vec<usize>,
    naa_id: String,
) -> Vd {
    // the controller coerces each disk down to whole GiB, less one
    let coerced = disk_bytes / (1 << 30) * (1 << 30) - (1 << 30);
    let size = coerced * 10;
    let dev = sd_name(1 + vd as usize);
    let mut d = sd(1 + vd as usize, Role::Disk, size / 512, RAID_LUN);
    d.vendor = "AVAGO".into();
    d.model = model.into();
    d.tunables.read_ahead_kb = 4096;
    h.devices.push(d);
    h.drives
        .scsi
        .insert(dev.clone(), ((0, 2, vd, 0), "megaraid_sas".into()));
    Vd {
        dg: vd,
        vd,
        name: format!("data{vd}"),
        level: "RAID6".into(),
        parity: 2,
        members,
        dev,
        naa_id,
        write_back_configured: true,
        size_bytes: size,
        strip_kb: 256,
    }
}

/// A MegaRAID SAS 9361-`ports` (SCSI host 0) with an optimal iBBU09.
fn megaraid_9361(
    ports: &str,
    rng: &mut Rand,
    roc_temperature_c: i64,
    bbu_temperature_c: i64,
    vds: Vec<Vd>,
    pds: Vec<Pd>,
) -> Controller {
    Controller {
        number: 0,
        model: format!("AVAGO MegaRAID SAS 9361-{ports}"),
        serial: format!("SK{}", rng.int(70_000_000, 99_999_999)),
        firmware: "4.740.00-8452".into(),
        scsi_host: 0,
        roc_temperature_c,
        bbu: Some(Bbu {
            model: "iBBU09".into(),
            state: "Optimal".into(),
            temperature_c: bbu_temperature_c,
        }),
        vds,
        pds,
    }
}

/// The MegaRAID disk server: an OS SSD `sda` on the chipset's AHCI port, a MegaRAID 9361-24i
/// with 25 × 8 TB SATA disks in an expander backplane (enclosure 64): two RAID6 VDs of 12
/// (`sdb`, `sdc`) and a global hot spare. `rebuild`: slot 3 of VD 0 failed (`UBad`) and the
/// hot spare (slot 24) rebuilds in its place.
pub(super) fn build_hwraid(h: &mut Host, rebuild: bool) {
    let mut rng = Rand::new(h.uptime_cs ^ 0x9361);
    let up_s = h.uptime_s();
    os_ssd_on_ahci(h);

    let mut pds = Vec::new();
    for slot in 0..=SPARE_SLOT {
        let (dg, row, state) = match slot {
            SPARE_SLOT if rebuild => (Some(0), Some(FAILED_SLOT), "Rbld"),
            SPARE_SLOT => (None, None, "GHS"),
            FAILED_SLOT if rebuild => (None, None, "UBad"),
            s => (Some(s / 12), Some(s % 12), "Onln"),
        };
        let mut pd = EXOS_7E8.pd(&mut rng, up_s, slot, state, dg, row);
        if slot == SPARE_SLOT && rebuild {
            // a new disk: a few hours powered on
            pd.smart.power_on_s = rng.int(2, 30) * 3600;
            pd.smart.gb_read = 0.0;
            pd.smart.gb_written = 0.0;
            pd.rebuild = Some(PdRebuild {
                done_bytes: HDD_8TB as f64 * rng.range(0.34, 0.40),
                rate_bps: 180e6,
            });
        }
        if slot == FAILED_SLOT && rebuild {
            failed(
                &mut pd,
                Failure {
                    reallocated: 3904,
                    pending: 2216,
                    uncorrect: 412,
                    media_errors: 1487,
                    other_errors: 12,
                    predictive_failures: 4,
                },
            );
        }
        pds.push(pd);
    }
    let mut vds = Vec::new();
    for vd in 0..2u32 {
        let members: Vec<usize> = (0..12u32)
            .map(|row| {
                let slot = vd * 12 + row;
                if rebuild && slot == FAILED_SLOT {
                    SPARE_SLOT as usize
                } else {
                    slot as usize
                }
            })
            .collect();
        let naa_id = format!("600605b00d1e2f30{:016x}", rng.int(1 << 60, u64::MAX));
        vds.push(raid6_vd(h, "MR9361-24i", vd, HDD_8TB, members, naa_id));
    }
    h.drives.controller = Some(megaraid_9361("24i", &mut rng, 68, 31, vds, pds));
    nics(h, 10_000, 9000);
}

/// hwraid-stalled: an OS SSD `sda` on the chipset's AHCI port, a MegaRAID 9361-16i with 12 ×
/// 16 TB SATA disks in an expander backplane (enclosure 64), one RAID6 VD (`sdb`). Slot 3
/// failed days ago and its replacement rebuilds, frozen at 41 %; slot 9 failed during that
/// rebuild and is `Offln` (still in the drive group, as storcli lists a member the controller
/// took offline): two members gone, no redundancy left, the VD `Dgrd`. Slot 7 reads with media
/// errors and pending sectors.
pub(super) fn build_hwraid_stalled(h: &mut Host) {
    let mut rng = Rand::new(h.uptime_cs ^ 0x9316);
    let up_s = h.uptime_s();
    os_ssd_on_ahci(h);
    let mut pds = Vec::new();
    for slot in 0..12u32 {
        let state = match slot {
            STALLED_SLOT => "Rbld",
            SECOND_SLOT => "Offln",
            _ => "Onln",
        };
        let mut pd = EXOS_X16.pd(&mut rng, up_s, slot, state, Some(0), Some(slot));
        match slot {
            STALLED_SLOT => {
                // the replacement: two days powered on, 41 % of it written by the rebuild
                pd.smart.power_on_s = rng.int(40, 56) * 3600;
                pd.smart.gb_read = 0.0;
                pd.smart.gb_written = HDD_16TB as f64 * STALLED_AT / 1e9;
                pd.rebuild = Some(PdRebuild {
                    done_bytes: HDD_16TB as f64 * STALLED_AT,
                    rate_bps: TRICKLE_BPS,
                });
            }
            SECOND_SLOT => failed(
                &mut pd,
                Failure {
                    reallocated: 5112,
                    pending: 3048,
                    uncorrect: 655,
                    media_errors: 2291,
                    other_errors: 31,
                    predictive_failures: 6,
                },
            ),
            FRAIL_SLOT => {
                // still passing its own SMART check, but reading with errors
                let s = &mut pd.smart;
                s.reallocated = 344;
                s.pending = 176;
                s.offline_uncorrectable = 96;
                s.reported_uncorrect = 58;
                s.error_log_entries = 58;
                pd.media_errors = 212;
            }
            _ => {}
        }
        pds.push(pd);
    }
    let naa_id = format!("600605b00d1e2f31{:016x}", rng.int(1 << 60, u64::MAX));
    let vd = raid6_vd(h, "MR9361-16i", 0, HDD_16TB, (0..12).collect(), naa_id);
    h.drives.controller = Some(megaraid_9361("16i", &mut rng, 66, 30, vec![vd], pds));
    nics(h, 10_000, 9000);
}

/// The NVMe node: an OS SSD `sda` and four 3.84 TB NVMe SSDs (`nvme0n1`…`nvme3n1`) taking a
/// write-heavy load; `nvme2n1` is at the end of its rated endurance.
pub(super) fn build_nvme(h: &mut Host) {
    let mut rng = Rand::new(h.uptime_cs ^ 0x4e56);
    let up_s = h.uptime_s();
    os_ssd(h);
    for i in 0..4u32 {
        let name = format!("nvme{i}n1");
        let mut d = Device::new(&name, 259, i, Role::Disk, NVME_3T84 / 512);
        d.svc = NVME;
        d.rotational = false;
        d.tunables.read_ahead_kb = 128;
        d.tunables.nr_requests = 1023;
        d.vendor = String::new();
        d.model = "SAMSUNG MZQL23T8HCLS-00A07".into();
        h.devices.push(d);
        let mut m = samsung_nvme(&mut rng, up_s);
        m.capacity_bytes = NVME_3T84;
        m.temperature_c = rng.int(38, 44) as i64;
        m.nvme = NvmeLog {
            percentage_used: rng.int(31, 47),
            available_spare: 100,
            available_spare_threshold: 10,
            unsafe_shutdowns: rng.int(2, 9),
            ..NvmeLog::default()
        };
        if name == WORN {
            m.nvme.percentage_used = 99;
            m.nvme.available_spare = 14;
        }
        h.drives.disks.insert(name, m);
    }
    nics(h, 25_000, 9000);
}

impl Scenario {
    /// hwraid-rebuild, hwraid-cache-wt, nvme-wearout: the load and the incident's timeline.
    pub(super) fn drive_hw(&mut self, h: &mut Host) {
        let t = self.t_s();
        let tick = self.tick;
        match self.kind {
            Kind::HwraidRebuild | Kind::HwraidCacheWt => {
                let weak_from = self.ticks(600.0);
                let every = self.ticks(20.0);
                let bbu_fails = self.ticks(120.0);
                let kind = self.kind;
                let noise = h.rng.noise(0.08);
                let roc = 67 + h.rng.int(0, 3) as i64;
                let degraded = if let Some(c) = &mut h.drives.controller {
                    c.roc_temperature_c = roc;
                    set_rebuild_rate(c, 180e6 * noise);
                    if kind == Kind::HwraidRebuild
                        && tick >= weak_from
                        && (tick - weak_from) % every == 0
                    {
                        let n = (tick - weak_from) / every;
                        read_error(c, WEAK_SLOT, n);
                    }
                    if kind == Kind::HwraidCacheWt && tick == bbu_fails {
                        if let Some(b) = &mut c.bbu {
                            b.state = "Failed".into();
                        }
                    }
                    c.vds.first().is_some_and(|v| c.vd_state(v) != "Optl")
                } else {
                    false
                };
                // Reads and writes on both VDs; the degraded one reconstructs from parity and
                // shares its disks with the rebuild. Write-through makes every write wait.
                let wt = h
                    .drives
                    .controller
                    .as_ref()
                    .and_then(|c| c.vds.first().map(|v| !c.write_back_active(v)))
                    .unwrap_or(false);
                let mut rx = 0.0;
                let mut tx = 0.0;
                for (k, dev) in ["sdb", "sdc"].iter().enumerate() {
                    let f = wave(t) * h.rng.noise(0.2);
                    let (r, w) = (260.0 * f, 90.0 * f);
                    rx += w * 1e6;
                    tx += r * 1e6;
                    if let Some(d) = h.dev_mut(dev) {
                        d.svc.overhead_ms = RAID_LUN.overhead_ms
                            + if k == 0 && degraded { 1.5 } else { 0.0 }
                            + if wt { 2.5 } else { 0.0 };
                        d.demand = Demand::mbs(r, w, 1024.0, 512.0);
                    }
                }
                os_io(h);
                set_nic(h, "ens1f0", rx * 1.02, tx * 1.02, 0.0);
                h.load = base_load();
            }
            Kind::HwraidStalled => {
                // The controller still credits the rebuild with a trickle that keeps falling;
                // its retries on slot 7 grow that drive's errors every 30 s (scenario time).
                let rate = TRICKLE_BPS * 60.0 / (60.0 + tick as f64);
                let every = self.ticks(30.0);
                let roc = 65 + h.rng.int(0, 3) as i64;
                if let Some(c) = &mut h.drives.controller {
                    c.roc_temperature_c = roc;
                    set_rebuild_rate(c, rate);
                    if tick > 0 && tick % every == 0 {
                        let n = tick / every;
                        read_error(c, FRAIL_SLOT, n);
                    }
                }
                // No redundancy left: every read of a stripe touching the two missing members
                // is reconstructed from both parities, and the load has been cut back.
                let f = wave(t) * h.rng.noise(0.2);
                let (r, w) = (140.0 * f, 40.0 * f);
                if let Some(d) = h.dev_mut("sdb") {
                    d.svc.overhead_ms = RAID_LUN.overhead_ms + 3.0;
                    d.demand = Demand::mbs(r, w, 1024.0, 512.0);
                }
                os_io(h);
                set_nic(h, "ens1f0", w * 1e6 * 1.02, r * 1e6 * 1.02, 0.0);
                h.load = base_load();
            }
            Kind::NvmeWearout => {
                let used_every = self.ticks(300.0);
                let spare_every = self.ticks(60.0);
                let media_from = self.ticks(240.0);
                let media_every = self.ticks(45.0);
                let burst = h.rng.int(1, 3);
                if let Some(m) = h.drives.disks.get_mut(WORN) {
                    let n = &mut m.nvme;
                    if tick > 0 && tick % used_every == 0 {
                        n.percentage_used = (n.percentage_used + 1).min(255);
                    }
                    if tick > 0 && tick % spare_every == 0 {
                        n.available_spare = n.available_spare.saturating_sub(1).max(2);
                    }
                    if tick >= media_from && (tick - media_from) % media_every == 0 {
                        n.media_errors += burst;
                        m.error_log_entries += burst;
                    }
                }
                for i in 0..4 {
                    let f = wave(t) * h.rng.noise(0.15);
                    h.demand(
                        &format!("nvme{i}n1"),
                        Demand {
                            outstanding: 32.0,
                            ..Demand::mbs(900.0 * f, 600.0 * f, 128.0, 128.0)
                        },
                    );
                }
                os_io(h);
                let f = h.rng.noise(0.1);
                set_nic(h, "ens1f0", 2.4e9 * f, 3.6e9 * f, 0.0);
                h.load = HostLoad {
                    system_pct: 9.0,
                    softirq_pct: 4.0,
                    ..base_load()
                };
            }
            _ => {}
        }
    }
}
