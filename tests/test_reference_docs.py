"""The reference design's documents as tests: every fenced block of ``tensor_debug.md``,
``memory_debug.md`` and ``api.md`` (read at test time by ``reference_docs``; nothing of
them is copied here) either runs, with the setup its surrounding text describes and
assertions on what the text says it prints or returns, or is listed with the reason it
cannot run.

``EXAMPLES`` is the table: one entry per runnable block, keyed by (document, short hash
of the block's text), holding our setup (the names the text assumes: a recorded tensor
run, a memory run of a ``FakeAllocator``, a job directory of two ranks...), our check and
whether it needs CUDA. Blocks that need CUDA run in ``tests/gpu/test_reference_docs_gpu.py``
from the same table. Signature listings and illustrations are sorted out by the rule of
``reference_docs.classify``. ``test_every_block_is_run_or_listed`` fails on a block that
is neither, so a new block of a document is never ignored silently; ``docs/
reference-compatibility.md`` lists the blocks that do not run and why."""

from __future__ import annotations

import ast
import contextlib
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import reference_docs
import torch
from reference_docs import Block

MIB = 1024 * 1024


# =============================================================================== table
@dataclass(frozen=True)
class Example:
    """How one runnable block runs: ``setup(tmp_path)`` returns the names the surrounding
    text assumes (the block runs in ``tmp_path`` as working directory); ``check(block,
    names, output)`` asserts what the text says (``output``: the captured standard output
    of a Python block, the ``Ran`` commands of a shell block or synopsis)."""

    setup: Callable[[Path], dict[str, Any]]
    check: Callable[[Block, dict[str, Any], Any], None]
    gpu: bool = False
    xfail: str | None = None
    stands_for: str = ""


@dataclass(frozen=True)
class NotRunnable:
    """A block the rule classifies as runnable that still cannot run, and why."""

    reason: str


@dataclass
class Ran:
    argv: list[str]
    returncode: int
    stdout: str
    stderr: str


class Names(dict):  # type: ignore[type-arg]
    """A block's global names; ``teardown`` runs after the block and its check."""

    def __init__(self) -> None:
        super().__init__()
        self.teardown: list[Callable[[], None]] = []


def names(**extra: Any) -> Names:
    found = Names()
    found.update(extra)
    return found


def domain(module: str, **extra: Any) -> Names:
    """``torch`` and every public name of a domain module, as the guides' import blocks
    bind them (``Import tensor APIs from their domain module``)."""
    imported = __import__(f"torch_cudagraph_debug.{module}", fromlist=["__all__"])
    found = names(torch=torch)
    found.update({name: getattr(imported, name) for name in imported.__all__})
    found.update(extra)
    return found


# =============================================================================== running
def console_script(name: str) -> str:
    """Our installed console script (``tcgd``, ``tcgd-tensor``, ``tcgd-memory``)."""
    beside = Path(sys.executable).parent / name
    return str(beside) if beside.exists() else name


def run_command(argv: list[str], cwd: Path) -> Ran:
    program = console_script(argv[0]) if argv[0].startswith("tcgd") else argv[0]
    done = subprocess.run(
        [program, *argv[1:]], cwd=cwd, capture_output=True, text=True, timeout=300, check=False
    )
    return Ran(argv, done.returncode, done.stdout, done.stderr)


@contextlib.contextmanager
def working_directory(path: Path) -> Iterator[None]:
    before = os.getcwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(before)


def run_example(block: Block, example: Example, tmp_path: Path, capsys: Any) -> None:
    """Runs ``block`` as ``example`` says, in ``tmp_path``."""
    with working_directory(tmp_path):
        found = example.setup(tmp_path)
        try:
            if block.kind == "python":
                capsys.readouterr()
                exec(compile(block.text, f"<{block.id}>", "exec"), found)
                output: Any = capsys.readouterr().out
            elif block.kind == "shell":
                output = [run_command(argv, tmp_path) for argv in reference_docs.commands(block)]
            else:
                output = None
            example.check(block, found, output)
        finally:
            for step in reversed(getattr(found, "teardown", [])):
                step()


def example_params(gpu: bool) -> list[Any]:
    """pytest parameters of the runnable blocks of one suite (CPU or GPU)."""
    missing = reference_docs.missing_reason()
    if missing is not None:
        return [pytest.param(None, None, marks=pytest.mark.skip(reason=missing), id="absent")]
    params = []
    for block in reference_docs.all_blocks():
        example = EXAMPLES.get(block.key)
        if not isinstance(example, Example) or example.gpu != gpu:
            continue
        marks = []
        if example.xfail is not None:
            marks.append(pytest.mark.xfail(strict=True, reason=example.xfail))
        params.append(pytest.param(block, example, marks=marks, id=block.id))
    return params


# =============================================================================== checks
def imported_names(block: Block) -> list[str]:
    tree = ast.parse(block.text)
    return [
        alias.asname or alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom | ast.Import)
        for alias in node.names
    ]


def check_imports(block: Block, found: dict[str, Any], output: Any) -> None:
    """Every name the import block lists is bound (a missing one raised ImportError)."""
    for name in imported_names(block):
        assert name in found, name
    assert output == ""


def no_setup(tmp_path: Path) -> dict[str, Any]:
    return names()


def all_zero(block: Block, found: dict[str, Any], ran: list[Ran]) -> None:
    """Each command exits 0 (a report was produced; for tcgd-tensor, a match)."""
    for command in ran:
        assert command.returncode == 0, (command.argv, command.stdout, command.stderr)


# ----------------------------------------------------------------------- tensor CPU setups
def tensor_values() -> dict[str, torch.Tensor]:
    x = torch.arange(8, dtype=torch.float32)
    return {"input": x, "layers.0.hidden": x + 1, "output": (x + 1).square()}


def tensor_bundle(path: str, label: str, **recorder: Any) -> None:
    """One eager point ``label`` of the three observations of the guide's ``forward``
    (recorded on the CPU: the CLI and the loaders need no CUDA)."""
    from torch_cudagraph_debug.tensor_debug import TensorRecorder

    with TensorRecorder(execution="eager", bundle_dir=path, **recorder) as rec:
        with rec.record_point(label):
            for name, value in tensor_values().items():
                rec.observe(value, name=name)


def tensor_group(root: str, name: str) -> None:
    """A job directory of two rank bundles (``<root>/rank-<r>.tcgd-tensor``)."""
    for rank in range(2):
        tensor_bundle(
            f"{root}/rank-{rank}.tcgd-tensor",
            "forward",
            name=name,
            rank=rank,
            world_size=2,
            group_id=f"job-{root}",
        )


def setup_payloads(tmp_path: Path) -> dict[str, Any]:
    hidden, output = torch.randn(2, 3), torch.randn(4)
    return domain("tensor_debug", hidden=hidden, output=output, given=(hidden, output))


def check_payloads(block: Block, found: dict[str, Any], output: Any) -> None:
    # observe() returns the exact tensor object (outside a point it does nothing else).
    returned = (found["hidden"], found["output"])
    assert all(a is b for a, b in zip(returned, found["given"], strict=True))
    recorder = found["recorder"]
    # The recorder-wide default is summary; payload="full" overrides one observation.
    with recorder.record_point("p"):
        recorder.observe(found["hidden"], name="hidden")
        recorder.observe(found["output"], name="output", payload="full")
    run = recorder.finish()
    assert run.default_payload == "summary"
    kinds = {obs.name: obs.payload for obs in run["p"].observations}
    assert kinds == {"hidden": "summary", "output": "full"}
    assert run["p"].observation("output").tensor().equal(found["output"])
    summary = run["p"].observation("hidden").summary
    assert summary.finite_count == 6 and summary.std is not None


def setup_tensor_cli(tmp_path: Path) -> dict[str, Any]:
    # The guide's bundles: eager and CUDA Graph runs of ``forward`` (the CUDA Graph one
    # stands in as an eager CPU recording: the CLI compares offline, without CUDA), two
    # runs whose labels differ (mapped by --point-map) and two groups of two ranks.
    tensor_bundle("eager.tcgd-tensor", "forward", name="eager")
    tensor_bundle("cg.tcgd-tensor", "replay-1", name="cuda-graph")
    tensor_bundle("baseline.tcgd-tensor", "eager-forward", name="baseline")
    tensor_bundle("candidate.tcgd-tensor", "graph-forward", name="candidate")
    tensor_group("eager-group", "eager")
    tensor_group("cg-group", "eager")
    return names()


def check_tensor_cli(block: Block, found: dict[str, Any], ran: list[Ran]) -> None:
    all_zero(block, found, ran)
    by_command = {command.argv[1]: command for command in ran}
    # summary: execution and completion, point count and default payload, then each
    # point's observation counts, full/summary split and eager or replay index.
    summary = by_command["summary"].stdout
    assert "eager" in summary and "complete" in summary
    assert "1 point" in summary and "full" in summary and "3 observations" in summary
    for command in ran:
        if "--output" in command.argv:
            written = Path(command.argv[command.argv.index("--output") + 1])
            assert written.is_dir() and any(written.iterdir()), command.argv


def setup_tensor_groups(tmp_path: Path) -> dict[str, Any]:
    tensor_group("eager-group", "forward-model")
    tensor_group("cuda-graph-group", "forward-model")
    return names()


def check_tensor_groups(block: Block, found: dict[str, Any], output: str) -> None:
    comparison = found["comparison"]
    assert type(comparison).__name__ == "TensorRunGroupComparison"
    assert comparison.status == "match" and comparison.ok
    assert found["reference"].ranks == (0, 1) and found["reference"].complete
    assert found["reference"].missing_ranks == ()
    assert output == comparison.to_text(include_unchanged=False) + "\n"
    written = {path.name for path in Path("group-report").iterdir()}
    assert {"report.txt", "report.json", "report.html"} <= written


# ----------------------------------------------------------------------- memory CPU setups
def fake_allocator(**options: Any) -> Any:
    from test_memory_support import FakeAllocator

    return FakeAllocator(**options)


def memory_recorder(alloc: Any, **options: Any) -> Any:
    from torch_cudagraph_debug.memory_debug import MemoryRecorder

    return MemoryRecorder(_source=alloc, **options)


def capture_run(bundle_dir: str | None = None) -> Any:
    """The guide's complete run workflow on a fake allocator with complete history: the
    points before_capture, during_capture, after_capture and after_replay around a capture
    into the private pool (0, 1); a default-pool activation freed after before_capture and
    a transient allocated and freed between before_capture and after_capture."""
    import warnings

    alloc = fake_allocator()
    segment = alloc.segment(8 * MIB)
    alloc.lifetime_alloc(segment, MIB, "weights")
    activation = alloc.lifetime_alloc(segment, MIB, "activations")
    recorder = memory_recorder(
        alloc,
        name="capture",
        rank=0,
        group_id="job-20260630",
        world_size=4,
        run_metadata={"source_revision": "abc123", "scenario": "cuda-graph"},
        bundle_dir=bundle_dir,
    )
    recorder.record_point("before_capture")
    pool = alloc.segment(16 * MIB, pool=(0, 1), stream=0x5A5A)
    alloc.capture = True
    tmp_a = alloc.lifetime_alloc(pool, 4 * MIB, "capture_a")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a point taken during capture warns
        recorder.record_point("during_capture")
    alloc.lifetime_alloc(pool, 2 * MIB, "capture_b")
    alloc.free(tmp_a)
    alloc.capture = False
    alloc.free(activation)
    transient = alloc.lifetime_alloc(segment, 512 * 1024, "transient")
    alloc.free(transient)
    recorder.record_point("after_capture")
    recorder.record_point("after_replay")
    return recorder.finish()


def memory_run(
    path: str | None,
    name: str,
    labels: tuple[str, str],
    *,
    device: int = 0,
    pool: tuple[int, int] = (0, 1),
    grow: int = 16,
    **recorder: Any,
) -> Any:
    """A run of two points: a default-pool allocation, then a private pool ``pool`` on
    ``device`` filled with ``grow`` MiB (stacks on every block, history complete)."""
    alloc = fake_allocator(devices=device + 1)
    alloc.lifetime_alloc(alloc.segment(2 * MIB, device=device), MIB, "weights")
    with memory_recorder(alloc, name=name, bundle_dir=path, **recorder) as rec:
        rec.record_point(labels[0])
        segment = alloc.segment(grow * MIB, device=device, pool=pool, stream=0x77)
        alloc.lifetime_alloc(segment, grow * MIB, "forward_block")
        rec.record_point(labels[1])
    return rec.result


def baseline_and_candidate(candidate_device: int) -> None:
    memory_run("baseline-rank0.tcgd-memory", "baseline", ("forward_start", "forward_end"))
    memory_run(
        "candidate-rank0.tcgd-memory",
        "candidate",
        ("capture_start", "capture_end"),
        device=candidate_device,
        pool=(0, 4),
        grow=24,
    )


def setup_run_workflow(tmp_path: Path) -> dict[str, Any]:
    return domain("memory_debug", run=capture_run())


def check_run_compare_and_timeline(block: Block, found: dict[str, Any], output: str) -> None:
    comparison = found["comparison"]
    assert type(comparison).__name__ == "MemoryPointComparison"
    assert output == comparison.to_text() + "\n"
    written = {path.name for path in Path("reports/timeline").iterdir()}
    expected = {"report.txt", "report.json", "report.html"}
    expected |= {"allocator_scopes.csv", "pools.csv", "observations.csv"}
    assert expected <= written, written


def setup_attribution(tmp_path: Path) -> dict[str, Any]:
    # The context-manager run (points "start" and "end") with history enabled before it.
    run = memory_run(None, "capture", ("start", "end"))
    return domain("memory_debug", run=run)


def check_attribution(block: Block, found: dict[str, Any], output: str) -> None:
    status = found["comparison"].attribution_status
    assert status.stacks.requested and status.stacks.available and status.stacks.complete
    assert status.events.requested and status.events.available and status.events.complete
    assert not status.lifetimes.requested
    assert found["comparison"].allocator_events
    assert found["options"].display.stack_depth == 2 and found["options"].display.limit == 20


def setup_loaded_run(tmp_path: Path) -> dict[str, Any]:
    capture_run("rank0.tcgd-memory")
    return domain("memory_debug")


def check_analysis_modes(block: Block, found: dict[str, Any], output: str) -> None:
    assert found["run"].complete and found["run"].rank == 0
    # The default timeline is manifest-only: no attributed point comparisons.
    assert tuple(found["timeline"].point_comparisons) == ()
    assert type(found["change"]).__name__ == "MemoryPointComparison"
    phase_range = found["phase_range"]
    assert type(phase_range).__name__ == "MemoryRange"
    assert (phase_range.start.label, phase_range.end.label) == ("before_capture", "after_capture")


def setup_lifetimes(tmp_path: Path) -> dict[str, Any]:
    capture_run("rank0.tcgd-memory")
    names_ = domain("memory_debug")
    names_["run"] = names_["MemoryRun"].load("rank0.tcgd-memory")
    return names_


def check_active_at(block: Block, found: dict[str, Any], output: str) -> None:
    lifetimes = found["lifetimes"]
    assert output == lifetimes.to_text() + "\n"
    for label in ("snapshot_peak", "snapshot_blocks", "owner_event_peak", "unreusable_event_peak"):
        assert label in output
    # The anchor keeps the generations live at before_capture: weights and activations.
    assert len(lifetimes.cohorts) == 2
    written = {path.name for path in Path("reports/lifetimes").iterdir()}
    csvs = {"cohorts.csv", "cohort_points.csv", "size_histograms.csv", "size_outcomes.csv"}
    assert {"report.txt", "report.json", "report.html"} | csvs <= written


def check_born_between(block: Block, found: dict[str, Any], output: str) -> None:
    cohorts = found["born"].cohorts
    # Born in (before_capture, after_capture]: both capture blocks and the transient.
    assert len(cohorts) == 3
    # The transient is in neither endpoint snapshot but has event peaks.
    transient = [c for c in cohorts if c.peak_active_bytes == 0]
    assert len(transient) == 1
    assert transient[0].peak_block_count == 0
    assert transient[0].event_owner_peak_bytes == 512 * 1024


def setup_cross_run(tmp_path: Path) -> dict[str, Any]:
    baseline_and_candidate(candidate_device=1)
    return domain("memory_debug")


def check_cross_run(block: Block, found: dict[str, Any], output: str) -> None:
    key = found["MemoryPoolKey"]
    end_gap = found["end_gap"]
    assert type(end_gap).__name__ == "MemoryPointComparison"
    mapped = [row for row in end_gap.pool_comparisons if row.match == "mapped"]
    assert [(row.reference_key, row.candidate_key) for row in mapped] == [
        (key(0, (0, 1)), key(1, (0, 4)))
    ]
    devices = {
        (row.reference_device_index, row.candidate_device_index): row.match
        for row in end_gap.device_comparisons
    }
    assert devices[(0, 1)] == "mapped"
    assert end_gap.attribution_status.stacks.requested


def setup_phases(tmp_path: Path) -> dict[str, Any]:
    baseline_and_candidate(candidate_device=0)
    names_ = domain("memory_debug")
    names_["baseline"] = names_["MemoryRun"].load("baseline-rank0.tcgd-memory")
    names_["candidate"] = names_["MemoryRun"].load("candidate-rank0.tcgd-memory")
    return names_


def check_phases(block: Block, found: dict[str, Any], output: str) -> None:
    phase = found["phase"]
    assert output == phase.to_text() + "\n"
    assert phase.pool_decomposition and phase.allocator_scope_decomposition
    rows = [*phase.pool_decomposition, *phase.allocator_scope_decomposition]
    assert all(row.identity_holds for row in rows)
    assert {row.scope for row in phase.allocator_scope_decomposition} == {
        "all",
        "default",
        "private",
    }


def memory_groups(candidate_device_of_rank0: int) -> None:
    for rank in range(2):
        memory_run(
            f"baseline/rank-{rank:05d}.tcgd-memory",
            "forward",
            ("forward_start", "forward_end"),
            rank=rank,
            world_size=2,
            group_id="baseline-job",
        )
        memory_run(
            f"candidate/rank-{rank:05d}.tcgd-memory",
            "capture",
            ("capture_start", "capture_end"),
            device=candidate_device_of_rank0 if rank == 0 else 0,
            pool=(0, 4),
            grow=24,
            rank=rank,
            world_size=2,
            group_id="candidate-job",
        )


def setup_memory_groups(tmp_path: Path) -> dict[str, Any]:
    memory_groups(candidate_device_of_rank0=1)
    return domain("memory_debug")


def check_memory_groups(block: Block, found: dict[str, Any], output: str) -> None:
    assert found["baseline_group"].ranks == (0, 1) and found["baseline_group"].complete
    summary = {path.name for path in Path("reports/baseline-group").iterdir()}
    assert {"report.txt", "report.json", "report.html", "rank_points.csv"} <= summary
    assert "point_aggregates.csv" in summary
    phase = {path.name for path in Path("reports/group-phase").iterdir()}
    expected = {"rank_decomposition.csv", "rank_pool_decomposition.csv", "phase_aggregates.csv"}
    assert {"report.txt", "report.json", "report.html"} | expected <= phase, phase


def setup_memory_cli(tmp_path: Path) -> dict[str, Any]:
    capture_run("rank0.tcgd-memory")
    memory_run("baseline.tcgd-memory", "baseline", ("forward_start", "forward_end"))
    memory_run("candidate.tcgd-memory", "candidate", ("capture_start", "capture_end"), pool=(0, 4))
    memory_groups(candidate_device_of_rank0=0)
    return names()


def check_memory_cli(block: Block, found: dict[str, Any], ran: list[Ran]) -> None:
    all_zero(block, found, ran)
    for command in ran:
        assert command.stdout, command.argv
        if "--output" in command.argv:
            written = Path(command.argv[command.argv.index("--output") + 1])
            assert written.is_dir() and any(written.iterdir()), command.argv
    summary = ran[0]
    assert summary.argv[1] == "summary"
    # Completion and rank identity, then each point's observation and pool counts with
    # allocator-wide allocated, reserved, active and requested totals.
    assert "complete" in summary.stdout and "rank 0" in summary.stdout
    for word in ("observations", "pools", "allocated", "reserved", "active", "requested"):
        assert word in summary.stdout, word


# ----------------------------------------------------------------------- api.md
def check_root_imports(block: Block, found: dict[str, Any], output: Any) -> None:
    check_imports(block, found, output)
    assert isinstance(found["__version__"], str) and found["__version__"]
    assert issubclass(found["NativeExtensionUnavailableError"], found["CudaGraphDebugError"])


def setup_advanced(tmp_path: Path) -> dict[str, Any]:
    from torch_cudagraph_debug.memory_debug import advanced

    return names(advanced=advanced)


def check_listed_names(block: Block, found: dict[str, Any], output: Any) -> None:
    # Running the listing evaluated every ``advanced.<name>``: each one exists.
    assert output == ""
    listed = [line.strip() for line in block.text.splitlines() if line.strip()]
    assert listed and all(line.startswith("advanced.") for line in listed)


def synopsis_setup(tmp_path: Path) -> dict[str, Any]:
    return names()


def check_synopsis(block: Block, found: dict[str, Any], output: Any) -> None:
    """Every command and flag of the synopsis is one our console script accepts (its
    ``--help`` names it)."""
    for program, subcommand, flags in reference_docs.synopsis_flags(block):
        ran = run_command([program, subcommand, "--help"], Path.cwd())
        assert ran.returncode == 0, (program, subcommand, ran.stderr)
        for flag in flags:
            assert flag in ran.stdout, (program, subcommand, flag)


def check_tensor_synopsis(block: Block, found: dict[str, Any], output: Any) -> None:
    check_synopsis(block, found, output)
    # Exit status: 0 for a match, 1 for a mismatch or inconclusive result, 2 for invalid
    # input or an operational error.
    from torch_cudagraph_debug.tensor_debug import TensorRecorder

    for path, value in (("a", 1.0), ("b", 2.0)):
        with TensorRecorder(execution="eager", bundle_dir=path) as rec:
            with rec.record_point("p"):
                rec.observe(torch.full((3,), value), name="x")
    points = ["--reference-point", "p", "--candidate-point", "p"]
    cwd = Path.cwd()
    assert run_command(["tcgd-tensor", "compare-points", "a", "a", *points], cwd).returncode == 0
    assert run_command(["tcgd-tensor", "compare-points", "a", "b", *points], cwd).returncode == 1
    missing = run_command(["tcgd-tensor", "compare-points", "a", "nowhere", *points], cwd)
    assert missing.returncode == 2 and "nowhere" in missing.stderr


def check_memory_synopsis(block: Block, found: dict[str, Any], output: Any) -> None:
    check_synopsis(block, found, output)
    # 0 when a report is produced, 2 on error; no exit-1 path.
    memory_run("run.tcgd-memory", "run", ("start", "end"))
    cwd = Path.cwd()
    assert run_command(["tcgd-memory", "summary", "run.tcgd-memory"], cwd).returncode == 0
    argv = ["tcgd-memory", "compare-points", "run.tcgd-memory"]
    argv += ["--reference-point", "start", "--candidate-point", "nowhere"]
    assert run_command(argv, cwd).returncode == 2


# ----------------------------------------------------------------------- GPU setups
def setup_core_usage(tmp_path: Path) -> dict[str, Any]:
    return domain("tensor_debug")


def check_core_usage(block: Block, found: dict[str, Any], output: str) -> None:
    lines = output.splitlines()
    assert lines[0] == "replay 1"
    # name, invocation index, order and the recorded value: static_x + 2.
    assert lines[1:] == ["mid 0 0 tensor([3., 3., 3., 3.])"]
    assert found["snapshot"].replay_index == 1


def check_complete_workflow(block: Block, found: dict[str, Any], output: str) -> None:
    comparison = found["comparison"]
    assert comparison.status == "match" and comparison.ok
    assert output == comparison.to_text() + "\n"
    labels = [obs.name for obs in found["eager"]["forward"].observations]
    assert labels == ["input", "layers.0.hidden", "output"]
    assert found["candidate"]["replay-1"].replay_index == 1
    assert found["eager"].complete and found["candidate"].complete


def setup_probe_snapshots(tmp_path: Path) -> dict[str, Any]:
    found = domain("tensor_debug")
    probe_class, record = found["TensorProbe"], found["RecordAction"]
    static_x = torch.arange(4, device="cuda", dtype=torch.float32)
    probe = probe_class("layer", [record()])
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        probe(static_x * 2, name="layer")
    graph.replay()
    before = probe.snapshot()
    graph.replay()
    after = probe.snapshot()
    eager_probe = probe_class("layer", [record()], when="always")
    eager_probe(static_x * 2, name="layer")
    eager_snapshot = eager_probe.snapshot()
    found.update(probe=probe, before=before, after=after, graph_snapshot=after)
    found.update(eager_snapshot=eager_snapshot)
    found.teardown += [lambda: probe.close(), lambda: eager_probe.close()]
    found["keep"] = graph
    return found


def check_probe_snapshots(block: Block, found: dict[str, Any], output: str) -> None:
    comparison = found["comparison"]
    assert type(comparison).__name__ == "TensorSnapshotComparison"
    assert comparison.status == "match"
    same_probe = found["probe"].compare(found["before"], found["after"])
    assert same_probe.status == "match"
    assert (found["before"].replay_index, found["after"].replay_index) == (1, 2)


def setup_replay_index(tmp_path: Path) -> dict[str, Any]:
    found = domain("tensor_debug")
    probe = found["TensorProbe"]("mid", [found["RecordAction"]()])
    graph = torch.cuda.CUDAGraph()
    static_x = torch.ones(4, device="cuda")
    with torch.cuda.graph(graph):
        probe(static_x + 2, name="mid")
    found.update(probe=probe, graph=graph)
    found.teardown.append(lambda: probe.close())
    return found


def check_replay_index(block: Block, found: dict[str, Any], output: str) -> None:
    device = torch.device("cuda", torch.cuda.current_device())
    assert output == f"tensor(1, device='{device}')\n"
    counter = found["counter"]
    counter += 5  # a detached clone: the probe's counter stays
    assert found["probe"].replay_index.item() == 1


def setup_repeated_checks(tmp_path: Path) -> dict[str, Any]:
    return domain(
        "tensor_debug",
        expected_layer0=torch.full((4,), 2.0),
        expected_layer1=torch.full((4,), 3.0),
    )


def check_repeated_checks(block: Block, found: dict[str, Any], output: str) -> None:
    probe = found["probe"]
    static_x = torch.ones(4, device="cuda")
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        hidden = probe(static_x + 1, name="layers.hidden")
        probe(hidden + 1, name="layers.hidden")
    graph.replay()
    # One expected value per slot, in capture-call order: both match.
    probe.assert_check_ok()
    del graph
    probe.close()


def setup_gradient_probes(tmp_path: Path) -> dict[str, Any]:
    found = domain("tensor_debug")
    probe, record = found["TensorProbe"], found["RecordAction"]
    found["activation_grad_probe"] = probe("activation.grad", [record()])
    found["weight_grad_probe"] = probe("weight.grad", [record()])
    found["module"] = torch.nn.Linear(4, 4).cuda()
    found["hidden"] = found["module"](torch.ones(2, 4, device="cuda"))
    found.teardown += [found["activation_grad_probe"].close, found["weight_grad_probe"].close]
    return found


def check_gradient_probes(block: Block, found: dict[str, Any], output: str) -> None:
    assert isinstance(found["handle"], torch.utils.hooks.RemovableHandle)
    # A tensor that does not require gradients: None without strict, an error with it.
    plain = torch.ones(3, device="cuda")
    assert found["activation_grad_probe"].watch_grad(plain, name="plain") is None
    with pytest.raises(RuntimeError):
        found["activation_grad_probe"].watch_grad(plain, name="plain", strict=True)


def setup_non_contiguous(tmp_path: Path) -> dict[str, Any]:
    return domain("tensor_debug")


def check_non_contiguous(block: Block, found: dict[str, Any], output: str) -> None:
    probe = found["probe"]
    static = torch.arange(6, dtype=torch.float32, device="cuda").reshape(2, 3)
    view = static.t()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        returned = probe(view, name="view")
    assert returned is view  # the original tensor, not the debug copy
    graph.replay()
    assert probe.snapshot().tensor("view").equal(view.cpu())
    del graph
    probe.close()


class RecordingWriter:
    """A TensorBoard-compatible writer that keeps what it is given."""

    def __init__(self) -> None:
        self.scalars: list[tuple[str, float, int]] = []
        self.histograms: list[tuple[str, Any, int]] = []

    def add_scalar(self, tag: str, value: float, global_step: int, **_: Any) -> None:
        self.scalars.append((tag, value, global_step))

    def add_histogram(self, tag: str, values: Any, global_step: int, **_: Any) -> None:
        self.histograms.append((tag, values, global_step))


def setup_tensorboard(tmp_path: Path) -> dict[str, Any]:
    found = setup_replay_index(tmp_path)
    found["writer"] = RecordingWriter()
    return found


def check_tensorboard(block: Block, found: dict[str, Any], output: str) -> None:
    writer = found["writer"]
    assert found["snapshot"].replay_index == 1
    assert writer.scalars and {step for _, _, step in writer.scalars} == {1}
    stats = {tag.rsplit("/", 1)[-1] for tag, _, _ in writer.scalars}
    assert {"numel", "mean", "std", "min", "max", "l2_norm"} <= stats
    assert writer.histograms == []  # histogram export is opt-in


def setup_memory_domain(tmp_path: Path) -> dict[str, Any]:
    return domain("memory_debug")


def check_quick_probe(block: Block, found: dict[str, Any], output: str) -> None:
    private = found["after"].allocator_scope_stats["private"]
    assert private.reserved_bytes >= 4096 * 4096 * 4
    assert output == f"{private}\n{found['comparison'].to_text()}\n"
    assert found["before"].snapshot_index < found["after"].snapshot_index


def check_live_run(block: Block, found: dict[str, Any], output: str) -> None:
    run = found["run"]
    labels = ["before_capture", "during_capture", "after_capture", "after_replay"]
    assert run.complete and [point.label for point in run.points] == labels
    assert (run.rank, run.group_id, run.world_size) == (0, "job-20260630", 4)
    assert run.run_metadata["source_revision"] == "abc123"
    loaded = found["MemoryRun"].load("rank0.tcgd-memory")
    assert [point.label for point in loaded.points] == labels and loaded.complete
    assert loaded["during_capture"].pool_stats  # the capture's private pool is there


def check_context_recorder(block: Block, found: dict[str, Any], output: str) -> None:
    run = found["run"]
    assert run.complete and [point.label for point in run.points] == ["start", "end"]


def setup_history(tmp_path: Path) -> dict[str, Any]:
    found = names(torch=torch)
    found.teardown.append(lambda: torch.cuda.memory._record_memory_history(enabled=None))
    return found


def check_history(block: Block, found: dict[str, Any], output: str) -> None:
    # History in "state" mode keeps live blocks' stacks: a new block carries frames.
    keep = torch.empty(1024, device="cuda")
    snapshot = torch.cuda.memory._snapshot()
    blocks = [b for s in snapshot["segments"] for b in s["blocks"] if b["state"] != "inactive"]
    assert any(b.get("frames") for b in blocks)
    del keep


# =============================================================================== the table
def _key(document: str, digest: str) -> tuple[str, str]:
    return (document, digest)


T, M, A = "tensor_debug.md", "memory_debug.md", "api.md"
FAKE = "a memory run of FakeAllocator (tests/test_memory_support.py) with complete history"

EXAMPLES: dict[tuple[str, str], Example | NotRunnable] = {
    # ---------------------------------------------------------------- tensor_debug.md
    _key(T, "736abb8043"): Example(no_setup, check_imports),  # import block
    _key(T, "e94a2a896d"): Example(setup_core_usage, check_core_usage, gpu=True),
    _key(T, "56d645fbd6"): Example(setup_core_usage, check_complete_workflow, gpu=True),
    _key(T, "7d06f1e84f"): Example(
        setup_payloads, check_payloads, stands_for="hidden/output: CPU tensors"
    ),
    _key(T, "5dd89532f0"): Example(
        setup_probe_snapshots,
        check_probe_snapshots,
        gpu=True,
        stands_for="before/after: two snapshots of a captured probe; eager_snapshot: a "
        'when="always" probe',
    ),
    _key(T, "ab1f615b59"): Example(
        setup_tensor_cli,
        check_tensor_cli,
        stands_for="bundles recorded eagerly on the CPU (cg.tcgd-tensor stands for the CUDA "
        "Graph run); two-rank group directories",
    ),
    _key(T, "64bfe269ef"): Example(
        setup_tensor_groups, check_tensor_groups, stands_for="two-rank group directories"
    ),
    _key(T, "ba46c80b95"): Example(setup_replay_index, check_replay_index, gpu=True),
    _key(T, "ba5fde2b34"): Example(setup_repeated_checks, check_repeated_checks, gpu=True),
    _key(T, "9f931c9f17"): Example(setup_gradient_probes, check_gradient_probes, gpu=True),
    _key(T, "d3a2d44eb9"): Example(setup_non_contiguous, check_non_contiguous, gpu=True),
    _key(T, "5947805d01"): Example(
        setup_tensorboard,
        check_tensorboard,
        gpu=True,
        stands_for="writer: an object with add_scalar/add_histogram",
    ),
    # ---------------------------------------------------------------- memory_debug.md
    _key(M, "504df66ee2"): Example(no_setup, check_imports),  # import block
    _key(M, "e6a064bebd"): Example(setup_memory_domain, check_quick_probe, gpu=True),
    _key(M, "23f307b047"): Example(setup_memory_domain, check_live_run, gpu=True),
    _key(M, "e44ebff0d1"): Example(
        setup_run_workflow, check_run_compare_and_timeline, stands_for=FAKE
    ),
    _key(M, "716e8baf4c"): Example(setup_memory_domain, check_context_recorder, gpu=True),
    _key(M, "2de4188d09"): Example(setup_history, check_history, gpu=True),
    _key(M, "1b4a59eee1"): Example(setup_attribution, check_attribution, stands_for=FAKE),
    _key(M, "7a2b4fecc7"): Example(setup_loaded_run, check_analysis_modes, stands_for=FAKE),
    _key(M, "a42e64c58e"): Example(setup_lifetimes, check_active_at, stands_for=FAKE),
    _key(M, "b88748278f"): Example(setup_lifetimes, check_born_between, stands_for=FAKE),
    _key(M, "add0ce8d89"): Example(
        setup_cross_run,
        check_cross_run,
        stands_for=FAKE + "; the candidate's pool (0, 4) is on device 1",
    ),
    _key(M, "1824e8e353"): Example(setup_phases, check_phases, stands_for=FAKE),
    _key(M, "233e861225"): Example(
        setup_memory_groups,
        check_memory_groups,
        stands_for="two-rank group directories of FakeAllocator runs",
    ),
    _key(M, "fd45ea2bae"): Example(setup_memory_cli, check_memory_cli, stands_for=FAKE),
    # ---------------------------------------------------------------- api.md
    _key(A, "3548c73328"): Example(no_setup, check_root_imports),
    _key(A, "86bb93ce0b"): Example(no_setup, check_imports),
    _key(A, "b66080d7be"): Example(no_setup, check_imports),
    _key(A, "d4b1e61679"): Example(no_setup, check_imports),
    _key(A, "2bcf623ea1"): Example(setup_advanced, check_listed_names),
    _key(A, "c148688208"): Example(synopsis_setup, check_tensor_synopsis),
    _key(A, "23aaf0f00e"): Example(synopsis_setup, check_memory_synopsis),
}


# =============================================================================== tests
@pytest.mark.parametrize(("block", "example"), example_params(gpu=False))
def test_reference_example(block: Block, example: Example, tmp_path: Path, capsys: Any) -> None:
    run_example(block, example, tmp_path, capsys)


def not_runnable(blocks: list[Block]) -> list[tuple[Block, str]]:
    """The blocks that do not run, with their reasons."""
    listed = []
    for block in blocks:
        entry = EXAMPLES.get(block.key)
        if block.kind in reference_docs.NOT_RUNNABLE_REASONS:
            listed.append((block, reference_docs.NOT_RUNNABLE_REASONS[block.kind]))
        elif isinstance(entry, NotRunnable):
            listed.append((block, entry.reason))
    return listed


def test_every_block_is_run_or_listed() -> None:
    missing = reference_docs.missing_reason()
    if missing is not None:
        pytest.skip(missing)
    blocks = reference_docs.all_blocks()
    unhandled = [
        f"{block.id} ({block.kind}, {block.digest}): {block.first_line()}"
        for block in blocks
        if block.kind in reference_docs.RUNNABLE_KINDS and block.key not in EXAMPLES
    ]
    assert not unhandled, "blocks neither run nor listed as not runnable:\n" + "\n".join(unhandled)
    # No entry of the table is left over from a block that changed or went away, and
    # none gives a setup to a block the rule says does not run.
    by_key = {block.key: block for block in blocks}
    stale = [key for key in EXAMPLES if key not in by_key]
    assert not stale, f"table entries that match no block: {stale}"
    misplaced = [
        by_key[key].id
        for key, entry in EXAMPLES.items()
        if isinstance(entry, Example) and by_key[key].kind not in reference_docs.RUNNABLE_KINDS
    ]
    assert not misplaced
    ran = [block for block in blocks if isinstance(EXAMPLES.get(block.key), Example)]
    listed = not_runnable(blocks)
    assert len(ran) + len(listed) == len(blocks)
    print(f"\n{len(ran)} blocks run, {len(listed)} listed as not runnable:")
    for block, reason in listed:
        print(f"  {block.id} [{block.heading}] {block.first_line()[:60]!r}: {reason}")


def test_the_rule_sorts_blocks_as_documented(tmp_path: Path) -> None:
    """The classification rule on blocks of our own making (no reference text needed)."""
    (tmp_path / "doc.md").write_text(
        "# Title\n\n```python\nx = f(1)\n```\n\n## Signatures\n\n```python\n"
        "f(a: int, *, b: str = 'x') -> int\n```\n\n```python\n@dataclass\nclass K:\n"
        "    name: str\n```\n\n```python\nadvanced.helper(value)\n```\n\n"
        "```bash\ntcgd-tensor summary a \\\n  --json\n# a comment\n```\n\n"
        "```text\ntcgd-memory timeline BUNDLE [--output DIR]\n```\n\n```text\na -> b\n```\n",
        encoding="utf-8",
    )
    blocks = reference_docs.read_blocks("doc.md", tmp_path)
    assert [(b.line, b.kind) for b in blocks] == [
        (3, "python"),
        (9, "signature"),
        (13, "signature"),
        (19, "signature"),
        (23, "shell"),
        (29, "cli-synopsis"),
        (33, "illustration"),
    ]
    assert blocks[1].heading == "Signatures" and blocks[0].heading == "Title"
    assert reference_docs.commands(blocks[4]) == [["tcgd-tensor", "summary", "a", "--json"]]
    assert reference_docs.synopsis_flags(blocks[5]) == [("tcgd-memory", "timeline", ["--output"])]
    # Re-wrapping a block keeps its key.
    rewrapped = reference_docs.Block("doc.md", 99, "python", "", "x = f(\n    1)")
    assert rewrapped.digest == reference_docs.Block("doc.md", 3, "python", "", "x = f( 1)").digest


def test_absent_documents_give_a_skip_reason(tmp_path: Path, monkeypatch: Any) -> None:
    monkeypatch.setenv(reference_docs.ENVIRONMENT_VARIABLE, str(tmp_path / "nothing"))
    reason = reference_docs.missing_reason()
    assert reason is not None and reference_docs.ENVIRONMENT_VARIABLE in reason
    assert "tensor_debug.md" in reason


@pytest.mark.xfail(
    strict=True,
    reason="memory_debug.md (Cross-Run Comparison): compare_points() of two points of one "
    "run raises MemoryOwnershipError in the reference; ours compares them (documented in "
    "docs/memory-debug.md and relied on by the same-run attribution tests), left as is",
)
def test_compare_points_of_one_run_is_an_ownership_error(tmp_path: Path) -> None:
    from torch_cudagraph_debug.memory_debug import MemoryOwnershipError, compare_points

    run = memory_run(str(tmp_path / "run"), "run", ("start", "end"))
    with pytest.raises(MemoryOwnershipError):
        compare_points(run["start"], run["end"])


def advanced_listing_names(blocks: list[Block]) -> list[str]:
    """The ``advanced.<name>`` names of api.md's signature listings."""
    import re

    found: list[str] = []
    for block in blocks:
        if block.document == A and block.kind == "signature":
            found += re.findall(r"^\s*advanced\.(\w+)", block.text, flags=re.MULTILINE)
    return list(dict.fromkeys(found))


def test_every_advanced_name_of_the_signature_listings_exists() -> None:
    missing = reference_docs.missing_reason()
    if missing is not None:
        pytest.skip(missing)
    from torch_cudagraph_debug.memory_debug import advanced

    listed = advanced_listing_names(reference_docs.all_blocks())
    assert len(listed) > 20
    absent = [name for name in listed if not hasattr(advanced, name)]
    assert absent == [], absent
