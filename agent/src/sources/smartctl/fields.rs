//! The pieces of smartctl's JSON a reading is built from: the ATA attribute table, the SCSI
//! error counters, the NVMe health log, the device line, and typed reads of nested keys.

use super::*;

pub(super) fn ata_health(table: &[Node<'_>]) -> AtaHealth {
    let mut h = AtaHealth::default();
    for a in table {
        let Some(id) = a.get("id").and_then(Node::as_u64) else {
            continue;
        };
        let raw = u64_at(Some(a), &["raw", "value"]);
        match id {
            5 => h.reallocated_sectors = raw,
            187 => h.reported_uncorrectable = raw,
            188 => {
                h.command_timeout_raw = raw;
                h.command_timeout_words = raw.map(raw16_words);
            }
            197 => h.pending_sectors = raw,
            198 => h.offline_uncorrectable = raw,
            199 => h.udma_crc_errors = raw,
            _ => {}
        }
        if a.get("when_failed").and_then(Node::as_str) == Some("now") {
            if let Ok(id) = u8::try_from(id) {
                h.failing_now.push(id);
            }
        }
    }
    h
}

pub(super) fn scsi_health(root: &Node<'_>) -> Option<ScsiHealth> {
    let grown = root.get("scsi_grown_defect_list").and_then(Node::as_u64);
    let log = root.get("scsi_error_counter_log");
    if grown.is_none() && log.is_none() {
        return None;
    }
    let unc = |k: &str| u64_at(log, &[k, "total_uncorrected_errors"]);
    Some(ScsiHealth {
        grown_defects: grown,
        read_uncorrected: unc("read"),
        write_uncorrected: unc("write"),
        verify_uncorrected: unc("verify"),
        non_medium_errors: u64_at(log, &["non_medium_error", "count"]),
    })
}

pub(super) fn nvme_health(log: &Node<'_>) -> NvmeHealth {
    let n = |k: &str| log.get(k).and_then(Node::as_u64);
    NvmeHealth {
        critical_warning: n("critical_warning").and_then(|v| u8::try_from(v).ok()),
        available_spare_pct: n("available_spare").and_then(|v| u8::try_from(v).ok()),
        available_spare_threshold_pct: n("available_spare_threshold")
            .and_then(|v| u8::try_from(v).ok()),
        percentage_used: n("percentage_used").and_then(|v| u16::try_from(v).ok()),
        media_errors: n("media_errors"),
        unsafe_shutdowns: n("unsafe_shutdowns"),
    }
}

/// What smartd's `device_info` string names.
#[derive(Debug, Default)]
pub(super) struct DeviceInfo {
    pub(super) model: Option<String>,
    pub(super) serial: Option<String>,
    pub(super) wwn: Option<String>,
    pub(super) firmware: Option<String>,
}

/// smartd's identity line (`smartd.cpp`): ATA `MODEL, S/N:SERIAL, WWN:5-000c50-0a1b2c3d4,
/// FW:FW, 3.00 TB`; NVMe `MODEL, S/N:SERIAL, FW:FW, …`; SCSI `[VENDOR(8) PRODUCT(16)
/// REV(4)], lu id: 0x5000c500…, S/N: SERIAL, 600 GB`.
pub(super) fn device_info(s: &str) -> DeviceInfo {
    let mut out = DeviceInfo::default();
    let rest = if let Some(inner) = s.strip_prefix('[') {
        let Some((id, rest)) = inner.split_once(']') else {
            return out;
        };
        let vendor = id.get(..8).unwrap_or(id).trim();
        let product = id.get(9..25).unwrap_or_default().trim();
        out.model = Some(format!("{vendor} {product}").trim().to_owned()).filter(|m| !m.is_empty());
        out.firmware = id
            .get(26..)
            .map(|r| r.trim().to_owned())
            .filter(|r| !r.is_empty());
        rest
    } else {
        let (model, rest) = s.split_once(", ").unwrap_or((s, ""));
        out.model = Some(model.trim().to_owned()).filter(|m| !m.is_empty());
        rest
    };
    for part in rest.split(", ") {
        let part = part.trim();
        if let Some(v) = part.strip_prefix("S/N:") {
            out.serial = Some(v.trim().to_owned()).filter(|v| !v.is_empty());
        } else if let Some(v) = part.strip_prefix("FW:") {
            out.firmware = Some(v.trim().to_owned()).filter(|v| !v.is_empty());
        } else if let Some(v) = part.strip_prefix("WWN:") {
            let hex: String = v.split('-').collect();
            out.wwn = (hex.len() == 16 && hex.chars().all(|c| c.is_ascii_hexdigit()))
                .then(|| hex.to_ascii_lowercase());
        } else if let Some(v) = part.strip_prefix("lu id: ") {
            let hex = v.trim().trim_start_matches("0x");
            out.wwn = (!hex.is_empty() && hex.chars().all(|c| c.is_ascii_hexdigit()))
                .then(|| hex.to_ascii_lowercase());
        }
    }
    out
}

pub(super) fn wwn(v: Option<&Node<'_>>) -> Option<String> {
    let naa = u64_at(v, &["naa"])?;
    let oui = u64_at(v, &["oui"])?;
    let id = u64_at(v, &["id"])?;
    Some(format!("{naa:x}{oui:06x}{id:09x}"))
}

pub(super) fn version(v: &Node<'_>) -> Option<String> {
    let parts: Vec<String> = v
        .as_array()?
        .iter()
        .map(|p| p.as_u64().map(|n| n.to_string()))
        .collect::<Option<_>>()?;
    (!parts.is_empty()).then(|| parts.join("."))
}

pub(super) fn str_field(root: &Node<'_>, key: &str) -> Option<String> {
    let s = root.get(key)?.as_str()?.trim();
    (!s.is_empty()).then(|| s.to_owned())
}

pub(super) fn str_at(v: &Node<'_>, path: &[&str]) -> Option<String> {
    let mut cur = v;
    for k in path {
        cur = cur.get(k)?;
    }
    cur.as_str().map(str::to_owned)
}

pub(super) fn u64_at(v: Option<&Node<'_>>, path: &[&str]) -> Option<u64> {
    let mut cur = v?;
    for k in path {
        cur = cur.get(k)?;
    }
    cur.as_u64()
}

/// A serde_json error as a [`ParseError`] on the line it points at; a document that ends
/// early is called truncated.
pub(crate) fn json_error(text: &str, e: &serde_json::Error) -> ParseError {
    let line = e.line().max(1);
    let line_text = text.lines().nth(line - 1).unwrap_or_default();
    let what = if e.is_eof() {
        "truncated JSON (the document ends early)"
    } else {
        "malformed JSON"
    };
    ParseError::new(line, line_text, format_args!("{what}: {e}"))
}
