"""Differential runs: the user's eager model against the compiled model, at the same
sites, and the first site where they diverge.

Variants, each a run of one job root (``run_dir``), every batch one point (``call<i>``):

- ``compiled``: the model compiled with the probe config, CUDA graphs off;
- ``graphs`` (on CUDA): the same under CUDA Graph Trees;
- ``eager``: the model as it runs without torch.compile. Its model outputs come from a
  plain ``model(*batch)``; the values at the compiled sites come from the model's Dynamo
  graphs run eagerly, taken where eager computes the same value (site provenance,
  ``fx_passes/provenance.py``). No graph pass, decomposition or code generation touches
  this side, so a divergence any of them introduces is seen;
- ``float64``: the eager model again, in float64: the ground truth the float64 rule
  judges compiled errors against (``docs/why.md``).

Comparisons: eager vs compiled over the model outputs and every aligned site (Inductor's
numerics, graph passes, decompositions), compiled vs graphs over everything, bit for bit
(a difference there is the graph's lifecycle: stale or overwritten static buffers, inputs
changed outside the graph), and the float64 judgement of each aligned site.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

import torch_cudagraph_debug.compile._progress as _progress
from torch_cudagraph_debug import _native
from torch_cudagraph_debug.compile.backend import _SESSION_OVERRIDE, no_compile_caches
from torch_cudagraph_debug.compile.eager_reference import (
    EagerPlan,
    as_float64,
    eager_backend,
    output_site,
    output_tensors,
    to_float64,
)
from torch_cudagraph_debug.compile.session import ProbeSession, load_config
from torch_cudagraph_debug.tensor_debug.run import TensorRun

# The variants' run names in the job root, in the order they run.
VARIANTS = ("compiled", "graphs", "eager", "float64")

_SEVERITY = {"match": 0, "inconclusive": 1, "mismatch": 2}


@dataclass(frozen=True)
class Call:
    """One batch as the model is called with it."""

    args: tuple[Any, ...]
    kwargs: dict[str, Any] = field(default_factory=dict)

    def __call__(self, model: Callable[..., Any]) -> Any:
        return model(*self.args, **self.kwargs)

    def map(self, fn: Callable[[Any], Any]) -> Call:
        args, kwargs = torch.utils._pytree.tree_map(fn, (self.args, self.kwargs))
        return Call(tuple(args), dict(kwargs))


def as_call(batch: Any) -> Call:
    """A batch as the model's arguments: a tuple or list is the positional arguments, a
    dict the keyword arguments, anything else (one tensor) the one argument."""
    if isinstance(batch, Call):
        return batch
    if isinstance(batch, tuple | list):
        return Call(tuple(batch))
    if isinstance(batch, dict):
        return Call((), dict(batch))
    return Call((batch,))


def _on_cuda(calls: Sequence[Call]) -> bool:
    leaves = torch.utils._pytree.tree_leaves([(c.args, c.kwargs) for c in calls])
    return any(isinstance(t, torch.Tensor) and t.is_cuda for t in leaves)


@dataclass(frozen=True)
class Verdict:
    """One comparison's answer, and what a divergence there means."""

    comparison: str
    scope: str
    status: str
    detail: str
    meaning: str

    def to_dict(self) -> dict[str, str]:
        return dict(vars(self))


@dataclass(frozen=True)
class DifferentialResult:
    """The variants' runs, their comparisons and the verdict each comparison gives."""

    reference: TensorRun
    compiled: TensorRun
    graphs: TensorRun | None
    float64: TensorRun | None
    comparison: Any
    output_comparison: Any
    lifecycle: Any | None
    accuracy: tuple[Any, ...] | None
    alignment: dict[str, str | None]
    not_run: dict[str, str]

    @property
    def eager(self) -> TensorRun:
        """The eager run (``reference`` under its own name)."""
        return self.reference

    @property
    def status(self) -> str:
        """``mismatch`` if eager and compiled diverge beyond the tolerance or compiled and
        graphs differ; ``inconclusive`` if nothing could be compared; else ``match``."""
        statuses = [self.comparison.status]
        if self.lifecycle is not None:
            statuses.append(self.lifecycle.status)
        return max(statuses, key=_SEVERITY.__getitem__)

    @property
    def first_divergence(self) -> Any:
        """The first diverging site between eager and compiled (model outputs come last in
        execution order), a ``ComparisonIssue``; or the first lifecycle divergence; or
        None."""
        first = self.comparison.first_issue
        if first is None and self.lifecycle is not None:
            first = self.lifecycle.first_issue
        return first

    @property
    def aligned_sites(self) -> list[str]:
        return [s for s, reason in self.alignment.items() if reason is None]

    @property
    def diverging_sites(self) -> list[Any]:
        """Sites (of each point) the float64 rule finds diverging, in execution order."""
        return [a for a in self.accuracy or () if a.verdict == "diverges"]

    @property
    def verdicts(self) -> list[Verdict]:
        out = [
            _verdict(
                "eager vs compiled",
                f"model outputs ({len(self.output_names)})",
                self.output_comparison,
                "the compiled model computes different results from the eager model",
            ),
            _verdict(
                "eager vs compiled",
                f"sites aligned by provenance ({len(self.aligned_sites)} of {len(self.alignment)})",
                self.comparison,
                "Inductor's numerics, a graph pass or a decomposition changed the value "
                "(the first diverging site is where to look)",
                restrict=lambda name: not _is_output(name),
            ),
        ]
        if self.lifecycle is not None:
            out.append(
                _verdict(
                    "compiled vs graphs",
                    "all sites and outputs, bit for bit",
                    self.lifecycle,
                    "a CUDA graph lifecycle fault (stale or overwritten static buffers, an "
                    "input changed outside the graph), not numerics",
                )
            )
        else:
            out.append(
                Verdict(
                    "compiled vs graphs",
                    "all sites and outputs, bit for bit",
                    "not run",
                    self.not_run.get("graphs", ""),
                    "",
                )
            )
        out.append(self._float64_verdict())
        return out

    @property
    def output_names(self) -> list[str]:
        return sorted(
            {o.name for o in self.output_comparison.observations},
            key=lambda n: int(n.split("/")[1]),
        )

    def _float64_verdict(self) -> Verdict:
        scope = "aligned sites and outputs, against the eager model in float64"
        meaning = "the compiled error exceeds eager's own rounding error by the rule's factor"
        if self.accuracy is None:
            return Verdict("float64 rule", scope, "not run", self.not_run.get("float64", ""), "")
        judged = [a for a in self.accuracy if a.verdict != "unjudged"]
        diverging = self.diverging_sites
        if diverging:
            first = diverging[0]
            detail = (
                f"{len(diverging)} of {len(judged)} diverge; first {first.name} at "
                f"'{first.point}' (compiled error {first.compiled_rmse:.3g}, eager "
                f"{first.eager_rmse:.3g})"
                if first.compiled_rmse is not None and first.eager_rmse is not None
                else f"{len(diverging)} of {len(judged)} diverge; first {first.name} at "
                f"'{first.point}': {first.reason}"
            )
            return Verdict("float64 rule", scope, "diverges", detail, meaning)
        if not judged:
            return Verdict("float64 rule", scope, "inconclusive", "nothing judged", meaning)
        rounding = sum(a.verdict == "rounding" for a in judged)
        detail = f"{len(judged)} judged: {len(judged) - rounding} close, {rounding} rounding"
        return Verdict("float64 rule", scope, "rounding" if rounding else "close", detail, "")

    def report(self) -> Any:
        """The verdicts as a native report document (text or HTML)."""
        doc = _native.ReportDocument("Differential run: eager vs compiled")
        first = self.first_divergence
        facts = [("status", self.status)]
        if first is not None:
            facts.append(("first divergence", first.description))
        facts.append(("runs", ", ".join(self.run_names)))
        doc.facts(facts)
        doc.heading("Verdicts (each from the comparison it names)")
        doc.table(
            ["comparison", "scope", "status", "detail"],
            [[v.comparison, v.scope, v.status, v.detail] for v in self.verdicts],
        )
        unaligned = {s: r for s, r in self.alignment.items() if r is not None}
        if unaligned:
            doc.heading("Sites without an eager counterpart (compared only compiled vs graphs)")
            doc.table(["site", "why"], [[s, r] for s, r in unaligned.items()], limit=20)
        return doc

    @property
    def run_names(self) -> list[str]:
        return [
            name
            for name, run in (
                ("eager", self.reference),
                ("compiled", self.compiled),
                ("graphs", self.graphs),
                ("float64", self.float64),
            )
            if run is not None
        ]

    def to_text(self, include_unchanged: bool = True, limit: int | None = None) -> str:
        verdicts = self.report().to_text()
        details = self.comparison.to_text(include_unchanged=include_unchanged, limit=limit)
        return f"{verdicts}\neager vs compiled, site by site:\n{details}"

    def to_html(self) -> str:
        return self.report().to_html()

    def write(self, directory: str | os.PathLike[str], overwrite: bool = False) -> dict[str, Path]:
        """Writes ``differential.txt``, ``.html`` and ``.json`` into ``directory``, and the
        eager vs compiled comparison's own report files into ``directory/comparison``.
        Returns the paths keyed as every ``write()`` keys them (``text``, ``html``,
        ``json``), and ``comparison``, the comparison's directory."""
        paths = write_report(self, directory, "differential", overwrite)
        paths["comparison"] = Path(directory) / "comparison"
        self.comparison.write(paths["comparison"], overwrite=overwrite)
        return paths

    def to_dict(self) -> dict[str, Any]:
        first = self.first_divergence
        return {
            "status": self.status,
            "first_divergence": None if first is None else first.description,
            "run_dir": self.reference.path,
            "runs": self.run_names,
            "verdicts": [v.to_dict() for v in self.verdicts],
            "alignment": self.alignment,
            "accuracy": None if self.accuracy is None else [a.to_dict() for a in self.accuracy],
            "comparison": self.comparison.to_dict(),
            "lifecycle": None if self.lifecycle is None else self.lifecycle.to_dict(),
        }


def write_report(
    result: Any, directory: str | os.PathLike[str], stem: str, overwrite: bool
) -> dict[str, Path]:
    """Writes ``result``'s report as ``<stem>.txt``, ``.html`` and ``.json`` into
    ``directory``, each file replaced whole (written aside, then renamed). Returns their
    paths keyed by format (``text``, ``html``, ``json``), as every ``write()`` does."""
    import json

    from torch_cudagraph_debug.errors import InvalidInputError

    directory = os.fspath(directory)
    os.makedirs(directory, exist_ok=True)
    formats = {"text": "txt", "html": "html", "json": "json"}
    paths = {key: Path(directory) / f"{stem}.{ext}" for key, ext in formats.items()}
    existing = [p for p in paths.values() if p.exists()]
    if existing and not overwrite:
        raise InvalidInputError(
            f"{existing[0]} exists; pass overwrite=True (--overwrite) to replace it"
        )
    doc = result.report()
    for key, text in (
        ("text", doc.to_text()),
        ("html", doc.to_html()),
        ("json", json.dumps(result.to_dict(), indent=2, default=str)),
    ):
        tmp = paths[key].with_name(paths[key].name + ".tmp")
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, paths[key])
    return paths


def _verdict(
    comparison: str,
    scope: str,
    result: Any,
    meaning: str,
    restrict: Callable[[str], bool] | None = None,
) -> Verdict:
    observations = [o for o in result.observations if restrict is None or restrict(o.name)]
    if not observations:
        return Verdict(comparison, scope, "inconclusive", "nothing to compare", meaning)
    worst = max(observations, key=lambda o: _SEVERITY[o.status])
    status = worst.status
    if status == "match":
        detail = f"{len(observations)} compared, all within tolerance"
    else:
        first = next(o for o in observations if o.status != "match")
        error = f", max abs error {first.max_abs_error:.3g}" if first.max_abs_error else ""
        detail = f"first: {first.name} ({first.status}{error}; {first.reason})"
    return Verdict(comparison, scope, status, detail, meaning if status != "match" else "")


# ---------------------------------------------------------------------------- variants
class _ModelState:
    """A module's parameters and buffers (``buffers_only``: its buffers) as they were when
    taken, put back by ``restore()``: a model that updates its state when called
    (running statistics, a cache, a step counter) must start every variant, and the
    eager side's second run of a call, from the same state, or they differ by how often
    it was called before."""

    def __init__(self, model: Any, buffers_only: bool = False):
        self.model, self.buffers_only = model, buffers_only
        self.tensors = {k: v.detach().clone() for k, v in self._named()}

    def _named(self) -> Iterable[tuple[str, torch.Tensor]]:
        if not isinstance(self.model, torch.nn.Module):
            return ()
        if self.buffers_only:
            return self.model.named_buffers()
        return self.model.state_dict(keep_vars=True).items()

    def restore(self) -> None:
        if not self.tensors:
            return
        with torch.no_grad():
            for key, tensor in self._named():
                saved = self.tensors.get(key)
                if saved is not None and saved.shape == tensor.shape:
                    tensor.copy_(saved)


def _is_output(name: str) -> bool:
    return name.startswith("output/")


def _record_outputs(session: ProbeSession, outputs: Any) -> None:
    for i, value in enumerate(output_tensors(outputs)):
        session.record_value(output_site(i), value)


def _run_compiled(
    name: str,
    model: Callable[..., Any],
    calls: Sequence[Call],
    config: Any,
    run_dir: str,
    options: dict[str, Any],
    overwrite: bool | None,
) -> tuple[TensorRun, ProbeSession]:
    from torch_cudagraph_debug.compile.backend import tcgd_backend

    session = ProbeSession(config, run_dir=run_dir, name=name, payload="full", overwrite=overwrite)
    backend = functools.partial(tcgd_backend, options={"probes": "<differential>", **options})
    torch._dynamo.reset()
    token = _SESSION_OVERRIDE.set(session)
    try:
        # Caches off: the probe pass must run (its decisions say where eager computes
        # each site), and the graphs must be compiled for this variant's options.
        with no_compile_caches(), torch.no_grad():
            compiled = torch.compile(model, backend=backend)
            for i, call in enumerate(calls):
                _progress.report(f"{name}: call {i + 1}/{len(calls)}")
                with session.record_point(f"call{i}"):
                    _record_outputs(session, call(compiled))
    finally:
        _SESSION_OVERRIDE.reset(token)
        torch._dynamo.reset()
    return session.finish(), session


def _run_eager(
    name: str,
    model: Callable[..., Any],
    calls: Sequence[Call],
    config: Any,
    run_dir: str,
    plan: EagerPlan,
    overwrite: bool | None,
) -> TensorRun:
    session = ProbeSession(config, run_dir=run_dir, name=name, payload="full", overwrite=overwrite)
    torch._dynamo.reset()
    try:
        with torch.no_grad():
            traced = torch.compile(model, backend=eager_backend(plan, session.record_value))
            for i, call in enumerate(calls):
                _progress.report(f"{name}: call {i + 1}/{len(calls)}")
                with session.record_point(f"call{i}"):
                    buffers = _ModelState(model, buffers_only=True)
                    call(traced)  # the sites, in execution order
                    buffers.restore()  # the model's state as the call found it
                    _record_outputs(session, call(model))  # then the plain model's outputs
    finally:
        torch._dynamo.reset()
    return session.finish()


def differential(
    model: Callable[..., Any],
    batches: Iterable[Any],
    *,
    probes: Any,
    run_dir: str | os.PathLike[str],
    mode: str | None = None,
    options: dict[str, Any] | None = None,
    comparison_options: Any = None,
    extra_inductor_options: dict[str, Any] | None = None,
    overwrite: bool | None = None,
    progress: Callable[[str], None] | None = None,
    graph_trees: bool | None = None,
    float64: bool = True,
    float64_tol: float | None = None,
) -> DifferentialResult:
    """Runs every batch through the variants (module docstring) into the job root
    ``run_dir`` and compares them. Inference only (``torch.no_grad()``).

    A batch is a tuple (or list) of positional arguments, a dict of keyword arguments, or
    one tensor. ``mode`` is torch.compile's mode for the compiled variants (the
    ``compiled`` one always without CUDA graphs). ``graph_trees``: run the ``graphs``
    variant (None: when the batches are on a CUDA device). ``float64``: run the float64
    variant and judge each site with the float64 rule (tolerance ``float64_tol``, default
    1e-4). ``overwrite=True`` replaces the runs of an earlier differential run in
    ``run_dir`` (None: the config's ``[run] overwrite``). ``progress`` receives a line per
    stage."""
    from torch_cudagraph_debug.tensor_debug.compare import compare_runs

    config = load_config(probes)
    root = os.fspath(run_dir)
    calls = [as_call(b) for b in batches]
    if graph_trees is None:
        graph_trees = _on_cuda(calls)
    not_run: dict[str, str] = {}
    base = {**(options or {}), **(extra_inductor_options or {})}
    state = _ModelState(model)
    with _progress.reporting_to(progress):
        compiled_run, compiled_session = _run_compiled(
            "compiled",
            model,
            calls,
            config,
            root,
            {**base, **({"mode": mode} if mode else {}), "triton.cudagraphs": False},
            overwrite,
        )
        graphs_run = None
        if graph_trees:
            state.restore()
            graph_mode = mode if mode not in (None, "default") else "reduce-overhead"
            graphs_run, _ = _run_compiled(
                "graphs",
                model,
                calls,
                config,
                root,
                {**base, "mode": graph_mode, "triton.cudagraphs": True},
                overwrite,
            )
        else:
            not_run["graphs"] = "the batches are not on a CUDA device: no CUDA graphs to run"
        plan = EagerPlan.from_decisions(compiled_session.decisions)
        state.restore()
        eager_run = _run_eager("eager", model, calls, config, root, plan, overwrite)
        float64_run = None
        if float64:
            state.restore()
            double = to_float64(model)
            double_calls = [c.map(as_float64) for c in calls]
            float64_run = _run_eager("float64", double, double_calls, config, root, plan, overwrite)
        else:
            not_run["float64"] = "float64=False"
        state.restore()

        _progress.report("comparing the variants")
        aligned = [s for s in plan.aligned if s not in plan.unaligned]
        outputs = sorted(
            {o.name for p in eager_run.points for o in p.observations if _is_output(o.name)}
        )
        comparison = compare_runs(
            eager_run, compiled_run, options=comparison_options, names=[*aligned, *outputs]
        )
        output_comparison = compare_runs(
            eager_run, compiled_run, options=comparison_options, names=outputs
        )
        lifecycle = None
        if graphs_run is not None:
            exact = _native.TensorComparisonOptions(mode="exact", equal_nan=True)
            lifecycle = compare_runs(compiled_run, graphs_run, options=exact)
        accuracy = None
        if float64_run is not None:
            accuracy = tuple(
                _native.judge_against_float64(
                    float64_run.address,
                    eager_run.address,
                    compiled_run.address,
                    names=[*aligned, *outputs],
                    tol=float64_tol,
                )
            )
    alignment: dict[str, str | None] = {site: None for site in aligned}
    alignment.update(plan.unaligned)
    return DifferentialResult(
        reference=eager_run,
        compiled=compiled_run,
        graphs=graphs_run,
        float64=float64_run,
        comparison=comparison,
        output_comparison=output_comparison,
        lifecycle=lifecycle,
        accuracy=accuracy,
        alignment=alignment,
        not_run=not_run,
    )
