"""A real model nobody here wrote: a transformers GPT-2 built from a config with random
weights, probed over its attention and MLP modules (CPU Inductor)."""

from __future__ import annotations

import pytest
import torch
import torch_cudagraph_debug.compile as tcgd_compile

transformers = pytest.importorskip("transformers")

CONFIG = {
    "version": 1,
    "run": {"name": "gpt2", "payload": "full"},
    "select": [
        {
            "modules": ["h.*.attn*", "h.*.mlp*"],
            "ops": ["aten.addmm", "aten.mm", "aten.bmm", "aten._scaled_dot_product_*"],
        }
    ],
}


def tiny_gpt2() -> torch.nn.Module:
    config = transformers.GPT2Config(
        n_layer=2, n_head=2, n_embd=32, n_positions=32, vocab_size=97, attn_implementation="sdpa"
    )
    torch.manual_seed(0)
    return transformers.GPT2Model(config).eval()


pytestmark = pytest.mark.usefixtures("fresh_inductor")


def test_gpt2_attention_and_mlp_sites_record_eager_equal_values(tmp_path):
    model = tiny_gpt2()
    ids = torch.randint(0, 97, (2, 16), generator=torch.Generator().manual_seed(1))
    compiled = tcgd_compile.compile(model, probes=CONFIG, run_dir=tmp_path / "run")
    with torch.no_grad():
        out = compiled(input_ids=ids).last_hidden_state
        compiled(input_ids=ids)
        eager = model(input_ids=ids).last_hidden_state
    torch.testing.assert_close(out, eager, rtol=1e-4, atol=1e-5)
    session = tcgd_compile.session_for(tcgd_compile.load_config(CONFIG), run_dir=tmp_path / "run")
    run = session.finish()
    assert len(run) == 2
    modules = {o.site.module_path for o in run[0].observations}
    assert {"h.0.attn.c_attn", "h.0.mlp.c_fc", "h.1.attn.c_proj", "h.1.mlp.c_proj"} <= modules, (
        modules
    )
    assert all(m.startswith(("h.0.attn", "h.0.mlp", "h.1.attn", "h.1.mlp")) for m in modules)
    # The MLP's first projection equals the eager Conv1D output of the same input.
    captured = {}
    hook = model.h[1].mlp.c_fc.register_forward_hook(lambda m, i, o: captured.update(v=o))
    with torch.no_grad():
        model(input_ids=ids)
    hook.remove()
    site = next(o for o in run[1].observations if o.site.module_path == "h.1.mlp.c_fc")
    torch.testing.assert_close(
        site.tensor().reshape(captured["v"].shape), captured["v"], rtol=1e-4, atol=1e-5
    )
