//! The small result classes: value summaries, sides, first mismatches, metrics.

use super::*;

frozen_class! {
    /// Counts and statistics of a value: `finite_count + nan_count + pos_inf_count +
    /// neg_inf_count == numel`, `zero_count` is part of `finite_count`; `min`, `max`, `mean`,
    /// `std` (population) and `l2_norm` cover the finite elements in float64 and are `None`
    /// when there is none (`l2_norm` is then 0).
    #[pyclass(name = "TensorValueSummary", skip_from_py_object)]
    #[derive(Clone, PartialEq)]
    pub struct PyValueSummary(TensorSummary);
    |s, py| {
        numel: u64 => s.numel;
        finite_count: u64 => s.finite;
        nan_count: u64 => s.nan;
        pos_inf_count: u64 => s.pos_inf;
        neg_inf_count: u64 => s.neg_inf;
        zero_count: u64 => s.zero;
        min: Option<f64> => s.min;
        max: Option<f64> => s.max;
        mean: Option<f64> => s.mean;
        std: Option<f64> => s.std;
        l2_norm: f64 => s.l2;
    }
    eq;
    // The fields by their names here (report.json keeps its own, shorter names).
    to_dict(Python);
    repr(all);
    {
        #[new]
        #[pyo3(signature = (
            *, numel, finite_count, nan_count, pos_inf_count, neg_inf_count, zero_count,
            min=None, max=None, mean=None, std=None, l2_norm=0.0
        ))]
        #[allow(clippy::too_many_arguments)]
        fn new(
            numel: u64,
            finite_count: u64,
            nan_count: u64,
            pos_inf_count: u64,
            neg_inf_count: u64,
            zero_count: u64,
            min: Option<f64>,
            max: Option<f64>,
            mean: Option<f64>,
            std: Option<f64>,
            l2_norm: f64,
        ) -> PyResult<PyValueSummary> {
            let counted = [finite_count, nan_count, pos_inf_count, neg_inf_count]
                .iter()
                .try_fold(0u64, |acc, &n| acc.checked_add(n));
            if counted != Some(numel) || zero_count > finite_count {
                return Err(BindingError::InvalidInput(format!(
                    "a TensorValueSummary needs finite_count + nan_count + pos_inf_count + \
                     neg_inf_count == numel and zero_count <= finite_count, got numel={numel}, \
                     finite_count={finite_count}, nan_count={nan_count}, \
                     pos_inf_count={pos_inf_count}, neg_inf_count={neg_inf_count}, \
                     zero_count={zero_count}"
                ))
                .into());
            }
            Ok(PyValueSummary::from(TensorSummary {
                numel,
                finite: finite_count,
                nan: nan_count,
                pos_inf: pos_inf_count,
                neg_inf: neg_inf_count,
                zero: zero_count,
                min,
                max,
                mean,
                std,
                l2: l2_norm,
            }))
        }
    }
}

frozen_class! {
    /// One side of a compared pair, as it was recorded (the observation's descriptor).
    #[pyclass(name = "ObservationSide", skip_from_py_object)]
    #[derive(Clone, PartialEq)]
    pub struct PySide(ObservationSide);
    |s, py| {
        order: i64 => s.order;
        dtype: String => s.dtype.clone();
        shape: PyResult<Bound<'py, PyTuple>> => tuple(py, s.shape.iter().copied());
        stride: PyResult<Bound<'py, PyTuple>> => tuple(py, s.stride.iter().copied());
        source_device: String => s.source_device.clone();
        /// `"full"` or `"summary"`.
        payload: String => s.payload.clone();
        digest: Option<String> => s.digest.clone();
        summary: Option<PyValueSummary> => s.summary.map(PyValueSummary::from);
        site: Option<PySite> => s.site.clone().map(PySite::from);
    }
    eq;
    to_dict(serde);
    repr(order, dtype, shape, stride, payload);
}

frozen_class! {
    /// The first element (row-major) that did not match: its flat index, coordinate and both
    /// values (integers exact).
    #[pyclass(name = "FirstMismatch", skip_from_py_object)]
    #[derive(Clone, PartialEq)]
    pub struct PyFirstMismatch(FirstMismatch);
    |m, py| {
        index: u64 => m.index;
        coordinate: PyResult<Bound<'py, PyTuple>> => tuple(py, m.coordinate.iter().copied());
        reference: PyResult<Bound<'py, PyAny>> => scalar(py, &m.reference);
        candidate: PyResult<Bound<'py, PyAny>> => scalar(py, &m.candidate);
    }
    eq;
    repr(index, coordinate);
}

frozen_class! {
    /// Element-wise metrics of one pair. Error metrics cover the elements where both values
    /// are finite (`finite_pairs`); they are `None` when there is none.
    #[pyclass(name = "ComparisonMetrics", skip_from_py_object)]
    #[derive(Clone, PartialEq)]
    pub struct PyMetrics(Metrics);
    |m, py| {
        /// `"float64"`, `"complex128"` or `"integer"`: the type values were compared in.
        compared_as: &'static str => m.compared_as;
        total: u64 => m.total;
        mismatch_count: u64 => m.mismatch_count;
        mismatch_fraction: f64 => m.mismatch_fraction;
        finite_pairs: u64 => m.finite_pairs;
        max_abs_error: Option<f64> => m.max_abs_error;
        max_rel_error: Option<f64> => m.max_rel_error;
        mean_abs_error: Option<f64> => m.mean_abs_error;
        first_mismatch: Option<PyFirstMismatch> =>
            m.first_mismatch.clone().map(PyFirstMismatch::from);
        cosine_similarity: Option<f64> => m.cosine_similarity;
        relative_l2_error: Option<f64> => m.relative_l2_error;
        /// Root mean square of `c - r` over the finite pairs.
        rmse: Option<f64> => m.rmse;
        max_ulp_distance: Option<u64> => m.max_ulp_distance;
        nan_introduced: u64 => m.nan_introduced;
        inf_introduced: u64 => m.inf_introduced;
    }
    eq;
    to_dict(serde);
    repr(mismatch_count, total, max_abs_error);
}
