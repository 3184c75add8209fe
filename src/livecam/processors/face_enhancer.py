"""The face enhancer: GFPGAN 1.4, GPEN-BFR 256/512 or CodeFormer (ONNX) restoring detail in the
faces the swapper touched.

Per frame: every usable face of packet.faces (no second detection) is aligned to the chosen
model's template from the same input frame, all crops go through the model in one call when its
batch dimension is dynamic (else back to back), and each restored crop is pasted back through a
feathered crop-space mask inside the face's region only, mixed with `blend`. After the swapper,
that mask is cut by what the swapper kept as the target's (crop_masks.FaceMasker.changeable,
the swapper's own cut, judged on the enhancer's crop: --face-mask occlusion, region and area,
--mouth-mask), so what the user kept stays the target's pixels; the enhancer alone keeps nothing
(those options are the swapper's, and said unused without it).

The four models differ only in what `EnhancerModel` holds. What they share, as their publisher's
own code runs these files: NCHW RGB input `input` in [-1, 1] ((x/255 - 0.5) / 0.5), the restored
crop as the first output in the same range, clamped and mapped back. CodeFormer alone takes a
second input, `weight` (float64), its fidelity w (0 restores most, 1 keeps the input most).

On a GPU lane (runtime/lanes.uses_device_fronts) each model gets a `joined` session, the
model with `pixel_front` around it (runtime/graphs.py): the uint8 crops go up, the normalising,
the clamp and the rounding run on the device, and the restored crops come back as uint8 BGR
planes, one crop a call (one fixed shape: a CUDA graph, see pixel_front); where the join fails
the plain path runs, else the model's description stands in for the plain session (its weights
on the device once per lane: ModelStore.open_joined).

Live runs may hold a second, faster model (gpen_bfr_256, when it is in the models folder): the
governor's first enhancer step switches to it before switching the enhancer off
(`set_fast_model`).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Mapping, Sequence

import cv2
import numpy as np

from livecam.errors import ModelError
from livecam.faces.align import FFHQ_512, align_matrix, arcface_template, to_blob
from livecam.faces.face import Face
from livecam.faces.source import SourceIdentity
from livecam.frame import FramePacket
from livecam.models import fp16
from livecam.models.catalog import repair
from livecam.processors.base import presence, usable
from livecam.processors.crop_masks import FaceMasker, build_masker
from livecam.processors.paste import CropMask, align_crop, feathered_box, paste_changes
from livecam.processors.registry import BuildContext, ProcessorSpec, given, listed
from livecam.runtime import graphs
from livecam.runtime.providers import MAX_BATCH
from livecam.runtime.sessions import input_dtype
from livecam.settings import EnhanceSettings, ProcessingSettings, SwapSettings

log = logging.getLogger("livecam")

# The restored face fades out well inside the crop (whose corners hold hair and background);
# fractions of the crop side, so every crop size pastes the same part of the face.
_MASK_MARGIN = 0.04
_MASK_FEATHER = 0.10


@dataclass(frozen=True, eq=False)
class EnhancerModel:
    """What differs between the enhancer models (keyed by catalog name in ENHANCERS)."""

    size: int  # the square crop's side, pixels
    template: np.ndarray  # where the 5 keypoints go in the crop (faces/align.py)
    fidelity: bool = False  # takes --enhancer-weight in its `weight` input (CodeFormer)


# GFPGAN, GPEN-BFR 512 and CodeFormer were trained on FFHQ-aligned 512 crops; FaceFusion runs
# gpen_bfr_256 on the 128 ArcFace template scaled to 256 (the tighter, inswapper-style crop).
ENHANCERS: Mapping[str, EnhancerModel] = MappingProxyType({
    "gfpgan_1.4": EnhancerModel(512, FFHQ_512),
    "gpen_bfr_256": EnhancerModel(256, arcface_template(256)),
    "gpen_bfr_512": EnhancerModel(512, FFHQ_512),
    "codeformer": EnhancerModel(512, FFHQ_512, fidelity=True),
})
FASTEST = "gpen_bfr_256"  # the governor's step before "enhancer off"
SCALE, OFFSET = 1.0 / 127.5, -1.0  # model input = pixel * SCALE + OFFSET: (x / 255 - 0.5) / 0.5


def pixel_front(session: Any, size: int) -> graphs.Front:
    """The enhancer's uint8 I/O as graphs around its model (runtime/graphs.pixel_front): crops in,
    the first output back as B, G, R uint8 planes, clamped and rounded as restore_planes does.
    One `size` crop a call, whatever the model's batch, and its other inputs (CodeFormer's
    weight) fixed at the shape they are fed: every input fixed, so on a GPU lane the joined
    session replays one CUDA graph. (With a dynamic batch taking all of a frame's faces at once,
    each new face count would be a new shape, and ORT would capture a new graph mid-stream, on
    the lane's first frame with that many faces, while the other lanes copy.)"""
    extra = tuple((i.name, tuple(_fed_shape(i))) for i in session.get_inputs()
                  if i.name != "input" and i.shape is not None)
    return graphs.pixel_front("enhance_pixels", "input", session.get_outputs()[0].name, SCALE, OFFSET,
                              rounded=True, planar=True, shape=(1, size), fixed_inputs=extra)


def _fed_shape(model_input: Any) -> list[int]:
    """The shape an extra input (CodeFormer's `weight`) is fed at: as the file declares it, a
    dynamic dim as 1 ([1] when the rank is unknown)."""
    declared = [1] if model_input.shape is None else model_input.shape
    return [d if isinstance(d, int) and d > 0 else 1 for d in declared]


class Restorer:
    """One enhancer model's session: aligned crops in, restored crops out."""

    def __init__(self, name: str, session: Any, settings: EnhanceSettings, joined: Any = None,
                 one_shape: bool = False) -> None:
        """`joined`: the same model with `pixel_front` around it, run instead of `session` and
        the numpy conversions (a lane on a GPU: uint8 crops up, uint8 planes back).
        `one_shape`: one crop a call on `session` too, whatever the model's batch (a GPU lane
        whose join failed: as pixel_front says, each new face count would be a new shape, with
        its own cuDNN algorithm search or TensorRT tuning mid-stream)."""
        self.name = name
        self.model = model = ENHANCERS[name]
        self._session = session
        self._joined = joined
        size = model.size
        inputs = {i.name: i for i in session.get_inputs()}
        image_in = inputs.get("input")
        shape = tuple(image_in.shape) if image_in is not None else ()
        extra = set(inputs) - {"input", "weight"}
        if image_in is None or len(shape) != 4 or tuple(shape[1:]) != (3, size, size) or extra:
            raise ModelError(
                f"this file is not a {name} model: expected input `input` [1,3,{size},{size}], got "
                f"{[(i.name, i.shape) for i in inputs.values()]}; {repair(name)}")
        self._input_dtype = input_dtype(image_in.type)
        # A symbolic or missing first dimension means the export takes any batch size.
        self.batched = not (isinstance(shape[0], int) and shape[0] > 0) and not one_shape
        self._feeds_extra: dict[str, np.ndarray] = {}
        weight = inputs.get("weight")
        if weight is not None:
            # In the shape the file declares ([1], [1, 1], a scalar); other models' weight inputs get 1.
            value = settings.weight if model.fidelity and settings.weight is not None else 1.0
            self._feeds_extra["weight"] = np.full(_fed_shape(weight), value, dtype=input_dtype(weight.type))
        self._output_name = session.get_outputs()[0].name
        self.mask: CropMask = feathered_box(size, _MASK_MARGIN * size, _MASK_FEATHER * size)

    def _run(self, blob: np.ndarray) -> np.ndarray:
        feeds = {"input": blob.astype(self._input_dtype, copy=False), **self._feeds_extra}
        return np.asarray(self._session.run([self._output_name], feeds)[0], dtype=np.float32)

    def restore_planes(self, crops: list[np.ndarray]) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """Run the model on aligned crops; returns each restored crop as its B, G, R uint8 planes."""
        if self._joined is not None:  # one crop a call: the shape pixel_front fixed
            planes = [self._joined.run([graphs.PIXELS_OUT], {graphs.PIXELS_IN: crop[None], **self._feeds_extra})[0][0]
                      for crop in crops]
            return [(p[0], p[1], p[2]) for p in planes]
        size = self.model.size
        blob = to_blob(crops, SCALE, OFFSET)  # (x / 255 - 0.5) / 0.5, RGB
        step = MAX_BATCH if self.batched else 1  # MAX_BATCH: the TensorRT profile's batch range
        batches = [blob[i:i + step] for i in range(0, len(crops), step)]
        out = []
        for p in (p for batch in batches for p in self._run(batch)):
            rows = p.reshape(3 * size, size)
            # (clip(x, -1, 1) + 1) / 2 * 255, rounded: OpenCV's saturating cast to uint8 is the clamp.
            u8 = cv2.addWeighted(rows, 127.5, rows, 0.0, 127.5, dtype=cv2.CV_8U)
            out.append((u8[2 * size:], u8[size:2 * size], u8[:size]))
        return out

    def warm(self, runs: int) -> None:
        """Restore a black crop `runs` times, as a face is restored (see FaceEnhancer.warm)."""
        crop = np.zeros((self.model.size, self.model.size, 3), np.uint8)
        for _ in range(runs):
            self.restore_planes([crop])


class FaceEnhancer:
    """Frame processor "face_enhancer": the chosen model, and optionally a faster one that the
    live governor may switch to (`set_fast_model`)."""

    name = "face_enhancer"

    def __init__(self, session: Any, settings: EnhanceSettings, fast_session: Any = None, *, joined: Any = None,
                 fast_joined: Any = None, one_shape: bool = False, masker: FaceMasker | None = None,
                 fade: bool = True, counts: bool = True) -> None:
        """`joined`, `fast_joined`: the models with their pixel front, or None; `one_shape`: one
        crop a call (Restorer); `masker`: the swapper's, whose kept target the restored face is
        not pasted over (None: nothing kept); `fade`: faces near the size limit fade in
        (base.presence; not in a still picture); `counts`: the enhancer's changes are what the
        summary counts (no swapper runs), so a face it left as it was is said so."""
        self._fade = fade
        self._counts = counts
        self._settings = settings
        self._masker = masker
        self._chosen = Restorer(settings.model, session, settings, joined, one_shape)
        self._fast = (Restorer(FASTEST, fast_session, settings, fast_joined, one_shape)
                      if fast_session is not None else None)
        self._active = self._chosen  # one reference, read once per frame by any worker

    @property
    def batched(self) -> bool:
        return self._active.batched

    @property
    def model_name(self) -> str:
        """The model now running."""
        return self._active.name

    @property
    def fast_model(self) -> str | None:
        """The faster model this run can switch to, or None."""
        return self._fast.name if self._fast is not None else None

    def set_fast_model(self, on: bool) -> None:
        self._active = self._fast if on and self._fast is not None else self._chosen

    @property
    def uses_mask_models(self) -> bool:
        return self._masker is not None and self._masker.uses_models

    def set_mask_models(self, on: bool) -> None:
        """The live governor's step, as the swapper takes it (their masks keep the same parts)."""
        if self._masker is not None:
            self._masker.models_on = bool(on)

    def prepare(self, sources: Sequence[SourceIdentity]) -> None:
        """Nothing per source: the enhancer only looks at the frame."""

    def warm(self, runs: int) -> None:
        """Run the chosen model and the fast one `runs` times as a face runs them (the joined
        sessions where there are), on a black crop: Engine.lanes() with CUDA graphs, so that
        their captures, the governor's fast model included, happen before the first frame."""
        for restorer in (self._chosen, self._fast):
            if restorer is not None:
                restorer.warm(runs)

    def restore(self, crops: list[np.ndarray]) -> list[np.ndarray]:
        """Run the active model on aligned BGR crops; returns restored BGR uint8 crops."""
        return [cv2.merge(planes) for planes in self._active.restore_planes(crops)]

    def process(self, packet: FramePacket) -> FramePacket:
        start = time.perf_counter()
        restorer = self._active
        blend = float(np.clip(self._settings.blend, 0.0, 1.0))
        faces = [f for f in packet.faces if usable(f)] if blend > 0.0 else []
        if faces:
            image = packet.image
            model = restorer.model
            matrices = [align_matrix(f.kps, model.template) for f in faces]
            # All crops from the same input frame, so batched and single calls agree.
            crops = [align_crop(image, m, model.size) for m in matrices]  # bilinear, replicated border
            for face, matrix, crop, planes in zip(faces, matrices, crops, restorer.restore_planes(crops)):
                mask = self._mask(restorer.mask, crop, face, matrix)
                # BGRA with the paste mask as alpha, built in one merge (paste() takes it as is).
                restored = cv2.merge((*planes, mask.alpha8))
                changed = paste_changes(image, restored, matrix, mask, opacity=blend * presence(face, self._fade))
                if self._counts and not changed:  # after a swapper, the swap is what counts
                    packet.left_as_is += 1
                    packet.faint += 1
        packet.timings[self.name] = (time.perf_counter() - start) * 1000.0
        return packet

    def _mask(self, mask: CropMask, crop: np.ndarray, face: Face, matrix: np.ndarray) -> CropMask:
        """The restorer's paste mask, less the target the swapper kept (no exact interior then:
        paste weighs every pixel)."""
        changeable = self._masker.changeable(crop, matrix, face) if self._masker is not None else None
        if changeable is None:
            return mask
        alpha8 = np.rint(mask.alpha8 * changeable).astype(np.uint8)
        return CropMask(alpha8, mask.support, None)


# ---- registration (livecam.processors.registry) ---------------------------------------------------
def _build(ctx: BuildContext) -> FaceEnhancer:
    settings = ctx.settings.enhance
    precision = fp16.choose(ctx.store, settings.model, settings.precision, ctx.providers.primary)
    session, joined = ctx.open_model(settings.model, _front(ctx, settings.model), precision=precision)
    fast, fast_joined = _fast_sessions(ctx) if ctx.live else (None, None)
    # On a GPU lane one shape, joined or not (the join may fail)
    return FaceEnhancer(session, settings, fast, joined=joined, fast_joined=fast_joined,
                        one_shape=_on_gpu_lane(ctx), masker=_kept_by_swapper(ctx), fade=not ctx.still,
                        counts=ctx.swap_model is None)


def _kept_by_swapper(ctx: BuildContext) -> FaceMasker | None:
    """A masker of what the run's swapper keeps as the target's, or None where it keeps nothing.
    The mask options are the swapper's: without a swapper they keep nothing (and are said
    unused); the mesh swapper ignores --face-mask but keeps the --mouth-mask mouth."""
    if ctx.swap_model is None:
        return None
    swap = ctx.settings.swap
    if ctx.swap_model == "mesh":
        swap = SwapSettings(mouth_mask=swap.mouth_mask)
    masker = build_masker(ctx, swap)
    return None if masker.box_only else masker


_OPTIONS = {"model": "--enhancer-model", "blend": "--enhancer-blend", "weight": "--enhancer-weight",
            "precision": "--enhancer-precision"}  # EnhanceSettings field -> flag


def _unused_options(settings: ProcessingSettings, swap_model: str | None, runs: bool) -> tuple[str, ...]:
    enhance = settings.enhance
    if not runs:
        flags = given(enhance, _OPTIONS)
        return (f"warning: {listed(flags)} for the face enhancer, which this run does not use "
                "(add face_enhancer to --frame-processor)",) if flags else ()
    if enhance.weight is not None and not ENHANCERS[enhance.model].fidelity:
        return (f"warning: --enhancer-weight is CodeFormer's fidelity; {enhance.model} has no such input, "
                "so it is ignored (add --enhancer-model codeformer)",)
    return ()


def _on_gpu_lane(ctx: BuildContext) -> bool:
    from livecam.runtime import lanes  # looked up per call: the tests stand a CPU lane in for a GPU one

    return lanes.uses_device_fronts(ctx.providers)


def _front(ctx: BuildContext, name: str) -> Any:
    """What builds the model `name`'s pixel front from its inputs and outputs, on a GPU lane
    (runtime/lanes.uses_device_fronts), where the model runs joined only (the plain one's
    place taken by its description: ModelStore.open_joined); else None."""
    if not _on_gpu_lane(ctx):
        return None
    return lambda described: pixel_front(described, ENHANCERS[name].size)


def _fast_sessions(ctx: BuildContext) -> tuple[Any, Any]:
    """The fastest enhancer for the live governor (ModelStore.open_joined's pair), when it is
    already in the models folder (never downloaded for this) and is not the chosen one; else
    (None, None)."""
    if ctx.settings.enhance.model == FASTEST or not ctx.store.is_present(FASTEST):
        return None, None
    try:
        precision = fp16.choose(ctx.store, FASTEST, ctx.settings.enhance.precision, ctx.providers.primary)
        return ctx.open_model(FASTEST, _front(ctx, FASTEST), precision=precision)
    except ModelError as exc:
        log.warning("warning: %s; the live governor will switch the enhancer straight off", exc.message)
        return None, None


PROCESSOR = ProcessorSpec(name=FaceEnhancer.name, role="enhancer", build=_build,
                          model=lambda ctx: fp16.label(ctx.store, ctx.settings.enhance.model,
                                                       ctx.settings.enhance.precision, ctx.providers.primary),
                          unused_options=_unused_options)
