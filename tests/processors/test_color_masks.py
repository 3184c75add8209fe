"""Colour matching (LAB mean/std transfer) and soft masks (polygons, mouth region)."""

from __future__ import annotations

import cv2
import numpy as np
import pytest

from livecam.faces import mesh_indices
from livecam.processors import color, masks


def _lab(image: np.ndarray) -> np.ndarray:
    return cv2.cvtColor(image.astype(np.float32) / 255.0, cv2.COLOR_BGR2LAB)


def _textured(shape: tuple[int, int], base: tuple[int, int, int], seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    img = np.empty((*shape, 3), dtype=np.float32)
    img[...] = base
    img += rng.normal(0.0, 12.0, size=img.shape)
    return np.clip(img, 0, 255).astype(np.uint8)


# ---------------------------------------------------------------- colour


def test_match_lab_moves_mean_and_std_inside_mask_to_target() -> None:
    face = _textured((64, 64), (60, 90, 200), seed=1)  # reddish
    target = _textured((64, 64), (120, 150, 170), seed=2)  # paler skin
    mask = np.zeros((64, 64), dtype=bool)
    mask[8:56, 8:56] = True
    out = color.match_lab(face, target, mask)
    assert out.dtype == np.uint8 and out.shape == face.shape
    lo, lt = _lab(out)[mask], _lab(target)[mask]
    lf = _lab(face)[mask]
    # The mean moved onto the target's (it was far from it before).
    assert np.abs(lf.mean(0) - lt.mean(0)).max() > 10
    assert np.abs(lo.mean(0) - lt.mean(0)).max() < 1.5
    assert np.abs(lo.std(0) - lt.std(0)).max() < 1.5


def test_match_lab_statistics_come_only_from_the_mask() -> None:
    face = _textured((40, 40), (100, 100, 100), seed=3)
    target = _textured((40, 40), (100, 100, 100), seed=4)
    target[:, 20:] = (0, 255, 0)  # outside the mask: must not pull the colour
    mask = np.zeros((40, 40), dtype=np.float32)
    mask[:, :20] = 1.0
    out = color.match_lab(face, target, mask)
    assert np.abs(_lab(out)[:, :20].mean((0, 1)) - _lab(target)[:, :20].mean((0, 1))).max() < 1.5


def test_match_lab_with_float_weights_and_empty_mask() -> None:
    face = _textured((32, 32), (50, 60, 70), seed=5)
    target = _textured((32, 32), (150, 160, 170), seed=6)
    empty = np.zeros((32, 32), dtype=np.float32)
    np.testing.assert_array_equal(color.match_lab(face, target, empty), face)
    soft = np.full((32, 32), 0.3, dtype=np.float32)
    out = color.match_lab(face, target, soft)
    assert np.abs(_lab(out).mean((0, 1)) - _lab(target).mean((0, 1))).max() < 1.5


def test_match_lab_identity_when_images_are_equal() -> None:
    face = _textured((32, 32), (80, 120, 160), seed=7)
    out = color.match_lab(face, face.copy(), np.ones((32, 32), bool))
    diff = np.abs(out.astype(int) - face.astype(int))
    # Unchanged up to rounding, except the brightest few percent that the highlight knee
    # (lightness beyond mean + 1.5 std) softens.
    assert np.percentile(diff, 90) <= 1 and diff.mean() < 0.8


def test_match_lab_softens_highlights_beyond_the_targets_skin() -> None:
    target = _textured((40, 40), (120, 140, 170), seed=8)
    face = target.copy()
    face[18:22, 18:22] = 250  # a specular highlight
    out = color.match_lab(face, target, np.ones((40, 40), bool))
    assert _lab(out)[20, 20, 0] < _lab(face)[20, 20, 0] - 3


def test_match_lab_rejects_mismatched_shapes() -> None:
    with pytest.raises(ValueError):
        color.match_lab(np.zeros((4, 4, 3), np.uint8), np.zeros((5, 4, 3), np.uint8), np.ones((4, 4)))


# ---------------------------------------------------------------- polygon masks


SQUARE = np.array([[20, 20], [60, 20], [60, 60], [20, 60]], dtype=np.float32)


def test_polygon_mask_hard_edges_without_feather() -> None:
    m = masks.polygon_mask((80, 100), SQUARE, 0)
    assert m.dtype == np.float32 and m.shape == (80, 100)
    assert m[40, 40] == 1.0 and m[10, 10] == 0.0 and m[40, 70] == 0.0
    assert set(np.unique(m)) <= {0.0, 1.0}


def test_polygon_mask_feather_is_exactly_one_inside_and_fades_outside() -> None:
    m = masks.polygon_mask((80, 100), SQUARE, 8)
    assert np.all(m[21:60, 21:60] == 1.0)  # interior untouched by the feather
    row = m[40, 60:75]
    assert np.all(np.diff(row) <= 1e-6)  # monotone fade outwards
    assert 0.0 < m[40, 64] < 1.0
    assert m[40, 70] == 0.0 and m[5, 5] == 0.0
    assert m.min() >= 0.0 and m.max() <= 1.0


def test_polygon_mask_clips_polygons_outside_the_image() -> None:
    poly = np.array([[-30, -30], [20, -30], [20, 20], [-30, 20]], dtype=np.float32)
    m = masks.polygon_mask((50, 50), poly, 4)
    assert m[0, 0] == 1.0 and m[10, 10] == 1.0 and m[40, 40] == 0.0
    far = np.array([[200, 200], [300, 200], [300, 300]], dtype=np.float32)
    assert masks.polygon_mask((50, 50), far, 4).max() == 0.0


# ---------------------------------------------------------------- mouth region


# Upright face: eyes at y=40, mouth corners at y=80, 30 px apart.
KPS = np.array([[35, 40], [65, 40], [50, 60], [35, 80], [65, 80]], dtype=np.float32)


def _synthetic_landmarks() -> np.ndarray:
    """468 points: the outer lips on an ellipse round (50, 80), the chin at (50, 115)."""
    lm = np.tile(np.array([[50.0, 50.0]], dtype=np.float32), (468, 1))
    ring = mesh_indices.LIPS_OUTER
    theta = np.linspace(np.pi, -np.pi, len(ring), endpoint=False)  # starts at the left corner
    lm[ring, 0] = 50 + 15 * np.cos(theta)
    lm[ring, 1] = 80 - 6 * np.sin(theta)
    lm[masks.CHIN_INDEX] = (50, 115)
    return lm


def test_mouth_polygon_from_landmarks_is_the_outer_lip_ring() -> None:
    lm = _synthetic_landmarks()
    poly = masks.mouth_polygon(lm, KPS, 0)
    np.testing.assert_allclose(poly, lm[mesh_indices.LIPS_OUTER], atol=1e-4)
    m = masks.polygon_mask((130, 100), poly, 0)
    assert m[80, 50] == 1.0 and m[95, 50] == 0.0 and m[60, 50] == 0.0


def test_mouth_polygon_size_grows_towards_the_chin_only() -> None:
    lm = _synthetic_landmarks()
    small, big = masks.mouth_polygon(lm, KPS, 0), masks.mouth_polygon(lm, KPS, 100)
    assert big[:, 1].max() > small[:, 1].max() + 15  # well down towards the chin at y=115
    assert big[:, 1].max() < 115  # but not past it
    assert big[:, 1].min() == pytest.approx(small[:, 1].min(), abs=1e-4)  # upper lip unchanged
    mid = masks.mouth_polygon(lm, KPS, 50)
    assert small[:, 1].max() < mid[:, 1].max() < big[:, 1].max()


def test_mouth_polygon_ellipse_from_keypoints() -> None:
    poly = masks.mouth_polygon(None, KPS, 0)
    assert poly.dtype == np.float32 and poly.shape[1] == 2 and len(poly) >= 16
    assert poly[:, 0].min() < 35 and poly[:, 0].max() > 65  # spans both corners
    m = masks.polygon_mask((130, 100), poly, 0)
    assert m[80, 50] == 1.0 and m[80, 35] == 1.0 and m[40, 50] == 0.0
    grown = masks.mouth_polygon(None, KPS, 100)
    assert grown[:, 1].max() > poly[:, 1].max() + 10
    assert grown[:, 1].min() == pytest.approx(poly[:, 1].min(), abs=1e-4)


def test_mouth_polygon_follows_head_roll() -> None:
    # The same face rotated 90 degrees clockwise in the image: "down the face" is now -x.
    rot = np.array([[0, -1], [1, 0]], dtype=np.float32)
    kps = (KPS - 50) @ rot.T + 50
    poly0 = masks.mouth_polygon(None, kps, 0)
    poly100 = masks.mouth_polygon(None, kps, 100)
    assert poly100[:, 0].min() < poly0[:, 0].min() - 10
    assert poly100[:, 1].min() == pytest.approx(poly0[:, 1].min(), abs=1.0)


def test_match_shading_takes_the_targets_lighting_direction() -> None:
    # Flat face, target lit from the image's left: the face gets brighter on the left.
    face = np.full((120, 120, 3), 128, dtype=np.uint8)
    ramp = np.linspace(200, 60, 120).astype(np.uint8)
    target = np.repeat(np.repeat(ramp[None, :, None], 120, axis=0), 3, axis=2)
    face_lab = cv2.cvtColor(face, cv2.COLOR_BGR2LAB)
    weights = np.ones((120, 120), dtype=np.float32)
    out = color.match_shading(face_lab, target, weights, radius_px=12.0, strength=1.0)
    left, right = out[:, 10:30, 0].mean(), out[:, 90:110, 0].mean()
    assert left > right + 30
    np.testing.assert_array_equal(out[..., 1:], face_lab[..., 1:])  # only lightness changes
    none = color.match_shading(face_lab, target, np.zeros_like(weights), radius_px=12.0)
    np.testing.assert_array_equal(none, face_lab)  # no weights: nothing to follow


def test_match_shading_with_chroma_takes_the_targets_regional_colour() -> None:
    # Flat grey face, target warm on the left half and cool on the right: the face follows.
    face_lab = cv2.cvtColor(np.full((120, 120, 3), 128, dtype=np.uint8), cv2.COLOR_BGR2LAB)
    target = np.empty((120, 120, 3), dtype=np.uint8)
    target[:, :60] = (80, 130, 200)
    target[:, 60:] = (200, 130, 80)
    weights = np.ones((120, 120), dtype=np.float32)
    out = color.match_shading(face_lab, target, weights, radius_px=8.0, strength=0.0, chroma=1.0)
    assert out[:, 5:25, 2].mean() > out[:, 95:115, 2].mean() + 40  # b*: yellow left, blue right
    plain = color.match_shading(face_lab, target, weights, radius_px=8.0, strength=0.0)
    np.testing.assert_array_equal(plain[..., 1:], face_lab[..., 1:])  # chroma 0: only lightness


def test_match_lab_on_a_grey_target_gives_a_grey_face() -> None:
    rng = np.random.default_rng(7)
    face = np.clip(rng.normal((90, 120, 190), 25, (64, 64, 3)), 0, 255).astype(np.uint8)  # warm skin
    target = np.repeat(rng.integers(60, 200, (64, 64, 1), dtype=np.uint8), 3, axis=2)  # black and white
    out = color.match_lab(face, target, np.ones((64, 64), bool)).astype(int)
    assert (out.max(axis=2) - out.min(axis=2)).max() <= 2


def _lab_ramp(lightness: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.dstack([np.broadcast_to(c, (64, 256)) for c in (lightness, a, b)]).astype(np.uint8)


def test_chroma_by_lightness_gives_the_face_the_targets_colourful_shadows() -> None:
    # Both run dark to light across; the face's colour is the same at every lightness (its
    # shadows greyer than the target's, whose colour rises as it darkens: a pale target).
    lightness = np.linspace(60, 240, 256)
    face = _lab_ramp(lightness, np.full(256, 140.0), np.full(256, 150.0))
    target = _lab_ramp(lightness, 140.0 + 0.2 * (150.0 - lightness), 150.0 + 0.25 * (150.0 - lightness))
    weights = np.ones((64, 256), dtype=np.float32)
    table = color.chroma_by_lightness(face, target, weights)
    assert table is not None and table.dtype == np.int16
    out = color.add_by_lightness(face, table).astype(float)
    dark = lightness < 110
    np.testing.assert_allclose(out[0, dark, 1:], target[0, dark, 1:], atol=2.0)
    np.testing.assert_array_equal(out[..., 0], face[..., 0])  # lightness is untouched
    # Above the target's mean lightness (150) plus half its spread (52) the shift is held:
    # its lightest skin would be taken for its shine.
    top = lightness > 190
    held = out[0, top, 1:] - face[0, top, 1:]
    assert np.ptp(held, axis=0).max() <= 1.0
    assert np.abs(held).max() < np.abs(target[0, top, 1:] - face[0, top, 1:].astype(float)).max() - 5
    assert color.chroma_by_lightness(face, face, weights) is None  # nothing to change
    assert color.chroma_by_lightness(face, target, np.zeros_like(weights)) is None


def test_match_shading_greyer_only_adds_colour_and_never_takes_it_away() -> None:
    # The face is grey on the left and as warm as the target on the right, the target warm
    # all over: the grey half takes the target's colour, the warm half is left as it was.
    # The other way round (a warm face on a grey target) nothing changes.
    warm, grey = (80, 130, 200), (150, 150, 150)
    face = np.empty((120, 120, 3), dtype=np.uint8)
    face[:, :60], face[:, 60:] = grey, warm
    face_lab = cv2.cvtColor(face, cv2.COLOR_BGR2LAB)
    target = np.full((120, 120, 3), warm, dtype=np.uint8)
    weights = np.ones((120, 120), dtype=np.float32)
    out = color.match_shading(face_lab, target, weights, 6.0, 0.0, 1.0, greyer_only=True)
    chroma = np.hypot(out[..., 1].astype(float) - 128, out[..., 2].astype(float) - 128)
    before = np.hypot(face_lab[..., 1].astype(float) - 128, face_lab[..., 2].astype(float) - 128)
    assert chroma[:, 5:25].mean() > before[:, 5:25].mean() + 20
    np.testing.assert_array_equal(out[:, 100:, 1:], face_lab[:, 100:, 1:])
    on_grey = color.match_shading(cv2.cvtColor(np.full((120, 120, 3), warm, dtype=np.uint8),
                                                cv2.COLOR_BGR2LAB),
                                  np.full((120, 120, 3), grey, dtype=np.uint8), weights, 6.0, 0.0,
                                  1.0, greyer_only=True)
    np.testing.assert_array_equal(on_grey[..., 1:], cv2.cvtColor(
        np.full((120, 120, 3), warm, dtype=np.uint8), cv2.COLOR_BGR2LAB)[..., 1:])
