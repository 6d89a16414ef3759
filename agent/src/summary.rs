//! 1 s samples → one report per interval, keeping the bursts.
//!
//! A report carries the interval's rates from the summed counter deltas (the same numbers iostat
//! would print for the whole interval), plus, from the per-second samples, the maximum, the 95th
//! percentile, and the seconds spent at or above the saturation threshold. A device pinned at 100 %
//! for 8 s of a 10 s interval then reads `util_pct=82 util_max_pct=100 saturated_s=8`, and the
//! burst survives any later averaging in a dashboard or downsampling query.
//!
//! Seconds whose counters went backwards contribute nothing (neither delta nor time), so the
//! interval's rates are over the seconds that could be measured.

use crate::rates::{DiskCounters, NetCounters, NetRates};

/// Summary statistics over the per-second values of one interval.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Series {
    values: Vec<f64>,
    weights_cs: Vec<u64>,
}

impl Series {
    /// Records one sample `v` that covered `itv_cs` hundredths of a second.
    #[inline]
    pub fn push(&mut self, v: f64, itv_cs: u64) {
        self.values.push(v);
        self.weights_cs.push(itv_cs);
    }

    /// Forgets the interval, keeping the allocation.
    pub fn clear(&mut self) {
        self.values.clear();
        self.weights_cs.clear();
    }

    /// Number of samples.
    pub fn len(&self) -> usize {
        self.values.len()
    }

    /// True without samples.
    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    /// The largest sample.
    pub fn max(&self) -> Option<f64> {
        self.values.iter().copied().reduce(f64::max)
    }

    /// The `q` quantile (0 < q ≤ 1) by the nearest-rank method: the smallest sample with at least
    /// `q` of the samples at or below it. With 10 samples, p95 is the largest (rank ⌈9.5⌉ = 10);
    /// with 60, it is the 57th. Sorting a copy of ten numbers is cheaper than any streaming sketch.
    pub fn quantile(&self, q: f64, scratch: &mut Vec<f64>) -> Option<f64> {
        if self.values.is_empty() {
            return None;
        }
        let n = self.values.len();
        let rank = ((q * n as f64).ceil().max(1.0) as usize).min(n);
        if rank == n {
            // The last of the sorted samples is their largest by the same order: no copy, no
            // sort. The p95 of fewer than 20 samples (a 10 s report of 1 s samples) is this.
            return self.values.iter().copied().max_by(f64::total_cmp);
        }
        scratch.clear();
        scratch.extend_from_slice(&self.values);
        scratch.sort_unstable_by(f64::total_cmp);
        scratch.get(rank - 1).copied()
    }

    /// Seconds covered by samples at or above `threshold`.
    pub fn seconds_at_or_above(&self, threshold: f64) -> f64 {
        self.values
            .iter()
            .zip(&self.weights_cs)
            .filter(|(v, _)| **v >= threshold)
            .map(|(_, w)| *w as f64 / 100.0)
            .fold(0.0, |a, b| a + b)
    }
}

/// One block device's interval so far.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DiskInterval {
    /// Summed counter deltas of the measured seconds.
    pub delta: DiskCounters,
    /// Hundredths of a second those deltas cover.
    pub itv_cs: u64,
    /// Per-second %util.
    pub util: Series,
    /// Per-second aqu-sz.
    pub aqu: Series,
    /// Seconds skipped because a counter went backwards.
    pub resets: u32,
}

impl DiskInterval {
    /// Adds one second's delta and its %util and aqu-sz (every block device every second:
    /// inlined into the disk collector's loop).
    #[inline]
    pub fn add(&mut self, d: &DiskCounters, itv_cs: u64, util_pct: f64, aqu_sz: f64) {
        self.delta.add(d);
        self.itv_cs += itv_cs;
        self.util.push(util_pct, itv_cs);
        self.aqu.push(aqu_sz, itv_cs);
    }

    /// Starts a new interval.
    pub fn clear(&mut self) {
        self.delta = DiskCounters::default();
        self.itv_cs = 0;
        self.util.clear();
        self.aqu.clear();
        self.resets = 0;
    }
}

/// One interface's interval so far.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NetInterval {
    /// Summed counter deltas.
    pub delta: NetCounters,
    /// Hundredths of a second covered.
    pub itv_cs: u64,
    /// Per-second %ifutil (only when the link speed is known).
    pub util: Series,
    /// Per-second rx bytes/s, for the max.
    pub rx_bytes_per_s: Series,
    /// Per-second tx bytes/s.
    pub tx_bytes_per_s: Series,
    /// Seconds skipped because a counter went backwards.
    pub resets: u32,
}

impl NetInterval {
    /// Adds one second's delta and its per-second values (`util_pct` only when the link
    /// speed is known).
    pub fn add(&mut self, d: &NetCounters, itv_cs: u64, r: &NetRates) {
        self.delta.add(d);
        self.itv_cs += itv_cs;
        if let Some(u) = r.util_pct {
            self.util.push(u, itv_cs);
        }
        self.rx_bytes_per_s.push(r.rx_bytes_per_s, itv_cs);
        self.tx_bytes_per_s.push(r.tx_bytes_per_s, itv_cs);
    }

    /// Starts a new interval.
    pub fn clear(&mut self) {
        self.delta = NetCounters::default();
        self.itv_cs = 0;
        self.util.clear();
        self.rx_bytes_per_s.clear();
        self.tx_bytes_per_s.clear();
        self.resets = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn series(v: &[f64]) -> Series {
        let mut s = Series::default();
        for x in v {
            s.push(*x, 100);
        }
        s
    }

    #[test]
    fn a_burst_survives_the_summary() {
        // 8 s at 100 %, 2 s idle: the mean is 80, the burst is visible in max/p95/saturated_s.
        let s = series(&[
            100.0, 100.0, 100.0, 100.0, 0.0, 100.0, 100.0, 100.0, 100.0, 0.0,
        ]);
        let mut scratch = Vec::new();
        assert_eq!(s.max(), Some(100.0));
        assert_eq!(s.quantile(0.95, &mut scratch), Some(100.0));
        assert_eq!(s.seconds_at_or_above(95.0), 8.0);
    }

    #[test]
    fn nearest_rank_quantiles() {
        let mut scratch = Vec::new();
        let s = series(&(1..=20).map(f64::from).collect::<Vec<_>>());
        // rank ⌈0.95 × 20⌉ = 19
        assert_eq!(s.quantile(0.95, &mut scratch), Some(19.0));
        assert_eq!(s.quantile(0.5, &mut scratch), Some(10.0));
        let one = series(&[42.0]);
        assert_eq!(one.quantile(0.95, &mut scratch), Some(42.0));
        assert_eq!(Series::default().quantile(0.95, &mut scratch), None);
        assert_eq!(Series::default().max(), None);
    }

    /// The quantile as the sort of every sample gives it, bit for bit (NaN, -0 and +0 are
    /// told apart by their order), for the shortcut that finds the largest rank without one.
    #[test]
    fn quantiles_are_those_of_the_sorted_samples() {
        let pool = [
            0.0,
            -0.0,
            100.0,
            99.999,
            f64::NAN,
            -f64::NAN,
            f64::INFINITY,
            5.5,
            -1.0,
            100.0,
        ];
        let mut scratch = Vec::new();
        for n in 1..=25usize {
            for rot in 0..pool.len() {
                let values: Vec<f64> = (0..n).map(|i| pool[(i * 7 + rot) % pool.len()]).collect();
                let s = series(&values);
                let mut sorted = values.clone();
                sorted.sort_unstable_by(f64::total_cmp);
                for q in [0.5, 0.95, 0.99, 1.0] {
                    let rank = ((q * n as f64).ceil().max(1.0) as usize).min(n);
                    let got = s.quantile(q, &mut scratch).map(f64::to_bits);
                    assert_eq!(got, Some(sorted[rank - 1].to_bits()), "{values:?} q={q}");
                }
            }
        }
    }

    #[test]
    fn seconds_follow_the_sample_length() {
        let mut s = Series::default();
        s.push(99.0, 50); // half a second at 99 %
        s.push(96.0, 150);
        s.push(50.0, 100);
        assert_eq!(s.seconds_at_or_above(95.0), 2.0);
        assert_eq!(s.seconds_at_or_above(99.5), 0.0);
    }

    #[test]
    fn disk_interval_accumulates_and_clears() {
        let mut i = DiskInterval::default();
        let d = DiskCounters {
            reads: 10,
            io_ms: 500,
            ..DiskCounters::default()
        };
        i.add(&d, 100, 50.0, 1.0);
        i.add(&d, 100, 50.0, 1.0);
        assert_eq!(i.delta.reads, 20);
        assert_eq!(i.itv_cs, 200);
        assert_eq!(i.util.len(), 2);
        i.clear();
        assert_eq!(i, DiskInterval::default());
    }

    #[test]
    fn net_interval_accumulates_and_clears() {
        let mut i = NetInterval::default();
        let mut d = NetCounters::default();
        d.0[0] = 1000; // rx_bytes
        let busy = NetRates {
            rx_bytes_per_s: 1000.0,
            util_pct: Some(80.0),
            ..NetRates::default()
        };
        i.add(&d, 100, &busy);
        // a link of unknown speed has no %ifutil: no util sample, the bytes still count
        i.add(
            &d,
            50,
            &NetRates {
                util_pct: None,
                ..busy
            },
        );
        assert_eq!(i.delta.0[0], 2000);
        assert_eq!(i.itv_cs, 150);
        assert_eq!(i.util.len(), 1);
        assert_eq!(i.rx_bytes_per_s.len(), 2);
        assert_eq!(i.tx_bytes_per_s.max(), Some(0.0));
        i.clear();
        assert_eq!(i, NetInterval::default());
    }
}
