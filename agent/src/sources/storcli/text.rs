//! The text tables of `storcli /cx show [all]` (no `J`): `VD LIST`, `PD LIST`, `BBU_Info`,
//! `Cachevault_Info`, under a `Controller = N` / `Status = …` header.
//!
//! A table is a title line (`VD LIST :`), a line of `=`, then a dashed rule, a header row, a
//! rule, the rows and a closing rule. Columns are separated by spaces and some values hold
//! spaces (`Size` is `278.464 GB`, `Model` may be `INTEL SSDSC2KB019T8`, `Name` may be
//! empty), so rows are split by the header: single-word columns before `Size`, two words of
//! `Size`, then the single-word columns after it, the last columns taken from the end and
//! what is left in the middle is `Model` (PDs) or `Name` (VDs).

use super::{
    parse_size, temperature, Battery, BatteryKind, BatteryState, CachePolicy, Controller, PdState,
    PhysicalDrive, Slot, TopologyDrive, VdState, VirtualDrive,
};
use crate::sources::{Lines, ParseError};

/// Parses the text output of `storcli /cx show [all]`: one [`Controller`] per
/// `Controller = N` header (one when there is none).
pub fn parse_text(text: &str) -> Result<Vec<Controller>, ParseError> {
    let mut out: Vec<Controller> = Vec::new();
    let mut lines = Lines::new(text);
    let mut cur: Option<Controller> = None;
    while let Some((no, line)) = lines.next() {
        let t = line.trim();
        if let Some(v) = t.strip_prefix("Controller = ") {
            let n = v.trim().parse().ok();
            // `Basics :` repeats the number of the controller being shown
            if cur
                .as_ref()
                .is_some_and(|c| c.controller.is_some() && c.controller == n)
            {
                continue;
            }
            if let Some(c) = cur.take() {
                out.push(c);
            }
            cur = Some(Controller {
                controller: n,
                ..Controller::default()
            });
            continue;
        }
        let c = cur.get_or_insert_with(Controller::default);
        if let Some(v) = t.strip_prefix("Status = ") {
            c.status.ok = v.trim() == "Success";
        } else if let Some(v) = t.strip_prefix("Description = ") {
            c.status.description = Some(v.trim().to_owned()).filter(|d| d != "None");
        } else if let Some(v) = t.strip_prefix("CLI Version = ") {
            c.cli_version = Some(v.trim().to_owned());
        } else if let Some(v) = t.strip_prefix("Product Name = ") {
            c.model = Some(v.trim().to_owned());
        } else if let Some(v) = t.strip_prefix("Model = ") {
            c.model.get_or_insert_with(|| v.trim().to_owned());
        } else if let Some(v) = t.strip_prefix("Serial Number = ") {
            c.serial = Some(v.trim().to_owned());
        } else if let Some(v) = t
            .strip_prefix("ROC temperature(Degree Celsius) = ")
            .or_else(|| t.strip_prefix("ROC temperature(Degree Celcius) = "))
        {
            c.roc_temperature_c = v.trim().parse().ok();
        } else if let Some(title) = t.strip_suffix(" :").or_else(|| t.strip_suffix(':')) {
            let kind = match title.trim() {
                "VD LIST" => Table::Vd,
                "PD LIST" => Table::Pd,
                "TOPOLOGY" => Table::Topology,
                "BBU_Info" => Table::Battery(BatteryKind::Bbu),
                "Cachevault_Info" => Table::Battery(BatteryKind::CacheVault),
                "Detailed Status" => Table::Detailed,
                _ => continue,
            };
            let Some((header, rows)) = table(&mut lines) else {
                return Err(ParseError::new(
                    no,
                    line,
                    "table title without a ruled table",
                ));
            };
            for (rno, row) in rows {
                match kind {
                    Table::Vd => c.virtual_drives.push(vd_row(&header, rno, row)?),
                    Table::Pd => c.physical_drives.push(pd_row(&header, rno, row)?),
                    Table::Topology => c.topology.extend(topology_row(&header, rno, row)?),
                    Table::Battery(k) => c.batteries.push(battery_row(&header, k, rno, row)?),
                    Table::Detailed => {
                        // `Ctrl Status ErrCd ErrMsg`: the message is the rest of the row
                        if let Some(i) = header.iter().position(|h| *h == "ErrMsg") {
                            let msg: Vec<&str> = row.split_whitespace().skip(i).collect();
                            if !msg.is_empty() {
                                c.status.errors.push(msg.join(" "));
                            }
                        }
                    }
                }
            }
        }
    }
    if let Some(c) = cur {
        out.push(c);
    }
    // text before the first `Controller = N` ("Generating detailed summary…") is no controller
    out.retain(|c| *c != Controller::default());
    for c in &mut out {
        c.virtual_drives.sort_by_key(|v| (v.dg, v.vd));
        c.physical_drives.sort_by_key(|d| d.slot);
    }
    Ok(out)
}

#[derive(Clone, Copy)]
enum Table {
    Vd,
    Pd,
    Topology,
    Battery(BatteryKind),
    Detailed,
}

fn is_rule(t: &str) -> bool {
    !t.is_empty() && t.chars().all(|c| c == '-')
}

/// A table's header words and its rows with their line numbers.
type Ruled<'a> = (Vec<&'a str>, Vec<(usize, &'a str)>);

/// Skips the `===` underline and blank lines, then reads rule, header, rule, rows, rule.
fn table<'a>(lines: &mut Lines<'a>) -> Option<Ruled<'a>> {
    let mut header = None;
    let mut rules = 0;
    let mut rows = Vec::new();
    for (no, line) in lines.by_ref() {
        let t = line.trim();
        if rules == 0 && (t.is_empty() || t.chars().all(|c| c == '=')) {
            continue;
        }
        if is_rule(t) {
            rules += 1;
            if rules == 3 {
                return Some((header?, rows));
            }
            continue;
        }
        match rules {
            1 => header = Some(t.split_whitespace().collect()),
            2 => rows.push((no, line)),
            _ => return None,
        }
    }
    None
}

/// Splits `row` by `header`: `wide` is the column whose value may hold spaces (it takes
/// what the others leave), `Size` always takes two words.
fn split<'a>(
    header: &[&'a str],
    wide: &'a str,
    no: usize,
    row: &'a str,
) -> Result<Vec<(&'a str, String)>, ParseError> {
    let words: Vec<&str> = row.split_whitespace().collect();
    let wide_at = header.iter().position(|h| *h == wide);
    let size_words = |h: &str| if h == "Size" { 2 } else { 1 };
    let (before, after) = match wide_at {
        Some(i) => (&header[..i], &header[i + 1..]),
        None => (header, &header[header.len()..]),
    };
    let need: usize = before.iter().chain(after).map(|h| size_words(h)).sum();
    if words.len() < need {
        return Err(ParseError::new(
            no,
            row,
            format_args!(
                "{} words, the header {:?} needs at least {need}",
                words.len(),
                header
            ),
        ));
    }
    let mut out = Vec::new();
    let mut i = 0;
    for h in before {
        let n = size_words(h);
        out.push((*h, words[i..i + n].join(" ")));
        i += n;
    }
    let tail: usize = after.iter().map(|h| size_words(h)).sum();
    let mid_end = words.len() - tail;
    if wide_at.is_some() {
        out.push((wide, words[i..mid_end].join(" ")));
    }
    let mut j = mid_end;
    for h in after {
        let n = size_words(h);
        out.push((*h, words[j..j + n].join(" ")));
        j += n;
    }
    Ok(out)
}

fn get<'a>(cols: &'a [(&str, String)], name: &str) -> Option<&'a str> {
    cols.iter()
        .find(|(h, _)| *h == name)
        .map(|(_, v)| v.as_str())
        .filter(|v| !v.is_empty() && *v != "-")
}

fn vd_row(header: &[&str], no: usize, row: &str) -> Result<VirtualDrive, ParseError> {
    let cols = split(header, "Name", no, row)?;
    let (dg, vd) = get(&cols, "DG/VD")
        .and_then(|s| s.split_once('/'))
        .and_then(|(d, v)| Some((d.parse().ok()?, v.parse().ok()?)))
        .ok_or_else(|| ParseError::new(no, row, "no DG/VD"))?;
    let mut v = super::empty_vd(dg, vd);
    v.raid_level = get(&cols, "TYPE").unwrap_or_default().to_owned();
    v.state = VdState::from_abbrev(get(&cols, "State").unwrap_or_default());
    v.access = get(&cols, "Access").map(str::to_owned);
    v.cache = get(&cols, "Cache").map(CachePolicy::parse);
    v.size = get(&cols, "Size").map(str::to_owned);
    v.size_bytes = v.size.as_deref().and_then(parse_size);
    v.name = get(&cols, "Name").map(str::to_owned);
    Ok(v)
}

/// A `TOPOLOGY` row: a drive's, or `None` for the rows of the group and its spans.
fn topology_row(
    header: &[&str],
    no: usize,
    row: &str,
) -> Result<Option<TopologyDrive>, ParseError> {
    let cols = split(header, "", no, row)?;
    if get(&cols, "Type") != Some("DRIVE") {
        return Ok(None);
    }
    let num = |h: &str| get(&cols, h).and_then(|v| v.parse().ok());
    let (Some(dg), Some(arr)) = (num("DG"), num("Arr")) else {
        return Err(ParseError::new(no, row, "a DRIVE row without DG and Arr"));
    };
    Ok(Some(TopologyDrive {
        dg,
        arr,
        row: num("Row"),
        slot: get(&cols, "EID:Slot").and_then(Slot::parse_eid_slt),
        state: get(&cols, "State").unwrap_or_default().to_owned(),
    }))
}

fn pd_row(header: &[&str], no: usize, row: &str) -> Result<PhysicalDrive, ParseError> {
    let cols = split(header, "Model", no, row)?;
    let slot = get(&cols, "EID:Slt")
        .and_then(Slot::parse_eid_slt)
        .ok_or_else(|| ParseError::new(no, row, "no EID:Slt"))?;
    let dg = get(&cols, "DG");
    let size = get(&cols, "Size").map(str::to_owned);
    Ok(PhysicalDrive {
        slot,
        did: get(&cols, "DID").and_then(|s| s.parse().ok()),
        state: PdState::from_abbrev(get(&cols, "State").unwrap_or_default()),
        dg: dg.and_then(|s| s.parse().ok()),
        foreign: dg == Some("F"),
        size_bytes: size.as_deref().and_then(parse_size),
        size,
        interface: get(&cols, "Intf").map(str::to_owned),
        medium: get(&cols, "Med").map(str::to_owned),
        model: get(&cols, "Model").map(str::to_owned),
        spun: get(&cols, "Sp").map(str::to_owned),
        media_errors: None,
        other_errors: None,
        predictive_failures: None,
        smart_alert: None,
        serial: None,
        wwn: None,
        firmware: None,
        temperature_c: None,
    })
}

fn battery_row(
    header: &[&str],
    kind: BatteryKind,
    no: usize,
    row: &str,
) -> Result<Battery, ParseError> {
    // `RetentionTime` (`48 hours +`) and `Next Learn` (a date and a time) hold spaces, and
    // `Next Learn` is a two-word header: take Model and State, the first two columns, and
    // the temperature by its form (`37C`).
    let words: Vec<&str> = row.split_whitespace().collect();
    if header.first() != Some(&"Model") || header.get(1) != Some(&"State") || words.len() < 2 {
        return Err(ParseError::new(
            no,
            row,
            format_args!("battery row under header {header:?}"),
        ));
    }
    Ok(Battery {
        kind,
        model: Some(words[0].to_owned()),
        state: BatteryState::parse(words[1]),
        temperature_c: words[2..].iter().find_map(|w| temperature(w)),
    })
}
