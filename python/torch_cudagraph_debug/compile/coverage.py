"""CUDA graph coverage and the observer check.

``cuda_graph_coverage``: for each graph Inductor compiled (per compile id and graph kind),
whether it runs as a CUDA graph under CUDA Graph Trees (``mode="reduce-overhead"``) and,
if not, the skip reason as torch gives it; the re-recordings and their causes; Dynamo's
recompilations and their guard failures; and which probe sites were observed at replay.

``observer_check``: the kernels Inductor generates for a model with and without our
probes (names and sha256 of each kernel's source), so a user sees that probing changed no
fusion, or exactly which kernels it changed.

Where the facts come from (all read, nothing in torch patched):

- torch's logging artifacts ``cudagraphs`` and ``output_code`` (``TORCH_LOGS=cudagraphs``,
  ``TORCH_LOGS=output_code``): the loggers are named ``<module>.__<artifact>`` and are
  the channel torch itself documents for these messages, so a handler on them sees what a
  user would read, in torch 2.6 through 2.11 alike. We find them by name, raise them to
  DEBUG for the duration of a collection and hand each record on to the handlers that
  would have received it anyway (a user's ``TORCH_LOGS`` output is unchanged; the DEBUG
  records we asked for are not printed). Used records:
  skips (``log_cudagraph_skip_and_bump_counter`` in ``_inductor/cudagraph_utils.py``,
  WARNING, "skipping cudagraph(s) due to ..."); Graph Trees' recordings, warmups and
  invariant failures (``_inductor/cudagraph_trees.py``, DEBUG, "[compile id] Recording
  function=...", "Re-recording function=..., reason=..."); new trees per shape key; graph
  partitions and why a partition is not CUDA-graphable (``_inductor/scheduler.py``); and
  the wrapper code of each compiled graph ("Output code: ..." in ``_inductor/graph.py``
  and ``codecache.py``), which holds every generated kernel's source.
- ``torch._dynamo.utils.counters["inductor"]["cudagraph_skips"]``: counts every skip,
  also those torch does not log (a graph with no CUDA work is skipped silently).
- ``torch._dynamo.utils.get_compilation_metrics()``: one record per Dynamo frame
  compilation with its compile id and ``recompile_reason`` (the first guard failure),
  computed whether or not the ``recompiles`` log is on.
- The compile id of a record: the ``[compile id]`` Graph Trees puts in its messages; else
  the compile context (``torch._guards.CompileContext``) while compiling; else, at run
  time, the Graph Trees manager of the device, which sets the compile id of the function
  it is running before it checks it (the only place a run-time skip is attributable).
"""

from __future__ import annotations

import ast
import contextlib
import dataclasses
import functools
import hashlib
import logging
import re
import tempfile
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from torch_cudagraph_debug import _native
from torch_cudagraph_debug.compile.differential import Call, as_call

# ---------------------------------------------------------------------------- events

#: Event kinds, in the words the report uses.
EVENT_KINDS = (
    "compile",  # a Dynamo frame compilation (recompilations carry the guard failure)
    "graph",  # Inductor generated the wrapper code of a graph
    "partitions",  # Inductor split a graph into partitions, some maybe not CUDA-graphable
    "partition_skip",  # a node that keeps its partition out of CUDA graphs, and why
    "skip",  # torch skipped CUDA graphs, with its message
    "warmup",  # Graph Trees ran a function eagerly to warm it up
    "eager",  # Graph Trees ran a warmed-up function eagerly again
    "tree",  # Graph Trees started a tree for a new shape key
    "invariant",  # a recorded graph did not fit the call ("Re-recording ..., reason=...")
    "record",  # Graph Trees recorded (captured) a function
    "warning",  # another cudagraphs warning (e.g. too many shapes recorded)
    "call",  # a call of the compiled model, as the collector's caller marked it
)

_CUDAGRAPH_ARTIFACT = "cudagraphs"
_OUTPUT_CODE_ARTIFACT = "output_code"

# Modules whose artifact loggers we read; imported so the loggers exist before we look.
_LOGGING_MODULES = (
    "torch._inductor.codecache",
    "torch._inductor.graph",
    "torch._inductor.compile_fx",
    "torch._inductor.scheduler",
    "torch._inductor.cudagraph_utils",
    "torch._inductor.cudagraph_trees",
)

_MODES = {"FORWARD": "forward", "BACKWARD": "backward", "INFERENCE": "inference"}


@dataclass(frozen=True)
class CompileEvent:
    """One thing torch said about compiling or running a graph under CUDA graphs.

    ``function`` is the Graph Trees function name (or the Python function a Dynamo
    compilation traced, for ``compile``); ``reason`` the cause in torch's words, where the
    event has one; ``detail`` the whole message."""

    kind: str
    compile_id: str | None
    graph_kind: str | None
    function: str | None = None
    reason: str | None = None
    detail: str = ""
    values: tuple[int, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        out["values"] = list(self.values)
        return out


@dataclass(frozen=True)
class Kernel:
    """A kernel Inductor generated: its name in the wrapper code, the ``async_compile``
    method that builds it (``cpp_pybinding`` on CPU, ``triton`` on CUDA, ...) and the
    sha256 of its source."""

    name: str
    builder: str
    sha256: str
    source: str = field(default="", repr=False, compare=False)

    def to_dict(self) -> dict[str, str]:
        return {"name": self.name, "builder": self.builder, "sha256": self.sha256}


@dataclass(frozen=True)
class GeneratedGraph:
    """The code Inductor generated for one graph: ``index`` counts the graphs of the same
    compile id and kind in one collection (0 unless a graph is compiled twice)."""

    compile_id: str | None
    graph_kind: str | None
    index: int
    devices: tuple[str, ...]
    kernels: tuple[Kernel, ...]
    # Calls the wrapper makes outside generated kernels: extern kernels (``addmm``),
    # fallback ops, and our probe op.
    extern_calls: tuple[str, ...]
    code: str = field(repr=False, compare=False)

    @property
    def key(self) -> tuple[str | None, str | None, int]:
        return (self.compile_id, self.graph_kind, self.index)

    @property
    def label(self) -> str:
        return _graph_label(self.compile_id, self.graph_kind, self.index)

    def to_dict(self) -> dict[str, Any]:
        return {
            "compile_id": self.compile_id,
            "graph_kind": self.graph_kind,
            "index": self.index,
            "devices": list(self.devices),
            "kernels": [k.to_dict() for k in self.kernels],
            "extern_calls": list(self.extern_calls),
        }


def _graph_label(compile_id: str | None, graph_kind: str | None, index: int = 0) -> str:
    label = f"{compile_id or '?'} {graph_kind or '?'}"
    return label if index == 0 else f"{label} #{index}"


class CompileEvents:
    """What ``collect_compile_events()`` collected: the events in order, the generated
    graphs, torch's count of CUDA graph skips over the collection, and the devices of the
    calls the caller marked with ``note_call``."""

    def __init__(self) -> None:
        self.events: list[CompileEvent] = []
        self.graphs: list[GeneratedGraph] = []
        self.cudagraph_skips = 0
        self.call_devices: set[str] = set()
        # Re-recording causes seen since the last recording, per compile id: the next
        # recording of that compile id takes them. A call or a warmup clears them (Graph
        # Trees also logs a failed invariant for a recorded graph it then passes over for
        # another one that fits).
        self.pending: dict[str | None, list[str]] = {}
        self._lock = threading.Lock()

    def add(self, event: CompileEvent) -> None:
        with self._lock:
            self.events.append(event)

    def note_call(self, index: int, batch: Any = None) -> None:
        """Marks the start of a call of the compiled model (re-recording causes are not
        carried across calls), with the devices of its tensor arguments (``batch`` as
        ``cuda_graph_coverage`` takes it)."""
        devices: set[str] = set()
        if batch is not None:
            call = as_call(batch)
            for leaf in torch.utils._pytree.tree_leaves((call.args, call.kwargs)):
                if isinstance(leaf, torch.Tensor):
                    devices.add(leaf.device.type)
        with self._lock:
            self.call_devices |= devices
            self.pending.clear()
            self.events.append(
                CompileEvent("call", None, None, detail=f"call {index}", reason=None)
            )

    def _add_graph(self, compile_id: str | None, kind: str | None, code: str, devices: set[str]):
        with self._lock:
            index = sum(
                1 for g in self.graphs if (g.compile_id, g.graph_kind) == (compile_id, kind)
            )
            kernels, externs = parse_wrapper_code(code)
            graph = GeneratedGraph(
                compile_id,
                kind,
                index,
                tuple(sorted(devices or _devices_in_code(code))),
                kernels,
                externs,
                code,
            )
            self.graphs.append(graph)
            self.events.append(
                CompileEvent(
                    "graph",
                    compile_id,
                    kind,
                    detail=f"{len(kernels)} kernels on {', '.join(graph.devices) or '?'}",
                )
            )


def _compile_context_id() -> str | None:
    with contextlib.suppress(Exception):
        compile_id = torch._guards.CompileContext.current_compile_id()
        return None if compile_id is None else str(compile_id)
    return None


def _tree_manager_state() -> tuple[str | None, str | None]:
    """(compile id, graph kind) of the function the Graph Trees manager of the current
    device is running, or Nones. Graph Trees sets both before it checks the function."""
    with contextlib.suppress(Exception):
        if not (torch.cuda.is_available() and torch.cuda.is_initialized()):
            return None, None
        from torch._inductor import cudagraph_trees

        manager = cudagraph_trees.get_manager(
            torch.cuda.current_device(), create_if_none_exists=False
        )
        if manager is None:
            return None, None
        compile_id = getattr(manager, "compile_id", None)
        mode = getattr(manager, "mode", None)
        return (
            None if compile_id is None else str(compile_id),
            None if mode is None else _MODES.get(getattr(mode, "name", "")),
        )
    return None, None


def _compiling_graph_kind() -> str | None:
    """The kind of the graph being compiled: what the tcgd backend (or this module's
    Inductor backend) said, else what the graph being lowered says of itself."""
    from torch_cudagraph_debug.fx_passes.probe_insertion import GRAPH_KIND

    kind = GRAPH_KIND.get()
    if kind is not None:
        return kind
    with contextlib.suppress(Exception):
        from torch._inductor.graph import GraphLowering
        from torch._inductor.virtualized import V

        graph = V.graph
        if not isinstance(graph, GraphLowering):
            return None
        if getattr(graph, "is_backward", False):
            return "backward"
        if getattr(graph, "is_inference", False):
            return "inference"
        return "forward"
    return None


def _compiling_devices() -> set[str]:
    with contextlib.suppress(Exception):
        from torch._inductor.graph import GraphLowering
        from torch._inductor.virtualized import V

        if isinstance(V.graph, GraphLowering):
            return {str(d) for d in V.graph.device_types}
    return set()


_DUE_TO = re.compile(r"skipping cudagraphs? due to (.*)", re.DOTALL)


class _ArtifactHandler(logging.Handler):
    """Turns the records of torch's ``cudagraphs`` and ``output_code`` artifact loggers
    into events, and hands each record on to where it would have gone without us."""

    def __init__(self, events: CompileEvents, saved: dict[str, _SavedLogger]):
        super().__init__(level=logging.DEBUG)
        self.events = events
        self.saved = saved
        self.pending = events.pending

    def emit(self, record: logging.LogRecord) -> None:
        try:
            if record.name.endswith(f".__{_OUTPUT_CODE_ARTIFACT}"):
                self._output_code(record)
            else:
                self._cudagraphs(record)
        except Exception:  # a report must never break the user's compile
            self.handleError(record)
        self._forward(record)

    def _forward(self, record: logging.LogRecord) -> None:
        saved = self.saved.get(record.name)
        if saved is None or record.levelno < saved.effective_level:
            return
        for handler in saved.handlers:
            if record.levelno >= handler.level:
                handler.handle(record)
        parent = saved.logger.parent
        if saved.propagate and parent is not None and not parent.disabled:
            parent.callHandlers(record)

    def _output_code(self, record: logging.LogRecord) -> None:
        if not (isinstance(record.msg, str) and record.msg.startswith("Output code: ")):
            return
        if not record.args or not isinstance(record.args, tuple):
            return
        code = record.args[0]
        if not isinstance(code, str):
            return
        self.events._add_graph(
            _compile_context_id(), _compiling_graph_kind(), code, _compiling_devices()
        )

    def _ids(self, record: logging.LogRecord) -> tuple[str | None, str | None, tuple[Any, ...]]:
        args = record.args if isinstance(record.args, tuple) else ()
        message = record.msg if isinstance(record.msg, str) else ""
        compile_id = _compile_context_id()
        kind = _compiling_graph_kind() if compile_id is not None else None
        if compile_id is None:
            compile_id, kind = _tree_manager_state()
        if message.startswith("[%s]") and args:
            # Graph Trees' own messages name the compile id of the function they concern.
            compile_id = None if args[0] is None else str(args[0])
            args = args[1:]
        return compile_id, kind, args

    def _cudagraphs(self, record: logging.LogRecord) -> None:
        message = record.msg if isinstance(record.msg, str) else str(record.msg)
        compile_id, kind, args = self._ids(record)
        text = record.getMessage()
        add = self.events.add
        if "Recording function=" in message and "Re-recording" not in message:
            function = str(args[0]) if args else None
            causes = self.pending.pop(compile_id, [])
            add(
                CompileEvent(
                    "record",
                    compile_id,
                    kind,
                    function,
                    reason="; ".join(dict.fromkeys(causes)) or None,
                    detail=f"cuda_graph_id={args[1]}" if len(args) > 1 else text,
                )
            )
        elif "Re-recording function=" in message:
            function = str(args[0]) if args else None
            reason = str(args[1]).strip() if len(args) > 1 else text
            self.pending.setdefault(compile_id, []).append(reason)
            add(CompileEvent("invariant", compile_id, kind, function, reason, text))
        elif "Running warmup function=" in message or "Running eager function=" in message:
            self.pending.pop(compile_id, None)
            event = "warmup" if "warmup" in message else "eager"
            add(CompileEvent(event, compile_id, kind, str(args[0]) if args else None, None, text))
        elif message.startswith("Recording cudagraph tree for"):
            reason = (
                f"a new shape (symint key {args[0]})"
                if args
                else "the first recording of a graph without symbolic shapes"
            )
            if args:
                self.pending.setdefault(compile_id, []).append(reason)
            add(CompileEvent("tree", compile_id, kind, None, reason, text))
        elif message.startswith("Created %d graph partitions"):
            values = tuple(int(a) for a in args[:3])
            add(CompileEvent("partitions", compile_id, kind, None, None, text, values))
        elif message == "    %s: %s" and len(args) == 2:
            found = re.search(r"reason=(.*?)(?:, ir=|$)", str(args[1]))
            reason = found.group(1) if found else str(args[1])
            add(CompileEvent("partition_skip", compile_id, kind, str(args[0]), reason, text))
        elif record.levelno >= logging.WARNING:
            due = _DUE_TO.search(text)
            if due is not None or "skipping cudagraph" in text:
                reason = due.group(1).strip() if due is not None else text
                add(CompileEvent("skip", compile_id, kind, None, reason, text))
            else:
                add(CompileEvent("warning", compile_id, kind, None, None, text))


@dataclass
class _SavedLogger:
    logger: logging.Logger
    level: int
    effective_level: int
    propagate: bool
    handlers: list[logging.Handler]


def _artifact_loggers(artifacts: Sequence[str]) -> list[logging.Logger]:
    import importlib

    for module in _LOGGING_MODULES:
        with contextlib.suppress(ImportError):
            importlib.import_module(module)
    suffixes = tuple(f".__{a}" for a in artifacts)
    return [
        logger
        for name, logger in sorted(logging.root.manager.loggerDict.items())
        if isinstance(logger, logging.Logger) and name.endswith(suffixes)
    ]


_COLLECTING = threading.Lock()


@contextlib.contextmanager
def collect_compile_events() -> Iterator[CompileEvents]:
    """Collects, for everything compiled and run inside the block, what torch says about
    CUDA graphs (skips, recordings, re-recordings, partitions), the code Inductor
    generates per graph, Dynamo's recompilations, and torch's CUDA graph skip counter.
    Pass the result to ``cuda_graph_coverage(events=...)``. Blocks do not nest."""
    from torch._dynamo.utils import counters, get_compilation_metrics

    events = CompileEvents()
    if not _COLLECTING.acquire(blocking=False):
        raise RuntimeError("collect_compile_events() blocks do not nest")
    saved: dict[str, _SavedLogger] = {}
    handler = _ArtifactHandler(events, saved)
    try:
        for logger in _artifact_loggers((_CUDAGRAPH_ARTIFACT, _OUTPUT_CODE_ARTIFACT)):
            saved[logger.name] = _SavedLogger(
                logger,
                logger.level,
                logger.getEffectiveLevel(),
                logger.propagate,
                list(logger.handlers),
            )
            for h in list(logger.handlers):
                logger.removeHandler(h)
            logger.addHandler(handler)
            logger.setLevel(logging.DEBUG)
            logger.propagate = False
        skips_before = counters["inductor"]["cudagraph_skips"]
        metrics_before = {id(m) for m in get_compilation_metrics()}
        try:
            yield events
        finally:
            events.cudagraph_skips = counters["inductor"]["cudagraph_skips"] - skips_before
            for m in get_compilation_metrics():
                if id(m) in metrics_before:
                    continue
                reason = getattr(m, "recompile_reason", None)
                events.add(
                    CompileEvent(
                        "compile",
                        getattr(m, "compile_id", None),
                        None,
                        getattr(m, "co_name", None),
                        reason,
                        "recompiled" if reason else "compiled",
                    )
                )
    finally:
        for entry in saved.values():
            entry.logger.removeHandler(handler)
            for h in entry.handlers:
                entry.logger.addHandler(h)
            entry.logger.setLevel(entry.level)
            entry.logger.propagate = entry.propagate
        _COLLECTING.release()


# ---------------------------------------------------------------------------- wrapper code

_KERNEL_ASSIGN = re.compile(r"^(\w+) = async_compile\.(\w+)\(", re.MULTILINE)
_TRIPLE_QUOTED = re.compile(r"(?:'''(.*?)'''|\"\"\"(.*?)\"\"\")", re.DOTALL)
_EXTERN_PREFIXES = ("extern_kernels.", "torch.ops.", "aten.", "inductor_ops.")


def _dotted(node: ast.AST) -> str | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def parse_wrapper_code(code: str) -> tuple[tuple[Kernel, ...], tuple[str, ...]]:
    """The kernels a Python wrapper module of Inductor defines (``name =
    async_compile.<builder>(..., '''source''', ...)``: the source is the longest string
    argument) and the calls it makes to extern kernels and ops, in order of appearance."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return _parse_wrapper_text(code), ()
    kernels = []
    for statement in tree.body:
        if not (
            isinstance(statement, ast.Assign)
            and len(statement.targets) == 1
            and isinstance(statement.targets[0], ast.Name)
            and isinstance(statement.value, ast.Call)
        ):
            continue
        builder = _dotted(statement.value.func) or ""
        if not builder.startswith("async_compile."):
            continue
        strings = [
            a.value
            for a in [*statement.value.args, *(k.value for k in statement.value.keywords)]
            if isinstance(a, ast.Constant) and isinstance(a.value, str)
        ]
        source = max(strings, key=len, default="")
        kernels.append(
            Kernel(statement.targets[0].id, builder.split(".", 1)[1], _sha256(source), source)
        )
    externs = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            name = _dotted(node.func)
            if name is not None and name.startswith(_EXTERN_PREFIXES):
                externs.append((node.lineno, node.col_offset, name))
    return tuple(kernels), tuple(name for *_, name in sorted(externs))


def _parse_wrapper_text(code: str) -> tuple[Kernel, ...]:
    kernels = []
    for match in _KERNEL_ASSIGN.finditer(code):
        source = _TRIPLE_QUOTED.search(code, match.end())
        text = "" if source is None else (source.group(1) or source.group(2) or "")
        kernels.append(Kernel(match.group(1), match.group(2), _sha256(text), text))
    return tuple(kernels)


def _devices_in_code(code: str) -> set[str]:
    found = set(re.findall(r"empty_strided_(cpu|cuda|xpu|mtia)\(", code))
    found |= set(re.findall(r"device='(cpu|cuda|xpu|mtia)'", code))
    return found


# ---------------------------------------------------------------------------- coverage


@dataclass(frozen=True)
class Rerecording:
    """A graph Graph Trees recorded again for a function it had recorded before, and why
    (the invariant that failed, as torch words it, or a new shape key)."""

    compile_id: str | None
    graph_kind: str | None
    function: str | None
    cause: str

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class FunctionCoverage:
    """One compiled graph (compile id and graph kind) under CUDA graphs.

    ``status``: ``cuda graph`` (recorded, nothing skipped), ``partly`` (recorded, but some
    of it runs outside CUDA graphs), ``skipped`` (torch skipped CUDA graphs),
    ``not recorded`` (on CUDA, never captured: e.g. called once, or CUDA graphs were not
    asked for), ``not on CUDA``."""

    compile_id: str | None
    graph_kind: str | None
    devices: tuple[str, ...]
    status: str
    reasons: tuple[str, ...]
    recordings: int
    rerecordings: tuple[Rerecording, ...]
    partitions: tuple[int, int, int] | None
    recompile_reason: str | None
    functions: tuple[str, ...]
    sites: tuple[str, ...]
    sites_at_replay: tuple[str, ...]

    @property
    def label(self) -> str:
        return _graph_label(self.compile_id, self.graph_kind)

    @property
    def sites_not_at_replay(self) -> tuple[str, ...]:
        replayed = set(self.sites_at_replay)
        return tuple(s for s in self.sites if s not in replayed)

    def to_dict(self) -> dict[str, Any]:
        return {
            "compile_id": self.compile_id,
            "graph_kind": self.graph_kind,
            "devices": list(self.devices),
            "status": self.status,
            "reasons": list(self.reasons),
            "recordings": self.recordings,
            "rerecordings": [r.to_dict() for r in self.rerecordings],
            "partitions": None if self.partitions is None else list(self.partitions),
            "recompile_reason": self.recompile_reason,
            "functions": list(self.functions),
            "sites": list(self.sites),
            "sites_at_replay": list(self.sites_at_replay),
        }


@dataclass(frozen=True)
class PointCoverage:
    """One point of the recorded run: its replay index (None: its values were taken
    eagerly, not from a replay) and the probe sites it observed."""

    label: str
    replay_index: int | None
    sites: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"label": self.label, "replay_index": self.replay_index, "sites": list(self.sites)}


@dataclass(frozen=True)
class CudaGraphCoverage:
    """Per compiled graph, whether it runs as a CUDA graph (``functions``); the calls'
    devices; torch's skip count; the recorded run's points; the events it is built from."""

    functions: tuple[FunctionCoverage, ...]
    on_cuda: bool | None
    summary: str
    cudagraph_skips: int
    points: tuple[PointCoverage, ...]
    recompilations: tuple[CompileEvent, ...]
    events: tuple[CompileEvent, ...] = field(repr=False)

    @property
    def rerecordings(self) -> tuple[Rerecording, ...]:
        return tuple(r for f in self.functions for r in f.rerecordings)

    @property
    def skip_reasons(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(r for f in self.functions for r in f.reasons))

    @property
    def sites_at_replay(self) -> tuple[str, ...]:
        return tuple(
            dict.fromkeys(s for p in self.points if p.replay_index is not None for s in p.sites)
        )

    def function(self, compile_id: str, graph_kind: str | None = None) -> FunctionCoverage:
        """The coverage of one compiled graph (the first of the compile id when
        ``graph_kind`` is None); KeyError if there is none."""
        for f in self.functions:
            if f.compile_id == compile_id and graph_kind in (None, f.graph_kind):
                return f
        raise KeyError(f"no compiled graph {_graph_label(compile_id, graph_kind)}")

    def to_dict(self) -> dict[str, Any]:
        return {
            "summary": self.summary,
            "on_cuda": self.on_cuda,
            "cudagraph_skips": self.cudagraph_skips,
            "functions": [f.to_dict() for f in self.functions],
            "rerecordings": [r.to_dict() for r in self.rerecordings],
            "recompilations": [e.to_dict() for e in self.recompilations],
            "points": [p.to_dict() for p in self.points],
            "sites_at_replay": list(self.sites_at_replay),
        }

    def add_to(self, doc: Any) -> None:
        """Adds the coverage to a native ``ReportDocument``."""
        doc.heading("CUDA graph coverage")
        doc.paragraph(self.summary)
        doc.facts(
            [
                ("compiled graphs", str(len(self.functions))),
                ("as CUDA graphs", str(sum(f.status == "cuda graph" for f in self.functions))),
                ("skips counted by torch", str(self.cudagraph_skips)),
                ("re-recordings", str(len(self.rerecordings))),
                ("recompilations", str(len(self.recompilations))),
            ]
        )
        if self.functions:
            doc.table(
                [
                    "graph",
                    "devices",
                    "status",
                    "recordings",
                    "partitions",
                    "reason",
                    "probe sites",
                    "at replay",
                ],
                [
                    [
                        f.label,
                        ", ".join(f.devices),
                        f.status,
                        f.recordings,
                        None
                        if f.partitions is None
                        else f"{f.partitions[1]} of {f.partitions[0]} CUDA-graphable",
                        "; ".join(f.reasons) or None,
                        len(f.sites),
                        len(f.sites_at_replay),
                    ]
                    for f in self.functions
                ],
            )
        if self.rerecordings:
            doc.heading("Re-recordings")
            doc.table(
                ["graph", "function", "cause"],
                [
                    [_graph_label(r.compile_id, r.graph_kind), r.function, r.cause]
                    for r in self.rerecordings
                ],
                limit=50,
            )
        if self.recompilations:
            doc.heading("Recompilations (each a new compiled function, recorded anew)")
            doc.table(
                ["compile id", "function", "guard failure"],
                [[e.compile_id, e.function, e.reason] for e in self.recompilations],
                limit=50,
            )
        not_replayed = [(f, s) for f in self.functions for s in f.sites_not_at_replay]
        if self.points:
            doc.heading("Probe sites per point")
            doc.table(
                ["point", "replay", "sites observed"],
                [[p.label, p.replay_index, len(p.sites)] for p in self.points],
                limit=50,
            )
        if not_replayed and any(p.replay_index is not None for p in self.points):
            doc.heading("Probe sites never observed at a replay")
            doc.table(["graph", "site"], [[f.label, s] for f, s in not_replayed], limit=50)

    def report(self) -> Any:
        doc = _native.ReportDocument("CUDA graph coverage")
        self.add_to(doc)
        return doc

    def to_text(self) -> str:
        return self.report().to_text()


def _run_points(run: Any) -> tuple[PointCoverage, ...]:
    return tuple(
        PointCoverage(
            p.label,
            p.replay_index,
            tuple(dict.fromkeys(o.name for o in p.observations if o.site is not None)),
        )
        for p in run.points
    )


def _replayed_kinds(point: Any) -> set[str] | None:
    """The graph kinds a point's metadata says replayed in it (``graph_replays``:
    ``"<kind>#<n>": replays``), or None when the point does not say."""
    replays = (point.metadata or {}).get("graph_replays")
    if not isinstance(replays, dict):
        return None
    kinds = {str(k).split("#", 1)[0] for k, v in replays.items() if v}
    # A graph the core could not name ("graph#<n>") says nothing about its kind.
    return kinds if kinds & {"forward", "backward", "inference"} else None


def _run_sites(run: Any) -> dict[tuple[str | None, str | None], dict[str, bool]]:
    """Per (compile id, graph kind): each probe site of the run, and whether a point took
    it from a graph replay."""
    out: dict[tuple[str | None, str | None], dict[str, bool]] = {}
    for point in run.points:
        kinds = _replayed_kinds(point)
        for o in point.observations:
            site = o.site
            if site is None or site.site_id is None:
                continue
            sites = out.setdefault((site.compile_id, site.graph_kind), {})
            replayed = point.replay_index is not None and (
                kinds is None or site.graph_kind in kinds
            )
            sites[site.site_id] = sites.get(site.site_id, False) or replayed
    return out


def coverage_from_events(
    events: CompileEvents | Iterable[CompileEvent],
    *,
    run: Any = None,
    on_cuda: bool | None = None,
    cudagraph_skips: int | None = None,
) -> CudaGraphCoverage:
    """The coverage report from collected events (``collect_compile_events()``, or a
    sequence of ``CompileEvent``) and, when given, the ``TensorRun`` recorded meanwhile.
    ``on_cuda``: whether the calls' inputs were on CUDA (None: from the events)."""
    if isinstance(events, CompileEvents):
        event_list = list(events.events)
        graphs = list(events.graphs)
        skips = events.cudagraph_skips if cudagraph_skips is None else cudagraph_skips
        if on_cuda is None and events.call_devices:
            on_cuda = "cuda" in events.call_devices
    else:
        event_list = list(events)
        graphs = []
        skips = cudagraph_skips or 0

    # The compiled graphs: those Inductor generated code for, then any other the events
    # or the run name.
    keys: dict[tuple[str | None, str | None], set[str]] = {}
    for g in graphs:
        keys.setdefault((g.compile_id, g.graph_kind), set()).update(g.devices)
    for e in event_list:
        if e.kind == "graph":
            keys.setdefault((e.compile_id, e.graph_kind), set())
    run_sites = _run_sites(run) if run is not None else {}
    for key in run_sites:
        keys.setdefault(key, set())

    def owner(e: CompileEvent) -> tuple[str | None, str | None] | None:
        if (e.compile_id, e.graph_kind) in keys:
            return (e.compile_id, e.graph_kind)
        same = [k for k in keys if k[0] == e.compile_id]
        if len(same) == 1:
            return same[0]
        return None

    by_key: dict[tuple[str | None, str | None], list[CompileEvent]] = {k: [] for k in keys}
    unattributed: list[CompileEvent] = []
    for e in event_list:
        if e.kind in ("call", "compile", "graph"):
            continue
        key = owner(e)
        if key is None:
            if e.compile_id is not None or e.graph_kind is not None:
                key = (e.compile_id, e.graph_kind)
                keys.setdefault(key, set())
                by_key.setdefault(key, [])
            else:
                unattributed.append(e)
                continue
        by_key[key].append(e)
    recompiles = {e.compile_id: e.reason for e in event_list if e.kind == "compile" and e.reason}
    any_cuda_activity = any(e.kind in ("record", "warmup", "eager", "skip") for e in event_list)
    if on_cuda is None:
        devices = set().union(*keys.values()) if keys else set()
        if any_cuda_activity or "cuda" in devices:
            on_cuda = True
        elif devices:
            on_cuda = False

    functions = []
    for key in sorted(keys, key=lambda k: (_compile_order(k[0]), k[1] or "")):
        compile_id, kind = key
        mine = by_key.get(key, [])
        devices = tuple(sorted(keys[key]))
        functions.append(
            _function_coverage(
                compile_id,
                kind,
                devices,
                mine + [e for e in unattributed if e.kind == "skip" and len(keys) == 1],
                recompiles.get(compile_id),
                run_sites.get(key, {}),
                on_cuda,
            )
        )
    recompilations = tuple(e for e in event_list if e.kind == "compile" and e.reason)
    coverage = CudaGraphCoverage(
        functions=tuple(functions),
        on_cuda=on_cuda,
        summary="",
        cudagraph_skips=skips,
        points=_run_points(run) if run is not None else (),
        recompilations=recompilations,
        events=tuple(event_list),
    )
    return dataclasses.replace(coverage, summary=_summary(coverage, unattributed))


def _compile_order(compile_id: str | None) -> tuple[int, ...]:
    if compile_id is None:
        return (1 << 30,)
    return tuple(int(n) for n in re.findall(r"\d+", compile_id)) or (1 << 30,)


def _function_coverage(
    compile_id: str | None,
    kind: str | None,
    devices: tuple[str, ...],
    events: list[CompileEvent],
    recompile_reason: str | None,
    sites: dict[str, bool],
    on_cuda: bool | None,
) -> FunctionCoverage:
    skips = [e.reason or e.detail for e in events if e.kind == "skip"]
    partition_reasons = [
        f"partition kept out of CUDA graphs by {e.function}: {e.reason}"
        for e in events
        if e.kind == "partition_skip"
    ]
    partitions = next(
        (e.values for e in reversed(events) if e.kind == "partitions" and len(e.values) == 3),
        None,
    )
    recordings = [e for e in events if e.kind == "record"]
    seen: set[str | None] = set()
    rerecordings = []
    for r in recordings:
        if r.function in seen:
            cause = r.reason or (
                "torch logged no failed invariant (a new place in the tree of recorded "
                "graphs, e.g. a different order of compiled calls)"
            )
            rerecordings.append(Rerecording(compile_id, kind, r.function, cause))
        seen.add(r.function)
    warmed = any(e.kind in ("warmup", "eager") for e in events)
    non_cuda = bool(devices) and "cuda" not in devices
    reasons: list[str] = []
    if non_cuda or (not devices and on_cuda is False):
        status = "not on CUDA"
        where = ", ".join(devices) or "not CUDA"
        reasons.append(f"its inputs and work are on {where}: CUDA graphs capture CUDA work only")
    elif recordings:
        partial = skips or partition_reasons or (partitions is not None and partitions[2] > 0)
        status = "partly" if partial else "cuda graph"
        reasons.extend(skips)
        reasons.extend(partition_reasons)
        if partitions is not None and partitions[2] > 0 and not partition_reasons:
            reasons.append(f"{partitions[2]} of {partitions[0]} partitions not CUDA-graphable")
    elif skips:
        status = "skipped"
        reasons.extend(skips)
    else:
        status = "not recorded"
        if partitions is not None and partitions[1] == 0 and partitions[0] > 0:
            reasons.append("no partition of the graph is CUDA-graphable")
            reasons.extend(partition_reasons)
        elif warmed:
            reasons.append(
                "Graph Trees only warmed it up: it records at the function's second call"
            )
        else:
            reasons.append(
                "Graph Trees never ran it: CUDA graphs were not asked for (use "
                "mode='reduce-overhead'), or the graph was compiled but not run"
            )
    return FunctionCoverage(
        compile_id=compile_id,
        graph_kind=kind,
        devices=devices,
        status=status,
        reasons=tuple(dict.fromkeys(reasons)),
        recordings=len(recordings),
        rerecordings=tuple(rerecordings),
        partitions=None if partitions is None else (partitions[0], partitions[1], partitions[2]),
        recompile_reason=recompile_reason,
        functions=tuple(dict.fromkeys(r.function for r in recordings if r.function)),
        sites=tuple(sites),
        sites_at_replay=tuple(s for s, replayed in sites.items() if replayed),
    )


def _summary(coverage: CudaGraphCoverage, unattributed: list[CompileEvent]) -> str:
    functions = coverage.functions
    if coverage.on_cuda is False:
        return (
            "No CUDA graphs run: the inputs are not on CUDA, and CUDA graphs capture CUDA "
            f"work only ({len(functions)} compiled graph(s), all on "
            f"{', '.join(sorted({d for f in functions for d in f.devices})) or 'the CPU'}; "
            f"torch counted {coverage.cudagraph_skips} CUDA graph skip(s) without a "
            "message, as it does for graphs with no CUDA work)."
        )
    if not functions:
        return "Nothing was compiled by Inductor while the events were collected."
    counts: dict[str, int] = {}
    for f in functions:
        counts[f.status] = counts.get(f.status, 0) + 1
    parts = [f"{n} {status}" for status, n in counts.items()]
    text = f"{len(functions)} compiled graph(s): {', '.join(parts)}."
    if coverage.rerecordings:
        text += f" {len(coverage.rerecordings)} re-recording(s)."
    if coverage.recompilations:
        text += f" {len(coverage.recompilations)} recompilation(s)."
    if coverage.points:
        replayed = sum(p.replay_index is not None for p in coverage.points)
        text += (
            f" {replayed} of {len(coverage.points)} point(s) took their values from graph "
            f"replays; {len(coverage.sites_at_replay)} probe site(s) observed at replay."
        )
    stray = [e for e in unattributed if e.kind == "skip"]
    if stray:
        text += f" {len(stray)} skip message(s) could not be attributed to a graph."
    return text


# ---------------------------------------------------------------------------- compiling


def _inductor_backend(
    gm: torch.fx.GraphModule,
    example_inputs: Sequence[Any],
    *,
    mode: str | None = None,
    options: dict[str, Any] | None = None,
) -> Any:
    """Plain Inductor with a mode and options: what the tcgd backend does, without our
    pass (the graph kind is told to the collector the same way)."""
    from torch._inductor.compile_fx import compile_fx

    from torch_cudagraph_debug.compile.backend import _kind_aware_inner_compile

    patches: dict[str, Any] = {}
    if mode is not None and mode != "default":
        patches.update(torch._inductor.list_mode_options(mode))
    patches.update(options or {})
    return compile_fx(
        gm, example_inputs, inner_compile=_kind_aware_inner_compile, config_patches=patches
    )


def _split_options(options: dict[str, Any] | None) -> tuple[str | None, dict[str, Any]]:
    from torch_cudagraph_debug.compile.backend import OUR_OPTIONS

    options = dict(options or {})
    mode = options.pop("mode", None)
    return mode, {k: v for k, v in options.items() if k not in OUR_OPTIONS}


@contextlib.contextmanager
def _probe_backend(
    probes: Any, run_dir: str | None, name: str, mode: str | None, inductor: dict[str, Any]
) -> Iterator[tuple[Callable[..., Any], Any]]:
    """A tcgd backend recording into a session of its own (a run ``name`` under
    ``run_dir``, or a temporary directory removed at the end) and that session."""
    from torch_cudagraph_debug.compile.backend import _SESSION_OVERRIDE, tcgd_backend
    from torch_cudagraph_debug.compile.session import ProbeSession, load_config

    config = load_config(probes)
    with contextlib.ExitStack() as stack:
        root = (
            run_dir
            if run_dir is not None
            else stack.enter_context(tempfile.TemporaryDirectory(prefix="tcgd-coverage-"))
        )
        session = ProbeSession(config, run_dir=root, name=name, payload="full", overwrite=True)
        options = {"probes": f"<{name}>", **inductor}
        if mode is not None:
            options["mode"] = mode
        token = _SESSION_OVERRIDE.set(session)
        try:
            yield functools.partial(tcgd_backend, options=options), session
        finally:
            _SESSION_OVERRIDE.reset(token)
            if not session.finished:
                session.close()


def _run_calls(
    compiled: Callable[..., Any],
    calls: Sequence[Call],
    events: CompileEvents | None,
    session: Any,
) -> None:
    for i, call in enumerate(calls):
        if events is not None:
            events.note_call(i, call)
        if session is not None:
            with session.record_point(f"call{i}"):
                call(compiled)
        else:
            call(compiled)


def cuda_graph_coverage(
    model: Callable[..., Any] | None = None,
    batches: Iterable[Any] | None = None,
    *,
    probes: Any = None,
    options: dict[str, Any] | None = None,
    mode: str = "reduce-overhead",
    dynamic: bool | None = None,
    run_dir: str | None = None,
    events: CompileEvents | Iterable[CompileEvent] | None = None,
    run: Any = None,
) -> CudaGraphCoverage:
    """Which compiled graphs run as CUDA graphs, and why the others do not.

    Either ``model`` and ``batches`` (a batch as ``differential`` takes it: a tuple of
    arguments, a dict of keyword arguments, or one tensor): the model is compiled under
    ``mode`` (CUDA Graph Trees) with the probe config ``probes`` (backend tcgd; None:
    plain Inductor), caches off, and called once per batch under ``torch.no_grad()``; the
    probes record into a run ``coverage`` under ``run_dir`` (a temporary one when None).
    Or ``events`` collected by the caller (``with collect_compile_events() as events:``
    around their own compile and calls), with the ``run`` their probes recorded, if any.
    ``options``: Inductor options (and tcgd's) for the compile."""
    if events is not None:
        if model is not None:
            raise ValueError("cuda_graph_coverage(): pass a model and batches, or events")
        return coverage_from_events(events, run=run)
    if model is None:
        raise ValueError("cuda_graph_coverage(): pass a model and batches, or events")
    calls = [as_call(b) for b in batches or ()]
    option_mode, inductor = _split_options(options)
    mode = option_mode or mode
    compile_kwargs = {} if dynamic is None else {"dynamic": dynamic}
    from torch_cudagraph_debug.compile.backend import no_compile_caches

    recorded = None
    torch._dynamo.reset()
    try:
        with contextlib.ExitStack() as stack:
            session = None
            if probes is not None:
                backend, session = stack.enter_context(
                    _probe_backend(probes, run_dir, "coverage", mode, inductor)
                )
            else:
                backend = functools.partial(_inductor_backend, mode=mode, options=inductor)
            with no_compile_caches(), torch.no_grad(), collect_compile_events() as collected:
                compiled = torch.compile(model, backend=backend, **compile_kwargs)
                _run_calls(compiled, calls, collected, session)
            if session is not None:
                recorded = session.finish()
            coverage = coverage_from_events(collected, run=recorded)
    finally:
        torch._dynamo.reset()
    return coverage


# ---------------------------------------------------------------------------- observer


@dataclass(frozen=True)
class KernelChange:
    """One kernel of one graph compared with and without probes. ``change``:
    ``unchanged``, ``code differs`` (same name), ``renamed`` (same code, another name),
    ``only with probes``, ``only without probes``."""

    graph: str
    kernel: str
    change: str
    sha256_without: str | None
    sha256_with: str | None
    kernel_with: str | None = None
    # For ``code differs``: the first line that differs, without probes then with.
    first_difference: tuple[str, str] | None = None

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class GraphKernels:
    """One compiled graph's kernels and extern calls, without and with probes (None: the
    graph was compiled on that side only)."""

    compile_id: str | None
    graph_kind: str | None
    index: int
    without: GeneratedGraph | None
    with_probes: GeneratedGraph | None

    @property
    def label(self) -> str:
        return _graph_label(self.compile_id, self.graph_kind, self.index)

    @property
    def probe_calls(self) -> int:
        """Calls of our probe op in the graph with probes (extern calls, not kernels)."""
        if self.with_probes is None:
            return 0
        return sum(c.startswith("torch.ops.tcgd.") for c in self.with_probes.extern_calls)

    def changes(self) -> list[KernelChange]:
        without = {k.name: k for k in (self.without.kernels if self.without else ())}
        with_ = {k.name: k for k in (self.with_probes.kernels if self.with_probes else ())}
        out = []
        for name, k in without.items():
            other = with_.get(name)
            if other is None:
                continue
            if other.sha256 == k.sha256:
                out.append(
                    KernelChange(self.label, name, "unchanged", k.sha256, other.sha256, name)
                )
            else:
                out.append(
                    KernelChange(
                        self.label,
                        name,
                        "code differs",
                        k.sha256,
                        other.sha256,
                        name,
                        _first_difference(k.source, other.source),
                    )
                )
        only_without = [k for n, k in without.items() if n not in with_]
        only_with = [k for n, k in with_.items() if n not in without]
        for k in list(only_without):
            twin = next((o for o in only_with if o.sha256 == k.sha256), None)
            if twin is not None:
                only_without.remove(k)
                only_with.remove(twin)
                out.append(
                    KernelChange(self.label, k.name, "renamed", k.sha256, twin.sha256, twin.name)
                )
        out.extend(
            KernelChange(self.label, k.name, "only without probes", k.sha256, None)
            for k in only_without
        )
        out.extend(
            KernelChange(self.label, k.name, "only with probes", None, k.sha256, k.name)
            for k in only_with
        )
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "compile_id": self.compile_id,
            "graph_kind": self.graph_kind,
            "index": self.index,
            "without": None if self.without is None else self.without.to_dict(),
            "with_probes": None if self.with_probes is None else self.with_probes.to_dict(),
            "changes": [c.to_dict() for c in self.changes()],
            "probe_calls": self.probe_calls,
        }


@dataclass(frozen=True)
class ObserverCheck:
    """The kernels Inductor generated with and without probes, graph by graph."""

    graphs: tuple[GraphKernels, ...]

    @property
    def changes(self) -> tuple[KernelChange, ...]:
        return tuple(c for g in self.graphs for c in g.changes())

    def _of(self, change: str) -> tuple[KernelChange, ...]:
        return tuple(c for c in self.changes if c.change == change)

    @property
    def unchanged(self) -> tuple[KernelChange, ...]:
        return self._of("unchanged")

    @property
    def changed(self) -> tuple[KernelChange, ...]:
        """Kernels of the same name whose code differs."""
        return self._of("code differs")

    @property
    def renamed(self) -> tuple[KernelChange, ...]:
        return self._of("renamed")

    @property
    def only_with_probes(self) -> tuple[KernelChange, ...]:
        return self._of("only with probes")

    @property
    def only_without_probes(self) -> tuple[KernelChange, ...]:
        return self._of("only without probes")

    @property
    def unmatched_graphs(self) -> tuple[GraphKernels, ...]:
        return tuple(g for g in self.graphs if g.without is None or g.with_probes is None)

    @property
    def identical(self) -> bool:
        """True when probing changed no kernel (names and code) in any graph."""
        return not self.unmatched_graphs and all(c.change == "unchanged" for c in self.changes)

    @property
    def summary(self) -> str:
        if not self.graphs:
            return "Inductor generated no graph on either side: nothing to compare."
        probes = sum(g.probe_calls for g in self.graphs)
        head = (
            f"{len(self.graphs)} graph(s), {len(self.unchanged)} kernel(s) unchanged; "
            f"{probes} probe call(s) added as extern calls (not kernels)."
        )
        if self.identical:
            return head + " Probing changed no kernel: no fusion was split or altered."
        parts = [
            f"{len(self.changed)} with different code",
            f"{len(self.renamed)} renamed",
            f"{len(self.only_with_probes)} only with probes",
            f"{len(self.only_without_probes)} only without probes",
        ]
        text = f"{head} Probing changed kernels: {', '.join(parts)}"
        if self.unmatched_graphs:
            text += f"; {len(self.unmatched_graphs)} graph(s) compiled on one side only"
        return text + "."

    def to_dict(self) -> dict[str, Any]:
        return {
            "summary": self.summary,
            "identical": self.identical,
            "graphs": [g.to_dict() for g in self.graphs],
        }

    def add_to(self, doc: Any) -> None:
        """Adds the check to a native ``ReportDocument``."""
        doc.heading("Observer check: kernels with and without probes")
        doc.paragraph(self.summary)
        doc.table(
            ["graph", "kernels without", "kernels with", "probe calls", "extern calls with"],
            [
                [
                    g.label,
                    None if g.without is None else len(g.without.kernels),
                    None if g.with_probes is None else len(g.with_probes.kernels),
                    g.probe_calls,
                    None if g.with_probes is None else len(g.with_probes.extern_calls),
                ]
                for g in self.graphs
            ],
        )
        doc.table(
            [
                "graph",
                "kernel",
                "change",
                "sha256 without",
                "sha256 with",
                "name with",
                "first difference (without / with)",
            ],
            [
                [
                    c.graph,
                    c.kernel,
                    c.change,
                    None if c.sha256_without is None else c.sha256_without[:16],
                    None if c.sha256_with is None else c.sha256_with[:16],
                    c.kernel_with,
                    None
                    if c.first_difference is None
                    else f"{c.first_difference[0]} / {c.first_difference[1]}",
                ]
                for c in sorted(self.changes, key=lambda c: (c.change == "unchanged", c.graph))
            ],
            limit=100,
        )

    def report(self) -> Any:
        doc = _native.ReportDocument("Observer check")
        self.add_to(doc)
        return doc

    def to_text(self) -> str:
        return self.report().to_text()


def _first_difference(a: str, b: str) -> tuple[str, str] | None:
    a_lines, b_lines = a.splitlines(), b.splitlines()
    for i in range(max(len(a_lines), len(b_lines))):
        left = a_lines[i].strip() if i < len(a_lines) else ""
        right = b_lines[i].strip() if i < len(b_lines) else ""
        if left != right:
            return (left[:160], right[:160])
    return None


def _pair_graphs(
    without: Sequence[GeneratedGraph], with_probes: Sequence[GeneratedGraph]
) -> tuple[GraphKernels, ...]:
    plain = {g.key: g for g in without}
    probed = {g.key: g for g in with_probes}
    keys = list(dict.fromkeys([*plain, *probed]))
    keys.sort(key=lambda k: (_compile_order(k[0]), k[1] or "", k[2]))
    return tuple(GraphKernels(k[0], k[1], k[2], plain.get(k), probed.get(k)) for k in keys)


def observer_check(
    model: Callable[..., Any],
    batches: Iterable[Any],
    probes: Any,
    options: dict[str, Any] | None = None,
    *,
    dynamic: bool | None = None,
) -> ObserverCheck:
    """Compiles ``model`` with Inductor without probes and with the probe config
    ``probes`` (backend tcgd), caches off and Dynamo reset before each, calls it once per
    batch under ``torch.no_grad()`` on each side, and compares the kernels Inductor
    generated per graph (names and sha256 of their sources). ``options``: Inductor options
    (and ``mode``) for both sides. The probes record into a temporary run, removed."""
    from torch_cudagraph_debug.compile.backend import no_compile_caches

    calls = [as_call(b) for b in batches]
    mode, inductor = _split_options(options)
    compile_kwargs = {} if dynamic is None else {"dynamic": dynamic}
    sides: dict[str, list[GeneratedGraph]] = {}
    for side in ("without", "with"):
        torch._dynamo.reset()
        try:
            with contextlib.ExitStack() as stack:
                session = None
                if side == "with":
                    backend, session = stack.enter_context(
                        _probe_backend(probes, None, "observer-check", mode, inductor)
                    )
                else:
                    backend = functools.partial(_inductor_backend, mode=mode, options=inductor)
                with no_compile_caches(), torch.no_grad(), collect_compile_events() as events:
                    compiled = torch.compile(model, backend=backend, **compile_kwargs)
                    _run_calls(compiled, calls, None, session)
                if session is not None:
                    session.finish()
            sides[side] = list(events.graphs)
        finally:
            torch._dynamo.reset()
    return ObserverCheck(_pair_graphs(sides["without"], sides["with"]))


# ---------------------------------------------------------------------------- why()


@dataclass(frozen=True)
class CoverageReport:
    """CUDA graph coverage and the observer check, as ``why()`` reports them."""

    coverage: CudaGraphCoverage | None
    observer: ObserverCheck | None
    errors: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "coverage": None if self.coverage is None else self.coverage.to_dict(),
            "observer": None if self.observer is None else self.observer.to_dict(),
            "errors": dict(self.errors),
        }

    def add_to(self, doc: Any) -> None:
        if self.coverage is not None:
            self.coverage.add_to(doc)
        if self.observer is not None:
            self.observer.add_to(doc)
        for what, error in self.errors.items():
            doc.heading(f"{what}: not available")
            doc.paragraph(error)


def for_differential(
    result: Any, model: Callable[..., Any], calls: Sequence[Any], probes: Any, mode: str | None
) -> CoverageReport:
    """The coverage (under ``mode``, Graph Trees when it is None or ``default``) and the
    observer check of the model a differential run compared, with its probe config. A
    failure of either is reported, not raised."""
    graph_mode = mode if mode not in (None, "default") else "reduce-overhead"
    errors: dict[str, str] = {}
    coverage = observer = None
    try:
        coverage = cuda_graph_coverage(model, calls, probes=probes, mode=graph_mode)
    except Exception as error:  # the rest of the report stands without it
        errors["CUDA graph coverage"] = f"{type(error).__name__}: {error}"
    try:
        options = None if mode in (None, "default") else {"mode": mode}
        observer = observer_check(model, calls, probes, options)
    except Exception as error:
        errors["observer check"] = f"{type(error).__name__}: {error}"
    return CoverageReport(coverage, observer, errors)


__all__ = [
    "CompileEvent",
    "CompileEvents",
    "CoverageReport",
    "CudaGraphCoverage",
    "FunctionCoverage",
    "GeneratedGraph",
    "GraphKernels",
    "Kernel",
    "KernelChange",
    "ObserverCheck",
    "PointCoverage",
    "Rerecording",
    "collect_compile_events",
    "coverage_from_events",
    "cuda_graph_coverage",
    "for_differential",
    "observer_check",
    "parse_wrapper_code",
]
