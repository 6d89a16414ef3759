//! The lines of one array's block in `/proc/mdstat`: its header (`md0 : active raid1 sdb1[1]
//! sda1[0]`), the geometry line, a resync/recovery progress or a wait (`resync=DELAYED`), and the
//! bitmap line.

use super::*;

/// Byte offset where the block of the array whose header `lines` just returned ends: the start
/// of the next line that is an array header, `Personalities` or `unused devices`, or the end of
/// the text.
pub(super) fn block_end(lines: &Lines<'_>) -> usize {
    let mut ahead = lines.clone();
    loop {
        let at = ahead.offset();
        let Some((_, raw)) = ahead.next() else {
            return at;
        };
        let line = raw.trim();
        if strip_label(line, "unused devices").is_some()
            || strip_label(line, "Personalities").is_some()
            || is_header(line)
        {
            return at;
        }
    }
}

/// `label :rest` or `label: rest` → `rest`.
pub(super) fn strip_label<'a>(line: &'a str, label: &str) -> Option<&'a str> {
    let rest = line.strip_prefix(label)?;
    rest.trim_start().strip_prefix(':')
}

/// The line starts an array (`md0 : ...`); [`parse_header`] says what it holds.
pub(super) fn is_header(line: &str) -> bool {
    let mut toks = line.split_whitespace();
    matches!((toks.next(), toks.next()), (Some(name), Some(":")) if !name.contains('['))
}

/// An array's first line: `md0 : active (auto-read-only) raid1 sda1[0] sdb1[1](W)`.
/// `None` when the line is not a header; `Some(Err)` when it looks like one but is wrong.
pub(super) fn parse_header(line: &str) -> Option<Result<MdArray, String>> {
    if !is_header(line) {
        return None;
    }
    let mut toks = line.split_whitespace();
    let name = toks.next()?;
    toks.next()?;
    let state = toks.next().unwrap_or("");
    let mut array = MdArray {
        name: name.to_owned(),
        ..MdArray::default()
    };
    match state {
        "active" => array.active = true,
        "inactive" => array.active = false,
        other => {
            return Some(Err(format!(
                "array state {other:?} is neither active nor inactive"
            )))
        }
    }
    for tok in toks {
        match tok {
            "(read-only)" => array.read_only = ReadOnly::ReadOnly,
            "(auto-read-only)" => array.read_only = ReadOnly::AutoReadOnly,
            t if t.contains('[') => match parse_member(t) {
                Some(m) => array.members.push(m),
                None => return Some(Err(format!("member {t:?} is not name[number](flags)"))),
            },
            t if array.level.is_none() && array.members.is_empty() => {
                array.level = Some(t.to_owned());
            }
            t => return Some(Err(format!("unexpected word {t:?} among the members"))),
        }
    }
    Some(Ok(array))
}

/// `sdb1[2](F)(W)` → member.
pub(super) fn parse_member(tok: &str) -> Option<MdMember> {
    let (name, rest) = tok.split_once('[')?;
    let (nr, flags) = rest.split_once(']')?;
    if name.is_empty() {
        return None;
    }
    let mut m = MdMember {
        name: name.to_owned(),
        desc_nr: u32::try_from(parse_u64(nr)?).ok()?,
        flags: MemberFlags::default(),
    };
    let mut rest = flags;
    while !rest.is_empty() {
        let inner = rest.strip_prefix('(')?;
        let (flag, after) = inner.split_once(')')?;
        match flag {
            "W" => m.flags.write_mostly = true,
            "J" => m.flags.journal = true,
            "F" => m.flags.faulty = true,
            "S" => m.flags.spare = true,
            "R" => m.flags.replacement = true,
            other if !other.is_empty() && other.chars().all(|c| c.is_ascii_alphabetic()) => {
                m.flags.other.push_str(other)
            }
            _ => return None,
        }
        rest = after;
    }
    Some(m)
}

/// A line after the header: sizes and geometry, progress, a pending sync, the bitmap, or the
/// rest of a wrapped member list.
pub(super) fn parse_detail(array: &mut MdArray, line: &str) -> Result<(), String> {
    if let Some(rest) = line.strip_prefix("bitmap:") {
        array.bitmap = Some(parse_bitmap(rest).ok_or("bitmap line not understood")?);
        return Ok(());
    }
    let first = line.split_whitespace().next().unwrap_or("");
    if is_geometry(line, first) {
        return parse_geometry(array, line);
    }
    if let Some(wait) = parse_wait(line) {
        array.waiting = Some(wait);
        return Ok(());
    }
    if looks_like_progress(line, first) {
        array.progress = Some(parse_progress(line)?);
        return Ok(());
    }
    if first.contains('[') {
        let members: Option<Vec<MdMember>> = line.split_whitespace().map(parse_member).collect();
        if let Some(members) = members {
            array.members.extend(members);
            return Ok(());
        }
    }
    Err("line not understood".into())
}

/// Whether [`parse_detail`] takes `line` (trimmed) for a progress line: what it sets is
/// [`MdArray::progress`] and nothing else.
pub(super) fn is_progress_line(line: &str) -> bool {
    let first = line.split_whitespace().next().unwrap_or("");
    !line.starts_with("bitmap:")
        && !is_geometry(line, first)
        && !is_wait(line)
        && looks_like_progress(line, first)
}

fn is_geometry(line: &str, first: &str) -> bool {
    parse_u64(first).is_some() && line.split_whitespace().nth(1) == Some("blocks")
}

fn looks_like_progress(line: &str, first: &str) -> bool {
    first.starts_with('[') && !first.contains('/') || line.contains('%')
}

/// `1250241792 blocks super 1.2 level 5, 64k chunk, algorithm 2 [5/5] [UUUUU]`, or the raid10
/// (`512K chunks 2 near-copies`), raid0 (`64k chunks`) and linear (`0k rounding`) forms.
pub(super) fn parse_geometry(array: &mut MdArray, line: &str) -> Result<(), String> {
    let toks: Vec<&str> = line.split_whitespace().collect();
    let mut i = 0;
    let bad = |t: &str| format!("{t:?} not understood in the size line");
    while let Some(&tok) = toks.get(i) {
        let next = toks.get(i + 1).copied().unwrap_or("");
        let word = next.trim_end_matches(',');
        match tok {
            "blocks" => {}
            "super" => {
                array.superblock = Some(next.to_owned());
                i += 1;
            }
            "level" => {
                array.level_number =
                    Some(num_u32(next.trim_end_matches(',')).ok_or_else(|| bad(next))?);
                i += 1;
            }
            "algorithm" => {
                array.algorithm = Some(num_u32(next).ok_or_else(|| bad(next))?);
                i += 1;
            }
            t if i == 0 => array.blocks_kb = Some(parse_u64(t).ok_or_else(|| bad(t))?),
            t if t.starts_with('[') && t.ends_with(']') && t.contains('/') => {
                let inner = t.trim_start_matches('[').trim_end_matches(']');
                let (n, m) = inner.split_once('/').ok_or_else(|| bad(t))?;
                array.raid_disks = Some(num_u32(n).ok_or_else(|| bad(t))?);
                array.working_disks = Some(num_u32(m).ok_or_else(|| bad(t))?);
            }
            t if t.starts_with('[') && t.ends_with(']') => {
                array.slot_status =
                    Some(t.trim_start_matches('[').trim_end_matches(']').to_owned());
            }
            t if matches!(word, "chunk" | "chunks" | "rounding") => {
                let kb = t
                    .strip_suffix(['k', 'K'])
                    .and_then(parse_u64)
                    .ok_or_else(|| bad(t))?;
                if word == "rounding" {
                    array.rounding_kb = Some(kb);
                } else {
                    array.chunk_kb = Some(kb);
                }
                i += 1;
            }
            t if matches!(word, "near-copies" | "far-copies" | "offset-copies") => {
                let n = num_u32(t).ok_or_else(|| bad(t))?;
                let l = array.raid10.get_or_insert(Raid10Layout {
                    near: 1,
                    far: 1,
                    offset: false,
                    devices_per_set: None,
                });
                if word == "near-copies" {
                    l.near = n;
                } else {
                    l.far = n;
                    l.offset = word == "offset-copies";
                }
                i += 1;
            }
            t if word == "devices" && toks.get(i + 2) == Some(&"per") => {
                let n = num_u32(t).ok_or_else(|| bad(t))?;
                if let Some(l) = array.raid10.as_mut() {
                    l.devices_per_set = Some(n);
                }
                i += 3;
            }
            // Personality-specific words (the `faulty` personality's counters, future
            // additions) carry nothing the monitor uses.
            _ => {}
        }
        i += 1;
    }
    Ok(())
}

pub(super) fn num_u32(s: &str) -> Option<u32> {
    u32::try_from(parse_u64(s)?).ok()
}

/// `resync=DELAYED` split at its `=`, when `line` is a wait line.
fn wait_words(line: &str) -> Option<(&str, &str)> {
    let mut toks = line.split_whitespace();
    let tok = toks.next()?;
    if toks.next().is_some() {
        return None;
    }
    let (action, reason) = tok.split_once('=')?;
    if action.is_empty()
        || !action.chars().all(|c| c.is_ascii_lowercase() || c == '-')
        || reason.is_empty()
        || !reason.chars().all(|c| c.is_ascii_uppercase())
    {
        return None;
    }
    Some((action, reason))
}

fn is_wait(line: &str) -> bool {
    wait_words(line).is_some()
}

/// `resync=DELAYED`, `resync=PENDING`, `resync=REMOTE`.
pub(super) fn parse_wait(line: &str) -> Option<SyncWait> {
    let (action, reason) = wait_words(line)?;
    let reason = match reason {
        "DELAYED" => WaitReason::Delayed,
        "PENDING" => WaitReason::Pending,
        "REMOTE" => WaitReason::Remote,
        other => WaitReason::Other(other.to_owned()),
    };
    Some(SyncWait {
        action: action.to_owned(),
        reason,
    })
}

/// `[=>....]  recovery =  8.5% (16775552/195310144) finish=17.0min speed=259783K/sec`.
pub(super) fn parse_progress(line: &str) -> Result<SyncProgress, String> {
    let mut rest = line;
    if let Some(after_open) = rest.strip_prefix('[') {
        if let Some((bar, after)) = after_open.split_once(']') {
            if bar.chars().all(|c| matches!(c, '=' | '>' | '.')) {
                rest = after.trim_start();
            }
        }
    }
    let action_end = rest
        .find(|c: char| c.is_whitespace() || c == '=')
        .unwrap_or(rest.len());
    let (action, after) = rest.split_at(action_end);
    if action.is_empty() || !action.chars().all(|c| c.is_ascii_lowercase() || c == '-') {
        return Err(format!("progress action {action:?} not understood"));
    }
    let after = after
        .trim_start()
        .strip_prefix('=')
        .ok_or("progress line without '='")?
        .trim_start();
    let mut toks = after.split_whitespace();
    let pct_tok = toks.next().unwrap_or("");
    let percent: f64 = pct_tok
        .strip_suffix('%')
        .and_then(|p| p.parse().ok())
        .filter(|p: &f64| p.is_finite())
        .ok_or_else(|| format!("progress percentage {pct_tok:?} not understood"))?;
    let mut p = SyncProgress {
        action: SyncAction::from_kernel(action),
        percent,
        done_kb: None,
        total_kb: None,
        finish_min: None,
        speed_kbps: None,
    };
    for tok in toks {
        if let Some(inner) = tok.strip_prefix('(').and_then(|t| t.strip_suffix(')')) {
            let (d, t) = inner
                .split_once('/')
                .ok_or_else(|| format!("progress counts {tok:?} not understood"))?;
            p.done_kb = Some(parse_u64(d).ok_or_else(|| format!("progress count {d:?}"))?);
            p.total_kb = Some(parse_u64(t).ok_or_else(|| format!("progress count {t:?}"))?);
        } else if let Some(v) = tok.strip_prefix("finish=") {
            p.finish_min = v
                .strip_suffix("min")
                .and_then(|m| m.parse::<f64>().ok())
                .filter(|m| m.is_finite());
        } else if let Some(v) = tok.strip_prefix("speed=") {
            p.speed_kbps = v
                .strip_suffix("K/sec")
                .or_else(|| v.strip_suffix("K/s"))
                .and_then(parse_u64);
        }
    }
    Ok(p)
}

/// ` 1/66 pages [4KB], 65536KB chunk, file: /bitmap`.
pub(super) fn parse_bitmap(rest: &str) -> Option<Bitmap> {
    let (counts, tail) = rest.trim().split_once(" pages")?;
    let (used, total) = counts.trim().split_once('/')?;
    let tail = tail.trim_start();
    let (kb, tail) = tail.strip_prefix('[')?.split_once("KB]")?;
    let tail = tail.trim_start().strip_prefix(',')?.trim_start();
    let (chunk, tail) = tail.split_once("KB chunk")?;
    let file = tail
        .trim_start()
        .strip_prefix(',')
        .map(str::trim_start)
        .and_then(|t| t.strip_prefix("file:"))
        .map(|f| f.trim().to_owned());
    Some(Bitmap {
        pages_used: parse_u64(used.trim())?,
        pages_total: parse_u64(total.trim())?,
        used_kb: parse_u64(kb.trim())?,
        chunk_kb: parse_u64(chunk.trim())?,
        file,
    })
}
