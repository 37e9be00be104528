"""The flight recorder's settings in the probe config: what is accepted, what is refused
(with file, line and key), and what a session without a captured graph says."""

from __future__ import annotations

import json

import pytest
import torch
import torch_cudagraph_debug.compile as tcgd_compile
from torch_cudagraph_debug.errors import ConfigError, RecorderStateError


def write(tmp_path, text: str):
    path = tmp_path / "probes.toml"
    path.write_text(text)
    return path


def test_history_and_triggers_reach_the_session_settings(tmp_path):
    path = write(
        tmp_path,
        'version = 1\n[run]\npayload = "summary"\nhistory = 8\ntrigger_abs_max = 1e4\n'
        "[[select]]\nops = ['aten.mm']\n",
    )
    settings = json.loads(tcgd_compile.load_config(path).run_json())
    assert settings["history"] == 8
    assert settings["trigger_nonfinite"] is True
    assert settings["trigger_abs_max"] == 1e4
    default = json.loads(
        tcgd_compile.load_config({"version": 1, "select": [{"ops": ["aten.mm"]}]}).run_json()
    )
    assert default["history"] == 0 and default["trigger_abs_max"] is None


@pytest.mark.parametrize(
    ("run", "line", "key", "words"),
    [
        ('payload = "full"\nhistory = 4', 4, "run.history", 'needs payload = "summary"'),
        ('payload = "summary"\nhistory = 5000', 4, "run.history", "more than 1024"),
        ('payload = "summary"\nhistory = -1', 4, "run.history", ">= 0"),
        ('payload = "summary"\ntrigger_abs_max = -2.0', 4, "run.trigger_abs_max", ">= 0"),
        ('payload = "summary"\ntrigger_nonfinite = "yes"', 4, "", "expected a boolean"),
    ],
)
def test_bad_flight_recorder_settings_name_line_and_key(tmp_path, run, line, key, words):
    path = write(tmp_path, f"version = 1\n[run]\n{run}\n")
    with pytest.raises(ConfigError) as caught:
        tcgd_compile.load_config(path)
    message = str(caught.value)
    assert words in message, message
    assert f"probes.toml:{line}: {key}" in message, message


def test_dump_history_says_why_it_cannot_dump_yet(tmp_path):
    model = torch.nn.Linear(4, 4)
    no_history = tcgd_compile.compile(
        model,
        probes={"version": 1, "run": {"payload": "summary"}, "select": [{"ops": ["aten.addmm"]}]},
        run_dir=tmp_path / "a",
    )
    no_history(torch.randn(2, 4))
    with pytest.raises(RecorderStateError, match="history = N"):
        tcgd_compile.session_of(no_history).dump_history()
    torch._dynamo.reset()
    with_history = tcgd_compile.compile(
        model,
        probes={
            "version": 1,
            "run": {"payload": "summary", "history": 2},
            "select": [{"ops": ["aten.addmm"]}],
        },
        run_dir=tmp_path / "b",
    )
    with_history(torch.randn(2, 4))
    # On the CPU nothing is captured: every call's summary is in the run already.
    with pytest.raises(RecorderStateError, match="no graph has been captured"):
        tcgd_compile.session_of(with_history).dump_history()
    run = tcgd_compile.session_of(with_history).finish()
    assert run.labels == ("call0",)
