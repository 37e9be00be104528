//! `run.json`: the manifest that makes a run's parts visible. A part exists for readers of
//! this crate only once the manifest lists it, and the manifest is only ever replaced
//! atomically, so a crash leaves either the old list or the new one.

use std::fs;
use std::path::{Component, Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::{Result, StoreError};
use crate::schema::{Table, FORMAT_VERSION, SCHEMA_NAME};

pub const MANIFEST_FILE: &str = "run.json";
/// A manifest is small (one line per part); a huge one is damage or an attack.
const MANIFEST_MAX_BYTES: u64 = 256 << 20;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RunKind {
    Tensor,
    Memory,
}

impl RunKind {
    /// The tables a run of this kind writes; their directories exist from its creation.
    pub fn tables(self) -> &'static [Table] {
        match self {
            RunKind::Tensor => &Table::TENSOR,
            RunKind::Memory => &Table::MEMORY,
        }
    }
}

/// What the producer knows when a run starts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunHeader {
    pub run_id: String,
    pub name: String,
    pub kind: RunKind,
    pub execution: String,
    pub rank: Option<i64>,
    pub group_id: Option<String>,
    pub world_size: Option<i64>,
    #[serde(default)]
    pub provenance: serde_json::Value,
    #[serde(default)]
    pub run_metadata: serde_json::Value,
}

/// One committed part file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartEntry {
    pub table: String,
    /// Relative to the run directory, `/`-separated.
    pub path: String,
    pub rows: u64,
    pub bytes: u64,
    /// blake3 of the whole file, checked by `validate()`.
    pub digest: String,
    /// The point whose commit wrote this part.
    pub point_index: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    pub schema: String,
    pub format_version: u32,
    pub producer: String,
    #[serde(flatten)]
    pub header: RunHeader,
    /// RFC 3339, UTC.
    pub created_at: String,
    pub finished_at: Option<String>,
    pub complete: bool,
    pub point_count: u64,
    pub parts: Vec<PartEntry>,
}

impl Manifest {
    pub fn new(header: RunHeader, producer: &str, created_at: String) -> Manifest {
        Manifest {
            schema: SCHEMA_NAME.to_owned(),
            format_version: FORMAT_VERSION,
            producer: producer.to_owned(),
            header,
            created_at,
            finished_at: None,
            complete: false,
            point_count: 0,
            parts: Vec::new(),
        }
    }

    /// Reads and checks a manifest: schema name, version, and that every part path stays
    /// inside the run directory. Checking happens before any part is opened.
    pub fn read(run_dir: &Path) -> Result<Manifest> {
        let path = run_dir.join(MANIFEST_FILE);
        let meta = match fs::metadata(&path) {
            Ok(meta) => meta,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(StoreError::NotARun {
                    path: run_dir.to_path_buf(),
                })
            }
            Err(e) => return Err(StoreError::io(&path)(e)),
        };
        if meta.len() > MANIFEST_MAX_BYTES {
            return Err(invalid(&path, format!("{} bytes is too large", meta.len())));
        }
        let bytes = fs::read(&path).map_err(StoreError::io(&path))?;
        // Version first, from a loose parse, so a newer layout gets the upgrade message
        // rather than a confusing field error.
        let loose: serde_json::Value =
            serde_json::from_slice(&bytes).map_err(|e| invalid(&path, e.to_string()))?;
        match loose.get("schema").and_then(|s| s.as_str()) {
            Some(SCHEMA_NAME) => {}
            other => {
                return Err(invalid(
                    &path,
                    format!("schema is {other:?}, expected \"{SCHEMA_NAME}\""),
                ))
            }
        }
        let version = loose
            .get("format_version")
            .and_then(|v| v.as_u64())
            .ok_or_else(|| invalid(&path, "format_version is missing or not an integer"))?;
        if version > u64::from(FORMAT_VERSION) {
            return Err(StoreError::NewerFormat {
                path,
                found: u32::try_from(version).unwrap_or(u32::MAX),
                supported: FORMAT_VERSION,
            });
        }
        let manifest: Manifest =
            serde_json::from_value(loose).map_err(|e| invalid(&path, e.to_string()))?;
        for part in &manifest.parts {
            check_part_path(&path, part)?;
        }
        Ok(manifest)
    }

    pub fn parts_of(&self, table: Table) -> impl Iterator<Item = &PartEntry> {
        self.parts
            .iter()
            .filter(move |p| p.table == table.dir_name())
    }

    pub fn to_json(&self) -> Result<Vec<u8>> {
        serde_json::to_vec_pretty(self).map_err(|e| StoreError::invalid("manifest", e.to_string()))
    }
}

fn invalid(path: &Path, reason: impl Into<String>) -> StoreError {
    StoreError::InvalidManifest {
        path: path.to_path_buf(),
        reason: reason.into(),
    }
}

/// A part path must be `<table dir>/<file name>.parquet` with plain components: no
/// absolute paths, no `..`, no links out of the run directory through odd components.
fn check_part_path(manifest: &Path, part: &PartEntry) -> Result<()> {
    let unsafe_path = || StoreError::UnsafePath {
        manifest: manifest.to_path_buf(),
        part: part.path.clone(),
    };
    let rel = Path::new(&part.path);
    let components: Vec<Component> = rel.components().collect();
    let [Component::Normal(dir), Component::Normal(file)] = components.as_slice() else {
        return Err(unsafe_path());
    };
    let table = dir
        .to_str()
        .and_then(Table::from_dir_name)
        .ok_or_else(unsafe_path)?;
    let file = file.to_str().ok_or_else(unsafe_path)?;
    if table.dir_name() != part.table || !file.ends_with(".parquet") || file.starts_with('.') {
        return Err(unsafe_path());
    }
    Ok(())
}

/// Resolves a checked part path against the run directory.
pub fn part_path(run_dir: &Path, part: &PartEntry) -> PathBuf {
    run_dir.join(&part.path)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn part(table: &str, path: &str) -> PartEntry {
        PartEntry {
            table: table.into(),
            path: path.into(),
            rows: 1,
            bytes: 1,
            digest: String::new(),
            point_index: 0,
        }
    }

    #[test]
    fn part_paths_must_stay_inside_the_run() {
        let m = Path::new("run.json");
        assert!(check_part_path(m, &part("points", "points/part-000001.parquet")).is_ok());
        for bad in [
            "../points/part-000001.parquet",
            "/etc/passwd",
            "points/../../x.parquet",
            "points/sub/part.parquet",
            "points/.part-000001.parquet.tmp",
            "secrets/part.parquet",
            "observations/part-000001.parquet",
        ] {
            let err = check_part_path(m, &part("points", bad)).unwrap_err();
            assert!(
                matches!(err, StoreError::UnsafePath { ref part, .. } if part == bad),
                "{bad}: {err}"
            );
        }
    }
}
