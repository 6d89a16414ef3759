//! What the multipath-tools userspace says about the maps: `multipath -ll`/`-l` topology, the
//! `multipathd` interactive replies (`show paths [format …]`, `show maps [status|stats|topology]`,
//! `show status`, `show wildcards`) and its JSON (`list maps json`, `show map … json`).
//!
//! The kernel's own view (which path is failed, fail counts) is in
//! [`dmmultipath`](super::dmmultipath); multipath-tools adds what only it knows: the checker
//! state of each path (`ready`, `faulty`, `ghost`, `shaky`), path and group priorities (from ALUA,
//! rdac, …), vendor and product. Reference: `multipath(8)`, `multipathd(8)`, and
//! `libmultipath/print.c` in multipath-tools for the formats:
//!
//! * topology, 0.4.9 and later: `alias (wwid) dm-N VENDOR,PRODUCT`, `size=… features='…'
//!   hwhandler='…' wp=rw`, `|-+- policy='service-time 0' prio=50 status=active`,
//!   `| |- 1:0:0:1 sdb 8:16 active ready running`;
//! * topology, 0.4.7/0.4.8 (RHEL5): `[size=…][features=…][hwhandler=…][rw]`,
//!   `\_ round-robin 0 [prio=1][active]`, ` \_ 3:0:1:4 sdk 8:160 [active][ready]`; 0.4.8 glues
//!   the WWID to `dm-N` when there is no alias;
//! * NVMe native multipath through the `[nvme]` foreign library: sysfs `[nvme]:nvme1n1`, size in
//!   sectors, policy `n/a`, path `0:0 n/a optimized live`;
//! * the `show …` tables pad every column to its widest cell, so cells are cut at the header's
//!   column starts (vendor strings hold spaces); `[active]` brackets are from 0.4.8.
//!
//! Interactive transcripts hold `multipathd> command` prompt lines; they are stripped (kept as
//! blank lines so error line numbers still match the input). Log lines (`Jun 21 04:39:26 | …`),
//! `-v4` debug lines and blank lines are skipped. Sizes stay as printed (`1.0T`, or sectors).

use std::collections::BTreeMap;
use std::io;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::dmmultipath::DevT;
use super::{fields, ParseError};

/// The abstract unix socket `multipathd` listens on (`@` = abstract namespace).
pub const SOCKET_NAME: &str = "/org/kernel/linux/storage/multipathd";

/// Replaces `multipathd>` prompt lines with blank ones so line numbers stay right.
fn strip_prompts(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for line in text.lines() {
        if !line.trim_start().starts_with("multipathd>") {
            out.push_str(line);
        }
        out.push('\n');
    }
    out
}

// ---------------------------------------------------------------------------------------------
// Topology (`multipath -ll`, `multipathd show topology`)

/// One map of a topology listing.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TopoMap {
    /// What multipath did (`create`, `reload`, `switchpg`) when the header had that prefix.
    pub action: Option<String>,
    /// Alias (user-friendly name), or the WWID when the map has no alias.
    pub name: String,
    /// The WWID.
    pub wwid: String,
    /// `dm-N`, or `[nvme]:nvmeXnY` for native NVMe multipath.
    pub sysfs: String,
    /// Vendor, trimmed of its space padding.
    pub vendor: Option<String>,
    /// Product, trimmed.
    pub product: Option<String>,
    /// Revision (NVMe headers carry it).
    pub revision: Option<String>,
    /// Size as printed (`1.0T`, `466G`, or sectors for NVMe).
    pub size: Option<String>,
    /// Feature string (`1 queue_if_no_path`, `n/a`).
    pub features: Option<String>,
    /// Hardware handler (`1 alua`, `0`, `ANA`).
    pub hwhandler: Option<String>,
    /// Write protection (`rw`, `ro`).
    pub write_prot: Option<String>,
    /// Path groups, in table order (group 1 first).
    pub groups: Vec<TopoGroup>,
}

/// One path group of a topology listing.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TopoGroup {
    /// Selector and its arguments (`service-time 0`, `round-robin 0`, `n/a`).
    pub policy: Option<String>,
    /// Group priority (-1 when unknown, e.g. `multipath -l`).
    pub prio: Option<i64>,
    /// `active`, `enabled`, `disabled`, or the ANA state for NVMe (`optimized`).
    pub status: Option<String>,
    /// Its paths.
    pub paths: Vec<TopoPath>,
}

/// One path of a topology listing.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TopoPath {
    /// SCSI host:channel:target:lun (or NVMe subsystem:controller:namespace).
    pub hcil: String,
    /// Kernel name (`sdb`, `nvme0n2`, `nvme1c4n1`).
    pub dev: String,
    /// Device number (`0:0` for native NVMe paths).
    pub dev_t: DevT,
    /// Kernel (dm) state: `active`, `failed`, `n/a`.
    pub dm_state: Option<String>,
    /// Checker state: `ready`, `faulty`, `ghost`, `shaky`, `undef` (no checker run, `-l`) …
    pub checker_state: Option<String>,
    /// Device state from sysfs: `running`, `offline`, `live` (NVMe) …
    pub dev_state: Option<String>,
}

/// Strips the tree-drawing characters in front of a group or path line.
fn tree_rest(line: &str) -> &str {
    line.trim_start_matches([' ', '|', '`', '\''])
}

/// `key=value key='quoted value'` pairs (values of the new topology format).
fn kv_pairs(s: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut chars = s.chars().peekable();
    loop {
        while chars.peek().is_some_and(|c| c.is_whitespace()) {
            chars.next();
        }
        let mut key = String::new();
        while let Some(&c) = chars.peek() {
            if c == '=' || c.is_whitespace() {
                break;
            }
            key.push(c);
            chars.next();
        }
        if key.is_empty() && chars.peek().is_none() {
            return out;
        }
        let mut value = String::new();
        if chars.peek() == Some(&'=') {
            chars.next();
            if chars.peek() == Some(&'\'') {
                chars.next();
                for c in chars.by_ref() {
                    if c == '\'' {
                        break;
                    }
                    value.push(c);
                }
            } else {
                while let Some(&c) = chars.peek() {
                    if c.is_whitespace() {
                        break;
                    }
                    value.push(c);
                    chars.next();
                }
            }
        } else if key.is_empty() {
            // A lone '=' or similar: skip one character to make progress.
            chars.next();
            continue;
        }
        out.push((key, value));
    }
}

/// The contents of each `[…]` in `s`, trimmed.
fn brackets(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur: Option<String> = None;
    for c in s.chars() {
        match (c, cur.as_mut()) {
            ('[', None) => cur = Some(String::new()),
            (']', Some(_)) => {
                if let Some(v) = cur.take() {
                    out.push(v.trim().to_owned());
                }
            }
            (c, Some(v)) => v.push(c),
            _ => {}
        }
    }
    out
}

fn looks_like_hcil(s: &str) -> bool {
    let parts: Vec<&str> = s.split(':').collect();
    (3..=4).contains(&parts.len())
        && parts
            .iter()
            .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
}

/// Finds the sysfs token of a header line: `dm-N` (possibly glued to the WWID) or `[nvme]:…`.
fn sysfs_token(line: &str) -> Option<(&str, String, String)> {
    for tok in fields(line) {
        if tok.starts_with("[nvme]:") {
            return Some((tok, String::new(), tok.to_owned()));
        }
        if let Some(i) = tok.rfind("dm-") {
            let (pre, dm) = tok.split_at(i);
            let num = dm.trim_start_matches("dm-");
            if !num.is_empty() && num.bytes().all(|b| b.is_ascii_digit()) {
                return Some((tok, pre.to_owned(), dm.to_owned()));
            }
        }
    }
    None
}

fn parse_header(line: &str) -> Option<TopoMap> {
    let mut t = line.trim();
    let mut action = None;
    if let Some((first, rest)) = t.split_once(": ") {
        if !first.is_empty() && first.bytes().all(|b| b.is_ascii_lowercase()) {
            action = Some(first.to_owned());
            t = rest.trim();
        }
    }
    let (tok, glued, sysfs) = sysfs_token(t)?;
    let (before, after) = t.split_once(tok)?;
    let who = format!("{}{}", before.trim(), glued).trim().to_owned();
    let (name, wwid) = match who.split_once(" (") {
        Some((alias, rest)) if rest.ends_with(')') => (
            alias.trim().to_owned(),
            rest.trim_end_matches(')').trim().to_owned(),
        ),
        _ => (who.clone(), who),
    };
    if name.is_empty() {
        return None;
    }
    let vpr = after.trim();
    let mut parts = vpr.splitn(3, ',').map(|s| s.trim().to_owned());
    let (vendor, product, revision) = if vpr.contains(',') {
        (parts.next(), parts.next(), parts.next())
    } else {
        (None, None, None)
    };
    Some(TopoMap {
        action,
        name,
        wwid,
        sysfs,
        vendor: vendor.filter(|s| !s.is_empty()),
        product: product.filter(|s| !s.is_empty()),
        revision: revision.filter(|s| !s.is_empty()),
        size: None,
        features: None,
        hwhandler: None,
        write_prot: None,
        groups: Vec::new(),
    })
}

fn apply_size_line(map: &mut TopoMap, line: &str) {
    let t = line.trim();
    if t.starts_with('[') {
        for item in brackets(t) {
            match item.split_once('=') {
                Some(("size", v)) => map.size = Some(v.trim().to_owned()),
                Some(("features", v)) => map.features = Some(v.trim().to_owned()),
                Some(("hwhandler", v)) => map.hwhandler = Some(v.trim().to_owned()),
                None if !item.is_empty() => map.write_prot = Some(item),
                _ => {}
            }
        }
    } else {
        for (k, v) in kv_pairs(t) {
            match k.as_str() {
                "size" => map.size = Some(v),
                "features" => map.features = Some(v),
                "hwhandler" => map.hwhandler = Some(v),
                "wp" => map.write_prot = Some(v),
                _ => {}
            }
        }
    }
}

fn parse_path(rest: &str, line_no: usize, line: &str) -> Result<TopoPath, ParseError> {
    let (head, states) = match rest.find('[') {
        Some(i) => rest.split_at(i),
        None => (rest, ""),
    };
    let toks: Vec<&str> = fields(head).collect();
    let [hcil, dev, dev_t, more @ ..] = toks.as_slice() else {
        return Err(ParseError::new(
            line_no,
            line,
            "path line needs hcil, device and major:minor",
        ));
    };
    let dev_t = DevT::parse(dev_t)
        .ok_or_else(|| ParseError::new(line_no, line, "path device number is not major:minor"))?;
    let mut st: Vec<String> = more.iter().map(|s| (*s).to_owned()).collect();
    st.extend(brackets(states));
    let mut st = st.into_iter();
    Ok(TopoPath {
        hcil: (*hcil).to_owned(),
        dev: (*dev).to_owned(),
        dev_t,
        dm_state: st.next(),
        checker_state: st.next(),
        dev_state: st.next(),
    })
}

/// Parses topology text (`multipath -ll`, `multipath -l`, `multipathd show topology`), old and
/// new formats, with log and debug lines around it.
pub fn parse_topology(text: &str) -> Result<Vec<TopoMap>, ParseError> {
    let text = strip_prompts(text);
    let mut maps: Vec<TopoMap> = Vec::new();
    // The line before a size line is the map header; anything else unknown is noise.
    let mut candidate: Option<(usize, &str)> = None;
    for (i, line) in text.lines().enumerate() {
        let n = i + 1;
        let t = line.trim();
        if t.is_empty() {
            continue;
        }
        if t.starts_with("size=") || t.starts_with("[size=") {
            let Some((hn, h)) = candidate.take() else {
                return Err(ParseError::new(n, line, "size line without a map header"));
            };
            let mut map = parse_header(h)
                .ok_or_else(|| ParseError::new(hn, h, "map header without dm-N or [nvme]: name"))?;
            apply_size_line(&mut map, t);
            maps.push(map);
            continue;
        }
        let rest = tree_rest(line);
        let old = rest.strip_prefix("\\_ ");
        let is_old_path = old.is_some_and(|r| fields(r).next().is_some_and(looks_like_hcil));
        if let Some(r) = rest.strip_prefix("-+- ").or(old.filter(|_| !is_old_path)) {
            let Some(map) = maps.last_mut() else {
                return Err(ParseError::new(n, line, "path group before any map"));
            };
            let group = if r.contains("policy=") || r.contains("status=") {
                let kv = kv_pairs(r);
                let get = |k: &str| kv.iter().find(|(a, _)| a == k).map(|(_, v)| v.clone());
                TopoGroup {
                    policy: get("policy"),
                    prio: get("prio").and_then(|p| p.parse().ok()),
                    status: get("status"),
                    paths: Vec::new(),
                }
            } else {
                let (policy, states) = r.split_once('[').unwrap_or((r, ""));
                let mut g = TopoGroup {
                    policy: Some(policy.trim().to_owned()).filter(|p| !p.is_empty()),
                    prio: None,
                    status: None,
                    paths: Vec::new(),
                };
                for b in brackets(&format!("[{states}")) {
                    match b.strip_prefix("prio=") {
                        Some(p) => g.prio = p.trim().parse().ok(),
                        None => g.status = Some(b),
                    }
                }
                g
            };
            map.groups.push(group);
            candidate = None;
            continue;
        }
        let path_rest = rest
            .strip_prefix("- ")
            .or(old.filter(|_| is_old_path))
            .filter(|r| fields(r).next().is_some_and(looks_like_hcil));
        if let Some(r) = path_rest {
            let Some(group) = maps.last_mut().and_then(|m| m.groups.last_mut()) else {
                return Err(ParseError::new(n, line, "path before any path group"));
            };
            group.paths.push(parse_path(r, n, line)?);
            candidate = None;
            continue;
        }
        candidate = Some((n, line));
    }
    Ok(maps)
}

// ---------------------------------------------------------------------------------------------
// Column tables (`show paths`, `show maps`, `show maps status|stats`, `-v4` paths list)

/// One table from a `show …` reply: the header's column names and each row's cells by name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ColumnTable {
    /// Column names as in the header.
    pub columns: Vec<String>,
    /// Cells by column name; brackets (`[active]`) removed, empty cells omitted.
    pub rows: Vec<BTreeMap<String, String>>,
}

/// Column names a `show paths`/`show maps` header starts with.
const HEADER_STARTS: &[&str] = &["hcil", "dev", "uuid", "name"];

fn is_header(line: &str) -> bool {
    let mut f = fields(line);
    let first = f.next().unwrap_or("");
    HEADER_STARTS.contains(&first)
        && f.next().is_some()
        && fields(line).all(|w| {
            w.bytes()
                .all(|b| b.is_ascii_lowercase() || b"_-/".contains(&b))
        })
}

/// Start column (in characters) of each header word.
fn column_starts(header: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut word = String::new();
    let mut start = 0;
    for (i, c) in header.chars().enumerate() {
        if c.is_whitespace() {
            if !word.is_empty() {
                out.push((start, std::mem::take(&mut word)));
            }
        } else {
            if word.is_empty() {
                start = i;
            }
            word.push(c);
        }
    }
    if !word.is_empty() {
        out.push((start, word));
    }
    out
}

fn clean_cell(s: &str) -> String {
    let t = s.trim();
    let inner = t
        .strip_prefix('[')
        .and_then(|x| x.strip_suffix(']'))
        .filter(|x| !x.contains(']'));
    inner.unwrap_or(t).trim().to_owned()
}

fn cut_row(row: &str, cols: &[(usize, String)]) -> BTreeMap<String, String> {
    let chars: Vec<char> = row.chars().collect();
    let mut out = BTreeMap::new();
    for (k, (start, name)) in cols.iter().enumerate() {
        // The first column starts at the line start whatever the header's indent.
        let from = if k == 0 { 0 } else { *start };
        let to = cols.get(k + 1).map_or(chars.len(), |(s, _)| *s);
        let cell: String = chars
            .get(from.min(chars.len())..to.min(chars.len()).max(from.min(chars.len())))
            .unwrap_or_default()
            .iter()
            .collect();
        let cell = clean_cell(&cell);
        if !cell.is_empty() {
            out.insert(name.clone(), cell);
        }
    }
    out
}

/// Whether `row` has a cell boundary (a blank before) at every header column start it reaches:
/// what padded columns guarantee and prose (`params = …`, log lines) almost never has.
fn aligned(row: &str, cols: &[(usize, String)]) -> bool {
    let chars: Vec<char> = row.chars().collect();
    cols.iter().skip(1).all(|(start, _)| {
        let before = start.checked_sub(1).and_then(|i| chars.get(i));
        *start >= chars.len()
            || before.is_some_and(|c| c.is_whitespace())
            // 0.4.8 glues full-width bracketed cells: `[active][ready]`.
            || (before == Some(&']') && chars.get(*start) == Some(&'['))
    })
}

/// Parses every column table in `text` (`show paths`, `show maps`, `show maps status`,
/// `show maps stats`, the `-v4` paths list). Rows end at a blank line, a prompt, or a line
/// that is not indented like a row (log lines, topology).
pub fn parse_tables(text: &str) -> Result<Vec<ColumnTable>, ParseError> {
    let text = strip_prompts(text);
    let mut out: Vec<ColumnTable> = Vec::new();
    let mut cols: Option<Vec<(usize, String)>> = None;
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            cols = None;
            continue;
        }
        if is_header(line) {
            let c = column_starts(line);
            out.push(ColumnTable {
                columns: c.iter().map(|(_, n)| n.clone()).collect(),
                rows: Vec::new(),
            });
            cols = Some(c);
            continue;
        }
        let Some(c) = cols.as_ref() else { continue };
        // A row has a cell at every header column start except possibly the first; a log line
        // (`Oct 28 14:02:44 | …`) or a topology line ends the table.
        let t = line.trim_start();
        if t.contains(" | ") || t.starts_with("size=") || t.starts_with('`') || t.starts_with("|-")
        {
            cols = None;
            continue;
        }
        if !aligned(line, c) {
            cols = None;
            continue;
        }
        let row = cut_row(line, c);
        if row.len() < 2 {
            return Err(ParseError::new(
                i + 1,
                line,
                "table row with fewer than two cells",
            ));
        }
        if let Some(t) = out.last_mut() {
            t.rows.push(row);
        }
    }
    Ok(out)
}

/// One row of `show paths [format …]`, typed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PathRow {
    /// Kernel name (`sdb`).
    pub dev: String,
    /// Device number.
    pub dev_t: Option<DevT>,
    /// SCSI address.
    pub hcil: Option<String>,
    /// Path priority.
    pub pri: Option<i64>,
    /// Kernel (dm) state: `active`, `failed`, `undef` (not in a map).
    pub dm_state: Option<String>,
    /// Checker state: `ready`, `faulty`, `ghost`, `shaky`, `undef`.
    pub checker_state: Option<String>,
    /// sysfs device state: `running`, `offline`, …
    pub dev_state: Option<String>,
    /// Map name (`orphan` when in no map).
    pub multipath: Option<String>,
    /// `vendor,product,revision`.
    pub vend_prod_rev: Option<String>,
    /// Other columns, by header name.
    pub other: BTreeMap<String, String>,
}

/// Parses `show paths` / `show paths format "…"` (and the `-v4` paths list) into typed rows.
pub fn parse_show_paths(text: &str) -> Result<Vec<PathRow>, ParseError> {
    let mut out = Vec::new();
    for table in parse_tables(text)? {
        if !table.columns.iter().any(|c| c == "dev") {
            continue;
        }
        for mut row in table.rows {
            let Some(dev) = row.remove("dev") else {
                continue;
            };
            out.push(PathRow {
                dev,
                dev_t: row.remove("dev_t").and_then(|d| DevT::parse(&d)),
                hcil: row.remove("hcil"),
                pri: row.remove("pri").and_then(|p| p.parse().ok()),
                dm_state: row.remove("dm_st"),
                checker_state: row.remove("chk_st"),
                dev_state: row.remove("dev_st"),
                multipath: row.remove("multipath"),
                vend_prod_rev: row.remove("vend/prod/rev"),
                other: row,
            });
        }
    }
    Ok(out)
}

/// One map from `show maps`, `show maps status` and `show maps stats`, merged by name.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
pub struct MapRow {
    /// Map name.
    pub name: String,
    /// `dm-N`.
    pub sysfs: Option<String>,
    /// WWID.
    pub uuid: Option<String>,
    /// Failback policy (`immediate`, `manual`, seconds, `-`).
    pub failback: Option<String>,
    /// Queueing policy (`-`, `off`, `on`, `5 chk`).
    pub queueing: Option<String>,
    /// Usable paths as multipathd counts them.
    pub paths: Option<u64>,
    /// Kernel map state (`active`, `suspend`).
    pub dm_state: Option<String>,
    /// `rw` or `ro` (0.4.9 and later).
    pub write_prot: Option<String>,
    /// Path failures seen by multipathd.
    pub path_faults: Option<u64>,
    /// Path-group switches.
    pub switch_grp: Option<u64>,
    /// Table loads.
    pub map_loads: Option<u64>,
    /// Seconds spent queueing with no path.
    pub total_q_time: Option<u64>,
    /// Times queueing timed out.
    pub q_timeouts: Option<u64>,
}

/// Parses `show maps`, `show maps status` and `show maps stats` replies (one or several, as in
/// a transcript) into one row per map.
pub fn parse_show_maps(text: &str) -> Result<Vec<MapRow>, ParseError> {
    let mut out: Vec<MapRow> = Vec::new();
    for table in parse_tables(text)? {
        if table.columns.first().map(String::as_str) != Some("name") {
            continue;
        }
        for mut row in table.rows {
            let Some(name) = row.remove("name") else {
                continue;
            };
            let i = match out.iter().position(|m| m.name == name) {
                Some(i) => i,
                None => {
                    out.push(MapRow {
                        name,
                        ..MapRow::default()
                    });
                    out.len() - 1
                }
            };
            let Some(m) = out.get_mut(i) else { continue };
            let mut num = |k: &str, slot: &mut Option<u64>| {
                if let Some(v) = row.remove(k).and_then(|v| super::parse_u64(&v)) {
                    *slot = Some(v);
                }
            };
            num("paths", &mut m.paths);
            num("path_faults", &mut m.path_faults);
            num("switch_grp", &mut m.switch_grp);
            num("map_loads", &mut m.map_loads);
            num("total_q_time", &mut m.total_q_time);
            num("q_timeouts", &mut m.q_timeouts);
            for (k, slot) in [
                ("sysfs", &mut m.sysfs),
                ("uuid", &mut m.uuid),
                ("failback", &mut m.failback),
                ("queueing", &mut m.queueing),
                ("dm-st", &mut m.dm_state),
                ("write_prot", &mut m.write_prot),
            ] {
                if let Some(v) = row.remove(k) {
                    *slot = Some(v);
                }
            }
        }
    }
    Ok(out)
}

// ---------------------------------------------------------------------------------------------
// `show status`, `show wildcards`

/// Parses `show status`: `path checker states:` counts (`up 2`) and `key: value` lines.
pub fn parse_show_status(text: &str) -> Result<Vec<(String, String)>, ParseError> {
    let text = strip_prompts(text);
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let t = line.trim();
        if t.is_empty() || t == "path checker states:" {
            continue;
        }
        if let Some((k, v)) = t.split_once(':') {
            out.push((k.trim().to_owned(), v.trim().to_owned()));
            continue;
        }
        let f: Vec<&str> = fields(t).collect();
        match f.as_slice() {
            [k, v] => out.push(((*k).to_owned(), (*v).to_owned())),
            _ => return Err(ParseError::new(i + 1, line, "expected `state count`")),
        }
    }
    Ok(out)
}

/// One section of `show wildcards`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct WildcardSection {
    /// `multipath`, `path` or `pathgroup`.
    pub kind: String,
    /// `(%n, name)` pairs.
    pub codes: Vec<(String, String)>,
}

/// Parses `show wildcards`.
pub fn parse_wildcards(text: &str) -> Result<Vec<WildcardSection>, ParseError> {
    let text = strip_prompts(text);
    let mut out: Vec<WildcardSection> = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let t = line.trim();
        if t.is_empty() {
            continue;
        }
        if let Some(kind) = t.strip_suffix(" format wildcards:") {
            out.push(WildcardSection {
                kind: kind.to_owned(),
                codes: Vec::new(),
            });
            continue;
        }
        let (code, name) = t
            .split_once(|c: char| c.is_whitespace())
            .filter(|(c, _)| c.starts_with('%'))
            .ok_or_else(|| ParseError::new(i + 1, line, "expected `%x name`"))?;
        let Some(sec) = out.last_mut() else {
            return Err(ParseError::new(
                i + 1,
                line,
                "wildcard before a section title",
            ));
        };
        sec.codes.push((code.to_owned(), name.trim().to_owned()));
    }
    Ok(out)
}

// ---------------------------------------------------------------------------------------------
// JSON (`list maps json`, `show map NAME json`)

/// A path in multipathd's JSON.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
pub struct JsonPath {
    /// Kernel name.
    pub dev: String,
    /// `major:minor`.
    #[serde(default)]
    pub dev_t: Option<String>,
    /// Kernel state: `active`, `failed`.
    #[serde(default)]
    pub dm_st: Option<String>,
    /// sysfs device state.
    #[serde(default)]
    pub dev_st: Option<String>,
    /// Checker state.
    #[serde(default)]
    pub chk_st: Option<String>,
    /// Checker name (`tur`, `directio`, …).
    #[serde(default)]
    pub checker: Option<String>,
    /// Path priority.
    #[serde(default)]
    pub pri: Option<i64>,
    /// Marginal-path state (newer versions).
    #[serde(default)]
    pub marginal_st: Option<String>,
    /// Transport identifiers and other fields, as printed.
    #[serde(flatten)]
    pub other: BTreeMap<String, serde_json::Value>,
}

/// A path group in multipathd's JSON.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
pub struct JsonGroup {
    /// Selector and arguments.
    #[serde(default)]
    pub selector: Option<String>,
    /// Group priority.
    #[serde(default)]
    pub pri: Option<i64>,
    /// `active`, `enabled`, `disabled`.
    #[serde(default)]
    pub dm_st: Option<String>,
    /// 1-based group number.
    #[serde(default)]
    pub group: Option<u32>,
    /// Paths.
    #[serde(default)]
    pub paths: Vec<JsonPath>,
}

/// A map in multipathd's JSON.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
pub struct JsonMap {
    /// Alias.
    pub name: String,
    /// WWID.
    #[serde(default)]
    pub uuid: Option<String>,
    /// `dm-N`.
    #[serde(default)]
    pub sysfs: Option<String>,
    /// Queueing policy (`off`, `on`, `5 chk`).
    #[serde(default)]
    pub queueing: Option<String>,
    /// Number of usable paths as multipathd counts them.
    #[serde(default)]
    pub paths: Option<i64>,
    /// Kernel map state.
    #[serde(default)]
    pub dm_st: Option<String>,
    /// Feature string.
    #[serde(default)]
    pub features: Option<String>,
    /// Hardware handler.
    #[serde(default)]
    pub hwhandler: Option<String>,
    /// Path failures multipathd has seen.
    #[serde(default)]
    pub path_faults: Option<u64>,
    /// Vendor (space-padded as the device reports it).
    #[serde(default)]
    pub vend: Option<String>,
    /// Product (space-padded).
    #[serde(default)]
    pub prod: Option<String>,
    /// Path-group switches.
    #[serde(default)]
    pub switch_grp: Option<u64>,
    /// Table loads.
    #[serde(default)]
    pub map_loads: Option<u64>,
    /// Path groups.
    #[serde(default)]
    pub path_groups: Vec<JsonGroup>,
    /// Other fields, as printed.
    #[serde(flatten)]
    pub other: BTreeMap<String, serde_json::Value>,
}

/// One JSON document of a reply.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub enum JsonDoc {
    /// `{"major_version":…, "maps":[…]}` or `{…, "map":{…}}`.
    Maps {
        /// Format version `major.minor`.
        version: (u64, u64),
        /// The maps.
        maps: Vec<JsonMap>,
    },
    /// A bare map object.
    Map(JsonMap),
    /// A bare path object.
    Path(JsonPath),
}

fn json_error(text: &str, e: &serde_json::Error) -> ParseError {
    let line = e.line().max(1);
    ParseError::new(line, text.lines().nth(line - 1).unwrap_or(""), e)
}

/// Parses multipathd JSON replies: one or more documents (whole replies, or map or path
/// objects), prompt lines allowed.
pub fn parse_json(text: &str) -> Result<Vec<JsonDoc>, ParseError> {
    let text = strip_prompts(text);
    let mut out = Vec::new();
    let stream = serde_json::Deserializer::from_str(&text).into_iter::<serde_json::Value>();
    for v in stream {
        let v = v.map_err(|e| json_error(&text, &e))?;
        let conv = |v: serde_json::Value| -> Result<JsonDoc, serde_json::Error> {
            if v.get("major_version").is_some() {
                let num = |k: &str| v.get(k).and_then(serde_json::Value::as_u64).unwrap_or(0);
                let version = (num("major_version"), num("minor_version"));
                let maps = match (v.get("maps"), v.get("map")) {
                    (Some(m), _) => Vec::<JsonMap>::deserialize(m)?,
                    (None, Some(m)) => vec![JsonMap::deserialize(m)?],
                    (None, None) => Vec::new(),
                };
                Ok(JsonDoc::Maps { version, maps })
            } else if v.get("dev").is_some() {
                Ok(JsonDoc::Path(JsonPath::deserialize(v)?))
            } else {
                Ok(JsonDoc::Map(JsonMap::deserialize(v)?))
            }
        };
        out.push(conv(v).map_err(|e| ParseError::new(1, "", format!("JSON shape: {e}")))?);
    }
    Ok(out)
}

/// All maps of a JSON reply (the `maps` list, the single `map`, or bare map objects).
pub fn json_maps(docs: Vec<JsonDoc>) -> Vec<JsonMap> {
    let mut out = Vec::new();
    for d in docs {
        match d {
            JsonDoc::Maps { maps, .. } => out.extend(maps),
            JsonDoc::Map(m) => out.push(m),
            JsonDoc::Path(_) => {}
        }
    }
    out
}

// ---------------------------------------------------------------------------------------------
// The socket

/// Sends `command` to multipathd on its abstract unix socket and returns the reply.
///
/// Protocol (`libmultipath/uxsock.c`): a native `size_t` length including the terminating NUL,
/// then the bytes; the reply comes back the same way. `show`/`list` commands need no root.
/// `Ok(None)` when nothing listens (multipathd not running).
pub fn query_socket(name: &str, command: &str, timeout: Duration) -> io::Result<Option<String>> {
    use std::io::{Read, Write};
    use std::os::linux::net::SocketAddrExt;
    use std::os::unix::net::{SocketAddr, UnixStream};

    let addr = SocketAddr::from_abstract_name(name.as_bytes())?;
    let mut s = match UnixStream::connect_addr(&addr) {
        Ok(s) => s,
        Err(e)
            if matches!(
                e.kind(),
                io::ErrorKind::ConnectionRefused | io::ErrorKind::NotFound
            ) =>
        {
            return Ok(None)
        }
        Err(e) => return Err(e),
    };
    s.set_read_timeout(Some(timeout))?;
    s.set_write_timeout(Some(timeout))?;
    let mut msg = Vec::with_capacity(command.len() + 9);
    msg.extend_from_slice(&(command.len() + 1).to_ne_bytes());
    msg.extend_from_slice(command.as_bytes());
    msg.push(0);
    s.write_all(&msg)?;
    let mut len = [0u8; std::mem::size_of::<usize>()];
    s.read_exact(&mut len)?;
    let len = usize::from_ne_bytes(len);
    if len > 64 << 20 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("multipathd reply of {len} bytes"),
        ));
    }
    let mut buf = vec![0u8; len];
    s.read_exact(&mut buf)?;
    while buf.last() == Some(&0) {
        buf.pop();
    }
    Ok(Some(String::from_utf8_lossy(&buf).into_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// One line per map, group and path: compact enough to review every field.
    fn render(maps: &Result<Vec<TopoMap>, ParseError>) -> String {
        let maps = match maps {
            Ok(m) => m,
            Err(e) => return format!("Err({e})"),
        };
        let o = |v: &Option<String>| v.clone().unwrap_or_else(|| "-".into());
        let mut out = String::new();
        for m in maps {
            out += &format!(
                "map action={} name={:?} wwid={:?} sysfs={} vendor={:?} product={:?} rev={:?} size={} features={:?} hwhandler={:?} wp={}\n",
                o(&m.action), m.name, m.wwid, m.sysfs, o(&m.vendor), o(&m.product), o(&m.revision),
                o(&m.size), o(&m.features), o(&m.hwhandler), o(&m.write_prot)
            );
            for (i, g) in m.groups.iter().enumerate() {
                out += &format!(
                    "  group {} policy={:?} prio={:?} status={}\n",
                    i + 1,
                    o(&g.policy),
                    g.prio,
                    o(&g.status)
                );
                for p in &g.paths {
                    out += &format!(
                        "    path {} {} {} dm={} chk={} dev={}\n",
                        p.hcil,
                        p.dev,
                        p.dev_t,
                        o(&p.dm_state),
                        o(&p.checker_state),
                        o(&p.dev_state)
                    );
                }
            }
        }
        out
    }

    /// Which parser a fixture is for, by its name.
    fn parse_fixture(name: &str, text: &str) -> String {
        if name.contains("json") {
            format!("{:#?}", parse_json(text))
        } else if name.contains("wildcards") {
            format!("{:#?}", parse_wildcards(text))
        } else if name.contains("show-paths") {
            format!("{:#?}", parse_show_paths(text))
        } else if name.contains("show-status") || name.contains("session") {
            // Transcripts: every table in them, the status counts, and the topology.
            let status = text
                .split("multipathd> ")
                .filter(|s| s.starts_with("show status"))
                .map(|s| parse_show_status(s.trim_start_matches("show status")))
                .collect::<Vec<_>>();
            format!(
                "paths: {:#?}\nmaps: {:#?}\nstatus: {:#?}\ntopology:\n{}",
                parse_show_paths(text),
                parse_show_maps(text),
                status,
                render(&parse_topology(text))
            )
        } else {
            render(&parse_topology(text))
        }
    }

    #[test]
    fn fixtures() {
        insta::glob!("../../fixtures/multipath", "*.txt", |path| {
            let text = std::fs::read_to_string(path).expect("fixture");
            let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
            let out = parse_fixture(name, &text);
            assert!(!out.contains("Err("), "{name}: {out}");
            insta::assert_snapshot!(out);
        });
    }

    #[test]
    fn new_format_details() {
        let maps = parse_topology(
            "mpathg (3600) dm-14 IBM     ,2107900\nsize=1.0G features='1 queue_if_no_path' hwhandler='1 alua' wp=rw\n|-+- policy='service-time 0' prio=50 status=active\n| `- 1:0:0:1 sdb 8:16 active ready running\n`-+- policy='service-time 0' prio=10 status=enabled\n  `- 2:0:0:1 sdc 8:32 failed faulty offline\n",
        )
        .expect("parses");
        let m = &maps[0];
        assert_eq!((m.name.as_str(), m.wwid.as_str()), ("mpathg", "3600"));
        assert_eq!(m.vendor.as_deref(), Some("IBM"));
        assert_eq!(m.features.as_deref(), Some("1 queue_if_no_path"));
        assert_eq!(m.groups[0].prio, Some(50));
        assert_eq!(
            m.groups[1].paths[0].checker_state.as_deref(),
            Some("faulty")
        );
        assert_eq!(m.groups[1].paths[0].dev_state.as_deref(), Some("offline"));
    }

    #[test]
    fn topology_errors() {
        let e = parse_topology("size=1G features='0'\n").expect_err("no header");
        assert_eq!(e.line, 1);
        let e = parse_topology("mpatha (1) nothing here\nsize=1G\n").expect_err("no dm-N");
        assert_eq!(e.line, 1);
        let e = parse_topology("|-+- policy='x' prio=1 status=active\n").expect_err("orphan group");
        assert_eq!(e.line, 1);
        let e = parse_topology("m dm-0 A,B\nsize=1G\n`- 1:0:0:1 sdb\n").expect_err("no group");
        assert!(e.reason.contains("before any path group"));
        let e = parse_topology("m dm-0 A,B\nsize=1G\n`-+- prio=1 status=x\n  `- 1:0:0:1 sdb 8\n")
            .expect_err("bad dev_t");
        assert_eq!(e.line, 4);
        assert!(parse_topology("Jun 21 | junk\n\nmore junk\n")
            .expect("log only")
            .is_empty());
    }

    #[test]
    fn other_errors() {
        assert_eq!(parse_show_status("up 2 3\n").expect_err("3 words").line, 1);
        assert_eq!(
            parse_wildcards("%n name\n").expect_err("no section").line,
            1
        );
        assert_eq!(
            parse_wildcards("path format wildcards:\nnope\n")
                .expect_err("x")
                .line,
            2
        );
        let e = parse_json("multipathd> list maps json\n{\n \"maps\": [\n}\n").expect_err("bad");
        assert_eq!(e.line, 4);
        let e = parse_tables("dev dm_st\nsda\n").expect_err("short row");
        assert_eq!(e.line, 2);
    }

    #[test]
    fn socket_absent_is_none() {
        let r = query_socket(
            "/storwatch/test/nobody-listens-here",
            "show maps json",
            Duration::from_millis(200),
        );
        assert!(matches!(r, Ok(None)), "{r:?}");
    }

    #[test]
    fn socket_round_trip() {
        use std::io::{Read, Write};
        use std::os::linux::net::SocketAddrExt;
        use std::os::unix::net::{SocketAddr, UnixListener};
        let name = format!("/storwatch/test/mpathd-{}", std::process::id());
        let addr = SocketAddr::from_abstract_name(name.as_bytes()).expect("addr");
        let l = UnixListener::bind_addr(&addr).expect("bind");
        let server = std::thread::spawn(move || {
            let (mut s, _) = l.accept().expect("accept");
            let mut len = [0u8; std::mem::size_of::<usize>()];
            s.read_exact(&mut len).expect("len");
            let mut cmd = vec![0u8; usize::from_ne_bytes(len)];
            s.read_exact(&mut cmd).expect("cmd");
            assert_eq!(cmd, b"show maps json\0");
            let reply = b"{\"major_version\": 0, \"minor_version\": 1, \"maps\": []}\n\0";
            s.write_all(&reply.len().to_ne_bytes()).expect("w");
            s.write_all(reply).expect("w");
        });
        let out = query_socket(&name, "show maps json", Duration::from_secs(5))
            .expect("io")
            .expect("listening");
        server.join().expect("server");
        assert!(matches!(
            parse_json(&out).expect("json").as_slice(),
            [JsonDoc::Maps { version: (0, 1), maps }] if maps.is_empty()
        ));
    }

    proptest! {
        #[test]
        fn never_panics(s in "\\PC{0,300}") {
            let _ = parse_topology(&s);
            let _ = parse_tables(&s);
            let _ = parse_show_paths(&s);
            let _ = parse_show_maps(&s);
            let _ = parse_show_status(&s);
            let _ = parse_wildcards(&s);
            let _ = parse_json(&s);
        }

        #[test]
        fn never_panics_on_topology_like_lines(lines in proptest::collection::vec(prop_oneof![
            Just("mpatha (3600) dm-0 A ,B".to_owned()), Just("size=1G features='0' wp=rw".to_owned()),
            Just("[size=1G][features=0][rw]".to_owned()), Just("|-+- policy='r 0' prio=1 status=active".to_owned()),
            Just("\\_ round-robin 0 [prio=1][active]".to_owned()), Just(" \\_ 1:0:0:1 sdb 8:16 [active][ready]".to_owned()),
            Just("| `- 1:0:0:1 sdb 8:16 active ready running".to_owned()), Just("hcil dev dev_t pri".to_owned()),
            "[ -~]{0,40}"], 0..12)) {
            let text = lines.join("\n");
            let _ = parse_topology(&text);
            let _ = parse_tables(&text);
        }
    }
}
