"""Reports of a comparison: files written, overwrite rules, CSV and JSON agreeing, and the
HTML report opened in a real headless Chromium: charts rendered, user strings shown as text,
no script run."""

from __future__ import annotations

import csv
import io
import json
import os
import shutil
import struct
import subprocess
import zlib
from pathlib import Path

import pytest
import torch
from torch_cudagraph_debug.errors import ReportExistsError
from torch_cudagraph_debug.tensor_debug import (
    TensorComparisonOptions,
    TensorRecorder,
    compare_point_series,
    compare_runs,
)

# A name that would rewrite the page title if any of it ran as script.
HOSTILE = "<script>document.title='pwned'</script>"
REPORT_FILES = {"report.txt", "report.json", "report.html", "observations.csv", "points.csv"}


def make_runs(root: Path):
    runs = []
    for name, delta in (("reference", 0.0), ("candidate", 0.5)):
        with TensorRecorder(name=name, run_dir=root / name) as rec:
            for step in range(4):
                with rec.record_point(f"step{step}", metadata={"note": "<b>bold</b>"}):
                    x = torch.arange(8, dtype=torch.float32) + step
                    if step >= 2:
                        x[3] += delta * step
                    rec.observe(x, name="hidden")
                    rec.observe(torch.ones(3), name=HOSTILE)
                    rec.observe(torch.tensor([step]), name="step & <id>")
        runs.append(rec.result)
    return runs


@pytest.fixture
def comparison(tmp_path):
    ref, cand = make_runs(tmp_path)
    return compare_runs(ref, cand, options=TensorComparisonOptions(limit=5))


def test_write_produces_every_report_and_respects_overwrite(tmp_path, comparison):
    out = tmp_path / "report"
    written = comparison.write(out)
    assert {p.name for p in written.values()} == REPORT_FILES
    assert written["json"] == out / "report.json" and written["html"] == out / "report.html"
    assert (out / "report.txt").read_text() == comparison.to_text()
    assert json.loads((out / "report.json").read_text()) == comparison.to_dict()
    assert (out / "report.html").read_text() == comparison.to_html()

    with pytest.raises(ReportExistsError, match="overwrite"):
        comparison.write(out)
    with pytest.raises(FileExistsError):  # also the builtin a user would catch
        comparison.write(out)
    (out / "mine.txt").write_text("keep me")
    (out / "rank_comparisons.csv").write_text("stale")
    comparison.write(out, overwrite=True)
    assert (out / "mine.txt").read_text() == "keep me"
    assert not (out / "rank_comparisons.csv").exists()
    assert {p.name for p in out.iterdir()} == REPORT_FILES | {"mine.txt"}


def test_csv_tables_agree_with_the_json(comparison):
    tables = comparison.csv_tables()
    rows = list(csv.DictReader(io.StringIO(tables["observations.csv"])))
    observations = [o for p in comparison.to_dict()["points"] for o in p["observations"]]
    assert len(rows) == len(observations) == 12
    for row, o in zip(rows, observations, strict=True):
        assert (row["name"], row["status"], row["kind"]) == (o["name"], o["status"], o["kind"])
        if o["metrics"] and o["metrics"]["max_abs_error"] is not None:
            assert float(row["max_abs_error"]) == o["metrics"]["max_abs_error"]
    points = list(csv.DictReader(io.StringIO(tables["points.csv"])))
    assert [p["status"] for p in points] == ["match", "match", "mismatch", "mismatch"]


def test_html_escapes_user_strings(comparison):
    html = comparison.to_html()
    assert "<script" not in html
    assert "&lt;script&gt;document.title=&#39;pwned&#39;&lt;/script&gt;[0]" in html
    assert "step &amp; &lt;id&gt;[0]" in html
    assert html.count("<svg") == 1
    assert "Content-Security-Policy" in html


def chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


def run_chromium(binary: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [binary, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def png_pixels(data: bytes) -> tuple[int, int, list[bytes]]:
    """Decodes an 8-bit RGB or RGBA PNG (what Chromium writes) into rows of pixels."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, width, height, channels = 8, b"", 0, 0, 0
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind = data[pos + 4 : pos + 8]
        body = data[pos + 8 : pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, color = struct.unpack(">IIBB", body[:10])
            assert depth == 8 and color in (2, 6)
            channels = 3 if color == 2 else 4
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    raw = zlib.decompress(idat)
    stride = width * channels
    rows, previous = [], bytearray(stride)
    for y in range(height):
        start = y * (stride + 1)
        kind, line = raw[start], bytearray(raw[start + 1 : start + 1 + stride])
        for i in range(stride):
            left = line[i - channels] if i >= channels else 0
            up = previous[i]
            upper_left = previous[i - channels] if i >= channels else 0
            if kind == 1:
                line[i] = (line[i] + left) & 0xFF
            elif kind == 2:
                line[i] = (line[i] + up) & 0xFF
            elif kind == 3:
                line[i] = (line[i] + (left + up) // 2) & 0xFF
            elif kind == 4:
                p = left + up - upper_left
                pa, pb, pc = abs(p - left), abs(p - up), abs(p - upper_left)
                predictor = left if pa <= pb and pa <= pc else (up if pb <= pc else upper_left)
                line[i] = (line[i] + predictor) & 0xFF
        rows.append(bytes(line))
        previous = line
    return width, channels, rows


def count_colour(width: int, channels: int, rows: list[bytes], rgb: tuple[int, int, int]) -> int:
    hits = 0
    for line in rows:
        for x in range(width):
            px = line[x * channels : x * channels + 3]
            if all(abs(a - b) <= 8 for a, b in zip(px, rgb, strict=True)):
                hits += 1
    return hits


def test_html_report_renders_in_chromium(tmp_path):
    binary = chromium()
    if binary is None:
        if os.environ.get("CI"):
            pytest.fail(
                "chromium is not installed; CI must run this test (scripts/test installs it)"
            )
        pytest.skip("chromium is not installed (Debian: apt-get install chromium)")
    ref, cand = make_runs(tmp_path)
    series = compare_point_series(ref["step0"], cand)
    out = tmp_path / "report"
    series.write(out)
    url = (out / "report.html").as_uri()

    dom = run_chromium(binary, "--dump-dom", url)
    assert dom.returncode == 0, dom.stderr
    page = dom.stdout
    # Nothing ran: the title is ours, and no script element exists in the live DOM.
    assert "<title>tcgd point series comparison: MISMATCH</title>" in page
    assert "pwned</title>" not in page
    assert "<script" not in page
    # The hostile name is there as text (serialised escaped again by the DOM).
    assert "&lt;script&gt;document.title='pwned'&lt;/script&gt;[0]" in page
    # Both charts made it into the DOM with their marks.
    assert '<svg id="chart-sites"' in page and '<svg id="chart-drift"' in page
    assert series.counts.mismatch == 6  # hidden and the step id, at steps 1..3
    assert page.count('class="bar-mismatch"') == series.counts.mismatch
    assert series.first_divergence.label == "step1"
    assert "first divergence: 'step1'" in page

    shot = tmp_path / "shot.png"
    result = run_chromium(binary, f"--screenshot={shot}", "--window-size=1100,1400", url)
    assert result.returncode == 0 and shot.exists(), result.stderr
    width, channels, rows = png_pixels(shot.read_bytes())
    # Mismatch bars and the match baseline were painted, in their colours.
    assert count_colour(width, channels, rows, (0xC6, 0x28, 0x28)) > 500
    assert count_colour(width, channels, rows, (0x2E, 0x7D, 0x32)) > 100
