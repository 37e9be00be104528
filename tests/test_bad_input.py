"""Damaged or hostile job roots: each is a typed error naming the file or value, never a
crash or a wrong answer."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from storage_files import part_of
from torch_cudagraph_debug.errors import (
    CorruptRunError,
    DigestMismatchError,
    RunNotFoundError,
    StorageError,
    UnsafePathError,
    UnsupportedFormatError,
)
from torch_cudagraph_debug.tensor_debug import TensorRecorder, TensorRun


@pytest.fixture
def run_dir(tmp_path) -> Path:
    # One file per point and table (no compaction), so a test can damage one point's file.
    with TensorRecorder(run_dir=tmp_path / "run", compact=False, commit_interval=0) as rec:
        for step in range(2):
            with rec.record_point(f"p{step}"):
                rec.observe(torch.arange(1000.0) * step, name="x")
    return tmp_path / "run"


def edit_log(run_dir: Path, table: str, edit: Callable[[dict], None]) -> None:
    """Rewrites every action of the table's Delta log through ``edit`` (in place)."""
    for commit in sorted((run_dir / table / "_delta_log").glob("*.json")):
        actions = [json.loads(line) for line in commit.read_text().splitlines()]
        for action in actions:
            edit(action)
        commit.write_text("".join(json.dumps(a) + "\n" for a in actions))


def log_path_of(part: Path, edit_to: str) -> Callable[[dict], None]:
    """An edit that makes the log's entry for ``part`` name ``edit_to`` instead."""

    def edit(action: dict) -> None:
        if "add" in action and action["add"]["path"].endswith(part.name):
            action["add"]["path"] = edit_to

    return edit


def test_truncated_part_names_the_file(run_dir):
    part = part_of(run_dir, "observations", 1)
    part.write_bytes(part.read_bytes()[:-40])
    with pytest.raises(CorruptRunError, match=r"observations/rank=0/part-.*truncated") as caught:
        TensorRun.load(run_dir)
    assert str(part) in str(caught.value)


def test_newer_format_version_says_to_upgrade(run_dir):
    # The format version lives in each table's Delta metadata (and in every file).
    def newer(action: dict) -> None:
        if "metaData" in action:
            action["metaData"]["configuration"]["tcgd.format_version"] = "99"

    edit_log(run_dir, "observations", newer)
    with pytest.raises(UnsupportedFormatError, match=r"observations'.*format_version 99.*upgrade"):
        TensorRun.load(run_dir)


def test_log_path_escaping_the_root_is_refused(run_dir, tmp_path):
    (tmp_path / "evil.parquet").write_bytes(b"PAR1")
    edit_log(
        run_dir, "observations", log_path_of(part_of(run_dir, "observations", 0), "../evil.parquet")
    )
    with pytest.raises(UnsafePathError, match=r"'\.\./evil\.parquet'"):
        TensorRun.load(run_dir)


@pytest.mark.parametrize("target", ["/etc/passwd", "file:///etc/passwd"])
def test_absolute_log_paths_are_refused(run_dir, target):
    edit_log(run_dir, "points", log_path_of(part_of(run_dir, "points", 0), target))
    with pytest.raises(UnsafePathError, match=target):
        TensorRun.load(run_dir)


def test_symlinked_part_is_refused(run_dir, tmp_path):
    part = part_of(run_dir, "points", 0)
    outside = tmp_path / "outside.parquet"
    outside.write_bytes(part.read_bytes())
    part.unlink()
    part.symlink_to(outside)
    for on_damage in ("raise", "skip"):
        with pytest.raises(UnsafePathError, match=part.name):
            TensorRun.load(run_dir, on_damage=on_damage)


def test_payload_bytes_changed_in_place_fail_the_digest(run_dir):
    run = TensorRun.load(run_dir)
    part = part_of(run_dir, "payloads", 1)
    data = bytearray(part.read_bytes())
    # Flip bytes inside the data page while keeping the file size: the page no longer
    # decodes, or decodes to other bytes; either way no wrong tensor comes back.
    middle = len(data) // 2
    data[middle : middle + 4] = bytes(b ^ 0xFF for b in data[middle : middle + 4])
    part.write_bytes(bytes(data))
    with pytest.raises((CorruptRunError, DigestMismatchError)):
        run["p1"].tensor("x")
    problems = run.validate()
    assert [Path(p) for p, _ in problems] == [part]


def test_not_a_run(tmp_path):
    with pytest.raises(RunNotFoundError, match="is not a job root") as caught:
        TensorRun.load(tmp_path)
    assert "runs/_delta_log" in str(caught.value)
    assert issubclass(RunNotFoundError, FileNotFoundError)
    assert issubclass(CorruptRunError, StorageError)


def test_a_version_one_run_says_so(tmp_path):
    # Version 1 kept a run.json manifest per run directory; its runs are not read.
    (tmp_path / "run.json").write_text("{not json")
    with pytest.raises(UnsupportedFormatError, match="storage version 1") as caught:
        TensorRun.load(tmp_path)
    assert str(tmp_path) in str(caught.value)


def test_a_garbage_log_is_a_corrupt_run_naming_the_table(run_dir):
    (run_dir / "runs" / "_delta_log" / "00000000000000000000.json").write_text("{not json")
    with pytest.raises(StorageError) as caught:
        TensorRun.load(run_dir)
    assert type(caught.value) is CorruptRunError
    message = str(caught.value)
    assert str(run_dir / "runs") in message
    assert "delta_kernel::" not in message
