"""`tcgd explain`: what the probe pass selects in a program's compiled graphs, and why;
`tcgd differential`: an eager reference against the compiled model, site by site.

Both print what they are doing on stderr (compiling takes tens of seconds on a CPU),
never on stdout, so `--json` output stays parseable; `--quiet` silences it."""

from __future__ import annotations

import argparse
import json
import os
import runpy
import sys
from collections.abc import Callable
from typing import Any

from torch_cudagraph_debug.cli._exit import EXIT_OK
from torch_cudagraph_debug.cli._subcommands import Command, arg
from torch_cudagraph_debug.cli.tensor_options import _comparison_options, _finish, _options

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


def _explain(args: argparse.Namespace) -> int:
    import torch

    from torch_cudagraph_debug.compile import _progress as progress
    from torch_cudagraph_debug.compile import installed, load_config
    from torch_cudagraph_debug.compile.explain import ExplainReport, throwaway_session
    from torch_cudagraph_debug.errors import InvalidInputError

    config = load_config(args.config)  # a bad config fails before the script runs
    script = _script(args.script, "script")
    argv = sys.argv
    sys.argv = [script, *args.args]
    try:
        with progress.reporting_to(_progress(args)), throwaway_session(config) as session:
            progress.report(f"running {script} with the probe pass of {args.config}")
            with installed(session):
                torch._dynamo.reset()
                try:
                    runpy.run_path(script, run_name="__main__")
                except SystemExit as exit:
                    # A script that ends itself successfully still has its graphs decided.
                    if exit.code not in (None, 0):
                        raise
    finally:
        sys.argv = argv
    report = ExplainReport(tuple(session.decisions))
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


def _factory(spec: str) -> tuple[Any, list[Any]]:
    """Runs ``file.py:function`` and checks that it returned ``(model, batches)``."""
    from torch_cudagraph_debug.errors import InvalidInputError

    path, _, name = spec.rpartition(":")
    if not path or not name:
        raise InvalidInputError(
            f"factory must be FILE.py:FUNCTION, got {spec!r}; FUNCTION() returns (model, batches)"
        )
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


def _differential(args: argparse.Namespace) -> int:
    from torch_cudagraph_debug.compile.differential import differential
    from torch_cudagraph_debug.compile.session import load_config

    config = load_config(args.config)  # a bad config fails before the factory runs
    model, batches = _factory(args.factory)
    result = differential(
        model,
        batches,
        probes=config,
        run_dir=args.run_dir,
        mode=args.compile_mode,
        comparison_options=_options(args),
        overwrite=args.overwrite or None,
        progress=_progress(args),
    )
    return _finish(result.comparison, args)


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
    "eager reference vs compiled model, site by site: the first diverging site",
    (
        _CONFIG,
        arg("factory", help="file.py:function returning (model, batches)"),
        arg("--run-dir", required=True, help="where the two runs go"),
        arg("--compile-mode", default=None, help="torch.compile mode"),
        _QUIET,
        _comparison_options,
    ),
    description="Calls FACTORY (`file.py:function`, returning `(model, batches)` where "
    "batches is a list of argument tuples), runs every batch through an eager reference and "
    "through the compiled model with the same probe sites, and reports the comparison. Exit "
    "code 0 match, 1 mismatch, 3 inconclusive, 2 error.",
    epilog="--overwrite also replaces the two runs of an earlier differential run in --run-dir.",
)
