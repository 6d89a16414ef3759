//! The `drive` lines' cost at 1,000 drives, without 1,000 smartctl children: 1,000 drives filled
//! from one real reading, the report written `STORWATCH_DRIVE_REPORTS` times (default 10); with
//! `STORWATCH_DRIVE_REPUBLISH` set, the book published again before each report.
//! Counted with callgrind (docs/performance.md, "Run of 2026-12-06: the drive lines"):
//!
//! ```sh
//! cargo test --release -p storwatch-agent --lib --no-run   # prints the test binary
//! valgrind --tool=callgrind --callgrind-out-file=cg.out BIN --ignored --exact \
//!     collect::drive::report_bench::report_1000_drives
//! callgrind_annotate --inclusive=yes cg.out | grep 'DriveCollector.*report'
//! ```

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::path::Path;

use super::*;
use crate::collect::SourceErrors;
use crate::sources::smartctl;

/// 1,000 drives `sd0`..`sd999`, each read once from the SAS document smartctl printed for a
/// Seagate ST600MP0036 (the harness's `--drives` answer), every tenth a member of an array.
pub(super) fn thousand_drives() -> DriveCollector {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/smartctl/libblockdev-scsi-seagate-st600mp0036.json");
    let json = std::fs::read_to_string(path).unwrap();
    let health = smartctl::parse(&json).unwrap();
    let root = Root::new("/nonexistent/proc", "/nonexistent/sys");
    let mut m = DriveCollector::new(DriveConfig::default(), root);
    for i in 0..1000 {
        let name = format!("sd{i}");
        let entry = BookEntry::assess(&name, &health, &m.risk);
        let s = DriveState {
            place: Placement {
                md: if i % 10 == 0 {
                    "md0".into()
                } else {
                    String::new()
                },
                ..Placement::default()
            },
            health: Some(Box::new(health.clone())),
            entry: Some(entry),
            read_at_s: Some(100.0),
            read_ok: Some(true),
            error_log_at_s: Some(90.0),
            ..DriveState::default()
        };
        m.drives.insert(name, s);
    }
    m.publish();
    m
}

/// A report of `m` at `now_s`.
pub(super) fn report(m: &mut DriveCollector, now_s: f64) -> String {
    let root = Root::new("/nonexistent/proc", "/nonexistent/sys");
    let mut errors = SourceErrors::default();
    let mut w = LineWriter::new("ds01", &[]);
    Collector::report(
        m,
        &mut w,
        &mut ReportCx {
            root: &root,
            ts_ns: (now_s * 1e9) as i64,
            now_s,
            uptime_cs: 0,
            errors: &mut errors,
        },
    );
    String::from_utf8(w.take()).unwrap()
}

#[test]
#[ignore = "a measurement: run under callgrind, see the module comment"]
fn report_1000_drives() {
    let mut m = thousand_drives();
    let n: usize = std::env::var("STORWATCH_DRIVE_REPORTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10);
    // Set: the book is published again before each report (a new view, as after a reading
    // that changed a drive's entry), so every drive's book tags are looked up again.
    let republish = std::env::var_os("STORWATCH_DRIVE_REPUBLISH").is_some();
    let mut bytes = 0;
    for r in 0..n {
        if republish {
            let entries = m.drives.values().filter_map(|s| s.entry.clone()).collect();
            m.book.publish(entries);
        }
        let text = report(&mut m, 130.0 + 10.0 * r as f64);
        assert_eq!(text.lines().count(), 1000);
        bytes += text.len();
    }
    println!("{n} reports of 1,000 drive lines, {bytes} bytes");
}

/// The lines as a report wrote them before the keys were kept: every drive's book tags looked
/// up and its key made for its line.
fn unkept(m: &DriveCollector, now_s: f64) -> String {
    let book = m.book.view();
    let pools = book.pool_tags();
    let mut w = LineWriter::new("ds01", &[]);
    for (name, s) in &m.drives {
        if s.read_ok.is_none() {
            continue;
        }
        let pool = pools.get(name).map_or("", String::as_str);
        let vd = s.health.as_ref().map_or("", |h| {
            book.raid_vd_of(h.serial.as_deref(), h.wwn.as_deref())
        });
        let tags = Tags { pool, raid_vd: vd };
        let ts_ns = (now_s * 1e9) as i64;
        write_line(&mut w, ts_ns, now_s, name, s, s.entry.as_ref(), &tags);
    }
    String::from_utf8(w.take()).unwrap()
}

/// A report of `m`, checked against the lines written from keys made for them.
fn checked(m: &mut DriveCollector, now_s: f64) -> String {
    let want = unkept(m, now_s);
    let got = report(m, now_s);
    assert_eq!(got, want, "at {now_s}");
    got
}

fn line_of<'a>(text: &'a str, device: &str) -> &'a str {
    let tag = format!("device={device},");
    text.lines().find(|l| l.contains(&tag)).unwrap()
}

/// Each drive's key and the fields of its reading are kept between reports: a new reading
/// (another serial, model and protocol; another temperature), a drive found asleep, a failed
/// call, a reading confirmed by smartd's log, a new placement (another array), the book's
/// pools and controller virtual drives changing must each show in the next report, as in lines
/// made from scratch.
#[test]
fn kept_keys_follow_readings_placements_and_the_book() {
    let mut m = thousand_drives();
    m.drives.retain(|name, _| name.len() <= 3); // sd0..sd9
    m.publish();
    let (mut errors, mut events) = (SourceErrors::default(), Vec::new());
    let first = checked(&mut m, 130.0);
    assert_eq!(checked(&mut m, 140.0).len(), first.len());

    // sd3 read again: a Samsung NVMe drive now.
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/smartctl/scrutiny-nvme-samsung-970-evo-media-errors.json");
    let nvme = smartctl::parse(&std::fs::read_to_string(path).unwrap()).unwrap();
    let serial = nvme.serial.clone().unwrap();
    let read = Update::Read {
        name: "sd3".into(),
        at: std::time::Instant::now(),
        result: ReadResult::Read(Box::new(nvme)),
        error_log_age_s: None,
    };
    m.apply(read, 150.0, &mut errors, &mut events);
    m.publish();
    let text = checked(&mut m, 150.0);
    assert!(line_of(&text, "sd3").contains(&format!(",serial={serial},")));
    assert!(line_of(&text, "sd3").contains(",protocol=nvme"));

    // sd1 read again, the same drive at another temperature: its key stays; sd2 read again
    // with the same serial and another model name: its key is made again.
    let again = |m: &mut DriveCollector, name: &str, edit: &dyn Fn(&mut smartctl::DriveHealth)| {
        let mut h = m.drives[name].health.as_deref().unwrap().clone();
        edit(&mut h);
        let read = Update::Read {
            name: name.into(),
            at: std::time::Instant::now(),
            result: ReadResult::Read(Box::new(h)),
            error_log_age_s: None,
        };
        m.apply(read, 155.0, &mut SourceErrors::default(), &mut Vec::new());
    };
    again(&mut m, "sd1", &|h| h.temperature_c = Some(41));
    assert!(
        m.drives["sd1"].key.is_some(),
        "the same drive's key is kept"
    );
    again(&mut m, "sd2", &|h| h.model = Some("ST600MP0037".into()));
    assert!(m.drives["sd2"].key.is_none());
    let text = checked(&mut m, 155.0);
    assert!(line_of(&text, "sd1").contains("temperature_c=41i"));
    assert!(line_of(&text, "sd2").contains(",model=ST600MP0037,"));

    // The fields of a reading, kept encoded between reports, follow each update: sd4 found
    // asleep, sd6's call failing, sd8 confirmed by smartd's log (another temperature, its
    // non-medium count confirmed), sd9 read again with the error log's age.
    let update = |m: &mut DriveCollector, u: Update| {
        m.apply(u, 157.0, &mut SourceErrors::default(), &mut Vec::new());
    };
    let now = std::time::Instant::now();
    update(
        &mut m,
        Update::Read {
            name: "sd4".into(),
            at: now,
            result: ReadResult::Asleep("STANDBY".into()),
            error_log_age_s: None,
        },
    );
    update(
        &mut m,
        Update::Read {
            name: "sd6".into(),
            at: now,
            result: ReadResult::Failed(reading::DriveError::NotRead {
                device: "/dev/sd6".into(),
                status: 2,
                why: "Smartctl open device: /dev/sd6 failed: No such device".into(),
            }),
            error_log_age_s: None,
        },
    );
    let fresh = crate::collect::drive::attrlog::Fresh {
        temperature_c: Some(44),
        power_on_hours: Some(30_001),
        unsafe_shutdowns: None,
        non_medium: true,
        age_s: 2.0,
    };
    update(
        &mut m,
        Update::Confirmed {
            name: "sd8".into(),
            at: now,
            fresh,
        },
    );
    let mut sd9 = m.drives["sd9"].health.as_deref().unwrap().clone();
    sd9.scsi.as_mut().unwrap().non_medium_errors = Some(12);
    update(
        &mut m,
        Update::Read {
            name: "sd9".into(),
            at: now,
            result: ReadResult::Read(Box::new(sd9)),
            error_log_age_s: Some(7.0),
        },
    );
    let text = checked(&mut m, 158.0);
    assert!(line_of(&text, "sd4").contains(",asleep=true,"), "{text}");
    assert!(line_of(&text, "sd6").contains(",read_error=\"smartctl /dev/sd6: not read"));
    assert!(line_of(&text, "sd8").contains("temperature_c=44i,power_on_hours=30001i"));
    assert!(
        line_of(&text, "sd9").contains(",non_medium_errors_age_s=8i,"),
        "{text}"
    );
    checked(&mut m, 168.0);

    // A round that finds sd5 in md1 (the others where they were).
    let disks = m
        .drives
        .iter()
        .map(|(name, s)| {
            let mut place = s.place.clone();
            if name == "sd5" {
                place.md = "md1".into();
            }
            reading::Disk {
                name: name.clone(),
                place,
            }
        })
        .collect();
    m.apply(Update::Disks(disks), 160.0, &mut errors, &mut events);
    let text = checked(&mut m, 160.0);
    assert!(line_of(&text, "sd5").contains(",md=md1"));

    // A pool names sd7, then no longer.
    let pools = [("tank".to_string(), vec!["sd7".to_string()])].into();
    m.book.publish_pools(pools);
    let text = checked(&mut m, 170.0);
    assert!(line_of(&text, "sd7").contains(",pool=tank"));
    m.book.publish_pools(BTreeMap::new());
    let text = checked(&mut m, 180.0);
    assert!(!line_of(&text, "sd7").contains("pool="));

    // A controller's virtual drive holds the SAS drives' serial (all but sd3's).
    let sas = m.drives["sd1"].health.as_ref().unwrap().serial.clone();
    m.book.publish_raid_vds(vec![(sas, None, "c0/v1".into())]);
    let text = checked(&mut m, 190.0);
    assert!(line_of(&text, "sd1").contains(",raid_vd=c0/v1 "));
    assert!(!line_of(&text, "sd3").contains("raid_vd="));
    assert!(errors.totals().is_empty());
}
