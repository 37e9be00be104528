"""The reference design's tensor names and documented behaviours, as a user of its API
reference writes them: errors and their bases, the root's JSON aliases, observation keys,
check status, the probe's keyword gaps, snapshots, recorder and run methods, and the
TensorBoard exporter of ``tensor_debug.postprocess``. CPU only (CUDA ones are in
``tests/gpu/test_reference_tensor_facade_gpu.py``)."""

from __future__ import annotations

import copy
import json
import math
import pickle
import sys
import time
import typing
from pathlib import Path

import pytest
import torch
import torch_cudagraph_debug
from processes import python_stdout
from storage_files import data_files
from torch_cudagraph_debug import (
    CudaGraphDebugError,
    FrozenJSONValue,
    JSONScalar,
    JSONValue,
    NativeExtensionUnavailableError,
)
from torch_cudagraph_debug.errors import (
    CorruptRunError,
    InvalidInputError,
    TcgdError,
)
from torch_cudagraph_debug.tensor_debug import (
    CheckAction,
    CheckStatus,
    PrintAction,
    RecordAction,
    TensorBundleError,
    TensorCheckError,
    TensorCheckStatus,
    TensorComparisonError,
    TensorDebugError,
    TensorObservationKey,
    TensorOwnershipError,
    TensorPayloadUnavailableError,
    TensorProbe,
    TensorProbeSnapshot,
    TensorRecorder,
    TensorRun,
    TensorSite,
    compare_points,
)
from torch_cudagraph_debug.tensor_debug.observations import SITE_COLUMNS
from torch_cudagraph_debug.tensor_debug.postprocess import export_snapshots_to_tensorboard


def record(path, points, *, payload="full"):
    """Records `points`: (label, [(name, tensor), ...]) in order; returns the run."""
    rec = TensorRecorder(execution="eager", name="r", bundle_dir=path, payload=payload)
    for label, observations in points:
        with rec.record_point(label):
            for name, value in observations:
                rec.observe(value, name=name)
    return rec.finish()


# --------------------------------------------------------------------------- errors
def test_package_root_exports_the_common_errors_and_json_aliases():
    assert CudaGraphDebugError is TcgdError
    assert issubclass(NativeExtensionUnavailableError, CudaGraphDebugError)
    assert issubclass(NativeExtensionUnavailableError, ImportError)
    assert set(typing.get_args(JSONScalar)) == {str, bool, int, float, type(None)}
    # The containers recurse into the alias itself; frozen values use tuples and mappings.
    containers = {typing.get_origin(a): typing.get_args(a) for a in typing.get_args(JSONValue)}
    assert containers[list] == ("JSONValue",) and containers[dict] == (str, "JSONValue")
    frozen = {typing.get_origin(a): typing.get_args(a) for a in typing.get_args(FrozenJSONValue)}
    assert frozen[tuple] == ("FrozenJSONValue", ...) and list not in frozen


def test_every_tensor_error_is_a_tensor_debug_error_and_keeps_its_builtin():
    for cls, builtin in (
        (TensorCheckError, AssertionError),
        (TensorComparisonError, AssertionError),
        (TensorPayloadUnavailableError, LookupError),
        (TensorOwnershipError, ValueError),
        (TensorBundleError, TcgdError),
    ):
        assert issubclass(cls, TensorDebugError) and issubclass(cls, builtin), cls
    assert issubclass(TensorDebugError, CudaGraphDebugError)


def test_a_missing_native_core_is_native_extension_unavailable_error():
    # A finder that refuses the compiled core stands in for a wheel of another platform.
    code = (
        "import sys\n"
        "class Refuse:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'torch_cudagraph_debug._native':\n"
        "            raise ImportError('no compiled core here')\n"
        "sys.meta_path.insert(0, Refuse())\n"
        "try:\n"
        "    import torch_cudagraph_debug\n"
        "except Exception as e:\n"
        "    found = 'no compiled core here' in str(e)\n"
        "    print(type(e).__name__, isinstance(e, ImportError), found)\n"
    )
    assert python_stdout(code).split() == ["NativeExtensionUnavailableError", "True", "True"]


def test_a_damaged_or_missing_bundle_is_a_tensor_bundle_error(tmp_path):
    record(tmp_path / "run", [("p0", [("x", torch.ones(4))])])
    (part,) = data_files(tmp_path / "run", "observations")
    part.write_bytes(part.read_bytes()[:-8])
    with pytest.raises(TensorBundleError) as info:
        TensorRun.load(tmp_path / "run")
    assert type(info.value) is CorruptRunError
    with pytest.raises(TensorBundleError) as missing:
        TensorRun.load(tmp_path / "nothing-here")
    assert isinstance(missing.value, FileNotFoundError)


def test_summary_values_raise_tensor_payload_unavailable_error(tmp_path):
    run = record(tmp_path / "run", [("p", [("x", torch.ones(3))])], payload="summary")
    observation = run["p"].observation("x")
    assert observation.summary.numel == 3
    with pytest.raises(TensorPayloadUnavailableError, match="payload='summary'"):
        observation.tensor()


def test_a_failed_comparison_assertion_is_a_tensor_comparison_error(tmp_path):
    a = record(tmp_path / "a", [("p", [("x", torch.ones(3))])])
    b = record(tmp_path / "b", [("p", [("x", torch.tensor([1.0, 2.0, 1.0]))])])
    comparison = compare_points(a["p"], b["p"])
    assert comparison.status == "mismatch"
    with pytest.raises(TensorComparisonError):
        comparison.assert_ok()
    with pytest.raises(TensorDebugError):
        comparison.assert_ok()


# --------------------------------------------------------------------------- keys
def test_observation_key_is_the_stable_name_invocation_pair(tmp_path):
    run = record(tmp_path / "run", [("p", [("h", torch.ones(1)), ("h", torch.zeros(1))])])
    point = run["p"]
    second = point.observations[1]
    assert second.key == TensorObservationKey("h", 1)
    assert (second.key.name, second.key.invocation_index) == ("h", 1)
    # A key is the tuple it names: both spellings find the same observation.
    assert second.key == ("h", 1) and hash(second.key) == hash(("h", 1))
    assert point.by_key[TensorObservationKey("h", 1)] is point.by_key[("h", 1)]
    assert point.by_key[TensorObservationKey("h", 1)].tensor().tolist() == [0.0]


def test_tensor_site_is_a_frozen_value_made_by_keyword_or_position(tmp_path):
    where = {
        "site_id": "inference/fc1/addmm",
        "graph_kind": "inference",
        "node_name": "addmm",
        "aten_op": "aten.addmm.default",
        "module_path": "fc1",
        "source_location": "model.py:3",
        "compile_id": "0/0",
    }
    site = TensorSite(**where)
    assert site == TensorSite(*where.values(), None) and hash(site) == hash(TensorSite(**where))
    assert site != TensorSite(**where, materialized_by_probe=True) and site != where
    # Its attributes are the site columns of a run's observations, in order.
    assert site.to_dict() == {**where, "materialized_by_probe": None}
    assert tuple(site.to_dict()) == SITE_COLUMNS
    assert repr(site).startswith("TensorSite(site_id='inference/fc1/addmm', graph_kind=")
    with pytest.raises(AttributeError):
        site.aten_op = "aten.mm.default"  # type: ignore[misc]
    flagged = TensorSite(**where, materialized_by_probe=True)
    assert pickle.loads(pickle.dumps(flagged)) == flagged == copy.deepcopy(flagged)
    with pytest.raises(TypeError, match="missing"):
        TensorSite(site_id="x")  # type: ignore[call-arg]
    # A hand-placed observation has no site.
    run = record(tmp_path / "run", [("p", [("h", torch.ones(1))])])
    assert run["p"].observation("h").site is None


def test_check_action_binds_mapping_entries_by_observation_key():
    expected = torch.tensor([2.0])
    check = CheckAction({TensorObservationKey("h", 1): expected})
    assert check.expected_for("h", 1, order=5) is not None
    assert check.expected_for("h", 1, order=5).tolist() == [2.0]
    assert check.expected_for("h", 0, order=0) is None  # left out: not checked


def test_check_action_validates_its_expected_values_when_built():
    with pytest.raises(InvalidInputError, match="mapping keys"):
        CheckAction({"h": torch.zeros(1)})
    with pytest.raises(InvalidInputError, match="mapping keys"):
        CheckAction({("h", "0"): torch.zeros(1)})
    meta = torch.zeros(1, device="meta")  # any non-CPU device
    for expected in (meta, [torch.zeros(1), meta], {("h", 0): meta}):
        with pytest.raises(InvalidInputError, match="CPU tensors"):
            CheckAction(expected)


def test_a_single_expected_value_applies_to_capture_order_zero_only():
    check = CheckAction(torch.tensor([1.0, 2.0]))
    assert check.expected_for("x", 0, order=0).tolist() == [1.0, 2.0]
    with pytest.raises(InvalidInputError, match="1 expected values in capture order"):
        check.expected_for("x", 1, order=1)
    listed = CheckAction([torch.zeros(1), torch.ones(1)])
    assert listed.expected_for("x", 1, order=1).tolist() == [1.0]


# --------------------------------------------------------------------------- check status
def test_check_status_has_the_reference_fields_without_a_mismatch():
    probe = TensorProbe("p", [RecordAction()], when="always")
    probe(torch.ones(2), name="x")
    status = probe.check_status(synchronize=False)
    assert isinstance(status, TensorCheckStatus) and CheckStatus is TensorCheckStatus
    assert (status.ok, status.order, status.name, status.invocation_index) == (
        True,
        -1,
        None,
        -1,
    )
    assert status.replay_index == 0 and status.key is None and status.message
    probe.assert_check_ok(synchronize=False)  # nothing failed: no error
    probe.close(synchronize=False)


def test_a_failed_status_names_its_observation_key():
    status = TensorCheckStatus(False, "x differs", 3, 1, "x", 1)
    assert status.key == TensorObservationKey("x", 1)
    assert (status.replay_index, status.order) == (3, 1)


@pytest.mark.parametrize("target", ["cuda", 0, torch.device("cpu"), 1.5])
def test_synchronize_targets_other_than_bool_stream_or_cuda_device_are_refused(target):
    probe = TensorProbe("p", [RecordAction()], when="always")
    probe(torch.ones(1), name="x")
    for call in (probe.snapshot, probe.check_status, probe.assert_check_ok, probe.close):
        with pytest.raises(InvalidInputError, match="synchronize must be"):
            call(synchronize=target)
    with pytest.raises(InvalidInputError, match="synchronize must be"):
        TensorProbe("q", [RecordAction()], synchronize=target)
    assert not probe.closed
    probe.close()


# --------------------------------------------------------------------------- probe
def test_a_probe_needs_a_name_and_at_least_one_action():
    with pytest.raises(InvalidInputError, match="no actions"):
        TensorProbe("p", [])
    with pytest.raises(InvalidInputError, match="non-empty"):
        TensorProbe("", [RecordAction()])


def test_an_all_disabled_probe_is_a_pure_no_op():
    probe = TensorProbe(
        "off", [RecordAction(enabled=False), PrintAction(enabled=False)], when="always"
    )
    x = torch.ones(3)
    assert probe(x, name="x") is x
    assert probe.replay_index is None
    assert probe._runtime is None and probe._sites == []
    with pytest.raises(TensorDebugError, match="no RecordAction is enabled"):
        probe.snapshot()
    assert probe.check_status().ok
    probe.close()


def test_snapshot_without_a_record_action_is_a_tensor_debug_error():
    probe = TensorProbe("printer", [PrintAction()], when="always")
    with pytest.raises(TensorDebugError, match="add RecordAction"):
        probe.snapshot()
    probe.close()


def test_snapshot_before_anything_was_recorded_is_a_tensor_debug_error():
    probe = TensorProbe("later", [RecordAction()])  # when="capture": eager calls do nothing
    probe(torch.ones(2), name="x")
    with pytest.raises(TensorDebugError, match="no slot holds a value"):
        probe.snapshot()
    probe.close()


def test_capture_only_calls_outside_a_capture_are_not_even_validated(tmp_path):
    probe = TensorProbe("warmup", [RecordAction()])  # when="capture"
    not_contiguous = torch.ones(2, 3).t()
    quantized = torch.quantize_per_tensor(torch.ones(2), 0.1, 0, torch.qint8)
    for value in (not_contiguous, quantized, [1.0]):
        assert probe(value, name="x") is value
    assert probe._sites == [] and probe.device is None
    rec = TensorRecorder(execution="cuda_graph", bundle_dir=tmp_path / "run")
    assert rec.observe(quantized, name="q") is quantized  # warmup: a no-op
    rec.close()
    probe.close()


def test_replay_index_is_a_detached_int64_scalar_tensor():
    probe = TensorProbe("p", [RecordAction()], when="always")
    probe(torch.ones(2), name="x")
    counter = probe.replay_index
    assert isinstance(counter, torch.Tensor)
    assert (counter.dim(), counter.dtype, counter.item()) == (0, torch.int64, 0)
    counter.add_(5)  # a copy: the probe's own count is untouched
    assert probe.replay_index.item() == 0
    probe.close()


def test_snapshot_fields_follow_the_reference():
    probe = TensorProbe("mid", [RecordAction()], when="always")
    before = time.time()
    probe(torch.tensor([1.0, 2.0]), name="mid")
    probe(torch.tensor([3.0, 4.0]), name="mid")  # re-sampled in place
    probe(torch.tensor([5]), name="ids")
    snapshot = probe.snapshot()
    assert isinstance(snapshot.timestamp, float)
    assert before <= snapshot.timestamp <= time.time()
    assert snapshot.probe_id == probe.probe_id and snapshot.probe_name == "mid"
    assert (snapshot.snapshot_index, snapshot.replay_index) == (0, 0)
    assert snapshot.eager_overwrites == (("mid", 1), ("ids", 0))
    assert dict(snapshot.eager_overwrite_counts) == {"mid": 1, "ids": 0}
    with pytest.raises(TypeError):
        snapshot.eager_overwrite_counts["mid"] = 5  # read-only
    # Omitting the name uses the probe's name and invocation 0.
    assert snapshot.observation().name == "mid"
    assert snapshot.tensor().tolist() == [3.0, 4.0]
    assert snapshot.tensor("ids").tolist() == [5]
    assert list(snapshot.by_key) == [TensorObservationKey("mid", 0), ("ids", 0)]
    probe.close()


def test_snapshot_descriptor_is_json_ready_metadata():
    probe = TensorProbe("p", [RecordAction()], when="always")
    probe(torch.tensor([1.0, -1.0, 3.0]), name="x")
    snapshot = probe.snapshot()
    descriptor = json.loads(json.dumps(snapshot.descriptor()))
    assert descriptor["probe_id"] == probe.probe_id
    assert (descriptor["snapshot_index"], descriptor["replay_index"]) == (0, 0)
    assert descriptor["eager_overwrites"] == [["x", 0]]
    (x,) = descriptor["observations"]
    assert (x["name"], x["invocation_index"], x["order"]) == ("x", 0, 0)
    assert (x["shape"], x["dtype"], x["nbytes"], x["payload"]) == ([3], "float32", 12, "full")
    assert x["summary"]["max"] == 3.0 and x["summary"]["numel"] == 3
    probe.close()


def test_eager_overwrite_metadata_is_validated(tmp_path):
    run = record(tmp_path / "run", [("p", [("a", torch.ones(1)), ("a", torch.ones(1))])])
    observations = run["p"].observations  # ("a", 0) and ("a", 1)

    def snapshot(replay_index, overwrites, observations=observations[:1]):
        return TensorProbeSnapshot("id", "p", 0, replay_index, 0.0, observations, overwrites)

    assert snapshot(0, (("a", 2),)).eager_overwrite_counts["a"] == 2
    with pytest.raises(InvalidInputError, match="eager snapshot"):
        snapshot(1, (("a", 2),))
    with pytest.raises(InvalidInputError, match="twice"):
        snapshot(0, (("a", 1), ("a", 2)))
    with pytest.raises(InvalidInputError, match="exactly one"):
        snapshot(0, (("b", 1),))
    with pytest.raises(InvalidInputError, match="exactly one"):
        snapshot(0, (("a", 1),), observations=observations)
    assert snapshot(3, ()).eager_overwrites == ()


def test_probe_compare_checks_ownership_and_query_order():
    probe = TensorProbe("p", [RecordAction()], when="always")
    probe(torch.ones(2), name="x")
    first = probe.snapshot()
    probe(torch.tensor([1.0, 5.0]), name="x")
    second = probe.snapshot()
    assert probe.compare(first, second).status == "mismatch"
    assert probe.compare(second, second).status == "match"  # one query twice is fine
    with pytest.raises(InvalidInputError, match="earlier snapshot as ref"):
        probe.compare(second, first)
    other = TensorProbe("p", [RecordAction()], when="always")  # same name, other probe
    other(torch.ones(2), name="x")
    foreign = other.snapshot()
    with pytest.raises(TensorOwnershipError, match="another probe"):
        probe.compare(first, foreign)
    probe.close()
    other.close()


def test_probe_watch_grad_returns_a_handle_and_close_removes_it():
    probe = TensorProbe("grads", [RecordAction()], when="always")
    w = torch.tensor([1.0, 2.0], requires_grad=True)
    handle = probe.watch_grad(w)
    assert isinstance(handle, torch.utils.hooks.RemovableHandle)
    (w * torch.tensor([3.0, 4.0])).sum().backward()
    assert w.grad.tolist() == [3.0, 4.0]  # the gradient is left as it is
    # The name defaults to the probe's.
    assert probe.snapshot().tensor().tolist() == [3.0, 4.0]
    probe.close()
    w.grad = None
    (w * 2).sum().backward()  # no hook is left to reach the closed probe
    assert w.grad.tolist() == [2.0, 2.0]


def test_probe_watch_grad_on_a_tensor_without_grad():
    probe = TensorProbe("grads", [RecordAction()], when="always")
    with pytest.warns(UserWarning, match="does not require grad"):
        assert probe.watch_grad(torch.ones(1), name="g") is None
    with pytest.raises(RuntimeError, match="does not require grad"):
        probe.watch_grad(torch.ones(1), name="g", strict=True)
    probe.close()


def test_a_removed_handle_stays_removed_and_close_is_still_fine():
    probe = TensorProbe("grads", [RecordAction()], when="always")
    w = torch.ones(2, requires_grad=True)
    probe.watch_grad(w, name="first").remove()
    probe.watch_grad(w, name="second")
    (w * torch.tensor([1.0, 2.0])).sum().backward()
    assert [o.name for o in probe.snapshot().observations] == ["second"]
    probe.close()


# --------------------------------------------------------------------------- recorder
def test_recorder_watch_grad_takes_a_payload_and_returns_a_handle(tmp_path):
    rec = TensorRecorder(execution="eager", bundle_dir=tmp_path / "run")
    w = torch.tensor([1.0, 2.0], requires_grad=True)
    handle = rec.watch_grad(w, name="w.grad", payload="summary")
    assert isinstance(handle, torch.utils.hooks.RemovableHandle)
    with rec.record_point("step"):
        (w * 3).sum().backward()
    observation = rec.finish()["step"].observation("w.grad")
    assert observation.payload == "summary" and observation.summary.mean == 3.0
    with pytest.raises(RuntimeError):
        TensorRecorder(execution="eager", bundle_dir=tmp_path / "b").watch_grad(
            torch.ones(1), name="g", strict=True
        )


def test_recorder_close_takes_synchronize_and_removes_its_hooks(tmp_path):
    rec = TensorRecorder(execution="eager", bundle_dir=tmp_path / "run")
    w = torch.ones(2, requires_grad=True)
    rec.watch_grad(w, name="g")
    rec.close(synchronize=False)
    (w * 2).sum().backward()  # would raise inside the hook if it were still registered
    assert w.grad.tolist() == [2.0, 2.0]
    rec.close(synchronize=False)  # idempotent
    with pytest.raises(InvalidInputError, match="synchronize must be"):
        TensorRecorder(execution="eager", bundle_dir=tmp_path / "b", synchronize="cuda")


def test_record_point_refuses_a_bad_synchronize_target(tmp_path):
    rec = TensorRecorder(execution="eager", bundle_dir=tmp_path / "run")
    with pytest.raises(InvalidInputError, match="synchronize must be"):
        with rec.record_point("p", synchronize=0):
            pass
    with rec.record_point("p", synchronize=False):
        rec.observe(torch.ones(1), name="x")
    assert rec.finish().labels == ("p",)


# --------------------------------------------------------------------------- runs
def test_run_point_refuses_a_point_of_another_run(tmp_path):
    a = record(tmp_path / "a", [("p", [("x", torch.ones(1))])])
    b = record(tmp_path / "b", [("p", [("x", torch.ones(1))])])
    assert a.point(a["p"]) is a["p"]
    assert a.point(TensorRun.load(tmp_path / "a")["p"]).label == "p"  # same run, reloaded
    with pytest.raises(TensorOwnershipError, match="another run"):
        a.point(b["p"])


def test_run_compare_compares_two_of_its_points(tmp_path):
    run = record(
        tmp_path / "run",
        [("p0", [("x", torch.ones(2))]), ("p1", [("x", torch.tensor([1.0, 9.0]))])],
    )
    comparison = run.compare("p0", 1)
    assert comparison.status == "mismatch"
    assert comparison.observation("x").metrics.mismatch_count == 1
    assert run.compare(run["p0"], "p0").status == "match"


def test_run_reference_fields_default_payload_and_bundle_dir(tmp_path):
    summary = record(tmp_path / "s", [("p", [("x", torch.ones(1))])], payload="summary")
    full = record(tmp_path / "f", [("p", [("x", torch.ones(1))])])
    assert (summary.default_payload, full.default_payload) == ("summary", "full")
    assert isinstance(full.bundle_dir, Path) and full.bundle_dir == tmp_path / "f"
    assert TensorRun.load(tmp_path / "s").default_payload == "summary"


def test_load_with_cache_tensors_keeps_values_and_hands_out_copies(tmp_path):
    record(tmp_path / "run", [("p", [("x", torch.arange(3.0))])])
    run = TensorRun.load(tmp_path / "run", cache_tensors=True)
    first = run["p"].tensor("x")
    first.add_(100)  # the caller's copy only
    assert run["p"].tensor("x").tolist() == [0.0, 1.0, 2.0]
    assert TensorRun.load(tmp_path / "run").point("p").tensor("x").tolist() == [0.0, 1.0, 2.0]
    with pytest.raises(InvalidInputError, match="cache_tensors"):
        TensorRun.load(tmp_path / "run", cache_tensors="yes")


# --------------------------------------------------------------------------- TensorBoard
class FakeWriter:
    """Records what an exporter writes, as TensorBoard's SummaryWriter would receive it."""

    def __init__(self):
        self.scalars: list[tuple[str, float, int, float]] = []
        self.histograms: list[tuple[str, list[float], int]] = []

    def add_scalar(self, tag, value, step, walltime=None):
        self.scalars.append((tag, value, step, walltime))

    def add_histogram(self, tag, values, step, walltime=None):
        self.histograms.append((tag, values.tolist(), step))


def repeated_snapshot(tmp_path, replay_index=7):
    """A snapshot whose observations include two invocations of one name."""
    run = record(
        tmp_path / "run",
        [("p", [("h", torch.tensor([1.0, 3.0])), ("h", torch.tensor([0.0, -4.0]))])],
    )
    extra = record(tmp_path / "extra", [("p", [("out", torch.tensor([2.0, math.nan]))])])
    observations = run["p"].observations + extra["p"].observations
    return TensorProbeSnapshot("id", "p", 0, replay_index, 1000.5, observations)


def test_export_snapshots_writes_the_reference_scalars_at_the_replay_step(tmp_path, monkeypatch):
    # The exporter never imports TensorBoard itself: the caller's writer is enough.
    monkeypatch.setitem(sys.modules, "torch.utils.tensorboard", None)
    writer = FakeWriter()
    export_snapshots_to_tensorboard(writer, [repeated_snapshot(tmp_path)], tag_prefix="run/")
    got = {tag: (value, step, wall) for tag, value, step, wall in writer.scalars}
    assert set(got) == {
        f"run/{base}/{scalar}"
        for base in ("h/invocation_0", "h/invocation_1", "out")
        for scalar in ("numel", "mean", "std", "min", "max", "l2_norm")
    }
    assert got["run/h/invocation_0/mean"] == (2.0, 7, 1000.5)
    assert got["run/h/invocation_1/min"][0] == -4.0
    assert got["run/h/invocation_1/l2_norm"][0] == 4.0
    assert got["run/out/numel"][0] == 2.0 and got["run/out/max"][0] == 2.0  # NaN left out
    assert writer.histograms == []  # histograms are opt-in


def test_export_snapshots_step_override_and_histograms(tmp_path):
    snapshot = repeated_snapshot(tmp_path)
    writer = FakeWriter()
    export_snapshots_to_tensorboard(writer, [snapshot], step=42, write_scalars=False)
    assert writer.scalars == []
    writer = FakeWriter()
    export_snapshots_to_tensorboard(
        writer, [snapshot], step=lambda s: s.replay_index * 10, write_histograms=True
    )
    assert {step for _, _, step, _ in writer.scalars} == {70}
    assert writer.histograms == [
        ("h/invocation_0", [1.0, 3.0], 70),
        ("h/invocation_1", [0.0, -4.0], 70),
        ("out", [2.0], 70),
    ]
    writer = FakeWriter()
    export_snapshots_to_tensorboard(writer, [snapshot], step=3)
    assert {step for _, _, step, _ in writer.scalars} == {3}
    for bad in ({"step": "3"}, {"step": True}, {"write_scalars": 1}):
        with pytest.raises(InvalidInputError):
            export_snapshots_to_tensorboard(FakeWriter(), [snapshot], **bad)
    with pytest.raises(InvalidInputError, match="TensorProbeSnapshot"):
        export_snapshots_to_tensorboard(FakeWriter(), [object()])


def test_the_facade_modules_name_the_same_objects():
    from torch_cudagraph_debug import tensor_debug
    from torch_cudagraph_debug.tensor_debug import postprocess, tensorboard

    assert (
        postprocess.export_snapshots_to_tensorboard is tensorboard.export_snapshots_to_tensorboard
    )
    assert tensor_debug.export_snapshots_to_tensorboard is export_snapshots_to_tensorboard
    assert torch_cudagraph_debug.NativeExtensionUnavailableError is NativeExtensionUnavailableError
