"""Where the time of a probed compiled call goes: device kernels against host time.

The Llama of `graph_trees_llama.py` (the P4 workload), compiled three ways (no probes;
`backend="tcgd"` with summaries of the 28 projections; the same with `history = 8`), each
run for many calls back to back. Per variant it prints the wall time per call in steady
state, the per-call host time between consecutive calls (p50 / p90), the device kernel
time per call from `torch.profiler` over 20 calls with its largest kernels, and for the
tcgd variants the time spent in the device recorder's point close and the points
harvested. A device that is busier than the wall time says the device is the limit;
host time near the wall time says the host (or the harvester behind it) is.

    python3 benches/graph_trees_llama_profile.py [--calls 1500] [--batch 64x256] [--cprofile N]
        [--group-mib MIB,...]
"""

from __future__ import annotations

import argparse
import collections
import cProfile
import itertools
import pstats
import sys
import tempfile
import time
from pathlib import Path

import torch
import torch._inductor.config as inductor_config
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, str(Path(__file__).parent))
import graph_trees_llama as llama


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))]


def host_profile(compiled: object, ids: torch.Tensor, calls: int) -> None:
    """The host's time per call by function (cProfile, own time and cumulative), over
    ``calls`` calls back to back: what the host does for a call beyond the replay."""
    profiler = cProfile.Profile()
    torch.cuda.synchronize()
    profiler.enable()
    for _ in range(calls):
        compiled(input_ids=ids, use_cache=False)  # type: ignore[operator]
    profiler.disable()
    torch.cuda.synchronize()
    stats = pstats.Stats(profiler)
    rows = sorted(stats.stats.items(), key=lambda kv: -kv[1][2])[:18]  # type: ignore[attr-defined]
    print(f"    cProfile over {calls} calls: us per call (own / cumulative), calls per call")
    for (path, line, name), (_, ncalls, own, cumulative, _) in rows:
        where = f"{Path(path).name}:{line}" if line else path
        print(
            f"    {own / calls * 1e6:8.1f} {cumulative / calls * 1e6:8.1f} "
            f"{ncalls / calls:5.1f}  {name[:48]} ({where[:48]})"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=1500)
    parser.add_argument(
        "--batch",
        default="4x128",
        metavar="BATCHxSEQ",
        help="input shape (4x128; the heavy-batch row of graph_trees_llama.py is 64x256)",
    )
    parser.add_argument(
        "--cprofile",
        type=int,
        default=0,
        metavar="N",
        help="also run N calls per variant under cProfile and print where the host's time goes",
    )
    parser.add_argument(
        "--group-mib",
        default=None,
        metavar="MIB,...",
        help="instead of the history variant, one summary variant per budget: the bytes (MiB) "
        "of probed values a probe group may keep alive past their last use (the pass's "
        "GROUP_EXTENSION); larger budgets give fewer summary launches",
    )
    args = parser.parse_args()
    from torch_cudagraph_debug.fx_passes import probe_insertion

    if not torch.cuda.is_available():
        raise SystemExit("this profile needs CUDA (Graph Trees)")
    import torch_cudagraph_debug.compile as tcgd_compile

    inductor_config.fx_graph_cache = False
    model = llama.make_model(llama.CUDA_SIZES, "cuda", torch.bfloat16)
    batch, seq = (int(n) for n in args.batch.lower().split("x"))
    ids = torch.randint(0, llama.CUDA_SIZES["vocab"], (batch, seq), device="cuda")
    selection = {
        "ops": ["aten.mm", "aten.addmm"],
        "graphs": ["inference"],
        "modules": ["*layers.*"],
    }
    root = Path(tempfile.mkdtemp(prefix="tcgd-profile-"))
    default_budget = probe_insertion.GROUP_EXTENSION
    variants: list[tuple[str, dict[str, object] | None, int]] = [
        ("compiled, no probes", None, default_budget),
        ("tcgd summary", {"payload": "summary"}, default_budget),
        ("tcgd summary history=8", {"payload": "summary", "history": 8}, default_budget),
    ]
    if args.group_mib:
        variants[2:] = [
            (f"tcgd summary, groups keep {mib} MiB", {"payload": "summary"}, int(mib) << 20)
            for mib in args.group_mib.split(",")
        ]
    with torch.no_grad():
        for index, (label, run, budget) in enumerate(variants):
            probe_insertion.GROUP_EXTENSION = budget
            torch.cuda.reset_peak_memory_stats()
            held_before = torch.cuda.memory_allocated()
            if run is None:
                compiled = torch.compile(model, mode="reduce-overhead")
            else:
                options = {
                    "probes": {"version": 1, "run": run, "select": [selection]},
                    "run_dir": str(root / f"v{index}"),
                    "payload": "summary",
                    "overwrite": True,
                    "mode": "reduce-overhead",
                }
                compiled = torch.compile(model, backend="tcgd", options=options)
            for _ in range(20):
                compiled(input_ids=ids, use_cache=False)
            torch.cuda.synchronize()
            session = tcgd_compile.session_of(compiled) if run is not None else None
            closed_before = session._device.close_time if session is not None else (0, 0.0)
            stamps = [time.perf_counter()]
            for _ in range(args.calls):
                compiled(input_ids=ids, use_cache=False)
                stamps.append(time.perf_counter())
            torch.cuda.synchronize()
            wall = (time.perf_counter() - stamps[0]) / args.calls * 1e6
            closed = session._device.close_time if session is not None else (0, 0.0)
            closes = closed[0] - closed_before[0]
            gaps = [(b - a) * 1e6 for a, b in itertools.pairwise(stamps)]
            with profile(activities=[ProfilerActivity.CUDA]) as prof:
                for _ in range(20):
                    compiled(input_ids=ids, use_cache=False)
                torch.cuda.synchronize()
            kernels: dict[str, list[float]] = collections.defaultdict(lambda: [0, 0.0])
            for event in prof.events():
                if event.device_type == torch.autograd.DeviceType.CUDA:
                    kernels[event.name][0] += 1
                    kernels[event.name][1] += event.device_time_total
            device = sum(k[1] for k in kernels.values()) / 20
            print(
                f"{label}: wall {wall:.1f} us/call over {args.calls} calls; host per call "
                f"p50 {percentile(gaps, 0.5):.0f} p90 {percentile(gaps, 0.9):.0f} us; "
                f"device kernels {device:.1f} us/call; peak allocated "
                f"{(torch.cuda.max_memory_allocated() - held_before) / 2**20:.0f} MiB over "
                "what earlier variants hold"
            )
            for name, (count, us) in sorted(kernels.items(), key=lambda k: -k[1][1])[:5]:
                print(f"    {us / 20:7.1f} us/call  x{count / 20:4.1f}  {name[:80]}")
            if args.cprofile:
                host_profile(compiled, ids, args.cprofile)
            if session is not None:
                started = time.perf_counter()
                session.flush()
                flush_ms = 1e3 * (time.perf_counter() - started)
                # Every point close, native (replayed calls) or from the session's Python,
                # is timed by the device recorder itself.
                mean_close = (closed[1] - closed_before[1]) / max(closes, 1) * 1e6
                print(
                    f"    {closes} point closes, {mean_close:.1f} us each in the recorder; "
                    f"flush {flush_ms:.1f} ms; (harvested, dumps) {session.device_counts}"
                )
            torch._dynamo.reset()


if __name__ == "__main__":
    main()
