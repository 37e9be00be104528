"""Beyond the reference design: private pools named by their owners (Graph Trees managers
shaped like torch's, named pools), memory_stats() peaks between points, the memory-viewer
export, and the compile plugin's memory points. Every value is known by construction."""

from __future__ import annotations

import csv
import enum
import io
import json
import pickle
import types
import warnings
from dataclasses import dataclass, field
from typing import Any

import pytest
from test_memory_support import MIB, FakeAllocator, _DataOnly
from torch_cudagraph_debug import _native
from torch_cudagraph_debug.cli import main
from torch_cudagraph_debug.compile import memory_points
from torch_cudagraph_debug.memory_debug import (
    MemoryDebugWarning,
    MemoryProbeSnapshot,
    MemoryRecorder,
    MemoryRun,
    _owners,
    name_pool,
)


# ----------------------------------------------------------------- Graph Trees stand-ins
@dataclass(frozen=True)
class GraphID:
    id: int


@dataclass(frozen=True)
class FunctionID:
    id: int


class CompilationMode(enum.Enum):
    FORWARD = 1
    BACKWARD = 2
    INFERENCE = 3


@dataclass
class Node:
    id: GraphID
    children: dict[FunctionID, list[Node]] = field(default_factory=dict)


class Manager:
    """The attributes of ``CUDAGraphTreeManager`` that owners are read from."""

    def __init__(self, device: int, pool: tuple[int, int]):
        self.device_index = device
        self.cuda_graphs_thread_pool = pool
        f0, f1 = FunctionID(0), FunctionID(1)
        backward = [Node(GraphID(1)), Node(GraphID(3))]
        self.roots = {f0: [Node(GraphID(0), {f1: backward}), Node(GraphID(2))]}
        self.id_to_mode = {f0: CompilationMode.FORWARD, f1: CompilationMode.BACKWARD}
        self.id_to_compile_id = {f0: "0/0", f1: "0/0"}


def trees_module(*managers: Manager) -> Any:
    containers = {m.device_index: types.SimpleNamespace(tree_manager=m) for m in managers}
    return types.SimpleNamespace(local=types.SimpleNamespace(tree_manager_containers=containers))


@pytest.fixture(autouse=True)
def _fresh_owner_state():
    _owners.forget_pool_names()
    _owners._warned.clear()
    yield
    _owners.forget_pool_names()


def graph_pool_run(tmp_path, **kwargs: Any) -> tuple[FakeAllocator, MemoryRun]:
    """Point a: the Graph Trees pool (1, 0) holds 16 MiB; point b: it grew by 32 MiB."""
    alloc = FakeAllocator()
    alloc.beyond_trees = trees_module(Manager(0, (1, 0)))
    seg = alloc.segment(16 * MIB, pool=(1, 0), stream=0x5A5A)
    alloc.alloc(seg, 16 * MIB)
    with MemoryRecorder(name="gt", run_dir=tmp_path / "gt", _source=alloc, **kwargs) as rec:
        a = rec.record_point("a")
        assert [o.description for o in a.pool_owners] == [
            "graph-trees cuda:0 graphs 0-3 forward/backward compile 0/0"
        ]
        grown = alloc.segment(32 * MIB, pool=(1, 0), stream=0x5A5A)
        alloc.alloc(grown, 32 * MIB)
        rec.record_point("b")
    return alloc, MemoryRun.load(tmp_path / "gt")


# ----------------------------------------------------------------- pool owners
def test_graph_trees_pool_owner_is_stored_and_read_back(tmp_path) -> None:
    _, run = graph_pool_run(tmp_path)
    owner = run["b"].pool_owners[0]
    assert (owner.device, owner.pool_id, owner.kind) == (0, (1, 0), "graph_trees")
    assert owner.graph_ids == [0, 1, 2, 3]
    assert owner.function_kinds == ["forward", "backward"]
    assert owner.compile_ids == ["0/0"]
    assert owner.to_dict()["description"] == (
        "graph-trees cuda:0 graphs 0-3 forward/backward compile 0/0"
    )
    rows = run.table("memory_pool_owners").to_pylist()
    assert [(r["point_index"], r["owner_kind"], r["graph_ids"]) for r in rows] == [
        (0, "graph_trees", [0, 1, 2, 3]),
        (1, "graph_trees", [0, 1, 2, 3]),
    ]


def test_reports_show_the_owner_next_to_the_pool_and_its_growth(tmp_path) -> None:
    _, run = graph_pool_run(tmp_path)
    timeline = run.timeline()
    text = timeline.to_text()
    assert "pool[1,0] (private, graph-trees cuda:0 graphs 0-3 forward/backward compile 0/0)" in text
    rows = list(csv.DictReader(io.StringIO(timeline.to_csv())))
    pool_rows = [r for r in rows if r["level"] == "pool" and r["pool"] == "1,0"]
    assert [r["reserved"] for r in pool_rows] == [str(16 * MIB), str(48 * MIB)]
    assert pool_rows[1]["reserved_change"] == str(32 * MIB)
    assert {r["pool_owner"] for r in pool_rows} == {
        "graph-trees cuda:0 graphs 0-3 forward/backward compile 0/0"
    }
    data = timeline.report_tree()
    owners = {r["pool_owner"] for r in data["rows"] if r["level"] == "pool"}
    assert owners == {"graph-trees cuda:0 graphs 0-3 forward/backward compile 0/0"}
    summary = json.loads(
        _native.render_memory_summaries([p._state for p in run.points], "json", True, "pool")
    )
    assert summary["points"][1]["pool_owners"][0]["graph_ids"] == [0, 1, 2, 3]
    text = _native.render_memory_summaries([run["a"]._state], "text", True, "pool")
    assert "pool owners:" in text
    assert "device[0] pool[1,0]: graph-trees cuda:0 graphs 0-3" in text


def test_named_pools_and_unnamed_default(tmp_path) -> None:
    alloc = FakeAllocator()
    seg = alloc.segment(8 * MIB, pool=(7, 1))
    alloc.alloc(seg, 4 * MIB)
    assert name_pool((7, 1), "kv-cache", device=0) == (7, 1)
    assert name_pool(types.SimpleNamespace(id=(9, 0)), "scratch", device=0) == (9, 0)
    graph = types.SimpleNamespace(pool=lambda: (11, 0))
    assert name_pool(graph, "decode", device=0) == (11, 0)
    with MemoryRecorder(name="n", run_dir=tmp_path / "n", _source=alloc) as rec:
        point = rec.record_point("p")
    assert [o.description for o in point.pool_owners] == [
        "mempool cuda:0 kv-cache",
        "mempool cuda:0 scratch",
        "cuda-graph cuda:0 decode",
    ]
    with pytest.raises(Exception, match="pool id"):
        name_pool("nonsense", "x", device=0)


def test_torch_internals_that_moved_give_no_owners_and_one_warning(tmp_path) -> None:
    alloc = FakeAllocator()
    manager = Manager(0, (1, 0))
    del manager.id_to_mode
    alloc.beyond_trees = trees_module(manager)
    with MemoryRecorder(name="d", run_dir=tmp_path / "d", _source=alloc) as rec:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            first = rec.record_point("a")
            second = rec.record_point("b")
    assert first.pool_owners == () and second.pool_owners == ()
    drift = [w for w in caught if "does not have the shape" in str(w.message)]
    assert len(drift) == 1 and drift[0].category is MemoryDebugWarning


def test_old_torch_is_gated(tmp_path) -> None:
    owners = _owners.collect_pool_owners(trees_module(Manager(0, (1, 0))), "2.3.1")
    assert owners == []
    owners = _owners.collect_pool_owners(trees_module(Manager(0, (1, 0))), "2.11.0+cu130")
    assert owners[0][4] == [0, 1, 2, 3]


# ----------------------------------------------------------------- peaks
def test_peaks_without_reset_are_known_only_when_they_rise(tmp_path) -> None:
    alloc = FakeAllocator()
    seg = alloc.segment(64 * MIB)
    with MemoryRecorder(name="p", run_dir=tmp_path / "p", _source=alloc) as rec:
        rec.record_point("empty")
        big = alloc.alloc(seg, 48 * MIB)
        alloc.beyond_observe()
        alloc.free(big)
        alloc.beyond_retry(retries=2)
        rec.record_point("after-spike")
        rec.record_point("quiet")
    run = MemoryRun.load(tmp_path / "p")
    peaks = [p.peaks[0] for p in run.points]
    assert [p.peak_allocated_bytes for p in peaks] == [0, 48 * MIB, 48 * MIB]
    assert [p.num_alloc_retries for p in peaks] == [0, 2, 2]
    assert not any(p.since_previous_point for p in peaks)
    rows = [
        r for r in csv.DictReader(io.StringIO(run.timeline().to_csv())) if r["level"] == "device"
    ]
    assert [r["peak_allocated_between"] for r in rows] == ["0", str(48 * MIB), ""]
    assert [r["peak_reserved_between"] for r in rows] == [str(64 * MIB), "", ""]
    assert [r["alloc_retries_between"] for r in rows] == ["0", "2", "0"]
    text = run.timeline().to_text()
    assert "peak since previous point: allocated 48.00 MiB" in text
    assert "2 alloc retries" in text


def test_reset_peaks_gives_each_window_its_own_peak(tmp_path) -> None:
    alloc = FakeAllocator()
    seg = alloc.segment(64 * MIB)
    with MemoryRecorder(name="r", run_dir=tmp_path / "r", _source=alloc, reset_peaks=True) as rec:
        rec.record_point("start")
        big = alloc.alloc(seg, 48 * MIB)
        alloc.beyond_observe()
        alloc.free(big)
        rec.record_point("spike")
        small = alloc.alloc(seg, 8 * MIB)
        alloc.beyond_observe()
        alloc.free(small)
        rec.record_point("small")
    assert alloc.beyond_resets == [0, 0, 0]
    run = MemoryRun.load(tmp_path / "r")
    assert [p.peaks[0].since_previous_point for p in run.points] == [False, True, True]
    data = run.timeline().report_tree()
    between = [r["peaks_between"] for r in data["rows"] if r["level"] == "device"]
    assert [b["peak_allocated_bytes"] for b in between] == [0, 48 * MIB, 8 * MIB]
    summary = json.loads(
        _native.render_memory_summaries([p._state for p in run.points], "json", True, "pool")
    )
    assert summary["points"][2]["peaks_between"][0]["between"]["peak_allocated_bytes"] == (8 * MIB)


# ----------------------------------------------------------------- memory_viz export
def _viz_run(tmp_path) -> tuple[FakeAllocator, MemoryRun]:
    alloc = FakeAllocator()
    seg = alloc.segment(4 * MIB)
    with MemoryRecorder(name="v", run_dir=tmp_path / "v", _source=alloc) as rec:
        rec.record_point("a")
        x = alloc.alloc(seg, MIB)
        alloc.alloc(seg, 2 * MIB)
        alloc.free(x)
        rec.record_point("b")
    return alloc, MemoryRun.load(tmp_path / "v")


def test_export_memory_viz_writes_a_snapshot_pickle(tmp_path) -> None:
    _, run = _viz_run(tmp_path)
    path = run["b"].export_memory_viz(tmp_path / "b.pickle")
    with open(path, "rb") as f:
        data = _DataOnly(f).load()
    assert set(data) == {"segments", "device_traces"}
    (segment,) = data["segments"]
    assert segment["total_size"] == 4 * MIB
    assert segment["segment_pool_id"] == (0, 0)
    assert [(b["size"], b["state"]) for b in segment["blocks"]] == [
        (MIB, "inactive"),
        (2 * MIB, "active_allocated"),
        (MIB, "inactive"),
    ]
    assert segment["blocks"][1]["frames"][0]["name"] == "forward"
    actions = [e["action"] for e in data["device_traces"][0]]
    # The window of point b: point a's snapshot entry, then what ran between.
    assert [a for a in actions if a != "snapshot"] == [
        "alloc",
        "alloc",
        "free_requested",
        "free_completed",
    ]
    assert all("frames" in e for e in data["device_traces"][0])
    rebuilt = run["b"].raw_snapshot()
    assert [b["size"] for b in rebuilt["segments"][0]["blocks"]] == [MIB, 2 * MIB, MIB]


def test_exported_pickle_opens_in_torch_memory_viz(tmp_path) -> None:
    from torch.cuda import _memory_viz

    _, run = _viz_run(tmp_path)
    path = run["b"].export_memory_viz(tmp_path / "b.pickle")
    with open(path, "rb") as f:
        data = pickle.load(f)
    assert "Allocator State History" in _memory_viz.segment_plot(data)
    assert "Active Memory Timeline" in _memory_viz.trace_plot(data)
    # The text views walk every segment, block and trace entry.
    assert "segments: 1" in _memory_viz.segsum(data)
    assert _memory_viz.trace(data)


def test_export_from_probe_snapshot_and_cli(tmp_path, capsys) -> None:
    alloc = FakeAllocator()
    seg = alloc.segment(2 * MIB, pool=(3, 0))
    alloc.alloc(seg, MIB)
    snap = MemoryProbeSnapshot.from_snapshot(alloc.snapshot())
    out = snap.export_memory_viz(tmp_path / "probe.pickle")
    with open(out, "rb") as f:
        data = _DataOnly(f).load()
    assert data["segments"][0]["segment_pool_id"] == (3, 0)
    assert data["segments"][0]["allocated_size"] == MIB

    _, _ = _viz_run(tmp_path)
    target = tmp_path / "cli.pickle"
    assert main(["memory", "export-viz", str(tmp_path / "v"), "b", str(target)]) == 0
    assert "open it at pytorch.org/memory_viz" in capsys.readouterr().out
    with open(target, "rb") as f:
        assert len(_DataOnly(f).load()["segments"]) == 1


# ----------------------------------------------------------------- compile-plugin points
CONFIG = {"version": 1, "run": {"name": "cg"}, "select": [{"ops": ["aten.mm"]}]}


def test_memory_table_of_the_probe_config() -> None:
    assert json.loads(_native.ProbeConfig.from_json(json.dumps(CONFIG)).memory_json()) is None
    config = dict(CONFIG, memory={"points": ["after_warmup"], "every": 5, "reset_peaks": True})
    settings = json.loads(_native.ProbeConfig.from_json(json.dumps(config)).memory_json())
    assert settings == {
        "dir": None,
        "name": "cg-memory",
        "points": ["after_warmup"],
        "every": 5,
        "reset_peaks": True,
        "overwrite": False,
    }
    with pytest.raises(Exception, match=r"memory\.points"):
        _native.ProbeConfig.from_json(json.dumps(dict(CONFIG, memory={"points": ["often"]})))


class FakeTreeManager:
    """``record_function`` / ``run_eager`` as Graph Trees calls them."""

    def __init__(self) -> None:
        self.device_index = 0
        self.id_to_mode = {FunctionID(4): CompilationMode.FORWARD}
        self.id_to_compile_id = {FunctionID(4): "1/0"}
        self.current_node: Any = None
        self.calls: list[str] = []

    def record_function(self, new_inputs: Any, function_id: FunctionID) -> str:
        self.calls.append("record")
        self.current_node = Node(GraphID(6))
        return "recorded"

    def run_eager(self, new_inputs: Any, function_id: FunctionID) -> str:
        self.calls.append("warmup")
        return "warm"


def test_graph_trees_hook_records_points_only_around_recordings(monkeypatch) -> None:
    monkeypatch.setattr(memory_points, "_INSTALLED", False)
    monkeypatch.setattr(memory_points, "_ACTIVE", [])
    manager_class = type("M", (FakeTreeManager,), {})
    assert memory_points.install(manager_class)
    manager = manager_class()
    # No session with memory points: the hook passes straight through.
    assert manager.record_function([], FunctionID(4)) == "recorded"

    taken: list[tuple[str, dict[str, Any]]] = []
    settings = {"name": "m", "points": ["before_recording", "after_recording", "after_warmup"]}
    points = memory_points.CompileMemoryPoints({**settings, "every": 3}, "unused")
    monkeypatch.setattr(points, "_record", lambda kind, facts: taken.append((kind, dict(facts))))
    memory_points._ACTIVE.append(points)
    assert manager.run_eager([], FunctionID(4)) == "warm"
    assert manager.record_function([], FunctionID(4)) == "recorded"
    for _ in range(7):
        points.on_call()
    facts = {"device": 0, "function_id": 4, "function_kind": "forward", "compile_id": "1/0"}
    assert taken[:3] == [
        ("after_warmup", facts),
        ("before_recording", facts),
        ("after_recording", {**facts, "graph_id": 6}),
    ]
    assert [k for k, _ in taken[3:]] == ["call", "call"]
    assert [f["call"] for _, f in taken[3:]] == [3, 6]
    points.finish()
    assert memory_points._ACTIVE == []
    assert manager.calls == ["record", "warmup", "record"]


def test_a_failing_memory_point_stops_quietly_once(monkeypatch) -> None:
    import torch

    # As on a machine without CUDA: the first point cannot create its recorder.
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    points = memory_points.CompileMemoryPoints(
        {"name": "m", "points": ["after_recording"], "every": 0}, "unused"
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        points.after_recording({})
        points.after_recording({})
    stopped = [w for w in caught if "memory points of the compile plugin stopped" in str(w.message)]
    assert len(stopped) == 1
