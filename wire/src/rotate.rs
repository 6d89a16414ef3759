//! An append-only text file that rotates by size: `name` → `name.1` → … → `name.N`, the oldest
//! dropped. Under the agent's `file:` output and the collector's dead-letter files, which would
//! otherwise grow until the disk is full.
//!
//! Every [`RotatingFile::append`] writes one batch of complete lines whole into one file: a
//! batch that does not fit in the current file starts a new one, so no line and no batch is
//! ever split across two files. The disk used is therefore at most
//! `(keep_files + 1) × max_file_bytes`, plus whatever a single batch larger than
//! `max_file_bytes` takes (it gets a file of its own). A write that fails half-way (a full
//! disk) is cut back to the last complete batch, so the files never hold a torn line.

use std::fs::{File, OpenOptions};
use std::io::{self, Write as _};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// 100 MiB: a day of dead letters from a badly broken output, or a few hours of one agent's
/// reports on a large server.
pub const DEFAULT_MAX_FILE_BYTES: u64 = 100 << 20;
/// Rotated files kept beside the current one.
pub const DEFAULT_KEEP_FILES: u32 = 5;

/// How large a file may grow and how many rotated ones are kept: the agent's `[file]` and the
/// collector's `[dead_letter]` settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Rotation {
    /// Size at which the next batch goes to a new file, in bytes (at least 1).
    pub max_file_bytes: u64,
    /// Rotated files kept (`name.1` … `name.N`); 0 keeps only the current file.
    pub keep_files: u32,
}

impl Default for Rotation {
    fn default() -> Self {
        Self {
            max_file_bytes: DEFAULT_MAX_FILE_BYTES,
            keep_files: DEFAULT_KEEP_FILES,
        }
    }
}

/// Why a batch could not be written.
#[derive(Debug, thiserror::Error)]
pub enum RotateError {
    /// The filesystem is full: the batch was not written (and nothing torn was left behind).
    #[error("{path}: the filesystem is full; {bytes} bytes not written")]
    Full {
        /// The file written to.
        path: PathBuf,
        /// Size of the batch refused.
        bytes: usize,
    },
    /// Any other I/O failure, with the file it happened on.
    #[error("{path}: {source}")]
    Io {
        /// The file opened, written, renamed or removed.
        path: PathBuf,
        /// The underlying error.
        source: io::Error,
    },
}

/// What an [`RotatingFile::append`] did besides writing.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Appended {
    /// The batch went to a new file after the previous one was rotated away.
    pub rotated: bool,
}

/// A size-rotated append-only file; opened on the first append, so an unused one is never
/// created.
#[derive(Debug)]
pub struct RotatingFile {
    path: PathBuf,
    rotation: Rotation,
    mode: u32,
    sync: bool,
    open: Option<(File, u64)>,
}

impl RotatingFile {
    /// A file at `path` created with `mode` (before the umask); with `sync`, every batch and
    /// every rotation is made durable (`fdatasync`, and the directory after renames) before
    /// `append` returns.
    pub fn new(path: PathBuf, rotation: Rotation, mode: u32, sync: bool) -> Self {
        Self {
            path,
            rotation,
            mode,
            sync,
            open: None,
        }
    }

    /// The current file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Changes the limits; they apply from the next append (a reload).
    pub fn set_rotation(&mut self, rotation: Rotation) {
        self.rotation = rotation;
    }

    /// Path of the `n`th rotated file (`name.n`).
    pub fn rotated_path(&self, n: u32) -> PathBuf {
        let mut p = self.path.clone().into_os_string();
        p.push(format!(".{n}"));
        PathBuf::from(p)
    }

    /// Appends `batch` (complete lines) with one write, first rotating when it would take the
    /// current file past `max_file_bytes`.
    pub fn append(&mut self, batch: &[u8]) -> Result<Appended, RotateError> {
        let mut out = Appended::default();
        if batch.is_empty() {
            return Ok(out);
        }
        let size = self.ensure_open()?;
        let len = batch.len() as u64;
        if size > 0 && size.saturating_add(len) > self.rotation.max_file_bytes.max(1) {
            self.rotate()?;
            self.ensure_open()?;
            out.rotated = true;
        }
        let Some((file, size)) = self.open.as_mut() else {
            return Err(self.io_err(io::Error::other("file not open")));
        };
        if let Err(e) = file.write_all(batch) {
            // A short write leaves part of a line; cut the file back to the last whole batch.
            // When even that fails the file is reopened (and its real size read) next time.
            if file.set_len(*size).is_err() {
                self.open = None;
            }
            return Err(self.write_err(e, batch.len()));
        }
        *size += len;
        if self.sync {
            if let Err(e) = file.sync_data() {
                return Err(self.write_err(e, batch.len()));
            }
        }
        Ok(out)
    }

    /// Flushes what the operating system holds to disk.
    pub fn sync(&mut self) -> Result<(), RotateError> {
        match self.open.as_mut() {
            Some((f, _)) => f.sync_data().map_err(|source| RotateError::Io {
                path: self.path.clone(),
                source,
            }),
            None => Ok(()),
        }
    }

    fn ensure_open(&mut self) -> Result<u64, RotateError> {
        if let Some((_, size)) = &self.open {
            return Ok(*size);
        }
        let file = std::os::unix::fs::OpenOptionsExt::mode(
            OpenOptions::new().create(true).append(true),
            self.mode,
        )
        .open(&self.path)
        .map_err(|e| self.io_err(e))?;
        let size = file.metadata().map_err(|e| self.io_err(e))?.len();
        self.open = Some((file, size));
        Ok(size)
    }

    /// `name.(N-1)` → `name.N`, …, `name` → `name.1`; `name.N` is replaced, so the oldest goes.
    /// With `keep_files = 0` the current file is removed instead.
    fn rotate(&mut self) -> Result<(), RotateError> {
        self.open = None;
        let keep = self.rotation.keep_files;
        let step = |from: &Path, to: Option<&Path>| {
            let r = match to {
                Some(to) => std::fs::rename(from, to),
                None => std::fs::remove_file(from),
            };
            match r {
                Err(e) if e.kind() != io::ErrorKind::NotFound => Err(RotateError::Io {
                    path: from.to_path_buf(),
                    source: e,
                }),
                _ => Ok(()),
            }
        };
        // Files past a lowered keep_files are left from an earlier run: remove them too.
        for n in self.rotated_beyond(keep) {
            step(&self.rotated_path(n), None)?;
        }
        if keep == 0 {
            step(&self.path, None)?;
        } else {
            for n in (1..keep).rev() {
                step(&self.rotated_path(n), Some(&self.rotated_path(n + 1)))?;
            }
            step(&self.path, Some(&self.rotated_path(1)))?;
        }
        if self.sync {
            if let Some(dir) = self.path.parent().filter(|d| !d.as_os_str().is_empty()) {
                File::open(dir)
                    .and_then(|d| d.sync_all())
                    .map_err(|source| RotateError::Io {
                        path: dir.to_path_buf(),
                        source,
                    })?;
            }
        }
        tracing::info!(file = %self.path.display(), keep_files = keep, max_file_bytes = self.rotation.max_file_bytes, "file rotated");
        Ok(())
    }

    /// Numbers of the rotated files above `keep` in the file's directory.
    fn rotated_beyond(&self, keep: u32) -> Vec<u32> {
        let dir = match self.path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => Path::new("."),
        };
        let Some(name) = self.path.file_name().and_then(|n| n.to_str()) else {
            return Vec::new();
        };
        let prefix = format!("{name}.");
        let Ok(entries) = std::fs::read_dir(dir) else {
            return Vec::new();
        };
        entries
            .filter_map(|e| e.ok())
            .filter_map(|e| {
                let n = e.file_name();
                let rest = n.to_str()?.strip_prefix(&prefix)?;
                if rest.is_empty() || !rest.bytes().all(|b| b.is_ascii_digit()) {
                    return None;
                }
                rest.parse::<u32>().ok().filter(|&n| n > keep)
            })
            .collect()
    }

    fn io_err(&self, source: io::Error) -> RotateError {
        RotateError::Io {
            path: self.path.clone(),
            source,
        }
    }

    fn write_err(&self, source: io::Error, bytes: usize) -> RotateError {
        if source.kind() == io::ErrorKind::StorageFull {
            RotateError::Full {
                path: self.path.clone(),
                bytes,
            }
        } else {
            self.io_err(source)
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn rot(max: u64, keep: u32) -> Rotation {
        Rotation {
            max_file_bytes: max,
            keep_files: keep,
        }
    }

    fn read(p: &Path) -> String {
        std::fs::read_to_string(p).unwrap_or_default()
    }

    #[test]
    fn rotates_by_size_keeps_n_and_drops_the_oldest() {
        let dir = tempfile::tempdir().unwrap();
        let mut f = RotatingFile::new(dir.path().join("out.lp"), rot(20, 2), 0o600, true);
        let mut rotations = 0;
        for i in 0..10 {
            // 10 bytes per batch: two fit in a file
            if f.append(format!("m v={i:03}i\n").as_bytes())
                .unwrap()
                .rotated
            {
                rotations += 1;
            }
        }
        assert_eq!(rotations, 4);
        assert_eq!(read(f.path()), "m v=008i\nm v=009i\n");
        assert_eq!(read(&f.rotated_path(1)), "m v=006i\nm v=007i\n");
        assert_eq!(read(&f.rotated_path(2)), "m v=004i\nm v=005i\n");
        assert!(!f.rotated_path(3).exists());
        let mode = std::os::unix::fs::PermissionsExt::mode(
            &std::fs::metadata(f.path()).unwrap().permissions(),
        );
        assert_eq!(mode & 0o777, 0o600);
    }

    #[test]
    fn a_batch_is_never_split_and_a_large_one_gets_its_own_file() {
        let dir = tempfile::tempdir().unwrap();
        let mut f = RotatingFile::new(dir.path().join("out.lp"), rot(16, 3), 0o644, false);
        f.append(b"a v=1i\n").unwrap();
        f.append(b"b v=1i\nb v=2i\nb v=3i\n").unwrap();
        f.append(b"c v=1i\n").unwrap();
        assert_eq!(read(&f.rotated_path(2)), "a v=1i\n");
        assert_eq!(read(&f.rotated_path(1)), "b v=1i\nb v=2i\nb v=3i\n");
        assert_eq!(read(f.path()), "c v=1i\n");
    }

    #[test]
    fn keep_zero_starts_over_and_existing_files_count() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.lp");
        std::fs::write(&path, "old v=1i\n").unwrap();
        std::fs::write(dir.path().join("out.lp.5"), "older v=1i\n").unwrap();
        let mut f = RotatingFile::new(path.clone(), rot(12, 0), 0o600, false);
        assert!(f.append(b"new v=1i\n").unwrap().rotated);
        assert_eq!(read(&path), "new v=1i\n");
        assert!(!f.rotated_path(1).exists());
        // rotated files past keep_files (left by an earlier, larger setting) went at rotation
        assert!(!f.rotated_path(5).exists());
        f.set_rotation(rot(12, 1));
        f.append(b"new v=2i\n").unwrap();
        assert_eq!(read(&f.rotated_path(1)), "new v=1i\n");
        assert!(!f.rotated_path(5).exists());
    }

    #[test]
    fn a_full_disk_is_a_clear_error_not_a_panic() {
        if !Path::new("/dev/full").exists() {
            return;
        }
        let mut f = RotatingFile::new(PathBuf::from("/dev/full"), rot(1 << 20, 1), 0o600, true);
        let e = f.append(b"m v=1i\n").unwrap_err();
        assert!(matches!(e, RotateError::Full { bytes: 7, .. }), "{e:?}");
        assert_eq!(
            e.to_string(),
            "/dev/full: the filesystem is full; 7 bytes not written"
        );
        // and again: the handle is dropped or kept, never poisoned
        assert!(f.append(b"m v=2i\n").is_err());
    }

    #[test]
    fn an_unwritable_place_names_the_file() {
        let mut f = RotatingFile::new(
            PathBuf::from("/nonexistent-dir/out.lp"),
            Rotation::default(),
            0o600,
            false,
        );
        let e = f.append(b"m v=1i\n").unwrap_err();
        assert!(
            e.to_string().starts_with("/nonexistent-dir/out.lp: "),
            "{e}"
        );
    }
}
