"""The mesh swapper's frame processor (MeshSwapper: "face_swapper" for --swap-model mesh): per
target face, the shape change, the warp of the source's texture onto the face's region of
interest, the target's kept eyes and mouth, the colour and lighting match and one blend (the
package's docstring, livecam/processors/mesh/__init__.py, tells the whole)."""

from __future__ import annotations

import logging
import time
from typing import Sequence

import cv2
import numpy as np

from livecam.faces import mesh_indices
from livecam.faces.face import Face
from livecam.faces.rolls import quarter_turns, turn
from livecam.faces.selection import changeable
from livecam.faces.source import SourceIdentity
from livecam.frame import FramePacket
from livecam.processors import color, masks
from livecam.processors.base import presence, usable
from livecam.processors.mesh.regions import (DETAIL_FEATHER, MOUTH_CORNER_FEATHER, edge_ramp,
                                             eye_closed, eye_region, mouth_corner_regions,
                                             mouth_opener)
from livecam.processors.mesh.shape import SHAPE_STRENGTH, shape_offsets, turned_apart
from livecam.processors.mesh.source import PreparedSource, prepare_source
from livecam.processors.mesh.texture import (match_detail, match_lip_lighting, match_lips,
                                             match_upper_lip_lighting, upper_lip_stretch)
from livecam.processors.mesh.warp import (Motion, affine_inverses, bilinear_remap, facing_weights,
                                          grid_motion, move_pixels, piecewise_affine_maps)
from livecam.settings import SwapSettings

log = logging.getLogger("livecam")

# Grid step: about this many grid cells across the face; small faces get a full-res grid.
_GRID_CELLS = 72
_MAX_STEP = 8
# The target's own oval bounds the weight too, rising from 0 on it over this width: the warp
# is evaluated on a coarse grid, which on a side turned away (squeezed into a few pixels) would
# otherwise cut the source's soft edge off in grid-cell steps, partly outside the face.
_TARGET_EDGE = 0.02
_MOUTH_FEATHER = 0.04  # soft edge round the --mouth-mask region (lips and below)
# The lips' own colour shift (see match_lips) is blurred across their outline by a Gaussian of
# this fraction of the face size, at least MIN px.
_LIP_EDGE, _LIP_EDGE_MIN = 0.01, 0.8
# Glasses: thin dark lines (a morphological black-hat with a square this fraction of the face
# size) that the target has and the warped source lacks, by LOW..HIGH grey levels, are kept
# from the target over the eye band; only when the band between the eyes (a glasses bridge)
# has such a line across at least _BRIDGE_COLUMNS of its width.
_FRAME_WIDTH = 0.04
_FRAME_LOW, _FRAME_HIGH = 12.0, 30.0
_BRIDGE_COLUMNS = 0.6
# Low-frequency lighting taken from the target with colour matching on (see color.match_shading):
# strength, and the blur radius as a fraction of the face size.
_SHADING = 0.7
_SHADING_RADIUS = 0.1
# ...and the low-frequency a and b, by this much: regional colour (warm brows and lids in the
# target, cooler ones in the source) would otherwise leave pale grey patches round the eyes.
_SHADING_CHROMA = 1.0
# ...and again, a and b only, at this finer blur radius (fraction of the face size), only where
# the face is greyer than the target round it (never taking colour away, which made a pale
# target's folds grey): the source's stubble (greyer than its other skin of the same lightness)
# left grey patches on a woman's chin and upper lip, smaller than the broad match sees. (At
# 0.03 the turned-face parity of tests/faces/test_rolls.py went over its bound.)
_SHADING_FINE = 0.05
# ...and, as the two faces are turned apart (turned_apart), their lightness at that radius too,
# darkening only, by up to this much: a frontally lit source's light cheeks, smaller than the
# broad match sees, stayed on a face turned away (group6.jpg's two most turned faces' cheeks
# 8 levels lighter than their own under obama.jpg). Lightening too, or all the way, took more
# of the source's modelling away: the recogniser's transfer on turned faces fell.
_TURNED_DARKEN = 0.5
# Within _EDGE_BAND of the face size inside the oval, the target's lighting and colour at a
# blur of _EDGE_RADIUS x face size are taken in, fully at the oval and fading linearly to none
# at the band's inner end, weighted by the skin and, fully, by the face's rim (the _RIM of its
# size inside the oval, which the skin statistics leave out: where FaceMesh puts a turned-away
# side's outline along the nose, group6.jpg's pale woman's shadowed cheek stayed beside bright
# swapped skin). The broad match (a tenth of the face, 0.7) leaves the source's lighting at
# smaller scales, and the rim alone, matched fully, ended in a step a few percent inside the
# oval: the outer cheeks stood out from the target's skin round them (obama.jpg on
# astronaut.png: +9.6 levels of L 5-8% inside the oval; over the photo pairs the median seam
# 5.7 Lab and cheek difference 2.3 levels, now 3.4 and 1.3: scripts/mesh_seams.py). Wider or
# finer, it takes more of the source's modelling away (dlib's median transfer,
# scripts/eval_identity.py: 0.185 before, 0.157 with it, 0.124 at a band of 0.3 and blur 0.02).
_RIM = 0.03
_EDGE_BAND, _EDGE_RADIUS = 0.25, 0.03


class MeshSwapper:
    """Frame processor "face_swapper" for --swap-model mesh."""

    name = "face_swapper"

    def __init__(self, settings: SwapSettings, *, keep_eyes: bool = True,
                 keep_mouth_interior: bool = True, shape_strength: float = SHAPE_STRENGTH,
                 fade: bool = True) -> None:
        self.settings = settings
        self.fade = fade  # faces near the size limit fade in (base.presence; not in a still picture)
        self.shape_strength = shape_strength
        self.keep_eyes = keep_eyes
        self.keep_mouth_interior = keep_mouth_interior
        self._sources: tuple[PreparedSource, ...] = ()
        self._oval = mesh_indices.FACE_OVAL
        self._eyes = (mesh_indices.LEFT_EYE, mesh_indices.RIGHT_EYE)
        self._lips_inner = mesh_indices.LIPS_INNER

    def prepare(self, sources: Sequence[SourceIdentity]) -> None:
        # Built completely before the swap so that worker threads see old or new, never half.
        self._sources = tuple(prepare_source(s) for s in sources)
        for source in sources:
            if len(source.paths) > 1:
                # The texture comes from one photo: the others would silently do nothing.
                log.warning("warning: the mesh swapper uses only the first --source photo, %s; "
                            "the other --source photos (%s) are not used (averaging photos needs a neural "
                            "swapper: --swap-model inswapper_128 or hyperswap_1a_256, with its models)", source.paths[0],
                            ", ".join(str(p) for p in source.paths[1:]))

    def process(self, packet: FramePacket) -> FramePacket:
        start = time.perf_counter()
        sources = self._sources
        # --blend 0: the input, exactly (not even the kept eyes and mouth move).
        faces = packet.faces if self.settings.blend > 0.0 else []
        for face in faces:
            if not 0 <= face.source_key < len(sources):
                continue
            if self._swappable(face):
                if not self.swap_level(packet.image, face, sources[face.source_key]):
                    packet.left_as_is += 1  # too faint to move a grey level
                    packet.faint += 1
            elif usable(face):  # FaceMesh found no face there: it was counted as swapped, unchanged
                packet.left_as_is += 1
                packet.unfitted += 1
        packet.timings[self.name] = (time.perf_counter() - start) * 1000.0
        return packet

    @staticmethod
    def _swappable(face: Face) -> bool:
        return changeable(face, need_fit=True)  # the rule the analyser picked "the one" face by

    def swap_level(self, frame: np.ndarray, face: Face, src: PreparedSource) -> bool:
        """swap_face on the face's region turned by quarter turns until the face is nearest
        upright (np.rot90: exact), then turned back. The swap's masks take "above" and "across"
        from the image axes (the forehead cut, the glasses bridge and eye band, the closed
        eye's feather), so a face lying on its side or upside down got its own dark lines kept
        as glasses frames and a second pair of eyes. Returns whether a pixel changed."""
        k = quarter_turns(face.kps)
        if k == 0:
            return self.swap_face(frame, face, src)
        assert face.landmarks is not None
        oval = face.landmarks[self._oval]
        fh, fw = frame.shape[:2]
        # swap_face touches its oval's box and 3 px round it, clipped to the frame.
        x1, y1 = (max(int(np.floor(v)) - 4, 0) for v in oval.min(axis=0))
        x2, y2 = (min(int(np.ceil(v)) + 5, n) for v, n in zip(oval.max(axis=0), (fw, fh)))
        if x2 - x1 < 4 or y2 - y1 < 4:
            return False
        w, h = x2 - x1, y2 - y1
        part = np.ascontiguousarray(np.rot90(frame[y1:y2, x1:x2], k))

        def turned(points: np.ndarray) -> np.ndarray:
            return turn(points - np.array([x1, y1], dtype=np.float32), k, w, h)

        corners = turned(face.bbox.reshape(2, 2))
        changed = self.swap_face(part, face.with_(bbox=np.concatenate([corners.min(0), corners.max(0)]),
                                                  kps=turned(face.kps), landmarks=turned(face.landmarks)), src)
        frame[y1:y2, x1:x2] = np.rot90(part, -k)
        return changed

    def swap_face(self, frame: np.ndarray, face: Face, src: PreparedSource) -> bool:
        """Swap one face in place (only its region of interest is touched); returns whether a
        pixel changed (not: a --blend, or a video's fade-in at the size limit, too faint)."""
        assert face.landmarks is not None
        lm = face.landmarks.astype(np.float64)
        oval = lm[self._oval]
        lo, hi = oval.min(axis=0), oval.max(axis=0)
        size = float((hi - lo).max())
        fh, fw = frame.shape[:2]
        x1, y1 = max(int(np.floor(lo[0])) - 2, 0), max(int(np.floor(lo[1])) - 2, 0)
        x2, y2 = min(int(np.ceil(hi[0])) + 3, fw), min(int(np.ceil(hi[1])) + 3, fh)
        if x2 - x1 < 4 or y2 - y1 < 4:
            return False
        roi_w, roi_h = x2 - x1, y2 - y1
        local = lm - (x1, y1)
        # The source's face shape: the target's landmarks move towards it, and the target's own
        # pixels that stay visible inside the face (kept eyes and mouth) are warped along.
        # --blend is the opacity of the whole swap: the shape change fades with it, so that a
        # small blend is close to the target (the kept eyes and mouth move by the shape change).
        blend = float(np.clip(self.settings.blend, 0.0, 1.0)) * presence(face, self.fade)
        offsets = None
        if self.shape_strength * blend > 0.0:
            frozen = src.lips if self.settings.mouth_mask is not None else None
            offsets = shape_offsets(src, local, self.shape_strength * blend, size, frozen)
        moved = local if offsets is None else local + offsets

        lab = self.settings.color_match
        warped4, facing, motion = self._warp(src.lab_levels if lab else src.levels, src, moved,
                                             size, (roi_h, roi_w),
                                             None if offsets is None else local)
        warped = cv2.cvtColor(warped4, cv2.COLOR_BGRA2BGR)  # drops channel 3, LAB or BGR alike
        alpha = warped4[..., 3].astype(np.float32) * (1.0 / 255.0)
        if facing is not None:
            alpha *= facing
        inside = edge_ramp((roi_h, roi_w), moved[self._oval], max(1.0, _TARGET_EDGE * size))
        cv2.multiply(alpha, inside, dst=alpha)
        original = frame[y1:y2, x1:x2]
        shown = alpha.copy()  # how much of the source shows, before the kept eyes and mouth
        opener = mouth_opener(moved[self._lips_inner], src.landmarks[self._lips_inner])
        skin, kept = self._apply_keep(alpha, moved, face.kps - (x1, y1), size, opener)
        target = original
        if motion is not None:
            # The target's kept eyes and inner mouth follow the moved landmarks. Only there:
            # elsewhere the source covers the target, except near the oval, where nothing moves.
            # A --mouth-mask mouth does not move at all (its landmarks are frozen).
            target = original.copy()
            for _, box, is_mouth_mask in kept:
                if not is_mouth_mask:
                    move_pixels(original, target, motion, box)
                    # A box reaching past the oval (a face in profile) moves nothing there.
                    bx1, by1, bx2, by2 = box
                    out = inside[by1:by2, bx1:bx2] <= 0.0
                    target[by1:by2, bx1:bx2][out] = original[by1:by2, bx1:bx2][out]
        self._keep_frames(alpha, skin, warped, target, local, size, lab)
        lips = None
        if lab and self.settings.mouth_mask is None:
            # The lips are matched on their own (below), and stay out of the skin statistics.
            lips = masks.polygon_mask_box((roi_h, roi_w), moved[mesh_indices.LIPS_OUTER],
                                          max(1.0, DETAIL_FEATHER * size))
            if lips is not None:
                lx1, ly1, lx2, ly2 = lips[1]
                skin[ly1:ly2, lx1:lx2] &= lips[0] <= 0.0
                # The colour shift is softened across the contour as well: its edge followed
                # the polygon's pixel steps (a jagged, pasted-on lip outline on a small face).
                sigma = max(_LIP_EDGE_MIN, _LIP_EDGE * size)
                lips = (cv2.GaussianBlur(lips[0], (0, 0), sigma), lips[1])
        if lab:
            step = color.sample_step(skin.shape)
            target_lab = cv2.cvtColor(np.ascontiguousarray(target[::step, ::step]),
                                      cv2.COLOR_BGR2LAB)
            table = color.transfer_lut(warped[::step, ::step], target_lab, skin[::step, ::step])
            if table is not None:
                warped = cv2.LUT(warped, table)
                # The source's colour at each lightness becomes the target's (its shadows
                # would stay grey on a paler target), before the shading takes the lighting.
                by_lightness = color.chroma_by_lightness(warped[::step, ::step], target_lab,
                                                         skin[::step, ::step])
                if by_lightness is not None:
                    warped = color.add_by_lightness(warped, by_lightness)
                lit = self._lit(skin, shown, alpha)
                if _SHADING > 0.0:
                    warped = color.match_shading(warped, target, lit, _SHADING_RADIUS * size,
                                                 _SHADING, _SHADING_CHROMA)
                if _SHADING_FINE > 0.0:
                    warped = color.match_shading(warped, target, lit, _SHADING_FINE * size,
                                                 0.0, 1.0, greyer_only=True)
                    turned = turned_apart(src.landmarks, local)
                    if turned > 0.0 and _TURNED_DARKEN > 0.0:
                        warped = color.match_shading(warped, target, lit, _SHADING_FINE * size,
                                                     turned * _TURNED_DARKEN, darken_only=True)
                # (0 on the oval, 1 from _EDGE_BAND of the face size inwards)
                band = max(1.0, _EDGE_BAND * size)
                depth = edge_ramp((roi_h, roi_w), moved[self._oval], band)
                rim = self._rim(inside, alpha, kept, depth, max(1.0, _RIM * size) / band, size)
                edged = color.match_shading(warped, target, np.maximum(lit, rim),
                                            _EDGE_RADIUS * size, 1.0, 1.0)
                warped = cv2.blendLinear(warped, edged, depth, 1.0 - depth)
            if lips is not None and table is not None:
                match_lips(warped, original, lips, local, moved, size)
                # The target's own lips, moved with the shape change onto the moved lips.
                theirs = original
                if motion is not None:
                    theirs = original.copy()
                    move_pixels(original, theirs, motion, lips[1])
                match_lip_lighting(warped, theirs, moved, size)
                match_upper_lip_lighting(warped, theirs, moved, size,
                                         upper_lip_stretch(src.landmarks, src.size, moved, size))
            warped = match_detail(warped, target, skin, True)
            warped = cv2.cvtColor(warped, cv2.COLOR_LAB2BGR)
        else:
            warped = match_detail(warped, target, skin, False)
        if blend != 1.0:
            alpha *= blend
        # Weights 0 keep the target's pixel exactly (the kept mouth relies on it).
        swapped = cv2.blendLinear(warped, target, alpha, 1.0 - alpha)
        changed = not np.array_equal(swapped, original)
        frame[y1:y2, x1:x2] = swapped
        return changed

    @staticmethod
    def _lit(skin: np.ndarray, shown: np.ndarray, alpha: np.ndarray) -> np.ndarray:
        """float32 weights for the lighting match: the skin, and the face's soft edge by how
        much of the source shows there (`shown`: alpha before the kept eyes and mouth), leaving
        out the edge wherever something was kept (alpha fell below `shown`). From the inner
        skin alone, the outer cheeks (where the source's mask fades) took the inner face's
        correction: a frontally lit source's cheeks stayed 10-20 levels brighter than a
        target's shaded ones."""
        edge = (shown < 0.99) & (alpha >= shown)
        return np.where(skin, np.float32(1.0), np.where(edge, shown, np.float32(0.0)))

    @staticmethod
    def _rim(inside: np.ndarray, alpha: np.ndarray,
             kept: list[tuple[np.ndarray, masks.Box, bool]], depth: np.ndarray, reach: float,
             size: float) -> np.ndarray:
        """float32 weights of the face's rim: where `depth` (a ramp rising inwards from the
        moved oval) is under `reach` (_RIM of the face size), where the swap shows, leaving out
        the kept eyes and mouth (and a feather's width round them: an eye at the rim would
        darken the skin beside it)."""
        # (a ramp reaches its end only up to rounding: 1 - 1e-7 on some turned regions)
        rim = ((inside > 0.0) & (depth < 0.999 * reach) & (alpha > 0.0)).astype(np.float32)
        pad = int(np.ceil(DETAIL_FEATHER * size)) + 1
        for keep, (x1, y1, x2, y2), _ in kept:
            near = cv2.dilate((keep > 0.0).astype(np.uint8), np.ones((2 * pad + 1,) * 2, np.uint8))
            rim[y1:y2, x1:x2][near > 0] = 0.0
        return rim

    def _warp(self, levels: tuple[np.ndarray, ...], src: PreparedSource, local: np.ndarray,
              size: float, roi_hw: tuple[int, int], original: np.ndarray | None = None
              ) -> tuple[np.ndarray, np.ndarray | None, Motion | None]:
        """The source texture (one of its 4-channel pyramids) warped onto the target landmarks
        `local`, ROI-sized uint8 (channel 3: the source's face mask, warped), the ROI-sized
        facing weight (float32 0..1; None when it is 1 everywhere), and, when the target's
        `original` landmarks are given, the motion of the target's own pixels from `original`
        to `local` on the warp's grid (see grid_motion), else None."""
        roi_h, roi_w = roi_hw
        # Sample from the pyramid level closest to (not below) the target's size: no aliasing.
        level = int(np.clip(np.floor(np.log2(max(src.size / max(size, 1.0), 1.0))), 0,
                            len(levels) - 1))
        texture = levels[level]
        # Source remap coordinates: corner convention scaled to the level, then pixel centres.
        src_pts = src.landmarks / (2 ** level) - 0.5
        step = int(np.clip(round(size / _GRID_CELLS), 1, _MAX_STEP))
        gh, gw = -(-roi_h // step), -(-roi_w // step)
        # Grid point (i, j) sits at the centre of its step x step block: corner-convention
        # coordinate (i + 0.5) * step, so grid index = coordinate / step - 0.5.
        dst_pts = local / step - 0.5
        # Outside the mesh, sample far off the texture: transparent black (alpha 0).
        fallback = np.array([[0.0, 0.0, -1e4], [0.0, 0.0, -1e4]])
        dst_tri, src_tri = dst_pts[src.triangles], src_pts[src.triangles]
        inverses = affine_inverses(dst_tri)
        map_x, map_y, ids = piecewise_affine_maps(dst_tri, src_tri, fallback, (gh, gw),
                                                  inverses=inverses)
        facing = cv2.GaussianBlur(facing_weights(dst_tri, src_tri)[ids], (3, 3), 0)
        maps = np.dstack([map_x, map_y])  # one CV_32FC2 map: one resize, one remap argument
        full = (gw * step, gh * step)
        if step > 1:
            # Linear resize by an integer factor keeps block centres on grid points.
            maps = cv2.resize(maps, full, interpolation=cv2.INTER_LINEAR)
        maps = maps[:roi_h, :roi_w]
        if float(facing.min()) >= 1.0:
            facing_full = None  # the usual frontal face: nothing turned away
        else:
            facing_full = facing if step == 1 else cv2.resize(facing, full, interpolation=cv2.INTER_LINEAR)
            facing_full = facing_full[:roi_h, :roi_w]
        warped = bilinear_remap(texture, maps, cv2.BORDER_CONSTANT, border_value=(0, 0, 0, 0))
        if step > 1:
            # Between a grid point on the mesh and one off it, the upsampled map runs from the
            # face towards the far-off fallback and, a pixel or so in, lands back inside the
            # texture at some unrelated place with its alpha: isolated bright or dark dots, a
            # grid step apart, along the face's edge. Those pixels are transparent instead (the
            # source's mask is 0 that near the oval anyway, see source.py's _OVAL_MARGIN).
            off = (ids == len(dst_tri)).astype(np.uint8)
            if off.any():
                near = cv2.dilate(off, np.ones((3, 3), np.uint8))
                near = cv2.resize(near, full, interpolation=cv2.INTER_NEAREST)[:roi_h, :roi_w]
                partial = cv2.resize(1.0 - off.astype(np.float32), full,
                                     interpolation=cv2.INTER_LINEAR)[:roi_h, :roi_w]
                warped[..., 3][(near > 0) & (partial < 1.0)] = 0
        motion = None
        if original is not None:
            motion = grid_motion(inverses[0], original[src.triangles] - 0.5, ids, step)
        return warped, facing_full, motion

    def _keep_frames(self, alpha: np.ndarray, skin: np.ndarray, warped: np.ndarray,
                     target: np.ndarray, local: np.ndarray, size: float, lab: bool) -> None:
        """Zero `alpha` (and `skin`) in place where the target wears glasses: the thin dark
        lines of the target's frames over the eye band stay the target's."""
        right, left = (local[eye] for eye in self._eyes)
        # The inner corners: each eye's point nearest the other eye's centre.
        inner_r = right[np.argmin(np.linalg.norm(right - left.mean(axis=0), axis=1))]
        inner_l = left[np.argmin(np.linalg.norm(left - right.mean(axis=0), axis=1))]
        gap = float(np.linalg.norm(inner_l - inner_r))
        if gap < 4.0:
            return
        k = max(3, int(_FRAME_WIDTH * size) | 1)
        kernel = cv2.getStructuringElement(cv2.MORPH_RECT, (k, k))
        h, w = alpha.shape

        def blackhat(image: np.ndarray, box: masks.Box) -> np.ndarray:
            x1, y1, x2, y2 = box
            patch = np.ascontiguousarray(image[y1:y2, x1:x2])
            grey = (cv2.extractChannel(patch, 0) if image is warped and lab
                    else cv2.cvtColor(patch, cv2.COLOR_BGR2GRAY))
            return cv2.morphologyEx(grey, cv2.MORPH_BLACKHAT, kernel).astype(np.float32)

        def clip_box(cx: float, cy: float, rx: float, ry: float) -> masks.Box:
            return (max(int(cx - rx), 0), max(int(cy - ry), 0),
                    min(int(cx + rx) + 1, w), min(int(cy + ry) + 1, h))

        # The bridge: between the inner eye corners, from a little below them to well above.
        mid = (inner_r + inner_l) / 2.0
        pad = k
        bx1, by1, bx2, by2 = clip_box(mid[0], mid[1] - 0.1 * gap, 0.3 * gap + pad, 0.3 * gap + pad)
        if bx2 - bx1 <= 2 * pad or by2 - by1 <= 2 * pad:
            return
        bridge = blackhat(target, (bx1, by1, bx2, by2))[pad:-pad, pad:-pad]
        if float((bridge.max(axis=0) > _FRAME_HIGH).mean()) < _BRIDGE_COLUMNS:
            return
        # The eye band: both eyes and round them, where frames sit.
        both = np.vstack([right, left])
        lo, hi = both.min(axis=0), both.max(axis=0)
        centre, half = (lo + hi) / 2.0, (hi - lo) / 2.0
        box = clip_box(centre[0], centre[1] - 0.1 * gap, half[0] + 0.6 * gap,
                       half[1] + 0.9 * gap)
        x1, y1, x2, y2 = box
        if x2 <= x1 or y2 <= y1:
            return
        detail = cv2.subtract(blackhat(target, box), blackhat(warped, box))
        keep = np.clip((detail - _FRAME_LOW) * (1.0 / (_FRAME_HIGH - _FRAME_LOW)), 0.0, 1.0)
        keep = cv2.GaussianBlur(cv2.dilate(keep, np.ones((3, 3), np.uint8)), (0, 0), 1.0)
        alpha[y1:y2, x1:x2] *= 1.0 - keep
        skin[y1:y2, x1:x2] &= keep <= 0.0

    def _apply_keep(self, alpha: np.ndarray, local: np.ndarray, kps: np.ndarray, size: float,
                    opener: float = 0.0
                    ) -> tuple[np.ndarray, list[tuple[np.ndarray, masks.Box, bool]]]:
        """Zero `alpha` (in place) where the target's eyes and mouth are kept (its mouth corners
        by `opener`, see mouth_opener); returns the weights for colour statistics (inside the
        face, away from its edge, eyes and mouth) and each kept region's weights, box and
        whether it is the --mouth-mask region."""
        roi_hw = alpha.shape[:2]
        skin = alpha >= 0.99
        detail = max(1.0, DETAIL_FEATHER * size)
        # (outline, feather, is it the --mouth-mask region, does its fade start at the outline
        # at sub-pixel precision)
        polygons: list[tuple[np.ndarray, float, bool, bool]] = []
        if self.keep_eyes:
            polygons += [(local[eye], detail, False, True) for eye in self._eyes]
        closed = [(eye_region(local[eye]), closed_weight) for eye in self._eyes
                  if self.keep_eyes and (closed_weight := eye_closed(local[eye])) > 0.0]
        if self.settings.mouth_mask is not None:
            mouth = masks.mouth_polygon(local, kps, int(self.settings.mouth_mask))
            polygons.append((mouth, max(1.0, _MOUTH_FEATHER * size), True, False))
        elif self.keep_mouth_interior:
            polygons.append((local[self._lips_inner], detail, False, True))
        kept = []
        weights = [1.0] * len(polygons)
        for region, weight in closed:
            polygons.append((region, 0.25 * float(np.ptp(region[:, 0])), False, True))
            weights.append(weight)
        if opener > 0.0 and self.keep_mouth_interior and self.settings.mouth_mask is None:
            outer = local[mesh_indices.LIPS_OUTER]
            feather = MOUTH_CORNER_FEATHER * float(np.linalg.norm(outer[len(outer) // 2] - outer[0]))
            for region in mouth_corner_regions(outer):
                # (a broad, soft region: its rasterised pixels do not show, and the exact
                # outline distance cost a few ms per frame on a large face)
                polygons.append((region, max(1.0, feather), False, False))
                weights.append(opener)
        for (poly, feather, is_mouth_mask, exact), weight in zip(polygons, weights):
            # The eyes' and inner mouth's fade follows their outline at sub-pixel precision.
            found = masks.polygon_mask_box(roi_hw, poly, feather, exact=exact)
            if found is None:
                continue
            keep, (x1, y1, x2, y2) = found
            if weight < 1.0:
                keep *= weight
            alpha[y1:y2, x1:x2] *= 1.0 - keep
            skin[y1:y2, x1:x2] &= keep <= 0.0
            kept.append((keep, (x1, y1, x2, y2), is_mouth_mask))
        return skin, kept
