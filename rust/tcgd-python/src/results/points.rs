//! Views of the points of a comparison, and the first issue of a result.

use super::*;

/// What a nested point comparison names as its sides in its own reports.
pub(super) fn point_subject(p: Option<&PointRef>) -> Subject {
    let mut facts = Vec::new();
    if let Some(p) = p {
        if let Some(s) = p.snapshot_index {
            facts.push(format!("snapshot {s}"));
        } else if let Some(i) = p.index {
            facts.push(format!("point {i}"));
        }
        if let Some(r) = p.replay_index {
            facts.push(format!("replay {r}"));
        }
    }
    Subject {
        kind: if p.is_some_and(|p| p.snapshot_index.is_some()) {
            "snapshot".into()
        } else {
            "point".into()
        },
        name: p.and_then(|p| p.label.clone()),
        detail: (!facts.is_empty()).then(|| facts.join(", ")),
        ..Subject::default()
    }
}

/// One point pair of a larger comparison as a comparison of its own: the pair, the
/// options, and the warnings of the whole.
pub(super) fn point_view(
    py: Python<'_>,
    whole: &Comparison,
    p: &PointComparison,
) -> PyResult<Py<PyPointComparison>> {
    let c = Comparison::new(
        ComparisonKind::Points,
        whole.options.clone(),
        point_subject(p.reference.as_ref()),
        point_subject(p.candidate.as_ref()),
        vec![p.clone()],
        Vec::new(),
        whole.warnings.clone(),
    );
    point_comparison(py, Compared::from(Arc::new(c)))
}

pub(super) fn find_point(points: &[PointComparison], position: usize) -> Option<&PointComparison> {
    points.iter().find(|p| p.position == position)
}

pub(super) fn observations_of<'py>(
    py: Python<'py>,
    c: &Comparison,
) -> PyResult<Bound<'py, PyTuple>> {
    let items = c
        .observations()
        .into_iter()
        .map(|(_, _, o)| PyObservationComparison::of(py, o))
        .collect::<PyResult<Vec<_>>>()?;
    tuple(py, items)
}

pub(super) fn single(c: &Comparison) -> PyResult<&PointComparison> {
    c.points.first().ok_or_else(|| {
        BindingError::Internal("a point comparison without its point pair".into()).into()
    })
}

// ------------------------------------------------------------------------------ issues

/// An issue and what it is at: the label of its point, that point's comparison, and the
/// observation comparison (for an observation issue).
pub struct IssueAt {
    issue: Issue,
    label: Option<String>,
    point: Option<Py<PyPointComparison>>,
    observation: Option<Py<PyObservationComparison>>,
}

/// The first problem in execution order. `scope` is `observation` (then `observation`
/// is set), `point` (a point recorded on one side only) or `rank` (a rank missing from
/// a group). Unpacks as `(label, issue)`: the label of the point it is at, and the
/// observation comparison (or, for a point or rank issue, this issue itself).
#[pyclass(
    name = "ComparisonIssue",
    module = "torch_cudagraph_debug._native",
    frozen
)]
pub struct PyIssue {
    pub(crate) inner: IssueAt,
}

impl From<IssueAt> for PyIssue {
    fn from(inner: IssueAt) -> Self {
        PyIssue { inner }
    }
}

#[pymethods]
impl PyIssue {
    #[getter]
    fn scope(&self) -> &'static str {
        self.inner.issue.scope
    }
    #[getter]
    fn status(&self) -> &'static str {
        self.inner.issue.status.as_str()
    }
    #[getter]
    fn rank(&self) -> Option<i64> {
        self.inner.issue.rank
    }
    /// The label of the point the issue is at (`None` for a missing rank).
    #[getter]
    fn label(&self) -> Option<String> {
        self.inner.label.clone()
    }
    #[getter]
    fn point(&self, py: Python<'_>) -> Option<Py<PyPointComparison>> {
        self.inner.point.as_ref().map(|p| p.clone_ref(py))
    }
    #[getter]
    fn observation(&self, py: Python<'_>) -> Option<Py<PyObservationComparison>> {
        self.inner.observation.as_ref().map(|o| o.clone_ref(py))
    }
    #[getter]
    fn description(&self) -> String {
        self.inner.issue.description.clone()
    }
    fn __repr__(slf: &Bound<'_, Self>) -> PyResult<String> {
        crate::classes::attrs_repr(slf.as_any(), &["scope", "status", "description"])
    }

    fn __len__(&self) -> usize {
        2
    }
    fn __getitem__<'py>(slf: &Bound<'py, Self>, index: isize) -> PyResult<Bound<'py, PyAny>> {
        let py = slf.py();
        let issue = &slf.get().inner;
        match index {
            0 | -2 => Ok(issue.label.clone().into_pyobject(py)?.into_any()),
            1 | -1 => Ok(match &issue.observation {
                Some(o) => o.clone_ref(py).into_bound(py).into_any(),
                None => slf.clone().into_any(),
            }),
            _ => Err(PyIndexError::new_err("an issue unpacks as (label, issue)")),
        }
    }
}

pub(super) fn issue_of(py: Python<'_>, c: &Comparison) -> PyResult<Option<PyIssue>> {
    c.first_issue
        .clone()
        .map(|issue| issue_at(py, c, issue))
        .transpose()
}

/// `issue` of `c` with what it is at: its point's label and comparison, and the observation
/// comparison.
pub(super) fn issue_at(py: Python<'_>, c: &Comparison, issue: Issue) -> PyResult<PyIssue> {
    let (whole, points): (&Comparison, &[PointComparison]) = match issue.rank {
        None => (c, &c.points),
        Some(rank) => match c
            .ranks
            .iter()
            .find(|r| r.rank == rank)
            .and_then(|r| r.comparison.as_deref())
        {
            Some(inner) => (inner, &inner.points),
            None => (c, &[]),
        },
    };
    let point = issue.point.and_then(|i| find_point(points, i));
    let observation = point.and_then(|p| {
        issue
            .observation
            .and_then(|i| p.observations.iter().find(|o| o.position == i))
    });
    // A series compares one reference point with each candidate point: the candidate
    // names where the issue is. Otherwise the reference does, unless the point is only in
    // the candidate.
    let label = point.and_then(|p| {
        let sides = if whole.kind == ComparisonKind::PointSeries {
            [p.candidate.as_ref(), p.reference.as_ref()]
        } else {
            [p.reference.as_ref(), p.candidate.as_ref()]
        };
        sides
            .into_iter()
            .flatten()
            .next()
            .map(|r| r.label.clone().unwrap_or_else(|| r.display()))
    });
    Ok(PyIssue::from(IssueAt {
        label,
        point: point.map(|p| point_view(py, whole, p)).transpose()?,
        observation: observation
            .map(|o| Py::new(py, PyObservationComparison::of(py, o)?))
            .transpose()?,
        issue,
    }))
}
