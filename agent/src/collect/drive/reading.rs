//! What one `smartctl` call amounts to: a reading, a disk asleep, a RAID controller's virtual
//! drive, or an error; and what the worker hands the collector.
//!
//! smartctl's output is taken as a reading only when it is smartctl's
//! ([`smartctl::output::parse`]): any other JSON is a source error and the last reading stays.

use std::time::Instant;

use crate::collect::fs::Placement;
use crate::command::{CommandError, Finished};
use crate::sources::smartctl::{self, DriveHealth, Outcome};
use crate::sources::ParseError;

/// Why a drive was not read.
#[derive(Debug, thiserror::Error)]
pub enum DriveError {
    /// smartctl could not be run, hung, or printed too much.
    #[error("smartctl {device}: {source}")]
    Command {
        /// `/dev/sdX`.
        device: String,
        /// What went wrong.
        source: CommandError,
    },
    /// Its output was not smartctl JSON (garbage, or cut short).
    #[error("smartctl {device}: exit status {status}: {source}")]
    Parse {
        /// `/dev/sdX`.
        device: String,
        /// smartctl's exit status.
        status: i32,
        /// What was wrong.
        source: ParseError,
    },
    /// The disk's call was not started in its round: hung calls of other disks held all
    /// `max_running` places until the next round began. It goes first in the next round.
    #[error(
        "smartctl {device}: not read in its round: all {max_running} calls (max_running) were taken until the round ended; read first in the next round"
    )]
    NotStarted {
        /// `/dev/sdX`.
        device: String,
        /// `[drive] max_running`.
        max_running: usize,
    },
    /// smartctl answered but read nothing: the command line was refused (exit bit 0) or the
    /// device could not be opened (bit 1 without a low-power message).
    #[error("smartctl {device}: not read (exit status {status}): {why}")]
    NotRead {
        /// `/dev/sdX`.
        device: String,
        /// smartctl's exit status.
        status: i32,
        /// smartctl's messages, or its standard error.
        why: String,
    },
}

/// What one call amounted to.
#[derive(Debug)]
pub(super) enum ReadResult {
    /// The drive was read.
    Read(Box<DriveHealth>),
    /// `-n standby` left it asleep in this mode: not read, not an error.
    Asleep(String),
    /// The device is a hardware RAID controller's virtual drive: smartctl asks for
    /// `-d megaraid,N`. Not a drive, not an error (the message).
    BehindController(String),
    /// Not read.
    Failed(DriveError),
}

/// One disk and where it sits.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Disk {
    /// Kernel name (`sda`, `nvme0n1`); for a disk behind a MegaRAID controller its bus and
    /// type (`bus/0:megaraid,1`).
    pub(super) name: String,
    /// The MD arrays and multipath maps above it.
    pub(super) place: Placement,
}

/// What the worker hands the collector.
#[derive(Debug)]
pub(super) enum Update {
    /// A round started with these disks (the others are gone).
    Disks(Vec<Disk>),
    /// A call that was not a disk's reading failed (listing the disks behind a RAID controller;
    /// a SAS disk's text error log).
    Error(DriveError),
    /// A call ended, `at` that instant.
    Read {
        name: String,
        at: Instant,
        result: ReadResult,
        /// A SAS disk's non-medium error count in the reading came from a `-l error` call this
        /// long before the reading (0: the call that followed it; more: carried from an earlier
        /// round's call, [`super::worker::WorkerConfig::sas_error_log_every`]). `None`: no such count.
        error_log_age_s: Option<f64>,
    },
    /// smartd's attribute log confirmed the disk's last reading, `at` that instant: no
    /// smartctl call ([`super::attrlog`]).
    Confirmed {
        name: String,
        at: Instant,
        fresh: super::attrlog::Fresh,
    },
}

/// Whether a reading is a SAS/SCSI disk's without the non-medium error count, which smartctl
/// prints only as text (`smartctl -l error`): then a second, text call is made for it.
pub(super) fn wants_text(h: &DriveHealth) -> bool {
    h.protocol == smartctl::Protocol::Scsi
        && h.scsi
            .as_ref()
            .is_some_and(|s| s.non_medium_errors.is_none())
}

/// What a finished call amounts to. JSON that is not smartctl's own output (without the fields
/// every smartctl prints, [`smartctl::output`]) is no reading: taken as one, a drive whose
/// values are all absent would look healthy.
pub(super) fn interpret(device: &str, fin: &Finished) -> ReadResult {
    let mut health = match smartctl::output::parse(&fin.stdout) {
        Ok(h) => h,
        Err(source) => {
            return ReadResult::Failed(DriveError::Parse {
                device: device.to_owned(),
                status: fin.status,
                source,
            })
        }
    };
    if health.exit_status.is_none() {
        health.exit_status = u8::try_from(fin.status).ok();
    }
    match health.outcome() {
        Outcome::Read => ReadResult::Read(Box::new(health)),
        Outcome::LowPower(mode) => ReadResult::Asleep(mode),
        Outcome::NotRead => {
            let said: Vec<&str> = health.messages.iter().map(|m| m.text.as_str()).collect();
            // os_linux.cpp: "DELL or MegaRaid controller, please try adding '-d megaraid,N'"
            if let Some(m) = said.iter().find(|m| m.contains("-d megaraid")) {
                return ReadResult::BehindController((*m).to_owned());
            }
            let why = if said.is_empty() {
                fin.stderr.clone()
            } else {
                said.join(" / ")
            };
            ReadResult::Failed(DriveError::NotRead {
                device: device.to_owned(),
                status: fin.status,
                why,
            })
        }
    }
}
