//! Allocation lifetimes as frozen Python classes: the analysis
//! (`MemoryAllocationLifetimeAnalysis`) renders through the Rust report layer; its rows
//! (`AllocationCohort` and the per-point, size and transition rows) are built once, on
//! first access, straight from the Rust result. Each row keeps its core value for
//! `to_dict()` (the row as `report.json` holds it) and `to_row()` (its CSV line).

use std::sync::OnceLock;

use pyo3::types::PyDict;
use tcgd_memory::lifetimes::{
    self as lt, AllocationCohort as RustCohort, CohortTransition as RustTransition,
    LifetimeAnalysis, Selection, StackFrame,
};
use tcgd_memory::report::{self as rep, Display};
use tcgd_report::Cell;

use crate::results::serde_to_py;

use super::*;

use tcgd_report::python::cells_to_python;

/// Rows as `[{column: value}, ...]`.
pub(crate) fn row_dicts<'py>(
    py: Python<'py>,
    rows: Vec<Vec<(String, Cell)>>,
) -> PyResult<Vec<Bound<'py, PyDict>>> {
    rows.into_iter().map(|r| cells_to_python(py, r)).collect()
}

/// How many frames `display_stack(depth)` shows: every frame for `None`.
pub(crate) fn display_depth(depth: Option<i64>) -> BindResult<usize> {
    tcgd_memory::frames::display_depth(depth).map_err(BindingError::InvalidInput)
}

fn tuple<'py, T: IntoPyObject<'py>>(
    py: Python<'py>,
    items: impl IntoIterator<Item = T, IntoIter: ExactSizeIterator>,
) -> PyResult<Py<PyTuple>> {
    Ok(PyTuple::new(py, items)?.unbind())
}

/// `(filename, line, function)` of every frame.
fn frames(py: Python<'_>, frames: &[StackFrame]) -> PyResult<Py<PyTuple>> {
    tuple(
        py,
        frames
            .iter()
            .map(|f| (f.filename.clone(), f.line, f.name.clone())),
    )
}

fn label(p: Option<&lt::PointRef>) -> Option<String> {
    p.map(|p| p.label.clone())
}

fn index(p: Option<&lt::PointRef>) -> Option<i64> {
    p.map(|p| p.index)
}

/// The objects `of` makes from `items`, as a tuple.
fn objects<'py, R, T>(
    py: Python<'py>,
    items: &[R],
    of: impl Fn(&R) -> PyResult<T>,
) -> PyResult<Py<PyTuple>>
where
    T: Into<pyo3::PyClassInitializer<T>> + pyo3::PyClass,
{
    let bound = items
        .iter()
        .map(|r| Bound::new(py, of(r)?))
        .collect::<PyResult<Vec<Bound<'py, T>>>>()?;
    tuple(py, bound)
}

/// A cohort's own id unless the caller names another.
fn owner<'a>(cohort_id: &'a Option<String>, own: &'a str) -> &'a str {
    cohort_id.as_deref().unwrap_or(own)
}

/// Transitions of one kind (births, free requests or free completions) of one cohort in
/// one interval, with one origin and one event stack. The base of `CohortBirth`,
/// `CohortFreeRequest` and `CohortFreeCompletion`, which differ only in kind.
#[pyclass(
    name = "_CohortTransition",
    module = "torch_cudagraph_debug._native",
    frozen,
    subclass,
    skip_from_py_object
)]
pub struct CohortTransition {
    /// The label of the interval's first point; `None` for a range-boundary row (the
    /// transition happened before the first analysed point).
    #[pyo3(get)]
    start_point: Option<String>,
    #[pyo3(get)]
    start_point_index: Option<i64>,
    /// The label of the point whose history window holds the transitions.
    #[pyo3(get)]
    end_point: String,
    #[pyo3(get)]
    end_point_index: i64,
    /// `event` or `range_boundary`.
    #[pyo3(get)]
    origin: &'static str,
    /// `(filename, line, function)` of every frame of the event stack, innermost first.
    #[pyo3(get)]
    stack_frames: Py<PyTuple>,
    /// Locations only (`file:line`, innermost first); `<unattributed>` without frames.
    #[pyo3(get)]
    stack_key: String,
    /// Fingerprint of the complete stack, every frame field included.
    #[pyo3(get)]
    stack_fingerprint: String,
    /// Whether the stack is not the call stack of the row's own allocator event: a
    /// range-boundary row, or an event without frames.
    #[pyo3(get)]
    stack_fallback: bool,
    /// Bytes (allocator-rounded) of the generations.
    #[pyo3(get)]
    bytes: i64,
    /// Generations.
    #[pyo3(get)]
    count: i64,
    cohort_id: String,
    inner: RustTransition,
}

impl CohortTransition {
    fn of(py: Python<'_>, cohort_id: &str, t: &RustTransition) -> PyResult<Self> {
        Ok(CohortTransition {
            start_point: label(t.start_point.as_ref()),
            start_point_index: index(t.start_point.as_ref()),
            end_point: t.end_point.label.clone(),
            end_point_index: t.end_point.index,
            origin: t.origin.as_str(),
            stack_frames: frames(py, &t.stack_frames)?,
            stack_key: t.stack_key.clone(),
            stack_fingerprint: tcgd_memory::attribution::frames_fingerprint(&t.stack_frames),
            stack_fallback: t.stack_fallback(),
            bytes: t.bytes,
            count: t.count,
            cohort_id: cohort_id.to_owned(),
            inner: t.clone(),
        })
    }
}

#[pymethods]
impl CohortTransition {
    /// The reference's name of `start_point_index`.
    #[getter]
    fn start_index(&self) -> Option<i64> {
        self.start_point_index
    }

    /// The reference's name of `end_point_index`.
    #[getter]
    fn end_index(&self) -> i64 {
        self.end_point_index
    }

    /// The reference's name of `start_point`.
    #[getter]
    fn start_label(&self) -> Option<String> {
        self.start_point.clone()
    }

    /// The reference's name of `end_point`.
    #[getter]
    fn end_label(&self) -> String {
        self.end_point.clone()
    }

    /// The reference's name of `bytes`.
    #[getter]
    fn size_bytes(&self) -> i64 {
        self.bytes
    }

    /// The first `depth` frames as reports show stacks (`file:line:function`, innermost
    /// first, FX node where torch gave one); every frame for `None`.
    #[pyo3(signature = (depth=None))]
    fn display_stack(&self, py: Python<'_>, depth: Option<i64>) -> PyResult<String> {
        let depth = guard(py, || display_depth(depth))?;
        Ok(tcgd_memory::attribution::frames_at_depth(
            &self.inner.stack_frames,
            depth,
        ))
    }

    /// The row as `report.json` holds it.
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        serde_to_py(py, &self.inner)
    }

    /// The row as its line of `birth_stacks.csv`, `free_request_stacks.csv` or
    /// `free_completion_stacks.csv` holds it; `cohort_id` defaults to the id of the
    /// cohort it belongs to.
    #[pyo3(signature = (cohort_id=None))]
    fn to_row<'py>(
        &self,
        py: Python<'py>,
        cohort_id: Option<String>,
    ) -> PyResult<Bound<'py, PyDict>> {
        cells_to_python(py, self.inner.csv_row(owner(&cohort_id, &self.cohort_id)))
    }

    fn __repr__(slf: &Bound<'_, Self>) -> PyResult<String> {
        crate::classes::attrs_repr(
            slf.as_any(),
            &[
                "start_point",
                "end_point",
                "origin",
                "stack_key",
                "bytes",
                "count",
            ],
        )
    }
}

/// Births of one cohort in one interval, by origin and allocation stack.
#[pyclass(
    module = "torch_cudagraph_debug._native",
    frozen,
    extends = CohortTransition,
    skip_from_py_object
)]
pub struct CohortBirth {}

/// Free requests of one cohort in one interval, by origin and event stack.
#[pyclass(
    module = "torch_cudagraph_debug._native",
    frozen,
    extends = CohortTransition,
    skip_from_py_object
)]
pub struct CohortFreeRequest {}

/// Free completions of one cohort in one interval, by origin and event stack.
#[pyclass(
    module = "torch_cudagraph_debug._native",
    frozen,
    extends = CohortTransition,
    skip_from_py_object
)]
pub struct CohortFreeCompletion {}

/// Transition rows as a tuple of `Kind` objects (a subclass of `_CohortTransition`).
fn transitions<'py, Kind>(
    py: Python<'py>,
    cohort_id: &str,
    rows: &[RustTransition],
    kind: fn() -> Kind,
) -> PyResult<Py<PyTuple>>
where
    Kind: pyo3::PyClass<BaseType = CohortTransition>,
{
    let bound = rows
        .iter()
        .map(|t| {
            let base = CohortTransition::of(py, cohort_id, t)?;
            Bound::new(
                py,
                pyo3::PyClassInitializer::from(base).add_subclass(kind()),
            )
        })
        .collect::<PyResult<Vec<Bound<'py, Kind>>>>()?;
    tuple(py, bound)
}

/// Allocation generations of one (device, pool, complete allocation stack).
#[pyclass(module = "torch_cudagraph_debug._native", frozen, skip_from_py_object)]
pub struct AllocationCohort {
    /// Stable fingerprint of the identity: the same allocation site gets the same id in
    /// every report.
    #[pyo3(get)]
    cohort_id: String,
    /// Position in this report's ordering (largest unreusable footprint first).
    #[pyo3(get)]
    display_rank: usize,
    #[pyo3(get)]
    device: i64,
    /// `(a, b)`, or `("unknown",)` for an unattributable transient.
    #[pyo3(get)]
    pool_id: Py<PyTuple>,
    /// `pool[a,b]` or `pool[unknown]`.
    #[pyo3(get)]
    pool_label: String,
    /// `(filename, line, function)` of every frame, innermost first.
    #[pyo3(get)]
    stack_frames: Py<PyTuple>,
    /// Locations only (`file:line`, innermost first); `<unattributed>` without frames.
    #[pyo3(get)]
    stack_key: String,
    /// Fingerprint of the complete stack, every frame field included.
    #[pyo3(get)]
    stack_fingerprint: String,
    /// Part of the identity only for allocations without frames.
    #[pyo3(get)]
    block_size_bytes: Option<i64>,
    #[pyo3(get)]
    requested_size_bytes: Option<i64>,
    #[pyo3(get)]
    streams: Py<PyTuple>,
    #[pyo3(get)]
    generation_count: i64,
    /// `CohortPointState` of every analysed point.
    #[pyo3(get)]
    points: Py<PyTuple>,
    #[pyo3(get)]
    size_histogram: Py<PyTuple>,
    #[pyo3(get)]
    size_outcomes: Py<PyTuple>,
    #[pyo3(get)]
    births: Py<PyTuple>,
    #[pyo3(get)]
    free_requests: Py<PyTuple>,
    #[pyo3(get)]
    free_completions: Py<PyTuple>,
    /// Largest sampled `active_bytes` (`snapshot_peak`).
    #[pyo3(get)]
    peak_active_bytes: i64,
    #[pyo3(get)]
    peak_owner_active_bytes: i64,
    #[pyo3(get)]
    peak_awaiting_free_bytes: i64,
    /// Largest sampled block count (`snapshot_blocks`).
    #[pyo3(get)]
    peak_block_count: i64,
    /// Largest minus smallest sampled active bytes.
    #[pyo3(get)]
    active_span_bytes: i64,
    /// Largest owner-active bytes replayed from the range start and the events
    /// (`owner_event_peak`).
    #[pyo3(get)]
    event_owner_peak_bytes: i64,
    /// Largest owner-active plus awaiting-free bytes so replayed (`unreusable_event_peak`).
    #[pyo3(get)]
    event_unreusable_peak_bytes: i64,
    #[pyo3(get)]
    first_sampled_point: Option<String>,
    #[pyo3(get)]
    last_sampled_point: Option<String>,
    #[pyo3(get)]
    first_event_point: Option<String>,
    #[pyo3(get)]
    last_event_point: Option<String>,
    /// Index of the earliest point that showed the cohort, sampled or through an event.
    #[pyo3(get)]
    first_seen_index: Option<i64>,
    #[pyo3(get)]
    first_seen_label: Option<String>,
    /// Index of the latest point that showed the cohort, sampled or through an event.
    #[pyo3(get)]
    last_seen_index: Option<i64>,
    #[pyo3(get)]
    last_seen_label: Option<String>,
    #[pyo3(get)]
    born_bytes: i64,
    #[pyo3(get)]
    born_count: i64,
    #[pyo3(get)]
    free_requested_bytes: i64,
    #[pyo3(get)]
    free_requested_count: i64,
    #[pyo3(get)]
    free_completed_bytes: i64,
    #[pyo3(get)]
    free_completed_count: i64,
    /// Owner-active bytes at the last analysed point.
    #[pyo3(get)]
    terminal_owner_active_bytes: i64,
    #[pyo3(get)]
    terminal_owner_active_count: i64,
    /// Awaiting-free bytes at the last analysed point.
    #[pyo3(get)]
    terminal_awaiting_free_bytes: i64,
    #[pyo3(get)]
    terminal_awaiting_free_count: i64,
    inner: RustCohort,
}

impl AllocationCohort {
    fn of(py: Python<'_>, c: &RustCohort) -> PyResult<Self> {
        let pool_id = match c.pool_id {
            Some((a, b)) => tuple(py, [a, b])?,
            None => tuple(py, ["unknown"])?,
        };
        let id = c.cohort_id.as_str();
        let (first, last) = (c.span.first_seen(), c.span.last_seen());
        let t = &c.transitions;
        Ok(AllocationCohort {
            cohort_id: c.cohort_id.clone(),
            display_rank: c.display_rank,
            device: c.device,
            pool_id,
            pool_label: c.pool_label.clone(),
            stack_frames: frames(py, &c.stack_frames)?,
            stack_key: c.stack_key.clone(),
            stack_fingerprint: c.stack_fingerprint(),
            block_size_bytes: c.block_size_bytes,
            requested_size_bytes: c.requested_size_bytes,
            streams: tuple(py, c.streams.iter().copied())?,
            generation_count: c.generation_count,
            points: objects(py, &c.points, |p| Ok(p.clone()))?,
            size_histogram: objects(py, &c.size_histogram, |b| Ok(b.clone()))?,
            size_outcomes: objects(py, &c.size_outcomes, |o| Ok(o.clone()))?,
            births: transitions(py, id, &t.births, || CohortBirth {})?,
            free_requests: transitions(py, id, &t.free_requests, || CohortFreeRequest {})?,
            free_completions: transitions(py, id, &t.free_completions, || CohortFreeCompletion {})?,
            peak_active_bytes: c.peaks.peak_active_bytes,
            peak_owner_active_bytes: c.peaks.peak_owner_active_bytes,
            peak_awaiting_free_bytes: c.peaks.peak_awaiting_free_bytes,
            peak_block_count: c.peaks.peak_block_count,
            active_span_bytes: c.peaks.active_span_bytes,
            event_owner_peak_bytes: c.peaks.event_owner_peak_bytes,
            event_unreusable_peak_bytes: c.peaks.event_unreusable_peak_bytes,
            first_sampled_point: label(c.span.first_sampled_point.as_ref()),
            last_sampled_point: label(c.span.last_sampled_point.as_ref()),
            first_event_point: label(c.span.first_event_point.as_ref()),
            last_event_point: label(c.span.last_event_point.as_ref()),
            first_seen_index: index(first),
            first_seen_label: label(first),
            last_seen_index: index(last),
            last_seen_label: label(last),
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
            inner: c.clone(),
        })
    }
}

#[pymethods]
impl AllocationCohort {
    /// The reference's name of `active_span_bytes`.
    #[getter]
    fn snapshot_active_span_bytes(&self) -> i64 {
        self.active_span_bytes
    }

    /// The reference's name of `terminal_owner_active_bytes`.
    #[getter]
    fn owner_active_at_end_bytes(&self) -> i64 {
        self.terminal_owner_active_bytes
    }

    /// The reference's name of `terminal_owner_active_count`.
    #[getter]
    fn owner_active_at_end_count(&self) -> i64 {
        self.terminal_owner_active_count
    }

    /// The reference's name of `terminal_awaiting_free_bytes`.
    #[getter]
    fn awaiting_free_at_end_bytes(&self) -> i64 {
        self.terminal_awaiting_free_bytes
    }

    /// The reference's name of `terminal_awaiting_free_count`.
    #[getter]
    fn awaiting_free_at_end_count(&self) -> i64 {
        self.terminal_awaiting_free_count
    }

    /// The first `depth` frames as reports show stacks (`file:line:function`, innermost
    /// first, FX node where torch gave one); every frame for `None`.
    #[pyo3(signature = (depth=None))]
    fn display_stack(&self, py: Python<'_>, depth: Option<i64>) -> PyResult<String> {
        let depth = guard(py, || display_depth(depth))?;
        Ok(tcgd_memory::attribution::frames_at_depth(
            &self.inner.stack_frames,
            depth,
        ))
    }

    /// The cohort as `report.json` holds it (its entry of the analysis' `cohorts`).
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        serde_to_py(py, &self.inner)
    }

    /// The cohort as its line of `cohorts.csv` holds it.
    fn to_row<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        cells_to_python(py, self.inner.csv_row())
    }

    fn __repr__(slf: &Bound<'_, Self>) -> PyResult<String> {
        crate::classes::attrs_repr(
            slf.as_any(),
            &[
                "cohort_id",
                "display_rank",
                "device",
                "pool_label",
                "stack_key",
                "generation_count",
                "event_unreusable_peak_bytes",
            ],
        )
    }
}

fn display(limit: Option<i64>, stack_depth: Option<i64>) -> BindResult<Display> {
    let d = Display::LIFETIMES;
    let check = |v: Option<i64>, what: &str, default: usize| -> BindResult<usize> {
        match v {
            None => Ok(default),
            Some(v) if v >= 0 => Ok(v as usize),
            Some(v) => Err(BindingError::InvalidInput(format!(
                "{what} must be a non-negative integer, got {v}"
            ))),
        }
    };
    Ok(Display {
        limit: check(limit, "limit", d.limit)?,
        stack_depth: check(stack_depth, "stack_depth", d.stack_depth)?,
    })
}

/// Allocation cohort lifetimes of a run range; see `docs/memory-debug.md`.
#[pyclass(module = "torch_cudagraph_debug._native", frozen, skip_from_py_object)]
pub struct MemoryAllocationLifetimeAnalysis {
    /// `run`: the analysis replayed a stored run.
    #[pyo3(get)]
    source_kind: &'static str,
    #[pyo3(get)]
    run_id: String,
    #[pyo3(get)]
    name: String,
    /// `all`, `active_at` or `born_between`.
    #[pyo3(get)]
    selection_kind: &'static str,
    /// The label of the range's first point.
    #[pyo3(get)]
    start_point: String,
    /// The label of the last analysed point.
    #[pyo3(get)]
    through_point: String,
    /// Labels of the analysed points, in order.
    #[pyo3(get)]
    points: Vec<String>,
    /// `(device, windows, events, complete)` per device.
    #[pyo3(get)]
    history: Vec<(i64, i64, i64, bool)>,
    #[pyo3(get)]
    tracked_generations: i64,
    /// Bytes of the tracked generations, each counted once.
    #[pyo3(get)]
    tracked_bytes: i64,
    /// Bytes of the tracked generations that have allocation frames.
    #[pyo3(get)]
    attributed_bytes: i64,
    /// `attributed_bytes / tracked_bytes` (`1.0` when nothing is tracked).
    #[pyo3(get)]
    instance_stack_coverage: f64,
    #[pyo3(get)]
    warnings: Vec<String>,
    inner: LifetimeAnalysis,
    cohorts: OnceLock<Py<PyTuple>>,
}

#[pymethods]
impl MemoryAllocationLifetimeAnalysis {
    /// The analysis as its JSON report holds it, as Python values.
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        tcgd_report::python::json_to_python(py, &rep::lifetimes_json(&self.inner))
    }

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

    /// Writes report.txt/json/html and the CSV set into `directory`; returns the paths by
    /// format (`text`, `json`, `html`) and CSV stem (`cohorts`, ...).
    #[pyo3(signature = (directory, limit=None, stack_depth=None, overwrite=false))]
    fn write<'py>(
        &self,
        py: Python<'py>,
        directory: PathBuf,
        limit: Option<i64>,
        stack_depth: Option<i64>,
        overwrite: bool,
    ) -> PyResult<Bound<'py, PyDict>> {
        let written = guard(py, || {
            let d = display(limit, stack_depth)?;
            let r = &self.inner;
            py.detach(|| {
                let files = rep::lifetimes_files(r, d);
                let own: Vec<String> = rep::LIFETIME_FILES.iter().map(|f| f.to_string()).collect();
                tcgd_report::write_report(&directory, &files, &own, overwrite)
            })
            .map_err(BindingError::from)
        })?;
        crate::classes::paths_by_format(py, written)
    }

    /// Writes the CSV files alone into `directory` (created if missing), replacing earlier
    /// copies of them and leaving every other file alone; returns their paths by stem.
    fn write_csv_files<'py>(
        &self,
        py: Python<'py>,
        directory: PathBuf,
    ) -> PyResult<Bound<'py, PyDict>> {
        let written = guard(py, || {
            let r = &self.inner;
            py.detach(|| {
                let files: Vec<(String, String)> = rep::lifetimes_files(r, Display::LIFETIMES)
                    .into_iter()
                    .filter(|(name, _)| name.ends_with(".csv"))
                    .collect();
                let own: Vec<String> = rep::LIFETIME_FILES
                    .iter()
                    .filter(|f| f.ends_with(".csv"))
                    .map(|f| f.to_string())
                    .collect();
                tcgd_report::write_report(&directory, &files, &own, true)
            })
            .map_err(BindingError::from)
        })?;
        crate::classes::paths_by_format(py, written)
    }

    /// Every cohort, in report order (`display_rank`).
    #[getter]
    fn cohorts(&self, py: Python<'_>) -> PyResult<Py<PyTuple>> {
        if let Some(t) = self.cohorts.get() {
            return Ok(t.clone_ref(py));
        }
        let t = objects(py, &self.inner.cohorts, |c| AllocationCohort::of(py, c))?;
        let _ = self.cohorts.set(t.clone_ref(py));
        Ok(t)
    }

    fn __repr__(slf: &Bound<'_, Self>) -> PyResult<String> {
        let cohorts = slf.get().inner.cohorts.len().to_string();
        crate::classes::attrs_repr_with(
            slf.as_any(),
            &[
                "name",
                "selection_kind",
                "through_point",
                "tracked_generations",
            ],
            &[("cohorts", cohorts)],
        )
    }
}

impl MemoryAllocationLifetimeAnalysis {
    pub(super) fn new(inner: LifetimeAnalysis) -> Self {
        let r = &inner;
        MemoryAllocationLifetimeAnalysis {
            source_kind: r.source_kind,
            run_id: r.run_id.clone(),
            name: r.name.clone(),
            selection_kind: r.selection.kind,
            start_point: r.range.start_point.label.clone(),
            through_point: r.range.through_point.label.clone(),
            points: r.range.points.iter().map(|p| p.label.clone()).collect(),
            history: r
                .history
                .iter()
                .map(|h| (h.device, h.windows, h.events, h.complete))
                .collect(),
            tracked_generations: r.tracked.tracked_generations,
            tracked_bytes: r.tracked.tracked_bytes,
            attributed_bytes: r.tracked.attributed_bytes,
            instance_stack_coverage: r.tracked.instance_stack_coverage,
            warnings: r.warnings.clone(),
            cohorts: OnceLock::new(),
            inner,
        }
    }
}

/// `run.lifetimes()`: `kind` is all, active_at (`points = [anchor]`) or born_between
/// (`points = [start, end]`); points and `through` are point indexes.
#[pyfunction]
#[pyo3(signature = (reader, kind, points, through=None))]
pub(crate) fn memory_lifetimes(
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
