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
"""

from __future__ import annotations

import collections
import threading
import time
from typing import Any, Callable

import numpy as np

Marker = Callable[[int, np.ndarray], np.ndarray]  # (output frame index, image) -> image
_POLL_S = 0.05


class MarkingSink:
    """Wraps a Sink (write, poll, close; write_at when it has one)."""

    def __init__(self, inner: Any, mark: Marker, *, backlog: int, lossless: bool,
                 on_drop: Callable[[], None] | None = None) -> None:
        self.inner = inner
        self.name = inner.name
        self._mark = mark
        self._backlog = max(1, backlog)
        self._lossless = lossless
        self._on_drop = on_drop
        # (output index, image, shown time, source pts): the index counts frames handed over,
        # so the cadence follows the output (drops upstream do not skip a mark)
        self._items: collections.deque[tuple[int, np.ndarray, float, float | None]] = collections.deque()
        self._cond = threading.Condition()
        self._count = 0
        self._closing = False
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="livecam-watermark", daemon=True)
        self._thread.start()

    # -- the Sink interface (output thread) -------------------------------------------------------
    def write(self, image_bgr: np.ndarray) -> None:
        self._put(image_bgr, None)

    def write_at(self, image_bgr: np.ndarray, pts_s: float) -> None:
        self._put(image_bgr, pts_s)

    def poll(self) -> list[str]:
        keys: list[str] = self.inner.poll()
        return keys

    def close(self) -> None:
        """Mark and write what is waiting, then close the wrapped sink (always)."""
        with self._cond:
            self._closing = True
            self._cond.notify_all()
        self._thread.join()
        try:
            self.inner.close()
        finally:
            self._raise()

    # -- internals -------------------------------------------------------------------------------
    def _raise(self) -> None:
        if self._error is not None:  # kept: every later write fails the same way
            raise self._error

    def _put(self, image: np.ndarray, pts: float | None) -> None:
        shown = time.perf_counter()  # the time it was shown, as the recorder would have stamped it
        with self._cond:
            self._raise()
            while self._lossless and len(self._items) >= self._backlog and self._error is None:
                self._cond.wait(_POLL_S)
            self._raise()
            if len(self._items) >= self._backlog:  # live sink: the oldest waiting frame goes
                self._items.popleft()
                if self._on_drop is not None:
                    self._on_drop()
            self._items.append((self._count, image, shown, pts))
            self._count += 1
            self._cond.notify_all()

    def _run(self) -> None:
        write_at = getattr(self.inner, "write_at", None)
        while True:
            with self._cond:
                while not self._items and not self._closing:
                    self._cond.wait(_POLL_S)
                if not self._items:
                    return  # closing and nothing left
                index, image, shown, pts = self._items.popleft()
                self._cond.notify_all()
            try:
                out = self._mark(index, image)
                if write_at is None:
                    self.inner.write(out)
                else:  # the recorder stamps it with when it was shown, not when it was marked
                    write_at(out, shown if pts is None else pts)
            except BaseException as exc:  # noqa: BLE001 - raised on the output thread
                with self._cond:
                    self._error = exc
                    self._items.clear()
                    self._cond.notify_all()
                return
