//! `smartctl --scan` (and `--scan-open`): the devices smartctl finds, one per line, each with the
//! device type to read it with.
//!
//! ```text
//! /dev/sda -d scsi # /dev/sda, SCSI device
//! /dev/bus/0 -d megaraid,1 # /dev/bus/0 [megaraid_disk_01], SCSI device
//! /dev/bus/0 -d sat+megaraid,2 # /dev/bus/0 [megaraid_disk_02] [SAT], ATA device
//! ```
//!
//! The part before ` # ` is the command-line form (`DEVICE -d TYPE`); the comment after it is for
//! people. On Linux the disks behind a MegaRAID/PERC controller appear only here, as
//! `/dev/bus/N -d megaraid,ID` (`os_linux.cpp`, `linux_megaraid_device`): they have no block
//! device of their own. `--scan-open` also prints lines wholly commented out (`# /dev/sdx -d
//! … open failed: …`) for devices it could not open: skipped.

use super::super::ParseError;

/// One device of the scan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScanEntry {
    /// The device path: `/dev/sda`, `/dev/bus/0`.
    pub device: String,
    /// The type to pass as `-d`: `scsi`, `sat`, `nvme`, `megaraid,1`, `sat+megaraid,2`.
    pub device_type: String,
}

impl ScanEntry {
    /// Whether it is a disk behind a MegaRAID controller (`megaraid,N`, `sat+megaraid,N`).
    pub fn is_megaraid(&self) -> bool {
        self.device_type
            .rsplit('+')
            .next()
            .is_some_and(|t| t.starts_with("megaraid,"))
    }
}

/// Parses `smartctl --scan` output. A line that is not `DEVICE -d TYPE` is an error naming it.
pub fn parse(text: &str) -> Result<Vec<ScanEntry>, ParseError> {
    let mut out = Vec::new();
    for (no, line) in super::super::Lines::new(text) {
        let cmd = line.split_once(" #").map_or(line, |(c, _)| c).trim();
        if cmd.is_empty() || cmd.starts_with('#') {
            continue;
        }
        let words: Vec<&str> = super::super::fields(cmd).collect();
        match words.as_slice() {
            [device, "-d", device_type] => out.push(ScanEntry {
                device: (*device).to_owned(),
                device_type: (*device_type).to_owned(),
            }),
            _ => {
                return Err(ParseError::new(
                    no,
                    line,
                    "expected \"DEVICE -d TYPE # comment\"",
                ))
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> String {
        let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("fixtures/smartctl-scan")
            .join(name);
        std::fs::read_to_string(p).expect("fixture")
    }

    #[test]
    fn disks_behind_a_megaraid_controller() {
        let scan = parse(&fixture("scrutiny-issue267-scan-megaraid-bus0.txt")).expect("parses");
        assert_eq!(scan.len(), 8);
        assert_eq!(
            scan[0],
            ScanEntry {
                device: "/dev/sda".into(),
                device_type: "scsi".into()
            }
        );
        let mr: Vec<&str> = scan
            .iter()
            .filter(|e| e.is_megaraid())
            .map(|e| e.device_type.as_str())
            .collect();
        assert_eq!(
            mr,
            [
                "megaraid,1",
                "megaraid,2",
                "megaraid,3",
                "megaraid,6",
                "megaraid,7",
                "megaraid,8"
            ]
        );
        let two =
            parse(&fixture("sce-pr205-scan-megaraid-two-buses-fragment.txt")).expect("parses");
        let buses: std::collections::BTreeSet<&str> = two
            .iter()
            .filter(|e| e.is_megaraid())
            .map(|e| e.device.as_str())
            .collect();
        assert_eq!(
            buses.into_iter().collect::<Vec<_>>(),
            ["/dev/bus/0", "/dev/bus/11"]
        );
        assert_eq!(two.iter().filter(|e| e.is_megaraid()).count(), 15);
    }

    #[test]
    fn sat_behind_megaraid_comments_and_bad_lines() {
        let scan = parse(
            "/dev/bus/0 -d sat+megaraid,2 # /dev/bus/0 [megaraid_disk_02] [SAT], ATA device\n\
             # /dev/sdx -d scsi # /dev/sdx, SCSI device open failed: No such device\n\
             \n/dev/nvme0 -d nvme # /dev/nvme0, NVMe device\n",
        )
        .expect("parses");
        assert_eq!(scan.len(), 2);
        assert!(scan[0].is_megaraid());
        assert!(!scan[1].is_megaraid());
        let e = parse("/dev/sda -d scsi\n/dev/sdb scsi # no -d\n").expect_err("refused");
        assert_eq!(e.line, 2, "{e}");
        assert!(parse("").expect("empty").is_empty());
    }
}
