"""media.exit_guard: a C library's exit() on the main thread hands over to the guard's thread."""

from __future__ import annotations

import subprocess
import sys

import pytest

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the guard works on Linux only")

SCRIPT = """
import ctypes, os, sys
from livecam.media.exit_guard import ExitGuard

def on_exit():
    sys.stderr.write("guard ran\\n")
    sys.stderr.flush()
    if sys.argv[1] == "rescue":
        os._exit(5)

guard = ExitGuard(on_exit)
if sys.argv[1] == "closed":
    guard.close()
if sys.argv[1] != "python-exit":
    ctypes.CDLL(None).exit(1)  # as Qt does on the window's thread when its X display is gone
"""


def run(mode: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", SCRIPT, mode], capture_output=True, text=True, timeout=60)


def test_exit_from_c_waits_while_the_guard_thread_runs_its_cleanup() -> None:
    proc = run("rescue")
    assert (proc.returncode, proc.stderr) == (5, "guard ran\n")


def test_the_exit_goes_on_once_the_cleanup_returns() -> None:
    proc = run("let-go")
    assert (proc.returncode, proc.stderr) == (1, "guard ran\n")


def test_a_closed_guard_and_a_normal_end_of_python_pass_straight_through() -> None:
    # (a hang here would be the C exit handler waiting on a gate nobody opens)
    assert (run("closed").returncode, run("closed").stderr) == (1, "")
    proc = run("python-exit")
    assert (proc.returncode, proc.stderr) == (0, "")
