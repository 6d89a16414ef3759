//! smartd's attribute logs (`smartd -A PREFIX`, `--attributelog`; smartmontools 5.40 and later):
//! the last complete line of one drive's log.
//!
//! At each check cycle in which smartd read a drive, it appends one line to
//! `PREFIX MODEL-SERIAL.ata.csv`, `PREFIX VENDOR-MODEL-SERIAL.scsi.csv` or
//! `PREFIX MODEL-SERIAL[-nNSID].nvme.csv` (MODEL and SERIAL with every character but `0-9A-Za-z`
//! replaced by `_`; `smartd.cpp`, `write_dev_attrlog` and the `cfg.attrlog_file` names of the
//! ATA, SCSI and NVMe registration; smartd(8), `-A`). A line is a local-time date and tuples, each
//! led by a tab and ended by `;`:
//!
//! * `2017-01-31 05:47:34;` — `yyyy-mm-dd HH:MM:SS;`, local time with no zone.
//! * ATA (`write_ata_attrlog`): `\tID;VALUE;RAW;` per attribute of the drive's table: the
//!   normalised value (0–255) and the raw value as the 48-bit little-endian number of the six raw
//!   bytes (`dev_state::update_persistent_state`, not decoded by the drive database).
//! * SCSI (`write_scsi_attrlog`): `\tNAME;VALUE;` — for each of the read, write and verify error
//!   counter pages the drive has: `{page}-corr-by-ecc-fast`, `-corr-by-ecc-delayed`,
//!   `-corr-by-retry`, `-total-err-corrected`, `-corr-algorithm-invocations`, `-gb-processed`
//!   (`%.3f`, gigabytes) and `-total-unc-errors`; `non-medium-errors` when the drive has that
//!   page; `temperature` (°C) when known and not 0.
//! * NVMe (`write_nvme_attrlog`, new in 7.5): `\tNAME;VALUE;` for `critical-warning`,
//!   `temperature` (°C, may be negative), `available-spare`, `available-spare-threshold`,
//!   `percentage-used`, `data-units-read`, `data-units-written`, `host-reads`, `host-writes`,
//!   `controller-busy-time`, `power-cycles`, `power-on-hours`, `unsafe-shutdowns`,
//!   `media-errors`, `num-err-log-entries`, all on every line.
//!
//! The reader reads only a file's tail ([`TAIL_BYTES`]) and hands it to [`last_line`]: the last
//! line ending in `\n` is the one taken, so a line smartd is still writing (no `\n` yet) is
//! ignored and the one before it used. Any whitespace separates tuples (the format writes a tab;
//! pages quoting these logs often show spaces). Names this parser does not know are skipped (a
//! later smartd may add some); a known name whose value is not a number, an ATA tuple that is not
//! three numbers, or a line without one tuple of the file's protocol is a [`ParseError`], whose
//! `line` counts from the end of the file (1: its last complete line).

use super::{parse_u64, ParseError};

mod reading;
pub use reading::{smartctl_table, AtaRow, SmartctlTable};

/// Bytes of a log's end that are read: smartd's longest lines (a SCSI drive with all three
/// counter pages) are under 1 kB, and a log grows by one line per check cycle for ever.
pub const TAIL_BYTES: usize = 8 * 1024;

/// The protocol a log is of, from its file name's `.ata.csv`, `.scsi.csv`, `.nvme.csv`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogProtocol {
    /// `.ata.csv`.
    Ata,
    /// `.scsi.csv`.
    Scsi,
    /// `.nvme.csv`.
    Nvme,
}

impl LogProtocol {
    /// The file name's suffix: `ata.csv`.
    pub fn suffix(self) -> &'static str {
        match self {
            Self::Ata => "ata.csv",
            Self::Scsi => "scsi.csv",
            Self::Nvme => "nvme.csv",
        }
    }
}

/// MODEL or SERIAL as smartd puts it in a file name: every byte but `0-9A-Za-z` replaced by
/// `_` (`not_allowed_in_filename` in `smartd.cpp`; a multi-byte character is one `_` a byte).
pub fn file_part(s: &str) -> String {
    s.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() {
                b as char
            } else {
                '_'
            }
        })
        .collect()
}

/// The names (after the prefix) smartd gives the log of a drive of `proto` whose smartctl reading
/// names it `model` and `serial`; `nsid`: the namespace of an NVMe disk (`nvme0n1`: 1).
///
/// * ATA: `MODEL-SERIAL.ata.csv`.
/// * SCSI: `VENDOR-PRODUCT-SERIAL.scsi.csv`; smartctl's model name is `VENDOR PRODUCT` (both
///   trimmed, one space between: `scsiprint.cpp`), split at its first space.
/// * NVMe: `MODEL-SERIAL.nvme.csv` when smartd opened the controller (`/dev/nvme0`: all
///   namespaces), `MODEL-SERIAL-nNSID.nvme.csv` when it opened a namespace: both are named.
pub fn file_names(proto: LogProtocol, model: &str, serial: &str, nsid: Option<u32>) -> Vec<String> {
    let (m, s) = (file_part(model), file_part(serial));
    match proto {
        LogProtocol::Ata => vec![format!("{m}-{s}.ata.csv")],
        LogProtocol::Scsi => {
            let (vendor, product) = model.split_once(' ').unwrap_or(("", model));
            vec![format!(
                "{}-{}-{s}.scsi.csv",
                file_part(vendor),
                file_part(product)
            )]
        }
        LogProtocol::Nvme => {
            let mut v = vec![format!("{m}-{s}.nvme.csv")];
            if let Some(n) = nsid {
                v.push(format!("{m}-{s}-n{n}.nvme.csv"));
            }
            v
        }
    }
}

/// One ATA attribute of a line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AtaAttr {
    /// Attribute id (1–255).
    pub id: u8,
    /// Normalised value.
    pub value: u8,
    /// The six raw bytes as one little-endian number.
    pub raw: u64,
}

/// One SCSI error counter page's counters (`read`, `write` or `verify`).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ScsiPage {
    /// `-corr-by-ecc-fast`.
    pub corrected_ecc_fast: Option<u64>,
    /// `-corr-by-ecc-delayed`.
    pub corrected_ecc_delayed: Option<u64>,
    /// `-corr-by-retry`.
    pub corrected_by_retry: Option<u64>,
    /// `-total-err-corrected`.
    pub total_corrected: Option<u64>,
    /// `-corr-algorithm-invocations`.
    pub algorithm_invocations: Option<u64>,
    /// `-gb-processed`, gigabytes (smartd prints bytes / 10⁹ with three decimals).
    pub gb_processed: Option<f64>,
    /// `-total-unc-errors`.
    pub total_uncorrected: Option<u64>,
}

/// A SCSI line.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ScsiLine {
    /// The read error counter page, when the drive has it.
    pub read: Option<ScsiPage>,
    /// The write page.
    pub write: Option<ScsiPage>,
    /// The verify page.
    pub verify: Option<ScsiPage>,
    /// `non-medium-errors`.
    pub non_medium_errors: Option<u64>,
    /// `temperature`, °C (absent when smartd had none).
    pub temperature_c: Option<i64>,
}

/// An NVMe line (SMART / Health Information log, as smartd printed it).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NvmeLine {
    /// `critical-warning`.
    pub critical_warning: Option<u64>,
    /// `temperature`, °C.
    pub temperature_c: Option<i64>,
    /// `available-spare`, %.
    pub available_spare: Option<u64>,
    /// `available-spare-threshold`, %.
    pub available_spare_threshold: Option<u64>,
    /// `percentage-used`, %.
    pub percentage_used: Option<u64>,
    /// `power-on-hours`.
    pub power_on_hours: Option<u64>,
    /// `power-cycles`.
    pub power_cycles: Option<u64>,
    /// `unsafe-shutdowns`.
    pub unsafe_shutdowns: Option<u64>,
    /// `media-errors`.
    pub media_errors: Option<u64>,
    /// `num-err-log-entries`.
    pub err_log_entries: Option<u64>,
}

/// What a line holds, by protocol.
#[derive(Debug, Clone, PartialEq)]
pub enum Values {
    /// The attribute table, in the drive's order.
    Ata(Vec<AtaAttr>),
    /// SCSI counters (boxed: three pages of counters are the largest line).
    Scsi(Box<ScsiLine>),
    /// NVMe health.
    Nvme(NvmeLine),
}

/// One line of a log.
#[derive(Debug, Clone, PartialEq)]
pub struct LogLine {
    /// Its date as written: `2017-01-31 05:47:34` (local time, no zone).
    pub time: String,
    /// Its values.
    pub values: Values,
}

/// The last complete line of `tail`, the end of a log of `proto`. `from_start`: `tail` is the
/// whole file (otherwise its first line may be cut and is never taken). A last line without its
/// `\n` (smartd still writing it) is left out and the one before it taken.
pub fn last_line(tail: &[u8], from_start: bool, proto: LogProtocol) -> Result<LogLine, ParseError> {
    let Some(end) = tail.iter().rposition(|&b| b == b'\n') else {
        return Err(ParseError::new(
            1,
            &String::from_utf8_lossy(tail.get(..200.min(tail.len())).unwrap_or_default()),
            if tail.is_empty() {
                "empty log: no line"
            } else {
                "no complete line (no newline)"
            },
        ));
    };
    let body = tail.get(..end).unwrap_or_default();
    let start = match body.iter().rposition(|&b| b == b'\n') {
        Some(i) => i + 1,
        None if from_start => 0,
        None => {
            return Err(ParseError::new(
                1,
                &String::from_utf8_lossy(body.get(..200.min(body.len())).unwrap_or_default()),
                format_args!("last line longer than {TAIL_BYTES} bytes: not smartd's"),
            ))
        }
    };
    let raw = body.get(start..).unwrap_or_default();
    let Ok(text) = std::str::from_utf8(raw) else {
        return Err(ParseError::new(
            1,
            &String::from_utf8_lossy(raw),
            "not text (invalid UTF-8)",
        ));
    };
    parse_line(text, proto).map_err(|reason| ParseError::new(1, text, reason))
}

/// One line of a log of `proto`, without its `\n`.
pub fn parse_line(text: &str, proto: LogProtocol) -> Result<LogLine, String> {
    let text = text.strip_suffix('\r').unwrap_or(text);
    let (time, rest) = text
        .split_once(';')
        .ok_or("no `date;` at the start of the line")?;
    if !is_date(time) {
        return Err(format!("{time:?} is not a `yyyy-mm-dd HH:MM:SS` date"));
    }
    let tuples = rest.split_ascii_whitespace();
    let values = match proto {
        LogProtocol::Ata => Values::Ata(ata(tuples)?),
        LogProtocol::Scsi => Values::Scsi(Box::new(scsi(tuples)?)),
        LogProtocol::Nvme => Values::Nvme(nvme(tuples)?),
    };
    Ok(LogLine {
        time: time.to_owned(),
        values,
    })
}

/// `2017-01-31 05:47:34`: digits where digits go, `-`, ` ` and `:` where they go.
fn is_date(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() == 19
        && b.iter().enumerate().all(|(i, &c)| match i {
            4 | 7 => c == b'-',
            10 => c == b' ',
            13 | 16 => c == b':',
            _ => c.is_ascii_digit(),
        })
}

/// A tuple's values: `a;b;c;` → `[a, b, c]` (the closing `;` required).
fn parts(tuple: &str) -> Result<Vec<&str>, String> {
    let inner = tuple
        .strip_suffix(';')
        .ok_or_else(|| format!("{tuple:?} does not end with `;`"))?;
    Ok(inner.split(';').collect())
}

fn ata<'a>(tuples: impl Iterator<Item = &'a str>) -> Result<Vec<AtaAttr>, String> {
    let mut out = Vec::new();
    for t in tuples {
        let p = parts(t)?;
        let [id, value, raw] = p.as_slice() else {
            return Err(format!("{t:?} is not an ATA attribute `ID;VALUE;RAW;`"));
        };
        let num = |s: &str, what: &str| {
            parse_u64(s).ok_or_else(|| format!("{t:?}: {what} {s:?} is not a number"))
        };
        let id = u8::try_from(num(id, "id")?)
            .ok()
            .filter(|&i| i != 0)
            .ok_or_else(|| format!("{t:?}: id out of 1-255"))?;
        let value =
            u8::try_from(num(value, "value")?).map_err(|_| format!("{t:?}: value over 255"))?;
        let raw = num(raw, "raw value")?;
        if raw >> 48 != 0 {
            return Err(format!("{t:?}: raw value wider than 48 bits"));
        }
        out.push(AtaAttr { id, value, raw });
    }
    if out.is_empty() {
        return Err("no ATA attribute on the line".into());
    }
    Ok(out)
}

/// A `name;value;` tuple.
fn named(t: &str) -> Result<(&str, &str), String> {
    let p = parts(t)?;
    match p.as_slice() {
        [name, value] if name.bytes().any(|b| b.is_ascii_alphabetic()) => Ok((name, value)),
        _ => Err(format!("{t:?} is not a `NAME;VALUE;` tuple")),
    }
}

fn count(t: &str, v: &str) -> Result<u64, String> {
    parse_u64(v).ok_or_else(|| format!("{t:?}: {v:?} is not a count"))
}

fn signed(t: &str, v: &str) -> Result<i64, String> {
    let (neg, digits) = match v.strip_prefix('-') {
        Some(d) => (true, d),
        None => (false, v),
    };
    let n = parse_u64(digits)
        .and_then(|n| i64::try_from(n).ok())
        .ok_or_else(|| format!("{t:?}: {v:?} is not a number"))?;
    Ok(if neg { -n } else { n })
}

/// `12.345`: digits, one `.`, digits (smartd's `%.3f` of a non-negative number).
fn decimal(t: &str, v: &str) -> Result<f64, String> {
    let ok = !v.is_empty()
        && v.bytes().filter(|&b| b == b'.').count() <= 1
        && v.bytes().all(|b| b.is_ascii_digit() || b == b'.')
        && v.bytes().any(|b| b.is_ascii_digit());
    ok.then(|| v.parse::<f64>().ok())
        .flatten()
        .filter(|f| f.is_finite())
        .ok_or_else(|| format!("{t:?}: {v:?} is not a decimal number"))
}

fn scsi<'a>(tuples: impl Iterator<Item = &'a str>) -> Result<ScsiLine, String> {
    let mut out = ScsiLine::default();
    let mut known = 0;
    for t in tuples {
        let (name, v) = named(t)?;
        if let Some((page, counter)) = name
            .split_once('-')
            .filter(|(p, _)| matches!(*p, "read" | "write" | "verify"))
        {
            let slot = match page {
                "read" => &mut out.read,
                "write" => &mut out.write,
                _ => &mut out.verify,
            };
            let pg = slot.get_or_insert_with(ScsiPage::default);
            match counter {
                "corr-by-ecc-fast" => pg.corrected_ecc_fast = Some(count(t, v)?),
                "corr-by-ecc-delayed" => pg.corrected_ecc_delayed = Some(count(t, v)?),
                "corr-by-retry" => pg.corrected_by_retry = Some(count(t, v)?),
                "total-err-corrected" => pg.total_corrected = Some(count(t, v)?),
                "corr-algorithm-invocations" => pg.algorithm_invocations = Some(count(t, v)?),
                "gb-processed" => pg.gb_processed = Some(decimal(t, v)?),
                "total-unc-errors" => pg.total_uncorrected = Some(count(t, v)?),
                _ => continue,
            }
            known += 1;
            continue;
        }
        match name {
            "non-medium-errors" => out.non_medium_errors = Some(count(t, v)?),
            "temperature" => out.temperature_c = Some(signed(t, v)?),
            _ => continue,
        }
        known += 1;
    }
    if known == 0 {
        return Err("no SCSI counter on the line".into());
    }
    Ok(out)
}

fn nvme<'a>(tuples: impl Iterator<Item = &'a str>) -> Result<NvmeLine, String> {
    let mut out = NvmeLine::default();
    for t in tuples {
        let (name, v) = named(t)?;
        let slot = match name {
            "temperature" => {
                out.temperature_c = Some(signed(t, v)?);
                continue;
            }
            "critical-warning" => &mut out.critical_warning,
            "available-spare" => &mut out.available_spare,
            "available-spare-threshold" => &mut out.available_spare_threshold,
            "percentage-used" => &mut out.percentage_used,
            "power-on-hours" => &mut out.power_on_hours,
            "power-cycles" => &mut out.power_cycles,
            "unsafe-shutdowns" => &mut out.unsafe_shutdowns,
            "media-errors" => &mut out.media_errors,
            "num-err-log-entries" => &mut out.err_log_entries,
            _ => {
                // the other counters (data units, host commands, busy time) are checked as
                // numbers but not kept
                if !matches!(
                    name,
                    "data-units-read"
                        | "data-units-written"
                        | "host-reads"
                        | "host-writes"
                        | "controller-busy-time"
                ) {
                    continue;
                }
                count(t, v)?;
                continue;
            }
        };
        *slot = Some(count(t, v)?);
    }
    // smartd prints every field in one statement: a line without these is not an NVMe line
    if out.critical_warning.is_none() || out.media_errors.is_none() {
        return Err("no NVMe `critical-warning` and `media-errors` on the line".into());
    }
    Ok(out)
}

#[cfg(test)]
mod tests;
