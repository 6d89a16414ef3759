//! `/sys/class/net/<iface>/{speed,duplex,operstate,carrier_changes,mtu}`.

use crate::root::Root;

use super::SourceError;

/// Link duplex, as `sar -n DEV` uses it for %ifutil.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Duplex {
    /// Full duplex: rx and tx each have the whole link speed.
    Full,
    /// Half duplex: rx and tx share it.
    Half,
    /// Unknown (link down, virtual NIC, or no `duplex` file).
    #[default]
    Unknown,
}

/// Link attributes of one interface. Every field is optional: virtual NICs lack most of them.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NetInfo {
    /// `speed` in Mb/s; `None` when absent, unreadable (EINVAL when down) or -1.
    pub speed_mbps: Option<u64>,
    /// `duplex`.
    pub duplex: Duplex,
    /// `operstate` (`up`, `down`, `unknown`, `lowerlayerdown`, …).
    pub operstate: Option<String>,
    /// `carrier_changes`.
    pub carrier_changes: Option<u64>,
    /// `mtu`.
    pub mtu: Option<u64>,
}

/// `speed` text → Mb/s: `"10000\n"` → 10000; `"-1"`, `"4294967295"` (SPEED_UNKNOWN as u32) or
/// garbage → None.
pub fn parse_speed(text: &str) -> Option<u64> {
    let _ = text;
    unimplemented!("parse_speed")
}

/// `duplex` text → [`Duplex`].
pub fn parse_duplex(text: &str) -> Duplex {
    let _ = text;
    unimplemented!("parse_duplex")
}

/// Reads the attributes of `iface`; missing files leave fields `None`.
pub fn read(root: &Root, iface: &str) -> Result<NetInfo, SourceError> {
    let _ = (root, iface);
    unimplemented!("sysnet::read")
}
