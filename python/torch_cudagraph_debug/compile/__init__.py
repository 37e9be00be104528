"""The torch.compile plugin: probes placed by FX passes on Inductor's post-grad graphs,
chosen by a config file. See ``docs/compile-plugin.md``."""

from __future__ import annotations

from typing import Any


def tcgd_backend(gm: Any, example_inputs: Any, **kwargs: Any) -> Any:
    """The ``backend="tcgd"`` entry point (resolved through ``torch_dynamo_backends``)."""
    from torch_cudagraph_debug.compile.backend import compile_with_probes

    return compile_with_probes(gm, example_inputs, **kwargs)
