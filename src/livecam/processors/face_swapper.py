"""The neural face swapper: inswapper_128 (fp32 or fp16 weights) on ONNX Runtime.

Per source identity, once (prepare): latent = normed ArcFace embedding @ emap, re-normalised,
where emap is the model file's last initializer. Per target face: align its 5 keypoints to the
ArcFace 128 template, warp a 128x128 crop, run the model, and paste the result back through
insightface's soft mask (rebuilt analytically in crop space, see processors/paste.py), with the
optional colour match, kept mouth and opacity, all inside the face's region of the frame only.
Faces run back to back through the one shared session (the model has a static batch of 1).

Pixel boost (SwapSettings.pixel_boost = N, a multiple of the model's 128): the crop is warped at
N x N by the template scaled to N and split into k x k tiles (k = N / 128), tile (i, j) =
crop[i::k, j::k]: each a whole 128 face shifted by (j/k, i/k) of a model pixel. Every tile is
swapped with the same latent (one batched call when the session's batch is dynamic, else one
call per tile) and the outputs are interleaved back, so the swap carries N x N detail; the
paste-back takes the N x N result with the N-scaled matrix. N = 128 is one tile: the plain path.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import cv2
import numpy as np

from livecam.errors import InputError, ModelError
from livecam.faces.align import align_matrix, arcface_template, to_blob, warp_crop
from livecam.faces.face import EMBEDDING_SIZE, Face
from livecam.faces.source import SourceIdentity
from livecam.frame import FramePacket
from livecam.processors.base import FrameProcessor, usable
from livecam.models.emap import read_last_initializer
from livecam.processors.crop_masks import FaceMasker, build_masker
from livecam.processors.paste import paste
from livecam.processors.registry import BuildContext, ProcessorSpec
from livecam.runtime.sessions import input_dtype
from livecam.settings import ProcessingSettings, SwapSettings

log = logging.getLogger("livecam")


@dataclass(frozen=True)
class AlignedFace:
    crop: np.ndarray  # SxSx3 uint8 BGR: the target face as the model sees it
    blob: np.ndarray  # (k*k)x3xSxS model input, tile (i, j) at i*k+j: RGB in [0, 1], session dtype
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


class InswapperSwapper:
    """Frame processor "face_swapper" backed by an inswapper_128 session."""

    name = "face_swapper"

    def __init__(self, session: Any, settings: SwapSettings, *, model_path: Path | str | None = None,
                 emap: np.ndarray | None = None, masker: FaceMasker | None = None) -> None:
        self._session = session
        self._settings = settings
        self._masker = masker if masker is not None else FaceMasker(settings)
        inputs, outputs = session.get_inputs(), session.get_outputs()
        shapes = [tuple(i.shape) for i in inputs]
        if (len(inputs) != 2 or len(outputs) != 1 or len(shapes[0]) != 4 or shapes[0][1] != 3
                or not isinstance(shapes[0][2], int) or shapes[0][2] % 128 or shapes[0][2] != shapes[0][3]
                or shapes[1][-1] != EMBEDDING_SIZE):
            raise ModelError(
                f"this file is not an inswapper model: expected inputs target [1,3,128,128] and "
                f"source [1,512] and one output, got inputs {[(i.name, i.shape) for i in inputs]}; "
                f"pass an inswapper_128 file or --swap-model mesh")
        self._target_name, self._source_name = inputs[0].name, inputs[1].name
        self._target_dtype = input_dtype(inputs[0].type)
        self._source_dtype = input_dtype(inputs[1].type)
        self._output_name = outputs[0].name
        self.model_size = int(shapes[0][2])
        self._batched = not isinstance(shapes[0][0], int)  # a dynamic batch: all tiles in one call
        boost = int(settings.pixel_boost)
        if boost < self.model_size or boost % self.model_size:
            raise InputError(f"--pixel-boost {boost} does not fit this {self.model_size} px swap model; "
                             f"use a multiple of {self.model_size} (128, 256, 384 or 512 for inswapper_128)")
        self.crop_size = boost  # the aligned crop and the paste-back work at N x N
        self._tiles = boost // self.model_size  # k: k x k tiles of model_size
        self._template = arcface_template(self.crop_size)
        self._color_weights = _color_mask(self.crop_size)
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
                f"file is not an inswapper model; delete it and run `livecam models download inswapper_128`")
        self._emap = emap
        self._latents: dict[int, np.ndarray] = {}

    # -- per source ---------------------------------------------------------------------------
    def latent(self, embedding: np.ndarray) -> np.ndarray:
        """The model's source input for an ArcFace embedding: (1, 512) float32."""
        e = np.asarray(embedding, dtype=np.float32).reshape(1, -1)
        e = e / np.linalg.norm(e)
        lat = e @ self._emap
        lat /= np.linalg.norm(lat)
        return lat

    def prepare(self, sources: Sequence[SourceIdentity]) -> None:
        latents = {}
        for key, source in enumerate(sources):
            if source.embedding is None:
                photo = source.paths[0] if source.paths else "the source photo"
                raise ModelError(
                    f"the inswapper needs the source face's ArcFace embedding, but {photo} "
                    f"was analysed without one; install w600k_r50 with `livecam models download "
                    f"w600k_r50` or use --swap-model mesh")
            latents[key] = self.latent(source.embedding)
        if not latents:
            raise InputError("the face swapper needs at least one source face; pass --source PHOTO")
        self._latents = latents  # one assignment: threads see the old or the new set

    # -- per face -----------------------------------------------------------------------------
    def align(self, image: np.ndarray, face: Face) -> AlignedFace:
        """The target crop, the model input built from it and the frame-to-crop matrix."""
        matrix = align_matrix(face.kps, self._template)
        crop = warp_crop(image, matrix, self.crop_size)  # INTER_LINEAR, black border
        # blobFromImage(crop, 1 / 255, swapRB=True), faster; then the k x k tiles
        blob = split_tiles(to_blob([crop], 1.0 / 255.0), self._tiles)
        if self._target_dtype != np.float32:
            blob = blob.astype(self._target_dtype)
        return AlignedFace(crop, blob, matrix)

    def predict(self, aligned: AlignedFace, latent: np.ndarray) -> np.ndarray:
        """The model's output for one aligned face, its tiles interleaved back: 1x3xNxN, RGB."""
        source = latent.astype(self._source_dtype, copy=False)
        tiles = aligned.blob
        if len(tiles) == 1 or not self._batched:
            outs = [self._session.run([self._output_name], {self._target_name: tiles[t:t + 1],
                                                             self._source_name: source})[0]
                    for t in range(len(tiles))]
            pred = outs[0] if len(outs) == 1 else np.concatenate(outs)
        else:
            sources = np.repeat(source, len(tiles), axis=0)
            pred = self._session.run([self._output_name], {self._target_name: tiles, self._source_name: sources})[0]
        return merge_tiles(np.asarray(pred), self._tiles)

    def swap_crop(self, aligned: AlignedFace, latent: np.ndarray) -> np.ndarray:
        """The model's output for one aligned face: NxNx3 uint8 BGR."""
        rgb = np.asarray(self.predict(aligned, latent)[0], dtype=np.float32).transpose(1, 2, 0)
        return np.ascontiguousarray(np.clip(255.0 * rgb, 0, 255).astype(np.uint8)[:, :, ::-1])

    @property
    def uses_mask_models(self) -> bool:
        return self._masker.uses_models

    def set_mask_models(self, on: bool) -> None:
        """The live governor's step: the occluder and the face parser off (the box and the
        landmark areas stay), or on again."""
        self._masker.models_on = bool(on)

    def swap_face(self, image: np.ndarray, face: Face, latent: np.ndarray) -> float:
        """Swap one face in place; returns the ms its paste mask took (bench's face_mask stage)."""
        aligned = self.align(image, face)
        if not _valid_matrix(aligned.matrix):
            return 0.0
        fake = self.swap_crop(aligned, latent)
        settings = self._settings
        if settings.color_match:
            from livecam.processors.color import match_lab
            fake = match_lab(fake, aligned.crop, self._color_weights)
        masked = time.perf_counter()
        mask = self._masker.mask(aligned.crop, aligned.matrix, face, image.shape)  # --face-mask, --mouth-mask
        mask_ms = (time.perf_counter() - masked) * 1000.0
        paste(image, fake, aligned.matrix, mask, opacity=float(np.clip(settings.blend, 0.0, 1.0)))
        return mask_ms

    def process(self, packet: FramePacket) -> FramePacket:
        start = time.perf_counter()
        latents = self._latents
        if not latents:
            raise RuntimeError("InswapperSwapper.process() called before prepare()")
        faces = packet.faces if self._settings.blend > 0.0 else []  # blend 0: the input, exactly
        mask_ms = 0.0
        for face in faces:
            if not usable(face):
                continue
            latent = latents.get(face.source_key)
            if latent is None:
                log.debug("face_swapper: no source %d, using the first", face.source_key)
                latent = latents[min(latents)]
            mask_ms += self.swap_face(packet.image, face, latent)
        if not self._masker.box_only:  # the occluder, the parser and the areas, shown apart by bench
            packet.timings["face_mask"] = mask_ms
        packet.timings[self.name] = (time.perf_counter() - start) * 1000.0
        return packet


# ---- registration (livecam.processors.registry) ---------------------------------------------------


def _build(ctx: BuildContext) -> FrameProcessor:
    model = ctx.swap_model or "mesh"
    if model == "mesh":
        from livecam.processors.mesh_swapper import MeshSwapper

        if ctx.settings.swap.pixel_boost != 128:
            log.warning("warning: --pixel-boost is for the inswapper; the mesh swapper ignores it")
        if ctx.settings.swap.face_mask != ("box",):
            log.warning("warning: --face-mask is for the neural swapper; the mesh swapper blends by its own mask")

        return MeshSwapper(ctx.settings.swap)
    session = ctx.store.open_session(model, ctx.providers, ctx.threads)
    return InswapperSwapper(session, ctx.settings.swap, model_path=ctx.store.file_path(model),
                            masker=build_masker(ctx))


def _needs_landmarks(settings: ProcessingSettings, swap_model: str | None) -> bool:
    # The mesh swapper warps by the 468 landmarks; --mouth-mask and --face-mask area outline with them.
    return (swap_model == "mesh" or settings.swap.mouth_mask is not None
            or (swap_model is not None and "area" in settings.swap.face_mask))


def _needs_embedding(settings: ProcessingSettings, swap_model: str | None) -> bool:
    return swap_model not in (None, "mesh")  # the inswapper models condition on ArcFace


# The one swapper name: the inswapper and the mesh swapper (--swap-model mesh) both register as it.
PROCESSOR = ProcessorSpec(name=InswapperSwapper.name, role="swapper", build=_build,
                          model=lambda ctx: ctx.swap_model or "mesh", needs_landmarks=_needs_landmarks,
                          needs_embedding=_needs_embedding)
