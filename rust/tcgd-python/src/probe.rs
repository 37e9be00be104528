//! `ProbeRuntime`: the CUDA probe runtime as the Python `TensorProbe` drives it.

use std::sync::{Mutex, MutexGuard};

use pyo3::prelude::*;
use pyo3::types::PyBytes;
use tcgd_cuda::{CaptureState, CheckSpec, CudaError, PrintSpec};

use crate::errors::{guard, BindResult, BindingError};
use crate::{parse_dtype, HostBytes};

#[pyclass(module = "torch_cudagraph_debug._native")]
pub struct ProbeRuntime {
    inner: Mutex<tcgd_cuda::ProbeRuntime>,
}

impl ProbeRuntime {
    pub(crate) fn lock(&self) -> BindResult<MutexGuard<'_, tcgd_cuda::ProbeRuntime>> {
        self.inner
            .lock()
            .map_err(|_| BindingError::Internal("probe runtime lock poisoned".into()))
    }

    /// Runs `call` on the runtime: how a method reaches it (errors typed, a panic caught).
    fn with<T, E: Into<BindingError>>(
        &self,
        py: Python<'_>,
        call: impl FnOnce(&mut tcgd_cuda::ProbeRuntime) -> Result<T, E>,
    ) -> PyResult<T> {
        guard(py, || call(&mut *self.lock()?).map_err(Into::into))
    }
}

/// (replay, name, invocation, element, actual, expected)
type FailureTuple = (u64, String, i64, u64, String, String);

#[pymethods]
impl ProbeRuntime {
    #[new]
    fn new(py: Python<'_>, device: i32) -> PyResult<Self> {
        guard(py, || {
            let runtime = tcgd_cuda::ProbeRuntime::new(device)?;
            Ok(ProbeRuntime {
                inner: Mutex::new(runtime),
            })
        })
    }

    /// Whether `stream` (a raw CUstream handle) is capturing right now.
    fn capturing(&self, py: Python<'_>, stream: usize) -> PyResult<bool> {
        guard(py, || {
            let state = self.lock()?.capture_state(stream)?;
            match state {
                CaptureState::Capturing { .. } => Ok(true),
                CaptureState::Idle => Ok(false),
                CaptureState::Invalidated => Err(CudaError::CaptureInvalidated.into()),
            }
        })
    }

    fn bind_capture(&self, py: Python<'_>, stream: usize) -> PyResult<bool> {
        self.with(py, |r| r.bind_capture(stream))
    }

    fn add_slot(&self, py: Python<'_>, nbytes: usize) -> PyResult<usize> {
        self.with(py, |r| r.add_slot(nbytes))
    }

    fn copy_into_slot(
        &self,
        py: Python<'_>,
        slot: usize,
        src: u64,
        nbytes: usize,
        stream: usize,
    ) -> PyResult<()> {
        self.with(py, |r| r.copy_into_slot(slot, src, nbytes, stream))
    }

    /// One kernel launch copying each `(slot, src)` value into its slot (at most 16).
    fn copy_into_slots(
        &self,
        py: Python<'_>,
        copies: Vec<(usize, u64)>,
        stream: usize,
    ) -> PyResult<()> {
        self.with(py, |r| r.copy_into_slots(&copies, stream))
    }

    /// A history ring of `depth` values of `slot`'s size; returns its index.
    fn add_ring(&self, py: Python<'_>, slot: usize, depth: u64) -> PyResult<usize> {
        self.with(py, |r| r.add_ring(slot, depth))
    }

    /// Copy launches (`MAX_SITES_PER_LAUNCH` values each) of each `(ring, slot)` slot into
    /// its ring.
    fn copy_slots_into_rings(
        &self,
        py: Python<'_>,
        copies: Vec<(usize, usize)>,
        stream: usize,
    ) -> PyResult<()> {
        self.with(py, |r| r.copy_slots_into_rings(&copies, stream))
    }

    /// (values of every ring slot, concatenated; the replay each slot holds, 0: none).
    fn read_ring<'py>(
        &self,
        py: Python<'py>,
        ring: usize,
    ) -> PyResult<(Bound<'py, PyBytes>, Vec<u64>)> {
        guard(py, || {
            let contents = self.lock()?.read_ring(ring)?;
            let replays = contents.tags.iter().map(|&(replay, _)| replay).collect();
            Ok((PyBytes::new(py, &contents.values), replays))
        })
    }

    #[getter]
    fn history_frozen_at(&self, py: Python<'_>) -> PyResult<Option<u64>> {
        self.with(py, |r| r.history_frozen_at())
    }

    fn freeze_history(&self, py: Python<'_>, replay: u64) -> PyResult<()> {
        self.with(py, |r| r.freeze_history(replay))
    }

    fn rearm_history(&self, py: Python<'_>) -> PyResult<()> {
        self.with(py, |r| r.rearm_history())
    }

    #[allow(clippy::too_many_arguments)]
    #[pyo3(signature = (slot, stream, probe, name, invocation, dtype, shape, max_items, every, summary))]
    fn enqueue_print(
        &self,
        py: Python<'_>,
        slot: usize,
        stream: usize,
        probe: String,
        name: String,
        invocation: i64,
        dtype: &str,
        shape: Vec<i64>,
        max_items: usize,
        every: u64,
        summary: bool,
    ) -> PyResult<usize> {
        guard(py, || {
            let spec = PrintSpec {
                probe,
                name,
                invocation,
                dtype: parse_dtype(dtype)?,
                shape,
                max_items,
                every,
                summary,
            };
            self.lock()?
                .enqueue_print(slot, spec, stream)
                .map_err(BindingError::from)
        })
    }

    #[allow(clippy::too_many_arguments)]
    #[pyo3(signature = (slot, stream, name, invocation, dtype, expected, expected_dtype, rtol, atol, equal_nan))]
    fn enqueue_check(
        &self,
        py: Python<'_>,
        slot: usize,
        stream: usize,
        name: String,
        invocation: i64,
        dtype: &str,
        expected: HostBytes,
        expected_dtype: &str,
        rtol: f64,
        atol: f64,
        equal_nan: bool,
    ) -> PyResult<usize> {
        guard(py, || {
            // SAFETY: `expected` is a contiguous CPU tensor the caller keeps referenced
            // during this call; its bytes are copied into the spec here.
            let expected = unsafe { expected.as_slice() }.to_vec();
            let spec = CheckSpec {
                name,
                invocation,
                dtype: parse_dtype(dtype)?,
                expected,
                expected_dtype: parse_dtype(expected_dtype)?,
                rtol,
                atol,
                equal_nan,
            };
            self.lock()?
                .enqueue_check(slot, spec, stream)
                .map_err(BindingError::from)
        })
    }

    fn relaunch_action(&self, py: Python<'_>, action: usize, stream: usize) -> PyResult<()> {
        self.with(py, |r| r.relaunch_action(action, stream))
    }

    fn replay_count(&self, py: Python<'_>) -> PyResult<u64> {
        self.with(py, |r| r.replay_count())
    }

    fn read_slot<'py>(&self, py: Python<'py>, slot: usize) -> PyResult<Bound<'py, PyBytes>> {
        guard(py, || {
            let bytes = self.lock()?.read_slot(slot)?;
            Ok(PyBytes::new(py, &bytes))
        })
    }

    /// (evaluations, failures, first failure or None).
    fn check_status(&self, py: Python<'_>) -> PyResult<(u64, u64, Option<FailureTuple>)> {
        guard(py, || {
            let (evaluations, failures, first) = self.lock()?.check_status();
            Ok((
                evaluations,
                failures,
                first.map(|f| {
                    (
                        f.replay,
                        f.name,
                        f.invocation,
                        f.element,
                        f.actual,
                        f.expected,
                    )
                }),
            ))
        })
    }

    #[getter]
    fn slot_bytes(&self) -> PyResult<u64> {
        Ok(self.lock()?.slot_bytes())
    }

    #[getter]
    fn closed(&self) -> PyResult<bool> {
        Ok(self.lock()?.is_closed())
    }

    #[getter]
    fn bound(&self) -> PyResult<bool> {
        Ok(self.lock()?.is_bound())
    }

    fn close(&self, py: Python<'_>) -> PyResult<()> {
        guard(py, || {
            self.lock()?.close();
            Ok(())
        })
    }
}

/// The id of the capture the raw stream `stream` records into, or None.
#[pyfunction]
pub fn capture_id(py: Python<'_>, stream: usize) -> PyResult<Option<u64>> {
    guard(py, || {
        tcgd_cuda::capture_id(stream).map_err(BindingError::from)
    })
}

/// Whether a CUDA driver can be used in this process (never raises).
#[pyfunction]
pub fn cuda_available() -> bool {
    std::panic::catch_unwind(tcgd_cuda::cuda_available).unwrap_or(false)
}

/// Frees probe memory released by destroyed graphs; returns how many probes' worth.
#[pyfunction]
pub fn release_deferred(py: Python<'_>) -> PyResult<usize> {
    guard(py, || Ok(tcgd_cuda::release_deferred()))
}

/// (device bytes, pinned host bytes) held by probe runtimes in this process.
#[pyfunction]
pub fn probe_memory() -> (u64, u64) {
    (
        tcgd_cuda::live_device_bytes(),
        tcgd_cuda::live_pinned_bytes(),
    )
}
