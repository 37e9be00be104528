//! What the harvester hands over: values, points, where they go.

use crate::summary::DeviceRecord;

use super::*;

/// A probed value as a launch needs it: device address, element count, dtype.
#[derive(Debug, Clone, Copy)]
pub struct SiteValue {
    pub src: u64,
    pub numel: u64,
    pub dtype: DType,
}

/// One value the harvester hands over.
#[derive(Debug, Clone)]
pub enum HarvestedData {
    Summary(DeviceRecord),
    /// The value's bytes; `full`: keep them (else only their host summary is kept).
    Bytes {
        bytes: Vec<u8>,
        full: bool,
    },
}

#[derive(Debug, Clone)]
pub struct HarvestedValue {
    /// The index `register_site` returned.
    pub site: usize,
    pub replay: u64,
    pub data: HarvestedData,
}

#[derive(Debug, Clone, PartialEq)]
pub enum PointKind {
    /// A point the host closed (one call, or a named block).
    Call,
    /// Full values of one past point from the history rings, landed by a trigger.
    Flight {
        /// Label of the point whose summary fired (or the user's dump).
        trigger_label: String,
        /// Why: "nonfinite", "abs_max" or the user's reason.
        reason: String,
    },
}

/// Whatever the caller attached to a point when closing it (host-side observations),
/// handed back with the harvested point.
pub type Attachment = Box<dyn std::any::Any + Send>;

pub struct HarvestedPoint {
    pub number: u32,
    pub label: String,
    pub metadata: String,
    pub kind: PointKind,
    pub values: Vec<HarvestedValue>,
    /// (capture, first replay, last replay) of every graph that replayed in the point.
    pub replays: Vec<(usize, u64, u64)>,
    pub attachment: Option<Attachment>,
}

/// Where harvested points go (the run writer); an error stops the recorder.
pub type Sink = Box<dyn FnMut(HarvestedPoint) -> std::result::Result<(), String> + Send>;
