"""What a probe keeps per observation slot (``_Site``) and the small helpers around it:
capture state, device and ``synchronize=`` arguments, and turning a slot's value into a
``TensorObservation``."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

import torch
import torch.utils.hooks

from torch_cudagraph_debug import _native
from torch_cudagraph_debug._torch_bridge import host_bytes, summarize
from torch_cudagraph_debug.errors import (
    GradientNotTrackedError,
    InvalidInputError,
)
from torch_cudagraph_debug.tensor_debug.actions import (
    CheckAction,
)
from torch_cudagraph_debug.tensor_debug.observations import (
    TensorObservation,
)

When = Literal["capture", "always"]
SyncArg = bool | torch.cuda.Stream | torch.device | None


@dataclass
class _Site:
    """One observation slot: fixed at capture (or at the first eager call of a name)."""

    order: int
    name: str
    invocation_index: int
    dtype: torch.dtype
    shape: tuple[int, ...]
    stride: tuple[int, ...]
    source_device: str
    nbytes: int
    slot: int | None = None  # native slot (CUDA)
    ring: int | None = None  # native history ring (CUDA, RecordAction(history=N))
    host: torch.Tensor | None = None  # host slot (CPU)
    actions: list[int] = field(default_factory=list)  # native action ids, for eager relaunch
    overwrites: int = 0
    check: tuple[CheckAction, torch.Tensor] | None = None


def _in_capture(device: torch.device) -> bool:
    return device.type == "cuda" and torch.cuda.is_current_stream_capturing()


def _device_capturing(device: torch.device | None) -> bool:
    """Whether the current stream of ``device`` (``None``: the current CUDA device) is
    capturing. Never initialises CUDA: a process that has not, captures nothing."""
    if device is not None and device.type != "cuda":
        return False
    if not torch.cuda.is_available() or not torch.cuda.is_initialized():
        return False
    if device is None or device.index in (None, torch.cuda.current_device()):
        return torch.cuda.is_current_stream_capturing()
    with torch.cuda.device(device):
        return torch.cuda.is_current_stream_capturing()


def _release_freed_memory() -> None:
    """Frees probe memory that closed probes and destroyed graphs gave up. Freeing device
    memory during a capture would invalidate it, so this waits for a moment without one."""
    if torch.cuda.is_available() and not torch.cuda.is_current_stream_capturing():
        _native.release_deferred()


def _coordinate(flat: int, shape: tuple[int, ...]) -> tuple[int, ...]:
    coord = []
    for size in reversed(shape):
        coord.append(flat % size if size else 0)
        flat = flat // size if size else 0
    return tuple(reversed(coord))


def _check_sync_target(sync: object, *, allow_none: bool = True) -> SyncArg:
    """A ``synchronize=`` argument as the reference design accepts it: a bool, a
    ``torch.cuda.Stream`` or a CUDA ``torch.device`` (``None``: inherit)."""
    if sync is None and allow_none:
        return None
    if isinstance(sync, bool | torch.cuda.Stream):
        return sync
    if isinstance(sync, torch.device) and sync.type == "cuda":
        return sync
    raise InvalidInputError(
        f"synchronize must be True, False, a torch.cuda.Stream or a CUDA torch.device, got "
        f"{sync!r}; strings, device indices and CPU devices are not accepted"
    )


def _as_device(device: torch.device | str | int) -> torch.device:
    d = torch.device(device) if not isinstance(device, int) else torch.device("cuda", device)
    if d.type == "cuda" and d.index is None:
        d = torch.device("cuda", torch.cuda.current_device())
    return d


def _hook_gradient(
    tensor: torch.Tensor,
    label: str,
    strict: bool,
    observe: Callable[[torch.Tensor], object],
    hooks: list[torch.utils.hooks.RemovableHandle],
    nothing: str,
) -> torch.utils.hooks.RemovableHandle | None:
    """``watch_grad`` of probes and recorders: a hook that hands each gradient of
    ``tensor`` to ``observe`` and passes it on unchanged, kept in ``hooks``. A tensor that
    does not require grad gets no hook: a warning ending in ``nothing`` (said at the
    caller's caller) and ``None``, or with ``strict`` a ``GradientNotTrackedError``."""
    if not isinstance(tensor, torch.Tensor) or not tensor.requires_grad:
        message = f"watch_grad({label!r}): the tensor does not require grad"
        if strict:
            raise GradientNotTrackedError(message)
        warnings.warn(f"{message}; {nothing}", stacklevel=3)
        return None

    def observe_gradient(grad: torch.Tensor) -> torch.Tensor:
        observe(grad)
        return grad

    handle = tensor.register_hook(observe_gradient)
    hooks.append(handle)
    return handle


def _observation(site: _Site, value: torch.Tensor) -> TensorObservation:
    contiguous = value.contiguous()
    return TensorObservation(
        order=site.order,
        name=site.name,
        invocation_index=site.invocation_index,
        shape=site.shape,
        stride=site.stride,
        dtype=site.dtype,
        source_device=site.source_device,
        nbytes=site.nbytes,
        payload="full",
        digest=_native.content_digest(host_bytes(contiguous)),
        summary=summarize(contiguous),
        site=None,
        _load=lambda: contiguous,
    )
