//! ZFS pools: `zpool status` (text or JSON), `zpool list -Hp` and
//! `/proc/spl/kstat/zfs/<pool>/state`.
//!
//! Three views of the same pools, cheapest first:
//!
//! * `/proc/spl/kstat/zfs/<pool>/state` — one word (`ONLINE`, `DEGRADED`, `SUSPENDED`, …) that
//!   the SPL module keeps current; reading it costs nothing, so it is read every sample
//!   ([`parse_state`], [`read_states`]). Its directory existing is how ZFS is detected.
//! * `zpool status` — pool and per-vdev state, read/write/checksum error counters, the scan
//!   (scrub, resilver, dRAID sequential rebuild) and its progress. Text for every version
//!   ([`status::parse`]; see its header for the formats) and, on OpenZFS ≥ 2.3,
//!   `zpool status -j --json-int` ([`json::parse`]). Both give the same [`ZpoolStatus`].
//! * `zpool list -Hp` — size, allocation, fragmentation ([`list::parse`]).
//!
//! The commands can hang for minutes on a pool with a dead device: they are never run from the
//! sampling loop (see `collect::zpool`). Reference: `zpool-status(8)`, `zpool-list(8)`,
//! `cmd/zpool/zpool_main.c` in openzfs/zfs.
//!
//! Units: bytes, bytes per second, seconds, percent (0–100). Sizes and counters that the tool
//! printed with a suffix (`1.24T`, `1.05K`; always powers of 1024) are converted and so carry
//! the tool's three significant digits; with `-p`/`--json-int` they are exact.

use crate::root::JoinSized;
use std::fmt;
use std::path::Path;

use super::{ParseError, SourceError};
use crate::root::{list_subdirs, read_value_optional, Root};

pub mod json;
pub mod list;
mod numbers;
pub mod status;

pub use list::PoolList;
pub use numbers::parse_size;
use numbers::split_digits;
pub(crate) use numbers::{parse_duration, parse_percent, parse_rate};

/// Everything one `zpool status` printed.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ZpoolStatus {
    /// Pools in the order printed.
    pub pools: Vec<Pool>,
}

/// One pool.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Pool {
    /// Pool name (empty only for a fragment without a `pool:` line or a config root).
    pub name: String,
    /// Pool GUID (JSON `pool_guid`, text `id:`); above `i64::MAX` for half of all pools.
    pub guid: Option<u64>,
    /// `state:` as printed: ONLINE, DEGRADED, FAULTED, UNAVAIL, SUSPENDED, …
    pub state: String,
    /// `status:` text, continuation lines joined with single spaces.
    pub status: Option<String>,
    /// `action:` text, joined likewise.
    pub action: Option<String>,
    /// `see:` URL of the ZFS message.
    pub see: Option<String>,
    /// Scans, in the order printed: the pool's scrub/resilver, then one per dRAID rebuild.
    /// Empty when none was ever requested.
    pub scans: Vec<Scan>,
    /// The config: the root vdev (named after the pool) first, then section nodes (`logs`,
    /// `cache`, `spares`, `special`, `dedup`) holding their vdevs.
    pub config: Vec<Vdev>,
    /// The `errors:` line (text after the key).
    pub errors: Option<String>,
    /// Data errors: 0 for "No known data errors", N for "N data errors", the number of listed
    /// files for "Permanent errors …", JSON `error_count`.
    pub data_errors: Option<u64>,
    /// Files listed after "Permanent errors have been detected in the following files:".
    pub error_files: Vec<String>,
}

impl Pool {
    /// The root vdev (its children are the normal-class top-level vdevs).
    pub fn root(&self) -> Option<&Vdev> {
        self.config.iter().find(|v| v.kind == VdevKind::Root)
    }

    /// The section node of `kind` (`Logs`, `Cache`, `Spares`, `Special`, `Dedup`).
    pub fn section(&self, kind: VdevKind) -> Option<&Vdev> {
        self.config.iter().find(|v| v.kind == kind)
    }

    /// Top-level vdevs that hold pool data: normal, special and dedup classes. Losing any of
    /// them loses the pool; log and cache devices and spares do not hold pool data.
    pub fn data_vdevs(&self) -> impl Iterator<Item = &Vdev> {
        self.config
            .iter()
            .filter(|v| matches!(v.kind, VdevKind::Root | VdevKind::Special | VdevKind::Dedup))
            .flat_map(|v| v.children.iter())
    }

    /// The scan the pool-level figures describe: a running rebuild or resilver first, then a
    /// running scrub, then the first printed.
    pub fn primary_scan(&self) -> Option<&Scan> {
        let running = |kinds: &[ScanKind]| {
            self.scans
                .iter()
                .find(|s| s.state == ScanState::InProgress && kinds.contains(&s.kind))
        };
        running(&[ScanKind::Rebuild, ScanKind::Resilver])
            .or_else(|| running(&[ScanKind::Scrub, ScanKind::ErrorScrub]))
            .or_else(|| self.scans.first())
    }
}

/// What a vdev is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub enum VdevKind {
    /// The pool's root vdev.
    Root,
    /// RAID-Z with this many parity disks.
    Raidz(u8),
    /// dRAID with this many parity disks.
    Draid(u8),
    /// N-way mirror.
    Mirror,
    /// A block device.
    #[default]
    Disk,
    /// A file used as a vdev.
    File,
    /// `spare-N`: a member and the hot spare standing in for it.
    Spare,
    /// `replacing-N`: a member and its replacement while the resilver runs.
    Replacing,
    /// A dRAID distributed spare (`draid1-0-0`, JSON type `dspare`).
    DistributedSpare,
    /// Removed top-level vdev kept for its remapped blocks.
    Indirect,
    /// Section node: separate intent-log devices.
    Logs,
    /// Section node: L2ARC cache devices.
    Cache,
    /// Section node: hot spares.
    Spares,
    /// Section node: special allocation class.
    Special,
    /// Section node: dedup allocation class.
    Dedup,
    /// A type this parser does not know (a newer OpenZFS).
    Other,
}

impl VdevKind {
    /// Redundancy the vdev provides by design: parity for RAID-Z/dRAID, copies − 1 for a
    /// mirror of `children` members; 0 for a single disk or file.
    pub fn design_redundancy(self, children: usize) -> u32 {
        match self {
            Self::Raidz(p) | Self::Draid(p) => u32::from(p),
            Self::Mirror => u32::try_from(children.saturating_sub(1)).unwrap_or(u32::MAX),
            _ => 0,
        }
    }

    /// True for the section nodes that group vdevs by class.
    pub fn is_section(self) -> bool {
        matches!(
            self,
            Self::Logs | Self::Cache | Self::Spares | Self::Special | Self::Dedup
        )
    }

    /// The section a word introduces in the text config (`logs`, `cache`, …).
    pub(crate) fn section_from_word(word: &str) -> Option<Self> {
        Some(match word {
            "logs" => Self::Logs,
            "cache" => Self::Cache,
            "spares" => Self::Spares,
            "special" => Self::Special,
            "dedup" => Self::Dedup,
            _ => return None,
        })
    }

    /// The kind a vdev's printed name implies (`raidz2-0`, `draid1:8d:12c:2s-0`, `mirror-1`,
    /// `spare-3`, `replacing-0`, `draid2-0-1`, `/vdevs/f1`, otherwise a disk).
    pub fn from_name(name: &str) -> Self {
        fn indexed<'a>(name: &'a str, base: &str) -> Option<&'a str> {
            let rest = name.strip_prefix(base)?;
            if rest.is_empty() {
                return Some(rest);
            }
            let idx = rest.strip_prefix('-')?;
            (!idx.is_empty() && idx.bytes().all(|b| b.is_ascii_digit())).then_some(rest)
        }
        if indexed(name, "mirror").is_some() {
            return Self::Mirror;
        }
        if indexed(name, "spare").is_some() {
            return Self::Spare;
        }
        if indexed(name, "replacing").is_some() {
            return Self::Replacing;
        }
        if indexed(name, "indirect").is_some() {
            return Self::Indirect;
        }
        if let Some(rest) = name.strip_prefix("raidz") {
            // "raidz" alone (old Solaris) is single parity; "raidz2-0" double.
            let (digits, tail) = split_digits(rest);
            let tail_ok = tail.is_empty()
                || tail
                    .strip_prefix('-')
                    .is_some_and(|t| !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()));
            if tail_ok {
                let parity = if digits.is_empty() {
                    Some(1)
                } else {
                    digits.parse().ok()
                };
                if let Some(p) = parity.filter(|p| (1..=3).contains(p)) {
                    return Self::Raidz(p);
                }
            }
        }
        if let Some(rest) = name.strip_prefix("draid") {
            let (digits, tail) = split_digits(rest);
            if let Ok(p) = digits.parse::<u8>() {
                if tail.starts_with(':') {
                    return Self::Draid(p);
                }
                // draid<parity>-<vdev>-<spare>: a distributed spare.
                let parts: Vec<&str> = tail.split('-').collect();
                if parts.len() == 3
                    && parts[0].is_empty()
                    && parts[1..]
                        .iter()
                        .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
                {
                    return Self::DistributedSpare;
                }
            }
        }
        if name.starts_with('/') && !name.starts_with("/dev/") {
            return Self::File;
        }
        Self::Disk
    }

    /// The kind for a JSON `vdev_type`, with the name for the parity of RAID-Z/dRAID.
    pub(crate) fn from_json_type(vdev_type: &str, name: &str, nparity: Option<u64>) -> Self {
        let parity = || {
            nparity
                .and_then(|p| u8::try_from(p).ok())
                .or(match Self::from_name(name) {
                    Self::Raidz(p) | Self::Draid(p) => Some(p),
                    _ => None,
                })
        };
        match vdev_type {
            "root" => Self::Root,
            "mirror" => Self::Mirror,
            "raidz" => Self::Raidz(parity().unwrap_or(1)),
            "draid" => Self::Draid(parity().unwrap_or(1)),
            "disk" => Self::Disk,
            "file" => Self::File,
            "spare" => Self::Spare,
            "replacing" => Self::Replacing,
            "dspare" => Self::DistributedSpare,
            "indirect" => Self::Indirect,
            _ => Self::Other,
        }
    }
}

impl fmt::Display for VdevKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Root => f.write_str("root"),
            Self::Raidz(p) => write!(f, "raidz{p}"),
            Self::Draid(p) => write!(f, "draid{p}"),
            Self::Mirror => f.write_str("mirror"),
            Self::Disk => f.write_str("disk"),
            Self::File => f.write_str("file"),
            Self::Spare => f.write_str("spare"),
            Self::Replacing => f.write_str("replacing"),
            Self::DistributedSpare => f.write_str("dspare"),
            Self::Indirect => f.write_str("indirect"),
            Self::Logs => f.write_str("logs"),
            Self::Cache => f.write_str("cache"),
            Self::Spares => f.write_str("spares"),
            Self::Special => f.write_str("special"),
            Self::Dedup => f.write_str("dedup"),
            Self::Other => f.write_str("other"),
        }
    }
}

/// One vdev in the config tree.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Vdev {
    /// Name as printed: pool name, `raidz2-0`, a device name or path, or a GUID for a missing
    /// device.
    pub name: String,
    /// What it is.
    pub kind: VdevKind,
    /// State as printed: ONLINE, DEGRADED, FAULTED, OFFLINE, UNAVAIL, REMOVED; INUSE/AVAIL for
    /// spares; empty for section nodes.
    pub state: String,
    /// READ errors since the last `zpool clear` (None for spares and section nodes).
    pub read_errors: Option<u64>,
    /// WRITE errors.
    pub write_errors: Option<u64>,
    /// CKSUM errors.
    pub cksum_errors: Option<u64>,
    /// Text after the counters: `(resilvering)`, `was /dev/…`, `too many errors`, `cannot
    /// open`, `currently in use`; JSON `aux`.
    pub note: Option<String>,
    /// The path a missing device had (`was /dev/…`).
    pub was: Option<String>,
    /// The device is the target of a running resilver: its data is not yet whole.
    pub resilvering: bool,
    /// `(awaiting resilver)`: the device's resilver is deferred until the running one ends; its
    /// data is not yet whole either.
    pub awaiting_resilver: bool,
    /// `zpool status -c` script columns, (column, value).
    pub extra: Vec<(String, String)>,
    /// Allocated bytes (JSON `alloc_space`).
    pub alloc_bytes: Option<u64>,
    /// Capacity in bytes (JSON `total_space`).
    pub size_bytes: Option<u64>,
    /// GUID (JSON).
    pub guid: Option<u64>,
    /// Child vdevs, in the order printed.
    pub children: Vec<Vdev>,
}

/// What a scan does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ScanKind {
    /// Read and verify every block.
    Scrub,
    /// Healing resilver: rebuild a replaced or returning device from the block tree.
    Resilver,
    /// dRAID sequential rebuild onto a (distributed) spare (`resilver (draid1:…-0)`).
    Rebuild,
    /// Scrub of blocks with known errors only (`zpool scrub -e`).
    ErrorScrub,
}

impl ScanKind {
    /// Lower-case name: scrub, resilver, rebuild, error_scrub.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Scrub => "scrub",
            Self::Resilver => "resilver",
            Self::Rebuild => "rebuild",
            Self::ErrorScrub => "error_scrub",
        }
    }
}

/// Where a scan stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ScanState {
    /// Running.
    InProgress,
    /// Paused by `zpool scrub -p`.
    Paused,
    /// Completed.
    Finished,
    /// Stopped before completion (`zpool scrub -s`, a device detached).
    Canceled,
}

impl ScanState {
    /// Lower-case name: in_progress, paused, finished, canceled.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::InProgress => "in_progress",
            Self::Paused => "paused",
            Self::Finished => "finished",
            Self::Canceled => "canceled",
        }
    }
}

/// One scan line with its progress lines.
#[derive(Debug, Clone, PartialEq)]
pub struct Scan {
    /// Scrub, resilver, rebuild.
    pub kind: ScanKind,
    /// Running, finished, …
    pub state: ScanState,
    /// The top-level vdev a dRAID rebuild works on (`draid1:8d:12c:2s-0`).
    pub vdev: Option<String>,
    /// Bytes of metadata scanned (examined); "scanned" in the text.
    pub examined_bytes: Option<u64>,
    /// Bytes whose I/O was issued: the real progress since OpenZFS 0.8.
    pub issued_bytes: Option<u64>,
    /// Bytes the scan has to cover.
    pub total_bytes: Option<u64>,
    /// Bytes repaired (scrub) or resilvered/rebuilt.
    pub processed_bytes: Option<u64>,
    /// The tool's rate, bytes/s (issue rate where printed, else scan rate).
    pub rate_bps: Option<f64>,
    /// The tool's percentage done, as printed (text); from the exact byte counts (JSON, which
    /// prints none).
    pub percent: Option<f64>,
    /// The tool's "to go", seconds (known to be wrong on dRAID; see `health::zpool`).
    pub tool_eta_s: Option<u64>,
    /// How long a finished scan took, seconds.
    pub duration_s: Option<u64>,
    /// Errors the scan found.
    pub errors: Option<u64>,
    /// Start (running) or end (finished/canceled) time as printed, or epoch seconds (JSON).
    pub time: Option<String>,
}

impl Scan {
    /// A scan with no figures yet.
    pub fn new(kind: ScanKind, state: ScanState) -> Self {
        Self {
            kind,
            state,
            vdev: None,
            examined_bytes: None,
            issued_bytes: None,
            total_bytes: None,
            processed_bytes: None,
            rate_bps: None,
            percent: None,
            tool_eta_s: None,
            duration_s: None,
            errors: None,
            time: None,
        }
    }

    /// Bytes of progress: issued where known (0.8+), else examined (older versions, where
    /// scanning and issuing were one step). A dRAID sequential rebuild reads each stripe once
    /// in order, so its progress is what it has scanned (zpool computes its percentage from
    /// that too).
    pub fn progress_bytes(&self) -> Option<u64> {
        if self.kind == ScanKind::Rebuild {
            self.examined_bytes.or(self.issued_bytes)
        } else {
            self.issued_bytes.or(self.examined_bytes)
        }
    }
}

/// True for vdev states that mean the device holds no usable current data. An OFFLINE
/// device counts: offlined by hand or not, its column is missing until it is back and
/// resilvered.
pub fn is_failed_state(state: &str) -> bool {
    matches!(state, "FAULTED" | "UNAVAIL" | "REMOVED" | "OFFLINE")
}

/// True for states an operator must look at (pool or vdev).
pub fn is_bad_state(state: &str) -> bool {
    !matches!(state, "ONLINE" | "AVAIL" | "INUSE" | "")
}

/// Parses `/proc/spl/kstat/zfs/<pool>/state`: one upper-case word.
pub fn parse_state(text: &str) -> Result<String, ParseError> {
    parse_state_word(text).map(str::to_owned)
}

/// [`parse_state`], borrowing the word from `text`: the state files are read every second.
pub fn parse_state_word(text: &str) -> Result<&str, ParseError> {
    let mut first_line = (1, "");
    let mut found = None;
    for (i, line) in text.lines().enumerate() {
        if !line.trim().is_empty() && found.is_none() {
            first_line = (i + 1, line);
        }
        for w in line.split_ascii_whitespace() {
            if found.is_some() {
                return Err(ParseError::new(
                    first_line.0,
                    first_line.1,
                    "more than one word in a pool state file",
                ));
            }
            found = Some((i + 1, line, w));
        }
    }
    match found {
        None => Err(ParseError::new(1, text, "empty pool state")),
        Some((_, _, w)) if w.bytes().all(|b| b.is_ascii_uppercase() || b == b'_') => Ok(w),
        Some((n, line, w)) => Err(ParseError::new(
            n,
            line,
            format_args!("{w:?} is not a pool state"),
        )),
    }
}

/// Reads the state of every pool from `/proc/spl/kstat/zfs/<pool>/state`, sorted by name.
///
/// `Ok(None)` when `/proc/spl/kstat/zfs` does not exist: the zfs module is not loaded, and a
/// node without ZFS is not an error. Entries without a `state` file (`arcstats`, `dbufstats`
/// and the other module-wide files) are not pools and are skipped.
pub fn read_states(root: &Root) -> Result<Option<Vec<(String, String)>>, SourceError> {
    let dir = root.proc("spl/kstat/zfs");
    // Module-wide kstats (`arcstats`, `dbufstats`, …) are files; pools are directories.
    let Some(names) = list_subdirs(&dir)? else {
        return Ok(None);
    };
    let mut out = Vec::new();
    for name in names {
        let path = dir.join_sized(&name).join_sized("state");
        // A pool exported between listing and reading simply drops out.
        if let Some(text) = read_value_optional(&path)? {
            let state = parse_state(&text).map_err(|e| SourceError::parse(&path, e))?;
            out.push((name, state));
        }
    }
    Ok(Some(out))
}

/// True when `/proc/spl/kstat/zfs` exists (the zfs module is loaded).
pub fn zfs_present(root: &Root) -> bool {
    Path::new(&root.proc("spl/kstat/zfs")).is_dir()
}

/// A compact, complete rendering of parsed status for snapshot tests: one line per pool
/// field, scan and vdev, the tree shown by indentation.
#[cfg(test)]
pub(crate) fn render(s: &ZpoolStatus) -> String {
    use std::fmt::Write;
    fn opt<T: fmt::Display>(out: &mut String, k: &str, v: Option<T>) {
        if let Some(v) = v {
            let _ = write!(out, " {k}={v}");
        }
    }
    fn vdev(out: &mut String, v: &Vdev, depth: usize) {
        let _ = write!(
            out,
            "    {:indent$}{} [{}] {}",
            "",
            v.name,
            v.kind,
            v.state,
            indent = depth * 2
        );
        if let (Some(r), Some(w), Some(c)) = (v.read_errors, v.write_errors, v.cksum_errors) {
            let _ = write!(out, " {r}/{w}/{c}");
        }
        opt(out, "note", v.note.as_ref().map(|n| format!("{n:?}")));
        opt(out, "was", v.was.as_deref());
        if v.resilvering {
            out.push_str(" resilvering");
        }
        if v.awaiting_resilver {
            out.push_str(" awaiting_resilver");
        }
        for (k, x) in &v.extra {
            let _ = write!(out, " {k}={x:?}");
        }
        opt(out, "alloc", v.alloc_bytes);
        opt(out, "size", v.size_bytes);
        opt(out, "guid", v.guid);
        out.push('\n');
        for c in &v.children {
            vdev(out, c, depth + 1);
        }
    }
    let mut out = String::new();
    for p in &s.pools {
        let _ = write!(out, "pool {:?} state={:?}", p.name, p.state);
        opt(&mut out, "guid", p.guid);
        out.push('\n');
        for (k, v) in [
            ("status", &p.status),
            ("action", &p.action),
            ("see", &p.see),
        ] {
            if let Some(v) = v {
                let _ = writeln!(out, "  {k}: {v}");
            }
        }
        for sc in &p.scans {
            let _ = write!(out, "  scan: {} {}", sc.kind.as_str(), sc.state.as_str());
            opt(&mut out, "vdev", sc.vdev.as_deref());
            opt(&mut out, "examined", sc.examined_bytes);
            opt(&mut out, "issued", sc.issued_bytes);
            opt(&mut out, "total", sc.total_bytes);
            opt(&mut out, "processed", sc.processed_bytes);
            opt(&mut out, "rate_bps", sc.rate_bps);
            opt(&mut out, "pct", sc.percent.map(|p| format!("{p:.4}")));
            opt(&mut out, "tool_eta_s", sc.tool_eta_s);
            opt(&mut out, "duration_s", sc.duration_s);
            opt(&mut out, "errors", sc.errors);
            opt(&mut out, "time", sc.time.as_ref().map(|t| format!("{t:?}")));
            out.push('\n');
        }
        if !p.config.is_empty() {
            out.push_str("  config:\n");
        }
        for v in &p.config {
            vdev(&mut out, v, 0);
        }
        if p.errors.is_some() || p.data_errors.is_some() {
            let _ = write!(
                out,
                "  errors: {:?}",
                p.errors.as_deref().unwrap_or_default()
            );
            opt(&mut out, "data_errors", p.data_errors);
            out.push('\n');
        }
        for f in &p.error_files {
            let _ = writeln!(out, "  error_file: {f}");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn snapshot_kstat_state_fixtures() {
        insta::glob!("../../../fixtures/zpool-kstat", "*.txt", |path| {
            let text = std::fs::read_to_string(path).expect("fixture is readable");
            insta::assert_debug_snapshot!(parse_state(&text));
        });
    }

    #[test]
    fn state_errors_name_the_line() {
        assert_eq!(
            parse_state("").map_err(|e| e.reason),
            Err("empty pool state".into())
        );
        let e = parse_state("\nonline\n").expect_err("lower case");
        assert_eq!((e.line, e.text.as_str()), (2, "online"));
        let e = parse_state("ONLINE\nDEGRADED\n").expect_err("two words");
        assert_eq!(e.line, 1);
        assert_eq!(parse_state("  UNAVAIL \n").as_deref(), Ok("UNAVAIL"));
    }

    #[test]
    fn kinds_from_names() {
        use VdevKind::*;
        for (name, kind) in [
            ("raidz1-0", Raidz(1)),
            ("raidz3-12", Raidz(3)),
            ("raidz", Raidz(1)),
            ("raidz2", Raidz(2)),
            ("raidz9-0", Disk),
            ("draid1:8d:12c:2s-0", Draid(1)),
            ("draid2:8d:96c:6s-0", Draid(2)),
            ("draid1-0-0", DistributedSpare),
            ("draid2-0-5", DistributedSpare),
            ("mirror", Mirror),
            ("mirror-7", Mirror),
            ("mirrorx", Disk),
            ("spare-49", Spare),
            ("replacing-0", Replacing),
            ("replacing", Replacing),
            ("/vdevs/vdev4", File),
            ("/dev/diskid/DISK-ZCT2K2R6", Disk),
            ("15825580777360392022", Disk),
            ("gptid/a855d0c8-5218-11e3-9e38-10604b926998", Disk),
        ] {
            assert_eq!(VdevKind::from_name(name), kind, "{name}");
        }
    }

    #[test]
    fn numbers_as_printed() {
        assert_eq!(parse_size("0B"), Some(0));
        assert_eq!(parse_size("0"), Some(0));
        assert_eq!(parse_size("58.5K"), Some(59_904));
        assert_eq!(parse_size("1.05K"), Some(1075));
        assert_eq!(parse_size("4.11K"), Some(4209));
        assert_eq!(parse_size("9,12T"), Some(10_027_546_045_317));
        assert_eq!(parse_size("18446744073709551615"), Some(u64::MAX));
        assert_eq!(parse_size("1.2.3K"), None);
        assert_eq!(parse_size("K"), None);
        assert_eq!(parse_size("-"), None);
        assert_eq!(parse_size("99999E"), None);
        assert_eq!(parse_rate("1,90M/s"), Some(1.9 * 1_048_576.0));
        assert_eq!(parse_rate("177M"), None);
        assert_eq!(parse_percent("96,19%"), Some(96.19));
        assert_eq!(parse_duration("1h47m"), Some(6420));
        assert_eq!(parse_duration("123h32m"), Some(444_720));
        assert_eq!(parse_duration("00:00:15"), Some(15));
        assert_eq!(parse_duration("0 days 01:01:21"), Some(3681));
        assert_eq!(parse_duration("1 days 09:48:34"), Some(121_714));
        assert_eq!(parse_duration("h"), None);
        assert_eq!(parse_duration("1:2:3:4"), None);
    }

    proptest! {
        #[test]
        fn number_parsers_never_panic(s in "\\PC{0,24}") {
            let _ = parse_size(&s);
            let _ = parse_rate(&s);
            let _ = parse_percent(&s);
            let _ = parse_duration(&s);
            let _ = parse_state(&s);
            let _ = VdevKind::from_name(&s);
        }
    }
}
