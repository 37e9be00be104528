"""``TensorRecorder``: a complete experiment, recorded point by point into a Parquet run."""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Literal

import torch

from torch_cudagraph_debug import _native
from torch_cudagraph_debug._environment import detect_rank, provenance
from torch_cudagraph_debug._recorder import PRODUCER, RunRecorder, json_text, run_root
from torch_cudagraph_debug._torch_bridge import (
    check_recordable,
    dtype_name,
    host_bytes,
    register_nvrtc,
)
from torch_cudagraph_debug.errors import (
    InvalidInputError,
    NonContiguousTensorError,
    RecorderStateError,
    WrongDeviceError,
)
from torch_cudagraph_debug.tensor_debug.observations import TensorSite
from torch_cudagraph_debug.tensor_debug.probe import SyncArg, TensorProbe, _check_sync_target
from torch_cudagraph_debug.tensor_debug.run import TensorRun
from torch_cudagraph_debug.tensor_debug.sites import _hook_gradient

Execution = Literal["eager", "cuda_graph"]
Payload = Literal["full", "summary"]
NonContiguous = Literal["error", "copy"]


def _choice(what: str, value: object, allowed: tuple[str, ...]) -> str:
    if value not in allowed:
        raise InvalidInputError(f"{what} must be one of {allowed}, got {value!r}")
    return str(value)


@dataclass
class _PendingObservation:
    """An observation taken inside an open point; its host copy may still be in flight."""

    order: int
    name: str
    invocation_index: int
    host: torch.Tensor
    shape: tuple[int, ...]
    stride: tuple[int, ...]
    source_device: str
    payload: str
    # Where a compile pass placed the probe; None for hand-placed observations.
    site: TensorSite | None = None

    def as_native(self) -> dict[str, object]:
        return native_observation(
            order=self.order,
            name=self.name,
            invocation_index=self.invocation_index,
            dtype=self.host.dtype,
            shape=self.shape,
            stride=self.stride,
            source_device=self.source_device,
            payload=self.payload,
            site=self.site,
            data=host_bytes(self.host),
            # Kept alive by the writer thread until the point is on disk; the recorder
            # never writes a host tensor once it is handed over.
            owner=self.host,
        )


def native_observation(
    *,
    order: int,
    name: str,
    invocation_index: int,
    dtype: torch.dtype,
    shape: tuple[int, ...],
    stride: tuple[int, ...],
    source_device: str,
    payload: str,
    site: TensorSite | None,
    data: tuple[int, int] | None = None,
    owner: torch.Tensor | None = None,
    summary: _native.TensorValueSummary | None = None,
) -> dict[str, object]:
    """One observation as the native recorders' points take it: what it is and where it
    stands in its point, then its host bytes (``data``, and ``owner``, the tensor holding
    them) or, for a value summarised where it was, its ``summary``."""
    return {
        "order": order,
        "name": name,
        "invocation_index": invocation_index,
        "dtype": dtype_name(dtype),
        "shape": list(shape),
        "stride": list(stride),
        "source_device": source_device,
        "payload": payload,
        "data": data,
        "owner": owner,
        "summary": summary,
        "site": site,
    }


def device_site(
    value: torch.Tensor, name: str, order: int, site: TensorSite | None = None
) -> dict[str, Any]:
    """One value as the native device recorder's ``register_sites`` takes it: where its
    bytes are, its layout, and ``site`` (where a compile pass placed its probe; ``None``
    for a hand-placed value)."""
    return {
        "src": value.data_ptr(),
        "dtype": dtype_name(value.dtype),
        "shape": list(value.shape),
        "stride": list(value.stride()),
        "source_device": str(value.device),
        "name": name,
        "order": order,
        "site": site,
    }


class _OpenPoint:
    def __init__(self, label: str, metadata: dict[str, Any], synchronize: object):
        self.label = label
        self.metadata = metadata
        self.synchronize = synchronize
        self.observations: list[_PendingObservation] = []
        self.invocations: dict[str, int] = {}
        self.copy_done: list[torch.cuda.Event] = []


class TensorRecorder(RunRecorder[TensorRun]):
    """Records intermediate tensors into a run of a job root (points committed in groups).

    ``execution="eager"``: ``observe`` copies each value to the host (CUDA values
    asynchronously, on the recorder's own stream) and the point commits when its
    ``record_point`` block exits. ``overwrite=True`` replaces a run already in
    ``run_dir`` (see ``open_run_writer``). See ``docs/tensor-debug.md`` for every rule.
    """

    _writer: _native.RunWriter

    def __init__(
        self,
        *,
        execution: Execution = "eager",
        name: str = "run",
        run_dir: str | os.PathLike[str] | None = None,
        bundle_dir: str | os.PathLike[str] | None = None,
        device: torch.device | str | int | None = None,
        payload: Payload = "full",
        non_contiguous: NonContiguous = "error",
        strict_scope: bool = False,
        synchronize: bool | torch.cuda.Stream | torch.device = True,
        rank: int | None = None,
        group_id: str | None = None,
        world_size: int | None = None,
        run_metadata: dict[str, Any] | None = None,
        overwrite: bool = False,
        commit_interval: float = 1.0,
        compact: bool = True,
    ):
        self.execution = _choice("execution", execution, ("eager", "cuda_graph"))
        self.payload = _choice("payload", payload, ("full", "summary"))
        self.non_contiguous = _choice("non_contiguous", non_contiguous, ("error", "copy"))
        root = run_root(name, run_dir, bundle_dir)
        self.name = name
        self.device = None if device is None else torch.device(device)
        self.strict_scope = bool(strict_scope)
        self.synchronize = _check_sync_target(synchronize, allow_none=False)
        self._grad_hooks: list[torch.utils.hooks.RemovableHandle] = []
        self.rank, self.world_size = detect_rank(rank, world_size)
        self.group_id = group_id
        # The native RunHeader checks that it is JSON-serialisable (InvalidInputError).
        metadata = dict(run_metadata or {})

        writer = open_run_writer(
            name=name,
            root=root,
            execution=self.execution,
            rank=self.rank,
            world_size=self.world_size,
            group_id=group_id,
            devices=[self.device] if self.device is not None else None,
            run_metadata=metadata,
            overwrite=overwrite,
            commit_interval=commit_interval,
            compact=compact,
            default_payload=self.payload,
        )
        self._point: _OpenPoint | None = None
        self._copy_stream: torch.cuda.Stream | None = None
        # cuda_graph execution: full observations are probe sites captured into the graph
        # (each point reads the slots after the replay it wraps); summary observations are
        # summarised on the device by a kernel captured beside them (a device recorder
        # harvests the records). Once a summary is captured every point goes through the
        # device recorder, which merges the probe's values in by capture order.
        self._probe: TensorProbe | None = None
        self._device: _native.DeviceRecorder | None = None
        self._device_index = 0
        # Per capture (its id): the runtime counting its replays, its index in `_device`.
        self._summary_captures: dict[int, tuple[_native.ProbeRuntime, int]] = {}
        # Capture order of every observation placed in a graph, and of the probe's ones
        # by (name, invocation): the order points list them in.
        self._captured_count = 0
        self._order_of: dict[tuple[str, int], int] = {}
        self._last_replays = 0
        if self.execution == "cuda_graph":
            try:
                self._probe = TensorProbe(
                    f"{name}/recorder",
                    non_contiguous=self.non_contiguous,
                    when="capture",
                    device=self.device,
                    synchronize=synchronize,
                )
            except BaseException:
                # A recorder that could not start leaves no run behind to block a retry.
                with contextlib.suppress(Exception):
                    writer.discard()
                raise
        self._start(writer, str(writer.path))

    # ----------------------------------------------------------------- observing
    def observe(
        self, tensor: torch.Tensor, *, name: str, payload: Payload | None = None
    ) -> torch.Tensor:
        """Records ``tensor`` under ``name`` in the open point and returns it unchanged.

        Outside a point the call is a no-op, or an error with ``strict_scope=True``. A call
        that raises uses up no invocation index."""
        self._check_open("observe")
        if not isinstance(name, str) or not name:
            raise InvalidInputError(f"observation name must be a non-empty string, got {name!r}")
        kind = self.payload if payload is None else _choice("payload", payload, ("full", "summary"))
        if self._probe is not None:
            return self._observe_in_graph(tensor, name, kind)
        point = self._point
        if point is None:
            if self.strict_scope:
                raise RecorderStateError(
                    f"observe({name!r}) outside record_point(); wrap the step in "
                    "`with recorder.record_point(label):` or pass strict_scope=False"
                )
            return tensor
        source = self._checked_source(tensor, name, "record")
        host = self._to_host(source, point)
        invocation = point.invocations.get(name, 0)
        point.observations.append(
            _PendingObservation(
                order=len(point.observations),
                name=name,
                invocation_index=invocation,
                host=host,
                shape=tuple(source.shape),
                stride=tuple(source.stride()),
                source_device=str(source.device),
                payload=kind,
            )
        )
        point.invocations[name] = invocation + 1
        return tensor

    def _checked_source(self, tensor: torch.Tensor, name: str, what: str) -> torch.Tensor:
        """The detached value ``observe`` takes: recordable, on the recorder's device, and
        contiguous unless ``non_contiguous="copy"`` (``what`` says what is done with it)."""
        check_recordable(tensor, f"observe({name!r})")
        if self.device is not None and tensor.device != self.device:
            raise WrongDeviceError(
                f"observe({name!r}): tensor is on {tensor.device}, the recorder on "
                f"{self.device}; move it or create the recorder with device=None"
            )
        source = tensor.detach()
        if not source.is_contiguous() and self.non_contiguous == "error":
            raise NonContiguousTensorError(
                f"observe({name!r}): tensor with shape {tuple(source.shape)} and stride "
                f"{source.stride()} is not contiguous; pass non_contiguous='copy' to "
                f"{what} a contiguous copy (its original stride is kept in the run)"
            )
        return source

    def _observe_in_graph(self, tensor: torch.Tensor, name: str, kind: str) -> torch.Tensor:
        """``cuda_graph`` execution: inside a capture the value becomes a probe site refreshed
        on every replay (``full``) or a site the device summarises on every replay
        (``summary``); outside one (warmup) the call does nothing."""
        assert self._probe is not None
        if self._point is not None and _capturing(tensor):
            raise RecorderStateError(
                f"observe({name!r}) captures inside record_point(); capture the graph first, "
                "then replay it inside record_point()"
            )
        if kind == "summary" and _capturing(tensor):
            self._summarise_in_graph(tensor, name)
            return tensor
        invocation = self._probe._invocations.get(name, 0)
        self._probe(tensor, name=name)
        if self._probe._invocations.get(name, 0) > invocation:
            self._order_of[(name, invocation)] = self._next_capture_order()
        elif self.strict_scope and not _capturing(tensor):
            raise RecorderStateError(
                f"observe({name!r}) outside a capture with execution='cuda_graph'; observe "
                "inside torch.cuda.graph(...) or pass strict_scope=False"
            )
        return tensor

    def _next_capture_order(self) -> int:
        self._captured_count += 1
        return self._captured_count - 1

    def _summarise_in_graph(self, tensor: torch.Tensor, name: str) -> None:
        """Captures the summary kernel of one value: only its 112-byte record reaches the
        host on each replay."""
        value = self._checked_source(tensor, name, "summarise")
        # A copy is read by the summary kernel recorded next, before the graph reuses its
        # memory.
        value = value.contiguous()
        device = self._device_recorder(tensor.device)
        stream = torch.cuda.current_stream(tensor.device).cuda_stream
        capture = _native.capture_id(stream)
        assert capture is not None
        state = self._summary_captures.get(capture)
        if state is None:
            runtime = _native.ProbeRuntime(self._device_index)
            runtime.bind_capture(stream)
            state = (runtime, device.add_capture(runtime))
            self._summary_captures[capture] = state
        site = device_site(value, name, self._next_capture_order())
        site["stride"] = list(tensor.stride())
        device.register_sites(state[0], state[1], [site], stream)

    def _device_recorder(self, device: torch.device) -> _native.DeviceRecorder:
        if self._device is None:
            register_nvrtc()
            self._device_index = device.index or 0
            self._device = _native.DeviceRecorder(
                self._device_index, self._writer, trigger_nonfinite=False
            )
        elif (device.index or 0) != self._device_index:
            raise WrongDeviceError(
                f"this recorder summarises values of cuda:{self._device_index} on the device; "
                f"a value on {device} needs a recorder of its own"
            )
        return self._device

    def _to_host(self, source: torch.Tensor, point: _OpenPoint) -> torch.Tensor:
        if source.device.type == "cpu":
            # A private copy: the model may overwrite the tensor in place before the point
            # closes.
            return source.contiguous().clone()
        if source.device.type != "cuda":
            return source.contiguous().cpu()
        # CUDA: an asynchronous copy into pinned memory on the recorder's own stream; the
        # host waits for it only when the point closes.
        if self._copy_stream is None or self._copy_stream.device != source.device:
            self._copy_stream = torch.cuda.Stream(device=source.device)
        stream = self._copy_stream
        producer = torch.cuda.current_stream(source.device)
        stream.wait_stream(producer)
        host = torch.empty(source.shape, dtype=source.dtype, pin_memory=True)
        with torch.cuda.stream(stream):
            host.copy_(source.contiguous(), non_blocking=True)
            done = torch.cuda.Event()
            done.record(stream)
        # The caching allocator must not reuse the source's memory before the copy ran,
        # and the model's later work (an in-place update, say) must not overtake the copy:
        # the model's stream waits for it on the device; the host does not.
        source.record_stream(stream)
        producer.wait_stream(stream)
        point.copy_done.append(done)
        return host

    def watch_grad(
        self,
        tensor: torch.Tensor,
        *,
        name: str,
        payload: Payload | None = None,
        strict: bool = False,
    ) -> torch.utils.hooks.RemovableHandle | None:
        """Records the gradient of ``tensor`` under ``name`` (with ``payload`` as for
        ``observe``) each time backward reaches it, under the same rules as ``observe``
        (inside a point for eager execution, inside the capture for ``cuda_graph``); the
        gradient itself is left as it is. Returns the hook's handle; ``close()`` and
        ``finish()`` remove every hook still registered. A tensor that does not require
        grad gets no hook: a warning and ``None``, or with ``strict=True`` a
        ``GradientNotTrackedError`` (a ``RuntimeError``)."""
        self._check_open("watch_grad")
        if not isinstance(name, str) or not name:
            raise InvalidInputError(f"observation name must be a non-empty string, got {name!r}")
        if payload is not None:
            _choice("payload", payload, ("full", "summary"))
        return _hook_gradient(
            tensor,
            name,
            strict,
            lambda grad: self.observe(grad, name=name, payload=payload),
            self._grad_hooks,
            "nothing will be recorded",
        )

    # ----------------------------------------------------------------- points
    @contextlib.contextmanager
    def record_point(
        self,
        label: str,
        *,
        metadata: dict[str, Any] | None = None,
        synchronize: SyncArg = None,
    ) -> Iterator[None]:
        """Opens a point; observations inside it are committed together when the block
        exits: the point is checked there, then written on the recorder's writer thread
        (digests, summaries, Parquet, fsyncs) while the caller goes on. ``flush()`` or
        ``finish()`` returns once it is durable. An exception inside the block discards
        the point and propagates."""
        self._check_open("record_point")
        if self._point is not None:
            raise RecorderStateError(
                f"record_point({label!r}) inside record_point({self._point.label!r}); "
                "points do not nest"
            )
        self._check_new_label(label)
        meta = dict(metadata or {})
        json_text("metadata", meta)
        if self._probe is not None and _capturing_now():
            raise RecorderStateError(
                f"record_point({label!r}) during a CUDA graph capture; end the capture "
                "first, then replay the graph inside record_point()"
            )
        if self._probe is not None and not self._probe._captured and not self._summary_captures:
            raise RecorderStateError(
                f"record_point({label!r}): the recorder has captured no observations; call "
                "observe() inside torch.cuda.graph(...) first, then replay the graph inside "
                "record_point()"
            )
        self._point = _OpenPoint(
            label,
            meta,
            self.synchronize if synchronize is None else _check_sync_target(synchronize),
        )
        try:
            yield
            self._commit(self._point)
        finally:
            self._point = None

    def _commit(self, point: _OpenPoint) -> None:
        if self._probe is not None:
            self._commit_replay(point)
            return
        # The host copies must have landed before their bytes are read, whatever
        # `synchronize` says; it only decides whether the whole device is waited for too.
        for done in point.copy_done:
            done.synchronize()
        _synchronize(point.synchronize)
        self._writer.commit_point(
            point.label,
            json.dumps(point.metadata),
            None,
            None,
            [o.as_native() for o in point.observations],
        )

    def _commit_replay(self, point: _OpenPoint) -> None:
        """The point takes the values of the replay that ran inside it."""
        assert self._probe is not None
        snapshot = None
        if self._probe._captured:
            snapshot = self._probe.snapshot(synchronize=point.synchronize)
        elif point.synchronize is not False:
            _synchronize(point.synchronize)
        if snapshot is not None or point.synchronize is not False:
            # Replays of every graph so far (summary-only points that do not synchronise
            # are not checked: the counters are read only once the device caught up).
            replays = (0 if snapshot is None else snapshot.replay_index) + sum(
                runtime.replay_count() for runtime, _ in self._summary_captures.values()
            )
            if replays <= self._last_replays:
                raise RecorderStateError(
                    f"record_point({point.label!r}) saw no new replay of the recorder's "
                    "graphs; replay the captured graph inside the point"
                )
            self._last_replays = replays
        observations = [
            _PendingObservation(
                order=self._order_of.get(o.key, o.order),
                name=o.name,
                invocation_index=o.invocation_index,
                host=o.tensor(),
                shape=o.shape,
                stride=o.stride,
                source_device=o.source_device,
                payload="full",
            )
            for o in (snapshot.observations if snapshot is not None else ())
        ]
        native = [o.as_native() for o in observations]
        metadata = json.dumps(point.metadata)
        if self._device is not None:
            # Summaries are harvested once the device ran the replay; the host values
            # travel with the point and are merged in by capture order.
            stream = torch.cuda.current_stream(self._device_index).cuda_stream
            # The label is taken in the run now (the writer's has_label sees it).
            self._device.close_point(point.label, metadata, stream, None, native)
            return
        assert snapshot is not None
        self._writer.commit_point(point.label, metadata, snapshot.replay_index, None, native)

    # ----------------------------------------------------------------- lifecycle
    def _load(self) -> TensorRun:
        return TensorRun.load(self.path, name=self.name, rank=self.rank or 0)

    def _check_can_finish(self) -> None:
        if self._point is not None:
            raise RecorderStateError(
                f"finish() inside record_point({self._point.label!r}); leave the point first"
            )

    def close(self, *, synchronize: SyncArg = None) -> None:
        """Waits as ``synchronize`` says (default: the recorder's ``synchronize``), then
        releases the recorder: its gradient hooks are removed and, for ``cuda_graph``
        execution, its probe is closed. A run that was not finished stays
        ``complete=False``. Idempotent."""
        if self._closed:
            return
        target = self.synchronize if synchronize is None else _check_sync_target(synchronize)
        if not _capturing_now():
            _synchronize(target)
        super().close()

    def _drain(self) -> None:
        if self._device is not None:
            self._device.flush()

    def _release(self) -> None:
        for handle in self._grad_hooks:
            handle.remove()
        self._grad_hooks.clear()
        if self._probe is not None:
            # Graphs that captured the probe keep its slots alive on their own.
            self._probe.close(synchronize=False)
        if self._device is not None:
            with contextlib.suppress(Exception):
                self._device.close()
        for runtime, _ in self._summary_captures.values():
            runtime.close()


def open_run_writer(
    *,
    name: str,
    root: str | os.PathLike[str] | None,
    execution: str,
    rank: int | None = None,
    world_size: int | None = None,
    group_id: str | None = None,
    devices: list[torch.device] | None = None,
    run_metadata: dict[str, Any] | None = None,
    overwrite: bool = False,
    commit_interval: float | None = None,
    compact: bool = True,
    default_payload: str | None = None,
) -> _native.RunWriter:
    """Creates a tensor run in the job root ``root`` (a fresh temporary directory when
    None; every rank and every run of a job may share one root).

    The run's name and rank are claimed in the root first, so two writers never record
    the same run (the second gets ``RunExistsError``). A run of that name and rank
    already there is ``RunExistsError`` too, unless ``overwrite``: then its rows are
    removed first (other runs of the root are kept). A writer whose recording fails as a
    whole calls ``discard()`` so that no run is left behind. Points are committed in
    groups every ``commit_interval`` seconds, and at ``flush()`` and ``finish()``;
    ``finish()`` rewrites the run's files into one per table unless ``compact=False``.
    ``default_payload`` is kept in the run's provenance (``TensorRun.default_payload``)."""
    if root is None:
        root = tempfile.mkdtemp(prefix=f"tcgd-{name}-")
    path = os.fspath(root)
    header = _native.RunHeader(
        uuid.uuid4().hex,
        name,
        "tensor",
        execution,
        rank=rank,
        group_id=group_id,
        world_size=world_size,
        provenance={
            **provenance(devices),
            **({} if default_payload is None else {"default_payload": default_payload}),
        },
        run_metadata=run_metadata,
    )
    return _native.RunWriter(path, header, PRODUCER, overwrite, commit_interval, compact)


def _capturing_now() -> bool:
    return torch.cuda.is_available() and torch.cuda.is_current_stream_capturing()


def _synchronize(target: SyncArg) -> None:
    """Waits for a ``synchronize=`` target: a stream, a device, or (``True``) the current
    device; nothing on a process that never used CUDA."""
    if target is None or target is False:
        return
    if not (torch.cuda.is_available() and torch.cuda.is_initialized()):
        return
    if isinstance(target, torch.cuda.Stream):
        target.synchronize()
    elif isinstance(target, torch.device):
        torch.cuda.synchronize(target)
    else:
        torch.cuda.synchronize()


def _capturing(tensor: torch.Tensor) -> bool:
    return tensor.device.type == "cuda" and torch.cuda.is_current_stream_capturing()
