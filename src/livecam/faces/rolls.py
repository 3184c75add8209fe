"""Faces at any roll from a detector trained on upright ones.

BlazeFace finds faces rolled up to about 60 degrees; past that it finds nothing, or an
upside-down face with upright keypoints (eyes where the mouth is), and a swap then pastes the
source upside down or not at all. AnyRoll runs the detector on the frame turned by quarter
turns as well (np.rot90: exact, no resampling), maps each face back to the frame, and keeps the
best-scoring one of faces found in several turns: the turn in which the face is nearest upright,
so its keypoints (person's right eye first) are the right way round.
"""

from __future__ import annotations

from typing import Any, Sequence

import cv2
import numpy as np

from livecam.faces.face import Face

ALL_TURNS = (0, 1, 2, 3)  # quarter turns counter-clockwise (np.rot90's k)
# np.rot90(image, k) as cv2.rotate does it (the same pixels), faster than copying the strided
# view np.rot90 gives: biden.jpg (970x2204) in 1 to 6 ms against 24 to 47.
_CV_TURNS = {1: cv2.ROTATE_90_COUNTERCLOCKWISE, 2: cv2.ROTATE_180, 3: cv2.ROTATE_90_CLOCKWISE}


def unturn(points: np.ndarray, turns: int, width: int, height: int) -> np.ndarray:
    """Points (N, 2) in np.rot90(image, turns) back to the image's (width x height) pixels,
    corner convention."""
    p = np.asarray(points, dtype=np.float32).reshape(-1, 2)
    x, y = p[:, 0], p[:, 1]
    k = turns % 4
    if k == 1:
        return np.stack([width - y, x], axis=1)
    if k == 2:
        return np.stack([width - x, height - y], axis=1)
    if k == 3:
        return np.stack([y, height - x], axis=1)
    return p.copy()


def turn(points: np.ndarray, turns: int, width: int, height: int) -> np.ndarray:
    """Points (N, 2) in an image (width x height) to np.rot90(image, turns): unturn's inverse."""
    k = turns % 4
    return unturn(points, -k, *((height, width) if k % 2 else (width, height)))


def quarter_turns(kps: np.ndarray) -> int:
    """The np.rot90 turns (0..3) that bring a face's eye line (kps[0] -> kps[1]) nearest to
    level, left to right: a face upside down needs 2."""
    dx, dy = (np.asarray(kps[1], np.float64) - kps[0])
    return int(np.round(np.degrees(np.arctan2(dy, dx)) / 90.0)) % 4


def unturn_face(face: Face, turns: int, width: int, height: int) -> Face:
    corners = unturn(face.bbox.reshape(2, 2), turns, width, height)
    box = np.concatenate([corners.min(axis=0), corners.max(axis=0)])
    return face.with_(bbox=box, kps=unturn(face.kps, turns, width, height))


def same_faces(faces: list[Face]) -> list[Face]:
    """Best score first, without the faces whose box centre lies inside a better one's box:
    the same face found again in another turn. Not IoU: a face turned sideways or upside down
    is also found (weakly, with keypoints at the wrong roll) by the other turns, in a box
    shifted by a third of its size: IoU 0.27 to 0.31 on biden.jpg turned 60, 90, 150, 180."""
    kept: list[Face] = []
    for face in sorted(faces, key=lambda f: -f.score):
        cx, cy = (face.bbox[:2] + face.bbox[2:]) / 2
        if not any(k.bbox[0] <= cx <= k.bbox[2] and k.bbox[1] <= cy <= k.bbox[3] for k in kept):
            kept.append(face)
    return kept


class AnyRoll:
    """A detector run at `turns` quarter turns of the frame (see the module docstring)."""

    def __init__(self, detector: Any, turns: Sequence[int] = ALL_TURNS) -> None:
        self.detector = detector
        self.turns = tuple(int(t) % 4 for t in turns)

    def detect(self, image_bgr: np.ndarray, max_faces: int = 0) -> list[Face]:
        return self.detect_turns(image_bgr, self.turns, max_faces)

    def detect_turns(self, image_bgr: np.ndarray, turns: Sequence[int], max_faces: int) -> list[Face]:
        h, w = image_bgr.shape[:2]
        found: list[Face] = []
        for k in turns:
            turned = cv2.rotate(image_bgr, _CV_TURNS[k]) if k else image_bgr
            found += [unturn_face(f, k, w, h) if k else f for f in self.detector.detect(turned)]
        if len(turns) > 1:
            found = same_faces(found)
        return found[:max_faces] if max_faces > 0 else found
