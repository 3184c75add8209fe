"""Colour matching of a swapped face to the target's skin.

Per-channel mean and standard deviation transfer in CIE LAB (Reinhard et al. 2001), with the
statistics of both images taken inside one mask, so that only skin drives the match while the
correction is applied to every pixel of the face image. It runs in OpenCV's 8-bit LAB, where
the per-channel affine map is one 256-entry lookup table. `chroma_by_lightness` then gives the
face the target's colour at each lightness (a pale target's colourful shadows), and
`match_shading` optionally moves the face's low-frequency lightness (the lighting), and a and b
(regional colour), towards the target's.
"""

from __future__ import annotations

import cv2
import numpy as np

# The std ratios are clamped so that a nearly flat region (a tiny or overexposed face) cannot
# blow the contrast up. Chroma is never stretched much: a target's a/b spread is easily inflated
# by hair or background at the mask's edge, and stretching the source's chroma with it turns
# its dark features (brows, shadows) blue or green.
_MIN_RATIO = np.array([0.6, 0.5, 0.5], dtype=np.float32)
_MAX_RATIO = np.array([1.5, 1.1, 1.1], dtype=np.float32)
_EPS = 1e-2
# A target without chroma (a black-and-white photo or video: a and b flat at 128) gets a grey
# face; the chroma floor above would keep half of the source's colours on it.
_GREY_STD, _GREY_OFFSET = 1.0, 1.5
_KNEE_STD, _KNEE_SLOPE = 1.5, 0.4
# Statistics are taken on a regular subsample of at most about this many pixels: means and
# standard deviations of a smooth skin region do not need every pixel.
_STATS_PIXELS = 16384
# Colour by lightness (chroma_by_lightness): mean a and b in bins of BIN_WIDTH lightness
# levels, shrunk towards the line fitted through all of them (by PRIOR of the total weight, so
# that a bin of few pixels follows the line; its slope held within SLOPE_MAX a or b units per
# L unit and followed at most SLOPE_RANGE standard deviations from the mean L); skipped on a
# face with almost no lightness spread (variance under FLAT). A shift is at most SHIFT_MAX,
# and stays at its value at SHINE_FROM standard deviations over the target's mean lightness
# above that.
_BIN_WIDTH, _BIN_PRIOR = 16, 0.01
_SLOPE_MAX, _SLOPE_RANGE, _LIGHTNESS_FLAT = 0.4, 2.0, 4.0
_SHIFT_MAX, _SHINE_FROM = 24, 0.5
_HIST_PIXELS = 4096  # its statistics are taken on a regular subsample of about this many pixels
_GREYER = 0.2  # see match_shading's greyer_only


def _weighted_stats(lab: np.ndarray, weights: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    flat = lab.reshape(-1, 3).astype(np.float32)
    w = weights.reshape(-1)
    total = float(w.sum())
    mean = (w @ flat).astype(np.float64) / total
    var = (w @ (flat * flat)).astype(np.float64) / total - mean * mean
    return mean, np.sqrt(np.maximum(var, 0.0))


def sample_step(shape_hw: tuple[int, ...]) -> int:
    """Stride of the regular subsample the statistics are taken on."""
    return max(1, int(np.sqrt(shape_hw[0] * shape_hw[1] / _STATS_PIXELS)))


def transfer_lut(face_lab: np.ndarray, target_lab: np.ndarray, weights: np.ndarray) -> np.ndarray | None:
    """The 256x1x3 uint8 lookup table (for cv2.LUT on 8-bit LAB) moving face_lab's weighted
    per-channel mean and std onto target_lab's; None when the weights are all zero.

    face_lab, target_lab: HxWx3 uint8 OpenCV LAB samples of one shape; weights: HxW >= 0."""
    w = np.clip(weights.astype(np.float32, copy=False), 0.0, None)
    if float(w.sum()) <= 0.0:
        return None
    mean_f, std_f = _weighted_stats(face_lab, w)
    mean_t, std_t = _weighted_stats(target_lab, w)
    ratio = np.clip((std_t + _EPS) / (std_f + _EPS), _MIN_RATIO, _MAX_RATIO)
    if np.all(std_t[1:] < _GREY_STD) and np.all(np.abs(mean_t[1:] - 128.0) < _GREY_OFFSET):
        ratio[1:] = 0.0
    offset = mean_t - mean_f * ratio
    levels = np.arange(256, dtype=np.float64)[:, None]
    mapped = levels * ratio + offset
    # Soft knee on lightness: the source photo's specular highlights (a shiny nose under a flash)
    # are not the target's; squeeze what lies beyond the target's bright skin.
    knee = mean_t[0] + _KNEE_STD * std_t[0]
    over = mapped[:, 0] > knee
    mapped[over, 0] = knee + (mapped[over, 0] - knee) * _KNEE_SLOPE
    return np.clip(mapped + 0.5, 0, 255).astype(np.uint8).reshape(256, 1, 3)


def match_lab(face_bgr: np.ndarray, target_bgr: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """`face_bgr` recoloured so that its LAB mean and std inside `mask` equal `target_bgr`'s.

    face_bgr and target_bgr: HxWx3 uint8 BGR of the same shape (the face already warped onto
    the target). mask: HxW bool or float weights (>= 0). Returns a new HxWx3 uint8 BGR image;
    an empty mask returns an unchanged copy.

    Works in OpenCV's 8-bit LAB (L scaled to 0..255, a and b offset by 128), where the
    per-channel affine transfer is a 256-entry lookup table: two colour conversions and one
    LUT per call, whatever the size, and the statistics come from a subsample.
    """
    if face_bgr.shape != target_bgr.shape or face_bgr.ndim != 3 or face_bgr.shape[2] != 3:
        raise ValueError(f"match_lab needs two HxWx3 images of one shape, got {face_bgr.shape} "
                         f"and {target_bgr.shape}")
    if mask.shape[:2] != face_bgr.shape[:2]:
        raise ValueError(f"match_lab mask must be {face_bgr.shape[:2]}, got {mask.shape}")
    step = sample_step(mask.shape)
    face_lab = cv2.cvtColor(np.ascontiguousarray(face_bgr), cv2.COLOR_BGR2LAB)
    target_lab = cv2.cvtColor(np.ascontiguousarray(target_bgr[::step, ::step]), cv2.COLOR_BGR2LAB)
    table = transfer_lut(face_lab[::step, ::step], target_lab, mask[::step, ::step])
    if table is None:
        return face_bgr.copy()
    return cv2.cvtColor(cv2.LUT(face_lab, table), cv2.COLOR_LAB2BGR)


def match_shading(face_lab: np.ndarray, target_bgr: np.ndarray, weights: np.ndarray,
                  radius_px: float, strength: float = 0.7, chroma: float = 0.0,
                  greyer_only: bool = False, darken_only: bool = False) -> np.ndarray:
    """face_lab (uint8 OpenCV LAB) with its low-frequency lightness (and, by `chroma`, its
    low-frequency a and b) moved towards target_bgr's.

    Mean/std matching leaves the source photo's lighting (a key light from the other side, a
    bright nose) on the target, and its regional colour (eye sockets less warm than the cheeks
    in the source than in the target turn pale grey). This adds `strength` x the difference of
    the two images' lightness (`chroma` x that of a and b) blurred at `radius_px` (a Gaussian
    sigma about a tenth of the face) and normalised by the blurred weights, so only where the
    weights are set counts. It runs at a reduced scale (the blur is wide), then is upsampled.
    `greyer_only`: the a and b move only where the face is, blurred, less colourful than the
    target (by up to _GREYER of the target's chroma for the full move), never taking colour
    away. `darken_only` (lightness only): the face only darkens. Returns a new uint8 LAB image.
    """
    h, w = weights.shape[:2]
    scale = min(1.0, 3.0 / max(radius_px, 1e-6))  # the blur becomes a 3-px sigma
    sw, sh = max(2, int(round(w * scale))), max(2, int(round(h * scale)))
    # Thin the inputs before the area-averaging resize: it reads every pixel it is given.
    k = max(1, int(1.0 / (2.0 * scale)))
    small_w = cv2.resize(np.ascontiguousarray(weights[::k, ::k], dtype=np.float32), (sw, sh),
                         interpolation=cv2.INTER_AREA)
    channels = 3 if chroma > 0.0 else 1
    face_small = cv2.resize(np.ascontiguousarray(face_lab[::k, ::k]), (sw, sh),
                            interpolation=cv2.INTER_AREA).astype(np.float32)
    target_small = cv2.cvtColor(cv2.resize(np.ascontiguousarray(target_bgr[::k, ::k]), (sw, sh),
                                           interpolation=cv2.INTER_AREA),
                                cv2.COLOR_BGR2LAB).astype(np.float32)
    if channels == 1:
        face_small, target_small = face_small[..., 0], target_small[..., 0]
    sigma = radius_px * sw / w

    def blur(a: np.ndarray) -> np.ndarray:
        return cv2.GaussianBlur(a, (0, 0), sigma, borderType=cv2.BORDER_REPLICATE)

    den = blur(small_w)
    wts = small_w if channels == 1 else small_w[..., None]
    delta = blur(target_small * wts) - blur(face_small * wts)
    fade = np.clip(den / 0.2, 0.0, 1.0) / np.maximum(den, 1e-3)  # fade out far from any weight
    gains = np.array([strength, chroma, chroma], dtype=np.float32)[:channels]
    if greyer_only and channels == 3:
        own = np.hypot(face_small[..., 1] - 128.0, face_small[..., 2] - 128.0)
        theirs = np.hypot(target_small[..., 1] - 128.0, target_small[..., 2] - 128.0)
        wanted = blur(theirs * small_w)
        fade = fade * np.clip((wanted - blur(own * small_w)) / np.maximum(_GREYER * wanted, 1e-3),
                              0.0, 1.0)
    delta *= fade if channels == 1 else fade[..., None] * gains
    if channels == 1:
        delta *= strength
        if darken_only:
            np.minimum(delta, 0.0, out=delta)
        full = cv2.resize(delta, (w, h), interpolation=cv2.INTER_LINEAR)
        lightness = cv2.add(cv2.extractChannel(face_lab, 0), full, dtype=cv2.CV_8U)  # saturating
        _, a, b = cv2.split(face_lab)
        return cv2.merge([lightness, a, b])
    full = cv2.resize(delta, (w, h), interpolation=cv2.INTER_LINEAR)
    return cv2.add(face_lab, full, dtype=cv2.CV_8U)  # saturating


def _colour_by_lightness(lab: np.ndarray, w: np.ndarray, total: float
                         ) -> tuple[np.ndarray, float, float] | None:
    """(256, 2) mean a and b of the pixels of each lightness (binned, shrunk towards the fitted
    line, interpolated between bin centres), the mean L and its standard deviation; None on a
    nearly flat lightness. w: flat weights summing to total. Everything comes from three
    weighted histograms over the 256 lightness levels (no per-pixel float arrays)."""
    flat = lab.reshape(-1, 3)
    lightness = flat[:, 0]
    count = np.bincount(lightness, weights=w, minlength=256)
    sums = np.stack([np.bincount(lightness, weights=w * flat[:, c], minlength=256)
                     for c in (1, 2)], axis=1)
    levels = np.arange(256, dtype=np.float64)
    mean = float(count @ levels) / total
    dev = levels - mean
    var = float(count @ (dev * dev)) / total
    if var < _LIGHTNESS_FLAT:
        return None
    std = float(np.sqrt(var))
    mean_ab = sums.sum(axis=0) / total
    slope = np.clip((dev @ sums) / total / var, -_SLOPE_MAX, _SLOPE_MAX)
    bins = 256 // _BIN_WIDTH
    centres = (np.arange(bins) + 0.5) * _BIN_WIDTH - 0.5
    reach = np.clip(centres - mean, -_SLOPE_RANGE * std, _SLOPE_RANGE * std)
    line = mean_ab + reach[:, None] * slope
    prior = _BIN_PRIOR * total
    binned = (sums.reshape(bins, _BIN_WIDTH, 2).sum(axis=1) + prior * line) \
        / (count.reshape(bins, _BIN_WIDTH).sum(axis=1) + prior)[:, None]
    table = np.stack([np.interp(levels, centres, binned[:, c]) for c in (0, 1)], axis=1)
    return table, mean, std


def chroma_by_lightness(face_lab: np.ndarray, target_lab: np.ndarray,
                        weights: np.ndarray) -> np.ndarray | None:
    """A 256x1x3 int16 table of a and b offsets by lightness (for add_by_lightness) that gives
    face_lab the target's colour at each lightness: the target's mean a and b at that L minus
    the face's. None when nothing would change.

    The mean/std transfer maps a and b whatever the lightness, so the source's own relation
    stays: dark skin's shadows (nose sides, folds under the eyes) and dark brows are less
    colourful than the rest of it, while a pale target's shadows are its most colourful skin;
    on such a target the source's folds came out as grey patches. Above the target's mean
    lightness (_SHINE_FROM) the shift is held: the target's brightest skin is its shine,
    colourless, which would bleach the source's lit skin (Biden's nose tip on astronaut.png).
    face_lab and target_lab: HxWx3 uint8 OpenCV LAB samples of one shape (the face after the
    transfer); weights: HxW >= 0."""
    stride = max(1, int(np.sqrt(weights.size / _HIST_PIXELS)))
    face_lab, target_lab = face_lab[::stride, ::stride], target_lab[::stride, ::stride]
    w = np.clip(weights[::stride, ::stride].reshape(-1).astype(np.float64), 0.0, None)
    total = float(w.sum())
    if total <= 0.0:
        return None
    face = _colour_by_lightness(face_lab, w, total)
    target = _colour_by_lightness(target_lab, w, total)
    if face is None or target is None:
        return None
    shift = np.clip(np.round(target[0] - face[0]), -_SHIFT_MAX, _SHIFT_MAX)
    top = int(np.clip(round(target[1] + _SHINE_FROM * target[2]), 0, 255))
    shift[top + 1:] = shift[top]
    if not shift.any():
        return None
    table = np.zeros((256, 1, 3), dtype=np.int16)
    table[:, 0, 1:] = shift
    return table


def add_by_lightness(face_lab: np.ndarray, table: np.ndarray) -> np.ndarray:
    """face_lab (uint8 LAB) plus the table's offsets looked up by each pixel's L (saturating)."""
    lightness = cv2.extractChannel(face_lab, 0)
    offsets = cv2.LUT(cv2.merge([lightness, lightness, lightness]), table)
    return cv2.add(face_lab, offsets, dtype=cv2.CV_8U)
