"""The mesh swapper's texture repairs: once per source, its fringe, white spots and the teeth in
its lip ring (the source's texture cleaned of what would give the swap away); per face, the warped
lips' colour and lighting, the skin over the upper lip's lighting and grain, and the warped
texture's sharpness matched to the target's."""

from __future__ import annotations

import cv2
import numpy as np

from livecam.faces import mesh_indices
from livecam.processors import color, masks
from livecam.processors.mesh.regions import (DETAIL_FEATHER, cheek_discs, lip_ring, over_lip,
                                             under_lip)

# Below its forehead line (see regions.clip_forehead) the source's forehead is taken only where it
# is skin: pixels further than _SKIN_DIST (in the cheeks' own per-channel LAB standard deviations,
# floored at _SKIN_STD_MIN) from the source's cheek skin are not skin, and those of them joined to
# the hair round the face (outside the oval) and lying above _HAIR_FROM eye-to-mouth distances
# over the eye line are the fringe: the target's forehead shows there, feathered over
# _HAIR_FEATHER x face size. The brows stay the source's. (From 0.1 instead of 0.3, hair at the
# temples went too, and the independent recogniser (scripts/eval_identity.py) saw less of the
# source: 0.07 vs 0.13.)
_SKIN_DIST = 3.5
_SKIN_STD_MIN = np.array([6.0, 3.0, 3.0])
_HAIR_FROM = 0.3
_HAIR_FEATHER = 0.03
_BROW_MARGIN = 0.02  # the brows (FaceMesh outlines) grown by this fraction of the face size
# White spots on the source's skin (see fill_highlights): this many standard deviations lighter
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
# A shine found so, of at least (_SPECULAR_SEED x _SPECULAR_RADIUS)^2 px, takes in the pixels
# joined to it that are _SPECULAR_RIM grey levels over the skin round them (and as colourless):
# its rim, a thin light line left along Biden's nostril. (Smaller finds are noise: grown, they
# took blobs of test_mesh_swapper's synthetic pattern.)
_SPECULAR_RIM, _SPECULAR_SEED = 10.0, 0.5
# ...and, within _SPECULAR_REACH face sizes of such a shine, the pixels of a nose lit from one
# side (whose skin's lightness spreads widely) that pass the nose's test at _SPECULAR_FAINT_Z
# standard deviations only, with the components they join: obama2.jpg's shine on his other nose
# wing (L 195-205 against his 1.5-deviation bound of 203) stayed a light crescent on every
# target. Without a grown shine nearby nothing is added (at 1.0 deviations everywhere, obama.jpg's
# own wing shine was filled and the proportions test went over its bound, and blobs of
# test_mesh_swapper's synthetic pattern were filled).
_SPECULAR_FAINT_Z, _SPECULAR_REACH = 1.0, 0.04
# The filled spots are at least as light as the lit skin round them (see _skin_lightness): the
# Gaussian-weighted (_SPECULAR_RADIUS) mean of the skin within _LIT_BELOW standard deviations
# under the skin's mean lightness (and not over _SPECULAR_LOCAL_Z above it: a shine's rim).
_LIT_BELOW = 1.0
# The filled spots get the grain of the skin round them (see _regrain): its high-pass
# (original minus a Gaussian of _GRAIN_SIGMA px) measured within _GRAIN_RING hole-growth widths.
_GRAIN_SIGMA, _GRAIN_RING = 1.5, 4
# ...and the chroma of the skin round them only (see _skin_chroma): pixels whose a and b are
# within this many of the skin's standard deviations of its mean.
_SKIN_CHROMA_Z = 2.0
# Teeth in the source's lip ring (see fill_lip_gaps): this much lighter than the lips' median,
# under this fraction of their median chroma.
_TOOTH_L, _TOOTH_CHROMA = 15.0, 0.7
# The lips' lightness is measured this many px inside their contours (FaceMesh's are off by a
# pixel or two at any face size; an inset growing with the face left little of a large face's
# thin lips, and the measure jumped with the roll).
_LIP_INSET = 2
# After the lips' colour (match_lips), the lower lip's lighting, and the skin's under it down to
# _UNDER_LIP x face size, is the target's there (their LAB blurred by a Gaussian of _LIP_LIGHT x
# face size, at least 1 px): a source lit from the front (obama2.jpg) has a pale top and a
# shadowed rim on its lower lip and a shadow under it, which one shift for the whole lip ring
# carried onto the target. (The upper lip's too moved FaceMesh's lips on obama.jpg-on-biden.jpg
# towards Biden's: the proportions test in tests/processors/test_mesh_identity.py went over its
# bound.)
_LIP_LIGHT, _UNDER_LIP = 0.01, 0.04
# The skin over the upper lip (up to _OVER_LIP x face size over the outer lip contour) takes
# the target's lighting there (Gaussian of _OVER_LIP_LIGHT x face size): a smiling source lit
# from the front (obama.jpg) has a light, taut upper lip that stayed pale under a target's nose
# shadow (biden.jpg); a source lit from above (astronaut.png) has that skin in its nose's
# shadow, and stretched onto a frontally lit target's taller upper lip it was a dark band
# (obama.jpg: 16 levels under his own). Lightening counts fully wherever a quarter of the
# blur's weight lies on that skin (faded in from 0.25 to 0.75, as darkening is, it reached
# full nowhere in a band 0.07 face sizes tall, and left half that band); darkening as fully
# moved FaceMesh's lips on obama.jpg-on-biden.jpg towards Biden's (the proportions test in
# tests/processors/test_mesh_identity.py went over its bound). (At 0.01 face sizes it copied
# the target's stubble and creases and the recogniser saw less of the source.)
_OVER_LIP, _OVER_LIP_LIGHT = 0.07, 0.03
# Where that skin is taller on the target than on the source (upper_lip_stretch, over
# _STRETCH_LOW..HIGH for the full effect), the warp stretches the source's pores into streaks:
# there its grain (L minus a Gaussian of _OVER_LIP_GRAIN x face size) is the target's own.
# Not on a squeezed or unstretched source (biden.jpg onto obama2.jpg would take his stubble).
_OVER_LIP_GRAIN = 0.01
_STRETCH_LOW, _STRETCH_HIGH = 1.0, 1.2
# Darkened skin there takes the target's colour (a and b, local means as for L), fully where it
# was darkened by _OVER_LIP_TINT levels or more: on a pale target (astronaut.png) the source's
# colour at a lower lightness was a grey, moustache-like band under the nose. The target's grain
# is held within _GRAIN_CLIP of its robust deviations (1.4826 x the median absolute value over
# that skin): her nostrils' and creases' edges, away from where the source's nose puts them,
# came with it as dark lines.
_OVER_LIP_TINT, _GRAIN_CLIP = 4.0, 2.5
# What the lighting match there (a Gaussian) leaves across thin bands along the lip (the
# lit rim over a lip lit from above, a nose's shadow edge) is taken from the target too: in
# bands of _PROFILE_BAND x face size of the height over the lip, the mean difference smoothed
# along the lip over _PROFILE_ALONG x face size.
_PROFILE_BAND, _PROFILE_ALONG = 0.01, 0.06
# Thin dark lines (a black-hat with a disc of _LINE_SIZE x face size) under the lower lip, down
# to _LINE_DEPTH x face size, that the warped source has beyond the target's are lightened away:
# the source's shadow under the lip, its low frequencies matched, was left a thin dark line.
_LINE_SIZE, _LINE_DEPTH = 0.02, 0.06
# Sharpness: the warped source (a softer photo, or a level of its pyramid) is unsharpened
# (Gaussian of this sigma, px) until its Laplacian variance on the skin matches the target's,
# by at most this gain (noise is sharpened too; the gain solves the Laplacian variance
# exactly, see _unsharp_gain); one sharper than the target is softened
# (a negative gain: towards the blurred copy) by at most MIN.
_DETAIL_SIGMA = 1.0
_DETAIL_GAIN_MIN, _DETAIL_GAIN_MAX = -0.8, 3.0
_DETAIL_FLAT = 4.0  # a target this flat (overexposed, synthetic) has no detail to match


def fringe(crop: np.ndarray, landmarks: np.ndarray, kps: np.ndarray, size: float) -> np.ndarray:
    """float32 0..1 over the source crop: the hair that reaches into the face from above (not
    skin by the source's own cheek colour, joined to what lies outside the oval, above the eye
    line), feathered."""
    h, w = crop.shape[:2]
    lab = cv2.cvtColor(np.ascontiguousarray(crop), cv2.COLOR_BGR2LAB).astype(np.float32)
    cheeks = lab[cheek_discs((h, w), kps, size)]
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


def fill_highlights(crop: np.ndarray, landmarks: np.ndarray, alpha: np.ndarray) -> np.ndarray:
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
        lighter = lightness - cv2.GaussianBlur(lightness, (0, 0), radius)
        near = (skin & (nose > 0)
                & (chroma < _SPECULAR_LOCAL_CHROMA * cv2.GaussianBlur(chroma, (0, 0), radius)))
        shine = near & (lightness > mean + _SPECULAR_LOCAL_Z * std) & (lighter > _SPECULAR_LOCAL)
        grown = _grow_into(shine, near & (lighter > _SPECULAR_RIM), (_SPECULAR_SEED * radius) ** 2)
        spots |= shine | grown
        if grown.any():
            faint = near & (lightness > mean + _SPECULAR_FAINT_Z * std) & (lighter > _SPECULAR_LOCAL)
            reach = 2 * int(_SPECULAR_REACH * size) + 1
            spots |= _touching(faint, cv2.dilate(grown.astype(np.uint8), cv2.getStructuringElement(
                cv2.MORPH_ELLIPSE, (reach, reach))) > 0)
    if not spots.any():
        return crop
    # Grown by 1/200 of the face (at least a pixel): a shine's soft rim is lighter too.
    grow = 2 * max(1, round(radius / 8)) + 1
    hole = cv2.dilate(spots.astype(np.uint8), np.ones((grow, grow), np.uint8))
    filled = cv2.inpaint(np.ascontiguousarray(crop), hole, 3.0, cv2.INPAINT_TELEA)
    filled = _skin_lightness(filled, lab, hole > 0, skin, radius,
                             (mean - _LIT_BELOW * std, mean + _SPECULAR_LOCAL_Z * std))
    filled = _skin_chroma(filled, lab, hole > 0, skin, radius)
    return _regrain(filled, crop, hole > 0, skin, grow)


def _touching(candidates: np.ndarray, zone: np.ndarray) -> np.ndarray:
    """bool: the components of `candidates` (8-connected) with a pixel in `zone`."""
    _, labels = cv2.connectedComponents(candidates.astype(np.uint8), connectivity=8)
    hit = np.unique(labels[candidates & zone])
    return np.isin(labels, hit[hit > 0])


def _grow_into(seeds: np.ndarray, weak: np.ndarray, least: float) -> np.ndarray:
    """bool: the components of `seeds` of at least `least` px and the pixels of `weak` joined
    to them (8-connected)."""
    _, labels, stats, _ = cv2.connectedComponentsWithStats(seeds.astype(np.uint8), connectivity=8)
    big = np.isin(labels, np.nonzero(stats[1:, cv2.CC_STAT_AREA] >= least)[0] + 1)
    if not big.any():
        return big
    _, labels = cv2.connectedComponents((big | weak).astype(np.uint8), connectivity=8)
    joined = np.unique(labels[big])
    return np.isin(labels, joined[joined > 0])


def _skin_lightness(filled: np.ndarray, lab: np.ndarray, hole: np.ndarray, skin: np.ndarray,
                    sigma: float, lit: tuple[float, float]) -> np.ndarray:
    """`filled` with the lightness inside `hole` raised, where it is lower, to the Gaussian-
    weighted (`sigma` px) mean of the skin round it whose lightness lies within `lit` (`lab`:
    the source crop, float Lab). A shine sits where the skin faces the light, so the skin
    under it is no darker than the lit skin round it; the inpaint drew from the hole's dark
    edge too (Biden's nose shine lies between his nose's crease and his nostril), and its fill
    came out a dark patch on the target's nose wing."""
    lightness = lab[..., 0]
    source = skin & ~hole & (lightness >= lit[0]) & (lightness <= lit[1])
    weight = cv2.GaussianBlur(source.astype(np.float32), (0, 0), sigma)
    near = hole & (weight > 1e-3)
    if not near.any():
        return filled
    level = cv2.GaussianBlur(lightness * source, (0, 0), sigma)[near] / weight[near]
    out = cv2.cvtColor(filled, cv2.COLOR_BGR2LAB)
    out[..., 0][near] = np.maximum(out[..., 0][near], np.round(level).astype(np.uint8))
    result = filled.copy()  # a round trip through Lab would shift the pixels outside the hole
    result[near] = cv2.cvtColor(out, cv2.COLOR_LAB2BGR)[near]
    return result


def _skin_chroma(filled: np.ndarray, lab: np.ndarray, hole: np.ndarray, skin: np.ndarray,
                 sigma: float) -> np.ndarray:
    """`filled` with the chroma (a, b) inside `hole` taken from skin-coloured pixels only:
    their Gaussian-weighted (`sigma` px) mean, where a and b are within _SKIN_CHROMA_Z standard
    deviations of the skin's (`lab`: the source crop, float Lab). The inpaint also draws from
    the hole's edge that is not skin: Biden's nose shine touches his nostril and the shine's
    own bluish rim, and its fill's bottom rows came out grey-blue (9 units of a, b from the
    skin round it). Lightness is the inpaint's (see _skin_lightness for its floor)."""
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


def fill_lip_gaps(crop: np.ndarray, landmarks: np.ndarray) -> np.ndarray:
    """The source crop with what lies inside its lip ring but is not lip (teeth along a smile's
    inner edge: _TOOTH_L grey levels lighter than the ring's median and under _TOOTH_CHROMA of
    its median chroma; FaceMesh's inner contour follows the teeth only roughly) filled in from
    the lips round it. On an open-mouth target the source's lips are stretched over the
    target's, and such a strip became a pale patch on the lower lip. The inside of the inner
    contour is filled with it (the target's own inner mouth is kept there), so that only lip
    pixels feed the fill."""
    ring, inner = lip_ring(crop.shape[:2], landmarks)
    if cv2.countNonZero(ring) < 16:
        return crop
    lab = cv2.cvtColor(np.ascontiguousarray(crop), cv2.COLOR_BGR2LAB)
    gaps = _teeth(lab, ring > 0)
    if not gaps.any():
        return crop
    hole = cv2.dilate((gaps | (inner > 0)).astype(np.uint8), np.ones((3, 3), np.uint8))
    return cv2.inpaint(np.ascontiguousarray(crop), hole, 3.0, cv2.INPAINT_TELEA)


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


def match_lips(warped: np.ndarray, target: np.ndarray, lips: tuple[np.ndarray, masks.Box],
               local: np.ndarray, moved: np.ndarray, size: float) -> None:
    """Move the warped lips' (8-bit LAB, in place) colour to the target's own lips' (the
    skin's colour transfer would carry the source's lip colour relative to its skin, and its
    chroma shrink makes lips pale), lightness included (half of it left the source's darker or
    lighter lips on the target's skin: Obama's on group6.jpg). The lips are the ring between
    the outer and inner lip contours (see lip_colour), the moved one in `warped`, the target's
    own (`local`) in `target` (BGR: the frame's region before the kept eyes and mouth moved
    with the shape change), whose teeth in that ring (a smile's) do not count."""
    weight, (x1, y1, x2, y2) = lips
    feather = DETAIL_FEATHER * size + 1.0
    kernel = cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (2 * _LIP_INSET + 1,) * 2)

    def lip_colour(image: np.ndarray, landmarks: np.ndarray, skip_teeth: bool) -> np.ndarray | None:
        """The lips' lightness (the median of what lies _LIP_INSET px inside them: FaceMesh's
        contours take in the shadow along the lip line and some skin, a large part of thin
        lips, which pulled the mean by 20-30 levels) and a, b (the mean over them all, their
        soft edge included, as the eye takes their colour); image: 8-bit LAB."""
        ring, _ = lip_ring(image.shape[:2], landmarks)
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


def match_lip_lighting(warped: np.ndarray, theirs_bgr: np.ndarray, moved: np.ndarray,
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
    ring, opening = lip_ring(hw, moved - (x1, y1))
    lip = ring > 0
    if int(lip.sum()) < 8:
        return
    outer = outer_all - (x1, y1)
    lower = under_lip(hw, outer, 0.0, ring, opening)
    region = (lower & ~_teeth(theirs, lip)) | under_lip(hw, outer,
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
    band = under_lip(hw, outer, _LINE_DEPTH * size, ring, opening)
    part[..., 0] += cv2.GaussianBlur(band.astype(np.float32), (0, 0), 1.0) * np.maximum(lines, 0.0)
    warped[y1:y2, x1:x2] = np.clip(part + 0.5, 0, 255).astype(np.uint8)


def match_upper_lip_lighting(warped: np.ndarray, theirs_bgr: np.ndarray, moved: np.ndarray,
                             size: float, stretch: float) -> None:
    """Give the warped skin over the upper lip (8-bit LAB, in place; down to _OVER_LIP x face
    size over the outer lip contour) the target's lighting there (_OVER_LIP_LIGHT), with
    the target's colour where darkened (_OVER_LIP_TINT), and where the source's skin there is
    stretched (`stretch`: see upper_lip_stretch) give it the target's own fine grain
    (_OVER_LIP_GRAIN, held within _GRAIN_CLIP) instead of its own; then the target's
    lightness across thin bands along the lip (_PROFILE_BAND). theirs_bgr: as
    match_lip_lighting's."""
    h, w = warped.shape[:2]
    sigma = max(1.0, _OVER_LIP_LIGHT * size)
    pad = int(3.0 * sigma) + 1
    outer_all = moved[mesh_indices.LIPS_OUTER]
    lo = outer_all.min(axis=0)
    corners = max(outer_all[0, 1], outer_all[len(outer_all) // 2, 1])
    # (the region reaches _OVER_LIP over the lips, down to the corners' line, and its blur pad)
    x1, y1 = max(int(lo[0]) - pad, 0), max(int(lo[1] - _OVER_LIP * size) - pad, 0)
    x2, y2 = min(int(outer_all[:, 0].max()) + pad + 1, w), min(int(corners) + pad + 1, h)
    if x2 - x1 < 4 or y2 - y1 < 4:
        return
    hw = (y2 - y1, x2 - x1)
    ring, opening = lip_ring(hw, moved - (x1, y1))
    region = over_lip(hw, outer_all - (x1, y1), _OVER_LIP * size, ring, opening)
    if int(region.sum()) < 8:
        return
    ours = warped[y1:y2, x1:x2].astype(np.float32)
    theirs = cv2.cvtColor(np.ascontiguousarray(theirs_bgr[y1:y2, x1:x2]),
                          cv2.COLOR_BGR2LAB).astype(np.float32)
    weight = region.astype(np.float32)
    den = np.maximum(cv2.GaussianBlur(weight, (0, 0), sigma), 1e-3)

    def towards_theirs(channel: int) -> np.ndarray:
        """The target's local mean of `channel` over the region minus the warped skin's."""
        return (cv2.GaussianBlur(theirs[..., channel] * weight, (0, 0), sigma)
                - cv2.GaussianBlur(ours[..., channel] * weight, (0, 0), sigma)) / den

    shift = towards_theirs(0)
    feather = cv2.GaussianBlur(weight, (0, 0), max(1.0, DETAIL_FEATHER * size))
    tint = feather * np.clip(-shift / _OVER_LIP_TINT, 0.0, 1.0)
    for channel in (1, 2):
        ours[..., channel] += tint * towards_theirs(channel)
    lightness = ours[..., 0]
    lighter = np.clip(den * 4.0, 0.0, 1.0) * np.maximum(shift, 0.0)
    darker = np.clip(den * 2.0 - 0.5, 0.0, 1.0) * np.minimum(shift, 0.0)
    lightness += feather * (lighter + darker)
    grain = float(np.clip((stretch - _STRETCH_LOW) / (_STRETCH_HIGH - _STRETCH_LOW), 0.0, 1.0))
    if grain > 0.0:
        fine = max(1.0, _OVER_LIP_GRAIN * size)
        their_grain = theirs[..., 0] - cv2.GaussianBlur(theirs[..., 0], (0, 0), fine)
        bound = _GRAIN_CLIP * 1.4826 * float(np.median(np.abs(their_grain[region])))
        np.clip(their_grain, -bound, bound, out=their_grain)
        own_grain = lightness - cv2.GaussianBlur(lightness, (0, 0), fine)
        lightness += ((grain * feather) * (their_grain - own_grain)).astype(np.float32)
    # Column by column over the upper lip (not cut at the corners' line: a smile's raised
    # corners left the skin along the lip's middle out of the region above).
    upper = np.vstack([outer_all[len(outer_all) // 2:], outer_all[:1]]) - (x1, y1)
    above = _above_lip(hw, upper)
    over = (above > 0.0) & (above <= _OVER_LIP * size) & (ring == 0) & (opening == 0)
    over[:, :max(int(np.ceil(np.min(upper[:, 0]) - 0.5)), 0)] = False
    over[:, max(int(np.floor(np.max(upper[:, 0]) - 0.5)) + 1, 0):] = False
    # Faded at its top and sides, not towards the lips (matched on their own), and off them
    # and the mouth's opening.
    lips = ring.astype(np.float32)
    fade = cv2.GaussianBlur(over.astype(np.float32) + lips, (0, 0), max(1.0, DETAIL_FEATHER * size))
    fade *= 1.0 - cv2.GaussianBlur(lips + opening.astype(np.float32), (0, 0), 1.0)
    lightness += fade * _band_shift(theirs[..., 0] - lightness, over, above,
                                    max(1.0, _PROFILE_BAND * size), max(1.0, _PROFILE_ALONG * size))
    warped[y1:y2, x1:x2] = np.clip(ours + 0.5, 0, 255).astype(np.uint8)


def _above_lip(shape_hw: tuple[int, int], upper: np.ndarray) -> np.ndarray:
    """float32: each pixel's height (px) over the upper lip contour `upper` in its column
    (the contour's y interpolated at the pixel's centre; negative below it)."""
    order = np.argsort(upper[:, 0])
    centres = np.arange(shape_hw[1], dtype=np.float32) + 0.5
    lip_y = np.interp(centres, upper[order, 0], upper[order, 1]).astype(np.float32)
    rows = np.arange(shape_hw[0], dtype=np.float32)[:, None] + 0.5
    above: np.ndarray = lip_y[None, :] - rows
    return above


def _band_shift(difference: np.ndarray, region: np.ndarray, above: np.ndarray, band: float,
                along: float) -> np.ndarray:
    """float32: `difference`'s mean over `region` in bands `band` px tall of the height
    `above` the lip, smoothed along each band (a Gaussian of `along` px over the columns) and
    read back per pixel between the bands' centres; faded out where a band holds few pixels
    round a column."""
    h, w = region.shape
    count = int(np.ceil(float(above[region].max()) / band)) + 1 if region.any() else 0
    if count < 1:
        return np.zeros((h, w), dtype=np.float32)
    index = np.clip(above / band, 0.0, count - 1e-3).astype(np.int32)
    flat = (index * w + np.arange(w, dtype=np.int32)[None, :])[region]
    k = 2 * int(3.0 * along) + 1
    sums = cv2.GaussianBlur(np.bincount(flat, weights=difference[region], minlength=count * w)
                            .reshape(count, w), (k, 1), along)
    hits = cv2.GaussianBlur(np.bincount(flat, minlength=count * w).reshape(count, w)
                            .astype(np.float64), (k, 1), along)
    table = (sums / np.maximum(hits, 1e-6) * np.clip(hits / 2.0, 0.0, 1.0)).astype(np.float32)
    table = np.vstack([table[:1], table, table[-1:]])  # rows at the band centres, edges held
    rows = np.clip(above / band + 0.5, 0.0, count + 1.0).astype(np.float32)
    cols = np.broadcast_to(np.arange(w, dtype=np.float32)[None, :], (h, w))
    shift: np.ndarray = cv2.remap(table, np.ascontiguousarray(cols), rows, cv2.INTER_LINEAR,
                                  borderMode=cv2.BORDER_REPLICATE)
    return shift


def upper_lip_stretch(source: np.ndarray, source_size: float, moved: np.ndarray,
                      size: float) -> float:
    """How much taller (relative to the face size) the skin over the upper lip is on the
    target (`moved` landmarks) than on the source: from the upper lip's top to under the
    nose (FaceMesh 0 and 2)."""
    def height(lm: np.ndarray, face: float) -> float:
        return float(np.linalg.norm(lm[0] - lm[2])) / max(face, 1e-6)
    return height(moved, size) / max(height(source, source_size), 1e-6)


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


def match_detail(warped: np.ndarray, target: np.ndarray, skin: np.ndarray, lab: bool) -> np.ndarray:
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
