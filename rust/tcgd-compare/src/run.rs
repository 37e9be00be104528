//! A recorded run as the engine sees it: points of observation metadata, read from the
//! run's tables, and payloads read through the store's `RunReader` when a pair needs them.

use std::path::Path;
use std::sync::Arc;

use arrow::array::{Array, AsArray, RecordBatch};
use arrow::datatypes::{Float64Type, Int64Type, TimestampMicrosecondType};
use tcgd_store::{
    ObservationDescriptor, OnDamage, PayloadKind, RunKind, RunReader, RunSelector, StoreError,
    Table,
};
use tcgd_tensor::DType;

use crate::engine::{ObservationSet, PayloadBuf, PayloadSource};
use crate::error::{CompareError, Result};
use crate::model::{ObservationMeta, PointRef, SiteLocation, Subject, TensorSummary};

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
        let observations = reader.table(Table::Observations)?;
        let points = reader.table(Table::Points)?;
        let mut metas = read_observations(dir, &observations)?;
        let source: Arc<dyn PayloadSource> = Arc::new(RunPayloads { reader });
        let labels = strings(dir, &points, "label")?;
        let indices = ints(dir, &points, "point_index")?;
        let replays = column(dir, &points, "replay_index")?
            .as_primitive::<Int64Type>()
            .clone();
        let stamps = column(dir, &points, "timestamp")?
            .as_primitive_opt::<TimestampMicrosecondType>()
            .ok_or_else(|| bad_column(dir, "timestamp"))?
            .clone();
        let mut sets = Vec::with_capacity(points.num_rows());
        for row in 0..points.num_rows() {
            let index = indices[row];
            let mut observations: Vec<ObservationMeta> = Vec::new();
            if let Some(list) = metas.get_mut(&index) {
                observations = std::mem::take(list);
            }
            observations.sort_by_key(|o| o.descriptor.order);
            sets.push(ObservationSet {
                point: PointRef {
                    label: Some(labels[row].clone()),
                    index: Some(index),
                    replay_index: (!replays.is_null(row)).then(|| replays.value(row)),
                    snapshot_index: None,
                    timestamp: Some(tcgd_store::rfc3339(stamps.value(row))),
                },
                observations,
                source: source.clone(),
            });
        }
        sets.sort_by_key(|s| s.point.index);
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

fn bad_column(dir: &Path, name: &str) -> CompareError {
    CompareError::Store(StoreError::CorruptPart {
        path: dir.to_path_buf(),
        reason: format!("column '{name}' is missing or has the wrong type"),
    })
}

fn column<'a>(dir: &Path, batch: &'a RecordBatch, name: &str) -> Result<&'a dyn Array> {
    batch
        .column_by_name(name)
        .map(|c| c.as_ref())
        .ok_or_else(|| bad_column(dir, name))
}

fn strings(dir: &Path, batch: &RecordBatch, name: &str) -> Result<Vec<String>> {
    let array = column(dir, batch, name)?
        .as_string_opt::<i32>()
        .ok_or_else(|| bad_column(dir, name))?;
    Ok(array
        .iter()
        .map(|s| s.unwrap_or_default().to_owned())
        .collect())
}

fn opt_strings(dir: &Path, batch: &RecordBatch, name: &str) -> Result<Vec<Option<String>>> {
    let array = column(dir, batch, name)?
        .as_string_opt::<i32>()
        .ok_or_else(|| bad_column(dir, name))?;
    Ok(array.iter().map(|s| s.map(str::to_owned)).collect())
}

fn ints(dir: &Path, batch: &RecordBatch, name: &str) -> Result<Vec<i64>> {
    let array = column(dir, batch, name)?
        .as_primitive_opt::<Int64Type>()
        .ok_or_else(|| bad_column(dir, name))?;
    Ok(array.values().to_vec())
}

fn counts(dir: &Path, batch: &RecordBatch, name: &str) -> Result<Vec<u64>> {
    Ok(ints(dir, batch, name)?
        .into_iter()
        .map(|v| u64::try_from(v).unwrap_or(0))
        .collect())
}

fn floats(dir: &Path, batch: &RecordBatch, name: &str) -> Result<Vec<Option<f64>>> {
    let array = column(dir, batch, name)?
        .as_primitive_opt::<Float64Type>()
        .ok_or_else(|| bad_column(dir, name))?;
    Ok(array.iter().collect())
}

fn int_lists(dir: &Path, batch: &RecordBatch, name: &str) -> Result<Vec<Vec<i64>>> {
    let lists = column(dir, batch, name)?
        .as_list_opt::<i32>()
        .ok_or_else(|| bad_column(dir, name))?;
    let mut out = Vec::with_capacity(lists.len());
    for i in 0..lists.len() {
        let item = lists.value(i);
        let values = item
            .as_primitive_opt::<Int64Type>()
            .ok_or_else(|| bad_column(dir, name))?;
        out.push(values.values().to_vec());
    }
    Ok(out)
}

/// Observation metadata by point index.
fn read_observations(
    dir: &Path,
    batch: &RecordBatch,
) -> Result<std::collections::HashMap<i64, Vec<ObservationMeta>>> {
    let point = ints(dir, batch, "point_index")?;
    let order = ints(dir, batch, "ordinal")?;
    let name = strings(dir, batch, "name")?;
    let invocation = ints(dir, batch, "invocation_index")?;
    let dtype = strings(dir, batch, "dtype")?;
    let shape = int_lists(dir, batch, "shape")?;
    let stride = int_lists(dir, batch, "stride")?;
    let device = strings(dir, batch, "source_device")?;
    let payload = strings(dir, batch, "payload")?;
    let digest = opt_strings(dir, batch, "digest")?;
    let numel = counts(dir, batch, "numel")?;
    let finite = counts(dir, batch, "finite_count")?;
    let nan = counts(dir, batch, "nan_count")?;
    let posinf = counts(dir, batch, "posinf_count")?;
    let neginf = counts(dir, batch, "neginf_count")?;
    let zero = counts(dir, batch, "zero_count")?;
    let min = floats(dir, batch, "min")?;
    let max = floats(dir, batch, "max")?;
    let mean = floats(dir, batch, "mean")?;
    let std = floats(dir, batch, "std")?;
    let l2 = floats(dir, batch, "l2")?;
    let mut sites = Vec::with_capacity(SiteLocation::COLUMNS.len());
    for c in SiteLocation::COLUMNS {
        sites.push(opt_strings(dir, batch, c)?);
    }
    let mut by_point: std::collections::HashMap<i64, Vec<ObservationMeta>> =
        std::collections::HashMap::new();
    for i in 0..batch.num_rows() {
        let dtype = DType::from_torch_name(&dtype[i]).map_err(StoreError::from)?;
        let payload = PayloadKind::parse(&payload[i])?;
        let site = SiteLocation::from_column_values(std::array::from_fn(|k| sites[k][i].clone()));
        by_point.entry(point[i]).or_default().push(ObservationMeta {
            descriptor: ObservationDescriptor {
                order: order[i],
                name: name[i].clone(),
                invocation_index: invocation[i],
                dtype,
                shape: shape[i].clone(),
                stride: stride[i].clone(),
                source_device: device[i].clone(),
                payload,
            },
            digest: digest[i].clone(),
            summary: Some(TensorSummary {
                numel: numel[i],
                finite: finite[i],
                nan: nan[i],
                pos_inf: posinf[i],
                neg_inf: neginf[i],
                zero: zero[i],
                min: min[i],
                max: max[i],
                mean: mean[i],
                std: std[i],
                l2: l2[i].unwrap_or(0.0),
            }),
            site: Some(site).filter(|s| !s.is_empty()),
        });
    }
    Ok(by_point)
}
