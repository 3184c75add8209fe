"""Live marking within the budget (marks.live_marker): no frame waits for the encoder, every frame
gets the newest change, a recording's first frame is marked with its own (and a later one
when the newest change grows old), the encoder runs no
more often than the refresh allows, and the governor's first step slows it; a change computed
on one frame of a moving clip still reads back a few frames later; Residual.add_to gives the
pixels that rounding frame + change gives."""

from __future__ import annotations

import threading
import time
from typing import Any

import cv2
import numpy as np
import pytest

from livecam.marks import watermark as wm
from livecam.marks.live_marker import OWN_CHANGE_S, SLOW_REFRESH_S, LiveMarker
from livecam.models.store import ModelStore
from livecam.pipeline.live import LivePipeline
from livecam.runtime.providers import resolve_providers
from livecam.samples import sample_path
from livecam.settings import RuntimeSettings
from tests.doubles import MemorySink, SyntheticSource
from tests.pipeline.test_live import FakeEngine, opts


class FakeWatermarker:
    """residual() gives a change of +3 levels everywhere, after `gate` opens (counted)."""

    def __init__(self, gate: threading.Event | None = None) -> None:
        self.gate = gate
        self.runs = 0

    def residual(self, image: np.ndarray) -> wm.Residual:
        if self.gate is not None:
            self.gate.wait(60)
        self.runs += 1
        return wm.Residual(np.full((4, 4, 3), 3.0, np.float32))


def frame(value: int = 90) -> np.ndarray:
    return np.full((24, 32, 3), value, np.uint8)


def wait_until(condition: Any, what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.01)


def test_no_frame_waits_for_the_encoder_and_then_every_frame_is_marked() -> None:
    gate = threading.Event()
    fake = FakeWatermarker(gate)
    marker = LiveMarker(fake, refresh_s=60.0)  # type: ignore[arg-type]
    try:
        passed = [marker(i, frame()) for i in range(5)]  # the encoder is stuck: frames go on unmarked
        assert all((p == 90).all() for p in passed) and marker.unmarked == 5
        gate.set()
        wait_until(lambda: fake.runs == 1, "the encoder's first change")
        wait_until(lambda: marker.encoder_cpu_ms, "the change to be taken up")
        marked = [marker(i, frame()) for i in range(5, 35)]
        assert all((m == 93).all() for m in marked)  # every frame, with the newest change
        assert fake.runs == 1  # not again within refresh_s
    finally:
        marker.close()


def test_a_recording_marks_its_first_frame_with_its_own_change() -> None:
    fake = FakeWatermarker()
    marker = LiveMarker(fake, recording_fps=30.0, refresh_s=60.0)  # type: ignore[arg-type]
    try:
        assert (marker(0, frame()) == 93).all() and marker.unmarked == 0
    finally:
        marker.close()


def test_a_recording_gets_a_frame_with_its_own_change_when_the_encoder_falls_behind() -> None:
    fake = FakeWatermarker()
    every = round(OWN_CHANGE_S * 10)  # frames of a 10 FPS recording
    # refresh_s 60: the encoder thread is never asked within the test (as if starved by a busy CPU)
    marker = LiveMarker(fake, recording_fps=10.0, refresh_s=60.0)  # type: ignore[arg-type]
    try:
        assert (marker(0, frame()) == 93).all() and fake.runs == 1  # the first frame: its own
        assert all((marker(i, frame()) == 93).all() for i in range(1, every))
        assert fake.runs == 1  # the newest change reused
        assert (marker(every, frame()) == 93).all() and fake.runs == 2  # OWN_CHANGE_S of frames: its own again
    finally:
        marker.close()


class GatedByFrame:
    """residual() gives a change of +1 level per index stamped in the frame's first pixel; frame 1's
    encoder run waits for `gate`."""

    def __init__(self) -> None:
        self.gate = threading.Event()
        self.done: list[int] = []

    def residual(self, image: np.ndarray) -> wm.Residual:
        index = int(image[0, 0, 0]) - 90
        if index == 1:
            self.gate.wait(60)
        self.done.append(index)
        return wm.Residual(np.full((4, 4, 3), float(index + 1), np.float32))


def test_a_late_encoder_result_does_not_replace_a_newer_own_change() -> None:
    fake = GatedByFrame()
    every = round(OWN_CHANGE_S * 10)
    marker = LiveMarker(fake, recording_fps=10.0, refresh_s=0.0)  # type: ignore[arg-type]
    try:
        assert (marker(0, frame(90)) == 91).all()  # its own change (+1)
        marker(1, frame(91))  # offered to the encoder thread, which is held up
        assert (marker(every, frame(90 + every)) == 90 + every + every + 1).all()  # own change, +every+1
        fake.gate.set()
        wait_until(lambda: 1 in fake.done and len(marker.encoder_cpu_ms) == 3, "the late encoder result")
        assert (marker(every + 1, frame(90)) == 90 + every + 1).all()  # still the newer own change
    finally:
        marker.close()


def test_the_governor_step_stretches_the_refresh_and_is_undone() -> None:
    marker = LiveMarker(FakeWatermarker(), refresh_s=1.0)  # type: ignore[arg-type]
    calls: list[bool] = []
    try:
        pipeline = LivePipeline(FakeEngine(), SyntheticSource(frames=1), MemorySink(),
                                opts(watermark=marker, watermark_slower=calls.append))
        first = pipeline.governor.steps[0]
        assert first.name == "watermark refresh slower"  # before anything that changes the picture
        first.apply()
        first.undo()
        assert calls == [True, False]
        pipeline.sink.close()  # the marking thread the pipeline started
        marker.slower(True)
        assert marker.refresh_s == SLOW_REFRESH_S
        marker.slower(False)
        assert marker.refresh_s == 1.0
    finally:
        marker.close()
    plain = LivePipeline(FakeEngine(), SyntheticSource(frames=1), MemorySink(), opts())
    assert all(s.name != "watermark refresh slower" for s in plain.governor.steps)


def test_add_to_matches_rounding_the_frame_plus_the_change() -> None:
    rng = np.random.default_rng(1)
    small = rng.normal(0, 2.5, (16, 28, 3)).astype(np.float32)
    image = rng.integers(0, 256, (90, 160, 3), dtype=np.uint8)
    image[:5] = 0
    image[-5:] = 255  # saturation at both ends
    expected = np.clip(np.rint(image + np.rint(cv2.resize(small, (160, 90), interpolation=cv2.INTER_LINEAR))),
                       0, 255).astype(np.uint8)
    residual = wm.Residual(small)
    assert np.array_equal(residual.add_to(image), expected)
    alpha = np.dstack([image, np.full((90, 160), 77, np.uint8)])
    out = residual.add_to(alpha)
    assert np.array_equal(out[:, :, :3], expected) and (out[:, :, 3] == 77).all()


@pytest.fixture(scope="module")
def watermarker() -> wm.Watermarker:
    return wm.Watermarker.open(ModelStore(RuntimeSettings(), progress=False), resolve_providers(["cpu"]), 1)


def test_a_change_reused_on_later_frames_of_a_moving_clip_reads_as_marked(watermarker: wm.Watermarker) -> None:
    from livecam.commands.bench import GeneratedClip

    # the whole 720p frame drifts about 3 px a frame (a camera shake); measured: read with 0 of
    # 32 bits off up to 4 frames (13 px) later, 7 off at 6 frames, unreadable at 12
    clip = GeneratedClip(cv2.imread(str(sample_path("grace_hopper"))), (1280, 720), frames=24)
    residual = watermarker.residual(clip.image(0))
    later = clip.image(3)
    assert not watermarker.read(later).marked
    reading = watermarker.read(residual.add_to(later))
    assert reading.marked, reading.errors
