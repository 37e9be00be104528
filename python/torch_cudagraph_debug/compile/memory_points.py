"""Memory points the compile plugin records by itself, from the ``[memory]`` table of the
probe config: before and after each CUDA Graph Trees recording, after each warmup run,
every N calls of the compiled model.

Graph Trees is hooked where it records and warms up (``CUDAGraphTreeManager``'s
``record_function`` and ``run_eager``), never where it replays: a replayed call does no
work here. The hook is installed once per process, at the first session that asks for
memory points, and does nothing while no such session is open. The memory run is a
``MemoryRecorder`` run (created at the first point: it needs CUDA), in the probe run's
job root unless ``[memory] dir`` says otherwise.
"""

from __future__ import annotations

import contextlib
import functools
import threading
import warnings
from typing import Any

from torch_cudagraph_debug.memory_debug._model import MemoryDebugWarning

_LOCK = threading.Lock()
# Sessions with memory points that are open now; the hook records into each.
_ACTIVE: list[CompileMemoryPoints] = []
_INSTALLED = False


class CompileMemoryPoints:
    """The memory points of one probe session."""

    def __init__(self, settings: dict[str, Any], default_root: str):
        self.settings = settings
        self.points: frozenset[str] = frozenset(settings["points"])
        self.every = int(settings.get("every", 0))
        self.root = settings.get("dir") or default_root
        self._recorder: Any = None
        self._calls = 0
        self._count = 0
        self._failed = False
        self._lock = threading.RLock()

    @property
    def recorder(self) -> Any:
        """The ``MemoryRecorder`` points go into (``None`` before the first point)."""
        return self._recorder

    def _record(self, kind: str, metadata: dict[str, Any]) -> None:
        with self._lock:
            if self._failed:
                return
            try:
                if self._recorder is None:
                    from torch_cudagraph_debug.memory_debug import MemoryRecorder

                    self._recorder = MemoryRecorder(
                        name=self.settings["name"],
                        run_dir=self.root,
                        overwrite=bool(self.settings.get("overwrite", False)),
                        reset_peaks=bool(self.settings.get("reset_peaks", False)),
                    )
                label = f"{kind}.{self._count}"
                self._count += 1
                self._recorder.record_point(label, metadata={"point": kind, **metadata})
            except Exception as e:
                # A memory point must never break the model it watches: stop, say why once.
                self._failed = True
                warnings.warn(
                    f"memory points of the compile plugin stopped: {type(e).__name__}: {e}",
                    MemoryDebugWarning,
                    stacklevel=3,
                )

    def before_recording(self, facts: dict[str, Any]) -> None:
        if "before_recording" in self.points:
            self._record("before_recording", facts)

    def after_recording(self, facts: dict[str, Any]) -> None:
        if "after_recording" in self.points:
            self._record("after_recording", facts)

    def after_warmup(self, facts: dict[str, Any]) -> None:
        if "after_warmup" in self.points:
            self._record("after_warmup", facts)

    def on_call(self) -> None:
        """One call of a compiled callable (only wired when ``every`` > 0)."""
        self._calls += 1
        if self._calls % self.every == 0:
            self._record("call", {"call": self._calls})

    def finish(self) -> None:
        with _LOCK:
            if self in _ACTIVE:
                _ACTIVE.remove(self)
        with self._lock:
            if self._recorder is not None:
                with contextlib.suppress(Exception):
                    self._recorder.finish()


def _facts(manager: Any, function_id: Any) -> dict[str, Any]:
    """What the manager says of a function (read defensively: torch internals)."""
    facts: dict[str, Any] = {}
    with contextlib.suppress(Exception):
        facts["device"] = int(manager.device_index)
    with contextlib.suppress(Exception):
        facts["function_id"] = int(function_id.id)
    with contextlib.suppress(Exception):
        mode = manager.id_to_mode.get(function_id)
        facts["function_kind"] = None if mode is None else mode.name.lower()
    with contextlib.suppress(Exception):
        cid = manager.id_to_compile_id.get(function_id)
        facts["compile_id"] = None if cid is None else str(cid)
    return facts


def _active() -> list[CompileMemoryPoints]:
    with _LOCK:
        return list(_ACTIVE)


def _hook(manager_class: Any) -> None:
    record = manager_class.record_function
    warm = manager_class.run_eager

    @functools.wraps(record)
    def record_function(self: Any, new_inputs: Any, function_id: Any) -> Any:
        sessions = _active()
        if not sessions:
            return record(self, new_inputs, function_id)
        facts = _facts(self, function_id)
        for s in sessions:
            s.before_recording(facts)
        out = record(self, new_inputs, function_id)
        with contextlib.suppress(Exception):
            facts["graph_id"] = int(self.current_node.id.id)
        for s in sessions:
            s.after_recording(facts)
        return out

    @functools.wraps(warm)
    def run_eager(self: Any, new_inputs: Any, function_id: Any) -> Any:
        out = warm(self, new_inputs, function_id)
        sessions = _active()
        if sessions:
            facts = _facts(self, function_id)
            for s in sessions:
                s.after_warmup(facts)
        return out

    record_function._tcgd_memory_hook = True  # type: ignore[attr-defined]
    manager_class.record_function = record_function
    manager_class.run_eager = run_eager


def install(manager_class: Any = None) -> bool:
    """Hooks Graph Trees recording once per process; ``False`` (and a warning) when this
    torch's manager does not have the methods hooked."""
    global _INSTALLED
    with _LOCK:
        if _INSTALLED:
            return True
        if manager_class is None:
            try:
                from torch._inductor.cudagraph_trees import CUDAGraphTreeManager
            except ImportError as e:
                warnings.warn(
                    f"memory points around Graph Trees recordings are off: {e}",
                    MemoryDebugWarning,
                    stacklevel=3,
                )
                return False
            manager_class = CUDAGraphTreeManager
        if getattr(manager_class.record_function, "_tcgd_memory_hook", False):
            _INSTALLED = True
            return True
        if not (hasattr(manager_class, "record_function") and hasattr(manager_class, "run_eager")):
            warnings.warn(
                "memory points around Graph Trees recordings are off: this torch's "
                "CUDAGraphTreeManager has no record_function/run_eager",
                MemoryDebugWarning,
                stacklevel=3,
            )
            return False
        _hook(manager_class)
        _INSTALLED = True
        return True


def for_config(config: Any, default_root: str) -> CompileMemoryPoints | None:
    """The memory points a probe config asks for (``None`` without ``[memory]``)."""
    settings = config.memory
    if settings is None:
        return None
    points = CompileMemoryPoints(settings.to_dict(), default_root)
    if points.points & {"before_recording", "after_recording", "after_warmup"}:
        install()
    with _LOCK:
        _ACTIVE.append(points)
    return points
