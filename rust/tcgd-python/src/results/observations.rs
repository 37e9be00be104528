//! An observation's comparison and what describes where it stands: point infos, subjects,
//! counts, series points, divergences.

use super::*;

frozen_class! {
    /// The verdict on one `(name, invocation_index)` pair: `status`, `kind` (how it was
    /// reached), `reason` (why, in one sentence), both descriptors (`None` on the side the
    /// key is missing from) and, when both full payloads were compared, the metrics.
    #[pyclass(name = "TensorObservationComparison", skip_from_py_object)]
    #[derive(Clone, PartialEq)]
    pub struct PyObservationComparison(ObservationComparison);
    |o, py| {
        /// Position in execution order within its point comparison.
        position: usize => o.position;
        name: String => o.name.clone();
        invocation_index: i64 => o.invocation_index;
        /// `(name, invocation_index)`: the stable key observations are aligned by.
        key: (String, i64) => (o.name.clone(), o.invocation_index);
        status: &'static str => o.status.as_str();
        ok: bool => o.status == Status::Match;
        /// `reference_only`, `candidate_only`, `metadata`, `digest`, `values` or `summary`.
        kind: &'static str => o.kind.as_str();
        reason: String => o.reason.clone();
        reference: Option<PySide> => o.reference.clone().map(PySide::from);
        candidate: Option<PySide> => o.candidate.clone().map(PySide::from);
        metrics: Option<PyMetrics> => o.metrics.clone().map(PyMetrics::from);
        mismatch_count: Option<u64> => o.metrics.as_ref().map(|m| m.mismatch_count);
        mismatch_fraction: Option<f64> => o.metrics.as_ref().map(|m| m.mismatch_fraction);
        max_abs_error: Option<f64> => o.metrics.as_ref().and_then(|m| m.max_abs_error);
        max_rel_error: Option<f64> => o.metrics.as_ref().and_then(|m| m.max_rel_error);
        mean_abs_error: Option<f64> => o.metrics.as_ref().and_then(|m| m.mean_abs_error);
        first_mismatch: Option<PyFirstMismatch> =>
            o.metrics.as_ref().and_then(|m| m.first_mismatch.clone()).map(PyFirstMismatch::from);
    }
    eq;
    to_dict(serde);
    repr(name, invocation_index, status, kind, reason);
}

frozen_class! {
    /// Which point (or snapshot) one side of a point comparison is.
    #[pyclass(name = "PointInfo", skip_from_py_object)]
    #[derive(Clone, PartialEq)]
    pub struct PyPointInfo(PointRef);
    |p, py| {
        label: Option<String> => p.label.clone();
        index: Option<i64> => p.index;
        replay_index: Option<i64> => p.replay_index;
        snapshot_index: Option<i64> => p.snapshot_index;
        timestamp: Option<String> => p.timestamp.clone();
    }
    eq;
    to_dict(serde);
    {
        fn __repr__(&self) -> String {
            format!("PointInfo({})", self.inner.display())
        }
    }
}

frozen_class! {
    /// What one side of a run, series or group comparison is.
    #[pyclass(name = "ComparisonSubject", skip_from_py_object)]
    #[derive(Clone, PartialEq)]
    pub struct PySubject(Subject);
    |s, py| {
        /// `snapshot`, `point`, `run` or `run_group`.
        kind: String => s.kind.clone();
        name: Option<String> => s.name.clone();
        path: Option<String> => s.path.clone();
        run_id: Option<String> => s.run_id.clone();
        rank: Option<i64> => s.rank;
        world_size: Option<i64> => s.world_size;
        complete: Option<bool> => s.complete;
        points: Option<usize> => s.points;
        detail: Option<String> => s.detail.clone();
    }
    eq;
    to_dict(serde);
    {
        fn __repr__(&self) -> String {
            format!("ComparisonSubject({})", self.inner.display())
        }
    }
}

frozen_class! {
    /// How many comparisons of each status.
    #[pyclass(name = "ComparisonCounts", skip_from_py_object)]
    #[derive(Clone, PartialEq)]
    pub struct PyCounts(Counts);
    |c, py| {
        total: usize => c.total;
        r#match: usize => c.matched;
        mismatch: usize => c.mismatched;
        inconclusive: usize => c.inconclusive;
    }
    eq;
    to_dict(serde);
    repr(total, r#match, mismatch, inconclusive);
}

frozen_class! {
    /// A point of a series: its position in `point_comparisons` and its identity in the
    /// run.
    #[pyclass(name = "SeriesPointRef", skip_from_py_object)]
    #[derive(Clone, PartialEq)]
    pub struct PySeriesPoint(SeriesPoint);
    |p, py| {
        point: usize => p.point;
        label: Option<String> => p.label.clone();
        index: Option<i64> => p.index;
        replay_index: Option<i64> => p.replay_index;
    }
    eq;
    repr(point, label, replay_index);
}

frozen_class! {
    /// When one observation of the reference point stopped matching across a series.
    #[pyclass(name = "SeriesDivergence", skip_from_py_object)]
    #[derive(Clone, PartialEq)]
    pub struct PyDivergence(Divergence);
    |d, py| {
        name: String => d.name.clone();
        invocation_index: i64 => d.invocation_index;
        /// The worst status over the series.
        status: &'static str => d.status.as_str();
        first_mismatch: Option<PySeriesPoint> => d.first_mismatch.clone().map(PySeriesPoint::from);
        first_inconclusive: Option<PySeriesPoint> =>
            d.first_inconclusive.clone().map(PySeriesPoint::from);
        mismatched_points: usize => d.mismatched_points;
        /// The largest `max_abs_error` over the series.
        max_abs_error: Option<f64> => d.max_abs_error;
    }
    eq;
    repr(name, invocation_index, status, mismatched_points);
}
