//! The commands behind the kernel view when the ioctl cannot be used — `dmsetup status|table
//! --target multipath` every `dmsetup_interval_s` (a fork+exec costs 1-2 ms of CPU, too much for
//! every second on a 200-disk server) — and multipathd, when it runs: `show maps json` over its
//! socket (or the `multipathd` command) every `multipathd_interval_s`, for path-group
//! priorities, checker states, vendor and product. Never required. Both run as one
//! [`Worker`] on the monitor's worker.
//!
//! **Absent or failing.** A command that is not installed, or that fails run after run (an
//! agent without the privilege device-mapper asks for, a kernel without device-mapper), is not
//! started every 30 s for nothing: after each failure in a row the wait to the next run doubles,
//! from the command's interval up to [`MAX_BACKOFF_S`] (10 min), and a program not found waits
//! that long at once. Each run that fails still counts its error (dmsetup's, in the `mpath`
//! source's errors), the first failure of a streak logs how long the next run is put off, and
//! the first run that answers goes back to the interval: a tool installed later, or a privilege
//! granted, is seen within 10 min. For multipathd, the socket (a connect, no process) is still
//! asked at every interval; only the `multipathd` command backs off.

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

/// The longest wait between two runs of a command that is absent or keeps failing, seconds
/// (unless its interval is longer).
pub(super) const MAX_BACKOFF_S: f64 = 600.0;

/// Failures in a row of one command, and the wait they earn.
#[derive(Debug, Default, Clone, Copy)]
struct Backoff {
    /// Runs that failed since the last that answered.
    fails: u32,
}

impl Backoff {
    /// Records a run's outcome (`absent`: the program was not found); the wait until the next
    /// run, from `interval_s`.
    fn next_wait(&mut self, interval_s: f64, failed: bool, absent: bool) -> f64 {
        let max = MAX_BACKOFF_S.max(interval_s);
        if !failed {
            self.fails = 0;
            return interval_s;
        }
        self.fails = self.fails.saturating_add(1);
        if absent {
            return max;
        }
        let doubled = interval_s * 2f64.powi(i32::try_from(self.fails.min(30)).unwrap_or(30));
        doubled.min(max)
    }
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
    dm_backoff: Backoff,
    /// The `multipathd` command (not the socket).
    mpd_backoff: Backoff,
    /// When the `multipathd` command may run again.
    next_mpd_command_s: f64,
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
            dm_backoff: Backoff::default(),
            mpd_backoff: Backoff::default(),
            next_mpd_command_s: 0.0,
        }
    }
}

impl Worker for MpathWorker {
    type Output = CommandRound;

    fn run_due(&mut self, now_s: f64, _woken: bool) -> Option<CommandRound> {
        let mut round = CommandRound::default();
        if self.need_dm && now_s >= self.next_dm_s {
            let dm = run_dmsetup(&self.cfg, self.runner.as_ref(), self.timeout);
            let absent = matches!(dm, Err(SourceError::Command(CommandError::NotFound(_))));
            let first = self.dm_backoff.fails == 0;
            let wait = self
                .dm_backoff
                .next_wait(self.dm_interval_s, dm.is_err(), absent);
            if let (Err(e), true) = (&dm, first) {
                tracing::info!(
                    "mpath: {e}; the kernel's path states, fail counts and active groups are \
                     not read until it answers (the paths' device states still are, from \
                     sysfs); {}",
                    retry(wait, absent)
                );
            }
            self.next_dm_s = now_s + wait;
            round.dm = Some(dm);
        }
        if self.cfg.use_multipathd && now_s >= self.next_mpd_s {
            let with_command = now_s >= self.next_mpd_command_s;
            let (maps, command) =
                run_multipathd(&self.cfg, self.runner.as_ref(), self.timeout, with_command);
            if let Some(ran) = command {
                let (failed, absent) = match &ran {
                    Ok(()) => (false, false),
                    Err(e) => (true, matches!(e, CommandError::NotFound(_))),
                };
                let first = self.mpd_backoff.fails == 0;
                let wait = self
                    .mpd_backoff
                    .next_wait(self.mpd_interval_s, failed, absent);
                if let (Err(e), true) = (&ran, first) {
                    tracing::info!(
                        "mpath: multipathd's socket does not answer and {e}; priorities and \
                         checker states are not read; {}",
                        retry(wait, absent)
                    );
                }
                self.next_mpd_command_s = now_s + wait;
            }
            round.multipathd = Some(maps);
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

/// When a command that failed runs again, for the log.
fn retry(wait_s: f64, absent: bool) -> String {
    if absent {
        format!("looked for again every {wait_s} s")
    } else {
        format!(
            "run again in {wait_s} s, then at doubling waits up to {MAX_BACKOFF_S} s while it fails"
        )
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

/// multipathd's maps: socket first, then the command when `with_command`; nothing when neither
/// answers. Also what became of the command, when it ran.
fn run_multipathd(
    cfg: &MpathConfig,
    runner: &dyn CommandRunner,
    timeout: Duration,
    with_command: bool,
) -> (Vec<JsonMap>, Option<Result<(), CommandError>>) {
    let mut command = None;
    let text = match multipathd::query_socket(&cfg.multipathd_socket, "show maps json", timeout) {
        Ok(Some(t)) => Some(t),
        Ok(None) | Err(_) if cfg.multipathd.as_os_str().is_empty() || !with_command => None,
        Ok(None) | Err(_) => {
            match runner.run(&cfg.multipathd, &["show", "maps", "json"], timeout) {
                Ok(t) => {
                    command = Some(Ok(()));
                    Some(t)
                }
                Err(e) => {
                    if !matches!(e, CommandError::NotFound(_)) {
                        tracing::debug!("mpath: multipathd: {e}");
                    }
                    command = Some(Err(e));
                    None
                }
            }
        }
    };
    let Some(text) = text else {
        return (Vec::new(), command);
    };
    let maps = match multipathd::parse_json(&text) {
        Ok(docs) => multipathd::json_maps(docs),
        Err(e) => {
            tracing::debug!("mpath: multipathd reply: {e}");
            Vec::new()
        }
    };
    (maps, command)
}

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::sync::Mutex;

    use super::*;

    /// Answers `dmsetup` and `multipathd` as told, counting the runs of each.
    #[derive(Default)]
    struct Counting {
        /// `None`: not installed; `Some(Err(status))`: fails; `Some(Ok(text))`: answers.
        dmsetup: Mutex<Option<Result<String, i32>>>,
        runs: Mutex<Vec<String>>,
    }

    impl CommandRunner for Counting {
        fn run(&self, program: &Path, args: &[&str], _: Duration) -> Result<String, CommandError> {
            let name = program.display().to_string();
            self.runs
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .push(format!("{name} {}", args.join(" ")));
            let answer = match name.as_str() {
                "dmsetup" => self
                    .dmsetup
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .clone(),
                _ => None,
            };
            match answer {
                None => Err(CommandError::NotFound(program.to_owned())),
                Some(Err(status)) => Err(CommandError::Failed {
                    program: program.to_owned(),
                    status,
                    stderr: "/dev/mapper/control: open failed: Permission denied".into(),
                }),
                Some(Ok(text)) => Ok(text),
            }
        }
    }

    impl Counting {
        /// The runs whose command line starts with `prefix` since the last look.
        fn runs_of(&self, prefix: &str) -> usize {
            let mut runs = self
                .runs
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            let n = runs.iter().filter(|r| r.starts_with(prefix)).count();
            runs.retain(|r| !r.starts_with(prefix));
            n
        }
    }

    fn cfg() -> MpathConfig {
        MpathConfig {
            multipathd_socket: "/storwatch/test/nobody-listens-here".into(),
            ..MpathConfig::default()
        }
    }

    /// Polls `w` once a second from `from` up to (not including) `to`; the times `dmsetup` ran.
    fn poll(w: &mut MpathWorker, from: u32, to: u32) -> Vec<u32> {
        let mut at = Vec::new();
        for t in from..to {
            let round = w.run_due(f64::from(t), false);
            if round.is_some_and(|r| r.dm.is_some()) {
                at.push(t);
            }
        }
        at
    }

    /// dmsetup not installed: looked for at the start, then every 10 min (not every 30 s), and
    /// used at its interval again once it is installed.
    #[test]
    fn an_absent_dmsetup_is_looked_for_every_ten_minutes() {
        let r = Arc::new(Counting::default());
        let mut w = MpathWorker::new(&cfg(), r.clone(), true, true);
        assert_eq!(poll(&mut w, 0, 1300), [0, 600, 1200]);
        // installed now: seen at the next look, then every 30 s
        *r.dmsetup
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(Ok(String::new()));
        assert_eq!(poll(&mut w, 1300, 1900), [1800, 1830, 1860, 1890]);
    }

    /// dmsetup that fails (no privilege): run at doubling waits up to 10 min, each failure
    /// still an error of its round; back to every 30 s once it answers.
    #[test]
    fn a_failing_dmsetup_backs_off_and_comes_back() {
        let r = Arc::new(Counting::default());
        *r.dmsetup
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(Err(1));
        let mut w = MpathWorker::new(&cfg(), r.clone(), true, true);
        let mut errors = 0;
        let mut at = Vec::new();
        for t in 0..2200 {
            if let Some(CommandRound { dm: Some(dm), .. }) = w.run_due(f64::from(t), false) {
                at.push(t);
                errors += usize::from(dm.is_err());
            }
        }
        // 30 × 2, × 4, × 8, × 16 (480), then 600
        assert_eq!(at, [0, 60, 180, 420, 900, 1500, 2100]);
        assert_eq!(errors, at.len());
        *r.dmsetup
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(Ok(String::new()));
        assert_eq!(poll(&mut w, 2200, 2800), [2700, 2730, 2760, 2790]);
    }

    /// multipathd neither listening nor installed: its socket is still asked every 30 s, the
    /// command is started every 10 min only.
    #[test]
    fn an_absent_multipathd_command_is_tried_every_ten_minutes() {
        let r = Arc::new(Counting::default());
        let mut w = MpathWorker::new(&cfg(), r.clone(), false, true);
        let mut rounds = 0;
        for t in 0..1300 {
            rounds += usize::from(w.run_due(f64::from(t), false).is_some());
        }
        assert_eq!(rounds, 44, "the socket asked every 30 s");
        assert_eq!(
            r.runs_of("multipathd"),
            3,
            "the command at 0, 600 and 1200 s"
        );
    }
}
