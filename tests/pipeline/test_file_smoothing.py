"""Smoothing over time in the file pipeline: parallel detection, tracking in frame order.

Fake-detector tests run the real Engine, FaceAnalyser and FaceTracker with a detector that
returns a still face plus seeded noise; the last test runs the embedded models on a real photo.
"""

from __future__ import annotations

import threading
import time
from typing import Any
from pathlib import Path

import cv2
import numpy as np
import pytest

from livecam.faces.analyser import FaceAnalyser, ModelNames
from livecam.faces.face import Face
from livecam.faces.tracking import FaceTracker
from livecam.frame import FramePacket
from livecam.pipeline.engine import Engine
from livecam.pipeline.file import InOrder, OutFrame, run_frames
from livecam.runtime.providers import ProviderChoice
from livecam.settings import AnalysisSettings, ProcessingSettings, RuntimeSettings, SwapSettings
from tests.doubles import InFlight

CPU = ProviderChoice(names=("cpu",), ort_providers=(("CPUExecutionProvider", ()),))
FPS = 30.0
TRUE_KPS = np.array([[52, 40], [76, 40], [64, 52], [55, 64], [73, 64]], np.float32)


def frame(index: int) -> np.ndarray:
    """A blank frame carrying its index in the first pixel (the fake detector reads it)."""
    img = np.full((96, 128, 3), 90, np.uint8)
    img[0, 0, 0], img[0, 0, 1] = index % 256, index // 256
    return img


def index_of(image: np.ndarray) -> int:
    return int(image[0, 0, 0]) + 256 * int(image[0, 0, 1])


class NoisyDetector:
    """A still face with per-frame noise seeded by the frame index (the same whatever thread),
    slow on some frames so that later frames finish detection first."""

    def __init__(self, noise_px: float = 2.0, delay=None) -> None:  # type: ignore[no-untyped-def]
        self.noise_px = noise_px
        self.delay = delay
        self.detected: list[int] = []
        self._lock = threading.Lock()

    def detect(self, image: np.ndarray, max_faces: int = 0) -> list[Face]:
        i = index_of(image)
        if self.delay is not None:
            time.sleep(self.delay(i))
        with self._lock:
            self.detected.append(i)
        noise = np.random.default_rng(i).normal(0.0, self.noise_px, size=(6, 2)).astype(np.float32)
        kps = TRUE_KPS + noise[:5] + noise[5]  # per-point noise plus a common shift
        box = np.array([40, 24, 88, 80], np.float32) + np.tile(noise[5], 2)
        return [Face(bbox=box, score=0.9, kps=kps)]


class RecordingTracker:
    """The real tracker, recording what it was given (calls must come one at a time, in order)."""

    def __init__(self, smoothing: float) -> None:
        self.inner = FaceTracker(smoothing)
        self.params = self.inner.params
        self.calls: list[tuple[int, float]] = []
        self.busy = False

    def reset(self) -> None:
        self.inner.reset()

    def update_marked(self, faces: list[Face], timestamp: float, *args: Any, **kw: Any) -> list[Face | None]:
        assert not self.busy, "two tracking calls at once"
        self.busy = True
        try:
            self.calls.append((round(timestamp * FPS), timestamp))
            time.sleep(0.0005)  # widens the window in which an overlapping call would be seen
            return self.inner.update_marked(faces, timestamp, *args, **kw)
        finally:
            self.busy = False


class Marker:
    """A processor that records the faces it was given and marks the frame."""

    name = "marker"

    def __init__(self) -> None:
        self.faces: dict[int, list[Face]] = {}
        self._lock = threading.Lock()

    def prepare(self, sources: object) -> None:
        pass

    def process(self, packet: FramePacket) -> None:
        with self._lock:
            self.faces[packet.index] = list(packet.faces)
        packet.image[40:50, 100:110] = 255


def fake_engine(smoothing: float, detector: NoisyDetector, tracker: RecordingTracker | None = None) -> Engine:
    analysis = AnalysisSettings(smoothing=smoothing)
    settings = ProcessingSettings(sources=(), runtime=RuntimeSettings(providers=("cpu",)), analysis=analysis)
    if tracker is None and smoothing > 0:
        tracker = RecordingTracker(smoothing)
    analyser = FaceAnalyser(detector, analysis, names=ModelNames("fake"), tracker=tracker)
    return Engine(settings, analyser, [Marker()], [], providers=CPU, swap_model=None)


def frames(n: int, times: list[float] | None = None) -> list[OutFrame]:
    times = times or [i / FPS for i in range(n)]
    return [OutFrame(frame(i), times[i]) for i in range(n)]


def run(engine: Engine, source: list[OutFrame], workers: int = 4, **options: object) -> list[FramePacket]:
    written: list[FramePacket] = []
    run_frames(source, written.append, engine, workers=workers, max_in_flight=2 * workers + 4,
               label=False, **options)  # type: ignore[arg-type]
    return written


def jitter(kps: list[np.ndarray], settle: int = 15) -> float:
    """RMS frame-to-frame movement of the keypoints (px), after the filter has settled."""
    steps = np.diff(np.stack(kps[settle:]), axis=0)
    return float(np.sqrt((steps**2).sum(axis=-1).mean()))


def uneven(i: int) -> float:
    # Early frames slow, every 5th slower: later frames often finish detection first.
    return 0.001 * ((7 * i) % 5) + (0.008 if i % 5 == 0 else 0.0)


def test_smoothing_cuts_jitter_and_keeps_order_with_four_workers() -> None:
    results = {}
    for smoothing in (0.0, 0.5):
        detector = NoisyDetector(delay=uneven)
        engine = fake_engine(smoothing, detector)
        written = run(engine, frames(90))
        assert [p.index for p in written] == list(range(90))
        assert [index_of(p.image) for p in written] == list(range(90))
        assert all(len(p.faces) == 1 and p.timings.get("processed") is None for p in written)
        results[smoothing] = (written, detector, engine)
    raw_written, raw_detector, raw_engine = results[0.0]
    smooth_written, smooth_detector, smooth_engine = results[0.5]
    # Detection really ran out of order, tracking did not.
    assert smooth_detector.detected != list(range(90))
    tracker = smooth_engine.analyser.tracker
    assert [i for i, _ in tracker.calls] == list(range(90))  # type: ignore[union-attr]
    assert raw_engine.analyser.tracker is None and not raw_engine.tracks and smooth_engine.tracks
    # The processors got the smoothed faces, with one stable track id.
    marker = smooth_engine.processors[0]
    assert {f.track_id for fs in marker.faces.values() for f in fs} == {1}  # type: ignore[attr-defined]
    raw = jitter([p.faces[0].kps for p in raw_written])
    smooth = jitter([p.faces[0].kps for p in smooth_written])
    assert raw > 1.0
    assert smooth * 3 <= raw, (raw, smooth)
    # Smoothing must not pull the still face away from where it is.
    mean = np.stack([p.faces[0].kps for p in smooth_written[15:]]).mean(axis=0)
    assert np.abs(mean - TRUE_KPS).max() < 1.0
    assert "track" in smooth_written[-1].timings and "track" not in raw_written[-1].timings


def test_frame_range_outside_frames_pass_through_and_are_not_tracked() -> None:
    detector = NoisyDetector(delay=uneven)
    engine = fake_engine(0.5, detector)
    written = run(engine, frames(40), frame_range=(10, 30))
    assert [p.index for p in written] == list(range(40))
    assert sorted(detector.detected) == list(range(10, 30))
    assert [i for i, _ in engine.analyser.tracker.calls] == list(range(10, 30))  # type: ignore[union-attr]
    for p in written:
        if 10 <= p.index < 30:
            assert p.faces and p.image[45, 105, 0] == 255
        else:
            assert not p.faces and np.array_equal(p.image, frame(p.index))  # untouched
    # An open-ended range tracks to the end.
    detector = NoisyDetector()
    engine = fake_engine(0.5, detector)
    run(engine, frames(20), workers=3, frame_range=(5, None))
    assert [i for i, _ in engine.analyser.tracker.calls] == list(range(5, 20))  # type: ignore[union-attr]


def test_variable_frame_rate_timestamps_feed_the_filter() -> None:
    rng = np.random.default_rng(3)
    times = list(np.cumsum(rng.uniform(0.01, 0.08, size=30)))
    engine = fake_engine(0.5, NoisyDetector())
    run(engine, frames(30, times), workers=3)
    calls = engine.analyser.tracker.calls  # type: ignore[union-attr]
    assert [t for _, t in calls] == pytest.approx(times)


def test_frames_in_flight_stay_bounded_while_waiting_for_order() -> None:
    flight = InFlight()

    def source():  # type: ignore[no-untyped-def]
        for i in range(120):
            flight.made()
            yield OutFrame(frame(i), i / FPS)

    written: list[int] = []

    def write(packet: FramePacket) -> None:
        written.append(packet.index)
        flight.written()

    # Every 10th frame is slow to detect: the frames after it wait for it in the ordered step.
    engine = fake_engine(0.5, NoisyDetector(delay=lambda i: 0.02 if i % 10 == 0 else 0.0))
    stats = run_frames(source(), write, engine, workers=4, max_in_flight=7, label=False)
    assert written == list(range(120)) and stats.frames == stats.processed == 120
    assert flight.peak <= 7


@pytest.mark.parametrize("where", ["detect", "track"])
def test_a_failure_in_detect_or_track_stops_the_run(where: str) -> None:
    class Boom(RuntimeError):
        pass

    class FailingDetector(NoisyDetector):
        def detect(self, image: np.ndarray, max_faces: int = 0) -> list[Face]:
            if where == "detect" and index_of(image) == 7:
                raise Boom("detector exploded")
            return super().detect(image, max_faces)

    class FailingTracker(RecordingTracker):
        def update_marked(self, faces: list[Face], timestamp: float, *args: Any, **kw: Any) -> list[Face | None]:
            if where == "track" and round(timestamp * FPS) == 7:
                raise Boom("tracker exploded")
            return super().update_marked(faces, timestamp, *args, **kw)

    engine = fake_engine(0.5, FailingDetector(), FailingTracker(0.5))
    written: list[int] = []
    with pytest.raises(Boom):
        run_frames(frames(60), lambda p: written.append(p.index), engine,
                   workers=4, max_in_flight=8, label=False)
    assert written == list(range(len(written))) and len(written) <= 7


def test_frames_released_together_are_processed_by_several_workers() -> None:
    """A slow frame holds back the tracking of the frames after it; once it is done they are
    shared among the free workers, not processed one by one by the worker that released them."""
    threads: dict[int, str] = {}

    class SlowMarker(Marker):
        def process(self, packet: FramePacket) -> None:
            threads[packet.index] = threading.current_thread().name
            time.sleep(0.01)
            super().process(packet)

    engine = fake_engine(0.5, NoisyDetector(delay=lambda i: 0.15 if i == 0 else 0.0))
    engine.processors = [SlowMarker()]
    written = run(engine, frames(12), workers=4)
    assert [p.index for p in written] == list(range(12))
    assert len({threads[i] for i in range(1, 8)}) >= 3, threads


def test_in_order_steps_each_index_once_in_order() -> None:
    seen: list[int] = []
    step = InOrder(lambda p: seen.append(p.index), first=3)
    packets = {i: FramePacket(index=i, image=frame(i)) for i in range(3, 9)}
    assert step.add(packets[5]) == [] and step.add(packets[4]) == []
    assert [p.index for p in step.add(packets[3])] == [3, 4, 5]
    assert [p.index for p in step.add(packets[7])] == [] and step.waiting == 1
    assert [p.index for p in step.add(packets[6])] == [6, 7]
    assert seen == [3, 4, 5, 6, 7] and step.waiting == 0


# --------------------------------------------------------------------------- the real models


def test_real_photo_still_face_jitters_less_with_smoothing(tmp_path: Path, faces_dir: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """BlazeFace + FaceMesh on a real photo shaken by a random sub-pixel shift and noise per frame
    (a still face as a camera sees it): the keypoints and landmarks handed to the mesh swapper
    move at least 3x less from frame to frame with --smoothing 0.5 than with 0."""
    monkeypatch.setenv("LIVECAM_CACHE_DIR", str(tmp_path / "cache"))
    photo = cv2.imread(str(faces_dir / "obama.jpg"))
    scale = 320 / photo.shape[1]
    photo = cv2.resize(photo, None, fx=scale, fy=scale, interpolation=cv2.INTER_AREA)
    source = tmp_path / "biden.png"
    biden = cv2.imread(str(faces_dir / "biden.jpg"))
    cv2.imwrite(str(source), cv2.resize(biden, (biden.shape[1] // 2, biden.shape[0] // 2)))
    rng = np.random.default_rng(0)
    shaken = []
    for i in range(50):
        dx, dy = rng.uniform(-1.5, 1.5, size=2)
        img = cv2.warpAffine(photo, np.float32([[1, 0, dx], [0, 1, dy]]), (photo.shape[1], photo.shape[0]),
                             borderMode=cv2.BORDER_REPLICATE)
        img = np.clip(img + rng.normal(0, 3, img.shape), 0, 255).astype(np.uint8)
        shaken.append(OutFrame(img, i / FPS))
    measured = {}
    for smoothing in (0.0, 0.5):
        settings = ProcessingSettings(
            sources=(source,), runtime=RuntimeSettings(providers=("cpu",), models_dir=tmp_path / "models",
                                                       offline=True, quiet=True, execution_threads=2),
            analysis=AnalysisSettings(smoothing=smoothing), swap=SwapSettings(model="mesh"))
        engine = Engine.create(settings, live=False, progress=False)
        assert engine.tracks  # unsmoothed too: each new track confirmed, the one face chosen in order
        written = run(engine, [OutFrame(f.image.copy(), f.time) for f in shaken], workers=2)
        assert [p.index for p in written] == list(range(50))
        assert all(len(p.faces) == 1 and p.faces[0].landmarks is not None for p in written)
        measured[smoothing] = (jitter([p.faces[0].kps for p in written], settle=10),
                               jitter([p.faces[0].landmarks for p in written], settle=10))
    (raw_kps, raw_lm), (smooth_kps, smooth_lm) = measured[0.0], measured[0.5]
    assert raw_kps > 0.5 and raw_lm > 0.5  # the shaking is really seen
    assert smooth_kps * 3 <= raw_kps, measured
    assert smooth_lm * 3 <= raw_lm, measured
