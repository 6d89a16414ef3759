//! The learned field-type map: the type each (measurement, field) was first accepted with,
//! kept in the queue directory as `types.json` (the whole map, written at start) and
//! `types.log` (the fields learned since, one JSON array `["measurement","field","type"]` per
//! line, appended).
//!
//! A new field's type is appended to `types.log` and fsync'd before the line that introduced it
//! is acknowledged, so after a restart the collector still refuses what InfluxDB would refuse.
//! A request teaching new fields costs one small append and one fsync, however large the map
//! (the whole map used to be rewritten: 376 ms per request at a million fields). The journal is
//! folded into `types.json` (temporary file, fsync, rename, then the journal emptied) at start
//! and whenever it holds as many fields as the map did at the last fold (at least 10,000), so
//! it stays within the map's size and a fold costs O(1) per field learned. A crash between the
//! rename and the emptying replays fields `types.json` already has (harmless); a line torn by a
//! crash at its end was never acknowledged and is dropped. Both files are private (0600).

use std::fs::{File, OpenOptions};
use std::io::{Seek, SeekFrom, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, RwLock, RwLockReadGuard, RwLockWriteGuard};

use serde::{Deserialize, Serialize};
use storwatch_wire::lp::FieldType;

use crate::hash::FxMap;

/// A field type as stored in `types.json`: its InfluxDB name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Stored(pub(crate) FieldType);

impl Serialize for Stored {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.0.name())
    }
}

impl<'de> Deserialize<'de> for Stored {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let name = String::deserialize(d)?;
        FieldType::from_name(&name)
            .map(Stored)
            .ok_or_else(|| serde::de::Error::custom(format!("unknown field type {name:?}")))
    }
}

/// Errors saving or loading the field-type map.
#[derive(Debug, thiserror::Error)]
pub enum TypeMapError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: {source}")]
    Json {
        path: PathBuf,
        source: serde_json::Error,
    },
}

/// Field types per measurement.
/// Field types per measurement (looked up for every field of every line: hashed with
/// [`crate::hash::Fx`]).
pub(crate) type Types = FxMap<String, FxMap<String, Stored>>;

/// `types.log` and how many fields it holds since the last fold.
#[derive(Debug)]
struct Journal {
    file: File,
    fields: usize,
}

/// The journal is folded into `types.json` once it holds this many fields and at least as many
/// as the map.
const FOLD_AT_LEAST: usize = 10_000;

/// Field types per measurement, learned from accepted lines and kept in `types.json`.
#[derive(Debug)]
pub struct TypeMap {
    path: Option<PathBuf>,
    types: RwLock<Types>,
    /// `types.log`, open for appending.
    journal: Option<Mutex<Journal>>,
    /// A client inventing field names without end must not grow memory without end; beyond
    /// this, new fields pass unchecked and InfluxDB's own check applies.
    pub(crate) max_fields: usize,
}

impl TypeMap {
    /// An in-memory map (tests).
    pub fn in_memory() -> TypeMap {
        TypeMap {
            path: None,
            types: RwLock::new(Types::default()),
            journal: None,
            max_fields: 1_000_000,
        }
    }

    /// Loads `types.json` and `types.log` from `dir` (empty when absent), folds the journal into
    /// `types.json` and opens the journal for appending.
    pub fn load(dir: &Path) -> Result<TypeMap, TypeMapError> {
        let path = dir.join("types.json");
        let journal_path = dir.join("types.log");
        let io = |path: &Path| {
            let path = path.to_path_buf();
            move |source| TypeMapError::Io { path, source }
        };
        let mut types: Types = match std::fs::read(&path) {
            Ok(bytes) => serde_json::from_slice(&bytes).map_err(|source| TypeMapError::Json {
                path: path.clone(),
                source,
            })?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Types::default(),
            Err(source) => return Err(TypeMapError::Io { path, source }),
        };
        let replayed = match std::fs::read(&journal_path) {
            Ok(bytes) => replay(&bytes, &mut types, &journal_path),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => 0,
            Err(source) => {
                return Err(TypeMapError::Io {
                    path: journal_path,
                    source,
                })
            }
        };
        let map = TypeMap {
            path: Some(path.clone()),
            types: RwLock::new(Types::default()),
            journal: None,
            max_fields: 1_000_000,
        };
        if replayed > 0 || !path.exists() {
            map.save(&types)?;
        }
        let journal = OpenOptions::new()
            .create(true)
            .write(true)
            .truncate(true)
            .mode(0o600)
            .open(&journal_path)
            .map_err(io(&journal_path))?;
        journal.sync_data().map_err(io(&journal_path))?;
        Ok(TypeMap {
            types: RwLock::new(types),
            journal: Some(Mutex::new(Journal {
                file: journal,
                fields: 0,
            })),
            ..map
        })
    }

    pub fn get(&self, measurement: &str, field: &str) -> Option<FieldType> {
        let t = self.read();
        t.get(measurement).and_then(|m| m.get(field)).map(|s| s.0)
    }

    pub(crate) fn read(&self) -> RwLockReadGuard<'_, Types> {
        self.types.read().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn write(&self) -> RwLockWriteGuard<'_, Types> {
        self.types.write().unwrap_or_else(|e| e.into_inner())
    }

    /// Appends newly learned fields to `types.log` with one write and one fsync; `types` is the
    /// map they were added to (held by the caller's write lock), folded into `types.json` when
    /// the journal has grown as large as it.
    pub(crate) fn append(
        &self,
        types: &Types,
        learned: &[(String, String, FieldType)],
    ) -> Result<(), TypeMapError> {
        let (Some(path), Some(journal)) = (&self.path, &self.journal) else {
            return Ok(());
        };
        let mut text = Vec::with_capacity(learned.len() * 48);
        for (m, f, t) in learned {
            serde_json::to_writer(&mut text, &(m, f, t.name())).map_err(|source| {
                TypeMapError::Json {
                    path: path.clone(),
                    source,
                }
            })?;
            text.push(b'\n');
        }
        let mut j = journal.lock().unwrap_or_else(|e| e.into_inner());
        let journal_path = path.with_file_name("types.log");
        j.file
            .write_all(&text)
            .and_then(|()| j.file.sync_data())
            .map_err(|source| TypeMapError::Io {
                path: journal_path.clone(),
                source,
            })?;
        j.fields += learned.len();
        if j.fields >= FOLD_AT_LEAST && j.fields >= types.values().map(FxMap::len).sum() {
            // The fields are durable in the journal already: a failed fold is only a warning.
            let folded = self.save(types).and_then(|()| {
                j.file
                    .set_len(0)
                    .and_then(|()| j.file.seek(SeekFrom::Start(0)).map(|_| ()))
                    .and_then(|()| j.file.sync_data())
                    .map_err(|source| TypeMapError::Io {
                        path: journal_path,
                        source,
                    })
            });
            match folded {
                Ok(()) => j.fields = 0,
                Err(e) => {
                    tracing::warn!(error = %e, "cannot fold the field-type journal; it keeps growing")
                }
            }
        }
        Ok(())
    }

    /// Writes the map to `types.json` (temporary file, fsync, rename, fsync of the directory).
    pub(crate) fn save(&self, types: &Types) -> Result<(), TypeMapError> {
        let Some(path) = &self.path else {
            return Ok(());
        };
        let io = |source| TypeMapError::Io {
            path: path.clone(),
            source,
        };
        let tmp = path.with_extension("json.tmp");
        let bytes = serde_json::to_vec(types).map_err(|source| TypeMapError::Json {
            path: path.clone(),
            source,
        })?;
        {
            let mut f = OpenOptions::new()
                .create(true)
                .write(true)
                .truncate(true)
                .mode(0o600)
                .open(&tmp)
                .map_err(io)?;
            f.write_all(&bytes).map_err(io)?;
            f.sync_data().map_err(io)?;
        }
        std::fs::rename(&tmp, path).map_err(io)?;
        if let Some(dir) = path.parent() {
            std::fs::File::open(dir)
                .and_then(|d| d.sync_all())
                .map_err(io)?;
        }
        Ok(())
    }
}

/// Applies the journal's lines to `types`; returns how many were applied. A torn last line (no
/// newline) was never acknowledged; a damaged line is skipped with a warning.
fn replay(bytes: &[u8], types: &mut Types, path: &Path) -> usize {
    let mut applied = 0;
    let complete = bytes
        .iter()
        .rposition(|b| *b == b'\n')
        .map_or(&bytes[..0], |end| bytes.get(..=end).unwrap_or_default());
    for line in complete.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
        match serde_json::from_slice::<(String, String, String)>(line) {
            Ok((m, f, t)) => match FieldType::from_name(&t) {
                Some(ty) => {
                    types.entry(m).or_default().entry(f).or_insert(Stored(ty));
                    applied += 1;
                }
                None => {
                    tracing::warn!(path = %path.display(), "unknown field type {t:?} in the journal; line skipped")
                }
            },
            Err(e) => {
                tracing::warn!(path = %path.display(), error = %e, "damaged line in the field-type journal; skipped")
            }
        }
    }
    applied
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn learned(n: usize) -> Vec<(String, String, FieldType)> {
        (0..n)
            .map(|i| ("m".to_string(), format!("f{i}"), FieldType::Float))
            .collect()
    }

    #[test]
    fn journal_survives_a_restart_and_is_folded_in() {
        let dir = tempfile::tempdir().unwrap();
        let t = TypeMap::load(dir.path()).unwrap();
        let new = learned(3);
        for (m, f, ty) in &new {
            t.write()
                .entry(m.clone())
                .or_default()
                .insert(f.clone(), Stored(*ty));
        }
        t.append(&t.read(), &new).unwrap();
        drop(t);
        // a crash in the middle of the next append
        let mut j = OpenOptions::new()
            .append(true)
            .open(dir.path().join("types.log"))
            .unwrap();
        j.write_all(b"[\"m\",\"torn").unwrap();
        drop(j);
        let t = TypeMap::load(dir.path()).unwrap();
        assert_eq!(t.get("m", "f2"), Some(FieldType::Float));
        assert_eq!(t.get("m", "torn"), None);
        assert_eq!(
            std::fs::metadata(dir.path().join("types.log"))
                .unwrap()
                .len(),
            0
        );
        let saved: Types =
            serde_json::from_slice(&std::fs::read(dir.path().join("types.json")).unwrap()).unwrap();
        assert_eq!(saved.get("m").map(FxMap::len), Some(3));
    }

    #[test]
    fn the_journal_is_folded_once_it_holds_as_many_fields_as_the_map() {
        let dir = tempfile::tempdir().unwrap();
        let t = TypeMap::load(dir.path()).unwrap();
        let journal_len = || {
            std::fs::metadata(dir.path().join("types.log"))
                .unwrap()
                .len()
        };
        let mut taught = 0;
        let mut teach = |n: usize| {
            let new: Vec<_> = (taught..taught + n)
                .map(|i| ("m".to_string(), format!("f{i}"), FieldType::Integer))
                .collect();
            taught += n;
            let mut w = t.write();
            for (m, f, ty) in &new {
                w.entry(m.clone())
                    .or_default()
                    .insert(f.clone(), Stored(*ty));
            }
            t.append(&w, &new).unwrap();
        };
        teach(FOLD_AT_LEAST - 1);
        assert!(journal_len() > 0);
        // the 10,000th field: the journal holds as many as the map, and is folded
        teach(1);
        assert_eq!(journal_len(), 0);
        let saved: Types =
            serde_json::from_slice(&std::fs::read(dir.path().join("types.json")).unwrap()).unwrap();
        assert_eq!(saved["m"].len(), FOLD_AT_LEAST);
        // appends go on at the start of the emptied journal, and everything survives a restart
        teach(5);
        let text = std::fs::read(dir.path().join("types.log")).unwrap();
        assert!(text.starts_with(b"[\"m\""), "{:?}", &text[..20]);
        drop(t);
        let t = TypeMap::load(dir.path()).unwrap();
        assert_eq!(t.read()["m"].len(), FOLD_AT_LEAST + 5);
    }

    #[test]
    fn types_json_of_an_earlier_release_is_read() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("types.json"),
            r#"{"disk":{"util_pct":"float","r_per_s":"integer"}}"#,
        )
        .unwrap();
        let t = TypeMap::load(dir.path()).unwrap();
        assert_eq!(t.get("disk", "r_per_s"), Some(FieldType::Integer));
    }

    /// What a request that teaches one new field costs at a million known fields: the whole-map
    /// rewrite of earlier releases against the journal append.
    /// `cargo test --release -p storwatch-collector --lib measure_learning -- --ignored --nocapture`
    #[test]
    #[ignore]
    fn measure_learning_at_a_million_fields() {
        let dir = tempfile::tempdir().unwrap();
        let t = TypeMap::load(dir.path()).unwrap();
        {
            let mut w = t.write();
            for i in 0..1_000_000 {
                w.entry(format!("m{}", i % 1000))
                    .or_default()
                    .insert(format!("field_{i}"), Stored(FieldType::Float));
            }
        }
        let rounds = 10;
        let start = std::time::Instant::now();
        for _ in 0..rounds {
            t.save(&t.read()).unwrap();
        }
        let rewrite = start.elapsed() / rounds;
        let start = std::time::Instant::now();
        for i in 0..rounds {
            t.append(
                &t.read(),
                &[("m0".into(), format!("new_{i}"), FieldType::Float)],
            )
            .unwrap();
        }
        let append = start.elapsed() / rounds;
        println!("1,000,000 fields: whole-map rewrite {rewrite:?} per request, journal append {append:?}");
    }
}
