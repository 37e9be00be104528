"""Graph Trees pool owners and compile-plugin memory points on a real allocator: a small
model compiled with backend="tcgd" / mode="reduce-overhead" and a [memory] table."""

from __future__ import annotations

import pickle

import torch
from compile_models import MLP, compile_on_graph_trees
from torch_cudagraph_debug.memory_debug import MemoryRecorder, MemoryRun

CONFIG = {
    "version": 1,
    "run": {"name": "cg"},
    "select": [{"ops": ["aten.addmm", "aten.mm", "aten.relu"]}],
    "memory": {"points": ["before_recording", "after_recording", "after_warmup"]},
}


def _graph_trees_pool(point) -> tuple[int, int]:
    (owner,) = [o for o in point.pool_owners if o.kind == "graph_trees"]
    return owner.pool_id


def test_memory_points_around_graph_trees_recordings(tmp_path) -> None:
    torch.manual_seed(0)
    model = MLP(64, 128, 32).cuda()
    compiled, session = compile_on_graph_trees(model, CONFIG, tmp_path / "run")
    with torch.no_grad():
        for _ in range(4):
            compiled(torch.randn(16, 64, device="cuda"))
    session.finish()
    run = MemoryRun.load(tmp_path / "run", name="cg-memory")
    kinds = [p.metadata["point"] for p in run.points]
    # Inference: one warmup run, then one recording, then replays (no points).
    assert kinds == ["after_warmup", "before_recording", "after_recording"], kinds
    after = run.points[-1]
    assert after.metadata["function_kind"] == "inference"
    assert after.metadata["graph_id"] == 0
    (owner,) = [o for o in after.pool_owners if o.kind == "graph_trees"]
    assert owner.graph_ids == [0]
    assert owner.function_kinds == ["inference"]
    assert owner.description.startswith("graph-trees cuda:0 graph 0 inference compile ")
    pool = owner.pool_id
    # The recording allocates the graph's outputs and workspace in the private pool.
    before = run.points[-2].pool_stats
    grown = after.pool_stats
    key = next(k for k in grown if k.pool_id == pool)
    before_reserved = next((s.reserved_bytes for k, s in before.items() if k.pool_id == pool), 0)
    assert grown[key].reserved_bytes > 0
    assert grown[key].reserved_bytes >= before_reserved
    assert f"pool[{pool[0]},{pool[1]}]" in run.timeline().to_text()
    assert owner.description in run.timeline().to_text()


def test_training_pool_owner_names_forward_and_backward(tmp_path) -> None:
    torch.manual_seed(1)
    model = MLP(64, 128, 32).cuda()
    compiled = torch.compile(model, mode="reduce-overhead")
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    with MemoryRecorder(name="train", run_dir=tmp_path / "mem", reset_peaks=True) as rec:
        rec.record_point("start")
        for _ in range(4):
            torch.compiler.cudagraph_mark_step_begin()
            # Gradients set to None each step, as a training loop does: the backward
            # graph's outputs become the .grad tensors, and accumulating into last step's
            # would read an output that the next replay overwrote.
            optimizer.zero_grad(set_to_none=True)
            compiled(torch.randn(16, 64, device="cuda")).sum().backward()
            optimizer.step()
        rec.record_point("trained")
    run = MemoryRun.load(tmp_path / "mem")
    trained = run["trained"]
    (owner,) = [o for o in trained.pool_owners if o.kind == "graph_trees"]
    # One Graph Trees pool per device serves every compiled function of the process: an
    # earlier test's inference graph may share it, the training graphs must be there.
    assert owner.function_kinds[:2] == ["forward", "backward"] or {
        "forward",
        "backward",
    } <= set(owner.function_kinds)
    assert len(owner.graph_ids) >= 2
    pool = _graph_trees_pool(trained)
    reserved = sum(s.reserved_bytes for k, s in trained.pool_stats.items() if k.pool_id == pool)
    assert reserved > 0
    # Peaks since the start point: at least what the pool holds now.
    peaks = trained.peaks[0]
    assert peaks.since_previous_point
    assert peaks.peak_reserved_bytes >= reserved
    path = trained.export_memory_viz(tmp_path / "trained.pickle")
    with open(path, "rb") as f:
        data = pickle.load(f)
    pools = {tuple(s["segment_pool_id"]) for s in data["segments"]}
    assert pool in pools
