//! smartd's attribute logs (`smartd -A PREFIX`) as the confirmation of a disk's last smartctl
//! reading: a round whose log line says nothing the reading depends on has changed runs no
//! smartctl for the disk. The format and its parser: [`crate::sources::smartd_attrlog`].
//!
//! **What is kept of a reading** ([`Basis`], made when smartctl reads a disk by its kernel name
//! and the disk's log exists then — without one the reading's document is not read again —
//! never behind a RAID controller): the log's file name (from the reading's model and serial,
//! as smartd makes it), and the values a later line must show unchanged —
//!
//! * ATA: every attribute's normalised value against its threshold (each on the same side: the
//!   drive's overall verdict, SMART RETURN STATUS, and smartctl's `when_failed = now` are the
//!   prefailure and all attributes at or below their thresholds; thresholds are fixed in the
//!   drive's firmware, so values that cross none cannot change either), the same set of
//!   attributes, and the raw values the line reports (5, 187, 188, 197, 198, 199).
//! * NVMe: critical warning (the verdict is `critical_warning == 0`), available spare and its
//!   threshold, percentage used, media errors, error log entries.
//! * SCSI (only with `smartd_attrlog_scsi`): the read, write and verify uncorrected error
//!   totals and the non-medium error count. The drive's informational-exceptions verdict and the
//!   grown defect list are not in the log: they are the old reading's until smartctl reads the
//!   disk again.
//!
//! **What a line refreshes**: the temperature (ATA: the low byte of 194's or 190's raw value,
//! when the reading's temperature came from it that way; SCSI and NVMe: `temperature`), the
//! power-on hours (ATA: attribute 9's raw value when the reading's hours were that value; NVMe:
//! `power-on-hours`) and NVMe's unsafe shutdowns. Everything else is the smartctl reading's.
//!
//! **When**: the disk's log was modified after the reading (or after the line that last
//! confirmed it: one line confirms once), within `smartd_attrlog_max_age`, and the last complete
//! line of its tail parses; and fewer than `smartd_attrlog_full_every - 1` rounds in a row were
//! confirmed (so smartctl reads every disk at least every that many rounds). Out-of-schedule
//! reads (a degraded array's members) always run smartctl.

use std::collections::{BTreeMap, BTreeSet};
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use crate::sources::smartctl::{DriveHealth, Protocol};
use crate::sources::smartd_attrlog::{
    file_names, last_line, smartctl_table, LogProtocol, SmartctlTable, Values, TAIL_BYTES,
};

/// The ATA attributes whose raw values the `drive` line reports.
const REPORTED_RAW: [u8; 6] = [5, 187, 188, 197, 198, 199];

/// `[drive] smartd_attrlog_*`, resolved.
#[derive(Debug, Clone)]
pub(super) struct AttrlogConfig {
    /// `PREFIX` of `smartd -A PREFIX` (never empty: empty is off).
    pub(super) prefix: PathBuf,
    /// A log modified longer ago than this is stale.
    pub(super) max_age: Duration,
    /// smartctl reads a disk at least every this many rounds (≥ 2; below, the logs are not used).
    pub(super) full_every: u32,
    /// SAS/SCSI disks are confirmed too.
    pub(super) scsi: bool,
}

/// The logs of a worker's disks: what each disk's last smartctl reading leaves to confirm.
#[derive(Debug)]
pub(super) struct Logs {
    cfg: AttrlogConfig,
    bases: BTreeMap<String, Basis>,
    /// Logs found unreadable or unparseable (each said once).
    told: BTreeSet<PathBuf>,
}

impl Logs {
    pub(super) fn new(cfg: AttrlogConfig) -> Self {
        Self {
            cfg,
            bases: BTreeMap::new(),
            told: BTreeSet::new(),
        }
    }

    /// Keeps only the disks `keep` says.
    pub(super) fn retain(&mut self, keep: impl Fn(&str) -> bool) {
        self.bases.retain(|n, _| keep(n));
    }

    /// Disk `name`'s smartctl call ended with reading `h` from JSON document `doc` (`None`:
    /// the call failed; nothing is left to confirm).
    pub(super) fn note(&mut self, name: &str, h: Option<&DriveHealth>, doc: Option<&str>) {
        let basis = h.and_then(|h| {
            // Without a log there is nothing to confirm: the document is not read again.
            let paths = self.existing_log(name, h)?;
            // a SAS reading needs no table: its counters are in the reading
            let table = doc
                .filter(|_| h.protocol != Protocol::Scsi)
                .and_then(|d| smartctl_table(d).ok());
            Basis::of(h, table.as_ref(), paths, SystemTime::now())
        });
        match basis {
            Some(b) => {
                self.bases.insert(name.to_owned(), b);
            }
            None => {
                self.bases.remove(name);
            }
        }
    }

    /// The log file names of disk `disk`'s reading `h` when one of them exists; `None` when
    /// the reading cannot be confirmed (no model or serial, a protocol not confirmed) or smartd
    /// writes no log for it (one `stat` per name).
    fn existing_log(&self, disk: &str, h: &DriveHealth) -> Option<Vec<PathBuf>> {
        let model = h.model.as_deref().filter(|m| !m.is_empty())?;
        let serial = h.serial.as_deref().filter(|s| !s.is_empty())?;
        let proto = match h.protocol {
            Protocol::Ata => LogProtocol::Ata,
            Protocol::Scsi if self.cfg.scsi => LogProtocol::Scsi,
            Protocol::Nvme => LogProtocol::Nvme,
            _ => return None,
        };
        let ns = (proto == LogProtocol::Nvme).then(|| nsid(disk)).flatten();
        let paths: Vec<PathBuf> = file_names(proto, model, serial, ns)
            .iter()
            .map(|n| join(&self.cfg.prefix, n))
            .collect();
        paths.iter().any(|p| p.is_file()).then_some(paths)
    }

    /// What disk `name`'s log refreshes when it confirms the disk's reading this round; `None`:
    /// smartctl reads the disk (no reading kept, its turn for smartctl, or the log does not
    /// confirm: why is logged, at `warn` once for a log that cannot be read or parsed).
    pub(super) fn confirm(&mut self, name: &str) -> Option<Fresh> {
        let b = self.bases.get_mut(name)?;
        if b.confirmed + 1 >= self.cfg.full_every {
            return None;
        }
        match b.check(self.cfg.max_age, SystemTime::now()) {
            Ok(fresh) => {
                b.confirmed += 1;
                Some(fresh)
            }
            Err(Miss::Bad(path, why)) => {
                if self.told.insert(path.clone()) {
                    tracing::warn!(
                        source = "smartctl",
                        "{name}: smartd attribute log {}: {why}; smartctl reads the disk",
                        path.display()
                    );
                }
                None
            }
            Err(why) => {
                tracing::debug!(source = "smartctl", "{name}: attribute log: {why:?}");
                None
            }
        }
    }
}

/// What a disk's last smartctl reading leaves for its log to confirm (see the module).
#[derive(Debug)]
struct Basis {
    paths: Vec<PathBuf>,
    proto: LogProtocol,
    /// The reading's time, or the confirming line's: a line must be newer.
    after: SystemTime,
    /// Rounds confirmed in a row since the reading.
    confirmed: u32,
    expect: Expect,
}

#[derive(Debug)]
enum Expect {
    Ata {
        /// `[id, value, thresh]` of every attribute.
        rows: Box<[[u8; 3]]>,
        /// The reported raw values.
        raws: Box<[(u8, u64)]>,
        /// The attribute whose raw low byte was the reading's temperature.
        temp_id: Option<u8>,
        /// The reading's power-on hours were attribute 9's raw value.
        poh: bool,
    },
    Scsi {
        uncorrected: [Option<u64>; 3],
        non_medium: Option<u64>,
    },
    Nvme {
        values: [Option<u64>; 5],
        err_log_entries: Option<u64>,
    },
}

/// What a confirming line brings.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Fresh {
    /// The temperature, when the line has it.
    pub(crate) temperature_c: Option<i64>,
    /// Power-on hours, when the line has them.
    pub(crate) power_on_hours: Option<u64>,
    /// NVMe unsafe shutdowns.
    pub(crate) unsafe_shutdowns: Option<u64>,
    /// The line confirms the SAS non-medium error count.
    pub(crate) non_medium: bool,
    /// Seconds since the line was written (its file's modification time).
    pub(crate) age_s: f64,
}

impl Fresh {
    /// The reading `h` with what the line refreshes.
    pub(crate) fn apply(&self, h: &mut DriveHealth) {
        if let Some(t) = self.temperature_c {
            h.temperature_c = Some(t);
        }
        if let Some(p) = self.power_on_hours {
            h.power_on_hours = Some(p);
        }
        if let (Some(u), Some(n)) = (self.unsafe_shutdowns, h.nvme.as_mut()) {
            n.unsafe_shutdowns = Some(u);
        }
    }
}

/// Why a disk's log did not confirm its reading: smartctl reads it.
#[derive(Debug, PartialEq)]
enum Miss {
    /// No log file (smartd without `-A`, or not this disk's).
    NoFile,
    /// No line since the reading (or the last confirming line).
    NoNewLine,
    /// The last line is older than the limit.
    Stale(u64),
    /// The log ends inside a line (smartd writing it).
    Writing,
    /// The log could not be read or its last line parsed.
    Bad(PathBuf, String),
    /// A value the reading depends on differs.
    Changed(String),
}

/// `/x/attrlog.` + `name`.
fn join(prefix: &Path, name: &str) -> PathBuf {
    let mut s = prefix.as_os_str().to_owned();
    s.push(name);
    PathBuf::from(s)
}

/// `nvme0n2` → 2.
fn nsid(disk: &str) -> Option<u32> {
    disk.rsplit_once('n')?.1.parse().ok()
}

impl Basis {
    /// What reading `h` (with its `table`), read at `at`, leaves for its log at `paths` to
    /// confirm ([`Logs::existing_log`] chose the protocol); `None` when nothing can be
    /// confirmed (no table).
    fn of(
        h: &DriveHealth,
        table: Option<&SmartctlTable>,
        paths: Vec<PathBuf>,
        at: SystemTime,
    ) -> Option<Self> {
        let (proto, expect) = match h.protocol {
            Protocol::Ata => {
                let t = table.filter(|t| !t.ata.is_empty())?;
                h.ata.as_ref()?;
                let raw_of = |id: u8| t.ata.iter().find(|r| r.id == id).map(|r| r.raw);
                let temp_id = [194u8, 190].into_iter().find(|&id| {
                    raw_of(id).is_some_and(|raw| {
                        let low = (raw & 0xff) as i64;
                        (1..128).contains(&low) && h.temperature_c == Some(low)
                    })
                });
                let poh = raw_of(9).is_some_and(|raw| h.power_on_hours == Some(raw & 0xffff_ffff));
                (
                    LogProtocol::Ata,
                    Expect::Ata {
                        rows: t.ata.iter().map(|r| [r.id, r.value, r.thresh]).collect(),
                        raws: REPORTED_RAW
                            .iter()
                            .filter_map(|&id| Some((id, raw_of(id)?)))
                            .collect(),
                        temp_id,
                        poh,
                    },
                )
            }
            Protocol::Scsi => {
                let sc = h.scsi.as_ref()?;
                (
                    LogProtocol::Scsi,
                    Expect::Scsi {
                        uncorrected: [
                            sc.read_uncorrected,
                            sc.write_uncorrected,
                            sc.verify_uncorrected,
                        ],
                        non_medium: sc.non_medium_errors,
                    },
                )
            }
            Protocol::Nvme => {
                let n = h.nvme.as_ref()?;
                (
                    LogProtocol::Nvme,
                    Expect::Nvme {
                        values: [
                            n.critical_warning.map(u64::from),
                            n.available_spare_pct.map(u64::from),
                            n.available_spare_threshold_pct.map(u64::from),
                            n.percentage_used.map(u64::from),
                            n.media_errors,
                        ],
                        err_log_entries: table.and_then(|t| t.nvme_err_log_entries),
                    },
                )
            }
            _ => return None,
        };
        Some(Self {
            paths,
            proto,
            after: at,
            confirmed: 0,
            expect,
        })
    }

    /// Whether the disk's log confirms the reading at `now`: what its last line refreshes, or
    /// why not. A confirming line is not taken twice.
    fn check(&mut self, max_age: Duration, now: SystemTime) -> Result<Fresh, Miss> {
        let (path, mtime, len) = self
            .paths
            .iter()
            .filter_map(|p| {
                let m = std::fs::metadata(p).ok().filter(|m| m.is_file())?;
                Some((p, m.modified().ok()?, m.len()))
            })
            .max_by_key(|(_, t, _)| *t)
            .ok_or(Miss::NoFile)?;
        if mtime <= self.after {
            return Err(Miss::NoNewLine);
        }
        let age = now.duration_since(mtime).unwrap_or_default();
        if age > max_age {
            return Err(Miss::Stale(age.as_secs()));
        }
        let bad = |e: String| Miss::Bad(path.clone(), e);
        let tail = read_tail(path, len).map_err(|e| bad(e.to_string()))?;
        // smartd is writing a line: the modification time is that line's, and the complete line
        // before it may be older than the reading
        if tail.last().is_some_and(|&b| b != b'\n') {
            return Err(Miss::Writing);
        }
        let line = last_line(&tail, len <= TAIL_BYTES as u64, self.proto)
            .map_err(|e| bad(e.to_string()))?;
        let fresh = self.compare(&line.values, age.as_secs_f64())?;
        self.after = mtime;
        Ok(fresh)
    }

    fn compare(&self, values: &Values, age_s: f64) -> Result<Fresh, Miss> {
        let mut fresh = Fresh {
            temperature_c: None,
            power_on_hours: None,
            unsafe_shutdowns: None,
            non_medium: false,
            age_s,
        };
        let changed = |what: String| Err(Miss::Changed(what));
        match (&self.expect, values) {
            (
                Expect::Ata {
                    rows,
                    raws,
                    temp_id,
                    poh,
                },
                Values::Ata(attrs),
            ) => {
                if attrs.len() != rows.len() {
                    return changed(format!(
                        "{} attributes, the reading had {}",
                        attrs.len(),
                        rows.len()
                    ));
                }
                let find = |id: u8| attrs.iter().find(|a| a.id == id);
                for &[id, value, thresh] in rows.iter() {
                    let Some(a) = find(id) else {
                        return changed(format!("attribute {id} missing"));
                    };
                    if thresh != 0 && (a.value <= thresh) != (value <= thresh) {
                        return changed(format!(
                            "attribute {id}: value {} against threshold {thresh}, was {value}",
                            a.value
                        ));
                    }
                }
                for &(id, raw) in raws.iter() {
                    match find(id) {
                        Some(a) if a.raw == raw => {}
                        Some(a) => {
                            return changed(format!("attribute {id}: raw {} was {raw}", a.raw))
                        }
                        None => return changed(format!("attribute {id} missing")),
                    }
                }
                fresh.temperature_c = temp_id
                    .and_then(find)
                    .map(|a| (a.raw & 0xff) as i64)
                    .filter(|t| (1..128).contains(t));
                fresh.power_on_hours = poh
                    .then(|| find(9))
                    .flatten()
                    .map(|a| a.raw & 0xffff_ffff)
                    .filter(|&h| h <= 0x00ff_ffff);
            }
            (
                Expect::Scsi {
                    uncorrected,
                    non_medium,
                },
                Values::Scsi(s),
            ) => {
                for (i, (want, page)) in uncorrected
                    .iter()
                    .zip([s.read, s.write, s.verify])
                    .enumerate()
                {
                    let got = page.and_then(|p| p.total_uncorrected);
                    if want.is_some() && got != *want {
                        return changed(format!(
                            "{} uncorrected errors {got:?}, were {want:?}",
                            ["read", "write", "verify"][i]
                        ));
                    }
                }
                if let Some(n) = non_medium {
                    if s.non_medium_errors != Some(*n) {
                        return changed(format!(
                            "non-medium errors {:?}, were {n}",
                            s.non_medium_errors
                        ));
                    }
                    fresh.non_medium = true;
                }
                fresh.temperature_c = s.temperature_c;
            }
            (
                Expect::Nvme {
                    values: want,
                    err_log_entries,
                },
                Values::Nvme(n),
            ) => {
                let got = [
                    n.critical_warning,
                    n.available_spare,
                    n.available_spare_threshold,
                    n.percentage_used,
                    n.media_errors,
                ];
                const NAMES: [&str; 5] = [
                    "critical warning",
                    "available spare",
                    "available spare threshold",
                    "percentage used",
                    "media errors",
                ];
                for ((w, g), name) in want.iter().zip(got).zip(NAMES) {
                    if w.is_some() && *w != g {
                        return changed(format!("{name} {g:?}, was {w:?}"));
                    }
                }
                if err_log_entries.is_some() && *err_log_entries != n.err_log_entries {
                    return changed(format!(
                        "error log entries {:?}, were {err_log_entries:?}",
                        n.err_log_entries
                    ));
                }
                fresh.temperature_c = n.temperature_c;
                fresh.power_on_hours = n.power_on_hours;
                fresh.unsafe_shutdowns = n.unsafe_shutdowns;
            }
            _ => return changed("a line of another protocol".into()),
        }
        Ok(fresh)
    }
}

/// The last [`TAIL_BYTES`] of the `len`-byte file `path` (what it holds when read, if it grew).
fn read_tail(path: &Path, len: u64) -> std::io::Result<Vec<u8>> {
    let mut f = File::open(path)?;
    f.seek(SeekFrom::Start(len.saturating_sub(TAIL_BYTES as u64)))?;
    let mut buf = Vec::with_capacity(TAIL_BYTES);
    f.take(TAIL_BYTES as u64).read_to_end(&mut buf)?;
    Ok(buf)
}
