//! The comparison results: snapshots, points, runs, point series, ranks, run groups.

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

/// A comparison result class over the engine's `Comparison`: the getters and methods
/// every result has, then the class's own (`|comparison, py| { getters } { methods }`).
macro_rules! comparison_result {
    (
        $(#$meta:tt)*
        pub struct $class:ident;
        |$c:ident, $py:ident| { $($getters:tt)* }
        { $($methods:tt)* }
    ) => {
        frozen_class! {
            $(#$meta)*
            pub struct $class(Compared);
            |$c, $py| {
                /// `snapshots`, `points`, `runs`, `point_series` or `run_groups`.
                kind: &'static str => $c.kind.as_str();
                /// `match`, `mismatch` or `inconclusive` (mismatch > inconclusive > match).
                status: &'static str => $c.status.as_str();
                ok: bool => $c.ok;
                conclusive: bool => $c.conclusive;
                options: PyOptions => PyOptions::from($c.options.clone());
                /// Observation comparisons by status, over every point (and rank).
                counts: PyCounts => PyCounts::from($c.counts);
                /// Point comparisons by status, over every rank.
                point_counts: PyCounts => PyCounts::from($c.point_counts);
                warnings: PyResult<Bound<'py, PyTuple>> => tuple($py, $c.warnings.iter());
                /// The first problem in execution order, or `None` when everything matched.
                first_issue: PyResult<Option<PyIssue>> => issue_of($py, $c);
                /// Every observation comparison, in execution order (points, then ranks).
                observations: PyResult<Bound<'py, PyTuple>> => observations_of($py, $c);
                $($getters)*
            }
            {
                /// The `n` worst observation comparisons (all when `None`), worst first:
                /// by status, then the share of elements that differ, then the largest
                /// absolute and relative errors; ties keep execution order.
                /// `limit` is the reference's name for `n`.
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
                /// `worst_observation_comparisons(n)` as issues: each names its rank,
                /// the label and comparison of its point, and the observation comparison.
                #[pyo3(signature = (n=None))]
                fn worst_issues(
                    &self,
                    py: Python<'_>,
                    n: Option<&Bound<'_, PyAny>>,
                ) -> PyResult<Vec<PyIssue>> {
                    let n = worst_count(n)?;
                    self.inner
                        .worst_issues(n)
                        .into_iter()
                        .map(|issue| issue_at(py, &self.inner, issue))
                        .collect()
                }
                /// Raises `ComparisonFailedError` unless the status is `match` (an
                /// inconclusive comparison proves nothing, so it fails too).
                fn assert_ok(&self, py: Python<'_>) -> PyResult<()> {
                    if self.inner.ok {
                        return Ok(());
                    }
                    let n = &self.inner.counts;
                    Err(failed(
                        py,
                        format!(
                            "{}: {} ({} of {} observations mismatch, {} inconclusive); first \
                             issue: {}",
                            self.inner.kind.title(),
                            self.inner.status.as_str(),
                            n.mismatched,
                            n.total,
                            n.inconclusive,
                            self.inner
                                .first_issue
                                .as_ref()
                                .map_or("none", |i| i.description.as_str())
                        ),
                    ))
                }
                /// The text report. `include_unchanged=False` leaves out the rows of
                /// matching ranks, points and observations; `limit` (default: the
                /// options') caps rows per table.
                #[pyo3(signature = (include_unchanged=true, limit=None))]
                fn to_text(
                    &self,
                    py: Python<'_>,
                    include_unchanged: bool,
                    limit: Option<usize>,
                ) -> PyResult<String> {
                    report(py, &self.inner, to_text_with, limit, include_unchanged)
                }
                /// A standalone HTML report (charts as inline SVG, no script), rows chosen
                /// as `to_text` chooses them.
                #[pyo3(signature = (include_unchanged=true, limit=None))]
                fn to_html(
                    &self,
                    py: Python<'_>,
                    include_unchanged: bool,
                    limit: Option<usize>,
                ) -> PyResult<String> {
                    report(py, &self.inner, to_html_with, limit, include_unchanged)
                }
                /// The complete comparison (the content of report.json); non-finite
                /// floats are the strings "nan", "inf" and "-inf".
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
                /// Writes report.txt, report.json, report.html and the CSV tables into
                /// `output_dir` and returns `{format: path}` (`text`, `json`, `html`, and
                /// each CSV by its stem). A directory that already holds anything needs
                /// `overwrite=True`, which replaces only the files this method writes.
                #[pyo3(signature = (
                    output_dir, overwrite=false, *, include_unchanged=true, limit=None
                ))]
                fn write<'py>(
                    &self,
                    py: Python<'py>,
                    output_dir: std::path::PathBuf,
                    overwrite: bool,
                    include_unchanged: bool,
                    limit: Option<usize>,
                ) -> PyResult<Bound<'py, PyDict>> {
                    let directory = output_dir;
                    let written = guard(py, || {
                        let c = self.inner.shared();
                        py.detach(move || {
                            tcgd_compare::report::write_with(
                                &c,
                                &directory,
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
                        c.counts.mismatched,
                        c.counts.inconclusive
                    ))
                }

                $($methods)*
            }
        }
    };
}

/// A result of a single point pair (snapshots or points): the pair's sides and
/// observations.
macro_rules! point_result {
    ($(#$meta:tt)* pub struct $class:ident;) => {
        comparison_result! {
            $(#$meta)*
            pub struct $class;
            |c, py| {
                /// The reference point or snapshot (`None` for a point recorded only in
                /// the candidate, within a run comparison).
                reference: PyResult<Option<PyPointInfo>> =>
                    Ok(single(c)?.reference.clone().map(PyPointInfo::from));
                candidate: PyResult<Option<PyPointInfo>> =>
                    Ok(single(c)?.candidate.clone().map(PyPointInfo::from));
                /// Position among the point comparisons of the comparison it belongs to.
                position: PyResult<usize> => Ok(single(c)?.position);
                /// Why a one-sided point could not be compared; `None` otherwise.
                reason: PyResult<Option<String>> => Ok(single(c)?.reason.clone());
                /// Reference order, then candidate-only keys.
                observation_comparisons: PyResult<Bound<'py, PyTuple>> => observations_of(py, c);
                /// `{(name, invocation_index): TensorObservationComparison}`.
                by_key: PyResult<Bound<'py, PyDict>> => by_key(py, single(c)?);
                /// This comparison, as the one point pair of `point_comparisons`.
                points: PyResult<Bound<'py, PyTuple>> => tuple(py, [point_view(c, single(c)?)]);
                /// Observation comparisons that matched (`counts.match`).
                matched_count: usize => c.counts.matched;
                mismatched_count: usize => c.counts.mismatched;
                inconclusive_count: usize => c.counts.inconclusive;
            }
            {
                /// Each observation comparison as its line of observations.csv
                /// (`to_row()`), matches left out with `include_unchanged=False`.
                #[pyo3(signature = (*, include_unchanged=true))]
                fn observation_comparison_rows<'py>(
                    &self,
                    py: Python<'py>,
                    include_unchanged: bool,
                ) -> PyResult<Vec<Bound<'py, PyDict>>> {
                    single(&self.inner)?
                        .observations
                        .iter()
                        .filter(|o| include_unchanged || o.status != Status::Match)
                        .map(|o| {
                            crate::classes::csv_row_dict(
                                py,
                                tcgd_compare::report::csv::OBSERVATION_COLUMNS,
                                tcgd_compare::report::csv::observation_cells(o),
                            )
                        })
                        .collect()
                }
                /// The comparison of observation `(name, invocation_index)`.
                #[pyo3(signature = (name, invocation_index=0))]
                fn observation(
                    &self,
                    py: Python<'_>,
                    name: &str,
                    invocation_index: i64,
                ) -> PyResult<PyObservationComparison> {
                    observation_of(py, single(&self.inner)?, name, invocation_index)
                }
            }
        }
    };
}

point_result! {
    /// Two probe snapshots compared observation by observation.
    #[pyclass(name = "TensorSnapshotComparison")]
    pub struct PySnapshotComparison;
}

point_result! {
    /// Two points compared observation by observation; also each point pair of a run,
    /// series or group comparison.
    #[pyclass(name = "TensorPointComparison")]
    pub struct PyPointComparison;
}

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

/// A result of two wholes compared (runs, point series, run groups): their subjects, then
/// the class's own getters and methods.
macro_rules! whole_result {
    (
        $(#$meta:tt)*
        pub struct $class:ident;
        |$c:ident, $py:ident| { $($getters:tt)* }
        { $($methods:tt)* }
    ) => {
        comparison_result! {
            $(#$meta)*
            pub struct $class;
            |$c, $py| {
                reference: PySubject => $c.reference.clone().into();
                candidate: PySubject => $c.candidate.clone().into();
                $($getters)*
            }
            { $($methods)* }
        }
    };
}

pub(super) fn point_views<'py>(py: Python<'py>, c: &Comparison) -> PyResult<Bound<'py, PyTuple>> {
    tuple(py, c.points.iter().map(|p| point_view(c, p)))
}

/// The point comparison whose side (as `side` picks it) is labelled `label`.
fn point_labelled(
    c: &Comparison,
    label: &str,
    side: impl Fn(&PointComparison) -> Option<&PointRef>,
) -> PyResult<PyPointComparison> {
    c.points
        .iter()
        .find(|p| side(p).is_some_and(|r| r.label.as_deref() == Some(label)))
        .map(|p| point_view(c, p))
        .ok_or_else(|| PyKeyError::new_err(format!("no compared point labelled {}", quoted(label))))
}

whole_result! {
    /// Two runs compared point by point.
    #[pyclass(name = "TensorRunComparison")]
    pub struct PyRunComparison;
    |c, py| {
        /// One comparison per point pair, in alignment order (one-sided points included).
        point_comparisons: PyResult<Bound<'py, PyTuple>> => point_views(py, c);
        points: PyResult<Bound<'py, PyTuple>> => point_views(py, c);
        /// Labels of the points recorded in the reference run only, in its order.
        reference_only_points: PyResult<Bound<'py, PyTuple>> =>
            tuple(py, one_sided_labels(c, |p| p.reference.as_ref(), |p| p.candidate.is_none()));
        /// Labels of the points recorded in the candidate run only, in its order.
        candidate_only_points: PyResult<Bound<'py, PyTuple>> =>
            tuple(py, one_sided_labels(c, |p| p.candidate.as_ref(), |p| p.reference.is_none()));
        /// The warnings the report shows (`warnings`).
        report_warnings: PyResult<Bound<'py, PyTuple>> => tuple(py, c.warnings.iter());
    }
    {
        /// The point comparison whose reference (or, one-sided, candidate) is `label`.
        fn point(&self, label: &str) -> PyResult<PyPointComparison> {
            point_labelled(&self.inner, label, |p| {
                p.reference.as_ref().or(p.candidate.as_ref())
            })
        }
    }
}

whole_result! {
    /// One reference point against every point of a run.
    #[pyclass(name = "TensorPointSeriesComparison")]
    pub struct PySeriesComparison;
    |c, py| {
        point_comparisons: PyResult<Bound<'py, PyTuple>> => point_views(py, c);
        points: PyResult<Bound<'py, PyTuple>> => point_views(py, c);
        /// The first point at which any observation mismatched.
        first_divergence: Option<PySeriesPoint> =>
            c.series.as_ref().and_then(|s| s.first_divergence.clone()).map(PySeriesPoint::from);
        /// Per observation of the reference point, in its order: when it stopped matching.
        divergence: PyResult<Bound<'py, PyTuple>> =>
            tuple(py, divergences(c).cloned().map(PyDivergence::from));
        /// The run whose points were compared (a `TensorRun`), as given.
        candidate_run: Option<Py<PyAny>> => Compared::subject(py, &c.candidate_input);
    }
    {
        fn point(&self, label: &str) -> PyResult<PyPointComparison> {
            point_labelled(&self.inner, label, |p| p.candidate.as_ref())
        }
        #[pyo3(signature = (name, invocation_index=0))]
        fn divergence_of(&self, name: &str, invocation_index: i64) -> PyResult<PyDivergence> {
            divergences(&self.inner)
                .find(|d| d.name == name && d.invocation_index == invocation_index)
                .map(|d| d.clone().into())
                .ok_or_else(|| {
                    PyKeyError::new_err(format!(
                        "no observation ({}, {invocation_index}) in this series",
                        quoted(name)
                    ))
                })
        }
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
        PyRankComparison::from(RankView {
            rank: r.rank,
            status: r.status,
            reason: r.reason.clone(),
            comparison: r.comparison.as_ref().map(|c| Arc::new((**c).clone())),
        })
    }
}

frozen_class! {
    /// One rank of a run group comparison: the rank, its run comparison (`None` for a rank
    /// present on one side only) and the status derived from it.
    #[pyclass(name = "TensorRankRunComparison")]
    pub struct PyRankComparison(RankView);
    |r, py| {
        rank: i64 => r.rank;
        status: &'static str => r.status.as_str();
        ok: bool => r.status == Status::Match;
        /// Why the rank could not be compared (missing on one side).
        reason: Option<String> => r.reason.clone();
        comparison: Option<PyRunComparison> => r.comparison.clone().map(|c| PyRunComparison::from(Compared::from(c)));
        /// The rank's point comparisons; empty for a one-sided rank.
        points: PyResult<Bound<'py, PyTuple>> => match &r.comparison {
            Some(c) => point_views(py, c),
            None => Ok(PyTuple::empty(py)),
        };
        counts: Option<PyCounts> => r.comparison.as_ref().map(|c| PyCounts::from(c.counts));
    }
    repr(rank, status);
    {
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
    }
}

whole_result! {
    /// Two run groups compared rank by rank.
    #[pyclass(name = "TensorRunGroupComparison")]
    pub struct PyGroupComparison;
    |c, py| {
        /// One entry per rank of either group, ascending.
        rank_comparisons: PyResult<Bound<'py, PyTuple>> => rank_comparisons(py, c);
        ranks: PyResult<Bound<'py, PyTuple>> => rank_comparisons(py, c);
        /// Ranks with a run in one group only.
        one_sided_ranks: PyResult<Bound<'py, PyTuple>> => tuple(
            py,
            c.ranks
                .iter()
                .filter(|r| r.comparison.is_none())
                .map(|r| r.rank),
        );
        /// Ranks with a run in the reference group only.
        reference_only_ranks: PyResult<Bound<'py, PyTuple>> => tuple(
            py,
            c.ranks.iter().filter(|r| r.in_reference && !r.in_candidate).map(|r| r.rank),
        );
        /// Ranks with a run in the candidate group only.
        candidate_only_ranks: PyResult<Bound<'py, PyTuple>> => tuple(
            py,
            c.ranks.iter().filter(|r| r.in_candidate && !r.in_reference).map(|r| r.rank),
        );
        /// The reference `TensorRunGroup`, as compared.
        reference_group: Option<Py<PyAny>> => Compared::subject(py, &c.reference_input);
        /// The candidate `TensorRunGroup`, as compared.
        candidate_group: Option<Py<PyAny>> => Compared::subject(py, &c.candidate_input);
    }
    {
        fn rank(&self, rank: i64) -> PyResult<PyRankComparison> {
            self.inner
                .ranks
                .iter()
                .find(|r| r.rank == rank)
                .map(PyRankComparison::from)
                .ok_or_else(|| PyKeyError::new_err(format!("no rank {rank} in this comparison")))
        }
    }
}

fn rank_comparisons<'py>(py: Python<'py>, c: &Comparison) -> PyResult<Bound<'py, PyTuple>> {
    tuple(py, c.ranks.iter().map(PyRankComparison::from))
}
