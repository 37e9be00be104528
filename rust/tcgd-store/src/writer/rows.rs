//! What a committed group becomes: observation, point and payload rows, checked and
//! built into Arrow record batches.

use arrow::array::{Array, StringBuilder};
use arrow::buffer::{Buffer, OffsetBuffer};

use super::*;

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
    // Checked, not kept: nothing is built from the text.
    serde_json::from_str::<serde::de::IgnoredAny>(&point.metadata)
        .map_err(|e| StoreError::invalid("metadata", format!("not JSON: {e}")))?;
    for obs in observations {
        obs.validate()?;
    }
    // Sorted, a key that appears twice is next to itself: cheaper than hashing every name
    // for the few dozen observations of a point.
    let mut keys: Vec<(&str, i64)> = observations.iter().map(|o| o.key()).collect();
    keys.sort_unstable();
    if let Some(twice) = keys.windows(2).find(|w| w[0] == w[1]) {
        let (name, invocation) = twice[0];
        return Err(StoreError::invalid(
            "observation",
            format!(
                "('{name}', invocation {invocation}) appears twice in point '{}'",
                point.label
            ),
        ));
    }
    Ok(())
}

pub(super) fn digest_observation<'a>(input: &'a ObservationInput<'a>) -> Result<Digested<'a>> {
    match input.value {
        Value::Bytes(bytes) => Ok(Digested {
            input,
            summary: summarize(input.facts.dtype, bytes)?,
            digest: Some(content_digest(bytes)),
            nbytes: bytes.len() as i64,
        }),
        Value::Summary(summary) => Ok(Digested {
            input,
            summary,
            digest: None,
            nbytes: i64::try_from(summary.numel * input.facts.dtype.itemsize() as u64)
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

/// `value` `n` times: one copy of its bytes per row, written at once.
pub(super) fn repeated_str(value: &str, n: usize) -> ArrayRef {
    let offsets = OffsetBuffer::from_lengths(std::iter::repeat_n(value.len(), n));
    let bytes = Buffer::from(value.repeat(n).into_bytes());
    Arc::new(StringArray::new(offsets, bytes, None))
}

/// The `points` rows of a group, column by column: built into one batch at the commit.
#[derive(Default)]
pub(super) struct PointColumns {
    point_index: Vec<i64>,
    timestamp: Vec<i64>,
    replay_index: Vec<Option<i64>>,
    observation_count: Vec<i64>,
    metadata: StringBuilder,
}

impl PointColumns {
    pub(super) fn push(
        &mut self,
        point_index: u64,
        point: &PointInput,
        timestamp: i64,
        observation_count: usize,
    ) {
        self.point_index.push(point_index as i64);
        self.timestamp.push(timestamp);
        self.replay_index.push(point.replay_index);
        self.observation_count.push(observation_count as i64);
        self.metadata.append_value(&point.metadata);
    }

    /// The `points` batch of the group; `labels` are its points' labels, in order.
    pub(super) fn finish(mut self, run_id: &str, labels: &StringArray) -> Result<RecordBatch> {
        let columns: Vec<ArrayRef> = vec![
            repeated_str(run_id, labels.len()),
            Arc::new(Int64Array::from(self.point_index)),
            Arc::new(labels.clone()),
            Arc::new(TimestampMicrosecondArray::from(self.timestamp).with_timezone("UTC")),
            Arc::new(Int64Array::from(self.replay_index)),
            Arc::new(Int64Array::from(self.observation_count)),
            Arc::new(self.metadata.finish()),
        ];
        batch(Table::Points.schema(), columns)
    }
}
