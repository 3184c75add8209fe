"""Test doubles for the live pipeline: numbered synthetic frames (a stand-in camera) and a sink
that keeps what it is given. Moved out of the package: nothing but tests uses them."""

from __future__ import annotations

import threading
import time
from types import MappingProxyType
from typing import Mapping

import numpy as np

from livecam.frame import FramePacket
from livecam.runtime.providers import ProviderChoice

CPU = ProviderChoice(names=("cpu",), ort_providers=(("CPUExecutionProvider", ()),))


def stamp_index(image: np.ndarray, index: int) -> None:
    """Write index into the top-left 4x4 block (B, G, R = three base-256 digits), in place."""
    image[:4, :4] = (index & 0xFF, (index >> 8) & 0xFF, (index >> 16) & 0xFF)


def read_index(image: np.ndarray) -> int:
    """The index stamped by stamp_index (median of the block, robust to light filtering)."""
    block = np.median(image[:4, :4].reshape(-1, 3).astype(np.int64), axis=0)
    return int(block[0]) | (int(block[1]) << 8) | (int(block[2]) << 16)


class InFlight:
    """Counts the frames made and not yet written, and the most at once: what a file pipeline's
    memory bound promises (made() as the decoder yields a frame, written() as it leaves)."""

    def __init__(self) -> None:
        self.alive = self.peak = 0
        self._lock = threading.Lock()

    def made(self) -> None:
        with self._lock:
            self.alive += 1
            self.peak = max(self.peak, self.alive)

    def written(self) -> None:
        with self._lock:
            self.alive -= 1


class NoModels:
    """What a fake engine tells about its models (contracts.FileEngine): none, on the CPU; no
    lanes (its workers share it) and no face tracks to forget."""

    model_names: Mapping[str, str] = MappingProxyType({})
    providers = CPU

    def lanes(self) -> list[object]:
        return []

    def reset_tracking(self) -> None:
        pass


class FlipEngine(NoModels):
    """contracts.FileEngine without models: finds no face and inverts a patch (rows 100-107,
    columns 0-7) away from the index stamp, so a processed frame is told from its input."""

    tracks = False

    def analyse(self, packet: FramePacket, track: bool) -> None:
        packet.faces = []

    def process(self, packet: FramePacket) -> None:
        packet.image[100:108, :8] = 255 - packet.image[100:108, :8]


class SyntheticSource:
    """Numbered frames (index stamped into the pixels) at a set rate, like a camera would give."""

    def __init__(self, width: int = 64, height: int = 48, fps: float = 30.0, frames: int | None = None,
                 *, live: bool = True, realtime: bool = True, image: np.ndarray | None = None) -> None:
        self.name = "synthetic camera"
        self.width, self.height, self.fps = width, height, fps
        self.frames = frames
        self.live = live
        self.realtime = realtime
        self._base = image
        self._index = 0
        self._next_due = 0.0
        self.closed = False

    def open(self) -> None:
        self._next_due = time.perf_counter()

    def read(self) -> np.ndarray | None:
        if self.frames is not None and self._index >= self.frames:
            return None
        if self.realtime:
            delay = self._next_due - time.perf_counter()
            if delay > 0:
                time.sleep(delay)
            self._next_due = max(self._next_due + 1.0 / self.fps, time.perf_counter() - 1.0 / self.fps)
        if self._base is not None:
            image = self._base.copy()
        else:
            image = np.full((self.height, self.width, 3), 96, dtype=np.uint8)
        stamp_index(image, self._index)
        self._index += 1
        return image

    def close(self) -> None:
        self.closed = True


class MemorySink:
    """Keeps copies of the frames written (`keep` bounds how many)."""

    name = "memory"

    def __init__(self, keep: int | None = None) -> None:
        self.frames: list[np.ndarray] = []
        self.keep = keep
        self.written = 0
        self.closed = False
        self.keys: list[str] = []  # keys a test wants poll() to report

    def write(self, image_bgr: np.ndarray) -> None:
        self.written += 1
        self.frames.append(image_bgr.copy())
        if self.keep is not None and len(self.frames) > self.keep:
            del self.frames[0]

    def poll(self) -> list[str]:
        keys, self.keys = self.keys, []
        return keys

    def close(self) -> None:
        self.closed = True
