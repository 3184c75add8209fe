"""What the mesh swapper prepares once per source photo (PreparedSource, prepare_source): the
triangulation, the texture pyramid (BGR and LAB) with the soft face mask as its fourth channel,
the lips and the shape weights."""

from __future__ import annotations

import logging
from dataclasses import dataclass

import cv2
import numpy as np

from livecam.errors import InputError
from livecam.faces import mesh_indices
from livecam.faces.face import MESH_LANDMARKS
from livecam.faces.source import SourceIdentity
from livecam.processors.mesh.regions import clip_forehead, inner_feather
from livecam.processors.mesh.shape import shape_weights
from livecam.processors.mesh.texture import fill_highlights, fill_lip_gaps, fringe
from livecam.processors.mesh.warp import triangulate

log = logging.getLogger("livecam")

# Mask geometry as fractions of the face size (the larger side of the oval's bounding box).
_FEATHER = 0.07  # width of the soft edge of the face mask
_OVAL_MARGIN = 0.015  # the soft edge ends this far inside the oval
_PYRAMID_MIN = 48  # stop halving the source texture below this face size


@dataclass(frozen=True)
class PreparedSource:
    """Everything the warp needs from one source photo, computed once."""

    triangles: np.ndarray  # (T, 3) int32 indices into the 468 landmarks
    # Face texture crop at full, half, quarter... resolution, BGRA: A is the soft mask of the
    # usable face (inside the oval, below the hairline), warped along with the colours.
    levels: tuple[np.ndarray, ...]
    # The same in 8-bit LAB + A: colour matching then needs one conversion per frame, not two.
    lab_levels: tuple[np.ndarray, ...]
    landmarks: np.ndarray  # (468, 2) float64, corner convention, in level-0 crop pixels
    size: float  # face size (px) at level 0
    # Landmarks on or inside the outer lip ring: moved as one piece (the mouth's opening is
    # expression, and stays the target's).
    lips: np.ndarray
    shape_weight: np.ndarray  # (468,) float64 0..1, see shape_weights
    edges: np.ndarray  # (2E, 2) int64: every mesh edge of `triangles`, once each way


def prepare_source(source: SourceIdentity) -> PreparedSource:
    """Triangulation and texture pyramid of a source face (needs its 468 landmarks)."""
    lm = source.face.landmarks
    if lm is None or len(lm) != MESH_LANDMARKS:
        raise InputError(
            "The mesh swapper needs the source face's 468 FaceMesh landmarks, but the face in "
            f"{_source_name(source)} could not be meshed; use a clear, frontal photo or a "
            "neural --swap-model.")
    oval = mesh_indices.FACE_OVAL
    lm = np.asarray(lm, dtype=np.float64)
    tris = triangulate(lm, oval)
    if len(tris) < 100:
        raise InputError(f"The source face in {_source_name(source)} is too small or too "
                         "distorted to mesh; use a larger, frontal photo.")
    image = source.image
    if image.ndim == 2:
        image = cv2.cvtColor(image, cv2.COLOR_GRAY2BGR)
    image = image[..., :3]  # a BGRA photo's alpha is not part of the face
    h, w = image.shape[:2]
    lo, hi = lm[oval].min(axis=0), lm[oval].max(axis=0)
    size = float((hi - lo).max())
    margin = 0.1 * size + 2.0
    x1, y1 = max(int(lo[0] - margin), 0), max(int(lo[1] - margin), 0)
    x2, y2 = min(int(hi[0] + margin) + 1, w), min(int(hi[1] + margin) + 1, h)
    local = lm - (x1, y1)
    kps = np.asarray(source.face.kps, dtype=np.float64) - (x1, y1)
    outline = clip_forehead(local[oval], kps)
    # A face cut off by the photo's edge: the mask fades out at that edge too (not a hard seam
    # across the target's face), and the user is told that part of the face is missing.
    tol = 0.01 * size
    cut = (x1 == 0 and float(outline[:, 0].min()) < -tol,
           y1 == 0 and float(outline[:, 1].min()) < -tol,
           x2 == w and float(outline[:, 0].max()) > x2 - x1 + tol,
           y2 == h and float(outline[:, 1].max()) > y2 - y1 + tol)
    if any(cut):
        log.warning("warning: the face in source photo %s is cut off by the photo's edge; the "
                    "target's own face shows where the photo ends; use a photo that shows the "
                    "whole face", _source_name(source))
    alpha = inner_feather((y2 - y1, x2 - x1), outline, _OVAL_MARGIN * size,
                           max(2.0, _FEATHER * size), cut)
    alpha *= 1.0 - fringe(image[y1:y2, x1:x2], local, kps, size)
    texture = fill_lip_gaps(fill_highlights(image[y1:y2, x1:x2], local, alpha), local)
    bgra = np.dstack([texture, np.round(alpha * 255.0).astype(np.uint8)])
    levels = [np.ascontiguousarray(bgra)]
    s = size
    while s / 2.0 >= _PYRAMID_MIN and min(levels[-1].shape[:2]) >= 8:
        levels.append(cv2.pyrDown(levels[-1]))
        s /= 2.0
    lab_levels = [np.dstack([cv2.cvtColor(np.ascontiguousarray(lv[..., :3]), cv2.COLOR_BGR2LAB),
                             lv[..., 3]]) for lv in levels]
    ring = local[mesh_indices.LIPS_OUTER].astype(np.float32).reshape(-1, 1, 2)
    lips = np.union1d(mesh_indices.LIPS_OUTER, np.array(
        [i for i, (x, y) in enumerate(local)
         if cv2.pointPolygonTest(ring, (float(x), float(y)), False) >= 0], dtype=np.int64))
    weight = shape_weights(tris, len(lm), oval)
    pairs = np.concatenate([tris[:, [0, 1]], tris[:, [1, 2]], tris[:, [2, 0]]]).astype(np.int64)
    edges = np.unique(np.concatenate([pairs, pairs[:, ::-1]]), axis=0)
    return PreparedSource(tris, tuple(levels), tuple(lab_levels), local, size, lips, weight, edges)


def _source_name(source: SourceIdentity) -> str:
    return str(source.paths[0]) if source.paths else "the source photo"
