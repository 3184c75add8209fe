"""Small thread-safe queues for the pipelines.

BoundedQueue is a FIFO of at most `maxsize` items whose `put_wait` waits for room (lossless);
`put_until` retries it until the item is in or the run stops. DropOldestQueue keeps a live
stream's latency bounded: its `put` never blocks, and when the queue is full the oldest item is
dropped, counted and handed to a callback (so the caller can account for it). The file
pipeline's WorkQueue (pipeline/file.py) is a BoundedQueue with a second, unbounded lane.

ReorderBuffer gives frames back strictly in index order when several workers finish them out of
order. Indices that will never arrive are `skip`ped; an item older than the last one given back
is dropped and counted as late.
"""

from __future__ import annotations

import queue
import threading
import time
from collections import deque
from typing import Callable, Generic, TypeVar

from livecam.pipeline.stages import POLL_S

T = TypeVar("T")


class BoundedQueue(Generic[T]):
    """A FIFO of at most `maxsize` items; `put_wait` waits for room."""

    def __init__(self, maxsize: int) -> None:
        if maxsize < 1:
            raise ValueError(f"maxsize must be >= 1, got {maxsize}")
        self.maxsize = maxsize
        self._items: deque[T] = deque()
        self._cond = threading.Condition()

    def put_wait(self, item: T, timeout: float) -> bool:
        """Lossless put: wait up to timeout for room; False when there was none."""
        with self._cond:
            if not self._cond.wait_for(lambda: len(self._items) < self.maxsize, timeout):
                return False
            self._items.append(item)
            self._cond.notify_all()
            return True

    def qsize(self) -> int:
        with self._cond:
            return len(self._items)


def put_until(q: BoundedQueue[T], item: T, stop: threading.Event, poll: float = POLL_S) -> bool:
    """put_wait until the item is in (True) or `stop` is set (False)."""
    while not stop.is_set():
        if q.put_wait(item, poll):
            return True
    return False


class DropOldestQueue(BoundedQueue[T]):
    """A bounded FIFO whose `put` drops the oldest item instead of blocking."""

    def __init__(self, maxsize: int, on_drop: Callable[[T], None] | None = None) -> None:
        super().__init__(maxsize)
        self._on_drop = on_drop
        self.dropped = 0

    def put(self, item: T) -> T | None:
        """Add item; when full, drop the oldest one and return it (after calling on_drop)."""
        dropped: T | None = None
        with self._cond:
            if len(self._items) >= self.maxsize:
                dropped = self._items.popleft()
                self.dropped += 1
            self._items.append(item)
            self._cond.notify_all()
        if dropped is not None and self._on_drop is not None:
            self._on_drop(dropped)  # outside the lock: the callback may take other locks
        return dropped

    def wait_for_space(self, timeout: float) -> bool:
        with self._cond:
            return self._cond.wait_for(lambda: len(self._items) < self.maxsize, timeout)

    def get(self, timeout: float) -> T:
        """The oldest item; raises queue.Empty after timeout seconds."""
        with self._cond:
            if not self._cond.wait_for(lambda: len(self._items) > 0, timeout):
                raise queue.Empty
            item = self._items.popleft()
            self._cond.notify_all()
            return item

    def drain(self) -> list[T]:
        """Remove and return everything (shutdown); not counted as drops."""
        with self._cond:
            items = list(self._items)
            self._items.clear()
            self._cond.notify_all()
            return items


class ReorderBuffer(Generic[T]):
    """Gives items back in index order, starting at `start`.

    Producers `push(index, item)` or `skip(index)` (an index that will never come, e.g. a frame
    dropped upstream). When `max_wait_s` is set and the next index has been missing for that long
    while later items wait, it is given up (a live stream must not stall on one lost frame); if it
    arrives afterwards it is dropped as late. `finish()` is called once per producer at the end.
    """

    def __init__(self, start: int = 0, *, producers: int = 1, max_wait_s: float | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._cond = threading.Condition()
        self._next = start
        self._ready: dict[int, T] = {}
        self._skipped: set[int] = set()
        self._producers = producers
        self._max_wait_s = max_wait_s
        self._clock = clock
        self._blocked_since: float | None = None
        self.late = 0  # items that arrived after a newer one was given back

    def push(self, index: int, item: T) -> bool:
        """Add a finished item; False (and counted) when it is older than what was given back."""
        with self._cond:
            if index < self._next or index in self._ready:
                self.late += 1
                return False
            self._ready[index] = item
            self._cond.notify_all()
            return True

    def skip(self, index: int) -> None:
        with self._cond:
            if index >= self._next:
                self._skipped.add(index)
                self._cond.notify_all()

    def finish(self) -> None:
        """One producer is done; when all are, everything left is given back."""
        with self._cond:
            self._producers -= 1
            self._cond.notify_all()

    @property
    def done(self) -> bool:
        """All producers finished and nothing is left to give back."""
        with self._cond:
            return self._producers <= 0 and not self._ready

    def __len__(self) -> int:
        with self._cond:
            return len(self._ready)

    def pop_ready(self, timeout: float = 0.0) -> list[T]:
        """Items that are next in order, oldest first; waits up to timeout for at least one."""
        deadline = self._clock() + timeout
        with self._cond:
            while True:
                out = self._collect()
                if out or self._producers <= 0:
                    return out
                remaining = deadline - self._clock()
                if self._ready and self._max_wait_s is not None and self._blocked_since is not None:
                    remaining = min(remaining, self._blocked_since + self._max_wait_s - self._clock())
                if remaining <= 0:
                    return self._collect()
                self._cond.wait(remaining)

    def _collect(self) -> list[T]:
        out: list[T] = []
        while True:
            if self._next in self._ready:
                out.append(self._ready.pop(self._next))
            elif self._next in self._skipped:
                self._skipped.discard(self._next)
            elif self._ready and (self._producers <= 0 or self._waited_too_long()):
                self._next = min(self._ready)  # give up on the missing ones
                self._skipped = {i for i in self._skipped if i > self._next}
                continue
            else:
                break
            self._next += 1
        if self._ready and self._next not in self._ready:
            if self._blocked_since is None or out:  # a new gap starts now
                self._blocked_since = self._clock()
        else:
            self._blocked_since = None
        return out

    def _waited_too_long(self) -> bool:
        if self._max_wait_s is None:
            return False
        if self._blocked_since is None:
            self._blocked_since = self._clock()
            return False
        return self._clock() - self._blocked_since >= self._max_wait_s
