//! Reading `storcli /call show all J` (and the other `J` commands) into the [`Controller`]
//! model: the command status, the controllers' response data tables, virtual and physical
//! drives, the battery or CacheVault, the rebuild progress.

use serde_json::{Map, Value};

use super::*;

/// Parses storcli JSON output into one [`Controller`] per answering controller.
pub fn parse(json: &str) -> Result<Vec<Controller>, ParseError> {
    if json.trim().is_empty() {
        return Err(ParseError::new(1, "", "empty output: no storcli JSON"));
    }
    let doc: Value =
        serde_json::from_str(json).map_err(|e| crate::sources::smartctl::json_error(json, &e))?;
    let first = json.lines().next().unwrap_or_default();
    let ctls = doc
        .get("Controllers")
        .ok_or_else(|| ParseError::new(1, first, "not storcli JSON: no \"Controllers\""))?
        .as_array()
        .ok_or_else(|| ParseError::new(1, first, "\"Controllers\" is not a list"))?;
    Ok(ctls.iter().map(controller).collect())
}

fn controller(c: &Value) -> Controller {
    let st = c.get("Command Status");
    let mut out = Controller {
        controller: st.and_then(|s| s.get("Controller")).and_then(as_u32),
        status: CommandStatus {
            ok: st.and_then(|s| s.get("Status")).and_then(word).as_deref() == Some("Success"),
            // storcli writes "None" when it has nothing to say
            description: st
                .and_then(|s| s.get("Description"))
                .and_then(text)
                .filter(|d| d != "None"),
            errors: st
                .and_then(|s| s.get("Detailed Status"))
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(|d| d.get("ErrMsg").and_then(text))
                        .collect()
                })
                .unwrap_or_default(),
        },
        cli_version: st.and_then(|s| s.get("CLI Version")).and_then(text),
        ..Controller::default()
    };
    match c.get("Response Data") {
        Some(Value::Object(rd)) => response_data(rd, &mut out),
        Some(Value::Array(rows)) => {
            out.rebuilds = rows.iter().filter_map(rebuild).collect();
        }
        _ => {}
    }
    // `PDs for VD n` or `VDn Properties` without the VD's own row: no DG, state or level
    // to report, so no virtual drive (storcli prints the three together)
    out.virtual_drives.retain(|v| v.dg != NO_DG);
    out.virtual_drives.sort_by_key(|v| (v.dg, v.vd));
    out.physical_drives.sort_by_key(|d| d.slot);
    out.rebuilds.sort_by_key(|r| r.slot);
    out
}

/// The drive group of a VD seen only through `PDs for VD n` / `VDn Properties` so far.
const NO_DG: u32 = u32::MAX;

fn response_data(rd: &Map<String, Value>, out: &mut Controller) {
    for (key, v) in rd {
        match key.as_str() {
            "Product Name" => out.model = text(v),
            "Serial Number" => out.serial = text(v),
            "Basics" => {
                out.model = out.model.take().or_else(|| v.get("Model").and_then(text));
                out.serial = out
                    .serial
                    .take()
                    .or_else(|| v.get("Serial Number").and_then(text));
            }
            "Status" => out.controller_status = v.get("Controller Status").and_then(text),
            "HwCfg" => {
                out.roc_temperature_c = [
                    "ROC temperature(Degree Celsius)",
                    "ROC temperature(Degree Celcius)",
                ]
                .iter()
                .find_map(|k| v.get(*k))
                .and_then(|t| {
                    t.as_i64().or_else(|| {
                        let s = t.as_str()?;
                        s.trim().parse().ok().or_else(|| temperature(s))
                    })
                });
            }
            "VD LIST" => rows(v).for_each(|r| upsert_vd(out, key, r)),
            "TOPOLOGY" => out.topology = rows(v).filter_map(topology_drive).collect(),
            "PD LIST" | "Drive Information" => rows(v).for_each(|r| upsert_pd(out, r)),
            "BBU_Info" => battery(v, BatteryKind::Bbu, out),
            "Cachevault_Info" => battery(v, BatteryKind::CacheVault, out),
            "Physical Device Information" => {
                if let Some(m) = v.as_object() {
                    response_data(m, out);
                }
            }
            "System Overview" => out.overview = rows(v).filter_map(summary).collect(),
            k if k.starts_with("PDs for VD ") => {
                let n = k
                    .trim_start_matches("PDs for VD ")
                    .trim()
                    .parse::<u32>()
                    .ok();
                let slots: Vec<Slot> = rows(v)
                    .filter_map(|r| {
                        upsert_pd(out, r);
                        r.get("EID:Slt")
                            .and_then(word)
                            .as_deref()
                            .and_then(Slot::parse_eid_slt)
                    })
                    .collect();
                if let Some(n) = n {
                    vd_by_number(out, n).members = slots;
                }
            }
            k if k.starts_with("VD") && k.ends_with(" Properties") => {
                let n = k
                    .trim_start_matches("VD")
                    .trim_end_matches(" Properties")
                    .parse::<u32>()
                    .ok();
                if let (Some(n), Some(p)) = (n, v.as_object()) {
                    let vd = vd_by_number(out, n);
                    vd.os_drive_name = p.get("OS Drive Name").and_then(text);
                    vd.naa_id = p.get("SCSI NAA Id").and_then(text);
                    vd.write_cache_configured = p
                        .get("Write Cache(initial setting)")
                        .and_then(word)
                        .as_deref()
                        .and_then(WritePolicy::from_setting);
                    vd.active_operations = p
                        .get("Active Operations")
                        .and_then(text)
                        .filter(|s| s != "None");
                }
            }
            k if k.starts_with("Drive /") && k.ends_with(" - Detailed Information") => {
                let id = k
                    .trim_start_matches("Drive ")
                    .trim_end_matches(" - Detailed Information");
                if let (Some((_, slot)), Some(d)) = (Slot::parse_drive_id(id), v.as_object()) {
                    detail(out, slot, id, d);
                }
            }
            k if k.starts_with("Drive /") => rows(v).for_each(|r| upsert_pd(out, r)),
            k if k.starts_with('/') && k.contains("/v") => {
                rows(v).for_each(|r| upsert_vd(out, key, r));
            }
            _ => {}
        }
    }
}

fn rows(v: &Value) -> impl Iterator<Item = &Map<String, Value>> {
    v.as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_object)
}

fn vd_by_number(out: &mut Controller, n: u32) -> &mut VirtualDrive {
    let i = match out.virtual_drives.iter().position(|v| v.vd == n) {
        Some(i) => i,
        None => {
            out.virtual_drives.push(empty_vd(NO_DG, n));
            out.virtual_drives.len() - 1
        }
    };
    &mut out.virtual_drives[i]
}

pub(super) fn empty_vd(dg: u32, vd: u32) -> VirtualDrive {
    VirtualDrive {
        dg,
        vd,
        raid_level: String::new(),
        state: VdState::Other(String::new()),
        access: None,
        cache: None,
        write_cache_configured: None,
        size: None,
        size_bytes: None,
        name: None,
        os_drive_name: None,
        naa_id: None,
        active_operations: None,
        members: Vec::new(),
    }
}

fn upsert_vd(out: &mut Controller, table: &str, r: &Map<String, Value>) {
    let (dg, vd) = match dg_vd(r.get("DG/VD")) {
        Ok(v) => v,
        Err(why) => {
            // Never dropped in silence: a VD whose number cannot be read is a VD the
            // operator would not see.
            out.unreadable.push(format!(
                "{table}: a virtual drive row not understood ({why}): {}",
                Value::Object(r.clone())
            ));
            return;
        }
    };
    let size = r.get("Size").and_then(text);
    let v = vd_by_number(out, vd);
    v.dg = dg;
    v.raid_level = r.get("TYPE").and_then(text).unwrap_or_default();
    v.state = VdState::from_abbrev(&r.get("State").and_then(word).unwrap_or_default());
    v.access = r.get("Access").and_then(text);
    v.cache = r
        .get("Cache")
        .and_then(word)
        .as_deref()
        .map(CachePolicy::parse);
    v.size_bytes = size.as_deref().and_then(parse_size);
    v.size = size;
    v.name = r.get("Name").and_then(text);
}

fn pd_by_slot(out: &mut Controller, slot: Slot) -> &mut PhysicalDrive {
    let i = match out.physical_drives.iter().position(|d| d.slot == slot) {
        Some(i) => i,
        None => {
            out.physical_drives.push(PhysicalDrive {
                slot,
                did: None,
                state: PdState::Other(String::new()),
                dg: None,
                foreign: false,
                size: None,
                size_bytes: None,
                interface: None,
                medium: None,
                model: None,
                spun: None,
                media_errors: None,
                other_errors: None,
                predictive_failures: None,
                smart_alert: None,
                serial: None,
                wwn: None,
                firmware: None,
                temperature_c: None,
            });
            out.physical_drives.len() - 1
        }
    };
    &mut out.physical_drives[i]
}

fn upsert_pd(out: &mut Controller, r: &Map<String, Value>) {
    let Some(slot) = r
        .get("EID:Slt")
        .and_then(word)
        .as_deref()
        .and_then(Slot::parse_eid_slt)
    else {
        return;
    };
    let size = r.get("Size").and_then(text);
    let d = pd_by_slot(out, slot);
    d.did = r.get("DID").and_then(as_u32);
    d.state = PdState::from_abbrev(&r.get("State").and_then(word).unwrap_or_default());
    d.dg = r.get("DG").and_then(as_u32);
    d.foreign = r.get("DG").and_then(word).as_deref() == Some("F");
    d.size_bytes = size.as_deref().and_then(parse_size);
    d.size = size;
    d.interface = r.get("Intf").and_then(text);
    d.medium = r.get("Med").and_then(text);
    d.model = r.get("Model").and_then(text);
    d.spun = r.get("Sp").and_then(text);
}

fn detail(out: &mut Controller, slot: Slot, id: &str, d: &Map<String, Value>) {
    let state = d.get(&format!("Drive {id} State"));
    let attrs = d.get(&format!("Drive {id} Device attributes"));
    let pd = pd_by_slot(out, slot);
    let count = |k: &str| state.and_then(|s| s.get(k)).and_then(as_u64);
    pd.media_errors = count("Media Error Count");
    pd.other_errors = count("Other Error Count");
    pd.predictive_failures = count("Predictive Failure Count");
    pd.smart_alert = match state
        .and_then(|s| s.get("S.M.A.R.T alert flagged by drive"))
        .and_then(word)
        .as_deref()
    {
        Some("Yes") => Some(true),
        Some("No") => Some(false),
        _ => None,
    };
    pd.temperature_c = state
        .and_then(|s| s.get("Drive Temperature"))
        .and_then(word)
        .as_deref()
        .and_then(temperature);
    let attr = |k: &str| {
        attrs
            .and_then(|a| a.get(k))
            .and_then(text)
            .filter(|s| s != "REDACTED")
    };
    pd.serial = attr("SN");
    pd.wwn = attr("WWN");
    pd.firmware = attr("Firmware Revision");
}

fn battery(v: &Value, kind: BatteryKind, out: &mut Controller) {
    let rows: Vec<&Map<String, Value>> = rows(v).collect();
    if rows.iter().any(|r| r.contains_key("Property")) {
        // `/cx/bbu show all`, `/cx/cv show all`: one battery as Property/Value rows
        let prop = |names: &[&str]| {
            rows.iter().find_map(|r| {
                let p = r.get("Property").and_then(word)?;
                names
                    .contains(&p.as_str())
                    .then(|| r.get("Value").and_then(text))
                    .flatten()
            })
        };
        let state = prop(&["Battery State", "State"]);
        if state.is_none() && prop(&["Type", "Model"]).is_none() {
            return;
        }
        out.batteries.push(Battery {
            kind,
            model: prop(&["Type", "Model"]),
            state: BatteryState::parse(state.as_deref().unwrap_or_default()),
            temperature_c: prop(&["Temperature"]).as_deref().and_then(temperature),
        });
    } else {
        for r in rows {
            out.batteries.push(Battery {
                kind,
                model: r.get("Model").and_then(text),
                state: BatteryState::parse(&r.get("State").and_then(word).unwrap_or_default()),
                temperature_c: r
                    .get("Temp")
                    .and_then(word)
                    .as_deref()
                    .and_then(temperature),
            });
        }
    }
}

fn summary(r: &Map<String, Value>) -> Option<ControllerSummary> {
    Some(ControllerSummary {
        controller: r.get("Ctl").and_then(as_u32)?,
        model: r.get("Model").and_then(text),
        health: r.get("Hlth").and_then(text),
        vds: r.get("VDs").and_then(as_u64),
        vds_not_optimal: r.get("VNOpt").and_then(as_u64),
        dgs_not_optimal: r.get("DNOpt").and_then(as_u64),
        bbu: r.get("BBU").and_then(text),
    })
}

/// A `TOPOLOGY` row of a drive (`Type` `DRIVE`, a numbered `Arr`); `None` for the rows of the
/// group and its spans.
fn topology_drive(r: &Map<String, Value>) -> Option<TopologyDrive> {
    if r.get("Type").and_then(text).as_deref() != Some("DRIVE") {
        return None;
    }
    Some(TopologyDrive {
        dg: r.get("DG").and_then(as_u32)?,
        arr: r.get("Arr").and_then(as_u32)?,
        row: r.get("Row").and_then(as_u32),
        slot: r
            .get("EID:Slot")
            .and_then(word)
            .as_deref()
            .and_then(Slot::parse_eid_slt),
        state: r.get("State").and_then(text).unwrap_or_default(),
    })
}

fn rebuild(r: &Value) -> Option<Rebuild> {
    let (_, slot) = Slot::parse_drive_id(&word(r.get("Drive-ID")?)?)?;
    let status = r.get("Status").and_then(text).unwrap_or_default();
    Some(Rebuild {
        slot,
        progress_pct: r
            .get("Progress%")
            .and_then(as_u64)
            .and_then(|p| u8::try_from(p).ok()),
        in_progress: status.eq_ignore_ascii_case("In progress"),
        halted: !status.is_empty()
            && !status.eq_ignore_ascii_case("In progress")
            && !status.eq_ignore_ascii_case("Not in progress"),
        time_left_s: r
            .get("Estimated Time Left")
            .and_then(word)
            .as_deref()
            .and_then(duration_s),
        status,
    })
}
