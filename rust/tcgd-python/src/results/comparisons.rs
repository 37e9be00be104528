//! The comparison results: snapshots, points, runs, point series, ranks, run groups.

use pyo3::PyClass;
use tcgd_compare::report::{to_html_with, to_text_with};

use super::*;

pub(super) fn failed(py: Python<'_>, message: String) -> PyErr {
    match py
        .import("torch_cudagraph_debug.errors")
        .and_then(|m| m.getattr("ComparisonFailedError"))
        .and_then(|class| class.call1((message,)))
    {
        Ok(error) => PyErr::from_value(error),
        Err(e) => e,
    }
}

/// One argument that has two names (ours and the reference's): the one given, an error
/// when both are.
fn either<'a, 'py>(
    name: &str,
    value: Option<&'a Bound<'py, PyAny>>,
    other_name: &str,
    other: Option<&'a Bound<'py, PyAny>>,
) -> PyResult<Option<&'a Bound<'py, PyAny>>> {
    match (value, other) {
        (Some(_), Some(_)) => Err(BindingError::InvalidInput(format!(
            "{name} and {other_name} are the same argument; pass one"
        ))
        .into()),
        (value, other) => Ok(value.or(other)),
    }
}

/// The `n` of the `worst_*` methods: `None` (all) or a count.
fn worst_count(n: Option<&Bound<'_, PyAny>>) -> PyResult<Option<usize>> {
    Ok(option(n, None, |v| {
        count(v).map(Some).ok_or_else(|| {
            BindingError::InvalidInput(format!(
                "n must be None or an integer >= 0, got {}",
                py_repr(v)
            ))
        })
    })?)
}

/// The text or HTML report `render` writes of `c` (`to_text` and `to_html`), the rows
/// chosen by `limit` and `include_unchanged`.
fn report(
    py: Python<'_>,
    c: &Comparison,
    render: fn(&Comparison, Option<usize>, Option<bool>) -> String,
    limit: Option<usize>,
    include_unchanged: bool,
) -> PyResult<String> {
    guard(py, || Ok(render(c, limit, Some(include_unchanged))))
}

/// A finished comparison and the two things compared, where the caller gave them as
/// Python objects (a point series' candidate run, a group comparison's groups): the
/// reference's results hold their inputs. Reads as the `Comparison` it wraps.
pub struct Compared {
    comparison: Arc<Comparison>,
    reference_input: Option<Py<PyAny>>,
    candidate_input: Option<Py<PyAny>>,
}

impl Compared {
    pub(crate) fn new(
        comparison: Arc<Comparison>,
        reference_input: Option<Py<PyAny>>,
        candidate_input: Option<Py<PyAny>>,
    ) -> Compared {
        Compared {
            comparison,
            reference_input,
            candidate_input,
        }
    }

    /// The comparison, shared (for work done with the interpreter released).
    fn shared(&self) -> Arc<Comparison> {
        Arc::clone(&self.comparison)
    }

    /// One side's object as given, `None` when it was not given as an object.
    fn subject(py: Python<'_>, side: &Option<Py<PyAny>>) -> Option<Py<PyAny>> {
        side.as_ref().map(|o| o.clone_ref(py))
    }
}

impl std::ops::Deref for Compared {
    type Target = Comparison;
    fn deref(&self) -> &Comparison {
        &self.comparison
    }
}

impl From<Arc<Comparison>> for Compared {
    fn from(comparison: Arc<Comparison>) -> Compared {
        Compared::new(comparison, None, None)
    }
}

// ------------------------------------------------------------------ the result classes
//
// Every result is a `TensorComparisonResult` (what any comparison has and does); a result
// of one point pair (snapshots, points) is also a `_TensorPointPairComparison` and a result
// of two wholes (runs, series, run groups) a `_TensorWholeComparison`. The concrete classes
// add their own getters. Subclass methods reach the comparison through `as_super()`.

/// What every tensor comparison result has and does: its kind, status, counts, options,
/// warnings, observations, issues and reports. The concrete results derive from it.
#[pyclass(
    name = "TensorComparisonResult",
    module = "torch_cudagraph_debug._native",
    frozen,
    subclass,
    skip_from_py_object
)]
pub struct PyComparisonResult {
    inner: Compared,
}

impl PyComparisonResult {
    fn new(c: Compared) -> PyClassInitializer<Self> {
        PyClassInitializer::from(PyComparisonResult { inner: c })
    }
}

#[pymethods]
impl PyComparisonResult {
    /// `snapshots`, `points`, `runs`, `point_series` or `run_groups`.
    #[getter]
    fn kind(&self) -> &'static str {
        self.inner.kind.as_str()
    }
    /// `match`, `mismatch` or `inconclusive` (mismatch > inconclusive > match).
    #[getter]
    fn status(&self) -> &'static str {
        self.inner.status.as_str()
    }
    #[getter]
    fn ok(&self) -> bool {
        self.inner.ok
    }
    #[getter]
    fn conclusive(&self) -> bool {
        self.inner.conclusive
    }
    #[getter]
    fn options(&self) -> PyOptions {
        PyOptions::from(self.inner.options.clone())
    }
    /// Observation comparisons by status, over every point (and rank).
    #[getter]
    fn counts(&self) -> Counts {
        self.inner.counts
    }
    /// Point comparisons by status, over every rank.
    #[getter]
    fn point_counts(&self) -> Counts {
        self.inner.point_counts
    }
    #[getter]
    fn warnings<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        tuple(py, self.inner.warnings.iter())
    }
    /// The first problem in execution order, or `None` when everything matched.
    #[getter]
    fn first_issue(&self, py: Python<'_>) -> PyResult<Option<PyIssue>> {
        issue_of(py, &self.inner)
    }
    /// Every observation comparison, in execution order (points, then ranks).
    #[getter]
    fn observations<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        observations_of(py, &self.inner)
    }

    /// The `n` worst observation comparisons (all when `None`), worst first: by status,
    /// then the share of elements that differ, then the largest absolute and relative
    /// errors; ties keep execution order. `limit` is the reference's name for `n`.
    #[pyo3(signature = (n=None, *, limit=None))]
    fn worst_observation_comparisons(
        &self,
        py: Python<'_>,
        n: Option<&Bound<'_, PyAny>>,
        limit: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Vec<PyObservationComparison>> {
        let n = worst_count(either("n", n, "limit", limit)?)?;
        self.inner
            .worst(n)
            .into_iter()
            .map(|(_, _, o)| PyObservationComparison::of(py, o))
            .collect()
    }
    /// `worst_observation_comparisons(n)` as issues: each names its rank, the label and
    /// comparison of its point, and the observation comparison.
    #[pyo3(signature = (n=None))]
    fn worst_issues(&self, py: Python<'_>, n: Option<&Bound<'_, PyAny>>) -> PyResult<Vec<PyIssue>> {
        let n = worst_count(n)?;
        self.inner
            .worst_issues(n)
            .into_iter()
            .map(|issue| issue_at(py, &self.inner, issue))
            .collect()
    }
    /// Raises `ComparisonFailedError` unless the status is `match` (an inconclusive
    /// comparison proves nothing, so it fails too).
    fn assert_ok(&self, py: Python<'_>) -> PyResult<()> {
        let c = &self.inner;
        if c.ok {
            return Ok(());
        }
        let n = &c.counts;
        let first = c.first_issue.as_ref();
        Err(failed(
            py,
            format!(
                "{}: {} ({} of {} observations mismatch, {} inconclusive); first issue: {}",
                c.kind.title(),
                c.status.as_str(),
                n.mismatch,
                n.total,
                n.inconclusive,
                first.map_or("none", |i| i.description.as_str())
            ),
        ))
    }
    /// The text report. `include_unchanged=False` leaves out the rows of matching ranks,
    /// points and observations; `limit` (default: the options') caps rows per table.
    #[pyo3(signature = (include_unchanged=true, limit=None))]
    fn to_text(
        &self,
        py: Python<'_>,
        include_unchanged: bool,
        limit: Option<usize>,
    ) -> PyResult<String> {
        report(py, &self.inner, to_text_with, limit, include_unchanged)
    }
    /// A standalone HTML report (charts as inline SVG, no script), rows chosen as
    /// `to_text` chooses them.
    #[pyo3(signature = (include_unchanged=true, limit=None))]
    fn to_html(
        &self,
        py: Python<'_>,
        include_unchanged: bool,
        limit: Option<usize>,
    ) -> PyResult<String> {
        report(py, &self.inner, to_html_with, limit, include_unchanged)
    }
    /// The complete comparison (the content of report.json); non-finite floats are the
    /// strings "nan", "inf" and "-inf".
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        serde_to_py(py, &*self.inner)
    }
    /// report.json's text.
    fn to_json(&self, py: Python<'_>) -> PyResult<String> {
        guard(py, || {
            tcgd_compare::report::to_json(&self.inner).map_err(BindingError::from)
        })
    }
    /// `{file name: CSV text}` for each table that applies.
    fn csv_tables<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let tables = PyDict::new(py);
        for (name, text) in tcgd_compare::report::csv_tables(&self.inner) {
            tables.set_item(name, text)?;
        }
        Ok(tables)
    }
    /// Writes report.txt, report.json, report.html and the CSV tables into `output_dir`
    /// and returns `{format: path}` (`text`, `json`, `html`, and each CSV by its stem). A
    /// directory that already holds anything needs `overwrite=True`, which replaces only
    /// the files this method writes.
    #[pyo3(signature = (output_dir, overwrite=false, *, include_unchanged=true, limit=None))]
    fn write<'py>(
        &self,
        py: Python<'py>,
        output_dir: std::path::PathBuf,
        overwrite: bool,
        include_unchanged: bool,
        limit: Option<usize>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let written = guard(py, || {
            let c = self.inner.shared();
            py.detach(move || {
                tcgd_compare::report::write_with(
                    &c,
                    &output_dir,
                    overwrite,
                    limit,
                    Some(include_unchanged),
                )
            })
            .map_err(BindingError::from)
        })?;
        crate::classes::paths_by_format(py, written)
    }
    fn __str__(&self) -> String {
        tcgd_compare::report::to_text_with(&self.inner, None, Some(true))
    }
    fn __repr__(slf: &Bound<'_, Self>) -> PyResult<String> {
        let c = &slf.get().inner;
        Ok(format!(
            "{}(status='{}', observations={}, mismatch={}, inconclusive={})",
            slf.get_type().name()?,
            c.status.as_str(),
            c.counts.total,
            c.counts.mismatch,
            c.counts.inconclusive
        ))
    }
}

/// A result of a single point pair (snapshots or points): the pair's sides and
/// observations.
#[pyclass(
    name = "_TensorPointPairComparison",
    module = "torch_cudagraph_debug._native",
    extends = PyComparisonResult,
    frozen,
    subclass,
    skip_from_py_object
)]
pub struct PyPointPair;

impl PyPointPair {
    /// The point pair of a result of this class.
    fn pair<'a>(slf: &'a Bound<'_, Self>) -> PyResult<&'a PointComparison> {
        single(&slf.as_super().get().inner)
    }
}

#[pymethods]
impl PyPointPair {
    /// The reference point or snapshot (`None` for a point recorded only in the
    /// candidate, within a run comparison).
    #[getter]
    fn reference(slf: &Bound<'_, Self>) -> PyResult<Option<PointRef>> {
        Ok(Self::pair(slf)?.reference.clone())
    }
    #[getter]
    fn candidate(slf: &Bound<'_, Self>) -> PyResult<Option<PointRef>> {
        Ok(Self::pair(slf)?.candidate.clone())
    }
    /// Position among the point comparisons of the comparison it belongs to.
    #[getter]
    fn position(slf: &Bound<'_, Self>) -> PyResult<usize> {
        Ok(Self::pair(slf)?.position)
    }
    /// Why a one-sided point could not be compared; `None` otherwise.
    #[getter]
    fn reason(slf: &Bound<'_, Self>) -> PyResult<Option<String>> {
        Ok(Self::pair(slf)?.reason.clone())
    }
    /// Reference order, then candidate-only keys.
    #[getter]
    fn observation_comparisons<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyTuple>> {
        observations_of(slf.py(), &slf.as_super().get().inner)
    }
    /// `{(name, invocation_index): TensorObservationComparison}`.
    #[getter]
    fn by_key<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyDict>> {
        by_key(slf.py(), Self::pair(slf)?)
    }
    /// This comparison, as the one point pair of `point_comparisons`.
    #[getter]
    fn points<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyTuple>> {
        let c = &slf.as_super().get().inner;
        tuple(slf.py(), [point_view(slf.py(), c, single(c)?)?])
    }
    /// Observation comparisons that matched (`counts.match`).
    #[getter]
    fn matched_count(slf: &Bound<'_, Self>) -> usize {
        slf.as_super().get().inner.counts.r#match
    }
    #[getter]
    fn mismatched_count(slf: &Bound<'_, Self>) -> usize {
        slf.as_super().get().inner.counts.mismatch
    }
    #[getter]
    fn inconclusive_count(slf: &Bound<'_, Self>) -> usize {
        slf.as_super().get().inner.counts.inconclusive
    }

    /// Each observation comparison as its line of observations.csv (`to_row()`), matches
    /// left out with `include_unchanged=False`.
    #[pyo3(signature = (*, include_unchanged=true))]
    fn observation_comparison_rows<'py>(
        slf: &Bound<'py, Self>,
        include_unchanged: bool,
    ) -> PyResult<Vec<Bound<'py, PyDict>>> {
        Self::pair(slf)?
            .observations
            .iter()
            .filter(|o| include_unchanged || o.status != Status::Match)
            .map(|o| {
                crate::classes::csv_row_dict(
                    slf.py(),
                    tcgd_compare::report::csv::OBSERVATION_COLUMNS,
                    tcgd_compare::report::csv::observation_cells(o),
                )
            })
            .collect()
    }
    /// The comparison of observation `(name, invocation_index)`.
    #[pyo3(signature = (name, invocation_index=0))]
    fn observation(
        slf: &Bound<'_, Self>,
        name: &str,
        invocation_index: i64,
    ) -> PyResult<PyObservationComparison> {
        observation_of(slf.py(), Self::pair(slf)?, name, invocation_index)
    }
}

/// Two probe snapshots compared observation by observation.
#[pyclass(
    name = "TensorSnapshotComparison",
    module = "torch_cudagraph_debug._native",
    extends = PyPointPair,
    frozen,
    skip_from_py_object
)]
pub struct PySnapshotComparison;

/// Two points compared observation by observation; also each point pair of a run, series
/// or group comparison.
#[pyclass(
    name = "TensorPointComparison",
    module = "torch_cudagraph_debug._native",
    extends = PyPointPair,
    frozen,
    skip_from_py_object
)]
pub struct PyPointComparison;

fn by_key<'py>(py: Python<'py>, point: &PointComparison) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    for o in &point.observations {
        d.set_item(
            (o.name.clone(), o.invocation_index),
            PyObservationComparison::of(py, o)?,
        )?;
    }
    Ok(d)
}

fn observation_of(
    py: Python<'_>,
    point: &PointComparison,
    name: &str,
    invocation_index: i64,
) -> PyResult<PyObservationComparison> {
    let found = point
        .observations
        .iter()
        .find(|o| o.name == name && o.invocation_index == invocation_index);
    if let Some(o) = found {
        return PyObservationComparison::of(py, o);
    }
    Err({
        let keys: Vec<String> = point
            .observations
            .iter()
            .map(|o| format!("({}, {})", quoted(&o.name), o.invocation_index))
            .collect();
        PyKeyError::new_err(format!(
            "no observation ({}, {invocation_index}) in this comparison; keys: [{}]",
            quoted(name),
            keys.join(", ")
        ))
    })
}

/// A result of two wholes compared (runs, point series, run groups): their subjects.
#[pyclass(
    name = "_TensorWholeComparison",
    module = "torch_cudagraph_debug._native",
    extends = PyComparisonResult,
    frozen,
    subclass,
    skip_from_py_object
)]
pub struct PyWhole;

#[pymethods]
impl PyWhole {
    #[getter]
    fn reference(slf: &Bound<'_, Self>) -> Subject {
        slf.as_super().get().inner.reference.clone()
    }
    #[getter]
    fn candidate(slf: &Bound<'_, Self>) -> Subject {
        slf.as_super().get().inner.candidate.clone()
    }
}

/// The comparison a result of two wholes holds (`slf` is a subclass of
/// `_TensorWholeComparison`).
fn whole<'a, T: PyClass<BaseType = PyWhole>>(slf: &'a Bound<'_, T>) -> &'a Compared {
    &slf.as_super().as_super().get().inner
}

/// The initializer of a point pair result class `T` over `c`.
fn pair_result<T: PyClass<BaseType = PyPointPair>>(c: Compared, class: T) -> PyClassInitializer<T> {
    PyComparisonResult::new(c)
        .add_subclass(PyPointPair)
        .add_subclass(class)
}

/// The initializer of a result class `T` of two wholes over `c`.
fn whole_result<T: PyClass<BaseType = PyWhole>>(c: Compared, class: T) -> PyClassInitializer<T> {
    PyComparisonResult::new(c)
        .add_subclass(PyWhole)
        .add_subclass(class)
}

pub(super) fn point_views<'py>(py: Python<'py>, c: &Comparison) -> PyResult<Bound<'py, PyTuple>> {
    let views = c
        .points
        .iter()
        .map(|p| point_view(py, c, p))
        .collect::<PyResult<Vec<_>>>()?;
    tuple(py, views)
}

/// The point comparison whose side (as `side` picks it) is labelled `label`.
fn point_labelled(
    py: Python<'_>,
    c: &Comparison,
    label: &str,
    side: impl Fn(&PointComparison) -> Option<&PointRef>,
) -> PyResult<Py<PyPointComparison>> {
    let found = c
        .points
        .iter()
        .find(|p| side(p).is_some_and(|r| r.label.as_deref() == Some(label)));
    match found {
        Some(p) => point_view(py, c, p),
        None => Err(PyKeyError::new_err(format!(
            "no compared point labelled {}",
            quoted(label)
        ))),
    }
}

/// Two runs compared point by point.
#[pyclass(
    name = "TensorRunComparison",
    module = "torch_cudagraph_debug._native",
    extends = PyWhole,
    frozen,
    skip_from_py_object
)]
pub struct PyRunComparison;

#[pymethods]
impl PyRunComparison {
    /// One comparison per point pair, in alignment order (one-sided points included).
    #[getter]
    fn point_comparisons<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyTuple>> {
        point_views(slf.py(), whole(slf))
    }
    #[getter]
    fn points<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyTuple>> {
        point_views(slf.py(), whole(slf))
    }
    /// Labels of the points recorded in the reference run only, in its order.
    #[getter]
    fn reference_only_points<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyTuple>> {
        let labels = one_sided_labels(
            whole(slf),
            |p| p.reference.as_ref(),
            |p| p.candidate.is_none(),
        );
        tuple(slf.py(), labels)
    }
    /// Labels of the points recorded in the candidate run only, in its order.
    #[getter]
    fn candidate_only_points<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyTuple>> {
        let labels = one_sided_labels(
            whole(slf),
            |p| p.candidate.as_ref(),
            |p| p.reference.is_none(),
        );
        tuple(slf.py(), labels)
    }
    /// The warnings the report shows (`warnings`).
    #[getter]
    fn report_warnings<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyTuple>> {
        tuple(slf.py(), whole(slf).warnings.iter())
    }
    /// The point comparison whose reference (or, one-sided, candidate) is `label`.
    fn point(slf: &Bound<'_, Self>, label: &str) -> PyResult<Py<PyPointComparison>> {
        point_labelled(slf.py(), whole(slf), label, |p| {
            p.reference.as_ref().or(p.candidate.as_ref())
        })
    }
}

/// One reference point against every point of a run.
#[pyclass(
    name = "TensorPointSeriesComparison",
    module = "torch_cudagraph_debug._native",
    extends = PyWhole,
    frozen,
    skip_from_py_object
)]
pub struct PySeriesComparison;

#[pymethods]
impl PySeriesComparison {
    #[getter]
    fn point_comparisons<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyTuple>> {
        point_views(slf.py(), whole(slf))
    }
    #[getter]
    fn points<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyTuple>> {
        point_views(slf.py(), whole(slf))
    }
    /// The first point at which any observation mismatched.
    #[getter]
    fn first_divergence(slf: &Bound<'_, Self>) -> Option<SeriesPoint> {
        let series = whole(slf).series.as_ref();
        series.and_then(|s| s.first_divergence.clone())
    }
    /// Per observation of the reference point, in its order: when it stopped matching.
    #[getter]
    fn divergence<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyTuple>> {
        tuple(slf.py(), divergences(whole(slf)).cloned())
    }
    /// The run whose points were compared (a `TensorRun`), as given.
    #[getter]
    fn candidate_run(slf: &Bound<'_, Self>) -> Option<Py<PyAny>> {
        Compared::subject(slf.py(), &whole(slf).candidate_input)
    }
    fn point(slf: &Bound<'_, Self>, label: &str) -> PyResult<Py<PyPointComparison>> {
        point_labelled(slf.py(), whole(slf), label, |p| p.candidate.as_ref())
    }
    #[pyo3(signature = (name, invocation_index=0))]
    fn divergence_of(
        slf: &Bound<'_, Self>,
        name: &str,
        invocation_index: i64,
    ) -> PyResult<Divergence> {
        divergences(whole(slf))
            .find(|d| d.name == name && d.invocation_index == invocation_index)
            .cloned()
            .ok_or_else(|| {
                PyKeyError::new_err(format!(
                    "no observation ({}, {invocation_index}) in this series",
                    quoted(name)
                ))
            })
    }
}

/// The labels (or descriptions) of the points one side has alone, as `side` and
/// `one_sided` pick them.
fn one_sided_labels(
    c: &Comparison,
    side: impl Fn(&PointComparison) -> Option<&PointRef>,
    one_sided: impl Fn(&PointComparison) -> bool,
) -> Vec<String> {
    c.points
        .iter()
        .filter(|p| one_sided(p))
        .filter_map(side)
        .map(|r| r.label.clone().unwrap_or_else(|| r.display()))
        .collect()
}

fn divergences(c: &Comparison) -> impl Iterator<Item = &Divergence> {
    c.series.iter().flat_map(|s| s.observations.iter())
}

/// One rank of a group comparison, its run comparison shared by every object made of it.
pub struct RankView {
    rank: i64,
    status: Status,
    reason: Option<String>,
    comparison: Option<Arc<Comparison>>,
}

impl From<&RankComparison> for PyRankComparison {
    fn from(r: &RankComparison) -> PyRankComparison {
        PyRankComparison {
            inner: RankView {
                rank: r.rank,
                status: r.status,
                reason: r.reason.clone(),
                comparison: r.comparison.as_ref().map(|c| Arc::new((**c).clone())),
            },
        }
    }
}

/// One rank of a run group comparison: the rank, its run comparison (`None` for a rank
/// present on one side only) and the status derived from it.
#[pyclass(
    name = "TensorRankRunComparison",
    module = "torch_cudagraph_debug._native",
    frozen,
    skip_from_py_object
)]
pub struct PyRankComparison {
    inner: RankView,
}

#[pymethods]
impl PyRankComparison {
    #[getter]
    fn rank(&self) -> i64 {
        self.inner.rank
    }
    #[getter]
    fn status(&self) -> &'static str {
        self.inner.status.as_str()
    }
    #[getter]
    fn ok(&self) -> bool {
        self.inner.status == Status::Match
    }
    /// Why the rank could not be compared (missing on one side).
    #[getter]
    fn reason(&self) -> Option<String> {
        self.inner.reason.clone()
    }
    #[getter]
    fn comparison(&self, py: Python<'_>) -> PyResult<Option<Py<PyRunComparison>>> {
        let run = |c: &Arc<Comparison>| run_comparison(py, Compared::from(Arc::clone(c)));
        self.inner.comparison.as_ref().map(run).transpose()
    }
    /// The rank's point comparisons; empty for a one-sided rank.
    #[getter]
    fn points<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        match &self.inner.comparison {
            Some(c) => point_views(py, c),
            None => Ok(PyTuple::empty(py)),
        }
    }
    #[getter]
    fn counts(&self) -> Option<Counts> {
        let c = self.inner.comparison.as_ref();
        c.map(|c| c.counts)
    }
    /// The rank's entry as report.json holds it.
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let r = &self.inner;
        let entry = RankComparison {
            rank: r.rank,
            status: r.status,
            reason: r.reason.clone(),
            comparison: r.comparison.as_ref().map(|c| Box::new((**c).clone())),
            in_reference: false,
            in_candidate: false,
        };
        serde_to_py(py, &entry)
    }
    fn __repr__(slf: &Bound<'_, Self>) -> PyResult<String> {
        crate::classes::attrs_repr(slf.as_any(), &["rank", "status"])
    }
}

/// Two run groups compared rank by rank.
#[pyclass(
    name = "TensorRunGroupComparison",
    module = "torch_cudagraph_debug._native",
    extends = PyWhole,
    frozen,
    skip_from_py_object
)]
pub struct PyGroupComparison;

/// The ranks of `c` that `keep` picks.
fn ranks_where<'py>(
    slf: &Bound<'py, PyGroupComparison>,
    keep: impl Fn(&RankComparison) -> bool,
) -> PyResult<Bound<'py, PyTuple>> {
    let ranks = whole(slf).ranks.iter().filter(|r| keep(r)).map(|r| r.rank);
    tuple(slf.py(), ranks)
}

#[pymethods]
impl PyGroupComparison {
    /// One entry per rank of either group, ascending.
    #[getter]
    fn rank_comparisons<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyTuple>> {
        rank_comparisons(slf.py(), whole(slf))
    }
    #[getter]
    fn ranks<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyTuple>> {
        rank_comparisons(slf.py(), whole(slf))
    }
    /// Ranks with a run in one group only.
    #[getter]
    fn one_sided_ranks<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyTuple>> {
        ranks_where(slf, |r| r.comparison.is_none())
    }
    /// Ranks with a run in the reference group only.
    #[getter]
    fn reference_only_ranks<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyTuple>> {
        ranks_where(slf, |r| r.in_reference && !r.in_candidate)
    }
    /// Ranks with a run in the candidate group only.
    #[getter]
    fn candidate_only_ranks<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyTuple>> {
        ranks_where(slf, |r| r.in_candidate && !r.in_reference)
    }
    /// The reference `TensorRunGroup`, as compared.
    #[getter]
    fn reference_group(slf: &Bound<'_, Self>) -> Option<Py<PyAny>> {
        Compared::subject(slf.py(), &whole(slf).reference_input)
    }
    /// The candidate `TensorRunGroup`, as compared.
    #[getter]
    fn candidate_group(slf: &Bound<'_, Self>) -> Option<Py<PyAny>> {
        Compared::subject(slf.py(), &whole(slf).candidate_input)
    }
    fn rank(slf: &Bound<'_, Self>, rank: i64) -> PyResult<PyRankComparison> {
        whole(slf)
            .ranks
            .iter()
            .find(|r| r.rank == rank)
            .map(PyRankComparison::from)
            .ok_or_else(|| PyKeyError::new_err(format!("no rank {rank} in this comparison")))
    }
}

fn rank_comparisons<'py>(py: Python<'py>, c: &Comparison) -> PyResult<Bound<'py, PyTuple>> {
    tuple(py, c.ranks.iter().map(PyRankComparison::from))
}

/// A run comparison result over `c`.
pub(super) fn run_comparison(py: Python<'_>, c: Compared) -> PyResult<Py<PyRunComparison>> {
    Py::new(py, whole_result(c, PyRunComparison))
}

/// The result object of a comparison, of the class its kind calls for.
pub(crate) fn comparison_object(py: Python<'_>, c: Compared) -> PyResult<Py<PyAny>> {
    Ok(match c.kind {
        ComparisonKind::Snapshots => Py::new(py, pair_result(c, PySnapshotComparison))?.into_any(),
        ComparisonKind::Points => Py::new(py, pair_result(c, PyPointComparison))?.into_any(),
        ComparisonKind::Runs => run_comparison(py, c)?.into_any(),
        ComparisonKind::PointSeries => Py::new(py, whole_result(c, PySeriesComparison))?.into_any(),
        ComparisonKind::RunGroups => Py::new(py, whole_result(c, PyGroupComparison))?.into_any(),
    })
}

/// A point comparison result over `c`.
pub(super) fn point_comparison(py: Python<'_>, c: Compared) -> PyResult<Py<PyPointComparison>> {
    Py::new(py, pair_result(c, PyPointComparison))
}
