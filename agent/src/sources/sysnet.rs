//! `/sys/class/net/<iface>/{speed,duplex,operstate,carrier_changes,mtu}`.
//!
//! Kernel documentation: `Documentation/ABI/testing/sysfs-class-net`. `speed` is Mb/s; a link
//! that is down, or a driver that cannot tell, reports SPEED_UNKNOWN: `-1` on current kernels,
//! `4294967295` where it was printed unsigned, and `65535` from drivers that fill only the
//! 16-bit legacy ethtool field. Reading `speed` or `duplex` of an interface that is not running
//! fails with EINVAL (EOPNOTSUPP for drivers without link settings, as on `lo`); that means
//! "unknown", not a broken source. `carrier_changes` exists since 3.15.

use crate::root::JoinSized;
use std::io;

use crate::root::{read_value_into, Root};

use super::sysblock::read_number;
use super::{parse_u64, SourceError};

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
    let text = text.trim();
    // Negative values are SPEED_UNKNOWN; no other sign is printed.
    if text.starts_with('-') {
        return None;
    }
    let mbps = parse_u64(text)?;
    match mbps {
        0 | 65_535 => None,
        v if v >= u64::from(u32::MAX) => None,
        v => Some(v),
    }
}

/// `duplex` text → [`Duplex`].
pub fn parse_duplex(text: &str) -> Duplex {
    match text.trim() {
        "full" => Duplex::Full,
        "half" => Duplex::Half,
        _ => Duplex::Unknown,
    }
}

/// Maps the errors a link attribute gives for "no link information" to absence.
fn link_attribute(read: Result<bool, SourceError>) -> Result<bool, SourceError> {
    match read {
        Err(SourceError::Io { source, .. }) if is_no_link_info(&source) => Ok(false),
        other => other,
    }
}

fn is_no_link_info(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EINVAL) | Some(libc::EOPNOTSUPP)
    )
}

/// Reads the attributes of `iface`; missing files leave fields `None`.
///
/// A malformed `mtu` or `carrier_changes` is an error; a malformed `speed` is "unknown", since
/// drivers print odd values there for links they cannot measure.
pub fn read(root: &Root, iface: &str) -> Result<NetInfo, SourceError> {
    let mut info = NetInfo::default();
    // Interface names cannot contain '/' (dev_valid_name); one that does is not a path to follow.
    if iface.is_empty() || iface == "." || iface == ".." || iface.contains('/') {
        return Ok(info);
    }
    let dir = root.sys(&format!("class/net/{iface}"));
    let mut buf = String::new();
    if link_attribute(read_value_into(&dir.join_sized("speed"), &mut buf))? {
        info.speed_mbps = parse_speed(&buf);
    }
    if link_attribute(read_value_into(&dir.join_sized("duplex"), &mut buf))? {
        info.duplex = parse_duplex(&buf);
    }
    if read_value_into(&dir.join_sized("operstate"), &mut buf)? {
        let state = buf.trim();
        info.operstate = (!state.is_empty()).then(|| state.to_owned());
    }
    info.carrier_changes = read_number(&dir.join_sized("carrier_changes"), &mut buf)?;
    info.mtu = read_number(&dir.join_sized("mtu"), &mut buf)?;
    Ok(info)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::path::{Path, PathBuf};

    fn server() -> Root {
        let base = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/sysfs/disk-server");
        Root::new(base.join("proc"), base.join("sys"))
    }

    #[test]
    fn speeds() {
        assert_eq!(parse_speed("10000\n"), Some(10_000));
        assert_eq!(parse_speed("25000"), Some(25_000));
        assert_eq!(parse_speed("800000\n"), Some(800_000));
        for unknown in [
            "-1\n",
            "-1",
            "0",
            "4294967295\n",
            "65535",
            "18446744073709551615",
            "",
            "\n",
            "abc",
            "1e4",
            "+100",
            "10 000",
            "-",
            "99999999999999999999",
        ] {
            assert_eq!(parse_speed(unknown), None, "{unknown:?}");
        }
    }

    #[test]
    fn duplexes() {
        assert_eq!(parse_duplex("full\n"), Duplex::Full);
        assert_eq!(parse_duplex("half"), Duplex::Half);
        assert_eq!(parse_duplex("unknown\n"), Duplex::Unknown);
        assert_eq!(parse_duplex(""), Duplex::Unknown);
        assert_eq!(parse_duplex("FULL"), Duplex::Unknown);
    }

    #[test]
    fn reads_a_fast_link() {
        let info = read(&server(), "ens1f0np0").expect("readable");
        assert_eq!(
            info,
            NetInfo {
                speed_mbps: Some(25_000),
                duplex: Duplex::Full,
                operstate: Some("up".to_owned()),
                carrier_changes: Some(4),
                mtu: Some(9000),
            }
        );
    }

    #[test]
    fn down_half_and_unknown_links() {
        let root = server();
        let down = read(&root, "eno2").expect("readable");
        assert_eq!(
            (down.speed_mbps, down.duplex, down.operstate.as_deref()),
            (None, Duplex::Unknown, Some("down"))
        );
        let half = read(&root, "eno3").expect("readable");
        assert_eq!((half.speed_mbps, half.duplex), (Some(100), Duplex::Half));
        let bond = read(&root, "bond0").expect("readable");
        assert_eq!((bond.speed_mbps, bond.carrier_changes), (None, Some(12)));
    }

    #[test]
    fn missing_files_are_none() {
        let root = server();
        let lo = read(&root, "lo").expect("readable");
        assert_eq!(
            lo,
            NetInfo {
                speed_mbps: None,
                duplex: Duplex::Unknown,
                operstate: Some("unknown".to_owned()),
                carrier_changes: Some(0),
                mtu: Some(65536),
            }
        );
        assert_eq!(read(&root, "gone0").expect("readable"), NetInfo::default());
        assert_eq!(
            read(&root, "../block").expect("readable"),
            NetInfo::default()
        );
        assert_eq!(read(&root, "..").expect("readable"), NetInfo::default());
    }

    #[test]
    fn garbage_speed_is_unknown_but_garbage_mtu_is_an_error() {
        let e = read(&server(), "weird0").expect_err("mtu abc");
        assert!(e.to_string().contains("weird0/mtu"), "{e}");
    }

    #[test]
    fn einval_and_eopnotsupp_on_link_attributes_mean_unknown() {
        let path = PathBuf::from("/sys/class/net/lo/speed");
        for errno in [libc::EINVAL, libc::EOPNOTSUPP] {
            let read = Err(SourceError::io(&path, io::Error::from_raw_os_error(errno)));
            assert!(matches!(link_attribute(read), Ok(false)), "errno {errno}");
        }
        let read = Err(SourceError::io(
            &path,
            io::Error::from_raw_os_error(libc::EACCES),
        ));
        assert!(matches!(link_attribute(read), Err(SourceError::Io { .. })));
        assert!(matches!(link_attribute(Ok(true)), Ok(true)));
    }

    /// On a real kernel `lo/speed` answers EINVAL.
    #[test]
    #[ignore = "reads the live host"]
    fn live_loopback() {
        let info = read(&Root::default(), "lo").expect("EINVAL is not an error");
        assert_eq!((info.speed_mbps, info.duplex), (None, Duplex::Unknown));
        assert!(info.mtu.is_some());
    }

    proptest! {
        #[test]
        fn never_panics(text in "\\PC*") {
            if let Some(v) = parse_speed(&text) {
                prop_assert!(v > 0 && v < u64::from(u32::MAX));
            }
            let _ = parse_duplex(&text);
        }

        #[test]
        fn printed_speeds_parse_back(v in 1u64..65_535) {
            prop_assert_eq!(parse_speed(&format!("{v}\n")), Some(v));
        }
    }
}
