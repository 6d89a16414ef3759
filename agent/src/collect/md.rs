//! MD RAID arrays: reads `/proc/mdstat` and `/sys/block/mdX/md/`, feeds the [`MdDetector`] and
//! writes the `md` and `md_member` lines.
//!
//! Sources: `/proc/mdstat` ([`crate::sources::mdstat`]) for the list of arrays, their members
//! and the live sync position, and `/sys/block/mdX/md/` ([`crate::sources::mdsys`]) for what only
//! sysfs says: `degraded`, `array_state` (`broken`), the exact `sync_action` (mdstat prints a
//! repair as `resync`), `mismatch_cnt`, `component_size` and each member's `state`, `slot` and
//! `errors`. What they mean — state, progress and ETA, redundancy, risk, events — is
//! [`crate::health::md`].
//!
//! No `/proc/mdstat` (no md module) or no arrays: silent. Per-array sysfs that cannot be read
//! or parsed: the array is still reported from mdstat, and the poll returns the error once so
//! the scheduler counts and logs it.

use std::collections::BTreeMap;

use storwatch_wire::lp::LineWriter;

use crate::collect::book::{BookView, DriveBook};
use crate::collect::{Collector, Live, ReportCx, SampleCx};
use crate::event::Event;
use crate::health::md::{ArrayStatus, MdDetector, MemberStatus};
use crate::health::risk::{MemberRate, RiskModel};
use crate::root::{read_into, Dir, Root};
use crate::sources::mdstat::{self, MdArray};
use crate::sources::mdsys::{self, MdSys};
use crate::sources::SourceError;

/// Polls between two reads of a running sync's `sync_completed`, `sync_speed` and `mismatch_cnt`
/// while mdstat shows its live position: a `mismatch_cnt` that grows during a check is seen
/// within this many seconds (at the default sample interval), three files a second saved per
/// syncing array.
const PROGRESS_REFRESH_POLLS: u32 = 5;

/// MD RAID monitoring (agent config `[md]`).
#[derive(Debug, Clone, PartialEq, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MdConfig {
    /// Watch MD arrays (default true). A node without md stays silent either way.
    pub enabled: bool,
    /// A running resync/recovery/check/reshape whose position has not moved for this many
    /// polls is reported `stalled` (default 60: a minute at the default 1 s sample interval).
    pub stall_polls: u32,
    /// Seconds of progress samples the ETA's rate is measured over (default 600).
    pub eta_window_s: f64,
    /// Per-member sysfs (`dev-*/state`, `slot`, `errors`), the array geometry and its running
    /// state are re-read every this many polls (default 30), and at once when `/proc/mdstat`
    /// shows a change in the array's members, flags or slots (a member failed, added, spare,
    /// replaced); `array_state`, `degraded` and `sync_action` also when mdstat's line shows the
    /// sync or the read-only flag change, and a running sync's `sync_*` and `mismatch_cnt` every
    /// 5 polls. What mdstat cannot show (a member's `errors` count, `write_error`, `blocked`,
    /// `want_replacement`) is at most this many polls old: a 12-disk array has ~40 files.
    pub member_refresh_polls: u32,
}

impl Default for MdConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            stall_polls: 60,
            eta_window_s: 600.0,
            member_refresh_polls: 30,
        }
    }
}

/// The last full sysfs read of an array and what mdstat said then.
#[derive(Debug, Clone, PartialEq)]
struct SysCache {
    sys: MdSys,
    shape: Shape,
    run: RunShape,
    polls: u32,
}

/// What in mdstat's view of an array makes the per-member sysfs worth re-reading at once.
#[derive(Debug, Clone, PartialEq)]
struct Shape {
    active: bool,
    level: Option<String>,
    members: Vec<mdstat::MdMember>,
    slots: (Option<u32>, Option<u32>, Option<String>),
}

impl Shape {
    fn of(a: &MdArray) -> Self {
        Self {
            active: a.active,
            level: a.level.clone(),
            members: a.members.clone(),
            slots: (a.raid_disks, a.working_disks, a.slot_status.clone()),
        }
    }

    /// `Shape::of(a) == *self`, without building one: every array, every second.
    fn matches(&self, a: &MdArray) -> bool {
        self.active == a.active
            && self.level == a.level
            && self.members == a.members
            && self.slots.0 == a.raid_disks
            && self.slots.1 == a.working_disks
            && self.slots.2 == a.slot_status
    }
}

/// What in mdstat's view of an array says its running state (`array_state`, `sync_action`, …)
/// may have moved: the read-only flag, which sync runs, and which waits. While none of it changes
/// and no sync runs, the running state is re-read only with the members, every
/// `member_refresh_polls`: most arrays are idle most of the time, and each saves six sysfs reads a
/// second.
#[derive(Debug, Clone, PartialEq)]
struct RunShape {
    read_only: mdstat::ReadOnly,
    action: Option<mdstat::SyncAction>,
    waiting: Option<String>,
}

impl RunShape {
    fn of(a: &MdArray) -> Self {
        Self {
            read_only: a.read_only,
            action: a.progress.as_ref().map(|p| p.action.clone()),
            waiting: a.waiting.as_ref().map(|w| w.action.clone()),
        }
    }

    /// `RunShape::of(a) == *self`, without building one.
    fn matches(&self, a: &MdArray) -> bool {
        self.read_only == a.read_only
            && self.action.as_ref() == a.progress.as_ref().map(|p| &p.action)
            && self.waiting.as_deref() == a.waiting.as_ref().map(|w| w.action.as_str())
    }
}

/// One array as `top` shows it: its `md` line and its members.
#[derive(Debug, Clone, PartialEq)]
pub struct MdNow {
    /// The array.
    pub status: ArrayStatus,
    /// Its members, as the `md_member` lines report them.
    pub members: Vec<MemberStatus>,
}

/// Watches `/proc/mdstat` and `/sys/block/md*/md`.
#[derive(Debug)]
pub struct MdCollector {
    config: MdConfig,
    detector: MdDetector,
    sys_cache: BTreeMap<String, SysCache>,
    /// Each array's `md/` directory, kept open for its reads.
    dirs: BTreeMap<String, Dir>,
    buf: String,
    /// The arrays of the last mdstat, reused when their lines did not change.
    reuse: mdstat::Reuse,
    /// The drives' readings: each survivor's own rate in `rebuild_risk`.
    book: Option<DriveBook>,
}

impl MdCollector {
    /// A monitor with `config`, computing risk with `risk`.
    pub fn new(config: MdConfig, risk: RiskModel) -> Self {
        Self {
            detector: MdDetector::new(config.stall_polls, config.eta_window_s, risk),
            config,
            sys_cache: BTreeMap::new(),
            dirs: BTreeMap::new(),
            buf: String::new(),
            reuse: mdstat::Reuse::default(),
            book: None,
        }
    }

    /// Takes each surviving member's own failure rate from `book` (the drive monitor's
    /// readings) for `rebuild_risk` and `members_at_risk`; without one, every member has the
    /// flat rate.
    pub fn with_book(mut self, book: DriveBook) -> Self {
        self.book = Some(book);
        self
    }

    /// Array `name`'s rebuild risk with its members' own rates, and its members at risk
    /// (`None` for the count when no survivor's drive has been read).
    fn member_risk(&self, view: Option<&BookView>, s: &ArrayStatus) -> (Option<f64>, Option<u32>) {
        let Some(view) = view else {
            return (s.rebuild_risk, None);
        };
        let rate = |member: &str| {
            view.resolve(member).map(|e| MemberRate {
                afr: e.afr,
                at_risk: e.at_risk,
            })
        };
        match self.detector.member_risk(&s.array, &rate) {
            Some((risk, n)) => (risk, Some(n)),
            None => (s.rebuild_risk, None),
        }
    }

    /// The arrays as last polled, by name, with their members.
    pub fn arrays(&self) -> impl Iterator<Item = (&ArrayStatus, &[MemberStatus])> {
        self.detector.arrays()
    }

    /// One array as last polled.
    pub fn array(&self, name: &str) -> Option<&ArrayStatus> {
        self.detector.array(name)
    }
}

/// What a node without md reads as.
static NO_MDSTAT: mdstat::Mdstat = mdstat::Mdstat {
    personalities: Vec::new(),
    arrays: Vec::new(),
    unused_devices: None,
    skipped: Vec::new(),
};

/// The array's sysfs: the running state every poll, the rest when due or when mdstat shows
/// the array changed shape.
/// Brings the array's sysfs view in the cache up to date; afterwards the cache holds it, or
/// nothing when the array has no sysfs directory (or reading it failed).
fn read_sys(
    config: &MdConfig,
    dirs: &mut BTreeMap<String, Dir>,
    sys_cache: &mut BTreeMap<String, SysCache>,
    root: &Root,
    a: &MdArray,
) -> Result<(), SourceError> {
    let every = config.member_refresh_polls.max(1);
    if !dirs.contains_key(&a.name) {
        dirs.insert(a.name.clone(), mdsys::dir(root, &a.name));
    }
    let Some(dir) = dirs.get_mut(&a.name) else {
        return Ok(());
    };
    if let Some(c) = sys_cache.get_mut(&a.name) {
        c.polls += 1;
        if c.shape.matches(a) && c.polls < every {
            let same_run = c.run.matches(a);
            // An idle array whose mdstat line did not move: nothing in its running state can
            // have changed unseen (mismatch_cnt grows only during a sync run).
            if same_run && a.progress.is_none() {
                return Ok(());
            }
            // The same run going on: only its progress (and mismatch count) moves; its state
            // is re-read when mdstat's line changes and with the members. mdstat's line
            // carries the live position and speed every second, so sysfs' checkpoint and
            // mismatch count are re-read every PROGRESS_REFRESH_POLLS (every poll when the
            // line has no live counts).
            let refreshed = if same_run {
                let live = a.progress.as_ref().and_then(|p| p.counts()).is_some();
                if live && c.polls % PROGRESS_REFRESH_POLLS != 0 {
                    return Ok(());
                }
                mdsys::refresh_progress(dir, &mut c.sys)
            } else {
                c.run = RunShape::of(a);
                mdsys::refresh(dir, &mut c.sys)
            };
            match refreshed {
                Ok(true) => return Ok(()),
                Ok(false) => {}
                Err(e) => {
                    sys_cache.remove(&a.name);
                    return Err(e);
                }
            }
        }
    }
    sys_cache.remove(&a.name);
    if let Some(sys) = mdsys::read(dir)? {
        sys_cache.insert(
            a.name.clone(),
            SysCache {
                sys,
                shape: Shape::of(a),
                run: RunShape::of(a),
                polls: 0,
            },
        );
    }
    Ok(())
}

impl MdCollector {
    /// Reads the subsystem once; state changes are appended to `events`. An absent subsystem
    /// is silent; a broken one is an error (the rest of the poll still goes on).
    pub fn poll(
        &mut self,
        root: &Root,
        now_s: f64,
        events: &mut Vec<Event>,
    ) -> Result<(), SourceError> {
        if !self.config.enabled {
            return Ok(());
        }
        let path = root.proc("mdstat");
        let present = read_into(&path, &mut self.buf)?;
        let parsed = if present {
            self.reuse
                .update(&self.buf)
                .map_err(|e| SourceError::parse(&path, e))?
        } else {
            // No md module: nothing to watch (arrays seen before have gone with it).
            &NO_MDSTAT
        };
        let mut first_error = None;
        for a in &parsed.arrays {
            // Reported once per poll; the array still gets its mdstat view.
            if let Err(e) = read_sys(&self.config, &mut self.dirs, &mut self.sys_cache, root, a) {
                first_error.get_or_insert(e);
            }
        }
        self.sys_cache
            .retain(|name, _| parsed.arrays.iter().any(|a| &a.name == name));
        self.dirs
            .retain(|name, _| parsed.arrays.iter().any(|a| &a.name == name));
        let cache = &self.sys_cache;
        self.detector
            .observe(parsed, |n| cache.get(n).map(|c| &c.sys), now_s, events);
        first_error.map_or(Ok(()), Err)
    }

    /// Writes this report interval's lines, stamped `ts_ns`.
    pub fn report(&mut self, w: &mut LineWriter, ts_ns: i64) {
        let view = self.book.as_ref().map(DriveBook::view);
        for (s, members) in self.detector.arrays() {
            let (rebuild_risk, members_at_risk) = self.member_risk(view.as_deref(), s);
            w.line("md", ts_ns)
                .tag("array", &s.array)
                .tag("level", &s.level)
                .field("members", s.members)
                .field("active", s.active)
                .field("failed", s.failed)
                .field("spare", s.spare)
                .field("degraded", s.degraded)
                .field("state", s.state.as_str())
                .field("sync_action", s.sync_action.as_str())
                .field_opt("sync_pct", s.sync_pct)
                .field_opt("sync_speed_kbps", s.sync_speed_kbps)
                .field_opt("sync_eta_s", s.sync_eta_s)
                .field_opt("mismatch_cnt", s.mismatch_cnt)
                .field_opt("redundancy_left", s.redundancy_left)
                .field_opt("rebuild_risk", rebuild_risk)
                .field_opt("members_at_risk", members_at_risk)
                .field("stalled", s.stalled)
                .write();
            for m in members {
                w.line("md_member", ts_ns)
                    .tag("array", &s.array)
                    .tag("member", &m.name)
                    .field("state", m.state.as_str())
                    .field("failed", m.failed)
                    .field("spare", m.spare)
                    .field_opt("errors", m.errors)
                    .write();
            }
        }
    }
}

impl Collector for MdCollector {
    fn sources(&self) -> &'static [&'static str] {
        &["md"]
    }

    fn sample(&mut self, cx: &mut SampleCx<'_>) {
        if let Err(e) = self.poll(cx.root, cx.now_s, cx.events) {
            cx.errors.count("md", &e);
        }
    }

    fn report(&mut self, w: &mut LineWriter, cx: &mut ReportCx<'_>) {
        MdCollector::report(self, w, cx.ts_ns);
    }

    fn live(&self, live: &mut Live) {
        let view = self.book.as_ref().map(DriveBook::view);
        live.arrays.extend(self.arrays().map(|(s, m)| {
            let mut status = s.clone();
            status.rebuild_risk = self.member_risk(view.as_deref(), s).0;
            MdNow {
                status,
                members: m.to_vec(),
            }
        }));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::health::md::ArrayState;
    use crate::sources::mdstat::SyncAction;
    use crate::sources::mdsys::SyncCompleted;
    use std::path::Path;

    /// A throw-away host root the monitor polls, written step by step.
    struct Host {
        dir: tempfile::TempDir,
        root: Root,
    }

    impl Host {
        fn new() -> Self {
            let dir = tempfile::tempdir().expect("tempdir");
            let root = Root::new(dir.path().join("proc"), dir.path().join("sys"));
            std::fs::create_dir_all(dir.path().join("proc")).expect("mkdir");
            Self { dir, root }
        }

        fn write(&self, rel: &str, text: &str) {
            let p = self.dir.path().join(rel);
            std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
            std::fs::write(p, text).expect("write");
        }

        fn mdstat(&self, text: &str) {
            self.write("proc/mdstat", text);
        }

        fn attr(&self, md: &str, name: &str, value: &str) {
            self.write(&format!("sys/block/{md}/md/{name}"), &format!("{value}\n"));
        }

        fn dev(&self, md: &str, dev: &str, state: &str, slot: &str, errors: u64) {
            self.attr(md, &format!("dev-{dev}/state"), state);
            self.attr(md, &format!("dev-{dev}/slot"), slot);
            self.attr(md, &format!("dev-{dev}/errors"), &errors.to_string());
        }
    }

    fn monitor() -> MdCollector {
        MdCollector::new(MdConfig::default(), RiskModel::default())
    }

    fn poll(m: &mut MdCollector, h: &Host, t: f64) -> Vec<(String, String, String)> {
        let mut ev = Vec::new();
        m.poll(&h.root, t, &mut ev).expect("poll");
        ev.into_iter()
            .map(|e| (e.object, e.from_state, e.to_state))
            .collect()
    }

    fn ev(object: &str, from: &str, to: &str) -> (String, String, String) {
        (object.into(), from.into(), to.into())
    }

    fn report(m: &mut MdCollector) -> String {
        let mut w = LineWriter::new("ds01", &[]);
        m.report(&mut w, 1_700_000_000_000_000_000);
        String::from_utf8(w.take()).expect("utf8")
    }

    fn close(a: f64, b: f64, rel: f64) -> bool {
        (a - b).abs() <= rel * b.abs()
    }

    const RAID6_HEAD: &str = "Personalities : [raid6] [raid5] [raid4]\n";

    fn raid6(members: &str, slots: &str, progress: &str) -> String {
        format!(
            "{RAID6_HEAD}md0 : active raid6 {members}\n      4000000 blocks super 1.2 level 6, 512k chunk, algorithm 2 {slots}\n{progress}      \nunused devices: <none>\n"
        )
    }

    /// sdc of the clean 6-disk raid6 with a spare fails at `t`: the array and the member say so.
    fn sdc_fails(m: &mut MdCollector, h: &Host, t: f64) {
        h.mdstat(&raid6(
            "sdg[6](S) sdf[5] sde[4] sdd[3] sdc[2](F) sdb[1] sda[0]",
            "[6/5] [UU_UUU]",
            "",
        ));
        assert_eq!(
            poll(m, h, t),
            vec![
                ev("md0", "clean", "degraded"),
                ev("md0/sdc", "active", "failed")
            ]
        );
    }

    #[test]
    fn an_idle_array_read_the_same_many_times_still_announces_its_next_change() {
        let h = Host::new();
        let mut m = monitor();
        let members = "sdg[6](S) sdf[5] sde[4] sdd[3] sdc[2] sdb[1] sda[0]";
        h.mdstat(&raid6(members, "[6/6] [UUUUUU]", ""));
        for t in 0..5 {
            // Identical readings: derived once, then kept as they are.
            assert_eq!(poll(&mut m, &h, f64::from(t)), vec![]);
        }
        let s = m.array("md0").expect("md0");
        assert_eq!((s.state, s.redundancy_left), (ArrayState::Clean, Some(2)));
        sdc_fails(&mut m, &h, 5.0);
        assert_eq!(poll(&mut m, &h, 6.0), vec![]);
        let s = m.array("md0").expect("md0");
        assert_eq!(
            (s.state, s.redundancy_left),
            (ArrayState::Degraded, Some(1))
        );
        // Back to the first reading: the change back is announced too, and a vanished array is.
        h.mdstat(&raid6(members, "[6/6] [UUUUUU]", ""));
        assert_eq!(
            poll(&mut m, &h, 7.0),
            vec![
                ev("md0", "degraded", "clean"),
                ev("md0/sdc", "failed", "active")
            ]
        );
        h.mdstat(&format!("{RAID6_HEAD}unused devices: <none>\n"));
        assert_eq!(poll(&mut m, &h, 8.0), vec![ev("md0", "clean", "")]);
    }

    /// While a run goes on the detector keeps no copy of the reading (it derives every poll);
    /// once the run ends it keeps one again, so identical idle readings are skipped and the next
    /// change is still announced.
    #[test]
    fn after_a_check_ends_the_idle_array_still_announces_its_next_change() {
        let h = Host::new();
        let mut m = monitor();
        let members = "sdg[6](S) sdf[5] sde[4] sdd[3] sdc[2] sdb[1] sda[0]";
        h.mdstat(&raid6(members, "[6/6] [UUUUUU]", ""));
        assert_eq!(poll(&mut m, &h, 0.0), vec![]);
        for (t, done) in [(1, 100_000), (2, 200_000), (3, 200_000), (4, 300_000)] {
            h.mdstat(&raid6(
                members,
                "[6/6] [UUUUUU]",
                &format!(
                    "      [>....................]  check =  5.0% ({done}/1000000) finish=10.0min speed=1000K/sec\n"
                ),
            ));
            poll(&mut m, &h, f64::from(t));
            let s = m.array("md0").expect("md0");
            assert_eq!(s.sync_action, "check", "at {t}");
        }
        h.mdstat(&raid6(members, "[6/6] [UUUUUU]", ""));
        poll(&mut m, &h, 5.0);
        for t in 6..9 {
            assert_eq!(poll(&mut m, &h, f64::from(t)), vec![], "at {t}");
            let s = m.array("md0").expect("md0");
            assert_eq!(
                (s.state, s.sync_action.as_str()),
                (ArrayState::Clean, "idle")
            );
        }
        sdc_fails(&mut m, &h, 9.0);
        assert_eq!(poll(&mut m, &h, 10.0), vec![]);
    }

    /// While a check runs, its members are derived again only when what they come from moves:
    /// a member failing in mdstat, or its sysfs state or error count moving, after seconds in
    /// which only the progress moved, is still announced and reported.
    #[test]
    fn member_changes_during_a_run_are_still_seen() {
        let h = Host::new();
        let mut m = MdCollector::new(
            MdConfig {
                member_refresh_polls: 3,
                ..MdConfig::default()
            },
            RiskModel::default(),
        );
        let members = "sdg[6](S) sdf[5] sde[4] sdd[3] sdc[2] sdb[1] sda[0]";
        let check = |done: u64| {
            format!("      [>....................]  check =  5.0% ({done}/1000000) finish=10.0min speed=1000K/sec\n")
        };
        for (d, slot) in [
            ("sda", "0"),
            ("sdb", "1"),
            ("sdc", "2"),
            ("sdd", "3"),
            ("sde", "4"),
            ("sdf", "5"),
        ] {
            h.dev("md0", d, "in_sync", slot, 0);
        }
        h.dev("md0", "sdg", "spare", "none", 0);
        h.attr("md0", "sync_action", "check");
        h.attr("md0", "degraded", "0");
        h.attr("md0", "array_state", "clean");
        h.mdstat(&raid6(members, "[6/6] [UUUUUU]", &check(100_000)));
        assert_eq!(poll(&mut m, &h, 0.0), vec![]);
        for t in 1..4u32 {
            h.mdstat(&raid6(
                members,
                "[6/6] [UUUUUU]",
                &check(100_000 * u64::from(t + 1)),
            ));
            assert_eq!(poll(&mut m, &h, f64::from(t)), vec![], "at {t}");
        }
        // sysfs alone: sdb's corrected read errors grow (seen at the next member refresh)
        h.dev("md0", "sdb", "in_sync", "1", 7);
        for t in 4..7u32 {
            h.mdstat(&raid6(
                members,
                "[6/6] [UUUUUU]",
                &check(100_000 * u64::from(t + 1)),
            ));
            assert_eq!(poll(&mut m, &h, f64::from(t)), vec![], "at {t}");
        }
        assert!(
            report(&mut m).contains("md_member,host=ds01,array=md0,member=sdb state=\"in_sync\",failed=false,spare=false,errors=7i"),
            "{}",
            report(&mut m)
        );
        // mdstat: sdc fails during the check
        h.dev("md0", "sdc", "faulty", "none", 0);
        h.attr("md0", "degraded", "1");
        h.mdstat(&raid6(
            "sdg[6](S) sdf[5] sde[4] sdd[3] sdc[2](F) sdb[1] sda[0]",
            "[6/5] [UU_UUU]",
            &check(800_000),
        ));
        assert_eq!(
            poll(&mut m, &h, 7.0),
            vec![
                ev("md0", "clean", "degraded"),
                ev("md0/sdc", "active", "failed")
            ]
        );
        let s = m.array("md0").expect("md0");
        assert_eq!((s.failed, s.sync_action.as_str()), (1, "check"));
    }

    #[test]
    fn recovery_progresses_to_completion_with_our_own_eta() {
        let h = Host::new();
        let mut m = monitor();
        h.mdstat(&raid6(
            "sdg[6](S) sdf[5] sde[4] sdd[3] sdc[2] sdb[1] sda[0]",
            "[6/6] [UUUUUU]",
            "",
        ));
        assert_eq!(
            poll(&mut m, &h, 0.0),
            vec![],
            "the first poll is the baseline"
        );
        let s = m.array("md0").expect("md0");
        assert_eq!(
            (s.state, s.redundancy_left, s.rebuild_risk),
            (ArrayState::Clean, Some(2), Some(0.0))
        );
        assert_eq!((s.members, s.active, s.spare), (6, 6, 1));

        sdc_fails(&mut m, &h, 1.0);
        let s = m.array("md0").expect("md0");
        assert_eq!((s.failed, s.degraded, s.redundancy_left), (1, 1, Some(1)));
        assert_eq!(s.sync_action, "idle");

        let rec = |done: u64, speed: u64| {
            raid6(
                "sdg[6] sdf[5] sde[4] sdd[3] sdc[2](F) sdb[1] sda[0]",
                "[6/5] [UU_UUU]",
                &format!("      [>....................]  recovery = {:.1}% ({done}/1000000) finish=1.0min speed={speed}K/sec\n", done as f64 / 10000.0),
            )
        };
        h.mdstat(&rec(0, 10000));
        assert_eq!(
            poll(&mut m, &h, 2.0),
            vec![
                ev("md0", "degraded", "recovering"),
                ev("md0/sdg", "spare", "active")
            ]
        );
        // One sample: the kernel's speed. 1 000 000 KiB at 10 000 KiB/s = 100 s.
        let s = m.array("md0").expect("md0");
        assert_eq!(s.sync_eta_s, Some(100.0));
        assert_eq!(s.sync_action, "recover");

        h.mdstat(&rec(100_000, 10000));
        assert_eq!(poll(&mut m, &h, 12.0), vec![]);
        // 100 000 KiB in 10 s = 10 000 KiB/s; 900 000 KiB left = 90 s.
        assert_eq!(m.array("md0").and_then(|s| s.sync_eta_s), Some(90.0));

        // The kernel's speed jumps to 50 000 KiB/s, but our samples say 10 000 KiB/s:
        // 200 000 KiB in 20 s; 800 000 KiB left = 80 s (the kernel's figure would be 16 s).
        h.mdstat(&rec(200_000, 50000));
        assert_eq!(poll(&mut m, &h, 22.0), vec![]);
        let s = m.array("md0").expect("md0").clone();
        assert_eq!(s.sync_eta_s, Some(80.0));
        assert_eq!(s.sync_pct, Some(20.0));
        assert_eq!(s.sync_speed_kbps, Some(50000));
        // Risk by hand: 5 survivors, 1 parity left, T = 80 s = 0.0222 h.
        // p = 1 − exp(−0.02 · 0.022222 / 8766) = 5.0701e-8; P(X > 1) ≈ C(5,2) p² = 2.5706e-14.
        let r = s.rebuild_risk.expect("risk");
        assert!(close(r, 2.570_585e-14, 1e-4), "{r}");
        insta::assert_snapshot!(report(&mut m));

        h.mdstat(&raid6(
            "sdg[6] sdf[5] sde[4] sdd[3] sdb[1] sda[0]",
            "[6/6] [UUUUUU]",
            "",
        ));
        assert_eq!(
            poll(&mut m, &h, 32.0),
            vec![
                ev("md0", "recovering", "clean"),
                ev("md0/sdc", "failed", "removed")
            ]
        );
        let s = m.array("md0").expect("md0");
        assert_eq!(
            (s.sync_eta_s, s.sync_pct, s.rebuild_risk),
            (None, None, Some(0.0))
        );
        assert_eq!((s.redundancy_left, s.spare, s.failed), (Some(2), 0, 0));
    }

    /// An 8-disk raid6 rebuilding `sdh` with sysfs present; `sdc` fails half-way.
    fn raid6_rebuild_step(h: &Host, done_kb: u64, sdc_failed: bool) {
        let (members, slots) = if sdc_failed {
            (
                "sdh[8] sdg[6] sdf[5] sde[4] sdd[3] sdc[2](F) sdb[1] sda[0]",
                "[8/6] [UU_UUUU_]",
            )
        } else {
            (
                "sdh[8] sdg[6] sdf[5] sde[4] sdd[3] sdc[2] sdb[1] sda[0]",
                "[8/7] [UUUUUUU_]",
            )
        };
        h.mdstat(&format!(
            "{RAID6_HEAD}md1 : active raid6 {members}\n      51840000000 blocks super 1.2 level 6, 512k chunk, algorithm 2 {slots}\n      [=========>...........]  recovery = 49.9% ({done_kb}/8640000000) finish=720.0min speed=100000K/sec\n      bitmap: 1/65 pages [4KB], 65536KB chunk\n\nunused devices: <none>\n"
        ));
        h.attr("md1", "level", "raid6");
        h.attr("md1", "raid_disks", "8");
        h.attr("md1", "array_state", "active");
        h.attr("md1", "degraded", if sdc_failed { "2" } else { "1" });
        h.attr("md1", "sync_action", "recover");
        h.attr("md1", "sync_completed", "8589934592 / 17280000000");
        h.attr("md1", "sync_speed", "100000");
        h.attr("md1", "mismatch_cnt", "0");
        h.attr("md1", "component_size", "8640000000");
        for (i, d) in ["sda", "sdb", "sdc", "sdd", "sde", "sdf", "sdg"]
            .iter()
            .enumerate()
        {
            if *d == "sdc" && sdc_failed {
                h.dev("md1", d, "faulty", "none", 31);
            } else {
                h.dev("md1", d, "in_sync", &i.to_string(), 0);
            }
        }
        h.dev("md1", "sdh", "spare", "7", 0);
    }

    #[test]
    fn second_failure_during_raid6_rebuild() {
        let h = Host::new();
        let mut m = monitor();
        raid6_rebuild_step(&h, 4_300_000_000, false);
        assert_eq!(poll(&mut m, &h, 0.0), vec![]);
        raid6_rebuild_step(&h, 4_310_000_000, false);
        assert_eq!(poll(&mut m, &h, 100.0), vec![]);
        let before = m.array("md1").expect("md1").clone();
        assert_eq!(before.state, ArrayState::Recovering);
        assert_eq!(
            (before.degraded, before.redundancy_left, before.active),
            (1, Some(1), 7)
        );
        // 10 000 000 KiB in 100 s = 100 000 KiB/s; 4 330 000 000 KiB left = 43 300 s.
        assert_eq!(before.sync_eta_s, Some(43_300.0));
        // By hand: T = 43 300 s = 12.0278 h; p = 1 − exp(−0.02 · 12.0278 / 8766) = 2.74415e-5;
        // 7 survivors, 1 left: P(X > 1) = 1 − q⁷ − 7pq⁶ = 1.58123e-8.
        let r0 = before.rebuild_risk.expect("risk");
        assert!(close(r0, 1.581_23e-8, 1e-4), "{r0}");
        let (_, members) = m.arrays().next().expect("one array");
        let sdh = members.iter().find(|x| x.name == "sdh").expect("sdh");
        assert_eq!((sdh.state.as_str(), sdh.spare), ("rebuilding", false));

        raid6_rebuild_step(&h, 4_320_000_000, true);
        assert_eq!(
            poll(&mut m, &h, 200.0),
            vec![ev("md1/sdc", "active", "failed")]
        );
        let after = m.array("md1").expect("md1").clone();
        assert_eq!(after.state, ArrayState::Recovering);
        assert_eq!(
            (
                after.degraded,
                after.redundancy_left,
                after.active,
                after.failed
            ),
            (2, Some(0), 6, 1)
        );
        // 20 000 000 KiB in 200 s; 4 320 000 000 KiB left = 43 200 s = 12 h, half the member.
        assert_eq!(after.sync_eta_s, Some(43_200.0));
        // By hand: p = 1 − exp(−0.02 · 12 / 8766) = 2.73781e-5; P_disk = 1 − q⁶ = 1.64258e-4.
        // Bytes still to read: 0.5 · 8 640 000 000 KiB · 1024 · 6 survivors = 2.65421e13 B
        // = 2.12337e14 bit; P_ure = 1 − exp(−0.212337) = 0.191308.
        // P = 1 − (1 − 1.64258e-4)(1 − 0.191308) = 0.191440.
        let r1 = after.rebuild_risk.expect("risk");
        assert!(close(r1, 0.191_440, 1e-4), "{r1}");
        assert!(r1 > 1e6 * r0);
        let text = report(&mut m);
        assert!(text.contains("md_member,host=ds01,array=md1,member=sdc state=\"faulty\",failed=true,spare=false,errors=31i"), "{text}");
    }

    fn raid1_check(h: &Host, action: &str, completed: &str, mismatch: u64, progress: &str) {
        h.mdstat(&format!(
            "Personalities : [raid1]\nmd2 : active raid1 sdb1[1] sda1[0]\n      1000 blocks super 1.2 [2/2] [UU]\n{progress}      \nunused devices: <none>\n"
        ));
        h.attr("md2", "level", "raid1");
        h.attr("md2", "raid_disks", "2");
        h.attr("md2", "array_state", "clean");
        h.attr("md2", "degraded", "0");
        h.attr("md2", "sync_action", action);
        h.attr("md2", "sync_completed", completed);
        h.attr(
            "md2",
            "sync_speed",
            if action == "idle" { "none" } else { "500" },
        );
        h.attr("md2", "mismatch_cnt", &mismatch.to_string());
        h.attr("md2", "component_size", "1000");
        h.dev("md2", "sda1", "in_sync", "0", 0);
        h.dev("md2", "sdb1", "in_sync", "1", 0);
    }

    #[test]
    fn mismatch_cnt_growth_during_checks() {
        let h = Host::new();
        let mut m = monitor();
        raid1_check(&h, "idle", "none", 0, "");
        assert_eq!(poll(&mut m, &h, 0.0), vec![]);
        raid1_check(
            &h,
            "check",
            "0 / 2000",
            0,
            "      [>....................]  check =  0.0% (0/1000) finish=0.1min speed=500K/sec\n",
        );
        assert_eq!(poll(&mut m, &h, 1.0), vec![ev("md2", "idle", "check")]);
        raid1_check(&h, "check", "1000 / 2000", 128, "      [==========>..........]  check = 50.0% (500/1000) finish=0.0min speed=500K/sec\n");
        // The position is mdstat's, every poll; sysfs' mismatch count is read every
        // PROGRESS_REFRESH_POLLS polls since the last full read (the one at 0.0) while the
        // check runs: polls 2-4 still have 0, poll 5 reads 128 and says so.
        let mismatch = |m: &MdCollector| m.array("md2").and_then(|s| s.mismatch_cnt);
        let mut t = 2.0;
        for polls in 2..PROGRESS_REFRESH_POLLS {
            assert_eq!(poll(&mut m, &h, t), vec![], "poll {polls}");
            assert_eq!(m.array("md2").and_then(|s| s.sync_pct), Some(50.0));
            assert_eq!(mismatch(&m), Some(0), "poll {polls}");
            t += 1.0;
        }
        assert_eq!(
            poll(&mut m, &h, t),
            vec![ev("md2", "mismatch_cnt=0", "mismatch_cnt=128")]
        );
        assert_eq!(mismatch(&m), Some(128));
        t += 1.0;
        // Further growth during the same check is read at the next refresh, not announced...
        raid1_check(&h, "check", "1500 / 2000", 192, "      [===============>.....]  check = 75.0% (750/1000) finish=0.0min speed=500K/sec\n");
        for polls in PROGRESS_REFRESH_POLLS + 1..2 * PROGRESS_REFRESH_POLLS {
            assert_eq!(poll(&mut m, &h, t), vec![]);
            assert_eq!(m.array("md2").and_then(|s| s.sync_pct), Some(75.0));
            assert_eq!(mismatch(&m), Some(128), "poll {polls}");
            t += 1.0;
        }
        assert_eq!(poll(&mut m, &h, t), vec![]);
        assert_eq!(mismatch(&m), Some(192));
        t += 1.0;
        // ...but its final count is, when the check ends.
        raid1_check(&h, "idle", "none", 256, "");
        assert_eq!(
            poll(&mut m, &h, t),
            vec![
                ev("md2", "check", "idle"),
                ev("md2", "mismatch_cnt=128", "mismatch_cnt=256")
            ]
        );
        let s = m.array("md2").expect("md2");
        assert_eq!(
            (s.mismatch_cnt, s.state, s.rebuild_risk),
            (Some(256), ArrayState::Clean, Some(0.0))
        );
        // A new check resets the count: no growth event.
        raid1_check(
            &h,
            "check",
            "0 / 2000",
            0,
            "      [>....................]  check =  0.0% (0/1000) finish=0.1min speed=500K/sec\n",
        );
        assert_eq!(poll(&mut m, &h, t + 1.0), vec![ev("md2", "idle", "check")]);
    }

    /// mdstat's `speed=` and sysfs `sync_speed` are the same kernel figure; the one read this
    /// second (mdstat's) is reported, sysfs' when mdstat prints no progress.
    #[test]
    fn sync_speed_is_mdstats_with_sysfs_as_the_fallback() {
        let h = Host::new();
        let mut m = monitor();
        raid1_check(&h, "idle", "none", 0, "");
        poll(&mut m, &h, 0.0);
        raid1_check(
            &h,
            "check",
            "0 / 2000",
            0,
            "      [>....................]  check =  0.0% (0/1000) finish=0.1min speed=700K/sec\n",
        );
        h.attr("md2", "sync_speed", "900");
        poll(&mut m, &h, 1.0);
        assert_eq!(m.array("md2").and_then(|s| s.sync_speed_kbps), Some(700));
        // sysfs says a check runs, mdstat has no progress line for it (yet)
        raid1_check(&h, "check", "100 / 2000", 0, "");
        h.attr("md2", "sync_speed", "900");
        poll(&mut m, &h, 2.0);
        let s = m.array("md2").expect("md2");
        assert_eq!(
            (s.sync_action.as_str(), s.sync_speed_kbps),
            ("check", Some(900))
        );
    }

    #[test]
    fn member_sysfs_is_reread_when_due_or_when_mdstat_changes() {
        let h = Host::new();
        let mut m = MdCollector::new(
            MdConfig {
                member_refresh_polls: 3,
                ..MdConfig::default()
            },
            RiskModel::default(),
        );
        let errors = |m: &MdCollector| {
            m.arrays()
                .flat_map(|(_, ms)| ms.iter())
                .find(|x| x.name == "sdb1")
                .and_then(|x| x.errors)
        };
        raid1_check(&h, "idle", "none", 0, "");
        poll(&mut m, &h, 0.0);
        h.dev("md2", "sdb1", "in_sync", "1", 5);
        poll(&mut m, &h, 1.0);
        poll(&mut m, &h, 2.0);
        assert_eq!(errors(&m), Some(0), "not due yet");
        poll(&mut m, &h, 3.0);
        assert_eq!(errors(&m), Some(5), "due after 3 polls");
        // A member flagged in mdstat is read at once.
        h.dev("md2", "sdb1", "faulty", "none", 9);
        h.mdstat("Personalities : [raid1]\nmd2 : active raid1 sdb1[1](F) sda1[0]\n      1000 blocks super 1.2 [2/1] [U_]\n      \nunused devices: <none>\n");
        h.attr("md2", "degraded", "1");
        assert_eq!(
            poll(&mut m, &h, 4.0),
            vec![
                ev("md2", "clean", "degraded"),
                ev("md2/sdb1", "active", "failed")
            ]
        );
        assert_eq!(errors(&m), Some(9));
    }

    #[test]
    fn stalled_recovery() {
        let h = Host::new();
        let mut m = MdCollector::new(
            MdConfig {
                stall_polls: 3,
                ..MdConfig::default()
            },
            RiskModel::default(),
        );
        let step = |done: u64| {
            h.mdstat(&format!(
                "Personalities : [raid5]\nmd3 : active raid5 sdd[4] sdc[2] sdb[1] sda[0]\n      3000 blocks super 1.2 level 5, 64k chunk, algorithm 2 [4/3] [UUU_]\n      [=====>...............]  recovery = 30.0% ({done}/1000) finish=1.0min speed=0K/sec\n\nunused devices: <none>\n"
            ))
        };
        step(300);
        assert_eq!(poll(&mut m, &h, 0.0), vec![]);
        assert_eq!(poll(&mut m, &h, 1.0), vec![]);
        assert_eq!(poll(&mut m, &h, 2.0), vec![]);
        assert!(!m.array("md3").expect("md3").stalled);
        assert_eq!(
            poll(&mut m, &h, 3.0),
            vec![ev("md3", "progressing", "stalled")]
        );
        let s = m.array("md3").expect("md3");
        assert!(s.stalled);
        assert_eq!(s.sync_eta_s, None);
        // A stalled rebuild is an open window (168 h): 3 survivors, none left.
        // p = 1 − exp(−0.02 · 168 / 8766) = 3.83226e-4; P_disk = 1 − q³ = 1.149236e-3;
        // URE over 0.7 · 1000 KiB · 1024 · 3 B is negligible (1.7e-8): P = 1.149254e-3.
        let r = s.rebuild_risk.expect("risk");
        assert!(close(r, 1.149_254e-3, 1e-5), "{r}");
        step(310);
        assert_eq!(
            poll(&mut m, &h, 4.0),
            vec![ev("md3", "stalled", "progressing")]
        );
        assert!(!m.array("md3").expect("md3").stalled);
    }

    #[test]
    fn absent_empty_and_broken_sources() {
        let h = Host::new();
        let mut m = monitor();
        assert_eq!(poll(&mut m, &h, 0.0), vec![]);
        assert_eq!(report(&mut m), "");
        h.mdstat("Personalities : \nunused devices: <none>\n");
        assert_eq!(poll(&mut m, &h, 1.0), vec![]);
        assert_eq!(report(&mut m), "");
        h.mdstat("garbage\n");
        let mut ev = Vec::new();
        assert!(matches!(
            m.poll(&h.root, 2.0, &mut ev),
            Err(SourceError::Parse { .. })
        ));
        // Disabled: not even read.
        let mut off = MdCollector::new(
            MdConfig {
                enabled: false,
                ..MdConfig::default()
            },
            RiskModel::default(),
        );
        assert!(off.poll(&h.root, 0.0, &mut ev).is_ok());
    }

    #[test]
    fn bad_sysfs_is_an_error_but_the_array_is_still_reported() {
        let h = Host::new();
        let mut m = monitor();
        raid1_check(&h, "idle", "none", 0, "");
        h.attr("md2", "degraded", "lots");
        let mut ev = Vec::new();
        assert!(matches!(
            m.poll(&h.root, 0.0, &mut ev),
            Err(SourceError::Parse { .. })
        ));
        let s = m.array("md2").expect("reported from mdstat");
        assert_eq!((s.state, s.mismatch_cnt), (ArrayState::Clean, None));
    }

    #[test]
    fn arrays_appearing_and_vanishing() {
        let h = Host::new();
        let mut m = monitor();
        h.mdstat("Personalities : [raid1]\nunused devices: <none>\n");
        assert_eq!(poll(&mut m, &h, 0.0), vec![]);
        h.mdstat("Personalities : [raid1]\nmd9 : active raid1 sdb[1] sda[0]\n      100 blocks [2/2] [UU]\n\nunused devices: <none>\n");
        assert_eq!(poll(&mut m, &h, 1.0), vec![ev("md9", "", "clean")]);
        h.mdstat("Personalities : [raid1]\nmd9 : active raid1 sdc[2](S) sdb[1] sda[0]\n      100 blocks [2/2] [UU]\n\nunused devices: <none>\n");
        assert_eq!(poll(&mut m, &h, 2.0), vec![ev("md9/sdc", "", "spare")]);
        h.mdstat("Personalities : [raid1]\nunused devices: <none>\n");
        assert_eq!(poll(&mut m, &h, 3.0), vec![ev("md9", "clean", "")]);
    }

    proptest::proptest! {
        /// Any sequence of mdstat texts, with or without a sysfs view, keeps the derived
        /// values consistent and never panics.
        #[test]
        fn any_sequence_keeps_invariants(
            steps in proptest::collection::vec(
                (
                    proptest::sample::select(vec!["raid1", "raid5", "raid6", "raid10", "raid0", "linear", "weird"]),
                    1u32..6, 0u32..6, 0u64..2000, proptest::bool::ANY, proptest::bool::ANY,
                    proptest::sample::select(vec!["", "(F)", "(S)", "(W)(F)", "(R)", "(J)"]),
                    proptest::sample::select(vec!["recovery", "resync", "check", "reshape", "repair"]),
                    0u64..100_000,
                ),
                1..12,
            ),
        ) {
            let mut m = monitor();
            let mut t = 0.0;
            for (level, n, working, done, active, with_sys, flag, action, speed) in steps {
                let progress = if done < 1500 {
                    format!("      [=>...]  {action} = {:.1}% ({done}/1000) finish=1.0min speed={speed}K/sec\n", done as f64 / 10.0)
                } else {
                    String::new()
                };
                let text = format!(
                    "Personalities : [{level}]\nmd0 : {} {level} sdb[1]{flag} sda[0]\n      4000 blocks super 1.2 [{n}/{working}] [UU]\n{progress}\nunused devices: <none>\n",
                    if active { "active" } else { "inactive" },
                );
                let parsed = mdstat::parse(&text).expect("parses");
                let mut sys = BTreeMap::new();
                if with_sys {
                    sys.insert("md0".to_owned(), MdSys {
                        degraded: Some(n.saturating_sub(working)),
                        sync_action: Some(SyncAction::from_kernel(action)),
                        sync_completed: Some(SyncCompleted::Progress { done_sectors: done * 2, total_sectors: 2000 }),
                        sync_speed_kbps: Some(speed),
                        component_size_kb: Some(1000),
                        ..MdSys::default()
                    });
                }
                let mut events = Vec::new();
                m.detector.observe(&parsed, |n| sys.get(n), t, &mut events);
                t += 1.0;
                for (s, members) in m.arrays() {
                    proptest::prop_assert!(s.active <= s.members);
                    proptest::prop_assert!(s.failed as usize <= members.len());
                    if let Some(r) = s.rebuild_risk {
                        proptest::prop_assert!((0.0..=1.0).contains(&r), "{r}");
                    }
                    if let Some(p) = s.sync_pct {
                        proptest::prop_assert!((0.0..=100.0).contains(&p), "{p}");
                    }
                    if let Some(e) = s.sync_eta_s {
                        proptest::prop_assert!(e.is_finite() && e >= 0.0, "{e}");
                    }
                    if s.state == ArrayState::Inactive {
                        proptest::prop_assert!(s.rebuild_risk.is_none() && s.redundancy_left.is_none());
                    }
                }
                let _ = report(&mut m);
            }
        }
    }

    fn one_poll_report(proc_dir: &Path, sys_dir: &Path) -> String {
        let mut m = monitor();
        let mut ev = Vec::new();
        m.poll(&Root::new(proc_dir, sys_dir), 0.0, &mut ev)
            .expect("poll");
        report(&mut m)
    }

    #[test]
    fn report_of_every_real_mdstat() {
        insta::glob!("../../fixtures/mdstat", "*.txt", |path| {
            let h = Host::new();
            h.mdstat(&std::fs::read_to_string(path).expect("fixture"));
            insta::assert_snapshot!(one_poll_report(
                &h.dir.path().join("proc"),
                &h.dir.path().join("sys")
            ));
        });
    }

    #[test]
    fn report_of_every_fixture_tree() {
        insta::glob!("../../fixtures/mdsys", "*/proc/mdstat", |path| {
            let proc_dir = path.parent().expect("proc");
            let top = proc_dir.parent().expect("tree");
            insta::assert_snapshot!(one_poll_report(proc_dir, &top.join("sys")));
        });
    }

    /// `MD_FAKE_ROOT=/tmp/fh-md cargo test … -- --ignored live_fake_host --nocapture` polls a
    /// host generated by the bench's `mkhost.py` for a few seconds and prints the report.
    #[test]
    #[ignore]
    fn live_fake_host() {
        let Ok(top) = std::env::var("MD_FAKE_ROOT") else {
            return;
        };
        let root = Root::new(Path::new(&top).join("proc"), Path::new(&top).join("sys"));
        let mut m = monitor();
        let start = std::time::Instant::now();
        for _ in 0..5 {
            let mut ev = Vec::new();
            let t0 = std::time::Instant::now();
            let res = m.poll(&root, start.elapsed().as_secs_f64(), &mut ev);
            println!(
                "poll {:?} in {:?}: {ev:?}",
                res.map_err(|e| e.to_string()),
                t0.elapsed()
            );
            std::thread::sleep(std::time::Duration::from_secs(1));
        }
        print!("{}", report(&mut m));
    }
}
