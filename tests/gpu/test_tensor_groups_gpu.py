"""Tensor run groups recorded by real CUDA graph replays: two processes on one GPU, each a
rank of a world of two, record into one job root at once; the group summary, a group
comparison and a rank-against-rank comparison read what each rank captured (run on the GPU
machine; the two-GPU variant is scripts/gpu-multirank)."""

from __future__ import annotations

import textwrap

import torch
from ranks import run_ranks
from torch_cudagraph_debug.tensor_debug import TensorRunGroup, compare_run_groups, compare_runs

# A rank captures one graph observing `hidden` (rank + offset, so it differs by rank and by
# the offset) and `shared` (the same on every rank), then replays it inside three points;
# replay k adds k to the input, so every point has its own values.
RANK = textwrap.dedent(
    """
    import sys, torch
    from torch_cudagraph_debug.tensor_debug import TensorRecorder
    root, offset = sys.argv[1], float(sys.argv[2])
    rank = int(__import__("os").environ["RANK"])
    x = torch.zeros(64, device="cuda")
    rec = TensorRecorder(name="job", execution="cuda_graph", run_dir=root, group_id="gpu")
    graph = torch.cuda.CUDAGraph()
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream), torch.cuda.graph(graph, stream=stream):
        rec.observe(x + rank + offset, name="hidden")
        rec.observe(x * 2, name="shared")
    torch.cuda.current_stream().wait_stream(stream)
    for step in range(3):
        x.fill_(step)
        with rec.record_point(f"step{step}"):
            graph.replay()
    rec.finish()  # complete=True; close() alone would leave the run incomplete
    rec.close()
    """
)


def _job(root, offsets: list[float]) -> None:
    run_ranks(RANK, [[str(root), str(offset)] for offset in offsets])


def test_two_gpu_processes_record_one_tensor_run_group(tmp_path) -> None:
    _job(tmp_path / "ref", [0.0, 0.0])
    _job(tmp_path / "cand", [0.0, 0.5])  # rank 1's hidden is off by 0.5 in the candidate

    group = TensorRunGroup.load(tmp_path / "ref")
    assert group.ranks == (0, 1) and group.complete and group.world_size == 2
    assert group.labels == ("step0", "step1", "step2")
    assert group.warnings == ()
    summary = group.summary()
    counts = {(p.rank, p.label): p.observation_count for p in summary.rank_points}
    assert counts == {(r, f"step{s}"): 2 for r in (0, 1) for s in range(3)}

    # What each rank captured, replay by replay: hidden = step + rank, shared = 2 * step.
    for rank in (0, 1):
        run = group[rank]
        assert run.rank == rank and run.complete
        for step in range(3):
            point = run[f"step{step}"]
            hidden = point.tensor("hidden")
            assert hidden.device.type == "cpu" and hidden.shape == (64,)
            assert torch.equal(hidden, torch.full((64,), float(step + rank)))
            assert torch.equal(point.tensor("shared"), torch.full((64,), 2.0 * step))

    same = compare_run_groups(group, tmp_path / "ref")
    assert same.status == "match" and [r.status for r in same.ranks] == ["match", "match"]

    differing = compare_run_groups(group, TensorRunGroup.load(tmp_path / "cand"))
    assert differing.status == "mismatch"
    assert [r.status for r in differing.ranks] == ["match", "mismatch"]
    assert differing.first_issue.rank == 1

    # Ranks against each other: hidden differs by construction, shared matches.
    across = compare_runs(group[0], group[1])
    assert across.status == "mismatch"
    statuses = {
        (p.position, o.name): o.status
        for p in across.point_comparisons
        for o in p.observation_comparisons
    }
    assert set(statuses.values()) == {"mismatch", "match"}
    assert {name for (_, name), status in statuses.items() if status == "mismatch"} == {"hidden"}
