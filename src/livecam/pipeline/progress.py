"""Progress of a file job: a tqdm bar on a terminal, a status line every few seconds otherwise.

`quiet` shows nothing. All methods are called from one thread (the encoder's).
"""

from __future__ import annotations

import logging
import sys
import time
from typing import Callable, TextIO

log = logging.getLogger("livecam")


def _clock_text(seconds: float) -> str:
    seconds = max(0, int(round(seconds)))
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


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
        self._mode = "off" if quiet else ("bar" if _isatty(stream) else "lines")
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
    def fps(self) -> float:
        elapsed = self._clock() - self._start
        return self.done / elapsed if elapsed > 0 else 0.0

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None


def _isatty(stream: TextIO) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False
