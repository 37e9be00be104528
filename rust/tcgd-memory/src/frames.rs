//! Allocation and event stacks as reports show them: frames resolved from a run's
//! stack table, their display, fingerprint and the share of bytes they explain. Both
//! attribution and lifetimes read stacks through this module.

use serde::{Serialize, Serializer};

use crate::model::StackTable;

/// One frame of an allocation or event stack (attribution and lifetimes alike). The FX
/// fields are there when torch augmented the snapshot with the FX node a frame of
/// generated code ran for; they take part in the fingerprint, not in the location key.
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct StackFrame {
    pub filename: String,
    pub line: i64,
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fx_node_op: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fx_node_name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fx_node_target: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fx_original_trace: Option<String>,
}

impl StackFrame {
    pub fn of(frame: &crate::model::Frame) -> StackFrame {
        let fx = frame.fx.as_deref();
        let field = |f: fn(&crate::model::FxNode) -> &Option<String>| fx.and_then(|n| f(n).clone());
        StackFrame {
            filename: frame.filename.clone(),
            line: frame.line,
            name: frame.name.clone(),
            fx_node_op: field(|n| &n.op),
            fx_node_name: field(|n| &n.name),
            fx_node_target: field(|n| &n.target),
            fx_original_trace: field(|n| &n.original_trace),
        }
    }

    /// `file:line:function`, then the FX node when there is one: `[fx call_function
    /// addmm]`.
    pub fn display(&self) -> String {
        let location = format!("{}:{}:{}", self.filename, self.line, self.name);
        match (&self.fx_node_op, &self.fx_node_name) {
            (None, None) => location,
            (op, name) => format!(
                "{location} [fx {}]",
                [op.as_deref(), name.as_deref()]
                    .into_iter()
                    .flatten()
                    .collect::<Vec<_>>()
                    .join(" ")
            ),
        }
    }
}

/// A complete stack, innermost frame first; empty for blocks or events without frames
/// (the `<unattributed>` bucket).
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct StackFrames(pub Vec<StackFrame>);

pub const UNATTRIBUTED: &str = "<unattributed>";

/// How many frames a `display_stack(depth)` shows: every frame for `None`; the message
/// of a negative depth otherwise.
pub fn display_depth(depth: Option<i64>) -> std::result::Result<usize, String> {
    match depth {
        None => Ok(usize::MAX),
        Some(d) => usize::try_from(d)
            .map_err(|_| format!("depth must be a non-negative integer or None, got {d}")),
    }
}

impl StackFrames {
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Locations only (`file:line:function`, innermost first, joined by ` <- `), for
    /// reading; `<unattributed>` when there are no frames.
    pub fn key(&self) -> String {
        if self.0.is_empty() {
            return UNATTRIBUTED.to_owned();
        }
        self.0
            .iter()
            .map(|f| format!("{}:{}:{}", f.filename, f.line, f.name))
            .collect::<Vec<_>>()
            .join(" <- ")
    }

    /// What reports show of a stack: [`frames_at_depth`].
    pub fn key_at_depth(&self, depth: usize) -> String {
        frames_at_depth(&self.0, depth)
    }

    /// Canonical JSON: an array of `{"filename", "line", "name"}` objects.
    pub fn to_json(&self) -> String {
        serde_json::to_string(&self.0).unwrap_or_else(|_| "[]".to_owned())
    }

    /// [`frames_fingerprint`] of the frames.
    pub fn fingerprint(&self) -> String {
        frames_fingerprint(&self.0)
    }
}

impl Serialize for StackFrames {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        self.0.serialize(s)
    }
}

/// What reports show of a stack: its first `depth` frames (innermost first, joined by
/// ` <- `), each `file:line:function` with its FX node where torch gave one, and the
/// number of frames left out; `<unattributed>` when there are no frames.
pub fn frames_at_depth(frames: &[StackFrame], depth: usize) -> String {
    if frames.is_empty() {
        return UNATTRIBUTED.to_owned();
    }
    let shown = frames[..depth.min(frames.len())]
        .iter()
        .map(StackFrame::display)
        .collect::<Vec<_>>()
        .join(" <- ");
    match frames.len().saturating_sub(depth) {
        0 => shown,
        more => format!("{shown} (+{more} frames)"),
    }
}

/// FNV-1a (64 bits) of the frames' canonical JSON, as 16 hex digits: every frame field
/// takes part, so two stacks with the same locations but different names differ.
pub fn frames_fingerprint(frames: &[StackFrame]) -> String {
    let json = serde_json::to_string(frames).unwrap_or_else(|_| "[]".to_owned());
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in json.bytes() {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    format!("{hash:016x}")
}

/// The share of `total` bytes that allocation stacks explain: `1.0` when there are none,
/// since nothing is left to explain.
pub fn stack_share(attributed: i64, total: i64) -> f64 {
    if total == 0 {
        1.0
    } else {
        attributed as f64 / total as f64
    }
}

/// The frames of a stack id of `table` (none for `None` or an unknown id).
pub fn resolve(table: &StackTable, stack: Option<u32>) -> StackFrames {
    let Some(ids) = stack.and_then(|s| table.stack(s)) else {
        return StackFrames::default();
    };
    StackFrames(
        ids.iter()
            .filter_map(|&f| table.frame(f))
            .map(StackFrame::of)
            .collect(),
    )
}
