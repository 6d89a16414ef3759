//! Two snapshots and the interval between them → per-second values, with exactly the formulas
//! of sysstat (`iostat -x`, `sar -n DEV`, `sar -n EDEV`, `iostat -c`).
//!
//! The interval `itv` is in hundredths of a second, taken from `/proc/uptime` as sysstat does, and
//! sysstat's `S_VALUE(m, n, itv) = (n − m) / itv × 100` turns a counter delta into a rate:
//!
//! | field | formula (Δ over the interval) |
//! | --- | --- |
//! | r/s w/s d/s f/s | S_VALUE(ios) |
//! | rkB/s wkB/s dkB/s | S_VALUE(sectors) / 2 |
//! | rrqm/s wrqm/s drqm/s | S_VALUE(merges) |
//! | %rrqm %wrqm %drqm | merges / (merges + ios) × 100, 0 without I/O |
//! | r_await w_await d_await f_await | Δticks / Δios (ms), 0 without I/O |
//! | rareq-sz wareq-sz dareq-sz | Δsectors / Δios / 2 (kB) |
//! | aqu-sz | S_VALUE(time_in_queue) / 1000 |
//! | %util | S_VALUE(io_ticks) / 10, at most 100 (io_ticks can run ahead of the interval by the sampling jitter; a device cannot be busier than always) |
//! | svctm | Δio_ticks / Δ(r+w+d ios) (ms), 0 without I/O |
//! | await | Δ(r+w+d ticks) / Δ(r+w+d ios) |
//! | rxpck/s … txcmp/s rxmcst/s | S_VALUE(counter); rxkB/s = S_VALUE(bytes) / 1024 |
//! | %ifutil | full duplex: max(rx, tx) B/s × 800 / speed(b/s); half or unknown: (rx + tx) × 800 / speed |
//!
//! A counter that goes backwards — a reset, a 32-bit wrap of the millisecond fields, a device
//! replaced under the same name — yields no rate for that interval ([`delta`] returns `None`)
//! rather than a spike of 2^32: one missing second is honest, a petabyte-per-second is not.
//! So does a jump no device can make in the interval ([`plausible`]): more than
//! [`MAX_COUNT_PER_S`] of any counter per second, or more busy time (`io_ticks`) than twice the
//! interval and a second — a counter rewritten by a driver, a bit flip, a hypervisor's migration.

use crate::sources::diskstats::DiskStat;
use crate::sources::netdev::NetDev;
use crate::sources::pressure::PsiLine;
use crate::sources::stat::CpuTimes;
use crate::sources::sysnet::Duplex;

/// The cumulative counters of one block device (a copy of the diskstats row without its name).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DiskCounters {
    /// Reads completed.
    pub reads: u64,
    /// Reads merged.
    pub reads_merged: u64,
    /// Sectors read.
    pub sectors_read: u64,
    /// ms reading.
    pub read_ms: u64,
    /// Writes completed.
    pub writes: u64,
    /// Writes merged.
    pub writes_merged: u64,
    /// Sectors written.
    pub sectors_written: u64,
    /// ms writing.
    pub write_ms: u64,
    /// ms with I/O in flight.
    pub io_ms: u64,
    /// Weighted ms in queue.
    pub queue_ms: u64,
    /// Discards completed.
    pub discards: u64,
    /// Discards merged.
    pub discards_merged: u64,
    /// Sectors discarded.
    pub sectors_discarded: u64,
    /// ms discarding.
    pub discard_ms: u64,
    /// Flushes completed.
    pub flushes: u64,
    /// ms flushing.
    pub flush_ms: u64,
}

impl From<&DiskStat<'_>> for DiskCounters {
    fn from(s: &DiskStat<'_>) -> Self {
        Self {
            reads: s.reads,
            reads_merged: s.reads_merged,
            sectors_read: s.sectors_read,
            read_ms: s.read_ms,
            writes: s.writes,
            writes_merged: s.writes_merged,
            sectors_written: s.sectors_written,
            write_ms: s.write_ms,
            io_ms: s.io_ms,
            queue_ms: s.queue_ms,
            discards: s.discards,
            discards_merged: s.discards_merged,
            sectors_discarded: s.sectors_discarded,
            discard_ms: s.discard_ms,
            flushes: s.flushes,
            flush_ms: s.flush_ms,
        }
    }
}

impl DiskCounters {
    fn as_array(&self) -> [u64; 16] {
        [
            self.reads,
            self.reads_merged,
            self.sectors_read,
            self.read_ms,
            self.writes,
            self.writes_merged,
            self.sectors_written,
            self.write_ms,
            self.io_ms,
            self.queue_ms,
            self.discards,
            self.discards_merged,
            self.sectors_discarded,
            self.discard_ms,
            self.flushes,
            self.flush_ms,
        ]
    }

    fn from_array(a: [u64; 16]) -> Self {
        let [reads, reads_merged, sectors_read, read_ms, writes, writes_merged, sectors_written, write_ms, io_ms, queue_ms, discards, discards_merged, sectors_discarded, discard_ms, flushes, flush_ms] =
            a;
        Self {
            reads,
            reads_merged,
            sectors_read,
            read_ms,
            writes,
            writes_merged,
            sectors_written,
            write_ms,
            io_ms,
            queue_ms,
            discards,
            discards_merged,
            sectors_discarded,
            discard_ms,
            flushes,
            flush_ms,
        }
    }

    /// Adds another delta (accumulating an interval from its seconds).
    #[inline]
    pub fn add(&mut self, other: &Self) {
        let mut a = self.as_array();
        for (x, y) in a.iter_mut().zip(other.as_array()) {
            *x = x.saturating_add(y);
        }
        *self = Self::from_array(a);
    }
}

/// The cumulative counters of one interface, in `/proc/net/dev` column order.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NetCounters(pub [u64; 16]);

impl From<&NetDev<'_>> for NetCounters {
    fn from(n: &NetDev<'_>) -> Self {
        Self([
            n.rx_bytes,
            n.rx_packets,
            n.rx_errs,
            n.rx_drop,
            n.rx_fifo,
            n.rx_frame,
            n.rx_compressed,
            n.rx_multicast,
            n.tx_bytes,
            n.tx_packets,
            n.tx_errs,
            n.tx_drop,
            n.tx_fifo,
            n.tx_colls,
            n.tx_carrier,
            n.tx_compressed,
        ])
    }
}

impl NetCounters {
    /// Adds another delta.
    pub fn add(&mut self, other: &Self) {
        for (x, y) in self.0.iter_mut().zip(other.0) {
            *x = x.saturating_add(y);
        }
    }
}

/// `cur − prev` for every counter, or `None` when any counter went backwards.
pub fn delta<const N: usize>(prev: &[u64; N], cur: &[u64; N]) -> Option<[u64; N]> {
    let mut out = [0u64; N];
    for i in 0..N {
        out[i] = cur[i].checked_sub(prev[i])?;
    }
    Some(out)
}

/// More of any counter per second than this is no rate but a reset: 10^13 is 10 TB/s of bytes,
/// 5 PB/s of sectors, ten trillion I/Os — beyond any device or NIC.
pub const MAX_COUNT_PER_S: f64 = 1e13;

/// Whether every counter of a delta over `itv_cs` hundredths of a second could have happened.
pub fn plausible<const N: usize>(d: &[u64; N], itv_cs: u64) -> bool {
    let limit = MAX_COUNT_PER_S * (itv_cs.max(1) as f64 / 100.0);
    d.iter().all(|&v| (v as f64) <= limit)
}

/// Disk counter delta over `itv_cs`; `None` on any backwards counter or impossible jump.
///
/// [`delta`] and [`plausible`] in one pass, for every block device every second: the borrows
/// of the subtractions are or-ed and tested once, and the largest difference alone is
/// compared with the limit (a u64 turned into a float keeps the order, so every counter is
/// within the limit when the largest is). ~60 instructions against ~230. Inlined into the
/// disk collector's per-second accounting, as [`crate::summary::DiskInterval::add`] is: ~35
/// instructions a device less than the two calls (the delta returned through memory).
#[inline]
pub fn disk_delta(prev: &DiskCounters, cur: &DiskCounters, itv_cs: u64) -> Option<DiskCounters> {
    let (p, c) = (prev.as_array(), cur.as_array());
    let mut d = [0u64; 16];
    let mut back = false;
    let mut largest = 0u64;
    for ((d, c), p) in d.iter_mut().zip(c).zip(p) {
        let (v, borrow) = c.overflowing_sub(p);
        *d = v;
        back |= borrow;
        largest = largest.max(v);
    }
    let d = DiskCounters::from_array(d);
    let limit = MAX_COUNT_PER_S * (itv_cs.max(1) as f64 / 100.0);
    let busy_ms_max = itv_cs.saturating_mul(20).saturating_add(1000);
    (!back && largest as f64 <= limit && d.io_ms <= busy_ms_max).then_some(d)
}

/// Interface counter delta over `itv_cs`; `None` on any backwards counter or impossible jump.
pub fn net_delta(prev: &NetCounters, cur: &NetCounters, itv_cs: u64) -> Option<NetCounters> {
    delta(&prev.0, &cur.0)
        .filter(|d| plausible(d, itv_cs))
        .map(NetCounters)
}

/// sysstat's S_VALUE: a delta over `itv_cs` hundredths of a second, per second.
fn s_value(d: u64, itv_cs: u64) -> f64 {
    d as f64 / itv_cs as f64 * 100.0
}

fn ratio(num: u64, den: u64) -> f64 {
    if den == 0 {
        0.0
    } else {
        num as f64 / den as f64
    }
}

fn pct_merged(merges: u64, ios: u64) -> f64 {
    let t = merges + ios;
    if t == 0 {
        0.0
    } else {
        merges as f64 / t as f64 * 100.0
    }
}

/// `iostat -x` for one device over one interval.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct DiskRates {
    /// r/s
    pub r_per_s: f64,
    /// w/s
    pub w_per_s: f64,
    /// d/s
    pub d_per_s: f64,
    /// f/s
    pub f_per_s: f64,
    /// rkB/s
    pub rkb_per_s: f64,
    /// wkB/s
    pub wkb_per_s: f64,
    /// dkB/s
    pub dkb_per_s: f64,
    /// rrqm/s
    pub rrqm_per_s: f64,
    /// wrqm/s
    pub wrqm_per_s: f64,
    /// drqm/s
    pub drqm_per_s: f64,
    /// %rrqm
    pub rrqm_pct: f64,
    /// %wrqm
    pub wrqm_pct: f64,
    /// %drqm
    pub drqm_pct: f64,
    /// r_await, ms
    pub r_await_ms: f64,
    /// w_await, ms
    pub w_await_ms: f64,
    /// d_await, ms
    pub d_await_ms: f64,
    /// f_await, ms
    pub f_await_ms: f64,
    /// await over reads, writes and discards, ms
    pub await_ms: f64,
    /// rareq-sz, kB
    pub rareq_sz_kb: f64,
    /// wareq-sz, kB
    pub wareq_sz_kb: f64,
    /// dareq-sz, kB
    pub dareq_sz_kb: f64,
    /// aqu-sz
    pub aqu_sz: f64,
    /// %util
    pub util_pct: f64,
    /// svctm, ms
    pub svctm_ms: f64,
}

/// Computes `iostat -x` values from a delta over `itv_cs` hundredths of a second (> 0).
pub fn disk_rates(d: &DiskCounters, itv_cs: u64) -> DiskRates {
    if itv_cs == 0 {
        return DiskRates::default();
    }
    let ios = d.reads + d.writes + d.discards;
    DiskRates {
        r_per_s: s_value(d.reads, itv_cs),
        w_per_s: s_value(d.writes, itv_cs),
        d_per_s: s_value(d.discards, itv_cs),
        f_per_s: s_value(d.flushes, itv_cs),
        rkb_per_s: s_value(d.sectors_read, itv_cs) / 2.0,
        wkb_per_s: s_value(d.sectors_written, itv_cs) / 2.0,
        dkb_per_s: s_value(d.sectors_discarded, itv_cs) / 2.0,
        rrqm_per_s: s_value(d.reads_merged, itv_cs),
        wrqm_per_s: s_value(d.writes_merged, itv_cs),
        drqm_per_s: s_value(d.discards_merged, itv_cs),
        rrqm_pct: pct_merged(d.reads_merged, d.reads),
        wrqm_pct: pct_merged(d.writes_merged, d.writes),
        drqm_pct: pct_merged(d.discards_merged, d.discards),
        r_await_ms: ratio(d.read_ms, d.reads),
        w_await_ms: ratio(d.write_ms, d.writes),
        d_await_ms: ratio(d.discard_ms, d.discards),
        f_await_ms: ratio(d.flush_ms, d.flushes),
        await_ms: ratio(d.read_ms + d.write_ms + d.discard_ms, ios),
        rareq_sz_kb: ratio(d.sectors_read, d.reads) / 2.0,
        wareq_sz_kb: ratio(d.sectors_written, d.writes) / 2.0,
        dareq_sz_kb: ratio(d.sectors_discarded, d.discards) / 2.0,
        aqu_sz: s_value(d.queue_ms, itv_cs) / 1000.0,
        util_pct: (s_value(d.io_ms, itv_cs) / 10.0).min(100.0),
        svctm_ms: ratio(d.io_ms, ios),
    }
}

/// %util alone (the per-second figure the summaries keep), without the other rates.
#[inline]
pub fn disk_util_pct(d: &DiskCounters, itv_cs: u64) -> f64 {
    if itv_cs == 0 {
        0.0
    } else {
        (s_value(d.io_ms, itv_cs) / 10.0).min(100.0)
    }
}

/// `sar -n DEV` and `sar -n EDEV` for one interface over one interval.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct NetRates {
    /// rxpck/s
    pub rx_packets_per_s: f64,
    /// txpck/s
    pub tx_packets_per_s: f64,
    /// rx bytes/s (rxkB/s × 1024)
    pub rx_bytes_per_s: f64,
    /// tx bytes/s
    pub tx_bytes_per_s: f64,
    /// rxcmp/s
    pub rx_compressed_per_s: f64,
    /// txcmp/s
    pub tx_compressed_per_s: f64,
    /// rxmcst/s
    pub rx_multicast_per_s: f64,
    /// rxerr/s
    pub rx_errors_per_s: f64,
    /// txerr/s
    pub tx_errors_per_s: f64,
    /// coll/s
    pub collisions_per_s: f64,
    /// rxdrop/s
    pub rx_drops_per_s: f64,
    /// txdrop/s
    pub tx_drops_per_s: f64,
    /// txcarr/s
    pub tx_carrier_per_s: f64,
    /// rxfram/s
    pub rx_frame_per_s: f64,
    /// rxfifo/s
    pub rx_fifo_per_s: f64,
    /// txfifo/s
    pub tx_fifo_per_s: f64,
    /// %ifutil; `None` without a known link speed (sar prints 0.00 there; we omit the field).
    pub util_pct: Option<f64>,
}

/// `sar -n DEV`'s %ifutil from byte rates, link speed in Mb/s and duplex.
pub fn if_util_pct(
    rx_bps: f64,
    tx_bps: f64,
    speed_mbps: Option<u64>,
    duplex: Duplex,
) -> Option<f64> {
    let speed = speed_mbps.filter(|s| *s > 0)? as f64 * 1_000_000.0;
    Some(match duplex {
        Duplex::Full => rx_bps.max(tx_bps) * 800.0 / speed,
        Duplex::Half | Duplex::Unknown => (rx_bps + tx_bps) * 800.0 / speed,
    })
}

/// Computes `sar -n DEV/EDEV` values from a delta over `itv_cs` hundredths of a second.
pub fn net_rates(
    d: &NetCounters,
    itv_cs: u64,
    speed_mbps: Option<u64>,
    duplex: Duplex,
) -> NetRates {
    if itv_cs == 0 {
        return NetRates::default();
    }
    let [rx_bytes, rx_packets, rx_errs, rx_drop, rx_fifo, rx_frame, rx_compressed, rx_multicast, tx_bytes, tx_packets, tx_errs, tx_drop, tx_fifo, tx_colls, tx_carrier, tx_compressed] =
        d.0;
    let rx_bytes_per_s = s_value(rx_bytes, itv_cs);
    let tx_bytes_per_s = s_value(tx_bytes, itv_cs);
    NetRates {
        rx_packets_per_s: s_value(rx_packets, itv_cs),
        tx_packets_per_s: s_value(tx_packets, itv_cs),
        rx_bytes_per_s,
        tx_bytes_per_s,
        rx_compressed_per_s: s_value(rx_compressed, itv_cs),
        tx_compressed_per_s: s_value(tx_compressed, itv_cs),
        rx_multicast_per_s: s_value(rx_multicast, itv_cs),
        rx_errors_per_s: s_value(rx_errs, itv_cs),
        tx_errors_per_s: s_value(tx_errs, itv_cs),
        collisions_per_s: s_value(tx_colls, itv_cs),
        rx_drops_per_s: s_value(rx_drop, itv_cs),
        tx_drops_per_s: s_value(tx_drop, itv_cs),
        tx_carrier_per_s: s_value(tx_carrier, itv_cs),
        rx_frame_per_s: s_value(rx_frame, itv_cs),
        rx_fifo_per_s: s_value(rx_fifo, itv_cs),
        tx_fifo_per_s: s_value(tx_fifo, itv_cs),
        util_pct: if_util_pct(rx_bytes_per_s, tx_bytes_per_s, speed_mbps, duplex),
    }
}

/// `iostat -c` CPU shares over an interval, in percent of all CPU time.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct CpuPct {
    /// %user (user − guest, as iostat)
    pub user_pct: f64,
    /// %nice (nice − guest_nice)
    pub nice_pct: f64,
    /// %system (system + irq + softirq, as iostat)
    pub system_pct: f64,
    /// %iowait
    pub iowait_pct: f64,
    /// %steal
    pub steal_pct: f64,
    /// %idle
    pub idle_pct: f64,
}

fn cpu_array(c: &CpuTimes) -> [u64; 10] {
    [
        c.user,
        c.nice,
        c.system,
        c.idle,
        c.iowait,
        c.irq,
        c.softirq,
        c.steal,
        c.guest,
        c.guest_nice,
    ]
}

/// CPU shares between two `/proc/stat` snapshots; `None` when a counter went backwards or no
/// time passed. The denominator is the sum of all fields except guest and guest_nice, which the
/// kernel already counts inside user and nice.
pub fn cpu_pct(prev: &CpuTimes, cur: &CpuTimes) -> Option<CpuPct> {
    let d = delta(&cpu_array(prev), &cpu_array(cur))?;
    let [user, nice, system, idle, iowait, irq, softirq, steal, guest, guest_nice] = d;
    let total = user + nice + system + idle + iowait + irq + softirq + steal;
    if total == 0 {
        return None;
    }
    let pct = |x: u64| x as f64 / total as f64 * 100.0;
    Some(CpuPct {
        user_pct: pct(user.saturating_sub(guest)),
        nice_pct: pct(nice.saturating_sub(guest_nice)),
        system_pct: pct(system + irq + softirq),
        iowait_pct: pct(iowait),
        steal_pct: pct(steal),
        idle_pct: pct(idle),
    })
}

/// The share of wall time stalled between two readings of a PSI line, in percent: the growth of
/// its `total` (µs) over `itv_cs` hundredths of a second. `None` when either reading lacks the
/// line, the total went backwards, or no time passed.
pub fn psi_pct(prev: Option<PsiLine>, cur: Option<PsiLine>, itv_cs: u64) -> Option<f64> {
    let (c, p) = (cur?, prev?);
    let d = c.total_us.checked_sub(p.total_us)?;
    (itv_cs > 0).then(|| d as f64 / (itv_cs as f64 * 10_000.0) * 100.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
    }

    /// Two hand-made /proc/diskstats snapshots 2.00 s apart (uptime 1000.00 → 1002.00), with
    /// every iostat -x value worked out by hand from sysstat's formulas.
    #[test]
    fn iostat_fields_by_hand() {
        let prev = DiskCounters {
            reads: 1000,
            reads_merged: 100,
            sectors_read: 80_000,
            read_ms: 5_000,
            writes: 2000,
            writes_merged: 500,
            sectors_written: 400_000,
            write_ms: 20_000,
            io_ms: 100_000,
            queue_ms: 300_000,
            discards: 10,
            discards_merged: 0,
            sectors_discarded: 2048,
            discard_ms: 10,
            flushes: 50,
            flush_ms: 100,
        };
        let cur = DiskCounters {
            reads: 1400,              // Δ 400
            reads_merged: 200,        // Δ 100
            sectors_read: 131_200,    // Δ 51200 sectors = 25600 kB
            read_ms: 7_000,           // Δ 2000 ms
            writes: 2600,             // Δ 600
            writes_merged: 1100,      // Δ 600
            sectors_written: 476_800, // Δ 76800 sectors = 38400 kB
            write_ms: 26_000,         // Δ 6000 ms
            io_ms: 101_900,           // Δ 1900 ms
            queue_ms: 309_000,        // Δ 9000 ms
            discards: 12,             // Δ 2
            discards_merged: 2,       // Δ 2
            sectors_discarded: 4096,  // Δ 2048 sectors = 1024 kB
            discard_ms: 14,           // Δ 4 ms
            flushes: 70,              // Δ 20
            flush_ms: 160,            // Δ 60 ms
        };
        let d = disk_delta(&prev, &cur, 200).expect("no reset");
        let r = disk_rates(&d, 200);
        assert!(close(r.r_per_s, 200.0)); // 400 / 2 s
        assert!(close(r.w_per_s, 300.0)); // 600 / 2
        assert!(close(r.d_per_s, 1.0)); // 2 / 2
        assert!(close(r.f_per_s, 10.0)); // 20 / 2
        assert!(close(r.rkb_per_s, 12_800.0)); // 51200 / 2 / 2
        assert!(close(r.wkb_per_s, 19_200.0)); // 76800 / 2 / 2
        assert!(close(r.dkb_per_s, 512.0)); // 2048 / 2 / 2
        assert!(close(r.rrqm_per_s, 50.0)); // 100 / 2
        assert!(close(r.wrqm_per_s, 300.0)); // 600 / 2
        assert!(close(r.drqm_per_s, 1.0));
        assert!(close(r.rrqm_pct, 20.0)); // 100 / (100 + 400)
        assert!(close(r.wrqm_pct, 50.0)); // 600 / (600 + 600)
        assert!(close(r.drqm_pct, 50.0)); // 2 / (2 + 2)
        assert!(close(r.r_await_ms, 5.0)); // 2000 / 400
        assert!(close(r.w_await_ms, 10.0)); // 6000 / 600
        assert!(close(r.d_await_ms, 2.0)); // 4 / 2
        assert!(close(r.f_await_ms, 3.0)); // 60 / 20
        assert!(close(r.await_ms, 8004.0 / 1002.0)); // (2000 + 6000 + 4) / (400 + 600 + 2)
        assert!(close(r.rareq_sz_kb, 64.0)); // 51200 / 400 / 2
        assert!(close(r.wareq_sz_kb, 64.0)); // 76800 / 600 / 2
        assert!(close(r.dareq_sz_kb, 512.0)); // 2048 / 2 / 2
        assert!(close(r.aqu_sz, 4.5)); // 9000 ms / 2000 ms
        assert!(close(r.util_pct, 95.0)); // 1900 ms busy of 2000
        assert!(close(r.svctm_ms, 1900.0 / 1002.0)); // Δio_ticks / Δ(r + w + d)
        assert!(close(disk_util_pct(&d, 200), 95.0));
    }

    #[test]
    fn idle_device_has_zero_rates_not_nan() {
        let r = disk_rates(&DiskCounters::default(), 100);
        assert_eq!(r, DiskRates::default());
        assert_eq!(
            disk_rates(&DiskCounters::default(), 0),
            DiskRates::default()
        );
    }

    #[test]
    fn a_backwards_counter_gives_no_rate() {
        // the 32-bit wrap of io_ms: 4294967000 → 300
        let prev = DiskCounters {
            io_ms: 4_294_967_000,
            reads: 10,
            ..DiskCounters::default()
        };
        let cur = DiskCounters {
            io_ms: 300,
            reads: 20,
            ..DiskCounters::default()
        };
        assert_eq!(disk_delta(&prev, &cur, 100), None);
        let mut n = NetCounters::default();
        n.0[0] = 5;
        assert_eq!(net_delta(&n, &NetCounters::default(), 100), None);
    }

    #[test]
    fn an_impossible_jump_is_a_reset_and_util_stays_at_most_100() {
        let prev = DiskCounters {
            reads: 10,
            io_ms: 1000,
            ..DiskCounters::default()
        };
        // 1e18 more reads in one second
        let jump = DiskCounters {
            reads: 1_000_000_000_000_000_010,
            io_ms: 1500,
            ..DiskCounters::default()
        };
        assert_eq!(disk_delta(&prev, &jump, 100), None);
        // busy for a year within one second
        let busy = DiskCounters {
            reads: 11,
            io_ms: 1000 + 31_536_000_000,
            ..DiskCounters::default()
        };
        assert_eq!(disk_delta(&prev, &busy, 100), None);
        let mut n = NetCounters::default();
        let mut m = NetCounters::default();
        m.0[0] = 1_000_000_000_000_000_000;
        assert_eq!(net_delta(&n, &m, 100), None);
        n.0[0] = 1;
        m.0[0] = 1_250_000_001; // 10 Gb/s for one second: a rate
        assert!(net_delta(&n, &m, 100).is_some());
        // io_ticks a little ahead of the interval (sampling jitter): 100, not 104
        let ahead = DiskCounters {
            reads: 12,
            io_ms: 2040,
            ..DiskCounters::default()
        };
        let d = disk_delta(&prev, &ahead, 100).expect("a rate");
        assert_eq!(disk_util_pct(&d, 100), 100.0);
        assert_eq!(disk_rates(&d, 100).util_pct, 100.0);
    }

    /// sar -n DEV over 1.00 s on a 10 GbE full-duplex link.
    #[test]
    fn sar_fields_by_hand() {
        let prev = NetCounters([
            1_000_000, 1000, 0, 0, 0, 0, 0, 10, 2_000_000, 2000, 0, 0, 0, 0, 0, 0,
        ]);
        let cur = NetCounters([
            1_001_000_000, // rx Δ 1e9 B/s
            801_000,       // rx Δ 800000 pkt
            5,
            12,
            1,
            2,
            3,
            60,          // rxmcst Δ 50
            501_000_000, // tx Δ 5e8 B
            402_000,     // tx Δ 400000 pkt
            4,
            6,
            7,
            8,
            9,
            11,
        ]);
        let d = net_delta(&prev, &cur, 100).expect("no reset");
        let r = net_rates(&d, 100, Some(10_000), Duplex::Full);
        assert!(close(r.rx_bytes_per_s, 1e9));
        assert!(close(r.tx_bytes_per_s, 4.99e8));
        assert!(close(r.rx_packets_per_s, 800_000.0));
        assert!(close(r.tx_packets_per_s, 400_000.0));
        assert!(close(r.rx_errors_per_s, 5.0));
        assert!(close(r.rx_drops_per_s, 12.0));
        assert!(close(r.rx_fifo_per_s, 1.0));
        assert!(close(r.rx_frame_per_s, 2.0));
        assert!(close(r.rx_compressed_per_s, 3.0));
        assert!(close(r.rx_multicast_per_s, 50.0));
        assert!(close(r.tx_errors_per_s, 4.0));
        assert!(close(r.tx_drops_per_s, 6.0));
        assert!(close(r.tx_fifo_per_s, 7.0));
        assert!(close(r.collisions_per_s, 8.0));
        assert!(close(r.tx_carrier_per_s, 9.0));
        assert!(close(r.tx_compressed_per_s, 11.0));
        // full duplex: max(1e9, 4.99e8) × 800 / 1e10 = 80 %
        assert!(close(r.util_pct.expect("speed known"), 80.0));
        // half duplex: (1e9 + 4.99e8) × 800 / 1e10 = 119.92 %
        let h = net_rates(&d, 100, Some(10_000), Duplex::Half);
        assert!(close(h.util_pct.expect("speed known"), 119.92));
        assert_eq!(net_rates(&d, 100, None, Duplex::Full).util_pct, None);
    }

    #[test]
    fn iostat_cpu_by_hand() {
        let prev = CpuTimes::default();
        let cur = CpuTimes {
            user: 300, // includes guest 100
            nice: 0,
            system: 100,
            idle: 400,
            iowait: 150,
            irq: 20,
            softirq: 30,
            steal: 0,
            guest: 100,
            guest_nice: 0,
        };
        // total = 300 + 100 + 400 + 150 + 20 + 30 = 1000
        let p = cpu_pct(&prev, &cur).expect("time passed");
        assert!(close(p.user_pct, 20.0));
        assert!(close(p.system_pct, 15.0));
        assert!(close(p.iowait_pct, 15.0));
        assert!(close(p.idle_pct, 40.0));
        assert_eq!(cpu_pct(&cur, &prev), None);
        assert_eq!(cpu_pct(&cur, &cur), None);
    }

    #[test]
    fn psi_share_by_hand() {
        let at = |total_us| {
            Some(PsiLine {
                total_us,
                ..PsiLine::default()
            })
        };
        // 250 ms stalled over 2.00 s = 12.5 %
        assert_eq!(psi_pct(at(1_000_000), at(1_250_000), 200), Some(12.5));
        assert_eq!(
            psi_pct(at(1_250_000), at(1_000_000), 200),
            None,
            "backwards"
        );
        assert_eq!(psi_pct(at(0), at(10), 0), None, "no time passed");
        assert_eq!(psi_pct(None, at(10), 100), None, "no line before");
        assert_eq!(psi_pct(at(0), None, 100), None, "no line now");
    }

    /// The delta as it was computed before the one-pass form: [`delta`], then [`plausible`]
    /// of every counter, then the busy time.
    fn disk_delta_reference(
        prev: &DiskCounters,
        cur: &DiskCounters,
        itv_cs: u64,
    ) -> Option<DiskCounters> {
        let d = delta(&prev.as_array(), &cur.as_array())?;
        let busy_ms_max = itv_cs.saturating_mul(20).saturating_add(1000);
        let d = DiskCounters::from_array(d);
        (plausible(&d.as_array(), itv_cs) && d.io_ms <= busy_ms_max).then_some(d)
    }

    /// Counters near every edge: zero, the limit of one second and its neighbours in floats
    /// (1e13 and the u64s around it, whose floats round to it), 2^53 and 2^64 - 1.
    fn edge_counter() -> impl Strategy<Value = u64> {
        prop_oneof![
            Just(0u64),
            Just(1),
            Just(10_000_000_000_000),
            Just(10_000_000_000_001),
            Just(9_999_999_999_999),
            Just(1u64 << 53),
            Just((1u64 << 53) + 1),
            Just(u64::MAX),
            Just(u64::MAX - 1),
            0u64..2_000_000,
            any::<u64>(),
        ]
    }

    use proptest::prelude::*;

    proptest! {
        #[test]
        fn the_one_pass_delta_is_the_delta_and_check_it_replaced(
            prev in proptest::array::uniform16(edge_counter()),
            step in proptest::array::uniform16(edge_counter()),
            itv_cs in prop_oneof![Just(0u64), Just(1), Just(100), Just(101), Just(9_000_000), Just(u64::MAX), any::<u64>()],
            back in any::<u16>(),
        ) {
            let prev = DiskCounters::from_array(prev);
            // Each counter moves forwards by its step, or backwards where `back` has a bit.
            let mut cur = prev.as_array();
            for (i, (c, s)) in cur.iter_mut().zip(step).enumerate() {
                *c = if back & (1 << i) != 0 { c.wrapping_sub(s) } else { c.wrapping_add(s) };
            }
            let cur = DiskCounters::from_array(cur);
            prop_assert_eq!(disk_delta(&prev, &cur, itv_cs), disk_delta_reference(&prev, &cur, itv_cs));
        }
    }
}
