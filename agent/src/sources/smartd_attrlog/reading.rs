//! What of a `smartctl --json -a` document an attribute-log line is compared with, beyond what
//! [`crate::sources::smartctl::DriveHealth`] keeps: every ATA attribute's normalised value and
//! threshold (the overall verdict and `when_failed` are derived from them), and the NVMe error
//! log entry count. Read only when the attribute logs are used.

use serde::Deserialize;

/// One row of `ata_smart_attributes.table[]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AtaRow {
    /// `id`.
    pub id: u8,
    /// `value`, the normalised value.
    pub value: u8,
    /// `thresh` (0: the attribute never fails).
    pub thresh: u8,
    /// `raw.value`.
    pub raw: u64,
}

/// The parts of a smartctl reading [`super`]'s lines are compared with.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SmartctlTable {
    /// The ATA attribute table (empty for other protocols).
    pub ata: Vec<AtaRow>,
    /// `nvme_smart_health_information_log.num_err_log_entries`.
    pub nvme_err_log_entries: Option<u64>,
}

#[derive(Deserialize)]
struct Doc {
    #[serde(default)]
    ata_smart_attributes: Option<Attrs>,
    #[serde(default)]
    nvme_smart_health_information_log: Option<NvmeLog>,
}

#[derive(Deserialize)]
struct Attrs {
    #[serde(default)]
    table: Vec<Row>,
}

#[derive(Deserialize)]
struct Row {
    id: u64,
    value: u64,
    #[serde(default)]
    thresh: u64,
    raw: Raw,
}

#[derive(Deserialize)]
struct Raw {
    value: u64,
}

#[derive(Deserialize)]
struct NvmeLog {
    #[serde(default)]
    num_err_log_entries: Option<u64>,
}

/// The table of one smartctl JSON document; an error (the document's, or an attribute out of
/// range) when it cannot be had: then no log line can confirm the reading.
pub fn smartctl_table(json: &str) -> Result<SmartctlTable, String> {
    let doc: Doc = serde_json::from_str(json).map_err(|e| e.to_string())?;
    let mut ata = Vec::new();
    for r in doc
        .ata_smart_attributes
        .map(|a| a.table)
        .unwrap_or_default()
    {
        let byte = |v: u64, what: &str| {
            u8::try_from(v).map_err(|_| format!("attribute {}: {what} {v} over 255", r.id))
        };
        ata.push(AtaRow {
            id: byte(r.id, "id")?,
            value: byte(r.value, "value")?,
            thresh: byte(r.thresh, "thresh")?,
            raw: r.raw.value,
        });
    }
    Ok(SmartctlTable {
        ata,
        nvme_err_log_entries: doc
            .nvme_smart_health_information_log
            .and_then(|n| n.num_err_log_entries),
    })
}
