"""What native libraries write straight to file descriptor 2, past Python's sys.stderr and past
livecam's one-line messages: libpng and libjpeg warnings, libx264's "malloc of size ... failed",
Ray's C++ core complaining while its workers are shut down.

`captured()` points fd 2 at a temporary file for a block and hands back what was written; one
swap at a time (two overlapping swaps would lose stderr for good). `dropping(pattern)` is the same
with everything but the matching lines passed on to the real stderr afterwards.

fd 2 is the whole process's, so Python's own writes from other threads (livecam's log lines: a
governor warning during a recorder's encode) went into the capture, held back or lost. While a
capture runs, sys.stderr is a stand-in writing to a copy of the real fd 2, and livecam's log
handler writes to whatever sys.stderr is at the time (`StderrNow`): only native writes are caught.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import tempfile
import sys
import threading
from dataclasses import dataclass
from typing import Iterator, TextIO

_LOCK = threading.Lock()


@dataclass
class Captured:
    data: bytes = b""  # what the block wrote to fd 2, once it has ended


class StderrNow(io.TextIOBase):
    """sys.stderr as it is at each write (a logging handler's stream: it follows a capture's
    stand-in instead of holding the stream that writes to fd 2)."""

    def write(self, text: str) -> int:
        stream = sys.stderr
        return stream.write(text) if stream is not None else len(text)

    def flush(self) -> None:
        stream = sys.stderr
        if stream is not None:
            stream.flush()


class _Bypass(io.TextIOBase):
    """sys.stderr during a capture: text goes to `fd`, a copy of the real fd 2, until the capture
    ends; then (a thread may still hold this object) to the stream it stood in for."""

    def __init__(self, original: TextIO, fd: int) -> None:
        super().__init__()
        self._original = original
        self._fd: int | None = fd
        self._lock = threading.Lock()
        self._encoding = getattr(original, "encoding", None) or "utf-8"

    @property
    def encoding(self) -> str:  # type: ignore[override]  # (io.TextIOBase has it read-only)
        return self._encoding

    def write(self, text: str) -> int:
        with self._lock:
            if self._fd is None:
                return self._original.write(text)
            data = memoryview(text.encode(self._encoding, "backslashreplace"))
            try:
                while data:
                    data = data[os.write(self._fd, data):]
            except OSError:  # stderr closed or broken, as the stream itself would have found
                pass
            return len(text)

    def flush(self) -> None:
        with self._lock:
            if self._fd is None:
                self._original.flush()

    def fileno(self) -> int:
        return self._fd if self._fd is not None else self._original.fileno()

    def isatty(self) -> bool:  # (progress bars ask)
        return self._original.isatty()

    def end(self) -> None:
        with self._lock:
            self._fd = None


def _writes_fd2(stream: TextIO | None) -> bool:
    try:
        return stream is not None and stream.fileno() == 2
    except (OSError, ValueError, AttributeError, io.UnsupportedOperation):
        return False


@contextlib.contextmanager
def captured() -> Iterator[Captured]:
    """fd 2 into a temporary file while the block runs (nothing is captured when no descriptor
    is left to spare: the library then speaks for itself). Python's sys.stderr is not captured."""
    result = Captured()
    with _LOCK:
        try:
            saved = os.dup(2)
            sink = tempfile.TemporaryFile()
        except OSError:
            yield result
            return
        original = sys.stderr
        bypass = None
        if _writes_fd2(original):
            with contextlib.suppress(OSError, ValueError):
                original.flush()  # what it holds was written before the capture
            bypass = _Bypass(original, saved)
            sys.stderr = bypass
        with sink:
            os.dup2(sink.fileno(), 2)
            try:
                yield result
            finally:
                os.dup2(saved, 2)
                if bypass is not None:  # (before `saved` closes: a holder of it writes to fd 2 now)
                    bypass.end()
                    if sys.stderr is bypass:
                        sys.stderr = original
                os.close(saved)
                sink.seek(0)
                result.data = sink.read()


@contextlib.contextmanager
def dropping(pattern: re.Pattern[bytes], active: bool = True) -> Iterator[None]:
    """The lines matching `pattern` written to fd 2 during the block are dropped; the rest is
    passed on when the block ends."""
    if not active:
        yield
        return
    with captured() as out:
        yield
    said = memoryview(pattern.sub(b"", out.data))
    try:
        while said:
            said = said[os.write(2, said):]
    except OSError:  # stderr closed or broken: nothing to pass it on to
        pass
