"""Ctrl-C / SIGTERM at any moment of a file run: when run_frames returns, no pipeline thread may
still be using the reader or the writer (the caller closes them next; FFmpeg crashes if a thread
is still inside it). Found by this suite: on Python <= 3.12 a Thread.join() interrupted by Ctrl-C
marks a running thread as finished, and Ctrl-C could also land inside Thread.start(); both let
run_frames return while the decoder was still decoding (segfaults in the suite)."""

from __future__ import annotations

import _thread
import threading
import time
from dataclasses import dataclass

import numpy as np
import pytest

from livecam.frame import FramePacket
from livecam.pipeline.file import run_frames
from tests.doubles import NoModels


@dataclass
class Frame:
    image: np.ndarray
    time: float
    duration: float | None = None  # pipeline.file.TimedFrame: None is one frame at the rate


class Clock:
    """Frames that take a while to decode and remember when the last one finished."""

    def __init__(self) -> None:
        self.last_activity = 0.0
        self.lock = threading.Lock()

    def frames(self, count: int, cost_s: float):  # type: ignore[no-untyped-def]
        for i in range(count):
            time.sleep(cost_s)
            with self.lock:
                self.last_activity = time.perf_counter()
            yield Frame(np.zeros((8, 8, 3), np.uint8), i / 30)

    def write(self, packet: FramePacket) -> None:
        time.sleep(0.003)
        with self.lock:
            self.last_activity = time.perf_counter()


class Engine(NoModels):
    tracks = False  # contracts.FileEngine: no ordered tracking step

    def analyse(self, packet: FramePacket, track: bool) -> None:
        time.sleep(0.002)

    def process(self, packet: FramePacket) -> None:
        time.sleep(0.002)


@pytest.mark.parametrize("delay_ms", [0, 1, 3, 10, 30, 60, 90, 150])
def test_no_thread_outlives_an_interrupted_run(delay_ms: int) -> None:
    clock = Clock()
    timer = threading.Timer(delay_ms / 1000, _thread.interrupt_main)
    returned = None
    try:
        timer.start()
        run_frames(clock.frames(200, 0.02), clock.write, Engine(), workers=2, label=False)
    except KeyboardInterrupt:
        returned = time.perf_counter()
    finally:
        timer.cancel()
    # The run takes at least 4 s (200 frames at 20 ms) and the interrupt comes within 150 ms: a
    # run that ends without raising it swallowed the user's Ctrl-C.
    assert returned is not None, "run_frames swallowed the interrupt and ran to the end"
    time.sleep(0.3)  # a thread that outlived the run would decode or write again in this time
    assert clock.last_activity <= returned, "a pipeline thread was still working after run_frames returned"
    assert not [t for t in threading.enumerate() if t.name.startswith("livecam-")]
