"""Soft masks for pasting faces: feathered polygons and the mouth region.

Polygons are Nx2 float32 pixel coordinates (x right, y down) in the image the mask is made
for, with Face's convention: the origin is the top-left corner of the top-left pixel, so pixel
(row r, column c) has its centre at (c + 0.5, r + 0.5). A feathered polygon mask is exactly 1
inside the polygon and fades smoothly to 0 over `feather_px` outside it, so callers that need
an exact interior (the kept mouth) get one and callers that need the fade inside (a face oval)
shrink the polygon first.
"""

from __future__ import annotations

import cv2
import numpy as np

from livecam.faces import mesh_indices

CHIN_INDEX = 152  # lowest point of the face oval in the FaceMesh topology

_ELLIPSE_POINTS = 32
# Without landmarks the lips are guessed from the mouth corners: the ellipse is a little wider
# than the corners and half as tall as wide (a closed or slightly open mouth).
_ELLIPSE_WIDEN = 1.15
_ELLIPSE_ASPECT = 0.5
# Mouth-to-chin distance as a fraction of the eyes-to-mouth distance (frontal face proportions),
# used when there are no landmarks to find the chin.
_MOUTH_TO_CHIN = 0.8
# Size 100 grows the region this fraction of the way from the lower lip to the chin.
_GROW_MAX = 0.8


Box = tuple[int, int, int, int]  # x1, y1, x2, y2 (exclusive)


def _outline_distance(dist: np.ndarray, origin: tuple[int, int], polygon: np.ndarray,
                      near: np.ndarray) -> None:
    """Overwrite `dist` (float32, a box whose top-left pixel is `origin`) where the bool `near`
    is set with the distance of the pixel's centre to the closed outline of `polygon`, at
    sub-pixel precision."""
    rows, cols = np.nonzero(near)
    if len(rows) == 0:
        return
    px = (cols + origin[0] + 0.5).astype(np.float32)[:, None]
    py = (rows + origin[1] + 0.5).astype(np.float32)[:, None]
    a = polygon.astype(np.float32)
    d = np.roll(a, -1, axis=0) - a
    length2 = np.maximum((d * d).sum(axis=1), 1e-12)
    t = np.clip(((px - a[:, 0]) * d[:, 0] + (py - a[:, 1]) * d[:, 1]) / length2, 0.0, 1.0)
    ex, ey = px - a[:, 0] - t * d[:, 0], py - a[:, 1] - t * d[:, 1]
    dist[rows, cols] = np.sqrt((ex * ex + ey * ey).min(axis=1))


def polygon_mask_box(shape_hw: tuple[int, int], polygon: np.ndarray,
                     feather_px: float, exact: bool = False) -> tuple[np.ndarray, Box] | None:
    """The feathered polygon mask of `polygon_mask`, computed only over the box it can be
    non-zero in: (mask of the box, box), or None when that box is empty. `exact`: the fade
    starts at the polygon's outline itself, not at its rasterised pixels, whose steps showed
    (a zigzag of kept dark lip line on a thin closed mouth); worth it for small feathers."""
    h, w = int(shape_hw[0]), int(shape_hw[1])
    pts = np.asarray(polygon, dtype=np.float32).reshape(-1, 2)
    if len(pts) < 3 or h == 0 or w == 0 or not np.all(np.isfinite(pts)):
        return None
    feather = max(float(feather_px), 0.0)
    pad = int(np.ceil(feather)) + 1
    x1 = max(int(np.floor(pts[:, 0].min())) - pad, 0)
    y1 = max(int(np.floor(pts[:, 1].min())) - pad, 0)
    x2 = min(int(np.ceil(pts[:, 0].max())) + pad + 1, w)
    y2 = min(int(np.ceil(pts[:, 1].max())) + pad + 1, h)
    if x2 <= x1 or y2 <= y1:
        return None
    box = np.zeros((y2 - y1, x2 - x1), dtype=np.uint8)
    # OpenCV draws with pixel centres at integers, hence the half-pixel shift; 4 fractional
    # bits keep sub-pixel polygon positions (smooth motion between frames).
    local = np.round((pts - (x1 + 0.5, y1 + 0.5)) * 16.0).astype(np.int32)
    cv2.fillPoly(box, [local], 1, lineType=cv2.LINE_8, shift=4)
    if feather <= 0.0:
        return box.astype(np.float32), (x1, y1, x2, y2)
    # Distance of every outside pixel to the polygon; inside pixels are 0 -> exactly 1.
    dist = cv2.distanceTransform(1 - box, cv2.DIST_L2, cv2.DIST_MASK_5)
    if exact:
        _outline_distance(dist, (x1, y1), pts, (dist > 0.0) & (dist < feather + 1.5))
    ramp = np.clip(1.0 - dist * (1.0 / feather), 0.0, 1.0)
    return ramp * ramp * (3.0 - 2.0 * ramp), (x1, y1, x2, y2)  # smoothstep: no visible edge


def polygon_mask(shape_hw: tuple[int, int], polygon: np.ndarray, feather_px: float) -> np.ndarray:
    """float32 HxW mask in [0, 1]: 1 inside `polygon`, fading to 0 over `feather_px` outside.

    Only the polygon's bounding box (plus the feather) is computed, so a small polygon in a
    large image costs little. Parts of the polygon outside the image are clipped.
    """
    mask = np.zeros((int(shape_hw[0]), int(shape_hw[1])), dtype=np.float32)
    found = polygon_mask_box(shape_hw, polygon, feather_px)
    if found is not None:
        part, (x1, y1, x2, y2) = found
        mask[y1:y2, x1:x2] = part
    return mask


def _down_axis(kps: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
    """Unit vectors along the mouth (left to right corner) and down the face, and the
    eyes-to-mouth distance, from the 5 keypoints."""
    kps = np.asarray(kps, dtype=np.float64)
    along = kps[4] - kps[3]
    width = float(np.linalg.norm(along))
    along = along / width if width > 1e-6 else np.array([1.0, 0.0])
    down = np.array([-along[1], along[0]])
    eyes_to_mouth = (kps[3] + kps[4]) / 2.0 - (kps[0] + kps[1]) / 2.0
    if float(down @ eyes_to_mouth) < 0.0:  # point away from the eyes whatever the roll
        down = -down
    return along, down, float(np.linalg.norm(eyes_to_mouth))


def _grow_down(points: np.ndarray, along: np.ndarray, down: np.ndarray, amount: float) -> np.ndarray:
    """Push the part of a closed ring below its centre line down by up to `amount` px with a
    rounded (elliptic) profile: the corners stay, the middle of the lower edge moves most."""
    if amount <= 0.0:
        return points
    centre = points.mean(axis=0)
    rel = points - centre
    u = rel @ along
    half = max(float(np.abs(u).max()), 1e-6)
    profile = np.sqrt(np.clip(1.0 - (u / half) ** 2, 0.0, 1.0))
    below = (rel @ down) > 0.0
    shift = np.where(below, amount * profile, 0.0)
    return points + shift[:, None] * down[None, :]


def mouth_polygon(landmarks: np.ndarray | None, kps: np.ndarray, size: int) -> np.ndarray:
    """The mouth region to keep from the target, Nx2 float32 frame pixels.

    With FaceMesh landmarks (468x2): the outer lip ring; otherwise an ellipse spanning the two
    mouth-corner keypoints. `size` 0..100 grows the lower part towards the chin (100 reaches
    most of the way down).
    """
    along, down, eyes_to_mouth = _down_axis(kps)
    t = float(np.clip(size, 0, 100)) / 100.0
    if landmarks is not None and len(landmarks) > CHIN_INDEX:
        lm = np.asarray(landmarks, dtype=np.float64)
        ring = lm[mesh_indices.LIPS_OUTER]
        lowest = float((ring @ down).max())
        chin_gap = max(float(lm[CHIN_INDEX] @ down) - lowest, 0.0)
        return _grow_down(ring, along, down, t * _GROW_MAX * chin_gap).astype(np.float32)
    k = np.asarray(kps, dtype=np.float64)
    centre = (k[3] + k[4]) / 2.0
    half_w = 0.5 * float(np.linalg.norm(k[4] - k[3])) * _ELLIPSE_WIDEN
    half_h = half_w * _ELLIPSE_ASPECT
    theta = np.linspace(0.0, 2.0 * np.pi, _ELLIPSE_POINTS, endpoint=False)
    ring = (centre + np.cos(theta)[:, None] * half_w * along + np.sin(theta)[:, None] * half_h * down)
    chin_gap = max(_MOUTH_TO_CHIN * eyes_to_mouth - half_h, 0.0)
    return _grow_down(ring, along, down, t * _GROW_MAX * chin_gap).astype(np.float32)


def area_mask(shape_hw: tuple[int, int], landmarks: np.ndarray | None, kps: np.ndarray,
              areas: tuple[str, ...] | list[str]) -> np.ndarray:
    """float32 HxW, 1 on the union of the named face areas (settings.FACE_MASK_AREAS), 0 elsewhere,
    from points given in this image's pixels: upper-face and lower-face are the face oval
    (FaceMesh landmarks; the whole image without them) above and below the nose tip, mouth is
    `mouth_polygon` at size 0 (the lips, or the ellipse between the mouth corners)."""
    h, w = int(shape_hw[0]), int(shape_hw[1])
    out = np.zeros((h, w), dtype=np.float32)
    if "upper-face" in areas or "lower-face" in areas:
        has_mesh = landmarks is not None and len(landmarks) > CHIN_INDEX
        oval = (polygon_mask((h, w), np.asarray(landmarks)[mesh_indices.FACE_OVAL], 0.0) if has_mesh
                else np.ones((h, w), dtype=np.float32))
        # The nose tip splits the face; rows through its centre, as the crop is upright.
        cut = int(np.clip(np.floor(float(np.asarray(kps)[2, 1])), 0, h))
        if "upper-face" in areas:
            out[:cut] = np.maximum(out[:cut], oval[:cut])
        if "lower-face" in areas:
            out[cut:] = np.maximum(out[cut:], oval[cut:])
    if "mouth" in areas:
        out = np.maximum(out, polygon_mask((h, w), mouth_polygon(landmarks, kps, 0), 0.0))
    return out
