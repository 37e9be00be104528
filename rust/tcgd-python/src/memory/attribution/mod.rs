//! Stack and event attribution for Python: the functions that attribute a comparison,
//! summarise and compare allocation stacks and render attribution sections; their result
//! classes are in [`results`].

use tcgd_memory::attribution::events::{self as ev, PointWindow};
use tcgd_memory::attribution::{
    self as att, AttributionRequest, BlockFilter, EventSummary, StackCoverage, StackDelta,
    StackSummary,
};
use tcgd_memory::lifetimes as lt;
use tcgd_memory::report::attribution::{self as rep, Display};

use super::*;

mod results;

pub use results::*;

/// `rendered` (a whole report in `format`) with the attribution sections of `items`
/// (one per comparison, in order) added, as [`rep::with_sections`] composes them.
#[pyfunction]
#[pyo3(signature = (
    rendered,
    format,
    items,
    include_unchanged = true,
    limit = Display::ATTRIBUTION.limit as i64,
    stack_depth = Display::ATTRIBUTION.stack_depth as i64
))]
pub(crate) fn with_attribution_sections(
    py: Python<'_>,
    rendered: String,
    format: &str,
    items: Vec<PyRef<'_, MemoryAttribution>>,
    include_unchanged: bool,
    limit: i64,
    stack_depth: i64,
) -> PyResult<String> {
    guard(py, || {
        let d = display(limit, stack_depth)?;
        let format = format_of(format)?;
        let refs: Vec<&att::Attribution> = items.iter().map(|a| &a.inner).collect();
        rep::with_sections(rendered, format, &refs, d, include_unchanged).map_err(|e| {
            BindingError::InvalidInput(format!("the report to extend is not a JSON object: {e}"))
        })
    })
}

/// One attribution CSV file by name (`allocation_stack_comparisons.csv` or
/// `events.csv`) over `items`, one per comparison, in order.
#[pyfunction]
#[pyo3(signature = (items, file_name, include_unchanged=true))]
pub(crate) fn attribution_csv(
    py: Python<'_>,
    items: Vec<PyRef<'_, MemoryAttribution>>,
    file_name: &str,
    include_unchanged: bool,
) -> PyResult<String> {
    guard(py, || {
        let refs: Vec<&att::Attribution> = items.iter().map(|a| &a.inner).collect();
        Ok(match file_name {
            "allocation_stack_comparisons.csv" => rep::stack_deltas_csv(&refs, include_unchanged),
            "events.csv" => rep::events_csv(&refs),
            other => {
                return Err(BindingError::InvalidInput(format!(
                    "unknown attribution file '{other}'; use allocation_stack_comparisons.csv \
                     or events.csv"
                )))
            }
        })
    })
}

/// Attributes a comparison. Events read the windows of the points after `reference` up
/// to `candidate`: from `reader` for run points, else from `interval` (the probe's
/// snapshots in that range, in order).
#[pyfunction]
#[pyo3(signature = (reference, candidate, comparison, *, stacks, events, lifetimes, reader=None, interval=None))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn memory_attribution(
    py: Python<'_>,
    reference: &MemoryState,
    candidate: &MemoryState,
    comparison: &MemoryComparison,
    stacks: bool,
    events: bool,
    lifetimes: bool,
    reader: Option<PyRef<'_, MemoryRunReader>>,
    interval: Option<Vec<PyRef<'_, MemoryState>>>,
) -> PyResult<MemoryAttribution> {
    let inner = guard(py, || {
        let request = AttributionRequest {
            stacks,
            events,
            lifetimes,
        };
        let (r, c) = (&reference.inner, &candidate.inner);
        let cmp = &comparison.inner;
        att::check_request(cmp.relation, &request)?;
        // Points of the interval, each with its stored events.
        let mut owned: Vec<(Arc<RustState>, Vec<Event>)> = Vec::new();
        if events && c.identity.index > r.identity.index {
            match (&reader, &interval) {
                (Some(reader), _) => {
                    for index in r.identity.index + 1..=c.identity.index {
                        let state = reader
                            .inner
                            .states()
                            .iter()
                            .find(|s| s.identity.index == index)
                            .cloned()
                            .ok_or_else(|| {
                                MemoryError::HistoryTruncated(format!(
                                    "event attribution '{}' -> '{}': point {index} of the \
                                     interval is not in the run (damaged and skipped), so its \
                                     history window is missing",
                                    r.identity.title(),
                                    c.identity.title()
                                ))
                            })?;
                        let run = &reader.inner;
                        let stored = py.detach(|| run.events(index))?;
                        owned.push((state, stored));
                    }
                }
                (None, Some(states)) => {
                    let mut expected = r.identity.index + 1;
                    for s in states {
                        if s.inner.identity.index != expected {
                            return Err(MemoryError::HistoryTruncated(format!(
                                "event attribution '{}' -> '{}': snapshot {expected} of the \
                                 interval is missing, so its history window is unknown",
                                r.identity.title(),
                                c.identity.title()
                            ))
                            .into());
                        }
                        expected += 1;
                        owned.push((s.inner.clone(), s.inner.events.clone()));
                    }
                    if expected != c.identity.index + 1 {
                        return Err(MemoryError::HistoryTruncated(format!(
                            "event attribution '{}' -> '{}': the interval's snapshots end at \
                             {}, not at the candidate",
                            r.identity.title(),
                            c.identity.title(),
                            expected - 1
                        ))
                        .into());
                    }
                }
                (None, None) => {
                    return Err(BindingError::InvalidInput(
                        "event attribution needs the run reader or the interval's snapshots".into(),
                    ))
                }
            }
        }
        let windows: Vec<PointWindow<'_>> = owned
            .iter()
            .map(|(s, e)| PointWindow {
                label: &s.identity.label,
                index: s.identity.index,
                events: e,
                windows: &s.windows,
            })
            .collect();
        let mut inner = att::attribute(r, c, cmp, &request, Some(&windows))?;
        // Lifetimes replay the run's stored history over the compared range.
        if lifetimes {
            let (a, b) = (r.identity.index, c.identity.index);
            let found = match &reader {
                Some(reader) if a != b => {
                    let run = &reader.inner;
                    Some(py.detach(|| lt::range_lifetimes(run, a.min(b), a.max(b))))
                }
                _ => None,
            };
            att::attach_lifetimes(&mut inner, found)?;
        }
        Ok(inner)
    })?;
    MemoryAttribution::of(py, inner)
}

fn filter(device: Option<i64>, pool: Option<(i64, i64)>, stream: Option<i64>) -> BlockFilter {
    BlockFilter {
        device,
        pool,
        stream,
    }
}

#[pyfunction]
#[pyo3(signature = (state, *, device=None, pool=None))]
pub(crate) fn allocation_stack_coverage(
    py: Python<'_>,
    state: &MemoryState,
    device: Option<i64>,
    pool: Option<(i64, i64)>,
) -> PyResult<StackCoverage> {
    guard(py, || {
        Ok(att::stacks::coverage(
            &state.inner,
            filter(device, pool, None),
        )?)
    })
}

#[pyfunction]
#[pyo3(signature = (state, *, device=None, pool=None, stream=None, by_stream=false))]
pub(crate) fn summarize_allocation_stacks(
    py: Python<'_>,
    state: &MemoryState,
    device: Option<i64>,
    pool: Option<(i64, i64)>,
    stream: Option<i64>,
    by_stream: bool,
) -> PyResult<Vec<StackSummary>> {
    guard(py, || {
        Ok(att::stacks::summarize(
            &state.inner,
            filter(device, pool, stream),
            by_stream,
        )?)
    })
}

/// Stack deltas between two states whose pools pair by id (`device`/`pool` restrict the
/// pairs).
#[pyfunction]
#[pyo3(signature = (reference, candidate, *, device=None, pool=None, stream=None, by_stream=false, include_unchanged=false))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn compare_allocation_stacks(
    py: Python<'_>,
    reference: &MemoryState,
    candidate: &MemoryState,
    device: Option<i64>,
    pool: Option<(i64, i64)>,
    stream: Option<i64>,
    by_stream: bool,
    include_unchanged: bool,
) -> PyResult<Vec<StackDelta>> {
    guard(py, || {
        let keep = |k: &Option<(i64, (i64, i64))>| {
            k.is_none_or(|(d, p)| device.is_none_or(|x| x == d) && pool.is_none_or(|x| x == p))
        };
        let pairs: Vec<_> = att::stacks::identity_pairs(&reference.inner, &candidate.inner)
            .into_iter()
            .filter(|(r, c)| keep(r) && keep(c))
            .collect();
        Ok(att::stacks::compare_stacks(
            &reference.inner,
            &candidate.inner,
            &pairs,
            stream,
            by_stream,
            include_unchanged,
        )?)
    })
}

/// Event rows of the entries `events_of` stored, pools looked up in the segments of
/// `reference` and `candidate`.
#[pyfunction]
pub(crate) fn summarize_state_events(
    events_of: &MemoryState,
    reference: &MemoryState,
    candidate: &MemoryState,
) -> Vec<EventSummary> {
    let ranges = ev::segment_ranges(&[&reference.inner, &candidate.inner]);
    ev::summarize_events(&events_of.inner.events, &events_of.inner.stacks, &ranges)
}

/// `(start, end, status)` of the window between the last `start_marker` and the last
/// `end_marker` (the end of the list when `None`).
#[pyfunction]
#[pyo3(signature = (metadata, start_marker, end_marker=None))]
pub(crate) fn event_window(
    metadata: Vec<Option<String>>,
    start_marker: &str,
    end_marker: Option<&str>,
) -> (usize, usize, &'static str) {
    let refs: Vec<Option<&str>> = metadata.iter().map(|m| m.as_deref()).collect();
    let (start, end, status) = ev::event_window(&refs, start_marker, end_marker);
    (start, end, status.as_str())
}
