"""The fast paths of the per-face image work: blob building, BGRA crops, frames OpenCV cannot
write into directly (flipped views), and the uint8 blend of the mask's soft edge."""

import cv2
import numpy as np
import pytest

from livecam.faces.align import FFHQ_512, align_matrix, arcface_template, to_blob
from livecam.processors.paste import align_crop, feathered_box, inswapper_mask, paste, paste_changes

KPS = np.array([[300.0, 250.0], [420.0, 252.0], [362.0, 320.0], [312.0, 390.0], [410.0, 388.0]], np.float32)
OBAMA_KPS = np.array([[436, 214], [540, 214], [490, 270], [450, 320], [530, 320]], dtype=np.float32)  # obama.jpg


@pytest.mark.parametrize("channels", [3, 4])
@pytest.mark.parametrize("swap_rb", [True, False])
def test_to_blob_matches_blob_from_images(channels, swap_rb):
    rng = np.random.default_rng(channels)
    images = [rng.integers(0, 256, (40, 56, channels), dtype=np.uint8) for _ in range(2)]
    got = to_blob(images, 1.0 / 127.5, -1.0, swap_rb=swap_rb)
    ref = cv2.dnn.blobFromImages([im[:, :, :3] for im in images], 1.0 / 127.5, (56, 40), (127.5,) * 3,
                                 swapRB=swap_rb)
    assert got.shape == (2, 3, 40, 56) and got.dtype == np.float32
    np.testing.assert_allclose(got, ref, atol=1e-6)


def _placement(kind: str, kps: np.ndarray, shape: tuple[int, ...]):
    """The matrix, crop size and mask the enhancer or the swapper pastes a face with."""
    if kind == "enhancer":
        matrix, size = align_matrix(kps, FFHQ_512), 512
        return matrix, size, feathered_box(size, 20.0, 51.0)
    matrix, size = align_matrix(kps, arcface_template(128)), 128
    return matrix, size, inswapper_mask(matrix, size, shape)


@pytest.mark.parametrize("opacity", [1.0, 0.8])
@pytest.mark.parametrize("kind", ["enhancer", "swapper"])
def test_paste_is_the_same_into_flipped_views_and_from_bgra_crops(opacity, kind):
    rng = np.random.default_rng(1)
    frame = rng.integers(0, 256, (720, 720, 3), dtype=np.uint8)
    matrix, size, mask = _placement(kind, KPS, frame.shape)
    crop = rng.integers(0, 256, (size, size, 3), dtype=np.uint8)
    plain = frame.copy()
    roi = paste(plain, crop, matrix, mask, opacity=opacity)
    # A BGRA crop whose alpha is the mask gives the same pixels.
    bgra = frame.copy()
    paste(bgra, cv2.merge((*cv2.split(crop), mask.alpha8)), matrix, mask, opacity=opacity)
    assert np.array_equal(bgra, plain)
    # A frame OpenCV cannot write into (a flipped view) gets the same pixels too.
    flipped = np.ascontiguousarray(frame[:, ::-1])[:, ::-1]
    assert not flipped.flags.c_contiguous
    paste(flipped, crop, matrix, mask, opacity=opacity)
    assert np.array_equal(flipped, plain)
    # Only the returned region changed, and it did change.
    x1, y1, x2, y2 = roi
    outside = np.ones(frame.shape[:2], bool)
    outside[y1:y2, x1:x2] = False
    assert np.array_equal(plain[outside], frame[outside])
    assert (plain[y1:y2, x1:x2] != frame[y1:y2, x1:x2]).mean() > 0.3


def test_soft_edge_blend_is_within_one_level_of_the_exact_mix():
    """Where the mask is between 0 and 1, the result is crop * a + frame * (1 - a) to one level."""
    frame = np.full((720, 720, 3), 40, np.uint8)
    crop = np.full((512, 512, 3), 220, np.uint8)
    matrix = align_matrix(KPS, FFHQ_512)
    mask = feathered_box(512, 20.0, 51.0)
    for opacity in (1.0, 0.8, 0.3):
        out = frame.copy()
        paste(out, crop, matrix, mask, opacity=opacity)
        inv = cv2.invertAffineTransform(matrix)
        alpha = cv2.warpAffine(mask.alpha8.astype(np.float64) / 255.0, inv, (720, 720), flags=cv2.INTER_LINEAR)
        exact = 40.0 + (220.0 - 40.0) * alpha * opacity
        diff = np.abs(out[:, :, 0].astype(np.float64) - exact)
        assert diff.max() <= 1.6, (opacity, diff.max())
        assert diff.mean() < 0.5, (opacity, diff.mean())


@pytest.mark.parametrize("opacity", [1.0, 0.5, 0.002])
@pytest.mark.parametrize("kind", ["enhancer", "swapper"])
def test_paste_changes_works_out_the_region_once_and_pastes_what_paste_does(faces_dir, monkeypatch, opacity, kind):
    # paste_changes worked out the paste region (and inverted the matrix) for its check, then
    # paste() did both again: once is enough, and the pixels are paste()'s
    from livecam.processors import paste as paste_module

    frame = cv2.imread(str(faces_dir / "obama.jpg"))
    matrix, size, mask = _placement(kind, OBAMA_KPS, frame.shape)
    crop = cv2.flip(align_crop(frame, matrix, size), 1)  # the photo's own face, mirrored
    pasted = frame.copy()
    roi = paste(pasted, crop, matrix, mask, opacity=opacity)
    regions: list[object] = []
    support_roi = paste_module._support_roi
    monkeypatch.setattr(paste_module, "_support_roi", lambda *args: regions.append(support_roi(*args)) or regions[-1])
    out = frame.copy()
    changed = paste_changes(out, crop, matrix, mask, opacity=opacity)
    assert regions == [roi]
    assert np.array_equal(out, pasted)
    assert changed == (not np.array_equal(out, frame))
    assert changed or opacity < 0.01
