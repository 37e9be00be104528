"""Culprit search: which part of the compiler makes the compiled model diverge.

The oracle is our own comparison, not a test the user writes: every trial compiles the
model one way, runs the differential's batches and records the model outputs into a
scratch run, which the native engine compares with the differential's eager run (or
judges against its float64 run). A trial "fails" when the outputs diverge the way the
differential found them to diverge.

Stages, cheapest and most specific first (``docs/why.md``):

1. **your settings**: each Inductor config entry the program changed from its default
   (``torch._inductor.config``, including custom graph passes installed there and
   ``TORCHINDUCTOR_*`` environment settings), put back one at a time;
2. **backends, passes, switches, lowerings**: PyTorch's ``CompilerBisector`` driven in
   process with our oracle: backends ``eager``, ``aot_eager``,
   ``aot_eager_decomp_partition``, ``inductor``; then within the first backend that
   diverges, pre-grad, joint and post-grad pass applications, the switches
   ``fallback_random``, ``emulate_precision_casts``, ``layout_optimization``,
   ``comprehensive_padding``, and lowerings, bisected to the one application;
3. **fusions**: what the bisector cannot see. The fusions Inductor's scheduler makes are
   listed in a first trial, then bisected by forbidding halves of them
   (``Scheduler.can_fuse`` answers no for a forbidden pair) until one fusion remains
   whose absence alone removes the divergence.

The search assumes one cause: the first stage that removes the divergence names it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

import torch_cudagraph_debug.compile._progress as _progress
from torch_cudagraph_debug import _native
from torch_cudagraph_debug.compile.backend import no_compile_caches
from torch_cudagraph_debug.compile.eager_reference import output_site, output_tensors
from torch_cudagraph_debug.compile.session import ProbeSession

# Inductor config entries never reverted in the "your settings" stage: they choose where
# and how compilation happens (caches, debug output), not what the kernels compute.
_NOT_NUMERICS = (
    "fx_graph_cache",
    "fx_graph_remote_cache",
    "autotune_local_cache",
    "autotune_remote_cache",
    "bundled_autotune_remote_cache",
    "force_disable_caches",
    "debug",
    "trace.",
    "compile_threads",
    "worker_start_method",
    "triton.cudagraphs",
    "triton.cudagraph_trees",
)


@dataclass(frozen=True)
class Trial:
    """One compilation tried: the stage, what was changed, and whether it diverged."""

    stage: str
    setting: str
    diverges: bool
    detail: str
    seconds: float

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class Culprit:
    """What the search names.

    ``kind``: ``setting`` (an Inductor config entry the program set), ``backend`` (the
    first torch.compile backend that diverges, when nothing inside it was singled out),
    ``pass``, ``switch``, ``lowering``, ``decomposition``, ``cudagraphs`` or ``fusion``.
    ``name``: the entry, pass, switch, op or fused nodes. ``without``: the trial that
    removed the divergence, ``with_``: the one that shows it."""

    kind: str
    name: str
    backend: str
    detail: str
    nodes: tuple[str, ...] = ()
    kernel: str | None = None
    with_: Trial | None = None
    without: Trial | None = None

    def to_dict(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        out["with"] = out.pop("with_")
        out["nodes"] = list(self.nodes)
        return out


@dataclass(frozen=True)
class CulpritSearch:
    """The search's answer: the culprit (None when no stage removed the divergence, or
    when there was nothing to search), every trial, and how long it took."""

    oracle: str
    culprit: Culprit | None
    trials: tuple[Trial, ...]
    seconds: float
    summary: str
    skipped: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "oracle": self.oracle,
            "culprit": None if self.culprit is None else self.culprit.to_dict(),
            "trials": [t.to_dict() for t in self.trials],
            "seconds": self.seconds,
            "summary": self.summary,
            "skipped": self.skipped,
        }

    def add_to(self, doc: Any) -> None:
        doc.heading("Culprit search")
        doc.paragraph(self.summary)
        if self.skipped is not None:
            return
        c = self.culprit
        if c is not None:
            facts = [("kind", c.kind), ("name", c.name), ("backend", c.backend)]
            if c.detail:
                facts.append(("detail", c.detail))
            if c.nodes:
                facts.append(("graph nodes", ", ".join(c.nodes)))
            if c.kernel:
                facts.append(("kernel", c.kernel))
            if c.with_ is not None:
                facts.append(("with it", c.with_.detail))
            if c.without is not None:
                facts.append(("without it", c.without.detail))
            doc.facts(facts)
        doc.facts([("oracle", self.oracle), ("search time", f"{self.seconds:.1f} s")])
        doc.table(
            ["stage", "setting", "diverges", "detail", "seconds"],
            [[t.stage, t.setting, t.diverges, t.detail, round(t.seconds, 2)] for t in self.trials],
            limit=40,
        )


# ------------------------------------------------------------------------------ oracle
class OutputOracle:
    """Judges a trial's model outputs against the differential's eager (and float64) runs.

    ``kind="float64"``: a trial fails when any output diverges by the float64 rule;
    ``kind="tolerance"``: when any output differs from eager beyond the comparison
    options (used when the differential's outputs differ but the float64 rule calls the
    difference rounding, or when there is no float64 run)."""

    def __init__(
        self,
        kind: str,
        eager: Any,
        float64: Any | None,
        outputs: Sequence[str],
        config: Any,
        options: Any = None,
        tol: float | None = None,
    ):
        self.kind = kind
        self.eager = eager
        self.float64 = float64
        self.outputs = list(outputs)
        self.config = config
        self.options = options
        self.tol = tol
        self.root = tempfile.mkdtemp(prefix="tcgd-culprit-")

    def close(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)

    def describe(self) -> str:
        if self.kind == "float64":
            return (
                "model outputs diverge by the float64 rule (compiled error beyond the "
                "factor of eager's)"
            )
        return "model outputs differ from the eager model's beyond the comparison tolerance"

    def judge(self, outputs_per_call: Sequence[Any]) -> tuple[bool, str]:
        session = ProbeSession(self.config, run_dir=self.root, name="trial", overwrite=True)
        for i, outputs in enumerate(outputs_per_call):
            with session.record_point(f"call{i}"):
                for j, value in enumerate(output_tensors(outputs)):
                    session.record_value(output_site(j), value)
        trial = session.finish()
        if self.kind == "float64":
            judged = _native.judge_against_float64(
                self.float64.address,
                self.eager.address,
                trial.address,
                names=self.outputs,
                tol=self.tol,
            )
            bad = [a for a in judged if a.verdict == "diverges"]
            worst = max(
                (a for a in judged if a.compiled_rmse is not None),
                key=lambda a: a.error_ratio or 0.0,
                default=None,
            )
            if worst is None:
                return bool(bad), "no output judged"
            return bool(bad), (
                f"{worst.name} at '{worst.point}': error {worst.compiled_rmse:.3g} vs eager "
                f"{worst.eager_rmse:.3g} ({worst.verdict})"
            )
        from torch_cudagraph_debug.tensor_debug.compare import compare_runs

        result = compare_runs(self.eager, trial, options=self.options, names=self.outputs)
        worst = max(
            (o for o in result.observations if o.max_abs_error is not None),
            key=lambda o: o.max_abs_error,
            default=None,
        )
        detail = "" if worst is None else f"{worst.name}: max abs error {worst.max_abs_error:.3g}"
        return result.status == "mismatch", f"{result.status}; {detail}".rstrip("; ")


# ------------------------------------------------------------------------------ trials
class _Trials:
    """Compiles and runs the model for each trial, and keeps what every trial gave."""

    def __init__(self, model: Any, calls: Sequence[Any], oracle: OutputOracle):
        self.model = model
        self.calls = calls
        self.oracle = oracle
        self.done: list[Trial] = []

    def compile(self, backend: str, options: dict[str, Any] | None = None) -> Any:
        if backend != "inductor":
            return torch.compile(self.model, backend=backend)
        return torch.compile(
            self.model,
            backend="inductor",
            options={"triton.cudagraphs": False, **(options or {})},
        )

    def run(
        self,
        stage: str,
        setting: str,
        backend: str = "inductor",
        options: dict[str, Any] | None = None,
    ) -> Trial:
        _progress.report(f"culprit search: {stage}: {setting}")
        start = time.perf_counter()
        torch._dynamo.reset()
        try:
            # What the compiler prints (the bisector's own narration) is not our report.
            with no_compile_caches(), torch.no_grad(), _quiet():
                compiled = self.compile(backend, options)
                outputs = [call(compiled) for call in self.calls]
            diverges, detail = self.oracle.judge(outputs)
        except Exception as error:  # a setting that breaks compilation is not the culprit
            diverges, detail = True, f"failed: {type(error).__name__}: {error}"[:300]
        finally:
            torch._dynamo.reset()
        trial = Trial(stage, setting, diverges, detail, time.perf_counter() - start)
        self.done.append(trial)
        return trial


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    sink = io.StringIO()
    with contextlib.redirect_stdout(sink):
        yield


# ------------------------------------------------------------------ stage 1: settings
def _inductor_entries() -> dict[str, Any]:
    import torch._inductor.config as inductor_config

    return inductor_config._config  # type: ignore[attr-defined]


def changed_settings() -> dict[str, tuple[Any, Any]]:
    """Inductor config entries whose value differs from the default: name -> (value,
    default). Set in the program (``torch._inductor.config.x = ...``) or forced through
    the environment."""
    import torch._inductor.config as inductor_config
    from torch.utils._config_module import _UNSET_SENTINEL

    changed = {}
    for name, entry in _inductor_entries().items():
        if any(name == p or (p.endswith(".") and name.startswith(p)) for p in _NOT_NUMERICS):
            continue
        overridden = entry.user_override is not _UNSET_SENTINEL or (
            entry.env_value_force is not _UNSET_SENTINEL
        )
        if not overridden:
            continue
        value = getattr(inductor_config, name)
        default = entry.default
        try:
            same = bool(value == default)
        except Exception:
            same = value is default
        if not same:
            changed[name] = (value, default)
    return changed


def _search_settings(trials: _Trials) -> Culprit | None:
    import torch._inductor.config as inductor_config

    for name, (value, default) in changed_settings().items():
        with inductor_config.patch({name: default}):
            trial = trials.run(
                "your settings", f"{name} = {show_value(default)} (was {show_value(value)})"
            )
        if not trial.diverges:
            shown = (
                name
                if isinstance(value, bool | int | float | str)
                else f"{name} = {show_value(value)}"
            )
            return Culprit(
                kind="setting",
                name=shown,
                backend="inductor",
                detail=f"the program sets torch._inductor.config.{name} = {show_value(value)} "
                f"(default {show_value(default)}); with the default the outputs do not diverge",
                without=trial,
            )
    return None


def show_value(value: Any) -> str:
    if value is None or isinstance(value, bool | int | float | str):
        return repr(value)
    name = getattr(type(value), "__qualname__", type(value).__name__)
    return f"<{name}>"


# ------------------------------------------------------------------ stage 2: bisector
_KIND_OF_SUBSYSTEM = {
    "pre_grad_passes": "pass",
    "joint_graph_passes": "pass",
    "post_grad_passes": "pass",
    "decomposition": "decomposition",
    "lowerings": "lowering",
    "cudagraphs": "cudagraphs",
}


def _search_bisector(trials: _Trials) -> tuple[Culprit | None, str | None]:
    """Runs CompilerBisector with our oracle; returns the culprit it names and the first
    backend that diverges."""
    from torch._inductor.compiler_bisector import BinarySubsystem, CompilerBisector

    def passes() -> bool:
        backend = CompilerBisector.get_backend() or "inductor"
        subsystem = CompilerBisector.get_subsystem() or ""
        setting = backend + (f" / {subsystem}" if subsystem else "")
        state = CompilerBisector.get_run_state(backend, subsystem) if subsystem else None
        if state:
            setting += f" ({state.replace('_', ' ')})"
        return not trials.run("backends and subsystems", setting, backend=backend).diverges

    with _quiet():
        result = CompilerBisector.do_bisect(passes)
    if result is None:
        return None, None
    backend = result.backend
    if result.subsystem is None:
        return (
            Culprit(
                kind="backend",
                name=backend,
                backend=backend,
                detail=f"the first backend whose outputs diverge is {backend!r}; disabling "
                "none of its subsystems removed the divergence",
            ),
            backend,
        )
    from torch._inductor.compiler_bisector import BACKENDS

    subsystem = next((s for s in BACKENDS.get(backend, []) if s.name == result.subsystem), None)
    if isinstance(subsystem, BinarySubsystem):
        kind = "switch"
        detail = f"setting {result.subsystem} removes the divergence"
    else:
        kind = _KIND_OF_SUBSYSTEM.get(result.subsystem, result.subsystem)
        detail = f"{result.subsystem}: application #{result.bisect_number}" + (
            f" ({result.debug_info})" if result.debug_info else ""
        )
    name = result.debug_info or result.subsystem
    return Culprit(kind=kind, name=str(name), backend=backend, detail=detail), backend


# -------------------------------------------------------------------- stage 3: fusions
@dataclass(frozen=True)
class Fusion:
    """One fusion the scheduler made: the scheduler nodes of each side, and the FX nodes
    (post-grad graph) they were lowered from."""

    graph: str
    first: frozenset[str]
    second: frozenset[str]
    origins: tuple[str, ...] = field(default=(), compare=False)
    kernel: str | None = field(default=None, compare=False)

    def label(self) -> str:
        return f"{'+'.join(sorted(self.first))} with {'+'.join(sorted(self.second))}"

    def forbids(self, graph: str, a: frozenset[str], b: frozenset[str]) -> bool:
        if graph != self.graph:
            return False
        return bool((self.first & a and self.second & b) or (self.first & b and self.second & a))


def _names(node: Any) -> frozenset[str]:
    return frozenset(n.get_name() for n in node.get_nodes())


def _origins(node: Any) -> tuple[str, ...]:
    found = []
    for n in node.get_nodes():
        for origin in sorted(getattr(n.node, "origins", ()) or (), key=lambda o: o.name):
            found.append(f"{origin.name} ({origin.target})")
    return tuple(dict.fromkeys(found))


def _kernel_name(node1: Any, node2: Any) -> str | None:
    with contextlib.suppress(Exception):
        from torch._inductor.utils import get_fused_kernel_name

        return get_fused_kernel_name([*node1.get_nodes(), *node2.get_nodes()], "original_aten")
    return None


@contextlib.contextmanager
def _fusions_watched(seen: list[Fusion], forbidden: Sequence[Fusion]) -> Iterator[None]:
    """While the block runs, the scheduler refuses the ``forbidden`` fusions and appends
    every fusion it makes to ``seen``. A graph is told apart by its compile id and the
    order of graphs compiled within it."""
    from torch._inductor.scheduler import Scheduler

    can_fuse, fuse_two = Scheduler.can_fuse, Scheduler.fuse_two_nodes

    def graph_key() -> str:
        compile_id = torch._guards.CompileContext.current_compile_id()
        return str(compile_id)

    def watched_can_fuse(self: Any, node1: Any, node2: Any, *rest: Any, **kw: Any) -> bool:
        if forbidden:
            key, a, b = graph_key(), _names(node1), _names(node2)
            if any(f.forbids(key, a, b) for f in forbidden):
                return False
        return can_fuse(self, node1, node2, *rest, **kw)

    def watched_fuse_two(self: Any, node1: Any, node2: Any, *rest: Any, **kw: Any) -> Any:
        seen.append(
            Fusion(
                graph_key(),
                _names(node1),
                _names(node2),
                _origins(node1) + _origins(node2),
                _kernel_name(node1, node2),
            )
        )
        return fuse_two(self, node1, node2, *rest, **kw)

    Scheduler.can_fuse = watched_can_fuse  # type: ignore[method-assign]
    Scheduler.fuse_two_nodes = watched_fuse_two  # type: ignore[method-assign]
    try:
        yield
    finally:
        Scheduler.can_fuse = can_fuse  # type: ignore[method-assign]
        Scheduler.fuse_two_nodes = fuse_two  # type: ignore[method-assign]


def _search_fusions(trials: _Trials) -> Culprit | None:
    seen: list[Fusion] = []
    with _fusions_watched(seen, ()):
        first = trials.run("fusions", "all fusions (listing them)")
    fusions = list(dict.fromkeys(seen))
    if not first.diverges or not fusions:
        return None

    def without(subset: Sequence[Fusion], setting: str) -> Trial:
        with _fusions_watched([], subset):
            return trials.run("fusions", setting)

    none = without(fusions, f"all {len(fusions)} fusions forbidden")
    if none.diverges:
        return None  # the divergence is not a fusion's
    candidates = fusions
    while len(candidates) > 1:
        half = candidates[: len(candidates) // 2]
        trial = without(half, f"{len(half)} of {len(candidates)} candidate fusions forbidden")
        candidates = half if not trial.diverges else candidates[len(half) :]
    culprit = candidates[0]
    alone = without([culprit], f"only {culprit.label()} forbidden")
    if alone.diverges:
        return None  # not one fusion alone: several interact
    return Culprit(
        kind="fusion",
        name=culprit.label(),
        backend="inductor",
        detail=f"forbidding this one fusion (graph {culprit.graph}) removes the divergence",
        nodes=culprit.origins,
        kernel=culprit.kernel,
        with_=first,
        without=alone,
    )


# ---------------------------------------------------------------------------- search
def search(
    model: Callable[..., Any],
    calls: Sequence[Any],
    oracle: OutputOracle,
) -> CulpritSearch:
    """Runs the stages in order until one names a culprit (module docstring). Trials
    compile without CUDA graphs: the search looks for a compiler transformation, and a
    difference only CUDA graphs make is a lifecycle fault, not searched."""
    start = time.perf_counter()
    trials = _Trials(model, calls, oracle)
    try:
        baseline = trials.run("baseline", "inductor as the program configures it")
        if not baseline.diverges:
            return CulpritSearch(
                oracle.describe(),
                None,
                tuple(trials.done),
                time.perf_counter() - start,
                "the compiled outputs did not diverge when compiled again for the search "
                "(nondeterministic, or only under CUDA graphs): nothing to search",
            )
        culprit = _search_settings(trials)
        backend = "inductor"
        if culprit is None:
            culprit, backend = _search_bisector(trials)
            if culprit is not None and culprit.kind == "backend" and backend == "inductor":
                culprit = _search_fusions(trials) or culprit
            elif culprit is not None and culprit.kind == "switch":
                # A switch such as emulate_precision_casts says what kind of difference it
                # is; the fusion, when one alone causes it, says where.
                fusion = _search_fusions(trials)
                if fusion is not None:
                    culprit = dataclasses.replace(
                        fusion, detail=f"{fusion.detail}; setting {culprit.name} removes it too"
                    )
            elif culprit is None:
                culprit = _search_fusions(trials)
        if culprit is not None and culprit.with_ is None:
            culprit = dataclasses.replace(culprit, with_=baseline)
        if culprit is not None and culprit.without is None:
            without = next(
                (t for t in reversed(trials.done) if not t.diverges and t.stage != "baseline"),
                None,
            )
            culprit = dataclasses.replace(culprit, without=without)
    finally:
        oracle.close()
    seconds = time.perf_counter() - start
    if culprit is None:
        summary = (
            f"no stage removed the divergence ({len(trials.done)} trials, {seconds:.1f} s): "
            "it is not one setting, pass, switch, lowering or fusion alone"
        )
    else:
        summary = (
            f"culprit: {culprit.kind} {culprit.name} ({len(trials.done)} trials, {seconds:.1f} s)"
        )
    return CulpritSearch(oracle.describe(), culprit, tuple(trials.done), seconds, summary)


def skipped(reason: str) -> CulpritSearch:
    """A search not run, and why."""
    return CulpritSearch("", None, (), 0.0, f"culprit search not run: {reason}", skipped=reason)


__all__ = [
    "Culprit",
    "CulpritSearch",
    "OutputOracle",
    "Trial",
    "changed_settings",
    "search",
    "show_value",
    "skipped",
]
