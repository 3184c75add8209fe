"""Paste-back helpers shared by the swapper and the enhancer.

The soft masks are built in crop space and warped once, together with the crop, into the
face's region of interest (ROI) of the frame, so no full-frame and no large-kernel image
operation runs per face.

`inswapper_mask` reproduces insightface's INSwapper paste-back mask analytically: that code warps
an all-white crop into the whole frame, thresholds it at 20, erodes it with a k x k box
(k = max(size // 10, 10)) and blurs it with a Gaussian of ksize 2 * max(size // 20, 5) + 1.
For a similarity warp the thresholded region is a rotated square; eroding a convex polygon by a
box moves each edge inwards by the box's extent along the edge normal; and an isotropic Gaussian
blur of a rotated box is the product of two 1-D blurred steps along the crop's axes. So the
same mask is a separable function of the crop coordinates, sampled at the crop's pixels.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import cv2
import numpy as np

from livecam.faces.align import Roi, invert

_WHITE_THRESHOLD = 20.0 / 255.0  # insightface keeps warped-white pixels above 20 of 255


def _erf(x: np.ndarray) -> np.ndarray:
    """Vectorised erf (Abramowitz and Stegun 7.1.26, |error| < 1.5e-7; numpy has none)."""
    z = np.abs(x)
    t = 1.0 / (1.0 + 0.3275911 * z)
    poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))))
    return np.sign(x) * (1.0 - poly * np.exp(-z * z))


def _soft_steps(coords: np.ndarray, lo: np.ndarray, hi: np.ndarray, sigma: np.ndarray,
                reach: np.ndarray) -> np.ndarray:
    """Rows of 1-D blurs of the boxes [lo, hi] by Gaussians of `sigma` truncated at `reach`
    (renormalised like a truncated, normalised kernel), sampled at coords. One row per entry of
    the parameter arrays; one vectorised pass for all of them."""
    s = (sigma * math.sqrt(2.0))[:, None]
    t = reach[:, None] / s
    a = np.clip((coords[None, :] - lo[:, None]) / s, -t, t)
    b = np.clip((hi[:, None] - coords[None, :]) / s, -t, t)
    e = _erf(np.stack([a, b, np.broadcast_to(t, a.shape)]))
    # P(lo < x + n < hi) for the truncated Gaussian n.
    rows = np.clip(0.5 * (e[0] + e[1]) / e[2], 0.0, 1.0)
    rows[hi <= lo] = 0.0
    return rows


Box = tuple[int, int, int, int]  # u0, v0, u1, v1: inclusive crop pixel indices


@dataclass(frozen=True)
class CropMask:
    """A soft paste mask in crop pixel space (same grid as the crop it goes with)."""

    alpha8: np.ndarray  # HxW uint8, 255 = the crop's pixel, 0 = the frame's
    support: Box | None  # crop pixels where the mask is not 0 (None: nowhere)
    interior: Box | None  # crop pixels where it is exactly 255


def _box(axis_u: np.ndarray, axis_v: np.ndarray) -> Box | None:
    u, v = np.flatnonzero(axis_u), np.flatnonzero(axis_v)
    if len(u) < 2 or len(v) < 2:
        return None
    return int(u[0]), int(v[0]), int(u[-1]), int(v[-1])


def separable_mask(axis_u: np.ndarray, axis_v: np.ndarray) -> CropMask:
    """The mask outer(axis_v, axis_u) quantised to uint8, with its support and interior boxes."""
    prod = np.clip(axis_v, 0.0, 1.0)[:, None] * (np.clip(axis_u, 0.0, 1.0) * 255.0)
    alpha8 = np.rint(prod, out=prod).astype(np.uint8)  # in 0..255 by construction
    # A product rounds to 0 when either factor is below 0.5/255, and to 255 when both are at
    # least 1 - 0.25/255.
    full = 1.0 - 0.25 / 255.0
    return CropMask(alpha8, _box(axis_u >= 0.5 / 255.0, axis_v >= 0.5 / 255.0), _box(axis_u >= full, axis_v >= full))


def inswapper_mask(matrix: np.ndarray, crop_size: int, frame_shape: tuple[int, ...], *, feather: float = 1.0,
                   padding: tuple[float, float, float, float] = (0.0, 0.0, 0.0, 0.0)) -> CropMask:
    """insightface's paste-back mask for a crop, sampled at the crop's pixel centres.

    feather scales its Gaussian (1: insightface's; 0: a hard edge; a wider one also moves the
    edges inwards by the extra reach, so the fade ends inside the crop); padding (top, right,
    bottom, left, in % of the crop) moves the box's edges inwards. The defaults are exact."""
    m = np.asarray(matrix, dtype=np.float64)
    lo, hi = -1.0 + _WHITE_THRESHOLD, crop_size - _WHITE_THRESHOLD
    # The mask's bounding box in frame pixels (clipped to the frame) sets the kernel sizes.
    inv = invert(m)
    us, vs = np.array([lo, hi, hi, lo]), np.array([lo, lo, hi, hi])
    xs = inv[0, 0] * us + inv[0, 1] * vs + inv[0, 2]
    ys = inv[1, 0] * us + inv[1, 1] * vs + inv[1, 2]
    fh, fw = frame_shape[:2]
    x1, x2 = max(math.ceil(xs.min()), 0), min(math.floor(xs.max()), fw - 1)
    y1, y2 = max(math.ceil(ys.min()), 0), min(math.floor(ys.max()), fh - 1)
    mask_size = int(math.sqrt(max(x2 - x1, 0) * max(y2 - y1, 0)))
    k = max(mask_size // 10, 10)
    k_blur = max(mask_size // 20, 5)
    sigma_px = 0.3 * (k_blur - 1) + 0.8  # OpenCV's sigma for ksize 2 * k_blur + 1
    anchor = k // 2
    # Rows: the crop's u axis, then its v axis. Erosion: a pixel survives when every pixel of
    # its k x k window (offsets -anchor .. k - 1 - anchor) lies inside, which moves each edge
    # by the window's extreme projection on that axis.
    lin = m[:, :2]
    ext = np.stack([-anchor * lin, (k - 1 - anchor) * lin])  # (2, axis, x/y)
    low_shift, high_shift = ext.min(axis=0).sum(axis=1), ext.max(axis=0).sum(axis=1)
    scale = np.hypot(lin[:, 0], lin[:, 1])  # crop units per frame pixel
    lows, highs = lo - low_shift, hi - high_shift
    sigma, reach = sigma_px * scale, (k_blur + 0.5) * scale
    if feather != 1.0 or any(padding):
        f = max(float(feather), 1e-3)  # 0: a step (a Gaussian far below a pixel)
        extra = reach * max(f - 1.0, 0.0)
        top, right, bottom, left = (crop_size * float(p) / 100.0 for p in padding)
        lows = lows + extra + np.array([left, top])
        highs = highs - extra - np.array([right, bottom])
        sigma, reach = sigma * f, reach * f
    axes = _soft_steps(np.arange(crop_size, dtype=np.float64), lows, highs, sigma, reach)
    return separable_mask(axes[0], axes[1])


def feathered_box(size: int, margin: float, feather: float) -> CropMask:
    """A size x size mask: 1 in the middle, a smooth fade of `feather` px ending `margin` px
    inside the crop's edges (exactly 0 beyond)."""
    coords = np.arange(size, dtype=np.float64) + 0.5
    dist = np.minimum(coords, size - coords) - margin
    ramp = np.clip(dist / max(feather, 1e-6), 0.0, 1.0)
    ramp = ramp * ramp * (3.0 - 2.0 * ramp)  # smoothstep: no visible edge
    return separable_mask(ramp, ramp)


def align_crop(image: np.ndarray, matrix: np.ndarray, size: int) -> np.ndarray:
    """faces.align.warp_crop(image, matrix, size, INTER_LINEAR, BORDER_REPLICATE), faster: only
    the frame region the crop samples is converted to 4 channels, OpenCV's fastest warp path
    (results agree to 1 level on rare pixels: the fixed-point coordinates round differently)."""
    inv = invert(matrix)
    corners = np.array([[0, 0], [size - 1, 0], [size - 1, size - 1], [0, size - 1]], dtype=np.float64)
    back = corners @ inv[:, :2].T + inv[:, 2]
    fh, fw = image.shape[:2]
    # 2 px beyond the footprint: the bilinear neighbours; where the frame clips the region, its
    # edge is the frame's, so the replicated border is the same.
    x1, y1 = max(math.floor(back[:, 0].min()) - 2, 0), max(math.floor(back[:, 1].min()) - 2, 0)
    x2, y2 = min(math.ceil(back[:, 0].max()) + 3, fw), min(math.ceil(back[:, 1].max()) + 3, fh)
    if x2 - x1 < 2 or y2 - y1 < 2:  # the crop lies off the frame: plain replicate warp
        return cv2.warpAffine(image, matrix, (size, size), flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_REPLICATE)
    src = cv2.cvtColor(image[y1:y2, x1:x2], cv2.COLOR_BGR2BGRA)
    shifted = np.array(matrix, dtype=np.float64)
    shifted[:, 2] += shifted[:, :2] @ np.array([x1, y1], dtype=np.float64)
    out = cv2.warpAffine(src, shifted, (size, size), flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_REPLICATE)
    return cv2.cvtColor(out, cv2.COLOR_BGRA2BGR)


def _support_roi(inv: np.ndarray, box: Box, frame_shape: tuple[int, ...]) -> Roi | None:
    """The frame region the mask's support (with its interpolation footprint) maps onto;
    inv is the crop-to-frame matrix."""
    u0, v0, u1, v1 = box
    us = np.array([u0 - 1, u1 + 1, u1 + 1, u0 - 1], dtype=np.float64)
    vs = np.array([v0 - 1, v0 - 1, v1 + 1, v1 + 1], dtype=np.float64)
    xs = inv[0, 0] * us + inv[0, 1] * vs + inv[0, 2]
    ys = inv[1, 0] * us + inv[1, 1] * vs + inv[1, 2]
    fh, fw = frame_shape[:2]
    x1, y1 = max(math.floor(xs.min()), 0), max(math.floor(ys.min()), 0)
    x2, y2 = min(math.ceil(xs.max()) + 1, fw), min(math.ceil(ys.max()) + 1, fh)
    if x2 <= x1 or y2 <= y1:
        return None
    return x1, y1, x2, y2


def _inner_rect(inv: np.ndarray, box: Box, roi: Roi) -> Box | None:
    """An axis-aligned rectangle (ROI coordinates) inside the frame image of a crop box: the
    largest square centred on the box that fits at the warp's rotation, less a pixel."""
    u0, v0, u1, v1 = box
    cu, cv = (u0 + u1) / 2.0, (v0 + v1) / 2.0
    cx = inv[0, 0] * cu + inv[0, 1] * cv + inv[0, 2]
    cy = inv[1, 0] * cu + inv[1, 1] * cv + inv[1, 2]
    scale = math.hypot(inv[0, 0], inv[1, 0])  # frame px per crop px
    cos, sin = abs(inv[0, 0]) / scale, abs(inv[1, 0]) / scale
    half = min(u1 - u0, v1 - v0) / 2.0 * scale / (cos + sin) - 1.5
    if half <= 4:
        return None
    x1, y1, x2, y2 = roi
    rx0, ry0 = max(math.ceil(cx - half), x1) - x1, max(math.ceil(cy - half), y1) - y1
    rx1, ry1 = min(math.floor(cx + half), x2) - x1, min(math.floor(cy + half), y2) - y1
    if rx1 - rx0 < 8 or ry1 - ry0 < 8:
        return None
    return rx0, ry0, rx1, ry1


def _cv_writable(view: np.ndarray) -> bool:
    """Whether OpenCV can write into this HxWxC view of a frame (packed pixels, positive row
    step); other layouts (transposed or flipped frames) get a copy assigned instead."""
    h, w, c = view.shape
    s0, s1, s2 = view.strides
    return s2 == view.itemsize and s1 == c * s2 and s0 >= w * s1


def _blend(dst: np.ndarray, content: np.ndarray, weight: np.ndarray) -> None:
    """dst = content * weight + dst * (1 - weight), in place; weight is float32 HxW in [0, 1]."""
    dst[...] = cv2.blendLinear(content, dst, weight, 1.0 - weight)


def _blend_u8(dst: np.ndarray, content: np.ndarray, weight8: np.ndarray) -> None:
    """dst = (content * w + dst * (255 - w)) / 255, in place, for a uint8 weight w (HxW).

    Two rounded uint8 products (each within half a level) instead of float weights: about half
    the cost of blendLinear; exact where w is 0 or 255."""
    w3 = cv2.cvtColor(weight8, cv2.COLOR_GRAY2BGR)
    ours = cv2.multiply(content, w3, scale=1.0 / 255.0)
    theirs = cv2.multiply(dst, cv2.bitwise_not(w3), scale=1.0 / 255.0)
    if _cv_writable(dst):
        cv2.add(ours, theirs, dst=dst)
    else:
        dst[...] = cv2.add(ours, theirs)


def _region(inv: np.ndarray, mask: CropMask, frame_shape: tuple[int, ...]) -> Roi | None:
    """The frame region paste() may change (None: none), `inv` mapping the crop into the frame."""
    return None if mask.support is None else _support_roi(inv, mask.support, frame_shape)


def paste_changes(frame: np.ndarray, crop: np.ndarray, matrix: np.ndarray, mask: CropMask, *,
                  opacity: float = 1.0) -> bool:
    """paste(), and whether it changed a pixel: at a low opacity (--blend 0.01, a face fading in
    at the size limit) the mix can round back to every pixel's own value, and a face counted as
    changed was not. The region and the inverse matrix are worked out once for both."""
    inv = invert(matrix)
    roi = _region(inv, mask, frame.shape)
    if roi is None:
        return False
    x1, y1, x2, y2 = roi
    before = frame[y1:y2, x1:x2].copy()
    _paste_into(frame, crop, inv, mask, roi, opacity, None)
    return not np.array_equal(before, frame[y1:y2, x1:x2])


def paste(frame: np.ndarray, crop: np.ndarray, matrix: np.ndarray, mask: CropMask, *, opacity: float = 1.0,
          keep: Callable[[Roi], np.ndarray] | None = None) -> Roi | None:
    """Paste a processed crop (BGR uint8, or BGRA whose alpha is already mask.alpha8) back into
    the frame through its crop-space mask, in place, touching only the region the crop covers;
    returns that region (None if off-frame).

    keep(roi) may return an ROI-sized float mask of pixels to keep from the frame (1 = keep).
    The crop and its mask are warped in one 4-channel pass (OpenCV's fastest path); the mask is
    thus quantised to 1/255, well below a visible step. Where the mask is exactly 1 and no
    `keep` applies, the warped crop is copied (or mixed at the uniform opacity) straight into
    the frame, and per-pixel weights are only made for the strips around that rectangle."""
    inv = invert(matrix)
    roi = _region(inv, mask, frame.shape)
    if roi is None:
        return None
    _paste_into(frame, crop, inv, mask, roi, opacity, keep)
    return roi


def _paste_into(frame: np.ndarray, crop: np.ndarray, inv: np.ndarray, mask: CropMask, roi: Roi, opacity: float,
                keep: Callable[[Roi], np.ndarray] | None) -> None:
    """paste() into its region `roi`, with the matrix `inv` from the frame to the crop inverted."""
    x1, y1, x2, y2 = roi
    if crop.ndim == 3 and crop.shape[2] == 4:
        bgra = crop
    else:
        bgra = cv2.cvtColor(crop, cv2.COLOR_BGR2BGRA)
        bgra[:, :, 3] = mask.alpha8
    to_roi = inv.copy()
    to_roi[:, 2] -= (x1, y1)
    warped = cv2.warpAffine(bgra, to_roi, (x2 - x1, y2 - y1), flags=cv2.INTER_LINEAR,
                            borderMode=cv2.BORDER_CONSTANT, borderValue=0)
    region = frame[y1:y2, x1:x2]
    inner = None
    if keep is None and mask.interior is not None:
        inner = _inner_rect(inv, mask.interior, roi)
    if inner is None:
        alpha = cv2.extractChannel(warped, 3).astype(np.float32)
        alpha *= np.float32(float(opacity) / 255.0)
        if keep is not None:
            alpha *= 1.0 - keep(roi)
        _blend(region, cv2.cvtColor(warped, cv2.COLOR_BGRA2BGR), alpha)
        return
    # Inside the rectangle the weight is the constant opacity: a copy or a uniform mix, written
    # straight into the frame.
    ix0, iy0, ix1, iy1 = inner
    middle = region[iy0:iy1, ix0:ix1]
    direct = _cv_writable(middle)
    if opacity == 1.0 and direct:
        cv2.cvtColor(warped[iy0:iy1, ix0:ix1], cv2.COLOR_BGRA2BGR, dst=middle)
    elif opacity == 1.0:
        middle[...] = cv2.cvtColor(warped[iy0:iy1, ix0:ix1], cv2.COLOR_BGRA2BGR)
    else:
        content = cv2.cvtColor(warped[iy0:iy1, ix0:ix1], cv2.COLOR_BGRA2BGR)
        mixed = cv2.addWeighted(content, float(opacity), middle, 1.0 - float(opacity), 0.0,
                                dst=middle if direct else None)
        if not direct:
            middle[...] = mixed
    h, w = region.shape[:2]
    # The four strips around that rectangle: per-pixel weights, made for the strips only.
    for ys, xs in ((slice(0, iy0), slice(0, w)), (slice(iy1, h), slice(0, w)),
                   (slice(iy0, iy1), slice(0, ix0)), (slice(iy0, iy1), slice(ix1, w))):
        part = region[ys, xs]
        if part.size:
            strip = warped[ys, xs]
            weight = cv2.extractChannel(strip, 3)
            if opacity != 1.0:
                weight = cv2.convertScaleAbs(weight, alpha=float(opacity))  # rounded, in 0..255
            _blend_u8(part, cv2.cvtColor(strip, cv2.COLOR_BGRA2BGR), weight)
