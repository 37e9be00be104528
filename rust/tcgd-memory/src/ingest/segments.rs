//! Segments, their blocks (addresses inferred where the snapshot omits them) and stack frames.

use crate::error::{MemoryError, Result};
use crate::model::{Block, BlockState, Frame, FxNode, Segment, DEFAULT_POOL};
use crate::tree::{Field, SnapshotTree};

use super::*;

impl<T: SnapshotTree> Ingester<'_, T> {
    pub(super) fn segment(
        &mut self,
        node: &T::Node,
        device: i64,
        path: &dyn Fn(&str) -> String,
    ) -> Result<Segment> {
        let total_size = self.req(node, Field::TotalSize, path, Self::as_int)?;
        let stream = self.req(node, Field::Stream, path, Self::as_int)?;
        // Sizes as torch reported them, each checked not to be negative.
        const SIZES: [(Field, &str); 4] = [
            (Field::Address, "segment.address"),
            (Field::AllocatedSize, "segment.allocated_size"),
            (Field::ActiveSize, "segment.active_size"),
            (Field::RequestedSize, "segment.requested_size"),
        ];
        let mut sizes = [None; 4];
        for (slot, (field, warn)) in sizes.iter_mut().zip(SIZES) {
            *slot = self.opt(node, field, path, Some(warn), Self::as_int)?;
        }
        let pool = self
            .opt(
                node,
                Field::SegmentPoolId,
                path,
                Some("segment.segment_pool_id"),
                Self::pool_pair,
            )?
            .unwrap_or(DEFAULT_POOL);
        let segment_type = self
            .opt(
                node,
                Field::SegmentType,
                path,
                Some("segment.segment_type"),
                Self::as_string,
            )?
            .unwrap_or_else(|| "unknown".to_owned());
        let is_expandable = self
            .opt(
                node,
                Field::IsExpandable,
                path,
                Some("segment.is_expandable"),
                Self::as_bool,
            )?
            .unwrap_or(false);
        let reported = SIZES.map(|(field, _)| field).into_iter().zip(sizes);
        for (field, value) in [(Field::TotalSize, Some(total_size))]
            .into_iter()
            .chain(reported)
        {
            if let Some(v) = value.filter(|v| *v < 0) {
                return Err(self.negative(path(field.key()), v));
            }
        }
        let [address, allocated_size, active_size, requested_size] = sizes;
        if let Some(a) = address {
            if a.checked_add(total_size).is_none() {
                return Err(self.overflow(
                    path("total_size"),
                    format!("the segment's end, address {a} + total_size {total_size}"),
                ));
            }
        }
        let stack = self.frames(node, path, Some("segment.frames"))?;
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
            let size = self.req(&block, Field::Size, &path, Self::as_int)?;
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
            let reported = self.opt(
                &block,
                Field::Address,
                &path,
                Some("block.address"),
                Self::as_int,
            )?;
            let requested = self.opt(
                &block,
                Field::RequestedSize,
                &path,
                Some("block.requested_size"),
                Self::as_int,
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
            let stack = self.frames(&block, &path, Some("block.frames"))?;
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
        at: &dyn Fn(&str) -> String,
        warn: Option<&'static str>,
    ) -> Result<Option<u32>> {
        let Some(frames) = self.optional(node, Field::Frames, at, warn)? else {
            return Ok(None);
        };
        let path = || at(Field::Frames.key());
        let n = self.seq_len(&frames, &path)?;
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
                    let line = self.req(&frame, Field::Line, &fpath, Self::as_int)?;
                    let filename = self.req(&frame, Field::Filename, &fpath, Self::as_string)?;
                    let name = self.req(&frame, Field::Name, &fpath, Self::as_string)?;
                    let mut fx =
                        |field: Field| self.opt(&frame, field, &fpath, None, Self::as_string);
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
