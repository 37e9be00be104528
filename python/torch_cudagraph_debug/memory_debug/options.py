"""The options of memory comparisons, their attribution and lifetime reports (their own
module: comparisons, attribution and lifetimes all take them)."""

from __future__ import annotations

from dataclasses import dataclass, field

from torch_cudagraph_debug._native import MemoryDisplayOptions
from torch_cudagraph_debug.errors import InvalidInputError

# How many rows and frames text and HTML show, with their defaults, is the core's
# ``MemoryDisplayOptions`` (one declaration, which the CLI reads its defaults from too).


@dataclass(frozen=True)
class MemoryAttributionOptions:
    """Which history analyses to attach to a comparison: ``stacks`` (live blocks by
    allocation stack; works across runs, matched pools only), ``events`` (allocator events
    of the interval; one run or probe, complete history), ``lifetimes`` (the cohort
    report of the allocations born between the two points of one run, as
    ``allocation_lifetimes``; a timeline gets the whole run's once)."""

    stacks: bool = False
    events: bool = False
    lifetimes: bool = False
    display: MemoryDisplayOptions = field(default_factory=MemoryDisplayOptions)

    def __post_init__(self) -> None:
        for name in ("stacks", "events", "lifetimes"):
            if not isinstance(getattr(self, name), bool):
                raise InvalidInputError(f"{name} must be a bool, got {getattr(self, name)!r}")
        if not isinstance(self.display, MemoryDisplayOptions):
            raise InvalidInputError(
                f"display must be a MemoryDisplayOptions, got {type(self.display).__name__}"
            )

    def lifetime_options(self) -> MemoryLifetimeOptions:
        """The options of the cohort report a ``lifetimes`` request attaches
        (``allocation_lifetimes``): this request's ``display``."""
        return MemoryLifetimeOptions(display=self.display)


def _lifetime_display() -> MemoryDisplayOptions:
    return MemoryDisplayOptions.for_lifetimes()


@dataclass(frozen=True)
class MemoryLifetimeOptions:
    """Display options of a lifetime report: ``limit`` cohorts and ``stack_depth`` frames
    in text and HTML (JSON, CSV and ``cohorts`` keep everything)."""

    display: MemoryDisplayOptions = field(default_factory=_lifetime_display)
