//! `/proc/pressure/io` (PSI, Linux 4.20+, `Documentation/accounting/psi.rst`).

use super::ParseError;

/// One `some` or `full` line.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct PsiLine {
    /// Share of wall time stalled, % over the last 10 s.
    pub avg10: f64,
    /// Over the last 60 s.
    pub avg60: f64,
    /// Over the last 300 s.
    pub avg300: f64,
    /// Total stall time, microseconds.
    pub total_us: u64,
}

/// The pressure file: `some` and, except for the CPU file before 5.13, `full`.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Pressure {
    /// At least one task stalled.
    pub some: Option<PsiLine>,
    /// All non-idle tasks stalled.
    pub full: Option<PsiLine>,
}

/// Parses a pressure file.
pub fn parse(text: &str) -> Result<Pressure, ParseError> {
    let _ = text;
    unimplemented!("pressure::parse")
}
