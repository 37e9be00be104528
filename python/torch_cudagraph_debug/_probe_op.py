"""The one probe op every path uses: ``torch.ops.tcgd.probe(value, probe, site)``.

Hand-placed probes call it eagerly (inside ``torch.cuda.graph`` it is captured like any
op); compile passes insert it into graphs. It returns nothing and feeds no dataflow, so it
is marked side-effectful: an unmarked op returning nothing is silently removed by dead-code
elimination. Its kernels look the probe up by key and let it do the work (a device copy
into the probe's slot on CUDA, a host copy on CPU).

``probe`` and ``site`` are strings so that compiled code stays meaningful in another
process: a graph served from Inductor's FX graph cache carries them as constants, and
the compile plugin's keys and site descriptions are derived from the config, not from
process state.
"""

from __future__ import annotations

import itertools
import weakref
from typing import Protocol

import torch
import torch._library.utils

from torch_cudagraph_debug.errors import ProbeClosedError


class _ProbeTarget(Protocol):
    def _record_cuda(self, value: torch.Tensor, site: str) -> None: ...
    def _record_cpu(self, value: torch.Tensor, site: str) -> None: ...


class _GroupTarget(_ProbeTarget, Protocol):
    """What compile sessions (the only users of group ops) also implement."""

    def _record_group(self, values: list[torch.Tensor], sites: str) -> None: ...


_PROBES: weakref.WeakValueDictionary[str, _ProbeTarget] = weakref.WeakValueDictionary()
_IDS = itertools.count(1)


def register(probe: _ProbeTarget, key: str | None = None) -> str:
    """Registers a probe under ``key`` (a fresh process-local key when None)."""
    key = f"tensorprobe:{next(_IDS)}" if key is None else key
    _PROBES[key] = probe
    return key


def registry() -> weakref.WeakValueDictionary[str, _ProbeTarget]:
    """The registry itself, for the native call wrapper, which routes a session's key to
    it on every call without running Python when it already does."""
    return _PROBES


def unregister(key: str, probe: _ProbeTarget | None = None) -> None:
    """Forgets ``key``; with ``probe`` given, only while the key still names that probe
    (a later session of the same config may have taken the key over)."""
    if probe is None or _PROBES.get(key) is probe:
        _PROBES.pop(key, None)


def registered(key: str) -> _ProbeTarget | None:
    """The probe ``key`` names now, or None."""
    return _PROBES.get(key)


def hand_back(key: str, probe: _ProbeTarget, previous: _ProbeTarget) -> None:
    """Gives ``key`` back to ``previous`` while ``probe`` still holds it (a session that
    took over a key returns it to the one it took it from)."""
    if _PROBES.get(key) is probe:
        _PROBES[key] = previous


def _lookup(key: str) -> _ProbeTarget:
    probe = _PROBES.get(key)
    if probe is None:
        raise ProbeClosedError(
            f"probe {key!r} is closed, garbage-collected, or was never opened in this "
            "process; its probe op cannot record"
        )
    return probe


_LIBRARY = torch.library.Library("tcgd", "DEF")
_LIBRARY.define("probe(Tensor value, str probe, str site) -> ()")
# The same op with a mutable token argument. Inductor before the effects API (torch 2.6)
# keeps a fallback op only when its schema mutates something, whatever FX's side-effect
# mark says; the compile pass uses this variant there, with a small constant tensor as
# the token.
_LIBRARY.define("probe_token(Tensor(a!) token, Tensor value, str probe, str site) -> ()")
# Several values alive at one place of a graph, probed by one op: under a capture their
# summaries are one kernel launch instead of one per value. `sites` is a JSON list.
_LIBRARY.define("probe_group(Tensor[] values, str probe, str sites) -> ()")
_LIBRARY.define("probe_group_token(Tensor(a!) token, Tensor[] values, str probe, str sites) -> ()")


def _probe_cuda(value: torch.Tensor, probe: str, site: str) -> None:
    _lookup(probe)._record_cuda(value, site)


def _probe_cpu(value: torch.Tensor, probe: str, site: str) -> None:
    _lookup(probe)._record_cpu(value, site)


def _probe_fake(value: torch.Tensor, probe: str, site: str) -> None:
    return None


def _token_cuda(token: torch.Tensor, value: torch.Tensor, probe: str, site: str) -> None:
    _lookup(probe)._record_cuda(value, site)


def _token_cpu(token: torch.Tensor, value: torch.Tensor, probe: str, site: str) -> None:
    _lookup(probe)._record_cpu(value, site)


def _token_fake(token: torch.Tensor, value: torch.Tensor, probe: str, site: str) -> None:
    return None


def _group(values: list[torch.Tensor], probe: str, sites: str) -> None:
    target = _lookup(probe)
    record = getattr(target, "_record_group", None)
    if record is None:
        raise ProbeClosedError(f"probe {probe!r} does not take grouped values")
    record(values, sites)


def _group_fake(values: list[torch.Tensor], probe: str, sites: str) -> None:
    return None


def _group_token(token: torch.Tensor, values: list[torch.Tensor], probe: str, sites: str) -> None:
    _group(values, probe, sites)


def _group_token_fake(
    token: torch.Tensor, values: list[torch.Tensor], probe: str, sites: str
) -> None:
    return None


for _kernel_key in ("CUDA", "CPU"):
    _LIBRARY.impl("probe_group", _group, _kernel_key)
    _LIBRARY.impl("probe_group_token", _group_token, _kernel_key)
torch.library.register_fake("tcgd::probe_group", _group_fake, lib=_LIBRARY)
torch.library.register_fake("tcgd::probe_group_token", _group_token_fake, lib=_LIBRARY)

_LIBRARY.impl("probe", _probe_cuda, "CUDA")
_LIBRARY.impl("probe", _probe_cpu, "CPU")
_LIBRARY.impl("probe_token", _token_cuda, "CUDA")
_LIBRARY.impl("probe_token", _token_cpu, "CPU")
torch.library.register_fake("tcgd::probe", _probe_fake, lib=_LIBRARY)
torch.library.register_fake("tcgd::probe_token", _token_fake, lib=_LIBRARY)

probe_op = torch.ops.tcgd.probe.default
probe_token_op = torch.ops.tcgd.probe_token.default
probe_group_op = torch.ops.tcgd.probe_group.default
probe_group_token_op = torch.ops.tcgd.probe_group_token.default
for _op in (probe_op, probe_token_op, probe_group_op, probe_group_token_op):
    torch.fx.node.has_side_effect(_op)
PROBE_OPS = (probe_op, probe_token_op, probe_group_op, probe_group_token_op)

# Whether Inductor's scheduler honours the side-effect mark (torch >= 2.7 has the
# effects-aware `is_impure`); otherwise compiled graphs need the token variant.
NEEDS_MUTABLE_TOKEN = not hasattr(torch._library.utils, "is_impure")
