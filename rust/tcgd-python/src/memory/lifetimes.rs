//! Allocation lifetimes as frozen Python classes: the analysis
//! (`MemoryAllocationLifetimeAnalysis`) renders through the Rust report layer; its rows
//! (`AllocationCohort` and the per-point, size and transition rows) are built once, on
//! first access, straight from the Rust result.

use std::sync::OnceLock;

use tcgd_memory::lifetimes::{
    self as lt, AllocationCohort as RustCohort, CohortTransition, LifetimeAnalysis, Selection,
    StackFrame,
};
use tcgd_memory::report::{self as rep, LifetimeDisplay};

use pyo3::IntoPyObjectExt;

use super::*;

/// A value as `to_dict()` gives it: row objects become dicts, tuples become lists.
fn plain<'py>(value: Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
    if let Ok(tuple) = value.cast::<PyTuple>() {
        let items: Vec<Bound<'py, PyAny>> = tuple.iter().map(plain).collect::<PyResult<_>>()?;
        return Ok(PyList::new(value.py(), items)?.into_any());
    }
    if value.hasattr("to_dict")? {
        return value.call_method0("to_dict");
    }
    Ok(value)
}

macro_rules! row_class {
    ($(#[$doc:meta])* $name:ident { $($field:ident : $ty:ty),* $(,)? }) => {
        $(#[$doc])*
        #[pyclass(module = "torch_cudagraph_debug._native", frozen, get_all)]
        pub struct $name {
            $(pub $field: $ty),*
        }

        #[pymethods]
        impl $name {
            fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
                let d = PyDict::new(py);
                $(d.set_item(stringify!($field), plain((&self.$field).into_bound_py_any(py)?)?)?;)*
                Ok(d)
            }

            fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
                let parts: Vec<String> = vec![$(
                    format!(
                        "{}={}",
                        stringify!($field),
                        (&self.$field).into_bound_py_any(py)?.repr()?
                    )
                ),*];
                Ok(format!("{}({})", stringify!($name), parts.join(", ")))
            }
        }
    };
}

row_class!(
    /// One cohort at one point: owner-active and awaiting-free bytes and counts.
    CohortPointState {
        point_index: i64,
        label: String,
        owner_active_bytes: i64,
        owner_active_count: i64,
        awaiting_free_bytes: i64,
        awaiting_free_count: i64,
        active_bytes: i64,
        block_count: i64,
        requested_bytes: i64,
    }
);

row_class!(
    /// Generations of one (size, requested size), each counted once.
    CohortSizeBucket {
        size_bytes: i64,
        requested_size_bytes: i64,
        count: i64,
        total_bytes: i64,
    }
);

row_class!(
    /// Generations of one size by where they ended at the last analysed point.
    CohortSizeOutcome {
        size_bytes: i64,
        requested_size_bytes: i64,
        outcome: String,
        count: i64,
        total_bytes: i64,
    }
);

row_class!(
    /// Births of one cohort in one interval, origin and allocation stack.
    CohortBirth {
        start_point: Option<String>,
        start_point_index: Option<i64>,
        end_point: String,
        end_point_index: i64,
        origin: String,
        stack_frames: Py<PyTuple>,
        stack_key: String,
        bytes: i64,
        count: i64,
    }
);

row_class!(
    /// Free requests of one cohort in one interval, origin and event stack.
    CohortFreeRequest {
        start_point: Option<String>,
        start_point_index: Option<i64>,
        end_point: String,
        end_point_index: i64,
        origin: String,
        stack_frames: Py<PyTuple>,
        stack_key: String,
        bytes: i64,
        count: i64,
    }
);

row_class!(
    /// Free completions of one cohort in one interval, origin and event stack.
    CohortFreeCompletion {
        start_point: Option<String>,
        start_point_index: Option<i64>,
        end_point: String,
        end_point_index: i64,
        origin: String,
        stack_frames: Py<PyTuple>,
        stack_key: String,
        bytes: i64,
        count: i64,
    }
);

row_class!(
    /// Allocation generations of one (device, pool, complete allocation stack).
    AllocationCohort {
        cohort_id: String,
        display_rank: usize,
        device: i64,
        pool_id: Py<PyTuple>,
        pool_label: String,
        stack_frames: Py<PyTuple>,
        stack_key: String,
        block_size_bytes: Option<i64>,
        requested_size_bytes: Option<i64>,
        streams: Py<PyTuple>,
        generation_count: i64,
        points: Py<PyTuple>,
        size_histogram: Py<PyTuple>,
        size_outcomes: Py<PyTuple>,
        births: Py<PyTuple>,
        free_requests: Py<PyTuple>,
        free_completions: Py<PyTuple>,
        peak_active_bytes: i64,
        peak_owner_active_bytes: i64,
        peak_awaiting_free_bytes: i64,
        peak_block_count: i64,
        active_span_bytes: i64,
        event_owner_peak_bytes: i64,
        event_unreusable_peak_bytes: i64,
        first_sampled_point: Option<String>,
        last_sampled_point: Option<String>,
        first_event_point: Option<String>,
        last_event_point: Option<String>,
        born_bytes: i64,
        born_count: i64,
        free_requested_bytes: i64,
        free_requested_count: i64,
        free_completed_bytes: i64,
        free_completed_count: i64,
        terminal_owner_active_bytes: i64,
        terminal_owner_active_count: i64,
        terminal_awaiting_free_bytes: i64,
        terminal_awaiting_free_count: i64,
    }
);

fn tuple<'py, T: IntoPyObject<'py>>(
    py: Python<'py>,
    items: impl IntoIterator<Item = T, IntoIter: ExactSizeIterator>,
) -> PyResult<Py<PyTuple>> {
    Ok(PyTuple::new(py, items)?.unbind())
}

fn frames(py: Python<'_>, frames: &[StackFrame]) -> PyResult<Py<PyTuple>> {
    tuple(
        py,
        frames
            .iter()
            .map(|f| (f.filename.clone(), f.line, f.name.clone())),
    )
}

macro_rules! transitions {
    ($py:expr, $rows:expr, $class:ident) => {{
        let items: Vec<$class> = $rows
            .iter()
            .map(|t: &CohortTransition| -> PyResult<$class> {
                Ok($class {
                    start_point: t.start_point.as_ref().map(|p| p.label.clone()),
                    start_point_index: t.start_point.as_ref().map(|p| p.index),
                    end_point: t.end_point.label.clone(),
                    end_point_index: t.end_point.index,
                    origin: t.origin.as_str().to_owned(),
                    stack_frames: frames($py, &t.stack_frames)?,
                    stack_key: t.stack_key.clone(),
                    bytes: t.bytes,
                    count: t.count,
                })
            })
            .collect::<PyResult<_>>()?;
        tuple(
            $py,
            items
                .into_iter()
                .map(|i| Bound::new($py, i))
                .collect::<PyResult<Vec<_>>>()?,
        )?
    }};
}

fn label(p: &Option<lt::PointRef>) -> Option<String> {
    p.as_ref().map(|p| p.label.clone())
}

fn objects<'py, T: pyo3::PyClass + Into<pyo3::PyClassInitializer<T>>>(
    py: Python<'py>,
    items: Vec<T>,
) -> PyResult<Py<PyTuple>> {
    let bound: Vec<Bound<'py, T>> = items
        .into_iter()
        .map(|i| Bound::new(py, i))
        .collect::<PyResult<_>>()?;
    tuple(py, bound)
}

fn cohort(py: Python<'_>, c: &RustCohort) -> PyResult<AllocationCohort> {
    let pool_id = match c.pool_id {
        Some((a, b)) => tuple(py, [a, b])?,
        None => tuple(py, ["unknown"])?,
    };
    let points: Vec<CohortPointState> = c
        .points
        .iter()
        .map(|p| CohortPointState {
            point_index: p.point_index,
            label: p.label.clone(),
            owner_active_bytes: p.owner_active_bytes,
            owner_active_count: p.owner_active_count,
            awaiting_free_bytes: p.awaiting_free_bytes,
            awaiting_free_count: p.awaiting_free_count,
            active_bytes: p.active_bytes,
            block_count: p.block_count,
            requested_bytes: p.requested_bytes,
        })
        .collect();
    let sizes: Vec<CohortSizeBucket> = c
        .size_histogram
        .iter()
        .map(|b| CohortSizeBucket {
            size_bytes: b.size_bytes,
            requested_size_bytes: b.requested_size_bytes,
            count: b.count,
            total_bytes: b.total_bytes,
        })
        .collect();
    let outcomes: Vec<CohortSizeOutcome> = c
        .size_outcomes
        .iter()
        .map(|o| CohortSizeOutcome {
            size_bytes: o.size_bytes,
            requested_size_bytes: o.requested_size_bytes,
            outcome: o.outcome.as_str().to_owned(),
            count: o.count,
            total_bytes: o.total_bytes,
        })
        .collect();
    Ok(AllocationCohort {
        cohort_id: c.cohort_id.clone(),
        display_rank: c.display_rank,
        device: c.device,
        pool_id,
        pool_label: c.pool_label.clone(),
        stack_frames: frames(py, &c.stack_frames)?,
        stack_key: c.stack_key.clone(),
        block_size_bytes: c.block_size_bytes,
        requested_size_bytes: c.requested_size_bytes,
        streams: tuple(py, c.streams.iter().copied())?,
        generation_count: c.generation_count,
        points: objects(py, points)?,
        size_histogram: objects(py, sizes)?,
        size_outcomes: objects(py, outcomes)?,
        births: transitions!(py, c.transitions.births, CohortBirth),
        free_requests: transitions!(py, c.transitions.free_requests, CohortFreeRequest),
        free_completions: transitions!(py, c.transitions.free_completions, CohortFreeCompletion),
        peak_active_bytes: c.peaks.peak_active_bytes,
        peak_owner_active_bytes: c.peaks.peak_owner_active_bytes,
        peak_awaiting_free_bytes: c.peaks.peak_awaiting_free_bytes,
        peak_block_count: c.peaks.peak_block_count,
        active_span_bytes: c.peaks.active_span_bytes,
        event_owner_peak_bytes: c.peaks.event_owner_peak_bytes,
        event_unreusable_peak_bytes: c.peaks.event_unreusable_peak_bytes,
        first_sampled_point: label(&c.span.first_sampled_point),
        last_sampled_point: label(&c.span.last_sampled_point),
        first_event_point: label(&c.span.first_event_point),
        last_event_point: label(&c.span.last_event_point),
        born_bytes: c.totals.born_bytes,
        born_count: c.totals.born_count,
        free_requested_bytes: c.totals.free_requested_bytes,
        free_requested_count: c.totals.free_requested_count,
        free_completed_bytes: c.totals.free_completed_bytes,
        free_completed_count: c.totals.free_completed_count,
        terminal_owner_active_bytes: c.totals.terminal_owner_active_bytes,
        terminal_owner_active_count: c.totals.terminal_owner_active_count,
        terminal_awaiting_free_bytes: c.totals.terminal_awaiting_free_bytes,
        terminal_awaiting_free_count: c.totals.terminal_awaiting_free_count,
    })
}

fn display(limit: Option<i64>, stack_depth: Option<i64>) -> BindResult<LifetimeDisplay> {
    let d = LifetimeDisplay::default();
    let check = |v: Option<i64>, what: &str, default: usize| -> BindResult<usize> {
        match v {
            None => Ok(default),
            Some(v) if v >= 0 => Ok(v as usize),
            Some(v) => Err(BindingError::InvalidInput(format!(
                "{what} must be a non-negative integer, got {v}"
            ))),
        }
    };
    Ok(LifetimeDisplay {
        limit: check(limit, "limit", d.limit)?,
        stack_depth: check(stack_depth, "stack_depth", d.stack_depth)?,
    })
}

/// Allocation cohort lifetimes of a run range; see `docs/memory-debug.md`.
#[pyclass(module = "torch_cudagraph_debug._native", frozen)]
pub struct MemoryAllocationLifetimeAnalysis {
    inner: LifetimeAnalysis,
    cohorts: OnceLock<Py<PyTuple>>,
}

#[pymethods]
impl MemoryAllocationLifetimeAnalysis {
    /// `format` is text, json or html; `limit` and `stack_depth` shape text and HTML.
    #[pyo3(signature = (format="text", limit=None, stack_depth=None))]
    fn render(
        &self,
        py: Python<'_>,
        format: &str,
        limit: Option<i64>,
        stack_depth: Option<i64>,
    ) -> PyResult<String> {
        guard(py, || {
            let d = display(limit, stack_depth)?;
            let r = &self.inner;
            py.detach(|| match format {
                "text" => Ok(rep::lifetimes_text(r, d)),
                "json" => {
                    let mut s =
                        serde_json::to_string_pretty(&rep::lifetimes_json(r)).unwrap_or_default();
                    s.push('\n');
                    Ok(s)
                }
                "html" => Ok(rep::lifetimes_html(r, d)),
                other => Err(BindingError::InvalidInput(format!(
                    "format must be 'text', 'json' or 'html', got '{other}'"
                ))),
            })
        })
    }

    /// Writes report.txt/json/html and the CSV set into `directory`; returns the paths.
    #[pyo3(signature = (directory, limit=None, stack_depth=None, overwrite=false))]
    fn write(
        &self,
        py: Python<'_>,
        directory: PathBuf,
        limit: Option<i64>,
        stack_depth: Option<i64>,
        overwrite: bool,
    ) -> PyResult<Vec<PathBuf>> {
        guard(py, || {
            let d = display(limit, stack_depth)?;
            let r = &self.inner;
            py.detach(|| {
                let files = rep::lifetimes_files(r, d);
                let own: Vec<String> = rep::LIFETIME_FILES.iter().map(|f| f.to_string()).collect();
                tcgd_report::write_report(&directory, &files, &own, overwrite)
            })
            .map_err(BindingError::from)
        })
    }

    #[getter]
    fn source_kind(&self) -> &'static str {
        self.inner.source_kind
    }

    #[getter]
    fn run_id(&self) -> String {
        self.inner.run_id.clone()
    }

    #[getter]
    fn name(&self) -> String {
        self.inner.name.clone()
    }

    #[getter]
    fn selection_kind(&self) -> &'static str {
        self.inner.selection.kind
    }

    #[getter]
    fn start_point(&self) -> String {
        self.inner.range.start_point.label.clone()
    }

    #[getter]
    fn through_point(&self) -> String {
        self.inner.range.through_point.label.clone()
    }

    /// Labels of the analysed points, in order.
    #[getter]
    fn points(&self) -> Vec<String> {
        self.inner
            .range
            .points
            .iter()
            .map(|p| p.label.clone())
            .collect()
    }

    /// `(device, windows, events, complete)` per device.
    #[getter]
    fn history(&self) -> Vec<(i64, i64, i64, bool)> {
        self.inner
            .history
            .iter()
            .map(|h| (h.device, h.windows, h.events, h.complete))
            .collect()
    }

    #[getter]
    fn tracked_generations(&self) -> i64 {
        self.inner.tracked.tracked_generations
    }

    #[getter]
    fn tracked_bytes(&self) -> i64 {
        self.inner.tracked.tracked_bytes
    }

    #[getter]
    fn attributed_bytes(&self) -> i64 {
        self.inner.tracked.attributed_bytes
    }

    #[getter]
    fn instance_stack_coverage(&self) -> f64 {
        self.inner.tracked.instance_stack_coverage
    }

    #[getter]
    fn warnings(&self) -> Vec<String> {
        self.inner.warnings.clone()
    }

    /// Every cohort, in report order (`display_rank`).
    #[getter]
    fn cohorts(&self, py: Python<'_>) -> PyResult<Py<PyTuple>> {
        if let Some(t) = self.cohorts.get() {
            return Ok(t.clone_ref(py));
        }
        let rows: Vec<AllocationCohort> = self
            .inner
            .cohorts
            .iter()
            .map(|c| cohort(py, c))
            .collect::<PyResult<_>>()?;
        let t = objects(py, rows)?;
        let _ = self.cohorts.set(t.clone_ref(py));
        Ok(t)
    }

    fn __repr__(&self) -> String {
        format!(
            "MemoryAllocationLifetimeAnalysis(name={:?}, selection={:?}, through={:?}, \
             cohorts={}, generations={})",
            self.inner.name,
            self.inner.selection.kind,
            self.inner.range.through_point.label,
            self.inner.cohorts.len(),
            self.inner.tracked.tracked_generations
        )
    }
}

impl MemoryAllocationLifetimeAnalysis {
    pub(super) fn new(inner: LifetimeAnalysis) -> Self {
        MemoryAllocationLifetimeAnalysis {
            inner,
            cohorts: OnceLock::new(),
        }
    }
}

/// `run.lifetimes()`: `kind` is all, active_at (`points = [anchor]`) or born_between
/// (`points = [start, end]`); points and `through` are point indexes.
#[pyfunction]
#[pyo3(signature = (reader, kind, points, through=None))]
pub(super) fn memory_lifetimes(
    py: Python<'_>,
    reader: &MemoryRunReader,
    kind: &str,
    points: Vec<i64>,
    through: Option<i64>,
) -> PyResult<MemoryAllocationLifetimeAnalysis> {
    guard(py, || {
        let selection = match (kind, points.as_slice()) {
            ("all", []) => Selection::All,
            ("active_at", [p]) => Selection::ActiveAt { point: *p },
            ("born_between", [a, b]) => Selection::BornBetween { start: *a, end: *b },
            _ => {
                return Err(BindingError::InvalidInput(format!(
                    "selection {kind} with {} points is not one of all(), active_at(point), \
                     born_between(start, end)",
                    points.len()
                )))
            }
        };
        let inner = py.detach(|| lt::run_lifetimes(&reader.inner, selection, through))?;
        Ok(MemoryAllocationLifetimeAnalysis::new(inner))
    })
}

pub(super) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<MemoryAllocationLifetimeAnalysis>()?;
    m.add_class::<AllocationCohort>()?;
    m.add_class::<CohortBirth>()?;
    m.add_class::<CohortFreeRequest>()?;
    m.add_class::<CohortFreeCompletion>()?;
    m.add_class::<CohortPointState>()?;
    m.add_class::<CohortSizeBucket>()?;
    m.add_class::<CohortSizeOutcome>()?;
    m.add_function(wrap_pyfunction!(memory_lifetimes, m)?)?;
    Ok(())
}
