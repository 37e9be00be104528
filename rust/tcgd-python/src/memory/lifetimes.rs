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

use crate::classes::{frozen_class, value_class};

use super::*;

frozen_class! {
    /// One cohort at one point: owner-active and awaiting-free bytes and counts.
    #[pyclass]
    pub struct CohortPointState(lt::CohortPointState);
    |p, py| {
        point_index: i64 => p.point_index;
        label: String => p.label.clone();
        owner_active_bytes: i64 => p.owner_active_bytes;
        owner_active_count: i64 => p.owner_active_count;
        awaiting_free_bytes: i64 => p.awaiting_free_bytes;
        awaiting_free_count: i64 => p.awaiting_free_count;
        active_bytes: i64 => p.active_bytes;
        block_count: i64 => p.block_count;
        requested_bytes: i64 => p.requested_bytes;
    }
    to_dict(Python);
    repr(all);
}

frozen_class! {
    /// Generations of one (size, requested size), each counted once.
    #[pyclass]
    pub struct CohortSizeBucket(lt::CohortSizeBucket);
    |b, py| {
        size_bytes: i64 => b.size_bytes;
        requested_size_bytes: i64 => b.requested_size_bytes;
        count: i64 => b.count;
        total_bytes: i64 => b.total_bytes;
    }
    to_dict(Python);
    repr(all);
}

frozen_class! {
    /// Generations of one size by where they ended at the last analysed point.
    #[pyclass]
    pub struct CohortSizeOutcome(lt::CohortSizeOutcome);
    |o, py| {
        size_bytes: i64 => o.size_bytes;
        requested_size_bytes: i64 => o.requested_size_bytes;
        outcome: &'static str => o.outcome.as_str();
        count: i64 => o.count;
        total_bytes: i64 => o.total_bytes;
    }
    to_dict(Python);
    repr(all);
}

/// A class of one kind of cohort transition in one interval (births, free requests, free
/// completions): origin, stack, bytes and count.
macro_rules! transition_class {
    ($(#$meta:tt)* $class:ident) => {
        value_class! {
            $(#$meta)*
            #[pyclass]
            pub struct $class {
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
            to_dict(Json);
            repr(all);
        }

        impl $class {
            fn of(py: Python<'_>, t: &CohortTransition) -> PyResult<Self> {
                Ok($class {
                    start_point: label(&t.start_point),
                    start_point_index: t.start_point.as_ref().map(|p| p.index),
                    end_point: t.end_point.label.clone(),
                    end_point_index: t.end_point.index,
                    origin: t.origin.as_str().to_owned(),
                    stack_frames: frames(py, &t.stack_frames)?,
                    stack_key: t.stack_key.clone(),
                    bytes: t.bytes,
                    count: t.count,
                })
            }
        }
    };
}

transition_class!(
    /// Births of one cohort in one interval, origin and allocation stack.
    CohortBirth
);
transition_class!(
    /// Free requests of one cohort in one interval, origin and event stack.
    CohortFreeRequest
);
transition_class!(
    /// Free completions of one cohort in one interval, origin and event stack.
    CohortFreeCompletion
);

value_class! {
    /// Allocation generations of one (device, pool, complete allocation stack).
    #[pyclass]
    pub struct AllocationCohort {
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
    to_dict(Json);
    repr(all);
}

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

fn transitions<T: pyo3::PyClass + Into<pyo3::PyClassInitializer<T>>>(
    py: Python<'_>,
    rows: &[CohortTransition],
    of: fn(Python<'_>, &CohortTransition) -> PyResult<T>,
) -> PyResult<Py<PyTuple>> {
    let items = rows
        .iter()
        .map(|t| of(py, t))
        .collect::<PyResult<Vec<_>>>()?;
    objects(py, items)
}

fn cohort(py: Python<'_>, c: &RustCohort) -> PyResult<AllocationCohort> {
    let pool_id = match c.pool_id {
        Some((a, b)) => tuple(py, [a, b])?,
        None => tuple(py, ["unknown"])?,
    };
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
        points: row_tuple::<CohortPointState, _>(py, &c.points)?,
        size_histogram: row_tuple::<CohortSizeBucket, _>(py, &c.size_histogram)?,
        size_outcomes: row_tuple::<CohortSizeOutcome, _>(py, &c.size_outcomes)?,
        births: transitions(py, &c.transitions.births, CohortBirth::of)?,
        free_requests: transitions(py, &c.transitions.free_requests, CohortFreeRequest::of)?,
        free_completions: transitions(
            py,
            &c.transitions.free_completions,
            CohortFreeCompletion::of,
        )?,
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

frozen_class!(impl MemoryAllocationLifetimeAnalysis |r, py| {
    source_kind: &'static str => r.source_kind;
    run_id: String => r.run_id.clone();
    name: String => r.name.clone();
    selection_kind: &'static str => r.selection.kind;
    start_point: String => r.range.start_point.label.clone();
    through_point: String => r.range.through_point.label.clone();
    /// Labels of the analysed points, in order.
    points: Vec<String> => r.range.points.iter().map(|p| p.label.clone()).collect();
    /// `(device, windows, events, complete)` per device.
    history: Vec<(i64, i64, i64, bool)> =>
        r.history.iter().map(|h| (h.device, h.windows, h.events, h.complete)).collect();
    tracked_generations: i64 => r.tracked.tracked_generations;
    tracked_bytes: i64 => r.tracked.tracked_bytes;
    attributed_bytes: i64 => r.tracked.attributed_bytes;
    instance_stack_coverage: f64 => r.tracked.instance_stack_coverage;
    warnings: Vec<String> => r.warnings.clone();
} {
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
});

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
    add_to_module!(
        m,
        [
            MemoryAllocationLifetimeAnalysis,
            AllocationCohort,
            CohortBirth,
            CohortFreeRequest,
            CohortFreeCompletion,
            CohortPointState,
            CohortSizeBucket,
            CohortSizeOutcome
        ],
        [memory_lifetimes]
    )
}
