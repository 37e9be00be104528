"""Summary probes on Inductor's CPU backend: per-call cost of a compiled MLP with a
summary site at every linear output, against the same MLP compiled without probes.

    python benches/compiled_cpu_summary.py [--quick] [--batch 256] [--width 1024] [--split]

Model: 8 ``nn.Linear(width, width)`` layers with GELU between them, float32, inference
under ``torch.no_grad()``, on CPU with ``torch.set_num_threads(--threads)`` (2). Sites: the
8 linear outputs (``aten.addmm``), ``payload="summary"``; the program checks the count in
the session's decisions. Rows, each timed as ``--calls`` calls back to back, minimum over
``--rounds`` rounds (median in brackets):

- ``compiled``: ``torch.compile(mlp)``, no probes (the baseline);
- ``tcgd summary``: ``torch.compile(mlp, backend="tcgd", options={"payload": "summary",
  ...})``; its points are made durable by a separate ``session.flush()`` after the timed
  rounds, printed beside it and spread over those calls in "incl. flush";
- ``eager`` and ``eager+hooks`` (forward hooks on every linear layer taking
  min/max/mean/std/NaN count with ``.tolist()``, kept in a list), for reference.

The rounds of the rows are interleaved (one round of each row in turn), so that load from
other processes on a shared machine falls on every row alike. The program also checks that
the probed model's output equals the unprobed one bitwise. Target: tcgd summary <= 1.25x
compiled.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import torch._functorch.config as functorch_config
import torch._inductor.config as inductor_config
from torch import nn

LAYERS = 8
TARGET = 1.25


class BenchError(RuntimeError):
    """The benchmark measured something other than what it claims (a wrong site count)."""


def make_mlp(width: int) -> nn.Sequential:
    torch.manual_seed(0)
    layers: list[nn.Module] = []
    for _ in range(LAYERS):
        layers += [nn.Linear(width, width), nn.GELU()]
    return nn.Sequential(*layers).eval()


def time_round(fn: Callable[[], torch.Tensor], calls: int) -> float:
    """Microseconds per call of ``calls`` calls back to back."""
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - start) / calls * 1e6


def summary_hook(kept: list[list[float]]) -> Callable[..., None]:
    """A forward hook taking a host summary of the output the way users do it today."""

    def hook(_module: nn.Module, _args: Any, output: torch.Tensor) -> None:
        value = output.detach()
        stats = torch.stack(
            [value.min(), value.max(), value.mean(), value.std(), value.isnan().sum().float()]
        )
        kept.append(stats.tolist())

    return hook


def time_inside_session() -> dict[str, float]:
    """Wraps the session's probe-op body and point commit with timers (``--split``):
    seconds spent in each, added up until the caller resets them."""
    from torch_cudagraph_debug.compile.session import ProbeSession

    spent = {"body": 0.0, "commit": 0.0}

    def timed(key: str, method: Callable[..., Any]) -> Callable[..., Any]:
        def run(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return method(*args, **kwargs)
            finally:
                spent[key] += time.perf_counter() - started

        return run

    ProbeSession._record_group = timed("body", ProbeSession._record_group)  # type: ignore[method-assign]
    ProbeSession._commit = timed("commit", ProbeSession._commit)  # type: ignore[method-assign]
    return spent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer calls and rounds")
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--width", type=int, default=1024)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--calls", type=int, default=None, help="calls per round (10)")
    parser.add_argument("--rounds", type=int, default=None, help="rounds per row (10)")
    parser.add_argument("--run-root", type=Path, default=None, help="keep the run here")
    parser.add_argument(
        "--split",
        action="store_true",
        help="also time, inside the probed calls, the probe op's body and the point commit",
    )
    args = parser.parse_args()

    import torch_cudagraph_debug.compile as tcgd_compile

    torch.set_num_threads(args.threads)
    # Inductor's pool of compile workers starts after the first compilation and keeps the
    # cores busy for seconds; on a 2-core machine that slows the first rounds several
    # times over. Compiling in this process leaves the cores to the model.
    inductor_config.compile_threads = 1
    # Compile from scratch, so that the probe pass runs and the session lists its sites.
    inductor_config.fx_graph_cache = False
    if hasattr(functorch_config, "enable_autograd_cache"):
        functorch_config.enable_autograd_cache = False
    calls = args.calls or (5 if args.quick else 10)
    rounds = args.rounds or (3 if args.quick else 10)
    warmup = 3

    mlp = make_mlp(args.width)
    x = torch.randn(args.batch, args.width)
    print(f"torch {torch.__version__}; CPU, {torch.get_num_threads()} threads; float32")
    print(
        f"model: {LAYERS} x Linear({args.width}, {args.width}) + GELU, batch {args.batch}; "
        f"sites: {LAYERS} linear outputs, payload='summary'"
    )
    print(
        f"timing: {calls} calls back to back per round, minimum of {rounds} interleaved rounds "
        f"after {warmup} warm-up calls (median in brackets), us per call\n"
    )

    inside = time_inside_session() if args.split else None

    with contextlib.ExitStack() as stack, torch.no_grad():
        if args.run_root is None:
            root = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="tcgd-cpu-")))
        else:
            root = args.run_root
        compiled = torch.compile(copy.deepcopy(mlp))
        started = time.perf_counter()
        compiled(x)
        compile_compiled_s = time.perf_counter() - started

        options = {
            "probes": {
                "version": 1,
                "select": [{"ops": ["aten.mm", "aten.addmm"], "graphs": ["inference"]}],
            },
            "run_dir": str(root / "summary"),
            "payload": "summary",
            "overwrite": True,
        }
        probed = torch.compile(copy.deepcopy(mlp), backend="tcgd", options=options)
        started = time.perf_counter()
        probed(x)
        compile_probed_s = time.perf_counter() - started
        session = tcgd_compile.session_of(probed)
        sites = sum(len(g.selected) for g in session.decisions)
        print(
            f"compile: {compile_compiled_s:.1f} s (no probes), {compile_probed_s:.1f} s (tcgd); "
            f"sites selected: {sites} in {len(session.decisions)} graph(s) (expected {LAYERS})"
        )
        if sites != LAYERS:
            raise BenchError(f"{sites} sites selected, expected {LAYERS}")

        hooked = copy.deepcopy(mlp)
        kept: list[list[float]] = []
        for module in hooked:
            if isinstance(module, nn.Linear):
                module.register_forward_hook(summary_hook(kept))

        rows: dict[str, Callable[[], torch.Tensor]] = {
            "compiled": lambda: compiled(x),
            "tcgd summary": lambda: probed(x),
            "eager": lambda: mlp(x),
            "eager+hooks": lambda: hooked(x),
        }
        for fn in rows.values():
            for _ in range(warmup):
                fn()
        # The warm-up's points are committed here, so the flush timed below holds the
        # timed rounds' points alone.
        session.flush()
        times: dict[str, list[float]] = {label: [] for label in rows}
        split: list[tuple[float, float]] = []
        for _ in range(rounds):
            for label, fn in rows.items():
                if inside is not None:
                    inside.update(body=0.0, commit=0.0)
                times[label].append(time_round(fn, calls))
                if inside is not None and label == "tcgd summary":
                    split.append((inside["body"], inside["commit"]))
        started = time.perf_counter()
        session.flush()
        flush_s = time.perf_counter() - started
        equal = torch.equal(probed(x), compiled(x))
        run = session.finish()
        last = run[len(run) - 1]
        print(
            f"tcgd: {len(run)} points, {len(last.observations)} observations in the last; "
            f"flush after the {calls * rounds} timed calls: {flush_s * 1e3:.1f} ms; "
            f"output equal to the unprobed compiled model: {equal}; "
            f"eager hooks kept {len(kept)} summaries\n"
        )

    base = min(times["compiled"])
    print(
        "| what runs | us per call [median] | x compiled | flush ms | us per call incl. flush "
        "| x compiled incl. flush |"
    )
    print("| --- | --- | --- | --- | --- | --- |")
    incl = min(times["tcgd summary"]) + flush_s * 1e6 / (calls * rounds)
    for label, per_call in times.items():
        best = min(per_call)
        cells = [f"{best:.1f} [{statistics.median(per_call):.1f}]", f"{best / base:.2f}"]
        if label == "tcgd summary":
            cells += [f"{flush_s * 1e3:.1f}", f"{incl:.1f}", f"{incl / base:.2f}"]
        else:
            cells += ["", "", ""]
        print(f"| {label} | " + " | ".join(cells) + " |")
    if split:
        body = statistics.median(b for b, _ in split) / calls * 1e6
        commit = statistics.median(c for _, c in split) / calls * 1e6
        added = statistics.median(times["tcgd summary"]) - statistics.median(times["compiled"])
        print(
            f"\ninside a probed call (medians over the rounds): the probe op's body "
            f"{body:.1f} us, the point commit {commit:.1f} us; added per call (median - "
            f"median): {added:.1f} us"
        )
    ratio = min(times["tcgd summary"]) / base
    verdict = "met" if incl / base <= TARGET else "not met"
    print(
        f"\ntcgd summary / compiled: {ratio:.2f} ({incl / base:.2f} incl. flush); "
        f"target <= {TARGET}: {verdict}"
    )


if __name__ == "__main__":
    main()
