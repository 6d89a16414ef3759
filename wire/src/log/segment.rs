//! Segment files: names, listing, creation.

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use super::error::{at, LogError};
use super::record::SEGMENT_MAGIC;

const SUFFIX: &str = ".seg";

/// `00000000000000001234.seg`
pub(crate) fn file_name(name: u64) -> String {
    format!("{name:020}{SUFFIX}")
}

/// The number in a segment file name: 1 to 20 digits, then `.seg`.
pub(crate) fn parse_name(file: &str) -> Option<u64> {
    let digits = file.strip_suffix(SUFFIX)?;
    if digits.is_empty() || digits.len() > 20 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// The segment numbers found in `dir`, ascending.
pub(crate) fn list(dir: &Path) -> Result<Vec<u64>, LogError> {
    let mut names = Vec::new();
    for entry in fs::read_dir(dir).map_err(at(dir))? {
        let entry = entry.map_err(at(dir))?;
        if let Some(n) = entry.file_name().to_str().and_then(parse_name) {
            names.push(n);
        }
    }
    names.sort_unstable();
    Ok(names)
}

/// Creates segment `name` with its header; with `sync`, the header and the directory entry are
/// on disk when this returns. A segment that cannot be completed is removed again.
pub(crate) fn create(dir: &Path, name: u64, sync: bool) -> Result<File, LogError> {
    let path = dir.join(file_name(name));
    let mut file = OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&path)
        .map_err(at(&path))?;
    let written =
        file.write_all(SEGMENT_MAGIC)
            .and_then(|()| if sync { file.sync_data() } else { Ok(()) });
    if let Err(e) = written {
        let _ = fs::remove_file(&path);
        return Err(LogError::io(&path, e));
    }
    if sync {
        sync_dir(dir)?;
    }
    Ok(file)
}

/// fsync of a directory, so that entries created or renamed in it survive a power loss.
pub(crate) fn sync_dir(dir: &Path) -> Result<(), LogError> {
    File::open(dir).and_then(|d| d.sync_all()).map_err(at(dir))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert_eq!(file_name(42), "00000000000000000042.seg");
        assert_eq!(parse_name("00000000000000000042.seg"), Some(42));
        assert_eq!(parse_name("42.seg"), Some(42));
        assert_eq!(parse_name(".seg"), None);
        assert_eq!(parse_name("x42.seg"), None);
        assert_eq!(parse_name("cursor"), None);
        assert_eq!(parse_name("000000000000000000001.seg"), None);
        assert_eq!(parse_name("99999999999999999999.seg"), None);
    }
}
