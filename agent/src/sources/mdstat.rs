//! `/proc/mdstat`: the Linux MD (software RAID) arrays, their members and any running
//! resync/recovery/check/reshape.
//!
//! Kernel documentation: `Documentation/admin-guide/md.rst`; the text is produced by
//! `md_seq_show()` and `status_resync()` in `drivers/md/md.c` and by each personality's
//! `->status()` (`raid1.c`, `raid5.c`, `raid10.c`, `raid0.c`, `md-linear.c`, …):
//!
//! ```text
//! Personalities : [raid1] [raid6] [raid5] [raid4]
//! md2 : active raid6 sdv[11] sdu[12](S) sdk[0](F) …
//!       175783280640 blocks super 1.2 level 6, 512k chunk, algorithm 2 [12/11] [UUUUUUUUUU_U]
//!       [===>.................]  recovery = 17.3% (3041050755/17578328064) finish=1432.1min speed=169176K/sec
//!       bitmap: 1/66 pages [4KB], 65536KB chunk
//!
//! unused devices: <none>
//! ```
//!
//! Units: `blocks` are KiB (1024 bytes). The progress counts `(done/total)` are KiB too, and are
//! relative to the same limit the sysfs `sync_completed` uses (`dev_sectors` for recovery and
//! check, `resync_max_sectors` for resync and reshape), so they are per member for most arrays
//! and array-wide for a raid10 reshape. `speed` is KiB/s; `finish` is the kernel's own estimate in
//! minutes. Members are `name[desc_nr]` followed by flags: `(W)` write-mostly, `(J)` journal,
//! `(F)` faulty, `(S)` spare (no slot), `(R)` replacement. The number in brackets is the
//! superblock descriptor number, not the slot (role); `[UU_U]` is indexed by slot.
//!
//! Differences seen across kernels, distributions and pastes, all accepted here:
//! 0.90 superblocks print no `super`; inactive arrays print no level (old kernels did);
//! `super external:imsm` containers and `external:/md126/0` member volumes; `resync=DELAYED`,
//! `resync=PENDING` (and md-cluster's `resync=REMOTE`) in place of a progress line; a
//! whitespace-only line (6 or 7 spaces) ending each array; Synology prints block lines without
//! indentation and mail clients strip it; a U+00A0 no-break space pasted after a personality;
//! no trailing `unused devices` line or newline; a member list wrapped onto the next line.
//! Lines that are not understood are kept in [`Mdstat::skipped`], never fatal.

use super::{parse_u64, Lines, ParseError};

mod block;

use block::{
    block_end, is_header, is_progress_line, parse_detail, parse_header, parse_progress, strip_label,
};

/// The whole of `/proc/mdstat`.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Mdstat {
    /// Loaded personalities (`raid1`, `raid6`, …), from the `Personalities :` line.
    pub personalities: Vec<String>,
    /// Arrays in file order (the kernel lists the newest first).
    pub arrays: Vec<MdArray>,
    /// Devices named on the `unused devices:` line; `None` when the line is missing.
    pub unused_devices: Option<Vec<String>>,
    /// Lines that were not understood (personality-specific text, paste artefacts), in order.
    pub skipped: Vec<ParseError>,
}

impl Mdstat {
    /// The array called `name` (`md127`).
    pub fn array(&self, name: &str) -> Option<&MdArray> {
        self.arrays.iter().find(|a| a.name == name)
    }
}

/// Whether an active array accepts writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ReadOnly {
    /// Read-write (nothing printed).
    #[default]
    No,
    /// `(read-only)`: set read-only by the administrator.
    ReadOnly,
    /// `(auto-read-only)`: read-only until the first write; a pending resync waits for it.
    AutoReadOnly,
}

/// One array.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct MdArray {
    /// Device name: `md127`, `md_d0`, `md126`.
    pub name: String,
    /// `active` (true) or `inactive` (assembled but not started, or an external-metadata
    /// container).
    pub active: bool,
    /// Read-only mode of an active array.
    pub read_only: ReadOnly,
    /// The personality: `raid0`, `raid1`, `raid4`, `raid5`, `raid6`, `raid10`, `linear`,
    /// `multipath`, `faulty`; `None` for an inactive array.
    pub level: Option<String>,
    /// Members in the order listed.
    pub members: Vec<MdMember>,
    /// Array size in KiB (for an inactive array: the sum of its members).
    pub blocks_kb: Option<u64>,
    /// Superblock format after `super`: `1.2`, `external:imsm`, `external:/md126/0`;
    /// `None` for the 0.90 format, which prints nothing.
    pub superblock: Option<String>,
    /// `level N,` of raid4/5/6.
    pub level_number: Option<u32>,
    /// Chunk size in KiB (`64k chunk`, `512K chunks`).
    pub chunk_kb: Option<u64>,
    /// `rounding` of a linear array, KiB.
    pub rounding_kb: Option<u64>,
    /// raid5/6 `algorithm N` (layout).
    pub algorithm: Option<u32>,
    /// raid10 layout (`2 near-copies`, `2 far-copies`, `2 offset-copies`).
    pub raid10: Option<Raid10Layout>,
    /// `[n/m]`: slots in the array (`n`).
    pub raid_disks: Option<u32>,
    /// `[n/m]`: slots holding a working, in-sync member (`m`).
    pub working_disks: Option<u32>,
    /// `[UU_U]`: one character per slot, `U` up, `_` down.
    pub slot_status: Option<String>,
    /// A running resync, recovery, check, repair or reshape.
    pub progress: Option<SyncProgress>,
    /// `resync=DELAYED` / `resync=PENDING` / `resync=REMOTE`: a sync is due but not running.
    pub waiting: Option<SyncWait>,
    /// The write-intent bitmap line.
    pub bitmap: Option<Bitmap>,
}

impl MdArray {
    /// Members flagged `(F)`.
    pub fn failed_members(&self) -> usize {
        self.members.iter().filter(|m| m.flags.faulty).count()
    }

    /// Members flagged `(S)` (hot spares, or every member of an inactive array).
    pub fn spare_members(&self) -> usize {
        self.members
            .iter()
            .filter(|m| m.flags.spare && !m.flags.faulty)
            .count()
    }
}

/// One member device.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct MdMember {
    /// Kernel block device name (`sdb1`, `nvme0n1p3`, `cciss/c0d0p1`, `dm-7`).
    pub name: String,
    /// The descriptor number in brackets (not the slot).
    pub desc_nr: u32,
    /// The flags after it.
    pub flags: MemberFlags,
}

/// Flags printed after a member.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct MemberFlags {
    /// `(W)`: write-mostly.
    pub write_mostly: bool,
    /// `(J)`: raid5 journal device.
    pub journal: bool,
    /// `(F)`: faulty.
    pub faulty: bool,
    /// `(S)`: spare — not in a slot.
    pub spare: bool,
    /// `(R)`: replacement being built for another member.
    pub replacement: bool,
    /// Any other flag letters, in order (none known today).
    pub other: String,
}

/// The raid10 layout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Raid10Layout {
    /// `N near-copies` (1 when not printed).
    pub near: u32,
    /// `N far-copies` or `N offset-copies` (1 when not printed).
    pub far: u32,
    /// The far copies are `offset` copies.
    pub offset: bool,
    /// `N devices per set` of a far layout, when not all devices.
    pub devices_per_set: Option<u32>,
}

impl Raid10Layout {
    /// Copies of every block: near × far.
    pub fn copies(&self) -> u32 {
        self.near.saturating_mul(self.far).max(1)
    }
}

/// What the sync thread does; shared with sysfs `sync_action`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SyncAction {
    /// Nothing running.
    Idle,
    /// Making parity/copies consistent after an unclean shutdown or creation.
    Resync,
    /// Rebuilding onto a spare or replacement: restores redundancy.
    Recover,
    /// Reading everything and counting mismatches (`mismatch_cnt`).
    Check,
    /// Check and rewrite mismatches.
    Repair,
    /// Changing level, layout, chunk size or number of devices.
    Reshape,
    /// Sync interrupted and held by the administrator.
    Frozen,
    /// A word this code does not know.
    Other(String),
}

impl SyncAction {
    /// From the kernel's word: mdstat says `recovery`, sysfs says `recover`.
    pub fn from_kernel(word: &str) -> Self {
        match word {
            "idle" => Self::Idle,
            "resync" => Self::Resync,
            "recover" | "recovery" => Self::Recover,
            "check" | "data-check" => Self::Check,
            "repair" | "requested-resync" => Self::Repair,
            "reshape" => Self::Reshape,
            "frozen" => Self::Frozen,
            other => Self::Other(other.to_owned()),
        }
    }

    /// The word written to the `sync_action` field (sysfs spelling).
    pub fn as_str(&self) -> &str {
        match self {
            Self::Idle => "idle",
            Self::Resync => "resync",
            Self::Recover => "recover",
            Self::Check => "check",
            Self::Repair => "repair",
            Self::Reshape => "reshape",
            Self::Frozen => "frozen",
            Self::Other(s) => s,
        }
    }

    /// Whether this is a running operation (not idle or frozen).
    pub fn is_running(&self) -> bool {
        !matches!(self, Self::Idle | Self::Frozen)
    }
}

/// A progress line.
#[derive(Debug, Clone, PartialEq)]
pub struct SyncProgress {
    /// The operation. mdstat prints a repair as `resync` and an md-cluster remote resync as
    /// `resync`; sysfs `sync_action` tells them apart.
    pub action: SyncAction,
    /// The percentage printed (one decimal, truncated by the kernel).
    pub percent: f64,
    /// KiB done.
    pub done_kb: Option<u64>,
    /// KiB to do in total.
    pub total_kb: Option<u64>,
    /// The kernel's estimate of minutes left.
    pub finish_min: Option<f64>,
    /// The kernel's speed, KiB/s, averaged over its last marks.
    pub speed_kbps: Option<u64>,
}

impl SyncProgress {
    /// `(done, total)` KiB, when the line printed both counts: the live position.
    pub fn counts(&self) -> Option<(u64, u64)> {
        self.done_kb.zip(self.total_kb)
    }

    /// Fraction done, from the counts when they are there (more precise than the percentage).
    pub fn fraction(&self) -> f64 {
        match self.counts() {
            Some((d, t)) if t > 0 => (d as f64 / t as f64).clamp(0.0, 1.0),
            _ => (self.percent / 100.0).clamp(0.0, 1.0),
        }
    }
}

/// A sync that is due but not running (`resync=DELAYED`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyncWait {
    /// The word before `=` (always `resync` in current kernels, whatever the kind).
    pub action: String,
    /// Why it waits.
    pub reason: WaitReason,
}

/// Why a sync waits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WaitReason {
    /// Another array sharing a disk is syncing first.
    Delayed,
    /// The array is auto-read-only; the sync starts on the first write.
    Pending,
    /// md-cluster: another node is resyncing.
    Remote,
    /// Another word.
    Other(String),
}

/// `bitmap: 1/66 pages [4KB], 65536KB chunk[, file: /path]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bitmap {
    /// Bitmap pages in memory.
    pub pages_used: u64,
    /// Bitmap pages in total.
    pub pages_total: u64,
    /// Memory used by the pages, KiB.
    pub used_kb: u64,
    /// Data covered by one bit, KiB.
    pub chunk_kb: u64,
    /// An external bitmap file.
    pub file: Option<String>,
}

/// Parses the text of `/proc/mdstat`.
///
/// Fails only when the text cannot be an mdstat at all: empty, or without a single
/// `Personalities`, array or `unused devices` line. Everything else that is not understood
/// is listed in [`Mdstat::skipped`].
pub fn parse(text: &str) -> Result<Mdstat, ParseError> {
    let mut reuse = Reuse::default();
    reuse.update(text)?;
    Ok(std::mem::take(&mut reuse.parsed))
}

/// An mdstat parsed in place, second after second: [`Reuse::update`] keeps the last parse and
/// re-parses only what moved.
///
/// The 1 s loop parses mdstat every second and most arrays print the same lines second after
/// second; a syncing array's progress line moves and nothing else of it. An array's block (its
/// header line and the lines up to the next array or `unused devices`) that is byte for byte
/// the one parsed last time, without a skipped line, is kept as it was parsed, not parsed or
/// copied again; one whose only changed line is its progress line has that line parsed again
/// and the rest kept. The personalities and unused-devices lines likewise. A steady second
/// allocates nothing. The result is always the one [`parse`] gives (tests hold it to that).
#[derive(Debug, Default)]
pub struct Reuse {
    /// The last successful parse.
    parsed: Mdstat,
    /// Each array's block, beside `parsed.arrays`.
    blocks: Vec<Block>,
    /// The parse before, taken apart for reuse while a new text is parsed.
    old_arrays: Vec<MdArray>,
    old_blocks: Vec<Block>,
    /// The text after `Personalities :` that `parsed.personalities` was parsed from, when it
    /// was.
    personalities_from: Option<String>,
    /// The text after `unused devices:` that `parsed.unused_devices` was parsed from, when it
    /// was.
    unused_from: Option<String>,
}

/// One array's lines in the last parse.
#[derive(Debug, Default)]
struct Block {
    text: String,
    /// Parsed without a skipped line: the array may be kept for the same text.
    clean: bool,
    /// Byte range in `text` of its one progress line (without the line end), when it has
    /// exactly one.
    progress: Option<std::ops::Range<usize>>,
}

impl Block {
    /// The line of `new` that stands where this block's progress line stood, when `new` is
    /// this block with that one line changed.
    fn changed_progress_line<'t>(&self, new: &'t str) -> Option<&'t str> {
        let r = self.progress.clone().filter(|_| self.clean)?;
        let (before, after) = (self.text.get(..r.start)?, self.text.get(r.end..)?);
        if new.len() < before.len() + after.len()
            || !new.starts_with(before)
            || !new.ends_with(after)
        {
            return None;
        }
        let line = new.get(r.start..new.len() - after.len())?;
        (!line.contains('\n')).then_some(line)
    }
}

impl Reuse {
    /// The last successful [`Reuse::update`]'s result.
    pub fn parsed(&self) -> &Mdstat {
        &self.parsed
    }

    /// Parses `text` as [`parse`] does, keeping what did not change since the last call.
    pub fn update(&mut self, text: &str) -> Result<&Mdstat, ParseError> {
        std::mem::swap(&mut self.parsed.arrays, &mut self.old_arrays);
        std::mem::swap(&mut self.blocks, &mut self.old_blocks);
        self.parsed.arrays.clear();
        self.blocks.clear();
        self.parsed.skipped.clear();
        let mut saw_personalities = false;
        let mut saw_unused = false;
        let mut lines = Lines::new(text);
        while let Some((no, raw)) = lines.next() {
            let line = raw.trim();
            if line.is_empty() {
                continue;
            }
            if let Some(rest) = strip_label(line, "Personalities") {
                saw_personalities = true;
                if self.personalities_from.as_deref() != Some(rest) {
                    self.parsed.personalities = rest
                        .split_whitespace()
                        .map(|p| p.trim_matches(|c| c == '[' || c == ']').to_owned())
                        .filter(|p| !p.is_empty())
                        .collect();
                    set_key(&mut self.personalities_from, rest);
                }
                continue;
            }
            if let Some(rest) = strip_label(line, "unused devices") {
                saw_unused = true;
                if self.unused_from.as_deref() != Some(rest) {
                    self.parsed.unused_devices = Some(
                        rest.split_whitespace()
                            .filter(|d| *d != "<none>")
                            .map(str::to_owned)
                            .collect(),
                    );
                    set_key(&mut self.unused_from, rest);
                }
                continue;
            }
            // An array's block: its header line and its detail lines, up to the next array.
            if is_header(line) {
                let end = block_end(&lines);
                let block = text.get(lines.offset_of(raw)..end).unwrap_or_default();
                if self.keep(block) {
                    lines.skip_to(end);
                } else {
                    self.parse_block(no, raw, line, block, &mut lines, end);
                }
                continue;
            }
            let Some(array) = self.parsed.arrays.last_mut() else {
                self.parsed
                    .skipped
                    .push(ParseError::new(no, raw, "line before any array"));
                continue;
            };
            // A detail line outside the array's block (after a header that could not be
            // parsed, or a `Personalities` line): the array is no longer what its block says.
            if let Some(b) = self.blocks.last_mut() {
                b.clean = false;
            }
            if let Err(reason) = parse_detail(array, line) {
                self.parsed.skipped.push(ParseError::new(no, raw, reason));
            }
        }
        if !saw_personalities {
            self.parsed.personalities.clear();
            self.personalities_from = None;
        }
        if !saw_unused {
            self.parsed.unused_devices = None;
            self.unused_from = None;
        }
        self.old_arrays.clear();
        self.old_blocks.clear();
        if !saw_personalities && self.parsed.arrays.is_empty() && !saw_unused {
            let (no, first) = text
                .lines()
                .enumerate()
                .find(|(_, l)| !l.trim().is_empty())
                .map_or((1, ""), |(i, l)| (i + 1, l));
            return Err(ParseError::new(
                no,
                first,
                "not /proc/mdstat: no Personalities, array or unused devices line",
            ));
        }
        Ok(&self.parsed)
    }

    /// Takes the array of `block` from the last parse when the block is the same, or the same
    /// but for its progress line (then parsed again); false when it has to be parsed.
    fn keep(&mut self, block: &str) -> bool {
        let same = self
            .old_blocks
            .iter()
            .position(|b| b.clean && b.text == block);
        if let Some(i) = same {
            self.blocks.push(self.old_blocks.swap_remove(i));
            self.parsed.arrays.push(self.old_arrays.swap_remove(i));
            return true;
        }
        let moved = self
            .old_blocks
            .iter()
            .enumerate()
            .find_map(|(i, b)| Some((i, b.changed_progress_line(block)?)));
        let Some((i, raw)) = moved else {
            return false;
        };
        let line = raw.trim();
        if !is_progress_line(line) {
            return false;
        }
        let Ok(progress) = parse_progress(line) else {
            return false;
        };
        let mut b = self.old_blocks.swap_remove(i);
        let mut a = self.old_arrays.swap_remove(i);
        let start = b.progress.as_ref().map_or(0, |r| r.start);
        a.progress = Some(progress);
        b.text.clear();
        b.text.push_str(block);
        b.progress = Some(start..start + raw.len());
        self.blocks.push(b);
        self.parsed.arrays.push(a);
        true
    }

    /// Parses the block of the array whose header is `line` (line `no`, `raw` untrimmed),
    /// `block` its text, ending at `end`.
    fn parse_block(
        &mut self,
        no: usize,
        raw: &str,
        line: &str,
        block: &str,
        lines: &mut Lines<'_>,
        end: usize,
    ) {
        let mut array = match parse_header(line) {
            Some(Ok(array)) => array,
            Some(Err(reason)) => {
                self.parsed.skipped.push(ParseError::new(no, raw, reason));
                return;
            }
            // is_header said yes: parse_header answers.
            None => return,
        };
        let skipped = self.parsed.skipped.len();
        let header_at = lines.offset_of(raw);
        let mut progress_lines = 0;
        let mut progress = None;
        while lines.offset() < end {
            let Some((no, raw)) = lines.next() else { break };
            let line = raw.trim();
            if line.is_empty() {
                continue;
            }
            if is_progress_line(line) {
                progress_lines += 1;
                let at = lines.offset_of(raw).saturating_sub(header_at);
                progress = Some(at..at + raw.len());
            }
            if let Err(reason) = parse_detail(&mut array, line) {
                self.parsed.skipped.push(ParseError::new(no, raw, reason));
            }
        }
        self.parsed.arrays.push(array);
        self.blocks.push(Block {
            text: block.to_owned(),
            clean: self.parsed.skipped.len() == skipped,
            progress: progress.filter(|_| progress_lines == 1),
        });
    }
}

/// Sets `key` to `text`, reusing its allocation.
fn set_key(key: &mut Option<String>, text: &str) {
    let k = key.get_or_insert_with(String::new);
    k.clear();
    k.push_str(text);
}

#[cfg(test)]
mod tests {
    use super::block::{parse_bitmap, parse_member, parse_progress, parse_wait};
    use super::*;
    use proptest::prelude::*;

    /// Every fixture (and a few hand-made variants) parsed after every other one, in place:
    /// always what a fresh parse gives.
    #[test]
    fn reusing_the_previous_parse_gives_what_parse_gives() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/mdstat");
        let mut texts: Vec<String> = std::fs::read_dir(&dir)
            .expect("fixtures")
            .map(|e| std::fs::read_to_string(e.expect("entry").path()).expect("fixture"))
            .collect();
        texts.sort();
        let variants: Vec<String> = texts
            .iter()
            .flat_map(|t| {
                [
                    // progress moved, a member failed, a bad line inside an array, CRLF
                    t.replace("recovery = ", "recovery =  ")
                        .replace("% (", "%  ("),
                    t.replace("finish=", "finish=1"),
                    t.replacen("[1]", "[1](F)", 1),
                    t.replacen("blocks", "blocks ?!", 1),
                    t.replace('\n', "\r\n"),
                    // the progress line turned into something else, or a second one
                    t.replace("recovery =", "recovery"),
                    t.replace("recovery =", "recovery = 1% (1/2)\n  check ="),
                    t.replace("speed=", "\n      bitmap: 1/2 pages [4KB], 65536KB chunk\n"),
                ]
            })
            .collect();
        texts.extend(variants);
        fn show<E: std::fmt::Debug>(r: Result<&Mdstat, E>) -> String {
            format!("{r:?}")
        }
        let mut kept = 0;
        for a in texts.iter().step_by(3) {
            for b in texts.iter().step_by(5) {
                let mut reuse = Reuse::default();
                let _ = reuse.update(a);
                kept += reuse.blocks.iter().filter(|b| b.clean).count();
                let fresh = parse(b);
                assert_eq!(show(reuse.update(b)), show(fresh.as_ref()), "{a}\n---\n{b}");
                assert_eq!(show(reuse.update(b)), show(fresh.as_ref()), "again: {b}");
                assert_eq!(show(reuse.update(a)), show(parse(a).as_ref()), "back: {a}");
            }
        }
        assert!(kept > 500, "blocks kept for reuse: {kept}");
    }

    const SYNCING: &str = "Personalities : [raid6] [raid5] [raid4]\nmd1 : active raid1 sdb1[1] sda1[0]\n      1000 blocks super 1.2 [2/2] [UU]\n      \nmd2 : active raid6 sdf[3] sde[2] sdd[1] sdc[0]\n      4000 blocks super 1.2 level 6, 512k chunk, algorithm 2 [4/3] [UUU_]\n      [=>...................]  recovery =  8.5% (170/2000) finish=17.0min speed=2K/sec\n      bitmap: 1/2 pages [4KB], 65536KB chunk\n      \nunused devices: <none>\n";

    /// A recovery second after second: only its progress line moves, and that line alone is
    /// parsed again; the idle array and everything else are kept as they were.
    #[test]
    fn a_moving_progress_line_is_parsed_alone() {
        let mut reuse = Reuse::default();
        reuse.update(SYNCING).expect("parses");
        let idle = reuse.parsed.arrays[0].members[0].name.as_ptr();
        let syncing = reuse.parsed.arrays[1].members[0].name.as_ptr();
        for done in [171u64, 172, 172, 190, 2000] {
            let text = SYNCING.replace("(170/2000)", &format!("({done}/2000)"));
            let parsed = reuse.update(&text).expect("parses");
            assert_eq!(*parsed, parse(&text).expect("parses"));
            let p = parsed.arrays[1].progress.as_ref().expect("progress");
            assert_eq!(p.done_kb, Some(done));
            // not parsed again: the members' names are the same allocations
            assert_eq!(parsed.arrays[0].members[0].name.as_ptr(), idle);
            assert_eq!(parsed.arrays[1].members[0].name.as_ptr(), syncing);
        }
        // the same second twice, then a member fails: seen
        let failed = SYNCING.replace("sdd[1]", "sdd[1](F)");
        reuse.update(SYNCING).expect("parses");
        reuse.update(SYNCING).expect("parses");
        let parsed = reuse.update(&failed).expect("parses");
        assert!(parsed.arrays[1].members[2].flags.faulty);
        assert_eq!(*parsed, parse(&failed).expect("parses"));
        // the recovery ends: the progress line goes, the block is parsed again
        let done = SYNCING.replace(
            "      [=>...................]  recovery =  8.5% (170/2000) finish=17.0min speed=2K/sec\n",
            "",
        );
        let parsed = reuse.update(&done).expect("parses");
        assert_eq!(parsed.arrays[1].progress, None);
        assert_eq!(*parsed, parse(&done).expect("parses"));
    }

    /// Detail lines outside their array's block (after a header that cannot be parsed, or
    /// after a `Personalities` line) change the array before them: it is not kept as its
    /// block alone says.
    #[test]
    fn lines_outside_a_block_are_not_kept_with_it() {
        let texts = [
            "md0 : active raid1 sdb[1] sda[0]\n      100 blocks [2/2] [UU]\nmd1 : clean raid1 sdc[0]\n      bitmap: 1/2 pages [4KB], 65536KB chunk\n",
            "md0 : active raid1 sdb[1] sda[0]\n      100 blocks [2/2] [UU]\nmd1 : clean raid1 sdc[0]\n",
            "md0 : active raid1 sdb[1] sda[0]\n      100 blocks [2/2] [UU]\nPersonalities : [raid1]\n      resync=DELAYED\n",
            "md0 : active raid1 sdb[1] sda[0]\n      100 blocks [2/2] [UU]\nPersonalities : [raid1]\n",
        ];
        let mut reuse = Reuse::default();
        for _ in 0..2 {
            for t in texts {
                assert_eq!(
                    *reuse.update(t).expect("parses"),
                    parse(t).expect("parses"),
                    "{t}"
                );
            }
        }
    }

    proptest! {
        /// Any sequence of mdstat-like texts parsed in place gives what each parses to alone.
        #[test]
        fn parsing_in_place_is_parsing_afresh(
            texts in proptest::collection::vec(
                proptest::collection::vec(
                    proptest::sample::select(vec![
                        "Personalities : [raid1] [raid6]", "Personalities : [raid1]",
                        "md0 : active raid6 sda[0] sdb[1](F)", "md0 : active raid6 sda[0] sdb[1]",
                        "md1 : inactive sdc[2](S)", "md1 : broken raid1 sdc[2]",
                        "      123 blocks super 1.2 level 6, 512k chunk, algorithm 2 [4/3] [UU_U]",
                        "      [=>...]  recovery =  8.5% (1/2) finish=1.0min speed=5K/sec",
                        "      [=>...]  recovery =  8.6% (2/3) finish=1.0min speed=5K/sec",
                        "      [=>...]  check = 1% (2/3)", "      [=>...]  recovery = x%",
                        "      resync=DELAYED", "      bitmap: 1/2 pages [4KB], 65536KB chunk",
                        "unused devices: <none>", "unused devices: sdz", "      ", "what",
                    ]),
                    0..12,
                ),
                1..6,
            ),
        ) {
            let mut reuse = Reuse::default();
            for lines in &texts {
                let text = lines.join("\n");
                let fresh = parse(&text);
                proptest::prop_assert_eq!(
                    format!("{:?}", reuse.update(&text)),
                    format!("{:?}", fresh.as_ref())
                );
            }
        }
    }

    #[test]
    fn snapshot_real_fixtures() {
        insta::glob!("../../fixtures/mdstat", "*.txt", |path| {
            let text = std::fs::read_to_string(path).expect("fixture");
            let parsed = parse(&text);
            assert!(parsed.is_ok(), "{}: {parsed:?}", path.display());
            insta::assert_debug_snapshot!(parsed);
        });
    }

    fn one(text: &str) -> MdArray {
        let m = parse(text).expect("parses");
        assert_eq!(m.arrays.len(), 1, "{m:?}");
        m.arrays.into_iter().next().expect("one array")
    }

    #[test]
    fn recovery_line_fields() {
        let a = one("Personalities : [raid1]\nmd6 : active raid1 sdb2[2] sda2[0]\n      195310144 blocks [2/1] [U_]\n      [=>...................]  recovery =  8.5% (16775552/195310144) finish=17.0min speed=259783K/sec\n\nunused devices: <none>\n");
        let p = a.progress.expect("progress");
        assert_eq!(p.action, SyncAction::Recover);
        assert_eq!(p.percent, 8.5);
        assert_eq!(p.done_kb, Some(16_775_552));
        assert_eq!(p.total_kb, Some(195_310_144));
        assert_eq!(p.finish_min, Some(17.0));
        assert_eq!(p.speed_kbps, Some(259_783));
        assert_eq!((a.raid_disks, a.working_disks), (Some(2), Some(1)));
        assert_eq!(a.slot_status.as_deref(), Some("U_"));
        assert_eq!(a.superblock, None);
    }

    #[test]
    fn member_flags_combine() {
        let m = parse_member("sda1[5](W)(F)").expect("member");
        assert!(m.flags.write_mostly && m.flags.faulty && !m.flags.spare);
        assert_eq!(m.desc_nr, 5);
        assert_eq!(
            parse_member("cciss/c0d0p1[6]").map(|m| m.name),
            Some("cciss/c0d0p1".into())
        );
        assert!(parse_member("sda[x]").is_none());
        assert!(parse_member("[1]").is_none());
        assert!(parse_member("sda[1](F").is_none());
        assert!(parse_member("sda[1]F)").is_none());
        assert!(parse_member("sda[99999999999]").is_none());
    }

    #[test]
    fn wrapped_member_list_is_joined() {
        let a = one("md0 : active raid6 sda[0] sdb[1]\n  sdc[2] sdd[3](S)\n      100 blocks super 1.2 level 6, 512k chunk, algorithm 2 [3/3] [UUU]\n");
        assert_eq!(a.members.len(), 4);
        assert!(a.members[3].flags.spare);
    }

    #[test]
    fn raid10_far_with_sets_and_unknown_words() {
        let a = one("md3 : active raid10 sdc1[0] sdd1[1] sde1[2] sdf1[3]\n      234878976 blocks 512K chunks 2 near-copies 2 far-copies 2 devices per set [4/4] [UUUU]\n");
        assert_eq!(
            a.raid10,
            Some(Raid10Layout {
                near: 2,
                far: 2,
                offset: false,
                devices_per_set: Some(2)
            })
        );
        assert_eq!(a.raid10.map(|l| l.copies()), Some(4));
        assert_eq!(a.raid_disks, Some(4));
    }

    #[test]
    fn not_an_mdstat() {
        let e = parse("").expect_err("empty");
        assert_eq!(e.line, 1);
        let e = parse("\n\nhello world\nfoo\n").expect_err("garbage");
        assert_eq!(e.line, 3);
        assert_eq!(e.text, "hello world");
        assert!(parse("MemTotal:       16318712 kB\n").is_err());
    }

    #[test]
    fn bad_lines_are_skipped_with_their_number() {
        let m = parse("Personalities : [raid1]\nstray line\nmd0 : clean raid1 sda[0]\nmd1 : active raid1 sda[0] sdb[x]\nmd2 : active raid1 sda[0] sdb[1]\n      12 blocks [2/2] [UU]\n      [==>...]  recovery = abc% (1/2)\n      bitmap: what\n      weird stuff here\n").expect("parses");
        let lines: Vec<usize> = m.skipped.iter().map(|e| e.line).collect();
        assert_eq!(lines, vec![2, 3, 4, 7, 8, 9]);
        assert_eq!(m.arrays.len(), 1);
        assert_eq!(m.arrays[0].name, "md2");
        assert!(m.arrays[0].progress.is_none());
        assert!(m.skipped[1].reason.contains("neither active nor inactive"));
    }

    #[test]
    fn bitmap_with_file() {
        let b = parse_bitmap(" 3/30 pages [12KB], 65536KB chunk, file: /var/md0.bitmap")
            .expect("bitmap");
        assert_eq!(b.file.as_deref(), Some("/var/md0.bitmap"));
        assert_eq!(
            (b.pages_used, b.pages_total, b.used_kb, b.chunk_kb),
            (3, 30, 12, 65536)
        );
    }

    #[test]
    fn waits() {
        let w = parse_wait("resync=REMOTE").expect("wait");
        assert_eq!(w.reason, WaitReason::Remote);
        assert!(parse_wait("resync=delayed").is_none());
        assert!(parse_wait("speed=1K/sec").is_none());
    }

    #[test]
    fn progress_at_100_percent_and_without_counts() {
        let p = parse_progress(
            "[====================>]  check =100.0% (5/5) finish=0.0min speed=1K/sec",
        )
        .expect("progress");
        assert_eq!(p.percent, 100.0);
        assert_eq!(p.fraction(), 1.0);
        let p = parse_progress("resync = 12.5%").expect("progress");
        assert_eq!(p.fraction(), 0.125);
        assert!(parse_progress("[==>..] = 3%").is_err());
    }

    proptest! {
        #[test]
        fn never_panics_on_arbitrary_text(s in "\\PC{0,400}") {
            let _ = parse(&s);
        }

        #[test]
        fn never_panics_on_mdstat_like_text(
            lines in proptest::collection::vec(
                proptest::sample::select(vec![
                    "Personalities : [raid1] [raid6]", "md0 : active raid6 sda[0] sdb[1](F)",
                    "md1 : inactive sdc[2](S)", "      123 blocks super 1.2 level 6, 512k chunk, algorithm 2 [4/3] [UU_U]",
                    "      [=>...]  recovery =  8.5% (1/2) finish=1.0min speed=5K/sec",
                    "      resync=DELAYED", "      bitmap: 1/2 pages [4KB], 65536KB chunk",
                    "unused devices: <none>", "      ", "[", "]", "(", "=", "%", "md : ", " : active",
                    "12 blocks 2 near-copies 3 devices per", "x[1](", "0k rounding", "[/]",
                    "check =%", "(1/)", "bitmap: /", "\u{a0}", "md9 : active (auto-read-only)",
                ]),
                0..30,
            ),
            cut in 0usize..4000,
        ) {
            let text = lines.join("\n");
            let _ = parse(&text);
            let cut: String = text.chars().take(cut).collect();
            let _ = parse(&cut);
        }
    }
}
