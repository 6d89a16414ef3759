//! Collectors: one per domain, each reading its own sources, keeping its own per-second state and
//! writing its own report lines.
//!
//! The [`Scheduler`](crate::scheduler::Scheduler) calls every collector's
//! [`Collector::sample`] once per sample interval and [`Collector::report`] once per report
//! interval, in the order it was given them, which is the order of their lines in the report:
//! first the host's own ([`core`]: block devices, interfaces, CPU/PSI/memory), then the storage
//! health ones ([`storage`]). A collector never calls up: it gets what it needs from the
//! scheduler in a [`SampleCx`] or [`ReportCx`], and hands back lines, events and counted errors.
//!
//! A new metric source is a new file here implementing [`Collector`] and one line in [`core`]
//! (or [`storage`]); nothing else changes. Two provided methods let a collector show up
//! elsewhere when it has something to say: [`Collector::watched`] (the `agent` line's counts)
//! and [`Collector::live`] (the rows `top` draws).
//!
//! A source that is absent on the node (no md module, no ZFS, no multipath) leaves its collector
//! silent; one that is present but broken is counted in [`SourceErrors`] under the source's name
//! (logged once per report interval, reported in the `agent_source` lines) and the rest of the
//! sample goes on.

pub mod book;
pub mod disk;
pub mod drive;
pub mod fs;
pub mod host;
pub mod hwraid;
pub mod jobs;
pub mod md;
pub mod mpath;
pub mod net;
pub mod zpool;

use std::fmt::Display;

use storwatch_wire::lp::LineWriter;

use crate::event::Event;
use crate::root::Root;

pub use disk::{DiskCollector, DiskNow};
pub use host::HostCollector;
pub use hwraid::VdNow;
pub use jobs::{JobNow, JobsNow};
pub use md::MdNow;
pub use mpath::MpathNow;
pub use net::{NetCollector, NetNow};
pub use zpool::PoolNow;

/// What a collector gets for one sample.
pub struct SampleCx<'a> {
    /// Where /proc and /sys are.
    pub root: &'a Root,
    /// Monotonic seconds since the agent started (for windows, rates and ETAs).
    pub now_s: f64,
    /// Hundredths of a second since the previous sample, from `/proc/uptime` as sysstat takes
    /// it (the monotonic clock when uptime is unreadable); `None` on the first sample and when
    /// time stood still or went back, where no rate can be computed.
    pub itv_cs: Option<u64>,
    /// `/proc/uptime` at this sample, hundredths of a second (0 when unreadable).
    pub uptime_cs: u64,
    /// State changes seen in this sample are appended here.
    pub events: &'a mut Vec<Event>,
    /// Failures of sources, counted by source name.
    pub errors: &'a mut SourceErrors,
}

/// What a collector gets for one report.
pub struct ReportCx<'a> {
    /// Where /proc and /sys are.
    pub root: &'a Root,
    /// The report's timestamp: the end of the interval, nanoseconds since the epoch.
    pub ts_ns: i64,
    /// Monotonic seconds since the agent started.
    pub now_s: f64,
    /// `/proc/uptime` at the last sample, hundredths of a second.
    pub uptime_cs: u64,
    /// Failures of sources, counted by source name.
    pub errors: &'a mut SourceErrors,
}

/// One domain of what the agent watches.
pub trait Collector: Send {
    /// The names of the sources this collector counts errors under, in the order of their
    /// `agent_source` lines (`diskstats`, `sysblock`; `md`; …).
    fn sources(&self) -> &'static [&'static str];

    /// Takes one sample. Must not block for long: anything slow (a `zpool` command) runs on the
    /// collector's own thread and is picked up here.
    fn sample(&mut self, cx: &mut SampleCx<'_>);

    /// Writes this report interval's lines and starts a new interval.
    fn report(&mut self, w: &mut LineWriter, cx: &mut ReportCx<'_>);

    /// Adds what this collector tracks to the `agent` line's counts. Most track nothing
    /// counted there.
    fn watched(&self, _w: &mut Watched) {}

    /// Adds this collector's rows from its last sample to `live` (what `top` draws). Most have
    /// no pane.
    fn live(&self, _live: &mut Live) {}

    /// The collector's name in the `agent` line's `<name>_cpu_us` field (its own cost per
    /// report): by default from its first source ([`name_of`]).
    fn name(&self) -> &'static str {
        name_of(self.sources())
    }
}

/// A collector's name from its sources: the domain it writes (`disk`, `net`, `host`, `md`,
/// `mpath`, `zpool`, `drive`, `hwraid`, `jobs`, `fs`); another collector goes by its first
/// source.
pub fn name_of(sources: &[&'static str]) -> &'static str {
    match sources.first().copied() {
        Some("diskstats") => "disk",
        Some("netdev") => "net",
        Some("stat") => "host",
        Some("smartctl") => "drive",
        Some("storcli") => "hwraid",
        Some("cgroup") => "jobs",
        Some("mountinfo") => "fs",
        Some(other) => other,
        None => "collector",
    }
}

/// What the collectors track, for the `agent` line: the sum over all of them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Watched {
    /// Block devices (`devices`).
    pub devices: u64,
    /// Network interfaces (`interfaces`).
    pub interfaces: u64,
}

/// The last sample as `top` shows it, one pane per kind of row, filled by every collector's
/// [`Collector::live`] in turn. A pane for another domain is one more field of its row type
/// here, filled by that collector and drawn by [`crate::top`]; the scheduler passes it through
/// without knowing what is in it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Live {
    /// Per-second device values (the iostat -x pane), in no particular order.
    pub disks: Vec<DiskNow>,
    /// Per-second interface values (the sar -n DEV pane), in no particular order.
    pub nets: Vec<NetNow>,
    /// MD arrays as last polled (the health pane), by name.
    pub arrays: Vec<MdNow>,
    /// Multipath maps as last polled (the health pane), by name.
    pub maps: Vec<MpathNow>,
    /// Pools as last read (the health pane), by name.
    pub pools: Vec<PoolNow>,
    /// Batch jobs as last read (the jobs pane); `None` on a node without job cgroups read.
    pub jobs: Option<JobsNow>,
    /// Hardware RAID virtual drives as last read (the health pane), by controller and number.
    pub raid_vds: Vec<VdNow>,
}

impl Live {
    /// Empties every pane, keeping the allocations for the next screen.
    pub fn clear(&mut self) {
        self.disks.clear();
        self.nets.clear();
        self.arrays.clear();
        self.maps.clear();
        self.pools.clear();
        self.raid_vds.clear();
        self.jobs = None;
    }
}

/// Rounds a rate to 3 decimals: finer digits are noise from the interval's jitter and would only
/// lengthen every line (Display then prints the shortest exact form, e.g. `3.184`).
pub(crate) fn r3(v: f64) -> f64 {
    (v * 1000.0).round() / 1000.0
}

/// How long an error that keeps coming back unchanged stays out of the log after it was logged.
const REPEAT_LOG_AFTER: std::time::Duration = std::time::Duration::from_secs(3600);

/// Error counts of one source.
#[derive(Debug, Clone)]
struct ErrorCount {
    name: &'static str,
    interval: u64,
    total: u64,
    logged_this_interval: bool,
    /// The last error logged, and when.
    last_logged: Option<(String, std::time::Instant)>,
    /// Report intervals whose error was that one again and was not logged.
    repeats: u64,
}

/// Errors of every source, counted per report interval and since start.
#[derive(Debug, Clone, Default)]
pub struct SourceErrors {
    counts: Vec<ErrorCount>,
}

impl SourceErrors {
    /// Counts for `names`, in that order (the order of the `agent_source` lines).
    pub fn new<'a>(names: impl IntoIterator<Item = &'a &'static str>) -> Self {
        let mut e = Self::default();
        for n in names {
            e.register(n);
        }
        e
    }

    /// Adds a source (once; a name already known keeps its place).
    pub fn register(&mut self, name: &'static str) {
        if !self.counts.iter().any(|c| c.name == name) {
            self.counts.push(ErrorCount {
                name,
                interval: 0,
                total: 0,
                logged_this_interval: false,
                last_logged: None,
                repeats: 0,
            });
        }
    }

    /// Counts one failure of `source`. The first of a report interval is logged; the count
    /// carries the rest, so a broken file read every second does not flood the journal. An
    /// error that is the one logged last for the source is logged again only after
    /// [`REPEAT_LOG_AFTER`], with the number of intervals it came back in: a node without
    /// `dmsetup` or `zpool` logs it once an hour, not every half minute.
    pub fn count(&mut self, source: &'static str, err: &dyn Display) {
        self.count_at(source, err, std::time::Instant::now());
    }

    /// [`Self::count`] at `now`; `Some(repeats)` when the error was logged, with the report
    /// intervals it had come back in unlogged.
    fn count_at(
        &mut self,
        source: &'static str,
        err: &dyn Display,
        now: std::time::Instant,
    ) -> Option<u64> {
        if !self.counts.iter().any(|c| c.name == source) {
            self.register(source);
        }
        let c = self.counts.iter_mut().find(|c| c.name == source)?;
        c.interval += 1;
        c.total += 1;
        if c.logged_this_interval {
            return None;
        }
        c.logged_this_interval = true;
        let text = err.to_string();
        match &c.last_logged {
            Some((last, at))
                if *last == text && now.saturating_duration_since(*at) < REPEAT_LOG_AFTER =>
            {
                c.repeats += 1;
                None
            }
            last => {
                let same = last.as_ref().is_some_and(|(l, _)| *l == text);
                let repeats = if same { c.repeats } else { 0 };
                if repeats > 0 {
                    tracing::warn!(
                        source = %c.name,
                        "{text} (again in {repeats} report intervals since it was last logged)"
                    );
                } else {
                    tracing::warn!(source = %c.name, "{text}");
                }
                c.last_logged = Some((text, now));
                c.repeats = 0;
                Some(repeats)
            }
        }
    }

    /// Errors of all sources in the current report interval.
    pub fn interval_sum(&self) -> u64 {
        self.counts.iter().map(|c| c.interval).sum()
    }

    /// `(source, errors this interval, errors since start)` of every source that ever failed,
    /// in registration order; starts a new interval.
    pub fn take_interval(&mut self) -> Vec<(&'static str, u64, u64)> {
        let mut out = Vec::new();
        for c in &mut self.counts {
            if c.total > 0 {
                out.push((c.name, c.interval, c.total));
            }
            c.interval = 0;
            c.logged_this_interval = false;
        }
        out
    }

    /// Errors counted per source since start: `(source, total)`.
    pub fn totals(&self) -> Vec<(String, u64)> {
        self.counts
            .iter()
            .map(|c| (c.name.to_owned(), c.total))
            .collect()
    }
}

/// The per-device maps of the 1 s loop (block devices, interfaces), keyed by the kernel's name.
///
/// Hashed with FxHash (rustc's own hasher) instead of SipHash: each sample looks up every
/// device, and SipHash cost ~7,500 instructions a sample on a 250-disk server for keys that
/// come from the kernel, not from a client that could choose colliding names.
pub(crate) type NameMap<V> =
    std::collections::HashMap<String, V, std::hash::BuildHasherDefault<NameHasher>>;

/// FxHash: a rotate, xor and multiply per 8 bytes of key.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct NameHasher(u64);

impl NameHasher {
    fn add(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(0x517c_c1b7_2722_0a95);
    }
}

impl std::hash::Hasher for NameHasher {
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut word = [0u8; 8];
            if let Some(w) = word.get_mut(..chunk.len()) {
                w.copy_from_slice(chunk);
            }
            self.add(u64::from_le_bytes(word));
        }
    }

    fn write_u8(&mut self, i: u8) {
        self.add(u64::from(i));
    }

    /// The multiply leaves the well-mixed bits at the top, and hashbrown takes the bucket from
    /// the bottom: rotated, as rustc-hash 2 does, or every `sd*` name lands in a few buckets.
    fn finish(&self) -> u64 {
        self.0.rotate_left(26)
    }
}

#[cfg(test)]
mod name_map_tests {
    use super::NameMap;

    #[test]
    fn names_that_share_a_prefix_or_length_are_distinct_keys() {
        let mut m: NameMap<usize> = NameMap::default();
        let names: Vec<String> = (0..2000)
            .map(storwatch_sim::scenario::sd_name)
            .chain(
                [
                    "dm-1",
                    "dm-10",
                    "md127",
                    "nvme0n1",
                    "nvme0n1p1",
                    "sdaaaaaaaaa",
                ]
                .map(String::from),
            )
            .collect();
        for (i, n) in names.iter().enumerate() {
            m.insert(n.clone(), i);
        }
        assert_eq!(m.len(), names.len());
        for (i, n) in names.iter().enumerate() {
            assert_eq!(m.get(n.as_str()), Some(&i), "{n}");
        }
        assert_eq!(m.get("sd"), None);
    }
}

#[cfg(test)]
mod name_hash_spread_tests {
    use super::NameHasher;
    use std::hash::BuildHasher;

    /// hashbrown picks a key's bucket from the hash's low bits: a hasher whose low bits depend
    /// only on the first bytes of the key puts every `sd*` of a disk server in a handful of
    /// buckets, and each lookup compares against dozens of names.
    #[test]
    fn the_low_bits_spread_the_names_of_a_disk_server() {
        let names: Vec<String> = (0..248)
            .map(storwatch_sim::scenario::sd_name)
            .chain((0..40).map(|i| format!("dm-{i}")))
            .chain((0..8).map(|i| format!("md{i}")))
            .collect();
        let hasher = std::hash::BuildHasherDefault::<NameHasher>::default();
        for bits in [8u32, 9, 10] {
            let mask = (1u64 << bits) - 1;
            let buckets: std::collections::BTreeSet<u64> = names
                .iter()
                .map(|n| hasher.hash_one(n.as_str()) & mask)
                .collect();
            // Uniform hashing puts 296 names in ~175 of 256 buckets, ~225 of 512, ~255 of 1024.
            let expected = (1u64 << bits) as f64
                * (1.0 - (1.0 - 1.0 / (1u64 << bits) as f64).powi(names.len() as i32));
            assert!(
                buckets.len() as f64 >= 0.85 * expected,
                "{} distinct buckets of {} for {} names (uniform: {expected:.0})",
                buckets.len(),
                1u64 << bits,
                names.len()
            );
        }
    }
}

#[cfg(test)]
mod source_error_tests {
    use super::{SourceErrors, REPEAT_LOG_AFTER};
    use std::time::{Duration, Instant};

    #[test]
    fn an_unchanged_error_is_logged_once_an_hour_and_every_error_is_counted() {
        let mut e = SourceErrors::new(&["mpath"]);
        let t0 = Instant::now();
        let failing = "dmsetup: exit status 1: /dev/mapper/control: open failed";
        // every 30 s for an hour, one per report interval
        let mut logged = Vec::new();
        for i in 0..120u64 {
            if let Some(repeats) = e.count_at("mpath", &failing, t0 + Duration::from_secs(30 * i)) {
                logged.push((i, repeats));
            }
            e.take_interval();
        }
        assert_eq!(logged, vec![(0, 0)], "logged once in the hour");
        let now = t0 + REPEAT_LOG_AFTER + Duration::from_secs(1);
        assert_eq!(e.count_at("mpath", &failing, now), Some(119));
        // another error in the same interval: counted, not logged
        let other = "dmsetup: timed out after 5 s";
        assert_eq!(e.count_at("mpath", &other, now), None);
        e.take_interval();
        // a different error is logged at once, and so is the first one when it comes back
        assert_eq!(e.count_at("mpath", &other, now), Some(0));
        e.take_interval();
        assert_eq!(e.count_at("mpath", &failing, now), Some(0));
        assert_eq!(e.totals(), vec![("mpath".to_owned(), 124)]);
    }
}
