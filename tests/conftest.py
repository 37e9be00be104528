"""Shared pytest setup: the `gpu` marker and the switch that counts skips as failures."""

from __future__ import annotations

import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--fail-on-skip",
        action="store_true",
        help="treat a skipped test as a failure (the GPU suite uses it: a silent skip "
        "must not pass there)",
    )


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> object:
    outcome = yield
    report = outcome.get_result()
    if report.skipped and item.config.getoption("--fail-on-skip"):
        report.outcome = "failed"
        report.longrepr = f"skipped, and --fail-on-skip is set: {report.longrepr}"


@pytest.fixture
def fresh_inductor(tmp_path: object, monkeypatch: pytest.MonkeyPatch) -> object:
    """A private Inductor cache and a clean Dynamo for one compile test: a graph cached by
    another test would skip the probe pass (and its decisions) here."""
    import torch
    from torch._dynamo.utils import counters

    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "inductor-cache"))
    torch._dynamo.reset()
    counters.clear()
    yield
    torch._dynamo.reset()
