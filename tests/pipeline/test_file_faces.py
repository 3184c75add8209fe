"""Which face a video file swaps without --many-faces: chosen in the ordered tracking step,
among the tracks FaceMesh confirmed, and kept from frame to frame as live keeps it.

Chosen in the detection workers, before tracking, a non-face larger than the face was "the one"
and tracking then rejected it, so the face was never swapped; two faces of near-equal rank
swapped places from frame to frame; at --smoothing 0 nothing was confirmed at all.
"""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np
import pytest

from livecam.faces.analyser import FaceAnalyser, ModelNames
from livecam.faces.face import Face
from livecam.faces.tracking import FaceTracker
from livecam.pipeline.engine import Engine
from livecam.pipeline.file import OutFrame, run_frames
from livecam.settings import AnalysisSettings, ProcessingSettings, RuntimeSettings, SwapSettings
from tests.pipeline.test_file_smoothing import CPU, FPS, Marker, frame, index_of

GLASS = np.array([330.0, 60, 530, 260], np.float32)  # on the flat grey right of the face, larger than it


class WithGlass:
    """The real detector, plus a box it "finds" on flat grey, larger than the face (as BlazeFace
    took a whisky glass for a face): FaceMesh sees no face there."""

    def __init__(self, detector: object) -> None:
        self.inner = detector

    def detect(self, image: np.ndarray, max_faces: int = 0) -> list[Face]:
        x1, y1, x2, y2 = GLASS
        w = x2 - x1
        kps = np.array([[x1 + 0.3 * w, y1 + 0.4 * w], [x1 + 0.7 * w, y1 + 0.4 * w], [x1 + 0.5 * w, y1 + 0.55 * w],
                        [x1 + 0.35 * w, y1 + 0.75 * w], [x1 + 0.65 * w, y1 + 0.75 * w]], np.float32)
        return [*self.inner.detect(image, max_faces), Face(bbox=GLASS, score=0.6, kps=kps)]  # type: ignore[attr-defined]


@pytest.mark.parametrize("smoothing", [0.5, 0.0])
def test_a_non_face_larger_than_the_face_does_not_hide_it_in_any_frame(
        smoothing: float, tmp_path: Path, faces_dir: Path, standin_models: Path) -> None:
    photo = cv2.imread(str(faces_dir / "obama.jpg"))
    face = cv2.resize(photo, (photo.shape[1] * 300 // photo.shape[0], 300), interpolation=cv2.INTER_AREA)[:, :300]
    canvas = np.full((320, 560, 3), 128, np.uint8)
    canvas[10:310, 10:10 + face.shape[1]] = face
    source = tmp_path / "biden.png"
    biden = cv2.imread(str(faces_dir / "biden.jpg"))
    cv2.imwrite(str(source), cv2.resize(biden, (biden.shape[1] // 2, biden.shape[0] // 2)))
    runtime = RuntimeSettings(providers=("cpu",), models_dir=standin_models, offline=True, unverified_models=True,
                              quiet=True, execution_threads=2)
    settings = ProcessingSettings(sources=(source,), frame_processors=("face_swapper",), runtime=runtime,
                                  analysis=AnalysisSettings(smoothing=smoothing),
                                  swap=SwapSettings(model="inswapper_128"))
    engine = Engine.create(settings, live=False, progress=False)
    engine.analyser.detector = WithGlass(engine.analyser.detector)
    (found,) = engine.analyser.detector.inner.detect(canvas)  # type: ignore[attr-defined]
    assert found.area < (GLASS[2] - GLASS[0]) * (GLASS[3] - GLASS[1])  # the glass ranks first
    written = []
    run_frames([OutFrame(canvas.copy(), i / FPS) for i in range(6)], written.append, engine, workers=2,
               max_in_flight=8, label=False)
    assert len(written) == 6
    fx1, fy1, fx2, fy2 = (int(v) for v in found.bbox)
    gx1, gy1, gx2, gy2 = (int(v) for v in GLASS)
    for packet in written:
        changed = np.abs(packet.image.astype(int) - canvas)
        assert changed[fy1:fy2, fx1:fx2].max() > 20, packet.index  # the face swapped in every frame
        assert changed[gy1:gy2, gx1:gx2].max() == 0, packet.index  # the glass left alone


def near_equal(i: int) -> list[Face]:
    """Two faces whose sizes differ by a pixel, the larger one changing every frame."""
    def at(x: float, size: float) -> Face:
        kps = np.array([[x + 0.3 * size, 40], [x + 0.7 * size, 40], [x + 0.5 * size, 55],
                        [x + 0.35 * size, 65], [x + 0.65 * size, 65]], np.float32)
        return Face(bbox=np.array([x, 20, x + size, 20 + size]), score=0.9, kps=kps)

    return [at(0, 60 + (i % 2)), at(64, 61 - (i % 2))]


class Alternating:
    def detect(self, image: np.ndarray, max_faces: int = 0) -> list[Face]:
        return near_equal(index_of(image))


@pytest.mark.parametrize("smoothing", [0.5, 0.0])
def test_two_faces_of_near_equal_rank_do_not_take_turns(smoothing: float) -> None:
    analysis = AnalysisSettings(smoothing=smoothing)
    settings = ProcessingSettings(sources=(), runtime=RuntimeSettings(providers=("cpu",)), analysis=analysis)
    analyser = FaceAnalyser(Alternating(), analysis, names=ModelNames("fake"), tracker=FaceTracker(smoothing))
    marker = Marker()
    engine = Engine(settings, analyser, [marker], [], providers=CPU, swap_model=None)
    frames = [OutFrame(frame(i), i / FPS) for i in range(30)]
    run_frames(frames, lambda packet: None, engine, workers=4, max_in_flight=12, label=False)
    chosen = [[round(float(f.bbox[0])) for f in marker.faces[i]] for i in range(30)]
    assert chosen == [chosen[0]] * 30 and len(chosen[0]) == 1, chosen
