//! Reading a run: only what the manifest lists, after checking that it is safe and whole.

use std::collections::HashMap;
use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use arrow::array::{Array, AsArray, BinaryViewArray, ByteView, RecordBatch};
use arrow::buffer::Buffer;

use arrow::compute::concat_batches;
use arrow::datatypes::Int64Type;
use parquet::arrow::arrow_reader::{RowSelection, RowSelector};

use crate::digest::{content_digest, format_digest};
use crate::error::{Result, StoreError};
use crate::manifest::{part_path, Manifest, PartEntry};
use crate::parts::{read_part, read_part_columns, read_payload_chunks};
use crate::pool::BufferPool;
use crate::schema::{Table, RUNS};
use crate::writer::run_batch;

/// Where a payload's chunks are: the part and its row numbers there.
#[derive(Debug, Clone)]
struct PayloadLocation {
    part: usize,
    rows: Vec<usize>,
}

pub struct RunReader {
    dir: PathBuf,
    manifest: Manifest,
    payload_index: OnceLock<Result<HashMap<String, PayloadLocation>, String>>,
    buffers: Arc<BufferPool>,
}

/// Payload buffers a reader keeps for reuse once released: enough for the payloads a
/// comparison holds at once (the pair being compared and the next pair being read).
const KEEP_BUFFER_BYTES: usize = 256 << 20;

/// One problem found by `validate()`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValidationIssue {
    pub path: PathBuf,
    pub problem: String,
}

impl RunReader {
    /// Opens a run: reads and checks the manifest, then checks that every listed part is
    /// present with the size it was committed with (a truncated part is caught here,
    /// before a query can read a wrong answer out of it).
    pub fn open(dir: &Path) -> Result<RunReader> {
        let manifest = Manifest::read(dir)?;
        for part in &manifest.parts {
            let path = part_path(dir, part);
            let meta = fs::symlink_metadata(&path).map_err(StoreError::io(&path))?;
            if !meta.is_file() {
                return Err(StoreError::UnsafePath {
                    manifest: dir.join(crate::manifest::MANIFEST_FILE),
                    part: part.path.clone(),
                });
            }
            if meta.len() != part.bytes {
                return Err(StoreError::CorruptPart {
                    path,
                    reason: format!(
                        "{} bytes on disk, {} committed (truncated or overwritten)",
                        meta.len(),
                        part.bytes
                    ),
                });
            }
        }
        Ok(RunReader {
            dir: dir.to_path_buf(),
            manifest,
            payload_index: OnceLock::new(),
            buffers: BufferPool::new(KEEP_BUFFER_BYTES),
        })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn manifest(&self) -> &Manifest {
        &self.manifest
    }

    /// Every committed row of `table`, in commit order, as one batch.
    pub fn table(&self, table: Table) -> Result<RecordBatch> {
        let mut batches = Vec::new();
        for part in self.manifest.parts_of(table) {
            batches.extend(read_part(&part_path(&self.dir, part), table)?);
        }
        concat_batches(&table.schema(), &batches)
            .map_err(|e| StoreError::invalid(table.dir_name(), e.to_string()))
    }

    /// The run's one-row table, built from the manifest (the authority), not from
    /// `run.parquet`.
    pub fn run_table(&self) -> Result<RecordBatch> {
        run_batch(&self.manifest)
    }

    pub fn runs_schema() -> arrow::datatypes::SchemaRef {
        RUNS.clone()
    }

    fn payload_parts(&self) -> Vec<&PartEntry> {
        self.manifest.parts_of(Table::Payloads).collect()
    }

    fn payload_index(&self) -> Result<&HashMap<String, PayloadLocation>> {
        let index = self
            .payload_index
            .get_or_init(|| self.build_payload_index().map_err(|e| e.to_string()));
        index.as_ref().map_err(|reason| StoreError::CorruptPart {
            path: self.dir.join(Table::Payloads.dir_name()),
            reason: reason.clone(),
        })
    }

    fn build_payload_index(&self) -> Result<HashMap<String, PayloadLocation>> {
        let mut index: HashMap<String, PayloadLocation> = HashMap::new();
        for (part_no, part) in self.payload_parts().into_iter().enumerate() {
            let path = part_path(&self.dir, part);
            let mut row = 0usize;
            for batch in read_part_columns(&path, Table::Payloads, &[0], None)? {
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
        let location =
            self.payload_index()?
                .get(digest)
                .ok_or_else(|| StoreError::PayloadMissing {
                    digest: digest.to_owned(),
                    run: self.dir.clone(),
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

    /// Checks everything: each part's file digest, each payload's digest, and that every
    /// full observation's payload is present. Returns the problems found (empty: valid).
    pub fn validate(&self) -> Result<Vec<ValidationIssue>> {
        let mut issues = Vec::new();
        for part in &self.manifest.parts {
            let path = part_path(&self.dir, part);
            match file_digest(&path) {
                Ok(d) if d == part.digest => {}
                Ok(d) => issues.push(ValidationIssue {
                    path,
                    problem: format!("file digest {d}, committed {}", part.digest),
                }),
                Err(e) => issues.push(ValidationIssue {
                    path,
                    problem: e.to_string(),
                }),
            }
        }
        if !issues.is_empty() {
            return Ok(issues);
        }
        let observations = self.table(Table::Observations)?;
        let payload_kind = named_strings(&observations, "payload")?;
        let digests = named_strings(&observations, "digest")?;
        let mut wanted: Vec<&str> = (0..observations.num_rows())
            .filter(|&i| payload_kind.value(i) == "full" && !digests.is_null(i))
            .map(|i| digests.value(i))
            .collect();
        wanted.sort_unstable();
        wanted.dedup();
        for digest in wanted {
            if let Err(e) = self.payload(digest) {
                issues.push(ValidationIssue {
                    path: self.dir.join(Table::Payloads.dir_name()),
                    problem: e.to_string(),
                });
            }
        }
        Ok(issues)
    }
}

/// Joined payloads are hashed in pieces this size, right after each is copied.
const HASH_PIECE_BYTES: usize = 1 << 20;

/// The bytes of value `i` of a view array, sharing the array's buffer.
fn view_buffer(data: &BinaryViewArray, i: usize) -> Buffer {
    let view = data.views()[i];
    let len = view as u32 as usize;
    if len <= 12 {
        // Short values live inside the view itself.
        return Buffer::from(data.value(i).to_vec());
    }
    let view = ByteView::from(view);
    data.data_buffers()[view.buffer_index as usize].slice_with_length(view.offset as usize, len)
}

fn rows_to_selection(rows: &[usize], total: usize) -> RowSelection {
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

fn file_digest(path: &Path) -> Result<String> {
    let mut file = fs::File::open(path).map_err(StoreError::io(path))?;
    let mut hasher = blake3::Hasher::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = file.read(&mut buf).map_err(StoreError::io(path))?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    Ok(format!("blake3:{}", hasher.finalize().to_hex()))
}

fn named_strings<'a>(batch: &'a RecordBatch, name: &str) -> Result<&'a arrow::array::StringArray> {
    batch
        .column_by_name(name)
        .and_then(|c| c.as_string_opt::<i32>())
        .ok_or_else(|| StoreError::invalid(name, "column missing from observations"))
}
