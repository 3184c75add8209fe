"""The mesh swapper's piecewise-affine warp: Delaunay triangles of the landmarks, sampling maps
that take every target triangle onto its source triangle (all triangles rasterised together on a
coarse grid, see piecewise_affine_maps), how squarely each triangle still faces the camera, and
the motion of the target's own pixels on the same grid."""

from __future__ import annotations

from typing import Any

import cv2
import numpy as np

from livecam.processors import masks

# Facing weight: triangles whose area shrank (relative to the face's typical scale) below LOW
# are hidden, above HIGH fully shown.
_FACING_LOW, _FACING_HIGH = 0.2, 0.45

# How the target's own pixels move: per-triangle affine maps, grid triangle ids, grid step.
Motion = tuple[np.ndarray, np.ndarray, int]


def area2(t: np.ndarray) -> np.ndarray:
    """Twice the signed area of each triangle (T, 3, 2)."""
    return ((t[:, 1, 0] - t[:, 0, 0]) * (t[:, 2, 1] - t[:, 0, 1])
            - (t[:, 2, 0] - t[:, 0, 0]) * (t[:, 1, 1] - t[:, 0, 1]))


def facing_weights(dst_tri: np.ndarray, src_tri: np.ndarray) -> np.ndarray:
    """Per triangle (plus one 1 for "no triangle"), float32 in 0..1: how squarely it faces the
    camera in the target compared with the source, from the ratio of its area to the typical
    ratio. Triangles turned away (a head in profile) or folded over get 0, so the target's own
    pixels show there instead of a squashed, smeared source texture."""
    a_dst, a_src = area2(dst_tri), area2(src_tri)
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


def bilinear_remap(src: np.ndarray, maps: np.ndarray, border_mode: int,
                   border_value: tuple[float, ...] = (0.0, 0.0, 0.0, 0.0)) -> np.ndarray:
    """Bilinear cv2.remap through one 2-channel float map of (x, y) source positions."""
    # map2=None is how OpenCV takes a CV_32FC2 map1; the stubs of OpenCV 5.0 list arrays only
    # and 5.1's accept None, so the call goes through Any to type-check with both.
    remap: Any = cv2.remap
    return remap(src, maps, None, cv2.INTER_LINEAR, borderMode=border_mode, borderValue=border_value)


def affine_inverses(tri: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
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
    `inverses` from affine_inverses(dst_tri) their computation.

    Vectorised over triangles: candidate points are every triangle's bounding box, kept when
    their barycentric weights are all >= 0. Triangles folded over (back-facing, as in a turned
    head) are written first so that front-facing ones win where they overlap.
    """
    inv, det = affine_inverses(dst_tri) if inverses is None else inverses
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
    back = np.sign(det) != np.sign(area2(src_tri))
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


def grid_motion(inv: np.ndarray, src_tri: np.ndarray, ids: np.ndarray, step: int) -> Motion:
    """Per triangle (and a last identity for grid points off the mesh) the affine map from
    grid indices to the ROI pixel a target pixel comes from, the triangle of every grid
    point (the texture warp's: same mesh, same grid) and the grid step. Evaluated only over
    the regions that need it (see move_pixels). `inv`: the dst triangles' barycentric
    inverses (affine_inverses)."""
    half = 0.5 * step - 0.5
    affine = np.empty((len(inv) + 1, 2, 3), dtype=np.float64)
    affine[:-1] = np.matmul(src_tri.transpose(0, 2, 1), inv)
    affine[-1] = ((step, 0.0, half), (0.0, step, half))
    return affine.astype(np.float32).reshape(-1, 6), ids, step


def move_pixels(original: np.ndarray, target: np.ndarray, motion: Motion, box: masks.Box) -> None:
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
    target[y1:y1 + ph, x1:x1 + pw] = bilinear_remap(original, patch, cv2.BORDER_REPLICATE)
