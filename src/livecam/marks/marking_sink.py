"""Marking off the live output thread: a sink wrapper with its own thread.

The live pipeline's output loop hands every shown frame to MarkingSink.write and goes on at
once; the wrapper's thread marks the frames (marks.live_marker: a fraction of a ms for a 720p
frame, the first of a recording a full encoder run) and writes every frame, in the order given,
to the wrapped sink. So a marked frame costs the output loop nothing, and the recording or
virtual camera gets the same frames in the same order as without the watermark.

The backlog holds `backlog` frames. A recording is lossless: when the backlog is full (the
marker or encoder cannot keep up on average) write waits, as a slow encoder made it wait before.
A live sink (virtual camera) drops the oldest waiting frame instead, reported through on_drop,
so latency stays bounded. The first error of the thread is raised by the next write or by close.

The wrapped sink is closed on the wrapper's thread too, so nothing here waits on it for ever: when
it finishes nothing for STALL_S (its close: CLOSE_STALL_S) (a stalled disk under a recording, a
device that stopped answering), a waiting write or close gives it up (abandon: the wrapped
sink's unfinished file is removed, its stuck call left alone) and raises OutputError.
"""

from __future__ import annotations

import collections
import threading
import time
from typing import Any, Callable

import numpy as np

from livecam.errors import OutputError

Marker = Callable[[int, np.ndarray], np.ndarray]  # (output frame index, image) -> image
_POLL_S = 0.05
# No frame finished (marked and written, or the close) for this long: the sink is stuck, not slow
# (a live encoder takes well under a second a frame, its close as long as a few frames).
STALL_S = 10.0
# The wrapped sink's close gets longer: a recording's close also signs it (C2PA: the whole file
# is read and written once more), which takes longer the longer the recording.
CLOSE_STALL_S = 60.0


class MarkingSink:
    """Wraps a Sink (write, poll, close; write_at when it has one)."""

    def __init__(self, inner: Any, mark: Marker, *, backlog: int, lossless: bool,
                 on_drop: Callable[[], None] | None = None, stall_s: float | None = None) -> None:
        self.inner = inner
        self.name = inner.name
        self._mark = mark
        self._backlog = max(1, backlog)
        self._lossless = lossless
        self._on_drop = on_drop
        # (output index, image, shown time, source pts, source duration): the index counts frames
        # handed over, so the cadence follows the output (drops upstream do not skip a mark)
        self._items: collections.deque[tuple[int, np.ndarray, float, float | None, float | None]] = \
            collections.deque()
        self._cond = threading.Condition()
        self._count = 0
        self._closing = False
        self._abandoned = False
        self._error: BaseException | None = None
        self._stall_s = STALL_S if stall_s is None else stall_s
        self._close_stall_s = max(self._stall_s, CLOSE_STALL_S if stall_s is None else stall_s)
        self._limit_s = self._stall_s  # the limit for the thread's current call
        self._busy_since: float | None = None  # when the thread's current call began (None: idle)
        self._thread = threading.Thread(target=self._run, name="livecam-watermark", daemon=True)
        self._thread.start()

    # -- the Sink interface (output thread) -------------------------------------------------------
    def write(self, image_bgr: np.ndarray) -> None:
        self._put(image_bgr, None, None)

    def write_at(self, image_bgr: np.ndarray, pts_s: float, duration_s: float | None = None) -> None:
        self._put(image_bgr, pts_s, duration_s)

    def poll(self) -> list[str]:
        keys: list[str] = self.inner.poll()
        return keys

    def close(self) -> None:
        """Mark and write what is waiting, then close the wrapped sink (always), unless it is
        stuck: then it is given up (abandon) and OutputError says so."""
        with self._cond:
            self._closing = True
            self._cond.notify_all()
        try:
            while self._thread.is_alive():
                self._thread.join(_POLL_S)
                if self._stalled():
                    self.abandon()
                    break
        except BaseException:  # a stop signal ended the wait (pipeline.signals.interrupting)
            self.abandon()
            raise
        self._raise()

    def abandon(self) -> None:
        """Give the wrapped sink up without waiting for its current call: nothing more is written
        or closed, and its unfinished output goes (its own `abandon`, when it has one)."""
        with self._cond:
            self._closing = self._abandoned = True
            self._items.clear()
            if self._error is None:
                gone = ", so the unfinished recording was removed" if hasattr(self.inner, "abandon") else ""
                self._error = OutputError(
                    f"the output {self.name} finished nothing for {self._limit_s:g} s (a stalled disk or a "
                    f"device that stopped answering){gone}; check it and run again")
            self._cond.notify_all()
        abandon = getattr(self.inner, "abandon", None)
        if abandon is not None:
            abandon()

    # -- internals -------------------------------------------------------------------------------
    def _raise(self) -> None:
        if self._error is not None:  # kept: every later write fails the same way
            raise self._error

    def _put(self, image: np.ndarray, pts: float | None, duration: float | None) -> None:
        shown = time.perf_counter()  # the time it was shown, as the recorder would have stamped it
        with self._cond:
            self._raise()
            while self._lossless and len(self._items) >= self._backlog and self._error is None:
                if self._stalled():
                    break
                self._cond.wait(_POLL_S)
        if self._stalled() and self._error is None:
            self.abandon()
        with self._cond:
            self._raise()
            if len(self._items) >= self._backlog:  # live sink: the oldest waiting frame goes
                self._items.popleft()
                if self._on_drop is not None:
                    self._on_drop()
            self._items.append((self._count, image, shown, pts, duration))
            self._count += 1
            self._cond.notify_all()

    def _stalled(self) -> bool:
        since = self._busy_since
        return since is not None and time.monotonic() - since >= self._limit_s

    def _run(self) -> None:
        self._drain()
        with self._cond:  # after an error: the wrapped sink is closed when the caller closes
            while not self._closing:
                self._cond.wait(_POLL_S)
            if self._abandoned:  # (a stuck call returned after all: the sink is not touched again)
                return
        self._limit_s = self._close_stall_s
        self._busy_since = time.monotonic()
        try:
            self.inner.close()
        except BaseException as exc:  # noqa: BLE001 - raised by close, on the caller's thread
            with self._cond:
                if self._error is None:
                    self._error = exc
        self._busy_since = None

    def _drain(self) -> None:
        write_at = getattr(self.inner, "write_at", None)
        while True:
            with self._cond:
                while not self._items and not self._closing:
                    self._cond.wait(_POLL_S)
                if not self._items:
                    return  # closing and nothing left (or given up)
                index, image, shown, pts, duration = self._items.popleft()
                self._busy_since = time.monotonic()
                self._cond.notify_all()
            try:
                out = self._mark(index, image)
                if write_at is None:
                    self.inner.write(out)
                elif pts is None:  # the recorder stamps it with when it was shown, not when it was marked
                    write_at(out, shown)
                else:
                    write_at(out, pts, duration)
            except BaseException as exc:  # noqa: BLE001 - raised on the output thread
                with self._cond:
                    if self._error is None:
                        self._error = exc
                    self._items.clear()
                    self._busy_since = None
                    self._cond.notify_all()
                return
            self._busy_since = None
