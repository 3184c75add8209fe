"""Signal handling shared by the commands that run a pipeline (video, live, demo, bench)."""

from __future__ import annotations

import contextlib
import signal
import threading
from typing import Any, Iterator


@contextlib.contextmanager
def stop_signals() -> Iterator[None]:
    """SIGTERM stops the run like Ctrl-C; SIGXFSZ is ignored so a file size limit becomes an
    error we can report (and clean up after) instead of killing the process."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    saved: dict[int, Any] = {}
    wanted: tuple[tuple[str, Any], ...] = (("SIGTERM", signal.default_int_handler), ("SIGXFSZ", signal.SIG_IGN))
    for name, handler in wanted:
        sig = getattr(signal, name, None)
        if sig is not None:
            saved[sig] = signal.signal(sig, handler)
    try:
        yield
    finally:
        for sig, handler in saved.items():
            signal.signal(sig, handler)
