//! A drive's state changes between two readings: the `event` lines of source `drive`.
//!
//! Between the previous good reading of a disk and the new one (the first reading is the
//! baseline and announces nothing, as the other monitors' first poll does; a disk whose serial
//! changed is another drive and is compared with nothing):
//!
//! * SMART overall health turning FAILED (`from_state="passed"`, `to_state="failed"`), and back;
//! * a medium error count growing: ATA `reallocated_sectors`, `pending_sectors`,
//!   `offline_uncorrectable`, `reported_uncorrect`; SAS `grown_defects`,
//!   `uncorrected_{read,write,verify}_errors`; NVMe `media_errors` (`from_state="pending_sectors=0"`,
//!   `to_state="pending_sectors=8"`, the names of the `drive` line's fields). A count that
//!   falls (pending sectors rewritten or reallocated) is no event;
//! * NVMe `critical_warning` gaining a bit (`critical_warning=0` → `critical_warning=16`), and
//!   available spare falling to or below its threshold (`available_spare_pct=11` →
//!   `available_spare_pct=9`).
//!
//! The object is the disk's name (`sdc`, `nvme0n1`, `bus/0:megaraid,5`).

use crate::event::Event;
use crate::sources::smartctl::{DriveHealth, OverallHealth};

/// The source name of the events.
pub const SOURCE: &str = "drive";

/// The medium error counts of a reading, by the `drive` line's field names.
fn counts(h: &DriveHealth) -> Vec<(&'static str, Option<u64>)> {
    let mut v = Vec::new();
    if let Some(a) = &h.ata {
        v.extend([
            ("reallocated_sectors", a.reallocated_sectors),
            ("pending_sectors", a.pending_sectors),
            ("offline_uncorrectable", a.offline_uncorrectable),
            ("reported_uncorrect", a.reported_uncorrectable),
        ]);
    }
    if let Some(s) = &h.scsi {
        v.extend([
            ("grown_defects", s.grown_defects),
            ("uncorrected_read_errors", s.read_uncorrected),
            ("uncorrected_write_errors", s.write_uncorrected),
            ("uncorrected_verify_errors", s.verify_uncorrected),
        ]);
    }
    if let Some(n) = &h.nvme {
        v.push(("media_errors", n.media_errors));
    }
    v
}

/// What changed on disk `name` from reading `was` to `now`, appended to `events`.
pub fn changes(name: &str, was: &DriveHealth, now: &DriveHealth, events: &mut Vec<Event>) {
    if was.serial.is_some() && now.serial.is_some() && was.serial != now.serial {
        return; // another drive in the slot
    }
    match (was.health, now.health) {
        (OverallHealth::Passed, OverallHealth::Failed) => events.push(Event::new(
            SOURCE,
            name,
            "passed",
            "failed",
            format!(
                "{name}: SMART overall health turned FAILED{}: the drive predicts its own failure",
                model(now)
            ),
        )),
        (OverallHealth::Failed, OverallHealth::Passed) => events.push(Event::new(
            SOURCE,
            name,
            "failed",
            "passed",
            format!("{name}: SMART overall health PASSED again{}", model(now)),
        )),
        _ => {}
    }
    let before = counts(was);
    for (field, after) in counts(now) {
        let Some(after) = after else {
            continue;
        };
        let Some(told) = before
            .iter()
            .find(|(f, _)| *f == field)
            .and_then(|(_, v)| *v)
        else {
            continue;
        };
        if after > told {
            events.push(Event::new(
                SOURCE,
                name,
                format!("{field}={told}"),
                format!("{field}={after}"),
                format!("{name}: {field} grew from {told} to {after}{}", model(now)),
            ));
        }
    }
    if let (Some(w), Some(n)) = (&was.nvme, &now.nvme) {
        let (a, b) = (
            w.critical_warning.unwrap_or(0),
            n.critical_warning.unwrap_or(0),
        );
        if b & !a != 0 {
            events.push(Event::new(
                SOURCE,
                name,
                format!("critical_warning={a}"),
                format!("critical_warning={b}"),
                format!(
                    "{name}: NVMe critical warning set ({b:#04x}, was {a:#04x}){}",
                    model(now)
                ),
            ));
        }
        let below = |h: &crate::sources::smartctl::NvmeHealth| {
            h.spare_at_or_below_threshold() == Some(true)
        };
        if below(n) && !below(w) {
            let pct = |v: Option<u8>| v.map_or_else(|| "?".to_owned(), |v| v.to_string());
            events.push(Event::new(
                SOURCE,
                name,
                format!("available_spare_pct={}", pct(w.available_spare_pct)),
                format!("available_spare_pct={}", pct(n.available_spare_pct)),
                format!(
                    "{name}: available spare {}% at or below its threshold {}%{}",
                    pct(n.available_spare_pct),
                    pct(n.available_spare_threshold_pct),
                    model(now)
                ),
            ));
        }
    }
}

/// ` (MODEL, S/N SERIAL)` when known.
fn model(h: &DriveHealth) -> String {
    match (&h.model, &h.serial) {
        (Some(m), Some(s)) => format!(" ({m}, S/N {s})"),
        (Some(m), None) => format!(" ({m})"),
        (None, Some(s)) => format!(" (S/N {s})"),
        (None, None) => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sources::smartctl;

    fn read(name: &str) -> DriveHealth {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("fixtures/smartctl")
            .join(name);
        smartctl::parse(&std::fs::read_to_string(path).expect("fixture is readable"))
            .expect("fixture parses")
    }

    fn states(events: &[Event]) -> Vec<(String, String)> {
        events
            .iter()
            .map(|e| (e.from_state.clone(), e.to_state.clone()))
            .collect()
    }

    #[test]
    fn a_disk_going_bad_between_two_real_readings() {
        // The same ST3000NM0033 read by smartctl (1 reallocated, nothing pending) and later by
        // smartd (8 reallocated, 16 pending, 16 offline uncorrectable, 2 reported).
        let was = read("sce-ata-seagate-st3000nm0033-188-packed-4-4-4.json");
        let mut now = read("synthetic-smartd-jsonstate-ata-seagate-pending-16.json");
        now.serial = was.serial.clone();
        let mut ev = Vec::new();
        changes("sdc", &was, &now, &mut ev);
        assert_eq!(
            states(&ev),
            [
                ("reallocated_sectors=1", "reallocated_sectors=8"),
                ("pending_sectors=0", "pending_sectors=16"),
                ("offline_uncorrectable=0", "offline_uncorrectable=16"),
                ("reported_uncorrect=0", "reported_uncorrect=2"),
            ]
            .map(|(a, b)| (a.to_owned(), b.to_owned()))
        );
        assert!(ev.iter().all(|e| e.source == "drive" && e.object == "sdc"));
        assert!(
            ev[1].text.contains("pending_sectors grew from 0 to 16"),
            "{}",
            ev[1].text
        );
        // Back: counts that fall are no event.
        let mut back = Vec::new();
        changes("sdc", &now, &was, &mut back);
        assert_eq!(states(&back), []);
    }

    #[test]
    fn health_turning_failed_and_back() {
        let was = read("scrutiny-ata-hitachi-usbjmicron-FAILED-exit216.json");
        let mut passed = was.clone();
        passed.health = OverallHealth::Passed;
        let mut ev = Vec::new();
        changes("sdb", &passed, &was, &mut ev);
        changes("sdb", &was, &passed, &mut ev);
        assert_eq!(
            states(&ev),
            [("passed", "failed"), ("failed", "passed")].map(|(a, b)| (a.to_owned(), b.to_owned()))
        );
        assert!(ev[0].text.contains("FAILED"), "{}", ev[0].text);
    }

    #[test]
    fn another_drive_in_the_slot_is_compared_with_nothing() {
        let was = read("sce-ata-seagate-st3000nm0033-188-packed-4-4-4.json");
        let mut now = read("synthetic-smartd-jsonstate-ata-seagate-pending-16.json");
        now.serial = Some("OTHER".into());
        let mut ev = Vec::new();
        changes("sdc", &was, &now, &mut ev);
        assert!(ev.is_empty(), "{ev:?}");
    }

    #[test]
    fn nvme_critical_warning_and_spare_below_threshold() {
        // A healthy 970 EVO, then smartd's state of one whose spare fell to 9 % (threshold 10 %)
        // with critical warning bit 0 set, and 7 media errors.
        let mut was = read("scrutiny-nvme-samsung-970-evo-media-errors.json");
        let now = read("synthetic-smartd-jsonstate-nvme-spare-below-threshold.json");
        was.serial = now.serial.clone();
        if let Some(n) = was.nvme.as_mut() {
            n.media_errors = Some(0);
        }
        let mut ev = Vec::new();
        changes("nvme0n1", &was, &now, &mut ev);
        assert_eq!(
            states(&ev),
            [
                ("media_errors=0", "media_errors=7"),
                ("critical_warning=0", "critical_warning=1"),
                ("available_spare_pct=99", "available_spare_pct=9"),
            ]
            .map(|(a, b)| (a.to_owned(), b.to_owned()))
        );
    }
}
