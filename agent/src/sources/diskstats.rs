//! `/proc/diskstats`: per block device I/O counters.
//!
//! Kernel documentation: `Documentation/admin-guide/iostats.rst` and
//! `Documentation/ABI/testing/procfs-diskstats`. Each line is `major minor name` followed by:
//!
//! * 4 fields — partitions on kernels before 2.6.25: reads, sectors read, writes, sectors written;
//! * 11 fields — 2.6.25 … 4.17 (reads … weighted time in queue);
//! * 15 fields — 4.18+: adds discards, discards merged, sectors discarded, discard ms;
//! * 17 fields — 5.5+: adds flushes and flush ms.
//!
//! Sectors are always 512 bytes. The `*_ms` fields are milliseconds and were printed as 32-bit
//! `%u` on many kernels, so they wrap after ~49.7 days; rates treat any counter that goes
//! backwards as a reset (see `rates.rs`).
//!
//! Lines may also be tab- or multi-space-padded (the sysfs `stat` file uses fixed 8-wide columns,
//! overflowing on busy SAS disks); whitespace splitting handles all of them.

use super::{ParseError, Rows};

/// Which of the kernel's line shapes a row came in; older shapes leave later counters at 0.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DiskstatsFormat {
    /// 4 stat fields (partitions before 2.6.25): no merges, times, in-flight.
    Partition4,
    /// 11 stat fields (2.6.25 … 4.17).
    Fields11,
    /// 15 stat fields (4.18+): with discards.
    Fields15,
    /// 17 stat fields (5.5+): with discards and flushes.
    Fields17,
}

/// One row of `/proc/diskstats`. Counter names follow iostats.rst; times are milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DiskStat<'a> {
    /// Device major number.
    pub major: u32,
    /// Device minor number.
    pub minor: u32,
    /// Kernel device name (`sda`, `dm-3`, `nvme0n1p2`, `md127`).
    pub name: &'a str,
    /// The line's shape.
    pub format: DiskstatsFormat,
    /// Reads completed.
    pub reads: u64,
    /// Adjacent reads merged.
    pub reads_merged: u64,
    /// 512-byte sectors read.
    pub sectors_read: u64,
    /// Milliseconds spent reading (sum over all reads).
    pub read_ms: u64,
    /// Writes completed.
    pub writes: u64,
    /// Adjacent writes merged.
    pub writes_merged: u64,
    /// 512-byte sectors written.
    pub sectors_written: u64,
    /// Milliseconds spent writing.
    pub write_ms: u64,
    /// I/Os currently in flight (a gauge, not a counter).
    pub in_flight: u64,
    /// Milliseconds the device had I/O in flight (iostat's `tot_ticks`, the base of %util).
    pub io_ms: u64,
    /// Weighted milliseconds doing I/O (iostat's `rq_ticks`, the base of aqu-sz).
    pub queue_ms: u64,
    /// Discards completed (4.18+, else 0).
    pub discards: u64,
    /// Discards merged (4.18+, else 0).
    pub discards_merged: u64,
    /// Sectors discarded (4.18+, else 0).
    pub sectors_discarded: u64,
    /// Milliseconds spent discarding (4.18+, else 0).
    pub discard_ms: u64,
    /// Flush requests completed (5.5+, else 0).
    pub flushes: u64,
    /// Milliseconds spent flushing (5.5+, else 0).
    pub flush_ms: u64,
}

/// Parses the whole file. Never panics; malformed lines are returned in `errors`, the rest parse.
pub fn parse(text: &str) -> Rows<DiskStat<'_>> {
    let _ = (text, ParseError::new(0, "", ""));
    unimplemented!("diskstats::parse")
}
