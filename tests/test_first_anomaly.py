"""The first-anomaly query: the first point and site, in execution order, whose values hold
a NaN, an infinity or a magnitude over a threshold; from Python and from
`tcgd tensor first-anomaly` (exit 0 none, 1 found, 2 error)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import torch
import torch_cudagraph_debug.compile as tcgd_compile
from torch_cudagraph_debug.cli import main
from torch_cudagraph_debug.errors import InvalidInputError, RunNotFoundError
from torch_cudagraph_debug.tensor_debug import FirstAnomaly, TensorRecorder, TensorRun

NAN, INF = float("nan"), float("inf")
SITES = ("embed", "attn", "mlp", "out")


def _values(step: int, site: str) -> torch.Tensor:
    """Finite values everywhere but at the planted places:

    - step 2: `mlp` holds a NaN, `out` (later in the step) a NaN and a -inf;
    - step 3: `embed` (earlier in its step, later in the run) holds +inf;
    - step 4: `attn` holds 500 (finite, large)."""
    x = torch.linspace(-1.0, 1.0, 6) * (step + 1)
    if (step, site) == (2, "mlp"):
        x[1] = NAN
    if (step, site) == (2, "out"):
        x[0], x[4] = NAN, -INF
    if (step, site) == (3, "embed"):
        x[2] = INF
    if (step, site) == (4, "attn"):
        x[3] = 500.0
    return x


def record(root, *, payload="full", steps=5, clean=False):
    with TensorRecorder(name="rec", run_dir=root, payload=payload) as rec:
        for step in range(steps):
            with rec.record_point(f"step{step}"):
                for site in SITES:
                    value = torch.ones(6) if clean else _values(step, site)
                    rec.observe(value, name=site)
    return root


@pytest.fixture(params=["full", "summary"])
def root(request, tmp_path):
    return record(tmp_path / f"job-{request.param}", payload=request.param)


def run_cli(capsys, *argv):
    code = main(["tensor", "first-anomaly", *map(str, argv)])
    out, err = capsys.readouterr()
    return code, out, err


def test_nonfinite_names_the_first_point_and_site_and_the_later_sites_there(root):
    run = TensorRun.load(root)
    found = run.first_anomaly()
    assert isinstance(found, FirstAnomaly)
    assert (found.kind, found.threshold, found.site_filter) == ("nonfinite", None, None)
    assert (found.point_index, found.label, found.replay_index) == (2, "step2", None)
    assert (found.name, found.invocation_index, found.order) == ("mlp", 0, 2)
    # The value's summary and site, as its TensorObservation has them.
    summary = found.summary
    assert (summary.nan_count, summary.pos_inf_count, summary.neg_inf_count) == (1, 0, 0)
    assert summary == run["step2"].observations[2].summary
    # Finite extremes of linspace(-3, 3, 6) without its element 1 (-1.8).
    assert summary.min == pytest.approx(-3.0) and summary.max == pytest.approx(3.0)
    assert summary.abs_max == pytest.approx(3.0)
    # Hand-placed probes have no site.
    assert found.site is None
    # Two points of four observations, then embed, attn, mlp of step 2.
    assert found.scanned == 2 * 4 + 3
    sites = [
        (s.point_index, s.name, s.summary.nan_count, s.summary.pos_inf_count) for s in found.sites
    ]
    assert sites == [(2, "mlp", 1, 0), (2, "out", 1, 0)]
    assert found.sites[1].summary.neg_inf_count == 1
    assert found.sites[0].label == "step2" and found.sites[1].order == 3


def test_each_kind_finds_its_own_first_point(root):
    run = TensorRun.load(root)
    nan = run.first_anomaly("nan")
    assert (nan.label, nan.name) == ("step2", "mlp")
    # Infinity: -inf of `out` at step 2 comes before +inf of `embed` at step 3.
    inf = run.first_anomaly("inf")
    assert (inf.label, inf.name, inf.summary.neg_inf_count) == ("step2", "out", 1)
    assert [s.name for s in inf.sites] == ["out"]
    assert inf.scanned == 2 * 4 + 4
    # Magnitudes: step 2's `out` holds -inf (over any threshold) before step 4's 500.
    big = run.first_anomaly("abs_max", threshold=100.0)
    assert (big.kind, big.threshold, big.label, big.name) == ("abs_max", 100.0, "step2", "out")
    # A threshold below the plain values (step k: |x| <= k + 1) hits step 2's first site.
    low = run.first_anomaly("abs_max", threshold=2.5)
    assert (low.label, low.name, low.summary.abs_max) == ("step2", "embed", pytest.approx(3.0))
    # Over 1e3 only infinities pass.
    assert run.first_anomaly("abs_max", threshold=1e3).name == "out"


def test_site_filter_takes_globs_and_exact_names(root):
    run = TensorRun.load(root)
    embed = run.first_anomaly(site="embed")
    assert (embed.label, embed.name, embed.summary.pos_inf_count, embed.site_filter) == (
        "step3",
        "embed",
        1,
        "embed",
    )
    # Visited: embed of steps 0..3.
    assert embed.scanned == 4
    attn = run.first_anomaly("abs_max", threshold=100.0, site="a*")
    assert (attn.label, attn.name, attn.summary.max) == ("step4", "attn", 500.0)
    assert run.first_anomaly(site="m?p").name == "mlp"
    assert run.first_anomaly(site="[eo]*").name == "out"
    # Exact means exact: no prefix match.
    assert run.first_anomaly(site="emb") is None
    assert run.first_anomaly("nan", site="attn") is None


def test_a_clean_run_has_no_anomaly(tmp_path):
    run = TensorRun.load(record(tmp_path / "clean", clean=True))
    for kind in ("nan", "inf", "nonfinite"):
        assert run.first_anomaly(kind) is None
    assert run.first_anomaly("abs_max", threshold=1.0) is None
    assert run.first_anomaly("abs_max", threshold=0.5).label == "step0"


def test_bad_kinds_and_thresholds_raise_invalid_input_naming_the_choices(root):
    run = TensorRun.load(root)
    with pytest.raises(InvalidInputError, match="nan, inf, nonfinite, abs_max; got 'nans'"):
        run.first_anomaly("nans")  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match="'abs_max' needs a threshold"):
        run.first_anomaly("abs_max")
    with pytest.raises(InvalidInputError, match="'abs_max' only"):
        run.first_anomaly("nan", threshold=1.0)
    with pytest.raises(InvalidInputError, match="finite number of at least 0"):
        run.first_anomaly("abs_max", threshold=-1.0)
    with pytest.raises(InvalidInputError, match="bad site glob"):
        run.first_anomaly(site="a[")
    # An InvalidInputError is a ValueError too.
    with pytest.raises(ValueError):
        run.first_anomaly("abs-max", threshold=1.0)  # type: ignore[arg-type]


def test_result_is_frozen_and_serialises_to_one_json_object(root):
    found = TensorRun.load(root).first_anomaly()
    with pytest.raises(AttributeError):
        found.label = "other"  # type: ignore[misc]
    data = json.loads(found.to_json())
    assert (data["kind"], data["scanned"], data["threshold"]) == ("nonfinite", 11, None)
    assert [h["name"] for h in data["sites"]] == ["mlp", "out"]
    assert data["sites"][1]["neg_inf_count"] == 1 and data["sites"][0]["replay_index"] is None
    # to_dict() is the same object without the text.
    assert found.to_dict() == data
    assert "label='step2'" in repr(found) and "name='mlp'" in repr(found.sites[0])
    assert "kind='nonfinite'" in repr(found) and "replay_index=None" in repr(found)


# ------------------------------------------------------------------------------- CLI
def test_cli_prints_the_first_anomaly_and_exits_1(root, capsys):
    code, out, err = run_cli(capsys, root)
    assert code == 1, err
    assert "first anomaly (nonfinite)" in out
    assert "replay:  -" in out
    assert "point:   #2 'step2'" in out
    assert "site:    mlp[0], order 2" in out
    assert "nan 1, +inf 0, -inf 0; finite min -3, max 3" in out
    assert "scanned: 11 observations" in out
    assert "1 other site hit at this point:" in out
    assert "order 3: out[0]: nan 1, +inf 0, -inf 1" in out

    code, out, _ = run_cli(capsys, root, "--kind", "inf", "--site", "e*")
    assert code == 1
    assert "point:   #3 'step3'" in out and "site:    embed[0]" in out
    assert "among sites matching 'e*'" in out and "no other site hit" in out

    code, out, _ = run_cli(capsys, root, "--kind", "abs-max", "--threshold", "100", "--json")
    assert code == 1
    data = json.loads(out)
    assert data["found"] is True and data["kind"] == "abs_max" and data["threshold"] == 100.0
    first = data["sites"][0]
    assert (first["label"], first["name"], first["point_index"]) == ("step2", "out", 2)


def test_cli_exits_0_without_an_anomaly(root, tmp_path, capsys):
    code, out, _ = run_cli(capsys, root, "--site", "nothing-here")
    assert code == 0 and "no anomaly (nonfinite) among sites matching 'nothing-here'" in out
    clean = record(tmp_path / "clean", clean=True)
    code, out, _ = run_cli(capsys, clean, "--json")
    assert code == 0
    assert json.loads(out) == {
        "found": False,
        "kind": "nonfinite",
        "threshold": None,
        "site_filter": None,
    }


def test_cli_errors_exit_2(root, tmp_path, capsys):
    code, _, err = run_cli(capsys, tmp_path / "nope")
    assert code == 2 and "tcgd: error:" in err and "is not a job root" in err
    code, _, err = run_cli(capsys, root, "--kind", "abs-max")
    assert code == 2 and "--kind abs-max needs --threshold" in err
    code, _, err = run_cli(capsys, root, "--threshold", "3")
    assert code == 2 and "--threshold applies to --kind abs-max only" in err
    code, _, err = run_cli(capsys, root, "--site", "a[")
    assert code == 2 and "bad site glob 'a['" in err
    # argparse names the kinds itself.
    with pytest.raises(SystemExit) as exit_info:
        main(["tensor", "first-anomaly", str(root), "--kind", "nans"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "invalid choice: 'nans'" in err and "'abs-max'" in err, err
    # --name / --rank pick the run, and a name the root lacks is an error.
    code, out, _ = run_cli(capsys, root, "--name", "rec", "--rank", "0")
    assert code == 1 and "'step2'" in out
    code, _, err = run_cli(capsys, root, "--name", "other")
    assert code == 2 and "tcgd: error:" in err
    with pytest.raises(RunNotFoundError):
        TensorRun.load(root, name="other")


def test_cli_as_a_module_returns_the_same_exit_code(root):
    command = ["tensor", "first-anomaly", str(root), "--kind", "nan", "--json"]
    done = subprocess.run(
        [sys.executable, "-m", "torch_cudagraph_debug.cli", *command],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1, done.stderr
    data = json.loads(done.stdout)
    assert (data["sites"][0]["label"], data["sites"][0]["name"]) == ("step2", "mlp")


# -------------------------------------------------------------------- compiled model
class Stack(torch.nn.Module):
    """Four linear layers with a ReLU after each but the last."""

    def __init__(self):
        super().__init__()
        self.layers = torch.nn.ModuleList(torch.nn.Linear(8, 8) for _ in range(4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for i, layer in enumerate(self.layers):
            x = layer(x)
            if i < len(self.layers) - 1:
                x = torch.relu(x)
        return x


@pytest.mark.usefixtures("fresh_inductor")
def test_compiled_model_names_call_3_and_the_second_linear(tmp_path, capsys):
    torch.manual_seed(0)
    model = Stack()
    root = tmp_path / "job"
    options = {
        "probes": {"version": 1, "select": [{"ops": ["aten.addmm", "aten.relu"]}]},
        "run_dir": str(root),
        "run_name": "compiled",
        "payload": "summary",
    }
    compiled = torch.compile(model, backend="tcgd", options=options)
    with torch.no_grad():
        for call in range(6):
            if call == 3:
                # The parameter is read at run time: from this call on, the second
                # linear's output (and everything after it) holds NaN; the first's never.
                model.layers[1].weight[0, 0] = NAN
            compiled(torch.randn(3, 8))
    finished = tcgd_compile.session_of(compiled).finish()
    assert finished.name == "compiled"
    run = TensorRun.load(root, name="compiled")
    assert run.labels == tuple(f"call{i}" for i in range(6))
    found = run.first_anomaly("nan")
    assert (found.label, found.point_index, found.replay_index) == ("call3", 3, None)
    site = found.site
    assert site == run["call3"].observations[2].site
    assert site.module_path == "layers.1"
    assert site.aten_op == "aten.addmm.default" and site.graph_kind == "inference"
    assert found.name == site.site_id and site.node_name
    # The source line of the model that produced the value, and the compile it belongs to.
    assert site.source_location and "test_first_anomaly.py" in site.source_location
    assert site.compile_id
    assert found.summary.nan_count == 3  # one column of the 3 x 8 output
    # The sites after it in call 3 hit too, in execution order: its ReLU, then the later
    # layers (whose outputs are all NaN); the first layer and its ReLU come before it.
    sites = [
        (s.order, s.site.module_path, s.site.aten_op, s.summary.nan_count) for s in found.sites
    ]
    assert sites == [
        (2, "layers.1", "aten.addmm.default", 3),
        (3, None, "aten.relu.default", 3),
        (4, "layers.2", "aten.addmm.default", 24),
        (5, None, "aten.relu.default", 24),
        (6, "layers.3", "aten.addmm.default", 24),
    ]
    # Three calls of seven sites, then the first layer, its ReLU and the hit.
    assert [len(run[f"call{i}"].observations) for i in range(3)] == [7, 7, 7]
    assert found.scanned == 3 * 7 + 3
    # Filtered to the first layer: nothing.
    assert run.first_anomaly(site="layers.0") is None
    code = main(["tensor", "first-anomaly", str(root), "--name", "compiled", "--kind", "nan"])
    out = capsys.readouterr().out
    assert code == 1
    assert "point:   #3 'call3'" in out and "layers.1, aten.addmm.default, inference graph" in out
