"""Progress of a file job: a tqdm bar on a terminal, a status line every few seconds otherwise.

`quiet` shows nothing. A Progress is driven from one thread at a time (the encoder's); `Parts`
puts many files (or a cluster's segments) on one bar from any thread.
"""

from __future__ import annotations

import contextlib
import logging
import sys
import threading
import time
from types import TracebackType
from typing import Callable, Hashable, Protocol, TextIO

from livecam.console import is_terminal

log = logging.getLogger("livecam")


def _clock_text(seconds: float) -> str:
    seconds = max(0, int(round(seconds)))
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


class Counter(Protocol):
    """What the file pipeline reports to: one more frame written."""

    def advance(self, n: int = 1) -> None: ...


class Progress:
    """Frames done of `total` (None: unknown), rate and time left."""

    def __init__(self, total: int | None, *, quiet: bool = False, stream: TextIO | None = None,
                 label: str = "video", interval_s: float = 5.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.total = total
        self.done = 0
        self._label = label
        self._interval = interval_s
        self._clock = clock
        self._start = clock()
        self._last_line = self._start
        self._bar = None
        stream = stream if stream is not None else sys.stderr
        self._mode = "off" if quiet else ("bar" if is_terminal(stream) else "lines")
        if self._mode == "bar":
            from tqdm import tqdm

            self._bar = tqdm(total=total, unit="frame", desc=label, file=stream, dynamic_ncols=True,
                             smoothing=0.1, leave=True)

    def advance(self, n: int = 1) -> None:
        self.done += n
        if self._bar is not None:
            self._bar.update(n)
        elif self._mode == "lines":
            now = self._clock()
            if now - self._last_line >= self._interval:
                self._last_line = now
                log.info("%s", self.status_line(now))

    def set(self, done: int) -> None:
        """The count set, not added (Parts: a part that starts again is not counted twice)."""
        self.advance(done - self.done)

    def status_line(self, now: float | None = None) -> str:
        elapsed = (now if now is not None else self._clock()) - self._start
        fps = self.done / elapsed if elapsed > 0 else 0.0
        if self.total:
            pct = 100.0 * self.done / self.total
            eta = (self.total - self.done) / fps if fps > 0 else 0.0
            return (f"{self._label}: {self.done}/{self.total} frames ({pct:.0f}%), {fps:.1f} fps, "
                    f"ETA {_clock_text(eta)}")
        return f"{self._label}: {self.done} frames, {fps:.1f} fps"

    @property
    def shows_bar(self) -> bool:
        return self._bar is not None

    @property
    def fps(self) -> float:
        elapsed = self._clock() - self._start
        return self.done / elapsed if elapsed > 0 else 0.0

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None


class Parts:
    """One Progress over many parts (the files of a batch, a cluster's segments): each part
    reports its own count, which replaces its last one, and the bar shows their sum. A part that
    is retried from its start (a segment on a restarted worker) therefore counts once.
    Thread-safe: parts may report from any thread. As a context manager it closes the bar at
    the end and, while a bar is shown, writes livecam's log lines above it instead of through it."""

    def __init__(self, progress: Progress) -> None:
        self.progress = progress
        self._counts: dict[Hashable, int] = {}
        self._sum = 0
        self._lock = threading.Lock()
        self._exit = contextlib.ExitStack()

    def __enter__(self) -> Parts:
        if self.progress.shows_bar:
            from tqdm.contrib.logging import logging_redirect_tqdm

            self._exit.enter_context(logging_redirect_tqdm(loggers=[log]))
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()
        self._exit.close()

    def report(self, part: Hashable, done: int) -> None:
        with self._lock:
            self._sum += done - self._counts.get(part, 0)
            self._counts[part] = done
            self.progress.set(self._sum)

    def counter(self, part: Hashable) -> PartCounter:
        """A Counter for the file pipeline that reports as `part`, counting from 0."""
        return PartCounter(self, part)

    def close(self) -> None:
        with self._lock:
            self.progress.close()


class PartCounter:
    def __init__(self, parts: Parts, part: Hashable) -> None:
        self._parts, self._part, self.done = parts, part, 0
        parts.report(part, 0)

    def advance(self, n: int = 1) -> None:
        self.done += n
        self._parts.report(self._part, self.done)
