"""InterruptOnce, the process's SIGINT/SIGTERM handler: the first signal raises KeyboardInterrupt,
later ones are ignored, so a second Ctrl-C cannot break the cleanup of the first (or interpreter
shutdown) with a traceback. This module imports only modules built into the interpreter, so
livecam.__main__ installs the handler before anything else loads; pipeline/signals.py builds the
rest of the signal mechanism on it."""

import _thread
import sys

TYPE_CHECKING = False  # (typing is not loaded yet when this module is: mypy reads the name alone)
if TYPE_CHECKING:
    from typing import Callable, TypeVar

    T = TypeVar("T")


class InterruptOnce:
    def __init__(self) -> None:
        self.received: int | None = None
        self.done = False  # the output is complete: a signal now changes nothing
        self._next_hook = sys.__unraisablehook__  # the hook in place when catch_swallowed() ran
        self._catching = False

    def __call__(self, signum: int, frame: object) -> None:
        if self.received is not None or self.done:
            return
        self.received = signum
        raise KeyboardInterrupt

    def catch_swallowed(self) -> None:
        """Become sys.unraisablehook, so that an interrupt Python swallows is sent again.

        A signal handler runs wherever the main thread is, and an exception raised inside a weakref
        callback or a __del__ cannot propagate: Python prints "Exception ignored in ..." with a
        traceback and drops it. Ctrl-C landing in the import system's module-lock callback did that
        (and the run went on, deaf to further signals)."""
        if not self._catching:
            self._catching = True
            self._next_hook = sys.unraisablehook
            sys.unraisablehook = self._unraisable

    def _unraisable(self, report: "sys.UnraisableHookArgs") -> None:
        if issubclass(report.exc_type, KeyboardInterrupt) and self.received is not None:
            signum, self.received = self.received, None
            # Sent again from another thread, as a real signal (it wakes a main thread that waits):
            # here os.kill() would run the handler at once, inside the hook, to be swallowed again.
            try:
                _thread.start_new_thread(_send, (signum,))
            except RuntimeError:  # no new threads at interpreter shutdown: the process is ending anyway
                self.received = signum
            return
        self._next_hook(report)


def _send(signum: int) -> None:
    import os  # (loaded at interpreter start-up)

    os.kill(os.getpid(), signum)


def process_handler() -> "InterruptOnce | None":
    """The process's InterruptOnce, when one is installed and this is the main thread."""
    import signal  # (at call time: this module loads before anything but built-in modules)
    import threading

    if threading.current_thread() is not threading.main_thread():
        return None
    handler = signal.getsignal(signal.SIGINT)
    return handler if isinstance(handler, InterruptOnce) else None


def output_done() -> None:
    """The command's output is complete: a signal from now on is ignored and the run reported done."""
    handler = process_handler()
    if handler is not None:
        handler.done = True


def interrupted() -> bool:
    """Whether SIGINT/SIGTERM interrupted this process (under pipeline.signals.stop_signals())."""
    handler = process_handler()
    return handler is not None and handler.received is not None


def heard(call: "Callable[[], T]", name: str) -> "T":
    """call(), run in a daemon thread while the main thread waits for it in short steps, so that
    SIGINT/SIGTERM/SIGHUP still raise KeyboardInterrupt here. Python runs its handlers only between
    bytecodes of the main thread: a call stuck in native code that never returns (c2pa signing)
    left every signal unheard, and the SIGKILL that followed left the outputs' temporary files.
    An interrupted call's thread is abandoned (the process leaves through os._exit); its result
    is then never used. Outside the main thread, call() is simply called."""
    import threading

    if threading.current_thread() is not threading.main_thread():
        return call()
    outcome: list[tuple[bool, object]] = []

    def run() -> None:
        try:
            outcome.append((True, call()))
        except BaseException as exc:  # handed to the caller as it is
            outcome.append((False, exc))

    worker = threading.Thread(target=run, name=name, daemon=True)
    worker.start()
    while worker.is_alive():
        worker.join(0.05)  # short: a lock's wait is not interrupted by signals on every platform
    ok, value = outcome[0]
    if not ok:
        assert isinstance(value, BaseException)
        raise value
    return value  # type: ignore[return-value]
