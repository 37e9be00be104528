"""Where a run's data files are in a job root (docs/storage.md, "Layout"), for tests that
damage or inspect them: `<root>/<table>/rank=<r>/part-<run>-<first>-<last>-<digest>.parquet`."""

from __future__ import annotations

import json
import re
from pathlib import Path

_PART = re.compile(r"^part-([A-Za-z0-9]+)-(\d{6})-(\d{6})-([0-9a-f]+)\.parquet$")


def data_files(root: str | Path, table: str, rank: int = 0) -> list[Path]:
    """The data files of ``table`` on disk (committed or not), in point order."""
    directory = Path(root) / table / f"rank={rank}"
    if not directory.is_dir():
        return []
    found = [p for p in directory.iterdir() if _PART.match(p.name)]
    return sorted(found, key=lambda p: (int(_PART.match(p.name).group(2)), p.name))


def points_of(path: Path) -> range:
    """The points a data file holds, from its name."""
    m = _PART.match(path.name)
    assert m, path
    return range(int(m.group(2)), int(m.group(3)) + 1)


def part_of(root: str | Path, table: str, point: int, rank: int = 0) -> Path:
    """The data file of ``table`` holding ``point`` (runs recorded with one group per point
    and ``compact=False`` have one file per point)."""
    for path in data_files(root, table, rank):
        if point in points_of(path):
            return path
    raise AssertionError(f"no {table} file holds point {point} under {root}")


def logged_files(root: str | Path, table: str) -> set[str]:
    """The files the table's Delta log lists now (paths relative to the table), replayed
    from the JSON commits (no checkpoint is written before 100 versions)."""
    log = Path(root) / table / "_delta_log"
    live: set[str] = set()
    for commit in sorted(log.glob("*.json")):
        for line in commit.read_text().splitlines():
            action = json.loads(line)
            if "add" in action:
                live.add(action["add"]["path"])
            elif "remove" in action:
                live.discard(action["remove"]["path"])
    return live
