"""The one probe op every path uses: ``torch.ops.tcgd.probe(value, probe_id, site)``.

Hand-placed probes call it eagerly (inside ``torch.cuda.graph`` it is captured like any
op); compile passes insert it into graphs. It returns nothing and feeds no dataflow, so it
is marked side-effectful: an unmarked op returning nothing is silently removed by dead-code
elimination. Its kernels look the probe up by id and let it do the work (a device copy
into the probe's slot on CUDA, a host copy on CPU).
"""

from __future__ import annotations

import itertools
import weakref
from typing import Protocol

import torch

from torch_cudagraph_debug.errors import ProbeClosedError


class _ProbeTarget(Protocol):
    def _record_cuda(self, value: torch.Tensor, site: int) -> None: ...
    def _record_cpu(self, value: torch.Tensor, site: int) -> None: ...


_PROBES: weakref.WeakValueDictionary[int, _ProbeTarget] = weakref.WeakValueDictionary()
_IDS = itertools.count(1)


def register(probe: _ProbeTarget) -> int:
    probe_id = next(_IDS)
    _PROBES[probe_id] = probe
    return probe_id


def unregister(probe_id: int) -> None:
    _PROBES.pop(probe_id, None)


def _lookup(probe_id: int) -> _ProbeTarget:
    probe = _PROBES.get(probe_id)
    if probe is None:
        raise ProbeClosedError(
            f"probe #{probe_id} was closed or garbage-collected; its probe op cannot record"
        )
    return probe


_LIBRARY = torch.library.Library("tcgd", "DEF")
_LIBRARY.define("probe(Tensor value, int probe_id, int site) -> ()")


def _probe_cuda(value: torch.Tensor, probe_id: int, site: int) -> None:
    _lookup(probe_id)._record_cuda(value, site)


def _probe_cpu(value: torch.Tensor, probe_id: int, site: int) -> None:
    _lookup(probe_id)._record_cpu(value, site)


def _probe_fake(value: torch.Tensor, probe_id: int, site: int) -> None:
    return None


_LIBRARY.impl("probe", _probe_cuda, "CUDA")
_LIBRARY.impl("probe", _probe_cpu, "CPU")
torch.library.register_fake("tcgd::probe", _probe_fake, lib=_LIBRARY)

probe_op = torch.ops.tcgd.probe.default
torch.fx.node.has_side_effect(probe_op)
