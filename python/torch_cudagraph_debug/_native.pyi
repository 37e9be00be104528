"""Type stubs of the native core (Rust, pyo3), checked against the built module by
`mypy.stubtest` (scripts/test).

Every class is `@final`: pyo3 classes cannot be subclassed from Python. Constructors are
`__new__`, which is what pyo3's `#[new]` defines. String arguments that take one of a fixed
set of values are `Literal` types; the native code still checks them at run time and raises
`InvalidInputError` naming the argument.
"""

from collections.abc import Callable
from os import PathLike
from pathlib import Path
from typing import Literal, TypedDict, final

import pyarrow as pa
from typing_extensions import Self

__all__ = [
    "FORMAT_VERSION",
    "AnomalySite",
    "Comparison",
    "DeviceRecorder",
    "FirstAnomaly",
    "MemoryComparison",
    "MemoryIngestor",
    "MemoryPhaseComparison",
    "MemoryRunReader",
    "MemoryRunWriter",
    "MemoryState",
    "MemoryTimeline",
    "ProbeConfig",
    "ProbeRuntime",
    "RunReader",
    "RunWriter",
    "__version__",
    "add_nvrtc_search_dir",
    "capture_id",
    "check_dtype",
    "check_run_name",
    "check_snapshot_pickle",
    "compact_root",
    "compare_options",
    "compare_phases",
    "compare_point_series",
    "compare_run_groups",
    "compare_runs",
    "compare_sets",
    "compare_states",
    "content_digest",
    "cuda_available",
    "default_compare_options",
    "first_anomaly",
    "format_bytes",
    "list_runs",
    "memory_state_from_pickle",
    "memory_timeline",
    "probe_memory",
    "release_deferred",
    "render_memory_summaries",
    "run_group",
    "summarize",
    "supported_dtypes",
    "write_report_files",
]

__version__: str
FORMAT_VERSION: int

_StrPath = str | PathLike[str]
# Host memory as plain facts: (address, length) of a contiguous CPU tensor's bytes.
_HostBytes = tuple[int, int]
# A device-computed summary: (numel, finite, nan, posinf, neginf, zero, min, max, mean,
# std, l2).
_SummaryArgs = tuple[
    int, int, int, int, int, int, float | None, float | None, float | None, float | None, float
]

# ---------------------------------------------------------------- enumerations

# How an observation is stored: its bytes, or only its summary.
_Payload = Literal["full", "summary"]
# What a reader does with a damaged point: refuse the run, or leave the point out.
_OnDamage = Literal["raise", "skip"]
_TableName = Literal[
    "runs",
    "points",
    "observations",
    "payloads",
    "memory_points",
    "memory_devices",
    "memory_stats",
    "memory_segments",
    "memory_blocks",
    "memory_events",
    "memory_frames",
    "memory_stacks",
]
_MemoryTableName = Literal[
    "points",
    "memory_points",
    "memory_devices",
    "memory_stats",
    "memory_segments",
    "memory_blocks",
    "memory_events",
    "memory_frames",
    "memory_stacks",
]
# Memory report formats and how deep a memory report goes.
_ReportFormat = Literal["text", "json", "csv", "html"]
_Depth = Literal["device", "pool", "stream"]
_Scope = Literal["all", "default", "private"]
_HistoryStatus = Literal[
    "complete", "first_point", "disabled", "boundary_unavailable", "truncated", "invalid_order"
]
_Relation = Literal["same_origin", "cross_run", "single"]
_LifecycleLabel = Literal["exact", "approximate", "unavailable"]
# Tensor comparisons.
_Status = Literal["match", "inconclusive", "mismatch"]
_SetKind = Literal["snapshots", "points"]
_Mode = Literal["allclose", "exact"]
_DtypePolicy = Literal["strict", "promote"]
_LayoutPolicy = Literal["strict", "ignore"]

# ---------------------------------------------------------------- tensors and runs

class _Summary(TypedDict):
    numel: int
    finite: int
    nan: int
    posinf: int
    neginf: int
    zero: int
    min: float | None
    max: float | None
    mean: float | None
    std: float | None
    l2: float

def summarize(dtype: str, data: _HostBytes) -> _Summary: ...
def content_digest(data: _HostBytes) -> str: ...
def supported_dtypes() -> list[str]: ...
def check_dtype(name: str) -> None: ...
def check_run_name(name: str) -> None: ...
def format_bytes(n: int) -> str: ...

# One observation handed to `RunWriter.commit_point`: every key present, None where absent.
class _RecordedObservation(TypedDict):
    order: int
    name: str
    invocation_index: int
    dtype: str
    shape: list[int]
    stride: list[int]
    source_device: str
    payload: _Payload
    data: _HostBytes | None
    owner: object | None
    summary: _SummaryArgs | None
    site_id: str | None
    graph_kind: str | None
    node_name: str | None
    aten_op: str | None
    module_path: str | None
    source_location: str | None
    compile_id: str | None
    materialized_by_probe: bool | None

@final
class RunWriter:
    def __new__(
        cls,
        path: _StrPath,
        header_json: str,
        producer: str,
        overwrite: bool = False,
        commit_interval: float | None = None,
        compact: bool = True,
    ) -> Self: ...
    def commit_point(
        self,
        label: str,
        metadata_json: str,
        replay_index: int | None,
        timestamp_us: int | None,
        observations: list[_RecordedObservation],
    ) -> int: ...
    def flush(self) -> None: ...
    def has_label(self, label: str) -> bool: ...
    @property
    def point_count(self) -> int: ...
    @property
    def closed(self) -> bool: ...
    @property
    def path(self) -> Path: ...
    def close(self, complete: bool) -> None: ...
    def discard(self) -> None: ...

class _Damage(TypedDict):
    path: Path
    table: str
    point_index: int | None
    label: str | None
    problem: str

@final
class RunReader:
    def __new__(
        cls,
        path: _StrPath,
        on_damage: _OnDamage = "raise",
        name: str | None = None,
        rank: int | None = None,
        kind: Literal["tensor", "memory"] | None = None,
    ) -> Self: ...
    @staticmethod
    def table_names() -> list[_TableName]: ...
    def table_names_of_run(self) -> list[_TableName]: ...
    def damage(self) -> list[_Damage]: ...
    @property
    def path(self) -> Path: ...
    def manifest_json(self) -> str: ...
    def table(self, name: _TableName) -> pa.RecordBatch: ...
    def run_table(self) -> pa.RecordBatch: ...
    def payload(self, digest: str) -> bytes: ...
    def validate(self) -> list[tuple[Path, str]]: ...

# ---------------------------------------------------------------- CUDA probes

# (replay, name, invocation, element, actual, expected) of the first failed check.
_CheckFailure = tuple[int, str, int, int, str, str]

@final
class ProbeRuntime:
    def __new__(cls, device: int) -> Self: ...
    def capturing(self, stream: int) -> bool: ...
    def bind_capture(self, stream: int) -> bool: ...
    def add_slot(self, nbytes: int) -> int: ...
    def copy_into_slot(self, slot: int, src: int, nbytes: int, stream: int) -> None: ...
    def copy_into_slots(self, copies: list[tuple[int, int]], stream: int) -> None: ...
    def add_ring(self, slot: int, depth: int) -> int: ...
    def copy_slots_into_rings(self, copies: list[tuple[int, int]], stream: int) -> None: ...
    def read_ring(self, ring: int) -> tuple[bytes, list[int]]: ...
    @property
    def history_frozen_at(self) -> int | None: ...
    def freeze_history(self, replay: int) -> None: ...
    def rearm_history(self) -> None: ...
    def enqueue_print(
        self,
        slot: int,
        stream: int,
        probe: str,
        name: str,
        invocation: int,
        dtype: str,
        shape: list[int],
        max_items: int,
        every: int,
        summary: bool,
    ) -> int: ...
    def enqueue_check(
        self,
        slot: int,
        stream: int,
        name: str,
        invocation: int,
        dtype: str,
        expected: _HostBytes,
        expected_dtype: str,
        rtol: float,
        atol: float,
        equal_nan: bool,
    ) -> int: ...
    def relaunch_action(self, action: int, stream: int) -> None: ...
    def replay_count(self) -> int: ...
    def read_slot(self, slot: int) -> bytes: ...
    def check_status(self) -> tuple[int, int, _CheckFailure | None]: ...
    @property
    def slot_bytes(self) -> int: ...
    @property
    def closed(self) -> bool: ...
    @property
    def bound(self) -> bool: ...
    def close(self) -> None: ...

def cuda_available() -> bool: ...
def release_deferred() -> int: ...

@final
class DeviceRecorder:
    def __new__(
        cls,
        device: int,
        writer: RunWriter,
        points_in_flight: int = 64,
        history: int = 0,
        trigger_nonfinite: bool = True,
        trigger_abs_max: float | None = None,
    ) -> Self: ...
    def add_capture(self, runtime: ProbeRuntime, kind: str = "graph") -> int: ...
    def register_sites(
        self,
        runtime: ProbeRuntime,
        capture: int,
        sites: list[dict[str, object]],
        stream: int,
        sample_every: int = 0,
        sample_full: bool = True,
    ) -> list[int]: ...
    def close_point(
        self,
        label: str,
        metadata_json: str,
        stream: int,
        dump: str | None = None,
        host_observations: list[dict[str, object]] = ...,
    ) -> int: ...
    def flush(self) -> None: ...
    def rearm(self) -> None: ...
    @property
    def counts(self) -> tuple[int, int]: ...
    def close(self) -> None: ...

def add_nvrtc_search_dir(path: str) -> None: ...
def probe_memory() -> tuple[int, int]: ...
def capture_id(stream: int) -> int | None: ...

# ---------------------------------------------------------------- probe config files

@final
class ProbeConfig:
    @staticmethod
    def load(path: _StrPath) -> ProbeConfig: ...
    @staticmethod
    def parse(text: str, name: str) -> ProbeConfig: ...
    @staticmethod
    def from_json(json: str) -> ProbeConfig: ...
    @property
    def digest(self) -> str: ...
    @property
    def source_name(self) -> str: ...
    def run_json(self) -> str: ...
    def select(self, nodes_json: str) -> str: ...

# ---------------------------------------------------------------- memory debug (tcgd-memory)

# (device, free, total, probe device bytes, probe pinned bytes); None where unknown.
_DeviceArgs = list[tuple[int, int | None, int | None, int | None, int | None]]
# ((reference device, (a, b)), (candidate device, (c, d)))
_PoolMapping = list[tuple[tuple[int, tuple[int, int]], tuple[int, tuple[int, int]]]]
_PoolId = tuple[int, int]
_Stats = dict[str, int]

class _DeviceMemory(TypedDict):
    device: int
    free_bytes: int | None
    total_bytes: int | None
    cuda_used: int | None
    allocator_reserved: int
    residual: int | None
    probe_device_bytes: int | None
    probe_pinned_bytes: int | None
    history_status: _HistoryStatus
    ring_entries: int
    window_events: int

@final
class MemoryState:
    def identity(self) -> dict[str, object]: ...
    @property
    def devices(self) -> list[int]: ...
    @property
    def warnings(self) -> list[str]: ...
    def observations(self) -> list[tuple[int, int, _PoolId, int, _Stats]]: ...
    def pool_stats(self) -> list[tuple[int, _PoolId, _Stats]]: ...
    def scope_stats(self, device: int | None = None) -> dict[_Scope, _Stats]: ...
    def device_memory(self) -> list[_DeviceMemory]: ...
    def table(self, name: _MemoryTableName) -> pa.RecordBatch: ...
    def raw_snapshot(self) -> dict[str, object]: ...
    def report(
        self,
        format: _ReportFormat = "text",
        include_unchanged: bool = True,
        depth: _Depth = "stream",
    ) -> str: ...

@final
class MemoryIngestor:
    def __new__(cls, origin: str, name: str) -> Self: ...
    def ingest(
        self,
        snapshot: object,
        *,
        label: str | None,
        marker: str | None,
        devices: list[int] | None,
        device_memory: _DeviceArgs,
        source: str,
        synchronized: bool,
        during_capture: bool,
        torch_version: str | None,
    ) -> MemoryState: ...

@final
class MemoryRunWriter:
    def __new__(
        cls,
        path: _StrPath,
        header_json: str,
        producer: str,
        overwrite: bool = False,
        commit_interval: float | None = None,
        compact: bool = True,
    ) -> Self: ...
    def record(
        self,
        snapshot: object,
        *,
        label: str,
        metadata_json: str,
        marker: str | None,
        devices: list[int] | None,
        device_memory: _DeviceArgs,
        source: str,
        synchronized: bool,
        during_capture: bool,
        torch_version: str | None,
    ) -> MemoryState: ...
    def import_pickle(
        self,
        path: _StrPath,
        *,
        label: str,
        metadata_json: str,
        device_memory: _DeviceArgs,
    ) -> MemoryState: ...
    def has_label(self, label: str) -> bool: ...
    @property
    def point_count(self) -> int: ...
    @property
    def closed(self) -> bool: ...
    @property
    def path(self) -> Path: ...
    @property
    def run_id(self) -> str: ...
    def flush(self) -> None: ...
    def close(self, complete: bool) -> None: ...
    def discard(self) -> None: ...

@final
class MemoryRunReader:
    def __new__(
        cls,
        path: _StrPath,
        on_damage: _OnDamage = "raise",
        name: str | None = None,
        rank: int | None = None,
    ) -> Self: ...
    def damage(self) -> list[_Damage]: ...
    def manifest_json(self) -> str: ...
    def states(self) -> list[MemoryState]: ...
    def table(self, name: _MemoryTableName) -> pa.RecordBatch: ...
    def raw_snapshot(self, point_index: int) -> dict[str, object]: ...
    def validate(self) -> list[tuple[Path, str]]: ...

@final
class MemoryComparison:
    def render(
        self,
        format: _ReportFormat = "text",
        include_unchanged: bool = True,
        depth: _Depth = "stream",
    ) -> str: ...
    @property
    def relation(self) -> _Relation: ...
    @property
    def lifecycle_label(self) -> _LifecycleLabel: ...
    @property
    def warnings(self) -> list[str]: ...
    @property
    def suggested_pool_mapping(self) -> _PoolMapping: ...

@final
class MemoryPhaseComparison:
    def render(self, format: _ReportFormat = "text", include_unchanged: bool = True) -> str: ...
    @property
    def identity_failures(self) -> int: ...
    @property
    def warnings(self) -> list[str]: ...

@final
class MemoryTimeline:
    def render(self, format: _ReportFormat = "text", include_unchanged: bool = True) -> str: ...

def memory_state_from_pickle(
    path: _StrPath,
    *,
    origin: str,
    name: str,
    label: str,
    device_memory: _DeviceArgs,
) -> MemoryState: ...
def check_snapshot_pickle(data: bytes) -> None: ...
def compare_states(
    reference: MemoryState,
    candidate: MemoryState,
    *,
    pool_mapping: _PoolMapping,
    device_mapping: list[tuple[int, int]],
) -> MemoryComparison: ...
def compare_phases(
    baseline_start: MemoryState,
    baseline_end: MemoryState,
    candidate_start: MemoryState,
    candidate_end: MemoryState,
    *,
    pool_mapping: _PoolMapping,
    device_mapping: list[tuple[int, int]],
) -> MemoryPhaseComparison: ...
def memory_timeline(states: list[MemoryState]) -> MemoryTimeline: ...
def render_memory_summaries(
    states: list[MemoryState],
    format: _ReportFormat = "text",
    include_unchanged: bool = True,
    depth: _Depth = "stream",
) -> str: ...
def write_report_files(
    directory: _StrPath, files: list[tuple[str, str]], own: list[str], overwrite: bool
) -> list[Path]: ...

# ---------------------------------------------------------------- first anomaly (tcgd-compare)

# What `first_anomaly` looks for.
_AnomalyKind = Literal["nan", "inf", "nonfinite", "abs_max"]

@final
class AnomalySite:
    """One observation that hit the rule: its place in the run and what it holds."""

    @property
    def point_index(self) -> int: ...
    @property
    def label(self) -> str: ...
    @property
    def replay_index(self) -> int | None: ...
    @property
    def order(self) -> int: ...
    @property
    def name(self) -> str: ...
    @property
    def invocation_index(self) -> int: ...
    @property
    def site_id(self) -> str | None: ...
    @property
    def graph_kind(self) -> str | None: ...
    @property
    def node_name(self) -> str | None: ...
    @property
    def aten_op(self) -> str | None: ...
    @property
    def module_path(self) -> str | None: ...
    @property
    def nan(self) -> int: ...
    @property
    def posinf(self) -> int: ...
    @property
    def neginf(self) -> int: ...
    @property
    def min(self) -> float | None: ...
    @property
    def max(self) -> float | None: ...
    @property
    def abs_max(self) -> float | None: ...

@final
class FirstAnomaly:
    """The first anomaly of a run: its first site's values, the rule, the observations
    visited, and every site that hit at the same replay."""

    @property
    def point_index(self) -> int: ...
    @property
    def label(self) -> str: ...
    @property
    def replay_index(self) -> int | None: ...
    @property
    def order(self) -> int: ...
    @property
    def name(self) -> str: ...
    @property
    def invocation_index(self) -> int: ...
    @property
    def site_id(self) -> str | None: ...
    @property
    def graph_kind(self) -> str | None: ...
    @property
    def node_name(self) -> str | None: ...
    @property
    def aten_op(self) -> str | None: ...
    @property
    def module_path(self) -> str | None: ...
    @property
    def nan(self) -> int: ...
    @property
    def posinf(self) -> int: ...
    @property
    def neginf(self) -> int: ...
    @property
    def min(self) -> float | None: ...
    @property
    def max(self) -> float | None: ...
    @property
    def abs_max(self) -> float | None: ...
    @property
    def kind(self) -> _AnomalyKind: ...
    @property
    def threshold(self) -> float | None: ...
    @property
    def site_filter(self) -> str | None: ...
    @property
    def scanned(self) -> int: ...
    @property
    def sites(self) -> list[AnomalySite]: ...
    def to_json(self) -> str: ...

def first_anomaly(
    reader: RunReader,
    kind: _AnomalyKind = "nonfinite",
    threshold: float | None = None,
    site: str | None = None,
) -> FirstAnomaly | None: ...

# ---------------------------------------------------------------- comparison engine (tcgd-compare)

@final
class Comparison:
    """A finished comparison, held natively; reports are rendered on request."""

    @property
    def status(self) -> _Status: ...
    def to_json(self) -> str: ...
    def to_text(self, limit: int | None = None) -> str: ...
    def to_html(self, limit: int | None = None) -> str: ...
    def csv_tables(self) -> list[tuple[str, str]]: ...
    def write(
        self, directory: _StrPath, overwrite: bool = False, limit: int | None = None
    ) -> list[Path]: ...
    def worst(self, n: int | None = None) -> list[tuple[int | None, int, int]]: ...

# One observation's metadata in a set handed to the engine: every key present.
class _ComparedObservation(TypedDict):
    order: int
    name: str
    invocation_index: int
    dtype: str
    shape: list[int]
    stride: list[int]
    source_device: str
    payload: _Payload
    digest: str | None
    summary: _SummaryArgs | None
    site_id: str | None
    graph_kind: str | None
    node_name: str | None
    aten_op: str | None
    module_path: str | None
    source_location: str | None
    compile_id: str | None

class _Point(TypedDict):
    label: str | None
    index: int | None
    replay_index: int | None
    snapshot_index: int | None
    timestamp: str | None

class _Subject(TypedDict):
    kind: str
    name: str | None
    path: str | None
    run_id: str | None
    rank: int | None
    world_size: int | None
    complete: bool | None
    points: int | None
    detail: str | None

# loader(i) returns (owner, (address, length)) of a private contiguous CPU tensor that
# `owner` keeps alive.
class _ObservationSet(TypedDict):
    subject: _Subject
    point: _Point
    observations: list[_ComparedObservation]
    loader: Callable[[int], tuple[object, _HostBytes]]

# progress(done bytes, total bytes, what is being compared)
_Progress = Callable[[int, int, str], None] | None
# A point mapping: "label", "index", or explicit (reference, candidate) pairs of labels
# or indices.
_Mapping = Literal["label", "index"] | list[tuple[str | int, str | int]] | None

def compare_sets(
    kind: _SetKind,
    reference: _ObservationSet,
    candidate: _ObservationSet,
    options_json: str,
    progress_callback: _Progress = None,
) -> Comparison: ...

# A run: a job root holding one tensor run, or (root, name, rank).
_RunAddress = _StrPath | tuple[_StrPath, str | None, int | None]
# A group: (root, name, runs); with a root, its runs named `name`; without, `runs`.
_GroupArgs = tuple[_StrPath | None, str | None, list[_RunAddress]]

def compare_runs(
    reference: _RunAddress,
    candidate: _RunAddress,
    options_json: str,
    point_mapping: _Mapping = None,
    progress_callback: _Progress = None,
) -> Comparison: ...
def compare_point_series(
    reference: _ObservationSet,
    run: _RunAddress,
    options_json: str,
    progress_callback: _Progress = None,
) -> Comparison: ...
def compare_run_groups(
    reference: _GroupArgs,
    candidate: _GroupArgs,
    options_json: str,
    point_mapping: _Mapping = None,
    progress_callback: _Progress = None,
) -> Comparison: ...
def run_group(
    root: _StrPath | None = None, name: str | None = None, runs: list[_RunAddress] = ...
) -> str: ...
def list_runs(root: _StrPath) -> pa.RecordBatch: ...
def compact_root(root: _StrPath) -> dict[str, int | list[str]]: ...
def default_compare_options() -> str: ...

# Typed by the values that are valid; the native code accepts any object and raises
# InvalidInputError naming the option (with `option` and `reason` attributes) otherwise.
def compare_options(
    mode: _Mode,
    rtol: float,
    atol: float,
    equal_nan: bool,
    dtype_policy: _DtypePolicy,
    layout_policy: _LayoutPolicy,
    limit: int,
) -> str: ...
