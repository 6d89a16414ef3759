//! The kernel's own view of dm-multipath maps: the status and table of every `multipath`
//! device-mapper target.
//!
//! Text format: `drivers/md/dm-mpath.c`, `multipath_status()`, documented in the kernel's
//! `Documentation/admin-guide/device-mapper/dm-multipath.rst` (selector argument counts in
//! `dm-queue-length.rst`, `dm-service-time.rst`). The same text comes from the
//! `DM_TABLE_STATUS` ioctl (with and without `DM_STATUS_TABLE_FLAG`) and from
//! `dmsetup status|table --target multipath`, which prefixes each line with `name: ` (and drops
//! the prefix when one device is named on the command line). Every list in it is preceded by
//! its length, so the parser reads the counts instead of guessing widths:
//!
//! ```text
//! status: <#feat> <feat…> <#hwh> <hwh…> <#pgs> <pg> { <A|E|D> <#pgargs> <pgargs…> <#paths> <#pathargs>
//!                                                     { <maj:min> <A|F> <fail_count> <pathargs…> } }
//! table:  <#feat> <feat…> <#hwh> <hwh…> <#pgs> <pg> { <selector> <#selargs> <selargs…> <#paths> <#pathargs>
//!                                                     { <maj:min> <pathargs…> } }
//! ```
//!
//! Per-path argument counts by selector (table / status): round-robin 1 (repeat_count) / 0,
//! queue-length 1 / 1 (in-flight I/Os), service-time 2 (repeat_count, relative throughput) / 2
//! (in-flight size, relative throughput), io-affinity 1 (hex cpumask) / 0, historical-service-time
//! varies by version. Kernel differences: status features are `2 <queue_io> <pg_init_count>`
//! (2.6.18 printed the number of queued I/Os where later kernels print a 0/1 flag); the `<pg>`
//! number is the group the kernel will use next (or uses now) in both status and table, not the
//! group the table was loaded with.
//!
//! Paths are `major:minor`; their names come from sysfs. The `DM_TABLE_STATUS` ioctl lives in
//! [`ioctl`]: it needs no process start, so the agent can afford to read every map every second.

use std::fmt;

use super::{fields, parse_u64, ParseError, Rows};

/// A block device number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
pub struct DevT {
    /// Major number.
    pub major: u32,
    /// Minor number.
    pub minor: u32,
}

impl DevT {
    /// Parses `8:16`.
    pub fn parse(s: &str) -> Option<Self> {
        let (a, b) = s.split_once(':')?;
        Some(Self {
            major: u32::try_from(parse_u64(a)?).ok()?,
            minor: u32::try_from(parse_u64(b)?).ok()?,
        })
    }
}

impl fmt::Display for DevT {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.major, self.minor)
    }
}

/// State of a path group in the status line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum GroupState {
    /// `A`: the group I/O goes to now.
    Active,
    /// `E`: usable, not in use.
    Enabled,
    /// `D`: bypassed (disabled) by the hardware handler or `multipathd`.
    Disabled,
}

impl GroupState {
    /// `active`, `enabled`, `disabled`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Active => "active",
            Self::Enabled => "enabled",
            Self::Disabled => "disabled",
        }
    }
}

/// One path in the status line.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct StatusPath {
    /// The path's block device.
    pub dev: DevT,
    /// `A` (true) or `F` (failed).
    pub active: bool,
    /// Times the kernel failed this path since the table was loaded (cumulative).
    pub fail_count: u64,
    /// The selector's per-path status (queue-length: in-flight I/Os; service-time: in-flight
    /// size and relative throughput).
    pub selector_args: Vec<String>,
}

/// One path group in the status line.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct StatusGroup {
    /// Active, enabled or disabled.
    pub state: GroupState,
    /// The selector's group-level status arguments (none for the in-tree selectors).
    pub selector_args: Vec<String>,
    /// Its paths, in table order.
    pub paths: Vec<StatusPath>,
}

/// The status of one multipath target.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct MultipathStatus {
    /// The device-mapper name (absent when the line had no `name: ` prefix).
    pub name: Option<String>,
    /// First sector of the target.
    pub start: u64,
    /// Length in 512-byte sectors.
    pub length: u64,
    /// The raw feature words (`["0", "1"]` for `2 0 1`).
    pub features: Vec<String>,
    /// First feature word: 1 while the kernel is queueing I/O (waiting for a path or a group
    /// initialisation; on 2.6.18, the number of queued I/Os).
    pub queue_io: Option<u64>,
    /// Second feature word: path-group initialisations since the table was loaded.
    pub pg_init_count: Option<u64>,
    /// Hardware-handler status words (`0` on current kernels).
    pub hw_handler: Vec<String>,
    /// The group (1-based) the kernel uses next; 0 when there are no groups.
    pub next_group: u32,
    /// The path groups, in priority order as loaded.
    pub groups: Vec<StatusGroup>,
}

impl MultipathStatus {
    /// The 1-based index of the group in state `A`, if any.
    pub fn active_group(&self) -> Option<u32> {
        self.groups
            .iter()
            .position(|g| g.state == GroupState::Active)
            .and_then(|i| u32::try_from(i + 1).ok())
    }
}

/// One path in the table line.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct TablePath {
    /// The path's block device.
    pub dev: DevT,
    /// The selector's per-path arguments (repeat count, relative throughput, cpumask).
    pub selector_args: Vec<String>,
}

/// One path group in the table line.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct TableGroup {
    /// Path selector: `round-robin`, `queue-length`, `service-time`, `io-affinity`, …
    pub selector: String,
    /// The selector's group arguments.
    pub selector_args: Vec<String>,
    /// Its paths.
    pub paths: Vec<TablePath>,
}

/// The table of one multipath target.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct MultipathTable {
    /// The device-mapper name (absent when the line had no `name: ` prefix).
    pub name: Option<String>,
    /// First sector of the target.
    pub start: u64,
    /// Length in 512-byte sectors.
    pub length: u64,
    /// Feature words: `queue_if_no_path`, `retain_attached_hw_handler`, `queue_mode bio`,
    /// `pg_init_retries 50`, …
    pub features: Vec<String>,
    /// Hardware handler and its arguments (`["alua"]`, `["rdac"]`); empty for none.
    pub hw_handler: Vec<String>,
    /// The group (1-based) the kernel uses next.
    pub next_group: u32,
    /// The path groups.
    pub groups: Vec<TableGroup>,
}

impl MultipathTable {
    /// Whether I/O is queued (not failed) when no path is left.
    pub fn queue_if_no_path(&self) -> bool {
        self.features.iter().any(|f| f == "queue_if_no_path")
    }

    /// `bio`, `rq` or `mq` when the table sets `queue_mode`.
    pub fn queue_mode(&self) -> Option<&str> {
        let i = self.features.iter().position(|f| f == "queue_mode")?;
        self.features.get(i + 1).map(String::as_str)
    }
}

/// Where a line came from, once its prefix is removed.
struct Target<'a> {
    name: Option<&'a str>,
    start: u64,
    length: u64,
    target: &'a str,
    args: &'a str,
}

/// Splits `[name: ]start length target args`.
fn split_target(line: &str) -> Option<Target<'_>> {
    fn numbered(s: &str) -> Option<(u64, u64, &str, &str)> {
        let mut it = s.trim_start().splitn(4, |c: char| c.is_ascii_whitespace());
        let start = parse_u64(it.next()?)?;
        let length = parse_u64(it.next()?.trim())?;
        let rest = it.next()?;
        let args = it.next().unwrap_or("");
        Some((start, length, rest.trim(), args))
    }
    if let Some((start, length, target, args)) = numbered(line) {
        return Some(Target {
            name: None,
            start,
            length,
            target,
            args,
        });
    }
    // Names may contain ':' (`docker-253:10-…: 0 …`), never ": ".
    let (name, rest) = line.split_once(": ")?;
    let (start, length, target, args) = numbered(rest)?;
    Some(Target {
        name: Some(name),
        start,
        length,
        target,
        args,
    })
}

/// Walks the words of an argument string, with errors naming what was expected.
struct Words<'a> {
    it: std::str::SplitAsciiWhitespace<'a>,
}

impl<'a> Words<'a> {
    fn new(s: &'a str) -> Self {
        Self { it: fields(s) }
    }

    fn word(&mut self, what: &str) -> Result<&'a str, String> {
        self.it
            .next()
            .ok_or_else(|| format!("line ends where {what} was expected"))
    }

    fn count(&mut self, what: &str) -> Result<usize, String> {
        let w = self.word(what)?;
        parse_u64(w)
            .and_then(|n| usize::try_from(n).ok())
            .ok_or_else(|| format!("{what}: {w:?} is not a count"))
    }

    fn number(&mut self, what: &str) -> Result<u64, String> {
        let w = self.word(what)?;
        parse_u64(w).ok_or_else(|| format!("{what}: {w:?} is not a number"))
    }

    fn dev(&mut self, what: &str) -> Result<DevT, String> {
        let w = self.word(what)?;
        DevT::parse(w).ok_or_else(|| format!("{what}: {w:?} is not major:minor"))
    }

    /// `<count> <word>…`
    fn counted(&mut self, what: &str) -> Result<Vec<String>, String> {
        let n = self.count(what)?;
        self.take(n, what)
    }

    fn take(&mut self, n: usize, what: &str) -> Result<Vec<String>, String> {
        // A corrupt count must not make us allocate for billions of words.
        let mut v = Vec::with_capacity(n.min(64));
        for _ in 0..n {
            v.push(self.word(what)?.to_owned());
        }
        Ok(v)
    }

    fn finish(mut self) -> Result<(), String> {
        match self.it.next() {
            None => Ok(()),
            Some(w) => Err(format!("unexpected words from {w:?} on")),
        }
    }
}

fn group_number(w: &mut Words<'_>) -> Result<(usize, u32), String> {
    let groups = w.count("number of path groups")?;
    let next = w.number("initial path group")?;
    let next = u32::try_from(next).map_err(|_| format!("path group {next} out of range"))?;
    if next as usize > groups {
        return Err(format!("path group {next} of {groups}"));
    }
    Ok((groups, next))
}

/// Parses the arguments of a multipath status (everything after `multipath`).
pub fn parse_status_args(args: &str) -> Result<MultipathStatus, String> {
    let mut w = Words::new(args);
    let features = w.counted("feature arguments")?;
    let hw_handler = w.counted("hardware handler arguments")?;
    let (ngroups, next_group) = group_number(&mut w)?;
    let mut groups = Vec::with_capacity(ngroups.min(64));
    for g in 1..=ngroups {
        let state = match w.word("path group state")? {
            "A" => GroupState::Active,
            "E" => GroupState::Enabled,
            "D" => GroupState::Disabled,
            other => return Err(format!("group {g}: state {other:?} is not A, E or D")),
        };
        let selector_args = w.counted("selector status arguments")?;
        let npaths = w.count("number of paths")?;
        let nargs = w.count("per-path status argument count")?;
        let mut paths = Vec::with_capacity(npaths.min(256));
        for p in 1..=npaths {
            let dev = w.dev("path device")?;
            let active = match w.word("path state")? {
                "A" => true,
                "F" => false,
                other => return Err(format!("group {g} path {p}: state {other:?} is not A or F")),
            };
            let fail_count = w.number("fail count")?;
            let selector_args = w.take(nargs, "selector path status")?;
            paths.push(StatusPath {
                dev,
                active,
                fail_count,
                selector_args,
            });
        }
        groups.push(StatusGroup {
            state,
            selector_args,
            paths,
        });
    }
    w.finish()?;
    let num = |i: usize| features.get(i).and_then(|s| parse_u64(s));
    Ok(MultipathStatus {
        name: None,
        start: 0,
        length: 0,
        queue_io: num(0),
        pg_init_count: num(1),
        features,
        hw_handler,
        next_group,
        groups,
    })
}

/// Parses the arguments of a multipath table (everything after `multipath`).
pub fn parse_table_args(args: &str) -> Result<MultipathTable, String> {
    let mut w = Words::new(args);
    let features = w.counted("feature arguments")?;
    let hw_handler = w.counted("hardware handler arguments")?;
    let (ngroups, next_group) = group_number(&mut w)?;
    let mut groups = Vec::with_capacity(ngroups.min(64));
    for _ in 0..ngroups {
        let selector = w.word("path selector")?.to_owned();
        let selector_args = w.counted("selector arguments")?;
        let npaths = w.count("number of paths")?;
        let nargs = w.count("per-path argument count")?;
        let mut paths = Vec::with_capacity(npaths.min(256));
        for _ in 0..npaths {
            let dev = w.dev("path device")?;
            let selector_args = w.take(nargs, "selector path arguments")?;
            paths.push(TablePath { dev, selector_args });
        }
        groups.push(TableGroup {
            selector,
            selector_args,
            paths,
        });
    }
    w.finish()?;
    Ok(MultipathTable {
        name: None,
        start: 0,
        length: 0,
        features,
        hw_handler,
        next_group,
        groups,
    })
}

/// What a line of dmsetup output holds for a parser looking for `want` (`status` or `params`).
enum LineKind<'a> {
    Skip,
    Multipath(Target<'a>),
    Junk(&'static str),
}

fn classify<'a>(line: &'a str, debug_prefix: &str, other_prefix: &str) -> LineKind<'a> {
    let t = line.trim();
    if t.is_empty() || t == "No devices found" {
        return LineKind::Skip;
    }
    // `multipath -v4` debug output prints the bare arguments as `params = …` / `status = …`.
    if let Some(rest) = t.strip_prefix(debug_prefix) {
        return LineKind::Multipath(Target {
            name: None,
            start: 0,
            length: 0,
            target: "multipath",
            args: rest,
        });
    }
    if t.starts_with(other_prefix) {
        return LineKind::Skip;
    }
    match split_target(t) {
        Some(tg) if tg.target == "multipath" => LineKind::Multipath(tg),
        // linear, thin-pool, snapshot, crypt …: not ours.
        Some(_) => LineKind::Skip,
        None => LineKind::Junk("not a device-mapper target line"),
    }
}

/// Parses `dmsetup status [--target multipath]` output (or `status = …` debug lines). Targets
/// other than `multipath` are skipped; malformed lines are reported and the others kept.
pub fn parse_status(text: &str) -> Rows<MultipathStatus> {
    let mut out = Rows::default();
    for (i, line) in text.lines().enumerate() {
        match classify(line, "status = ", "params = ") {
            LineKind::Skip => {}
            LineKind::Junk(why) => out.errors.push(ParseError::new(i + 1, line, why)),
            LineKind::Multipath(tg) => match parse_status_args(tg.args) {
                Ok(mut s) => {
                    s.name = tg.name.map(str::to_owned);
                    s.start = tg.start;
                    s.length = tg.length;
                    out.rows.push(s);
                }
                Err(e) => out.errors.push(ParseError::new(i + 1, line, e)),
            },
        }
    }
    out
}

/// Parses `dmsetup table [--target multipath]` output (or `params = …` debug lines).
pub fn parse_table(text: &str) -> Rows<MultipathTable> {
    let mut out = Rows::default();
    for (i, line) in text.lines().enumerate() {
        match classify(line, "params = ", "status = ") {
            LineKind::Skip => {}
            LineKind::Junk(why) => out.errors.push(ParseError::new(i + 1, line, why)),
            LineKind::Multipath(tg) => match parse_table_args(tg.args) {
                Ok(mut s) => {
                    s.name = tg.name.map(str::to_owned);
                    s.start = tg.start;
                    s.length = tg.length;
                    out.rows.push(s);
                }
                Err(e) => out.errors.push(ParseError::new(i + 1, line, e)),
            },
        }
    }
    out
}

/// One row of `dmsetup info -C`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct DmInfo {
    /// Device-mapper name.
    pub name: String,
    /// Device number (`dm-<minor>` in sysfs).
    pub dev: DevT,
    /// Attribute flags: `L` live table, `-`/`I` inactive table, `r`/`w`, `s` suspended …
    pub stat: String,
    /// Open count.
    pub open: u64,
    /// Number of targets.
    pub targets: u64,
    /// Event number.
    pub event: u64,
    /// UUID (`mpath-<wwid>` for multipath maps, `LVM-…` for LVM); empty when unset.
    pub uuid: String,
}

/// Parses `dmsetup info -C` (columns `Name Maj Min Stat Open Targ Event UUID`).
pub fn parse_info_columns(text: &str) -> Result<Vec<DmInfo>, ParseError> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let t = line.trim();
        if t.is_empty() || t == "No devices found" || t.starts_with("Name ") {
            continue;
        }
        let f: Vec<&str> = fields(t).collect();
        let bad = |why: &str| ParseError::new(i + 1, line, why);
        let [name, maj, min, stat, open, targ, event, rest @ ..] = f.as_slice() else {
            return Err(bad("fewer than 7 columns"));
        };
        let num = |s: &str| parse_u64(s).ok_or_else(|| bad("column is not a number"));
        let dev = DevT::parse(&format!("{maj}:{min}")).ok_or_else(|| bad("bad major/minor"))?;
        out.push(DmInfo {
            name: (*name).to_owned(),
            dev,
            stat: (*stat).to_owned(),
            open: num(open)?,
            targets: num(targ)?,
            event: num(event)?,
            uuid: rest.join(" "),
        });
    }
    Ok(out)
}

pub mod ioctl;

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn fixtures() {
        insta::glob!("../../fixtures/dmsetup", "*.txt", |path| {
            let text = std::fs::read_to_string(path).expect("fixture");
            let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
            if name.contains("info-C") {
                insta::assert_debug_snapshot!(parse_info_columns(&text));
            } else if name.contains("params-status") {
                // `multipath -v4` debug output: each parser must skip the other's lines.
                insta::assert_debug_snapshot!((parse_status(&text), parse_table(&text)));
            } else if name.contains("table") {
                insta::assert_debug_snapshot!(parse_table(&text));
            } else {
                insta::assert_debug_snapshot!(parse_status(&text));
            }
        });
    }

    #[test]
    fn selector_arg_counts_are_read_not_guessed() {
        let t = parse_table_args("0 0 1 1 service-time 0 2 2 8:0 128 1 8:16 128 4").expect("ok");
        assert_eq!(t.groups[0].paths[1].selector_args, ["128", "4"]);
        let s = parse_status_args("2 0 0 0 1 1 E 0 2 1 8:0 A 0 0 8:16 F 3 7").expect("ok");
        assert_eq!(s.groups[0].paths[1].fail_count, 3);
        assert_eq!(s.groups[0].paths[1].selector_args, ["7"]);
        assert!(!s.groups[0].paths[1].active);
        assert_eq!(s.active_group(), None);
    }

    #[test]
    fn table_features() {
        let t = parse_table_args(
            "4 queue_if_no_path retain_attached_hw_handler queue_mode bio 1 alua 1 1 queue-length 0 1 1 8:0 1",
        )
        .expect("ok");
        assert!(t.queue_if_no_path());
        assert_eq!(t.queue_mode(), Some("bio"));
        assert_eq!(t.hw_handler, ["alua"]);
        let t = parse_table_args("0 0 0 0").expect("a map with no groups");
        assert!(!t.queue_if_no_path());
        assert!(t.groups.is_empty());
    }

    #[test]
    fn error_cases() {
        let e = |s: &str| parse_status_args(s).expect_err(s);
        assert!(e("").contains("feature arguments"));
        assert!(e("2 0 0").contains("hardware handler"));
        assert!(e("2 0 0 0 1 1 X 0 1 0 8:0 A 0").contains("not A, E or D"));
        assert!(e("2 0 0 0 1 1 A 0 1 0 8:0 Q 0").contains("not A or F"));
        assert!(e("2 0 0 0 1 1 A 0 1 0 sdb A 0").contains("major:minor"));
        assert!(e("2 0 0 0 1 1 A 0 2 0 8:0 A 0").contains("line ends"));
        assert!(e("2 0 0 0 1 1 A 0 1 0 8:0 A 0 junk").contains("unexpected"));
        assert!(e("2 0 0 0 1 3 A 0 1 0 8:0 A 0").contains("path group 3 of 1"));
        assert!(e("2 0 0 0 99999999999999999999 1").contains("not a count"));
        let t = parse_table_args("0 0 1 1 round-robin 0 1 1 8:0").expect_err("short");
        assert!(t.contains("line ends"));

        let rows = parse_status("mpatha: 0 10 multipath 2 0 0 0 1 1 A 0 1 0 8:0 A x\nrubbish\n");
        assert!(rows.rows.is_empty());
        assert_eq!(rows.errors.len(), 2);
        assert_eq!(rows.errors[0].line, 1);
        assert!(rows.errors[0].reason.contains("fail count"));
        assert_eq!(rows.errors[1].line, 2);
        assert_eq!(rows.errors[1].text, "rubbish");
    }

    #[test]
    fn names_with_colons_and_mixed_targets() {
        let text = "docker-253:10-1-a: 0 2 thin 1 2\nmp:x: 0 10 multipath 2 0 0 0 0 0\n";
        let rows = parse_status(text);
        assert!(rows.errors.is_empty(), "{:?}", rows.errors);
        assert_eq!(rows.rows.len(), 1);
        assert_eq!(rows.rows[0].name.as_deref(), Some("mp:x"));
    }

    #[test]
    fn info_columns_errors() {
        let e = parse_info_columns("Name Maj\nx 253 x L--w 1 1 0\n").expect_err("bad minor");
        assert_eq!(e.line, 2);
        assert!(parse_info_columns("a b\n").is_err());
    }

    proptest! {
        #[test]
        fn never_panics(s in "\\PC{0,200}") {
            let _ = parse_status(&s);
            let _ = parse_table(&s);
            let _ = parse_info_columns(&s);
        }

        #[test]
        fn never_panics_on_numeric_soup(words in proptest::collection::vec(
            prop_oneof![Just("A".to_owned()), Just("E".to_owned()), Just("F".to_owned()),
                        Just("8:16".to_owned()), "[0-9]{1,3}", "[a-z-]{1,8}"], 0..60)) {
            let line = words.join(" ");
            let _ = parse_status_args(&line);
            let _ = parse_table_args(&line);
        }
    }
}
