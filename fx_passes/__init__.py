"""FX graph passes that place tensor probes in the post-grad graphs Inductor compiles.

Shipped inside the wheel as ``torch_cudagraph_debug.fx_passes``. The passes (node selection
from a config file, probe insertion, site identity) arrive with the compile plugin.
"""
