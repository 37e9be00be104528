//! A run's rows as typed points and observations: the one place that maps the `points`
//! and `observations` columns to fields. The comparison engine and the Python package
//! both read runs through [`RunReader::tensor_points`] (and [`RunReader::points`]); the
//! anomaly search scans the same mapping borrowed ([`ObservationRows`]).

use std::collections::HashMap;
use std::path::Path;

use arrow::array::{
    Array, AsArray, BooleanArray, Float64Array, Int64Array, RecordBatch, StringArray,
};
use arrow::datatypes::TimestampMicrosecondType;
use tcgd_tensor::{DType, TensorSummary};

use super::{Columns, RunReader};
use crate::error::Result;
use crate::record::{ObservationDescriptor, PayloadKind, Site, SiteLocation, SiteLocationRef};
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
        let mut by_point =
            observations_by_point(&ObservationRows::new(self.dir(), &observations)?)?;
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

/// The `observations` table's columns, resolved once: the one place that maps them to the
/// fields of an observation. [`RunReader::tensor_points`] builds owned observations from
/// it; a scan that needs a few fields of every row (the comparison engine's anomaly
/// search) reads them borrowed, row by row, without building the rest.
pub struct ObservationRows<'a> {
    columns: Columns<'a>,
    point_index: &'a Int64Array,
    order: &'a Int64Array,
    name: &'a StringArray,
    invocation_index: &'a Int64Array,
    sites: [&'a StringArray; SiteLocation::COLUMNS.len()],
    materialized_by_probe: &'a BooleanArray,
    numel: &'a Int64Array,
    finite_count: &'a Int64Array,
    nan_count: &'a Int64Array,
    pos_inf_count: &'a Int64Array,
    neg_inf_count: &'a Int64Array,
    zero_count: &'a Int64Array,
    min: &'a Float64Array,
    max: &'a Float64Array,
    mean: &'a Float64Array,
    std: &'a Float64Array,
    l2_norm: &'a Float64Array,
}

impl<'a> ObservationRows<'a> {
    /// The rows of `batch`, a part of the `observations` table read from `dir`; a missing
    /// column, or one of another type, is a damaged run ([`StoreError::CorruptPart`]).
    ///
    /// [`StoreError::CorruptPart`]: crate::StoreError::CorruptPart
    pub fn new(dir: &'a Path, batch: &'a RecordBatch) -> Result<Self> {
        let columns = Columns::new(dir, batch);
        let mut sites = Vec::with_capacity(SiteLocation::COLUMNS.len());
        for column in SiteLocation::COLUMNS {
            sites.push(columns.strings(column)?);
        }
        Ok(ObservationRows {
            point_index: columns.ints("point_index")?,
            order: columns.ints("ordinal")?,
            name: columns.strings("name")?,
            invocation_index: columns.ints("invocation_index")?,
            sites: sites.try_into().expect("one array per site column"),
            materialized_by_probe: columns.booleans("materialized_by_probe")?,
            numel: columns.ints("numel")?,
            finite_count: columns.ints("finite_count")?,
            nan_count: columns.ints("nan_count")?,
            pos_inf_count: columns.ints("posinf_count")?,
            neg_inf_count: columns.ints("neginf_count")?,
            zero_count: columns.ints("zero_count")?,
            min: columns.floats("min")?,
            max: columns.floats("max")?,
            mean: columns.floats("mean")?,
            std: columns.floats("std")?,
            l2_norm: columns.floats("l2")?,
            columns,
        })
    }

    pub fn len(&self) -> usize {
        self.columns.num_rows()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn point_index(&self, row: usize) -> i64 {
        self.point_index.value(row)
    }

    /// The observation's place within its point (`TensorObservation.order`).
    pub fn order(&self, row: usize) -> i64 {
        self.order.value(row)
    }

    pub fn name(&self, row: usize) -> &'a str {
        self.name.value(row)
    }

    pub fn invocation_index(&self, row: usize) -> i64 {
        self.invocation_index.value(row)
    }

    /// The site's location columns, borrowed (all `None` for a hand-placed probe).
    pub fn site_location(&self, row: usize) -> SiteLocationRef<'a> {
        SiteLocationRef::from_column_values(std::array::from_fn(|c| {
            let column = self.sites[c];
            column.is_valid(row).then(|| column.value(row))
        }))
    }

    /// The value's summary; every row has one, whether its bytes were stored or not.
    pub fn summary(&self, row: usize) -> TensorSummary {
        // Counts are stored as int64 and never negative in a run this package wrote.
        let count = |a: &Int64Array| u64::try_from(a.value(row)).unwrap_or(0);
        let float = |a: &Float64Array| a.is_valid(row).then(|| a.value(row));
        TensorSummary {
            numel: count(self.numel),
            finite_count: count(self.finite_count),
            nan_count: count(self.nan_count),
            pos_inf_count: count(self.pos_inf_count),
            neg_inf_count: count(self.neg_inf_count),
            zero_count: count(self.zero_count),
            min: float(self.min),
            max: float(self.max),
            mean: float(self.mean),
            std: float(self.std),
            l2_norm: self.l2_norm.value(row),
        }
    }

    /// Whether the probe forced the value out of a fused kernel; `None` when not known.
    pub fn materialized_by_probe(&self, row: usize) -> Option<bool> {
        let flag = self.materialized_by_probe;
        flag.is_valid(row).then(|| flag.value(row))
    }

    /// The site as recorded, `None` for a hand-placed probe (every site column null).
    fn site(&self, row: usize) -> Option<Site> {
        self.site_location(row)
            .to_site(self.materialized_by_probe(row))
    }
}

/// The rows of `observations`, by point index.
fn observations_by_point(rows: &ObservationRows<'_>) -> Result<HashMap<i64, Vec<ObservationMeta>>> {
    let columns = &rows.columns;
    let dtype = columns.strings("dtype")?;
    let mut shape = columns.int_lists("shape")?;
    let mut stride = columns.int_lists("stride")?;
    let device = columns.strings("source_device")?;
    let payload = columns.strings("payload")?;
    let digest = columns.strings("digest")?;
    let mut by_point: HashMap<i64, Vec<ObservationMeta>> = HashMap::new();
    let mut dtypes: HashMap<&str, DType> = HashMap::new();
    for i in 0..rows.len() {
        let dtype = match dtypes.get(dtype.value(i)) {
            Some(d) => *d,
            None => {
                let parsed = DType::from_torch_name(dtype.value(i))?;
                *dtypes.entry(dtype.value(i)).or_insert(parsed)
            }
        };
        by_point
            .entry(rows.point_index(i))
            .or_default()
            .push(ObservationMeta {
                descriptor: ObservationDescriptor {
                    order: rows.order(i),
                    name: rows.name(i).to_owned(),
                    invocation_index: rows.invocation_index(i),
                    dtype,
                    shape: std::mem::take(&mut shape[i]),
                    stride: std::mem::take(&mut stride[i]),
                    source_device: device.value(i).to_owned(),
                    payload: PayloadKind::parse(payload.value(i))?,
                },
                digest: (!digest.is_null(i)).then(|| digest.value(i).to_owned()),
                summary: Some(rows.summary(i)),
                site: rows.site(i),
            });
    }
    Ok(by_point)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::ArrayRef;

    use super::*;

    #[test]
    fn a_missing_observation_column_is_a_damaged_part_named_by_it() {
        let points = Arc::new(Int64Array::from(vec![0])) as ArrayRef;
        let batch = RecordBatch::try_from_iter([("point_index", points)]).unwrap();
        let Err(error) = ObservationRows::new(Path::new("job"), &batch) else {
            panic!("a batch of one column was accepted");
        };
        // The first of the columns it lacks names the damage.
        assert!(
            matches!(error, crate::StoreError::CorruptPart { .. }),
            "{error}"
        );
        assert!(
            error.to_string().contains("column 'site_id' is missing"),
            "{error}"
        );
    }
}
