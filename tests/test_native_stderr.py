"""native_stderr: a capture of fd 2 (native libraries' words) takes what C code writes there, not
livecam's own log lines written from other threads meanwhile (a live run's governor warning during
a recorder's encode went into the capture, and was held back or lost)."""

from __future__ import annotations

import contextlib
import io
import logging
import os
import sys
import threading
from pathlib import Path
from typing import Iterator

import pytest

from livecam import native_stderr


@contextlib.contextmanager
def real_stderr(path: Path) -> Iterator[Path]:
    """fd 2 into a file (the terminal, as far as the process can tell) and sys.stderr on fd 2,
    as in a real run (pytest puts its own object there, and its own file on fd 2 between the
    phases of a test: so this is entered in the test's body)."""
    saved = os.dup(2)
    with open(path, "wb") as terminal:
        os.dup2(terminal.fileno(), 2)
    previous = sys.stderr
    sys.stderr = stream = io.TextIOWrapper(io.FileIO(2, "w", closefd=False), encoding="utf-8", line_buffering=True)
    try:
        yield path
    finally:
        stream.flush()
        sys.stderr = previous
        os.dup2(saved, 2)
        os.close(saved)


def livecam_logging(monkeypatch: pytest.MonkeyPatch) -> logging.Logger:
    from livecam.console import setup_logging

    log = logging.getLogger("livecam")
    monkeypatch.setattr(log, "handlers", list(log.handlers))
    monkeypatch.setattr(log, "level", log.level)
    monkeypatch.setattr(log, "propagate", log.propagate)
    setup_logging(0, False)
    return log


def test_a_line_logged_from_another_thread_during_a_capture_reaches_the_real_stderr(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log = livecam_logging(monkeypatch)
    with real_stderr(tmp_path / "terminal") as terminal, native_stderr.captured() as out:
        os.write(2, b"libx264: native noise\n")
        speaker = threading.Thread(target=lambda: log.warning("governor: over budget"))
        speaker.start()
        speaker.join()
        terminal_during = terminal.read_bytes()
        stand_in = sys.stderr
    assert out.data == b"libx264: native noise\n"  # only the native write was captured
    assert terminal_during == b"livecam: governor: over budget\n"  # at once, not after the capture
    with real_stderr(tmp_path / "terminal2") as terminal:
        log.warning("after")
        stand_in.write("held on to\n")  # a thread that got the stand-in writes to fd 2 once it ended
    assert terminal.read_bytes() == b"livecam: after\nheld on to\n"


def test_dropping_still_passes_on_the_native_lines_it_does_not_drop(tmp_path: Path) -> None:
    import re

    noise = re.compile(rb"x264 \[error\]: malloc[^\n]*\n")
    with real_stderr(tmp_path / "terminal") as terminal, native_stderr.dropping(noise):
        os.write(2, b"x264 [error]: malloc of size 1 failed\nsomething else\n")
        print("python's own", file=sys.stderr)
    assert terminal.read_bytes() == b"python's own\nsomething else\n"
