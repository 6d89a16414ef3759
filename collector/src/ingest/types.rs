//! The learned field-type map: the type each (measurement, field) was first accepted with,
//! kept in `types.json` of the queue directory.
//!
//! A new field's type is saved (fsync'd) before the line that introduced it is acknowledged, so
//! after a restart the collector still refuses what InfluxDB would refuse.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};

use serde::{Deserialize, Serialize};
use storwatch_wire::lp::FieldType;

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
pub(crate) type Types = HashMap<String, HashMap<String, Stored>>;

/// Field types per measurement, learned from accepted lines and kept in `types.json`.
#[derive(Debug)]
pub struct TypeMap {
    path: Option<PathBuf>,
    types: RwLock<Types>,
    /// A client inventing field names without end must not grow memory without end; beyond
    /// this, new fields pass unchecked and InfluxDB's own check applies.
    pub(crate) max_fields: usize,
}

impl TypeMap {
    /// An in-memory map (tests).
    pub fn in_memory() -> TypeMap {
        TypeMap {
            path: None,
            types: RwLock::new(HashMap::new()),
            max_fields: 1_000_000,
        }
    }

    /// Loads `types.json` from `dir` (empty when absent).
    pub fn load(dir: &Path) -> Result<TypeMap, TypeMapError> {
        let path = dir.join("types.json");
        let types = match std::fs::read(&path) {
            Ok(bytes) => serde_json::from_slice(&bytes).map_err(|source| TypeMapError::Json {
                path: path.clone(),
                source,
            })?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => HashMap::new(),
            Err(source) => return Err(TypeMapError::Io { path, source }),
        };
        Ok(TypeMap {
            path: Some(path),
            types: RwLock::new(types),
            max_fields: 1_000_000,
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
            use std::io::Write;
            let mut f = std::fs::File::create(&tmp).map_err(io)?;
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
