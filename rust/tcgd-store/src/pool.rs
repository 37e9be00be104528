//! Reusable read buffers for payload pages.
//!
//! Reading a payload allocates a buffer per page (up to 16 MiB). Fresh buffers of that size
//! come straight from the kernel, which zeroes and faults in every 4 KiB page: on gigabytes
//! of payloads that costs more than the read itself. A reader keeps the buffers its
//! payloads released and hands them out again, so a comparison that reads page after page
//! touches the same already-mapped memory.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use parquet::file::reader::{ChunkReader, Length};

/// Reads smaller than this get a plain allocation: the allocator reuses those by itself.
const POOLED_MIN_BYTES: usize = 1 << 20;

/// Free buffers, kept up to a byte budget; the pool lives as long as its reader and the
/// last buffer handed out.
pub struct BufferPool {
    free: Mutex<Vec<Vec<u8>>>,
    keep_bytes: usize,
}

impl BufferPool {
    pub fn new(keep_bytes: usize) -> Arc<BufferPool> {
        Arc::new(BufferPool {
            free: Mutex::new(Vec::new()),
            keep_bytes,
        })
    }

    /// A buffer of exactly `len` initialised bytes (contents unspecified), reused when one
    /// large enough is free.
    pub fn take(self: &Arc<Self>, len: usize) -> PooledBuf {
        let reused = {
            let mut free = self.free.lock().unwrap_or_else(|e| e.into_inner());
            // The smallest free buffer that fits, so large ones stay for large reads.
            let best = free
                .iter()
                .enumerate()
                .filter(|(_, b)| b.len() >= len)
                .min_by_key(|(_, b)| b.len())
                .map(|(i, _)| i);
            best.map(|i| free.swap_remove(i))
        };
        let bytes = reused.unwrap_or_else(|| vec![0u8; len]);
        PooledBuf {
            bytes,
            len,
            pool: Arc::clone(self),
        }
    }

    fn give_back(&self, bytes: Vec<u8>) {
        let mut free = self.free.lock().unwrap_or_else(|e| e.into_inner());
        let kept: usize = free.iter().map(Vec::len).sum();
        if kept + bytes.len() <= self.keep_bytes {
            free.push(bytes);
        }
    }
}

/// A buffer from a pool; returns there when dropped.
pub struct PooledBuf {
    bytes: Vec<u8>,
    len: usize,
    pool: Arc<BufferPool>,
}

impl PooledBuf {
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        &mut self.bytes[..self.len]
    }

    /// Shared, immutable bytes that return the buffer to the pool when the last
    /// reference goes.
    pub fn freeze(self) -> Bytes {
        Bytes::from_owner(self)
    }
}

impl AsRef<[u8]> for PooledBuf {
    fn as_ref(&self) -> &[u8] {
        &self.bytes[..self.len]
    }
}

impl Drop for PooledBuf {
    fn drop(&mut self) {
        self.pool.give_back(std::mem::take(&mut self.bytes));
    }
}

/// A Parquet file whose page reads land in pooled buffers.
pub struct PooledFile {
    file: File,
    len: u64,
    pool: Arc<BufferPool>,
}

impl PooledFile {
    pub fn new(file: File, pool: Arc<BufferPool>) -> std::io::Result<PooledFile> {
        let len = file.metadata()?.len();
        Ok(PooledFile { file, len, pool })
    }
}

impl Length for PooledFile {
    fn len(&self) -> u64 {
        self.len
    }
}

impl ChunkReader for PooledFile {
    type T = <File as ChunkReader>::T;

    fn get_read(&self, start: u64) -> parquet::errors::Result<Self::T> {
        self.file.get_read(start)
    }

    fn get_bytes(&self, start: u64, length: usize) -> parquet::errors::Result<Bytes> {
        if length < POOLED_MIN_BYTES {
            return self.file.get_bytes(start, length);
        }
        let mut buf = self.pool.take(length);
        self.file.read_exact_at(buf.as_mut_slice(), start)?;
        Ok(buf.freeze())
    }
}
