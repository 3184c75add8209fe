"""The mesh swapper's eye tell on real photos: the output's eyes open as the target's do, and
its eye region is not the source's eye pasted at the source's opening.

No shared photo has closed eyes (the synthetic case is in test_mesh_tells.py), so the check
uses the frontal faces whose openings differ most. Openings of the inputs are eye aspect
ratios from their FaceMesh landmarks. The OUTPUT's opening cannot be read the same way:
FaceMesh sees an eye about 25 px wide in its 192 px crop, and its lids follow the whole face
more than the eye's pixels (Biden's eyes pasted into Obama's photo at Biden's opening,
EAR 0.256 / 0.276, read as 0.218 / 0.215 against Obama's 0.211 / 0.205). The output's opening
is therefore measured from its pixels: over the two apertures (the target's, and the source's
eye placed on the target's eye corners at its own opening), the output's eye is fitted as a
blend of the target's eye and that pasted source eye; the blend weight w places the output's
opening at (1 - w) x target's + w x source's, so it is nearer the target's when w < 0.5.
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Callable

import cv2
import numpy as np
import pytest

from livecam.faces import mesh_indices
from livecam.faces.face import Face
from livecam.faces.source import SourceIdentity
from livecam.settings import SwapSettings
from tests.processors.test_mesh_swapper import MODELS, swapped

EYES = (mesh_indices.RIGHT_EYE, mesh_indices.LEFT_EYE)
# Eye aspect ratio from six FaceMesh points per eye: corners, two upper and two lower lid points.
EAR_POINTS = ((33, 160, 158, 133, 153, 144), (362, 385, 387, 263, 373, 380))
FRONTAL_YAW = 0.3  # the swapper's own pose gate starts here; further turned, EAR is foreshortened
W = 96  # eye width (corner to corner) in the canonical eye crop, px

Analysed = dict[str, tuple[np.ndarray, Face]]


def points(face: Face) -> np.ndarray:
    """A meshed face's 468 landmarks (every face here is meshed)."""
    assert face.landmarks is not None
    return face.landmarks


def ear(landmarks: np.ndarray) -> np.ndarray:
    """Per eye (person's right, left): mean lid gap of two point pairs over the corner distance."""
    lm = np.asarray(landmarks, dtype=np.float64)
    return np.array([(np.linalg.norm(lm[b] - lm[f]) + np.linalg.norm(lm[c] - lm[e]))
                     / (2.0 * np.linalg.norm(lm[a] - lm[d])) for a, b, c, d, e, f in EAR_POINTS])


def yaw(landmarks: np.ndarray) -> float:
    """-1..1: the nose tip between the two cheek edges (0 frontal)."""
    left, right, nose = landmarks[234], landmarks[454], landmarks[1]
    axis = right - left
    return 2.0 * float((nose - left) @ axis) / float(axis @ axis) - 1.0


@pytest.fixture(scope="module")
def mesh() -> Callable[[np.ndarray], list[Face]]:
    pytest.importorskip("livecam.faces.facemesh")
    from livecam.faces.blazeface import BlazeFaceDetector
    from livecam.faces.facemesh import FaceMesh
    from livecam.runtime.providers import resolve_providers
    from livecam.runtime.sessions import get_session

    if not (MODELS / "face_landmark.onnx").is_file():
        pytest.skip("embedded FaceMesh model not present")
    providers = resolve_providers(("cpu",))
    detector = BlazeFaceDetector(get_session(MODELS / "blazeface_full_range.onnx", providers), variant="full")
    model = FaceMesh(get_session(MODELS / "face_landmark.onnx", providers))

    def run(image: np.ndarray) -> list[Face]:
        """Every meshed face, left to right."""
        faces = [f for f in model.refine(image, detector.detect(image)) if f.landmarks is not None]
        return sorted(faces, key=lambda f: float(f.bbox[0]))

    return run


@pytest.fixture(scope="module")
def photos(faces_dir: Path, mesh: Callable[[np.ndarray], list[Face]]) -> Analysed:
    """Every face in the shared photos, by file name (group6.jpg#i: i-th from the left)."""
    out: Analysed = {}
    for name in ("obama.jpg", "obama2.jpg", "biden.jpg", "astronaut.png", "group6.jpg"):
        image = cv2.imread(str(faces_dir / name))
        assert image is not None, name
        faces = mesh(image)
        assert faces, name
        for i, face in enumerate(faces):
            out[name if len(faces) == 1 else f"{name}#{i}"] = (image, face)
    return out


@pytest.fixture(scope="module")
def faces_dir() -> Path:  # module scope for `photos` (the conftest one is per test)
    from tests.conftest import FACES_DIR
    if not (FACES_DIR / "obama.jpg").is_file():
        pytest.skip(f"real test photos not found at {FACES_DIR} (the shared folder is absent)")
    return FACES_DIR


# ---------------------------------------------------------------- the pasted source eye


def corners(landmarks: np.ndarray, ring: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """An eye's two corners, image-left first."""
    a, b = (np.asarray(landmarks[i], dtype=np.float64) for i in (ring[0], ring[len(ring) // 2]))
    return (a, b) if a[0] <= b[0] else (b, a)


def similarity(a: np.ndarray, b: np.ndarray, a2: np.ndarray, b2: np.ndarray) -> np.ndarray:
    """2x3 similarity taking a to a2 and b to b2."""
    k = complex(*(b2 - a2)) / complex(*(b - a))
    t = complex(*a2) - k * complex(*a)
    return np.array([[k.real, -k.imag, t.real], [k.imag, k.real, t.imag]])


def apply(m: np.ndarray, points: np.ndarray) -> np.ndarray:
    return np.asarray(points, dtype=np.float64) @ m[:, :2].T + m[:, 2]


def paste_source_eyes(source: tuple[np.ndarray, Face], target: tuple[np.ndarray, Face]) -> np.ndarray:
    """The target photo with the source's eyes (lids, lashes, brows' lower edge) pasted as
    they are: each moved, turned and scaled only to sit on the target eye's corners, so at the
    source's own opening. What a swapper with this tell would show."""
    (simg, sface), (timg, tface) = source, target
    out: np.ndarray = timg.astype(np.float32)
    for ring in EYES:
        m = similarity(*corners(points(sface), ring), *corners(points(tface), ring))
        moved = cv2.warpAffine(simg, m, timg.shape[1::-1], flags=cv2.INTER_LINEAR,
                               borderMode=cv2.BORDER_REFLECT).astype(np.float32)
        a, b = corners(points(tface), ring)
        width = float(np.linalg.norm(b - a))
        ellipse = np.zeros(timg.shape[:2], np.float32)
        centre = (int(round((a[0] + b[0]) / 2)), int(round((a[1] + b[1]) / 2)))
        angle = float(np.degrees(np.arctan2(b[1] - a[1], b[0] - a[0])))
        cv2.ellipse(ellipse, centre, (int(0.8 * width), int(0.5 * width)), angle, 0, 360, 1.0, -1)
        weight = cv2.GaussianBlur(ellipse, (0, 0), 0.08 * width)[..., None]
        out = out * (1.0 - weight) + moved * weight
    return np.clip(out + 0.5, 0, 255).astype(np.uint8)


# ---------------------------------------------------------------- the output's eye


def canonical(image: np.ndarray, landmarks: np.ndarray, ring: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Grey crop (W tall, 2W wide) with the eye's corners at (W/2, W/2) and (3W/2, W/2), slightly
    blurred (resampling noise), and the frame-to-crop matrix."""
    m = similarity(*corners(landmarks, ring), np.array([0.5 * W, 0.5 * W]), np.array([1.5 * W, 0.5 * W]))
    grey = cv2.cvtColor(image, cv2.COLOR_BGR2GRAY).astype(np.float32)
    crop = cv2.warpAffine(grey, m, (2 * W, W), flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_REPLICATE)
    return cv2.GaussianBlur(crop, (0, 0), 1.0), m


def aperture(points: np.ndarray) -> np.ndarray:
    """An eye ring's inside (grown by 2 px) in the canonical crop."""
    mask = np.zeros((W, 2 * W), np.uint8)
    cv2.fillPoly(mask, [np.round(points).astype(np.int32)], 1)
    return cv2.dilate(mask, np.ones((5, 5), np.uint8)) > 0


def eye_fit(out: np.ndarray, out_face: Face, source: tuple[np.ndarray, Face],
            target: tuple[np.ndarray, Face], eye: int) -> tuple[float, float, float]:
    """For one eye: the blend weight w of the source's pasted eye in the output's (0: the
    target's eye, 1: the source's as it is), and the output's correlation with the target's eye
    and with the pasted source eye; over the union of the target's and the pasted source's
    apertures. Each image is cropped by its own eye corners (the output's from FaceMesh on the
    output: the swapper moves the kept eyes with the face's shape)."""
    ring = EYES[eye]
    (_, sface), (timg, tface) = source, target
    t, m = canonical(timg, points(tface), ring)
    p, _ = canonical(paste_source_eyes(source, target), points(tface), ring)
    o, _ = canonical(out, points(out_face), ring)
    to_target = similarity(*corners(points(sface), ring), *corners(points(tface), ring))
    region = (aperture(apply(m, points(tface)[ring]))
              | aperture(apply(m, apply(to_target, points(sface)[ring]))))
    t, p, o = (x[region] - x[region].mean() for x in (t, p, o))
    d = p - t
    w = float((o - t) @ d / (d @ d))

    def ncc(a: np.ndarray, b: np.ndarray) -> float:
        return float(a @ b / np.sqrt((a @ a) * (b @ b)))

    return w, ncc(o, t), ncc(o, p)


# ---------------------------------------------------------------- the pairs


def frontal(photos: Analysed) -> list[str]:
    return [k for k, (_, f) in photos.items() if abs(yaw(points(f))) < FRONTAL_YAW]


# Source more open than the target (the tell: open source eyes on a target's lowered lids),
# by the inputs' FaceMesh EAR over all ordered pairs of frontal faces (|yaw| < 0.3: obama2
# and four of the group's faces are turned, their EAR foreshortened up to 0.43):
#   group6.jpg#2 (0.293, 0.295) -> obama.jpg (0.211, 0.205): the most different, both eyes
#   group6.jpg#0 (0.279, 0.288) -> obama.jpg: the next
#   biden.jpg    (0.256, 0.276) -> obama.jpg: the most different between the large portraits
PAIRS = (("group6.jpg#2", "obama.jpg"), ("group6.jpg#0", "obama.jpg"), ("biden.jpg", "obama.jpg"))


def test_real_photos_the_pairs_are_the_frontal_faces_whose_eyes_differ_most(photos: Analysed) -> None:
    keys = frontal(photos)
    assert {"obama.jpg", "biden.jpg", "group6.jpg#0", "group6.jpg#2"} <= set(keys)

    def gap(pair: tuple[str, str]) -> float:  # the smaller of the two eyes' opening differences
        s, t = (ear(points(photos[k][1])) for k in pair)
        return float((s - t).min())

    ranked = sorted(itertools.permutations(keys, 2), key=gap, reverse=True)
    assert ranked[:2] == list(PAIRS[:2])
    assert gap(PAIRS[2]) > 0.04  # Biden's eyes are wider than Obama's on both sides


@pytest.mark.parametrize("pair", PAIRS, ids=["->".join(p) for p in PAIRS])
def test_real_photos_the_output_eyes_open_as_the_targets(photos: Analysed, mesh, pair: tuple[str, str]) -> None:
    source, target = photos[pair[0]], photos[pair[1]]
    identity = SourceIdentity((Path(pair[0]),), source[0], source[1], None)
    out = swapped(SwapSettings(), target[0], [target[1]], identity).image
    found = mesh(out)
    assert found
    out_face = min(found, key=lambda f: float(np.abs(f.bbox - target[1].bbox).sum()))
    for eye in (0, 1):
        w, to_target, to_pasted = eye_fit(out, out_face, source, target, eye)
        # The output's opening, (1 - w) x the target's + w x the source's, is nearer the
        # target's: w measured 0.16..0.45 here, 0.82..1.14 with the source's eyes pasted.
        assert w < 0.5, (eye, w)
        # ...and its eye is the target's, not the source's pasted at the source's opening
        # (target minus pasted correlation measured 0.15..1.06 here, -1.6..-0.34 pasted).
        assert to_target > to_pasted, (eye, to_target, to_pasted)
