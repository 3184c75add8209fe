"""faces.align: templates, similarity estimation, crop warps and ROI-limited paste-back."""

from __future__ import annotations

import numpy as np
import pytest

from livecam.faces.align import (ARCFACE_112, align_matrix, arcface_template, crop_roi, estimate_similarity,
                                 feather_mask, invert, paste_back, transform_points, warp_crop, warp_to_roi)


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
    roi = crop_roi(m, 112, frame.shape)
    assert roi is not None
    back = warp_to_roi(crop, m, roi)
    found = centroids(back, kps - [roi[0], roi[1]], radius=6) + [roi[0], roi[1]]
    assert np.abs(found - kps).max() < 0.5
    np.testing.assert_allclose(transform_points(transform_points(kps, m), invert(m)), kps, atol=1e-3)


def test_paste_back_changes_no_pixel_outside_the_roi():
    rng = np.random.default_rng(3)
    frame = rng.integers(0, 256, (240, 320, 3), dtype=np.uint8)
    before = frame.copy()
    kps = transform_points(arcface_template(128), similarity(30.0, 0.6, 120.0, 50.0))
    m = align_matrix(kps, arcface_template(128))
    crop = np.full((128, 128, 3), 255, dtype=np.uint8)
    roi = paste_back(frame, crop, m, np.ones((128, 128), np.float32))
    assert roi is not None
    x1, y1, x2, y2 = roi
    outside = np.ones(frame.shape[:2], bool)
    outside[y1:y2, x1:x2] = False
    assert np.array_equal(frame[outside], before[outside])
    assert (frame[y1:y2, x1:x2] != before[y1:y2, x1:x2]).any()
    # The ROI is the crop's footprint, not the frame: a 128 crop at scale 1/0.6 spans < 320 px.
    assert (x2 - x1) < 0.8 * frame.shape[1] and (y2 - y1) < frame.shape[0]
    # Every changed pixel lies within the warped crop square (plus a pixel for interpolation).
    ys, xs = np.nonzero((frame != before).any(axis=2))
    in_crop = transform_points(np.stack([xs, ys], axis=1).astype(np.float64), m)
    assert in_crop.min() >= -1.0 and in_crop.max() <= 129.0


def test_paste_back_respects_mask_and_opacity():
    frame = np.zeros((200, 200, 3), np.uint8)
    m = similarity(0.0, 1.0, -50.0, -50.0)  # crop origin at frame (50, 50)
    crop = np.full((100, 100, 3), 200, np.uint8)
    mask = np.zeros((100, 100), np.float32)
    mask[25:75, 25:75] = 1.0
    paste_back(frame, crop, m, mask, opacity=0.5)
    assert frame[100, 100, 0] == 100  # half of 200 inside the mask
    assert frame[60, 60, 0] == 0  # inside the crop, outside the mask


def test_paste_back_off_frame_is_a_no_op():
    frame = np.zeros((50, 50, 3), np.uint8)
    m = similarity(0.0, 1.0, 500.0, 500.0)  # the crop maps to x, y < -400
    assert paste_back(frame, np.full((32, 32, 3), 255, np.uint8), m, np.ones((32, 32), np.float32)) is None
    assert not frame.any()


def test_feather_mask_is_one_inside_and_zero_at_the_border():
    mask = feather_mask(128)
    assert mask.shape == (128, 128) and mask.dtype == np.float32
    assert mask[64, 64] == pytest.approx(1.0) and mask[0, 0] == pytest.approx(0.0)
    assert mask[64, 0] < 0.05 and mask.min() >= 0.0 and mask.max() <= 1.0 + 1e-6
