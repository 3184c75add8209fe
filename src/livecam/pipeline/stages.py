"""The thread scaffolding both pipelines share: start named stage threads, stop them all on the
first failure, wait for one to finish while staying responsive to Ctrl-C, and join them.

Each thread sets its own event when it is done, and waiting uses those events, not
Thread.join(): on Python <= 3.12 a join() interrupted by Ctrl-C marks a thread that is still
running as finished, so later joins would return at once and the caller would close files and
devices while a stage is still inside FFmpeg or a camera driver (a crash).
"""

from __future__ import annotations

import threading
import time
from typing import Callable, Mapping

POLL_S = 0.05  # the longest a waiting caller or stage blocks before looking at the stop event


class StageThread(threading.Thread):
    """A stage's thread, with the event it sets when its stage is done: one not done when the
    process exits was left behind by a shutdown that stopped waiting for it (a read blocked in
    FFmpeg or a camera driver), which livecam.__main__ does not finalise the interpreter under."""

    def __init__(self, name: str, target: Callable[[], None], done: threading.Event) -> None:
        super().__init__(target=target, name=name, daemon=True)
        self.done = done


class Stages:
    def __init__(self, stop: threading.Event | None = None) -> None:
        self.stop = stop or threading.Event()  # one stop event for every stage
        self._lock = threading.Lock()
        self._error: BaseException | None = None
        self._threads: list[tuple[threading.Thread, threading.Event]] = []

    def start(self, name: str, stage: Callable[[], None]) -> threading.Event:
        """Run `stage` in a daemon thread; an exception from it fails the whole run. Returns the
        event set when the thread is done."""
        done = threading.Event()

        def run() -> None:
            try:
                stage()
            except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread
                self.fail(exc)
            finally:
                done.set()

        thread = StageThread(name, run, done)
        # Listed before start(): Ctrl-C can land in Thread.start() itself, and a thread that did
        # start must still be waited for.
        self._threads.append((thread, done))
        thread.start()
        return done

    def fail(self, exc: BaseException) -> None:
        """Keep the first error and stop every stage."""
        with self._lock:
            if self._error is None:
                self._error = exc
        self.stop.set()

    @property
    def error(self) -> BaseException | None:
        with self._lock:
            return self._error

    def raise_error(self) -> None:
        """Re-raise the first stage error in the caller's thread (after shutdown)."""
        if (error := self.error) is not None:
            raise error

    @staticmethod
    def wait(done: threading.Event) -> None:
        """Wait for a stage to finish in short waits, so Ctrl-C reaches the main thread."""
        while not done.wait(POLL_S):
            pass

    def join(self, timeout: float, at_most: Mapping[int, float] | None = None) -> list[str]:
        """Stop every stage and wait up to `timeout` seconds in all; the names still running.
        `at_most`: stage index -> a shorter wait for that stage (from the same start)."""
        self.stop.set()
        start = time.monotonic()
        deadline = start + timeout
        for i, (_, done) in enumerate(self._threads):
            until = min(deadline, start + at_most[i]) if at_most and i in at_most else deadline
            done.wait(max(0.0, until - time.monotonic()))
        return [t.name for t, done in self._threads if not done.is_set()]

    def running(self, index: int) -> bool:
        """Whether the index-th started stage is still running."""
        return index < len(self._threads) and not self._threads[index][1].is_set()
