//! The parser as it was before [`super::tree`]: the whole document as a `serde_json::Value`,
//! read by the same rules. Kept as the oracle of the tests that the tree's answers are the
//! `Value`'s, on real documents and on broken ones.

use serde_json::{Map, Value};

use super::fields::device_info;
use super::*;

/// `parse` as it was.
pub(super) fn parse(json: &str) -> Result<DriveHealth, ParseError> {
    from_object(object(json)?, json)
}

/// The JSON object of a document.
fn object(json: &str) -> Result<Map<String, Value>, ParseError> {
    if json.trim().is_empty() {
        return Err(ParseError::new(1, "", "empty output: no smartctl JSON"));
    }
    let doc: Value = serde_json::from_str(json).map_err(|e| json_error(json, &e))?;
    match doc {
        Value::Object(root) => Ok(root),
        _ => Err(ParseError::new(
            1,
            json.lines().next().unwrap_or_default(),
            "smartctl JSON must be an object",
        )),
    }
}

/// The drive a document's object describes (`json`: the document, for errors).
fn from_object(root: Map<String, Value>, json: &str) -> Result<DriveHealth, ParseError> {
    let root = &root;
    if !root.contains_key("smartctl") && !root.contains_key("device") {
        return Err(ParseError::new(
            1,
            json.lines().next().unwrap_or_default(),
            "not smartctl JSON: neither \"smartctl\" nor \"device\" present",
        ));
    }

    let sc = root.get("smartctl").and_then(Value::as_object);
    let smartctl_version = sc.and_then(|s| s.get("version")).and_then(version);
    let exit_status = sc
        .and_then(|s| s.get("exit_status"))
        .and_then(Value::as_u64)
        .and_then(|v| u8::try_from(v).ok());
    let messages: Vec<Message> = sc
        .and_then(|s| s.get("messages"))
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|m| {
                    Some(Message {
                        severity: str_at(m, &["severity"]).unwrap_or_default(),
                        text: str_at(m, &["string"])?,
                    })
                })
                .collect()
        })
        .unwrap_or_default();

    let dev = root.get("device");
    let protocol = match dev.and_then(|d| d.get("protocol")).and_then(Value::as_str) {
        // smartd's JSON state says "ATA+SCSI" for ATA drives behind a SAT layer
        Some("ATA" | "ATA+SCSI") => Protocol::Ata,
        Some("SCSI") => Protocol::Scsi,
        Some("NVMe") => Protocol::Nvme,
        Some(other) => Protocol::Other(other.to_owned()),
        None => Protocol::Unknown,
    };

    // smartd's JSON state names the drive only in `device_info`
    let info = str_field(root, "device_info")
        .map(|i| device_info(&i))
        .unwrap_or_default();
    let model = str_field(root, "model_name")
        .or_else(|| str_field(root, "scsi_model_name"))
        .or_else(|| {
            let v = str_field(root, "vendor")?;
            let p = str_field(root, "product")?;
            Some(format!("{v} {p}"))
        })
        .or(info.model);

    let health = match root
        .get("smart_status")
        .and_then(|s| s.get("passed"))
        .and_then(Value::as_bool)
    {
        Some(true) => OverallHealth::Passed,
        Some(false) => OverallHealth::Failed,
        None => OverallHealth::Unknown,
    };

    let low_power_mode = low_power_mode(root, &messages, exit_status);

    let ata = root
        .get("ata_smart_attributes")
        .and_then(|a| a.get("table"))
        .and_then(Value::as_array)
        .map(|t| ata_health(t));

    let scsi = scsi_health(root);
    let nvme = root
        .get("nvme_smart_health_information_log")
        .and_then(Value::as_object)
        .map(nvme_health);

    Ok(DriveHealth {
        smartctl_version,
        exit_status,
        messages,
        device: dev.and_then(|d| str_at(d, &["name"])),
        device_type: dev.and_then(|d| str_at(d, &["type"])),
        protocol,
        model,
        serial: str_field(root, "serial_number").or(info.serial),
        wwn: wwn(root.get("wwn")).or(info.wwn),
        firmware: str_field(root, "firmware_version")
            .or_else(|| str_field(root, "scsi_revision"))
            .or_else(|| str_field(root, "revision"))
            .or(info.firmware),
        capacity_bytes: u64_at(root.get("user_capacity"), &["bytes"])
            .or_else(|| root.get("nvme_total_capacity").and_then(Value::as_u64)),
        rotation_rate_rpm: root
            .get("rotation_rate")
            .and_then(Value::as_u64)
            .and_then(|v| u32::try_from(v).ok()),
        health,
        temperature_c: root
            .get("temperature")
            .and_then(|t| t.get("current"))
            .and_then(Value::as_i64)
            .or_else(|| {
                root.get("nvme_smart_health_information_log")
                    .and_then(|n| n.get("temperature"))
                    .and_then(Value::as_i64)
            }),
        power_on_hours: u64_at(root.get("power_on_time"), &["hours"]).or_else(|| {
            u64_at(
                root.get("nvme_smart_health_information_log"),
                &["power_on_hours"],
            )
        }),
        low_power_mode,
        ata,
        scsi,
        nvme,
    })
}

fn low_power_mode(
    root: &Map<String, Value>,
    messages: &[Message],
    exit: Option<u8>,
) -> Option<String> {
    if let Some(m) = messages.iter().find_map(|m| low_power_message(&m.text)) {
        return Some(m);
    }
    // power_mode alone is printed for every drive smartctl checked with -n; only when it
    // also stopped (no identity read) did the mode keep the drive from being read.
    let name = root
        .get("power_mode")
        .and_then(|p| p.get("name"))
        .and_then(Value::as_str)?;
    let stopped = !root.contains_key("model_name")
        && !root.contains_key("serial_number")
        && exit.is_some_and(|e| e & 0x02 != 0);
    stopped.then(|| name.to_owned())
}

fn ata_health(table: &[Value]) -> AtaHealth {
    let mut h = AtaHealth::default();
    for a in table {
        let Some(id) = a.get("id").and_then(Value::as_u64) else {
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
        if a.get("when_failed").and_then(Value::as_str) == Some("now") {
            if let Ok(id) = u8::try_from(id) {
                h.failing_now.push(id);
            }
        }
    }
    h
}

fn scsi_health(root: &Map<String, Value>) -> Option<ScsiHealth> {
    let grown = root.get("scsi_grown_defect_list").and_then(Value::as_u64);
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

fn nvme_health(log: &Map<String, Value>) -> NvmeHealth {
    let n = |k: &str| log.get(k).and_then(Value::as_u64);
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

fn wwn(v: Option<&Value>) -> Option<String> {
    let naa = u64_at(v, &["naa"])?;
    let oui = u64_at(v, &["oui"])?;
    let id = u64_at(v, &["id"])?;
    Some(format!("{naa:x}{oui:06x}{id:09x}"))
}

fn version(v: &Value) -> Option<String> {
    let parts: Vec<String> = v
        .as_array()?
        .iter()
        .map(|p| p.as_u64().map(|n| n.to_string()))
        .collect::<Option<_>>()?;
    (!parts.is_empty()).then(|| parts.join("."))
}

fn str_field(root: &Map<String, Value>, key: &str) -> Option<String> {
    let s = root.get(key)?.as_str()?.trim();
    (!s.is_empty()).then(|| s.to_owned())
}

fn str_at(v: &Value, path: &[&str]) -> Option<String> {
    let mut cur = v;
    for k in path {
        cur = cur.get(k)?;
    }
    cur.as_str().map(str::to_owned)
}

fn u64_at(v: Option<&Value>, path: &[&str]) -> Option<u64> {
    let mut cur = v?;
    for k in path {
        cur = cur.get(k)?;
    }
    cur.as_u64()
}

/// `output::parse` as it was.
pub(super) fn output_parse(json: &str) -> Result<DriveHealth, ParseError> {
    let root = object(json)?;
    let first = json.lines().next().unwrap_or_default();
    let missing = |what: &str| {
        ParseError::new(
            1,
            first,
            format_args!("not smartctl's output: no {what} (smartctl ≥ 7.0 always prints it)"),
        )
    };
    let format = root
        .get("json_format_version")
        .ok_or_else(|| missing("json_format_version"))?;
    let major = format
        .as_array()
        .and_then(|v| v.first())
        .and_then(Value::as_u64);
    match major {
        Some(0 | 1) => {}
        Some(m) => {
            return Err(ParseError::new(
                1,
                first,
                format_args!("json_format_version {m}: only formats 0 and 1 are known"),
            ))
        }
        None => {
            return Err(ParseError::new(
                1,
                first,
                format_args!("json_format_version {format}: not [major, minor]"),
            ))
        }
    }
    if root
        .get("smartctl")
        .and_then(|s| s.get("exit_status"))
        .and_then(Value::as_u64)
        .is_none()
    {
        return Err(missing("smartctl.exit_status"));
    }
    let h = from_object(root, json)?;
    if h.outcome() == Outcome::Read {
        let absent = [
            ("device.name", h.device.is_none()),
            ("device.type", h.device_type.is_none()),
            ("device.protocol", h.protocol == Protocol::Unknown),
        ];
        if let Some((what, _)) = absent.iter().find(|(_, a)| *a) {
            return Err(ParseError::new(
                1,
                first,
                format_args!(
                    "not a reading: no {what}, though smartctl read the device (exit status {})",
                    h.exit_status.unwrap_or_default()
                ),
            ));
        }
    }
    Ok(h)
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use proptest::prelude::*;

    use super::super::tree::DOC;

    /// `parse` and `output::parse` answer `text` as the `Value` parser did, errors included.
    fn same(text: &str) {
        assert_eq!(
            format!("{:?}", super::super::parse(text)),
            format!("{:?}", super::parse(text)),
            "parse: {text}"
        );
        assert_eq!(
            format!("{:?}", super::super::output::parse(text)),
            format!("{:?}", super::output_parse(text)),
            "output::parse: {text}"
        );
    }

    fn fixture(name: &str) -> String {
        std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("fixtures/smartctl")
                .join(name),
        )
        .expect("fixture is readable")
    }

    /// One real document of each kind: ATA, SAS, NVMe, smartd's state, a drive asleep.
    const KINDS: [&str; 5] = [
        "sce-ata-seagate-st3000nm0033-188-packed-4-4-4.json",
        "libblockdev-scsi-seagate-st600mp0036.json",
        "sce-nvme-samsung-pm9a1.json",
        "synthetic-smartd-jsonstate-ata-seagate-pending-16.json",
        "synthetic-ata-n-standby-power-mode-standby-exit2.json",
    ];

    #[test]
    fn every_document_of_the_corpus_reads_as_the_whole_value_read_it() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/smartctl");
        let mut n = 0;
        for entry in std::fs::read_dir(dir).expect("fixture dir") {
            let path = entry.expect("entry").path();
            if path.extension().is_some_and(|e| e == "json") {
                same(&std::fs::read_to_string(&path).expect("readable"));
                n += 1;
            }
        }
        assert!(n >= 60, "{n} documents");
    }

    /// Cut anywhere (smartctl killed mid-write, output capped): the same error at the same line.
    #[test]
    fn every_prefix_of_a_document_fails_as_it_did() {
        for name in &KINDS[..3] {
            let text = fixture(name);
            for cut in (0..text.len()).filter(|&c| text.is_char_boundary(c)) {
                same(&text[..cut]);
            }
        }
    }

    /// Every member the parser reads (an array's by its first element), from the fields listed
    /// at the top of [`super::super`], and a few it does not.
    const READ: &[&str] = &[
        "json_format_version",
        "json_format_version/0",
        "smartctl",
        "smartctl/version",
        "smartctl/version/0",
        "smartctl/exit_status",
        "smartctl/messages",
        "smartctl/messages/0",
        "smartctl/messages/0/severity",
        "smartctl/messages/0/string",
        "device",
        "device/name",
        "device/type",
        "device/protocol",
        "device_info",
        "model_name",
        "scsi_model_name",
        "vendor",
        "product",
        "serial_number",
        "firmware_version",
        "scsi_revision",
        "revision",
        "wwn",
        "wwn/naa",
        "wwn/oui",
        "wwn/id",
        "user_capacity",
        "user_capacity/bytes",
        "nvme_total_capacity",
        "rotation_rate",
        "smart_status",
        "smart_status/passed",
        "temperature",
        "temperature/current",
        "power_on_time",
        "power_on_time/hours",
        "power_mode",
        "power_mode/name",
        "ata_smart_attributes",
        "ata_smart_attributes/table",
        "ata_smart_attributes/table/0",
        "ata_smart_attributes/table/0/id",
        "ata_smart_attributes/table/0/raw",
        "ata_smart_attributes/table/0/raw/value",
        "ata_smart_attributes/table/0/when_failed",
        "scsi_grown_defect_list",
        "scsi_error_counter_log",
        "scsi_error_counter_log/read",
        "scsi_error_counter_log/read/total_uncorrected_errors",
        "scsi_error_counter_log/write/total_uncorrected_errors",
        "scsi_error_counter_log/verify/total_uncorrected_errors",
        "scsi_error_counter_log/non_medium_error",
        "scsi_error_counter_log/non_medium_error/count",
        "nvme_smart_health_information_log",
        "nvme_smart_health_information_log/critical_warning",
        "nvme_smart_health_information_log/available_spare",
        "nvme_smart_health_information_log/available_spare_threshold",
        "nvme_smart_health_information_log/percentage_used",
        "nvme_smart_health_information_log/media_errors",
        "nvme_smart_health_information_log/unsafe_shutdowns",
        "nvme_smart_health_information_log/temperature",
        "nvme_smart_health_information_log/power_on_hours",
        // not read
        "local_time",
        "smartctl/argv",
        "power_mode/ata_value",
        "ata_smart_attributes/table/0/name",
        "scsi_error_counter_log/read/gigabytes_processed",
    ];

    /// The least a reading needs, a drive asleep by `power_mode` alone, its model from `vendor`
    /// and `product`: where a member absent from the others decides the answer.
    const BARE: &str = r#"{"json_format_version":[1,0],"smartctl":{"version":[7,3],"exit_status":2,"messages":[{"severity":"information","string":"x"}]},"device":{"name":"/dev/sda","type":"sat","protocol":"ATA"},"vendor":"V","product":"P","power_mode":{"ata_value":0,"name":"STANDBY"}}"#;

    /// Values of another type, out of range, repeated keys, broken escapes and numbers, and
    /// nesting past serde_json's limit, at every member the parser reads.
    #[test]
    fn odd_values_at_every_read_member_read_as_they_did() {
        let deep = format!("{}{}", "[".repeat(200), "]".repeat(200));
        let odd: Vec<&str> = vec![
            "null",
            "true",
            "false",
            "0",
            "-0",
            "-3",
            "2",
            "255",
            "256",
            "70000",
            "1.5",
            "1e3",
            "18446744073709551615",
            "18446744073709551616",
            "-9223372036854775809",
            "1e400",
            "01",
            "\"\"",
            "\" x \"",
            "\"now\"",
            "\"ATA\"",
            "\"Device is in STANDBY mode, exit(2)\"",
            "\"a\\\"b\\u00e9\"",
            "\"\\ud800\"",
            "\"\\x\"",
            "[]",
            "[1,0]",
            "[2,0]",
            "[\"1\"]",
            "[{}]",
            "{}",
            "{\"a\":1}",
            "{\"table\":[{\"id\":5,\"raw\":{\"value\":7}}]}",
            &deep,
        ];
        const SLOT: &str = "\u{1}slot";
        let slot = serde_json::to_string(SLOT).expect("slot");
        let mut bases: Vec<String> = KINDS.iter().map(|n| fixture(n)).collect();
        bases.push(BARE.to_owned());
        let mut checked = 0;
        for base in &bases {
            let doc: serde_json::Value = serde_json::from_str(base).expect("json");
            for path in READ {
                let mut d = doc.clone();
                // make the path exist, then put the slot there
                let mut cur = &mut d;
                for k in path.split('/') {
                    cur = match k.parse::<usize>() {
                        Ok(i) => {
                            if !cur.is_array() {
                                *cur = serde_json::json!([]);
                            }
                            let a = cur.as_array_mut().expect("array");
                            if a.len() <= i {
                                a.resize(i + 1, serde_json::Value::Null);
                            }
                            &mut a[i]
                        }
                        Err(_) => {
                            if !cur.is_object() {
                                *cur = serde_json::json!({});
                            }
                            cur.as_object_mut()
                                .expect("object")
                                .entry(k.to_owned())
                                .or_insert(serde_json::Value::Null)
                        }
                    };
                }
                *cur = serde_json::Value::String(SLOT.to_owned());
                let text = d.to_string();
                for v in &odd {
                    same(&text.replacen(&slot, v, 1));
                    checked += 1;
                }
            }
            // a read member repeated: before and after, the later one wins
            let text = doc.to_string();
            for (k, _) in DOC.keys {
                for v in ["null", "5", "{}", "[]", "\"x\""] {
                    same(&format!("{{\"{k}\":{v},{}", &text[1..]));
                    same(&format!("{},\"{k}\":{v}}}", &text[..text.len() - 1]));
                    checked += 2;
                }
            }
        }
        assert!(checked > 10_000, "{checked}");
    }

    /// An unread member nested past serde_json's limit (128) is refused as the `Value` refused
    /// it (`serde::de::IgnoredAny` would pass it).
    #[test]
    fn nesting_past_the_limit_in_an_unread_member_is_refused() {
        let deep = format!(
            r#"{{"smartctl":{{"exit_status":0}},"x":{}{}}}"#,
            "[".repeat(129),
            "]".repeat(129)
        );
        same(&deep);
        let e = super::super::parse(&deep).expect_err("too deep");
        assert!(e.reason.contains("recursion limit"), "{e}");
        let big = r#"{"smartctl":{"exit_status":0},"x":1e400}"#;
        same(big);
        let e = super::super::parse(big).expect_err("out of range");
        assert!(e.reason.contains("out of range"), "{e}");
    }

    proptest! {
        #[test]
        fn json_of_any_shape_reads_as_it_did(
            key in "smartctl|device|ata_smart_attributes|nvme_smart_health_information_log|wwn|power_mode|json_format_version|temperature|x",
            inner in "[0-9a-z\\[\\]{}\":,.\\\\ -]{0,40}",
        ) {
            same(&format!("{{\"{key}\": {inner}}}"));
            same(&format!("{{\"smartctl\": {{\"exit_status\": 0}}, \"{key}\": {{\"table\": [{inner}]}}}}"));
            same(&format!("{{\"json_format_version\": [1, 0], \"smartctl\": {{\"exit_status\": {inner}}}, \"device\": {{\"name\": {inner}, \"{key}\": 1}}}}"));
        }
    }
}
