#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::*;

fn proto_of(name: &str) -> LogProtocol {
    if name.ends_with(".ata.csv") {
        LogProtocol::Ata
    } else if name.ends_with(".scsi.csv") {
        LogProtocol::Scsi
    } else {
        LogProtocol::Nvme
    }
}

/// The last complete line of every fixture, as the reader hands it over (the whole file: each is
/// shorter than the tail read).
#[test]
fn snapshot_fixtures() {
    insta::glob!("../../../fixtures/smartd-attrlog", "*.csv", |path| {
        let bytes = std::fs::read(path).unwrap();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        insta::assert_debug_snapshot!(last_line(&bytes, true, proto_of(&name)));
    });
}

fn fixture(name: &str) -> Vec<u8> {
    std::fs::read(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("fixtures/smartd-attrlog")
            .join(name),
    )
    .unwrap()
}

fn ata(name: &str) -> Result<(String, Vec<AtaAttr>), ParseError> {
    let l = last_line(&fixture(name), true, LogProtocol::Ata)?;
    match l.values {
        Values::Ata(a) => Ok((l.time, a)),
        other => panic!("{other:?}"),
    }
}

#[test]
fn real_ata_lines() {
    let (time, attrs) = ata("netdata-pr1679-WDC_WD10EZEX_00BN5A0-WD_WCC3F7FLVZS9.ata.csv").unwrap();
    // the last of the two lines
    assert_eq!(time, "2017-01-31 05:48:34");
    assert_eq!(attrs.len(), 17);
    assert_eq!(
        attrs.iter().find(|a| a.id == 9),
        Some(&AtaAttr {
            id: 9,
            value: 84,
            raw: 12323
        })
    );
    let (time, attrs) = ata("masysma-Samsung_SSD_850_EVO_2TB-cut.ata.csv").unwrap();
    assert_eq!(time, "2025-05-13 21:23:07");
    assert_eq!(attrs[1].raw, 10738);
    // Seagate packs min/max temperatures above the current one: the raw value is kept whole
    let (_, attrs) = ata("netdata-pr4908-seagate-194-packed-tuple.ata.csv").unwrap();
    assert_eq!(attrs[0].raw, 73_014_444_075);
    assert_eq!(attrs[0].raw & 0xff, 43);
}

#[test]
fn a_half_written_last_line_is_left_out() {
    let (time, attrs) = ata("hostile-half-written-last-line.ata.csv").unwrap();
    assert_eq!(time, "2017-01-31 05:47:34");
    assert_eq!(attrs.len(), 17);
}

#[test]
fn hostile_logs_are_errors_naming_what_is_wrong() {
    for (name, proto, says) in [
        (
            "hostile-no-newline.ata.csv",
            LogProtocol::Ata,
            "no complete line",
        ),
        ("hostile-empty.ata.csv", LogProtocol::Ata, "empty log"),
        ("hostile-garbage.ata.csv", LogProtocol::Ata, "not text"),
        (
            "hostile-bad-number.ata.csv",
            LogProtocol::Ata,
            "not a number",
        ),
        (
            "hostile-value-over-255.ata.csv",
            LogProtocol::Ata,
            "over 255",
        ),
        (
            "hostile-scsi-line-in-ata-log.ata.csv",
            LogProtocol::Ata,
            "not an ATA attribute",
        ),
        (
            "hostile-ata-line-in-scsi-log.scsi.csv",
            LogProtocol::Scsi,
            "not a `NAME;VALUE;` tuple",
        ),
        (
            "hostile-bad-float.scsi.csv",
            LogProtocol::Scsi,
            "not a decimal number",
        ),
        (
            "hostile-scsi-line-in-nvme-log.nvme.csv",
            LogProtocol::Nvme,
            "no NVMe",
        ),
    ] {
        let e = last_line(&fixture(name), true, proto).unwrap_err();
        assert!(e.reason.contains(says), "{name}: {e}");
        assert_eq!(e.line, 1, "{name}");
    }
}

#[test]
fn scsi_and_nvme_lines() {
    let l = last_line(
        &fixture("synthetic-smartd75-SEAGATE-ST600MP0036-WAF1ABCD.scsi.csv"),
        true,
        LogProtocol::Scsi,
    )
    .unwrap();
    let Values::Scsi(s) = l.values else {
        panic!("{l:?}")
    };
    assert_eq!(s.read.unwrap().total_uncorrected, Some(0));
    assert_eq!(s.read.unwrap().gb_processed, Some(88.818));
    assert_eq!(s.verify.unwrap().total_corrected, Some(26_102_529));
    assert_eq!(s.non_medium_errors, Some(3));
    assert_eq!(s.temperature_c, Some(29));
    let l = last_line(
        &fixture("synthetic-smartd75-Samsung_SSD_970_EVO_Plus_250GB-REDACTED.nvme.csv"),
        true,
        LogProtocol::Nvme,
    )
    .unwrap();
    let Values::Nvme(n) = l.values else {
        panic!("{l:?}")
    };
    assert_eq!(n.power_on_hours, Some(3149));
    assert_eq!(n.err_log_entries, Some(22));
    assert_eq!(n.unsafe_shutdowns, Some(12));
    // a negative temperature (`%d` of kelvin − 273) is a number
    let l = parse_line(
        "2026-01-01 00:00:00;\tcritical-warning;0;\ttemperature;-5;\tmedia-errors;0;",
        LogProtocol::Nvme,
    )
    .unwrap();
    let Values::Nvme(n) = l.values else {
        panic!("{l:?}")
    };
    assert_eq!(n.temperature_c, Some(-5));
}

/// A tail that starts inside a line (the file is longer than the tail) never takes that line.
#[test]
fn a_tail_never_takes_its_cut_first_line() {
    let text = fixture("netdata-pr1679-WDC_WD10EZEX_00BN5A0-WD_WCC3F7FLVZS9.ata.csv");
    let first_end = text.iter().position(|&b| b == b'\n').unwrap();
    // only the second line and the end of the first: the second is taken
    let tail = &text[first_end - 10..];
    assert_eq!(
        last_line(tail, false, LogProtocol::Ata).unwrap().time,
        "2017-01-31 05:48:34"
    );
    // a single line longer than the tail: not smartd's
    let mut long = vec![b'x'; TAIL_BYTES + 10];
    long.push(b'\n');
    let tail = &long[long.len() - TAIL_BYTES..];
    let e = last_line(tail, false, LogProtocol::Ata).unwrap_err();
    assert!(e.reason.contains("longer than"), "{e}");
}

#[test]
fn bad_dates_and_tuples() {
    for (line, says) in [
        ("2017-01-31 05:47;\t1;200;0;", "date"),
        ("no date at all", "no `date;`"),
        ("2017-01-31 05:47:34;", "no ATA attribute"),
        ("2017-01-31 05:47:34;\t1;200;0", "does not end with `;`"),
        ("2017-01-31 05:47:34;\t0;200;0;", "id out of 1-255"),
        ("2017-01-31 05:47:34;\t1;200;281474976710656;", "48 bits"),
        ("2017-01-31 05:47:34;\t1;200;-1;", "not a number"),
    ] {
        let e = parse_line(line, LogProtocol::Ata).unwrap_err();
        assert!(e.contains(says), "{line}: {e}");
    }
    // unknown SCSI names are skipped, but a line of only unknown names is no SCSI line
    assert!(
        parse_line("2017-01-31 05:47:34;\tfoo;1;", LogProtocol::Scsi)
            .unwrap_err()
            .contains("no SCSI counter")
    );
    let l = parse_line(
        "2017-01-31 05:47:34;\tfoo;1;\tnon-medium-errors;7;",
        LogProtocol::Scsi,
    )
    .unwrap();
    assert_eq!(
        l.values,
        Values::Scsi(Box::new(ScsiLine {
            non_medium_errors: Some(7),
            ..ScsiLine::default()
        }))
    );
}

#[test]
fn file_names_as_smartd_makes_them() {
    assert_eq!(
        file_names(LogProtocol::Ata, "ST3000NM0033-9ZM178", "Z1Y00000", None),
        ["ST3000NM0033_9ZM178-Z1Y00000.ata.csv"]
    );
    assert_eq!(
        file_names(
            LogProtocol::Ata,
            "WDC WD10EZEX-00BN5A0",
            "WD-WCC3F7FLVZS9",
            None
        ),
        ["WDC_WD10EZEX_00BN5A0-WD_WCC3F7FLVZS9.ata.csv"]
    );
    assert_eq!(
        file_names(LogProtocol::Scsi, "SEAGATE ST600MP0036", "WAF1ABCD", None),
        ["SEAGATE-ST600MP0036-WAF1ABCD.scsi.csv"]
    );
    assert_eq!(
        file_names(
            LogProtocol::Nvme,
            "Samsung SSD 970 EVO Plus 250GB",
            "S4EUNX0N000000",
            Some(1)
        ),
        [
            "Samsung_SSD_970_EVO_Plus_250GB-S4EUNX0N000000.nvme.csv",
            "Samsung_SSD_970_EVO_Plus_250GB-S4EUNX0N000000-n1.nvme.csv"
        ]
    );
    assert_eq!(file_part("Ünï"), "__n__");
}

#[test]
fn the_table_of_a_smartctl_reading() {
    let json = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("fixtures/smartctl/sce-ata-seagate-st3000nm0033-188-packed-4-4-4.json"),
    )
    .unwrap();
    let t = smartctl_table(&json).unwrap();
    assert_eq!(t.ata.len(), 21);
    let r1 = t.ata.iter().find(|r| r.id == 1).unwrap();
    assert_eq!((r1.value, r1.thresh, r1.raw), (75, 44, 35_422_734));
    let json = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("fixtures/smartctl/sce-nvme-samsung-970-evo-plus.json"),
    )
    .unwrap();
    assert_eq!(
        smartctl_table(&json).unwrap().nvme_err_log_entries,
        Some(22)
    );
    assert!(smartctl_table("not json").is_err());
    assert!(smartctl_table(
        r#"{"ata_smart_attributes":{"table":[{"id":1,"value":300,"raw":{"value":0}}]}}"#
    )
    .unwrap_err()
    .contains("over 255"));
}

/// Whatever bytes a log ends with, the parser answers without panicking.
#[test]
fn never_panics_on_arbitrary_bytes() {
    let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
    let alphabet = b"0123456789;\t\n -:.abcdefghijklmnopqrstuvwxyz\xff";
    for _ in 0..2000 {
        let len = (seed % 300) as usize;
        let mut v = Vec::with_capacity(len);
        for _ in 0..len {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            v.push(alphabet[(seed % alphabet.len() as u64) as usize]);
        }
        for p in [LogProtocol::Ata, LogProtocol::Scsi, LogProtocol::Nvme] {
            let _ = last_line(&v, seed % 2 == 0, p);
        }
    }
}
