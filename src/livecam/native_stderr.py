"""What native libraries write straight to file descriptor 2, past Python's sys.stderr and past
livecam's one-line messages: libpng and libjpeg warnings, libx264's "malloc of size ... failed",
Ray's C++ core complaining while its workers are shut down.

`captured()` points fd 2 at a temporary file for a block and hands back what was written; one
swap at a time (two overlapping swaps would lose stderr for good). `dropping(pattern)` is the same
with everything but the matching lines passed on to the real stderr afterwards.
"""

from __future__ import annotations

import contextlib
import os
import re
import tempfile
import threading
from dataclasses import dataclass
from typing import Iterator

_LOCK = threading.Lock()


@dataclass
class Captured:
    data: bytes = b""  # what the block wrote to fd 2, once it has ended


@contextlib.contextmanager
def captured() -> Iterator[Captured]:
    """fd 2 into a temporary file while the block runs (nothing is captured when no descriptor
    is left to spare: the library then speaks for itself)."""
    result = Captured()
    with _LOCK:
        try:
            saved = os.dup(2)
            sink = tempfile.TemporaryFile()
        except OSError:
            yield result
            return
        with sink:
            os.dup2(sink.fileno(), 2)
            try:
                yield result
            finally:
                os.dup2(saved, 2)
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
