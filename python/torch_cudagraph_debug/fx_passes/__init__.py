"""FX graph passes that place tensor probes in the post-grad graphs Inductor compiles.

Shipped inside the wheel as ``torch_cudagraph_debug.fx_passes``.
"""

from torch_cudagraph_debug.fx_passes.probe_insertion import (
    GRAPH_KIND,
    ChainedPass,
    GraphDecisions,
    ProbeInsertionPass,
    graph_kind,
    graph_kind_of,
    node_facts,
)

__all__ = [
    "GRAPH_KIND",
    "ChainedPass",
    "GraphDecisions",
    "ProbeInsertionPass",
    "graph_kind",
    "graph_kind_of",
    "node_facts",
]
