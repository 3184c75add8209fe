"""Capture what onnxruntime prints on stdout/stderr in one thread, while other threads print on.

ORT's Python layer prints with print(): the libraries `preload_dlls` could not load, and an "EP
Error" block when a provider fails and it retries without it. livecam keeps that text for its
own one-line message (stdout may be `bench --json`'s output). `contextlib.redirect_stdout` swaps
sys.stdout for the whole process, so two sessions created at once (one per GPU lane, or a slow
TensorRT build beside another model) would capture each other's text and could leave a stream
redirected for good; a lock around it would serialise every accelerator session creation.
Instead, while any capture is active, sys.stdout and sys.stderr are routers that send a
capturing thread's writes to its own buffer and everyone else's to the original stream; the
last capture to end puts the original streams back.
"""

from __future__ import annotations

import contextlib
import io
import sys
import threading
from typing import Any, Iterator

# Part of the session pool's state (runtime/sessions.py): how many captures are active, and the
# streams that were there before the first one.
_LOCK = threading.Lock()
_ACTIVE: dict[str, Any] = {"count": 0, "stdout": None, "stderr": None}


class _ThreadRouter:
    """A text stream that writes to a per-thread buffer where one is registered."""

    def __init__(self, original: Any) -> None:
        self.original = original
        self.buffers: dict[int, io.StringIO] = {}

    def write(self, text: str) -> int:
        target = self.buffers.get(threading.get_ident(), self.original)
        return target.write(text)

    def flush(self) -> None:
        buffer = self.buffers.get(threading.get_ident())
        if buffer is None:
            self.original.flush()

    def __getattr__(self, name: str) -> Any:  # encoding, isatty, fileno...: the original's
        return getattr(self.original, name)


@contextlib.contextmanager
def captured_output() -> Iterator[io.StringIO]:
    """Everything this thread prints on sys.stdout/sys.stderr inside the block, in one buffer."""
    buffer = io.StringIO()
    ident = threading.get_ident()
    with _LOCK:
        if _ACTIVE["count"] == 0:
            _ACTIVE["stdout"], _ACTIVE["stderr"] = sys.stdout, sys.stderr
            sys.stdout, sys.stderr = _ThreadRouter(sys.stdout), _ThreadRouter(sys.stderr)
        _ACTIVE["count"] += 1
        routers = [s for s in (sys.stdout, sys.stderr) if isinstance(s, _ThreadRouter)]
        for router in routers:
            router.buffers[ident] = buffer
    try:
        yield buffer
    finally:
        with _LOCK:
            for router in routers:
                router.buffers.pop(ident, None)
            _ACTIVE["count"] -= 1
            if _ACTIVE["count"] == 0:
                # Put back what was there, unless someone replaced the router meanwhile.
                if isinstance(sys.stdout, _ThreadRouter):
                    sys.stdout = _ACTIVE["stdout"]
                if isinstance(sys.stderr, _ThreadRouter):
                    sys.stderr = _ACTIVE["stderr"]
                _ACTIVE["stdout"] = _ACTIVE["stderr"] = None
