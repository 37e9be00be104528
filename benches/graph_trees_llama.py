"""Recording a compiled transformers Llama under CUDA Graph Trees: per-call cost of our
probes against the same model compiled without them (P4).

    python benches/graph_trees_llama.py [--quick]          # GPU (bf16, Graph Trees)
    python benches/graph_trees_llama.py --device cpu       # CPU smoke run (float32, tiny)

Model: ``LlamaForCausalLM`` with random weights (4 layers, hidden 512, intermediate 1408,
8 heads, vocab 32000; bf16 on CUDA), batch 4 x 128 tokens, inference under
``torch.no_grad()``. Sites: the 28 projection outputs of the layers (q, k, v, o, gate, up,
down per layer). Per-call wall time of ``--calls`` calls back to back, synchronised after
the last; minimum of ``--rounds`` rounds after warm-up (median in brackets). Rows:

- ``compiled``: ``torch.compile(model, mode="reduce-overhead")``, no probes (the baseline);
- ``eager``: the model run eagerly;
- ``eager+hooks``: forward hooks on every ``nn.Linear`` of the layers, each computing
  min/max/mean/std/NaN count of its output on the device and copying the five numbers to
  the host (``.cpu()``), kept in a list: what users do today;
- ``tcgd summary``: ``backend="tcgd"`` with the 28 sites, ``payload="summary"``;
- ``tcgd summary history=8``: the same with ``[run] history = 8`` (the flight recorder);
  printed as n/a when the config refuses the key;
- ``tcgd full``: ``payload="full"`` every call, beside the D2H floor: the time to copy the
  28 outputs' bytes from the device into pinned host memory in this process.

Each variant compiles fresh (``torch._dynamo.reset()``, compile caches off, a new run
directory). For the tcgd rows the points recorded during the timed rounds are made
durable by a separate ``session.flush()`` after them, whose time is printed too, and
"incl. flush" spreads it over those calls. After each compiled variant the program prints
the cudagraph skips it caused (``counters["inductor"]["cudagraph_skips"]``, must be 0) and
whether its last output equals the no-probe compiled output bitwise (``torch.equal``).

On CPU (``--device cpu``) the sizes are tiny, float32, and the compiled rows use
torch.compile's default mode (no CUDA graphs): a smoke run of the program, not a figure.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
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

PROJECTIONS = 7  # q, k, v, o, gate, up, down
CUDA_SIZES = {
    "layers": 4,
    "hidden": 512,
    "intermediate": 1408,
    "heads": 8,
    "vocab": 32000,
    "batch": 4,
    "seq": 128,
}
# Four layers on CPU too, so that the site count (28) is checked by the smoke run.
CPU_SIZES = {
    "layers": 4,
    "hidden": 64,
    "intermediate": 176,
    "heads": 4,
    "vocab": 1000,
    "batch": 2,
    "seq": 16,
}


class BenchError(RuntimeError):
    """The benchmark measured something other than what it claims (a wrong site count)."""


def make_model(sizes: dict[str, int], device: str, dtype: torch.dtype) -> nn.Module:
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        num_hidden_layers=sizes["layers"],
        hidden_size=sizes["hidden"],
        intermediate_size=sizes["intermediate"],
        num_attention_heads=sizes["heads"],
        num_key_value_heads=sizes["heads"],
        vocab_size=sizes["vocab"],
        max_position_embeddings=max(sizes["seq"], 256),
        use_cache=False,
    )
    torch.manual_seed(0)
    model = LlamaForCausalLM(config).eval()
    return model.to(device=device, dtype=dtype)


def synchronize(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def time_calls(
    fn: Callable[[], torch.Tensor], device: str, calls: int, rounds: int, warmup: int
) -> tuple[float, float, torch.Tensor]:
    """Minimum and median microseconds per call over ``rounds`` rounds of ``calls`` calls
    (one synchronisation after each round), and the last call's output."""
    out = None
    for _ in range(warmup):
        out = fn()
    synchronize(device)
    per_call = []
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(calls):
            out = fn()
        synchronize(device)
        per_call.append((time.perf_counter() - start) / calls * 1e6)
    assert out is not None
    return min(per_call), statistics.median(per_call), out


def projection_linears(model: nn.Module) -> list[tuple[str, nn.Linear]]:
    return [
        (name, module)
        for name, module in model.named_modules()
        if isinstance(module, nn.Linear) and ".layers." in f".{name}"
    ]


def summary_hook(kept: list[torch.Tensor]) -> Callable[..., None]:
    """A forward hook taking a host summary of the output, the way users do it today:
    five statistics reduced on the device, then one blocking copy to the host."""

    def hook(_module: nn.Module, _args: Any, output: torch.Tensor) -> None:
        value = output.detach().float()
        stats = torch.stack(
            [value.min(), value.max(), value.mean(), value.std(), value.isnan().sum().float()]
        )
        kept.append(stats.cpu())

    return hook


def skips() -> int:
    return int(torch._dynamo.utils.counters["inductor"]["cudagraph_skips"])


def fresh() -> None:
    """Forget every compiled artifact so that the next variant compiles from scratch."""
    torch._dynamo.reset()
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def config_error(exc: BaseException) -> BaseException | None:
    """Our ConfigError inside the chain torch wraps around a backend's error, if any."""
    from torch_cudagraph_debug.errors import ConfigError

    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, ConfigError):
            return seen
        seen = seen.__cause__ or seen.__context__
    return None


def d2h_floor(
    outputs: list[torch.Tensor], device: str, calls: int, rounds: int
) -> tuple[float, float]:
    """Microseconds to copy every tensor of ``outputs`` into pinned host memory, per call
    (the same ``calls`` x ``rounds`` scheme as the model rows)."""
    pinned = device == "cuda"
    hosts = [torch.empty(t.shape, dtype=t.dtype, pin_memory=pinned) for t in outputs]

    def copy() -> torch.Tensor:
        for host, value in zip(hosts, outputs, strict=True):
            host.copy_(value, non_blocking=pinned)
        return hosts[-1]

    best, median, _ = time_calls(copy, device, calls, rounds, warmup=3)
    return best, median


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer calls and rounds")
    parser.add_argument("--device", choices=("cuda", "cpu"), default=None)
    parser.add_argument("--calls", type=int, default=None, help="calls per round (40)")
    parser.add_argument("--rounds", type=int, default=None, help="rounds (3)")
    parser.add_argument("--run-root", type=Path, default=None, help="keep the runs here")
    args = parser.parse_args()

    import torch_cudagraph_debug.compile as tcgd_compile

    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    on_cuda = device == "cuda"
    sizes = CUDA_SIZES if on_cuda else CPU_SIZES
    dtype = torch.bfloat16 if on_cuda else torch.float32
    calls = args.calls or (10 if args.quick else 40)
    rounds = args.rounds or (2 if args.quick else 3)
    warmup = 3 if args.quick else 10
    expected_sites = sizes["layers"] * PROJECTIONS
    if not on_cuda:
        torch.set_num_threads(min(2, torch.get_num_threads()))
        # Inductor's pool of compile workers starts after the first compilation and keeps
        # the cores busy for seconds; on a small CPU machine that slows the timed calls
        # that follow several times over.
        inductor_config.compile_threads = 1
    # Every variant compiles from scratch, so that the probe pass runs on every graph and
    # the session's decisions list its sites (a cached graph is served without the pass).
    inductor_config.fx_graph_cache = False
    if hasattr(functorch_config, "enable_autograd_cache"):
        functorch_config.enable_autograd_cache = False

    model = make_model(sizes, device, dtype)
    ids = torch.randint(0, sizes["vocab"], (sizes["batch"], sizes["seq"]), device=device)
    mode = {"mode": "reduce-overhead"} if on_cuda else {}
    name = torch.cuda.get_device_name() if on_cuda else f"CPU ({torch.get_num_threads()} threads)"
    print(f"device: {name}; torch {torch.__version__}; dtype {str(dtype).removeprefix('torch.')}")
    print(
        f"model: LlamaForCausalLM, {sizes['layers']} layers, hidden {sizes['hidden']}, "
        f"intermediate {sizes['intermediate']}, {sizes['heads']} heads, vocab {sizes['vocab']}; "
        f"batch {sizes['batch']} x {sizes['seq']} tokens; sites: {expected_sites}"
    )
    print(
        f"timing: {calls} calls back to back, synchronised after the last; minimum of "
        f"{rounds} rounds after {warmup} warm-up calls (median in brackets), us per call"
    )
    if not on_cuda:
        print("CPU: no CUDA graphs (default compile mode); a smoke run, not a P4 figure")
    print()

    rows: dict[str, dict[str, Any]] = {}

    def call(fn: Callable[..., Any]) -> Callable[[], torch.Tensor]:
        return lambda: fn(input_ids=ids, use_cache=False).logits

    def timed(label: str, fn: Callable[[], torch.Tensor], warm: int = warmup) -> torch.Tensor:
        started = time.perf_counter()
        best, median, out = time_calls(fn, device, calls, rounds, warm)
        rows[label] = {"us": best, "median": median}
        took = time.perf_counter() - started
        print(f"{label}: {best:.1f} us per call [{median:.1f}] ({took:.1f} s)")
        return out.clone()

    with torch.no_grad():
        # ---- compiled, no probes: the baseline every row is divided by
        before = skips()
        compiled = torch.compile(model, **mode)
        reference = timed("compiled", call(compiled))
        rows["compiled"]["skips"] = skips() - before
        print(f"  cudagraph skips: {rows['compiled']['skips']}")
        del compiled
        fresh()

        # ---- eager, and eager with host-summary hooks
        timed("eager", call(model))
        kept: list[torch.Tensor] = []
        linears = projection_linears(model)
        handles = [m.register_forward_hook(summary_hook(kept)) for _, m in linears]
        timed("eager+hooks", call(model))
        for handle in handles:
            handle.remove()
        print(f"  hooks: {len(linears)} nn.Linear modules, {len(kept)} host summaries kept")
        if len(linears) != expected_sites:
            raise BenchError(f"{len(linears)} projection modules, expected {expected_sites}")

        # The 28 outputs themselves (for the D2H floor of the full payload).
        outputs: list[torch.Tensor] = []
        grab = [
            m.register_forward_hook(lambda _m, _a, out: outputs.append(out.detach().clone()))
            for _, m in linears
        ]
        model(input_ids=ids, use_cache=False)
        for handle in grab:
            handle.remove()
        output_bytes = sum(t.numel() * t.element_size() for t in outputs)

        # ---- our probes
        selection = {
            "ops": ["aten.mm", "aten.addmm"],
            "graphs": ["inference"],
            "modules": ["*layers.*"],
        }
        variants = [
            ("tcgd summary", "summary", {}),
            ("tcgd summary history=8", "summary", {"history": 8}),
            ("tcgd full", "full", {}),
        ]
        with contextlib.ExitStack() as stack:
            if args.run_root is None:
                root = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="tcgd-llama-")))
            else:
                root = args.run_root
            for index, (label, payload, run_settings) in enumerate(variants):
                # The payload goes in the config too: the config is validated on its
                # own, and a history needs payload = "summary" there.
                run_table = {"payload": payload, **run_settings}
                probes = {"version": 1, "run": run_table, "select": [selection]}
                options = {
                    "probes": probes,
                    "run_dir": str(root / f"variant{index}"),
                    "payload": payload,
                    "overwrite": True,
                    **mode,
                }
                before = skips()
                try:
                    compiled = torch.compile(model, backend="tcgd", options=options)
                    fn = call(compiled)
                    fn()
                except Exception as exc:  # torch wraps the backend's error
                    refused = config_error(exc)
                    if refused is None or "history" not in str(refused):
                        raise
                    rows[label] = {"na": "n/a (history unsupported)"}
                    print(f"{label}: n/a (history unsupported): {refused}")
                    fresh()
                    continue
                session = tcgd_compile.session_of(compiled)
                sites = sum(len(g.selected) for g in session.decisions)
                graphs = len(session.decisions)
                for _ in range(warmup):
                    fn()
                synchronize(device)
                # The warm-up's points are committed here: the flush timed below is the
                # timed rounds' alone.
                session.flush()
                out = timed(label, fn, warm=0)
                started = time.perf_counter()
                session.flush()
                flush_s = time.perf_counter() - started
                started = time.perf_counter()
                run = session.finish()
                finish_s = time.perf_counter() - started
                row = rows[label]
                row["flush_ms"] = flush_s * 1e3
                row["incl_flush"] = row["us"] + flush_s * 1e6 / (calls * rounds)
                row["skips"] = skips() - before
                row["equal"] = torch.equal(out, reference)
                row["sites"] = sites
                last = run[len(run) - 1]
                print(
                    f"  sites selected: {sites} in {graphs} graph(s) (expected {expected_sites}); "
                    f"observations in the last point: {len(last.observations)}; points: {len(run)}"
                )
                print(
                    f"  flush after the {calls * rounds} timed calls: {flush_s * 1e3:.1f} ms; "
                    f"finish: {finish_s * 1e3:.1f} ms"
                )
                print(
                    f"  cudagraph skips: {row['skips']}; output equal to compiled: {row['equal']} "
                    f"(max abs diff {(out.float() - reference.float()).abs().max().item():.3g})"
                )
                if sites != expected_sites:
                    print(f"  WARNING: {sites} sites selected, expected {expected_sites}")
                del compiled, fn, session, run, last
                fresh()

        floor, floor_median = d2h_floor(outputs, device, calls, rounds)
        rows["d2h floor"] = {"us": floor, "median": floor_median}
        where = "pinned host memory" if on_cuda else "host memory (CPU: a plain copy)"
        print(
            f"d2h floor: {floor:.1f} us per call [{floor_median:.1f}] to copy the "
            f"{len(outputs)} outputs ({output_bytes / 2**20:.2f} MiB) into {where}"
        )

    base = rows["compiled"]["us"]
    print()
    print(
        "| what runs | us per call [median] | x compiled | flush ms | us per call incl. flush "
        "| x compiled incl. flush | cudagraph skips | output == compiled |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    descriptions = {
        "compiled": "compiled, no probes",
        "eager": "eager, no hooks",
        "eager+hooks": f"eager + forward hooks, host summary of {expected_sites} projections",
        "tcgd summary": f"tcgd summary, {expected_sites} sites",
        "tcgd summary history=8": f"tcgd summary history=8, {expected_sites} sites",
        "tcgd full": f"tcgd full, {expected_sites} sites",
        "d2h floor": f"D2H floor: {output_bytes / 2**20:.2f} MiB into "
        + ("pinned host" if on_cuda else "host (CPU: a plain copy)"),
    }
    for label, text in descriptions.items():
        row = rows[label]
        if "na" in row:
            print(f"| {text} | {row['na']} | | | | | | |")
            continue
        cells = [f"{row['us']:.1f} [{row['median']:.1f}]", f"{row['us'] / base:.2f}"]
        if "flush_ms" in row:
            cells += [
                f"{row['flush_ms']:.1f}",
                f"{row['incl_flush']:.1f}",
                f"{row['incl_flush'] / base:.2f}",
            ]
        else:
            cells += ["", "", ""]
        cells.append(str(row["skips"]) if "skips" in row else "")
        cells.append(str(row["equal"]) if "equal" in row else "")
        print(f"| {text} | " + " | ".join(cells) + " |")
    full = rows["tcgd full"]
    added = full["us"] - base
    print(
        f"\ntcgd full: adds {added:.1f} us per call over compiled, {added / floor:.2f}x the "
        f"D2H floor ({floor:.1f} us for {output_bytes / 2**20:.2f} MiB)"
    )
    summary = rows["tcgd summary"]
    print(
        f"P4 (tcgd summary / compiled, target <= 1.10): {summary['us'] / base:.2f} "
        f"({summary['incl_flush'] / base:.2f} incl. flush)"
        + ("" if on_cuda else "; CPU smoke run, not a P4 figure")
    )


if __name__ == "__main__":
    main()
