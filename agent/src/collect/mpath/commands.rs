//! The commands behind the kernel view when the ioctl cannot be used — `dmsetup status|table
//! --target multipath` every `dmsetup_interval_s` (a fork+exec costs 1-2 ms of CPU, too much for
//! every second on a 200-disk server) — and multipathd, when it runs: `show maps json` over its
//! socket (or the `multipathd` command) every `multipathd_interval_s`, for path-group
//! priorities, checker states, vendor and product. Never required. Both run as one
//! [`Worker`] on the monitor's worker.

use std::sync::Arc;
use std::time::Duration;

use super::kernel::DmView;
use super::MpathConfig;
use crate::command::{CommandError, CommandRunner, Worker};
use crate::sources::dmmultipath;
use crate::sources::multipathd::{self, JsonMap};
use crate::sources::SourceError;

/// What the command thread hands over.
#[derive(Debug, Default)]
pub(super) struct CommandRound {
    /// `dmsetup`'s view, with the first bad line when some were malformed.
    pub(super) dm: Option<Result<(DmView, Option<SourceError>), SourceError>>,
    /// multipathd's maps (empty when it does not answer).
    pub(super) multipathd: Option<Vec<JsonMap>>,
}

/// The commands that are due, by their own intervals.
pub(super) struct MpathWorker {
    cfg: MpathConfig,
    runner: Arc<dyn CommandRunner>,
    timeout: Duration,
    /// Run `dmsetup` (the ioctl is not used).
    need_dm: bool,
    dm_interval_s: f64,
    mpd_interval_s: f64,
    next_dm_s: f64,
    next_mpd_s: f64,
}

impl MpathWorker {
    /// The job of a monitor configured with `cfg`; `need_dm` when the kernel view comes from
    /// `dmsetup`. On a thread, no command runs more than once a second.
    pub(super) fn new(
        cfg: &MpathConfig,
        runner: Arc<dyn CommandRunner>,
        need_dm: bool,
        on_thread: bool,
    ) -> Self {
        let interval = |s: f64| if on_thread { s.max(1.0) } else { s };
        Self {
            timeout: Duration::from_secs_f64(cfg.command_timeout_s.clamp(0.1, 3600.0)),
            dm_interval_s: interval(cfg.dmsetup_interval_s),
            mpd_interval_s: interval(cfg.multipathd_interval_s),
            cfg: cfg.clone(),
            runner,
            need_dm,
            next_dm_s: 0.0,
            next_mpd_s: 0.0,
        }
    }
}

impl Worker for MpathWorker {
    type Output = CommandRound;

    fn run_due(&mut self, now_s: f64, _woken: bool) -> Option<CommandRound> {
        let mut round = CommandRound::default();
        if self.need_dm && now_s >= self.next_dm_s {
            round.dm = Some(run_dmsetup(&self.cfg, self.runner.as_ref(), self.timeout));
            self.next_dm_s = now_s + self.dm_interval_s;
        }
        if self.cfg.use_multipathd && now_s >= self.next_mpd_s {
            round.multipathd = Some(run_multipathd(
                &self.cfg,
                self.runner.as_ref(),
                self.timeout,
            ));
            self.next_mpd_s = now_s + self.mpd_interval_s;
        }
        (round.dm.is_some() || round.multipathd.is_some()).then_some(round)
    }

    fn next_due_s(&self) -> f64 {
        let dm = if self.need_dm {
            self.next_dm_s
        } else {
            f64::INFINITY
        };
        let mpd = if self.cfg.use_multipathd {
            self.next_mpd_s
        } else {
            f64::INFINITY
        };
        dm.min(mpd)
    }
}

/// `dmsetup status` and `table --target multipath`, joined by map name. A malformed line costs
/// only its own map: the others are kept and the first bad line comes back as the error.
pub(super) fn run_dmsetup(
    cfg: &MpathConfig,
    runner: &dyn CommandRunner,
    timeout: Duration,
) -> Result<(DmView, Option<SourceError>), SourceError> {
    let status = runner.run(&cfg.dmsetup, &["status", "--target", "multipath"], timeout)?;
    let table = runner.run(&cfg.dmsetup, &["table", "--target", "multipath"], timeout)?;
    let status = dmmultipath::parse_status(&status);
    let mut table = dmmultipath::parse_table(&table);
    let first_error = status
        .errors
        .first()
        .or(table.errors.first())
        .cloned()
        .map(|e| SourceError::parse(&cfg.dmsetup, e));
    let mut view = DmView::new();
    for s in status.rows {
        let Some(name) = s.name.clone() else { continue };
        let t = table
            .rows
            .iter()
            .position(|t| t.name.as_deref() == Some(name.as_str()))
            .map(|i| table.rows.swap_remove(i));
        view.insert(name, (s, t));
    }
    Ok((view, first_error))
}

/// multipathd's maps: socket first, then the command; nothing when neither answers.
fn run_multipathd(
    cfg: &MpathConfig,
    runner: &dyn CommandRunner,
    timeout: Duration,
) -> Vec<JsonMap> {
    let text = match multipathd::query_socket(&cfg.multipathd_socket, "show maps json", timeout) {
        Ok(Some(t)) => Some(t),
        Ok(None) | Err(_) if cfg.multipathd.as_os_str().is_empty() => None,
        Ok(None) | Err(_) => {
            match runner.run(&cfg.multipathd, &["show", "maps", "json"], timeout) {
                Ok(t) => Some(t),
                Err(CommandError::NotFound(_)) => None,
                Err(e) => {
                    tracing::debug!("mpath: multipathd: {e}");
                    None
                }
            }
        }
    };
    let Some(text) = text else { return Vec::new() };
    match multipathd::parse_json(&text) {
        Ok(docs) => multipathd::json_maps(docs),
        Err(e) => {
            tracing::debug!("mpath: multipathd reply: {e}");
            Vec::new()
        }
    }
}
