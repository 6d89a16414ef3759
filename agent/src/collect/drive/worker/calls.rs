//! A SAS disk's second call, `smartctl -l error` (its non-medium error count, printed only as
//! text), and the listing of the disks behind MegaRAID controllers (`smartctl --scan`): the
//! worker's calls that are not a disk's JSON reading.

use std::time::{Duration, Instant};

use super::super::disks::Target;
use super::super::reading::{DriveError, Update};
use super::{DriveWorker, Running, POLL_S};
use crate::command::Spawned;
use crate::sources::smartctl::scan::{self, ScanEntry};
use crate::sources::smartctl::DriveHealth;

impl DriveWorker {
    /// The disks behind MegaRAID controllers, from `smartctl --scan` (which lists them without
    /// opening any device, so no sleeping disk is woken), waited for at most `timeout` — while
    /// the calls still running from the last round are looked after as usual.
    pub(super) fn scan(
        &mut self,
        out: &mut Vec<Update>,
    ) -> Result<Vec<(String, Target)>, DriveError> {
        let err = |source| DriveError::Command {
            device: "--scan".into(),
            source,
        };
        let mut child = Spawned::start(&self.cfg.smartctl, &["--scan"], self.cfg.max_output_bytes)
            .map_err(err)?;
        let started = Instant::now();
        let fin = loop {
            if let Some(r) = child.poll() {
                break r.map_err(err)?;
            }
            if started.elapsed() >= self.cfg.timeout {
                child.kill();
                return Err(err(child.timeout_error(self.cfg.timeout)));
            }
            self.reap(out);
            std::thread::sleep(Duration::from_secs_f64(POLL_S));
        };
        let entries = scan::parse(&fin.stdout).map_err(|source| DriveError::Parse {
            device: "--scan".into(),
            status: fin.status,
            source,
        })?;
        Ok(entries
            .into_iter()
            .filter(ScanEntry::is_megaraid)
            .map(|e| {
                let name = format!("{}:{}", e.device.trim_start_matches("/dev/"), e.device_type);
                let t = Target {
                    path: e.device,
                    device_type: Some(e.device_type),
                };
                (name, t)
            })
            .collect())
    }

    /// Puts disk `name`'s last `-l error` count into its reading `h` (a SAS reading without
    /// one); its age, or `None` when no call has given one yet.
    pub(super) fn carry_error_log(&self, name: &str, h: &mut DriveHealth) -> Option<f64> {
        let log = self.error_log.get(name)?;
        let sc = h.scsi.as_mut()?;
        if sc.non_medium_errors.is_some() {
            return None;
        }
        sc.non_medium_errors = Some(log.count);
        Some((self.last_now_s - log.at_s).max(0.0))
    }

    /// Starts the `-l error` text call of a SAS disk read as `h`; `Some(h)` back when it could
    /// not be started (the reading is then reported without the count).
    pub(super) fn start_text(
        &mut self,
        r: &Running,
        h: Box<DriveHealth>,
        out: &mut Vec<Update>,
    ) -> Option<Box<DriveHealth>> {
        let target = self.disks.get(&r.name)?;
        let mut args = vec!["-l", "error", "-n", "standby"];
        if let Some(t) = &target.device_type {
            args.extend(["-d", t.as_str()]);
        }
        args.push(target.path.as_str());
        match Spawned::start(&self.cfg.smartctl, &args, self.cfg.max_output_bytes) {
            Ok(child) => {
                self.running.push(Running {
                    name: r.name.clone(),
                    label: r.label.clone(),
                    started: Instant::now(),
                    child,
                    text_for: Some(h),
                    with_error_log: true,
                });
                None
            }
            Err(source) => {
                out.push(Update::Error(DriveError::Command {
                    device: format!("-l error {}", r.label),
                    source,
                }));
                Some(h)
            }
        }
    }
}
