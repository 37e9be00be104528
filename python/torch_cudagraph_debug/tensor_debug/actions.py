"""The actions a ``TensorProbe`` runs on every replay (record, print, check) and the
types of a check's expected values: plain validated settings, no device state."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeAlias

import torch

from torch_cudagraph_debug.errors import InvalidInputError
from torch_cudagraph_debug.tensor_debug.observations import TensorObservationKey

if TYPE_CHECKING:
    import numpy

# Ring depth limit: the rings take depth x the observed bytes of device memory.
MAX_HISTORY = 1024


def _check_bool(owner: str, name: str, value: object) -> None:
    if not isinstance(value, bool):
        raise InvalidInputError(f"{owner}.{name} must be a bool, got {value!r}")


def _check_count(owner: str, name: str, value: object) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise InvalidInputError(f"{owner}.{name} must be an integer >= 1, got {value!r}")


@dataclass(frozen=True)
class RecordAction:
    """Keep the latest value of every observation (read it with ``snapshot()``).

    ``history=N`` (captured observations only) also keeps the values of the last N replays
    on the device, in a ring per observation tagged with the replay index, read with
    ``TensorProbe.history()``. A failing ``CheckAction`` of the same probe (or
    ``TensorProbe.freeze_history()``) freezes the rings at that replay: they then hold the
    N replays up to and including it, however many replays follow (a flight recorder).
    Each replay costs one extra device copy launch per 64 observations.
    """

    enabled: bool = True
    history: int = 0

    def __post_init__(self) -> None:
        _check_bool("RecordAction", "enabled", self.enabled)
        if (
            not isinstance(self.history, int)
            or isinstance(self.history, bool)
            or not 0 <= self.history <= MAX_HISTORY
        ):
            raise InvalidInputError(
                f"RecordAction.history must be an integer from 0 to {MAX_HISTORY}, "
                f"got {self.history!r}"
            )


@dataclass(frozen=True)
class PrintAction:
    """Print observed values from a host function during replay.

    Each printing replay costs a device-to-host copy of the value and a host round trip
    that the stream waits for: use it at a few sites, not everywhere. Output goes to the
    process's standard output (file descriptor 1), not through ``sys.stdout``.
    """

    max_items: int = 16
    every: int = 1
    summary: bool = True
    enabled: bool = True

    def __post_init__(self) -> None:
        _check_count("PrintAction", "max_items", self.max_items)
        _check_count("PrintAction", "every", self.every)
        _check_bool("PrintAction", "summary", self.summary)
        _check_bool("PrintAction", "enabled", self.enabled)


#: One expected value of a ``CheckAction``: a CPU tensor or a NumPy array.
TensorExpectedValue: TypeAlias = "torch.Tensor | numpy.ndarray"
#: What ``CheckAction.expected`` takes: one value (for capture order 0), values in capture
#: order, or values keyed by ``TensorObservationKey(name, invocation_index)``.
TensorExpected: TypeAlias = (
    "TensorExpectedValue | Sequence[TensorExpectedValue] "
    "| Mapping[TensorObservationKey, TensorExpectedValue]"
)


@dataclass(frozen=True)
class CheckAction:
    """Check observed values against expected ones on every replay, on the host.

    ``expected``: a sequence of CPU tensors (or arrays) in capture order, or a mapping
    keyed by ``TensorObservationKey(name, invocation_index)`` (observations it leaves out
    are not checked). A single tensor is a sequence of one: it is the expected value of
    capture order 0 only, never broadcast to later calls. Each value must have the
    observed value's shape.
    Finite values pass when ``|a - e| <= atol + rtol * |e|``; infinities must match exactly;
    NaN passes only with ``equal_nan``; integers compare exactly over their whole range.
    The first failure is kept (replay, name, element, both values): ``check_status()``.
    """

    expected: TensorExpected
    rtol: float = 1e-5
    atol: float = 1e-8
    equal_nan: bool = False
    enabled: bool = True

    def __post_init__(self) -> None:
        for name in ("rtol", "atol"):
            value = getattr(self, name)
            if not isinstance(value, int | float) or isinstance(value, bool) or value < 0:
                raise InvalidInputError(f"CheckAction.{name} must be a number >= 0, got {value!r}")
        _check_bool("CheckAction", "equal_nan", self.equal_nan)
        _check_bool("CheckAction", "enabled", self.enabled)
        expected = self.expected
        if isinstance(expected, Mapping):
            for key in expected:
                if (
                    not isinstance(key, tuple)
                    or len(key) != 2
                    or not isinstance(key[0], str)
                    or not isinstance(key[1], int)
                    or isinstance(key[1], bool)
                ):
                    raise InvalidInputError(
                        "CheckAction.expected mapping keys must be "
                        f"TensorObservationKey(name, invocation_index), got {key!r}"
                    )
            values = list(expected.values())
        elif isinstance(expected, Sequence) and not isinstance(expected, torch.Tensor):
            values = list(expected)
        else:
            values = [expected]
        # Caught here rather than at the capture, where an error aborts the capture.
        for value in values:
            if isinstance(value, torch.Tensor) and value.device.type != "cpu":
                raise InvalidInputError(
                    f"CheckAction expected values must be CPU tensors or arrays, got one on "
                    f"{value.device}; pass value.cpu()"
                )

    def expected_for(self, name: str, invocation: int, order: int) -> torch.Tensor | None:
        """The expected value of one observation; ``None`` when a mapping leaves it out
        (that observation is not checked)."""
        expected = self.expected
        if isinstance(expected, Mapping):
            if (name, invocation) not in expected:
                return None
            expected = expected[(name, invocation)]
        else:
            if not isinstance(expected, Sequence) or isinstance(expected, torch.Tensor):
                expected = (expected,)
            if order >= len(expected):
                raise InvalidInputError(
                    f"CheckAction lists {len(expected)} expected values in capture order; "
                    f"observation {order} ({name!r}) has none. Use a mapping keyed by "
                    "(name, invocation_index) to check only some observations"
                )
            expected = expected[order]
        value = torch.as_tensor(expected)
        if value.device.type != "cpu":
            raise InvalidInputError("CheckAction expected values must be CPU tensors or arrays")
        return value.contiguous()


Action = RecordAction | PrintAction | CheckAction
