"""The visible label's corner in the file pipeline does not depend on the worker count or timing.

Workers finish frames in any order; the label was drawn as each finished, with the faces of the
frames drawn so far, so a frame that finished before an earlier one with a face near the corner
kept the label in that corner (a one-worker run had moved it), and two runs differed."""

from __future__ import annotations

import random
import threading
import time
from fractions import Fraction
from typing import Any

import numpy as np
import pytest

from livecam.faces.face import Face
from livecam.frame import FramePacket
from livecam.media.provenance import LabelPlacement
from livecam.pipeline.file import OutFrame, retime, run_frames
from tests.doubles import NoModels, read_index, stamp_index
from tests.videos import label_corners

SHAPE = (240, 320, 3)
BOX = np.array([250.0, 170.0, 320.0, 240.0])  # a face in the bottom-right corner
FRAMES = 100  # at 30 fps, numbered (stamped) 0 to 99; at 10 fps every third of them
FACES = (6, 39, 66)  # the frames the face is in (multiples of 3: in the 10 fps input too)


class CornerFaces(NoModels):
    """contracts.FileEngine that finds the face BOX in the input frames FACES (by the index stamped
    in the pixels), after random delays in detection and in processing, long on those frames:
    the frames after one of them are usually finished before it."""

    def __init__(self, tracks: bool, seed: int) -> None:
        self.tracks = tracks
        self._rng = random.Random(seed)
        self._lock = threading.Lock()

    def _pause(self, packet: FramePacket, face_s: float) -> bool:
        with self._lock:
            jitter = self._rng.uniform(0.0, 0.004)
        face = read_index(packet.image) in FACES
        time.sleep(jitter + (face_s if face else 0.0))
        return face

    def analyse(self, packet: FramePacket, track: bool) -> None:
        assert track is False
        face = self._pause(packet, 0.02)
        packet.faces = [Face(bbox=BOX.copy(), score=0.9, kps=np.zeros((5, 2)))] if face else []

    def detect(self, packet: FramePacket) -> None:
        self.analyse(packet, track=False)

    def track(self, packet: FramePacket) -> None:
        pass  # the faces as detected; what matters is that it is called in frame order

    def process(self, packet: FramePacket) -> None:
        self._pause(packet, 0.04)


def _inputs(step: int) -> dict[int, np.ndarray]:
    """Every `step`th of FRAMES grey frames by the number stamped in it."""
    images = {i: np.full(SHAPE, 96, np.uint8) for i in range(0, FRAMES, step)}
    for i, image in images.items():
        stamp_index(image, i)
    return images


def _corners(workers: int, seed: int, tracks: bool, fps: float | None = None, warm: bool = False,
             **options: Any) -> list[str]:
    """The label's corner on every frame run_frames writes from the FRAMES at 30 fps (`fps`:
    from those at 10 fps, retimed to it); `warm`: numbered from 30, after a warm-up that saw the
    face just before (a cluster segment's)."""
    inputs = _inputs(1 if fps is None else 3)
    frames: Any = [OutFrame(image.copy(), i / 30) for i, image in inputs.items()]
    if fps is not None:
        frames = retime(frames, Fraction(fps), Fraction(10))
    label = LabelPlacement()
    if warm:
        label.observe(-0.2, [BOX])
        options["first_index"] = 30
    written: list[np.ndarray] = []
    run_frames(frames, lambda packet: written.append(packet.image.copy()), CornerFaces(tracks, seed),
               workers=workers, max_in_flight=2 * workers + 2, label=label, **options)
    return label_corners(written, [inputs[read_index(image)] for image in written])


CASES = {
    "whole": {},
    "frame-range": {"frame_range": (10, 70)},  # frames 70 on are finished at once, without the engine
    "segment": {"warm": True},
    "fps-repeats": {"fps": 30.0},  # each packet shows on three output ticks
}


@pytest.mark.parametrize("tracks", [False, True], ids=["untracked", "tracked"])
@pytest.mark.parametrize("case", list(CASES))
def test_the_label_corners_are_those_of_one_worker_with_four(tracks: bool, case: str) -> None:
    one = _corners(1, 0, tracks, **CASES[case])
    # the faces moved it (1.37 s: a face came near 0.07 s before) and it went back a second after the last
    assert one[41] == "bottom-left" and one[-1] == "bottom-right"
    for seed in range(1, 4):
        assert _corners(4, seed, tracks, **CASES[case]) == one, seed


class FailsToDetect(CornerFaces):
    """CornerFaces whose detection fails on frame 40, after the frames following it were processed."""

    def analyse(self, packet: FramePacket, track: bool) -> None:
        if read_index(packet.image) == 40:
            time.sleep(0.1)
            raise RuntimeError("detector exploded")
        super().analyse(packet, track)


@pytest.mark.parametrize("tracks", [False, True], ids=["untracked", "tracked"])
def test_an_error_before_a_frame_is_placed_ends_the_run_and_every_worker(tracks: bool) -> None:
    # The workers holding frames 41 on wait for frame 40's corner, which never comes: the error
    # stops the run, and they must see that rather than wait on (they were left running).
    # Tracked, the frames after 40 wait for it in the ordered step (not holding a worker) but
    # those outside the frame range do not.
    before = set(threading.enumerate())
    with pytest.raises(RuntimeError, match="detector exploded"):
        run_frames([OutFrame(image, i / 30) for i, image in _inputs(1).items()], lambda packet: None,
                   FailsToDetect(tracks, 0), workers=4, max_in_flight=10, frame_range=(0, 45))
    assert [t.name for t in set(threading.enumerate()) - before if t.is_alive()] == []
