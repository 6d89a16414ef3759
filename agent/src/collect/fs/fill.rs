//! The fill rate of a filesystem: its used bytes over the fill window, thinned, and the
//! least-squares slope through them.

use std::collections::VecDeque;

use super::FsReading;

/// Used bytes over the fill window, for one filesystem.
#[derive(Debug, Default)]
pub(super) struct History {
    pub(super) devt: (u32, u32),
    pub(super) size_bytes: u64,
    pub(super) points: VecDeque<(f64, f64)>,
}

impl History {
    /// Adds a reading at `t` seconds and returns the fill rate (bytes/s) and the span it covers,
    /// once the span is long enough.
    pub(super) fn add(&mut self, t: f64, r: &FsReading, window_s: f64) -> Option<(f64, f64)> {
        let size = r.stat.size_bytes();
        if self.devt != r.devt || self.size_bytes != size {
            self.devt = r.devt;
            self.size_bytes = size;
            self.points.clear();
        }
        let used = r.stat.used_bytes() as f64;
        while self.points.front().is_some_and(|p| p.0 < t - window_s) {
            self.points.pop_front();
        }
        // Keep about 60 points over the window; the latest reading always takes part.
        if self
            .points
            .back()
            .is_none_or(|p| t - p.0 >= window_s / 60.0)
        {
            self.points.push_back((t, used));
        }
        let mut pts: Vec<(f64, f64)> = self.points.iter().copied().collect();
        if pts.last().is_some_and(|p| p.0 < t) {
            pts.push((t, used));
        }
        let span = t - pts.first()?.0;
        if pts.len() < 2 || span < window_s / 12.0 {
            return None;
        }
        Some((slope(&pts)?, span))
    }
}

/// Least-squares slope of `pts` (x, y).
pub(super) fn slope(pts: &[(f64, f64)]) -> Option<f64> {
    let n = pts.len() as f64;
    let mx = pts.iter().map(|p| p.0).sum::<f64>() / n;
    let my = pts.iter().map(|p| p.1).sum::<f64>() / n;
    let sxx: f64 = pts.iter().map(|p| (p.0 - mx) * (p.0 - mx)).sum();
    let sxy: f64 = pts.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    (sxx > 0.0).then(|| sxy / sxx)
}
