"""One way to stop on a signal, for every command that runs a pipeline and for the live pipeline.

    with stop_signals():            # SIGTERM acts like Ctrl-C: KeyboardInterrupt in the main thread
    with stop_signals(on_stop):     # SIGINT/SIGTERM call on_stop(name) for a clean stop;
                                    # a second one raises KeyboardInterrupt (stop waiting)

Either way SIGXFSZ is ignored, so a file size limit becomes an error livecam reports and cleans
up after instead of killing the process. Outside the main thread nothing is installed (Python
only allows handlers there). Handlers are restored on exit, so the two forms nest.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from types import FrameType
from typing import Any, Callable, Iterator

SIGNAL_NAMES = {signal.SIGINT: "Ctrl-C", signal.SIGTERM: "SIGTERM"}


@contextlib.contextmanager
def stop_signals(on_stop: Callable[[str], None] | None = None) -> Iterator[None]:
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    received: list[int] = []

    def clean_stop(signum: int, frame: FrameType | None) -> None:
        if received or on_stop is None:  # a second signal: stop waiting for the clean shutdown
            raise KeyboardInterrupt
        received.append(signum)
        on_stop(SIGNAL_NAMES.get(signal.Signals(signum), "a signal"))

    wanted: list[tuple[str, Any]] = [("SIGXFSZ", signal.SIG_IGN)]
    if on_stop is None:
        wanted.append(("SIGTERM", signal.default_int_handler))  # SIGINT already raises KeyboardInterrupt
    else:
        wanted += [("SIGINT", clean_stop), ("SIGTERM", clean_stop)]
    saved: dict[int, Any] = {}
    for name, handler in wanted:
        sig = getattr(signal, name, None)
        if sig is None:
            continue
        try:
            saved[sig] = signal.signal(sig, handler)
        except (ValueError, OSError):
            pass
    try:
        yield
    finally:
        for sig, handler in saved.items():
            try:
                signal.signal(sig, handler)
            except (ValueError, OSError):
                pass
