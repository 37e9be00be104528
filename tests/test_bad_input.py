"""Damaged or hostile runs: each is a typed error naming the file or value, never a crash
or a wrong answer."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
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
    with TensorRecorder(run_dir=tmp_path / "run") as rec:
        for step in range(2):
            with rec.record_point(f"p{step}"):
                rec.observe(torch.arange(1000.0) * step, name="x")
    return tmp_path / "run"


def edit_manifest(run_dir: Path, edit) -> None:
    path = run_dir / "run.json"
    manifest = json.loads(path.read_text())
    edit(manifest)
    path.write_text(json.dumps(manifest))


def test_truncated_part_names_the_file(run_dir):
    part = run_dir / "observations" / "part-000002.parquet"
    part.write_bytes(part.read_bytes()[:-40])
    with pytest.raises(CorruptRunError, match=r"observations/part-000002\.parquet.*truncated"):
        TensorRun.load(run_dir)


def test_newer_format_version_says_to_upgrade(run_dir):
    edit_manifest(run_dir, lambda m: m.update(format_version=99))
    with pytest.raises(UnsupportedFormatError, match=r"run\.json.*format_version 99.*upgrade"):
        TensorRun.load(run_dir)


def test_manifest_path_escaping_the_run_is_refused(run_dir, tmp_path):
    (tmp_path / "evil.parquet").write_bytes(b"PAR1")

    def escape(m):
        m["parts"][0]["path"] = "../evil.parquet"

    edit_manifest(run_dir, escape)
    with pytest.raises(UnsafePathError, match=r"'\.\./evil\.parquet'"):
        TensorRun.load(run_dir)


def test_absolute_and_symlinked_parts_are_refused(run_dir, tmp_path):
    edit_manifest(run_dir, lambda m: m["parts"][0].update(path="/etc/passwd"))
    with pytest.raises(UnsafePathError, match="/etc/passwd"):
        TensorRun.load(run_dir)


def test_symlinked_part_is_refused(run_dir, tmp_path):
    part = run_dir / "points" / "part-000001.parquet"
    outside = tmp_path / "outside.parquet"
    outside.write_bytes(part.read_bytes())
    part.unlink()
    part.symlink_to(outside)
    with pytest.raises(UnsafePathError, match="part-000001"):
        TensorRun.load(run_dir)


def test_payload_bytes_changed_in_place_fail_the_digest(run_dir):
    run = TensorRun.load(run_dir)
    part = run_dir / "payloads" / "part-000002.parquet"
    data = bytearray(part.read_bytes())
    # Flip bytes inside the (zstd) data page while keeping the file size: the page no
    # longer decodes, or decodes to other bytes; either way no wrong tensor comes back.
    middle = len(data) // 2
    data[middle : middle + 4] = bytes(b ^ 0xFF for b in data[middle : middle + 4])
    part.write_bytes(bytes(data))
    with pytest.raises((CorruptRunError, DigestMismatchError)):
        run["p1"].tensor("x")
    problems = run.validate()
    assert [Path(p).name for p, _ in problems] == ["part-000002.parquet"]


def test_not_a_run(tmp_path):
    with pytest.raises(RunNotFoundError, match=r"no run\.json"):
        TensorRun.load(tmp_path)
    assert issubclass(RunNotFoundError, FileNotFoundError)
    assert issubclass(CorruptRunError, StorageError)


def test_garbage_manifest(tmp_path):
    (tmp_path / "run.json").write_text("{not json")
    with pytest.raises(CorruptRunError, match=r"run\.json"):
        TensorRun.load(tmp_path)
