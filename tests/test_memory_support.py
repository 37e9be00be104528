"""A fake caching allocator for the CPU memory tests: it produces snapshot dicts shaped
exactly like ``torch.cuda.memory._snapshot()``'s (torch 2.11: tuple pool ids, shared frame
dicts, per-device trace rings with ``snapshot`` entries carrying the metadata string), and
it answers the probe/recorder source methods (metadata, capture, ``mem_get_info``).

The tests at the bottom check the fake itself against the real fixtures recorded on the
GPU machine, so a drift between the two shows up here."""

from __future__ import annotations

import os
import pickle
from pathlib import Path
from typing import Any

from torch_cudagraph_debug.memory_debug import MemoryRecorder, MemoryRun

MIB = 1024 * 1024
DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")


class FakeAllocator:
    """Segments of blocks per device, pool and stream, with a bounded history ring."""

    torch_version = "2.11.0+fake"

    def __init__(
        self,
        *,
        devices: int = 1,
        history: bool = True,
        max_entries: int | None = None,
        markers: bool = True,
        context_bytes: int = 400 * MIB,
        total_bytes: int = 80 * 1024 * MIB,
    ):
        self.device_total = devices
        self.history = history
        self.max_entries = max_entries
        self.markers = markers
        self.context_bytes = context_bytes
        self.total_bytes = total_bytes
        self.segments: list[dict[str, Any]] = []
        self.rings: list[list[dict[str, Any]]] = [[] for _ in range(devices)]
        self.time_us = 1_795_000_000_000_000
        self.metadata = ""
        self.capture = False
        self.probe = (0, 0)
        self.synchronized: list[list[int]] = []
        self.metadata_log: list[str] = []
        self._next_address = 0x7F00_0000_0000
        # torch shares one dict per distinct frame across every entry.
        self._frames = {
            name: {"name": name, "filename": "model.py", "line": line}
            for line, name in enumerate(["forward", "step", "main"], start=10)
        }

    # ------------------------------------------------------------- allocator actions
    def _stack(self, *names: str) -> list[dict[str, Any]]:
        return [self._frames[n] for n in names]

    def _trace(self, device: int, action: str, addr: int, size: int, stream: int = 0) -> None:
        if not self.history:
            return
        self.time_us += 1
        entry = {
            "action": action,
            "addr": addr,
            "size": size,
            "stream": stream,
            "time_us": self.time_us,
            "compile_context": "N/A",
            "user_metadata": self.metadata,
            "frames": self._stack("forward", "main"),
        }
        ring = self.rings[device]
        ring.append(entry)
        if self.max_entries is not None and len(ring) > self.max_entries:
            del ring[0]

    def segment(
        self,
        size: int,
        *,
        device: int = 0,
        pool: tuple[int, int] = (0, 0),
        stream: int = 0,
        expandable: bool = False,
    ) -> int:
        """cudaMalloc's a segment of one inactive block; returns its address."""
        address = self._next_address
        self._next_address += 1 << 32
        self.segments.append(
            {
                "device": device,
                "address": address,
                "stream": stream,
                "pool": pool,
                "expandable": expandable,
                "blocks": [[size, size, "inactive", ()]],
            }
        )
        self._trace(device, "segment_map" if expandable else "segment_alloc", address, size, stream)
        return address

    def _find(self, address: int) -> tuple[dict[str, Any], int]:
        for segment in self.segments:
            at = segment["address"]
            for i, block in enumerate(segment["blocks"]):
                if at == address:
                    return segment, i
                at += block[0]
        raise KeyError(hex(address))

    def alloc(self, segment_address: int, size: int, requested: int | None = None) -> int:
        """Splits the segment's first inactive block that fits; returns the address."""
        segment = next(s for s in self.segments if s["address"] == segment_address)
        at = segment["address"]
        for i, block in enumerate(segment["blocks"]):
            if block[2] == "inactive" and block[0] >= size:
                rest = block[0] - size
                segment["blocks"][i] = [size, requested or size, "active_allocated", ("forward",)]
                if rest:
                    segment["blocks"].insert(i + 1, [rest, rest, "inactive", ()])
                self._trace(segment["device"], "alloc", at, size, segment["stream"])
                return at
            at += block[0]
        raise MemoryError("no inactive block fits")

    def free(self, address: int, *, pending: bool = False) -> None:
        segment, i = self._find(address)
        block = segment["blocks"][i]
        self._trace(segment["device"], "free_requested", address, block[0], segment["stream"])
        if pending:
            block[2] = "active_pending_free"
            return
        block[2], block[3] = "inactive", ()
        self._trace(segment["device"], "free_completed", address, block[0], segment["stream"])

    def release(self, segment_address: int) -> None:
        """empty_cache() on one fully inactive segment."""
        segment = next(s for s in self.segments if s["address"] == segment_address)
        assert all(b[2] == "inactive" for b in segment["blocks"])
        self.segments.remove(segment)
        size = sum(b[0] for b in segment["blocks"])
        self._trace(segment["device"], "segment_free", segment_address, size, segment["stream"])

    def grow(self, segment_address: int, size: int) -> None:
        """Maps more memory at the end of an expandable segment."""
        segment = next(s for s in self.segments if s["address"] == segment_address)
        assert segment["expandable"]
        end = segment["address"] + sum(b[0] for b in segment["blocks"])
        segment["blocks"].append([size, size, "inactive", ()])
        self._trace(segment["device"], "segment_map", end, size, segment["stream"])

    def churn(self, segment_address: int, count: int, size: int = 512) -> None:
        """Allocation/free loops: history grows by 3 entries per iteration."""
        for _ in range(count):
            address = self.alloc(segment_address, size)
            self.free(address)

    # ------------------------------------------------------------- snapshot source
    def check_available(self) -> None:
        pass

    def current_device(self) -> int:
        return 0

    def device_count(self) -> int:
        return self.device_total

    def capturing(self) -> bool:
        return self.capture

    def synchronize(self, devices: list[int]) -> None:
        self.synchronized.append(list(devices))

    def get_metadata(self) -> str | None:
        return self.metadata if self.markers else None

    def set_metadata(self, value: str) -> None:
        self.metadata_log.append(value)
        self.metadata = value

    def reserved(self, device: int = 0) -> int:
        return sum(sum(b[0] for b in s["blocks"]) for s in self.segments if s["device"] == device)

    def mem_get_info(self, device: int) -> tuple[int, int]:
        used = self.context_bytes + self.reserved(device) + (self.probe[0] if device == 0 else 0)
        return self.total_bytes - used, self.total_bytes

    def probe_memory(self) -> tuple[int, int]:
        return self.probe

    def snapshot(self) -> dict[str, Any]:
        """What ``torch.cuda.memory._snapshot()`` returns. Like torch 2.11, taking it
        records a ``snapshot`` entry carrying the current metadata *after* the traces were
        gathered: it shows up in the next snapshot."""
        segments = []
        for s in self.segments:
            blocks = []
            at = s["address"]
            for size, requested, state, stack in s["blocks"]:
                blocks.append(
                    {
                        "address": at,
                        "size": size,
                        "requested_size": requested if state != "inactive" else 0,
                        "state": state,
                        "frames": self._stack(*stack),
                    }
                )
                at += size
            total = sum(b["size"] for b in blocks)
            segments.append(
                {
                    "device": s["device"],
                    "address": s["address"],
                    "total_size": total,
                    "allocated_size": sum(
                        b["size"] for b in blocks if b["state"] == "active_allocated"
                    ),
                    "active_size": sum(b["size"] for b in blocks if b["state"] != "inactive"),
                    "requested_size": sum(b["requested_size"] for b in blocks),
                    "stream": s["stream"],
                    "segment_type": "large" if total >= MIB else "small",
                    "segment_pool_id": tuple(s["pool"]),
                    "is_expandable": s["expandable"],
                    "frames": [],
                    "blocks": blocks,
                }
            )
        snapshot = {
            "segments": segments,
            "device_traces": [list(ring) for ring in self.rings],
            "allocator_settings": {},
            "external_annotations": [],
        }
        for device in range(self.device_total):
            if self.history:
                active = sum(
                    sum(b["size"] for b in s["blocks"] if b["state"] != "inactive")
                    for s in snapshot["segments"]
                    if s["device"] == device
                )
                self._trace(device, "snapshot", 0, active)
                self.rings[device][-1].pop("frames")
        return snapshot

    # ------------------------------------------------------------- lifetime workloads
    def lifetime_alloc(
        self, segment_address: int, size: int, site: str, requested: int | None = None
    ) -> int:
        """``alloc`` whose history entry and live block both carry the stack
        ``[site, main]``, as torch records one context for both."""
        if site not in self._frames:
            self._frames[site] = {
                "name": site,
                "filename": "model.py",
                "line": 100 + len(self._frames),
            }
        address = self.alloc(segment_address, size, requested)
        segment, i = self._find(address)
        segment["blocks"][i][3] = (site, "main")
        if self.history:
            self.rings[segment["device"]][-1]["frames"] = self._stack(site, "main")
        return address

    def lifetime_complete_free(self, address: int) -> None:
        """The allocator polls a pending stream-ordered free: the block becomes reusable."""
        segment, i = self._find(address)
        block = segment["blocks"][i]
        assert block[2] == "active_pending_free"
        block[2], block[3] = "inactive", ()
        self._trace(segment["device"], "free_completed", address, block[0], segment["stream"])

    # ------------------------------------------------------------- peaks, pool owners
    def beyond_current(self, device: int = 0) -> tuple[int, int, int]:
        """(reserved, allocated, active) of one device now."""
        blocks = [b for s in self.segments if s["device"] == device for b in s["blocks"]]
        return (
            sum(b[0] for b in blocks),
            sum(b[0] for b in blocks if b[2] == "active_allocated"),
            sum(b[0] for b in blocks if b[2] != "inactive"),
        )

    def beyond_observe(self, device: int = 0) -> None:
        """The allocator's running peaks take in the current state (torch updates them
        on every allocation; tests call this where a peak happens)."""
        peaks = self.__dict__.setdefault("beyond_peaks", {})
        now = self.beyond_current(device)
        before = peaks.get(device, (0, 0, 0))
        peaks[device] = tuple(max(a, b) for a, b in zip(now, before, strict=True))

    def memory_stats(self, device: int) -> dict[str, int]:
        """The keys of ``torch.cuda.memory_stats()`` that points read."""
        self.beyond_observe(device)
        reserved, allocated, active = self.__dict__["beyond_peaks"][device]
        counters = self.__dict__.setdefault("beyond_counters", {})
        retries, ooms = counters.get(device, (0, 0))
        return {
            "reserved_bytes.all.peak": reserved,
            "allocated_bytes.all.peak": allocated,
            "active_bytes.all.peak": active,
            "num_alloc_retries": retries,
            "num_ooms": ooms,
        }

    def reset_peak_memory_stats(self, device: int) -> None:
        self.__dict__.setdefault("beyond_resets", []).append(device)
        self.__dict__.setdefault("beyond_peaks", {})[device] = self.beyond_current(device)

    def beyond_retry(self, device: int = 0, *, retries: int = 1, ooms: int = 0) -> None:
        counters = self.__dict__.setdefault("beyond_counters", {})
        r, o = counters.get(device, (0, 0))
        counters[device] = (r + retries, o + ooms)

    def graph_trees(self) -> Any:
        """A stand-in for ``torch._inductor.cudagraph_trees`` (set ``beyond_trees``)."""
        return self.__dict__.get("beyond_trees")

    # ------------------------------------------------------------- attribution workloads
    def attribution_frame(self, name: str, line: int, filename: str = "model.py") -> None:
        """Makes ``name`` usable in ``attribution_alloc`` stacks (one shared dict, as
        torch shares frame dicts)."""
        self._frames.setdefault(name, {"name": name, "filename": filename, "line": line})

    def attribution_alloc(
        self,
        segment_address: int,
        size: int,
        stack: tuple[str, ...],
        requested: int | None = None,
    ) -> int:
        """``alloc`` whose live block carries ``stack`` (``()``: a block without frames,
        as when history recorded no context for it)."""
        address = self.alloc(segment_address, size, requested)
        segment, i = self._find(address)
        segment["blocks"][i][3] = tuple(stack)
        return address

    def attribution_oom(self, device: int, size: int, device_free: int) -> None:
        """An ``oom`` trace entry: the requested size and what CUDA still had free."""
        if not self.history:
            return
        self.time_us += 1
        self.rings[device].append(
            {
                "action": "oom",
                "addr": 0,
                "size": size,
                "stream": 0,
                "time_us": self.time_us,
                "device_free": device_free,
                "compile_context": "N/A",
                "user_metadata": self.metadata,
                "frames": self._stack("step", "main"),
            }
        )


def with_small_block() -> tuple[FakeAllocator, int]:
    """A fake allocator whose default pool holds a 2 MiB segment with one small block
    (1 KiB, 16 bytes requested); returns it and the segment's address."""
    alloc = FakeAllocator()
    segment = alloc.segment(2 * MIB)
    alloc.alloc(segment, 1024, requested=16)
    return alloc, segment


def capture_scenario(alloc: FakeAllocator) -> None:
    """What a hand capture of a 16 MiB allocation does: a new private pool (1, 0) on the
    capture stream with one 16 MiB active block."""
    segment = alloc.segment(16 * MIB, pool=(1, 0), stream=0x5A5A)
    alloc.alloc(segment, 16 * MIB)


def two_runs(tmp_path: Path, second_capture_bytes: int = 32 * MIB) -> list[MemoryRun]:
    """Two independent runs of the same program: a 2 MiB default segment, then a capture
    pool of 16 MiB (run a) or ``second_capture_bytes`` (run b), fully allocated."""
    runs = []
    for name, capture in (("a", 16 * MIB), ("b", second_capture_bytes)):
        alloc = FakeAllocator()
        alloc.alloc(alloc.segment(2 * MIB), 1024)
        with MemoryRecorder(name=name, run_dir=tmp_path / name, _source=alloc) as rec:
            rec.record_point("start")
            seg = alloc.segment(capture, pool=(1, 0), stream=0x77)
            alloc.alloc(seg, capture)
            rec.record_point("captured")
        runs.append(rec.result)
    return runs


# The files a memory run group's summary writes.
GROUP_SUMMARY_FILES = [
    "point_aggregates.csv",
    "rank_devices.csv",
    "rank_points.csv",
    "report.html",
    "report.json",
    "report.txt",
]


def private_pool_reserved_row(phases: dict[str, Any]) -> dict[str, Any]:
    """The row of a phase comparison's JSON report for the reserved bytes of the private
    pool (1, 0), once every row's identity is checked to hold."""
    assert phases["identity_failures"] == 0
    return next(
        r
        for r in phases["rows"]
        if r["level"] == "pool" and r["baseline_pool"] == [1, 0] and r["metric"] == "reserved"
    )


def dump(snapshot: dict[str, Any], path: str, protocol: int) -> str:
    with open(path, "wb") as f:
        pickle.dump(snapshot, f, protocol=protocol)
    return path


# ----------------------------------------------------------------- the fake vs torch


def _keys(rows: list[dict[str, Any]]) -> set[str]:
    return set().union(*(r.keys() for r in rows)) if rows else set()


class _DataOnly(pickle.Unpickler):
    """Python's unpickler with every global refused: only plain data can load."""

    def find_class(self, module: str, name: str) -> Any:
        raise pickle.UnpicklingError(f"global {module}.{name} refused")


def load_fixture(name: str) -> dict[str, Any]:
    with open(os.path.join(DATA, name), "rb") as f:
        return _DataOnly(f).load()


def test_fake_snapshots_have_the_shape_of_real_ones() -> None:
    real = load_fixture("memory_default_after.pickle")
    alloc = FakeAllocator()
    alloc.alloc(alloc.segment(2 * MIB), 1024)
    alloc.snapshot()
    # The first snapshot's own entry appears in the second one, as in torch.
    fake = alloc.snapshot()
    assert set(fake) == set(real)
    assert _keys(fake["segments"]) == _keys(real["segments"])
    real_blocks = [b for s in real["segments"] for b in s["blocks"]]
    fake_blocks = [b for s in fake["segments"] for b in s["blocks"]]
    assert _keys(fake_blocks) == _keys(real_blocks)
    real_traces = [t for d in real["device_traces"] for t in d if t["action"] != "snapshot"]
    fake_traces = [t for d in fake["device_traces"] for t in d if t["action"] != "snapshot"]
    assert _keys(fake_traces) == _keys(real_traces)
    real_marker = next(t for d in real["device_traces"] for t in d if t["action"] == "snapshot")
    fake_marker = next(t for d in fake["device_traces"] for t in d if t["action"] == "snapshot")
    assert set(fake_marker) == set(real_marker)
    assert type(fake["segments"][0]["segment_pool_id"]) is type(
        real["segments"][0]["segment_pool_id"]
    )
