"""`tcgd explain`: what the probe pass selects in a program's compiled graphs, and why."""

from __future__ import annotations

import argparse
import json
import runpy
import sys


def add_explain_command(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "explain",
        help="run a script under a probe config and show every selected and rejected site",
        description="Runs SCRIPT with the probe pass installed (Inductor's FX graph cache "
        "off, so every graph is compiled and decided) and prints, per compiled graph, each "
        "selected site and why, and each rejected candidate and why.",
    )
    parser.add_argument("config", help="probe config (TOML)")
    parser.add_argument("script", help="a Python script that compiles and runs the model")
    parser.add_argument("args", nargs=argparse.REMAINDER, help="arguments for the script")
    parser.add_argument("--json", action="store_true", help="print JSON")
    parser.add_argument("--selected-only", action="store_true", help="omit rejected nodes")
    parser.set_defaults(handler=_explain)


def _explain(args: argparse.Namespace) -> int:
    import tempfile

    import torch

    from torch_cudagraph_debug.compile import probes
    from torch_cudagraph_debug.compile.explain import ExplainReport

    argv = sys.argv
    sys.argv = [args.script, *args.args]
    try:
        with (
            torch._inductor.config.patch(fx_graph_cache=False),
            probes(args.config, run_dir=tempfile.mkdtemp(prefix="tcgd-explain-")) as session,
        ):
            torch._dynamo.reset()
            runpy.run_path(args.script, run_name="__main__")
            session.finish()
    finally:
        sys.argv = argv
    report = ExplainReport(tuple(session.decisions))
    if args.json:
        print(json.dumps(report.to_dict(), indent=2))
    else:
        print(report.to_text(show_rejected=not args.selected_only))
    return 0


def add_differential_command(subparsers: argparse._SubParsersAction) -> None:
    from torch_cudagraph_debug.cli.tensor import _comparison_options

    parser = subparsers.add_parser(
        "differential",
        help="eager reference vs compiled model, site by site: the first diverging site",
        description="Calls FACTORY (`file.py:function`, returning `(model, batches)` where "
        "batches is a list of argument tuples), runs every batch through an eager reference "
        "and through the compiled model with the same probe sites, and reports the "
        "comparison. Exit code 0 match, 1 mismatch, 3 inconclusive, 2 error.",
    )
    parser.add_argument("config", help="probe config (TOML)")
    parser.add_argument("factory", help="file.py:function returning (model, batches)")
    parser.add_argument("--run-dir", required=True, help="where the two runs go")
    parser.add_argument("--compile-mode", default=None, help="torch.compile mode")
    _comparison_options(parser)
    parser.set_defaults(handler=_differential)


def _differential(args: argparse.Namespace) -> int:
    from torch_cudagraph_debug.cli.tensor import _finish, _options
    from torch_cudagraph_debug.compile.differential import differential
    from torch_cudagraph_debug.errors import InvalidInputError

    path, _, name = args.factory.rpartition(":")
    if not path or not name:
        raise InvalidInputError(f"factory must be file.py:function, got {args.factory!r}")
    model, batches = runpy.run_path(path)[name]()
    result = differential(
        model,
        batches,
        probes=args.config,
        run_dir=args.run_dir,
        mode=args.compile_mode,
        comparison_options=_options(args),
    )
    return _finish(result.comparison, args)
