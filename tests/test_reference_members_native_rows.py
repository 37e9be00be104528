"""The reference design's members of the native row classes: memory comparison, timeline
and phase rows (``to_row()`` is the row's line of the CSV file ``write()`` produces,
``changed``, keys and labels, the device rows' reference names) and tensor comparison
results (observation fields, counts, flat rows, ``write()``'s keys, the reference's
parameter names), each checked against facts computed here or read from written files."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import pytest
import torch
from test_memory_support import MIB, FakeAllocator, two_runs
from torch_cudagraph_debug.memory_debug import (
    MemoryLifecycleDelta,
    MemoryPoolKey,
    MemoryRecorder,
    compare_phases,
    compare_points,
)
from torch_cudagraph_debug.tensor_debug import (
    TensorComparisonOptions,
    TensorRecorder,
    TensorValueSummary,
    compare_runs,
)
from torch_cudagraph_debug.tensor_debug import (
    compare_points as compare_tensor_points,
)

PRIVATE = MemoryPoolKey(0, (1, 0))


def csv_file(path: Path) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(path.read_text())))


def as_cells(row: dict) -> dict[str, str]:
    """A ``to_row()`` as the CSV writer spells its cells (empty for None, booleans in
    lower case)."""

    def cell(v: object) -> str:
        if v is None:
            return ""
        return str(v).lower() if isinstance(v, bool) else str(v)

    return {k: cell(v) for k, v in row.items()}


# ---------------------------------------------------------------------------- memory rows


@pytest.fixture
def one_run(tmp_path):
    """One run of three points: a default segment, a private pool of 16 MiB, then 8 MiB
    more in it."""
    alloc = FakeAllocator()
    alloc.alloc(alloc.segment(2 * MIB), 1024)
    with MemoryRecorder(name="one", run_dir=tmp_path / "one", _source=alloc) as rec:
        rec.record_point("start")
        seg = alloc.segment(16 * MIB, pool=(1, 0), stream=0x77)
        alloc.alloc(seg, 16 * MIB)
        rec.record_point("captured")
        seg2 = alloc.segment(8 * MIB, pool=(1, 0), stream=0x77)
        alloc.alloc(seg2, 8 * MIB)
        rec.record_point("grown")
    return rec.result


def test_comparison_rows_are_their_csv_lines(tmp_path, one_run) -> None:
    c = compare_points(one_run.point("start"), one_run.point("grown"))
    written = c.write(tmp_path / "cmp")
    for rows, name in (
        (c.allocator_scopes, "allocator_scopes"),
        (c.pools, "pools"),
        (c.observations, "observations"),
        (c.device_comparisons, "devices"),
    ):
        lines = csv_file(written[name])
        assert [as_cells(r.to_row()) for r in rows] == lines, name
    private = next(p for p in c.pools if p.pool_key == PRIVATE)
    assert private.to_row()["delta_reserved_bytes"] == 24 * MIB
    assert (private.changed and private.pool_key == private.reference_key) or private.candidate_key
    all_scope = next(s for s in c.allocator_scopes if s.scope == "all")
    assert all_scope.changed and all_scope.to_row()["scope"] == "all"


def test_device_comparison_reference_names(one_run) -> None:
    c = compare_points(one_run.point("start"), one_run.point("grown"))
    (device,) = c.device_comparisons
    assert device.reference_allocator.reserved_bytes == 2 * MIB
    assert device.candidate_allocator.reserved_bytes == 26 * MIB
    assert device.allocator_delta.reserved_bytes == 24 * MIB
    assert device.reference_allocator == device.reference_stats
    assert device.reference == device.reference_sample
    assert device.delta_allocator_reserved_bytes == 24 * MIB
    assert repr(device) == (
        "MemoryDeviceComparison(reference_device_index=0, candidate_device_index=0, "
        "match='same_run')"
    )
    pool = next(p for p in c.pools if p.pool_key == PRIVATE)
    assert repr(pool) == (
        # The private pool is created between the two points: the candidate's only.
        "MemoryPoolComparison(reference_key=None, "
        "candidate_key=MemoryPoolKey(device_index=0, pool_id=(1, 0)), "
        f"match='candidate_only', delta_reserved_bytes={24 * MIB})"
    )
    row = device.to_row()
    assert row["delta_allocator_reserved_bytes"] == 24 * MIB
    assert row["reference_device_index"] == 0


def test_timeline_entries(tmp_path, one_run) -> None:
    timeline = one_run.timeline()
    written = timeline.write(tmp_path / "timeline")
    assert [as_cells(e.to_row()) for e in timeline.pool_entries] == csv_file(written["pools"])
    assert [as_cells(e.to_row()) for e in timeline.device_entries] == csv_file(written["devices"])
    grown = [e for e in timeline.pool_entries if e.point_label == "grown"]
    private = next(e for e in grown if e.key == PRIVATE)
    assert private.key == private.pool_key
    assert private.stats.reserved_bytes == 24 * MIB and private.delta.reserved_bytes == 8 * MIB
    devices = {e.point_label: e for e in timeline.device_entries}
    assert devices["grown"].allocator_reserved_bytes == 26 * MIB
    assert devices["grown"].delta_allocator_reserved_bytes == 8 * MIB
    assert devices["start"].delta_allocator_reserved_bytes is None
    # The residual's change is the used bytes' change minus the reserved bytes' change.
    g, s = devices["grown"], devices["captured"]
    if g.cuda_allocator_residual_bytes is not None and s.cuda_allocator_residual_bytes is not None:
        expected = g.cuda_allocator_residual_bytes - s.cuda_allocator_residual_bytes
        assert g.delta_cuda_allocator_residual_bytes == expected
    assert devices["start"].delta_cuda_allocator_residual_bytes is None
    # One repr for every entry class, naming the class, the point and the subject.
    assert repr(private) == (
        "MemoryPoolTimelineEntry(point_label='grown', "
        f"key=MemoryPoolKey(device_index=0, pool_id=(1, 0)), reserved_bytes={24 * MIB})"
    )
    assert repr(devices["grown"]) == (
        f"MemoryDeviceTimelineEntry(point_label='grown', device_index=0, reserved_bytes={26 * MIB})"
    )


def test_phase_rows(tmp_path) -> None:
    a, b = two_runs(tmp_path)
    phase = compare_phases(
        a.between("start", "captured"),
        b.between("start", "captured"),
        pool_mapping={PRIVATE: PRIVATE},
    )
    written = phase.write(tmp_path / "phase")
    pool_rows = phase.pool_decomposition
    assert [as_cells(r.to_row()) for r in pool_rows] == csv_file(written["pools"])
    reserved = next(
        r for r in pool_rows if r.metric == "reserved_bytes" and r.baseline_key == PRIVATE
    )
    assert reserved.candidate_key == PRIVATE and reserved.baseline_pool == PRIVATE
    assert reserved.label == "device[0] pool[1,0] -> device[0] pool[1,0]"
    terms = reserved.components
    assert terms.metric == "reserved_bytes"
    assert (terms.baseline_change_bytes, terms.candidate_change_bytes) == (16 * MIB, 32 * MIB)
    assert terms.end_gap_bytes == 16 * MIB and terms.changed and reserved.changed
    assert repr(reserved) == (
        f"MemoryPoolPhaseDecomposition(metric='reserved_bytes', end_gap_bytes={16 * MIB}, "
        f"change_gap_bytes={16 * MIB}, identity_holds=True)"
    )
    assert repr(terms) == (
        f"MemoryPhaseComponents(metric='reserved_bytes', end_gap_bytes={16 * MIB}, "
        f"change_gap_bytes={16 * MIB}, identity_holds=True)"
    )
    unchanged = [r for r in phase.allocator_scope_decomposition if not r.changed]
    assert all(
        not any(
            (getattr(r.components, t) or 0)
            for t in ("baseline_change_bytes", "candidate_change_bytes", "start_gap_bytes")
        )
        and not r.components.end_gap_bytes
        for r in unchanged
    )
    scope_rows = csv_file(written["allocator_scopes"])
    assert [as_cells(r.to_row()) for r in phase.allocator_scope_decomposition] == scope_rows


def test_lifecycle_delta_combine(one_run) -> None:
    c = compare_points(one_run.point("start"), one_run.point("grown"))
    deltas = [p.lifecycle for p in c.pools if p.lifecycle is not None]
    assert deltas, "one run's points have an exact lifecycle"
    total = MemoryLifecycleDelta.combine(deltas)
    assert total.new_segment_bytes == sum(d.new_segment_bytes for d in deltas) == 24 * MIB
    assert total.changed and MemoryLifecycleDelta.combine([]) is None


# ---------------------------------------------------------------------------- tensor rows


def tensor_runs(root: Path):
    runs = []
    for name, delta in (("reference", 0.0), ("candidate", 0.5)):
        with TensorRecorder(name=name, run_dir=root / name) as rec:
            for step in range(3):
                with rec.record_point(f"step{step}"):
                    x = torch.arange(6, dtype=torch.float32).reshape(2, 3) + step
                    if step == 2:
                        x[1, 2] += delta
                    rec.observe(x, name="hidden")
                    rec.observe(torch.ones(2), name="same")
            if name == "reference":
                with rec.record_point("tail"):
                    rec.observe(torch.zeros(1), name="hidden")
        runs.append(rec.result)
    return runs


def test_observation_comparison_fields(tmp_path) -> None:
    ref, cand = tensor_runs(tmp_path)
    point = compare_tensor_points(ref.point("step2"), cand.point("step2"))
    hidden = point.observation("hidden")
    assert hidden.status == "mismatch" and hidden.changed
    assert hidden.total_count == 6 and hidden.mismatch_count == 1
    assert hidden.first_mismatch_index == (1, 2)
    assert hidden.reference_value == 7.0 and hidden.candidate_value == 7.5
    assert hidden.max_relative_error == hidden.max_rel_error == pytest.approx(0.5 / 7)
    same = point.observation("same")
    assert not same.changed and same.first_mismatch_index is None
    assert (point.matched_count, point.mismatched_count, point.inconclusive_count) == (1, 1, 0)
    rows = point.observation_comparison_rows()
    assert [r["name"] for r in rows] == ["hidden", "same"]
    assert rows[0] == hidden.to_row() and rows[0]["first_mismatch_coordinate"] == "(1, 2)"
    assert [r["name"] for r in point.observation_comparison_rows(include_unchanged=False)] == [
        "hidden"
    ]
    assert point.worst_observation_comparisons(limit=1) == [hidden]
    with pytest.raises(Exception, match="same argument"):
        point.worst_observation_comparisons(1, limit=1)
    assert repr(hidden) == (
        "TensorObservationComparison(name='hidden', invocation_index=0, status='mismatch', "
        "kind='values', reason='1 of 6 elements differs (16.67%); first at (1, 2): "
        "reference 7, candidate 7.5; max abs error 0.5')"
    )
    # The store's reading of the rows the facade's points are built from.
    stored = ref._reader.tensor_points()[2]
    assert repr(stored).startswith("RecordedPoint(index=2, label='step2', ")
    assert repr(stored).endswith(", observations=2)")
    assert repr(stored.observations[0]).startswith("RecordedObservation(order=0, name='hidden', ")
    assert "shape=[2, 3]" in repr(stored.observations[0])


def test_run_comparison_members_and_write(tmp_path) -> None:
    ref, cand = tensor_runs(tmp_path)
    run = compare_runs(ref, cand, options=TensorComparisonOptions())
    assert run.reference_only_points == ("tail",)
    assert run.candidate_only_points == ()
    assert run.report_warnings == run.warnings
    written = run.write(output_dir=tmp_path / "report")
    assert written["text"] == tmp_path / "report" / "report.txt"
    assert written["json"].read_text().startswith("{")
    assert "<html" in written["html"].read_text().lower()
    lines = csv_file(written["observations"])
    assert {line["name"] for line in lines} == {"hidden", "same"}


def test_value_summary_reference_members() -> None:
    s = TensorValueSummary(
        numel=3, finite_count=3, nan_count=0, pos_inf_count=0, neg_inf_count=0, zero_count=1,
        min=-1.0, max=2.0, mean=0.5, std=1.0, l2_norm=2.2,
    )  # fmt: skip
    assert (s.minimum, s.maximum) == (-1.0, 2.0)
    assert TensorValueSummary.from_dict(s.to_dict()) == s
    renamed = {**s.to_dict(), "minimum": -1.0, "maximum": 2.0}
    del renamed["min"], renamed["max"]
    assert TensorValueSummary.from_dict(renamed) == s
    with pytest.raises(Exception, match="unknown key"):
        TensorValueSummary.from_dict({"numel": 1, "bogus": 2})
