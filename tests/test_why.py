"""`why`: the differential against the true eager model, the float64 judgement and the
culprit search, each checked on a planted cause it must name."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch
from torch import nn
from torch._inductor.custom_graph_pass import CustomGraphPass
from torch_cudagraph_debug.compile.differential import as_call, differential
from torch_cudagraph_debug.compile.why import why

pytestmark = pytest.mark.usefixtures("fresh_inductor")

PROBES = {"version": 1, "select": [{"ops": ["aten.addmm", "aten.mm", "aten.tanh"]}]}


class Tanh4(nn.Module):
    """Four Linear(64, 64) + tanh layers."""

    def __init__(self) -> None:
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(64, 64) for _ in range(4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            x = torch.tanh(layer(x))
        return x


class ScaleSecondMatmul(CustomGraphPass):
    """A post-grad pass that scales the second matmul's output by 1.01."""

    def __call__(self, graph: torch.fx.Graph) -> None:
        mm = (torch.ops.aten.addmm.default, torch.ops.aten.mm.default)
        node = [n for n in graph.nodes if n.target in mm][1]
        with graph.inserting_after(node):
            scaled = graph.call_function(torch.ops.aten.mul.Tensor, (node, 1.01))
        node.replace_all_uses_with(scaled, delete_user_cb=lambda user: user is not scaled)

    def uuid(self) -> bytes:
        return b"scale-second-matmul"


def model_and_batches() -> tuple[nn.Module, list[torch.Tensor]]:
    torch.manual_seed(0)
    return Tanh4().eval(), [torch.randn(16, 64) for _ in range(2)]


@pytest.fixture
def planted_pass():
    import torch._inductor.config as inductor_config

    # Inductor's config module is patched through its own API (monkeypatch would delete
    # the entry on undo: it does not see config entries as attributes).
    with inductor_config.patch(post_grad_custom_post_pass=ScaleSecondMatmul()):
        yield


@pytest.fixture
def planted_lowering(monkeypatch):
    """tanh lowered to tanh(x) * 1.001: only Inductor's lowering is wrong."""
    from torch._inductor import lowering

    aten = torch.ops.aten
    good = lowering.lowerings[aten.tanh.default]

    def worse_tanh(x):
        return lowering.lowerings[aten.mul.Tensor](good(x), 1.001)

    monkeypatch.setitem(lowering.lowerings, aten.tanh.default, worse_tanh)


def test_a_single_tensor_batch_is_one_argument():
    x = torch.zeros(17, 3)
    call = as_call(x)
    assert len(call.args) == 1 and call.args[0] is x
    assert as_call((x, x)).args == (x, x)
    assert as_call({"input": x}).kwargs == {"input": x}


def test_a_graph_pass_fault_is_a_mismatch_not_a_match(tmp_path, planted_pass):
    model, batches = model_and_batches()
    with torch.no_grad():
        eager = model(batches[0])
        compiled = torch.compile(model)(batches[0])
    torch._dynamo.reset()
    assert (eager - compiled).abs().max() > 1e-3  # the pass changes the outputs
    result = differential(model, batches, probes=PROBES, run_dir=tmp_path)
    assert result.status == "mismatch", result.to_text()
    verdicts = {(v.comparison, v.scope.split(" (")[0]): v.status for v in result.verdicts}
    assert verdicts[("eager vs compiled", "model outputs")] == "mismatch"
    assert (
        verdicts[("float64 rule", "aligned sites and outputs, against the eager model in float64")]
        == "diverges"
    )
    # Sites before the pass's mul agree; the first to diverge is right after it.
    first = result.first_divergence
    assert first.observation.name == "inference/-/tanh_1", result.to_text()
    judged = {(a.point, a.name): a.verdict for a in result.accuracy}
    assert judged[("call0", "inference/layers.1/addmm_1")] == "close"
    assert judged[("call0", "inference/-/tanh_1")] == "diverges"
    assert judged[("call0", "output/0")] == "diverges"


def test_why_names_the_custom_pass(tmp_path, planted_pass):
    model, batches = model_and_batches()
    report = why(model, batches, run_dir=tmp_path, probes=PROBES)
    culprit = report.culprit
    assert culprit is not None, report.to_text()
    assert culprit.kind == "setting"
    assert culprit.name == "post_grad_custom_post_pass = <ScaleSecondMatmul>"
    assert culprit.with_.diverges and not culprit.without.diverges
    text = report.to_text()
    assert "culprit: setting post_grad_custom_post_pass" in text
    assert "Error against float64, site by site" in text
    html = report.to_html()
    assert "<svg" in html and "ScaleSecondMatmul" in html


def test_why_names_the_lowering(tmp_path, planted_lowering):
    model, batches = model_and_batches()
    report = why(model, batches, run_dir=tmp_path, probes=PROBES)
    culprit = report.culprit
    assert culprit is not None, report.to_text()
    assert (culprit.kind, culprit.name, culprit.backend) == ("lowering", "tanh", "inductor")
    stages = [t.stage for t in report.search.trials]
    assert "backends and subsystems" in stages
    # Backends before Inductor did not diverge: the search moved past them.
    first = {t.setting: t.diverges for t in report.search.trials}
    assert first["aot_eager"] is False and first["inductor"] is True


class TanhshrinkAtan2(nn.Module):
    """``atan2(y, y)`` of ``y = x - tanh(x)``: the sign of a tiny difference decides
    between pi/4 and -3pi/4, so tanh's error near zero shows at full scale."""

    def __init__(self) -> None:
        super().__init__()
        self.shrink = nn.Tanhshrink()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.shrink(x)
        return torch.atan2(y, y)


@pytest.fixture
def planted_switch():
    """``cpp.use_decompose_tanh``: Inductor's CPU switch that vectorises tanh as
    ``2 / (1 + exp(-2x)) - 1``, which loses tanh's relative precision near zero (off by
    default since PyTorch issue 148241, a Tanhshrink-atan2 program off by pi)."""
    import torch._inductor.config as inductor_config

    with inductor_config.patch({"cpp.use_decompose_tanh": True}):
        yield


def test_why_names_the_switch_that_makes_a_lowering_less_precise(tmp_path, planted_switch):
    torch.manual_seed(0)
    batches = [torch.randn(1, 3, 64, 64) for _ in range(2)]
    probes = {"version": 1, "select": [{"ops": ["aten.tanh", "aten.sub", "aten.atan2"]}]}
    report = why(TanhshrinkAtan2().eval(), batches, run_dir=tmp_path, probes=probes)
    culprit = report.culprit
    assert culprit is not None, report.to_text()
    assert (culprit.kind, culprit.name) == ("setting", "cpp.use_decompose_tanh"), report.to_text()
    assert culprit.with_.diverges and not culprit.without.diverges
    # Not rounding: by the float64 rule the compiled output is much further from the
    # truth than eager's (values of pi/4 and -3pi/4 swapped), and so is the tanh site.
    judged = {(a.point, a.name): a.verdict for a in report.differential.accuracy}
    assert judged[("call0", "output/0")] == "diverges", report.to_text()
    assert "culprit: setting cpp.use_decompose_tanh" in report.to_text()


def test_nothing_planted_says_nothing_diverges(tmp_path):
    model, batches = model_and_batches()
    report = why(model, batches, run_dir=tmp_path, probes=PROBES)
    assert report.culprit is None, report.to_text()
    assert report.search.skipped is not None
    # By the float64 rule nothing diverges, wherever this runs.
    assert not report.differential.diverging_sites, report.to_text()
    # Whether Inductor's CPU kernels round exactly as eager does depends on the machine's
    # vector width: bit-identical outputs are "match"; otherwise the report must say the
    # difference is rounding, not a fault, and search nothing.
    if report.status == "match":
        assert report.conclusion.startswith("nothing diverges")
    else:
        assert report.status == "mismatch", report.to_text()
        assert "rounding, not a bug" in report.conclusion
        assert "within rounding" in report.search.skipped


def test_tcgd_why_cli_text_json_html_and_exit_status(tmp_path):
    factory = tmp_path / "planted.py"
    factory.write_text(
        "import torch, sys\n"
        f"sys.path.insert(0, {os.path.dirname(__file__)!r})\n"
        "from test_why import ScaleSecondMatmul, model_and_batches\n"
        "def make():\n"
        "    import torch._inductor.config as c\n"
        "    c.post_grad_custom_post_pass = ScaleSecondMatmul()\n"
        "    print('made the model')  # a factory's prints must not reach stdout\n"
        "    return model_and_batches()\n"
    )
    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "cache")}
    base = [sys.executable, "-m", "torch_cudagraph_debug.cli", "why", f"{factory}:make"]
    done = subprocess.run(
        [*base, "--run-dir", str(tmp_path / "runs"), "--json", "--report", str(tmp_path / "r")],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert done.returncode == 1, done.stderr
    report = json.loads(done.stdout)
    assert report["status"] == "mismatch"
    assert report["search"]["culprit"]["kind"] == "setting"
    assert "made the model" in done.stderr
    assert {p.name for p in (tmp_path / "r").iterdir()} == {"why.txt", "why.html", "why.json"}
    # Again into the same run dir: refused with the flag to use, then replaced.
    again = subprocess.run(
        [*base, "--run-dir", str(tmp_path / "runs"), "--quiet", "--no-search"],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert again.returncode == 2 and "--overwrite" in again.stderr, again.stderr
    again = subprocess.run(
        [*base, "--run-dir", str(tmp_path / "runs"), "--quiet", "--no-search", "--overwrite"],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert again.returncode == 1, again.stderr
    assert "culprit search not run: not asked for" in again.stdout
