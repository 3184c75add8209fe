"""Alignment templates, similarity transforms and crop warps.

Matrices are 2x3 float64 affine maps from frame pixels to crop pixels (as cv2.warpAffine
takes them). Pasting a crop back into the frame is processors/paste.py's job.
"""

from __future__ import annotations

from typing import Sequence

import cv2
import numpy as np

from livecam.errors import InputError

# ArcFace 112x112 template (eyes, nose, mouth corners), as published with insightface.
ARCFACE_112 = np.array(
    [[38.2946, 51.6963], [73.5318, 51.5014], [56.0252, 71.7366], [41.5493, 92.3655], [70.7299, 92.2041]],
    dtype=np.float32,
)
# FFHQ 512x512 template used by GFPGAN.
FFHQ_512 = np.array(
    [[192.98138, 239.94708], [318.90277, 240.1936], [256.63416, 314.01935],
     [201.26117, 371.41043], [313.08905, 371.15118]],
    dtype=np.float32,
)

Roi = tuple[int, int, int, int]  # x1, y1, x2, y2 (exclusive), inside the frame


def arcface_template(size: int) -> np.ndarray:
    """The ArcFace template for a square crop: 112 as published, multiples of 128 scaled and
    shifted +8*size/128 in x (128 is inswapper's crop)."""
    if size == 112:
        return ARCFACE_112.copy()
    if size % 128 == 0:
        ratio = size / 128.0
        out = ARCFACE_112 * ratio
        out[:, 0] += 8.0 * ratio
        return out.astype(np.float32)
    if size % 112 == 0:
        return (ARCFACE_112 * (size / 112.0)).astype(np.float32)
    raise ValueError(f"ArcFace crop size must be a multiple of 112 or 128, got {size}")


def estimate_similarity(src: np.ndarray, dst: np.ndarray) -> np.ndarray:
    """Least-squares similarity transform (rotation, uniform scale, translation) taking src
    points onto dst points (Umeyama 1991, without reflection). Returns a 2x3 float64 matrix."""
    src = np.asarray(src, dtype=np.float64)
    dst = np.asarray(dst, dtype=np.float64)
    n = src.shape[0]
    src_mean, dst_mean = src.mean(axis=0), dst.mean(axis=0)
    src_c, dst_c = src - src_mean, dst - dst_mean
    cov = dst_c.T @ src_c / n
    u, s, vt = np.linalg.svd(cov)
    d = np.ones(2)
    if np.linalg.det(cov) < 0:
        d[1] = -1.0
    rot = u @ np.diag(d) @ vt
    var_src = (src_c**2).sum() / n
    scale = (s * d).sum() / var_src if var_src > 0 else 1.0
    matrix = np.empty((2, 3), dtype=np.float64)
    matrix[:, :2] = scale * rot
    matrix[:, 2] = dst_mean - scale * rot @ src_mean
    return matrix


def align_matrix(kps: np.ndarray, template: np.ndarray) -> np.ndarray:
    """Frame-to-crop matrix that puts the 5 keypoints on the template."""
    return estimate_similarity(kps, template)


def invert(matrix: np.ndarray) -> np.ndarray:
    return cv2.invertAffineTransform(np.asarray(matrix, dtype=np.float64))


def transform_points(points: np.ndarray, matrix: np.ndarray) -> np.ndarray:
    pts = np.asarray(points, dtype=np.float64)
    return (pts @ matrix[:, :2].T + matrix[:, 2]).astype(np.float32)


def warp_crop(image: np.ndarray, matrix: np.ndarray, size: int | tuple[int, int],
              interpolation: int = cv2.INTER_LINEAR, border: int = cv2.BORDER_CONSTANT) -> np.ndarray:
    w, h = (size, size) if isinstance(size, int) else size
    return cv2.warpAffine(image, matrix, (w, h), flags=interpolation, borderMode=border, borderValue=0)


def to_bgr(image: np.ndarray) -> np.ndarray:
    """BGR uint8 view of a BGR, BGRA or grayscale frame or photo (every model accepts all three)."""
    if not isinstance(image, np.ndarray) or image.dtype != np.uint8:
        raise InputError(f"expected a uint8 image array, got {getattr(image, 'dtype', type(image).__name__)}; "
                         "convert the frame to 8-bit BGR first")
    if image.ndim == 2:
        return cv2.cvtColor(image, cv2.COLOR_GRAY2BGR)
    if image.ndim == 3 and image.shape[2] == 3:
        return image
    if image.ndim == 3 and image.shape[2] == 4:
        return np.ascontiguousarray(image[:, :, :3])
    raise InputError(f"expected an HxWx3 BGR image, got shape {image.shape}; pass a colour frame")


def to_blob(images: Sequence[np.ndarray], scale: float, offset: float = 0.0, *, swap_rb: bool = True) -> np.ndarray:
    """An N x 3 x H x W float32 model input from same-sized BGR (or BGRA) uint8 images:
    x * scale + offset, channels in RGB order when swap_rb.

    Each colour plane is converted straight into its slot of the blob (one pass per plane, no
    float HWC image, no transposed copy): several times faster than cv2.dnn.blobFromImage(s)
    for the same result (to float rounding)."""
    h, w = images[0].shape[:2]
    blob = np.empty((len(images), 3, h, w), dtype=np.float32)
    for i, image in enumerate(images):
        planes = cv2.split(image)  # B, G, R (, A)
        for c in range(3):
            slot = blob[i, 2 - c if swap_rb else c]
            cv2.addWeighted(planes[c], scale, planes[c], 0.0, offset, dst=slot, dtype=cv2.CV_32F)
    return blob
