//! The files of a job: [`KEPT`]'s files read at every reading, through descriptors kept open
//! per job while the open-file budget allows (else by path); off cgroupfs, the check that a kept
//! file was not replaced by a rename, made off the job's directory's inotify watch (or its
//! times); a file a job lacks
//! looked for again every [`PROBE_EVERY`] readings; the allocated cores read by path; one
//! reading of a job's counters from them ([`Tracked::reading`]).

use std::path::{Path, PathBuf};

use super::watch::{DirWatch, Seen};
use super::{gone, psi_off, SourceErrors, Tracked, CGROUP};
use crate::health::jobs::{self as model, JobReading};
use crate::root::JoinSized;
use crate::sources::cgroup::cpu_stat::CpuStat;
use crate::sources::cgroup::jobs::BatchSystem;
use crate::sources::cgroup::{self, cpu_max, cpu_stat, cpuset, io_stat, memory, psi_totals};
use crate::sources::pressure::{Pressure, PsiLine};
use crate::sources::SourceError;

/// The files read at every reading, kept open per job (as many jobs as a quarter of the
/// open-file limit allows): a `pread` costs a quarter of an open, read and close (0.9 against
/// 3.5 µs of CPU on the build VM's tmpfs, `floor -b` of the shared bench harness).
pub(super) const KEPT: [&str; 7] = [
    "cpu.stat",
    "io.stat",
    "io.pressure",
    "cpu.pressure",
    "memory.pressure",
    "memory.current",
    "memory.peak",
];
const CPU_STAT: usize = 0;
const IO_STAT: usize = 1;
const IO_PRESSURE: usize = 2;
const CPU_PRESSURE: usize = 3;
const MEMORY_PRESSURE: usize = 4;
const MEMORY_CURRENT: usize = 5;
const MEMORY_PEAK: usize = 6;
/// A file of [`KEPT`] a job did not have (a controller not enabled for it: on a hybrid host
/// `io.stat` and `memory.*`; `memory.peak` before Linux 5.19) is looked for again at every this
/// many readings of the job, not at each: a failed lookup walks the whole path. A controller
/// enabled for a running job is read within this many report intervals (a minute at 10 s): its
/// memory fields show at that reading, its I/O rates (two readings of counters) at the next.
pub(super) const PROBE_EVERY: u8 = 6;

/// Reads and parses one file by path; `None` when absent, unreadable or malformed (the last two
/// counted).
pub(super) fn read_parsed<T>(
    path: &Path,
    buf: &mut String,
    errors: &mut SourceErrors,
    parse: fn(&str) -> Result<T, crate::sources::ParseError>,
) -> Option<T> {
    match crate::root::read_into(path, buf) {
        Ok(true) => match parse(buf) {
            Ok(v) => Some(v),
            Err(e) => {
                errors.count(CGROUP, &SourceError::parse(path, e));
                None
            }
        },
        Ok(false) => None,
        Err(e) => {
            errors.count(CGROUP, &e);
            None
        }
    }
}

impl Tracked {
    /// Reads one value file of the job by path (opened and closed at once); `None` when absent
    /// (or gone), errors counted.
    fn value<T>(
        dir: &Path,
        name: &str,
        buf: &mut String,
        errors: &mut SourceErrors,
        parse: fn(&str) -> Result<T, crate::sources::ParseError>,
    ) -> Option<T> {
        let path = dir.join_sized(name);
        match crate::root::read_value_into(&path, buf) {
            Ok(true) => match parse(buf) {
                Ok(v) => Some(v),
                Err(e) => {
                    errors.count(CGROUP, &SourceError::parse(&path, e));
                    None
                }
            },
            Ok(false) => None,
            Err(e) => {
                errors.count(CGROUP, &e);
                None
            }
        }
    }

    /// Reads the job's allocated cores.
    pub(super) fn read_cores(&mut self, buf: &mut String, errors: &mut SourceErrors) {
        self.static_reads = self.static_reads.saturating_add(1);
        let max = Self::value(&self.dir, "cpu.max", buf, errors, cpu_max::parse);
        let set = Self::value(
            &self.dir,
            "cpuset.cpus.effective",
            buf,
            errors,
            cpuset::parse,
        );
        let weight = if self.system == BatchSystem::Htcondor {
            Self::value(&self.dir, "cpu.weight", buf, errors, cpu_max::parse_weight)
        } else {
            None
        };
        self.cores = model::allocated_cores(self.system, max.as_ref(), set.as_ref(), weight);
    }

    /// Off cgroupfs, whether a kept file of the job may have been replaced by a rename since
    /// it was opened, so that each must be checked (`fstat`: unlinked?). Told by the inotify
    /// watch of the job's directory ([`super::watch`]: no system call of the job's own when
    /// nothing changed); where no watch can be had, by the directory's times: a rename, a
    /// removal or a creation in the job's directory sets its modification and change times to
    /// the current time, so times unchanged since the files were last checked mean none was
    /// replaced, one `statx` of the directory instead of one per file. Times are trusted only
    /// once they are more than a second old when recorded — a change within the same tick of
    /// the file system's clock could leave them equal — and a directory that was removed
    /// (unlinked) is opened again. On cgroupfs files are never replaced: no check.
    fn files_may_be_replaced(&mut self, io: &ReadIo<'_>) -> bool {
        use rustix::fs::{AtFlags, Mode, OFlags, StatxFlags};
        if !io.stale_check {
            return false;
        }
        // Files read by path are opened afresh at every reading.
        let Some(kept) = self.kept.as_mut() else {
            return false;
        };
        if let Some(watch) = io.watch {
            // One watch of the directory (`watch.rs`): its events, read once for all jobs.
            match kept.wd.map(|wd| watch.seen(wd)) {
                Some(Seen::Unchanged) => return false,
                Some(Seen::Changed) => return true,
                // No watch yet, or its directory went: watched again by name, every file
                // checked (a file opened before the watch may have been replaced since).
                Some(Seen::Lost) | None => {
                    kept.wd = watch.add(&self.dir);
                    if kept.wd.is_some() {
                        return true;
                    }
                    // Not watched (the user's watches used up, or gone): the directory's times.
                }
            }
        }
        if kept.dir.is_none() {
            kept.dir = rustix::fs::open(
                &self.dir,
                OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
                Mode::empty(),
            )
            .ok();
        }
        let times = kept.dir.as_ref().and_then(|d| {
            rustix::fs::statx(
                d,
                "",
                AtFlags::EMPTY_PATH,
                StatxFlags::MTIME | StatxFlags::CTIME | StatxFlags::NLINK,
            )
            .ok()
            .map(|x| DirTimes {
                mtime: (x.stx_mtime.tv_sec, x.stx_mtime.tv_nsec),
                ctime: (x.stx_ctime.tv_sec, x.stx_ctime.tv_nsec),
                linked: x.stx_nlink > 0,
            })
        });
        match times {
            Some(t) if t.linked && kept.checked == Some(t) => false,
            Some(t) if t.linked => {
                kept.checked = t.settled(io.now_s, io.settle_s).then_some(t);
                true
            }
            _ => {
                // Gone, or removed and perhaps made again under its name: open it again next time.
                kept.dir = None;
                kept.checked = None;
                true
            }
        }
    }

    /// Reads the job's file number `idx` of [`KEPT`]: through its descriptor kept open when the
    /// job has them (one `pread`, plus an `fstat` on a tree that is not cgroupfs, where a file
    /// replaced by a rename leaves the descriptor on the old one), its bytes where `pread` put
    /// them (`io.scratch`), else by name in the job's directory, into `buf`. `Ok(None)` when the
    /// file is absent or the job is gone; a file found absent is not looked for again before the
    /// job's next probe ([`PROBE_EVERY`]). The bytes are not checked for UTF-8 here: the
    /// parsers read the kernel's form from the bytes ([`Tracked::parse_file`]).
    fn read_file<'b>(
        &mut self,
        idx: usize,
        io: &'b mut ReadIo<'_>,
        buf: &'b mut String,
    ) -> Result<Option<&'b [u8]>, SourceError> {
        // A kept file with nothing to check: one `pread`, nothing else looked at (a file kept
        // open was found, so it is not among the absent ones).
        if !io.check_files {
            if let Some(Some(f)) = self.kept.as_ref().and_then(|k| k.files.get(idx)) {
                if let Ok(len) = pread_into(f, io.scratch) {
                    return Ok(Some(io.scratch.get(..len).unwrap_or_default()));
                }
                // An error (the cgroup gone): the way below says what it means.
            }
        }
        // cpu.stat is never skipped: without it the job has ended.
        let bit = if idx == CPU_STAT { 0 } else { 1u8 << idx };
        if self.absent & bit != 0 && !io.probe_absent {
            return Ok(None);
        }
        match self.lookup(idx, io)? {
            Found::Scratch(len) => {
                self.absent &= !bit;
                Ok(Some(io.scratch.get(..len).unwrap_or_default()))
            }
            Found::ByPath => {
                let name = KEPT.get(idx).copied().unwrap_or("cpu.stat");
                if crate::root::read_value_into(&self.dir.join_sized(name), buf)? {
                    self.absent &= !bit;
                    return Ok(Some(buf.as_bytes()));
                }
                if bit != 0 {
                    self.absent |= bit;
                    *io.absent_lookups += 1;
                }
                Ok(None)
            }
            Found::Absent => {
                if bit != 0 {
                    self.absent |= bit;
                    *io.absent_lookups += 1;
                }
                Ok(None)
            }
        }
    }

    /// The text of file `idx`'s `bytes`, or the error a reader of a `String` gives when they
    /// are not UTF-8.
    fn text<'b>(&self, idx: usize, bytes: &'b [u8]) -> Result<&'b str, SourceError> {
        std::str::from_utf8(bytes).map_err(|_| {
            let name = KEPT.get(idx).copied().unwrap_or("cpu.stat");
            SourceError::io(
                &self.dir.join_sized(name),
                std::io::Error::new(
                    std::io::ErrorKind::InvalidData,
                    "stream did not contain valid UTF-8",
                ),
            )
        })
    }

    /// [`Self::read_file`] through the kept descriptor, without the memory of absent files.
    fn lookup(&mut self, idx: usize, io: &mut ReadIo<'_>) -> Result<Found, SourceError> {
        let name = KEPT.get(idx).copied().unwrap_or("cpu.stat");
        let Some(slot) = self.kept.as_mut().and_then(|k| k.files.get_mut(idx)) else {
            return Ok(Found::ByPath);
        };
        if io.check_files {
            if let Some(f) = slot {
                *io.file_checks += 1;
                if f.metadata()
                    .map_or(true, |m| std::os::unix::fs::MetadataExt::nlink(&m) == 0)
                {
                    *slot = None;
                }
            }
        }
        let path = || self.dir.join_sized(name);
        if slot.is_none() {
            match std::fs::File::open(path()) {
                Ok(f) => *slot = Some(f),
                Err(e) if gone(&e) => return Ok(Found::Absent),
                Err(e) => return Err(SourceError::io(&path(), e)),
            }
        }
        let Some(f) = slot.as_ref() else {
            return Ok(Found::Absent);
        };
        match pread_into(f, io.scratch) {
            Ok(len) => Ok(Found::Scratch(len)),
            Err(e) if gone(&e) => {
                // The cgroup this descriptor was opened in is gone (cgroupfs answers ENODEV);
                // one of the same name may have been made since (`JobsCollector::read`).
                *slot = None;
                self.lost = true;
                Ok(Found::Absent)
            }
            Err(e) => Err(SourceError::io(&path(), e)),
        }
    }

    /// [`Self::read_file`] parsed: by `kernel` from the bytes when they are in the kernel's
    /// form (no UTF-8 check: such bytes are ASCII), else by `parse` from their text, which
    /// gives the same value for whatever `kernel` accepts (each pair's property test), and
    /// refuses what is not UTF-8 as before; `Ok(None)` when absent.
    fn parse_file<T>(
        &mut self,
        idx: usize,
        io: &mut ReadIo<'_>,
        buf: &mut String,
        kernel: fn(&[u8]) -> Option<T>,
        parse: fn(&str) -> Result<T, crate::sources::ParseError>,
    ) -> Result<Option<T>, SourceError> {
        let Some(bytes) = self.read_file(idx, io, buf)? else {
            return Ok(None);
        };
        if let Some(v) = kernel(bytes) {
            return Ok(Some(v));
        }
        let text = self.text(idx, bytes)?;
        let name = KEPT.get(idx).copied().unwrap_or("");
        parse(text)
            .map(Some)
            .map_err(|e| SourceError::parse(&self.dir.join_sized(name), e))
    }

    /// One reading of the job's counters at `at`; `None` when the job is gone (no `cpu.stat`).
    pub(super) fn reading(
        &mut self,
        at: u64,
        io: &mut ReadIo<'_>,
        buf: &mut String,
        errors: &mut SourceErrors,
        psi_missing: &mut Option<PathBuf>,
    ) -> Option<JobReading> {
        self.lost = false;
        io.check_files = self.files_may_be_replaced(io);
        self.since_probe = self.since_probe.saturating_add(1);
        io.probe_absent = self.since_probe >= PROBE_EVERY;
        if io.probe_absent {
            self.since_probe = 0;
        }
        // cpu.stat is there in every cgroup v2 directory: without it the job has ended.
        // Only `usage_usec` is used: read alone, not the whole file.
        let mut usage = match self.parse_file(
            CPU_STAT,
            io,
            buf,
            cpu_stat::usage_usec_kernel,
            cpu_stat::usage_usec,
        ) {
            Ok(Some(u)) => Some(u),
            Ok(None) => return None,
            Err(e) => {
                errors.count(CGROUP, &e);
                None
            }
        };
        // The job's own directory's, apart: an `also` directory that went (an ssh session's
        // ended) lowers the sum, not the job's counter.
        self.own_usec_now = usage;
        for a in &self.also {
            if let Some(u) = usage.as_mut() {
                let path = a.join_sized("cpu.stat");
                if let Ok(true) = crate::root::read_into(&path, buf) {
                    if let Ok(extra) = cpu_stat::usage_usec(buf) {
                        *u = u.saturating_add(extra);
                    }
                }
            }
        }
        let cpu = usage.map(|usage_usec| CpuStat {
            usage_usec,
            ..CpuStat::default()
        });
        let io_rows = match self.read_file(IO_STAT, io, buf) {
            Ok(Some(bytes)) => {
                // Into the vector of the reading before last (no allocation per reading), each
                // device where its line lies.
                let mut rows = std::mem::take(&mut self.spare_io);
                let mut bad = Vec::new();
                match io_stat::counters_into(bytes, &mut rows, &mut bad) {
                    Ok(()) => {
                        if let Some(e) = bad.into_iter().next() {
                            errors.count(
                                CGROUP,
                                &SourceError::parse(&self.dir.join_sized("io.stat"), e),
                            );
                        }
                        Some(rows)
                    }
                    Err(_) => {
                        self.spare_io = rows;
                        if let Err(e) = self.text(IO_STAT, bytes) {
                            errors.count(CGROUP, &e);
                        }
                        None
                    }
                }
            }
            Ok(None) => None,
            Err(e) => {
                errors.count(CGROUP, &e);
                None
            }
        };
        let mut psi = |t: &mut Tracked, idx: usize, io: &mut ReadIo<'_>, buf: &mut String| {
            match t.parse_file(idx, io, buf, psi_totals::kernel_form, psi_totals::parse) {
                // Only the totals count: the shares are over the interval, from two readings.
                Ok(Some(p)) => {
                    let line = |total_us: Option<u64>| {
                        total_us.map(|total_us| PsiLine {
                            total_us,
                            ..PsiLine::default()
                        })
                    };
                    Some(Pressure {
                        some: line(p.some_us),
                        full: line(p.full_us),
                    })
                }
                Ok(None) => {
                    let name = KEPT.get(idx).copied().unwrap_or("");
                    psi_missing.get_or_insert_with(|| t.dir.join_sized(name));
                    None
                }
                Err(e) if psi_off(&e) => {
                    let name = KEPT.get(idx).copied().unwrap_or("");
                    psi_missing.get_or_insert_with(|| t.dir.join_sized(name));
                    None
                }
                Err(e) => {
                    errors.count(CGROUP, &e);
                    None
                }
            }
        };
        let io_pressure = psi(self, IO_PRESSURE, io, buf);
        let cpu_pressure = psi(self, CPU_PRESSURE, io, buf);
        let memory_pressure = psi(self, MEMORY_PRESSURE, io, buf);
        let mut value =
            |t: &mut Tracked, idx: usize, io: &mut ReadIo<'_>, buf: &mut String, parse| {
                t.parse_file(idx, io, buf, cgroup::single_u64_kernel, parse)
                    .unwrap_or_else(|e| {
                        errors.count(CGROUP, &e);
                        None
                    })
            };
        let memory_current = value(self, MEMORY_CURRENT, io, buf, memory::parse_current);
        let memory_peak = value(self, MEMORY_PEAK, io, buf, memory::parse_peak);
        Some(JobReading {
            at_usec: at,
            created_usec: None,
            cpu,
            io: io_rows,
            cpu_pressure,
            io_pressure,
            memory_pressure,
            memory_current,
            memory_peak,
            cores: self.cores,
        })
    }
}

/// Reads `file` from its start into `scratch` with `pread`, and returns the length read: the
/// text is parsed where it lies, not copied. cgroupfs generates the text again for a read at
/// offset 0, so a descriptor kept open serves every reading. A read shorter than the room left
/// is the end (the kernel prints these files in one piece). The system call is rustix's, made
/// directly: the C library's `pread` (through `FileExt::read_at`) marks a cancellation point
/// around it, ~80 instructions a file of 700 a reading. Inlined into its callers: a call of
/// its own cost ~20 instructions a file (the registers saved and restored).
#[inline(always)]
fn pread_into(file: &std::fs::File, scratch: &mut Vec<u8>) -> std::io::Result<usize> {
    if scratch.len() < 4096 {
        scratch.resize(4096, 0);
    }
    let mut filled = 0;
    loop {
        if filled == scratch.len() {
            scratch.resize(scratch.len() * 2, 0);
        }
        let room = scratch.get_mut(filled..).unwrap_or_default();
        let want = room.len();
        match rustix::io::pread(file, room, filled as u64) {
            Ok(0) => break,
            Ok(n) => {
                filled += n;
                if n < want {
                    break;
                }
            }
            Err(rustix::io::Errno::INTR) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(filled)
}

/// Where [`Tracked::lookup`] found a kept file's text.
enum Found {
    /// Read through its kept descriptor: the first this many bytes of `ReadIo::scratch`.
    Scratch(usize),
    /// The job keeps no descriptors (over the open-file budget): to be read by path.
    ByPath,
    /// Absent, or its cgroup gone.
    Absent,
}

/// What reading through kept descriptors needs from the collector.
pub(super) struct ReadIo<'a> {
    /// The read buffer of `pread`.
    pub(super) scratch: &'a mut Vec<u8>,
    /// The tree is not cgroupfs: a kept file may have been replaced.
    pub(super) stale_check: bool,
    /// The jobs' directories' watch, drained for this reading (off cgroupfs, when there is one).
    pub(super) watch: Option<&'a DirWatch>,
    /// Check each kept file of the job being read for a replacement: its directory changed
    /// since they were last checked ([`Tracked::files_may_be_replaced`]).
    pub(super) check_files: bool,
    /// The wall clock at the reading, s since the epoch (the directories' times are on it).
    pub(super) now_s: i64,
    /// [`JobsCollector::settle_s`](super::JobsCollector::settle_s).
    pub(super) settle_s: i64,
    /// [`JobsCollector::file_checks`](super::JobsCollector::file_checks).
    pub(super) file_checks: &'a mut u64,
    /// Look for the job's files found absent before ([`PROBE_EVERY`]).
    pub(super) probe_absent: bool,
    /// [`JobsCollector::absent_lookups`](super::JobsCollector::absent_lookups).
    pub(super) absent_lookups: &'a mut u64,
}

/// The files a job keeps open, and what the rename check off cgroupfs needs.
#[derive(Debug, Default)]
pub(super) struct Kept {
    /// [`KEPT`]'s files, each once opened.
    files: [Option<std::fs::File>; 7],
    /// The job's directory (`O_PATH`), off cgroupfs where it is not watched (its times).
    dir: Option<rustix::fd::OwnedFd>,
    /// The directory's times when its files were last checked one by one, if they were older
    /// than a second then: the same times since mean no file of it was replaced.
    checked: Option<DirTimes>,
    /// The directory's inotify watch, off cgroupfs when one could be had.
    pub(super) wd: Option<i32>,
}

/// A directory's modification and change times (s, ns), and whether it is still linked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct DirTimes {
    pub(super) mtime: (i64, u32),
    pub(super) ctime: (i64, u32),
    pub(super) linked: bool,
}

impl DirTimes {
    /// Whether these times, read at `now_s` (the wall clock, s), may stand for the directory's
    /// files at the next reading when they are found unchanged: both whole seconds more than
    /// `settle_s` in the past. A file system whose clock ticks coarsely (a jiffy, or the second
    /// itself on some) gives a rename made later within the same tick the same times; a time of
    /// the current or the previous second may still be followed by one.
    pub(super) fn settled(&self, now_s: i64, settle_s: i64) -> bool {
        let before = now_s.saturating_sub(settle_s);
        self.mtime.0 < before && self.ctime.0 < before
    }
}
