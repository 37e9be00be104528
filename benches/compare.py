"""P7: comparing two runs of float32 payloads (1 GiB each by default).

Prints the workload, the baseline (``torch.allclose`` over the same tensors, in this
process), our figures and the ratios:

- **ours, runs on disk**: ``compare_runs(ref_dir, cand_dir)`` end to end: the engine opens
  both runs, reads every payload through the store's reader (Parquet decode, zstd,
  digest check), and compares element-wise. The runs were just written, so their files
  are in the page cache.
- **ours, in memory**: the same tensors already in memory (``compare_points`` over points
  whose payloads are the tensors): the engine alone.
- **store read only**: every payload of both runs read through the Python ``RunReader``
  (the store's reader plus one copy into Python bytes), no comparison: what reading costs.
- **baseline**: ``torch.allclose(candidate, reference, rtol, atol)`` per tensor over the
  same tensors in memory, with the same tolerances.

Throughput is payload bytes of one side (1 GiB = 1.074 GB) per second; every figure is
the best of ``--repeat`` rounds. Run from the repository root in the project's virtualenv:

    python benches/compare.py [--gib 1] [--tensors 16] [--repeat 3]
"""

from __future__ import annotations

import argparse
import datetime as dt
import shutil
import tempfile
import time
from pathlib import Path

import torch
from torch_cudagraph_debug import _native
from torch_cudagraph_debug._torch_bridge import host_bytes, summarize
from torch_cudagraph_debug.tensor_debug import (
    TensorComparisonOptions,
    TensorObservation,
    TensorPoint,
    TensorRecorder,
    compare_points,
    compare_runs,
)


def best_of(repeat: int, fn) -> tuple[float, object]:
    best, result = float("inf"), None
    for _ in range(repeat):
        start = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - start)
    return best, result


def in_memory_point(tensors: list[torch.Tensor]) -> TensorPoint:
    observations = []
    for i, t in enumerate(tensors):
        observations.append(
            TensorObservation(
                order=i,
                name=f"t{i}",
                invocation_index=0,
                shape=tuple(t.shape),
                stride=tuple(t.stride()),
                dtype=t.dtype,
                source_device="cpu",
                nbytes=t.numel() * t.element_size(),
                payload="full",
                digest=_native.content_digest(host_bytes(t)),
                summary=summarize(t),
                site=None,
                _load=lambda t=t: t,
            )
        )
    return TensorPoint(
        index=0,
        label="step0",
        timestamp=dt.datetime.now(dt.timezone.utc),
        metadata={},
        replay_index=None,
        observations=tuple(observations),
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gib", type=float, default=1.0, help="payload GiB per run (1)")
    parser.add_argument("--tensors", type=int, default=16, help="tensors per run (16)")
    parser.add_argument("--repeat", type=int, default=3, help="rounds, best is kept (3)")
    parser.add_argument("--dir", help="where to write the runs (default: a temporary dir)")
    args = parser.parse_args()

    total = int(args.gib * (1 << 30))
    numel = total // 4 // args.tensors
    nbytes = numel * 4 * args.tensors
    options = TensorComparisonOptions()
    root = Path(args.dir or tempfile.mkdtemp(prefix="tcgd-bench-compare-"))
    try:
        g = torch.Generator().manual_seed(0)
        ref = [torch.randn(numel, generator=g) for _ in range(args.tensors)]
        # A relative change of 1e-7: every digest differs, every element is within rtol,
        # so both sides must read and compare everything.
        cand = [r * (1 + 1e-7 * torch.randn(numel, generator=g)) for r in ref]
        for name, tensors in (("reference", ref), ("candidate", cand)):
            with TensorRecorder(name=name, run_dir=root / name) as rec:
                with rec.record_point("step0"):
                    for i, t in enumerate(tensors):
                        rec.observe(t, name=f"t{i}")

        def baseline() -> bool:
            return all(
                torch.allclose(c, r, rtol=options.rtol, atol=options.atol)
                for r, c in zip(ref, cand, strict=True)
            )

        def on_disk() -> str:
            return compare_runs(root / "reference", root / "candidate", options=options).status

        ref_point, cand_point = in_memory_point(ref), in_memory_point(cand)

        def in_memory() -> str:
            return compare_points(ref_point, cand_point, options=options).status

        def store_read() -> int:
            read = 0
            for name in ("reference", "candidate"):
                reader = _native.RunReader(str(root / name))
                digests = reader.table("observations").column("digest").to_pylist()
                for digest in digests:
                    read += len(reader.payload(digest))
            return read

        t_base, allclose = best_of(args.repeat, baseline)
        t_disk, status_disk = best_of(args.repeat, on_disk)
        t_mem, status_mem = best_of(args.repeat, in_memory)
        t_read, _ = best_of(args.repeat, store_read)
        assert allclose is True and status_disk == status_mem == "match", (
            allclose,
            status_disk,
            status_mem,
        )

        gb = nbytes / 1e9
        print(
            f"workload: 2 runs x {args.tensors} float32 tensors x {numel * 4 / 2**20:.0f} MiB "
            f"= {nbytes / 2**30:.2f} GiB per run; every digest differs, every element within "
            f"rtol={options.rtol} atol={options.atol}; torch {torch.__version__}, "
            f"{torch.get_num_threads()} threads"
        )
        rows = [
            ("baseline: torch.allclose, in memory", t_base),
            ("ours: compare_runs, runs on disk", t_disk),
            ("ours: compare_points, in memory", t_mem),
            ("store read only (both runs, via RunReader)", t_read),
        ]
        print(f"| {'what':<44} | {'s':>7} | {'GB/s':>6} | {'vs allclose':>11} |")
        print(f"| {'-' * 44} | {'-' * 7} | {'-' * 6} | {'-' * 11} |")
        for what, t in rows:
            print(f"| {what:<44} | {t:7.3f} | {gb / t:6.2f} | {t_base / t:10.2f}x |")
    finally:
        if not args.dir:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
