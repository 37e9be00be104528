"""P5: the cost of one memory point as the allocator history grows to 600k entries,
against ``torch.cuda.memory._snapshot()`` itself (the baseline, timed in the same process
at the same history size just before the point).

GPU (the figure that counts):

    python3 benches/memory_point.py [--entries 600000] [--points 11] [--steady 5]

grows the history with allocation/free loops (3 trace entries each), records a point at
every step with a ``MemoryRecorder`` and prints, per point: history entries, the
``_snapshot()`` time, the point time (synchronise, snapshot under a marker,
``mem_get_info``, ingest state and new history, hand the Parquet commit to the writer
thread), their ratio, the time the commit then took on the writer thread (``flush()``
right after the point), the entries the point stored, and what ingesting the whole
history would have cost (the reference design's way). Then ``--steady`` more points at
the top size, each after 1,000 new allocations: the median of their ratios is the P5
figure least moved by a noisy host.

CPU (labelled synthetic; ingestion and commit only):

    python3 benches/memory_point.py --synthetic

feeds the recorder torch-shaped snapshot dicts of growing history from a fake source,
and prints the point time against a full ingestion of the same snapshot.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from typing import Any

from _support import MIB, FakeSource, trace_entry
from torch_cudagraph_debug.memory_debug import MemoryProbe, MemoryProbeSnapshot, MemoryRecorder


def _timed(fn: Any) -> tuple[float, Any]:
    start = time.perf_counter()
    result = fn()
    return time.perf_counter() - start, result


class SyntheticAllocator(FakeSource):
    """A history ring and a small fixed state, shaped like torch 2.11's snapshot: shared
    frame dicts, per-entry ``user_metadata``/``compile_context``, a ``snapshot`` entry
    carrying the metadata each time a snapshot is taken."""

    def __init__(self, segments: int = 64, blocks_per_segment: int = 16):
        self.ring: list[dict[str, Any]] = []
        self.time_us = 1_795_000_000_000_000
        self.metadata = ""
        frames = [
            {"name": f"fn{i}", "filename": f"/src/model_{i % 7}.py", "line": 10 + i}
            for i in range(40)
        ]
        self.stacks = [frames[i : i + 12] for i in range(0, 28)]
        self.segments = []
        for s in range(segments):
            address = 0x7F00_0000_0000 + s * (64 * MIB)
            blocks = []
            for b in range(blocks_per_segment):
                state = "active_allocated" if b % 3 else "inactive"
                blocks.append(
                    {
                        "address": address + b * 4 * MIB,
                        "size": 4 * MIB,
                        "requested_size": 4 * MIB - 7 if state != "inactive" else 0,
                        "state": state,
                        "frames": list(self.stacks[b % len(self.stacks)]),
                    }
                )
            self.segments.append(
                {
                    "device": 0,
                    "address": address,
                    "total_size": 64 * MIB,
                    "allocated_size": 0,
                    "active_size": 0,
                    "requested_size": 0,
                    "stream": 0 if s % 4 else 0x5A5A,
                    "segment_type": "large",
                    "segment_pool_id": (0, 0) if s % 8 else (1 + s // 8, 0),
                    "is_expandable": False,
                    "frames": [],
                    "blocks": blocks,
                }
            )

    def grow(self, entries: int) -> None:
        for i in range(entries):
            if i % 4 == 0:
                self.time_us += 1
            self.ring.append(
                trace_entry(
                    ("alloc", "free_requested", "free_completed")[i % 3],
                    0x7E00_0000_0000 + (i // 3 % 512) * 4096,
                    4096,
                    0,
                    self.time_us,
                    self.metadata,
                    list(self.stacks[i % len(self.stacks)]),
                )
            )

    def snapshot(self) -> dict[str, Any]:
        # As torch 2.11 does: the snapshot's own entry is recorded after the traces were
        # gathered, so it shows up in the next snapshot.
        snapshot = {"segments": self.segments, "device_traces": [list(self.ring)]}
        self.ring.append(trace_entry("snapshot", 0, 0, 0, self.time_us, self.metadata))
        return snapshot


def synthetic(entries: int, points: int, run_dir: str) -> None:
    source = SyntheticAllocator()
    step = entries // (points - 1)
    print("SYNTHETIC (CPU, no torch allocator): ingestion and commit only")
    print(f"state: {len(source.segments)} segments, {len(source.segments) * 16} blocks")
    header = (
        "| point | history entries | build dict (s) | point (s) | commit behind (s) "
        "| full ingestion (s) | point / full | stored |"
    )
    print(header)
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    point_times = []
    with MemoryRecorder(name="bench", run_dir=run_dir, _source=source) as rec:
        for i in range(points):
            if i:
                source.grow(step)
            build, snap = _timed(source.snapshot)
            source.ring.pop()  # the fake appended a marker; the point adds its own
            point_s, point = _timed(lambda i=i: rec.record_point(f"p{i}"))
            behind_s, _ = _timed(rec.flush)
            stored = point.table("memory_events").num_rows
            full_s, _ = _timed(lambda snap=snap: MemoryProbeSnapshot.from_snapshot(snap))
            point_times.append(point_s)
            print(
                f"| {i} | {len(snap['device_traces'][0])} | {build:.3f} | {point_s:.3f} "
                f"| {behind_s:.3f} | {full_s:.3f} | {point_s / full_s:.2f} | {stored} |"
            )
    later = point_times[1:]
    print(
        f"flatness: point time median {statistics.median(later):.3f} s, "
        f"first after the start {later[0]:.3f} s, last {later[-1]:.3f} s "
        f"(last/first {later[-1] / later[0]:.2f})"
    )


def gpu(entries: int, points: int, steady: int, run_dir: str) -> None:
    import torch

    memory = torch.cuda.memory
    memory._record_memory_history(max_entries=max(entries * 2, 100_000), stacks="python")
    keep = [torch.empty(n * MIB, dtype=torch.uint8, device="cuda") for n in (1, 2, 4, 8)]
    torch.cuda.synchronize()

    def ring() -> int:
        return len(memory._snapshot()["device_traces"][torch.cuda.current_device()])

    def churn(count: int) -> None:
        for _ in range(count):
            t = torch.empty(4096, dtype=torch.uint8, device="cuda")
            del t

    def snapshot_and_free() -> None:
        # What a caller of _snapshot() pays in the end: building the dict and dropping it.
        s = memory._snapshot()
        del s

    print(f"GPU: {torch.cuda.get_device_name()}, torch {torch.__version__}")
    print(
        "| point | history entries | _snapshot() (s) | _snapshot() + free (s) "
        "| probe snapshot (s) | recorder point (s) | point / _snapshot() "
        "| point / (_snapshot() + free) | commit behind (s) | stored | full ingestion (s) |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    ratios, fair, steady_ratios = [], [], []
    probe = MemoryProbe(name="bench")
    with MemoryRecorder(name="bench", run_dir=run_dir) as rec:
        for i in range(points + steady):
            if i < points:
                target = entries * i // (points - 1)
                have = ring()
                if target > have:
                    churn((target - have) // 3)
            else:
                churn(1000)
            torch.cuda.synchronize()
            # Baselines: the best of three calls at this history size.
            base = min(_timed(memory._snapshot)[0] for _ in range(3))
            base_free = min(_timed(snapshot_and_free)[0] for _ in range(3))
            probe_s, _ = _timed(lambda i=i: probe.snapshot(label=f"p{i}"))
            point_s, point = _timed(lambda i=i: rec.record_point(f"p{i}"))
            behind_s, _ = _timed(rec.flush)
            stored = point.table("memory_events").num_rows
            snap = memory._snapshot()
            full_s, _ = _timed(lambda snap=snap: MemoryProbeSnapshot.from_snapshot(snap))
            del snap
            (ratios if i < points else steady_ratios).append(point_s / base)
            fair.append(point_s / base_free)
            print(
                f"| {i if i < points else f'steady {i - points + 1}'} | {ring()} | {base:.3f} "
                f"| {base_free:.3f} | {probe_s:.3f} | {point_s:.3f} | {point_s / base:.2f} "
                f"| {point_s / base_free:.2f} | {behind_s:.3f} | {stored} | {full_s:.3f} |"
            )
    memory._record_memory_history(enabled=None)
    del keep
    print(
        f"P5: point / _snapshot() max {max(ratios[1:]):.2f}, median "
        f"{statistics.median(ratios[1:]):.2f} over the growing history; point / (_snapshot() "
        f"+ free) max {max(fair[1:]):.2f}, median {statistics.median(fair[1:]):.2f}"
    )
    if steady_ratios:
        print(
            f"P5 at {entries} entries: point / _snapshot() median "
            f"{statistics.median(steady_ratios):.2f} over {len(steady_ratios)} points "
            f"(min {min(steady_ratios):.2f}, max {max(steady_ratios):.2f}); target <= 1.5, flat"
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, default=600_000)
    parser.add_argument("--points", type=int, default=11)
    parser.add_argument(
        "--steady", type=int, default=5, help="more points at the top size (GPU; default 5)"
    )
    parser.add_argument("--synthetic", action="store_true", help="CPU: fake allocator")
    parser.add_argument("--run-dir", help="where the benchmark run goes (default: a temp dir)")
    args = parser.parse_args()
    if args.points < 2:
        parser.error("--points must be at least 2")
    run_dir = args.run_dir or os.path.join(tempfile.mkdtemp(prefix="tcgd-bench-"), "run")
    if args.synthetic:
        synthetic(args.entries, args.points, run_dir)
    else:
        import torch

        if not torch.cuda.is_available():
            print("no CUDA here: run on the GPU machine, or pass --synthetic", file=sys.stderr)
            return 2
        gpu(args.entries, args.points, args.steady, run_dir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
