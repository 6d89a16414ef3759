//! `/sys/block/mdX/md/…`: the kernel's per-array MD attributes and per-member `dev-*/` state.
//!
//! Kernel documentation: `Documentation/admin-guide/md.rst` ("MD devices in sysfs"); the values
//! are printed by the `*_show()` functions in `drivers/md/md.c`. One value per file:
//!
//! | file | format | unit / meaning |
//! | --- | --- | --- |
//! | `level` | `raid6`, `raid10`, `linear`, … or empty | personality |
//! | `raid_disks` | `12`, or `11 (10)` while a reshape changes the count (new, old) | slots |
//! | `array_state` | `clear` `inactive` `suspended` `readonly` `read-auto` `clean` `active` `write-pending` `active-idle` `broken` | |
//! | `degraded` | `1` | slots without a working in-sync member |
//! | `sync_action` | `idle` `resync` `recover` `check` `repair` `reshape` `frozen` | |
//! | `sync_completed` | `123 / 456`, `none`, `delayed` | 512-byte sectors |
//! | `sync_speed` | `169176` or `none` | KiB/s |
//! | `mismatch_cnt` | `0` | sectors found inconsistent by the last check/repair |
//! | `component_size` | `17578328064` | KiB used on each member |
//! | `dev-<name>/state` | comma list: `faulty` `in_sync` `journal` `write_mostly` `blocked` `spare` `write_error` `want_replacement` `replacement` `external_bbl` | |
//! | `dev-<name>/errors` | `0` | read errors corrected on this member |
//! | `dev-<name>/slot` | `3`, `none`, `journal` | role in the array |
//!
//! The `sync_*` and `mismatch_cnt` files exist only for personalities with redundancy (raid1,
//! raid4/5/6, raid10); raid0 and linear arrays lack them, so every attribute is optional.
//! `sync_completed` counts against the same limit as mdstat's progress counts (in sectors
//! where mdstat prints KiB), but is only a checkpoint: the kernel advances it every 1/16 of the
//! device or every 5 minutes (`UPDATE_FREQUENCY`), while mdstat shows the live position.
//! A `/` in a member name (`cciss/c0d0p1`) appears as `!` in the `dev-` directory name.

use crate::root::{list_dir, Dir, Root};

use super::mdstat::SyncAction;
use super::{parse_u64, ParseError, SourceError};

/// The sysfs view of one array.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct MdSys {
    /// `level`; `None` when empty (an array with no personality yet).
    pub level: Option<String>,
    /// `raid_disks`.
    pub raid_disks: Option<RaidDisks>,
    /// `array_state`.
    pub array_state: Option<String>,
    /// `degraded`: slots without a working in-sync member.
    pub degraded: Option<u32>,
    /// `sync_action`.
    pub sync_action: Option<SyncAction>,
    /// `sync_completed`.
    pub sync_completed: Option<SyncCompleted>,
    /// `sync_speed` in KiB/s; `None` when absent or `none` (nothing running).
    pub sync_speed_kbps: Option<u64>,
    /// `mismatch_cnt`, sectors.
    pub mismatch_cnt: Option<u64>,
    /// `component_size`, KiB per member.
    pub component_size_kb: Option<u64>,
    /// Member devices, sorted by name.
    pub devs: Vec<MdDev>,
}

/// `raid_disks`: `12`, or `11 (10)` during a reshape.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RaidDisks {
    /// The number of slots (after the reshape, when one runs).
    pub disks: u32,
    /// The number before a running reshape that changes it.
    pub before_reshape: Option<u32>,
}

/// `sync_completed`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SyncCompleted {
    /// `none`: nothing running.
    Idle,
    /// `delayed`: due, waiting for another array sharing a device.
    Delayed,
    /// `done / total`, 512-byte sectors.
    Progress {
        /// Sectors done (the last checkpoint).
        done_sectors: u64,
        /// Sectors to do.
        total_sectors: u64,
    },
}

/// `dev-<name>/`: one member.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct MdDev {
    /// Kernel device name (`sdb1`, `cciss/c0d0p1`).
    pub name: String,
    /// `state` words, in the kernel's order.
    pub state: Vec<String>,
    /// `errors`: read errors corrected.
    pub errors: Option<u64>,
    /// `slot`.
    pub slot: Option<Slot>,
}

impl MdDev {
    /// Whether `state` holds `word`.
    pub fn has(&self, word: &str) -> bool {
        self.state.iter().any(|s| s == word)
    }
}

/// `dev-<name>/slot`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Slot {
    /// `none`: a spare, or a device not yet given a role.
    None,
    /// `journal`: a raid5 journal device.
    Journal,
    /// A role number.
    Role(u32),
}

fn value(text: &str) -> Result<&str, ParseError> {
    let mut lines = text.lines().filter(|l| !l.trim().is_empty());
    let first = lines.next().unwrap_or("");
    if let Some(extra) = lines.next() {
        return Err(ParseError::new(
            2,
            extra,
            "more than one line in a sysfs value",
        ));
    }
    Ok(first.trim())
}

fn number(text: &str) -> Result<u64, ParseError> {
    let v = value(text)?;
    parse_u64(v).ok_or_else(|| ParseError::new(1, v, "not a decimal number"))
}

/// `level`: `None` when empty.
pub fn parse_level(text: &str) -> Result<Option<String>, ParseError> {
    let v = value(text)?;
    Ok((!v.is_empty()).then(|| v.to_owned()))
}

/// `raid_disks`: `12` or `11 (10)`; `None` for the empty file of an array without slots (the
/// kernel prints nothing while `raid_disks` is 0, as for an external-metadata container).
pub fn parse_raid_disks(text: &str) -> Result<Option<RaidDisks>, ParseError> {
    let v = value(text)?;
    if v.is_empty() {
        return Ok(None);
    }
    let bad = || ParseError::new(1, v, "raid_disks is neither N nor \"N (M)\"");
    let mut toks = v.split_whitespace();
    let disks = toks
        .next()
        .and_then(parse_u64)
        .and_then(|n| u32::try_from(n).ok())
        .ok_or_else(bad)?;
    let before_reshape = match toks.next() {
        None => None,
        Some(t) => Some(
            t.strip_prefix('(')
                .and_then(|t| t.strip_suffix(')'))
                .and_then(parse_u64)
                .and_then(|n| u32::try_from(n).ok())
                .ok_or_else(bad)?,
        ),
    };
    if toks.next().is_some() {
        return Err(bad());
    }
    Ok(Some(RaidDisks {
        disks,
        before_reshape,
    }))
}

/// `array_state`: one word.
pub fn parse_array_state(text: &str) -> Result<String, ParseError> {
    word(text, "array_state")
}

fn word(text: &str, what: &str) -> Result<String, ParseError> {
    let v = value(text)?;
    if v.is_empty() || v.split_whitespace().nth(1).is_some() {
        return Err(ParseError::new(1, v, format!("{what} is not one word")));
    }
    Ok(v.to_owned())
}

/// `degraded`.
pub fn parse_degraded(text: &str) -> Result<u32, ParseError> {
    let n = number(text)?;
    u32::try_from(n).map_err(|_| ParseError::new(1, text.trim(), "degraded out of range"))
}

/// `sync_action`.
pub fn parse_sync_action(text: &str) -> Result<SyncAction, ParseError> {
    Ok(SyncAction::from_kernel(&word(text, "sync_action")?))
}

/// `sync_completed`: `none`, `delayed` or `done / total` (sectors).
pub fn parse_sync_completed(text: &str) -> Result<SyncCompleted, ParseError> {
    let v = value(text)?;
    match v {
        "none" => return Ok(SyncCompleted::Idle),
        "delayed" => return Ok(SyncCompleted::Delayed),
        _ => {}
    }
    let bad = || ParseError::new(1, v, "sync_completed is not none, delayed or \"N / M\"");
    let (d, t) = v.split_once('/').ok_or_else(bad)?;
    Ok(SyncCompleted::Progress {
        done_sectors: parse_u64(d.trim()).ok_or_else(bad)?,
        total_sectors: parse_u64(t.trim()).ok_or_else(bad)?,
    })
}

/// `sync_speed`: KiB/s, `None` for `none`.
pub fn parse_sync_speed(text: &str) -> Result<Option<u64>, ParseError> {
    if value(text)? == "none" {
        return Ok(None);
    }
    number(text).map(Some)
}

/// `mismatch_cnt`, `component_size`, `dev-*/errors`: a decimal number.
pub fn parse_count(text: &str) -> Result<u64, ParseError> {
    number(text)
}

/// `dev-*/state`: comma-separated words (`in_sync,write_mostly`).
pub fn parse_dev_state(text: &str) -> Result<Vec<String>, ParseError> {
    let v = value(text)?;
    let words: Vec<String> = v
        .split(',')
        .map(str::trim)
        .filter(|w| !w.is_empty())
        .map(str::to_owned)
        .collect();
    if words.iter().any(|w| {
        !w.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    }) {
        return Err(ParseError::new(
            1,
            v,
            "member state is not a comma list of words",
        ));
    }
    Ok(words)
}

/// `dev-*/slot`: a role number, `none` or `journal`.
pub fn parse_slot(text: &str) -> Result<Slot, ParseError> {
    let v = value(text)?;
    match v {
        "none" => Ok(Slot::None),
        "journal" => Ok(Slot::Journal),
        _ => parse_u64(v)
            .and_then(|n| u32::try_from(n).ok())
            .map(Slot::Role)
            .ok_or_else(|| ParseError::new(1, v, "slot is not a number, none or journal")),
    }
}

/// The sysfs directory of `array`, `/sys/block/<array>/md`, to keep for the array's reads.
pub fn dir(root: &Root, array: &str) -> Dir {
    Dir::new(root.sys(&format!("block/{array}/md")))
}

/// Reads `/sys/block/<array>/md/` through the array's kept directory ([`dir`]). `Ok(None)`
/// when the directory is absent (not an md device, or the array vanished between reading
/// `/proc/mdstat` and here).
pub fn read(dir: &mut Dir) -> Result<Option<MdSys>, SourceError> {
    let Some(entries) = list_dir(dir.path())? else {
        return Ok(None);
    };
    let mut buf = String::new();
    let mut sys = MdSys {
        level: dir.parse_value("level", &mut buf, parse_level)?.flatten(),
        raid_disks: dir
            .parse_value("raid_disks", &mut buf, parse_raid_disks)?
            .flatten(),
        array_state: dir.parse_value("array_state", &mut buf, parse_array_state)?,
        degraded: dir.parse_value("degraded", &mut buf, parse_degraded)?,
        sync_action: dir.parse_value("sync_action", &mut buf, parse_sync_action)?,
        sync_completed: dir.parse_value("sync_completed", &mut buf, parse_sync_completed)?,
        sync_speed_kbps: dir
            .parse_value("sync_speed", &mut buf, parse_sync_speed)?
            .flatten(),
        mismatch_cnt: dir.parse_value("mismatch_cnt", &mut buf, parse_count)?,
        component_size_kb: dir.parse_value("component_size", &mut buf, parse_count)?,
        devs: Vec::new(),
    };
    let mut rel = String::new();
    let member = |rel: &mut String, entry: &str, name: &str| {
        rel.clear();
        rel.push_str(entry);
        rel.push('/');
        rel.push_str(name);
    };
    for entry in &entries {
        let Some(dev) = entry.strip_prefix("dev-") else {
            continue;
        };
        member(&mut rel, entry, "state");
        let state = dir.parse_value(&rel, &mut buf, parse_dev_state)?;
        // A member removed between listing and reading leaves nothing behind: skip it.
        let Some(state) = state else { continue };
        member(&mut rel, entry, "errors");
        let errors = dir.parse_value(&rel, &mut buf, parse_count)?;
        member(&mut rel, entry, "slot");
        let slot = dir.parse_value(&rel, &mut buf, parse_slot)?;
        sys.devs.push(MdDev {
            name: dev.replace('!', "/"),
            state,
            errors,
            slot,
        });
    }
    Ok(Some(sys))
}

/// Re-reads only the attributes that change while an array runs (`array_state`, `degraded`,
/// `sync_action`, `sync_completed`, `sync_speed`, `mismatch_cnt`) into `sys`, leaving the
/// geometry and members as they were. `Ok(false)` when the array is gone (every md array has
/// `array_state`).
pub fn refresh(dir: &mut Dir, sys: &mut MdSys) -> Result<bool, SourceError> {
    let mut buf = String::new();
    let Some(state) = dir.parse_value("array_state", &mut buf, parse_array_state)? else {
        return Ok(false);
    };
    sys.array_state = Some(state);
    sys.degraded = dir.parse_value("degraded", &mut buf, parse_degraded)?;
    sys.sync_action = dir.parse_value("sync_action", &mut buf, parse_sync_action)?;
    sys.sync_completed = dir.parse_value("sync_completed", &mut buf, parse_sync_completed)?;
    sys.sync_speed_kbps = dir
        .parse_value("sync_speed", &mut buf, parse_sync_speed)?
        .flatten();
    sys.mismatch_cnt = dir.parse_value("mismatch_cnt", &mut buf, parse_count)?;
    Ok(true)
}

/// Re-reads only what a running sync moves (`sync_completed`, `sync_speed`, `mismatch_cnt`) into
/// `sys`, through the array's kept directory: while mdstat's line for the array keeps its shape
/// and its action, `array_state`, `degraded` and `sync_action` cannot have changed unseen.
/// `Ok(false)` when the array is gone.
pub fn refresh_progress(dir: &mut Dir, sys: &mut MdSys) -> Result<bool, SourceError> {
    let mut buf = String::new();
    let Some(done) = dir.parse_value("sync_completed", &mut buf, parse_sync_completed)? else {
        return Ok(false);
    };
    sys.sync_completed = Some(done);
    sys.sync_speed_kbps = dir
        .parse_value("sync_speed", &mut buf, parse_sync_speed)?
        .flatten();
    sys.mismatch_cnt = dir.parse_value("mismatch_cnt", &mut buf, parse_count)?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn snapshot_fixture_trees() {
        insta::glob!(
            "../../fixtures/mdsys",
            "*/sys/block/*/md/array_state",
            |path| {
                let md_dir = path.parent().expect("md dir");
                let array = md_dir
                    .parent()
                    .and_then(|p| p.file_name())
                    .and_then(|n| n.to_str())
                    .expect("array name");
                let sys_root = md_dir
                    .parent()
                    .and_then(Path::parent)
                    .and_then(Path::parent)
                    .expect("sys root");
                let root = Root::new("/nonexistent", sys_root);
                insta::assert_debug_snapshot!(read(&mut super::dir(&root, array)));
            }
        );
    }

    #[test]
    fn values() {
        assert_eq!(
            parse_raid_disks("11 (10)\n"),
            Ok(Some(RaidDisks {
                disks: 11,
                before_reshape: Some(10)
            }))
        );
        assert_eq!(
            parse_raid_disks("4\n").map(|r| r.map(|r| r.before_reshape)),
            Ok(Some(None))
        );
        assert_eq!(parse_raid_disks(""), Ok(None));
        assert_eq!(
            parse_sync_completed("6082101510 / 35156656128\n"),
            Ok(SyncCompleted::Progress {
                done_sectors: 6_082_101_510,
                total_sectors: 35_156_656_128
            })
        );
        assert_eq!(parse_sync_completed("none\n"), Ok(SyncCompleted::Idle));
        assert_eq!(
            parse_sync_completed("delayed\n"),
            Ok(SyncCompleted::Delayed)
        );
        assert_eq!(parse_sync_speed("none\n"), Ok(None));
        assert_eq!(parse_sync_speed("169176\n"), Ok(Some(169_176)));
        assert_eq!(parse_sync_action("recover\n"), Ok(SyncAction::Recover));
        assert_eq!(parse_level("\n"), Ok(None));
        assert_eq!(
            parse_dev_state("in_sync,write_mostly\n"),
            Ok(vec!["in_sync".to_owned(), "write_mostly".to_owned()])
        );
        assert_eq!(parse_slot("none\n"), Ok(Slot::None));
        assert_eq!(parse_slot("journal\n"), Ok(Slot::Journal));
        assert_eq!(parse_slot("7\n"), Ok(Slot::Role(7)));
    }

    #[test]
    fn bad_values() {
        assert!(parse_raid_disks("11 10\n").is_err());
        assert!(parse_raid_disks("11 (10) x\n").is_err());
        assert!(parse_raid_disks("(10)\n").is_err());
        let e = parse_sync_completed("12 of 40\n").expect_err("bad");
        assert_eq!((e.line, e.text.as_str()), (1, "12 of 40"));
        assert!(parse_sync_completed("12 / \n").is_err());
        assert!(parse_sync_speed("-1\n").is_err());
        assert!(parse_degraded("99999999999\n").is_err());
        assert!(parse_array_state("\n").is_err());
        assert!(parse_array_state("clean active\n").is_err());
        assert!(parse_dev_state("in sync\n").is_err());
        assert!(parse_slot("-1\n").is_err());
        let e = parse_count("1\n2\n").expect_err("two lines");
        assert_eq!(e.line, 2);
    }

    #[test]
    fn absent_array_and_bad_attribute() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = Root::new(dir.path().join("proc"), dir.path().join("sys"));
        assert!(matches!(read(&mut super::dir(&root, "md0")), Ok(None)));
        let md = dir.path().join("sys/block/md0/md");
        std::fs::create_dir_all(md.join("dev-cciss!c0d0p1")).expect("mkdir");
        std::fs::write(md.join("level"), "raid1\n").expect("write");
        std::fs::write(md.join("dev-cciss!c0d0p1/state"), "in_sync\n").expect("write");
        let sys = read(&mut super::dir(&root, "md0"))
            .expect("reads")
            .expect("present");
        assert_eq!(sys.level.as_deref(), Some("raid1"));
        assert_eq!(sys.sync_action, None);
        assert_eq!(sys.devs.len(), 1);
        assert_eq!(sys.devs[0].name, "cciss/c0d0p1");
        assert_eq!(sys.devs[0].slot, None);
        std::fs::write(md.join("degraded"), "one\n").expect("write");
        match read(&mut super::dir(&root, "md0")) {
            Err(SourceError::Parse { path, error }) => {
                assert!(path.ends_with("md0/md/degraded"));
                assert_eq!(error.text, "one");
            }
            other => panic!("expected a parse error, got {other:?}"),
        }
    }

    #[test]
    fn refresh_rereads_only_the_running_state() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = Root::new(dir.path().join("proc"), dir.path().join("sys"));
        let md = dir.path().join("sys/block/md0/md");
        std::fs::create_dir_all(md.join("dev-sda")).expect("mkdir");
        for (f, v) in [
            ("level", "raid1"),
            ("array_state", "clean"),
            ("degraded", "0"),
            ("sync_action", "idle"),
            ("mismatch_cnt", "0"),
        ] {
            std::fs::write(md.join(f), format!("{v}\n")).expect("write");
        }
        std::fs::write(md.join("dev-sda/state"), "in_sync\n").expect("write");
        let mut sys = read(&mut super::dir(&root, "md0"))
            .expect("reads")
            .expect("present");
        std::fs::write(md.join("mismatch_cnt"), "64\n").expect("write");
        std::fs::write(md.join("dev-sda/state"), "faulty\n").expect("write");
        assert!(matches!(
            refresh(&mut super::dir(&root, "md0"), &mut sys),
            Ok(true)
        ));
        assert_eq!(sys.mismatch_cnt, Some(64));
        assert_eq!(
            sys.devs[0].state,
            vec!["in_sync".to_owned()],
            "members are not re-read"
        );
        std::fs::remove_dir_all(dir.path().join("sys/block/md0")).expect("rm");
        assert!(matches!(
            refresh(&mut super::dir(&root, "md0"), &mut sys),
            Ok(false)
        ));
    }

    proptest! {
        #[test]
        fn never_panics(s in "\\PC{0,40}") {
            let _ = parse_level(&s);
            let _ = parse_raid_disks(&s);
            let _ = parse_array_state(&s);
            let _ = parse_degraded(&s);
            let _ = parse_sync_action(&s);
            let _ = parse_sync_completed(&s);
            let _ = parse_sync_speed(&s);
            let _ = parse_count(&s);
            let _ = parse_dev_state(&s);
            let _ = parse_slot(&s);
        }
    }
}
