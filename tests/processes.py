"""Running code in other processes, for the tests that need a fresh interpreter, several
processes started together, or a reader of standard output that goes away early."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Sequence
from typing import Any


def python_stdout(code: str, *, timeout: float = 120) -> str:
    """The standard output of ``code`` run by a fresh interpreter, which must exit 0 (its
    standard error is the failure message otherwise)."""
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout, check=False
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def start_when_ready(
    commands: Sequence[Sequence[str]], **popen: Any
) -> list[subprocess.Popen[str]]:
    """Starts one process per command (standard output and error as text pipes) and
    returns once each has printed "ready"; one that did not fails the test with its
    standard error."""
    children = [
        subprocess.Popen(
            list(command), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **popen
        )
        for command in commands
    ]
    for child in children:
        assert child.stdout is not None and child.stderr is not None
        assert child.stdout.readline().strip() == "ready", child.stderr.read()
    return children


def head_of(command: Sequence[str], **popen: Any) -> tuple[list[str], str, int]:
    """Runs ``command`` with its standard output read by ``head -1``, which leaves after
    the first line: returns the lines head printed, the command's standard error and its
    exit code."""
    producer = subprocess.Popen(
        list(command), stdout=subprocess.PIPE, stderr=subprocess.PIPE, **popen
    )
    head = subprocess.run(["head", "-1"], stdin=producer.stdout, capture_output=True, check=False)
    assert producer.stdout is not None and producer.stderr is not None
    producer.stdout.close()
    err = producer.stderr.read().decode()
    code = producer.wait(timeout=120)
    return head.stdout.decode().splitlines(), err, code
