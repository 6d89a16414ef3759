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

use serde::Serialize;

use super::dmmultipath::DevT;
use super::{fields, ParseError};

mod json;
mod topology;

pub use json::{json_maps, parse_json, JsonDoc, JsonGroup, JsonMap, JsonPath};
pub use topology::{parse_topology, TopoGroup, TopoMap, TopoPath};

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
