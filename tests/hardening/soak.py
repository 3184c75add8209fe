"""A soak run of the live pipeline: a fake camera, --no-realtime, the real mesh-swapper engine.

Used by tests/hardening/test_soak.py (2,000 frames) and tests/hardening/soak_live.py (10,000). Memory,
threads and open file descriptors are measured around the pipeline: RSS after `checkpoint`
frames (warm: allocator pools, ONNX Runtime arenas and caches are filled by then) and at the
end; threads and fds before the pipeline starts and after it stops.

replay=True analyses each distinct camera frame once with the real models and then replays
copies of those faces, so the mesh swapper, the pipeline and the sink do all their real work
per frame while the suite skips the per-frame detector and landmark runs (their memory
behaviour is covered by the script, which analyses every frame).
"""

from __future__ import annotations

import copy
import gc
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from livecam.pipeline.contracts import ForwardingEngine


def rss_bytes() -> int:
    import psutil

    return int(psutil.Process().memory_info().rss)


def os_threads() -> int:
    """Every thread of the process, native ones (ONNX Runtime, FFmpeg) included."""
    import psutil

    return int(psutil.Process().num_threads())


def open_fds() -> int:
    try:
        return len(os.listdir("/proc/self/fd"))
    except OSError:  # not Linux
        import psutil

        return int(psutil.Process().num_fds())


class LoopingCamera:
    """A fake camera: the same few frames (a slow pan over a face photo) over and over."""

    def __init__(self, frames: list[np.ndarray], count: int) -> None:
        self.name = "soak camera"
        self.live = False  # --no-realtime: nothing dropped, read as fast as the pipeline goes
        self.fps = 30.0
        self.last_pts: float | None = None
        self._frames = frames
        self._count = count
        self._index = 0
        self.closed = False

    def open(self) -> None:
        pass

    def read(self) -> np.ndarray | None:
        if self._index >= self._count:
            return None
        image = self._frames[self._index % len(self._frames)].copy()
        self.last_pts = self._index / self.fps
        self._index += 1
        return image

    def close(self) -> None:
        self.closed = True


class ReplayEngine(ForwardingEngine):
    """The real engine with each distinct frame analysed once (see the module docstring)."""

    def __init__(self, engine: Any, distinct: int) -> None:
        super().__init__(engine)
        self.distinct = distinct
        self._faces: dict[int, list[Any]] = {}
        self._lock = threading.Lock()

    def analyse(self, packet: Any, track: bool = True) -> None:
        key = packet.index % self.distinct
        with self._lock:
            faces = self._faces.get(key)
        if faces is None:
            self.engine.analyse(packet, track=False)
            with self._lock:
                self._faces[key] = copy.deepcopy(packet.faces)
        else:
            packet.faces = copy.deepcopy(faces)

    def next_source(self) -> str | None:
        return None

    def describe(self) -> str:
        return self.engine.describe() + " (analysis replayed)"


class CountingSink:
    """Discards frames; records RSS once `checkpoint` frames were shown; counts swapped frames."""

    def __init__(self, checkpoint: int) -> None:
        self.name = "soak sink"
        self.checkpoint = checkpoint
        self.written = 0
        self.rss_at_checkpoint: int | None = None
        self.checksum = 0

    def write(self, image_bgr: np.ndarray) -> None:
        self.written += 1
        self.checksum ^= int(image_bgr[image_bgr.shape[0] // 2, image_bgr.shape[1] // 2, 1])
        if self.written == self.checkpoint:
            gc.collect()
            self.rss_at_checkpoint = rss_bytes()

    def poll(self) -> list[str]:
        return []

    def close(self) -> None:
        pass


@dataclass(frozen=True)
class SoakResult:
    frames: int
    seconds: float
    rss_checkpoint: int
    rss_end: int
    threads_before: int  # every OS thread of the process, native ones included
    threads_after: int
    fds_before: int
    fds_after: int
    swapped_first_frame: bool
    describe: str

    @property
    def fps(self) -> float:
        return self.frames / self.seconds if self.seconds else 0.0

    @property
    def rss_growth(self) -> float:
        return self.rss_end / self.rss_checkpoint - 1.0

    def line(self) -> str:
        return (f"{self.frames} frames in {self.seconds:.1f} s ({self.fps:.1f} FPS, {self.describe}); RSS "
                f"{self.rss_checkpoint / 2**20:.1f} MiB after the checkpoint, {self.rss_end / 2**20:.1f} MiB at the "
                f"end ({100 * self.rss_growth:+.2f}%); threads {self.threads_before} -> {self.threads_after}; "
                f"open fds {self.fds_before} -> {self.fds_after}")


def soak_frames(size: tuple[int, int], distinct: int = 30) -> list[np.ndarray]:
    from livecam.commands import demo
    from livecam.media.images import read_image
    from livecam.samples import SAMPLES, sample_path

    photo = read_image(sample_path(demo.TARGET))[..., :3]
    return [demo.clip_frame(photo, i, focus=SAMPLES[demo.TARGET].focus, size=size, frames=distinct)
            for i in range(distinct)]


def run_soak(frames: int, *, checkpoint: int = 500, replay: bool = True, size: tuple[int, int] = (240, 180),
             workers: int = 1, models_dir: Path | None = None) -> SoakResult:
    """Run the live pipeline for `frames` frames and measure (see the module docstring)."""
    from livecam.frame import FramePacket
    from livecam.pipeline.engine import Engine
    from livecam.pipeline.live import LiveRun, run_live_pipeline
    from livecam.samples import sample_path
    from livecam.settings import AnalysisSettings, LiveJob, ProcessingSettings, RuntimeSettings, SwapSettings

    runtime = RuntimeSettings(offline=True, models_dir=models_dir, execution_threads=workers, quiet=True)
    settings = ProcessingSettings(sources=(sample_path("astronaut"),), runtime=runtime,
                                  analysis=AnalysisSettings(det_size=320), swap=SwapSettings(model="mesh"))
    engine = Engine.create(settings, live=True, progress=False)
    images = soak_frames(size)
    probe = FramePacket(index=0, image=images[0].copy())
    engine.analyse(probe, track=False)
    engine.process(probe)
    swapped = bool(probe.faces) and "face_swapper" in probe.timings
    runner: Any = ReplayEngine(engine, len(images)) if replay else engine

    gc.collect()
    threads_before, fds_before = os_threads(), open_fds()
    sink = CountingSink(checkpoint)
    options = LiveRun(LiveJob(processing=settings, degrade=False, max_latency_ms=10_000.0), handle_signals=False)
    started = time.perf_counter()
    result = run_live_pipeline(runner, LoopingCamera(images, frames), sink, options)
    seconds = time.perf_counter() - started
    gc.collect()
    rss_end = rss_bytes()
    deadline = time.monotonic() + 5
    while os_threads() > threads_before and time.monotonic() < deadline:
        time.sleep(0.02)
    return SoakResult(frames=int(result.summary["frames"]), seconds=seconds,
                      rss_checkpoint=sink.rss_at_checkpoint or 0, rss_end=rss_end,
                      threads_before=threads_before, threads_after=os_threads(),
                      fds_before=fds_before, fds_after=open_fds(), swapped_first_frame=swapped,
                      describe=runner.describe())
