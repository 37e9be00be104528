//! What a comparison reads: value summaries, observation sites and metadata, points and subjects.

use serde::Serialize;

use super::*;

// ------------------------------------------------------------------------------ inputs

/// The summary of a value, as stored in runs: one type from recording to comparison.
pub use tcgd_tensor::TensorSummary;

/// Where a value came from when a compile pass placed the probe (whether the probe
/// materialised the value is a recording fact, not compared).
pub use tcgd_store::SiteLocation;

/// Everything about one recorded value except its bytes: the store's model of an
/// observation row, which the engine reads as is.
pub use tcgd_store::ObservationMeta;

impl ObservationSide {
    /// One side of a compared pair, as reports show it.
    pub(crate) fn of(meta: &ObservationMeta) -> ObservationSide {
        let d = &meta.descriptor;
        ObservationSide {
            order: d.order,
            dtype: d.dtype.torch_name().to_owned(),
            shape: d.shape.clone(),
            stride: d.stride.clone(),
            source_device: d.source_device.clone(),
            payload: d.payload.as_str().to_owned(),
            digest: meta.digest.clone(),
            summary: meta.summary,
            site: meta
                .site
                .as_ref()
                .map(tcgd_store::Site::location)
                .filter(|s| !s.is_empty()),
        }
    }
}

/// Which point (or snapshot) one side of a point comparison is.
#[cfg_attr(
    feature = "python",
    pyo3::pyclass(
        name = "PointInfo",
        module = "torch_cudagraph_debug._native",
        frozen,
        get_all,
        eq,
        from_py_object
    )
)]
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct PointRef {
    pub label: Option<String>,
    pub index: Option<i64>,
    pub replay_index: Option<i64>,
    pub snapshot_index: Option<i64>,
    pub timestamp: Option<String>,
}

impl PointRef {
    /// `'step3'`, `snapshot 2`, or `#4`: what a person calls this point.
    pub fn display(&self) -> String {
        match (&self.label, self.snapshot_index, self.index) {
            (Some(label), _, _) => format!("'{label}'"),
            (None, Some(s), _) => format!("snapshot {s}"),
            (None, None, Some(i)) => format!("#{i}"),
            (None, None, None) => "(unnamed)".to_owned(),
        }
    }
}

/// What one side of a run, series or group comparison is: a snapshot, a point, a run or a
/// run group.
#[cfg_attr(
    feature = "python",
    pyo3::pyclass(
        name = "ComparisonSubject",
        module = "torch_cudagraph_debug._native",
        frozen,
        get_all,
        eq,
        from_py_object
    )
)]
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Subject {
    /// `snapshot`, `point`, `run` or `run_group`.
    pub kind: String,
    pub name: Option<String>,
    pub path: Option<String>,
    pub run_id: Option<String>,
    pub rank: Option<i64>,
    pub world_size: Option<i64>,
    pub complete: Option<bool>,
    pub points: Option<usize>,
    pub detail: Option<String>,
}

impl Subject {
    pub fn display(&self) -> String {
        let mut s = self.kind.clone();
        if let Some(name) = &self.name {
            s.push_str(&format!(" '{name}'"));
        }
        let mut facts = Vec::new();
        if let Some(detail) = &self.detail {
            facts.push(detail.clone());
        }
        if let Some(rank) = self.rank {
            match self.world_size {
                Some(w) => facts.push(format!("rank {rank} of {w}")),
                None => facts.push(format!("rank {rank}")),
            }
        }
        if let Some(points) = self.points {
            facts.push(format!(
                "{points} point{}",
                if points == 1 { "" } else { "s" }
            ));
        }
        match self.complete {
            Some(true) => facts.push("complete".into()),
            Some(false) => facts.push("INCOMPLETE".into()),
            None => {}
        }
        if !facts.is_empty() {
            s.push_str(&format!(" ({})", facts.join(", ")));
        }
        if let Some(path) = &self.path {
            s.push_str(&format!(" at {path}"));
        }
        s
    }
}
