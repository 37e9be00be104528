//! The comparison results: snapshots, points, runs, point series, ranks, run groups.

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

pub(super) fn paths(
    py: Python<'_>,
    written: Vec<std::path::PathBuf>,
) -> PyResult<Vec<Bound<'_, PyAny>>> {
    let path = py.import("pathlib")?.getattr("Path")?;
    written.into_iter().map(|p| path.call1((p,))).collect()
}

/// The aggregate methods every comparison result has, over its field `c`. A macro because
/// pyo3 classes have one method table each; `$extra` holds a class's own methods.
macro_rules! comparison_result {
    ($class:ident, $title:literal, { $($extra:tt)* }) => {
        #[pymethods]
        impl $class {
            /// `snapshots`, `points`, `runs`, `point_series` or `run_groups`.
            #[getter]
            fn kind(&self) -> &'static str {
                self.c.kind.as_str()
            }
            /// `match`, `mismatch` or `inconclusive` (mismatch > inconclusive > match).
            #[getter]
            fn status(&self) -> &'static str {
                self.c.status.as_str()
            }
            #[getter]
            fn ok(&self) -> bool {
                self.c.ok
            }
            #[getter]
            fn conclusive(&self) -> bool {
                self.c.conclusive
            }
            #[getter]
            fn options(&self) -> PyOptions {
                PyOptions { inner: self.c.options.clone() }
            }
            /// Observation comparisons by status, over every point (and rank).
            #[getter]
            fn counts(&self) -> PyCounts {
                PyCounts { inner: self.c.counts }
            }
            /// Point comparisons by status, over every rank.
            #[getter]
            fn point_counts(&self) -> PyCounts {
                PyCounts { inner: self.c.point_counts }
            }
            #[getter]
            fn warnings<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
                tuple(py, self.c.warnings.iter())
            }
            /// The first problem in execution order, or `None` when everything matched.
            #[getter]
            fn first_issue(&self, py: Python<'_>) -> PyResult<Option<PyIssue>> {
                issue_of(py, &self.c)
            }
            /// Every observation comparison, in execution order (points, then ranks).
            #[getter]
            fn observations<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
                observations_of(py, &self.c)
            }
            /// The `n` worst observation comparisons (all when `None`), worst first: by
            /// status, then the share of elements that differ, then the largest absolute
            /// and relative errors; ties keep execution order.
            #[pyo3(signature = (n=None))]
            fn worst_observation_comparisons(
                &self,
                n: Option<&Bound<'_, PyAny>>,
            ) -> PyResult<Vec<PyObservationComparison>> {
                let n = match n.filter(|n| !n.is_none()) {
                    None => None,
                    Some(v) => Some(
                        v.cast::<PyBool>()
                            .err()
                            .and_then(|_| v.extract::<usize>().ok())
                            .ok_or_else(|| {
                                BindingError::InvalidInput(format!(
                                    "n must be None or an integer >= 0, got {}",
                                    py_repr(v)
                                ))
                            })?,
                    ),
                };
                Ok(self
                    .c
                    .worst(n)
                    .into_iter()
                    .map(|(_, _, o)| PyObservationComparison { inner: o.clone() })
                    .collect())
            }
            /// Raises `ComparisonFailedError` unless the status is `match` (an
            /// inconclusive comparison proves nothing, so it fails too).
            fn assert_ok(&self, py: Python<'_>) -> PyResult<()> {
                if self.c.ok {
                    return Ok(());
                }
                let n = &self.c.counts;
                Err(failed(
                    py,
                    format!(
                        "{}: {} ({} of {} observations mismatch, {} inconclusive); first \
                         issue: {}",
                        self.c.kind.title(),
                        self.c.status.as_str(),
                        n.mismatched,
                        n.total,
                        n.inconclusive,
                        self.c
                            .first_issue
                            .as_ref()
                            .map_or("none", |i| i.description.as_str())
                    ),
                ))
            }
            /// The text report. `include_unchanged=False` leaves out the rows of matching
            /// ranks, points and observations; `limit` (default: the options') caps rows
            /// per table.
            #[pyo3(signature = (include_unchanged=true, limit=None))]
            fn to_text(
                &self,
                py: Python<'_>,
                include_unchanged: bool,
                limit: Option<usize>,
            ) -> PyResult<String> {
                guard(py, || {
                    Ok(tcgd_compare::report::to_text_with(
                        &self.c,
                        limit,
                        Some(include_unchanged),
                    ))
                })
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
                guard(py, || {
                    Ok(tcgd_compare::report::to_html_with(
                        &self.c,
                        limit,
                        Some(include_unchanged),
                    ))
                })
            }
            /// The complete comparison (the content of report.json); non-finite floats
            /// are the strings "nan", "inf" and "-inf".
            fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
                serde_to_py(py, &*self.c)
            }
            /// report.json's text.
            fn to_json(&self, py: Python<'_>) -> PyResult<String> {
                guard(py, || {
                    tcgd_compare::report::to_json(&self.c).map_err(BindingError::from)
                })
            }
            /// `{file name: CSV text}` for each table that applies.
            fn csv_tables<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
                let tables = PyDict::new(py);
                for (name, text) in tcgd_compare::report::csv_tables(&self.c) {
                    tables.set_item(name, text)?;
                }
                Ok(tables)
            }
            /// Writes report.txt, report.json, report.html and the CSV tables into
            /// `directory` and returns their paths. A directory that already holds
            /// anything needs `overwrite=True`, which replaces only the files this method
            /// writes.
            #[pyo3(signature = (directory, overwrite=false, *, include_unchanged=true, limit=None))]
            fn write<'py>(
                &self,
                py: Python<'py>,
                directory: std::path::PathBuf,
                overwrite: bool,
                include_unchanged: bool,
                limit: Option<usize>,
            ) -> PyResult<Vec<Bound<'py, PyAny>>> {
                let written = guard(py, || {
                    let c = Arc::clone(&self.c);
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
                paths(py, written)
            }
            fn __str__(&self) -> String {
                tcgd_compare::report::to_text_with(&self.c, None, Some(true))
            }
            fn __repr__(&self) -> String {
                let n = &self.c.counts;
                format!(
                    "{}(status='{}', observations={}, mismatch={}, inconclusive={})",
                    $title,
                    self.c.status.as_str(),
                    n.total,
                    n.mismatched,
                    n.inconclusive
                )
            }

            $($extra)*
        }
    };
}

/// The methods of a single point pair's result (snapshots or points).
macro_rules! point_result {
    ($class:ident, $title:literal) => {
        comparison_result!($class, $title, {
            /// The reference point or snapshot (`None` for a point recorded only in the
            /// candidate, within a run comparison).
            #[getter]
            fn reference(&self) -> PyResult<Option<PyPointInfo>> {
                Ok(single(&self.c)?
                    .reference
                    .clone()
                    .map(|inner| PyPointInfo { inner }))
            }
            #[getter]
            fn candidate(&self) -> PyResult<Option<PyPointInfo>> {
                Ok(single(&self.c)?
                    .candidate
                    .clone()
                    .map(|inner| PyPointInfo { inner }))
            }
            /// Position among the point comparisons of the comparison it belongs to.
            #[getter]
            fn position(&self) -> PyResult<usize> {
                Ok(single(&self.c)?.position)
            }
            /// Why a one-sided point could not be compared; `None` otherwise.
            #[getter]
            fn reason(&self) -> PyResult<Option<String>> {
                Ok(single(&self.c)?.reason.clone())
            }
            /// Reference order, then candidate-only keys.
            #[getter]
            fn observation_comparisons<'py>(
                &self,
                py: Python<'py>,
            ) -> PyResult<Bound<'py, PyTuple>> {
                observations_of(py, &self.c)
            }
            /// `{(name, invocation_index): TensorObservationComparison}`.
            #[getter]
            fn by_key<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
                let d = PyDict::new(py);
                for o in &single(&self.c)?.observations {
                    d.set_item(
                        (o.name.clone(), o.invocation_index),
                        PyObservationComparison { inner: o.clone() },
                    )?;
                }
                Ok(d)
            }
            /// The comparison of observation `(name, invocation_index)`.
            #[pyo3(signature = (name, invocation_index=0))]
            fn observation(
                &self,
                name: &str,
                invocation_index: i64,
            ) -> PyResult<PyObservationComparison> {
                let point = single(&self.c)?;
                point
                    .observations
                    .iter()
                    .find(|o| o.name == name && o.invocation_index == invocation_index)
                    .map(|o| PyObservationComparison { inner: o.clone() })
                    .ok_or_else(|| {
                        let keys: Vec<String> = point
                            .observations
                            .iter()
                            .map(|o| format!("({}, {})", quoted(&o.name), o.invocation_index))
                            .collect();
                        PyKeyError::new_err(format!(
                            "no observation ({}, {invocation_index}) in this comparison; \
                             keys: [{}]",
                            quoted(name),
                            keys.join(", ")
                        ))
                    })
            }
            /// This comparison, as the one point pair of `point_comparisons`.
            #[getter]
            fn points<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
                let p = single(&self.c)?;
                tuple(py, [point_view(&self.c, p)])
            }
        });
    };
}

/// Two probe snapshots compared observation by observation.
#[pyclass(
    module = "torch_cudagraph_debug._native",
    name = "TensorSnapshotComparison",
    frozen
)]
pub struct PySnapshotComparison {
    pub(super) c: Arc<Comparison>,
}
point_result!(PySnapshotComparison, "TensorSnapshotComparison");

/// Two points compared observation by observation; also each point pair of a run,
/// series or group comparison.
#[pyclass(
    module = "torch_cudagraph_debug._native",
    name = "TensorPointComparison",
    frozen
)]
pub struct PyPointComparison {
    pub(super) c: Arc<Comparison>,
}
point_result!(PyPointComparison, "TensorPointComparison");

pub(super) fn point_views<'py>(py: Python<'py>, c: &Comparison) -> PyResult<Bound<'py, PyTuple>> {
    tuple(py, c.points.iter().map(|p| point_view(c, p)))
}

pub(super) fn point_by_label(c: &Comparison, label: &str) -> PyResult<PyPointComparison> {
    c.points
        .iter()
        .find(|p| {
            p.reference
                .as_ref()
                .or(p.candidate.as_ref())
                .is_some_and(|r| r.label.as_deref() == Some(label))
        })
        .map(|p| point_view(c, p))
        .ok_or_else(|| PyKeyError::new_err(format!("no compared point labelled {}", quoted(label))))
}

/// Two runs compared point by point.
#[pyclass(
    module = "torch_cudagraph_debug._native",
    name = "TensorRunComparison",
    frozen
)]
pub struct PyRunComparison {
    pub(super) c: Arc<Comparison>,
}
comparison_result!(PyRunComparison, "TensorRunComparison", {
    #[getter]
    fn reference(&self) -> PySubject {
        PySubject {
            inner: self.c.reference.clone(),
        }
    }
    #[getter]
    fn candidate(&self) -> PySubject {
        PySubject {
            inner: self.c.candidate.clone(),
        }
    }
    /// One comparison per point pair, in alignment order (one-sided points included).
    #[getter]
    fn point_comparisons<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        point_views(py, &self.c)
    }
    #[getter]
    fn points<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        point_views(py, &self.c)
    }
    /// The point comparison whose reference (or, one-sided, candidate) is `label`.
    fn point(&self, label: &str) -> PyResult<PyPointComparison> {
        point_by_label(&self.c, label)
    }
});

/// One reference point against every point of a run.
#[pyclass(
    module = "torch_cudagraph_debug._native",
    name = "TensorPointSeriesComparison",
    frozen
)]
pub struct PySeriesComparison {
    pub(super) c: Arc<Comparison>,
}
comparison_result!(PySeriesComparison, "TensorPointSeriesComparison", {
    #[getter]
    fn reference(&self) -> PySubject {
        PySubject {
            inner: self.c.reference.clone(),
        }
    }
    #[getter]
    fn candidate(&self) -> PySubject {
        PySubject {
            inner: self.c.candidate.clone(),
        }
    }
    #[getter]
    fn point_comparisons<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        point_views(py, &self.c)
    }
    #[getter]
    fn points<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        point_views(py, &self.c)
    }
    fn point(&self, label: &str) -> PyResult<PyPointComparison> {
        self.c
            .points
            .iter()
            .find(|p| {
                p.candidate
                    .as_ref()
                    .is_some_and(|r| r.label.as_deref() == Some(label))
            })
            .map(|p| point_view(&self.c, p))
            .ok_or_else(|| {
                PyKeyError::new_err(format!("no compared point labelled {}", quoted(label)))
            })
    }
    /// The first point at which any observation mismatched.
    #[getter]
    fn first_divergence(&self) -> Option<PySeriesPoint> {
        self.c
            .series
            .as_ref()
            .and_then(|s| series_point(&s.first_divergence))
    }
    /// Per observation of the reference point, in its order: when it stopped matching.
    #[getter]
    fn divergence<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        let items: Vec<PyDivergence> = self
            .c
            .series
            .iter()
            .flat_map(|s| s.observations.iter())
            .map(|d| PyDivergence { inner: d.clone() })
            .collect();
        tuple(py, items)
    }
    #[pyo3(signature = (name, invocation_index=0))]
    fn divergence_of(&self, name: &str, invocation_index: i64) -> PyResult<PyDivergence> {
        self.c
            .series
            .iter()
            .flat_map(|s| s.observations.iter())
            .find(|d| d.name == name && d.invocation_index == invocation_index)
            .map(|d| PyDivergence { inner: d.clone() })
            .ok_or_else(|| {
                PyKeyError::new_err(format!(
                    "no observation ({}, {invocation_index}) in this series",
                    quoted(name)
                ))
            })
    }
});

/// One rank of a run group comparison: the rank, its run comparison (`None` for a rank
/// present on one side only) and the status derived from it.
#[pyclass(
    module = "torch_cudagraph_debug._native",
    name = "TensorRankRunComparison",
    frozen
)]
pub struct PyRankComparison {
    pub(super) rank: i64,
    pub(super) status: Status,
    pub(super) reason: Option<String>,
    pub(super) comparison: Option<Arc<Comparison>>,
}

impl PyRankComparison {
    fn new(r: &RankComparison) -> PyRankComparison {
        PyRankComparison {
            rank: r.rank,
            status: r.status,
            reason: r.reason.clone(),
            comparison: r.comparison.as_ref().map(|c| Arc::new((**c).clone())),
        }
    }
}

#[pymethods]
impl PyRankComparison {
    #[getter]
    fn rank(&self) -> i64 {
        self.rank
    }
    #[getter]
    fn status(&self) -> &'static str {
        self.status.as_str()
    }
    #[getter]
    fn ok(&self) -> bool {
        self.status == Status::Match
    }
    /// Why the rank could not be compared (missing on one side).
    #[getter]
    fn reason(&self) -> Option<String> {
        self.reason.clone()
    }
    #[getter]
    fn comparison(&self) -> Option<PyRunComparison> {
        self.comparison
            .as_ref()
            .map(|c| PyRunComparison { c: Arc::clone(c) })
    }
    /// The rank's point comparisons; empty for a one-sided rank.
    #[getter]
    fn points<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        match &self.comparison {
            Some(c) => point_views(py, c),
            None => Ok(PyTuple::empty(py)),
        }
    }
    #[getter]
    fn counts(&self) -> Option<PyCounts> {
        self.comparison
            .as_ref()
            .map(|c| PyCounts { inner: c.counts })
    }
    fn __repr__(&self) -> String {
        format!(
            "TensorRankRunComparison(rank={}, status='{}')",
            self.rank,
            self.status.as_str()
        )
    }
}

/// Two run groups compared rank by rank.
#[pyclass(
    module = "torch_cudagraph_debug._native",
    name = "TensorRunGroupComparison",
    frozen
)]
pub struct PyGroupComparison {
    pub(super) c: Arc<Comparison>,
}
comparison_result!(PyGroupComparison, "TensorRunGroupComparison", {
    #[getter]
    fn reference(&self) -> PySubject {
        PySubject {
            inner: self.c.reference.clone(),
        }
    }
    #[getter]
    fn candidate(&self) -> PySubject {
        PySubject {
            inner: self.c.candidate.clone(),
        }
    }
    /// One entry per rank of either group, ascending.
    #[getter]
    fn rank_comparisons<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        tuple(py, self.c.ranks.iter().map(PyRankComparison::new))
    }
    #[getter]
    fn ranks<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        tuple(py, self.c.ranks.iter().map(PyRankComparison::new))
    }
    /// Ranks with a run in one group only.
    #[getter]
    fn one_sided_ranks<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        tuple(
            py,
            self.c
                .ranks
                .iter()
                .filter(|r| r.comparison.is_none())
                .map(|r| r.rank)
                .collect::<Vec<_>>(),
        )
    }
    fn rank(&self, rank: i64) -> PyResult<PyRankComparison> {
        self.c
            .ranks
            .iter()
            .find(|r| r.rank == rank)
            .map(PyRankComparison::new)
            .ok_or_else(|| PyKeyError::new_err(format!("no rank {rank} in this comparison")))
    }
});
