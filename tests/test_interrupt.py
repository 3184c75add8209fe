"""livecam.interrupt: a Ctrl-C that lands where Python cannot raise it is not lost."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")

# The handler installed the way livecam.__main__ does; the signal arrives inside a weakref
# callback, as when Ctrl-C landed in the import system's module-lock callback (a CI failure).
SCRIPT = textwrap.dedent(
    """
    import os, signal, sys, time, weakref
    from livecam.interrupt import InterruptOnce

    once = InterruptOnce()
    signal.signal(signal.SIGINT, once)
    once.catch_swallowed()

    class Thing:
        pass

    def callback(ref):
        {callback}
        for _ in range(1000):  # the handler runs here, where an exception cannot propagate
            pass

    try:
        thing = Thing()
        ref = weakref.ref(thing, callback)
        del thing
        time.sleep({wait})  # a signal ends the wait
        print("ran on")
    except KeyboardInterrupt:
        print("interrupted")
    """
)


def run(callback: str, wait: float) -> subprocess.CompletedProcess[str]:
    script = SCRIPT.format(callback=callback, wait=wait)
    return subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)


def test_an_interrupt_inside_a_weakref_callback_is_raised_after_it_without_a_traceback() -> None:
    done = run("os.kill(os.getpid(), signal.SIGINT)", wait=20)
    assert (done.stdout.strip(), done.stderr) == ("interrupted", "")


def test_other_exceptions_python_cannot_raise_are_still_reported() -> None:
    done = run("raise ValueError('from the callback')", wait=0)
    assert done.stdout.strip() == "ran on"
    assert "Exception ignored" in done.stderr and "from the callback" in done.stderr
