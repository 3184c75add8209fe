"""faces.align: templates, similarity estimation, crop warps."""

from __future__ import annotations

import cv2
import numpy as np
import pytest

from livecam.faces.align import ARCFACE_112, align_matrix, arcface_template, estimate_similarity, invert, transform_points, warp_crop


def similarity(angle_deg: float, scale: float, tx: float, ty: float) -> np.ndarray:
    a = np.deg2rad(angle_deg)
    r = scale * np.array([[np.cos(a), -np.sin(a)], [np.sin(a), np.cos(a)]])
    return np.hstack([r, [[tx], [ty]]])


def blob_image(points: np.ndarray, shape: tuple[int, int], sigma: float = 2.0) -> np.ndarray:
    """Float image with a Gaussian blob centred on each (sub-pixel) point."""
    yy, xx = np.mgrid[:shape[0], :shape[1]].astype(np.float64)
    img = np.zeros(shape)
    for x, y in points:
        img += np.exp(-((xx - x) ** 2 + (yy - y) ** 2) / (2 * sigma**2))
    return img


def centroids(img: np.ndarray, near: np.ndarray, radius: int = 6) -> np.ndarray:
    """Intensity-weighted centroid of the blob around each expected point."""
    out = []
    for x, y in near:
        x0, y0 = int(round(x)) - radius, int(round(y)) - radius
        win = img[y0:y0 + 2 * radius + 1, x0:x0 + 2 * radius + 1].astype(np.float64)
        yy, xx = np.mgrid[:win.shape[0], :win.shape[1]]
        out.append([x0 + (xx * win).sum() / win.sum(), y0 + (yy * win).sum() / win.sum()])
    return np.array(out)


def test_arcface_template_sizes():
    np.testing.assert_allclose(arcface_template(112), ARCFACE_112)
    t128 = arcface_template(128)
    np.testing.assert_allclose(t128[:, 0], ARCFACE_112[:, 0] + 8.0, atol=1e-5)
    np.testing.assert_allclose(t128[:, 1], ARCFACE_112[:, 1], atol=1e-5)
    t256 = arcface_template(256)
    np.testing.assert_allclose(t256, t128 * 2.0, atol=1e-4)
    with pytest.raises(ValueError):
        arcface_template(100)


def test_estimate_similarity_recovers_a_known_transform():
    m = similarity(23.0, 1.7, 40.0, -12.5)
    src = np.array([[10, 20], [80, 25], [45, 60], [20, 90], [75, 95]], dtype=np.float64)
    dst = src @ m[:, :2].T + m[:, 2]
    np.testing.assert_allclose(estimate_similarity(src, dst), m, atol=1e-9)


def test_estimate_similarity_never_reflects():
    src = ARCFACE_112.astype(np.float64)
    mirrored = src * [-1.0, 1.0]  # only a reflection maps these exactly
    m = estimate_similarity(src, mirrored)
    assert np.linalg.det(m[:, :2]) > 0


def test_warp_then_inverse_warp_returns_points_within_half_a_pixel():
    # Keypoints placed by a rotated, scaled template in a 400x300 frame, drawn as blobs.
    frame_from_crop = similarity(-17.0, 1.9, 150.0, 40.0)
    kps = transform_points(ARCFACE_112, frame_from_crop)
    frame = blob_image(kps, (300, 400)).astype(np.float32)
    m = align_matrix(kps, ARCFACE_112)
    # Keypoints land on the template in the crop ...
    np.testing.assert_allclose(transform_points(kps, m), ARCFACE_112, atol=1e-3)
    crop = warp_crop(frame, m, 112)
    assert np.abs(centroids(crop, ARCFACE_112, radius=4) - ARCFACE_112).max() < 0.5
    # ... and the crop warped back puts them where they were in the frame.
    back = cv2.warpAffine(crop, invert(m), (frame.shape[1], frame.shape[0]), flags=cv2.INTER_LINEAR)
    found = centroids(back, kps, radius=6)
    assert np.abs(found - kps).max() < 0.5
    np.testing.assert_allclose(transform_points(transform_points(kps, m), invert(m)), kps, atol=1e-3)
