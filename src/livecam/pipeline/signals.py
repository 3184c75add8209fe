"""One way to stop on a signal, for the whole CLI process and for the live pipeline.

    with stop_signals():            # cli.main, once for the process: SIGINT, SIGTERM, SIGHUP raise
                                    # KeyboardInterrupt once; later ones are ignored (cleanup runs)
    with stop_signals(on_stop):     # the first stop signal calls on_stop(name) for a clean
                                    # stop; later ones are ignored (the stop has deadlines)
        with interrupting():        # ...except here: a later one raises KeyboardInterrupt, for a
                                    # last step only a signal can end (a hung signing: interrupt.heard)

livecam.interrupt holds the rest: output_done() (the output is finished: later signals are ignored,
exit 0) and interrupted() (whether an interrupt arrived: an error after it is the interrupt).

Either way SIGXFSZ is ignored, so a file size limit becomes an error livecam reports and cleans
up after instead of killing the process. Outside the main thread nothing is installed (Python
only allows handlers there). Handlers are restored on exit, so the two forms nest; a plain
stop_signals() inside another (a command run under cli.main) keeps the one handler and its state.
"""

from __future__ import annotations

import contextlib
import logging
import signal
import threading
from types import FrameType
from typing import Any, Callable, Iterator

from livecam.interrupt import InterruptOnce, process_handler

SIGNAL_NAMES = {signal.SIGINT: "Ctrl-C", signal.SIGTERM: "SIGTERM"}
# SIGHUP (the terminal or SSH session closed) stops like SIGTERM: by default it killed the process
# with the recording's temporary file left behind. Not on Windows; left alone when ignored (nohup).
STOP_SIGNALS = ("SIGINT", "SIGTERM", "SIGHUP")
log = logging.getLogger("livecam")
if hasattr(signal, "SIGHUP"):
    SIGNAL_NAMES[signal.SIGHUP] = "SIGHUP"


class _CleanStop:
    """stop_signals(on_stop)'s handler. Later signals are ignored: raising one inside the shutdown
    left pipeline threads inside onnxruntime at exit (C++ terminate, exit -6); the shutdown's own
    deadlines bound the wait. Inside interrupting() the process's InterruptOnce answers instead."""

    def __init__(self, on_stop: Callable[[str], None], outer: InterruptOnce) -> None:
        self.on_stop = on_stop
        self.outer = outer  # the process's handler (or a new one): its state says it was interrupted
        self.received: list[int] = []
        self.interrupts = False

    def __call__(self, signum: int, frame: FrameType | None) -> None:
        if self.interrupts and self.received:
            self.outer(signum, frame)  # a signal after the clean stop's: KeyboardInterrupt, once
        elif not self.received and self.outer.received is None:
            self.received.append(signum)
            name = SIGNAL_NAMES.get(signal.Signals(signum), "a signal")
            if self.interrupts:  # the run has ended already: its output is being finished, and kept
                log.warning("finishing the output (%s received); another %s abandons it", name, name)
            else:
                self.on_stop(name)


@contextlib.contextmanager
def stop_signals(on_stop: Callable[[str], None] | None = None) -> Iterator[None]:
    if threading.current_thread() is not threading.main_thread():
        yield  # Python allows handlers in the main thread only
        return
    once = process_handler() or InterruptOnce()  # nested: the process's one handler and state
    clean_stop = _CleanStop(on_stop, once) if on_stop is not None else None
    wanted: list[tuple[str, Any]] = [("SIGXFSZ", signal.SIG_IGN)]
    wanted += [(name, clean_stop or once) for name in STOP_SIGNALS]
    saved: dict[int, Any] = {}
    for name, handler in wanted:
        sig = getattr(signal, name, None)
        if sig is None or (name == "SIGHUP" and signal.getsignal(sig) == signal.SIG_IGN):  # nohup: keep running
            continue
        try:
            saved[sig] = signal.signal(sig, handler)
        except (ValueError, OSError):
            pass
    try:
        yield
    finally:
        outer = saved.get(signal.SIGINT)
        if clean_stop is not None and clean_stop.received and isinstance(outer, InterruptOnce) \
                and outer.received is None:
            outer.received = clean_stop.received[0]  # the process was interrupted: later signals are ignored
        for sig, handler in saved.items():
            try:
                signal.signal(sig, handler)
            except (ValueError, OSError):
                pass


@contextlib.contextmanager
def interrupting() -> Iterator[None]:
    """Within the block a stop signal after the clean stop's raises KeyboardInterrupt under
    stop_signals(on_stop) too: for a last step whose wait only a signal can end (the live pipeline
    closing a recording whose signing hangs in native code; interrupt.heard keeps the main thread
    where the handler runs). The first signal of a run that ended on its own is its clean stop,
    said: a single Ctrl-C while a finished recording is written did not discard it before.
    Elsewhere (no clean stop in place) it changes nothing."""
    handler = signal.getsignal(signal.SIGINT) if threading.current_thread() is threading.main_thread() else None
    if not isinstance(handler, _CleanStop):
        yield
        return
    handler.interrupts = True
    try:
        yield
    finally:
        handler.interrupts = False


def ignore_stop_signals() -> None:
    """The process is exiting: SIGINT/SIGTERM/SIGHUP now would only break interpreter shutdown."""
    if threading.current_thread() is not threading.main_thread():
        return
    for name in STOP_SIGNALS:
        if (sig := getattr(signal, name, None)) is not None:
            signal.signal(sig, signal.SIG_IGN)


@contextlib.contextmanager
def kept_stop_handlers() -> Iterator[None]:
    """Put livecam's stop-signal handlers back after the block: a library that installs its own
    at the C level (Ray's core, in ray.init: on SIGTERM it printed a stack and aborted, exit 134,
    where livecam stops cleanly with 130). Python still reports its own handler then, so they are
    set again, not compared."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    kept = {sig: signal.getsignal(sig) for name in STOP_SIGNALS if (sig := getattr(signal, name, None)) is not None}
    try:
        yield
    finally:
        for sig, handler in kept.items():
            if handler is not None:  # None: not installed from Python; nothing of ours to put back
                try:
                    signal.signal(sig, handler)
                except (ValueError, OSError):
                    pass
