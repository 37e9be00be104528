"""P8: host cost of committing points of full payloads, against pyarrow writing the same
bytes in the same process.

Ours: ``TensorRecorder(payload="full")`` over CPU tensors, from the recorder's creation to
``finish()``: the private copy ``observe`` takes, summaries, digests, the three parts per
point with their fsyncs, and the manifest replace per point. Points are committed on the
recorder's writer thread; "waited at point exits" is the part of that time the recording
thread spent leaving ``record_point`` blocks (checking and handing each point over, or
waiting for room when two points are already queued).

Baseline: per point, one pyarrow Table with a ``large_binary`` column holding the same
chunks (the point's tensors, split at the store's 16 MiB chunk size), written with
``pyarrow.parquet.write_table`` (zstd at the level our parts use, no dictionary, as our
payload column) and fsynced: as many files as points. Building the table is timed too, as
it is the baseline's copy of the bytes.

Best of ``--reps`` repetitions each, every repetition into a fresh directory.

    python benches/write_points.py            # full workloads
    python benches/write_points.py --quick    # smaller workloads, for a smoke run
    python benches/write_points.py --step-s 0.25   # a 0.25 s training step between points
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import torch
from torch_cudagraph_debug import __version__
from torch_cudagraph_debug.tensor_debug import TensorRecorder

MIB = 1 << 20
# The store's payload chunk size (rust/tcgd-store/src/schema.rs, PAYLOAD_CHUNK_BYTES).
CHUNK_BYTES = 16 * MIB
# Our payload parts are written with zstd level 3 (rust/tcgd-store/src/parts.rs).
OUR_ZSTD_LEVEL = 3


@dataclass(frozen=True)
class Workload:
    name: str
    points: int
    tensors: int
    size: int  # bytes per tensor
    kind: str  # "random" or "zeros"

    @property
    def nbytes(self) -> int:
        return self.points * self.tensors * self.size

    @property
    def shape(self) -> str:
        size = f"{self.size // MIB} MiB" if self.size >= MIB else f"{self.size >> 10} KiB"
        return f"{self.points} x {self.tensors} x {size}"

    def make(self) -> list[list[torch.Tensor]]:
        g = torch.Generator().manual_seed(0)
        numel = self.size // 4
        values = []
        for i in range(self.points):
            point = []
            for j in range(self.tensors):
                if self.kind == "random":
                    t = torch.randn(numel, generator=g)
                else:
                    # Zeros but one element, so no two payloads share a digest: the
                    # writer's dedupe would otherwise store a single copy and skew the
                    # comparison.
                    t = torch.zeros(numel)
                    t[0] = i * self.tensors + j + 1
                point.append(t)
            values.append(point)
        return values


FULL = [
    Workload("random", points=8, tensors=16, size=MIB, kind="random"),
    Workload("random", points=8, tensors=4, size=16 * MIB, kind="random"),
    Workload("zeros", points=8, tensors=16, size=MIB, kind="zeros"),
    # Small tensors: what a point costs whatever its size (files, fsyncs, manifest).
    Workload("random", points=8, tensors=16, size=4 << 10, kind="random"),
]
QUICK = [
    Workload("random", points=4, tensors=8, size=MIB, kind="random"),
    Workload("random", points=2, tensors=2, size=16 * MIB, kind="random"),
    Workload("zeros", points=4, tensors=8, size=MIB, kind="zeros"),
    Workload("random", points=4, tensors=8, size=4 << 10, kind="random"),
]


def write_ours(
    values: list[list[torch.Tensor]], run_dir: Path, step_s: float = 0.0
) -> tuple[float, float]:
    """Seconds from creating the recorder to ``finish()``, and the part of them spent
    leaving ``record_point`` blocks (what a training step waits for at each point).
    ``step_s``: a pause after each point standing in for the training step's own work
    (the time is not counted)."""
    start = time.perf_counter()
    waited = 0.0
    recorder = TensorRecorder(name="bench", run_dir=run_dir, payload="full")
    for i, point in enumerate(values):
        with recorder.record_point(f"p{i}"):
            for j, t in enumerate(point):
                recorder.observe(t, name=f"t{j}")
            leaving = time.perf_counter()
        waited += time.perf_counter() - leaving
        if step_s:
            time.sleep(step_s)
    recorder.finish()
    return time.perf_counter() - start - step_s * len(values), waited


def chunks_table(point: list[torch.Tensor]) -> pa.Table:
    flat = torch.cat([t.view(torch.uint8) for t in point])
    sizes = []
    for t in point:
        n = t.numel() * t.element_size()
        sizes += [CHUNK_BYTES] * (n // CHUNK_BYTES) + ([n % CHUNK_BYTES] if n % CHUNK_BYTES else [])
    offsets = torch.zeros(len(sizes) + 1, dtype=torch.int64)
    offsets[1:] = torch.tensor(sizes, dtype=torch.int64).cumsum(0)
    data = pa.LargeBinaryArray.from_buffers(
        pa.large_binary(),
        len(sizes),
        [None, pa.py_buffer(offsets.numpy()), pa.py_buffer(flat.numpy())],
    )
    return pa.table({"data": data})


def write_pyarrow(values: list[list[torch.Tensor]], out_dir: Path, level: int) -> float:
    start = time.perf_counter()
    out_dir.mkdir()
    for i, point in enumerate(values):
        path = out_dir / f"part-{i + 1:06d}.parquet"
        pq.write_table(
            chunks_table(point),
            path,
            compression="zstd",
            compression_level=level,
            use_dictionary=False,
        )
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    return time.perf_counter() - start


def check_baseline_bytes(values: list[list[torch.Tensor]], out_dir: Path) -> None:
    # A baseline that wrote fewer bytes would flatter it; read one part back once.
    got = pq.read_table(out_dir / "part-000001.parquet").column("data").to_pylist()
    want = b"".join(t.numpy().tobytes() for t in values[0])
    assert b"".join(got) == want, "pyarrow baseline did not write the point's bytes"


def du(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="smaller workloads")
    parser.add_argument("--reps", type=int, default=3, help="repetitions, best taken")
    parser.add_argument(
        "--step-s",
        type=float,
        default=0.0,
        help="seconds of simulated training work after each of our points (not timed)",
    )
    parser.add_argument(
        "--dir", type=Path, default=None, help="where to write (default: a temp dir)"
    )
    parser.add_argument(
        "--pyarrow-level",
        type=int,
        default=OUR_ZSTD_LEVEL,
        help="zstd level of the baseline (default: the level our parts use)",
    )
    args = parser.parse_args()
    if args.reps < 1:
        parser.error("--reps must be at least 1")

    root = Path(tempfile.mkdtemp(prefix="tcgd-bench-", dir=args.dir))
    print(
        f"torch-cudagraph-debug {__version__}, torch {torch.__version__}, "
        f"pyarrow {pa.__version__}, {os.cpu_count()} cores, {platform.platform()}"
    )
    print(f"writing under {root}; best of {args.reps}; baseline zstd level {args.pyarrow_level}")
    columns = [
        "workload",
        "points x tensors x size",
        "payload MiB",
        "on disk MiB (ours / pyarrow)",
        "ours s",
        "pyarrow s",
        "ours MB/s",
        "pyarrow MB/s",
        "ours/pyarrow",
        "ours: waited at point exits s",
    ]
    # A Markdown table, so that the figures can be pasted into docs/benchmarks.md as run.
    print("| " + " | ".join(columns) + " |")
    print("|" + "|".join(" --- " for _ in columns) + "|")
    try:
        for workload in QUICK if args.quick else FULL:
            values = workload.make()
            ours, theirs, waits = [], [], []
            for rep in range(args.reps):
                run_dir = root / f"ours-{rep}"
                total, waited = write_ours(values, run_dir, args.step_s)
                ours.append(total)
                waits.append(waited)
                out_dir = root / f"pyarrow-{rep}"
                theirs.append(write_pyarrow(values, out_dir, args.pyarrow_level))
                if rep == 0:
                    check_baseline_bytes(values, out_dir)
                    disk = f"{du(run_dir) / MIB:.2f} / {du(out_dir) / MIB:.2f}"
                shutil.rmtree(run_dir)
                shutil.rmtree(out_dir)
            t_ours, t_theirs = min(ours), min(theirs)
            mb = workload.nbytes / 1e6
            row = [
                workload.name,
                workload.shape,
                f"{workload.nbytes / MIB:g}",
                disk,
                f"{t_ours:.3f}",
                f"{t_theirs:.3f}",
                f"{mb / t_ours:.0f}",
                f"{mb / t_theirs:.0f}",
                f"{t_ours / t_theirs:.2f}",
                f"{min(waits):.3f}",
            ]
            print("| " + " | ".join(row) + " |", flush=True)
            del values
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
