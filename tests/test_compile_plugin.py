"""The torch.compile plugin on CPU Inductor: config, selection, insertion, recording,
points, explain, the FX graph cache and the context-manager form."""

from __future__ import annotations

import json
import re
import textwrap

import pyarrow.parquet as pq
import pytest
import torch
import torch_cudagraph_debug.compile as tcgd_compile
from compile_models import MLP
from storage_files import data_files
from torch_cudagraph_debug import _native
from torch_cudagraph_debug.errors import ConfigError
from torch_cudagraph_debug.tensor_debug import TensorRecorder, TensorRun, TensorSite
from torch_cudagraph_debug.tensor_debug.observations import SITE_COLUMNS

CONFIG = textwrap.dedent(
    """
    version = 1

    [run]
    name = "mlp"

    [[select]]
    ops = ["aten.addmm", "aten.mm", "aten.relu"]
    graphs = ["forward", "inference"]

    [[exclude]]
    names = ["relu_1"]
    """
)


@pytest.fixture
def config_file(tmp_path):
    path = tmp_path / "probes.toml"
    path.write_text(CONFIG)
    return path


pytestmark = pytest.mark.usefixtures("fresh_inductor")


def test_backend_records_selected_sites_per_call(tmp_path, config_file):
    torch.manual_seed(0)
    model = MLP()
    # An eager run already in the job root: the session finds its own run by name.
    with TensorRecorder(name="eager", run_dir=tmp_path / "run") as rec:
        with rec.record_point("p"):
            rec.observe(torch.ones(2), name="x")
    compiled = torch.compile(
        model, backend="tcgd", options={"probes": str(config_file), "run_dir": tmp_path / "run"}
    )
    inputs = [torch.randn(3, 8) for _ in range(3)]
    with torch.no_grad():
        outs = [compiled(x) for x in inputs]
    session = tcgd_compile.session_for(
        _native.ProbeConfig.load(str(config_file)), run_dir=tmp_path / "run"
    )
    run = session.finish()
    assert run.execution == "compiled" and run.complete
    assert run.labels == ("call0", "call1", "call2")
    point = run["call1"]
    ops = sorted(o.site.aten_op for o in point.observations)
    assert ops == ["aten.addmm.default", "aten.addmm.default", "aten.relu.default"], ops
    # Values equal an eager recomputation of the same call.
    with torch.no_grad():
        h = torch.relu(model.fc1(inputs[1]))
        eager = {"relu": h, "fc2": model.fc2(h)}
    by_module = {o.site.module_path: o for o in point.observations}
    fc2 = by_module["fc2"]
    assert fc2.site.graph_kind == "inference"
    assert fc2.site.source_location and "compile_models.py" in fc2.site.source_location
    torch.testing.assert_close(fc2.tensor(), eager["fc2"])
    torch.testing.assert_close(outs[1], eager["fc2"])
    relu = next(o for o in point.observations if o.site.aten_op == "aten.relu.default")
    torch.testing.assert_close(relu.tensor(), eager["relu"])
    assert relu.name == relu.site.site_id and relu.site.site_id.startswith("inference/")
    assert TensorRun.load(tmp_path / "run", name="eager").labels == ("p",)


def test_config_errors_name_file_line_and_key_before_compiling(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text(CONFIG.replace('graphs = ["forward", "inference"]', 'graphs = ["fwd"]'))
    expected = f"{bad}:9: select[0].graphs: 'fwd' is not one of"
    # The helper validates when it is called, before torch.compile is even reached.
    with pytest.raises(ConfigError, match=re.escape(expected)):
        tcgd_compile.compile(MLP(), probes=bad)
    # Through backend="tcgd", torch calls the backend at the first call; the config is
    # read before Inductor compiles anything, and torch wraps our error.
    compiled = torch.compile(MLP(), backend="tcgd", options={"probes": str(bad)})
    with pytest.raises(Exception, match=re.escape(expected)):
        compiled(torch.randn(2, 8))
    with pytest.raises(ConfigError, match="unknown field `opz`"):
        tcgd_compile.load_config({"version": 1, "select": [{"opz": ["aten.mm"]}]})


def test_probes_do_not_change_outputs_when_probed_nodes_are_materialized(tmp_path):
    torch.manual_seed(1)
    model = MLP()
    x = torch.randn(5, 8)
    with torch.no_grad():
        plain = torch.compile(model)(x)
        torch._dynamo.reset()
        config = {"version": 1, "select": [{"ops": ["aten.addmm"]}]}
        probed = tcgd_compile.compile(model, probes=config, run_dir=tmp_path / "r")(x)
    assert torch.equal(plain, probed)


def test_explain_lists_selected_and_rejected_sites_with_reasons(config_file):
    from torch_cudagraph_debug.compile.explain import explain

    report = explain(config_file, MLP(), torch.randn(2, 8))
    (graph,) = report.graphs
    text = report.to_text()
    assert "graph inference" in text and "3 selected" in text, text
    assert graph.graph_kind == "inference"
    selected = {d["op"] for d in graph.selected}
    assert selected == {"aten.addmm.default", "aten.relu.default"}
    reasons = {d["node_name"]: d["reason"] for d in graph.rejected}
    assert any("not in" in r for r in reasons.values()), reasons
    # addmm outputs and relu (an addmm input) are in memory anyway: no observer effect.
    assert not any(d["site"]["materialized_by_probe"] for d in graph.selected)
    assert report.to_dict()["graphs"][0]["selected"][0]["reason"] == "select[0]"


def test_a_probe_inside_a_fused_chain_is_reported_as_materialized_by_probe(tmp_path):
    from torch_cudagraph_debug.compile.explain import explain

    def fused(x):
        return (x * 3.0 + 1.0).sin()

    config = {"version": 1, "select": [{"ops": ["aten.mul", "aten.sin"]}]}
    report = explain(config, fused, torch.randn(16))
    flags = {d["op"]: d["site"]["materialized_by_probe"] for d in report.graphs[0].selected}
    assert flags == {"aten.mul.Tensor": True, "aten.sin.default": False}, flags
    assert "[materialized by probe]" in report.to_text()
    # The run says so too, per observation.
    compiled = tcgd_compile.compile(fused, probes=config, run_dir=tmp_path / "run")
    compiled(torch.randn(16))
    run = tcgd_compile.session_for(
        tcgd_compile.load_config(config), run_dir=tmp_path / "run"
    ).finish()
    stored = {o.site.aten_op: o.site.materialized_by_probe for o in run[0].observations}
    assert stored == {"aten.mul.Tensor": True, "aten.sin.default": False}, stored
    # Each site is the row's site columns, as stored.
    rows = pq.read_table(data_files(tmp_path / "run", "observations")).to_pylist()
    stored_sites = [TensorSite(**{c: row[c] for c in SITE_COLUMNS}) for row in rows]
    assert len(stored_sites) == 2 and set(stored_sites) == {o.site for o in run[0].observations}


def test_a_probe_group_carries_its_sites_as_text_that_reads_back_as_the_same_sites():
    from torch_cudagraph_debug.errors import InvalidInputError

    where = dict.fromkeys(SITE_COLUMNS[:-1])
    sites = [
        TensorSite(**{**where, "site_id": "inference/fc1/addmm", "graph_kind": "inference"}),
        TensorSite(**{**where, "site_id": "inference/-/relu"}, materialized_by_probe=True),
    ]
    text = TensorSite.encode_group(sites)
    assert isinstance(text, str) and json.loads(text)[1]["materialized_by_probe"] is True
    assert TensorSite.decode_group(text) == sites
    # Text that is not a probe group's sites is a typed error that says so.
    for bad in ("{}", "[1]", '[{"site_id": "a", "colour": "red"}]', "not json"):
        with pytest.raises(InvalidInputError, match="not a probe group's sites"):
            TensorSite.decode_group(bad)


def test_context_manager_chains_an_existing_custom_pass(tmp_path, config_file):
    from torch._inductor.custom_graph_pass import CustomGraphPass

    seen = []

    class Counter(CustomGraphPass):
        def __call__(self, graph):
            seen.append(len(graph.nodes))

        def uuid(self):
            return b"counter"

    with torch._inductor.config.patch(post_grad_custom_post_pass=Counter()):
        with tcgd_compile.probes(config_file, run_dir=tmp_path / "run") as session:
            with torch.no_grad():
                torch.compile(MLP())(torch.randn(2, 8))
    assert len(seen) == 1 and len(session.decisions) == 1
    run = session.finish()
    assert len(run) == 1 and len(run[0].observations) == 3


def test_fx_graph_cache_hit_still_records_and_a_new_config_recompiles(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "cache"))
    from torch._dynamo.utils import counters

    def run_once(config, run_dir):
        torch._dynamo.reset()
        counters.clear()
        model = MLP()
        with torch.no_grad(), torch._inductor.config.patch(fx_graph_cache=True):
            tcgd_compile.compile(model, probes=config, run_dir=run_dir)(torch.randn(2, 8))
        session = tcgd_compile.session_for(tcgd_compile.load_config(config), run_dir=run_dir)
        return session.finish(), dict(counters["inductor"])

    first = {"version": 1, "select": [{"ops": ["aten.addmm"]}]}
    run1, c1 = run_once(first, tmp_path / "a")
    run2, c2 = run_once(first, tmp_path / "b")
    assert c1.get("fxgraph_cache_miss", 0) >= 1
    assert c2.get("fxgraph_cache_hit", 0) >= 1, c2
    assert len(run2[0].observations) == len(run1[0].observations) == 2
    second = {"version": 1, "select": [{"ops": ["aten.relu"]}]}
    run3, c3 = run_once(second, tmp_path / "c")
    assert c3.get("fxgraph_cache_miss", 0) >= 1, c3
    assert [o.site.aten_op for o in run3[0].observations] == ["aten.relu.default"]


def test_training_graphs_probe_forward_and_backward(tmp_path):
    torch.manual_seed(2)
    model = MLP()
    config = {
        "version": 1,
        "select": [{"ops": ["aten.addmm", "aten.mm"], "graphs": ["forward", "backward"]}],
    }
    compiled = tcgd_compile.compile(model, probes=config, run_dir=tmp_path / "run")
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(3):
        loss = compiled(torch.randn(4, 8)).square().mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
    session = tcgd_compile.session_for(tcgd_compile.load_config(config), run_dir=tmp_path / "run")
    run = session.finish()
    assert run.labels == ("call0", "call1", "call2")
    kinds = {o.site.graph_kind for o in run["call1"].observations}
    assert kinds == {"forward", "backward"}
    (row,) = pq.read_table(data_files(tmp_path / "run", "runs")).to_pylist()
    assert (row["complete"], row["execution"], row["point_count"]) == (True, "compiled", 3)
    assert isinstance(TensorRun.load(tmp_path / "run"), TensorRun)


def test_cpu_summaries_are_taken_at_the_probe_and_keep_no_bytes(tmp_path):
    torch._dynamo.reset()
    torch.manual_seed(3)
    model = MLP().eval()
    x = torch.randn(4, 8)
    x[1, 2] = float("inf")  # a row of infinities and NaNs in both linear outputs
    config = {"version": 1, "select": [{"ops": ["aten.addmm"]}], "run": {"payload": "summary"}}
    compiled = tcgd_compile.compile(model, probes=config, run_dir=tmp_path / "run")
    with torch.no_grad():
        for _ in range(2):
            compiled(x)
        hidden = model.fc1(x)
        values = [hidden, model.fc2(torch.relu(hidden))]
    session = tcgd_compile.session_for(tcgd_compile.load_config(config), run_dir=tmp_path / "run")
    run = session.finish()
    assert (run.labels, run.default_payload) == (("call0", "call1"), "summary")
    for label in run.labels:
        observations = run[label].observations
        assert len(observations) == 2
        for observation, value in zip(observations, values, strict=True):
            summary = observation.summary
            assert (observation.payload, observation.digest) == ("summary", None)
            assert observation.shape == tuple(value.shape)
            v = value.double().flatten()
            finite = v[v.isfinite()]
            assert (summary.numel, summary.finite_count) == (v.numel(), finite.numel())
            assert summary.nan_count == int(v.isnan().sum())
            assert summary.pos_inf_count == int((v == float("inf")).sum())
            assert summary.neg_inf_count == int((v == float("-inf")).sum())
            assert 0 < summary.finite_count < summary.numel
            assert summary.min == finite.min().item() and summary.max == finite.max().item()
            expected = (finite.mean(), finite.std(unbiased=False), finite.norm())
            got = (summary.mean, summary.std, summary.l2_norm)
            assert got == pytest.approx([e.item() for e in expected], rel=1e-6)
    # A summary payload stores no value bytes.
    assert pq.read_table(data_files(tmp_path / "run", "payloads")).num_rows == 0


CHILD = textwrap.dedent(
    """
    import os, sys, torch
    import torch_cudagraph_debug.compile as tcgd_compile
    run_dir, mode = sys.argv[1], sys.argv[2]
    config = {"version": 1, "select": [{"ops": ["aten.addmm"]}]}
    model = torch.nn.Linear(4, 4)
    compiled = tcgd_compile.compile(model, probes=config, run_dir=run_dir)
    with torch.no_grad():
        for _ in range(3):
            compiled(torch.randn(2, 4))
    if mode == "crash":
        os.kill(os.getpid(), 9)
    """
)


@pytest.mark.parametrize("mode", ["exit", "crash"])
def test_process_exit_finishes_the_run_and_a_crash_leaves_it_loadable(tmp_path, mode):
    import subprocess
    import sys

    script = tmp_path / "child.py"
    script.write_text(CHILD)
    run_dir = tmp_path / "run"
    done = subprocess.run(
        [sys.executable, str(script), str(run_dir), mode],
        env={**__import__("os").environ, "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "c")},
        capture_output=True,
        text=True,
        timeout=300,
    )
    run = TensorRun.load(run_dir)
    if mode == "exit":
        assert done.returncode == 0, done.stderr
        # Every call is a point; the last one is committed at exit, with the run finished.
        assert run.complete and run.labels == ("call0", "call1", "call2")
    else:
        assert done.returncode == -9
        # Points are handed to the writer thread when the next call starts; the kill may
        # catch the last of them still queued: a prefix of the two survives, whole.
        assert not run.complete and run.labels == ("call0", "call1")[: len(run.labels)]
        assert run.validate() == []


def test_tcgd_explain_cli_runs_a_script_and_prints_decisions(tmp_path, config_file):
    import subprocess
    import sys

    script = tmp_path / "model.py"
    script.write_text(
        textwrap.dedent(
            """
            import torch
            from torch import nn

            class MLP(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.fc1 = nn.Linear(8, 16)
                    self.fc2 = nn.Linear(16, 4)

                def forward(self, x):
                    return self.fc2(torch.relu(self.fc1(x)))

            with torch.no_grad():
                torch.compile(MLP())(torch.randn(2, 8))
            """
        )
    )
    env = {**__import__("os").environ, "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "c")}
    cli = [sys.executable, "-m", "torch_cudagraph_debug.cli", "explain", str(config_file)]
    text = subprocess.run(
        [*cli, str(script)], capture_output=True, text=True, env=env, check=True, timeout=300
    ).stdout
    assert "graph inference (compile id 0/0): 3 selected" in text, text
    assert "+ addmm" in text and "fc1" in text and "model.py:" in text
    data = json.loads(
        subprocess.run(
            [*cli[:-1], "--json", str(config_file), str(script)],
            capture_output=True,
            text=True,
            env=env,
            check=True,
        ).stdout
    )
    (graph,) = data["graphs"]
    assert {d["site"]["module_path"] for d in graph["selected"]} == {"fc1", "fc2", None}
    bad = subprocess.run(
        [*cli[:-1], str(tmp_path / "missing.toml"), str(script)],
        capture_output=True,
        text=True,
        env=env,
    )
    assert bad.returncode == 2 and "missing.toml" in bad.stderr


def test_the_point_clock_delimits_calls_and_leaves_host_points_to_python():
    """Without a device recorder (CPU graphs, warmup), a call that repeats a callable of
    the current point hands its label to the session's Python, which holds the values."""
    clock = _native.PointClock(True)
    assert clock.enter(1) is None and clock.enter(2) is None and clock.has_calls
    assert clock.enter(1) == "call0"  # the session commits call0, then enters again
    clock.point_ended()
    assert not clock.has_calls and clock.enter(1) is None
    clock.explicit = True  # inside record_point(): calls do not delimit points
    assert clock.enter(1) is None and clock.enter(1) is None
    clock.explicit = False
    assert clock.next_label() == "call1"
    clock.close()
    assert clock.enter(1) is None and not clock.has_calls
    assert _native.PointClock(False).enter(3) is None  # auto_points off


def test_a_compiled_call_keeps_torchs_boxed_convention_and_the_callers_error(tmp_path):
    probes = {"version": 1, "select": [{"ops": ["aten.addmm"]}]}
    session = tcgd_compile.session_for(probes, run_dir=tmp_path / "run")

    def boxed(args):
        if args[0] < 0:
            raise ValueError("negative")
        return [args[0] * 2]

    boxed._boxed_call = True
    wrapped = session.wrap(boxed)
    assert wrapped._boxed_call is True and wrapped.compiled is boxed
    assert wrapped([3]) == [6] and wrapped([4]) == [8]
    with pytest.raises(ValueError, match="negative"):
        wrapped([-1])
    assert session.wrap(lambda x: x)._boxed_call is False
    run = session.finish()
    # Each call of the one callable is a point of its own (empty: nothing was probed).
    assert run.labels == ("call0", "call1", "call2")


def test_a_probed_call_switches_dynamo_frames_as_often_as_an_unprobed_one(tmp_path):
    """Dynamo wraps every backend's result in a frame that turns tracing off; the probed
    call wrapper must not add a second one around Inductor's (a per-call host cost)."""
    import cProfile
    import pstats

    def frame_switches(fn, x, calls=20):
        for _ in range(3):
            fn(x)
        profile = cProfile.Profile()
        profile.enable()
        for _ in range(calls):
            fn(x)
        profile.disable()
        stats = pstats.Stats(profile).stats  # type: ignore[attr-defined]
        return (
            sum(v[1] for k, v in stats.items() if k[2] == "_fn" and k[0].endswith("eval_frame.py"))
            / calls
        )

    torch._dynamo.reset()
    model, x = MLP().eval(), torch.randn(4, 8)
    options = {
        "probes": {"version": 1, "select": [{"ops": ["aten.addmm"]}]},
        "payload": "summary",
        "run_dir": str(tmp_path / "run"),
    }
    with torch.no_grad():
        plain = frame_switches(torch.compile(model), x)
        probed = frame_switches(torch.compile(model, backend="tcgd", options=options), x)
    assert plain > 0
    assert probed == plain


def _mm_chain(x, w, head=None):
    """Three matmuls of 4 MiB outputs with a ReLU between them, optionally followed by a
    larger one (64 MiB) that sets the graph's peak memory."""
    a = torch.relu(torch.mm(x, w))
    c = torch.relu(torch.mm(a, w))
    e = torch.mm(c, w)
    return e if head is None else torch.mm(e, head)


def _grouped(*args, budget):
    from torch.fx.experimental.proxy_tensor import make_fx
    from torch_cudagraph_debug.fx_passes.probe_insertion import group_sites

    graph = make_fx(lambda *a: _mm_chain(*a), tracing_mode="fake")(*args).graph
    mms = [n for n in graph.nodes if n.target is torch.ops.aten.mm.default][:3]
    return [[mms.index(n) for n in group] for group in group_sites(graph, mms, budget)]


def test_probe_groups_keep_values_alive_only_below_the_graphs_own_peak():
    x, w = torch.empty(1024, 1024), torch.empty(1024, 1024)
    # Keeping the first two outputs alive until the third would raise the graph's peak
    # (two 4 MiB values alive at a time): with no allowance, one probe group per value.
    assert _grouped(x, w, budget=0) == [[0], [1], [2]]
    # An allowance of 16 MiB over the peak takes them into one group (one launch).
    assert _grouped(x, w, budget=16 << 20) == [[0, 1, 2]]
    # A later 64 MiB value sets the peak: extending the three stays below it.
    assert _grouped(x, w, torch.empty(1024, 16384), budget=0) == [[0, 1, 2]]


def test_config_settings_and_decisions_read_as_their_fields_in_order():
    config = _native.ProbeConfig.from_dict(
        {
            "version": 1,
            "run": {"payload": "summary", "history": 4},
            "memory": {"every": 2},
            "select": [{"ops": ["aten.mm"]}],
        }
    )
    run = config.run
    assert (run.payload, run.history, run.full_every, run.name) == ("summary", 4, 0, "compiled")
    assert list(run.to_dict()) == [
        "name",
        "dir",
        "payload",
        "history",
        "full_every",
        "trigger_nonfinite",
        "trigger_abs_max",
        "overwrite",
    ]
    assert repr(run).startswith("ProbeRunSettings(name='compiled', dir=None, payload='summary'")
    memory = config.memory
    assert memory.to_dict() == {
        "dir": None,
        "name": "compiled-memory",
        "points": ["before_recording", "after_recording"],
        "every": 2,
        "reset_peaks": False,
        "overwrite": False,
    }
    facts = {
        "graph_kind": "inference",
        "node_name": "mm",
        "op": "aten.mm.default",
        "module_path": None,
        "stack_trace": None,
        "dtype": "float32",
        "numel": 4,
        "is_tensor": True,
    }
    (decision,) = config.select([facts])
    assert decision.to_dict() == {
        "node_name": "mm",
        "op": "aten.mm.default",
        "module_path": None,
        "source_location": None,
        "selected": True,
        "rule": 0,
        "actions": ["record"],
        "reason": "select[0]",
    }
    assert list(decision.to_dict()) == [
        "node_name",
        "op",
        "module_path",
        "source_location",
        "selected",
        "rule",
        "actions",
        "reason",
    ]
