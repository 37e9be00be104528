//! Segments, their blocks (addresses inferred where the snapshot omits them) and stack frames.

use crate::error::{MemoryError, Result};
use crate::model::{Block, BlockState, Frame, FxNode, PoolId, Segment, DEFAULT_POOL};
use crate::tree::{Field, SnapshotTree};

use super::*;

impl<T: SnapshotTree> Ingester<'_, T> {
    pub(super) fn pool_id(&mut self, node: &T::Node, path: &dyn Fn() -> String) -> Result<PoolId> {
        let Some(value) = self.get(node, Field::SegmentPoolId, path)? else {
            self.warn_missing("segment.segment_pool_id");
            return Ok(DEFAULT_POOL);
        };
        let pair = (self.tree.seq_len(&value) == Some(2))
            .then(|| (self.tree.seq_item(&value, 0), self.tree.seq_item(&value, 1)));
        match pair {
            Some((Some(a), Some(b))) => Ok((
                self.as_int(&a, &|| format!("{}[0]", path()))?,
                self.as_int(&b, &|| format!("{}[1]", path()))?,
            )),
            _ => Err(self.wrong_type(&value, "a tuple of two ints", &path())),
        }
    }

    pub(super) fn segment(
        &mut self,
        node: &T::Node,
        device: i64,
        path: &dyn Fn(&str) -> String,
    ) -> Result<Segment> {
        let total_size = self.req_int(node, Field::TotalSize, &|| path("total_size"))?;
        let stream = self.req_int(node, Field::Stream, &|| path("stream"))?;
        let address = self.opt_int(
            node,
            Field::Address,
            &|| path("address"),
            Some("segment.address"),
        )?;
        let allocated_size = self.opt_int(
            node,
            Field::AllocatedSize,
            &|| path("allocated_size"),
            Some("segment.allocated_size"),
        )?;
        let active_size = self.opt_int(
            node,
            Field::ActiveSize,
            &|| path("active_size"),
            Some("segment.active_size"),
        )?;
        let requested_size = self.opt_int(
            node,
            Field::RequestedSize,
            &|| path("requested_size"),
            Some("segment.requested_size"),
        )?;
        let pool = self.pool_id(node, &|| path("segment_pool_id"))?;
        let segment_type = self
            .opt_str(
                node,
                Field::SegmentType,
                &|| path("segment_type"),
                Some("segment.segment_type"),
            )?
            .unwrap_or_else(|| "unknown".to_owned());
        let is_expandable = match self.get(node, Field::IsExpandable, &|| path("is_expandable"))? {
            Some(v) => self
                .tree
                .boolean(&v)
                .ok_or_else(|| self.wrong_type(&v, "bool", &path("is_expandable")))?,
            None => {
                self.warn_missing("segment.is_expandable");
                false
            }
        };
        for (name, value) in [
            ("total_size", Some(total_size)),
            ("address", address),
            ("allocated_size", allocated_size),
            ("active_size", active_size),
            ("requested_size", requested_size),
        ] {
            if let Some(v) = value.filter(|v| *v < 0) {
                return Err(self.negative(path(name), v));
            }
        }
        if let Some(a) = address {
            if a.checked_add(total_size).is_none() {
                return Err(self.overflow(
                    path("total_size"),
                    format!("the segment's end, address {a} + total_size {total_size}"),
                ));
            }
        }
        let stack = self.frames(node, &|| path("frames"), Some("segment.frames"))?;
        Ok(Segment {
            device,
            address,
            total_size,
            allocated_size,
            active_size,
            requested_size,
            stream,
            pool,
            segment_type,
            is_expandable,
            stack,
        })
    }

    /// Reads a segment's blocks; returns the bytes they cover.
    pub(super) fn blocks(
        &mut self,
        node: &T::Node,
        segment: &Segment,
        segment_index: u32,
        i: usize,
        out: &mut Vec<Block>,
    ) -> Result<i64> {
        let blocks_path = || format!("segments[{i}].blocks");
        let blocks = self.required(node, Field::Blocks, &blocks_path)?;
        let n = self.seq_len(&blocks, &blocks_path)?;
        let mut offset = 0i64;
        for j in 0..n {
            let path = |f: &str| format!("segments[{i}].blocks[{j}].{f}");
            let block = self.item(&blocks, j, &|| format!("segments[{i}].blocks[{j}]"))?;
            let size = self.req_int(&block, Field::Size, &|| path("size"))?;
            let state_node = self.required(&block, Field::State, &|| path("state"))?;
            let state = self
                .tree
                .with_str(&state_node, BlockState::parse)
                .ok_or_else(|| self.wrong_type(&state_node, "str", &path("state")))?
                .ok_or_else(|| MemoryError::Inconsistent {
                    field: path("state"),
                    reason: format!(
                        "unknown block state {:?}",
                        self.tree
                            .with_str(&state_node, str::to_owned)
                            .unwrap_or_default()
                    ),
                    torch: self.torch.clone(),
                })?;
            let reported = self.opt_int(
                &block,
                Field::Address,
                &|| path("address"),
                Some("block.address"),
            )?;
            let requested = self.opt_int(
                &block,
                Field::RequestedSize,
                &|| path("requested_size"),
                Some("block.requested_size"),
            )?;
            let requested_size = requested.unwrap_or(if state.is_active() { size } else { 0 });
            if size < 0 || requested_size < 0 {
                return Err(MemoryError::Inconsistent {
                    field: path("size"),
                    reason: format!("negative size ({size}, requested {requested_size})"),
                    torch: self.torch.clone(),
                });
            }
            if let Some(a) = reported {
                if a < 0 {
                    return Err(self.negative(path("address"), a));
                }
                if a.checked_add(size).is_none() {
                    return Err(self.overflow(
                        path("size"),
                        format!("the block's end, address {a} + size {size}"),
                    ));
                }
            }
            if state.is_active() && requested_size > size {
                return Err(MemoryError::Inconsistent {
                    field: path("requested_size"),
                    reason: format!("{requested_size} is larger than the block's size {size}"),
                    torch: self.torch.clone(),
                });
            }
            let stack = self.frames(&block, &|| path("frames"), Some("block.frames"))?;
            let (address, address_inferred) = match reported {
                Some(a) => (Some(a), false),
                // `offset <= total_size` (checked below for every earlier block) and the
                // segment's end fits, so this fits.
                None => (
                    segment.address.and_then(|base| base.checked_add(offset)),
                    true,
                ),
            };
            offset = offset.checked_add(size).ok_or_else(|| {
                self.overflow(
                    format!("segments[{i}].blocks"),
                    format!("the sum of the block sizes, {offset} + {size}"),
                )
            })?;
            if offset > segment.total_size {
                return Err(MemoryError::Inconsistent {
                    field: format!("segments[{i}].blocks"),
                    reason: format!(
                        "blocks add up to {offset} bytes by block {j}, more than the \
                         segment's total_size {}",
                        segment.total_size
                    ),
                    torch: self.torch.clone(),
                });
            }
            out.push(Block {
                segment: segment_index,
                address,
                address_inferred,
                size,
                requested_size,
                state,
                stack,
            });
        }
        Ok(offset)
    }

    /// The stack of `node`'s `frames`, deduplicated into the stack table; `None` when no
    /// frames were recorded.
    pub(super) fn frames(
        &mut self,
        node: &T::Node,
        path: &dyn Fn() -> String,
        warn: Option<&'static str>,
    ) -> Result<Option<u32>> {
        let Some(frames) = self.get(node, Field::Frames, path)? else {
            if let Some(what) = warn {
                self.warn_missing(what);
            }
            return Ok(None);
        };
        let n = self.seq_len(&frames, path)?;
        if n == 0 {
            return Ok(None);
        }
        let mut ids = std::mem::take(&mut self.frame_ids);
        ids.clear();
        for k in 0..n {
            let frame = self.item(&frames, k, &|| format!("{}[{k}]", path()))?;
            let identity = self.tree.identity(&frame);
            let id = match self.frame_cache.get(&identity) {
                Some(&id) if identity != usize::MAX => id,
                _ => {
                    let fpath = |f: &str| format!("{}[{k}].{f}", path());
                    let line = self.req_int(&frame, Field::Line, &|| fpath("line"))?;
                    let filename = self.req_str(&frame, Field::Filename, &|| fpath("filename"))?;
                    let name = self.req_str(&frame, Field::Name, &|| fpath("name"))?;
                    let mut fx =
                        |field: Field| self.opt_str(&frame, field, &|| fpath(field.key()), None);
                    let fx = FxNode::of(
                        fx(Field::FxNodeOp)?,
                        fx(Field::FxNodeName)?,
                        fx(Field::FxNodeTarget)?,
                        fx(Field::FxOriginalTrace)?,
                    );
                    let id = self.stacks.frame_id(Frame {
                        filename,
                        line,
                        name,
                        fx,
                    });
                    if identity != usize::MAX {
                        self.frame_cache.insert(identity, id);
                    }
                    id
                }
            };
            ids.push(id);
        }
        let stack = self.stacks.stack_id(&ids);
        self.frame_ids = ids;
        Ok(Some(stack))
    }
}
