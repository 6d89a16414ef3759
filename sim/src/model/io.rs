//! One device's second: the demand on it, its service model, and the kernel counters that
//! result.

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
    pub(super) fn consistent(mut self) -> Self {
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

pub(super) fn sect_per(sect: u64, ios: u64) -> u64 {
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
