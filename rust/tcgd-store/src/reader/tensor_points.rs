//! A run's rows as typed points and observations: the one place that maps the `points`
//! and `observations` columns to fields. The comparison engine and the Python package
//! both read runs through [`RunReader::tensor_points`] (and [`RunReader::points`]).

use std::collections::HashMap;

use arrow::array::{Array, AsArray};
use arrow::datatypes::TimestampMicrosecondType;
use tcgd_tensor::{DType, TensorSummary};

use super::{Columns, RunReader};
use crate::error::Result;
use crate::record::{ObservationDescriptor, PayloadKind, Site, SiteLocation};
use crate::schema::Table;

/// Everything about one recorded value except its bytes: the row of `observations`
/// without its run and point columns.
#[derive(Debug, Clone, PartialEq)]
pub struct ObservationMeta {
    pub descriptor: ObservationDescriptor,
    pub digest: Option<String>,
    /// Always present in a run; a value compared from the host may come without one.
    pub summary: Option<TensorSummary>,
    /// `None` for a hand-placed probe (every site column null).
    pub site: Option<Site>,
}

impl ObservationMeta {
    /// `(name, invocation_index)`: what pairs an observation with another point's.
    pub fn key(&self) -> (&str, i64) {
        self.descriptor.key()
    }

    /// Elements, or `None` for a shape with a negative size or one that overflows.
    pub fn numel(&self) -> Option<u64> {
        self.descriptor.numel().ok()
    }

    /// Bytes of the value when contiguous (`numel * itemsize`), or `None` where `numel` is.
    pub fn nbytes(&self) -> Option<u64> {
        let itemsize = self.descriptor.dtype.itemsize() as u64;
        self.numel().and_then(|n| n.checked_mul(itemsize))
    }

    /// Whether the bytes can be read: a full payload with a digest to fetch them by.
    pub fn has_payload(&self) -> bool {
        self.descriptor.payload == PayloadKind::Full && self.digest.is_some()
    }
}

/// One row of `points`, with the observations recorded at it in their order (none for a
/// memory run, whose states are in the memory tables).
#[derive(Debug, Clone, PartialEq)]
pub struct RecordedPoint {
    pub index: i64,
    pub label: String,
    /// Microseconds since the Unix epoch, UTC.
    pub timestamp_micros: i64,
    /// The user's metadata, as the JSON text it was stored as.
    pub metadata: String,
    /// The graph replay the point read; `None` for an eager point.
    pub replay_index: Option<i64>,
    pub observations: Vec<ObservationMeta>,
}

impl RunReader {
    /// The run's points in index order, each with its observations in order. Rows of
    /// points a damaged run left out are not there (see [`RunReader::damage`]).
    pub fn tensor_points(&self) -> Result<Vec<RecordedPoint>> {
        let observations = self.table(Table::Observations)?;
        let mut by_point = observations_by_point(&Columns::new(self.dir(), &observations))?;
        let mut points = self.points()?;
        for point in &mut points {
            if let Some(mut observations) = by_point.remove(&point.index) {
                observations.sort_by_key(|o| o.descriptor.order);
                point.observations = observations;
            }
        }
        Ok(points)
    }

    /// The rows of `points` in index order, without observations: what every run kind
    /// stores about its points.
    pub fn points(&self) -> Result<Vec<RecordedPoint>> {
        let batch = self.table(Table::Points)?;
        let points = Columns::new(self.dir(), &batch);
        let index = points.ints("point_index")?;
        let label = points.strings("label")?;
        let metadata = points.strings("metadata")?;
        let replay = points.ints("replay_index")?;
        let stamps = points
            .column("timestamp")?
            .as_primitive_opt::<TimestampMicrosecondType>()
            .ok_or_else(|| points.bad("timestamp"))?;
        let mut out = Vec::with_capacity(index.len());
        for row in 0..index.len() {
            out.push(RecordedPoint {
                index: index.value(row),
                label: label.value(row).to_owned(),
                timestamp_micros: stamps.value(row),
                metadata: metadata.value(row).to_owned(),
                replay_index: (!replay.is_null(row)).then(|| replay.value(row)),
                observations: Vec::new(),
            });
        }
        out.sort_by_key(|p| p.index);
        Ok(out)
    }
}

/// The rows of `observations`, by point index.
fn observations_by_point(columns: &Columns<'_>) -> Result<HashMap<i64, Vec<ObservationMeta>>> {
    let point = columns.ints("point_index")?;
    let order = columns.ints("ordinal")?;
    let name = columns.strings("name")?;
    let invocation = columns.ints("invocation_index")?;
    let dtype = columns.strings("dtype")?;
    let mut shape = columns.int_lists("shape")?;
    let mut stride = columns.int_lists("stride")?;
    let device = columns.strings("source_device")?;
    let payload = columns.strings("payload")?;
    let digest = columns.strings("digest")?;
    let numel = columns.counts("numel")?;
    let finite = columns.counts("finite_count")?;
    let nan = columns.counts("nan_count")?;
    let pos_inf = columns.counts("posinf_count")?;
    let neg_inf = columns.counts("neginf_count")?;
    let zero = columns.counts("zero_count")?;
    let min = columns.floats("min")?;
    let max = columns.floats("max")?;
    let mean = columns.floats("mean")?;
    let std_dev = columns.floats("std")?;
    let l2 = columns.floats("l2")?;
    let opt_float = |a: &arrow::array::Float64Array, i| (!a.is_null(i)).then(|| a.value(i));
    let materialized = columns.booleans("materialized_by_probe")?;
    let sites = SiteLocation::COLUMNS
        .iter()
        .map(|c| columns.strings(c))
        .collect::<Result<Vec<_>>>()?;
    let mut by_point: HashMap<i64, Vec<ObservationMeta>> = HashMap::new();
    let mut dtypes: HashMap<&str, DType> = HashMap::new();
    for i in 0..columns.num_rows() {
        let dtype = match dtypes.get(dtype.value(i)) {
            Some(d) => *d,
            None => {
                let parsed = DType::from_torch_name(dtype.value(i))?;
                *dtypes.entry(dtype.value(i)).or_insert(parsed)
            }
        };
        let site = Site::from_column_values(
            std::array::from_fn(|k| (!sites[k].is_null(i)).then(|| sites[k].value(i).to_owned())),
            (!materialized.is_null(i)).then(|| materialized.value(i)),
        );
        by_point
            .entry(point.value(i))
            .or_default()
            .push(ObservationMeta {
                descriptor: ObservationDescriptor {
                    order: order.value(i),
                    name: name.value(i).to_owned(),
                    invocation_index: invocation.value(i),
                    dtype,
                    shape: std::mem::take(&mut shape[i]),
                    stride: std::mem::take(&mut stride[i]),
                    source_device: device.value(i).to_owned(),
                    payload: PayloadKind::parse(payload.value(i))?,
                },
                digest: (!digest.is_null(i)).then(|| digest.value(i).to_owned()),
                summary: Some(TensorSummary {
                    numel: numel(i),
                    finite_count: finite(i),
                    nan_count: nan(i),
                    pos_inf_count: pos_inf(i),
                    neg_inf_count: neg_inf(i),
                    zero_count: zero(i),
                    min: opt_float(min, i),
                    max: opt_float(max, i),
                    mean: opt_float(mean, i),
                    std: opt_float(std_dev, i),
                    l2_norm: l2.value(i),
                }),
                site: Some(site).filter(|s| !s.is_empty()),
            });
    }
    Ok(by_point)
}
