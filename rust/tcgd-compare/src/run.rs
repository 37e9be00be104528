//! A recorded run as the engine sees it: points of observation metadata, read from the
//! run's tables, and payloads read through the store's `RunReader` when a pair needs them.

use std::path::Path;
use std::sync::Arc;

use tcgd_store::{OnDamage, RunKind, RunReader, RunSelector};

use crate::engine::{ObservationSet, PayloadBuf, PayloadSource};
use crate::error::{CompareError, Result};
use crate::model::{ObservationMeta, PointRef, Subject};

/// Payload bytes of a run, fetched by digest (and checked against it by the reader).
struct RunPayloads {
    reader: RunReader,
}

impl PayloadSource for RunPayloads {
    fn load(&self, _index: usize, meta: &ObservationMeta) -> Result<Arc<dyn PayloadBuf>> {
        let digest = meta.digest.as_deref().ok_or_else(|| {
            CompareError::InvalidInput(format!(
                "observation '{}' has no digest to read its payload by",
                meta.descriptor.name
            ))
        })?;
        Ok(Arc::new(self.reader.payload(digest)?))
    }
}

/// A run opened for comparison.
pub struct RunData {
    pub subject: Subject,
    pub complete: bool,
    pub points: Vec<ObservationSet>,
}

impl RunData {
    /// Opens the one run of a job root: its files are checked by the store first.
    pub fn open(dir: &Path) -> Result<RunData> {
        RunData::open_selected(dir, &RunSelector::default())
    }

    /// Opens the run of the job root `dir` that `selector` picks.
    pub fn open_selected(dir: &Path, selector: &RunSelector) -> Result<RunData> {
        let reader = RunReader::open_selected(dir, selector, OnDamage::Raise)?;
        let manifest = reader.manifest().clone();
        if manifest.header.kind != RunKind::Tensor {
            return Err(CompareError::InvalidInput(format!(
                "'{}' is a memory run; tensor comparisons need tensor runs",
                dir.display()
            )));
        }
        let recorded = reader.tensor_points()?;
        let source: Arc<dyn PayloadSource> = Arc::new(RunPayloads { reader });
        let sets: Vec<ObservationSet> = recorded
            .into_iter()
            .map(|p| ObservationSet {
                point: PointRef {
                    label: Some(p.label),
                    index: Some(p.index),
                    replay_index: p.replay_index,
                    snapshot_index: None,
                    timestamp: Some(tcgd_store::rfc3339(p.timestamp_micros)),
                },
                observations: p.observations,
                source: source.clone(),
            })
            .collect();
        let header = &manifest.header;
        Ok(RunData {
            subject: Subject {
                kind: "run".into(),
                name: Some(header.name.clone()),
                path: Some(dir.display().to_string()),
                run_id: Some(header.run_id.clone()),
                rank: header.rank,
                world_size: header.world_size,
                complete: Some(manifest.complete),
                points: Some(sets.len()),
                detail: None,
            },
            complete: manifest.complete,
            points: sets,
        })
    }

    /// Keeps only the observations named in `names` (every point stays, possibly empty):
    /// a comparison limited to the values both sides are known to hold, such as the
    /// sites of a compiled model that an eager run can be aligned with.
    pub fn retain_names(&mut self, names: &std::collections::HashSet<String>) {
        for set in &mut self.points {
            set.observations
                .retain(|o| names.contains(&o.descriptor.name));
        }
    }

    pub fn labels(&self) -> Vec<&str> {
        self.points
            .iter()
            .filter_map(|p| p.point.label.as_deref())
            .collect()
    }
}
