"""Memory run groups on a real CUDA allocator: two processes on one GPU, each a rank of a
world of two, record into one job root at once; the group summary and the group phase
comparison see each rank's own graph-private pool (run on the GPU machine)."""

from __future__ import annotations

import textwrap

from ranks import run_ranks
from torch_cudagraph_debug.memory_debug import MemoryRunGroup, compare_run_group_phases

MIB = 1024 * 1024

# A rank captures a graph that allocates `mib` MiB in its private pool between the
# `before` and `after` points.
RANK = textwrap.dedent(
    """
    import sys, torch
    from torch_cudagraph_debug.memory_debug import MemoryRecorder
    root, mib = sys.argv[1], int(sys.argv[2])
    x = torch.ones(256, device="cuda")
    torch.cuda.synchronize()
    with MemoryRecorder(name="job", run_dir=root, group_id="gpu") as rec:
        rec.record_point("before")
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            y = torch.empty(mib * 1024 * 1024 // 4, device="cuda") + x.sum()
        torch.cuda.synchronize()
        rec.record_point("after")
    """
)


def _job(root, sizes: list[int]) -> None:
    run_ranks(RANK, [[str(root), str(mib)] for mib in sizes])


def test_two_gpu_processes_are_two_ranks(tmp_path) -> None:
    base, cand = tmp_path / "base", tmp_path / "cand"
    _job(base, [16, 48])
    _job(cand, [32, 48])
    group = MemoryRunGroup.load(base)
    assert group.ranks == (0, 1) and group.complete and group.group_id == "gpu"
    summary = group.summary()
    private = {
        (a.label, a.metric): a
        for a in summary.point_aggregates
        if a.scope == "private" and a.metric == "allocated_bytes"
    }
    after = private[("after", "allocated_bytes")]
    assert after.min_rank == 0 and after.max_rank == 1 == after.worst_rank
    assert after.min_bytes >= 16 * MIB and after.max_bytes >= 48 * MIB
    assert after.spread_bytes >= 32 * MIB - 2 * MIB
    devices = [d for d in summary.rank_devices if d.label == "after"]
    assert {d.rank for d in devices} == {0, 1}
    # One GPU, two processes: each sees the whole device's use, so the samples are
    # device-global and never summed.
    assert all(d.used_bytes and d.total_bytes for d in devices)

    cand_group = MemoryRunGroup.load(cand)
    pools = {}
    for rank in (0, 1):
        b = [k for k in group[rank]["after"].pool_stats if k.pool_id != (0, 0)]
        c = [k for k in cand_group[rank]["after"].pool_stats if k.pool_id != (0, 0)]
        assert len(b) == 1 and len(c) == 1
        pools[rank] = {b[0]: c[0]}
    result = compare_run_group_phases(
        group,
        cand_group,
        baseline_start="before",
        baseline_end="after",
        candidate_start="before",
        candidate_end="after",
        pool_mappings=pools,
    )
    assert result.ranks == [0, 1] and result.identity_failures == 0
    agg = next(
        a for a in result.phase_aggregates if a.scope == "private" and a.metric == "allocated_bytes"
    )
    # Rank 0 grew 16 MiB more in the candidate, rank 1 the same.
    assert agg.change_gap.max_rank == 0 and agg.change_gap.max_bytes >= 15 * MIB
    assert abs(agg.change_gap.min_bytes) < 2 * MIB and agg.change_gap.min_rank == 1
