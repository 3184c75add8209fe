"""The inswapper's paste mask for one face, in crop space: the intersection of the chosen
--face-mask types.

box: insightface's soft square (processors/paste.py), with --face-mask-padding and its feather
scaled by --face-mask-blur; alone and at the defaults it is today's mask, bit for bit.
occlusion: XSeg's "face seen" (processors/occluder.py); region: the chosen BiSeNet face parts
(processors/face_parser.py); area: face areas from the landmarks (processors/masks.py).
occlusion, region and area judge the TARGET's crop (what covers the target stays in front).
Their intersection is feathered inwards only: a pixel they exclude stays exactly the target's.
--mouth-mask cuts the target's mouth out of the same mask (kept exactly, fading outwards).
What all but the box keep is the kept target (FaceMasker.changeable, its complement): the face
enhancer after the swapper cuts its own paste mask by it too, so what the user kept stays the
target's pixels through the whole chain.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import cv2
import numpy as np

from livecam.errors import InputError, ModelError
from livecam.faces.face import Face
from livecam.models.catalog import download_command
from livecam.processors.face_parser import PARSER_MODEL, FaceParser
from livecam.processors.masks import area_mask, mouth_polygon, polygon_mask
from livecam.processors.occluder import OCCLUDER_MODEL, Occluder
from livecam.processors.paste import CropMask, inswapper_mask
from livecam.settings import DEFAULT_FACE_MASK_BLUR, SwapSettings

if TYPE_CHECKING:
    from livecam.processors.registry import BuildContext

# The feather of the model and area masks: a Gaussian of sigma blur * crop / this, e.g. 2.4 crop
# pixels at the default blur on a 128 crop (about 8 frame pixels on a 400-pixel face).
_FEATHER_DIVISOR = 16.0


def _feather_inwards(mask: np.ndarray, sigma: float) -> np.ndarray:
    """Blur, then map [0.5, 1] to [0, 1]: the fade lies inside the kept part, so every pixel the
    mask excluded (at most 0.5 after the blur) is exactly 0."""
    if sigma > 0.0:
        mask = cv2.GaussianBlur(mask, (0, 0), sigmaX=sigma, sigmaY=sigma, borderType=cv2.BORDER_REPLICATE)
    return np.clip(2.0 * mask - 1.0, 0.0, 1.0)


def _to_crop(points: np.ndarray, matrix: np.ndarray) -> np.ndarray:
    pts = np.asarray(points, dtype=np.float64)[:, :2]
    m = np.asarray(matrix, dtype=np.float64)
    return pts @ m[:, :2].T + m[:, 2]


def _support(alpha8: np.ndarray) -> tuple[int, int, int, int] | None:
    cols, rows = np.flatnonzero(alpha8.any(axis=0)), np.flatnonzero(alpha8.any(axis=1))
    if len(cols) < 2 or len(rows) < 2:
        return None
    return int(cols[0]), int(rows[0]), int(cols[-1]), int(rows[-1])


def kept_mouth(face: Face, matrix: np.ndarray, size: int, mouth_mask: int) -> np.ndarray:
    """--mouth-mask SIZE: 1 on the target's mouth (grown towards the chin by SIZE), fading out
    over 8% of the eye distance (at least 2 frame px) outside it, in the pixels of the size x
    size crop `matrix` maps the frame to. What every paste-back over a swapped face leaves out
    (the swapper's mask, the enhancer's), so the kept mouth stays the target's."""
    landmarks = None if face.landmarks is None else _to_crop(face.landmarks, matrix)
    polygon = mouth_polygon(landmarks, _to_crop(face.kps, matrix), int(mouth_mask))
    crop_per_frame_px = float(np.hypot(matrix[0, 0], matrix[0, 1]))
    kept = polygon_mask((size, size), polygon, max(2.0, 0.08 * face.eye_distance) * crop_per_frame_px)
    # Grown a crop pixel: the paste's bilinear warp then keeps every frame pixel inside the
    # polygon exactly (as the frame-space mask it replaces did).
    return cv2.dilate(kept, np.ones((3, 3), np.uint8))


class FaceMasker:
    """Builds each face's paste mask from the swap settings and the mask models it was given."""

    def __init__(self, settings: SwapSettings, occluder: Occluder | None = None,
                 parser: FaceParser | None = None) -> None:
        types = settings.face_mask or ("box",)
        if "occlusion" in types and occluder is None:
            raise ModelError(f"--face-mask occlusion needs the {OCCLUDER_MODEL} model; "
                             f"run `{download_command(OCCLUDER_MODEL)}`")
        if "region" in types and parser is None:
            raise ModelError(f"--face-mask region needs the {PARSER_MODEL} model; "
                             f"run `{download_command(PARSER_MODEL)}`")
        if "area" in types and settings.face_mask_areas == ("mouth",) and settings.mouth_mask is not None:
            raise InputError("--mouth-mask keeps the target's mouth, and --face-mask area with --face-mask-areas "
                             "mouth swaps only the mouth: nothing would be swapped; leave one of them out")
        self._settings = settings
        self._types = types
        self._occluder = occluder
        self._parser = parser
        self._feather = settings.face_mask_blur / DEFAULT_FACE_MASK_BLUR
        self.models_on = True  # the live governor's "mask models off" step clears it (box and areas stay)

    @property
    def uses_models(self) -> bool:
        """Whether an occluder or a face parser is in use (what the governor's step can save)."""
        return self._occluder is not None or self._parser is not None

    @property
    def box_only(self) -> bool:
        return self._types == ("box",) and self._settings.mouth_mask is None

    def _types_now(self, models_on: bool) -> tuple[str, ...]:
        """The mask types in effect: without the mask models (the governor's step), the others; the
        box where none is left, as a mask of models alone would otherwise paste the whole crop
        square, background and all."""
        if models_on:
            return self._types
        return tuple(t for t in self._types if t not in ("occlusion", "region")) or ("box",)

    def changeable(self, crop: np.ndarray, matrix: np.ndarray, face: Face) -> np.ndarray | None:
        """The complement of the kept target, in the pixels of `crop` (any size; `matrix` maps the
        frame to it): 0 on what the user asked to keep as the target's (what covers the face with
        occlusion, the parts left out of --face-mask-regions or --face-mask-areas, the mouth kept
        by --mouth-mask), 1 where a processor may change the face, feathered inwards in between;
        None where nothing is kept (the box alone). The one mask every paste-back over a swapped
        face is cut by: the swapper's (mask) and the enhancer's after it, so neither re-renders
        what the user kept. The occluder and the parser judge `crop` itself."""
        return self._changeable(crop, matrix, face, self._types_now(self.models_on))

    def _changeable(self, crop: np.ndarray, matrix: np.ndarray, face: Face,
                    types: tuple[str, ...]) -> np.ndarray | None:
        s = self._settings
        size = crop.shape[0]
        if not set(types) - {"box"} and s.mouth_mask is None:
            return None
        parts: list[np.ndarray] = [np.ones((size, size), dtype=np.float32)]  # no mask type but box: all
        if self._occluder is not None and "occlusion" in types:
            parts.append(self._occluder.visible(crop))
        if self._parser is not None and "region" in types:
            parts.append(self._parser.regions(crop, s.face_mask_regions))
        if "area" in types:
            landmarks = None if face.landmarks is None else _to_crop(face.landmarks, matrix)
            parts.append(area_mask((size, size), landmarks, _to_crop(face.kps, matrix), s.face_mask_areas))
        inside = np.stack(parts).min(axis=0)
        weight = _feather_inwards(inside.astype(np.float32), s.face_mask_blur * size / _FEATHER_DIVISOR)
        if s.mouth_mask is not None:
            weight = weight * (1.0 - kept_mouth(face, matrix, size, s.mouth_mask))
        return weight

    def mask(self, crop: np.ndarray, matrix: np.ndarray, face: Face, frame_shape: tuple[int, ...]) -> CropMask:
        s = self._settings
        size = crop.shape[0]
        types = self._types_now(self.models_on)  # read once: the governor may switch it between two faces
        box = (inswapper_mask(matrix, size, frame_shape, feather=self._feather, padding=s.face_mask_padding)
               if "box" in types else None)
        weight = self._changeable(crop, matrix, face, types)
        if weight is None:
            assert box is not None  # _types_now leaves the box where no other type is in effect
            return box
        base = box.alpha8.astype(np.float32) if box is not None else np.float32(255.0)
        alpha8 = np.rint(weight * base).astype(np.uint8)
        # The box's support where there is one: the same paste region, so the same warp (OpenCV's
        # fixed-point warp can round a level differently at another offset). No exact interior:
        # paste weighs every pixel.
        return CropMask(alpha8, box.support if box is not None else _support(alpha8), None)


def build_masker(ctx: BuildContext, settings: SwapSettings | None = None) -> FaceMasker:
    """The masker for a run (of `settings`, default the run's swap settings), opening the mask
    models its --face-mask types need (only their descriptions on the run's own engine beside
    lanes: BuildContext.describe_only; its masker then never runs, but still says it uses
    models, for the governor's step)."""
    settings = ctx.settings.swap if settings is None else settings
    types = settings.face_mask
    occluder = Occluder(ctx.open_model(OCCLUDER_MODEL)[0]) if "occlusion" in types else None
    parser = FaceParser(ctx.open_model(PARSER_MODEL)[0]) if "region" in types else None
    return FaceMasker(settings, occluder, parser)
