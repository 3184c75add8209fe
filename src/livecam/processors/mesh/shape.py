"""The mesh swapper's shape transfer: the target's inner landmarks moved towards the source's
proportions (shape_offsets), never folding its mesh, and how differently two faces are turned
(turned_apart)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

import numpy as np

from livecam.faces import mesh_indices
from livecam.processors.mesh.warp import area2

if TYPE_CHECKING:  # (source.py builds a PreparedSource with shape_weights: a type-only import)
    from livecam.processors.mesh.source import PreparedSource

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
    before = area2(tgt[triangles])
    sign, least = np.sign(before), _SQUASH * np.abs(before)
    n = len(offsets)
    free = src.shape_weight > 0.0
    for members in groups:
        free[members] = False
    start, end = src.edges[:, 0], src.edges[:, 1]
    degree = np.maximum(np.bincount(start, minlength=n), 1)
    for round_ in range(_SPREAD_ROUNDS + _HALVE_ROUNDS + n):
        bad = area2((tgt + offsets)[triangles]) * sign < least
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
