//! The chance of losing data before redundancy is restored (MD arrays, zpool top-level vdevs).
//!
//! Model (ARCHITECTURE.md, "rebuild risk"): `m` surviving members each fail independently with
//! annual failure rate `AFR`, so within the remaining window `T` hours one member fails with
//! probability `p = 1 − exp(−λT)`, `λ = AFR / 8766 h`. Data is lost when more members fail than the
//! redundancy left can absorb: `P(loss) = P(Binomial(m, p) > redundancy_left)`. When no redundancy
//! is left, every remaining read must also succeed: the chance of at least one unrecoverable read
//! error over the `B` bytes still to be read is `1 − exp(−8·B·URE)` (URE per bit read), combined
//! with the disk-failure term as `1 − (1 − P_disk)(1 − P_ure)`.
//!
//! A degraded set with no rebuild running has no end to its window; it is evaluated over
//! [`RiskModel::open_window_h`] (default one week: the time it typically takes a site to notice
//! and act), so the figure still ranks arrays by how exposed they are.
//!
//! **Each member's own rate.** Where the drives' health is known, the survivors do not share one
//! rate: member `i` fails within the window with its own `p_i = 1 − exp(−AFR_i·T/8766)`, `AFR_i`
//! from [`crate::health::drive`] (its condition and age), and the number of survivors that fail
//! is Poisson-binomial. [`loss_probability_members`] computes its tail exactly
//! ([`poisson_binomial_tail_above`], a dynamic programme over the members, O(m·r)); a member
//! without data keeps the flat [`RiskModel::afr`]. With every rate equal it is the binomial of
//! [`loss_probability`], which callers with only the flat rate keep using.

mod drive;

pub use drive::DriveRiskModel;

/// Hours in a year (365.25 days), the unit of AFR.
pub const HOURS_PER_YEAR: f64 = 8766.0;

/// Parameters of the risk model (agent config `[risk]`).
#[derive(Debug, Clone, Copy, PartialEq, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RiskModel {
    /// Per-disk annual failure rate (0.02 = 2 %/year, a typical large-fleet HDD figure).
    pub afr: f64,
    /// Unrecoverable read errors per bit read (1e-15 for enterprise HDDs, 1e-14 for desktop).
    pub ure_per_bit: f64,
    /// Window, in hours, assumed for a degraded set with no rebuild running (default 168 h).
    pub open_window_h: f64,
    /// Each drive's own rate from its condition and age (`[risk.drive]`, docs/drive-risk.md).
    pub drive: DriveRiskModel,
}

impl Default for RiskModel {
    fn default() -> Self {
        Self {
            afr: 0.02,
            ure_per_bit: 1e-15,
            open_window_h: 168.0,
            drive: Default::default(),
        }
    }
}

/// The exposure of one redundancy set.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Exposure {
    /// Members still working.
    pub surviving: u32,
    /// Further member failures the set can absorb (parity/copies minus failed members).
    pub redundancy_left: u32,
    /// Hours until redundancy is restored: the rebuild's ETA; `None` when nothing is rebuilding.
    pub window_h: Option<f64>,
    /// Bytes still to be read to restore redundancy (for the URE term); `None` when unknown.
    pub bytes_to_read: Option<u64>,
}

/// Probability of one disk failing within `window_h` hours.
pub fn disk_failure_probability(afr: f64, window_h: f64) -> f64 {
    let lambda = afr / HOURS_PER_YEAR;
    -(-lambda * window_h.max(0.0)).exp_m1()
}

/// `P(Binomial(n, p) > k)`, computed as 1 − P(X ≤ k) with terms summed in log space so
/// large `n` neither overflows nor loses tiny probabilities.
pub fn binomial_tail_above(n: u32, p: f64, k: u32) -> f64 {
    if k >= n || p <= 0.0 {
        return 0.0;
    }
    if p >= 1.0 {
        return 1.0;
    }
    // For small p, 1 − CDF loses precision; sum the upper tail directly instead.
    let ln_p = p.ln();
    let ln_q = (-p).ln_1p();
    let mut ln_choose = 0.0_f64; // ln C(n, 0)
    let mut tail = 0.0;
    for i in 0..=n {
        if i > 0 {
            ln_choose += f64::from(n - i + 1).ln() - f64::from(i).ln();
        }
        if i > k {
            tail += (ln_choose + f64::from(i) * ln_p + f64::from(n - i) * ln_q).exp();
        }
    }
    tail.clamp(0.0, 1.0)
}

/// `P(more than k of the independent events with probabilities ps happen)`: the upper tail of
/// the Poisson-binomial distribution.
///
/// Exact, by a dynamic programme over the members that keeps `P(exactly j so far)` for
/// `j = 0..=k` and one absorbing cell for "more than k": O(len·k) time, O(k) space. The tail is
/// accumulated directly in the absorbing cell (never as `1 − CDF`), so probabilities far below
/// machine epsilon survive. Values outside 0–1 (and NaN) are clamped into it (NaN counts as 0).
pub fn poisson_binomial_tail_above(ps: &[f64], k: u32) -> f64 {
    let k = k as usize;
    if k >= ps.len() {
        return 0.0;
    }
    // dist[j] = P(exactly j failures among the members seen so far), j ≤ k; above = P(> k)
    let mut dist = vec![0.0_f64; k + 1];
    dist[0] = 1.0;
    let mut above = 0.0_f64;
    for &p in ps {
        let p = if p.is_nan() { 0.0 } else { p.clamp(0.0, 1.0) };
        let q = 1.0 - p;
        above += dist[k] * p;
        for j in (1..=k).rev() {
            dist[j] = dist[j] * q + dist[j - 1] * p;
        }
        dist[0] *= q;
    }
    above.clamp(0.0, 1.0)
}

/// The probability of losing data before redundancy is restored, every survivor at the flat
/// [`RiskModel::afr`] (the binomial model).
pub fn loss_probability(model: &RiskModel, e: &Exposure) -> f64 {
    let window = e.window_h.unwrap_or(model.open_window_h);
    let p = disk_failure_probability(model.afr, window);
    let p_disk = binomial_tail_above(e.surviving, p, e.redundancy_left);
    with_ure(model, e, p_disk)
}

/// The probability of losing data before redundancy is restored, each survivor at its own
/// annual failure rate.
///
/// `member_afr[i]` is survivor `i`'s rate ([`crate::health::drive::DriveRisk::afr`]); `None`, and
/// any survivor beyond the slice (`e.surviving` counts them), takes the flat
/// [`RiskModel::afr`]. Rates beyond `e.surviving` are ignored. With every rate equal this is
/// [`loss_probability`].
pub fn loss_probability_members(
    model: &RiskModel,
    e: &Exposure,
    member_afr: &[Option<f64>],
) -> f64 {
    let window = e.window_h.unwrap_or(model.open_window_h);
    let ps: Vec<f64> = (0..e.surviving as usize)
        .map(|i| {
            let afr = member_afr.get(i).copied().flatten().unwrap_or(model.afr);
            disk_failure_probability(afr, window)
        })
        .collect();
    let p_disk = poisson_binomial_tail_above(&ps, e.redundancy_left);
    with_ure(model, e, p_disk)
}

/// What the drive health says of one surviving member: its own annual failure rate, and whether
/// a condition of the drive (not its age alone) raised it above the flat rate.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MemberRate {
    /// [`crate::health::drive::DriveRisk::afr`].
    pub afr: f64,
    /// The drive counts in `members_at_risk`.
    pub at_risk: bool,
}

/// A set's rebuild risk from its survivors' own rates, and how many of them are at risk.
///
/// `rates` has one entry per survivor (`None`: no reading, the flat rate). When there are more
/// entries than `e.surviving` (the caller cannot tell which member is the one being rebuilt),
/// the highest rates are taken: the figure errs on the side of risk. Returns `None` when no
/// survivor has a reading: the caller keeps its flat-rate figure.
pub fn loss_with_members(
    model: &RiskModel,
    e: &Exposure,
    rates: &[Option<MemberRate>],
) -> Option<(f64, u32)> {
    if rates.iter().all(Option::is_none) {
        return None;
    }
    let mut afr: Vec<Option<f64>> = rates.iter().map(|r| r.map(|r| r.afr)).collect();
    let mut at_risk: Vec<bool> = rates.iter().map(|r| r.is_some_and(|r| r.at_risk)).collect();
    if afr.len() > e.surviving as usize {
        let mut order: Vec<usize> = (0..afr.len()).collect();
        let key = |i: usize| afr[i].unwrap_or(model.afr);
        order.sort_by(|&a, &b| key(b).total_cmp(&key(a)));
        order.truncate(e.surviving as usize);
        afr = order.iter().map(|&i| afr[i]).collect();
        at_risk = order.iter().map(|&i| at_risk[i]).collect();
    }
    let n = u32::try_from(at_risk.iter().filter(|&&r| r).count()).unwrap_or(u32::MAX);
    Some((loss_probability_members(model, e, &afr), n))
}

/// Adds the unrecoverable-read term when no redundancy is left.
fn with_ure(model: &RiskModel, e: &Exposure, p_disk: f64) -> f64 {
    if e.redundancy_left > 0 {
        return p_disk;
    }
    let bits = e.bytes_to_read.unwrap_or(0) as f64 * 8.0;
    let p_ure = -(-bits * model.ure_per_bit).exp_m1();
    1.0 - (1.0 - p_disk) * (1.0 - p_ure)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64, rel: f64) -> bool {
        (a - b).abs() <= rel * b.abs().max(1e-300)
    }

    #[test]
    fn single_disk_probability_by_hand() {
        // AFR 2 %, 24 h: λ = 0.02/8766 = 2.2815423e-6 /h; p = 1 − e^(−5.4757e-5) = 5.47554e-5
        let p = disk_failure_probability(0.02, 24.0);
        assert!(close(p, 5.475_55e-5, 1e-4), "{p}");
    }

    #[test]
    fn binomial_tail_by_hand() {
        // n=3, p=0.1: P(X>1) = 3·0.01·0.9 + 0.001 = 0.028
        assert!(close(binomial_tail_above(3, 0.1, 1), 0.028, 1e-12));
        // P(X>0) = 1 − 0.9³ = 0.271
        assert!(close(binomial_tail_above(3, 0.1, 0), 0.271, 1e-12));
        assert_eq!(binomial_tail_above(3, 0.1, 3), 0.0);
        assert_eq!(binomial_tail_above(3, 0.0, 0), 0.0);
        assert_eq!(binomial_tail_above(3, 1.0, 2), 1.0);
    }

    #[test]
    fn raid6_with_one_failure_rebuilding_for_a_day() {
        // RAID6 12+2 with one member failed: 13 survive, 1 parity left, 24 h rebuild left.
        // p = 5.47554e-5; P(X>1) = 1 − q^13 − 13 p q^12 ≈ C(13,2) p² = 78 · 2.99816e-9 = 2.3386e-7
        let r = loss_probability(
            &RiskModel::default(),
            &Exposure {
                surviving: 13,
                redundancy_left: 1,
                window_h: Some(24.0),
                bytes_to_read: Some(16_000_000_000_000),
            },
        );
        assert!(close(r, 2.3386e-7, 2e-3), "{r}");
    }

    #[test]
    fn no_redundancy_left_adds_the_ure_term() {
        // RAID6 with two members failed: 12 survive, 0 left, 24 h, 12 × 16 TB still to read.
        // P_disk = 1 − q^12 = 6.5688e-4; bits = 1.536e15 → P_ure = 1 − e^(−1.536) = 0.78475
        // P = 1 − (1 − 6.5688e-4)(1 − 0.78475) = 0.784891
        let r = loss_probability(
            &RiskModel::default(),
            &Exposure {
                surviving: 12,
                redundancy_left: 0,
                window_h: Some(24.0),
                bytes_to_read: Some(192_000_000_000_000),
            },
        );
        assert!(close(r, 0.784_891, 1e-4), "{r}");
    }

    #[test]
    fn no_rebuild_uses_the_open_window() {
        // raid1 with one of two failed: 1 survivor, 0 left, no rebuild, no URE bytes known.
        // p over 168 h = 1 − e^(−0.02·168/8766) = 3.83217e-4
        let r = loss_probability(
            &RiskModel::default(),
            &Exposure {
                surviving: 1,
                redundancy_left: 0,
                window_h: None,
                bytes_to_read: None,
            },
        );
        assert!(close(r, 3.832_17e-4, 1e-4), "{r}");
    }
    #[test]
    fn poisson_binomial_by_hand() {
        // p = 0.1, 0.2, 0.3: P(3) = 0.006; P(2) = 0.1·0.2·0.7 + 0.1·0.8·0.3 + 0.9·0.2·0.3 = 0.092
        assert!(close(
            poisson_binomial_tail_above(&[0.1, 0.2, 0.3], 1),
            0.098,
            1e-12
        ));
        // P(> 0) = 1 − 0.9·0.8·0.7 = 0.496
        assert!(close(
            poisson_binomial_tail_above(&[0.1, 0.2, 0.3], 0),
            0.496,
            1e-12
        ));
        assert!(close(
            poisson_binomial_tail_above(&[0.1, 0.2, 0.3], 2),
            0.006,
            1e-12
        ));
        assert_eq!(poisson_binomial_tail_above(&[0.1, 0.2, 0.3], 3), 0.0);
        assert_eq!(poisson_binomial_tail_above(&[], 0), 0.0);
        assert_eq!(poisson_binomial_tail_above(&[1.0, 1.0], 1), 1.0);
        // out-of-range inputs are clamped, NaN counts as 0
        assert_eq!(poisson_binomial_tail_above(&[f64::NAN, 2.0, -1.0], 0), 1.0);
        assert_eq!(poisson_binomial_tail_above(&[f64::NAN, -1.0], 0), 0.0);
    }

    #[test]
    fn poisson_binomial_with_equal_rates_is_the_binomial() {
        for n in [1_u32, 2, 3, 5, 12, 13, 24, 60] {
            for p in [1e-9, 5.475_55e-5, 1e-3, 0.05, 0.3, 0.5, 0.9] {
                for k in 0..=n.min(4) {
                    let b = binomial_tail_above(n, p, k);
                    let pb = poisson_binomial_tail_above(&vec![p; n as usize], k);
                    assert!(close(pb, b, 1e-9), "n={n} p={p} k={k}: {pb} vs {b}");
                }
            }
        }
    }

    #[test]
    fn poisson_binomial_keeps_tiny_tails() {
        // 13 members at p = 1e-12, more than 1 failing: C(13,2)·1e-24 = 7.8e-23 (1 − CDF is 0)
        let t = poisson_binomial_tail_above(&[1e-12; 13], 1);
        assert!(close(t, 7.8e-23, 1e-9), "{t}");
    }

    #[test]
    fn members_at_the_flat_rate_give_the_binomial_answer() {
        let model = RiskModel::default();
        for e in [
            Exposure {
                surviving: 13,
                redundancy_left: 1,
                window_h: Some(24.0),
                bytes_to_read: Some(16_000_000_000_000),
            },
            Exposure {
                surviving: 12,
                redundancy_left: 0,
                window_h: Some(24.0),
                bytes_to_read: Some(192_000_000_000_000),
            },
            Exposure {
                surviving: 1,
                redundancy_left: 0,
                window_h: None,
                bytes_to_read: None,
            },
        ] {
            let flat = loss_probability(&model, &e);
            // no member known, all known at the flat rate, a slice too short or too long
            for rates in [
                vec![],
                vec![Some(model.afr); e.surviving as usize],
                vec![None; 1],
                vec![Some(model.afr); e.surviving as usize + 5],
            ] {
                let r = loss_probability_members(&model, &e, &rates);
                assert!(close(r, flat, 1e-9), "{e:?} {rates:?}: {r} vs {flat}");
            }
        }
    }

    #[test]
    fn one_bad_member_raises_the_risk_by_hand() {
        // RAID6 12+2 with one member failed, 24 h: 12 survivors at p = 5.47554e-5 and one at
        // 16 × the rate, p' = 1 − e^(−16·0.02·24/8766) = 8.75729e-4.
        // P(X > 1) ≈ C(12,2)·p² + 12·p·p' = 66·2.99817e-9 + 12·4.79509e-8 = 7.7329e-7;
        // exactly (1 − P(0) − P(1), 30 digits) 7.72872e-7.
        let model = RiskModel::default();
        let e = Exposure {
            surviving: 13,
            redundancy_left: 1,
            window_h: Some(24.0),
            bytes_to_read: None,
        };
        let mut rates = vec![None; 12];
        rates.push(Some(16.0 * model.afr));
        let r = loss_probability_members(&model, &e, &rates);
        assert!(close(r, 7.728_72e-7, 1e-5), "{r}");
        assert!(r > 3.0 * loss_probability(&model, &e));
    }
}
