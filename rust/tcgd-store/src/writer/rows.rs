//! What a committed group becomes: observation, point and payload rows, checked and
//! built into Arrow record batches.

use super::*;
use crate::record::SiteLocation;

/// An observation after the writer has looked at its value.
pub(super) struct Digested<'a> {
    pub(super) input: &'a ObservationInput<'a>,
    pub(super) summary: TensorSummary,
    pub(super) digest: Option<String>,
    pub(super) nbytes: i64,
}

/// Everything about a point that can be checked without the run: metadata is JSON, every
/// observation is consistent (dtype, shape, bytes), no (name, invocation) twice. A commit
/// handed to a background writer is checked with this first, so a bad point is refused
/// on the caller's thread.
pub fn check_point(point: &PointInput, observations: &[ObservationInput<'_>]) -> Result<()> {
    serde_json::from_str::<serde_json::Value>(&point.metadata)
        .map_err(|e| StoreError::invalid("metadata", format!("not JSON: {e}")))?;
    let mut keys = HashSet::new();
    for obs in observations {
        obs.validate()?;
        if !keys.insert(obs.descriptor.key()) {
            return Err(StoreError::invalid(
                "observation",
                format!(
                    "('{}', invocation {}) appears twice in point '{}'",
                    obs.descriptor.name, obs.descriptor.invocation_index, point.label
                ),
            ));
        }
    }
    Ok(())
}

pub(super) fn digest_observation<'a>(input: &'a ObservationInput<'a>) -> Result<Digested<'a>> {
    match input.value {
        Value::Bytes(bytes) => Ok(Digested {
            input,
            summary: summarize(input.descriptor.dtype, bytes)?,
            digest: Some(content_digest(bytes)),
            nbytes: bytes.len() as i64,
        }),
        Value::Summary(summary) => Ok(Digested {
            input,
            summary,
            digest: None,
            nbytes: i64::try_from(summary.numel * input.descriptor.dtype.itemsize() as u64)
                .unwrap_or(i64::MAX),
        }),
    }
}

#[derive(Default)]
pub(super) struct PayloadRows<'a> {
    pub(super) run_id: &'a str,
    pub(super) digests: Vec<&'a str>,
    pub(super) chunk_index: Vec<i64>,
    pub(super) chunk_count: Vec<i64>,
    pub(super) total: Vec<i64>,
    pub(super) data: Vec<&'a [u8]>,
}

impl<'a> PayloadRows<'a> {
    pub(super) fn push(&mut self, digest: &'a str, bytes: &'a [u8]) {
        // An empty tensor still gets one (empty) row, so every full observation's digest
        // resolves.
        let chunks: Vec<&[u8]> = if bytes.is_empty() {
            vec![bytes]
        } else {
            bytes.chunks(PAYLOAD_CHUNK_BYTES).collect()
        };
        let count = chunks.len() as i64;
        for (i, chunk) in chunks.into_iter().enumerate() {
            self.digests.push(digest);
            self.chunk_index.push(i as i64);
            self.chunk_count.push(count);
            self.total.push(bytes.len() as i64);
            self.data.push(chunk);
        }
    }

    pub(super) fn finish(self) -> Result<Option<RecordBatch>> {
        if self.digests.is_empty() {
            return Ok(None);
        }
        let columns: Vec<ArrayRef> = vec![
            repeated_str(self.run_id, self.digests.len()),
            Arc::new(StringArray::from(self.digests)),
            Arc::new(Int64Array::from(self.chunk_index)),
            Arc::new(Int64Array::from(self.chunk_count)),
            Arc::new(Int64Array::from(self.total)),
            Arc::new(LargeBinaryArray::from_vec(self.data)),
        ];
        batch(Table::Payloads.schema(), columns).map(Some)
    }
}

pub(super) fn batch(
    schema: arrow::datatypes::SchemaRef,
    columns: Vec<ArrayRef>,
) -> Result<RecordBatch> {
    RecordBatch::try_new(schema, columns)
        .map_err(|e| StoreError::invalid("record batch", e.to_string()))
}

pub(super) fn int64_lists<'a>(lists: impl Iterator<Item = &'a [i64]>) -> ArrayRef {
    let mut builder = ListBuilder::new(Int64Builder::new()).with_field(Arc::new(Field::new(
        "element",
        DataType::Int64,
        false,
    )));
    for list in lists {
        builder.values().append_slice(list);
        builder.append(true);
    }
    Arc::new(builder.finish())
}

pub(super) fn repeated_str(value: &str, n: usize) -> ArrayRef {
    Arc::new(StringArray::from(vec![value; n]))
}

pub(super) fn repeated_opt_i64(value: Option<i64>, n: usize) -> ArrayRef {
    Arc::new(Int64Array::from(vec![value; n]))
}

/// One observation as its `observations` row will hold it: owned, so rows wait for their
/// group commit after the producer's bytes are gone, and a group's rows become one batch
/// (building Arrow arrays once per group, not once per point, is most of what makes
/// back-to-back points cheap).
#[derive(Debug, Clone)]
pub(super) struct ObservationRow {
    pub(super) point_index: i64,
    pub(super) point_label: Arc<str>,
    pub(super) ordinal: i64,
    pub(super) name: String,
    pub(super) invocation_index: i64,
    pub(super) site: crate::record::Site,
    pub(super) dtype: &'static str,
    pub(super) shape: Vec<i64>,
    pub(super) stride: Vec<i64>,
    pub(super) source_device: String,
    pub(super) nbytes: i64,
    pub(super) payload: &'static str,
    pub(super) digest: Option<String>,
    pub(super) summary: TensorSummary,
}

impl ObservationRow {
    pub(super) fn new(point_index: u64, label: &Arc<str>, d: Digested<'_>) -> ObservationRow {
        let o = &d.input.descriptor;
        ObservationRow {
            point_index: point_index as i64,
            point_label: Arc::clone(label),
            ordinal: o.order,
            name: o.name.clone(),
            invocation_index: o.invocation_index,
            site: d.input.site.clone(),
            dtype: o.dtype.torch_name(),
            shape: o.shape.clone(),
            stride: o.stride.clone(),
            source_device: o.source_device.clone(),
            nbytes: d.nbytes,
            payload: o.payload.as_str(),
            digest: d.digest,
            summary: d.summary,
        }
    }
}

/// One point as its `points` row will hold it.
#[derive(Debug, Clone)]
pub(super) struct PointRow {
    pub(super) point_index: i64,
    pub(super) label: Arc<str>,
    pub(super) timestamp: i64,
    pub(super) replay_index: Option<i64>,
    pub(super) observation_count: i64,
    pub(super) metadata: String,
}

pub(super) fn observations_batch(run_id: &str, rows: &[ObservationRow]) -> Result<RecordBatch> {
    let n = rows.len();
    let site = |k: usize| -> ArrayRef {
        Arc::new(
            rows.iter()
                .map(|r| r.site.location.column_values()[k].as_deref())
                .collect::<StringArray>(),
        )
    };
    let ints = |f: fn(&ObservationRow) -> i64| -> ArrayRef {
        Arc::new(rows.iter().map(f).collect::<Int64Array>())
    };
    let strs = |f: fn(&ObservationRow) -> &str| -> ArrayRef {
        Arc::new(rows.iter().map(|r| Some(f(r))).collect::<StringArray>())
    };
    let count = |f: fn(&TensorSummary) -> u64| -> ArrayRef {
        Arc::new(
            rows.iter()
                .map(|r| i64::try_from(f(&r.summary)).unwrap_or(i64::MAX))
                .collect::<Int64Array>(),
        )
    };
    let floats = |f: fn(&TensorSummary) -> Option<f64>| -> ArrayRef {
        Arc::new(rows.iter().map(|r| f(&r.summary)).collect::<Float64Array>())
    };
    let identity = [
        repeated_str(run_id, n),
        ints(|r| r.point_index),
        strs(|r| &r.point_label),
        ints(|r| r.ordinal),
        strs(|r| &r.name),
        ints(|r| r.invocation_index),
    ];
    let site = (0..SiteLocation::COLUMNS.len()).map(site);
    let values: Vec<ArrayRef> = vec![
        Arc::new(
            rows.iter()
                .map(|r| r.site.materialized_by_probe)
                .collect::<BooleanArray>(),
        ),
        strs(|r| r.dtype),
        int64_lists(rows.iter().map(|r| r.shape.as_slice())),
        int64_lists(rows.iter().map(|r| r.stride.as_slice())),
        strs(|r| &r.source_device),
        ints(|r| r.nbytes),
        strs(|r| r.payload),
        Arc::new(
            rows.iter()
                .map(|r| r.digest.as_deref())
                .collect::<StringArray>(),
        ),
        count(|s| s.numel),
        count(|s| s.finite),
        count(|s| s.nan),
        count(|s| s.pos_inf),
        count(|s| s.neg_inf),
        count(|s| s.zero),
        floats(|s| s.min),
        floats(|s| s.max),
        floats(|s| s.mean),
        floats(|s| s.std),
        floats(|s| Some(s.l2)),
    ];
    let columns = identity.into_iter().chain(site).chain(values).collect();
    batch(Table::Observations.schema(), columns)
}

pub(super) fn points_batch(run_id: &str, rows: &[PointRow]) -> Result<RecordBatch> {
    let columns: Vec<ArrayRef> = vec![
        repeated_str(run_id, rows.len()),
        Arc::new(rows.iter().map(|r| r.point_index).collect::<Int64Array>()),
        Arc::new(
            rows.iter()
                .map(|r| Some(&*r.label))
                .collect::<StringArray>(),
        ),
        Arc::new(
            TimestampMicrosecondArray::from(rows.iter().map(|r| r.timestamp).collect::<Vec<_>>())
                .with_timezone("UTC"),
        ),
        Arc::new(rows.iter().map(|r| r.replay_index).collect::<Int64Array>()),
        Arc::new(
            rows.iter()
                .map(|r| r.observation_count)
                .collect::<Int64Array>(),
        ),
        Arc::new(
            rows.iter()
                .map(|r| Some(r.metadata.as_str()))
                .collect::<StringArray>(),
        ),
    ];
    batch(Table::Points.schema(), columns)
}

/// The run's row of the `runs` table.
pub fn run_batch(manifest: &Manifest) -> Result<RecordBatch> {
    let h = &manifest.header;
    let created = parse_rfc3339(&manifest.created_at).unwrap_or_default();
    let finished = manifest.finished_at.as_deref().and_then(parse_rfc3339);
    let json = |v: &serde_json::Value| {
        if v.is_null() {
            "{}".to_owned()
        } else {
            v.to_string()
        }
    };
    let kind = match h.kind {
        crate::manifest::RunKind::Tensor => "tensor",
        crate::manifest::RunKind::Memory => "memory",
    };
    let columns: Vec<ArrayRef> = vec![
        repeated_str(&h.run_id, 1),
        repeated_str(&h.name, 1),
        repeated_str(kind, 1),
        repeated_str(&h.execution, 1),
        Arc::new(StringArray::from(vec![h.group_id.as_deref()])),
        repeated_opt_i64(h.world_size, 1),
        Arc::new(TimestampMicrosecondArray::from(vec![created]).with_timezone("UTC")),
        Arc::new(TimestampMicrosecondArray::from(vec![finished]).with_timezone("UTC")),
        Arc::new(BooleanArray::from(vec![manifest.complete])),
        Arc::new(Int64Array::from(vec![manifest.point_count as i64])),
        Arc::new(Int64Array::from(vec![i64::from(FORMAT_VERSION)])),
        repeated_str(&manifest.producer, 1),
        repeated_str(&json(&h.provenance), 1),
        repeated_str(&json(&h.run_metadata), 1),
    ];
    batch(RUNS.clone(), columns)
}
