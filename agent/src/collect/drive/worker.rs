//! The drive monitor's worker: which disks, when each is read, and running `smartctl` for them
//! without any one call holding up another.
//!
//! Every `interval` a round starts: the whole disks are listed from `/sys/block` (`sd*`,
//! `nvme*n*`; partitions, dm, md and loop devices are not drives; [`super::disks`]) and their
//! place in the block-device stack is read, and disk *i* of *n* is due `i × interval / n` after
//! the round's start, so a 100-disk server runs one `smartctl` every 18 s instead of 100 at once.
//! A due call is started without waiting for the ones still running (at most `max_running` at a
//! time); each is polled, and killed with its process group once it has run `timeout`. Disks
//! asked for out of schedule (the members of an MD array that degraded) go first. When hung calls
//! held all `max_running` places until the next round, the disks not started are left out
//! ([`DriveError::NotStarted`] on their lines) and the next round starts with the first of them:
//! a round restarting at the first disk gave the first ones every turn and the last ones none.
//!
//! What a finished call amounts to is [`super::reading`].
//!
//! Inline (`once`, stepped tests), a round's disks are all due when it starts and the poll that
//! starts them waits for them, each still bounded by `timeout`.

use std::collections::{BTreeMap, VecDeque};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use super::attrlog::{AttrlogConfig, Logs};
use super::disks::{device_path, has_megaraid, Places, Target};
use super::reading::{interpret, wants_text, Disk, DriveError, ReadResult, Update};
use super::smartd::StateFiles;
use crate::collect::fs::Placement;
use crate::command::{found, CommandError, Spawned, Worker};
use crate::filter::Filter;
use crate::root::Root;
use crate::sources::smartctl::{self, DriveHealth};

mod calls;

/// How often running calls are looked at (their exit, their output, their deadline).
const POLL_S: f64 = 0.025;

/// Disks whose reading is wanted at once, shared by the collector (which adds) and the worker
/// (which takes).
pub(super) type Urgent = Arc<Mutex<Vec<String>>>;

/// One call running.
#[derive(Debug)]
struct Running {
    name: String,
    /// How errors name it: `/dev/sda`, `-d megaraid,1 /dev/bus/0`.
    label: String,
    started: Instant,
    child: Spawned,
    /// This is the `-l error` text call of a SAS disk, for its non-medium error count: the
    /// reading its JSON call gave, handed on when this one ends.
    text_for: Option<Box<DriveHealth>>,
    /// A SAS disk's reading of this call is followed by its `-l error` call (decided when the
    /// call starts: its round's turn, an out-of-schedule read, or no count known yet).
    with_error_log: bool,
}

/// A SAS disk's non-medium error count from its last good `-l error` call.
#[derive(Debug, Clone, Copy)]
struct ErrorLog {
    count: u64,
    /// When the call ended (the worker's clock).
    at_s: f64,
}

/// The settings the worker needs, resolved.
#[derive(Debug, Clone)]
pub(super) struct WorkerConfig {
    pub(super) smartctl: PathBuf,
    pub(super) interval_s: f64,
    pub(super) timeout: Duration,
    pub(super) max_output_bytes: usize,
    pub(super) max_running: usize,
    pub(super) filter: Filter,
    /// Look for disks behind MegaRAID controllers (`smartctl --scan`) when the kernel has one.
    pub(super) megaraid: bool,
    /// Calls of a round all at its start, and waited for (`once`, stepped tests).
    pub(super) inline: bool,
    /// smartd's `--jsonstate` directory, read before running smartctl ([`super::smartd`]).
    pub(super) smartd_state_dir: Option<PathBuf>,
    /// A state file older than this is stale: smartctl reads the disk.
    pub(super) smartd_state_max_age: Duration,
    /// A SAS disk's `-l error` call is made every this many rounds (1: every round), and for a
    /// disk read out of schedule or without a count yet; between, its last count is carried.
    pub(super) sas_error_log_every: u32,
    /// smartd's attribute logs, when used ([`super::attrlog`]).
    pub(super) attrlog: Option<AttrlogConfig>,
}

/// The drive monitor's command worker ([`Worker`]).
#[derive(Debug)]
pub(super) struct DriveWorker {
    cfg: WorkerConfig,
    root: Root,
    urgent: Urgent,
    /// The disks of the current round, with the device and `-d` type smartctl reads each by.
    disks: BTreeMap<String, Target>,
    /// Scheduled calls of this round: (due, disk), in order.
    queue: VecDeque<(f64, String)>,
    /// Disks asked for out of schedule, not yet started.
    asked: VecDeque<String>,
    running: Vec<Running>,
    next_round_s: f64,
    last_now_s: f64,
    /// smartctl was looked for and not found (said once, at the first round).
    missing_told: bool,
    missing: bool,
    /// smartd's fresh state files of this round, by disk.
    state: StateFiles,
    /// The state directory could not be read (said once, until it can).
    state_dir_told: bool,
    /// Rounds started before the current one: the SAS `-l error` calls are made in rounds
    /// `0, every, 2 × every, …`.
    round: u64,
    /// Each SAS disk's last non-medium error count, carried between its `-l error` calls.
    error_log: BTreeMap<String, ErrorLog>,
    /// The first disk of the last round whose call was not started (hung calls held every
    /// place): the next round starts with it, so that every disk gets its turn.
    cursor: Option<String>,
    /// Each disk's MD arrays and multipath maps, kept between rounds.
    places: Places,
    /// smartd's attribute logs and what they confirm, when used.
    logs: Option<Logs>,
}

impl DriveWorker {
    pub(super) fn new(cfg: WorkerConfig, root: Root, urgent: Urgent) -> Self {
        let cfg_logs = cfg.attrlog.clone().map(Logs::new);
        Self {
            cfg,
            root,
            urgent,
            disks: BTreeMap::new(),
            queue: VecDeque::new(),
            asked: VecDeque::new(),
            running: Vec::new(),
            next_round_s: f64::NEG_INFINITY,
            last_now_s: 0.0,
            missing_told: false,
            missing: false,
            state: StateFiles::default(),
            state_dir_told: false,
            round: 0,
            error_log: BTreeMap::new(),
            cursor: None,
            places: Places::default(),
            logs: cfg_logs,
        }
    }

    /// Whether this round is one whose SAS disks get their `-l error` call.
    fn error_log_round(&self) -> bool {
        self.round % u64::from(self.cfg.sas_error_log_every.max(1)) == 0
    }

    fn start_round(&mut self, now_s: f64, out: &mut Vec<Update>) {
        if self.next_round_s.is_finite() {
            self.round += 1;
        }
        self.next_round_s = now_s + self.cfg.interval_s;
        self.missed(out);
        self.missing = !found(&self.cfg.smartctl);
        let placed = self.places.round(&self.root, &self.cfg.filter);
        let mut names: Vec<String> = placed.iter().map(|(n, _)| n.clone()).collect();
        let mut disks: Vec<Disk> = placed
            .into_iter()
            .map(|(name, place)| Disk { name, place })
            .collect();
        self.disks = names
            .iter()
            .map(|n| {
                let t = Target {
                    path: device_path(n),
                    device_type: None,
                };
                (n.clone(), t)
            })
            .collect();
        if !self.missing && self.cfg.megaraid && has_megaraid(&self.root) {
            match self.scan(out) {
                Ok(found) => {
                    for (name, t) in found {
                        if !self.cfg.filter.matches(&name) {
                            continue;
                        }
                        disks.push(Disk {
                            name: name.clone(),
                            place: Placement {
                                device: name.clone(),
                                kind: "disk".into(),
                                ..Placement::default()
                            },
                        });
                        names.push(name.clone());
                        self.disks.insert(name, t);
                    }
                }
                Err(e) => out.push(Update::Error(e)),
            }
        }
        out.push(Update::Disks(disks));
        let disks = &self.disks;
        self.error_log.retain(|name, _| disks.contains_key(name));
        if let Some(l) = &mut self.logs {
            l.retain(|name| disks.contains_key(name));
        }
        self.queue.clear();
        self.state = match &self.cfg.smartd_state_dir {
            Some(dir) => {
                match std::fs::read_dir(dir) {
                    Err(e) if !self.state_dir_told => {
                        self.state_dir_told = true;
                        tracing::info!(
                            source = "smartctl",
                            "[drive] smartd_state_dir {}: {e}; smartctl reads every disk",
                            dir.display()
                        );
                    }
                    Err(_) => {}
                    Ok(_) => self.state_dir_told = false,
                }
                let st = StateFiles::list(
                    dir,
                    self.cfg.smartd_state_max_age,
                    std::time::SystemTime::now(),
                );
                tracing::debug!(
                    source = "smartctl",
                    "{}: fresh smartd state of {} disks",
                    dir.display(),
                    st.len()
                );
                st
            }
            None => StateFiles::default(),
        };
        if self.missing {
            if !self.missing_told {
                self.missing_told = true;
                let what = if self.cfg.smartd_state_dir.is_some() {
                    "only disks with a fresh smartd state are read"
                } else {
                    "drive health is not read"
                };
                tracing::info!(
                    source = "smartctl",
                    "{}: not found; {what} (install smartmontools ≥ 7.0, or set [drive] smartctl)",
                    self.cfg.smartctl.display()
                );
            }
            // Without smartctl, the disks with a fresh smartd state are still read from it.
            names.retain(|n| self.state.has(n));
            if names.is_empty() {
                return;
            }
        }
        // The round starts where the last one stopped: a round cut short by hung calls does
        // not hand its first disks a turn again while the last ones never get one.
        if let Some(pos) = self
            .cursor
            .take()
            .and_then(|c| names.iter().position(|n| *n == c))
        {
            names.rotate_left(pos);
        }
        let n = names.len().max(1) as f64;
        let spacing = if self.cfg.inline {
            0.0
        } else {
            self.cfg.interval_s / n
        };
        for (i, name) in names.into_iter().enumerate() {
            self.queue.push_back((now_s + i as f64 * spacing, name));
        }
    }

    /// The calls of the round ending that were never started (hung calls held all
    /// `max_running` places): each such disk is told so ([`DriveError::NotStarted`]), and the
    /// first of them is where the next round starts.
    fn missed(&mut self, out: &mut Vec<Update>) {
        let left = std::mem::take(&mut self.queue);
        self.cursor = left.front().map(|(_, n)| n.clone());
        for (_, name) in left {
            // (a disk whose call of an earlier round still runs is not started twice: not
            // missed)
            if self.running.iter().any(|r| r.name == name) {
                continue;
            }
            let Some(t) = self.disks.get(&name) else {
                continue;
            };
            let device = t.label();
            out.push(Update::Read {
                name,
                at: Instant::now(),
                result: ReadResult::Failed(DriveError::NotStarted {
                    device,
                    max_running: self.cfg.max_running.max(1),
                }),
                error_log_age_s: None,
            });
        }
    }

    /// Collects what the running calls answered, and kills those past their deadline.
    fn reap(&mut self, out: &mut Vec<Update>) {
        let timeout = self.cfg.timeout;
        let mut i = 0;
        while i < self.running.len() {
            let r = &mut self.running[i];
            let polled = match r.child.poll() {
                Some(p) => p,
                None if r.started.elapsed() >= timeout => {
                    r.child.kill();
                    Err(r.child.timeout_error(timeout))
                }
                None => {
                    i += 1;
                    continue;
                }
            };
            let r = self.running.swap_remove(i);
            if let Some(mut h) = r.text_for {
                // The reading stands whatever becomes of the text call.
                match polled {
                    Ok(fin) => match smartctl::parse_scsi_text(&fin.stdout) {
                        Ok(t) => {
                            if let Some(n) = t.non_medium_errors {
                                self.error_log.insert(
                                    r.name.clone(),
                                    ErrorLog {
                                        count: n,
                                        at_s: self.last_now_s,
                                    },
                                );
                            }
                        }
                        Err(source) => out.push(Update::Error(DriveError::Parse {
                            device: format!("-l error {}", r.label),
                            status: fin.status,
                            source,
                        })),
                    },
                    Err(source) => out.push(Update::Error(DriveError::Command {
                        device: format!("-l error {}", r.label),
                        source,
                    })),
                }
                // This call's count, or (it failed) the last one's, older.
                let error_log_age_s = self.carry_error_log(&r.name, &mut h);
                if let Some(l) = &mut self.logs {
                    l.note(&r.name, Some(&h), None);
                }
                out.push(Update::Read {
                    name: r.name,
                    at: Instant::now(),
                    result: ReadResult::Read(h),
                    error_log_age_s,
                });
                continue;
            }
            // The document, for what the attribute log compares with beyond the reading (only
            // when the logs are used).
            let mut doc = None;
            let result = match polled {
                Ok(fin) => {
                    let result = interpret(&r.label, &fin);
                    if self.logs.is_some() {
                        doc = Some(fin.stdout);
                    }
                    result
                }
                Err(source) => ReadResult::Failed(DriveError::Command {
                    device: r.label.clone(),
                    source,
                }),
            };
            let mut error_log_age_s = None;
            let result = match result {
                ReadResult::Read(h) if wants_text(&h) && r.with_error_log => {
                    match self.start_text(&r, h, out) {
                        Some(mut h) => {
                            error_log_age_s = self.carry_error_log(&r.name, &mut h);
                            ReadResult::Read(h)
                        }
                        None => continue, // handed on to the text call
                    }
                }
                ReadResult::Read(mut h) if wants_text(&h) => {
                    // Not this round's turn: the last call's count, with its age.
                    error_log_age_s = self.carry_error_log(&r.name, &mut h);
                    ReadResult::Read(h)
                }
                other => other,
            };
            // (a disk behind a RAID controller is never confirmed: nothing kept)
            let by_name = self
                .disks
                .get(&r.name)
                .is_some_and(|t| t.device_type.is_none());
            if let Some(l) = self.logs.as_mut().filter(|_| by_name) {
                match &result {
                    ReadResult::Read(h) => l.note(&r.name, Some(h), doc.as_deref()),
                    ReadResult::Failed(_) => l.note(&r.name, None, None),
                    _ => {}
                }
            }
            out.push(Update::Read {
                name: r.name,
                at: Instant::now(),
                result,
                error_log_age_s,
            });
        }
    }

    /// Starts what is due, asked-for disks first, while fewer than `max_running` run.
    fn start_due(&mut self, now_s: f64, out: &mut Vec<Update>) {
        if self.missing && self.state.len() == 0 {
            self.asked.clear();
            return;
        }
        while self.running.len() < self.cfg.max_running.max(1) {
            let (name, asked) = if let Some(n) = self.asked.pop_front() {
                (n, true)
            } else if self.queue.front().is_some_and(|(due, _)| *due <= now_s) {
                match self.queue.pop_front() {
                    Some((_, n)) => (n, false),
                    None => break,
                }
            } else {
                break;
            };
            // A disk still being read is not started twice.
            if self.running.iter().any(|r| r.name == name) {
                continue;
            }
            let Some(target) = self.disks.get(&name).cloned() else {
                continue;
            };
            // smartd read it lately: its state file is the reading, no command run.
            if target.device_type.is_none() {
                if let Some(h) = self.state.reading(&name) {
                    out.push(Update::Read {
                        name,
                        at: Instant::now(),
                        result: ReadResult::Read(Box::new(h)),
                        error_log_age_s: None,
                    });
                    continue;
                }
            }
            // smartd's attribute log says nothing the last reading depends on has changed.
            if let Some(fresh) = self
                .logs
                .as_mut()
                .filter(|_| !asked && target.device_type.is_none())
                .and_then(|l| l.confirm(&name))
            {
                // the log's non-medium count is the reading's, as of the line
                if let (true, Some(e)) = (fresh.non_medium, self.error_log.get_mut(&name)) {
                    e.at_s = self.last_now_s - fresh.age_s;
                }
                out.push(Update::Confirmed {
                    name,
                    at: Instant::now(),
                    fresh,
                });
                continue;
            }
            if self.missing {
                continue;
            }
            let mut args = vec!["--json", "-a", "-n", "standby"];
            if let Some(t) = &target.device_type {
                args.extend(["-d", t.as_str()]);
            }
            args.push(target.path.as_str());
            let dev = target.label();
            // A SAS disk's `-l error` call: in its rounds, read out of schedule (a degraded
            // array's member), or while no count is known (a disk new since the last such round).
            let with_error_log =
                asked || self.error_log_round() || !self.error_log.contains_key(&name);
            match Spawned::start(&self.cfg.smartctl, &args, self.cfg.max_output_bytes) {
                Ok(child) => self.running.push(Running {
                    name,
                    label: dev,
                    started: Instant::now(),
                    child,
                    text_for: None,
                    with_error_log,
                }),
                Err(CommandError::NotFound(_)) => {
                    // Removed since the round started: quiet until it is back.
                    self.missing = true;
                    self.queue.clear();
                    self.asked.clear();
                    return;
                }
                Err(e) => out.push(Update::Read {
                    name,
                    at: Instant::now(),
                    result: ReadResult::Failed(DriveError::Command {
                        device: dev,
                        source: e,
                    }),
                    error_log_age_s: None,
                }),
            }
        }
    }
}

impl Worker for DriveWorker {
    type Output = Vec<Update>;

    fn run_due(&mut self, now_s: f64, woken: bool) -> Option<Vec<Update>> {
        self.last_now_s = now_s;
        let mut out = Vec::new();
        if now_s >= self.next_round_s {
            self.start_round(now_s, &mut out);
        }
        if woken {
            let asked =
                std::mem::take(&mut *self.urgent.lock().unwrap_or_else(PoisonError::into_inner));
            for name in asked {
                if self.disks.contains_key(&name) && !self.asked.contains(&name) {
                    self.asked.push_back(name);
                }
            }
        }
        loop {
            self.reap(&mut out);
            self.start_due(now_s, &mut out);
            // Inline, the poll that starts calls waits for them (each bounded by its timeout).
            if !self.cfg.inline || self.running.is_empty() {
                break;
            }
            std::thread::sleep(Duration::from_secs_f64(POLL_S));
        }
        (!out.is_empty()).then_some(out)
    }

    fn next_due_s(&self) -> f64 {
        if !self.running.is_empty() || !self.asked.is_empty() {
            return self.last_now_s + POLL_S;
        }
        let next_call = self.queue.front().map_or(f64::INFINITY, |(due, _)| *due);
        next_call.min(self.next_round_s)
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    /// `sda`'s smartctl hangs past its 1 s timeout and, once killed, cannot be reaped for 6 s
    /// (held by a tracer, as a process stuck in the kernel on a hung disk is held until the
    /// kernel gives up). `sdb`, due 1 s into the round, is read on schedule all the same, and
    /// the killed call is reaped once it can be.
    #[test]
    fn a_killed_call_that_cannot_be_reaped_yet_holds_up_no_other_disk() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().expect("tempdir");
        let sys = dir.path().join("sys");
        for (d, dev) in [("sda", "8:0"), ("sdb", "8:16")] {
            std::fs::create_dir_all(sys.join("block").join(d)).expect("sys");
            std::fs::write(sys.join("block").join(d).join("dev"), dev).expect("dev");
        }
        let pidfile = dir.path().join("sda.pid");
        let fixture = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("fixtures/smartctl/sce-ata-seagate-st3000nm0033-188-packed-4-4-4.json");
        let smartctl = dir.path().join("smartctl");
        std::fs::write(
            &smartctl,
            format!(
                "#!/bin/sh\nfor dev; do :; done\ncase \"$dev\" in\n/dev/sda) echo $$ > {}; exec sleep 1000;;\n/dev/sdb) cat '{}';;\nesac\n",
                pidfile.display(),
                fixture.display()
            ),
        )
        .expect("script");
        std::fs::set_permissions(&smartctl, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        let cfg = WorkerConfig {
            smartctl,
            interval_s: 2.0,
            timeout: Duration::from_secs(1),
            max_output_bytes: 1 << 20,
            max_running: 4,
            filter: Filter::default(),
            megaraid: false,
            inline: false,
            smartd_state_dir: None,
            smartd_state_max_age: Duration::from_secs(3600),
            sas_error_log_every: 6,
            attrlog: None,
        };
        let root = Root::new(dir.path().join("proc"), sys);
        let mut worker = DriveWorker::new(cfg, root, Urgent::default());

        let start = Instant::now();
        let mut held = false;
        let mut sda_pid = 0;
        let mut sda_failed = None;
        let mut sdb_read = None;
        // Runs the worker as its thread does, until both disks answered (or 20 s).
        while (sda_failed.is_none() || sdb_read.is_none())
            && start.elapsed() < Duration::from_secs(20)
        {
            for u in worker
                .run_due(start.elapsed().as_secs_f64(), false)
                .unwrap_or_default()
            {
                if let Update::Read { name, result, .. } = u {
                    let at = start.elapsed();
                    match (name.as_str(), result) {
                        ("sda", ReadResult::Failed(e)) => sda_failed = Some((at, e.to_string())),
                        ("sdb", ReadResult::Read(_)) => sdb_read = Some(at),
                        (n, r) => panic!("{n}: {r:?}"),
                    }
                }
            }
            if !held {
                if let Some(pid) = std::fs::read_to_string(&pidfile)
                    .ok()
                    .and_then(|t| t.trim().parse::<u32>().ok())
                {
                    sda_pid = pid;
                    let h = crate::command::held::Held::new(pid);
                    held = true;
                    // Let go after 6 s, whatever the job does.
                    std::thread::spawn(move || {
                        std::thread::sleep(Duration::from_secs(6));
                        drop(h);
                    });
                }
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(held, "sda's call never started");
        let (sda_at, err) = sda_failed.expect("sda answered");
        assert!(err.contains("no answer within 1s"), "{err}");
        let sdb_at = sdb_read.expect("sdb read");
        // Due at 1 s: read well before the hung call could be reaped (6 s).
        assert!(
            sdb_at < Duration::from_secs(4) && sda_at < Duration::from_secs(4),
            "sdb read at {sdb_at:?}, sda's timeout at {sda_at:?}: held up by the killed call"
        );
        // Once the tracer lets go, a later poll reaps it.
        let proc_dir = PathBuf::from(format!("/proc/{sda_pid}"));
        let deadline = Instant::now() + Duration::from_secs(20);
        while proc_dir.exists() && Instant::now() < deadline {
            crate::command::reap_dying();
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(!proc_dir.exists(), "the killed call was never reaped");
    }
}
