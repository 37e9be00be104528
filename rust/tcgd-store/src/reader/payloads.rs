//! Payloads by digest: where their chunks are, read with row selections, joined and checked.

use std::collections::HashMap;

use arrow::array::{AsArray, BinaryViewArray, ByteView};
use arrow::buffer::Buffer;

use arrow::datatypes::Int64Type;
use parquet::arrow::arrow_reader::{RowSelection, RowSelector};

use crate::digest::{content_digest, format_digest};
use crate::error::{Result, StoreError};
use crate::manifest::{part_path, PartEntry};
use crate::parts::{read_part_columns, read_payload_chunks};
use crate::schema::{Table, PAYLOAD_DIGEST_COLUMN};

use super::*;

/// Where a payload's chunks are: the part and its row numbers there.
#[derive(Debug, Clone)]
pub(super) struct PayloadLocation {
    part: usize,
    rows: Vec<usize>,
}

impl RunReader {
    pub(super) fn payload_parts(&self) -> Vec<&PartEntry> {
        self.manifest.parts_of(Table::Payloads).collect()
    }

    pub(super) fn payload_index(&self) -> Result<&HashMap<String, PayloadLocation>> {
        let index = self
            .payload_index
            .get_or_init(|| self.build_payload_index().map_err(|e| e.to_string()));
        index.as_ref().map_err(|reason| StoreError::CorruptPart {
            path: self.dir.join(Table::Payloads.dir_name()),
            reason: reason.clone(),
        })
    }

    pub(super) fn build_payload_index(&self) -> Result<HashMap<String, PayloadLocation>> {
        let mut index: HashMap<String, PayloadLocation> = HashMap::new();
        for (part_no, part) in self.payload_parts().into_iter().enumerate() {
            let path = part_path(&self.dir, part);
            let mut row = 0usize;
            for batch in read_part_columns(&path, Table::Payloads, &[PAYLOAD_DIGEST_COLUMN], None)?
            {
                let digests = batch.column(0).as_string::<i32>();
                for digest in digests.iter() {
                    let digest = digest.unwrap_or_default();
                    index
                        .entry(digest.to_owned())
                        .or_insert_with(|| PayloadLocation {
                            part: part_no,
                            rows: Vec::new(),
                        })
                        .rows
                        .push(row);
                    row += 1;
                }
            }
        }
        Ok(index)
    }

    /// The bytes of one payload, checked against its digest. A one-chunk payload stays in
    /// the buffer its page was read into; a larger one is joined into one buffer, hashed
    /// piece by piece while the piece is still in cache.
    pub fn payload(&self, digest: &str) -> Result<Buffer> {
        let location = self.payload_index()?.get(digest).ok_or_else(|| {
            match self
                .damage
                .iter()
                .find(|d| self.unreadable_payloads.contains(digest) && d.table == "payloads")
            {
                Some(damaged) => StoreError::CorruptPart {
                    path: damaged.path.clone(),
                    reason: format!("payload {digest} was stored in this damaged part"),
                },
                None => StoreError::PayloadMissing {
                    digest: digest.to_owned(),
                    run: self.dir.clone(),
                },
            }
        })?;
        let parts = self.payload_parts();
        let part = parts[location.part];
        let path = part_path(&self.dir, part);
        let selection = rows_to_selection(&location.rows, part.rows as usize);
        let mut chunks: Vec<(i64, i64, i64, Buffer)> = Vec::new();
        for batch in read_payload_chunks(&path, selection, &self.buffers)? {
            let index = batch.column(0).as_primitive::<Int64Type>();
            let count = batch.column(1).as_primitive::<Int64Type>();
            let total = batch.column(2).as_primitive::<Int64Type>();
            let data = batch.column(3).as_binary_view();
            for i in 0..batch.num_rows() {
                chunks.push((
                    index.value(i),
                    count.value(i),
                    total.value(i),
                    view_buffer(data, i),
                ));
            }
        }
        chunks.sort_by_key(|c| c.0);
        let expected_chunks = chunks.first().map_or(0, |c| c.1);
        let total = chunks.first().map_or(0, |c| c.2);
        let sequence_ok = chunks.len() as i64 == expected_chunks
            && chunks.iter().enumerate().all(|(i, c)| c.0 == i as i64);
        if !sequence_ok {
            return Err(StoreError::corrupt(&path)(format!(
                "payload {digest} has {} of {expected_chunks} chunks",
                chunks.len()
            )));
        }
        let (bytes, actual) = if chunks.len() == 1 {
            let only = chunks.swap_remove(0).3;
            let actual = content_digest(&only);
            (only, actual)
        } else {
            let mut hasher = blake3::Hasher::new();
            let joined_len: usize = chunks.iter().map(|c| c.3.len()).sum();
            let mut joined = self.buffers.take(joined_len);
            let mut at = 0;
            for (_, _, _, chunk) in &chunks {
                for piece in chunk.chunks(HASH_PIECE_BYTES) {
                    joined.as_mut_slice()[at..at + piece.len()].copy_from_slice(piece);
                    hasher.update(piece);
                    at += piece.len();
                }
            }
            (
                Buffer::from(joined.freeze()),
                format_digest(&hasher.finalize()),
            )
        };
        if actual != digest || bytes.len() as i64 != total {
            return Err(StoreError::DigestMismatch {
                digest: digest.to_owned(),
                actual,
                path,
            });
        }
        Ok(bytes)
    }
}

/// Joined payloads are hashed in pieces this size, right after each is copied.
pub(super) const HASH_PIECE_BYTES: usize = 1 << 20;

/// The bytes of value `i` of a view array, sharing the array's buffer.
pub(super) fn view_buffer(data: &BinaryViewArray, i: usize) -> Buffer {
    let view = data.views()[i];
    let len = view as u32 as usize;
    if len <= 12 {
        // Short values live inside the view itself.
        return Buffer::from(data.value(i).to_vec());
    }
    let view = ByteView::from(view);
    data.data_buffers()[view.buffer_index as usize].slice_with_length(view.offset as usize, len)
}

pub(super) fn rows_to_selection(rows: &[usize], total: usize) -> RowSelection {
    let mut selectors = Vec::new();
    let mut at = 0usize;
    for &row in rows {
        if row > at {
            selectors.push(RowSelector::skip(row - at));
        }
        selectors.push(RowSelector::select(1));
        at = row + 1;
    }
    if total > at {
        selectors.push(RowSelector::skip(total - at));
    }
    RowSelection::from(selectors)
}
