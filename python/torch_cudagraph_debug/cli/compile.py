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
