"""``why()``: the differential run, then, when the compiled outputs diverge, the culprit
search; with the CUDA graph coverage of the compiled functions. One report (text, JSON,
HTML) that says which comparison each verdict comes from (``docs/why.md``)."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch_cudagraph_debug.compile._progress as _progress
from torch_cudagraph_debug.compile import culprit as _culprit
from torch_cudagraph_debug.compile.differential import (
    DifferentialResult,
    as_call,
    differential,
    write_report,
)
from torch_cudagraph_debug.compile.session import load_config

# The sites ``why()`` probes when the caller names no config: the values where compiled
# numerics differ most from eager (matrix products, convolutions, attention) and the
# normalizations that often turn a small difference into a large one.
DEFAULT_PROBES: dict[str, Any] = {
    "version": 1,
    "select": [
        {
            "ops": [
                "aten.mm",
                "aten.addmm",
                "aten.bmm",
                "aten.baddbmm",
                "aten.convolution",
                "aten._scaled_dot_product_flash_attention",
                "aten._scaled_dot_product_efficient_attention",
                "aten._scaled_dot_product_cudnn_attention",
                "aten.native_layer_norm",
            ]
        }
    ],
}


@dataclass(frozen=True)
class WhyReport:
    """What ``why()`` found: the differential (verdicts per comparison, float64 judgement,
    first divergence), the culprit search and the CUDA graph coverage."""

    differential: DifferentialResult
    search: _culprit.CulpritSearch
    coverage: Any | None
    settings: dict[str, tuple[Any, Any]]

    @property
    def status(self) -> str:
        """The differential's status (``match``, ``mismatch``, ``inconclusive``)."""
        return self.differential.status

    @property
    def culprit(self) -> _culprit.Culprit | None:
        return self.search.culprit

    @property
    def conclusion(self) -> str:
        d = self.differential
        outputs = d.output_comparison.status
        diverging_outputs = [a for a in d.diverging_sites if a.name.startswith("output/")]
        lifecycle = d.lifecycle is not None and d.lifecycle.status == "mismatch"
        parts = []
        if outputs == "match" and not lifecycle and not d.diverging_sites:
            parts.append(
                "nothing diverges: the compiled model's outputs agree with the eager model's"
                + (" and every aligned site is within rounding" if d.accuracy else "")
            )
        elif outputs == "mismatch" and d.accuracy is not None and not diverging_outputs:
            parts.append(
                "the compiled outputs differ from eager, but by no more than eager's own "
                "rounding error against float64: rounding, not a bug"
            )
        elif outputs == "mismatch":
            parts.append("the compiled outputs diverge from the eager model's")
        if lifecycle:
            parts.append(
                "the CUDA graph replays differ from the same compiled code run without "
                "CUDA graphs: a graph lifecycle fault"
            )
        if self.culprit is not None:
            parts.append(f"culprit: {self.culprit.kind} {self.culprit.name}")
        return "; ".join(parts) or f"status {self.status}"

    def report(self) -> Any:
        doc = self.differential.report()
        doc.heading("Conclusion")
        doc.paragraph(self.conclusion)
        self._growth(doc)
        self.search.add_to(doc)
        if self.settings:
            doc.heading("Inductor settings the program changed")
            doc.table(
                ["setting", "value", "default"],
                [
                    [k, _culprit.show_value(v), _culprit.show_value(d)]
                    for k, (v, d) in self.settings.items()
                ],
            )
        if self.coverage is not None:
            self.coverage.add_to(doc)
        return doc

    def _growth(self, doc: Any) -> None:
        """The error of eager and compiled against float64, site by site in execution
        order, for the first point: where the error grows."""
        accuracy = self.differential.accuracy
        if not accuracy:
            return
        first_point = accuracy[0].point
        rows = [a for a in accuracy if a.point == first_point]
        doc.heading(f"Error against float64, site by site (point '{first_point}')")
        doc.table(
            ["site", "dtype", "eager error", "compiled error", "ratio", "verdict"],
            [
                [a.name, a.dtype, a.eager_rmse, a.compiled_rmse, a.error_ratio, a.verdict]
                for a in rows
            ],
            limit=60,
        )
        doc.line_chart(
            "error against float64 (RMSE), by site",
            "RMSE",
            [a.name for a in rows],
            [
                ("eager", [a.eager_rmse for a in rows]),
                ("compiled", [a.compiled_rmse for a in rows]),
            ],
        )

    def to_text(self) -> str:
        return self.report().to_text()

    def to_html(self) -> str:
        return self.report().to_html()

    def to_dict(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "conclusion": self.conclusion,
            "differential": self.differential.to_dict(),
            "search": self.search.to_dict(),
            "settings": {
                k: [_culprit.show_value(v), _culprit.show_value(d)]
                for k, (v, d) in self.settings.items()
            },
            "coverage": None if self.coverage is None else self.coverage.to_dict(),
        }

    def write(self, directory: str | os.PathLike[str], overwrite: bool = False) -> dict[str, Path]:
        """Writes ``why.txt``, ``why.html`` and ``why.json`` into ``directory``; returns
        their paths keyed ``text``, ``html`` and ``json``."""
        return write_report(self, directory, "why", overwrite)


def why(
    model: Callable[..., Any],
    batches: Iterable[Any],
    *,
    run_dir: str | os.PathLike[str],
    probes: Any = None,
    mode: str | None = None,
    comparison_options: Any = None,
    search: bool | str = "auto",
    coverage: bool = True,
    float64: bool = True,
    float64_tol: float | None = None,
    overwrite: bool | None = None,
    progress: Callable[[str], None] | None = None,
) -> WhyReport:
    """Runs the differential (eager, compiled, CUDA graphs on a GPU, float64) over
    ``batches`` into the job root ``run_dir``; searches the culprit; reports CUDA graph
    coverage. ``probes``: a probe config (path, dict or ``ProbeConfig``); None selects
    ``DEFAULT_PROBES``. ``search``: ``"auto"`` (or True) searches when the outputs diverge
    by the float64 rule (or, without a float64 run, differ beyond the tolerance);
    ``"always"`` also when they differ only within rounding; ``"never"`` (or False) not."""
    from torch_cudagraph_debug.errors import InvalidInputError

    policy = {True: "auto", False: "never"}.get(search, search)  # type: ignore[call-overload]
    if policy not in ("auto", "always", "never"):
        raise InvalidInputError(
            f"search must be 'auto', 'always', 'never' or a bool, got {search!r}"
        )
    calls = [as_call(b) for b in batches]
    settings = _culprit.changed_settings()
    result = differential(
        model,
        calls,
        probes=DEFAULT_PROBES if probes is None else probes,
        run_dir=run_dir,
        mode=mode,
        comparison_options=comparison_options,
        overwrite=overwrite,
        progress=progress,
        float64=float64,
        float64_tol=float64_tol,
    )
    with _progress.reporting_to(progress):
        found = (
            _search(result, model, calls, probes, comparison_options, float64_tol, mode, policy)
            if policy != "never"
            else _culprit.skipped("not asked for (search='never', --search never)")
        )
        cover = None
        if coverage:
            cover = _coverage(result, model, calls, probes, mode)
    return WhyReport(result, found, cover, settings)


def _search(
    result: DifferentialResult,
    model: Any,
    calls: list[Any],
    probes: Any,
    options: Any,
    tol: float | None,
    mode: str | None,
    policy: str,
) -> _culprit.CulpritSearch:
    outputs = result.output_names
    diverging = [a for a in result.diverging_sites if a.name.startswith("output/")]
    if diverging:
        kind = "float64"
    elif result.output_comparison.status == "mismatch" and (
        result.float64 is None or policy == "always"
    ):
        kind = "tolerance"
    elif result.output_comparison.status == "mismatch":
        return _culprit.skipped(
            "the outputs differ from eager only within rounding (float64 rule); "
            "search='always' (--search always) looks for what makes them differ anyway"
        )
    elif result.lifecycle is not None and result.lifecycle.status == "mismatch":
        return _culprit.skipped(
            "only the CUDA graph replays differ (a lifecycle fault, not a compiler "
            "transformation): see the compiled vs graphs verdict"
        )
    else:
        return _culprit.skipped("the compiled model's outputs agree with the eager model's")
    config = load_config(DEFAULT_PROBES if probes is None else probes)
    oracle = _culprit.OutputOracle(
        kind, result.reference, result.float64, outputs, config, options=options, tol=tol
    )
    return _culprit.search(model, calls, oracle)


def _coverage(
    result: DifferentialResult, model: Any, calls: list[Any], probes: Any, mode: str | None
) -> Any:
    from torch_cudagraph_debug.compile import coverage

    chosen = DEFAULT_PROBES if probes is None else probes
    return coverage.for_differential(result, model, calls, chosen, mode)


__all__ = ["DEFAULT_PROBES", "WhyReport", "why"]
