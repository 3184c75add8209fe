"""The embedded mesh swapper: a classical face swap driven by 468 FaceMesh landmarks.

Once per source photo: a Delaunay triangulation of its landmarks inside the face oval and a
small pyramid of its face texture. Per target face: every source triangle is mapped onto the
matching target triangle (a piecewise-affine warp) in ONE cv2.remap over the face's region of
interest. The sampling maps are built without a Python loop over triangles: all triangles are
rasterised together on a coarse grid (candidate grid points from every triangle's bounding box,
one vectorised barycentric test), each grid point takes its triangle's affine map, and the grid
is upsampled to full resolution (a piecewise-affine map is continuous, so linear upsampling is
exact away from triangle edges and off by a fraction of a pixel on them).

The source's soft face mask (its oval, cut below the hairline, feathered inwards) is the texture's
fourth channel, so it is warped with the colours and its edge lands inside the target's oval;
the weight is also bounded by the target's own oval at full resolution (the coarse grid alone
could leave grid-cell steps past it where a turned-away side is squeezed), so nothing outside
the oval changes. A source face cut off by its photo's edge fades out at that edge.
The warped face is colour-matched to the target's skin (LAB mean/std, then the target's
low-frequency lighting), triangles turned away from the camera fade out, and the target's eyes
and inner mouth (and, with --mouth-mask, its lips and more; on a mouth open wider than the
source's, its mouth corners) are kept so that blinks, gaze and speech follow the target. All
work is inside the face's region of interest.

The tells of a classical swap are taken from the target too: the source's forehead is used only
where it is skin (a fringe falls back to the target's forehead), a closed eye keeps the whole
region round it, a target's glasses frame (thin dark lines over the eye band) stays, the
source's white spots (a nose highlight, white hair at a temple) are filled in, the lips
keep their colour, and the source's sharpness is matched to the target's.

Identity is more than texture: before the warp, the target's inner landmarks (eyes, brows,
nose, mouth, cheeks; not the oval) move towards the source's proportions (shape_offsets), the
source texture is warped onto the moved landmarks, and the target's own pixels that show
through (its kept eyes and inner mouth) are warped from the old landmarks to the new ones with
the same triangles and grid, so the face's features sit where the source person has them while
the outline, pose and expression stay the target's. `shape_strength` (0..1) sets how far;
--blend scales it too (the opacity of the whole swap: 0 leaves the frame exactly as it was).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any, Sequence

import cv2
import numpy as np

from livecam.errors import InputError
from livecam.faces import mesh_indices
from livecam.faces.face import MESH_LANDMARKS, Face
from livecam.faces.rolls import quarter_turns, turn
from livecam.faces.source import SourceIdentity
from livecam.frame import FramePacket
from livecam.processors import color, masks
from livecam.processors.base import presence, usable
from livecam.settings import SwapSettings

log = logging.getLogger("livecam")

# Grid step: about this many grid cells across the face; small faces get a full-res grid.
_GRID_CELLS = 72
_MAX_STEP = 8
# Mask geometry as fractions of the face size (the larger side of the oval's bounding box).
_FEATHER = 0.07  # width of the soft edge of the face mask
_OVAL_MARGIN = 0.015  # the soft edge ends this far inside the oval
# The target's own oval bounds the weight too, rising from 0 on it over this width: the warp
# is evaluated on a coarse grid, which on a side turned away (squeezed into a few pixels) would
# otherwise cut the source's soft edge off in grid-cell steps, partly outside the face.
_TARGET_EDGE = 0.02
_DETAIL_FEATHER = 0.015  # soft edge round the kept eyes and inner mouth
# Eye openness (mean lid gap over the corner-to-corner width): below LOW the target's eye is
# closed and a whole region round it is kept (the source's open eye, lashes and lids would
# otherwise show round the closed lids); above HIGH only the eye itself is kept.
_EYE_CLOSED_LOW, _EYE_CLOSED_HIGH = 0.06, 0.1
# That region: an ellipse round the eye, half-axes as fractions of the eye's width.
_EYE_REGION = (0.75, 0.4)
_MOUTH_FEATHER = 0.04  # soft edge round the --mouth-mask region (lips and below)
# A target's mouth open wider than the source's (the inner lip ring's openness, as
# eye_openness, over the source's by LOW..HIGH) keeps its own mouth corners: a closed-mouth
# source's dark lip line and corner creases, stretched over an open mouth's corners, became
# dark smudges beside them (biden.jpg onto obama2.jpg, astronaut.png).
_MOUTH_OPENER_LOW, _MOUTH_OPENER_HIGH = 0.05, 0.15
# That region: an ellipse round each outer lip corner, half-axes (along the mouth, across) and
# its feather as fractions of the mouth's width.
_MOUTH_CORNER, _MOUTH_CORNER_FEATHER = (0.15, 0.12), 0.1
# The lips' lightness is measured this many px inside their contours (FaceMesh's are off by a
# pixel or two at any face size; an inset growing with the face left little of a large face's
# thin lips, and the measure jumped with the roll).
_LIP_INSET = 2
# The lips' own colour shift (see _match_lips) is blurred across their outline by a Gaussian of
# this fraction of the face size, at least MIN px.
_LIP_EDGE, _LIP_EDGE_MIN = 0.01, 0.8
# ...then the lower lip's lighting, and the skin's under it down to _UNDER_LIP x face size, is
# the target's there (their LAB blurred by a Gaussian of _LIP_LIGHT x face size, at least 1
# px): a source lit from the front (obama2.jpg) has a pale top and a shadowed rim on its lower
# lip and a shadow under it, which one shift for the whole lip ring carried onto the target.
# (The upper lip's too moved FaceMesh's lips on obama.jpg-on-biden.jpg towards Biden's: the
# proportions test in tests/processors/test_mesh_identity.py went over its bound.)
_LIP_LIGHT, _UNDER_LIP = 0.01, 0.04
# Thin dark lines (a black-hat with a disc of _LINE_SIZE x face size) under the lower lip, down
# to _LINE_DEPTH x face size, that the warped source has beyond the target's are lightened away:
# the source's shadow under the lip, its low frequencies matched, was left a thin dark line.
_LINE_SIZE, _LINE_DEPTH = 0.02, 0.06
# Glasses: thin dark lines (a morphological black-hat with a square this fraction of the face
# size) that the target has and the warped source lacks, by LOW..HIGH grey levels, are kept
# from the target over the eye band; only when the band between the eyes (a glasses bridge)
# has such a line across at least _BRIDGE_COLUMNS of its width.
_FRAME_WIDTH = 0.04
_FRAME_LOW, _FRAME_HIGH = 12.0, 30.0
_BRIDGE_COLUMNS = 0.6
# Low-frequency lighting taken from the target with colour matching on (see color.match_shading):
# strength, and the blur radius as a fraction of the face size.
_SHADING = 0.7
_SHADING_RADIUS = 0.1
# ...and the low-frequency a and b, by this much: regional colour (warm brows and lids in the
# target, cooler ones in the source) would otherwise leave pale grey patches round the eyes.
_SHADING_CHROMA = 1.0
# ...and again, a and b only, at this finer blur radius (fraction of the face size), only where
# the face is greyer than the target round it (never taking colour away, which made a pale
# target's folds grey): the source's stubble (greyer than its other skin of the same lightness)
# left grey patches on a woman's chin and upper lip, smaller than the broad match sees. (At
# 0.03 the turned-face parity of tests/faces/test_rolls.py went over its bound.)
_SHADING_FINE = 0.05
# ...and, as the two faces are turned apart (turned_apart), their lightness at that radius too,
# darkening only, by up to this much: a frontally lit source's light cheeks, smaller than the
# broad match sees, stayed on a face turned away (group6.jpg's two most turned faces' cheeks
# 8 levels lighter than their own under obama.jpg). Lightening too, or all the way, took more
# of the source's modelling away: the recogniser's transfer on turned faces fell.
_TURNED_DARKEN = 0.5
# The face's rim (this fraction of the face size inside the oval) takes the target's own
# low-frequency colour there fully (color.match_shading on the rim alone, at this blur): the
# skin statistics leave the rim out, so where FaceMesh puts a turned-away side's outline along
# the nose (group6.jpg's pale woman) her shadowed cheek stayed beside bright swapped skin.
_RIM, _RIM_RADIUS = 0.03, 0.02
_PYRAMID_MIN = 48  # stop halving the source texture below this face size
# Sharpness: the warped source (a softer photo, or a level of its pyramid) is unsharpened
# (Gaussian of this sigma, px) until its Laplacian variance on the skin matches the target's,
# by at most this gain (noise is sharpened too; the gain solves the Laplacian variance
# exactly, see _unsharp_gain); one sharper than the target is softened
# (a negative gain: towards the blurred copy) by at most MIN.
_DETAIL_SIGMA = 1.0
_DETAIL_GAIN_MIN, _DETAIL_GAIN_MAX = -0.8, 3.0
_DETAIL_FLAT = 4.0  # a target this flat (overexposed, synthetic) has no detail to match
# The source's mask stops this far above its eye line (in eye-to-mouth distances): FaceMesh's
# oval reaches the hairline, and a fringe must not be pasted onto the target's forehead.
_FOREHEAD = 0.6
# Below that line the source's forehead is taken only where it is skin: pixels further than
# _SKIN_DIST (in the cheeks' own per-channel LAB standard deviations, floored at _SKIN_STD_MIN)
# from the source's cheek skin are not skin, and those of them joined to the hair round the
# face (outside the oval) and lying above _HAIR_FROM eye-to-mouth distances over the eye line
# are the fringe: the target's forehead shows there, feathered over _HAIR_FEATHER x face size.
# The brows stay the source's. (From 0.1 instead of 0.3, hair at the temples went too, and the
# independent recogniser (scripts/eval_identity.py) saw less of the source: 0.07 vs 0.13.)
_SKIN_DIST = 3.5
_SKIN_STD_MIN = np.array([6.0, 3.0, 3.0])
_HAIR_FROM = 0.3
_HAIR_FEATHER = 0.03
_BROW_MARGIN = 0.02  # the brows (FaceMesh outlines) grown by this fraction of the face size
# White spots on the source's skin (see _fill_highlights): this many standard deviations lighter
# than its skin, and under this fraction of its mean chroma.
_SPECULAR_Z = 2.0
_SPECULAR_CHROMA = 0.6
# ...or, within _SPECULAR_NOSE face sizes of the nose tip, a shine on coloured skin (Biden's
# pink nose tip: 0.8 of the skin's chroma, 2.1 standard deviations, so the test above missed
# it and a bright target got a white nose tip): LOCAL grey levels lighter than the skin round
# it (Gaussian of _SPECULAR_RADIUS x face size), under LOCAL_CHROMA of the chroma round it,
# and LOCAL_Z standard deviations over the mean. Only the nose: elsewhere this also takes
# the source's own light skin texture (freckles' gaps, a cheek's sheen).
_SPECULAR_LOCAL, _SPECULAR_LOCAL_CHROMA, _SPECULAR_LOCAL_Z = 20.0, 0.85, 1.5
_SPECULAR_RADIUS, _SPECULAR_NOSE = 0.04, 0.15
# The filled spots get the grain of the skin round them (see _regrain): its high-pass
# (original minus a Gaussian of _GRAIN_SIGMA px) measured within _GRAIN_RING hole-growth widths.
_GRAIN_SIGMA, _GRAIN_RING = 1.5, 4
# ...and the chroma of the skin round them only (see _skin_chroma): pixels whose a and b are
# within this many of the skin's standard deviations of its mean.
_SKIN_CHROMA_Z = 2.0
# Teeth in the source's lip ring (see _fill_lip_gaps): this much lighter than the lips' median,
# under this fraction of their median chroma.
_TOOTH_L, _TOOTH_CHROMA = 15.0, 0.7
# Facing weight: triangles whose area shrank (relative to the face's typical scale) below LOW
# are hidden, above HIGH fully shown.
_FACING_LOW, _FACING_HIGH = 0.2, 0.45
# Identity geometry (see shape_offsets): by default the target's inner face (eyes, brows, nose,
# mouth, cheeks) moves this far from its own proportions towards the source's (0: the target's
# shape, 1: the source's). Tuned with scripts/eval_identity.py over all its photo pairs.
SHAPE_STRENGTH = 0.75
_SHAPE_MAX = 0.15  # no landmark moves more than this fraction of the face size
# The oval and this many rings of mesh points inside it stay put; the offsets then rise to
# their full size over the next rings.
_SHAPE_FIXED_RINGS, _SHAPE_FADE_RINGS = 1.0, 2.0
_SHAPE_MIN_PX = 0.3  # below this largest offset nothing is warped
# Folds: where the offsets would turn a triangle of the target's mesh over, its free corners
# (neither fixed by shape_weights nor part of an eye or the lips, which move as one piece) take
# their mesh neighbours' mean offset, spreading the motion, for up to _SPREAD_ROUNDS rounds;
# what still folds then has its corners' offsets halved (an eye or the lips as a whole) for up
# to _HALVE_ROUNDS rounds, then zeroed. A wide-open mouth under a closed-mouth source moves the
# lips as one piece away from the skin round them; the folded triangles between would
# otherwise be hidden as "turned away" on the coarse grid: a jagged rim of the target's own
# lip edge round the swapped lips.
_SPREAD_ROUNDS = 8
_HALVE_ROUNDS = 8
# A triangle squashed under this fraction of its area counts as folded too: astronaut.png's
# lip corner triangle (185, 61, 57) under obama2.jpg's lips kept 9%, and the source's skin
# there became a dark streak at the lower lip's corner.
_SQUASH = 0.25
# Pose gate: 2-D landmarks cannot tell a turned head from a different face, so the transfer
# weakens as the two faces' yaw (nose tip across the cheeks, -1..1) differs by LOW to HIGH.
_YAW_LOW, _YAW_HIGH = 0.3, 0.7
_CHEEKS = (234, 454)  # FaceMesh points on the image-left and image-right edges of the cheeks
_NOSE_TIP = 1


# How the target's own pixels move: per-triangle affine maps, grid triangle ids, grid step.
Motion = tuple[np.ndarray, np.ndarray, int]


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


def _area2(t: np.ndarray) -> np.ndarray:
    """Twice the signed area of each triangle (T, 3, 2)."""
    return ((t[:, 1, 0] - t[:, 0, 0]) * (t[:, 2, 1] - t[:, 0, 1])
            - (t[:, 2, 0] - t[:, 0, 0]) * (t[:, 1, 1] - t[:, 0, 1]))


def _facing(dst_tri: np.ndarray, src_tri: np.ndarray) -> np.ndarray:
    """Per triangle (plus one 1 for "no triangle"), float32 in 0..1: how squarely it faces the
    camera in the target compared with the source, from the ratio of its area to the typical
    ratio. Triangles turned away (a head in profile) or folded over get 0, so the target's own
    pixels show there instead of a squashed, smeared source texture."""
    a_dst, a_src = _area2(dst_tri), _area2(src_tri)
    ratio = np.where(np.abs(a_src) > 1e-9, a_dst / np.where(a_src == 0, 1.0, a_src), 0.0)
    # The face's overall scale change: an upper quantile, as the side turned away shrinks while
    # the side facing the camera keeps (or gains) area.
    typical = float(np.percentile(ratio[ratio > 0], 75)) if np.any(ratio > 0) else 1.0
    rel = ratio / max(typical, 1e-9)
    out = np.ones(len(dst_tri) + 1, dtype=np.float32)  # off the mesh: alpha is 0 there anyway
    out[:-1] = np.clip((rel - _FACING_LOW) / (_FACING_HIGH - _FACING_LOW), 0.0, 1.0)
    return out


def triangulate(points: np.ndarray, oval: np.ndarray) -> np.ndarray:
    """Delaunay triangles (T, 3) of `points`, keeping those whose centroid is inside the
    polygon points[oval]."""
    pts = np.asarray(points, dtype=np.float64)
    x1, y1 = pts.min(axis=0) - 2.0
    x2, y2 = pts.max(axis=0) + 2.0
    subdiv = cv2.Subdiv2D((int(np.floor(x1)), int(np.floor(y1)),
                           int(np.ceil(x2 - x1)) + 2, int(np.ceil(y2 - y1)) + 2))
    subdiv.insert([(float(x), float(y)) for x, y in pts])
    corners = np.asarray(subdiv.getTriangleList(), dtype=np.float64).reshape(-1, 3, 2)
    # Subdiv2D returns coordinates; find the landmark at each corner (exact duplicates merge,
    # and triangles touching Subdiv2D's virtual outer vertices match nothing and are dropped).
    d = np.linalg.norm(corners[:, :, None, :] - pts[None, None, :, :], axis=-1)
    idx = d.argmin(axis=-1)
    ok = np.take_along_axis(d, idx[..., None], axis=-1)[..., 0].max(axis=1) < 1e-3
    tris = idx[ok]
    tris = tris[(tris[:, 0] != tris[:, 1]) & (tris[:, 1] != tris[:, 2]) & (tris[:, 0] != tris[:, 2])]
    poly = pts[oval].astype(np.float32).reshape(-1, 1, 2)
    centroids = pts[tris].mean(axis=1)
    inside = np.array([cv2.pointPolygonTest(poly, (float(x), float(y)), False) >= 0
                       for x, y in centroids], dtype=bool)
    return tris[inside].astype(np.int32)


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
    outline = _clip_forehead(local[oval], kps)
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
    alpha = _inner_feather((y2 - y1, x2 - x1), outline, _OVAL_MARGIN * size,
                           max(2.0, _FEATHER * size), cut)
    alpha *= 1.0 - _fringe(image[y1:y2, x1:x2], local, kps, size)
    texture = _fill_lip_gaps(_fill_highlights(image[y1:y2, x1:x2], local, alpha), local)
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


def _yaw(lm: np.ndarray) -> float:
    """-1..1: where the nose tip lies between the two cheek edges (0 when frontal)."""
    left, right = lm[_CHEEKS[0]], lm[_CHEEKS[1]]
    axis = right - left
    n = float(axis @ axis)
    return 0.0 if n < 1e-9 else 2.0 * float((lm[_NOSE_TIP] - left) @ axis) / n - 1.0


def turned_apart(a: np.ndarray, b: np.ndarray) -> float:
    """0..1: how differently two faces' landmarks are turned (their yaws differing by
    _YAW_LOW .. _YAW_HIGH)."""
    return float(np.clip((abs(_yaw(a) - _yaw(b)) - _YAW_LOW) / (_YAW_HIGH - _YAW_LOW), 0.0, 1.0))


def _two_point_similarity(a: np.ndarray, b: np.ndarray, a2: np.ndarray, b2: np.ndarray,
                          points: np.ndarray) -> np.ndarray:
    """points moved by the similarity taking a to a2 and b to b2."""
    za, zb = complex(*a), complex(*b)
    if abs(zb - za) < 1e-9:
        return points + (a2 - a)
    k = (complex(*b2) - complex(*a2)) / (zb - za)
    z = (points[:, 0] - a[0]) + 1j * (points[:, 1] - a[1])
    w = k * z
    return np.stack([w.real + a2[0], w.imag + a2[1]], axis=1)


def oval_hops(triangles: np.ndarray, n: int, oval: np.ndarray) -> np.ndarray:
    """Per landmark: the fewest mesh edges to the face oval (inf when in no triangle)."""
    adj = np.zeros((n, n), dtype=bool)
    for a, b in ((0, 1), (1, 2), (2, 0)):
        adj[triangles[:, a], triangles[:, b]] = True
        adj[triangles[:, b], triangles[:, a]] = True
    hops = np.full(n, np.inf)
    hops[oval] = 0.0
    seen = np.zeros(n, dtype=bool)
    seen[oval] = True
    frontier, k = seen.copy(), 0
    while frontier.any():
        k += 1
        frontier = adj[frontier].any(axis=0) & ~seen
        hops[frontier] = k
        seen |= frontier
    return hops


def _affine_fit(src: np.ndarray, dst: np.ndarray) -> np.ndarray:
    """Least-squares 2x3 affine map taking src points onto dst points."""
    design = np.hstack([src, np.ones((len(src), 1))])
    solution, *_ = np.linalg.lstsq(design, dst, rcond=None)
    return solution.T


def shape_weights(triangles: np.ndarray, n: int, oval: np.ndarray) -> np.ndarray:
    """Per landmark, 0..1: how much of its identity offset it takes. 0 on the oval and on its
    neighbours in the mesh (so the triangles round the edge of the face do not move and the
    warp is the identity there), rising to 1 over the next rings; 0 for points in no triangle."""
    hops = oval_hops(triangles, n, oval)
    ramp = np.clip((hops - _SHAPE_FIXED_RINGS) / _SHAPE_FADE_RINGS, 0.0, 1.0)
    ramp[~np.isfinite(hops)] = 0.0
    return ramp * ramp * (3.0 - 2.0 * ramp)


def shape_offsets(src: PreparedSource, tgt_lm: np.ndarray, strength: float, size: float,
                  frozen: np.ndarray | None = None) -> np.ndarray | None:
    """Per-landmark offsets (468, 2) that move the target's inner face geometry `strength` of
    the way to the source's, or None when they are all negligible.

    The source mesh is mapped onto the target's by a least-squares affine map: position,
    roll, scale and, to first order, the foreshortening of a head turned or tilted differently
    are pose, not identity; what differs after that is the shape of the face. The eyes and the
    lips only move and scale as a whole, by their corners, so that the target's blinks and
    mouth opening stay; the oval and the ring next to it stay put (see shape_weights), so the
    warp of the target is continuous with everything round the face; the transfer weakens when
    the two faces are turned very differently (the 2-D offsets would then be mostly pose).
    `frozen` indices do not move (a kept mouth). The offsets never turn a triangle of the
    target's mesh over (_unfold).
    """
    lm = src.landmarks
    tgt = np.asarray(tgt_lm, dtype=np.float64)
    strength = float(np.clip(strength, 0.0, 1.0)) * (1.0 - turned_apart(lm, tgt))
    if strength <= 0.0 or size <= 0.0:
        return None
    m = _affine_fit(lm, tgt)
    aligned = lm @ m[:, :2].T + m[:, 2]
    offsets = aligned - tgt
    eyes = (mesh_indices.RIGHT_EYE, mesh_indices.LEFT_EYE)
    outer = mesh_indices.LIPS_OUTER
    for ring, members in ((eyes[0], eyes[0]), (eyes[1], eyes[1]), (outer, src.lips)):
        a, b = ring[0], ring[len(ring) // 2]  # the two corners
        moved = _two_point_similarity(tgt[a], tgt[b], aligned[a], aligned[b], tgt[members])
        offsets[members] = moved - tgt[members]
    offsets *= (strength * src.shape_weight)[:, None]
    if frozen is not None:
        offsets[frozen] = 0.0
    norm = np.sqrt((offsets * offsets).sum(axis=1))
    if float(norm.max()) < _SHAPE_MIN_PX:
        return None
    cap = _SHAPE_MAX * size
    offsets *= np.minimum(1.0, cap / np.maximum(norm, 1e-9))[:, None]
    _unfold(offsets, tgt, src, (eyes[0], eyes[1], src.lips))
    if float(np.sqrt((offsets * offsets).sum(axis=1)).max()) < _SHAPE_MIN_PX:
        return None
    return offsets


def _unfold(offsets: np.ndarray, tgt: np.ndarray, src: PreparedSource,
            groups: Sequence[np.ndarray]) -> None:
    """Change `offsets` (in place) where they would turn triangles of the target's mesh over
    (see _SPREAD_ROUNDS); with no offsets nothing folds, so this ends with none folded."""
    triangles = src.triangles
    before = _area2(tgt[triangles])
    sign, least = np.sign(before), _SQUASH * np.abs(before)
    n = len(offsets)
    free = src.shape_weight > 0.0
    for members in groups:
        free[members] = False
    start, end = src.edges[:, 0], src.edges[:, 1]
    degree = np.maximum(np.bincount(start, minlength=n), 1)
    for round_ in range(_SPREAD_ROUNDS + _HALVE_ROUNDS + n):
        bad = _area2((tgt + offsets)[triangles]) * sign < least
        if not bad.any():
            return
        hit = np.zeros(n, dtype=bool)
        hit[triangles[bad].ravel()] = True
        spread = hit & free
        if round_ < _SPREAD_ROUNDS and spread.any():
            # Each free corner of a fold takes its mesh neighbours' mean offset.
            mean = np.stack([np.bincount(start, weights=offsets[end, k], minlength=n)
                             for k in (0, 1)], axis=1) / degree[:, None]
            offsets[spread] = mean[spread]
            continue
        for members in groups:
            if hit[members].any():
                hit[members] = True
        offsets[hit] *= 0.5 if round_ < _SPREAD_ROUNDS + _HALVE_ROUNDS else 0.0


def _inner_feather(shape_hw: tuple[int, int], polygon: np.ndarray, margin: float,
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


def _edge_ramp(shape_hw: tuple[int, int], polygon: np.ndarray, width: float) -> np.ndarray:
    """float32 mask: 0 outside `polygon`, rising linearly to 1 over `width` px inwards. Cheaper
    than _inner_feather (it runs per face and frame): a 3x3 distance and two in-place passes."""
    inside = np.zeros(shape_hw, dtype=np.uint8)
    cv2.fillPoly(inside, [np.round((polygon - 0.5) * 16.0).astype(np.int32)], 1, shift=4)
    ramp = cv2.distanceTransform(inside, cv2.DIST_L2, cv2.DIST_MASK_3)
    np.minimum(ramp, width, out=ramp)
    np.multiply(ramp, 1.0 / width, out=ramp, dtype=np.float64)  # in double, rounded once (as cv2.multiply)
    return ramp


def _lip_ring(shape_hw: tuple[int, int], landmarks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """uint8 0/1 masks of the lips (between the outer and inner lip contours) and of the
    inside of the inner contour."""
    ring, inner = np.zeros(shape_hw, dtype=np.uint8), np.zeros(shape_hw, dtype=np.uint8)
    for mask, contour in ((ring, mesh_indices.LIPS_OUTER), (inner, mesh_indices.LIPS_INNER)):
        pts = np.round((landmarks[contour] - 0.5) * 16.0).astype(np.int32)
        cv2.fillPoly(mask, [pts], 1, shift=4)
    ring[inner > 0] = 0
    return ring, inner


def _teeth(lab: np.ndarray, lips: np.ndarray) -> np.ndarray:
    """bool: the pixels of the `lips` mask that are teeth, not lip (_TOOTH_L grey levels lighter
    than the lips' median and under _TOOTH_CHROMA of their median chroma: FaceMesh's inner lip
    contour follows a smile's teeth only roughly). lab: 8-bit LAB, any dtype."""
    values = lab[lips].astype(np.float32)  # only the lips' pixels: a face's box is far larger
    lightness = values[:, 0]
    chroma = np.hypot(values[:, 1] - 128.0, values[:, 2] - 128.0)
    teeth = np.zeros(lips.shape, dtype=bool)
    teeth[lips] = (lightness > float(np.median(lightness)) + _TOOTH_L) \
        & (chroma < _TOOTH_CHROMA * float(np.median(chroma)))
    return teeth


def _match_lips(warped: np.ndarray, target: np.ndarray, lips: tuple[np.ndarray, masks.Box],
                local: np.ndarray, moved: np.ndarray, size: float) -> None:
    """Move the warped lips' (8-bit LAB, in place) colour to the target's own lips' (the
    skin's colour transfer would carry the source's lip colour relative to its skin, and its
    chroma shrink makes lips pale), lightness included (half of it left the source's darker or
    lighter lips on the target's skin: Obama's on group6.jpg). The lips are the ring between
    the outer and inner lip contours (see lip_colour), the moved one in `warped`, the target's
    own (`local`) in `target` (BGR: the frame's region before the kept eyes and mouth moved
    with the shape change), whose teeth in that ring (a smile's) do not count."""
    weight, (x1, y1, x2, y2) = lips
    feather = _DETAIL_FEATHER * size + 1.0
    kernel = cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (2 * _LIP_INSET + 1,) * 2)

    def lip_colour(image: np.ndarray, landmarks: np.ndarray, skip_teeth: bool) -> np.ndarray | None:
        """The lips' lightness (the median of what lies _LIP_INSET px inside them: FaceMesh's
        contours take in the shadow along the lip line and some skin, a large part of thin
        lips, which pulled the mean by 20-30 levels) and a, b (the mean over them all, their
        soft edge included, as the eye takes their colour); image: 8-bit LAB."""
        ring, _ = _lip_ring(image.shape[:2], landmarks)
        lip = ring > 0
        if skip_teeth and int(lip.sum()) >= 8:
            lip &= ~_teeth(image, lip)
        core = lip & (cv2.erode(ring, kernel) > 0)
        if int(core.sum()) < 8:
            core = lip
        if int(core.sum()) < 8:
            return None
        colour = image[lip].reshape(-1, 3).astype(np.float64).mean(axis=0)
        colour[0] = float(np.median(image[..., 0][core]))
        return colour

    h, w = target.shape[:2]
    pad = int(np.ceil(feather)) + 2

    def box_of(points: np.ndarray) -> masks.Box:
        lo, hi = points.min(axis=0), points.max(axis=0)
        return (max(int(lo[0]) - pad, 0), max(int(lo[1]) - pad, 0),
                min(int(hi[0]) + pad + 1, w), min(int(hi[1]) + pad + 1, h))

    tx1, ty1, tx2, ty2 = box_of(local[mesh_indices.LIPS_OUTER])
    bx1, by1, bx2, by2 = box_of(moved[mesh_indices.LIPS_OUTER])
    target_lab = cv2.cvtColor(np.ascontiguousarray(target[ty1:ty2, tx1:tx2]), cv2.COLOR_BGR2LAB)
    wanted = lip_colour(target_lab, local - (tx1, ty1), True)
    own = lip_colour(warped[by1:by2, bx1:bx2], moved - (bx1, by1), False)
    if wanted is None or own is None:
        return
    delta = wanted - own
    part = warped[y1:y2, x1:x2].astype(np.float32) + weight[..., None] * delta.astype(np.float32)
    warped[y1:y2, x1:x2] = np.clip(part + 0.5, 0, 255).astype(np.uint8)


def _under_lip(shape_hw: tuple[int, int], outer: np.ndarray, depth: float,
               ring: np.ndarray, opening: np.ndarray) -> np.ndarray:
    """bool: the lower lip (`ring` below the line between the mouth corners) and, with
    `depth` > 0, the skin under it: inside the outer lip contour moved `depth` px down, outside
    the lips and their opening, below that line."""
    below: np.ndarray = np.zeros(shape_hw, dtype=bool)
    if depth > 0.0:
        skin = np.zeros(shape_hw, dtype=np.uint8)
        cv2.fillPoly(skin, [np.round((outer + (0.0, depth) - 0.5) * 16.0).astype(np.int32)], 1,
                     shift=4)
        below = (skin > 0) & (ring == 0) & (opening == 0)
    else:
        below = ring > 0
    below[:max(int(np.ceil((outer[0, 1] + outer[len(outer) // 2, 1]) / 2.0)), 0)] = False
    return below


def _match_lip_lighting(warped: np.ndarray, theirs_bgr: np.ndarray, moved: np.ndarray,
                        size: float) -> None:
    """Give the warped lower lip (8-bit LAB, in place) and the skin under it the target's
    lighting there (see _LIP_LIGHT), and lighten away the thin dark lines the source
    has there beyond the target's (_LINE_SIZE). theirs_bgr: the target, its lips moved with
    the shape change onto the `moved` lips (the skin under them as the skin's shading takes
    it); a smile's teeth in its lip ring do not count."""
    h, w = warped.shape[:2]
    sigma = max(1.0, _LIP_LIGHT * size)
    pad = int(max(_UNDER_LIP, _LINE_DEPTH) * size + 3.0 * sigma) + 1
    outer_all = moved[mesh_indices.LIPS_OUTER]
    lo, hi = outer_all.min(axis=0), outer_all.max(axis=0)
    x1, y1 = max(int(lo[0]) - pad, 0), max(int(lo[1]) - pad, 0)
    x2, y2 = min(int(hi[0]) + pad + 1, w), min(int(hi[1]) + pad + 1, h)
    if x2 - x1 < 4 or y2 - y1 < 4:
        return
    part = warped[y1:y2, x1:x2].astype(np.float32)
    hw = (y2 - y1, x2 - x1)
    theirs = cv2.cvtColor(np.ascontiguousarray(theirs_bgr[y1:y2, x1:x2]), cv2.COLOR_BGR2LAB)
    ring, opening = _lip_ring(hw, moved - (x1, y1))
    lip = ring > 0
    if int(lip.sum()) < 8:
        return
    outer = outer_all - (x1, y1)
    lower = _under_lip(hw, outer, 0.0, ring, opening)
    region = (lower & ~_teeth(theirs, lip)) | _under_lip(hw, outer,
                                                         _UNDER_LIP * size, ring, opening)
    weight = region.astype(np.float32)
    den = cv2.GaussianBlur(weight, (0, 0), sigma)
    shift = (cv2.GaussianBlur(theirs.astype(np.float32) * weight[..., None], (0, 0), sigma)
             - cv2.GaussianBlur(part * weight[..., None], (0, 0), sigma))
    shift /= np.maximum(den, 1e-3)[..., None]
    part += np.clip(den * 2.0 - 0.5, 0.0, 1.0)[..., None] * shift
    k = 2 * max(1, int(round(_LINE_SIZE * size / 2.0))) + 1
    disc = cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (k, k))
    lines = (cv2.morphologyEx(np.clip(part[..., 0], 0.0, 255.0), cv2.MORPH_BLACKHAT, disc)
             - cv2.morphologyEx(theirs[..., 0].astype(np.float32), cv2.MORPH_BLACKHAT, disc))
    band = _under_lip(hw, outer, _LINE_DEPTH * size, ring, opening)
    part[..., 0] += cv2.GaussianBlur(band.astype(np.float32), (0, 0), 1.0) * np.maximum(lines, 0.0)
    warped[y1:y2, x1:x2] = np.clip(part + 0.5, 0, 255).astype(np.uint8)


def _laplacians(grey: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """The Laplacian of `grey` (float32) where the bool `mask` is set, on a regular subsample
    (a variance does not need every pixel)."""
    step = color.sample_step(mask.shape)
    lap = cv2.Laplacian(grey, cv2.CV_32F)[::step, ::step]
    return lap[mask[::step, ::step]]


def _unsharp_gain(lap: np.ndarray, lap_detail: np.ndarray, wanted: float) -> float:
    """The gain g for which grey + g * detail has the Laplacian variance `wanted`, given the
    Laplacians of grey and of detail (the Laplacian is linear, so the variance is the quadratic
    a + 2cg + bg^2); the root nearest 0, or the variance's minimum when `wanted` is below it."""
    a, b = float(lap.var()), float(lap_detail.var())
    c = float(np.mean((lap - lap.mean()) * (lap_detail - lap_detail.mean())))
    if b <= 1e-9:
        return 0.0
    disc = c * c - b * (a - wanted)
    return (-c + float(np.sqrt(disc))) / b if disc >= 0.0 else -c / b


def _match_detail(warped: np.ndarray, target: np.ndarray, skin: np.ndarray, lab: bool) -> np.ndarray:
    """`warped` (8-bit LAB when `lab`, else BGR; in place for LAB) unsharpened (or softened) so
    that its high-frequency energy (Laplacian variance over `skin`) comes to `target`'s (BGR);
    unchanged when they are within 10%, the target is flat, or there is no skin to measure on."""
    if not skin.any():
        return warped
    grey = cv2.extractChannel(warped, 0) if lab else cv2.cvtColor(warped, cv2.COLOR_BGR2GRAY)
    # OpenCV's 8-bit L is lightness scaled to 0..255, close enough to grey for a ratio.
    lap = _laplacians(grey, skin)
    wanted = float(_laplacians(cv2.cvtColor(target, cv2.COLOR_BGR2GRAY), skin).var())
    own = float(lap.var()) if lap.size > 16 else 0.0
    if own <= 0.0 or wanted < _DETAIL_FLAT or abs(wanted / own - 1.0) < 0.1:
        return warped
    soft = cv2.GaussianBlur(grey, (5, 5), _DETAIL_SIGMA)
    detail = cv2.subtract(grey, soft, dtype=cv2.CV_16S)
    gain = _unsharp_gain(lap, _laplacians(detail, skin), wanted)
    gain = float(np.clip(gain, _DETAIL_GAIN_MIN, _DETAIL_GAIN_MAX))
    if lab:
        cv2.insertChannel(cv2.addWeighted(grey, 1.0 + gain, soft, -gain, 0.0), warped, 0)
        return warped
    soft = cv2.GaussianBlur(warped, (5, 5), _DETAIL_SIGMA)
    return cv2.addWeighted(warped, 1.0 + gain, soft, -gain, 0.0)


def _remap(src: np.ndarray, maps: np.ndarray, border_mode: int,
           border_value: tuple[float, ...] = (0.0, 0.0, 0.0, 0.0)) -> np.ndarray:
    """Bilinear cv2.remap through one 2-channel float map of (x, y) source positions."""
    # map2=None is how OpenCV takes a CV_32FC2 map1; the stubs of OpenCV 5.0 list arrays only
    # and 5.1's accept None, so the call goes through Any to type-check with both.
    remap: Any = cv2.remap
    return remap(src, maps, None, cv2.INTER_LINEAR, borderMode=border_mode, borderValue=border_value)


def _source_name(source: SourceIdentity) -> str:
    return str(source.paths[0]) if source.paths else "the source photo"


def _affine_inverses(tri: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per triangle (T,3,2): the 3x3 inverse of [[x],[y],[1]] (point -> barycentric weights)
    and the signed doubled area. Degenerate triangles get zero inverses."""
    a, b, c = tri[:, 0], tri[:, 1], tri[:, 2]
    det = (b[:, 0] - a[:, 0]) * (c[:, 1] - a[:, 1]) - (c[:, 0] - a[:, 0]) * (b[:, 1] - a[:, 1])
    safe = np.where(np.abs(det) > 1e-9, det, np.inf)
    inv = np.empty((len(tri), 3, 3), dtype=np.float64)
    # Rows: weight of vertex a, b, c as an affine function (x, y, 1) of the point.
    inv[:, 1, 0] = (c[:, 1] - a[:, 1]) / safe
    inv[:, 1, 1] = -(c[:, 0] - a[:, 0]) / safe
    inv[:, 1, 2] = -(inv[:, 1, 0] * a[:, 0] + inv[:, 1, 1] * a[:, 1])
    inv[:, 2, 0] = -(b[:, 1] - a[:, 1]) / safe
    inv[:, 2, 1] = (b[:, 0] - a[:, 0]) / safe
    inv[:, 2, 2] = -(inv[:, 2, 0] * a[:, 0] + inv[:, 2, 1] * a[:, 1])
    inv[:, 0] = -inv[:, 1] - inv[:, 2]
    inv[:, 0, 2] += 1.0
    return inv, det


def piecewise_affine_maps(dst_tri: np.ndarray, src_tri: np.ndarray, fallback: np.ndarray,
                          grid_hw: tuple[int, int], ids: np.ndarray | None = None,
                          inverses: tuple[np.ndarray, np.ndarray] | None = None
                          ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Sampling maps (map_x, map_y float32, grid_hw) of the warp taking every dst triangle onto
    its src triangle, and the triangle index of every grid point (T where none). Coordinates
    are grid indices on the dst side and whatever unit src_tri is in; grid points in no
    triangle use the 2x3 `fallback` affine map. `ids` from an earlier call with the same
    dst_tri skips the rasterisation (a second warp over the same target mesh), and
    `inverses` from _affine_inverses(dst_tri) their computation.

    Vectorised over triangles: candidate points are every triangle's bounding box, kept when
    their barycentric weights are all >= 0. Triangles folded over (back-facing, as in a turned
    head) are written first so that front-facing ones win where they overlap.
    """
    inv, det = _affine_inverses(dst_tri) if inverses is None else inverses
    # Per-triangle affine maps dst -> src: src vertices (2x3) times the barycentric inverse.
    affine = np.empty((len(dst_tri) + 1, 2, 3), dtype=np.float64)
    affine[:-1] = np.matmul(src_tri.transpose(0, 2, 1), inv)
    affine[-1] = fallback
    if ids is None:
        ids = _rasterise(dst_tri, src_tri, inv, det, grid_hw)
    gh, gw = ids.shape
    m = affine.astype(np.float32).reshape(-1, 6)[ids]
    gx = np.arange(gw, dtype=np.float32)[None, :]
    gy = np.arange(gh, dtype=np.float32)[:, None]
    map_x = m[..., 0] * gx + m[..., 1] * gy + m[..., 2]
    map_y = m[..., 3] * gx + m[..., 4] * gy + m[..., 5]
    return map_x, map_y, ids


def _rasterise(dst_tri: np.ndarray, src_tri: np.ndarray, inv: np.ndarray, det: np.ndarray,
               grid_hw: tuple[int, int]) -> np.ndarray:
    """The index of the dst triangle covering every grid point (T where none)."""
    gh, gw = grid_hw
    valid = np.abs(det) > 1e-9
    back = np.sign(det) != np.sign(_area2(src_tri))
    order = np.concatenate([np.nonzero(valid & back)[0], np.nonzero(valid & ~back)[0]])
    ids = np.full((gh, gw), len(dst_tri), dtype=np.int32)
    n = len(order)
    if n:
        t = dst_tri[order]
        xmin = np.clip(np.ceil(t[:, :, 0].min(axis=1)), 0, gw).astype(np.int32)
        xmax = np.clip(np.floor(t[:, :, 0].max(axis=1)), -1, gw - 1).astype(np.int32)
        ymin = np.clip(np.ceil(t[:, :, 1].min(axis=1)), 0, gh).astype(np.int32)
        ymax = np.clip(np.floor(t[:, :, 1].max(axis=1)), -1, gh - 1).astype(np.int32)
        bw = np.maximum(xmax - xmin + 1, 0)
        counts = bw * np.maximum(ymax - ymin + 1, 0)
        total = int(counts.sum())
        if total:
            which = np.repeat(np.arange(n, dtype=np.int32), counts)
            starts = (np.cumsum(counts) - counts).astype(np.int32)
            k = np.arange(total, dtype=np.int32) - np.repeat(starts, counts)
            dy, dx = np.divmod(k, bw[which])
            xs, ys = xmin[which] + dx, ymin[which] + dy
            # Barycentric weights of vertices b and c (a's is 1 - both), one row gather.
            coef = np.ascontiguousarray(inv[order][:, 1:, :], dtype=np.float32).reshape(n, 6)[which]
            fx, fy = xs.astype(np.float32), ys.astype(np.float32)
            w1 = coef[:, 0] * fx + coef[:, 1] * fy + coef[:, 2]
            w2 = coef[:, 3] * fx + coef[:, 4] * fy + coef[:, 5]
            eps = np.float32(1e-5)
            inside = (w1 >= -eps) & (w2 >= -eps) & (w1 + w2 <= 1.0 + eps)
            ids[ys[inside], xs[inside]] = order[which[inside]]
    return ids


def _cheek_discs(shape_hw: tuple[int, int], kps: np.ndarray, size: float) -> np.ndarray:
    """bool mask of two discs on the cheeks (between each eye and mouth corner, a little
    outwards), where the source's skin colour is sampled."""
    disc = np.zeros(shape_hw, dtype=np.uint8)
    across = kps[1] - kps[0]
    for eye, corner, sign in ((kps[0], kps[3], -1.0), (kps[1], kps[4], 1.0)):
        c = (eye + corner) / 2.0 + sign * 0.12 * across
        cv2.circle(disc, (int(round(c[0] - 0.5)), int(round(c[1] - 0.5))),
                   max(1, int(0.07 * size)), 1, -1)
    return disc > 0


def _fringe(crop: np.ndarray, landmarks: np.ndarray, kps: np.ndarray, size: float) -> np.ndarray:
    """float32 0..1 over the source crop: the hair that reaches into the face from above (not
    skin by the source's own cheek colour, joined to what lies outside the oval, above the eye
    line), feathered."""
    h, w = crop.shape[:2]
    lab = cv2.cvtColor(np.ascontiguousarray(crop), cv2.COLOR_BGR2LAB).astype(np.float32)
    cheeks = lab[_cheek_discs((h, w), kps, size)]
    if len(cheeks) < 10:
        return np.zeros((h, w), dtype=np.float32)
    mean = cheeks.mean(axis=0)
    std = np.maximum(cheeks.std(axis=0), _SKIN_STD_MIN).astype(np.float32)
    # Lighter than the cheeks is lit skin (a shiny forehead), not hair: lightness counts only
    # where it is darker.
    dev = (lab - mean) / std
    np.minimum(dev[..., 0], 0.0, out=dev[..., 0])
    dist = np.sqrt((dev * dev).sum(axis=2))
    eyes = (kps[0] + kps[1]) / 2.0
    up = eyes - (kps[3] + kps[4]) / 2.0
    d = float(np.linalg.norm(up))
    if d < 1e-6:
        return np.zeros((h, w), dtype=np.float32)
    ys, xs = np.mgrid[0:h, 0:w].astype(np.float32)
    height = ((xs + 0.5 - eyes[0]) * up[0] + (ys + 0.5 - eyes[1]) * up[1]) / d
    candidate = ((dist > _SKIN_DIST) & (height > _HAIR_FROM * d)).astype(np.uint8)
    inside = np.zeros((h, w), dtype=np.uint8)
    oval = landmarks[mesh_indices.FACE_OVAL]
    cv2.fillPoly(inside, [np.round((oval - 0.5) * 16.0).astype(np.int32)], 1, shift=4)
    count, labels = cv2.connectedComponents(candidate, connectivity=8)
    outside = np.unique(labels[(candidate > 0) & (inside == 0)])
    hair = np.isin(labels, outside[outside > 0]) & (inside > 0)
    # The brows stay the source's (they are identity) even where hair or a shadow joins them
    # to the hair round the face.
    brows = np.zeros((h, w), dtype=np.uint8)
    for brow in (mesh_indices.RIGHT_EYEBROW, mesh_indices.LEFT_EYEBROW):
        hull = cv2.convexHull(np.round((landmarks[brow] - 0.5) * 16.0).astype(np.int32))
        cv2.fillConvexPoly(brows, hull, 1, shift=4)
    margin = 2 * int(_BROW_MARGIN * size) + 1
    hair &= cv2.dilate(brows, cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (margin, margin))) == 0
    if not hair.any():
        return np.zeros((h, w), dtype=np.float32)
    feather = max(1.0, _HAIR_FEATHER * size)
    grown = cv2.dilate(hair.astype(np.uint8), cv2.getStructuringElement(
        cv2.MORPH_ELLIPSE, (2 * int(feather) + 1,) * 2))
    return np.clip(cv2.GaussianBlur(grown.astype(np.float32), (0, 0), feather / 2.0) * 1.5,
                   0.0, 1.0)


def _fill_highlights(crop: np.ndarray, landmarks: np.ndarray, alpha: np.ndarray) -> np.ndarray:
    """The source crop with its white spots on the skin (a specular highlight on the nose, white
    hair at a temple: lighter than the face's skin by _SPECULAR_Z of its standard deviations and
    under _SPECULAR_CHROMA of its mean chroma) filled in from the skin round them. The colour
    transfer would carry them over as white patches wherever the target is bright; the eyes
    and lips (whites of the eyes, teeth) are not skin and stay."""
    h, w = crop.shape[:2]
    lab = cv2.cvtColor(np.ascontiguousarray(crop), cv2.COLOR_BGR2LAB).astype(np.float32)
    features = np.zeros((h, w), dtype=np.uint8)
    for ring in (mesh_indices.RIGHT_EYE, mesh_indices.LEFT_EYE, mesh_indices.LIPS_OUTER):
        hull = cv2.convexHull(np.round((landmarks[ring] - 0.5) * 16.0).astype(np.int32))
        cv2.fillConvexPoly(features, hull, 1, shift=4)
    skin = (alpha > 0.5) & (cv2.dilate(features, np.ones((5, 5), np.uint8)) == 0)
    if int(skin.sum()) < 100:
        return crop
    lightness = lab[..., 0]
    chroma = np.hypot(lab[..., 1] - 128.0, lab[..., 2] - 128.0)
    mean, std = float(lightness[skin].mean()), float(lightness[skin].std())
    spots = (skin & (lightness > mean + _SPECULAR_Z * std)
             & (chroma < _SPECULAR_CHROMA * float(chroma[skin].mean())))
    size = float(np.ptp(landmarks[mesh_indices.FACE_OVAL], axis=0).max())
    radius = _SPECULAR_RADIUS * size
    if radius > 0.5:
        nose = np.zeros((h, w), dtype=np.uint8)
        tip = np.round((landmarks[mesh_indices.NOSE_TIP].mean(axis=0) - 0.5) * 16.0).astype(np.int32)
        cv2.circle(nose, (int(tip[0]), int(tip[1])), int(_SPECULAR_NOSE * size * 16), 1, -1, shift=4)
        spots |= (skin & (nose > 0) & (lightness > mean + _SPECULAR_LOCAL_Z * std)
                  & (lightness - cv2.GaussianBlur(lightness, (0, 0), radius) > _SPECULAR_LOCAL)
                  & (chroma < _SPECULAR_LOCAL_CHROMA * cv2.GaussianBlur(chroma, (0, 0), radius)))
    if not spots.any():
        return crop
    # Grown by 1/200 of the face (at least a pixel): a shine's soft rim is lighter too.
    grow = 2 * max(1, round(radius / 8)) + 1
    hole = cv2.dilate(spots.astype(np.uint8), np.ones((grow, grow), np.uint8))
    filled = cv2.inpaint(np.ascontiguousarray(crop), hole, 3.0, cv2.INPAINT_TELEA)
    filled = _skin_chroma(filled, lab, hole > 0, skin, radius)
    return _regrain(filled, crop, hole > 0, skin, grow)


def _skin_chroma(filled: np.ndarray, lab: np.ndarray, hole: np.ndarray, skin: np.ndarray,
                 sigma: float) -> np.ndarray:
    """`filled` with the chroma (a, b) inside `hole` taken from skin-coloured pixels only:
    their Gaussian-weighted (`sigma` px) mean, where a and b are within _SKIN_CHROMA_Z standard
    deviations of the skin's (`lab`: the source crop, float Lab). The inpaint also draws from
    the hole's edge that is not skin: Biden's nose shine touches his nostril and the shine's
    own bluish rim, and its fill's bottom rows came out grey-blue (9 units of a, b from the
    skin round it). Lightness stays the inpaint's: the shading towards the nostril is real."""
    ab = lab[..., 1:]
    mean, std = ab[skin].mean(axis=0), np.maximum(ab[skin].std(axis=0), 1.0)
    source = (skin & ~hole & (np.abs(ab - mean) <= _SKIN_CHROMA_Z * std).all(axis=2))
    weight = cv2.GaussianBlur(source.astype(np.float32), (0, 0), sigma)
    near = hole & (weight > 1e-3)
    if not near.any():
        return filled
    blurred = cv2.GaussianBlur(ab * source[..., None], (0, 0), sigma)
    out = cv2.cvtColor(filled, cv2.COLOR_BGR2LAB)
    out[..., 1:][near] = np.round(blurred[near] / weight[near][:, None]).astype(np.uint8)
    result = filled.copy()  # a round trip through Lab would shift the pixels outside the hole
    result[near] = cv2.cvtColor(out, cv2.COLOR_LAB2BGR)[near]
    return result


def _regrain(filled: np.ndarray, crop: np.ndarray, hole: np.ndarray, skin: np.ndarray,
             width: int) -> np.ndarray:
    """`filled` with skin grain added inside `hole`: noise as strong (per channel, in
    _GRAIN_SIGMA high-pass) as the source's own skin within _GRAIN_RING x `width` round the hole.
    An inpaint is smooth: Biden's filled nose shine, stretched ~2x on a frontal target, was a
    flat blob beside the nose among the skin's grain."""
    ring = (cv2.dilate(hole.astype(np.uint8), np.ones((_GRAIN_RING * width,) * 2, np.uint8)) > 0)
    ring &= skin & ~hole
    if int(ring.sum()) < 16:
        return filled
    src = crop.astype(np.float32)
    wanted = (src - cv2.GaussianBlur(src, (0, 0), _GRAIN_SIGMA))[ring].std(axis=0)
    # One field for all channels (skin grain is mostly lightness), fixed seed (the same source
    # gives the same texture).
    noise = np.random.default_rng(0).standard_normal(hole.shape).astype(np.float32)
    hp = noise - cv2.GaussianBlur(noise, (0, 0), _GRAIN_SIGMA)
    grain = noise[..., None] * (wanted / max(float(hp.std()), 1e-6))
    out = filled.astype(np.float32)
    out[hole] += grain[hole]
    return np.clip(np.round(out), 0, 255).astype(np.uint8)


def _fill_lip_gaps(crop: np.ndarray, landmarks: np.ndarray) -> np.ndarray:
    """The source crop with what lies inside its lip ring but is not lip (teeth along a smile's
    inner edge: _TOOTH_L grey levels lighter than the ring's median and under _TOOTH_CHROMA of
    its median chroma; FaceMesh's inner contour follows the teeth only roughly) filled in from
    the lips round it. On an open-mouth target the source's lips are stretched over the
    target's, and such a strip became a pale patch on the lower lip. The inside of the inner
    contour is filled with it (the target's own inner mouth is kept there), so that only lip
    pixels feed the fill."""
    ring, inner = _lip_ring(crop.shape[:2], landmarks)
    if cv2.countNonZero(ring) < 16:
        return crop
    lab = cv2.cvtColor(np.ascontiguousarray(crop), cv2.COLOR_BGR2LAB)
    gaps = _teeth(lab, ring > 0)
    if not gaps.any():
        return crop
    hole = cv2.dilate((gaps | (inner > 0)).astype(np.uint8), np.ones((3, 3), np.uint8))
    return cv2.inpaint(np.ascontiguousarray(crop), hole, 3.0, cv2.INPAINT_TELEA)


def _clip_forehead(oval: np.ndarray, kps: np.ndarray) -> np.ndarray:
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


class MeshSwapper:
    """Frame processor "face_swapper" for --swap-model mesh."""

    name = "face_swapper"

    def __init__(self, settings: SwapSettings, *, keep_eyes: bool = True,
                 keep_mouth_interior: bool = True, shape_strength: float = SHAPE_STRENGTH) -> None:
        self.settings = settings
        self.shape_strength = shape_strength
        self.keep_eyes = keep_eyes
        self.keep_mouth_interior = keep_mouth_interior
        self._sources: tuple[PreparedSource, ...] = ()
        self._oval = mesh_indices.FACE_OVAL
        self._eyes = (mesh_indices.LEFT_EYE, mesh_indices.RIGHT_EYE)
        self._lips_inner = mesh_indices.LIPS_INNER

    def prepare(self, sources: Sequence[SourceIdentity]) -> None:
        # Built completely before the swap so that worker threads see old or new, never half.
        self._sources = tuple(prepare_source(s) for s in sources)
        for source in sources:
            if len(source.paths) > 1:
                # The texture comes from one photo: the others would silently do nothing.
                log.warning("warning: the mesh swapper uses only the first --source photo, %s; "
                            "the other --source photos (%s) are not used (averaging photos needs "
                            "--swap-model inswapper_128)", source.paths[0],
                            ", ".join(str(p) for p in source.paths[1:]))

    def process(self, packet: FramePacket) -> FramePacket:
        start = time.perf_counter()
        sources = self._sources
        # --blend 0: the input, exactly (not even the kept eyes and mouth move).
        faces = packet.faces if self.settings.blend > 0.0 else []
        for face in faces:
            if not 0 <= face.source_key < len(sources):
                continue
            if self._swappable(face):
                self.swap_level(packet.image, face, sources[face.source_key])
        packet.timings[self.name] = (time.perf_counter() - start) * 1000.0
        return packet

    @staticmethod
    def _swappable(face: Face) -> bool:
        lm = face.landmarks
        return (lm is not None and len(lm) == MESH_LANDMARKS and bool(np.all(np.isfinite(lm)))
                and usable(face))

    def swap_level(self, frame: np.ndarray, face: Face, src: PreparedSource) -> None:
        """swap_face on the face's region turned by quarter turns until the face is nearest
        upright (np.rot90: exact), then turned back. The swap's masks take "above" and "across"
        from the image axes (the forehead cut, the glasses bridge and eye band, the closed
        eye's feather), so a face lying on its side or upside down got its own dark lines kept
        as glasses frames and a second pair of eyes."""
        k = quarter_turns(face.kps)
        if k == 0:
            self.swap_face(frame, face, src)
            return
        assert face.landmarks is not None
        oval = face.landmarks[self._oval]
        fh, fw = frame.shape[:2]
        # swap_face touches its oval's box and 3 px round it, clipped to the frame.
        x1, y1 = (max(int(np.floor(v)) - 4, 0) for v in oval.min(axis=0))
        x2, y2 = (min(int(np.ceil(v)) + 5, n) for v, n in zip(oval.max(axis=0), (fw, fh)))
        if x2 - x1 < 4 or y2 - y1 < 4:
            return
        w, h = x2 - x1, y2 - y1
        part = np.ascontiguousarray(np.rot90(frame[y1:y2, x1:x2], k))

        def turned(points: np.ndarray) -> np.ndarray:
            return turn(points - np.array([x1, y1], dtype=np.float32), k, w, h)

        corners = turned(face.bbox.reshape(2, 2))
        self.swap_face(part, face.with_(bbox=np.concatenate([corners.min(0), corners.max(0)]),
                                        kps=turned(face.kps), landmarks=turned(face.landmarks)), src)
        frame[y1:y2, x1:x2] = np.rot90(part, -k)

    def swap_face(self, frame: np.ndarray, face: Face, src: PreparedSource) -> None:
        """Swap one face in place (only its region of interest is touched)."""
        assert face.landmarks is not None
        lm = face.landmarks.astype(np.float64)
        oval = lm[self._oval]
        lo, hi = oval.min(axis=0), oval.max(axis=0)
        size = float((hi - lo).max())
        fh, fw = frame.shape[:2]
        x1, y1 = max(int(np.floor(lo[0])) - 2, 0), max(int(np.floor(lo[1])) - 2, 0)
        x2, y2 = min(int(np.ceil(hi[0])) + 3, fw), min(int(np.ceil(hi[1])) + 3, fh)
        if x2 - x1 < 4 or y2 - y1 < 4:
            return
        roi_w, roi_h = x2 - x1, y2 - y1
        local = lm - (x1, y1)
        # The source's face shape: the target's landmarks move towards it, and the target's own
        # pixels that stay visible inside the face (kept eyes and mouth) are warped along.
        # --blend is the opacity of the whole swap: the shape change fades with it, so that a
        # small blend is close to the target (the kept eyes and mouth move by the shape change).
        blend = float(np.clip(self.settings.blend, 0.0, 1.0)) * presence(face)
        offsets = None
        if self.shape_strength * blend > 0.0:
            frozen = src.lips if self.settings.mouth_mask is not None else None
            offsets = shape_offsets(src, local, self.shape_strength * blend, size, frozen)
        moved = local if offsets is None else local + offsets

        lab = self.settings.color_match
        warped4, facing, motion = self._warp(src.lab_levels if lab else src.levels, src, moved,
                                             size, (roi_h, roi_w),
                                             None if offsets is None else local)
        warped = cv2.cvtColor(warped4, cv2.COLOR_BGRA2BGR)  # drops channel 3, LAB or BGR alike
        alpha = warped4[..., 3].astype(np.float32) * (1.0 / 255.0)
        if facing is not None:
            alpha *= facing
        inside = _edge_ramp((roi_h, roi_w), moved[self._oval], max(1.0, _TARGET_EDGE * size))
        cv2.multiply(alpha, inside, dst=alpha)
        original = frame[y1:y2, x1:x2]
        shown = alpha.copy()  # how much of the source shows, before the kept eyes and mouth
        opener = mouth_opener(moved[self._lips_inner], src.landmarks[self._lips_inner])
        skin, kept = self._apply_keep(alpha, moved, face.kps - (x1, y1), size, opener)
        target = original
        if motion is not None:
            # The target's kept eyes and inner mouth follow the moved landmarks. Only there:
            # elsewhere the source covers the target, except near the oval, where nothing moves.
            # A --mouth-mask mouth does not move at all (its landmarks are frozen).
            target = original.copy()
            for _, box, is_mouth_mask in kept:
                if not is_mouth_mask:
                    self._move_pixels(original, target, motion, box)
                    # A box reaching past the oval (a face in profile) moves nothing there.
                    bx1, by1, bx2, by2 = box
                    out = inside[by1:by2, bx1:bx2] <= 0.0
                    target[by1:by2, bx1:bx2][out] = original[by1:by2, bx1:bx2][out]
        self._keep_frames(alpha, skin, warped, target, local, size, lab)
        lips = None
        if lab and self.settings.mouth_mask is None:
            # The lips are matched on their own (below), and stay out of the skin statistics.
            lips = masks.polygon_mask_box((roi_h, roi_w), moved[mesh_indices.LIPS_OUTER],
                                          max(1.0, _DETAIL_FEATHER * size))
            if lips is not None:
                lx1, ly1, lx2, ly2 = lips[1]
                skin[ly1:ly2, lx1:lx2] &= lips[0] <= 0.0
                # The colour shift is softened across the contour as well: its edge followed
                # the polygon's pixel steps (a jagged, pasted-on lip outline on a small face).
                sigma = max(_LIP_EDGE_MIN, _LIP_EDGE * size)
                lips = (cv2.GaussianBlur(lips[0], (0, 0), sigma), lips[1])
        if lab:
            step = color.sample_step(skin.shape)
            target_lab = cv2.cvtColor(np.ascontiguousarray(target[::step, ::step]),
                                      cv2.COLOR_BGR2LAB)
            table = color.transfer_lut(warped[::step, ::step], target_lab, skin[::step, ::step])
            if table is not None:
                warped = cv2.LUT(warped, table)
                # The source's colour at each lightness becomes the target's (its shadows
                # would stay grey on a paler target), before the shading takes the lighting.
                by_lightness = color.chroma_by_lightness(warped[::step, ::step], target_lab,
                                                         skin[::step, ::step])
                if by_lightness is not None:
                    warped = color.add_by_lightness(warped, by_lightness)
                lit = self._lit(skin, shown, alpha)
                if _SHADING > 0.0:
                    warped = color.match_shading(warped, target, lit, _SHADING_RADIUS * size,
                                                 _SHADING, _SHADING_CHROMA)
                if _SHADING_FINE > 0.0:
                    warped = color.match_shading(warped, target, lit, _SHADING_FINE * size,
                                                 0.0, 1.0, greyer_only=True)
                    turned = turned_apart(src.landmarks, local)
                    if turned > 0.0 and _TURNED_DARKEN > 0.0:
                        warped = color.match_shading(warped, target, lit, _SHADING_FINE * size,
                                                     turned * _TURNED_DARKEN, darken_only=True)
                if _RIM > 0.0:
                    rim = self._rim(inside, alpha, kept, moved, size)
                    warped = color.match_shading(warped, target, rim, _RIM_RADIUS * size,
                                                 1.0, 1.0)
            if lips is not None and table is not None:
                _match_lips(warped, original, lips, local, moved, size)
                # The target's own lips, moved with the shape change onto the moved lips.
                theirs = original
                if motion is not None:
                    theirs = original.copy()
                    self._move_pixels(original, theirs, motion, lips[1])
                _match_lip_lighting(warped, theirs, moved, size)
            warped = _match_detail(warped, target, skin, True)
            warped = cv2.cvtColor(warped, cv2.COLOR_LAB2BGR)
        else:
            warped = _match_detail(warped, target, skin, False)
        if blend != 1.0:
            alpha *= blend
        # Weights 0 keep the target's pixel exactly (the kept mouth relies on it).
        frame[y1:y2, x1:x2] = cv2.blendLinear(warped, target, alpha, 1.0 - alpha)

    @staticmethod
    def _lit(skin: np.ndarray, shown: np.ndarray, alpha: np.ndarray) -> np.ndarray:
        """float32 weights for the lighting match: the skin, and the face's soft edge by how
        much of the source shows there (`shown`: alpha before the kept eyes and mouth), leaving
        out the edge wherever something was kept (alpha fell below `shown`). From the inner
        skin alone, the outer cheeks (where the source's mask fades) took the inner face's
        correction: a frontally lit source's cheeks stayed 10-20 levels brighter than a
        target's shaded ones."""
        edge = (shown < 0.99) & (alpha >= shown)
        return np.where(skin, np.float32(1.0), np.where(edge, shown, np.float32(0.0)))

    def _rim(self, inside: np.ndarray, alpha: np.ndarray,
             kept: list[tuple[np.ndarray, masks.Box, bool]], moved: np.ndarray,
             size: float) -> np.ndarray:
        """float32 weights of the face's rim: within _RIM of the face size inside the moved
        oval, where the swap shows, leaving out the kept eyes and mouth (and a feather's
        width round them: an eye at the rim would darken the skin beside it)."""
        wide = _edge_ramp(alpha.shape[:2], moved[self._oval], max(1.0, _RIM * size))
        # (the ramp reaches 1 only up to rounding: 1 - 1e-7 on some turned regions)
        rim = ((inside > 0.0) & (wide < 0.999) & (alpha > 0.0)).astype(np.float32)
        pad = int(np.ceil(_DETAIL_FEATHER * size)) + 1
        for keep, (x1, y1, x2, y2), _ in kept:
            near = cv2.dilate((keep > 0.0).astype(np.uint8), np.ones((2 * pad + 1,) * 2, np.uint8))
            rim[y1:y2, x1:x2][near > 0] = 0.0
        return rim

    def _warp(self, levels: tuple[np.ndarray, ...], src: PreparedSource, local: np.ndarray,
              size: float, roi_hw: tuple[int, int], original: np.ndarray | None = None
              ) -> tuple[np.ndarray, np.ndarray | None, Motion | None]:
        """The source texture (one of its 4-channel pyramids) warped onto the target landmarks
        `local`, ROI-sized uint8 (channel 3: the source's face mask, warped), the ROI-sized
        facing weight (float32 0..1; None when it is 1 everywhere), and, when the target's
        `original` landmarks are given, the motion of the target's own pixels from `original`
        to `local` on the warp's grid (see _grid_motion), else None."""
        roi_h, roi_w = roi_hw
        # Sample from the pyramid level closest to (not below) the target's size: no aliasing.
        level = int(np.clip(np.floor(np.log2(max(src.size / max(size, 1.0), 1.0))), 0,
                            len(levels) - 1))
        texture = levels[level]
        # Source remap coordinates: corner convention scaled to the level, then pixel centres.
        src_pts = src.landmarks / (2 ** level) - 0.5
        step = int(np.clip(round(size / _GRID_CELLS), 1, _MAX_STEP))
        gh, gw = -(-roi_h // step), -(-roi_w // step)
        # Grid point (i, j) sits at the centre of its step x step block: corner-convention
        # coordinate (i + 0.5) * step, so grid index = coordinate / step - 0.5.
        dst_pts = local / step - 0.5
        # Outside the mesh, sample far off the texture: transparent black (alpha 0).
        fallback = np.array([[0.0, 0.0, -1e4], [0.0, 0.0, -1e4]])
        dst_tri, src_tri = dst_pts[src.triangles], src_pts[src.triangles]
        inverses = _affine_inverses(dst_tri)
        map_x, map_y, ids = piecewise_affine_maps(dst_tri, src_tri, fallback, (gh, gw),
                                                  inverses=inverses)
        facing = cv2.GaussianBlur(_facing(dst_tri, src_tri)[ids], (3, 3), 0)
        maps = np.dstack([map_x, map_y])  # one CV_32FC2 map: one resize, one remap argument
        full = (gw * step, gh * step)
        if step > 1:
            # Linear resize by an integer factor keeps block centres on grid points.
            maps = cv2.resize(maps, full, interpolation=cv2.INTER_LINEAR)
        maps = maps[:roi_h, :roi_w]
        if float(facing.min()) >= 1.0:
            facing_full = None  # the usual frontal face: nothing turned away
        else:
            facing_full = facing if step == 1 else cv2.resize(facing, full, interpolation=cv2.INTER_LINEAR)
            facing_full = facing_full[:roi_h, :roi_w]
        warped = _remap(texture, maps, cv2.BORDER_CONSTANT, border_value=(0, 0, 0, 0))
        if step > 1:
            # Between a grid point on the mesh and one off it, the upsampled map runs from the
            # face towards the far-off fallback and, a pixel or so in, lands back inside the
            # texture at some unrelated place with its alpha: isolated bright or dark dots, a
            # grid step apart, along the face's edge. Those pixels are transparent instead (the
            # source's mask is 0 that near the oval anyway, see _OVAL_MARGIN).
            off = (ids == len(dst_tri)).astype(np.uint8)
            if off.any():
                near = cv2.dilate(off, np.ones((3, 3), np.uint8))
                near = cv2.resize(near, full, interpolation=cv2.INTER_NEAREST)[:roi_h, :roi_w]
                partial = cv2.resize(1.0 - off.astype(np.float32), full,
                                     interpolation=cv2.INTER_LINEAR)[:roi_h, :roi_w]
                warped[..., 3][(near > 0) & (partial < 1.0)] = 0
        motion = None
        if original is not None:
            motion = self._grid_motion(inverses[0], original[src.triangles] - 0.5, ids, step)
        return warped, facing_full, motion

    @staticmethod
    def _grid_motion(inv: np.ndarray, src_tri: np.ndarray, ids: np.ndarray, step: int
                     ) -> Motion:
        """Per triangle (and a last identity for grid points off the mesh) the affine map from
        grid indices to the ROI pixel a target pixel comes from, the triangle of every grid
        point (the texture warp's: same mesh, same grid) and the grid step. Evaluated only over
        the regions that need it (see _move_pixels). `inv`: the dst triangles' barycentric
        inverses (_affine_inverses)."""
        half = 0.5 * step - 0.5
        affine = np.empty((len(inv) + 1, 2, 3), dtype=np.float64)
        affine[:-1] = np.matmul(src_tri.transpose(0, 2, 1), inv)
        affine[-1] = ((step, 0.0, half), (0.0, step, half))
        return affine.astype(np.float32).reshape(-1, 6), ids, step

    @staticmethod
    def _move_pixels(original: np.ndarray, target: np.ndarray, motion: Motion,
                     box: masks.Box) -> None:
        """target[box] = the original ROI's pixels moved by the grid motion, upsampled as a
        displacement over the box and a grid cell round it (so that the box gets the same
        values a full-size map would have)."""
        affine, ids, step = motion
        x1, y1, x2, y2 = box
        gh, gw = ids.shape
        r1, c1 = max(y1 // step - 1, 0), max(x1 // step - 1, 0)
        r2, c2 = min(-(-y2 // step) + 1, gh), min(-(-x2 // step) + 1, gw)
        if r2 <= r1 or c2 <= c1:
            return
        half = 0.5 * step - 0.5
        m = affine[ids[r1:r2, c1:c2]]
        gx = np.arange(c1, c2, dtype=np.float32)[None, :]
        gy = np.arange(r1, r2, dtype=np.float32)[:, None]
        patch = np.dstack([m[..., 0] * gx + m[..., 1] * gy + m[..., 2] - (gx * step + half),
                           m[..., 3] * gx + m[..., 4] * gy + m[..., 5] - (gy * step + half)])
        patch[ids[r1:r2, c1:c2] == len(affine) - 1] = 0.0  # off the mesh: exactly still
        if step > 1:
            patch = cv2.resize(patch, ((c2 - c1) * step, (r2 - r1) * step),
                               interpolation=cv2.INTER_LINEAR)
        oy, ox = y1 - r1 * step, x1 - c1 * step
        patch = np.ascontiguousarray(patch[oy:oy + y2 - y1, ox:ox + x2 - x1])
        ph, pw = patch.shape[:2]
        patch[..., 0] += np.arange(x1, x1 + pw, dtype=np.float32)[None, :]
        patch[..., 1] += np.arange(y1, y1 + ph, dtype=np.float32)[:, None]
        target[y1:y1 + ph, x1:x1 + pw] = _remap(original, patch, cv2.BORDER_REPLICATE)

    def _keep_frames(self, alpha: np.ndarray, skin: np.ndarray, warped: np.ndarray,
                     target: np.ndarray, local: np.ndarray, size: float, lab: bool) -> None:
        """Zero `alpha` (and `skin`) in place where the target wears glasses: the thin dark
        lines of the target's frames over the eye band stay the target's."""
        right, left = (local[eye] for eye in self._eyes)
        # The inner corners: each eye's point nearest the other eye's centre.
        inner_r = right[np.argmin(np.linalg.norm(right - left.mean(axis=0), axis=1))]
        inner_l = left[np.argmin(np.linalg.norm(left - right.mean(axis=0), axis=1))]
        gap = float(np.linalg.norm(inner_l - inner_r))
        if gap < 4.0:
            return
        k = max(3, int(_FRAME_WIDTH * size) | 1)
        kernel = cv2.getStructuringElement(cv2.MORPH_RECT, (k, k))
        h, w = alpha.shape

        def blackhat(image: np.ndarray, box: masks.Box) -> np.ndarray:
            x1, y1, x2, y2 = box
            patch = np.ascontiguousarray(image[y1:y2, x1:x2])
            grey = (cv2.extractChannel(patch, 0) if image is warped and lab
                    else cv2.cvtColor(patch, cv2.COLOR_BGR2GRAY))
            return cv2.morphologyEx(grey, cv2.MORPH_BLACKHAT, kernel).astype(np.float32)

        def clip_box(cx: float, cy: float, rx: float, ry: float) -> masks.Box:
            return (max(int(cx - rx), 0), max(int(cy - ry), 0),
                    min(int(cx + rx) + 1, w), min(int(cy + ry) + 1, h))

        # The bridge: between the inner eye corners, from a little below them to well above.
        mid = (inner_r + inner_l) / 2.0
        pad = k
        bx1, by1, bx2, by2 = clip_box(mid[0], mid[1] - 0.1 * gap, 0.3 * gap + pad, 0.3 * gap + pad)
        if bx2 - bx1 <= 2 * pad or by2 - by1 <= 2 * pad:
            return
        bridge = blackhat(target, (bx1, by1, bx2, by2))[pad:-pad, pad:-pad]
        if float((bridge.max(axis=0) > _FRAME_HIGH).mean()) < _BRIDGE_COLUMNS:
            return
        # The eye band: both eyes and round them, where frames sit.
        both = np.vstack([right, left])
        lo, hi = both.min(axis=0), both.max(axis=0)
        centre, half = (lo + hi) / 2.0, (hi - lo) / 2.0
        box = clip_box(centre[0], centre[1] - 0.1 * gap, half[0] + 0.6 * gap,
                       half[1] + 0.9 * gap)
        x1, y1, x2, y2 = box
        if x2 <= x1 or y2 <= y1:
            return
        detail = cv2.subtract(blackhat(target, box), blackhat(warped, box))
        keep = np.clip((detail - _FRAME_LOW) * (1.0 / (_FRAME_HIGH - _FRAME_LOW)), 0.0, 1.0)
        keep = cv2.GaussianBlur(cv2.dilate(keep, np.ones((3, 3), np.uint8)), (0, 0), 1.0)
        alpha[y1:y2, x1:x2] *= 1.0 - keep
        skin[y1:y2, x1:x2] &= keep <= 0.0

    def _apply_keep(self, alpha: np.ndarray, local: np.ndarray, kps: np.ndarray, size: float,
                    opener: float = 0.0
                    ) -> tuple[np.ndarray, list[tuple[np.ndarray, masks.Box, bool]]]:
        """Zero `alpha` (in place) where the target's eyes and mouth are kept (its mouth corners
        by `opener`, see mouth_opener); returns the weights for colour statistics (inside the
        face, away from its edge, eyes and mouth) and each kept region's weights, box and
        whether it is the --mouth-mask region."""
        roi_hw = alpha.shape[:2]
        skin = alpha >= 0.99
        detail = max(1.0, _DETAIL_FEATHER * size)
        # (outline, feather, is it the --mouth-mask region, does its fade start at the outline
        # at sub-pixel precision)
        polygons: list[tuple[np.ndarray, float, bool, bool]] = []
        if self.keep_eyes:
            polygons += [(local[eye], detail, False, True) for eye in self._eyes]
        closed = [(eye_region(local[eye]), closed_weight) for eye in self._eyes
                  if self.keep_eyes and (closed_weight := eye_closed(local[eye])) > 0.0]
        if self.settings.mouth_mask is not None:
            mouth = masks.mouth_polygon(local, kps, int(self.settings.mouth_mask))
            polygons.append((mouth, max(1.0, _MOUTH_FEATHER * size), True, False))
        elif self.keep_mouth_interior:
            polygons.append((local[self._lips_inner], detail, False, True))
        kept = []
        weights = [1.0] * len(polygons)
        for region, weight in closed:
            polygons.append((region, 0.25 * float(np.ptp(region[:, 0])), False, True))
            weights.append(weight)
        if opener > 0.0 and self.keep_mouth_interior and self.settings.mouth_mask is None:
            outer = local[mesh_indices.LIPS_OUTER]
            feather = _MOUTH_CORNER_FEATHER * float(np.linalg.norm(outer[len(outer) // 2] - outer[0]))
            for region in mouth_corner_regions(outer):
                # (a broad, soft region: its rasterised pixels do not show, and the exact
                # outline distance cost a few ms per frame on a large face)
                polygons.append((region, max(1.0, feather), False, False))
                weights.append(opener)
        for (poly, feather, is_mouth_mask, exact), weight in zip(polygons, weights):
            # The eyes' and inner mouth's fade follows their outline at sub-pixel precision.
            found = masks.polygon_mask_box(roi_hw, poly, feather, exact=exact)
            if found is None:
                continue
            keep, (x1, y1, x2, y2) = found
            if weight < 1.0:
                keep *= weight
            alpha[y1:y2, x1:x2] *= 1.0 - keep
            skin[y1:y2, x1:x2] &= keep <= 0.0
            kept.append((keep, (x1, y1, x2, y2), is_mouth_mask))
        return skin, kept
