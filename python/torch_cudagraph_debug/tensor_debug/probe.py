"""``TensorProbe``: observe intermediate tensors inside a captured CUDA graph (or eagerly),
refreshed on every replay, read on request.

Device work (slots, the replay counter, Print and Check host functions) is done by the
native runtime; this module keeps identity, validation and the user-facing objects.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator, Sequence
from typing import Any, Literal

import torch
import torch.utils.hooks

from torch_cudagraph_debug import _native, _probe_op
from torch_cudagraph_debug._torch_bridge import (
    check_recordable,
    dtype_name,
    host_bytes,
    tensor_from_bytes,
)
from torch_cudagraph_debug.errors import (
    InvalidInputError,
    NonContiguousTensorError,
    NoObservationsError,
    ProbeClosedError,
    RecorderStateError,
    SynchronizeDuringCaptureError,
    TensorCheckError,
    TensorOwnershipError,
    WrongDeviceError,
)
from torch_cudagraph_debug.tensor_debug.actions import (
    Action,
    CheckAction,
    PrintAction,
    RecordAction,
)
from torch_cudagraph_debug.tensor_debug.compare import compare_snapshots
from torch_cudagraph_debug.tensor_debug.history import ProbeHistory
from torch_cudagraph_debug.tensor_debug.sites import (
    SyncArg,
    When,
    _as_device,
    _check_sync_target,
    _coordinate,
    _device_capturing,
    _hook_gradient,
    _in_capture,
    _observation,
    _release_freed_memory,
    _Site,
)
from torch_cudagraph_debug.tensor_debug.snapshot import (
    CheckFailure,
    TensorCheckStatus,
    TensorProbeSnapshot,
)


class TensorProbe(ProbeHistory):
    """Observes tensors at the places it is called.

    ``probe(tensor, name=...)`` returns the same tensor. Inside ``torch.cuda.graph(...)``
    each call reserves a device slot and records a device-to-device copy into it, so every
    replay refreshes the value; ``snapshot()`` reads all slots. With ``when="capture"``
    (default) calls outside a capture do nothing; with ``when="always"`` an eager call
    re-samples one slot per name in place.
    """

    def __init__(
        self,
        name: str,
        actions: Sequence[Action] = (RecordAction(),),
        *,
        non_contiguous: Literal["error", "copy"] = "error",
        when: When = "capture",
        device: torch.device | str | int | None = None,
        synchronize: SyncArg = True,
    ):
        if not isinstance(name, str) or not name:
            raise InvalidInputError(f"probe name must be a non-empty string, got {name!r}")
        actions = tuple(actions)
        if not actions:
            raise InvalidInputError(
                f"probe {name!r} has no actions; give at least one of RecordAction, "
                "PrintAction or CheckAction"
            )
        for action in actions:
            if not isinstance(action, RecordAction | PrintAction | CheckAction):
                raise InvalidInputError(
                    f"actions must be RecordAction, PrintAction or CheckAction, got {action!r}"
                )
        if non_contiguous not in ("error", "copy"):
            raise InvalidInputError(
                f"non_contiguous must be 'error' or 'copy', got {non_contiguous!r}"
            )
        if when not in ("capture", "always"):
            raise InvalidInputError(f"when must be 'capture' or 'always', got {when!r}")
        self.name = name
        self.actions = actions
        self.non_contiguous = non_contiguous
        self.when = when
        self.synchronize = _check_sync_target(synchronize, allow_none=False)
        # With every action disabled the probe does nothing at all: no native runtime, no
        # CUDA, no counter (so a disabled probe can stay in production code).
        self._active = any(action.enabled for action in actions)
        self.device: torch.device | None = None if device is None else _as_device(device)
        self.history_depth = max(
            (a.history for a in actions if isinstance(a, RecordAction) and a.enabled),
            default=0,
        )
        # The ownership token of this probe's snapshots (`compare` checks it).
        self.probe_id = uuid.uuid4().hex
        self._grad_hooks: list[torch.utils.hooks.RemovableHandle] = []
        self._runtime: _native.ProbeRuntime | None = None
        self._sites: list[_Site] = []
        self._captured: dict[tuple[str, int], _Site] = {}
        self._invocations: dict[str, int] = {}
        # Inside `batched()` during a capture: (site, value) whose copies wait for the
        # block's end; holding the values keeps their memory from being reused before.
        self._batch: list[tuple[_Site, torch.Tensor]] | None = None
        self._eager: dict[str, _Site] = {}
        # The one CUDA stream eager calls may come from: the first successful one's.
        self._eager_stream: torch.cuda.Stream | None = None
        self._mode: Literal["eager", "capture"] | None = None
        self._snapshots = 0
        self._closed = False
        self._id = _probe_op.register(self)

    # ------------------------------------------------------------ calling the probe
    def __call__(self, tensor: torch.Tensor, *, name: str | None = None) -> torch.Tensor:
        self._check_open()
        name = self.name if name is None else name
        if not isinstance(name, str) or not name:
            raise InvalidInputError(f"observation name must be a non-empty string, got {name!r}")
        if not self._active:
            return tensor
        if self.when == "capture":
            # Outside a capture of the probe's device a call does nothing at all, not even
            # validation: warmup may run on other devices or dtypes.
            if not _device_capturing(self.device):
                return tensor
            if isinstance(tensor, torch.Tensor) and tensor.device.type != "cuda":
                raise WrongDeviceError(
                    f"{self.name}({name!r}): a {tensor.device.type} tensor during a CUDA graph "
                    "capture; a captured probe observes CUDA tensors of the capturing device"
                )
        check_recordable(tensor, f"{self.name}({name!r})")
        self._bind_device(tensor, name)
        capturing = _in_capture(tensor.device)
        if not capturing and self.when == "capture":
            return tensor  # warmup and eager runs add nothing
        if not capturing and self._mode == "capture":
            raise RecorderStateError(
                f"probe {self.name!r} was already captured into a graph; eager calls after "
                "capture are rejected. Use a separate TensorProbe for eager observations"
            )
        value = tensor.detach()
        if not value.is_contiguous():
            if self.non_contiguous == "error":
                raise NonContiguousTensorError(
                    f"{self.name}({name!r}): tensor with shape {tuple(value.shape)} and stride "
                    f"{value.stride()} is not contiguous; create the probe with "
                    "non_contiguous='copy' to observe a contiguous copy"
                )
            value = value.contiguous()
        if capturing:
            self._observe_in_capture(tensor, value, name)
        else:
            self._observe_eagerly(tensor, value, name)
        return tensor

    def _bind_device(self, tensor: torch.Tensor, name: str) -> None:
        if self.device is None:
            self.device = _as_device(tensor.device)
        if tensor.device.type != self.device.type or (
            self.device.type == "cuda" and tensor.device.index != self.device.index
        ):
            kind = "CPU tensor in a CUDA probe" if tensor.device.type == "cpu" else "wrong device"
            raise WrongDeviceError(
                f"{self.name}({name!r}): {kind}: the tensor is on {tensor.device}, the probe "
                f"on {self.device}; move the tensor or use a probe for that device"
            )

    def _new_site(self, source: torch.Tensor, value: torch.Tensor, name: str, inv: int) -> _Site:
        return _Site(
            order=len(self._sites),
            name=name,
            invocation_index=inv,
            dtype=value.dtype,
            shape=tuple(source.shape),
            stride=tuple(source.stride()),
            source_device=str(source.device),
            nbytes=value.numel() * value.element_size(),
        )

    def _observe_in_capture(self, source: torch.Tensor, value: torch.Tensor, name: str) -> None:
        inv = self._invocations.get(name, 0)
        site = self._new_site(source, value, name, inv)
        self._sites.append(site)
        if self._batch is not None:
            self._batch.append((site, value))
            self._mode = "capture"
            self._invocations[name] = inv + 1
            self._captured[(name, inv)] = site
            return
        try:
            _probe_op.probe_op(value, self._id, str(site.order))
        except BaseException:
            # A failed call uses no index. (A slot it may have reserved stays unused.)
            self._sites.pop()
            raise
        self._mode = "capture"
        self._invocations[name] = inv + 1
        self._captured[(name, inv)] = site

    @contextlib.contextmanager
    def batched(self) -> Iterator[None]:
        """Inside a capture, the values probed in the block are copied into their slots
        at the block's end by one kernel launch per 64 values (``MAX_SITES_PER_LAUNCH``),
        instead of one copy node each (for many small values the node count is the cost).
        The block keeps every value it probed alive until its end, so use it around values
        that are alive together anyway. Outside a capture it changes nothing."""
        if self._batch is not None:
            raise RecorderStateError(f"probe {self.name!r}: batched() blocks do not nest")
        self._batch = []
        try:
            yield
            self._flush_batch()
        except BaseException:
            # The block failed: its values use no index and no slot.
            for site, _ in self._batch:
                self._sites.remove(site)
                self._captured.pop((site.name, site.invocation_index), None)
                self._invocations[site.name] -= 1
            raise
        finally:
            self._batch = None

    def _flush_batch(self) -> None:
        assert self._batch is not None
        if not self._batch:
            return
        runtime = self._native_runtime()
        stream = torch.cuda.current_stream(self.device).cuda_stream
        if runtime.capturing(stream):
            runtime.bind_capture(stream)
        for site, _ in self._batch:
            if site.slot is None:
                site.slot = runtime.add_slot(site.nbytes)
        # The core splits the copies into launches of at most MAX_SITES_PER_LAUNCH.
        runtime.copy_into_slots(
            [(site.slot, value.data_ptr()) for site, value in self._batch], stream
        )
        if self.history_depth:
            self._copy_into_rings(runtime, [site for site, _ in self._batch], stream)
        # Actions read the slots: after the copies, in stream order.
        for site, _ in self._batch:
            self._launch_actions(runtime, site, stream)
        self._batch.clear()

    def _observe_eagerly(self, source: torch.Tensor, value: torch.Tensor, name: str) -> None:
        site = self._eager.get(name)
        if site is not None and (site.dtype, site.shape) != (value.dtype, tuple(source.shape)):
            raise InvalidInputError(
                f"{self.name}({name!r}): eager calls re-sample one slot per name; it holds "
                f"{site.dtype}{list(site.shape)}, this value is {value.dtype}{list(source.shape)}"
            )
        stream = None
        if source.device.type == "cuda":
            stream = torch.cuda.current_stream(source.device)
            if self._eager_stream is not None and stream != self._eager_stream:
                raise RecorderStateError(
                    f"{self.name}({name!r}): eager calls of this probe come from stream "
                    f"{self._eager_stream}; this one is on {stream}. An eager probe is bound to "
                    "one stream: use one probe per stream"
                )
        fresh = site is None
        if fresh:
            site = self._new_site(source, value, name, 0)
            self._sites.append(site)
        try:
            _probe_op.probe_op(value, self._id, str(site.order))
        except BaseException:
            if fresh:
                self._sites.pop()
            raise
        if stream is not None:
            self._eager_stream = stream
        if fresh:
            self._eager[name] = site
            self._mode = self._mode or "eager"
        else:
            site.overwrites += 1

    # ------------------------------------------------------------ op kernels
    def _native_runtime(self) -> _native.ProbeRuntime:
        if self._runtime is None:
            assert self.device is not None and self.device.type == "cuda"
            _release_freed_memory()
            self._runtime = _native.ProbeRuntime(self.device.index or 0)
        return self._runtime

    def _record_cuda(self, value: torch.Tensor, site_key: str) -> None:
        """Body of the probe op on CUDA: reserve the slot once, then copy into it on the
        current stream (recorded into the graph when the stream captures)."""
        site = self._sites[int(site_key)]
        runtime = self._native_runtime()
        stream = torch.cuda.current_stream(value.device).cuda_stream
        capturing = runtime.capturing(stream)
        if capturing:
            runtime.bind_capture(stream)
        if site.slot is None:
            site.slot = runtime.add_slot(site.nbytes)
        runtime.copy_into_slot(site.slot, value.data_ptr(), site.nbytes, stream)
        if capturing and self.history_depth:
            self._copy_into_rings(runtime, [site], stream)
        if site.actions:
            for action in site.actions:
                runtime.relaunch_action(action, stream)
        else:
            self._launch_actions(runtime, site, stream)

    def _copy_into_rings(
        self, runtime: _native.ProbeRuntime, sites: list[_Site], stream: int
    ) -> None:
        """Records the copies of the sites' slots into their history rings (before any
        check of the same replay, so a replay that fails a check is in the rings)."""
        for site in sites:
            if site.ring is None:
                assert site.slot is not None
                site.ring = runtime.add_ring(site.slot, self.history_depth)
        runtime.copy_slots_into_rings([(site.ring, site.slot) for site in sites], stream)

    def _launch_actions(self, runtime: _native.ProbeRuntime, site: _Site, stream: int) -> None:
        for action in self.actions:
            if not action.enabled:
                continue
            if isinstance(action, PrintAction):
                site.actions.append(
                    runtime.enqueue_print(
                        site.slot,
                        stream,
                        self.name,
                        site.name,
                        site.invocation_index,
                        dtype_name(site.dtype),
                        list(site.shape),
                        action.max_items,
                        action.every,
                        action.summary,
                    )
                )
            elif isinstance(action, CheckAction):
                expected = action.expected_for(site.name, site.invocation_index, site.order)
                if expected is None:
                    continue
                if (tuple(expected.shape), expected.dtype) != (site.shape, site.dtype):
                    raise InvalidInputError(
                        f"CheckAction expected value for ({site.name!r}, {site.invocation_index}) "
                        f"is {expected.dtype}{list(expected.shape)}, the observed value "
                        f"{site.dtype}{list(site.shape)}; give one value of the observed shape "
                        "and dtype per capture-order call, or a mapping keyed by "
                        "(name, invocation_index)"
                    )
                site.check = (action, expected)
                site.actions.append(
                    runtime.enqueue_check(
                        site.slot,
                        stream,
                        site.name,
                        site.invocation_index,
                        dtype_name(site.dtype),
                        host_bytes(expected),
                        dtype_name(expected.dtype),
                        float(action.rtol),
                        float(action.atol),
                        action.equal_nan,
                    )
                )

    def _record_cpu(self, value: torch.Tensor, site_key: str) -> None:
        """Body of the probe op on CPU: a host copy into the site's host slot."""
        site = self._sites[int(site_key)]
        if any(a.enabled and not isinstance(a, RecordAction) for a in self.actions):
            raise InvalidInputError(
                f"probe {self.name!r}: PrintAction and CheckAction run as host functions on "
                "a CUDA stream and need a CUDA probe; on CPU, use RecordAction and snapshot()"
            )
        if site.host is None:
            site.host = torch.empty(value.shape, dtype=value.dtype)
        site.host.copy_(value)

    # ------------------------------------------------------------ reading
    def _wait(self, synchronize: SyncArg, what: str) -> None:
        sync = self.synchronize if synchronize is None else _check_sync_target(synchronize)
        device = self.device
        if device is None or device.type != "cuda":
            return
        if _in_capture(device):
            raise SynchronizeDuringCaptureError(
                f"{what} during a CUDA graph capture: it would read device memory (and "
                "synchronise) inside the capture; call it after the capture ends"
            )
        if sync is False:
            return
        if isinstance(sync, torch.cuda.Stream):
            if sync.device != device:
                raise InvalidInputError(
                    f"{what}: synchronize= is a stream of {sync.device}, the probe is on "
                    f"{device}; pass a stream of the probe's device"
                )
            sync.synchronize()
        elif sync is True:
            torch.cuda.synchronize(device)
        else:
            target = _as_device(sync)
            if target != device:
                raise InvalidInputError(
                    f"{what}: synchronize={sync} is not the probe's device {device}"
                )
            torch.cuda.synchronize(target)

    def snapshot(self, *, synchronize: SyncArg = None) -> TensorProbeSnapshot:
        """Reads every observation's latest value. ``synchronize``: ``True`` waits for the
        device, a ``torch.cuda.Stream`` for that stream, a device for that device, ``False``
        for nothing; ``None`` uses the constructor's choice."""
        self._check_open()
        if not any(isinstance(a, RecordAction) and a.enabled for a in self.actions):
            raise NoObservationsError(
                f"snapshot() of probe {self.name!r}: no RecordAction is enabled, so no value "
                "is kept; add RecordAction() to the probe's actions"
            )
        self._wait(synchronize, "snapshot()")
        _release_freed_memory()
        replay = 0
        if self._runtime is not None and self._mode == "capture":
            replay = self._runtime.replay_count()
        observations = []
        sites = self._captured.values() if self._mode == "capture" else self._eager.values()
        for site in sorted(sites, key=lambda s: s.order):
            if site.host is not None:
                value = site.host.clone()
            elif site.slot is not None and self._runtime is not None:
                value = tensor_from_bytes(
                    self._runtime.read_slot(site.slot), site.dtype, site.shape
                )
            else:
                continue
            observations.append(_observation(site, value))
        if not observations:
            raise NoObservationsError(
                f"snapshot() of probe {self.name!r}: no slot holds a value yet. With "
                "when='capture' only calls inside a CUDA graph capture observe; pass "
                "when='always' to observe eager calls too"
            )
        eager = self._mode != "capture"
        return self._new_snapshot(
            replay,
            observations,
            tuple(
                (s.name, s.overwrites)
                for s in sorted(self._eager.values(), key=lambda s: s.order)
                if eager
            ),
        )

    @property
    def replay_index(self) -> torch.Tensor | None:
        """Replays of the captured graph so far (0 before the first), as a new 0-dim
        ``int64`` tensor on the probe's device: changing it changes nothing. The count is
        read from the device when the property is read. ``None`` for a probe whose
        actions are all disabled."""
        self._check_open()
        if not self._active:
            return None
        count = 0
        if self._runtime is not None and self._mode == "capture":
            self._wait(False, "replay_index")
            count = self._runtime.replay_count()
        device = self.device if self.device is not None else torch.device("cpu")
        return torch.tensor(count, dtype=torch.int64, device=device)

    # ------------------------------------------------------------ checks
    def check_status(self, *, synchronize: SyncArg = None) -> TensorCheckStatus:
        """The sticky state of every CheckAction so far. ``synchronize`` (as for
        ``snapshot``) first waits for the replay in flight; with ``False`` the state is as
        of the last replay whose checks ran."""
        self._check_open()
        sync = self.synchronize if synchronize is None else _check_sync_target(synchronize)
        if sync is not False:
            self._wait(sync, "check_status()")
        if self._runtime is None:
            return TensorCheckStatus(True, "ok: no check has run", 0, -1, None, -1)
        evaluations, failures, first = self._runtime.check_status()
        if first is None:
            return TensorCheckStatus(
                True, f"ok: {evaluations} checks passed", 0, -1, None, -1, evaluations, failures
            )
        replay, name, inv, element, actual, expected = first
        site = self._captured.get((name, inv)) or self._eager.get(name)
        shape = site.shape if site is not None else ()
        failure = CheckFailure(replay, name, inv, _coordinate(element, shape), actual, expected)
        message = (
            f"probe {self.name!r}: {failures} of {evaluations} checks failed; first at replay "
            f"{replay}, ({name!r}, {inv}) element {failure.element}: got {actual}, "
            f"expected {expected}"
        )
        return TensorCheckStatus(
            ok=False,
            message=message,
            replay_index=replay,
            order=site.order if site is not None else -1,
            name=name,
            invocation_index=inv,
            evaluations=evaluations,
            failures=failures,
            first_failure=failure,
        )

    def assert_check_ok(self, *, synchronize: SyncArg = None) -> None:
        """Raises ``TensorCheckError`` (an ``AssertionError``) with the status's message
        when a check has failed; waits as ``check_status`` does, once."""
        status = self.check_status(synchronize=synchronize)
        if not status.ok:
            raise TensorCheckError(status.message)

    # ------------------------------------------------------------ comparing
    def compare(
        self,
        reference: TensorProbeSnapshot,
        candidate: TensorProbeSnapshot,
        *,
        options: Any = None,
    ) -> Any:
        """Compares two snapshots of this probe, the earlier one (by ``snapshot_index``;
        two of one replay are fine) as ``reference``; returns what ``compare_snapshots``
        does. A snapshot of another probe raises ``TensorOwnershipError``."""

        for what, snap in (("reference", reference), ("candidate", candidate)):
            if not isinstance(snap, TensorProbeSnapshot):
                raise InvalidInputError(
                    f"{what} must be a TensorProbeSnapshot, got {type(snap).__name__}"
                )
            if snap.probe_id != self.probe_id:
                raise TensorOwnershipError(
                    f"{what} is a snapshot of another probe: probe {snap.probe_name!r} (id "
                    f"{snap.probe_id}), not {self.name!r}; use compare_snapshots() to "
                    "compare snapshots of different probes"
                )
        if reference.snapshot_index > candidate.snapshot_index:
            raise InvalidInputError(
                f"reference is snapshot {reference.snapshot_index}, taken after candidate "
                f"(snapshot {candidate.snapshot_index}); pass the earlier snapshot as reference"
            )
        return compare_snapshots(reference, candidate, options=options)

    # ------------------------------------------------------------ gradients
    def watch_grad(
        self, tensor: torch.Tensor, *, name: str | None = None, strict: bool = False
    ) -> torch.utils.hooks.RemovableHandle | None:
        """Probes the gradient of ``tensor`` (under ``name``, default the probe's) each
        time backward reaches it, so repeated hooks of one name take invocation indices in
        backward order; the gradient itself is left as it is. The ``when`` policy holds:
        with ``when="capture"`` the backward must be captured too. Returns the hook's
        handle; ``close()`` removes every hook still registered. A tensor that does not
        require grad gets no hook: a warning and ``None``, or with ``strict=True`` a
        ``GradientNotTrackedError`` (a ``RuntimeError``)."""
        self._check_open()
        label = self.name if name is None else name
        return _hook_gradient(
            tensor,
            label,
            strict,
            lambda grad: self(grad, name=label),
            self._grad_hooks,
            "nothing will be observed",
        )

    # ------------------------------------------------------------ lifecycle
    def _check_open(self) -> None:
        if self._closed:
            raise ProbeClosedError(
                f"probe {self.name!r} is closed; create a new TensorProbe to observe again"
            )

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self, *, synchronize: SyncArg = None) -> None:
        """Releases the probe. Graphs that captured it keep its device slots alive until
        they are destroyed, so closing before ``del graph`` is safe. Idempotent."""
        if self._closed:
            return
        self._wait(synchronize, "close()")
        # A backward after close must not reach a closed probe. Removing a handle twice
        # is harmless, so handles the caller already removed are fine.
        for handle in self._grad_hooks:
            handle.remove()
        self._grad_hooks.clear()
        if self._runtime is not None:
            self._runtime.close()
        self._closed = True
        _probe_op.unregister(self._id)
        _release_freed_memory()

    def __enter__(self) -> TensorProbe:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return (
            f"TensorProbe({self.name!r}, when={self.when!r}, device={self.device}, "
            f"observations={len(self._sites)}, closed={self._closed})"
        )
