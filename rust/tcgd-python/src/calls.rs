//! A compile session's calls and automatic points, kept natively.
//!
//! Every call of a callable a session compiled goes through [`CompiledCall`]. A callable
//! that runs again within the current point ends that point first, so one training step
//! (forward, backward, optimizer step) is one point, labelled `call<N>`. Once the
//! session's graphs replay, that bookkeeping and the point's close (the device recorder's
//! event and memset on torch's stream) run here, so a replayed call runs no Python beyond
//! the compiled callable's own. A point that carries values the host took itself (eager
//! runs, Graph Trees' warmup, CPU graphs) is committed by the session's Python, which
//! holds those values.

use std::sync::{Mutex, MutexGuard, OnceLock};

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};

use crate::errors::{guard, BindResult, BindingError};
use crate::recording::DeviceRecorder;

#[derive(Default)]
struct ClockState {
    /// Automatic points are on (the session's `auto_points`).
    auto: bool,
    /// A named point (`record_point`) is open: calls do not delimit points.
    explicit: bool,
    /// The session is finished or closed: nothing is recorded.
    closed: bool,
    /// The session's Python holds values of the current point (taken by the host).
    host_values: bool,
    /// The compiled callables (by identity) that ran in the current point.
    callables: Vec<usize>,
    /// Automatic points labelled so far.
    labelled: u64,
}

impl ClockState {
    fn next_label(&mut self) -> String {
        let label = format!("call{}", self.labelled);
        self.labelled += 1;
        label
    }

    fn end_point(&mut self) {
        self.callables.clear();
        self.host_values = false;
    }
}

/// Where the device recorder's points close: its recorder, its device, and torch's
/// `_cuda_getCurrentRawStream` (the stream a point's work was given to).
struct DeviceTarget {
    recorder: Py<DeviceRecorder>,
    device_index: usize,
    raw_stream: Py<PyAny>,
}

/// What a call must do before the compiled callable runs.
enum Entry {
    /// Nothing, or the point it ended was closed natively.
    Done,
    /// The point it ended holds host values: the session's Python commits it.
    Commit(String),
}

/// The state of a compile session's points: which compiled callables ran in the current
/// point, how many automatic points were labelled, whether a named point is open, and,
/// once a graph was captured, the device recorder that closes points natively.
#[pyclass(module = "torch_cudagraph_debug._native", frozen)]
pub struct PointClock {
    state: Mutex<ClockState>,
    device: OnceLock<DeviceTarget>,
}

impl PointClock {
    fn state(&self) -> BindResult<MutexGuard<'_, ClockState>> {
        self.state
            .lock()
            .map_err(|_| BindingError::Internal("point clock lock poisoned".into()))
    }

    /// A call of the callable `callable_id` begins: ends the current point first when the
    /// callable already ran in it.
    fn enter_call(&self, py: Python<'_>, callable_id: usize) -> BindResult<Entry> {
        let mut state = self.state()?;
        if !state.auto || state.explicit || state.closed {
            return Ok(Entry::Done);
        }
        if !state.callables.contains(&callable_id) {
            state.callables.push(callable_id);
            return Ok(Entry::Done);
        }
        let target = match self.device.get() {
            Some(target) if !state.host_values => target,
            _ => return Ok(Entry::Commit(state.next_label())),
        };
        let label = state.next_label();
        state.end_point();
        state.callables.push(callable_id);
        // Released before the close, which releases the GIL: a thread holding the GIL
        // must never wait for this lock while its holder waits for the GIL.
        drop(state);
        let stream: usize = target
            .raw_stream
            .call1(py, (target.device_index,))?
            .extract(py)?;
        target
            .recorder
            .get()
            .close_point_now(py, label, "{}".into(), stream)?;
        Ok(Entry::Done)
    }
}

#[pymethods]
impl PointClock {
    #[new]
    fn new(auto_points: bool) -> Self {
        PointClock {
            state: Mutex::new(ClockState {
                auto: auto_points,
                ..ClockState::default()
            }),
            device: OnceLock::new(),
        }
    }

    /// Points from now on close natively on `recorder` (device `device_index`), on the
    /// stream `raw_stream(device_index)` returns. Once per session.
    fn attach_device(
        &self,
        recorder: Py<DeviceRecorder>,
        device_index: usize,
        raw_stream: Py<PyAny>,
    ) -> PyResult<()> {
        self.device
            .set(DeviceTarget {
                recorder,
                device_index,
                raw_stream,
            })
            .map_err(|_| BindingError::Internal("a device recorder is already attached".into()))?;
        Ok(())
    }

    /// A call of the compiled callable `callable_id` begins. Returns None when nothing is
    /// left to do (the point it ended, if any, was closed natively), or the label of the
    /// point the caller must commit, then call `enter` again.
    fn enter(&self, py: Python<'_>, callable_id: usize) -> PyResult<Option<String>> {
        guard(py, || {
            Ok(match self.enter_call(py, callable_id)? {
                Entry::Done => None,
                Entry::Commit(label) => Some(label),
            })
        })
    }

    /// The label of the next automatic point (`call<N>`).
    fn next_label(&self) -> PyResult<String> {
        Ok(self.state()?.next_label())
    }

    /// The current point was committed: no callable ran in the next one yet.
    fn point_ended(&self) -> PyResult<()> {
        self.state()?.end_point();
        Ok(())
    }

    /// The session took a value on the host for the current point: its Python commits it.
    fn took_host_values(&self) -> PyResult<()> {
        self.state()?.host_values = true;
        Ok(())
    }

    /// Whether a compiled callable ran in the current point.
    #[getter]
    fn has_calls(&self) -> PyResult<bool> {
        Ok(!self.state()?.callables.is_empty())
    }

    /// Whether a named point is open (calls then do not delimit points).
    #[getter]
    fn explicit(&self) -> PyResult<bool> {
        Ok(self.state()?.explicit)
    }

    #[setter]
    fn set_explicit(&self, open: bool) -> PyResult<()> {
        self.state()?.explicit = open;
        Ok(())
    }

    /// The session ended: calls record nothing from now on.
    fn close(&self) -> PyResult<()> {
        let mut state = self.state()?;
        state.closed = true;
        state.end_point();
        Ok(())
    }
}

/// A compiled callable as its session runs it: delimits points (see [`PointClock`]),
/// routes the session's probe key to the session, and lands the flight recorder's history
/// when the call raises.
#[pyclass(module = "torch_cudagraph_debug._native", frozen)]
pub struct CompiledCall {
    compiled: Py<PyAny>,
    session: Py<PyAny>,
    clock: Py<PointClock>,
    /// The probe op's registry (a `WeakValueDictionary`, key -> session), its dict of weak
    /// references, and the session's key in it: sessions of one config share the key
    /// their graphs carry, and a call routes it to its own session.
    registry: Py<PyAny>,
    routes: Py<PyDict>,
    key: Py<PyAny>,
    /// Called before every call: the session's memory points counting calls.
    on_call: Option<Py<PyAny>>,
    /// Whether `compiled` takes its arguments boxed (Inductor's convention, read by
    /// torch from this attribute).
    #[pyo3(get, name = "_boxed_call")]
    boxed_call: bool,
}

#[pymethods]
impl CompiledCall {
    #[new]
    #[pyo3(signature = (compiled, session, clock, registry, key, *, on_call = None, boxed_call = false))]
    fn new(
        compiled: Py<PyAny>,
        session: Py<PyAny>,
        clock: Py<PointClock>,
        registry: &Bound<'_, PyAny>,
        key: Py<PyAny>,
        on_call: Option<Py<PyAny>>,
        boxed_call: bool,
    ) -> PyResult<Self> {
        let routes = registry.getattr("data")?.extract()?;
        Ok(CompiledCall {
            compiled,
            session,
            clock,
            registry: registry.clone().unbind(),
            routes,
            key,
            on_call,
            boxed_call,
        })
    }

    #[pyo3(signature = (*args, **kwargs))]
    fn __call__(
        &self,
        py: Python<'_>,
        args: &Bound<'_, PyTuple>,
        kwargs: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Py<PyAny>> {
        if let Some(hook) = &self.on_call {
            hook.call0(py)?;
        }
        // The callable's identity, as `id()` gives it: what the clock tells calls apart by.
        let callable_id = self.compiled.as_ptr() as usize;
        let entry = guard(py, || self.clock.get().enter_call(py, callable_id))?;
        if let Entry::Commit(label) = entry {
            self.session
                .call_method1(py, "_commit_call_point", (label, callable_id))?;
        }
        self.route_key(py)?;
        match self.compiled.bind(py).call(args, kwargs) {
            Ok(result) => Ok(result.unbind()),
            Err(err) => {
                // The flight recorder keeps what led up to a failed call; the call's own
                // error is what the caller sees.
                if let Err(dump_error) = self.session.call_method0(py, "_call_failed") {
                    dump_error.write_unraisable(py, None);
                }
                Err(err)
            }
        }
    }

    /// The compiled callable this wraps.
    #[getter]
    fn compiled(&self, py: Python<'_>) -> Py<PyAny> {
        self.compiled.clone_ref(py)
    }
}

impl CompiledCall {
    /// Points the session's key at the session (a dict lookup when it already does).
    fn route_key(&self, py: Python<'_>) -> PyResult<()> {
        let (key, session) = (self.key.bind(py), self.session.bind(py));
        if let Some(reference) = self.routes.bind(py).get_item(key)? {
            if reference.call0()?.is(session) {
                return Ok(());
            }
        }
        self.registry.bind(py).set_item(key, session)
    }
}
