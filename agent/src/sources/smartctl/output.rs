//! What one `smartctl --json` call printed, checked to be smartctl's own output before it is
//! taken as a reading.
//!
//! Any JSON object with a `smartctl` or `device` key parses ([`super::parse`], which also reads
//! smartd's state files, without smartctl's own fields); a reading whose drive fields are all
//! absent would then pass for a healthy drive — no failing verdict, no bad counts. So the
//! output of a call must carry what every smartctl ≥ 7.0 prints
//! (smartmontools/smartmontools@f1d0da9c, `src/smartctl.cpp`; the same in `RELEASE_7_0`):
//!
//! * `json_format_version`, `[1, 0]` — set first, by `js_initialize()`, before the options
//!   are parsed. `[0, 1]` before commit e7b0e831c ("Set JSON format version to 1.0",
//!   2018-12-27), in the development versions that called themselves 6.7 and printed the same
//!   field names (`scrutiny-scsi-seagate-st1200mm0088-smartctl-6.7.json`); any other major
//!   version is a format this parser does not know.
//! * `smartctl.exit_status`, an integer — set by `main()` after `main_worker()` returns,
//!   whatever it returned (also when the command line was refused or the device not opened).
//! * `device.{name, type, protocol}`, strings — set by `js_device_info(jglb["device"], …)`
//!   once the device is open, before `ataPrintMain`/`scsiPrintMain`/`nvmePrintMain` read it.
//!   Required only of a reading ([`super::Outcome::Read`]): smartctl stops before opening the
//!   device when it refuses its command line (exit bit 0), when it cannot open it (bit 1),
//!   and for `Device is in STANDBY (OS) mode` (the kernel says the disk is powered down).
//!
//! What is missing is a [`ParseError`] naming it; the caller keeps its last good reading.

use super::{from_object, object, DriveHealth, Node, Outcome, ParseError, Protocol};

/// Parses what one `smartctl --json` call printed, refusing JSON that is not smartctl's.
pub fn parse(json: &str) -> Result<DriveHealth, ParseError> {
    let root = object(json)?;
    let first = json.lines().next().unwrap_or_default();
    let missing = |what: &str| {
        ParseError::new(
            1,
            first,
            format_args!("not smartctl's output: no {what} (smartctl ≥ 7.0 always prints it)"),
        )
    };
    let format = root
        .get("json_format_version")
        .ok_or_else(|| missing("json_format_version"))?;
    let major = format
        .as_array()
        .and_then(|v| v.first())
        .and_then(Node::as_u64);
    match major {
        Some(0 | 1) => {}
        Some(m) => {
            return Err(ParseError::new(
                1,
                first,
                format_args!("json_format_version {m}: only formats 0 and 1 are known"),
            ))
        }
        None => {
            // The member as the document has it: the tree keeps only what is read.
            let shown = serde_json::from_str::<serde_json::Value>(json)
                .ok()
                .and_then(|d| d.get("json_format_version").map(ToString::to_string))
                .unwrap_or_default();
            return Err(ParseError::new(
                1,
                first,
                format_args!("json_format_version {shown}: not [major, minor]"),
            ));
        }
    }
    if root
        .get("smartctl")
        .and_then(|s| s.get("exit_status"))
        .and_then(Node::as_u64)
        .is_none()
    {
        return Err(missing("smartctl.exit_status"));
    }
    let h = from_object(&root, json)?;
    if h.outcome() == Outcome::Read {
        let absent = [
            ("device.name", h.device.is_none()),
            ("device.type", h.device_type.is_none()),
            ("device.protocol", h.protocol == Protocol::Unknown),
        ];
        if let Some((what, _)) = absent.iter().find(|(_, a)| *a) {
            return Err(ParseError::new(
                1,
                first,
                format_args!(
                    "not a reading: no {what}, though smartctl read the device (exit status {})",
                    h.exit_status.unwrap_or_default()
                ),
            ));
        }
    }
    Ok(h)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn fixture(name: &str) -> String {
        std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("fixtures/smartctl")
                .join(name),
        )
        .expect("fixture is readable")
    }

    /// Every real smartctl document of the corpus is smartctl's output, read as `parse` reads
    /// it; smartd's state files and the one document whose `smartctl` section its source cut
    /// are not.
    #[test]
    fn every_real_smartctl_document_passes_and_others_do_not() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/smartctl");
        let mut passed = 0;
        for entry in std::fs::read_dir(dir).expect("fixture dir") {
            let path = entry.expect("entry").path();
            let name = path
                .file_name()
                .and_then(|n| n.to_str())
                .unwrap_or_default()
                .to_owned();
            if !name.ends_with(".json") {
                continue;
            }
            let text = std::fs::read_to_string(&path).expect("readable");
            let r = parse(&text);
            let not_smartctl = name.starts_with("garbage-")
                || name.starts_with("truncated-")
                || name.starts_with("synthetic-smartd-")
                || name.contains("no-smartctl-section");
            if not_smartctl {
                assert!(r.is_err(), "{name}: {r:?}");
            } else {
                assert_eq!(
                    r.as_ref().ok(),
                    super::super::parse(&text).ok().as_ref(),
                    "{name}"
                );
                passed += 1;
            }
        }
        assert!(passed >= 55, "{passed} documents");
        let err = parse(&fixture(
            "synthetic-smartd-jsonstate-ata-seagate-pending-16.json",
        ))
        .expect_err("smartd's state");
        assert!(err.reason.contains("no smartctl.exit_status"), "{err}");
    }

    #[test]
    fn json_that_is_not_smartctls_is_refused_with_what_it_lacks() {
        let err = parse(r#"{"hello":["world"],"smartctl":"yes"}"#).expect_err("refused");
        assert_eq!(
            err.reason,
            "not smartctl's output: no json_format_version (smartctl ≥ 7.0 always prints it)"
        );
        let err = parse(r#"{"json_format_version":[1,0],"smartctl":"yes"}"#).expect_err("refused");
        assert!(err.reason.contains("no smartctl.exit_status"), "{err}");
        let err = parse(r#"{"json_format_version":[2,0],"smartctl":{"exit_status":0}}"#)
            .expect_err("refused");
        assert!(
            err.reason.contains("only formats 0 and 1 are known"),
            "{err}"
        );
        let err = parse(r#"{"json_format_version":"1.0","smartctl":{"exit_status":0}}"#)
            .expect_err("refused");
        assert!(err.reason.contains("not [major, minor]"), "{err}");
        // Exit 0 and no device: smartctl read something it does not name.
        let err = parse(r#"{"json_format_version":[1,0],"smartctl":{"exit_status":0}}"#)
            .expect_err("refused");
        assert!(
            err.reason.contains("not a reading: no device.name"),
            "{err}"
        );
        let err = parse(
            r#"{"json_format_version":[1,0],"smartctl":{"exit_status":0},"device":{"name":"/dev/sda","type":"sat"}}"#,
        )
        .expect_err("refused");
        assert!(err.reason.contains("no device.protocol"), "{err}");
    }

    /// Outputs that read no drive stop before smartctl opens the device and have no `device`:
    /// the device not opened (exit 2, a real Windows capture), a command line refused.
    #[test]
    fn outputs_that_read_nothing_need_no_device() {
        let h = parse(&fixture(
            "scrutiny-open-failed-windows-exit2-no-device.json",
        ))
        .expect("smartctl's output");
        assert_eq!(h.outcome(), Outcome::NotRead);
        let h = parse(
            r#"{"json_format_version":[1,0],"smartctl":{"exit_status":1,"messages":[{"string":"=======> UNRECOGNIZED OPTION: x","severity":"error"}]}}"#,
        )
        .expect("smartctl's output");
        assert_eq!(h.outcome(), Outcome::NotRead);
    }
}
