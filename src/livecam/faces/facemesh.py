"""FaceMesh (MediaPipe face landmarks, 468 points) on ONNX Runtime.

Each face is cropped with one affine warp: centred on its box, rotated so that the eye line is
horizontal, 1.5x the box's long side, 192x192, RGB in [0, 1] (a face much larger than the crop is
first shrunk with INTER_AREA, region only, so that the warp does not alias). The model gives 468 (x, y, z) in
crop pixels and a face-presence logit; x, y are mapped back to the frame (z is dropped), and the
5 alignment keypoints are re-derived from the mesh so that this path feeds the same alignment as
SCRFD.
"""

from __future__ import annotations

from typing import Any

import cv2
import numpy as np

from livecam.errors import ModelError
from livecam.faces.align import to_bgr
from livecam.faces.face import MESH_LANDMARKS, Face
from livecam.faces.mesh_indices import (
    FACE_OVAL,
    LEFT_EYE,
    LIPS_INNER,
    LIPS_OUTER,
    MOUTH_LEFT_CORNER,
    MOUTH_RIGHT_CORNER,
    NOSE_TIP,
    RIGHT_EYE,
)

__all__ = ["FaceMesh", "mesh_keypoints", "crop_matrix", "FACE_OVAL", "LIPS_OUTER", "LIPS_INNER",
           "LEFT_EYE", "RIGHT_EYE"]

CROP_SIZE = 192
ROI_SCALE = 1.5
PRESENCE_THRESHOLD = 0.5
# See FaceMesh.landmarks: a crop this far off the mesh's own (roll, size) is taken again.
REFIT_DEGREES = 10.0
REFIT_SIZE = 0.08


def mesh_keypoints(landmarks: np.ndarray) -> np.ndarray:
    """livecam's 5 kps from the 468 mesh points: eye centres (mean of each eye contour, person's
    right eye first, i.e. image-left when frontal), nose tip (mean of 1 and 4), mouth corners
    (61, 291)."""
    lm = np.asarray(landmarks, dtype=np.float32)[:, :2]
    return np.stack([
        lm[RIGHT_EYE].mean(axis=0),
        lm[LEFT_EYE].mean(axis=0),
        lm[NOSE_TIP].mean(axis=0),
        lm[MOUTH_RIGHT_CORNER],
        lm[MOUTH_LEFT_CORNER],
    ]).astype(np.float32)


def roll_difference(kps_a: np.ndarray, kps_b: np.ndarray) -> float:
    """Degrees (0..180) between the eye lines (kps[0] -> kps[1]) of two keypoint sets."""
    (ax, ay), (bx, by) = (np.asarray(k[1], np.float64) - k[0] for k in (kps_a, kps_b))
    return float(abs(np.degrees(np.arctan2(ax * by - ay * bx, ax * bx + ay * by))))


def level_box(landmarks: np.ndarray, kps: np.ndarray) -> np.ndarray:
    """A square box (x1, y1, x2, y2) round the landmarks as the face would be level: centred on
    their extent along and across the eye line, its side their larger extent (on the five test
    photos 0.93 to 1.07 times BlazeFace's box side)."""
    dx, dy = (np.asarray(kps[1], np.float64) - kps[0])
    norm = max(float(np.hypot(dx, dy)), 1e-9)
    axes = np.array([[dx, dy], [-dy, dx]]) / norm  # rows: along, across the eye line
    level = np.asarray(landmarks, np.float64) @ axes.T
    lo, hi = level.min(axis=0), level.max(axis=0)
    centre = ((lo + hi) / 2) @ axes
    half = float((hi - lo).max()) / 2
    return np.concatenate([centre - half, centre + half])


def crop_matrix(face: Face, size: int = CROP_SIZE, scale: float = ROI_SCALE) -> np.ndarray:
    """Frame-to-crop 2x3 matrix: the box centre to the crop centre, the eye line (kps[0] ->
    kps[1]) to the +x axis, scale x the box's long side to `size` pixels."""
    x1, y1, x2, y2 = face.bbox.astype(np.float64)
    centre = np.array([(x1 + x2) / 2, (y1 + y2) / 2])
    side = max(x2 - x1, y2 - y1, 1.0) * scale
    dx, dy = (face.kps[1] - face.kps[0]).astype(np.float64)
    theta = np.arctan2(dy, dx)
    s = size / side
    c, n = np.cos(theta) * s, np.sin(theta) * s
    rot = np.array([[c, n], [-n, c]])
    matrix = np.empty((2, 3), dtype=np.float64)
    matrix[:, :2] = rot
    matrix[:, 2] = size / 2 - rot @ centre
    return matrix


def warp_antialiased(image: np.ndarray, matrix: np.ndarray, size: int) -> np.ndarray:
    """cv2.warpAffine into a size x size crop; when that shrinks the face by more than 1.5x, the
    covered region is first shrunk with INTER_AREA (bilinear warping alone aliases, which moves
    the landmarks by about 1% of the eye distance on a 1000 px photo)."""
    scale = float(np.hypot(matrix[0, 0], matrix[0, 1]))
    if scale > 1 / 1.5:
        return cv2.warpAffine(image, matrix, (size, size), flags=cv2.INTER_LINEAR,
                              borderMode=cv2.BORDER_CONSTANT, borderValue=(0, 0, 0))
    inverse = cv2.invertAffineTransform(matrix)
    corners = np.array([[0, 0], [size, 0], [size, size], [0, size]], np.float64)
    back = corners @ inverse[:, :2].T + inverse[:, 2]
    h, w = image.shape[:2]
    x1, y1 = np.clip(np.floor(back.min(axis=0)).astype(int) - 1, 0, [w, h])
    x2, y2 = np.clip(np.ceil(back.max(axis=0)).astype(int) + 1, 0, [w, h])
    if x2 - x1 < 2 or y2 - y1 < 2:
        return np.zeros((size, size, 3), dtype=image.dtype)
    region = image[y1:y2, x1:x2]
    small_w, small_h = max(1, round((x2 - x1) * scale)), max(1, round((y2 - y1) * scale))
    small = cv2.resize(region, (small_w, small_h), interpolation=cv2.INTER_AREA)
    # frame = origin + (small + 0.5) / f - 0.5 per axis (pixel centres): fold it into the matrix
    fx, fy = small_w / (x2 - x1), small_h / (y2 - y1)
    adjusted = np.empty((2, 3), np.float64)
    adjusted[:, 0] = matrix[:, 0] / fx
    adjusted[:, 1] = matrix[:, 1] / fy
    origin = np.array([x1 + 0.5 / fx - 0.5, y1 + 0.5 / fy - 0.5])
    adjusted[:, 2] = matrix[:, :2] @ origin + matrix[:, 2]
    return cv2.warpAffine(small, adjusted, (size, size), flags=cv2.INTER_LINEAR,
                          borderMode=cv2.BORDER_CONSTANT, borderValue=(0, 0, 0))


class FaceMesh:
    """Adds 468 landmarks to detected faces and re-derives their 5 kps from the mesh."""

    def __init__(self, session: Any, presence_threshold: float = PRESENCE_THRESHOLD) -> None:
        self.session = session
        self.presence_threshold = float(presence_threshold)
        inputs, outputs = session.get_inputs(), session.get_outputs()
        shape = list(inputs[0].shape)
        if shape[1:] != [3, CROP_SIZE, CROP_SIZE] or len(outputs) != 2:
            raise ModelError(
                f"FaceMesh model must take [1,3,{CROP_SIZE},{CROP_SIZE}] and give 2 outputs, got input "
                f"{shape} and {len(outputs)} outputs; use the bundled face_landmark model"
            )
        self._input = inputs[0].name
        # the landmark tensor holds 1404 values, the presence tensor one: tell them apart by size
        sizes = {o.name: int(np.prod([d for d in o.shape if isinstance(d, int)] or [0])) for o in outputs}
        by_size = sorted(sizes, key=sizes.__getitem__)
        if sizes[by_size[1]] != MESH_LANDMARKS * 3:
            raise ModelError(f"FaceMesh landmark output must hold {MESH_LANDMARKS * 3} values, got {sizes}")
        self._outputs = [by_size[1], by_size[0]]

    def landmarks(self, image_bgr: np.ndarray, face: Face) -> tuple[np.ndarray, float]:
        """(468x2 landmarks in frame pixels, presence probability) for one face. The crop comes
        from the face's box and eye line; where the mesh's own level box (level_box) differs from
        it by more than REFIT_DEGREES of roll or REFIT_SIZE of size, the mesh runs again on that
        box. A detector's box and eyes are that far off on a face rolled by 30 to 60 degrees
        (the box up to 15% small), and the landmarks then err twice as much: biden.jpg turned
        by 45, 60 or 135 degrees, 0.08 eye distances from the upright photo's, 0.04 after."""
        lm, presence = self._run(image_bgr, crop_matrix(face))
        if presence < self.presence_threshold or not np.all(np.isfinite(lm)):
            return lm, presence
        kps = mesh_keypoints(lm)
        box = level_box(lm, kps)
        side = max(face.width, face.height, 1.0)
        if roll_difference(face.kps, kps) > REFIT_DEGREES or abs(box[2] - box[0] - side) > REFIT_SIZE * side:
            lm, presence = self._run(image_bgr, crop_matrix(face.with_(bbox=box, kps=kps)))
        return lm, presence

    def _run(self, image_bgr: np.ndarray, matrix: np.ndarray) -> tuple[np.ndarray, float]:
        crop = warp_antialiased(to_bgr(image_bgr), matrix, CROP_SIZE)
        blob = cv2.dnn.blobFromImage(crop, 1.0 / 255.0, swapRB=True)  # NCHW RGB in [0, 1]
        points, logit = self.session.run(self._outputs, {self._input: blob})
        xy = points.reshape(MESH_LANDMARKS, 3)[:, :2].astype(np.float64)
        inverse = cv2.invertAffineTransform(matrix)
        frame_xy = xy @ inverse[:, :2].T + inverse[:, 2]
        logit_value = float(np.clip(np.asarray(logit).reshape(-1)[-1], -80.0, 80.0))
        presence = 1.0 / (1.0 + np.exp(-logit_value))
        return frame_xy.astype(np.float32), presence

    def refine(self, image_bgr: np.ndarray, faces: list[Face]) -> list[Face]:
        """The same faces with `landmarks` set and `kps` from the mesh; a face whose crop the
        model does not see as a face (presence below the threshold) is returned unchanged."""
        out = []
        for face in faces:
            # the converted model has a fixed batch of 1, so faces run back to back
            lm, presence = self.landmarks(image_bgr, face)
            if presence < self.presence_threshold or not np.all(np.isfinite(lm)):
                out.append(face)
                continue
            out.append(face.with_(landmarks=lm, kps=mesh_keypoints(lm)))
        return out
