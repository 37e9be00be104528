"""`tcgd explain`: what the probe pass selects in a program's compiled graphs, and why;
`tcgd differential`: the eager model against the compiled model, site by site; `tcgd why`:
why they diverge.

Both print what they are doing on stderr (compiling takes tens of seconds on a CPU),
never on stdout, so `--json` output stays parseable; `--quiet` silences it."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import runpy
import sys
from collections.abc import Callable, Iterator
from typing import Any

from torch_cudagraph_debug.cli._exit import EXIT_FOR_STATUS, EXIT_OK
from torch_cudagraph_debug.cli._subcommands import Command, arg

_QUIET = arg("--quiet", action="store_true", help="no progress lines on stderr (errors still are)")
_CONFIG = arg("config", help="probe config (TOML)")


def _progress(args: argparse.Namespace) -> Callable[[str], None] | None:
    if args.quiet:
        return None

    def say(message: str) -> None:
        print(f"tcgd: {message}", file=sys.stderr, flush=True)

    return say


def _script(path: str, what: str) -> str:
    """``path`` when it names a file, else a typed error naming it."""
    from torch_cudagraph_debug.errors import ScriptNotFoundError

    if not os.path.isfile(path):
        where = "is a directory" if os.path.isdir(path) else "does not exist"
        raise ScriptNotFoundError(
            f"{what} {path!r} {where} (working directory {os.getcwd()}); give the path of "
            "a Python file"
        )
    return path


@contextlib.contextmanager
def _stdout_to_stderr() -> Iterator[None]:
    """What the block prints to stdout goes to stderr instead, through ``sys.stdout`` and
    through file descriptor 1 alike (a child process, a C library): stdout is kept for the
    report, so that `--json` output stays parseable. Both are restored when it ends."""
    stdout = sys.stdout
    stdout.flush()
    try:
        saved = os.dup(1)
        os.dup2(2, 1)
    except OSError:  # no descriptor 1 or 2 to redirect: Python's own writes only
        saved = -1
    try:
        with contextlib.redirect_stdout(sys.stderr):
            yield
    finally:
        # Written to the stdout object past the redirection (sys.__stdout__): to stderr
        # too, before descriptor 1 is the report's again.
        for stream in (stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        if saved >= 0:
            os.dup2(saved, 1)
            os.close(saved)


def _explain(args: argparse.Namespace) -> int:
    from torch_cudagraph_debug import _native
    from torch_cudagraph_debug.errors import InvalidInputError

    # A bad config or a missing script fails before torch is imported (seconds).
    config = _native.ProbeConfig.load(args.config)
    script = _script(args.script, "script")
    from torch_cudagraph_debug.compile import _progress as progress
    from torch_cudagraph_debug.compile.explain import ExplainReport, deciding

    argv = sys.argv
    sys.argv = [script, *args.args]
    try:
        with progress.reporting_to(_progress(args)), deciding(config) as decisions:
            progress.report(f"running {script} with the probe pass of {args.config}")
            import torch

            torch._dynamo.reset()
            # The script's own output is not the report: it goes to stderr.
            with _stdout_to_stderr():
                try:
                    runpy.run_path(script, run_name="__main__")
                except SystemExit as exit:
                    # A script that ends itself successfully still has its graphs decided.
                    if exit.code not in (None, 0):
                        raise
    finally:
        sys.argv = argv
    report = ExplainReport(tuple(decisions))
    if not report.graphs:
        raise InvalidInputError(
            f"{script} compiled no graph with Inductor while it ran under {args.config}: "
            "explain sees the graphs torch.compile (backend 'inductor' or 'tcgd') compiles "
            "while the script runs; make the script call its compiled model"
        )
    if args.json:
        print(json.dumps(report.to_dict(), indent=2))
    else:
        print(report.to_text(show_rejected=not args.selected_only))
    return EXIT_OK


def _factory_path(spec: str) -> str:
    """The file of a ``file.py:function`` factory."""
    from torch_cudagraph_debug.errors import InvalidInputError

    path, _, name = spec.rpartition(":")
    if not path or not name:
        raise InvalidInputError(
            f"factory must be FILE.py:FUNCTION, got {spec!r}; FUNCTION() returns (model, batches)"
        )
    return path


def _factory(spec: str) -> tuple[Any, list[Any]]:
    """Runs ``file.py:function`` and checks that it returned ``(model, batches)``."""
    from torch_cudagraph_debug.errors import InvalidInputError

    path = _factory_path(spec)
    name = spec.rpartition(":")[2]
    namespace = runpy.run_path(_script(path, "factory file"))
    factory = namespace.get(name)
    if not callable(factory):
        defined = sorted(
            k
            for k, v in namespace.items()
            if callable(v) and getattr(v, "__module__", None) == "<run_path>"
        )
        what = "defines no function" if factory is None else "has a non-callable"
        raise InvalidInputError(
            f"{path} {what} {name!r}"
            + (f" (its functions: {', '.join(defined)})" if defined else "")
            + "; name a function that returns (model, batches)"
        )
    made = factory()
    if not (isinstance(made, tuple | list) and len(made) == 2):
        raise InvalidInputError(
            f"{path}:{name}() returned {type(made).__name__}, not (model, batches); return "
            "the model and a list of argument tuples"
        )
    model, batches = made
    return model, list(batches)


def _loaded(args: argparse.Namespace, config_path: str | None) -> tuple[Any, Any, list[Any]]:
    """The config and the factory's model and batches. A bad config or a missing factory
    file fails before torch is imported (seconds)."""
    from torch_cudagraph_debug import _native

    config = None if config_path is None else _native.ProbeConfig.load(config_path)
    _script(_factory_path(args.factory), "factory file")
    # What the factory prints is not the report: it goes to stderr.
    with _stdout_to_stderr():
        model, batches = _factory(args.factory)
    return config, model, batches


def _emit(result: Any, args: argparse.Namespace) -> int:
    """Prints ``result`` (text or JSON), writes its report files, exits by its status."""
    if args.report:
        paths = result.write(args.report, overwrite=args.overwrite)
        print(f"tcgd: report written to {', '.join(map(str, paths.values()))}", file=sys.stderr)
    if args.json:
        print(json.dumps(result.to_dict(), indent=2, default=str))
    else:
        print(result.to_text(), end="" if result.to_text().endswith("\n") else "\n")
    return EXIT_FOR_STATUS[result.status]


def _differential(args: argparse.Namespace) -> int:
    config, model, batches = _loaded(args, args.config)
    from torch_cudagraph_debug.compile.differential import differential

    with _stdout_to_stderr():
        result = differential(
            model,
            batches,
            probes=config,
            run_dir=args.run_dir,
            mode=args.compile_mode,
            comparison_options=_comparison(args),
            overwrite=args.overwrite or None,
            progress=_progress(args),
            float64=not args.no_float64,
        )
    return _emit(result, args)


def _why(args: argparse.Namespace) -> int:
    config, model, batches = _loaded(args, args.probes)
    from torch_cudagraph_debug.compile.why import why

    with _stdout_to_stderr():
        report = why(
            model,
            batches,
            run_dir=args.run_dir,
            probes=config,
            mode=args.compile_mode,
            comparison_options=_comparison(args),
            search=args.search,
            coverage=not args.no_coverage,
            float64=not args.no_float64,
            overwrite=args.overwrite or None,
            progress=_progress(args),
        )
    return _emit(report, args)


def _why_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("comparison")
    group.add_argument("--rtol", type=float, default=1e-5, help="relative tolerance (1e-5)")
    group.add_argument("--atol", type=float, default=1e-8, help="absolute tolerance (1e-8)")
    group.add_argument("--equal-nan", action="store_true", help="NaN matches NaN")
    group.add_argument(
        "--no-float64",
        action="store_true",
        help="do not run the eager model in float64 (no float64 judgement)",
    )
    output = parser.add_argument_group("output")
    output.add_argument("--json", action="store_true", help="print the complete JSON report")
    output.add_argument(
        "--report",
        "--output",
        dest="report",
        metavar="DIR",
        help="also write the report as text, HTML and JSON into DIR",
    )
    output.add_argument(
        "--overwrite",
        action="store_true",
        help="replace the runs of an earlier run in --run-dir and the report files in DIR",
    )


def _comparison(args: argparse.Namespace) -> Any:
    from torch_cudagraph_debug.tensor_debug import TensorComparisonOptions

    return TensorComparisonOptions(rtol=args.rtol, atol=args.atol, equal_nan=args.equal_nan)


EXPLAIN_COMMAND = Command(
    "explain",
    _explain,
    "run a script under a probe config and show every selected and rejected site",
    (
        _CONFIG,
        arg("script", help="a Python script that compiles and runs the model"),
        arg("args", nargs=argparse.REMAINDER, help="arguments for the script"),
        arg("--json", action="store_true", help="print JSON"),
        arg("--selected-only", action="store_true", help="omit rejected nodes"),
        _QUIET,
    ),
    description="Runs SCRIPT with the probe pass installed (compile caches off, so every "
    "graph is compiled and decided) and prints, per compiled graph, each selected site and "
    "why, and each rejected candidate and why. Nothing recorded is kept. Exit code 0, or 2 "
    "on error, including a script that compiles no graph.",
)

DIFFERENTIAL_COMMAND = Command(
    "differential",
    _differential,
    "eager vs compiled (vs CUDA graphs, vs float64), site by site: the first divergence",
    (
        _CONFIG,
        arg("factory", help="file.py:function returning (model, batches)"),
        arg("--run-dir", required=True, help="the job root the variants' runs go into"),
        arg("--compile-mode", default=None, help="torch.compile mode"),
        _QUIET,
        _why_options,
    ),
    description="Calls FACTORY (`file.py:function`, returning `(model, batches)`; a batch is "
    "a tuple of arguments, a dict of keyword arguments or one tensor), runs every batch "
    "through the eager model, the compiled model (and, on a GPU, the compiled model under "
    "CUDA graphs) with the same probe sites, and the eager model in float64, and reports a "
    "verdict per comparison. Exit code 0 match, 1 mismatch, 3 inconclusive, 2 error.",
)

WHY_COMMAND = Command(
    "why",
    _why,
    "why the compiled model diverges: differential, float64 judgement, culprit search",
    (
        arg("factory", help="file.py:function returning (model, batches)"),
        arg(
            "--probes",
            default=None,
            metavar="CONFIG",
            help="probe config (default: matmuls, convolutions, attention, layer norms)",
        ),
        arg("--run-dir", required=True, help="the job root the variants' runs go into"),
        arg("--compile-mode", default=None, help="torch.compile mode"),
        arg(
            "--search",
            choices=("auto", "always", "never"),
            default="auto",
            help="culprit search: when the outputs diverge by the float64 rule (auto), also "
            "when they differ only within rounding (always), or not at all (never)",
        ),
        arg(
            "--no-search",
            dest="search",
            action="store_const",
            const="never",
            help="same as --search never",
        ),
        arg("--no-coverage", action="store_true", help="no CUDA graph coverage report"),
        _QUIET,
        _why_options,
    ),
    description="Runs the differential of `tcgd differential`; when the compiled outputs "
    "diverge, searches the culprit (your Inductor settings, backends, passes, switches, "
    "lowerings, fusions) with the comparison as the oracle; reports CUDA graph coverage. "
    "docs/why.md explains the report. Exit code 0 match, 1 mismatch, 3 inconclusive, 2 error.",
)
