//! The topology listing (`multipath -ll`/`-l`, `multipathd show topology`): one map per header
//! line, its size line, its path groups and their paths, in the formats of 0.4.7 to today and
//! NVMe native multipath (see the parent module).

use serde::Serialize;

use super::strip_prompts;
use crate::sources::dmmultipath::DevT;
use crate::sources::{fields, ParseError};

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
pub(super) fn brackets(s: &str) -> Vec<String> {
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
