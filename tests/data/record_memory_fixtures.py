"""Records the small real allocator snapshots that the CPU memory tests read.

Run on the GPU machine (CUDA and torch needed; this package is not):

    python3 tests/data/record_memory_fixtures.py --out tests/data

It writes, for the default allocator and for ``expandable_segments:True`` (a subprocess,
because the allocator reads ``PYTORCH_CUDA_ALLOC_CONF`` once, when CUDA initialises):

- ``memory_<variant>_before.pickle`` / ``memory_<variant>_after.pickle``: what
  ``torch.cuda.memory._dump_snapshot`` writes (``pickle.dump`` of ``_snapshot()``), taken
  before and after a hand capture that allocates 16 MiB inside ``torch.cuda.graph``;
- ``memory_fixtures.json``: per pickle, ``torch.cuda.mem_get_info`` taken right after it,
  the marker string set while it was taken, and the versions that produced it.

- ``memory_history_<n>.pickle`` (n = 0..3) and ``memory_history.json``: four points of one
  process with allocator history on, around a workload whose answers are known by
  construction (``HISTORY_WORKLOAD`` below: bytes born and kept, a transient born and freed
  between two points, a capture growing a private pool, bytes freed), so the history
  analyses (stacks, events, lifetimes) are checked against real snapshots.

``--describe`` prints the keys and value types found at every level of a live snapshot,
the first thing to look at when a new torch release changes the snapshot's shape.
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import subprocess
import sys
from typing import Any

CAPTURE_BYTES = 16 * 1024 * 1024
VARIANTS = {"default": "", "expandable": "expandable_segments:True"}
MIB = 1024 * 1024
# Between consecutive points of the history fixture, in bytes (sizes are multiples of 2 MiB,
# which the allocator does not round, so every figure is exact):
HISTORY_WORKLOAD = {
    "labels": ["start", "allocated", "captured", "freed"],
    # start -> allocated: four 2 MiB blocks born and kept; one 6 MiB block born and freed.
    "kept_block_bytes": 2 * MIB,
    "kept_blocks": 4,
    "transient_bytes": 6 * MIB,
    # allocated -> captured: a capture allocating 16 MiB in its private pool.
    "capture_bytes": 16 * MIB,
    # captured -> freed: two of the four kept blocks freed.
    "freed_blocks": 2,
}


def _describe(snapshot: dict[str, Any]) -> dict[str, Any]:
    """Keys and value types per level, and the trace actions seen."""

    def types(rows: list[dict[str, Any]]) -> dict[str, list[str]]:
        seen: dict[str, set[str]] = {}
        for row in rows:
            for key, value in row.items():
                seen.setdefault(key, set()).add(type(value).__name__)
        return {k: sorted(v) for k, v in sorted(seen.items())}

    segments = snapshot.get("segments", [])
    blocks = [b for s in segments for b in s.get("blocks", [])]
    traces = [t for device in snapshot.get("device_traces", []) for t in device]
    frames = [f for b in blocks for f in b.get("frames", [])]
    return {
        "top": {k: type(v).__name__ for k, v in snapshot.items()},
        "segment": types(segments),
        "block": types(blocks),
        "trace": types(traces),
        "frame": types(frames[:100]),
        "actions": sorted({t.get("action") for t in traces}),
        "block_states": sorted({b.get("state") for b in blocks}),
        "snapshot_entries": [
            {k: v for k, v in t.items() if k != "frames"}
            for t in traces
            if t.get("action") == "snapshot"
        ][:4],
        "pool_ids": sorted({str(s.get("segment_pool_id")) for s in segments}),
    }


def _take(torch: Any, marker: str) -> tuple[dict[str, Any], tuple[int, int]]:
    """A snapshot with ``marker`` as the allocator metadata while it is taken (the trace's
    ``snapshot`` entry carries it), then the device's free and total bytes."""
    memory = torch.cuda.memory
    previous = memory._get_memory_metadata()
    memory._set_memory_metadata(marker)
    try:
        snapshot = memory._snapshot()
    finally:
        memory._set_memory_metadata(previous)
    return snapshot, torch.cuda.mem_get_info(0)


def capture_private_pool(static_x: Any) -> tuple[Any, ...]:
    """Captures a CUDA graph that allocates ``CAPTURE_BYTES`` in its private pool and
    doubles ``static_x``, then replays it once. Returns the graph and the tensors it holds:
    the capture's memory stays in use while the caller keeps them. The GPU memory tests
    take this same capture."""
    import torch

    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        graph_state = torch.empty(CAPTURE_BYTES, dtype=torch.uint8, device="cuda")
        graph_state.fill_(1)
        static_y = static_x * 2
    graph.replay()
    return graph, graph_state, static_y


def record_variant(variant: str, out: str, describe: bool) -> dict[str, Any]:
    import torch

    torch.cuda.memory._record_memory_history(max_entries=4096, stacks="python")
    # A little default-pool state before the capture: kept, freed, and a small block.
    kept = torch.empty(3 * 1024 * 1024, dtype=torch.uint8, device="cuda")
    scratch = torch.ones(1024, device="cuda")
    del scratch
    static_x = torch.ones(256, device="cuda")
    torch.cuda.synchronize()
    before, info_before = _take(torch, f"tcgd-fixture:{variant}:before")
    captured = capture_private_pool(static_x)
    torch.cuda.synchronize()
    after, info_after = _take(torch, f"tcgd-fixture:{variant}:after")
    if describe:
        print(json.dumps({variant: _describe(after)}, indent=1, default=str))

    facts: dict[str, Any] = {}
    for stage, snapshot, info in (("before", before, info_before), ("after", after, info_after)):
        name = f"memory_{variant}_{stage}.pickle"
        with open(os.path.join(out, name), "wb") as f:
            # What torch.cuda.memory._dump_snapshot writes.
            pickle.dump(snapshot, f)
        facts[name] = {
            "variant": variant,
            "marker": f"tcgd-fixture:{variant}:{stage}",
            "mem_get_info": {"0": list(info)},
            "torch": torch.__version__,
            "cuda": torch.version.cuda,
            "device": torch.cuda.get_device_name(0),
            "capture_bytes": CAPTURE_BYTES,
        }
    del captured, kept
    return facts


def record_history(out: str) -> dict[str, Any]:
    """The four-point history fixture (default allocator, history on from the start)."""
    import torch

    w = HISTORY_WORKLOAD
    torch.cuda.memory._record_memory_history(max_entries=100_000, stacks="python")
    torch.ones(1, device="cuda")  # the CUDA context and a first segment exist before "start"
    torch.cuda.synchronize()
    taken = []

    def point(label: str) -> None:
        torch.cuda.synchronize()
        taken.append((label, *_take(torch, f"tcgd-fixture:history:{label}")))

    point("start")
    kept = [
        torch.empty(w["kept_block_bytes"], dtype=torch.uint8, device="cuda")
        for _ in range(w["kept_blocks"])
    ]
    transient = torch.empty(w["transient_bytes"], dtype=torch.uint8, device="cuda")
    del transient
    point("allocated")
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        graph_state = torch.empty(w["capture_bytes"], dtype=torch.uint8, device="cuda")
        graph_state.fill_(1)
    graph.replay()
    point("captured")
    del kept[: w["freed_blocks"]]
    point("freed")

    facts: dict[str, Any] = {"workload": w, "points": []}
    for n, (label, snapshot, info) in enumerate(taken):
        name = f"memory_history_{n}.pickle"
        with open(os.path.join(out, name), "wb") as f:
            pickle.dump(snapshot, f)
        facts["points"].append(
            {
                "file": name,
                "label": label,
                "marker": f"tcgd-fixture:history:{label}",
                "mem_get_info": {"0": list(info)},
            }
        )
    facts.update(
        torch=torch.__version__, cuda=torch.version.cuda, device=torch.cuda.get_device_name(0)
    )
    del graph, graph_state, kept
    return facts


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=os.path.dirname(os.path.abspath(__file__)))
    parser.add_argument("--describe", action="store_true")
    parser.add_argument("--variant", choices=[*sorted(VARIANTS), "history"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)

    if args.variant == "history":
        print(json.dumps(record_history(args.out)))
        return 0
    if args.variant is not None:
        # Child process: PYTORCH_CUDA_ALLOC_CONF was set before torch was imported.
        print(json.dumps(record_variant(args.variant, args.out, args.describe)))
        return 0

    facts: dict[str, Any] = {}
    for variant, conf in VARIANTS.items():
        env = dict(os.environ)
        env.pop("PYTORCH_CUDA_ALLOC_CONF", None)
        if conf:
            env["PYTORCH_CUDA_ALLOC_CONF"] = conf
        command = [sys.executable, os.path.abspath(__file__), "--variant", variant]
        command += ["--out", args.out] + (["--describe"] if args.describe else [])
        done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
        sys.stderr.write(done.stderr)
        if done.returncode != 0:
            print(done.stdout)
            return done.returncode
        lines = done.stdout.strip().splitlines()
        if args.describe:
            print("\n".join(lines[:-1]))
        facts.update(json.loads(lines[-1]))
    with open(os.path.join(args.out, "memory_fixtures.json"), "w") as f:
        json.dump(facts, f, indent=1, sort_keys=True)
        f.write("\n")
    # The history fixture in a process of its own: history on from its first allocation.
    env = dict(os.environ)
    env.pop("PYTORCH_CUDA_ALLOC_CONF", None)
    command = [sys.executable, os.path.abspath(__file__), "--variant", "history", "--out", args.out]
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    sys.stderr.write(done.stderr)
    if done.returncode != 0:
        print(done.stdout)
        return done.returncode
    with open(os.path.join(args.out, "memory_history.json"), "w") as f:
        json.dump(json.loads(done.stdout.strip().splitlines()[-1]), f, indent=1, sort_keys=True)
        f.write("\n")
    print(f"wrote {len(facts)} snapshots to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
