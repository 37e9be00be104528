//! The comparison report: the pruned view every format shows, and its text, JSON, CSV
//! and HTML renderings (a module each).

use std::fmt::Write as _;

use serde_json::{json, Map, Value};

use crate::compare::{Comparison, DeviceNode, Pair, PoolNode, Relation, StreamNode};
use crate::lifecycle::Lifecycle;
use crate::model::PoolId;
use crate::stats::{MemoryStats, PoolKind};

use super::document::pretty;
use super::*;

mod data;
mod html;
mod text;

pub(in crate::report) use data::*;
pub use data::{comparison_csv, comparison_json};
pub use html::comparison_html;
pub(in crate::report) use html::*;
pub use text::comparison_text;

pub(super) fn device_changed(d: &DeviceNode) -> bool {
    d.cuda_used.reference != d.cuda_used.candidate
        || d.residual.reference != d.residual.candidate
        || d.probe_slots.reference != d.probe_slots.candidate
        || d.allocator.changed()
        || d.lifecycle.is_some_and(|l| !l.is_zero())
}

/// The tree as it will be shown: pruned of unchanged rows (bottom-up, parents of changed
/// rows kept) and cut at `depth`.
pub fn view(comparison: &Comparison, options: ReportOptions) -> Comparison {
    let mut out = comparison.clone();
    let prune = !options.include_unchanged && comparison.relation != Relation::Single;
    for device in &mut out.devices {
        for pool in &mut device.pools {
            if prune {
                pool.streams
                    .retain(|s| s.stats.changed() || s.lifecycle.is_some_and(|l| !l.is_zero()));
            }
            if options.depth != Depth::Stream {
                pool.streams.clear();
            }
        }
        if prune {
            device.pools.retain(|p| {
                p.stats.changed()
                    || !p.streams.is_empty()
                    || p.lifecycle.is_some_and(|l| !l.is_zero())
            });
        }
        if options.depth == Depth::Device {
            device.pools.clear();
        }
    }
    if prune {
        out.devices
            .retain(|d| device_changed(d) || !d.pools.is_empty());
    }
    out
}

pub fn render_comparison(
    comparison: &Comparison,
    format: Format,
    options: ReportOptions,
) -> String {
    match format {
        Format::Text => comparison_text(comparison, options),
        Format::Json => pretty(&comparison_json(comparison, options)),
        Format::Csv => comparison_csv(comparison, options),
        Format::Html => comparison_html(comparison, options),
    }
}
