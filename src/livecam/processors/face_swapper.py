"""The neural face swappers on ONNX Runtime: inswapper_128 (fp32 or fp16 weights) and
FaceFusion's HyperSwap 1a/1b/1c 256. One processor; `SwapKind` holds what differs between them.

Per source identity, once (prepare): the model's source input from the normed ArcFace embedding:
inswapper's latent = embedding @ emap, re-normalised, where emap is the model file's last
initializer; HyperSwap takes the normed embedding itself. Per target face: align its 5 keypoints
to the ArcFace template at the model's size (112 shifted +8 px in x, scaled: 128 or 256), warp
the crop, scale it to the model's range (inswapper RGB in [0, 1], HyperSwap RGB in [-1, 1]), run
the model, and paste the result back through insightface's soft mask (rebuilt analytically in
crop space, see processors/paste.py), with the optional colour match, kept mouth and opacity, all
inside the face's region of the frame only. Faces run back to back through the one shared session
(both models have a static batch of 1). HyperSwap's second output, its own face mask, is not
read: the model has already blended its face into the target crop by it.

Pixel boost (SwapSettings.pixel_boost = N, a multiple of the model's size S; None: S): the crop
is warped at N x N by the template scaled to N and split into k x k tiles (k = N / S), tile
(i, j) = crop[i::k, j::k]: each a whole S face shifted by (j/k, i/k) of a model pixel. Every tile
is swapped with the same source input (one batched call when the session's batch is dynamic, else
one call per tile) and the outputs are interleaved back, so the swap carries N x N detail; the
paste-back takes the N x N result with the N-scaled matrix. N = S is one tile: the plain path.

On a GPU lane (runtime/lanes.uses_device_fronts) the swapper runs a `joined` session: the
model with `pixel_front` around it (runtime/graphs.py), which takes the uint8 crop's tiles and
gives the uint8 BGR swap, so only pixels cross the bus and the blob and the conversion back run
on the device. Its shape is the run's one shape (the k x k tiles in one call, or one tile a
call), fixed when it is built, so that it may replay a CUDA graph. The CPU still warps the crop
(the masks, the colour match and the paste-back need it there); where the join fails the plain
path runs; where it joins, the plain session is not opened: the description stands in for it
(ModelStore.open_joined), so the weights sit on the device once per lane.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import cv2
import numpy as np

from livecam.console import agree
from livecam.errors import InputError, ModelError
from livecam.faces.align import align_matrix, arcface_template, to_blob, warp_crop
from livecam.faces.face import EMBEDDING_SIZE, Face
from livecam.faces.source import SourceIdentity
from livecam.frame import FramePacket
from livecam.models.catalog import download_command, repair
from livecam.processors.base import FrameProcessor, presence, usable
from livecam.models.emap import read_last_initializer
from livecam.processors.crop_masks import FaceMasker, build_masker
from livecam.processors.paste import paste_changes
from livecam.processors.registry import BuildContext, ProcessorSpec, given, listed
from livecam.runtime import graphs
from livecam.runtime.graphs import Front
from livecam.runtime.sessions import input_dtype
from livecam.settings import HYPERSWAP_MODELS, PIXEL_BOOSTS, ProcessingSettings, SwapSettings

log = logging.getLogger("livecam")


@dataclass(frozen=True)
class SwapKind:
    """What differs between the neural swappers."""

    label: str  # for messages
    size: int  # the model's crop, px
    scale: float  # model input = pixel (0..255, RGB) * scale + offset; the output is mapped back alike
    offset: float
    emap: bool  # the source input is the normed embedding @ the file's emap (else the normed embedding)


INSWAPPER = SwapKind("inswapper", 128, 1.0 / 255.0, 0.0, emap=True)
HYPERSWAP = SwapKind("HyperSwap", 256, 2.0 / 255.0, -1.0, emap=False)  # (x / 255 - 0.5) / 0.5


def swap_kind(model: str) -> SwapKind:
    """The kind of a catalog swap model (inswapper_128, inswapper_128_fp16, hyperswap_*)."""
    return HYPERSWAP if model in HYPERSWAP_MODELS else INSWAPPER


@dataclass(frozen=True)
class AlignedFace:
    crop: np.ndarray  # SxSx3 uint8 BGR: the target face as the model sees it
    # (k*k)x3xSxS model input, tile (i, j) at i*k+j: RGB in the model's range, session dtype; None
    # where a joined session takes the uint8 crop itself
    blob: np.ndarray | None
    matrix: np.ndarray  # 2x3 frame-to-crop affine


def _valid_matrix(matrix: np.ndarray) -> bool:
    scale = float(np.hypot(matrix[0, 0], matrix[0, 1]))
    return bool(np.all(np.isfinite(matrix))) and 1e-3 < scale < 1e3


def _color_mask(size: int) -> np.ndarray:
    """Where the skin statistics come from: an ellipse over the face inside the ArcFace crop
    (forehead to chin, cheek to cheek), soft-edged."""
    mask = np.zeros((size, size), dtype=np.float32)
    r = size / 128.0
    cv2.ellipse(mask, (int(round(64 * r)), int(round(72 * r))), (int(round(36 * r)), int(round(46 * r))),
                0, 0, 360, 1.0, thickness=-1, lineType=cv2.LINE_AA)
    return mask


def split_tiles(blob: np.ndarray, k: int) -> np.ndarray:
    """1x3x(kS)x(kS) -> (k*k)x3xSxS: tile i*k+j is blob[..., i::k, j::k] (a sub-pixel shift)."""
    if k == 1:
        return blob
    return np.ascontiguousarray(np.stack([blob[0, :, i::k, j::k] for i in range(k) for j in range(k)]))


def merge_tiles(tiles: np.ndarray, k: int) -> np.ndarray:
    """The inverse of split_tiles: (k*k)x3xSxS -> 1x3x(kS)x(kS), interleaving the tiles back."""
    if k == 1:
        return tiles
    n, c, s, _ = tiles.shape
    out = np.empty((1, c, k * s, k * s), dtype=tiles.dtype)
    for t in range(n):
        out[0, :, t // k::k, t % k::k] = tiles[t]
    return out


@dataclass(frozen=True)
class _ModelIO:
    target: Any  # the session's input descriptions (name, shape, type)
    source: Any
    output: str  # the swapped crop's output name


def _model_io(session: Any, kind: SwapKind) -> _ModelIO:
    """The session's target and source inputs and image output, checked against the kind.

    By rank, not position: inswapper lists target first, HyperSwap source first; HyperSwap's
    second output (its mask) is left out."""
    inputs, outputs = session.get_inputs(), session.get_outputs()
    targets = [i for i in inputs if len(i.shape) == 4]
    sources = [i for i in inputs if len(i.shape) == 2]
    images = [o for o in outputs if len(o.shape) == 4 and o.shape[1] == 3]
    target: tuple[Any, ...] = tuple(targets[0].shape) if targets else (None,) * 4
    if (len(inputs) != 2 or len(targets) != 1 or len(sources) != 1 or not images
            or len(outputs) != (1 if kind.emap else 2) or target[1:] != (3, kind.size, kind.size)
            or sources[0].shape[-1] != EMBEDDING_SIZE):
        expected = ("inputs target [1,3,128,128] and source [1,512] and one output" if kind.emap else
                    f"inputs source [1,512] and target [1,3,{kind.size},{kind.size}], outputs output and mask")
        raise ModelError(
            f"this file is not {'an' if kind.label[0] in 'aeiou' else 'a'} {kind.label} model: expected "
            f"{expected}, got inputs {[(i.name, i.shape) for i in inputs]} and outputs "
            f"{[(o.name, o.shape) for o in outputs]}; pass the {kind.label} file or --swap-model mesh")
    output = next((o.name for o in images if o.name == "output"), images[0].name)
    return _ModelIO(targets[0], sources[0], output)


def tile_count(settings: SwapSettings, kind: SwapKind) -> int:
    """k: pixel boost's k x k tiles of the model's size (1 without it); InputError when the boost
    is not a multiple of the model's size."""
    boost = kind.size if settings.pixel_boost is None else int(settings.pixel_boost)
    if boost < kind.size or boost % kind.size:
        fits = [b for b in PIXEL_BOOSTS if int(b) % kind.size == 0]
        raise InputError(f"--pixel-boost {boost} does not fit the {kind.size} px {kind.label} swap model; "
                         f"use {', '.join(fits[:-1]) + ' or ' if len(fits) > 1 else ''}{fits[-1]} "
                         f"(a multiple of {kind.size}), or leave it out for {kind.size}")
    return boost // kind.size


def pixel_front(kind: SwapKind, session: Any, tiles: int = 1) -> Front:
    """The swap model's uint8 I/O as graphs around it (runtime/graphs.pixel_front): the target's
    tiles in at the kind's scale and offset, the swapped crop back as uint8 BGR, truncated as
    swap_crop does. At the one shape every call of the run has (`tiles`: k): all k x k tiles
    at once where the model's batch is dynamic, else one tile a call (as _run_tiles calls it),
    the source input fixed to that batch too, so the joined session may replay a CUDA graph."""
    io = _model_io(session, kind)
    batch = tiles * tiles if not isinstance(io.target.shape[0], int) else 1
    source = () if all(isinstance(d, int) for d in io.source.shape) else ((io.source.name, (batch, EMBEDDING_SIZE)),)
    return graphs.pixel_front(f"swap_pixels_{kind.label}", io.target.name, io.output, kind.scale, kind.offset,
                              rounded=False, shape=(batch, kind.size), fixed_inputs=source)


class NeuralSwapper:
    """Frame processor "face_swapper" backed by an inswapper_128 or a HyperSwap session."""

    name = "face_swapper"

    def __init__(self, session: Any, settings: SwapSettings, *, kind: SwapKind = INSWAPPER,
                 model_path: Path | str | None = None, emap: np.ndarray | None = None,
                 masker: FaceMasker | None = None, joined: Any = None, fade: bool = True) -> None:
        """`joined`: the same model with `pixel_front` around it, run instead of `session` and
        the numpy conversions (a lane on a GPU: uint8 crops up, the uint8 swap back); `fade`:
        faces near the size limit fade in (base.presence; not in a still picture)."""
        self._fade = fade
        self._session = session
        self._joined = joined
        self._settings = settings
        self.kind = kind
        self._masker = masker if masker is not None else FaceMasker(settings)
        io = _model_io(session, kind)
        self._target_name, self._source_name, self._output_name = io.target.name, io.source.name, io.output
        self._target_dtype = input_dtype(io.target.type)
        self._source_dtype = input_dtype(io.source.type)
        self._batched = not isinstance(io.target.shape[0], int)  # a dynamic batch: all tiles in one call
        self.model_size = kind.size
        self._tiles = tile_count(settings, kind)  # k: k x k tiles of model_size
        self.crop_size = self._tiles * kind.size  # the aligned crop and the paste-back work at N x N
        self._template = arcface_template(self.crop_size)
        self._color_weights = _color_mask(self.crop_size)
        self._emap: np.ndarray | None = None
        if kind.emap:
            if emap is None:
                path = model_path if model_path is not None else getattr(session, "_model_path", None)
                if not path:
                    raise ModelError("the inswapper's emap cannot be read: the session was not created "
                                     "from a file; pass model_path= or emap=")
                _, emap = read_last_initializer(path)
            emap = np.asarray(emap, dtype=np.float32)
            if emap.shape != (EMBEDDING_SIZE, EMBEDDING_SIZE):
                raise ModelError(
                    f"the inswapper's last initializer (emap) must be 512x512, got {emap.shape}; the "
                    f"file is not an inswapper model; "
                    f"{repair(Path(model_path).stem if model_path is not None else 'inswapper_128')}")
            self._emap = emap
        self._latents: dict[int, np.ndarray] = {}

    # -- per source ---------------------------------------------------------------------------
    def latent(self, embedding: np.ndarray) -> np.ndarray:
        """The model's source input for an ArcFace embedding (a mean of several is fine): (1, 512)
        float32, the normed embedding through the emap (inswapper) or the normed embedding."""
        e = np.asarray(embedding, dtype=np.float32).reshape(1, -1)
        e = e / np.linalg.norm(e)
        if self._emap is None:
            return e
        lat = e @ self._emap
        lat /= np.linalg.norm(lat)
        return lat

    def prepare(self, sources: Sequence[SourceIdentity]) -> None:
        latents = {}
        for key, source in enumerate(sources):
            if source.embedding is None:
                photo = source.paths[0] if source.paths else "the source photo"
                raise ModelError(
                    f"the {self.kind.label} swapper needs the source face's ArcFace embedding, but {photo} "
                    f"was analysed without one; install w600k_r50 with "
                    f"`{download_command('w600k_r50')}` or use --swap-model mesh")
            latents[key] = self.latent(source.embedding)
        if not latents:
            raise InputError("the face swapper needs at least one source face; pass --source PHOTO")
        self._latents = latents  # one assignment: threads see the old or the new set

    # -- per face -----------------------------------------------------------------------------
    def align(self, image: np.ndarray, face: Face) -> AlignedFace:
        """The target crop, the model input built from it and the frame-to-crop matrix."""
        matrix = align_matrix(face.kps, self._template)
        crop = warp_crop(image, matrix, self.crop_size)  # INTER_LINEAR, black border
        if self._joined is not None:  # the joined session builds the blob on the device
            return AlignedFace(crop, None, matrix)
        # blobFromImage(crop, scale, mean, swapRB=True), faster; then the k x k tiles
        blob = split_tiles(to_blob([crop], self.kind.scale, self.kind.offset), self._tiles)
        if self._target_dtype != np.float32:
            blob = blob.astype(self._target_dtype)
        return AlignedFace(crop, blob, matrix)

    def predict(self, aligned: AlignedFace, latent: np.ndarray) -> np.ndarray:
        """The model's output for one aligned face, its tiles interleaved back: 1x3xNxN, RGB in
        the model's range."""
        if aligned.blob is None:
            raise RuntimeError("predict() has no float output with a joined session; use swap_crop()")
        pred = self._run_tiles(self._session, self._target_name, self._output_name, aligned.blob, latent)
        return merge_tiles(pred, self._tiles)

    def _run_tiles(self, session: Any, target: str, output: str, tiles: np.ndarray, latent: np.ndarray) -> np.ndarray:
        """The model on every tile (a batch of target inputs) with the one source: one call when
        the batch is dynamic, else one per tile; the outputs in tile order."""
        source = latent.astype(self._source_dtype, copy=False)
        if len(tiles) == 1 or not self._batched:
            outs = [session.run([output], {target: tiles[t:t + 1], self._source_name: source})[0]
                    for t in range(len(tiles))]
            return np.asarray(outs[0] if len(outs) == 1 else np.concatenate(outs))
        sources = np.repeat(source, len(tiles), axis=0)
        return np.asarray(session.run([output], {target: tiles, self._source_name: sources})[0])

    def swap_crop(self, aligned: AlignedFace, latent: np.ndarray) -> np.ndarray:
        """The model's output for one aligned face: NxNx3 uint8 BGR."""
        if self._joined is not None:
            # The crop's k x k tiles as uint8 SxSx3 (split_tiles' order, through an NCHW view).
            k = self._tiles
            tiles = np.ascontiguousarray(split_tiles(aligned.crop.transpose(2, 0, 1)[None], k).transpose(0, 2, 3, 1))
            swapped = self._run_tiles(self._joined, graphs.PIXELS_IN, graphs.PIXELS_OUT, tiles, latent)
            return np.ascontiguousarray(merge_tiles(swapped.transpose(0, 3, 1, 2), k)[0].transpose(1, 2, 0))
        rgb = np.asarray(self.predict(aligned, latent)[0], dtype=np.float32).transpose(1, 2, 0)
        if self.kind.offset or self.kind.scale * 255.0 != 1.0:  # back to [0, 1] (HyperSwap: from [-1, 1])
            rgb = (rgb - np.float32(self.kind.offset)) * np.float32(1.0 / (self.kind.scale * 255.0))
        return np.ascontiguousarray(np.clip(255.0 * rgb, 0, 255).astype(np.uint8)[:, :, ::-1])

    def warm(self, runs: int) -> None:
        """Run the model `runs` times as a face runs it (the joined session where there is one,
        at the run's one tile shape) on a black crop: Engine.lanes() with CUDA graphs, so that
        the capture happens before the first frame, one lane after another."""
        latent = next(iter(self._latents.values()), np.zeros((1, EMBEDDING_SIZE), np.float32))
        crop = np.zeros((self.crop_size, self.crop_size, 3), np.uint8)
        blob = None
        if self._joined is None:
            blob = split_tiles(to_blob([crop], self.kind.scale, self.kind.offset), self._tiles).astype(self._target_dtype)
        for _ in range(runs):
            self.swap_crop(AlignedFace(crop, blob, np.eye(2, 3, dtype=np.float64)), latent)

    @property
    def uses_mask_models(self) -> bool:
        return self._masker.uses_models

    def set_mask_models(self, on: bool) -> None:
        """The live governor's step: the occluder and the face parser off (the box and the
        landmark areas stay), or on again."""
        self._masker.models_on = bool(on)

    def swap_face(self, image: np.ndarray, face: Face, latent: np.ndarray) -> tuple[float, bool | None]:
        """Swap one face in place; returns the ms its paste mask took (bench's face_mask stage)
        and whether the face was changed: False where nothing was pasted (no valid alignment, an
        empty paste mask), None where the paste was too faint to change a pixel."""
        aligned = self.align(image, face)
        if not _valid_matrix(aligned.matrix):
            return 0.0, False
        fake = self.swap_crop(aligned, latent)
        settings = self._settings
        if settings.color_match:
            from livecam.processors.color import match_lab
            fake = match_lab(fake, aligned.crop, self._color_weights)
        masked = time.perf_counter()
        mask = self._masker.mask(aligned.crop, aligned.matrix, face, image.shape)  # --face-mask, --mouth-mask
        mask_ms = (time.perf_counter() - masked) * 1000.0
        if not mask.alpha8.any():  # e.g. none of the --face-mask-regions visible: nothing to paste
            return mask_ms, False
        changed = paste_changes(image, fake, aligned.matrix, mask,
                                opacity=float(np.clip(settings.blend, 0.0, 1.0)) * presence(face, self._fade))
        return mask_ms, changed or None

    def process(self, packet: FramePacket) -> FramePacket:
        start = time.perf_counter()
        latents = self._latents
        if not latents:
            raise RuntimeError("NeuralSwapper.process() called before prepare()")
        faces = packet.faces if self._settings.blend > 0.0 else []  # blend 0: the input, exactly
        mask_ms = 0.0
        for face in faces:
            if not usable(face):
                continue
            latent = latents.get(face.source_key)
            if latent is None:
                log.debug("face_swapper: no source %d, using the first", face.source_key)
                latent = latents[min(latents)]
            took, changed = self.swap_face(packet.image, face, latent)
            mask_ms += took
            packet.left_as_is += not changed
            packet.faint += changed is None
        if not self._masker.box_only:  # the occluder, the parser and the areas, shown apart by bench
            packet.timings["face_mask"] = mask_ms
        packet.timings[self.name] = (time.perf_counter() - start) * 1000.0
        return packet


InswapperSwapper = NeuralSwapper  # the name from before HyperSwap, used by other tests and branches


# ---- registration (livecam.processors.registry) ---------------------------------------------------


def _build(ctx: BuildContext) -> FrameProcessor:
    model = ctx.swap_model or "mesh"
    if model == "mesh":
        from livecam.processors.mesh.swapper import MeshSwapper

        return MeshSwapper(ctx.settings.swap, fade=not ctx.still)
    from livecam.runtime.lanes import uses_device_fronts

    kind = swap_kind(model)
    tiles = tile_count(ctx.settings.swap, kind)
    # On a GPU lane the model runs joined only: `session` is then its description (ModelStore.open_joined)
    # (the run's own engine beside lanes: the description only, BuildContext.describe_only)
    session, joined = ctx.open_model(model, (lambda described: pixel_front(kind, described, tiles))
                                     if uses_device_fronts(ctx.providers) else None)
    return NeuralSwapper(session, ctx.settings.swap, kind=kind, model_path=ctx.store.file_path(model),
                         masker=build_masker(ctx), joined=joined, fade=not ctx.still)


# The swapper's options (SwapSettings field -> flag); the mesh swapper blends by its own mask
# at its own resolution, so the neural swapper's paste options mean nothing to it.
_OPTIONS = {"model": "--swap-model", "mouth_mask": "--mouth-mask", "color_match": "--no-color-match",
            "blend": "--blend", "pixel_boost": "--pixel-boost", "face_mask": "--face-mask",
            "face_mask_blur": "--face-mask-blur", "face_mask_padding": "--face-mask-padding",
            "face_mask_areas": "--face-mask-areas", "face_mask_regions": "--face-mask-regions"}
_NEURAL_ONLY = ("--pixel-boost", "--face-mask", "--face-mask-blur", "--face-mask-padding",
                "--face-mask-areas", "--face-mask-regions")


def _unused_options(settings: ProcessingSettings, swap_model: str | None, runs: bool) -> tuple[str, ...]:
    flags = given(settings.swap, _OPTIONS)
    if not runs:
        # The photos to put in are the swapper's alone (--map's REFERENCE still chooses the faces).
        flags = (["--source"] if settings.sources else []) + (["--map's SOURCE"] if settings.analysis.face_map
                                                              else []) + flags
        return (f"warning: {listed(flags)} for the face swapper, which this run does not use "
                "(add --frame-processor face_swapper)",) if flags else ()
    if swap_model == "mesh":
        ignored = [f for f in flags if f in _NEURAL_ONLY]
        return (f"warning: {listed(ignored)} for the neural swapper; the mesh swapper, which blends by "
                f"its own mask at its own size, ignores {agree(len(ignored), 'it', 'them')}",) if ignored else ()
    # --face-mask-padding / --face-mask-areas / --face-mask-regions shape the box / area / region mask only
    return tuple(f"warning: {flag} shapes the {kind} mask, which this run does not use (add --face-mask {kind})"
                 for flag, kind in (("--face-mask-padding", "box"), ("--face-mask-areas", "area"),
                                    ("--face-mask-regions", "region"))
                 if flag in flags and kind not in settings.swap.face_mask)


def _needs_landmarks(settings: ProcessingSettings, swap_model: str | None) -> bool:
    # The mesh swapper warps by the 468 landmarks; --mouth-mask and --face-mask area outline with them.
    return (swap_model == "mesh" or settings.swap.mouth_mask is not None
            or (swap_model is not None and "area" in settings.swap.face_mask))


def _needs_embedding(settings: ProcessingSettings, swap_model: str | None) -> bool:
    return swap_model not in (None, "mesh")  # inswapper and HyperSwap condition on ArcFace


# The one swapper name: inswapper, HyperSwap and the mesh swapper (--swap-model mesh) all register as it.
PROCESSOR = ProcessorSpec(name=NeuralSwapper.name, role="swapper", build=_build,
                          model=lambda ctx: ctx.swap_model or "mesh", needs_landmarks=_needs_landmarks,
                          needs_embedding=_needs_embedding, unused_options=_unused_options)
