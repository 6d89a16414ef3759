//! The `drive` line: its measurement and tags encoded once per drive ([`LineKey`], kept with
//! the drive's state and made again when a tag changes), the fields of its reading likewise
//! (made again when the reading or the outcome of a call changes), the ages written each
//! report; keys checked at compile time. Fields and tags: docs/metrics-drive.md.

use storwatch_wire::lp::{FieldKey, Fields, LineWriter, SeriesKey};

use super::{command_timeouts, DriveState};
use crate::collect::book::BookEntry;
use crate::sources::smartctl::{DriveHealth, OverallHealth, Protocol};

/// The tags other monitors know for a disk (from the book).
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Tags<'a> {
    /// Pools naming it.
    pub(super) pool: &'a str,
    /// The hardware virtual drive it is a member of.
    pub(super) raid_vd: &'a str,
}

/// A drive's `drive` line measurement and tags, encoded, and the book's tags it was made with.
/// The rest of its tags come from the drive's reading and placement: whoever replaces the
/// placement, or the reading with one of other tags ([`same_tags`]), drops the key
/// ([`DriveState::key`]).
#[derive(Debug, Clone)]
pub(super) struct LineKey {
    key: SeriesKey,
    pool: String,
    raid_vd: String,
}

impl LineKey {
    /// The key of drive `name` in state `s` with the book's `tags`.
    fn new(name: &str, s: &DriveState, tags: &Tags<'_>) -> Self {
        Self {
            key: series_key(name, s, tags),
            pool: tags.pool.to_owned(),
            raid_vd: tags.raid_vd.to_owned(),
        }
    }

    /// Made with the book's `tags`.
    fn is_for(&self, tags: &Tags<'_>) -> bool {
        self.pool == tags.pool && self.raid_vd == tags.raid_vd
    }
}

/// The `protocol` tag.
fn protocol(p: &Protocol) -> Option<String> {
    match p {
        Protocol::Ata => Some("ata".into()),
        Protocol::Scsi => Some("scsi".into()),
        Protocol::Nvme => Some("nvme".into()),
        Protocol::Other(o) => Some(o.to_ascii_lowercase()),
        Protocol::Unknown => None,
    }
}

/// Whether readings `a` and `b` give a drive's line the same tags (the ones [`series_key`] takes
/// from a reading): a new reading of the same drive keeps the key made for the last one.
pub(super) fn same_tags(a: &DriveHealth, b: &DriveHealth) -> bool {
    a.serial == b.serial && a.wwn == b.wwn && a.model == b.model && a.protocol == b.protocol
}

/// The `drive` line's measurement and tags for drive `name` in state `s`.
fn series_key(name: &str, s: &DriveState, tags: &Tags<'_>) -> SeriesKey {
    let h = s.health.as_ref();
    let proto = h.and_then(|h| protocol(&h.protocol)).unwrap_or_default();
    SeriesKey::new(
        "drive",
        &[
            ("device", name),
            (
                "serial",
                h.and_then(|h| h.serial.as_deref()).unwrap_or_default(),
            ),
            ("wwn", h.and_then(|h| h.wwn.as_deref()).unwrap_or_default()),
            (
                "model",
                h.and_then(|h| h.model.as_deref()).unwrap_or_default(),
            ),
            ("protocol", &proto),
            ("md", &s.place.md),
            ("mpath", &s.place.mpath),
            (
                "pool",
                if tags.pool.is_empty() {
                    &s.place.pool
                } else {
                    tags.pool
                },
            ),
            ("raid_vd", tags.raid_vd),
        ],
    )
}

/// Writes drive `name`'s line from its state `s`, its key made for this line.
#[cfg(test)]
pub(super) fn write_line(
    w: &mut LineWriter,
    ts_ns: i64,
    now_s: f64,
    name: &str,
    s: &DriveState,
    entry: Option<&BookEntry>,
    tags: &Tags<'_>,
) {
    let key = series_key(name, s, tags);
    let mut f = w.fields_of(&key, ts_ns);
    reading_fields(&mut f, s, entry);
    age_fields(f, now_s, s);
}

/// Makes drive `name`'s key again when it keeps none, or one made with other book `tags`.
pub(super) fn keep_key(name: &str, s: &mut DriveState, tags: &Tags<'_>) {
    if !s.key.as_ref().is_some_and(|k| k.is_for(tags)) {
        s.key = Some(LineKey::new(name, s, tags));
    }
}

/// Writes a drive's line from its state `s` with the key it keeps (none: no line; see
/// [`keep_key`]). The fields of its reading are encoded once and kept with it
/// ([`DriveState::fields`], dropped when anything they say changes): a report writes only
/// their bytes, and the ages.
pub(super) fn write_kept(w: &mut LineWriter, ts_ns: i64, now_s: f64, s: &mut DriveState) {
    let Some(k) = &s.key else { return };
    let mut f = w.fields_of(&k.key, ts_ns);
    match &s.fields {
        Some(e) => f.encoded(e),
        None => {
            let m = f.mark();
            reading_fields(&mut f, s, s.entry.as_ref());
            s.fields = Some(f.since(m));
        }
    }
    age_fields(f, now_s, s);
}

/// The fields that change only with the drive's reading, its assessment or the outcome of its
/// last call.
fn reading_fields(f: &mut Fields<'_>, s: &DriveState, entry: Option<&BookEntry>) {
    if let Some(h) = s.health.as_ref() {
        f.value_opt(
            HEALTH_OK,
            match h.health {
                OverallHealth::Passed => Some(true),
                OverallHealth::Failed => Some(false),
                OverallHealth::Unknown => None,
            },
        );
        f.value_opt(TEMPERATURE_C, h.temperature_c);
        f.u64_opt(POWER_ON_HOURS, h.power_on_hours);
        f.u64_opt(EXIT_STATUS, h.exit_status.map(u64::from));
        if let Some(a) = &h.ata {
            f.u64_opt(REALLOCATED_SECTORS, a.reallocated_sectors);
            f.u64_opt(REPORTED_UNCORRECT, a.reported_uncorrectable);
            f.u64_opt(COMMAND_TIMEOUT, command_timeouts(h));
            f.u64_opt(PENDING_SECTORS, a.pending_sectors);
            f.u64_opt(OFFLINE_UNCORRECTABLE, a.offline_uncorrectable);
            f.u64_opt(UDMA_CRC_ERRORS, a.udma_crc_errors);
        }
        if let Some(sc) = &h.scsi {
            f.u64_opt(GROWN_DEFECTS, sc.grown_defects);
            f.u64_opt(UNCORRECTED_READ_ERRORS, sc.read_uncorrected);
            f.u64_opt(UNCORRECTED_WRITE_ERRORS, sc.write_uncorrected);
            f.u64_opt(UNCORRECTED_VERIFY_ERRORS, sc.verify_uncorrected);
            f.u64_opt(NON_MEDIUM_ERRORS, sc.non_medium_errors);
        }
        if let Some(n) = &h.nvme {
            f.u64_opt(CRITICAL_WARNING, n.critical_warning.map(u64::from));
            f.u64_opt(AVAILABLE_SPARE_PCT, n.available_spare_pct.map(u64::from));
            f.u64_opt(
                AVAILABLE_SPARE_THRESHOLD_PCT,
                n.available_spare_threshold_pct.map(u64::from),
            );
            f.u64_opt(PERCENTAGE_USED_PCT, n.percentage_used.map(u64::from));
            f.u64_opt(MEDIA_ERRORS, n.media_errors);
            f.u64_opt(UNSAFE_SHUTDOWNS, n.unsafe_shutdowns);
        }
    }
    f.value_opt(FAILURE_PROBABILITY, entry.map(|e| e.failure_probability));
    f.value(READ_OK, s.read_ok == Some(true));
    f.value(ASLEEP, s.asleep);
    f.value_opt(READ_ERROR, s.error.as_deref());
}

/// The ages, which change every report, and the line written.
fn age_fields(mut f: Fields<'_>, now_s: f64, s: &DriveState) {
    let age = |t: f64| (now_s - t).max(0.0).round() as i64;
    let scsi_errors = s
        .health
        .as_ref()
        .and_then(|h| h.scsi.as_ref())
        .is_some_and(|sc| sc.non_medium_errors.is_some());
    if let Some(t) = s.error_log_at_s.filter(|_| scsi_errors) {
        f.i64(NON_MEDIUM_ERRORS_AGE_S, age(t));
    }
    if let Some(t) = s.read_at_s {
        f.i64(LAST_READ_AGE_S, age(t));
    }
    if let Some(t) = s.full_read_at_s {
        f.i64(FULL_READ_AGE_S, age(t));
    }
    f.write();
}

// The `drive` line's field keys, checked when the program is compiled.
const HEALTH_OK: FieldKey = FieldKey::new("health_ok");
const TEMPERATURE_C: FieldKey = FieldKey::new("temperature_c");
const POWER_ON_HOURS: FieldKey = FieldKey::new("power_on_hours");
const EXIT_STATUS: FieldKey = FieldKey::new("exit_status");
const REALLOCATED_SECTORS: FieldKey = FieldKey::new("reallocated_sectors");
const REPORTED_UNCORRECT: FieldKey = FieldKey::new("reported_uncorrect");
const COMMAND_TIMEOUT: FieldKey = FieldKey::new("command_timeout");
const PENDING_SECTORS: FieldKey = FieldKey::new("pending_sectors");
const OFFLINE_UNCORRECTABLE: FieldKey = FieldKey::new("offline_uncorrectable");
const UDMA_CRC_ERRORS: FieldKey = FieldKey::new("udma_crc_errors");
const GROWN_DEFECTS: FieldKey = FieldKey::new("grown_defects");
const UNCORRECTED_READ_ERRORS: FieldKey = FieldKey::new("uncorrected_read_errors");
const UNCORRECTED_WRITE_ERRORS: FieldKey = FieldKey::new("uncorrected_write_errors");
const UNCORRECTED_VERIFY_ERRORS: FieldKey = FieldKey::new("uncorrected_verify_errors");
const NON_MEDIUM_ERRORS: FieldKey = FieldKey::new("non_medium_errors");
const NON_MEDIUM_ERRORS_AGE_S: FieldKey = FieldKey::new("non_medium_errors_age_s");
const CRITICAL_WARNING: FieldKey = FieldKey::new("critical_warning");
const AVAILABLE_SPARE_PCT: FieldKey = FieldKey::new("available_spare_pct");
const AVAILABLE_SPARE_THRESHOLD_PCT: FieldKey = FieldKey::new("available_spare_threshold_pct");
const PERCENTAGE_USED_PCT: FieldKey = FieldKey::new("percentage_used_pct");
const MEDIA_ERRORS: FieldKey = FieldKey::new("media_errors");
const UNSAFE_SHUTDOWNS: FieldKey = FieldKey::new("unsafe_shutdowns");
const FAILURE_PROBABILITY: FieldKey = FieldKey::new("failure_probability");
const READ_OK: FieldKey = FieldKey::new("read_ok");
const ASLEEP: FieldKey = FieldKey::new("asleep");
const LAST_READ_AGE_S: FieldKey = FieldKey::new("last_read_age_s");
const FULL_READ_AGE_S: FieldKey = FieldKey::new("full_read_age_s");
const READ_ERROR: FieldKey = FieldKey::new("read_error");
