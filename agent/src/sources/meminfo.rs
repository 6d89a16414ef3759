//! `/proc/meminfo`: the page-cache state that explains write stalls (Dirty, Writeback).

use super::ParseError;

/// The `/proc/meminfo` fields the agent reports, in kB (the file's unit; "kB" means KiB).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct MemInfo {
    /// `MemTotal`.
    pub total_kb: Option<u64>,
    /// `MemAvailable` (3.14+).
    pub available_kb: Option<u64>,
    /// `Cached`.
    pub cached_kb: Option<u64>,
    /// `Dirty`: waiting to be written back.
    pub dirty_kb: Option<u64>,
    /// `Writeback`: being written back now.
    pub writeback_kb: Option<u64>,
}

/// Parses `/proc/meminfo`; unknown keys are ignored.
pub fn parse(text: &str) -> Result<MemInfo, ParseError> {
    let _ = text;
    unimplemented!("meminfo::parse")
}
