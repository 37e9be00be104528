"""``ProbeSession``: what one process records for one probe config.

The compiled graphs call ``tcgd::probe(value, session_key, site)``. When the call runs
eagerly (CPU, Inductor without CUDA graphs, Graph Trees warmup) the value is copied to
the host at once. When it runs while a CUDA graph is being recorded (Graph Trees
recording), the value gets a device slot in a probe runtime bound to that capture, and
every later replay refreshes the slot without running any Python. A point reads both.

Points: by default every call of a compiled callable starts a new point once a callable
that already ran in the current point runs again (so a training step - forward, backward,
optimizer - is one point), labelled ``call<N>``; ``record_point(label)`` names points
explicitly instead. A normal interpreter exit finishes the run; a crash leaves every
committed point in an incomplete run.

The lifecycle (``flush`` / ``preview`` / ``finish`` / ``close``) is the one every recorder
shares (``RunRecorder``). A finished session stops recording: graphs compiled for it keep
running, their probes do nothing, and recompilations compile without raising.
"""

from __future__ import annotations

import atexit
import collections
import contextlib
import json
import os
import threading
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, NamedTuple

import torch

import torch_cudagraph_debug.compile._progress as _progress
from torch_cudagraph_debug import _native, _probe_op
from torch_cudagraph_debug._environment import detect_rank
from torch_cudagraph_debug._recorder import RunRecorder
from torch_cudagraph_debug._torch_bridge import (
    current_stream_handle,
    dtype_name,
    host_bytes,
    register_nvrtc,
)
from torch_cudagraph_debug.errors import InvalidInputError, RecorderStateError
from torch_cudagraph_debug.fx_passes.probe_insertion import GraphDecisions, ProbeInsertionPass
from torch_cudagraph_debug.tensor_debug.observations import TensorSite
from torch_cudagraph_debug.tensor_debug.recorder import (
    _PendingObservation,
    device_site,
    native_observation,
    open_run_writer,
)
from torch_cudagraph_debug.tensor_debug.run import TensorRun


class _HostSummary(NamedTuple):
    """A CPU value summarised where its probe ran (summary payloads): its layout as the
    copy path would have stored it (contiguous) and its summary; no bytes are kept. (A
    named tuple: the probe op makes one per value per call.)"""

    dtype: torch.dtype
    shape: tuple[int, ...]
    stride: tuple[int, ...]
    summary: _native.TensorValueSummary

    @staticmethod
    def of(value: torch.Tensor) -> _HostSummary:
        # A contiguous value is read where it lies (the graph reuses its buffer only after
        # the op returns); any other is made contiguous first, as the copy would be.
        if not value.is_contiguous():
            value = value.contiguous()
        summary = _native.summarize(dtype_name(value.dtype), (value.data_ptr(), value.nbytes))
        return _HostSummary(value.dtype, tuple(value.shape), value.stride(), summary)

    def as_native(
        self, site: TensorSite, order: int, invocation_index: int, device: str
    ) -> dict[str, object]:
        """The observation as the device recorder's points take it (no bytes: the
        summary)."""
        return native_observation(
            order=order,
            name=site.site_id or "",
            invocation_index=invocation_index,
            dtype=self.dtype,
            shape=self.shape,
            stride=self.stride,
            source_device=device,
            payload="summary",
            site=site,
            summary=self.summary,
        )


# What a point holds of a site's eager value until it is committed.
_Taken = torch.Tensor | _HostSummary


@dataclass
class _Capture:
    runtime: _native.ProbeRuntime
    graph_kind: str
    # The graph's index in the session's device recorder.
    device_index: int


class ProbeSession(RunRecorder[TensorRun]):
    """Recording state for one config in this process (see the module docstring)."""

    _writer: _native.RunWriter

    def __init__(
        self,
        config: _native.ProbeConfig,
        *,
        run_dir: str | os.PathLike[str] | None = None,
        name: str | None = None,
        payload: str | None = None,
        overwrite: bool | None = None,
        auto_points: bool = True,
    ):
        settings = config.run
        self.config = config
        if name is not None:
            _native.check_run_name(name)
        self.name = name or settings.name
        self.payload = payload or settings.payload
        if self.payload not in ("full", "summary"):
            raise InvalidInputError(f"payload must be 'full' or 'summary', got {self.payload!r}")
        self.key = f"compile:{config.digest[:16]}:{self.name}"
        self.history = settings.history
        self.full_every = settings.full_every
        self._trigger_nonfinite = settings.trigger_nonfinite
        self._trigger_abs_max = settings.trigger_abs_max
        # Summaries (and the history) of captured sites are recorded on the device and
        # harvested by the core; created at the first capture.
        self._device: _native.DeviceRecorder | None = None
        self._device_index = 0
        self.auto_points = auto_points
        self.decisions: list[GraphDecisions] = []
        self.insertion_pass = ProbeInsertionPass(config, self.key, self._on_graph)
        rank, world_size = detect_rank(None, None)
        # The run is found again in its root by name and rank: the root may hold others.
        self.rank = rank or 0
        writer = open_run_writer(
            name=self.name,
            root=run_root(settings.dir, run_dir, self.name),
            execution="compiled",
            rank=rank,
            world_size=world_size,
            group_id=None,
            devices=None,
            run_metadata={"probe_config": config.source_name, "config_digest": config.digest},
            overwrite=settings.overwrite if overwrite is None else bool(overwrite),
            default_payload=self.payload,
        )
        self._lock = threading.RLock()
        self._start(writer, str(writer.path))
        # [memory]: memory points around Graph Trees recordings (compile/memory_points.py).
        import torch_cudagraph_debug.compile.memory_points as memory_points

        self.memory_points = memory_points.for_config(config, str(writer.path))
        self._memory_every = self.memory_points is not None and self.memory_points.every > 0
        # Every site seen, by id (its latest description), and the sites of each probe
        # group by the text the group's probe op carries.
        self._sites: dict[str, TensorSite] = {}
        self._groups: dict[str, list[TensorSite]] = {}
        self._site_order: dict[str, int] = {}
        # The writer's index of each (site, dtype, shape, device) it was handed.
        self._writer_sites: dict[tuple[str, torch.dtype, torch.Size, str], int] = {}
        # Values taken eagerly in the current point: site id -> [(host copy, source
        # device)], one entry per invocation of the site within the point.
        self._eager: dict[str, list[tuple[_Taken, str]]] = {}
        self._captures: dict[int, _Capture] = {}
        # Which compiled callables ran in the current point, the automatic points' labels,
        # whether a named point is open; once a graph was captured it closes the points of
        # replayed calls itself (no Python per call).
        self._clock = _native.PointClock(auto_points)
        self._warned_finished = False
        # How often the op's Python body ran per site: under CUDA Graph Trees it runs in
        # warmup and recording only, never on replay.
        self.body_calls: collections.Counter[str] = collections.Counter()
        # Graphs compiled for a session of the same key that is still open keep recording
        # into it once this one ends (explain() and differential runs open sessions of a
        # config the caller may be recording with).
        self._previous = _probe_op.registered(self.key)
        _probe_op.register(self, self.key)
        atexit.register(self._finish_at_exit)

    def note_compile(self) -> None:
        """Called as a graph is compiled for this session. After ``finish()`` (a new input
        shape recompiles the model) that must not fail, but the user is told, once, that
        nothing compiled now is recorded."""
        if self._closed and not self._warned_finished:
            self._warned_finished = True
            warnings.warn(
                f"the probe session of {self.path} is finished: graphs compiled into it "
                "now run without recording; to record a new run, call torch.compile again "
                "with a new options dict (with 'overwrite': True for the same run_dir)",
                stacklevel=3,
            )

    def _on_graph(self, decisions: GraphDecisions) -> None:
        self.decisions.append(decisions)
        _progress.decided(decisions.graph_kind, decisions.compile_id, len(decisions.selected))

    # ------------------------------------------------------------ the op's kernels
    def _note_site(self, site: TensorSite) -> None:
        self._sites[site.site_id] = site
        self._site_order.setdefault(site.site_id, len(self._site_order))

    def _record_cpu(self, value: torch.Tensor, site_text: str) -> None:
        self._record_group([value], f"[{site_text}]")

    def _record_cuda(self, value: torch.Tensor, site_text: str) -> None:
        self._record_group([value], f"[{site_text}]")

    def _group_sites(self, sites_text: str) -> list[TensorSite]:
        group = self._groups.get(sites_text)
        if group is None:
            group = TensorSite.decode_group(sites_text)
            for site in group:
                self._note_site(site)
            self._groups[sites_text] = group
        return group

    def _record_group(self, values: list[torch.Tensor], sites_text: str) -> None:
        """The probe op's body, for values alive together at one place of a graph. Run
        eagerly (CPU, CUDA without graphs, Graph Trees' warmup) it copies the values to
        the host now; under a capture it records their kernels into the graph, and the
        core harvests what every replay writes."""
        with self._lock:
            if self._closed:
                return  # finished: the model runs on, its probes record nothing
            sites = self._group_sites(sites_text)
            if len(sites) != len(values):
                raise InvalidInputError(
                    f"a probe group carries {len(sites)} sites but got {len(values)} values"
                )
            for site in sites:
                self.body_calls[site.site_id] += 1
            device = values[0].device
            stream = current_stream_handle(device.index or 0) if device.type == "cuda" else None
            capture = _native.capture_id(stream) if stream is not None else None
            if capture is None or stream is None:
                where = str(device)
                if self.payload == "summary" and device.type == "cpu" and self._device is None:
                    # Summarised here, from the value itself: no copy, no digest (as the
                    # device summarises a replayed graph's values).
                    for value, site in zip(values, sites, strict=True):
                        self._take_eager(site.site_id, _HostSummary.of(value), where)
                    return
                # One copy per value, straight into a contiguous host tensor (the values'
                # buffers are reused by the graph once the op returns).
                for value, site in zip(values, sites, strict=True):
                    host = value.detach().to(
                        "cpu", copy=True, memory_format=torch.contiguous_format
                    )
                    self._take_eager(site.site_id, host, where)
                return
            self._record_in_capture(
                [v.detach().contiguous() for v in values], sites, capture, stream
            )

    def record_value(self, site: TensorSite, value: torch.Tensor) -> None:
        """Takes a value computed outside the compiled graphs into the point in progress
        as the site ``site`` (a site description as the probe pass writes it): the eager
        side of a differential run, a model's outputs."""
        with self._lock:
            if self._closed:
                return
            self._note_site(site)
            host = value.detach().to("cpu", copy=True).contiguous()
            self._take_eager(site.site_id, host, str(value.device))

    def _take_eager(self, site_id: str, host: _Taken, device: str) -> None:
        if site_id in self._eager and self.auto_points and not self._clock.explicit:
            # The site ran again inside one automatic point: a call nothing delimited (a
            # compiled callable this session did not wrap). Its values begin the next
            # point instead of replacing this one's.
            self._commit_auto_point()
        self._eager.setdefault(site_id, []).append((host, device))
        self._clock.took_host_values()

    def _device_recorder(self, device: torch.device) -> _native.DeviceRecorder:
        if self._device is None:
            register_nvrtc()
            self._device_index = device.index or 0
            self._device = _native.DeviceRecorder(
                self._device_index,
                self._writer,
                history=self.history,
                trigger_nonfinite=self._trigger_nonfinite,
                trigger_abs_max=self._trigger_abs_max,
            )
            self._clock.attach_device(self._device, self._device_index, current_stream_handle)
        elif (device.index or 0) != self._device_index:
            raise InvalidInputError(
                f"this session records graphs on cuda:{self._device_index}; a graph on "
                f"{device} needs a session of its own (compile it with another run name)"
            )
        return self._device

    def _record_in_capture(
        self, values: list[torch.Tensor], sites: list[TensorSite], capture: int, stream: int
    ) -> None:
        """Records the values' kernels into the graph being captured: summaries (and the
        history) with summary payloads, copies into slots the core brings to the host at
        points with full payloads (every point) or `full_every`."""
        recorder = self._device_recorder(values[0].device)
        state = self._captures.get(capture)
        if state is None:
            runtime = _native.ProbeRuntime(self._device_index)
            runtime.bind_capture(stream)
            kind = sites[0].graph_kind
            state = _Capture(runtime, kind, recorder.add_capture(runtime, kind))
            self._captures[capture] = state
        every = 1 if self.payload == "full" else self.full_every
        recorder.register_sites(
            state.runtime,
            state.device_index,
            [self._site_args(v, s) for v, s in zip(values, sites, strict=True)],
            stream,
            sample_every=every,
            sample_full=True,
        )

    def _site_args(self, value: torch.Tensor, site: TensorSite) -> dict[str, Any]:
        return device_site(value, site.site_id, self._site_order[site.site_id], site)

    # ------------------------------------------------------------ points
    def wrap(self, compiled: Callable[..., Any]) -> Callable[..., Any]:
        """Wraps a compiled graph's callable so its calls delimit points. The wrapper is
        native (``CompiledCall``): a replayed call runs no Python of this package.

        Dynamo wraps what a backend returns in its own ``disable`` frame, which unwraps a
        callable that is already such a frame; ours is not, so the wrapper calls the
        function inside Inductor's frame: one frame switch per call, as without probes,
        instead of two (about 13 us a call on the GPU machine)."""
        from torch._dynamo.eval_frame import innermost_fn

        compiled = innermost_fn(compiled)
        return _native.CompiledCall(
            compiled,
            self,
            self._clock,
            _probe_op.registry(),
            self.key,
            on_call=self.memory_points.on_call if self._memory_every else None,  # type: ignore[union-attr]
            boxed_call=bool(getattr(compiled, "_boxed_call", False)),
        )

    def _commit_call_point(self, label: str, callable_id: int) -> None:
        """A call ended the automatic point ``label``, which holds values the host took:
        commits it, then counts the call in the next point (called by ``CompiledCall``)."""
        with self._lock:
            self._commit(label, {})
            self._clock.enter(callable_id)

    def _call_failed(self) -> None:
        """A compiled call raised: the flight recorder keeps what led up to it."""
        if self.history and self._device is not None and not self._closed:
            with contextlib.suppress(Exception):
                self.dump_history("exception")

    @contextlib.contextmanager
    def record_point(self, label: str, *, metadata: dict[str, Any] | None = None) -> Iterator[None]:
        """Names a point explicitly: the values of everything that ran inside the block.
        While a named point is open, automatic points are off."""
        if self._closed:
            raise RecorderStateError(
                f"record_point({label!r}) on a finished session ({self.path}); compile the "
                "model again for a new run"
            )
        # Checked before the block runs: the run's labels include those of device points
        # still in flight (taken when they ended).
        self._check_new_label(label)
        with self._lock:
            self._commit_pending()
            self._clock.explicit = True
        try:
            yield
            with self._lock:
                self._commit(label, dict(metadata or {}))
        finally:
            self._clock.explicit = False

    def _commit_auto_point(self, dump: str | None = None) -> None:
        self._commit(self._clock.next_label(), {}, dump)

    def dump_history(self, reason: str = "user") -> None:
        """Lands the flight recorder's history (the last ``history`` calls' full values of
        every summarised site) in the run now, after ending the point in progress. Needs
        ``history > 0`` in the config and a captured graph."""
        if self.history <= 0:
            raise RecorderStateError(
                "dump_history() needs a history: set [run] history = N in the probe config"
            )
        with self._lock:
            self._check_open("dump_history")
            if self._device is None:
                raise RecorderStateError(
                    "dump_history(): no graph has been captured yet, so there is no history"
                )
            if self._clock.explicit:
                raise RecorderStateError("dump_history() inside record_point(); leave it first")
            self._commit_auto_point(dump=reason)

    def rearm_history(self) -> None:
        """After a trigger landed the history, the history stays frozen (what led up to
        the first anomaly is kept); this lets it record again for the next trigger."""
        with self._lock:
            if self._device is not None:
                self._device.rearm()

    def _commit_pending(self) -> None:
        """Commits the automatic point in progress, if anything ran in it."""
        if self._clock.has_calls or self._eager:
            self._commit_auto_point()

    def _commit(self, label: str, metadata: dict[str, Any], dump: str | None = None) -> None:
        if self._device is not None and not self._eager:
            # The per-call path once graphs replay: an event and a memset on the stream,
            # nothing read, nothing waited for.
            stream = current_stream_handle(self._device_index)
            meta = json.dumps(metadata) if metadata else "{}"
            self._device.close_point(label, meta, stream, dump)
            self._clock.point_ended()
            return
        taken = sorted(
            (self._site_order[site_id], invocation, site_id, host, device)
            for site_id, values in self._eager.items()
            for invocation, (host, device) in enumerate(values)
        )
        if self._device is not None:
            # Once a graph was captured every point takes this one path, so points stay in
            # order: the core commits it when the device has run what the stream holds.
            # It merges these values with its own by site order.
            observations = []
            for site_order, invocation, site_id, host, device in taken:
                site = self._sites[site_id]
                if isinstance(host, _HostSummary):
                    observations.append(host.as_native(site, site_order, invocation, device))
                    continue
                pending = self._pending(site, host, device=device)
                pending.order = site_order
                pending.invocation_index = invocation
                observations.append(pending.as_native())
            stream = current_stream_handle(self._device_index)
            self._device.close_point(label, json.dumps(metadata), stream, dump, observations)
        else:
            # Each site's facts were handed to the writer once; a point is its values.
            values = [
                (
                    self._writer_site(site_id, host, device),
                    order,
                    n,
                    host.summary if isinstance(host, _HostSummary) else host_bytes(host),
                    None if isinstance(host, _HostSummary) else host,
                )
                for order, (_, n, site_id, host, device) in enumerate(taken)
            ]
            self._writer.commit_site_values(label, json.dumps(metadata), self.payload, values)
        self._eager.clear()
        self._clock.point_ended()

    def _writer_site(self, site_id: str, host: _Taken, device: str) -> int:
        """The writer's index of the site ``site_id`` holding a value like ``host`` (a
        contiguous host copy or a summary of one): registered the first time, again when a
        dynamic shape gives the site another layout."""
        shape = tuple(host.shape)
        key = (site_id, host.dtype, shape, device)
        index = self._writer_sites.get(key)
        if index is None:
            stride = host.stride if isinstance(host, _HostSummary) else host.stride()
            index = self._writer.register_site(
                site_id,
                dtype_name(host.dtype),
                list(shape),
                list(stride),
                device,
                self._sites[site_id],
            )
            self._writer_sites[key] = index
        return index

    def _pending(
        self,
        site: TensorSite,
        host: torch.Tensor,
        stride: tuple[int, ...] | None = None,
        device: str | None = None,
    ) -> _PendingObservation:
        host = host.contiguous()
        return _PendingObservation(
            order=0,
            name=site.site_id or "",
            invocation_index=0,
            host=host,
            shape=tuple(host.shape),
            stride=stride or tuple(host.stride()),
            source_device=device or str(host.device),
            payload=self.payload,
            site=site,
        )

    # ------------------------------------------------------------ lifecycle
    def flush(self) -> None:
        """Commits the automatic point in progress (the next call starts a new one) and
        waits until every point recorded so far is durable. Inside ``record_point`` the
        open point is left to its block. A no-op once the session is finished."""
        with self._lock:
            if not self._closed and not self._clock.explicit:
                self._commit_pending()
        super().flush()

    def finish(self) -> TensorRun:
        """Commits the pending point (if any) and marks the run complete. Idempotent. The
        compiled model keeps working afterwards; its probes record nothing."""
        with self._lock:
            if self._result is None and not self._closed:
                self._check_can_finish()
                self._commit_pending()
            return super().finish()

    def close(self) -> None:
        """Ends the session without marking the run complete (committed points stay)."""
        with self._lock:
            super().close()

    def _end(self, *, complete: bool) -> None:
        # Calls close no point from now on (they run natively, outside the session's
        # lock): before the device recorder drains and the writer closes.
        self._clock.close()
        super()._end(complete=complete)

    def _drain(self) -> None:
        if self._device is not None:
            self._device.flush()

    @property
    def device_counts(self) -> tuple[int, int]:
        """(points harvested from the device, history dumps)."""
        return self._device.counts if self._device is not None else (0, 0)

    def _load(self) -> TensorRun:
        return TensorRun.load(self.path, name=self.name, rank=self.rank)

    def _check_can_finish(self) -> None:
        if self._clock.explicit:
            raise RecorderStateError("finish() inside record_point(); leave the point first")

    def _release(self) -> None:
        if self.memory_points is not None:
            self.memory_points.finish()
        if self._device is not None:
            with contextlib.suppress(Exception):
                self._device.close()
        self._eager.clear()
        for state in self._captures.values():
            state.runtime.close()
        # This session stays registered (its graphs call a no-op) unless an open session
        # of the same key was recording before it.
        previous = self._previous
        self._previous = None
        if previous is not None and not previous.finished:
            _probe_op.hand_back(self.key, self, previous)

    def _finish_at_exit(self) -> None:
        with contextlib.suppress(Exception):
            self.finish()

    @property
    def finished(self) -> bool:
        """True once ``finish()`` or ``close()`` ran: the session records nothing more."""
        return self._closed


def run_root(
    config_dir: str | None, run_dir: str | os.PathLike[str] | None, name: str
) -> str | None:
    """Where a session's run goes: ``run_dir`` when given, else ``[run] dir``/name, else a
    fresh temporary directory (None)."""
    if run_dir is not None:
        return os.fspath(run_dir)
    if config_dir is not None:
        return os.path.join(config_dir, name)
    return None


_SessionKey = tuple[str, str | None, str, str]
_SESSIONS: dict[_SessionKey, ProbeSession] = {}
_SESSIONS_LOCK = threading.Lock()


def _session_key(
    config: _native.ProbeConfig,
    run_dir: str | os.PathLike[str] | None,
    name: str | None,
    payload: str | None,
) -> _SessionKey:
    # The resolved, absolute run path: "runs/x", "runs/x/" and "/abs/runs/x" are one run.
    settings = config.run
    run_name = name or settings.name
    root = run_root(settings.dir, run_dir, run_name)
    return (
        config.digest,
        None if root is None else os.path.abspath(root),
        run_name,
        payload or settings.payload,
    )


def session_for(
    config: Any,
    *,
    run_dir: str | os.PathLike[str] | None = None,
    name: str | None = None,
    payload: str | None = None,
    overwrite: bool | None = None,
) -> ProbeSession:
    """The session that records for ``config`` (a TOML path, a dict or a ``ProbeConfig``)
    and these run settings in this process: every graph compiled with them records into
    its run. Returns the latest such session, open or finished; creates one (with
    ``overwrite``) only when there is none. ``run_dir`` is compared as a resolved path."""
    return _session(load_config(config), run_dir, name, payload, overwrite, reuse_finished=True)


def session_for_compile(
    config: _native.ProbeConfig,
    *,
    run_dir: str | os.PathLike[str] | None = None,
    name: str | None = None,
    payload: str | None = None,
    overwrite: bool | None = None,
) -> ProbeSession:
    """The session a new compilation records into: the open session of these settings,
    or a new one. A finished session's run is never reopened."""
    return _session(config, run_dir, name, payload, overwrite, reuse_finished=False)


def _session(
    config: _native.ProbeConfig,
    run_dir: str | os.PathLike[str] | None,
    name: str | None,
    payload: str | None,
    overwrite: bool | None,
    *,
    reuse_finished: bool,
) -> ProbeSession:
    key = _session_key(config, run_dir, name, payload)
    with _SESSIONS_LOCK:
        session = _SESSIONS.get(key)
        if session is None or (session.finished and not reuse_finished):
            session = ProbeSession(
                config, run_dir=run_dir, name=name, payload=payload, overwrite=overwrite
            )
            _SESSIONS[key] = session
        return session


def load_config(probes: Any) -> _native.ProbeConfig:
    """A config from a path (TOML), TOML text is not accepted (ambiguous with paths), a
    dict with the same structure, or an already loaded ``ProbeConfig``."""
    if isinstance(probes, _native.ProbeConfig):
        return probes
    if isinstance(probes, dict):
        return _native.ProbeConfig.from_dict(probes)
    if isinstance(probes, str | os.PathLike):
        return _native.ProbeConfig.load(os.fspath(probes))
    raise InvalidInputError(
        "probes must be a path to a TOML file, a dict or a ProbeConfig, got "
        f"{type(probes).__name__}"
    )
