"""Scripts of the repository (examples, fixture recorders) loaded as modules, for the GPU
tests that take a piece of one (a model, a capture) rather than write it again.

A plain module beside the tests, so that a test file run as a script (a child process)
imports it too."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

REPO = Path(__file__).resolve().parents[2]


def load_script(relative: str) -> ModuleType:
    """The script at ``relative`` (to the repository root) as a module named after its
    file; its ``if __name__ == "__main__":`` part does not run."""
    path = REPO / relative
    if path.stem in sys.modules:
        return sys.modules[path.stem]
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None and spec.loader is not None, path
    module = importlib.util.module_from_spec(spec)
    sys.modules[path.stem] = module
    spec.loader.exec_module(module)
    return module
