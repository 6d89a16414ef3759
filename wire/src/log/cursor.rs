//! Cursor files: one position per reader, replaced whole by rename.

use std::fs::{self, OpenOptions};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use super::error::{at, LogError};
use super::Position;

const SUFFIX: &str = ".pos";
const TMP_SUFFIX: &str = ".tmp";

/// What a cursor file says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Saved {
    /// A position (20-byte file: segment u64 LE, offset u64 LE, CRC32 of both).
    At(Position),
    /// A byte position in the collector queue's format before the shared log (12-byte file:
    /// position u64 LE, CRC32 of it); segment names are byte positions there.
    Byte(u64),
}

pub(crate) fn encode(pos: Position) -> [u8; 20] {
    let mut out = [0u8; 20];
    out[..8].copy_from_slice(&pos.segment.to_le_bytes());
    out[8..16].copy_from_slice(&pos.offset.to_le_bytes());
    let crc = crc32fast::hash(&out[..16]);
    out[16..].copy_from_slice(&crc.to_le_bytes());
    out
}

/// The cursor a file holds; `None` when it is damaged (a torn or unsynced write).
pub(crate) fn decode(bytes: &[u8]) -> Option<Saved> {
    let u64_at = |i: usize| -> Option<u64> {
        Some(u64::from_le_bytes(bytes.get(i..i + 8)?.try_into().ok()?))
    };
    let crc_at = |i: usize| -> Option<u32> {
        Some(u32::from_le_bytes(bytes.get(i..i + 4)?.try_into().ok()?))
    };
    match bytes.len() {
        20 => (crc32fast::hash(bytes.get(..16)?) == crc_at(16)?).then(|| {
            Saved::At(Position {
                segment: u64_at(0).unwrap_or_default(),
                offset: u64_at(8).unwrap_or_default(),
            })
        }),
        12 => (crc32fast::hash(bytes.get(..8)?) == crc_at(8)?)
            .then(|| Saved::Byte(u64_at(0).unwrap_or_default())),
        _ => None,
    }
}

/// The cursor name of a file name (`influx.pos` → `influx`).
pub(crate) fn name_of(file: &str) -> Option<&str> {
    file.strip_suffix(SUFFIX).filter(|n| valid_name(n))
}

/// Names become file names: no separators, no hidden files, nothing empty.
pub(crate) fn valid_name(name: &str) -> bool {
    !name.is_empty() && !name.starts_with('.') && !name.contains(['/', '\0'])
}

/// Every cursor file in `dir`, with what it holds (`None`: damaged), sorted by name.
pub(crate) fn load_all(dir: &Path) -> Result<Vec<(String, Option<Saved>)>, LogError> {
    let mut out = Vec::new();
    for entry in fs::read_dir(dir).map_err(at(dir))? {
        let entry = entry.map_err(at(dir))?;
        let file = entry.file_name();
        let Some(name) = file.to_str().and_then(name_of) else {
            continue;
        };
        let path = entry.path();
        let bytes = fs::read(&path).map_err(at(&path))?;
        out.push((name.to_owned(), decode(&bytes)));
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(out)
}

/// Replaces cursor `name` in `dir` by `pos`: written to a temporary file (fsync'd with `sync`),
/// then renamed over the old one, so a reader finds the old cursor or the new, never a mix.
pub(crate) fn save(dir: &Path, name: &str, pos: Position, sync: bool) -> Result<(), LogError> {
    let tmp = dir.join(format!("{name}{TMP_SUFFIX}"));
    let written = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&tmp)
        .and_then(|mut f| {
            f.write_all(&encode(pos))?;
            if sync {
                f.sync_data()?;
            }
            Ok(())
        });
    if let Err(e) = written {
        let _ = fs::remove_file(&tmp);
        return Err(LogError::io(&tmp, e));
    }
    let path = dir.join(format!("{name}{SUFFIX}"));
    fs::rename(&tmp, &path).map_err(at(&path))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_rejects_damage() {
        let p = Position {
            segment: 7,
            offset: 12345,
        };
        let enc = encode(p);
        assert_eq!(decode(&enc), Some(Saved::At(p)));
        let mut bad = enc;
        bad[3] ^= 1;
        assert_eq!(decode(&bad), None);
        assert_eq!(decode(&enc[..19]), None);
        assert_eq!(decode(b"garbage"), None);
    }

    #[test]
    fn reads_the_queue_cursor_from_before_the_shared_log() {
        let mut old = 4242u64.to_le_bytes().to_vec();
        old.extend_from_slice(&crc32fast::hash(&old).to_le_bytes());
        assert_eq!(decode(&old), Some(Saved::Byte(4242)));
        old[0] ^= 1;
        assert_eq!(decode(&old), None);
    }

    #[test]
    fn names() {
        assert_eq!(name_of("influx_8086_db.pos"), Some("influx_8086_db"));
        assert_eq!(name_of("influx.tmp"), None);
        assert_eq!(name_of(".pos"), None);
        assert!(!valid_name("a/b"));
        assert!(!valid_name(".hidden"));
    }

    #[test]
    fn save_replaces_and_survives_reload() {
        let dir = tempfile::tempdir().unwrap();
        let p = Position {
            segment: 1,
            offset: 2,
        };
        save(dir.path(), "out", p, true).unwrap();
        save(dir.path(), "out", Position { offset: 9, ..p }, false).unwrap();
        let all = load_all(dir.path()).unwrap();
        assert_eq!(
            all,
            [(
                "out".to_owned(),
                Some(Saved::At(Position {
                    segment: 1,
                    offset: 9
                }))
            )]
        );
        assert!(!dir.path().join("out.tmp").exists());
    }
}
