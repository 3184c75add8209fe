"""The face's regions that the mesh swapper cuts, keeps or measures, from its landmarks: soft
masks inside a polygon, the lip ring and the skin under it, the forehead line, the cheeks, the
eyes' openness and the region kept round a closed eye, the mouth's corners."""

from __future__ import annotations

import cv2
import numpy as np

from livecam.faces import mesh_indices

DETAIL_FEATHER = 0.015  # soft edge round the kept eyes and inner mouth
# Eye openness (mean lid gap over the corner-to-corner width): below LOW the target's eye is
# closed and a whole region round it is kept (the source's open eye, lashes and lids would
# otherwise show round the closed lids); above HIGH only the eye itself is kept.
_EYE_CLOSED_LOW, _EYE_CLOSED_HIGH = 0.06, 0.1
# That region: an ellipse round the eye, half-axes as fractions of the eye's width.
_EYE_REGION = (0.75, 0.4)
# A target's mouth open wider than the source's (the inner lip ring's openness, as
# eye_openness, over the source's by LOW..HIGH) keeps its own mouth corners: a closed-mouth
# source's dark lip line and corner creases, stretched over an open mouth's corners, became
# dark smudges beside them (biden.jpg onto obama2.jpg, astronaut.png).
_MOUTH_OPENER_LOW, _MOUTH_OPENER_HIGH = 0.05, 0.15
# That region: an ellipse round each outer lip corner, half-axes (along the mouth, across) and
# its feather as fractions of the mouth's width.
_MOUTH_CORNER, MOUTH_CORNER_FEATHER = (0.15, 0.12), 0.1
# The source's mask stops this far above its eye line (in eye-to-mouth distances): FaceMesh's
# oval reaches the hairline, and a fringe must not be pasted onto the target's forehead.
_FOREHEAD = 0.6


def inner_feather(shape_hw: tuple[int, int], polygon: np.ndarray, margin: float,
                  feather: float, edges: tuple[bool, bool, bool, bool] = (False,) * 4
                  ) -> np.ndarray:
    """float32 mask: 0 outside `polygon` and within `margin` px of its edge, rising smoothly to
    1 over the next `feather` px inwards (an exact inward offset, whatever the shape). `edges`
    (left, top, right, bottom): array borders that count as the polygon's edge too."""
    inside = np.zeros(shape_hw, dtype=np.uint8)
    cv2.fillPoly(inside, [np.round((polygon - 0.5) * 16.0).astype(np.int32)], 1, shift=4)
    for side, line in zip(edges, (np.s_[:, :1], np.s_[:1, :], np.s_[:, -1:], np.s_[-1:, :])):
        if side:
            inside[line] = 0
    dist = cv2.distanceTransform(inside, cv2.DIST_L2, cv2.DIST_MASK_PRECISE)
    ramp = np.clip((dist - margin) / feather, 0.0, 1.0)
    return ramp * ramp * (3.0 - 2.0 * ramp)


def edge_ramp(shape_hw: tuple[int, int], polygon: np.ndarray, width: float) -> np.ndarray:
    """float32 mask: 0 outside `polygon`, rising linearly to 1 over `width` px inwards. Cheaper
    than inner_feather (it runs per face and frame): a 3x3 distance and two in-place passes."""
    inside = np.zeros(shape_hw, dtype=np.uint8)
    cv2.fillPoly(inside, [np.round((polygon - 0.5) * 16.0).astype(np.int32)], 1, shift=4)
    ramp = cv2.distanceTransform(inside, cv2.DIST_L2, cv2.DIST_MASK_3)
    np.minimum(ramp, width, out=ramp)
    np.multiply(ramp, 1.0 / width, out=ramp, dtype=np.float64)  # in double, rounded once (as cv2.multiply)
    return ramp


def lip_ring(shape_hw: tuple[int, int], landmarks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """uint8 0/1 masks of the lips (between the outer and inner lip contours) and of the
    inside of the inner contour."""
    ring, inner = np.zeros(shape_hw, dtype=np.uint8), np.zeros(shape_hw, dtype=np.uint8)
    for mask, contour in ((ring, mesh_indices.LIPS_OUTER), (inner, mesh_indices.LIPS_INNER)):
        pts = np.round((landmarks[contour] - 0.5) * 16.0).astype(np.int32)
        cv2.fillPoly(mask, [pts], 1, shift=4)
    ring[inner > 0] = 0
    return ring, inner


def _moved_lip_skin(shape_hw: tuple[int, int], outer: np.ndarray, shift_y: float,
                    ring: np.ndarray, opening: np.ndarray) -> np.ndarray:
    """bool: inside the outer lip contour moved `shift_y` px down (up when negative), outside the
    lips and their opening."""
    skin = np.zeros(shape_hw, dtype=np.uint8)
    cv2.fillPoly(skin, [np.round((outer + (0.0, shift_y) - 0.5) * 16.0).astype(np.int32)], 1, shift=4)
    moved: np.ndarray = (skin > 0) & (ring == 0) & (opening == 0)
    return moved


def _corners_row(outer: np.ndarray) -> int:
    """The first pixel row at or below the line between the mouth corners."""
    return max(int(np.ceil((outer[0, 1] + outer[len(outer) // 2, 1]) / 2.0)), 0)


def under_lip(shape_hw: tuple[int, int], outer: np.ndarray, depth: float,
              ring: np.ndarray, opening: np.ndarray) -> np.ndarray:
    """bool: the lower lip (`ring` below the line between the mouth corners) and, with
    `depth` > 0, the skin under it: inside the outer lip contour moved `depth` px down, outside
    the lips and their opening, below that line."""
    below = _moved_lip_skin(shape_hw, outer, depth, ring, opening) if depth > 0.0 else ring > 0
    below[:_corners_row(outer)] = False
    return below


def over_lip(shape_hw: tuple[int, int], outer: np.ndarray, depth: float,
             ring: np.ndarray, opening: np.ndarray) -> np.ndarray:
    """bool: the skin over the upper lip: inside the outer lip contour moved `depth` px up,
    outside the lips and their opening, above the line between the mouth corners."""
    over = _moved_lip_skin(shape_hw, outer, -depth, ring, opening)
    over[_corners_row(outer):] = False
    return over


def cheek_discs(shape_hw: tuple[int, int], kps: np.ndarray, size: float) -> np.ndarray:
    """bool mask of two discs on the cheeks (between each eye and mouth corner, a little
    outwards), where the source's skin colour is sampled."""
    disc = np.zeros(shape_hw, dtype=np.uint8)
    across = kps[1] - kps[0]
    for eye, corner, sign in ((kps[0], kps[3], -1.0), (kps[1], kps[4], 1.0)):
        c = (eye + corner) / 2.0 + sign * 0.12 * across
        cv2.circle(disc, (int(round(c[0] - 0.5)), int(round(c[1] - 0.5))),
                   max(1, int(0.07 * size)), 1, -1)
    return disc > 0


def clip_forehead(oval: np.ndarray, kps: np.ndarray) -> np.ndarray:
    """The oval with its points above `_FOREHEAD` eye-to-mouth distances over the eye line
    pulled down to that line (in the face's own up direction, whatever the roll)."""
    eyes = (kps[0] + kps[1]) / 2.0
    up = eyes - (kps[3] + kps[4]) / 2.0
    dist = float(np.linalg.norm(up))
    if dist < 1e-6:
        return oval
    up = up / dist
    height = (oval - eyes) @ up
    excess = np.maximum(height - _FOREHEAD * dist, 0.0)
    return oval - excess[:, None] * up[None, :]


def eye_openness(ring: np.ndarray) -> float:
    """An eye ring's (mesh_indices.RIGHT_EYE / LEFT_EYE order: lower lid from the outer corner,
    upper lid back) mean gap between facing lid points over its corner-to-corner width."""
    n = len(ring)
    half = n // 2
    width = float(np.linalg.norm(ring[half] - ring[0]))
    if width < 1e-6:
        return 0.0
    gaps = np.linalg.norm(ring[1:half] - ring[n - 1:half:-1], axis=1)
    return float(gaps.mean()) / width


def eye_closed(ring: np.ndarray) -> float:
    """0..1: how closed the eye is (1 below _EYE_CLOSED_LOW openness, 0 above HIGH)."""
    return float(np.clip((_EYE_CLOSED_HIGH - eye_openness(ring))
                         / (_EYE_CLOSED_HIGH - _EYE_CLOSED_LOW), 0.0, 1.0))


def _corner_ellipse(ring: np.ndarray, centre: np.ndarray, half_axes: tuple[float, float],
                    points: int) -> np.ndarray:
    """Nx2: an ellipse at `centre`, along the line through a ring's corners (ring[0] and the one
    half way: an eye's, a lip ring's), its half-axes (along, across) fractions of their distance."""
    a, b = ring[0], ring[len(ring) // 2]
    along = b - a
    width = float(np.linalg.norm(along))
    along = along / max(width, 1e-9)
    across = np.array([-along[1], along[0]])
    t = np.linspace(0.0, 2.0 * np.pi, points, endpoint=False)
    rx, ry = half_axes[0] * width, half_axes[1] * width
    return (centre + np.cos(t)[:, None] * rx * along + np.sin(t)[:, None] * ry * across)


def eye_region(ring: np.ndarray, points: int = 24) -> np.ndarray:
    """The ellipse round an eye (its lids, lashes and the skin next to them), Nx2."""
    return _corner_ellipse(ring, (ring[0] + ring[len(ring) // 2]) / 2.0, _EYE_REGION, points)


def mouth_opener(target_inner: np.ndarray, source_inner: np.ndarray) -> float:
    """0..1: how much wider the target's mouth is open than the source's (inner lip rings,
    mesh_indices.LIPS_INNER order: corner, lower lip, corner, upper lip back, as an eye's)."""
    more = eye_openness(target_inner) - eye_openness(source_inner)
    return float(np.clip((more - _MOUTH_OPENER_LOW) / (_MOUTH_OPENER_HIGH - _MOUTH_OPENER_LOW),
                         0.0, 1.0))


def mouth_corner_regions(outer: np.ndarray, points: int = 16) -> list[np.ndarray]:
    """The ellipses (Nx2 each) round the two corners of an outer lip ring
    (mesh_indices.LIPS_OUTER order: the corners at 0 and half way)."""
    return [_corner_ellipse(outer, corner, _MOUTH_CORNER, points) for corner in (outer[0], outer[len(outer) // 2])]
