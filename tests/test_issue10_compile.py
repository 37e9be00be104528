"""The compile plugin must never lie: differential references that a warm cache cannot
fool, one point per call on every route, sessions reachable from the model, runs that can
be re-run, explain that keeps nothing, and typed one-line CLI errors (CPU Inductor)."""

from __future__ import annotations

import json
import os
import re
import textwrap

import pytest
import torch
import torch_cudagraph_debug.compile as tcgd_compile
from compile_models import MLP, PerturbSigmoid, SigmoidMLP, write_differential_factory
from torch._dynamo.utils import counters
from torch._inductor.compile_fx import compile_fx as compile_fx_bound_at_import
from torch_cudagraph_debug.cli import main as tcgd_main
from torch_cudagraph_debug.compile.differential import differential
from torch_cudagraph_debug.errors import (
    ConfigError,
    InvalidInputError,
    RunExistsError,
    ScriptNotFoundError,
)
from torch_cudagraph_debug.tensor_debug import TensorRun

CONFIG = textwrap.dedent(
    """
    version = 1

    [run]
    name = "mlp"

    [[select]]
    ops = ["aten.addmm", "aten.relu"]
    """
)
DIFF_CONFIG = {
    "version": 1,
    "select": [{"ops": ["aten.addmm", "aten.relu", "aten.sigmoid", "aten.tanh"]}],
}


pytestmark = pytest.mark.usefixtures("fresh_inductor")


@pytest.fixture
def config_file(tmp_path):
    path = tmp_path / "probes.toml"
    path.write_text(CONFIG)
    return path


def eager_sites(model: MLP, x: torch.Tensor) -> dict[str, torch.Tensor]:
    with torch.no_grad():
        hidden = torch.relu(model.fc1(x))
        return {"fc1": model.fc1(x), "relu": hidden, "fc2": model.fc2(hidden)}


def assert_point_holds(point, model: MLP, x: torch.Tensor) -> None:
    want = eager_sites(model, x)
    got = {
        (o.site.module_path or o.site.aten_op.split(".")[1]): o.tensor() for o in point.observations
    }
    assert sorted(got) == sorted(want), got
    for name, value in want.items():
        torch.testing.assert_close(got[name], value)


# --------------------------------------------------------------------------- fault 1
@pytest.fixture
def miscompiled_sigmoid(monkeypatch):
    """Inductor's code generation turns sigmoid into tanh: a miscompiled kernel, which no
    cache key sees (the config and the graphs are those of a correct compilation)."""
    from torch._inductor import lowering

    aten = torch.ops.aten
    monkeypatch.setitem(
        lowering.lowerings, aten.sigmoid.default, lowering.lowerings[aten.tanh.default]
    )


@pytest.mark.parametrize("planted", ["miscompiled_kernel", "compiled_side_pass"])
def test_fault1_differential_reference_is_never_served_a_cached_compiled_graph(
    tmp_path, monkeypatch, request, planted
):
    # One Inductor cache for both differential runs: the second finds it warm.
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "shared-cache"))
    extra = {}
    if planted == "miscompiled_kernel":
        request.getfixturevalue("miscompiled_sigmoid")
    else:
        extra = {"post_grad_custom_post_pass": PerturbSigmoid()}
    g = torch.Generator().manual_seed(3)
    batches = [(torch.randn(4, 8, generator=g),) for _ in range(2)]

    statuses, hits = [], []
    for attempt in range(2):
        counters.clear()
        torch.manual_seed(0)
        result = differential(
            SigmoidMLP(),
            batches,
            probes=DIFF_CONFIG,
            run_dir=tmp_path / f"diff{attempt}",
            extra_inductor_options=extra,
        )
        statuses.append(result.comparison.status)
        hits.append(
            counters["inductor"].get("fxgraph_cache_hit", 0)
            + counters["aot_autograd"].get("autograd_cache_hit", 0)
        )
        first = result.first_divergence
        assert first is not None and first.observation.name == "inference/-/sigmoid", (
            attempt,
            result.to_text(),
        )
        # The reference computed sigmoid, whatever the compiled side made of it.
        ref_sigmoid = next(
            o for o in result.reference[0].observations if o.name.endswith("sigmoid")
        )
        with torch.no_grad():
            torch.manual_seed(0)
            model = SigmoidMLP()
            want = torch.sigmoid(model.fc2(torch.relu(model.fc1(batches[0][0]))))
        torch.testing.assert_close(ref_sigmoid.tensor(), want)
    assert statuses == ["mismatch", "mismatch"], statuses
    # The compiled variant compiles with the caches off (the probe pass must decide every
    # graph), and the eager side compiles nothing with Inductor: no run is served a cache.
    assert hits == [0, 0], hits


def test_fault1_compiled_side_is_never_served_a_graph_compiled_without_the_pass(
    tmp_path, monkeypatch
):
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "shared-cache"))
    torch.manual_seed(0)
    model = MLP()
    x = torch.randn(3, 8)
    with torch.no_grad():
        plain = torch.compile(model)(x)  # warms the cache with a graph that has no probes
        torch._dynamo.reset()
        counters.clear()
        compiled = tcgd_compile.compile(model, probes=CONFIG_DICT_ADDMM, run_dir=tmp_path / "a")
        probed = compiled(x)
    assert counters["inductor"].get("fxgraph_cache_miss", 0) >= 1
    run = tcgd_compile.session_of(compiled).finish()
    assert [o.site.aten_op for o in run[0].observations] == ["aten.addmm.default"] * 2
    assert torch.equal(plain, probed)
    # A different config is a different key too: its own sites, never the first one's.
    torch._dynamo.reset()
    with torch.no_grad():
        other = tcgd_compile.compile(
            model, probes={"version": 1, "select": [{"ops": ["aten.relu"]}]}, run_dir=tmp_path / "b"
        )
        other(x)
    run = tcgd_compile.session_of(other).finish()
    assert [o.site.aten_op for o in run[0].observations] == ["aten.relu.default"]


CONFIG_DICT_ADDMM = {"version": 1, "select": [{"ops": ["aten.addmm"]}]}


# --------------------------------------------------------------------------- fault 2
def assert_each_call_is_a_point(compile_model, config_file, run_dir) -> None:
    """Three calls of an MLP compiled by ``compile_model`` inside ``probes()``: three
    points, each holding the sites' eager values for its call's input."""
    torch.manual_seed(0)
    model = MLP()
    inputs = [torch.randn(3, 8) for _ in range(3)]
    with tcgd_compile.probes(config_file, run_dir=run_dir) as session:
        compiled = compile_model(model)
        with torch.no_grad():
            for x in inputs:
                compiled(x)
    run = session.finish()
    assert run.labels == ("call0", "call1", "call2")
    for point, x in zip(run.points, inputs, strict=True):
        assert_point_holds(point, model, x)


def test_fault2_context_manager_makes_each_call_a_point(tmp_path, config_file):
    assert_each_call_is_a_point(torch.compile, config_file, tmp_path / "run")


def test_fault2_a_site_that_runs_again_in_an_automatic_point_begins_the_next_one(
    tmp_path, config_file
):
    # A backend holding compile_fx from before the block: nothing wraps what it returns,
    # so no call delimits a point; a site running again must still not overwrite.
    def own_backend(gm, example_inputs):
        return compile_fx_bound_at_import(gm, example_inputs)

    assert_each_call_is_a_point(
        lambda model: torch.compile(model, backend=own_backend), config_file, tmp_path / "run"
    )


def test_fault2_a_site_twice_inside_a_named_point_keeps_both_values(tmp_path, config_file):
    torch.manual_seed(0)
    model = MLP()
    a, b = torch.randn(3, 8), torch.randn(3, 8)
    compiled = torch.compile(
        model, backend="tcgd", options={"probes": str(config_file), "run_dir": tmp_path / "r"}
    )
    session = tcgd_compile.session_of(compiled)
    with torch.no_grad(), session.record_point("both"):
        compiled(a)
        compiled(b)
    run = session.finish()
    point = run["both"]
    relu = sorted(
        (o for o in point.observations if o.site.aten_op == "aten.relu.default"),
        key=lambda o: o.invocation_index,
    )
    assert [o.invocation_index for o in relu] == [0, 1]
    torch.testing.assert_close(relu[0].tensor(), eager_sites(model, a)["relu"])
    torch.testing.assert_close(relu[1].tensor(), eager_sites(model, b)["relu"])


def test_a_repeated_point_label_is_refused_before_its_block_runs(tmp_path, config_file):
    compiled = torch.compile(
        MLP(), backend="tcgd", options={"probes": str(config_file), "run_dir": tmp_path / "r"}
    )
    session = tcgd_compile.session_of(compiled)
    x = torch.randn(3, 8)
    with torch.no_grad():
        with session.record_point("step"):
            compiled(x)
        ran = []
        for label in ("step", "", 3):
            with pytest.raises(InvalidInputError), session.record_point(label):
                ran.append(compiled(x))
        assert ran == []
        with session.record_point("after"):
            compiled(x)
    assert session.finish().labels == ("step", "after")


# --------------------------------------------------------------------------- fault 4
def test_fault4_session_of_reaches_the_session_of_modules_and_functions(tmp_path, config_file):
    model = MLP()
    by_name = torch.compile(
        model, backend="tcgd", options={"probes": str(config_file), "run_dir": tmp_path / "m"}
    )
    session = tcgd_compile.session_of(by_name)
    # The session the backend records into, found by the same settings.
    assert session is tcgd_compile.session_for(str(config_file), run_dir=tmp_path / "m")

    def fn(x):
        return torch.relu(x * 2.0)

    by_helper = tcgd_compile.compile(fn, probes=str(config_file), run_dir=tmp_path / "f")
    fn_name = torch.compile(
        fn, backend="tcgd", options={"probes": str(config_file), "run_dir": tmp_path / "g"}
    )
    x = torch.randn(4)
    with torch.no_grad():
        by_name(torch.randn(2, 8))
        by_helper(x)
        fn_name(x)
    for compiled, where in ((by_name, "m"), (by_helper, "f"), (fn_name, "g")):
        found = tcgd_compile.session_of(compiled)
        assert found.path == str(tmp_path / where), (where, found.path)
        assert len(found.finish()) == 1
    with pytest.raises(InvalidInputError, match="was not compiled with backend='tcgd'"):
        tcgd_compile.session_of(torch.compile(model))
    # Nothing of ours lands on the user's module.
    assert not any(name.startswith("_tcgd") for name in vars(model))


def test_fault4_flush_and_preview_mid_run_then_finish(tmp_path, config_file):
    torch.manual_seed(0)
    model = MLP()
    inputs = [torch.randn(3, 8) for _ in range(3)]
    compiled = tcgd_compile.compile(model, probes=config_file, run_dir=tmp_path / "run")
    session = tcgd_compile.session_of(compiled)
    with torch.no_grad():
        compiled(inputs[0])
        compiled(inputs[1])
    session.flush()
    # Durable and loadable from disk by anyone, mid-run: both calls, the run not complete.
    on_disk = TensorRun.load(tmp_path / "run")
    assert on_disk.labels == ("call0", "call1") and not on_disk.complete
    assert_point_holds(on_disk["call1"], model, inputs[1])
    preview = session.preview()
    assert preview.labels == ("call0", "call1") and not preview.complete
    with torch.no_grad():
        compiled(inputs[2])
    run = session.finish()
    assert run.complete and run.labels == ("call0", "call1", "call2")
    assert_point_holds(run["call2"], model, inputs[2])


def test_fault4_session_for_takes_a_config_path_and_normalises_run_dir(
    tmp_path, monkeypatch, config_file
):
    monkeypatch.chdir(tmp_path)
    model = MLP()
    compiled = torch.compile(
        model, backend="tcgd", options={"probes": str(config_file), "run_dir": "runs/x/"}
    )
    with torch.no_grad():
        compiled(torch.randn(2, 8))
    session = tcgd_compile.session_for(str(config_file), run_dir="runs/x")
    assert session is tcgd_compile.session_of(compiled)
    assert session is tcgd_compile.session_for(config_file, run_dir=tmp_path / "runs" / "x")
    run = session.finish()
    assert run.complete and len(run) == 1


def test_fault4_a_finished_session_never_breaks_the_model(tmp_path, config_file):
    torch.manual_seed(0)
    model = MLP()
    compiled = torch.compile(
        model, backend="tcgd", options={"probes": str(config_file), "run_dir": tmp_path / "r"}
    )
    with torch.no_grad():
        compiled(torch.randn(3, 8))
        compiled(torch.randn(3, 8))
    session = tcgd_compile.session_of(compiled)
    run = session.finish()
    assert run.labels == ("call0", "call1")
    # The model keeps working: same shape, and new shapes that recompile (saying that
    # what they compile records nothing).
    with torch.no_grad(), pytest.warns(UserWarning, match="is finished"):
        for shape in ((3, 8), (5, 8), (7, 8)):
            x = torch.randn(*shape)
            torch.testing.assert_close(compiled(x), eager_sites(model, x)["fc2"])
    assert tcgd_compile.session_of(compiled) is session
    assert session.finish() is run
    again = TensorRun.load(tmp_path / "r")
    assert again.complete and again.labels == ("call0", "call1")


# --------------------------------------------------------------------------- fault 6
def test_fault6_a_rerun_fails_without_overwrite_and_replaces_the_run_with_it(tmp_path, config_file):
    torch.manual_seed(0)
    model = MLP()
    x = torch.randn(3, 8)

    def run_script(**kwargs):
        torch._dynamo.reset()
        compiled = tcgd_compile.compile(model, probes=config_file, run_dir=tmp_path / "r", **kwargs)
        with torch.no_grad():
            compiled(x)
            compiled(x)
        return tcgd_compile.session_of(compiled).finish()

    first = run_script()
    with pytest.raises(RunExistsError):
        run_script()
    second = run_script(overwrite=True)
    assert second.run_id != first.run_id and second.labels == ("call0", "call1")
    assert TensorRun.load(tmp_path / "r").run_id == second.run_id


def test_fault6_overwrite_through_backend_options_probes_and_the_config(tmp_path, config_file):
    torch.manual_seed(0)
    model = MLP()
    x = torch.randn(3, 8)
    target = tmp_path / "r"

    def by_backend():
        torch._dynamo.reset()
        compiled = torch.compile(
            model,
            backend="tcgd",
            options={"probes": str(config_file), "run_dir": target, "overwrite": True},
        )
        with torch.no_grad():
            compiled(x)
        return tcgd_compile.session_of(compiled).finish()

    def by_block(config, **kwargs):
        torch._dynamo.reset()
        with tcgd_compile.probes(config, run_dir=target, **kwargs) as session:
            with torch.no_grad():
                torch.compile(model)(x)
        return session.finish()

    ids = [by_backend().run_id, by_backend().run_id]
    ids.append(by_block(config_file, overwrite=True).run_id)
    with pytest.raises(RunExistsError):
        by_block(config_file)
    rerunnable = tmp_path / "rerun.toml"
    rerunnable.write_text(CONFIG.replace('name = "mlp"', 'name = "mlp"\noverwrite = true'))
    ids.append(by_block(rerunnable).run_id)
    assert len(set(ids)) == 4
    assert TensorRun.load(target).run_id == ids[-1]


# --------------------------------------------------------------------------- fault 8
def test_fault8_cli_names_a_missing_script_or_function_in_one_line(tmp_path, config_file, capsys):
    factory = tmp_path / "model.py"
    factory.write_text("def make():\n    return None, []\n")
    cases = [
        (["explain", str(config_file), str(tmp_path / "nosuch.py")], "nosuch.py", "does not exist"),
        (
            ["differential", str(config_file), f"{tmp_path / 'gone.py'}:make", "--run-dir", "d"],
            "gone.py",
            "does not exist",
        ),
        (
            ["differential", str(config_file), f"{factory}:nosuch", "--run-dir", "d"],
            "'nosuch'",
            "its functions: make",
        ),
    ]
    for argv, name, hint in cases:
        assert tcgd_main(argv) == 2, argv
        out, err = capsys.readouterr()
        assert out == ""
        assert err.count("\n") == 1 and err.startswith("tcgd: error: "), err
        assert name in err and hint in err, err
        assert "Traceback" not in err
    from torch_cudagraph_debug.cli.compile import _factory

    with pytest.raises(ScriptNotFoundError) as missing:
        _factory(f"{tmp_path / 'gone.py'}:make")
    assert isinstance(missing.value, FileNotFoundError)


# --------------------------------------------------------------------------- fault 10
def test_fault10_explain_keeps_nothing_and_records_summaries_only(
    monkeypatch, tmp_path, config_file
):
    from torch_cudagraph_debug.compile import session as session_module
    from torch_cudagraph_debug.compile.explain import explain

    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setattr("tempfile.tempdir", str(scratch))
    opened = []
    original = session_module.ProbeSession.__init__

    def spy(self, *args, **kwargs):
        original(self, *args, **kwargs)
        opened.append(self)

    monkeypatch.setattr(session_module.ProbeSession, "__init__", spy)
    lines: list[str] = []
    report = explain(config_file, MLP(), torch.randn(2, 8), progress=lines.append)
    assert len(report.graphs) == 1 and len(report.graphs[0].selected) == 3
    (session,) = opened
    assert session.payload == "summary"
    assert list(scratch.iterdir()) == [], "explain left files behind"
    assert any(line.startswith("compiling a graph with Inductor") for line in lines), lines
    assert any("3 sites selected" in line for line in lines), lines


SCRIPT = textwrap.dedent(
    """
    import torch
    from torch import nn

    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
    with torch.no_grad():
        torch.compile(model)(torch.randn(2, 8))
    """
)


def test_fault10_tcgd_explain_progress_on_stderr_json_on_stdout_nothing_left(
    monkeypatch, tmp_path, config_file, capsys
):
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setattr("tempfile.tempdir", str(scratch))
    script = tmp_path / "model.py"
    script.write_text(SCRIPT)
    assert tcgd_main(["explain", "--json", str(config_file), str(script)]) == 0
    out, err = capsys.readouterr()
    (graph,) = json.loads(out)["graphs"]
    assert len(graph["selected"]) == 3
    assert "tcgd: compiling a graph with Inductor" in err and "3 sites selected" in err, err
    assert list(scratch.iterdir()) == []
    torch._dynamo.reset()
    assert tcgd_main(["explain", "--quiet", "--selected-only", str(config_file), str(script)]) == 0
    out, err = capsys.readouterr()
    assert err == "" and "3 selected" in out


def test_fault10_tcgd_explain_of_a_script_that_compiles_nothing_exits_2(
    tmp_path, config_file, capsys
):
    script = tmp_path / "idle.py"
    script.write_text(
        "import torch\nprint(torch.ones(2).sum().item(), file=__import__('sys').stderr)\n"
    )
    assert tcgd_main(["explain", "--quiet", str(config_file), str(script)]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    last = err.strip().splitlines()[-1]
    assert last.startswith("tcgd: error: ") and "compiled no graph" in last, err
    assert str(script) in last


def test_fault10_and_fault6_tcgd_differential_progress_quiet_and_overwrite(tmp_path, capsys):
    factory, config = write_differential_factory(tmp_path)
    argv = ["differential", str(config), f"{factory}:make", "--run-dir", str(tmp_path / "d")]
    assert tcgd_main([*argv, "--json"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["status"] == "match"
    for line in (
        "tcgd: eager: call 1/2",
        "tcgd: eager: call 2/2",
        "tcgd: float64: call 2/2",
        "tcgd: compiled: call 2/2",
        "tcgd: comparing",
        "tcgd: compiling a graph with Inductor",
    ):
        assert line in err, (line, err)
    # A re-run into the same directory: refused, then replaced with --overwrite.
    assert tcgd_main(argv) == 2
    out, err = capsys.readouterr()
    assert "tcgd: error:" in err and "'compiled'" in err and "--overwrite" in err, err
    assert tcgd_main([*argv, "--overwrite", "--quiet", "--json"]) == 0
    out, err = capsys.readouterr()
    assert err == "" and json.loads(out)["status"] == "match"


def test_fault10_differential_reports_each_stage(tmp_path):
    lines: list[str] = []
    torch.manual_seed(0)
    differential(
        MLP(),
        [(torch.randn(2, 8),) for _ in range(3)],
        probes=CONFIG_DICT_ADDMM,
        run_dir=tmp_path,
        progress=lines.append,
    )
    calls = [line for line in lines if ": call " in line]
    sides = ("compiled", "eager", "float64")
    assert calls == [f"{side}: call {i}/3" for side in sides for i in (1, 2, 3)]
    assert lines[-1].startswith("comparing")
    # Inductor compiles once (the compiled variant); eager and float64 interpret the graphs.
    assert sum(line.startswith("compiling") for line in lines) == 1, lines


# --------------------------------------------------------------------------- fault 11
def test_fault11_run_names_that_leave_run_dir_are_refused(tmp_path):
    path = tmp_path / "escape.toml"
    path.write_text(CONFIG.replace('name = "mlp"', 'name = "../../x"'))
    with pytest.raises(ConfigError, match=re.escape(f"{path}:5: run.name: ")):
        tcgd_compile.load_config(path)
    with pytest.raises(ConfigError, match=r"run\.name"):
        tcgd_compile.load_config({"version": 1, "run": {"name": "a/b"}, "select": [{}]})
    with pytest.raises(InvalidInputError, match="run name"):
        tcgd_compile.compile(MLP(), probes=CONFIG_DICT_ADDMM, run_name="../x")
    assert not (tmp_path.parent / "x").exists()


def test_fault11_source_entries_are_checked_when_the_config_loads(tmp_path):
    path = tmp_path / "sources.toml"
    path.write_text(CONFIG + 'sources = ["model.py:abc"]\n')
    with pytest.raises(ConfigError) as error:
        tcgd_compile.load_config(path)
    message = str(error.value)
    assert message.startswith(f"{path}:9: select[0].sources: bad source 'model.py:abc'"), message
    assert "file-glob[:line[-line]]" in message
    good = tmp_path / "good.toml"
    good.write_text(CONFIG + 'sources = ["model.py:3-9", "*.py"]\n')
    assert tcgd_compile.load_config(good).digest


def test_fault11_explicit_run_name_is_checked_in_probe_sessions(tmp_path):
    from torch_cudagraph_debug.compile.session import ProbeSession

    with pytest.raises(InvalidInputError, match="run name"):
        ProbeSession(tcgd_compile.load_config(CONFIG_DICT_ADDMM), name="..")
    assert os.listdir(tmp_path) == []
