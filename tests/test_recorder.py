"""TensorRecorder in eager mode: identity rules, point and run lifecycle, payload kinds."""

from __future__ import annotations

import json
import math
import threading
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import torch
from processes import python_stdout
from storage_files import data_files
from torch_cudagraph_debug.errors import (
    InvalidInputError,
    NonContiguousTensorError,
    PayloadUnavailableError,
    RecorderStateError,
    RunExistsError,
    StorageIOError,
)
from torch_cudagraph_debug.tensor_debug import TensorRecorder, TensorRun


def test_observe_returns_the_same_tensor_and_records_identity(tmp_path):
    rec = TensorRecorder(name="ident", run_dir=tmp_path / "run")
    a, b = torch.arange(4.0), torch.ones(2, 3, dtype=torch.int32)
    with rec.record_point("step0", metadata={"lr": 0.1}):
        assert rec.observe(a, name="x") is a
        rec.observe(b, name="y")
        rec.observe(a * 2, name="x")
    run = rec.finish()
    point = run["step0"]
    assert [(o.order, o.name, o.invocation_index) for o in point.observations] == [
        (0, "x", 0),
        (1, "y", 0),
        (2, "x", 1),
    ]
    assert point.metadata == {"lr": 0.1}
    assert point.index == 0 and run[0] is point
    assert point.observation("x", 1).tensor().tolist() == [0.0, 2.0, 4.0, 6.0]
    y = point.observation("y")
    assert (y.shape, y.stride, y.dtype, y.nbytes) == ((2, 3), (3, 1), torch.int32, 24)
    assert y.source_device == "cpu" and y.payload == "full"
    assert y.summary.numel == 6 and y.summary.mean == 1.0 and y.summary.std == 0.0
    assert run.complete and run.name == "ident" and run.execution == "eager"
    assert run.rank == 0 and run.world_size == 1
    assert run.finished_at >= run.created_at


def test_values_are_captured_when_observed_not_when_the_point_closes(tmp_path):
    with TensorRecorder(run_dir=tmp_path / "run") as rec:
        x = torch.zeros(3)
        with rec.record_point("p"):
            rec.observe(x, name="before")
            x.add_(5)  # the model keeps working on the same storage
            rec.observe(x, name="after")
    point = rec.result["p"]
    assert point.tensor("before").tolist() == [0.0, 0.0, 0.0]
    assert point.tensor("after").tolist() == [5.0, 5.0, 5.0]


def test_outside_a_point_observe_is_a_no_op_unless_strict(tmp_path):
    rec = TensorRecorder(run_dir=tmp_path / "a")
    t = torch.ones(1)
    assert rec.observe(t, name="x") is t
    rec.finish()
    assert len(rec.result) == 0
    strict = TensorRecorder(run_dir=tmp_path / "b", strict_scope=True)
    with pytest.raises(RecorderStateError, match="outside record_point"):
        strict.observe(t, name="x")


def test_points_do_not_nest_and_labels_are_unique(tmp_path):
    rec = TensorRecorder(run_dir=tmp_path / "run")
    with rec.record_point("p"), pytest.raises(RecorderStateError, match="do not nest"):
        with rec.record_point("q"):
            pass
    with pytest.raises(InvalidInputError, match="'p' is already used"), rec.record_point("p"):
        pass
    with pytest.raises(InvalidInputError, match="JSON"):
        with rec.record_point("m", metadata={"f": object()}):
            pass
    assert rec.finish().labels == ("p",)


def test_an_exception_inside_a_point_discards_that_point_only(tmp_path):
    rec = TensorRecorder(run_dir=tmp_path / "run")
    with rec.record_point("ok"):
        rec.observe(torch.ones(1), name="x")
    with pytest.raises(ZeroDivisionError), rec.record_point("broken"):
        rec.observe(torch.ones(1), name="x")
        _ = 1 / 0
    with rec.record_point("broken"):  # the label was never committed
        rec.observe(torch.zeros(1), name="x")
    run = rec.finish()
    assert run.labels == ("ok", "broken")
    assert run["broken"].tensor("x").tolist() == [0.0]


def test_context_manager_exception_keeps_an_incomplete_run(tmp_path):
    path = tmp_path / "run"
    with pytest.raises(RuntimeError, match="boom"), TensorRecorder(run_dir=path) as rec:
        with rec.record_point("p0"):
            rec.observe(torch.ones(2), name="x")
        raise RuntimeError("boom")
    run = TensorRun.load(path)
    assert run.complete is False
    assert run.labels == ("p0",)
    assert run.finished_at is not None
    assert rec.result is not None and rec.result.complete is False
    with pytest.raises(RecorderStateError, match="already finished or closed"):
        rec.observe(torch.ones(1), name="x")


def test_finish_is_idempotent_preview_and_close(tmp_path):
    rec = TensorRecorder(run_dir=tmp_path / "run")
    with rec.record_point("p0"):
        rec.observe(torch.ones(1), name="x")
    preview = rec.preview()
    assert preview.complete is False and preview.labels == ("p0",)
    assert rec.result is None
    run = rec.finish()
    assert rec.finish() is run and rec.result is run and rec.preview() is run
    assert run.complete
    with pytest.raises(RecorderStateError), rec.record_point("p1"):
        pass

    closed = TensorRecorder(run_dir=tmp_path / "closed")
    closed.close()
    closed.close()
    assert TensorRun.load(tmp_path / "closed").complete is False


def test_summary_payload_keeps_statistics_but_no_values(tmp_path):
    rec = TensorRecorder(run_dir=tmp_path / "run", payload="summary")
    x = torch.tensor([1.0, math.nan, 3.0, -math.inf])
    with rec.record_point("p"):
        rec.observe(x, name="s")
        rec.observe(x, name="f", payload="full")
    point = rec.finish()["p"]
    s = point.observation("s")
    assert s.payload == "summary"
    assert (s.summary.nan_count, s.summary.neg_inf_count, s.summary.finite_count) == (1, 1, 2)
    assert (s.summary.min, s.summary.max, s.summary.mean) == (1.0, 3.0, 2.0)
    with pytest.raises(PayloadUnavailableError, match="payload='summary'"):
        s.tensor()
    # Same bytes, same digest: comparisons can tell equal values apart from summaries.
    assert s.digest == point.observation("f").digest
    assert torch.equal(point.tensor("f"), x) is False  # NaN != NaN
    assert torch.allclose(point.tensor("f"), x, equal_nan=True)
    stored = pq.read_table(data_files(tmp_path / "run", "payloads")).to_pylist()
    # Only the full observation's bytes: one chunk of four float32 values.
    assert [(r["digest"], r["total_nbytes"]) for r in stored] == [(s.digest, 16)]


def test_non_contiguous_error_or_copy(tmp_path):
    t = torch.arange(12.0).reshape(3, 4).t()
    rec = TensorRecorder(run_dir=tmp_path / "a")
    with rec.record_point("p"):
        with pytest.raises(NonContiguousTensorError, match="non_contiguous='copy'"):
            rec.observe(t, name="t")
        rec.observe(t[:, 0], name="column")  # a contiguous view is fine
    copying = TensorRecorder(run_dir=tmp_path / "b", non_contiguous="copy")
    with copying.record_point("p"):
        copying.observe(t, name="t")
    obs = copying.finish()["p"].observation("t")
    assert obs.stride == (1, 4)  # the source's layout is kept as a fact
    assert torch.equal(obs.tensor(), t)


def test_watch_grad_records_gradients_inside_a_point(tmp_path):
    rec = TensorRecorder(run_dir=tmp_path / "run")
    w = torch.tensor([1.0, 2.0], requires_grad=True)
    rec.watch_grad(w, name="w.grad")
    with rec.record_point("step"):
        (w * torch.tensor([3.0, 4.0])).sum().backward()
    assert rec.finish()["step"].tensor("w.grad").tolist() == [3.0, 4.0]
    with pytest.warns(UserWarning, match="does not require grad"):
        TensorRecorder(run_dir=tmp_path / "b").watch_grad(torch.ones(1), name="g")
    with pytest.raises(InvalidInputError):
        TensorRecorder(run_dir=tmp_path / "c").watch_grad(torch.ones(1), name="g", strict=True)


def test_rank_and_world_size_come_from_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    rec = TensorRecorder(name="job", bundle_dir=tmp_path / "job", group_id="g1")
    # Every rank writes into the one job root; its rows land in the rank=1 partitions.
    assert Path(rec.path) == tmp_path / "job"
    run = rec.finish()
    assert (run.rank, run.world_size, run.group_id) == (1, 2, "g1")
    assert run.address == (str(tmp_path / "job"), "job", 1)
    assert data_files(tmp_path / "job", "runs", rank=1)
    assert not data_files(tmp_path / "job", "runs", rank=0)
    explicit = TensorRecorder(run_dir=tmp_path / "x", rank=0, world_size=1)
    assert Path(explicit.path) == tmp_path / "x"
    with pytest.raises(InvalidInputError, match="outside world size"):
        TensorRecorder(run_dir=tmp_path / "y", rank=3, world_size=2)


def test_bad_arguments_are_typed_errors(tmp_path):
    with pytest.raises(InvalidInputError, match="payload"):
        TensorRecorder(run_dir=tmp_path / "a", payload="half")
    with pytest.raises(InvalidInputError, match="execution"):
        TensorRecorder(run_dir=tmp_path / "b", execution="graph")
    with pytest.raises(InvalidInputError, match="run_dir or its alias"):
        TensorRecorder(run_dir=tmp_path / "c", bundle_dir=tmp_path / "d")
    rec = TensorRecorder(run_dir=tmp_path / "e")
    with rec.record_point("p"):
        with pytest.raises(InvalidInputError, match=r"expected a torch\.Tensor"):
            rec.observe([1, 2], name="x")
        with pytest.raises(InvalidInputError, match="sparse"):
            rec.observe(torch.eye(2).to_sparse(), name="x")
    with pytest.raises(RunExistsError, match="being written by another recorder"):
        TensorRecorder(run_dir=tmp_path / "e")
    rec.finish()
    with pytest.raises(RunExistsError, match="already exists"):
        TensorRecorder(run_dir=tmp_path / "e")


def test_provenance_and_run_metadata_are_stored(tmp_path):
    rec = TensorRecorder(run_dir=tmp_path / "run", run_metadata={"model": "mlp", "seed": 3})
    run = rec.finish()
    assert run.run_metadata == {"model": "mlp", "seed": 3}
    assert run.provenance["torch"] == torch.__version__
    assert run.provenance["producer"] == "torch-cudagraph-debug"
    (row,) = pq.read_table(data_files(tmp_path / "run", "runs")).to_pylist()
    assert row["format_version"] == run.format_version == 2
    assert json.loads(row["run_metadata"]) == {"model": "mlp", "seed": 3}
    assert json.loads(row["provenance"])["torch"] == torch.__version__


def test_default_run_dir_is_a_fresh_temporary_directory():
    a, b = TensorRecorder(name="tmp"), TensorRecorder(name="tmp")
    assert a.path != b.path and Path(a.path, "runs", "_delta_log").is_dir()
    assert a.finish().path == a.path


def test_points_are_written_behind_the_caller_and_durable_at_flush(tmp_path) -> None:
    rec = TensorRecorder(name="bg", run_dir=tmp_path / "bg")
    values = {}
    for i in range(4):
        x = torch.full((1000,), float(i))
        with rec.record_point(f"p{i}"):
            rec.observe(x, name="x")
        # The recorder took a private copy: changing the tensor after the point does not
        # change what the writer thread commits.
        x.add_(100.0)
        values[f"p{i}"] = float(i)
    rec.flush()
    run = TensorRun.load(tmp_path / "bg")
    assert run.labels == ("p0", "p1", "p2", "p3") and not run.complete
    for label, value in values.items():
        assert torch.equal(run[label].observation("x").tensor(), torch.full((1000,), value))
    assert rec.finish().complete


def lose_a_point(rec: TensorRecorder, run_dir: Path) -> Path:
    """Records the point "lost" after the run's payloads directory turned into a file
    under the writer thread (the directory is moved aside), so that its background commit
    fails; returns the file's path."""
    rec.flush()
    payloads = run_dir / "payloads"
    payloads.rename(run_dir / "payloads-aside")
    payloads.write_bytes(b"")
    with rec.record_point("lost"):
        rec.observe(torch.zeros(3), name="x")
    return payloads


def test_a_failed_background_commit_is_raised_by_the_next_call(tmp_path) -> None:
    rec = TensorRecorder(name="f", run_dir=tmp_path / "f")
    with rec.record_point("kept"):
        rec.observe(torch.ones(3), name="x")
    payloads = lose_a_point(rec, tmp_path / "f")
    with pytest.raises(StorageIOError, match="background failed"):
        rec.flush()
    with pytest.raises(StorageIOError):
        with rec.record_point("after"):
            rec.observe(torch.zeros(3), name="x")
    with pytest.raises(StorageIOError):
        rec.finish()
    payloads.unlink()
    (tmp_path / "f" / "payloads-aside").rename(payloads)
    run = TensorRun.load(tmp_path / "f")
    assert run.labels == ("kept",) and not run.complete


def test_a_failed_group_commit_names_the_points_it_lost(tmp_path) -> None:
    rec = TensorRecorder(name="f", run_dir=tmp_path / "f")
    lose_a_point(rec, tmp_path / "f")
    with pytest.raises(StorageIOError, match="'lost'"):
        rec.flush()


def test_points_queued_at_a_normal_exit_are_flushed(tmp_path) -> None:
    import textwrap

    run_dir = tmp_path / "exit"
    script = textwrap.dedent(
        f"""
        import atexit

        def report():
            # Registered before the package is imported, so it runs after the package's
            # own exit hook and before interpreter teardown could drop the writer.
            from torch_cudagraph_debug.tensor_debug import TensorRun
            print(",".join(TensorRun.load({str(run_dir)!r}).labels), flush=True)

        atexit.register(report)

        import torch
        from torch_cudagraph_debug.tensor_debug import TensorRecorder
        rec = TensorRecorder(name="exit", run_dir={str(run_dir)!r})
        for i in range(3):
            with rec.record_point(f"p{{i}}"):
                for j in range(4):
                    rec.observe(torch.full((4 << 20,), float(i)), name=f"x{{j}}")
        # No finish(), no close(): the script just ends, points still queued.
        """
    )
    out = python_stdout(script, timeout=300)
    assert out.split() == ["p0,p1,p2"], out
    run = TensorRun.load(run_dir)
    assert run.labels == ("p0", "p1", "p2") and not run.complete
    assert float(run["p2"].observation("x3").tensor()[0]) == 2.0


def test_points_of_registered_sites_store_each_site_once_and_read_back_whole(tmp_path):
    # The compiled path on the CPU hands each site's facts to the writer once and then
    # only values: the rows read back as if every point had carried them.
    from torch_cudagraph_debug._torch_bridge import host_bytes
    from torch_cudagraph_debug.tensor_debug.observations import TensorSite
    from torch_cudagraph_debug.tensor_debug.recorder import open_run_writer

    writer = open_run_writer(name="sites", root=tmp_path / "run", execution="compiled")
    site = TensorSite(
        site_id="fc1",
        graph_kind="forward",
        node_name="addmm",
        aten_op="aten.addmm",
        module_path="fc1",
        source_location="model.py:3",
        compile_id="0/0",
        materialized_by_probe=False,
    )
    small = writer.register_site("fc1", "float32", [2], [1], "cpu", site)
    large = writer.register_site("fc1", "float32", [3], [1], "cpu", site)
    bare = writer.register_site("loss", "float32", [], [], "cpu")
    values = [torch.tensor([1.0, -2.0]), torch.tensor([0.0, float("nan"), 4.0])]
    loss = torch.tensor(0.5)
    writer.commit_site_values("p0", "{}", "full", [(small, 0, 0, host_bytes(values[0]), values[0])])
    writer.commit_site_values(
        "p1",
        json.dumps({"step": 1}),
        "summary",
        [
            (large, 0, 0, host_bytes(values[1]), values[1]),
            (bare, 1, 0, host_bytes(loss), loss),
        ],
    )
    with pytest.raises(InvalidInputError, match="no site 7"):
        writer.commit_site_values("p2", "{}", "full", [(7, 0, 0, host_bytes(loss), loss)])
    writer.close(True)

    run = TensorRun.load(tmp_path / "run")
    assert list(run.labels) == ["p0", "p1"]
    first = run["p0"].observation("fc1")
    assert torch.equal(first.tensor(), values[0])
    assert first.site == site and first.payload == "full"
    second, bare_obs = run["p1"].observations
    assert second.shape == (3,) and second.payload == "summary"
    assert second.summary.nan_count == 1 and second.summary.max == 4.0
    assert bare_obs.name == "loss" and bare_obs.site is None and bare_obs.summary.mean == 0.5
    assert run["p1"].metadata == {"step": 1}


def test_the_run_writer_waits_for_its_lock_while_another_thread_commits(tmp_path):
    # The writer's lock is shared with a native thread on the device path (the harvester
    # submits the points it reads back, holding the lock while the queue makes room), so
    # a label check or a count from the recording thread waits for it rather than failing
    # as if a second Python thread had taken the writer.
    rec = TensorRecorder(run_dir=tmp_path / "run", payload="summary")
    writer = rec._writer
    errors: list[BaseException] = []
    done = threading.Event()

    def commit_many() -> None:
        try:
            for i in range(400):
                writer.commit_point(f"bg{i}", "{}", None, None, [])
        except BaseException as e:  # reported by the main thread
            errors.append(e)
        finally:
            done.set()

    thread = threading.Thread(target=commit_many)
    thread.start()
    checks = 0
    while not done.is_set():
        assert not writer.has_label("never-used")
        assert writer.point_count >= 0 and not writer.closed
        checks += 1
    thread.join()
    assert errors == [] and checks > 0
    rec.flush()
    assert writer.point_count == 400 and writer.has_label("bg399")
    rec.close()
