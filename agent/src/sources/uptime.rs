//! `/proc/uptime`: seconds since boot with two decimals. sysstat takes its interval from here
//! (in hundredths of a second), so rates divide by the same interval iostat would.

use super::ParseError;

/// Parses the first number of `/proc/uptime` into hundredths of a second, exactly (no float).
pub fn parse(text: &str) -> Result<u64, ParseError> {
    let _ = text;
    unimplemented!("uptime::parse")
}
