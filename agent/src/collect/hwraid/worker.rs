//! The hardware RAID monitor's worker: finding storcli, running one round of calls with a
//! deadline and a bound on their output, merging the answers, and tying each virtual drive to
//! its block device.
//!
//! A round, every `interval`:
//!
//! 1. `storcli /call show all J` — every controller: status, `VD LIST`, `PD LIST`, `BBU_Info` /
//!    `Cachevault_Info`. Without it nothing is known: the round fails and the last good state
//!    stays.
//! 2. `storcli /call/vall show all J` — each VD's members (`PDs for VD n`) and properties
//!    (`Write Cache(initial setting)`, `OS Drive Name`, `SCSI NAA Id`).
//! 3. `storcli /call/eall/sall show all J` — each drive's `Media Error Count`, `Other Error
//!    Count`, `Predictive Failure Count`, S.M.A.R.T alert, serial, WWN, temperature.
//! 4. `storcli /call/eall/sall show rebuild J` — only while a drive is `Rbld`: progress and
//!    time left, every round.
//!
//! Calls 2 and 3 are left out while call 1 leaves their answers as they were
//! ([`Detail::stands`]: the same VD and drive lists as last round; for the drives' call, a
//! healthy controller besides) and their last answers were good: their detail stays that of
//! the round that read it. Each is made all the same every [`Detail::read_every`] rounds (the
//! VDs' every 10th, the drives' every 5th). A controller pauses I/O while storcli asks it
//! (users of other monitors have seen their hosts' I/O suffer from a call a minute): a
//! healthy, steady controller is asked 13 times in ten rounds instead of 30.
//!
//! Calls 2–4 add detail, controller by controller ([`detail`]): where a call, or one
//! controller's answer to it, fails, that controller's detail of the last good round stays (a
//! drive's counters and serial, a VD's members) and the failure is reported against it; a
//! harmless refusal (nothing of that kind on the controller) is logged once. After a call that
//! hung the round's remaining calls are not made: one timeout per round, not three.
//!
//! **Answers without a controller.** An entry naming no controller (`{"Controllers":[{}]}`) is
//! an error, never a controller that silently vanishes. storcli's `No Controller found` on a
//! node where none ever answered is a state ([`Round::no_controller`]), said once, and the
//! rounds back off as after a timeout.
//!
//! **A hung controller.** A call killed at its timeout may not exit: a storcli stuck in the
//! kernel on the controller ends only when the driver gives up, and until then it counts among
//! the process's killed commands not yet exited, a bound shared with every other monitor
//! ([`crate::command::MAX_DYING`]). So while a call this monitor killed has not exited, no new
//! round starts: the round is reported failed ([`HwraidError::Stuck`]) without running storcli.
//! And after each round with a timeout the next waits twice as long as the last wait (from
//! `interval`, up to [`MAX_BACKOFF_S`]); a round without one goes back to `interval`.
//!
//! **storcli's own logs.** storcli writes `storcli.log` (and some versions `MegaSAS.log`) into
//! its working directory at every call, and nothing removes them. Whether every supported
//! storcli/perccli accepts the `nolog` keyword could not be established, and one that does not
//! would fail every call; so each call runs instead in a private directory of the monitor's
//! ([`WorkDir`], `$TMPDIR/storwatch-storcli-<pid>-<n>`, mode 0700), emptied after each call and
//! removed with the monitor, and by the agent's exit however it ends (`command::at_exit`: its
//! thread may never get to drop it); one left by an agent that ended without removing it (killed) is
//! removed by the next agent's monitor at its start, once that process id is gone. The runner
//! starts storcli in that directory itself: a `/bin/sh -c 'cd …; exec storcli …'` in between
//! cost each call a third more CPU (another program loaded, ~0.3 ms).
//!
//! **Exit status.** storcli exits 0 when the command succeeded and non-zero when it failed; its
//! JSON says the same per controller (`Command Status.Status`, `Success` or `Failure`, with
//! `ErrCd`/`ErrMsg`). The JSON is read whatever the status: a controller whose answer says
//! `Failure` is reported with its message (its data used when it still gave some), and only
//! output that is not storcli JSON makes the call fail, its exit status and standard error in
//! the message.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::command::{found, CommandError, Spawned, Worker};
use crate::root::Root;
use crate::sources::storcli::{self, Controller, PdState};
use crate::sources::ParseError;

use super::detail::{self, Detail};
use super::first::{self, First};
use super::tie::Tie;
use super::workdir::{exited, WorkDir};

/// How often a running call is looked at.
const POLL: Duration = Duration::from_millis(25);

/// The longest wait between rounds after rounds that timed out (unless `interval` is longer).
pub(super) const MAX_BACKOFF_S: f64 = 3600.0;

/// The programs tried, in this order, when `[hwraid] storcli` is empty: in `PATH`, then where
/// Broadcom's and Dell's packages install them.
pub(super) const PROGRAMS: &[&str] = &[
    "storcli64",
    "storcli",
    "perccli64",
    "perccli",
    "/opt/MegaRAID/storcli/storcli64",
    "/opt/MegaRAID/perccli/perccli64",
];

/// Why a round, or one call of it, gave nothing.
#[derive(Debug, Clone, thiserror::Error)]
pub enum HwraidError {
    /// storcli could not be run, hung, or printed too much.
    #[error("storcli {args}: {message}")]
    Command {
        /// The call's arguments.
        args: String,
        /// What went wrong.
        message: String,
        /// It hung and was killed at the timeout.
        timed_out: bool,
    },
    /// A call killed at its timeout has not exited yet: no new call is made until it has.
    #[error(
        "storcli {args}: started {since_s} s ago, killed at the timeout, has not exited yet (pid {pid}, stuck in the kernel on the controller?); no new storcli call until it does"
    )]
    Stuck {
        /// The killed call's arguments.
        args: String,
        /// Seconds since it was started.
        since_s: u64,
        /// Its process id.
        pid: u32,
    },
    /// Its answer was storcli JSON but not one to use: no controller named, or "No Controller
    /// found" where controllers answered before.
    #[error("storcli {args}: {message}")]
    Answer {
        /// The call's arguments.
        args: String,
        /// What was wrong.
        message: String,
    },
    /// Its output was not storcli JSON (garbage, or cut short).
    #[error("storcli {args}: exit status {status}: {source}{}", stderr_note(.stderr))]
    Parse {
        /// The call's arguments.
        args: String,
        /// storcli's exit status.
        status: i32,
        /// The start of its standard error.
        stderr: String,
        /// What was wrong.
        source: ParseError,
    },
}

impl HwraidError {
    /// A call hung and was killed at the timeout.
    pub fn timed_out(&self) -> bool {
        matches!(
            self,
            Self::Command {
                timed_out: true,
                ..
            }
        )
    }
}

fn stderr_note(stderr: &str) -> String {
    if stderr.is_empty() {
        String::new()
    } else {
        format!(" (stderr: {stderr})")
    }
}

/// One round's answers, merged.
#[derive(Debug, Clone)]
pub(super) struct Round {
    /// Every controller that answered call 1, with the detail of calls 2–4.
    pub(super) controllers: Vec<Controller>,
    /// `c0/v1` → `sdb`.
    pub(super) devices: BTreeMap<String, String>,
    /// `c0` → what went wrong with that controller's answers: a `Failure` of any call (not a
    /// harmless one), an answer that left it out, a row that could not be read.
    pub(super) failed: BTreeMap<String, Vec<String>>,
    /// Calls 2–4 that failed as a whole (their detail is the last round's), answers naming no
    /// controller.
    pub(super) errors: Vec<HwraidError>,
    /// storcli found no controller (its words), and none ever answered this monitor: a state,
    /// not an error.
    pub(super) no_controller: Option<String>,
}

/// What the worker hands the collector.
#[derive(Debug)]
pub(super) enum Update {
    /// A round ended, `at` that instant.
    Round {
        at: Instant,
        result: Result<Round, HwraidError>,
    },
}

/// The settings the worker needs, resolved.
#[derive(Debug, Clone)]
pub(super) struct WorkerConfig {
    /// The program given, or `None` to look for [`PROGRAMS`].
    pub(super) program: Option<PathBuf>,
    pub(super) interval_s: f64,
    pub(super) timeout: Duration,
    pub(super) max_output_bytes: usize,
}

/// A call killed at its timeout, not seen to exit yet.
#[derive(Debug, Clone)]
struct Killed {
    pid: u32,
    args: String,
    started: Instant,
}

/// The hardware RAID monitor's [`crate::command::Worker`].
#[derive(Debug)]
pub(super) struct HwraidWorker {
    cfg: WorkerConfig,
    root: Root,
    next_round_s: f64,
    /// The wait before the next round: `interval`, doubled after each round with a timeout.
    delay_s: f64,
    /// The last call killed at its timeout, until it has exited.
    killed: RefCell<Option<Killed>>,
    /// Where storcli runs and writes its logs; `None` when it could not be made (storcli then
    /// runs in the agent's working directory).
    workdir: Option<WorkDir>,
    /// The last merged answers, whose detail stands in for a failed call 2–4.
    last: Vec<Controller>,
    /// storcli was looked for and not found (said once).
    missing_told: bool,
    /// storcli's "No Controller found" was logged (once, until a controller answers).
    no_controller_told: bool,
    /// Harmless refusals already logged (`c0 message`).
    told: BTreeSet<String>,
    /// The disks' identities kept between rounds, to tie each VD to its `sdX`.
    tie: Tie,
    /// Rounds since calls 2 and 3 (VDs, drives) answered every controller, `None` while the
    /// last answer was not a good one (failed, or a controller's `Failure`).
    detail_age: [Option<u32>; 2],
}

impl HwraidWorker {
    pub(super) fn new(cfg: WorkerConfig, root: Root) -> Self {
        Self {
            delay_s: cfg.interval_s,
            cfg,
            root,
            next_round_s: f64::NEG_INFINITY,
            killed: RefCell::new(None),
            workdir: WorkDir::new()
                .inspect_err(|e| {
                    tracing::warn!(
                        source = "storcli",
                        "no private working directory for storcli ({e}): it runs in the agent's, where it leaves storcli.log"
                    );
                })
                .ok(),
            last: Vec::new(),
            missing_told: false,
            no_controller_told: false,
            told: BTreeSet::new(),
            tie: Tie::default(),
            detail_age: [None; 2],
        }
    }

    /// The program to run, when there is one.
    fn program(&mut self) -> Option<PathBuf> {
        let found = match &self.cfg.program {
            Some(p) => found(p).then(|| p.clone()),
            None => PROGRAMS.iter().map(PathBuf::from).find(|p| found(p)),
        };
        if found.is_none() && !self.missing_told {
            self.missing_told = true;
            let what = match &self.cfg.program {
                Some(p) => p.display().to_string(),
                None => PROGRAMS.join(", "),
            };
            tracing::info!(
                source = "storcli",
                "{what}: not found; hardware RAID controllers are not read (install storcli or perccli, or set [hwraid] storcli)"
            );
        }
        if found.is_some() {
            self.missing_told = false;
        }
        found
    }

    /// Runs `storcli args… J`, killed after the timeout, its output bounded.
    fn call(&self, program: &Path, args: &[&str]) -> Result<Vec<Controller>, HwraidError> {
        let label = args.join(" ");
        let cmd_err = |e: CommandError| HwraidError::Command {
            args: label.clone(),
            timed_out: matches!(e, CommandError::Timeout { .. }),
            message: e.to_string(),
        };
        let named = |e: CommandError| cmd_err(named(e, program));
        let limit = self.cfg.max_output_bytes;
        let in_dir = self
            .workdir
            .as_ref()
            .and_then(|w| Some((WorkDir::program(program)?, w.path())));
        let mut child = match &in_dir {
            Some((program, dir)) => Spawned::start_in(program, args, Some(dir), limit),
            None => Spawned::start(program, args, limit),
        }
        .map_err(named)?;
        let started = Instant::now();
        let fin = loop {
            if let Some(r) = child.poll() {
                if let Some(w) = &self.workdir {
                    w.empty();
                }
                break r.map_err(named)?;
            }
            if started.elapsed() >= self.cfg.timeout {
                child.kill();
                // Looked at before the next round: it may not end at SIGKILL.
                self.killed.replace(Some(Killed {
                    pid: child.id(),
                    args: label.clone(),
                    started,
                }));
                if let Some(w) = &self.workdir {
                    w.empty();
                }
                return Err(named(child.timeout_error(self.cfg.timeout)));
            }
            std::thread::sleep(POLL);
        };
        let parse_err = |source| HwraidError::Parse {
            args: label.clone(),
            status: fin.status,
            stderr: fin.stderr.clone(),
            source,
        };
        let ctls = storcli::parse(&fin.stdout).map_err(parse_err)?;
        if ctls.is_empty() {
            return Err(parse_err(ParseError::new(
                1,
                "",
                "no controller in storcli's answer",
            )));
        }
        Ok(ctls)
    }

    fn round(&mut self, program: &Path) -> Result<Round, HwraidError> {
        const SHOW_ALL: &[&str] = &["/call", "show", "all", "J"];
        let answer = self.call(program, SHOW_ALL)?;
        let label = SHOW_ALL.join(" ");
        let mut errors = Vec::new();
        let answer_err = |message| HwraidError::Answer {
            args: label.clone(),
            message,
        };
        let (mut ctls, mut failed) = match first::first(answer, &self.last, &label) {
            Err(message) => return Err(answer_err(message)),
            Ok(First::NoController(msg)) => {
                if !self.no_controller_told {
                    self.no_controller_told = true;
                    tracing::info!(
                        source = "storcli",
                        "storcli {label}: {msg}: no MegaRAID or PERC controller on this node; asked again after a longer wait each time, up to every hour"
                    );
                }
                return Ok(Round {
                    controllers: Vec::new(),
                    devices: BTreeMap::new(),
                    failed: BTreeMap::new(),
                    errors,
                    no_controller: Some(msg),
                });
            }
            Ok(First::Controllers {
                ctls,
                failed,
                unnamed,
            }) => {
                errors.extend(unnamed.map(answer_err));
                (ctls, failed)
            }
        };
        self.no_controller_told = false;
        // After a call that hung, the others of the round are not made (a controller that hangs
        // one command most likely hangs the next): one timeout per round, not three. Their
        // detail is the last round's.
        let mut hung = false;
        for kind in [Detail::Vds, Detail::Pds, Detail::Rebuild] {
            let rebuilding = ctls.iter().any(|c| {
                c.physical_drives
                    .iter()
                    .any(|d| d.state == PdState::Rebuild)
            });
            if kind == Detail::Rebuild && !rebuilding {
                continue;
            }
            // What `show all` says may leave the call's answer as it was.
            let every = kind.read_every();
            let age = every.and_then(|(i, _)| self.detail_age.get(i).copied().flatten());
            let skip = match (every, age) {
                (Some((_, every)), Some(n)) => n + 1 < every && kind.stands(&ctls, &self.last),
                _ => false,
            };
            let answer = if hung || skip {
                None
            } else {
                match self.call(program, kind.args()) {
                    Ok(a) => Some(a),
                    Err(e) => {
                        hung = e.timed_out();
                        errors.push(e);
                        None
                    }
                }
            };
            let said = detail::merge(kind, &mut ctls, answer.as_deref(), &self.last);
            if let Some(kept) = every.and_then(|(i, _)| self.detail_age.get_mut(i)) {
                *kept = match (skip, &answer) {
                    (true, _) => age.map(|n| n + 1),
                    (false, Some(_)) if said.faults.is_empty() => Some(0),
                    (false, _) => None,
                };
            }
            for (c, msg) in said.faults {
                failed.entry(c).or_default().push(msg);
            }
            for (c, msg) in said.notes {
                if self.told.insert(format!("{c} {msg}")) {
                    tracing::info!(
                        source = "storcli",
                        "{c}: {msg}: nothing of that kind on this controller (its show all lists none); not an error"
                    );
                }
            }
        }
        self.last = ctls.clone();
        let devices = self.tie.devices(&self.root, &ctls);
        Ok(Round {
            controllers: ctls,
            devices,
            failed,
            errors,
            no_controller: None,
        })
    }
}

impl Worker for HwraidWorker {
    type Output = Vec<Update>;

    fn run_due(&mut self, now_s: f64, _woken: bool) -> Option<Vec<Update>> {
        if now_s < self.next_round_s {
            return None;
        }
        self.next_round_s = now_s + self.delay_s;
        if let Some(k) = self.killed.take() {
            if !exited(k.pid) {
                let stuck = HwraidError::Stuck {
                    args: k.args.clone(),
                    since_s: k.started.elapsed().as_secs(),
                    pid: k.pid,
                };
                self.killed.replace(Some(k));
                return Some(vec![Update::Round {
                    at: Instant::now(),
                    result: Err(stuck),
                }]);
            }
        }
        let program = self.program()?;
        let result = self.round(&program);
        // A hung controller, or none at all: ask less often.
        let back_off = match &result {
            Ok(r) => r.no_controller.is_some() || r.errors.iter().any(HwraidError::timed_out),
            Err(e) => e.timed_out(),
        };
        self.delay_s = if back_off {
            (self.delay_s * 2.0).min(MAX_BACKOFF_S.max(self.cfg.interval_s))
        } else {
            self.cfg.interval_s
        };
        self.next_round_s = now_s + self.delay_s;
        Some(vec![Update::Round {
            at: Instant::now(),
            result,
        }])
    }

    fn next_due_s(&self) -> f64 {
        self.next_round_s
    }
}

/// `e` naming `program` as configured (the runner's errors name the path it started).
fn named(e: CommandError, program: &Path) -> CommandError {
    let program = program.to_owned();
    match e {
        CommandError::NotFound(_) => CommandError::NotFound(program),
        CommandError::Io { source, .. } => CommandError::Io { program, source },
        CommandError::Timeout { timeout, .. } => CommandError::Timeout { program, timeout },
        CommandError::TooMuchOutput { limit, .. } => CommandError::TooMuchOutput { program, limit },
        CommandError::TooManyDying { dying, .. } => CommandError::TooManyDying { program, dying },
        CommandError::Failed { status, stderr, .. } => CommandError::Failed {
            program,
            status,
            stderr,
        },
        #[allow(unreachable_patterns)]
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::super::workdir::sweep_stale;
    use super::*;

    /// A stand-in storcli that logs each call and answers the healthy RAID6's `show all` for
    /// every call, or hangs (`sleep`) while the file `hang` exists.
    fn stand_in(dir: &Path) -> PathBuf {
        let show = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("fixtures/storcli/netdata-c0-show-all-raid6-optl-ibbu-optimal.json");
        let script = dir.join("storcli64");
        std::fs::write(
            &script,
            format!(
                "#!/bin/sh\necho \"$*\" >> '{d}/calls.log'\n\
                 if [ -e '{d}/hang' ]; then exec sleep 1000; fi\n\
                 exec cat '{show}'\n",
                d = dir.display(),
                show = show.display()
            ),
        )
        .expect("script");
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        script
    }

    fn worker(dir: &Path, program: PathBuf) -> HwraidWorker {
        let sys = dir.join("sys");
        std::fs::create_dir_all(sys.join("block")).expect("sys");
        HwraidWorker::new(
            WorkerConfig {
                program: Some(program),
                interval_s: 60.0,
                timeout: Duration::from_millis(300),
                max_output_bytes: 4 << 20,
            },
            Root::new(dir.join("proc"), sys),
        )
    }

    fn result(u: Option<Vec<Update>>) -> Result<Round, HwraidError> {
        let mut u = u.expect("a round");
        assert_eq!(u.len(), 1);
        let Update::Round { result, .. } = u.remove(0);
        result
    }

    fn calls(dir: &Path) -> usize {
        std::fs::read_to_string(dir.join("calls.log"))
            .map(|s| s.lines().count())
            .unwrap_or(0)
    }

    /// Waits (bounded) until the call the worker killed has exited, as a SIGKILLed `sleep` does
    /// within microseconds.
    fn killed_exits(j: &HwraidWorker) {
        let pid = j.killed.borrow().as_ref().expect("a killed call").pid;
        let start = Instant::now();
        while !exited(pid) {
            assert!(start.elapsed() < Duration::from_secs(10), "pid {pid}");
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    #[test]
    fn no_round_while_a_killed_call_has_not_exited() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut j = worker(dir.path(), stand_in(dir.path()));
        // A process of ours that has not exited stands for a storcli stuck in the kernel after
        // SIGKILL (nothing unprivileged survives SIGKILL): the worker killed it 90 s ago.
        let mut stuck = std::process::Command::new("sleep")
            .arg("1000")
            .spawn()
            .expect("sleep");
        j.killed.replace(Some(Killed {
            pid: stuck.id(),
            args: "/call/vall show all J".into(),
            started: Instant::now() - Duration::from_secs(90),
        }));
        let e = result(j.run_due(0.0, false)).expect_err("stuck");
        let text = e.to_string();
        assert!(
            matches!(
                e,
                HwraidError::Stuck {
                    since_s: 90..=95,
                    ..
                }
            ) && text.contains("storcli /call/vall show all J: started 9")
                && text.contains("has not exited yet"),
            "{text}"
        );
        assert_eq!(calls(dir.path()), 0, "storcli was not run");
        assert_eq!(j.next_due_s(), 60.0);
        assert!(j.run_due(30.0, false).is_none());
        let e = result(j.run_due(60.0, false)).expect_err("still stuck");
        assert!(matches!(e, HwraidError::Stuck { .. }), "{e}");
        assert_eq!(calls(dir.path()), 0);
        // It exits at last: the next round runs storcli again.
        stuck.kill().expect("kill");
        stuck.wait().expect("wait");
        let r = result(j.run_due(120.0, false)).expect("a good round");
        assert_eq!(r.controllers.len(), 1);
        assert_eq!(calls(dir.path()), 3, "show all, vall, eall/sall");
        assert!(j.killed.borrow().is_none());
    }

    #[test]
    #[allow(clippy::unwrap_used)]
    fn stale_working_directories_of_ended_agents_are_swept() {
        let tmp = tempfile::tempdir().unwrap();
        // a process that has ended: its id is free (until the kernel reuses it)
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let dead = child.id();
        child.wait().unwrap();
        let stale = tmp.path().join(format!("storwatch-storcli-{dead}-3"));
        std::fs::create_dir(&stale).unwrap();
        std::fs::write(stale.join("storcli.log"), "x").unwrap();
        let live = tmp
            .path()
            .join(format!("storwatch-storcli-{}-0", std::process::id()));
        std::fs::create_dir(&live).unwrap();
        let other = tmp.path().join(format!("storwatch-storcli-{dead}-x"));
        std::fs::create_dir(&other).unwrap();
        sweep_stale(tmp.path());
        assert!(!stale.exists(), "the dead agent's directory is left");
        assert!(live.exists(), "a live agent's directory was removed");
        assert!(
            other.exists(),
            "a directory not named as the monitor names its own was removed"
        );
    }

    #[test]
    fn each_timeout_doubles_the_wait_up_to_an_hour_and_a_good_round_resets_it() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut j = worker(dir.path(), stand_in(dir.path()));
        std::fs::write(dir.path().join("hang"), "").expect("hang");
        let mut now = 0.0;
        let mut waits = Vec::new();
        for _ in 0..7 {
            let e = result(j.run_due(now, false)).expect_err("hangs");
            assert!(e.timed_out(), "{e}");
            killed_exits(&j);
            waits.push(j.next_due_s() - now);
            now = j.next_due_s();
        }
        assert_eq!(
            waits,
            [120.0, 240.0, 480.0, 960.0, 1920.0, 3600.0, 3600.0],
            "doubled from the interval, at most an hour"
        );
        assert_eq!(calls(dir.path()), 7, "one call per round: the first hung");
        std::fs::remove_file(dir.path().join("hang")).expect("unhang");
        result(j.run_due(now, false)).expect("a good round");
        assert_eq!(j.next_due_s() - now, 60.0, "back to the interval");
    }
}
