"""The mesh swapper's identity geometry: the target's inner face takes the source's proportions."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from livecam.faces import mesh_indices
from livecam.faces.align import estimate_similarity
from livecam.faces.face import Face
from livecam.faces.source import SourceIdentity
from livecam.frame import FramePacket
from livecam.processors import masks
from livecam.processors.mesh.shape import shape_offsets
from livecam.processors.mesh.source import PreparedSource, prepare_source
from livecam.processors.mesh.swapper import MeshSwapper
from livecam.settings import SwapSettings
from tests.processors.test_mesh_swapper import (TEMPLATE, inside, make_face, make_source,
                                                pattern)

RIGHT_EYE, LEFT_EYE = mesh_indices.RIGHT_EYE, mesh_indices.LEFT_EYE
LIPS_OUTER, LIPS_INNER = mesh_indices.LIPS_OUTER, mesh_indices.LIPS_INNER
OVAL = mesh_indices.FACE_OVAL


def wide_eyed(landmarks: np.ndarray, shift: float) -> np.ndarray:
    """The same face with its eyes (and every landmark round them) `shift` px further apart
    each, in the units of a face 100 px wide: another person's eye spacing."""
    lm = landmarks.copy()
    unit = np.ptp(landmarks[OVAL, 0]) / 90.0
    for ring, sign in ((RIGHT_EYE, -1.0), (LEFT_EYE, 1.0)):
        centre = landmarks[ring].mean(0)
        near = np.linalg.norm(landmarks - centre, axis=1) < 12.0 * unit
        lm[near, 0] += sign * shift * unit
    return lm


def source_with(landmarks: np.ndarray, size: int = 300) -> SourceIdentity:
    base = make_source(scale=2.0, size=size)
    face = base.face.with_(landmarks=landmarks.astype(np.float32))
    return SourceIdentity(paths=(Path("synthetic.png"),), image=base.image, face=face,
                          embedding=None)


def eye_gap(lm: np.ndarray) -> float:
    return float(np.linalg.norm(lm[LEFT_EYE].mean(0) - lm[RIGHT_EYE].mean(0)))


def prepared(landmarks: np.ndarray) -> PreparedSource:
    return prepare_source(source_with(landmarks))


def test_same_geometry_gives_no_offsets_and_the_same_pixels() -> None:
    # A scaled, rotated, moved copy of the target's mesh is the same face shape: nothing moves.
    tgt = make_face(2.0, (320, 240), 15.0).landmarks
    assert shape_offsets(prepare_source(make_source()), tgt, 1.0, 230.0) is None
    face = make_face(2.0, (320, 240), 15.0)
    frame = pattern(480, 640, seed=21)
    outs = []
    for strength in (0.0, 1.0):
        swapper = MeshSwapper(SwapSettings(), shape_strength=strength)
        swapper.prepare([make_source()])
        outs.append(swapper.process(FramePacket(index=0, image=frame.copy(), faces=[face])).image)
    np.testing.assert_array_equal(outs[0], outs[1])


@pytest.mark.parametrize("strength", [0.5, 1.0])
def test_offsets_move_the_eyes_towards_the_source_spacing(strength: float) -> None:
    tgt = make_face(2.0, (320, 240)).landmarks.astype(np.float64)
    src = wide_eyed(TEMPLATE.astype(np.float64), 5.0) * 2.0 + (150.0, 150.0)
    off = shape_offsets(prepared(src), tgt, strength, 230.0)
    assert off is not None
    moved = tgt + off
    # The source's spacing, in target pixels (its mesh aligned onto the target's).
    m = estimate_similarity(src, tgt)
    wanted = eye_gap(src @ m[:, :2].T + m[:, 2])
    before, after = eye_gap(tgt), eye_gap(moved)
    assert wanted > before + 10.0
    assert after == pytest.approx(before + strength * (wanted - before), rel=0.05)
    # The oval (and so everything round the face) stays put.
    np.testing.assert_array_equal(off[OVAL], 0.0)


def test_eyes_and_mouth_keep_the_target_expression() -> None:
    # Source: eyes almost shut and mouth wide open, eyes further apart. The target's eyes stay
    # as open as they were (only their place and width change) and its mouth as closed.
    src = wide_eyed(TEMPLATE.astype(np.float64), 4.0)
    for ring in (RIGHT_EYE, LEFT_EYE):
        centre = src[ring].mean(0)
        src[ring, 1] = centre[1] + (src[ring, 1] - centre[1]) * 0.2
    src[LIPS_OUTER, 1] = 26.0 + (src[LIPS_OUTER, 1] - 26.0) * 2.0
    src[LIPS_INNER, 1] = 26.0 + (src[LIPS_INNER, 1] - 26.0) * 3.0
    tgt = make_face(2.0, (320, 240)).landmarks.astype(np.float64)
    moved = tgt + shape_offsets(prepared(src * 2.0 + 150.0), tgt, 1.0, 230.0)

    def height(lm: np.ndarray, ring: np.ndarray) -> float:
        return float(np.ptp(lm[ring, 1]))

    for ring in (RIGHT_EYE, LEFT_EYE, LIPS_INNER):
        assert height(moved, ring) == pytest.approx(height(tgt, ring), rel=0.1)
    assert eye_gap(moved) > eye_gap(tgt) + 10.0


def test_the_kept_target_eyes_move_with_the_geometry_and_nothing_outside_the_face_changes() -> None:
    face = make_face(2.5, (320, 240))
    frame = pattern(480, 640, seed=23)
    # 4 units further out at the source's scale 2: 10 px at the target's 2.5.
    source = source_with(wide_eyed(make_source().face.landmarks.astype(np.float64), 4.0))
    swapper = MeshSwapper(SwapSettings(), shape_strength=1.0)
    swapper.prepare([source])
    out = swapper.process(FramePacket(index=0, image=frame.copy(), faces=[face])).image
    changed = np.any(out != frame, axis=2)
    near = masks.polygon_mask((480, 640), face.landmarks[OVAL], 3) > 0
    assert not np.any(changed & ~near)
    # The target's own right eye (image left) now sits about 10 px further out: its pixels
    # are found there, not where they were.
    eye = face.landmarks[RIGHT_EYE]
    region = inside((480, 640), (eye - eye.mean(0)) * 0.7 + eye.mean(0))
    ys, xs = np.nonzero(region)
    errors = {}
    for dx in range(-16, 4):
        errors[dx] = np.abs(out[ys, xs + dx].astype(int) - frame[ys, xs].astype(int)).mean()
    best = min(errors, key=errors.get)
    assert -12 <= best <= -8
    assert errors[best] < 0.25 * errors[0]


@pytest.mark.parametrize("offset", [(10, 120), (310, 120), (160, 5), (160, 235), (0, 0)])
def test_faces_partly_outside_the_frame_take_the_geometry_too(offset: tuple[int, int]) -> None:
    frame = pattern(240, 320, seed=27)
    source = source_with(wide_eyed(make_source().face.landmarks.astype(np.float64), 6.0))
    face = make_face(1.5, offset)
    outs = []
    for strength in (0.0, 1.0):
        swapper = MeshSwapper(SwapSettings(), shape_strength=strength)
        swapper.prepare([source])
        outs.append(swapper.process(FramePacket(index=0, image=frame.copy(), faces=[face])).image)
    assert outs[1].shape == frame.shape
    assert np.any(outs[1] != frame) and np.any(outs[1] != outs[0])


def test_mouth_mask_keeps_the_target_lips_in_place_with_geometry_on() -> None:
    face = make_face(2.5, (320, 240))
    frame = pattern(480, 640, seed=25)
    lm = make_source().face.landmarks.astype(np.float64)
    lm[LIPS_OUTER, 1] += 6.0
    lm[LIPS_INNER, 1] += 6.0
    source = source_with(wide_eyed(lm, 6.0))
    for size in (0, 60):
        swapper = MeshSwapper(SwapSettings(mouth_mask=size), shape_strength=1.0)
        swapper.prepare([source])
        out = swapper.process(FramePacket(index=0, image=frame.copy(), faces=[face])).image
        kept = inside((480, 640), masks.mouth_polygon(face.landmarks, face.kps, size))
        np.testing.assert_array_equal(out[kept], frame[kept])
        assert np.any(out != frame)


def test_turned_heads_get_a_weaker_transfer() -> None:
    # 2-D offsets between a frontal source and a target turned aside are mostly pose: the more
    # the target's nose tip moves towards one cheek (its yaw), the less its shape changes.
    src = prepared(wide_eyed(TEMPLATE.astype(np.float64), 5.0) * 2.0 + 150.0)
    tgt = make_face(2.0, (320, 240)).landmarks.astype(np.float64)
    gains = []
    for yaw in (0.0, 0.5, 0.9):
        turned = tgt.copy()
        turned[1, 0] += yaw * 90.0  # half the cheek-to-cheek width (180 px) times the yaw
        off = shape_offsets(src, turned, 1.0, 230.0)
        gains.append(0.0 if off is None else eye_gap(turned + off) - eye_gap(turned))
    assert gains[0] > 10.0
    assert 0.0 < gains[1] < 0.8 * gains[0]
    assert gains[2] == 0.0


def test_prepared_source_knows_its_lip_points() -> None:
    prepared = prepare_source(make_source())
    assert set(LIPS_OUTER) <= set(prepared.lips.tolist())
    assert set(LIPS_INNER) <= set(prepared.lips.tolist())
    assert not set(RIGHT_EYE) & set(prepared.lips.tolist())


# ---------------------------------------------------------------- real photos


def embedded_analysis() -> tuple[Any, Any]:
    """The shipped BlazeFace (full range) and FaceMesh on the CPU; a skip where they are absent."""
    from livecam.faces.blazeface import BlazeFaceDetector
    from livecam.faces.facemesh import FaceMesh
    from livecam.runtime.providers import resolve_providers
    from livecam.runtime.sessions import get_session
    from tests.processors.test_mesh_swapper import MODELS

    if not (MODELS / "face_landmark.onnx").is_file():
        pytest.skip("embedded FaceMesh model not present")
    providers = resolve_providers(("cpu",))
    return (BlazeFaceDetector(get_session(MODELS / "blazeface_full_range.onnx", providers), variant="full"),
            FaceMesh(get_session(MODELS / "face_landmark.onnx", providers)))


def proportion_mismatches(faces_dir: Path, strengths: tuple[float, ...]) -> tuple[dict[float, float], float]:
    """obama.jpg onto biden.jpg at each shape strength: the inner-face landmarks FaceMesh finds on
    the result against Obama's, after a similarity on the whole mesh (mean distance, px); and
    Biden's own mismatch. Also scripts/mesh_quality.py's figure."""
    import cv2

    detector, mesh = embedded_analysis()

    def analyse(image: np.ndarray) -> Face:
        faces = [f for f in mesh.refine(image, detector.detect(image)) if f.landmarks is not None]
        assert faces
        return max(faces, key=lambda f: f.area)

    src_img = cv2.imread(str(faces_dir / "obama.jpg"))
    tgt_img = cv2.imread(str(faces_dir / "biden.jpg"))
    src_face, tgt_face = analyse(src_img), analyse(tgt_img)
    source = SourceIdentity((faces_dir / "obama.jpg",), src_img, src_face, None)
    inner = np.concatenate([RIGHT_EYE, LEFT_EYE, LIPS_OUTER, [1, 4, 5, 195, 197, 6, 168]])

    def mismatch(face: Face) -> float:
        lm = face.landmarks.astype(np.float64)
        m = estimate_similarity(src_face.landmarks, lm)
        ref = src_face.landmarks.astype(np.float64) @ m[:, :2].T + m[:, 2]
        return float(np.linalg.norm(lm[inner] - ref[inner], axis=1).mean())

    results = {}
    for strength in strengths:
        swapper = MeshSwapper(SwapSettings(), shape_strength=strength)
        swapper.prepare([source])
        out = swapper.process(FramePacket(index=0, image=tgt_img.copy(), faces=[tgt_face])).image
        results[strength] = mismatch(analyse(out))
    return results, mismatch(tgt_face)


def test_real_photos_the_result_takes_the_source_proportions(faces_dir: Path) -> None:
    """obama.jpg onto biden.jpg: FaceMesh run again on the result finds inner-face proportions
    closer to Obama's than Biden's own were."""
    pytest.importorskip("livecam.faces.facemesh")
    results, before = proportion_mismatches(faces_dir, (0.0, 1.0))
    assert results[1.0] < 0.85 * before
    assert results[1.0] < results[0.0]


# ---------------------------------------------------------------- folds


def folded(before: np.ndarray, after: np.ndarray, triangles: np.ndarray) -> int:
    """Triangles of the mesh that `after` turns over
    in `before` (both (468, 2))."""
    def area2(lm: np.ndarray) -> np.ndarray:
        t = lm[triangles]
        return ((t[:, 1, 0] - t[:, 0, 0]) * (t[:, 2, 1] - t[:, 0, 1])
                - (t[:, 2, 0] - t[:, 0, 0]) * (t[:, 1, 1] - t[:, 0, 1]))
    a0, a1 = area2(before), area2(after)
    return int(np.count_nonzero(a1 * np.sign(a0) < 0))


def test_the_shape_change_never_folds_the_target_mesh() -> None:
    # A source whose lips sit higher than the target's: the lips move up as one piece while the
    # skin round them moves less; without a guard the triangles between fold over, and folded
    # triangles are hidden as turned away: a jagged rim of the target round the swapped lips.
    src = TEMPLATE.astype(np.float64).copy()
    prepared_src = prepared(src * 2.0 + 150.0)
    lips = prepared_src.lips
    src[lips, 1] -= 4.0
    prepared_src = prepared(src * 2.0 + 150.0)
    tgt = make_face(2.0, (320, 240)).landmarks.astype(np.float64)
    off = shape_offsets(prepared_src, tgt, 1.0, 230.0)
    assert off is not None
    assert folded(tgt, tgt + off, prepared_src.triangles) == 0
    assert float(np.abs(off[lips, 1]).max()) > 1.0  # the lips still move towards the source's


def test_real_photos_a_closed_mouth_source_on_an_open_mouth_leaves_no_rim(faces_dir: Path) -> None:
    """astronaut.png (smiling, lips together) onto obama2.jpg (speaking, mouth wide open): the
    lips move up as one piece; the skin round them must follow without folding, and the band
    round the lips' outline has no more edges than the target's own (before the fold guard: 21
    folded triangles, 1.61x the target's edge energy there; after: 0 and 1.25x)."""
    pytest.importorskip("livecam.faces.facemesh")
    import cv2

    from tests.processors.test_mesh_swapper import swapped

    detector, mesh = embedded_analysis()

    def analyse(name: str) -> tuple[np.ndarray, Face]:
        image = cv2.imread(str(faces_dir / name))
        faces = [f for f in mesh.refine(image, detector.detect(image)) if f.landmarks is not None]
        return image, max(faces, key=lambda f: f.area)

    src_img, src_face = analyse("astronaut.png")
    tgt_img, tgt_face = analyse("obama2.jpg")
    source = SourceIdentity((faces_dir / "astronaut.png",), src_img, src_face, None)
    lm = tgt_face.landmarks.astype(np.float64)
    size = float(np.ptp(lm[OVAL], axis=0).max())
    prepared_src = prepare_source(source)
    off = shape_offsets(prepared_src, lm, 0.75, size)
    assert off is not None
    assert folded(lm, lm + off, prepared_src.triangles) == 0

    out = swapped(SwapSettings(), tgt_img, [tgt_face], source).image
    shape = tgt_img.shape[:2]
    g = int(0.03 * size)
    disc = cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (2 * g + 1,) * 2)
    lips = (masks.polygon_mask(shape, lm[LIPS_OUTER], 0) > 0).astype(np.uint8)
    band = (cv2.dilate(lips, disc) > 0) & ~(cv2.erode(lips, disc) > 0)
    mouth = (masks.polygon_mask(shape, lm[LIPS_INNER], 0) > 0).astype(np.uint8)
    band &= ~(cv2.dilate(mouth, cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (4 * g + 1,) * 2)) > 0)

    def edges(image: np.ndarray) -> float:
        grey = cv2.GaussianBlur(cv2.cvtColor(image, cv2.COLOR_BGR2GRAY).astype(np.float32), (0, 0), 1.0)
        return float(np.abs(cv2.Laplacian(grey, cv2.CV_32F))[band].mean())

    assert edges(out) < 1.4 * edges(tgt_img)
