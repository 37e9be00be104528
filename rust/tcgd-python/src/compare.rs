//! Python bindings of tcgd-compare: comparisons run natively with the GIL released; the
//! Python layer hands over observation metadata and a loader for payload bytes, or run
//! directories that the engine reads itself.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use pyo3::prelude::*;
use tcgd_compare::{
    CompareError, CompareOptions, Comparison, ComparisonKind, ObservationMeta, ObservationSet,
    PayloadBuf, PayloadSource, PointMapping, PointRef, PointSelector, Progress, RunData, RunGroup,
    Subject,
};
use tcgd_store::{RunKind, RunSelector};

use crate::args::{Joined, ObservationArgs};
use crate::errors::{guard, BindResult, BindingError};
use crate::results::{self, PyOptions};
use crate::store::RunAddress;

// --------------------------------------------------------------------------- inputs

/// A compared observation's value: the digest of its stored bytes, or its summary.
#[derive(FromPyObject)]
#[pyo3(from_item_all)]
struct StoredValueArgs {
    digest: Option<String>,
    summary: Option<tcgd_tensor::TensorSummary>,
}

/// A set of observations from Python: a snapshot or a point, with a loader that returns
/// `(owner, (address, length))` for observation `i`: the bytes of a private, contiguous CPU
/// tensor that `owner` keeps alive.
#[derive(FromPyObject)]
#[pyo3(from_item_all)]
pub(crate) struct SetArgs {
    subject: Subject,
    point: PointRef,
    observations: Vec<ObservationArgs<StoredValueArgs>>,
    loader: Py<PyAny>,
}

/// Bytes lent by the Python layer.
struct PyPayload {
    _owner: Py<PyAny>,
    address: usize,
    len: usize,
}

impl PayloadBuf for PyPayload {
    fn bytes(&self) -> &[u8] {
        if self.len == 0 {
            return &[];
        }
        // SAFETY: the loader contract (see `SetArgs`) gives the address and length of a
        // private contiguous CPU tensor made for this comparison; `_owner` holds a
        // reference to it for as long as this buffer lives, and no one else references
        // the tensor, so the memory is valid, unmoved and not written while borrowed.
        unsafe { std::slice::from_raw_parts(self.address as *const u8, self.len) }
    }
}

/// Calls the Python loader; keeps the first Python error so it can be re-raised as is.
struct PySource {
    loader: Py<PyAny>,
    error: Arc<Mutex<Option<PyErr>>>,
}

impl PayloadSource for PySource {
    fn load(
        &self,
        index: usize,
        _meta: &ObservationMeta,
    ) -> tcgd_compare::Result<Arc<dyn PayloadBuf>> {
        Python::attach(|py| {
            let loaded = self
                .loader
                .call1(py, (index,))
                .and_then(|r| r.extract::<(Py<PyAny>, (usize, usize))>(py));
            match loaded {
                Ok((owner, (address, len))) => Ok(Arc::new(PyPayload {
                    _owner: owner,
                    address,
                    len,
                }) as Arc<dyn PayloadBuf>),
                Err(e) => {
                    let message = e.to_string();
                    if let Ok(mut slot) = self.error.lock() {
                        slot.get_or_insert(e);
                    }
                    Err(CompareError::External(message))
                }
            }
        })
    }
}

fn build_set(
    args: SetArgs,
    error: &Arc<Mutex<Option<PyErr>>>,
) -> BindResult<(ObservationSet, Subject)> {
    let mut observations = Vec::with_capacity(args.observations.len());
    for Joined(descriptor, Joined(value, site)) in args.observations {
        let site = tcgd_store::Site::from(site);
        observations.push(ObservationMeta {
            descriptor: descriptor.check()?,
            digest: value.digest,
            summary: value.summary,
            site: Some(site).filter(|s| !s.is_empty()),
        });
    }
    let source = Arc::new(PySource {
        loader: args.loader,
        error: error.clone(),
    });
    Ok((
        ObservationSet {
            point: args.point,
            observations,
            source,
        },
        args.subject,
    ))
}

/// Reports progress to an optional Python callback `(done_bytes, total_bytes, current)`, at
/// most ten times a second, and checks for Ctrl-C.
struct PyProgress {
    callback: Option<Py<PyAny>>,
    last: Mutex<Option<Instant>>,
    error: Arc<Mutex<Option<PyErr>>>,
}

impl Progress for PyProgress {
    fn report(&self, done: u64, total: u64, current: &str) -> tcgd_compare::Result<()> {
        let finished = done >= total;
        if let Ok(mut last) = self.last.lock() {
            let due = last.is_none_or(|t| t.elapsed() >= Duration::from_millis(100));
            if !due && !finished {
                return Ok(());
            }
            *last = Some(Instant::now());
        }
        Python::attach(|py| {
            let outcome = py.check_signals().and_then(|()| match &self.callback {
                Some(cb) => cb.call1(py, (done, total, current)).map(|_| ()),
                None => Ok(()),
            });
            outcome.map_err(|e| {
                if let Ok(mut slot) = self.error.lock() {
                    slot.get_or_insert(e);
                }
                CompareError::Interrupted
            })
        })
    }
}

/// A comparison called from Python: its options, and its progress reporter, which keeps
/// the first Python error a callback (the progress callback or a set's loader) raised.
struct Call {
    options: CompareOptions,
    progress: PyProgress,
}

impl Call {
    fn new(
        options: Option<&Bound<'_, PyAny>>,
        progress_callback: Option<Py<PyAny>>,
    ) -> BindResult<Call> {
        Ok(Call {
            options: PyOptions::of(options)?,
            progress: PyProgress {
                callback: progress_callback,
                last: Mutex::new(None),
                error: Arc::default(),
            },
        })
    }

    /// A set from Python, whose loader keeps its errors with the call's.
    fn set(&self, args: SetArgs) -> BindResult<(ObservationSet, Subject)> {
        build_set(args, &self.progress.error)
    }

    /// Runs the comparison with the GIL released and returns its result class, holding
    /// `subjects` (the two things compared, where given as objects); a Python error raised
    /// by a loader or the progress callback is re-raised unchanged.
    fn run(
        &self,
        py: Python<'_>,
        subjects: (Option<Py<PyAny>>, Option<Py<PyAny>>),
        work: impl FnOnce(&CompareOptions, &PyProgress) -> tcgd_compare::Result<Comparison> + Send,
    ) -> BindResult<Py<PyAny>> {
        match py.detach(|| work(&self.options, &self.progress)) {
            Ok(c) => results::result(py, c, subjects).map_err(BindingError::Python),
            Err(e) => {
                let kept = self
                    .progress
                    .error
                    .lock()
                    .ok()
                    .and_then(|mut slot| slot.take());
                Err(kept.map_or_else(|| BindingError::from(e), BindingError::Python))
            }
        }
    }
}

/// A tensor run as the engine reads it.
fn open(run: &RunAddress) -> tcgd_compare::Result<RunData> {
    RunData::open_selected(run.root(), &run.selector(RunKind::Tensor))
}

fn selector(value: &Bound<'_, PyAny>) -> BindResult<PointSelector> {
    if let Ok(i) = value.extract::<i64>() {
        return Ok(PointSelector::Index(i));
    }
    Ok(PointSelector::Label(value.extract::<String>()?))
}

/// `None` (by label), `"label"`, `"index"`, or a list of `(reference, candidate)` pairs of
/// labels or indices.
fn mapping(value: Option<&Bound<'_, PyAny>>) -> BindResult<PointMapping> {
    let Some(value) = value.filter(|v| !v.is_none()) else {
        return Ok(PointMapping::ByLabel);
    };
    if let Ok(s) = value.extract::<String>() {
        return match s.as_str() {
            "label" => Ok(PointMapping::ByLabel),
            "index" => Ok(PointMapping::ByIndex),
            other => Err(BindingError::InvalidInput(format!(
                "point_mapping {other:?} is not \"label\" or \"index\"; give a mapping of \
                     reference to candidate points to pair them explicitly"
            ))),
        };
    }
    let pairs: Vec<(Bound<'_, PyAny>, Bound<'_, PyAny>)> = value.extract().map_err(|_| {
        BindingError::InvalidInput(
            "point_mapping must be None, \"label\", \"index\", or pairs of point labels or \
             indices"
                .into(),
        )
    })?;
    let mut out = Vec::with_capacity(pairs.len());
    for (r, c) in pairs {
        out.push((selector(&r)?, selector(&c)?));
    }
    Ok(PointMapping::Pairs(out))
}

/// A group as Python names it: `(root, name, runs)`; with a root, its runs named `name`
/// (any name when the root's runs share one); without, the runs themselves.
type GroupArgs = (Option<PathBuf>, Option<String>, Vec<RunAddress>);

fn group(py: Python<'_>, (root, name, runs): GroupArgs) -> BindResult<RunGroup> {
    let runs: Vec<(PathBuf, RunSelector)> = runs
        .iter()
        .map(|r| (r.root().to_path_buf(), r.selector(RunKind::Tensor)))
        .collect();
    Ok(py.detach(|| match root {
        Some(root) => RunGroup::load(&root, name.as_deref()),
        None => RunGroup::from_runs(&runs),
    })?)
}

/// A side of a group comparison: a group already loaded (`RunGroupInfo`, shared as it
/// is), or the `GroupArgs` to load one.
fn group_of(py: Python<'_>, side: &Bound<'_, PyAny>) -> BindResult<Arc<RunGroup>> {
    if let Ok(info) = side.cast::<results::PyGroupInfo>() {
        return Ok(info.get().shared());
    }
    Ok(Arc::new(group(py, side.extract::<GroupArgs>()?)?))
}

// ------------------------------------------------------------------------ functions

/// Compares two observation sets (`kind` is "snapshots" or "points").
#[pyfunction]
#[pyo3(signature = (kind, reference, candidate, options=None, progress_callback=None))]
pub(crate) fn compare_sets(
    py: Python<'_>,
    kind: &str,
    reference: SetArgs,
    candidate: SetArgs,
    options: Option<&Bound<'_, PyAny>>,
    progress_callback: Option<Py<PyAny>>,
) -> PyResult<Py<PyAny>> {
    guard(py, || {
        let kind = match kind {
            "snapshots" => ComparisonKind::Snapshots,
            "points" => ComparisonKind::Points,
            other => {
                return Err(BindingError::InvalidInput(format!(
                    "kind must be \"snapshots\" or \"points\", got {other:?}"
                )))
            }
        };
        let call = Call::new(options, progress_callback)?;
        let reference = call.set(reference)?;
        let candidate = call.set(candidate)?;
        call.run(py, (None, None), |options, progress| {
            tcgd_compare::compare_sets(
                kind,
                (&reference.0, reference.1),
                (&candidate.0, candidate.1),
                options,
                progress,
            )
        })
    })
}

/// Compares two runs point by point; the engine reads the payloads itself. With `names`,
/// only observations of those names are compared (on both sides).
#[pyfunction]
#[pyo3(signature = (reference, candidate, options=None, point_mapping=None, progress_callback=None, names=None))]
pub(crate) fn compare_runs(
    py: Python<'_>,
    reference: RunAddress,
    candidate: RunAddress,
    options: Option<&Bound<'_, PyAny>>,
    point_mapping: Option<&Bound<'_, PyAny>>,
    progress_callback: Option<Py<PyAny>>,
    names: Option<Vec<String>>,
) -> PyResult<Py<PyAny>> {
    guard(py, || {
        let call = Call::new(options, progress_callback)?;
        let mapping = mapping(point_mapping)?;
        call.run(py, (None, None), |options, progress| {
            let (mut reference, mut candidate) = (open(&reference)?, open(&candidate)?);
            if let Some(names) = &names {
                let names = names.iter().cloned().collect();
                reference.retain_names(&names);
                candidate.retain_names(&names);
            }
            tcgd_compare::compare_runs(&reference, &candidate, &mapping, options, progress)
        })
    })
}

/// Compares one point (from Python) against every point of a run; the result holds
/// `candidate_run` (the run object compared, where there is one).
#[pyfunction]
#[pyo3(signature = (reference, run, options=None, progress_callback=None, candidate_run=None))]
pub(crate) fn compare_point_series(
    py: Python<'_>,
    reference: SetArgs,
    run: RunAddress,
    options: Option<&Bound<'_, PyAny>>,
    progress_callback: Option<Py<PyAny>>,
    candidate_run: Option<Py<PyAny>>,
) -> PyResult<Py<PyAny>> {
    guard(py, || {
        let call = Call::new(options, progress_callback)?;
        let reference = call.set(reference)?;
        call.run(py, (None, candidate_run), |options, progress| {
            tcgd_compare::compare_point_series(
                (&reference.0, reference.1),
                &open(&run)?,
                options,
                progress,
            )
        })
    })
}

/// Compares two run groups rank by rank; each side is `(root, paths)`: a job directory,
/// or (root `None`) the runs themselves. The result holds `groups`, the two group objects
/// compared, where given.
#[pyfunction]
#[pyo3(signature = (reference, candidate, options=None, point_mapping=None, progress_callback=None, groups=(None, None)))]
pub(crate) fn compare_run_groups(
    py: Python<'_>,
    reference: &Bound<'_, PyAny>,
    candidate: &Bound<'_, PyAny>,
    options: Option<&Bound<'_, PyAny>>,
    point_mapping: Option<&Bound<'_, PyAny>>,
    progress_callback: Option<Py<PyAny>>,
    groups: (Option<Py<PyAny>>, Option<Py<PyAny>>),
) -> PyResult<Py<PyAny>> {
    guard(py, || {
        let call = Call::new(options, progress_callback)?;
        let mapping = mapping(point_mapping)?;
        let reference = group_of(py, reference)?;
        let candidate = group_of(py, candidate)?;
        call.run(py, groups, |options, progress| {
            tcgd_compare::compare_run_groups(&reference, &candidate, &mapping, options, progress)
        })
    })
}

/// A run group, loaded and checked: with `root`, its tensor runs named `name`; without,
/// `runs`.
#[pyfunction]
#[pyo3(signature = (root=None, name=None, runs=Vec::new()))]
pub(crate) fn run_group(
    py: Python<'_>,
    root: Option<PathBuf>,
    name: Option<String>,
    runs: Vec<RunAddress>,
) -> PyResult<results::PyGroupInfo> {
    guard(py, || Ok(Arc::new(group(py, (root, name, runs))?).into()))
}
