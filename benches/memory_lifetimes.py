"""P6: allocation lifetimes over a 600k-entry allocator history.

    python3 benches/memory_lifetimes.py [--entries 600000] [--repeat 5]

Builds a synthetic allocator snapshot in torch's ``_snapshot()`` format whose trace ring
holds ``--entries`` history entries (a realistic mix: several hundred allocation sites,
blocks allocated before the first point and freed later, leaks that stay live, many
short-lived transients with LIFO address reuse, a private pool, stream-ordered frees
still pending at the end), records it as a two-point run with a ``MemoryRecorder`` fed
by a fake source (``start``: the state before the workload; ``end``: the pickle's
state), writes the end snapshot as a ``_dump_snapshot`` pickle, then times, in the same
process:

- baseline: ``pickle.load`` of that pickle (Python only reading the history);
- ours: ``run.lifetimes()`` on the loaded run (events read from the store, replayed,
  reconciled with both states, cohorts built).

Prints the workload, both figures (min and median of ``--repeat``), and the ratio.
The replay is single-threaded CPU work: the figure on any host is the figure.
"""

from __future__ import annotations

import argparse
import os
import pickle
import random
import statistics
import sys
import tempfile
import time
from typing import Any

from _support import MIB, FakeSource, trace_entry
from torch_cudagraph_debug.memory_debug import MemoryRecorder, MemoryRun

SLOT = MIB
SLOTS_PER_SEGMENT = 64
BASE = 0x7F00_0000_0000


class Workload:
    """A slot allocator over default-pool and private-pool segments that writes the trace
    entries torch would, and renders the snapshot of its current state."""

    def __init__(self, seed: int = 0):
        self.rng = random.Random(seed)
        self.time_us = 1_795_000_000_000_000
        self.ring: list[dict[str, Any]] = []
        self.frames = [
            {"name": f"fn{i}", "filename": f"model/layer{i % 17}.py", "line": 10 + i}
            for i in range(400)
        ]
        self.sites = [
            [self.frames[j] for j in self.rng.sample(range(400), self.rng.randint(3, 6))]
            for _ in range(300)
        ]
        # (address, pool, stream) per segment; slot state: None or [site, requested, state].
        self.segments: list[tuple[int, tuple[int, int], int]] = []
        self.slots: list[list[Any]] = []
        self.free: dict[tuple[int, int], list[tuple[int, int]]] = {(0, 0): [], (1, 0): []}
        self.metadata = ""
        for s in range(72):
            pool, stream = ((1, 0), 7) if s >= 64 else ((0, 0), 0)
            address = BASE + s * (1 << 32)
            self.segments.append((address, pool, stream))
            self.slots.append([None] * SLOTS_PER_SEGMENT)
            self.trace("segment_alloc", address, SLOT * SLOTS_PER_SEGMENT, stream, None)
            self.free[pool].extend((s, i) for i in reversed(range(SLOTS_PER_SEGMENT)))
        self.metadata = ""

    def trace(self, action: str, addr: int, size: int, stream: int, frames: Any) -> None:
        self.time_us += 1
        self.ring.append(
            trace_entry(action, addr, size, stream, self.time_us, self.metadata, frames)
        )

    def address(self, slot: tuple[int, int]) -> int:
        return self.segments[slot[0]][0] + slot[1] * SLOT

    def alloc(self, site: int) -> tuple[int, int]:
        pool = (1, 0) if site >= 250 else (0, 0)
        slot = self.free[pool].pop()
        requested = self.rng.choice([SLOT, SLOT - 512, SLOT // 2 + 512, 3 * SLOT // 4])
        self.slots[slot[0]][slot[1]] = [site, requested, "active_allocated"]
        stream = self.segments[slot[0]][2]
        # torch's alloc entry reports the requested size; the frees report the block size.
        self.trace("alloc", self.address(slot), requested, stream, self.sites[site])
        return slot

    def free_slot(self, slot: tuple[int, int], *, pending: bool = False) -> None:
        block = self.slots[slot[0]][slot[1]]
        stream = self.segments[slot[0]][2]
        frames = self.sites[block[0]][:2]
        if block[2] == "active_allocated":
            self.trace("free_requested", self.address(slot), SLOT, stream, frames)
        if pending:
            block[2] = "active_pending_free"
            return
        self.trace("free_completed", self.address(slot), SLOT, stream, frames)
        self.slots[slot[0]][slot[1]] = None
        self.free[self.segments[slot[0]][1]].append(slot)

    def snapshot(self) -> dict[str, Any]:
        segments = []
        for (address, pool, stream), slots in zip(self.segments, self.slots, strict=True):
            blocks = []
            for i, block in enumerate(slots):
                at = address + i * SLOT
                if block is None:
                    blocks.append(
                        {
                            "address": at,
                            "size": SLOT,
                            "requested_size": 0,
                            "state": "inactive",
                            "frames": [],
                        }
                    )
                else:
                    blocks.append(
                        {
                            "address": at,
                            "size": SLOT,
                            "requested_size": block[1],
                            "state": block[2],
                            "frames": self.sites[block[0]],
                        }
                    )
            segments.append(
                {
                    "device": 0,
                    "address": address,
                    "total_size": SLOT * SLOTS_PER_SEGMENT,
                    "allocated_size": sum(
                        b["size"] for b in blocks if b["state"] == "active_allocated"
                    ),
                    "active_size": sum(b["size"] for b in blocks if b["state"] != "inactive"),
                    "requested_size": sum(b["requested_size"] for b in blocks),
                    "stream": stream,
                    "segment_type": "large",
                    "segment_pool_id": pool,
                    "is_expandable": False,
                    "frames": [],
                    "blocks": blocks,
                }
            )
        snap = {
            "segments": segments,
            "device_traces": [list(self.ring)],
            "allocator_settings": {},
            "external_annotations": [],
        }
        # torch records the snapshot's own entry (with the metadata set while it was
        # taken) after gathering the traces: it shows up in the next snapshot.
        self.trace("snapshot", 0, 0, 0, None)
        return snap

    def prelude(self) -> list[tuple[int, int]]:
        """Before the first point: long-lived blocks (some freed later)."""
        return [self.alloc(self.rng.randrange(0, 50)) for _ in range(600)]

    def after_start(self, entries: int, early: list[tuple[int, int]]) -> dict[str, int]:
        """Transients, leaks and frees of early blocks until the ring holds ``entries``."""
        rng = self.rng
        in_flight: list[tuple[int, int]] = []
        leaks = 0
        transients = 0
        while len(self.ring) < entries - 64:
            r = rng.random()
            if r < 0.004 and leaks < 1500 and len(self.free[(0, 0)]) > 200:
                self.alloc(rng.randrange(50, 100))
                leaks += 1
            elif r < 0.006 and early:
                self.free_slot(early.pop(rng.randrange(len(early))))
            else:
                site = rng.randrange(100, 300)
                pool = (1, 0) if site >= 250 else (0, 0)
                if len(in_flight) >= 48 or not self.free[pool]:
                    self.free_slot(in_flight.pop(rng.randrange(len(in_flight))))
                    continue
                in_flight.append(self.alloc(site))
                transients += 1
        for slot in in_flight[: len(in_flight) // 2]:
            self.free_slot(slot)
        for slot in in_flight[len(in_flight) // 2 :]:
            self.free_slot(slot, pending=True)
        return {"transient_allocs": transients, "leaks": leaks, "early_left": len(early)}


class Source(FakeSource):
    """What MemoryRecorder asks of torch, answered from the workload."""

    torch_version = "2.11.0+synthetic"
    free_bytes = 60 * 1024 * MIB

    def __init__(self, workload: Workload, entries: int):
        self.w = workload
        self.entries = entries
        self.taken = 0
        self.last: dict[str, Any] | None = None
        self.counts: dict[str, int] = {}
        self._early: list[tuple[int, int]] = []

    def get_metadata(self) -> str:
        return self.w.metadata

    def set_metadata(self, value: str) -> None:
        self.w.metadata = value

    def snapshot(self) -> dict[str, Any]:
        if self.taken == 0:
            self._early = self.w.prelude()
        else:
            meta, self.w.metadata = self.w.metadata, ""
            self.counts = self.w.after_start(self.entries, self._early)
            self.w.metadata = meta
        self.taken += 1
        self.last = self.w.snapshot()
        return self.last


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--entries", type=int, default=600_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()

    work = tempfile.mkdtemp(prefix="tcgd-p6-")
    workload = Workload()
    source = Source(workload, args.entries)
    t0 = time.perf_counter()
    with MemoryRecorder(name="p6", run_dir=os.path.join(work, "run"), _source=source) as rec:
        rec.record_point("start")
        rec.record_point("end")
    record_s = time.perf_counter() - t0
    assert source.last is not None
    path = os.path.join(work, "end.pickle")
    with open(path, "wb") as f:
        pickle.dump(source.last, f, protocol=pickle.HIGHEST_PROTOCOL)
    ring = len(source.last["device_traces"][0])

    run = MemoryRun.load(os.path.join(work, "run"))
    baseline, ours = [], []
    result = None
    for _ in range(args.repeat):
        t = time.perf_counter()
        with open(path, "rb") as f:
            pickle.load(f)
        baseline.append(time.perf_counter() - t)
        t = time.perf_counter()
        result = run.lifetimes()
        ours.append(time.perf_counter() - t)
    assert result is not None
    print(
        f"workload: synthetic _snapshot() pickle, {ring} history entries on device 0 "
        f"({os.path.getsize(path) / MIB:.1f} MiB pickle), {source.counts}, "
        f"recorded as a 2-point run in {record_s:.1f} s"
    )
    print(
        f"result: {len(result.cohorts)} cohorts, {result.tracked_generations} generations, "
        f"history {result.history}"
    )
    print(
        f"baseline pickle.load: min {min(baseline):.3f} s, median "
        f"{statistics.median(baseline):.3f} s"
    )
    print(f"ours run.lifetimes(): min {min(ours):.3f} s, median {statistics.median(ours):.3f} s")
    print(
        f"ratio ours/baseline: {min(ours) / min(baseline):.2f}x (P6 target: <= 0.5 s; "
        f"{'met' if min(ours) <= 0.5 else 'NOT met'})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
