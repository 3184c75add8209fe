"""The face enhancer: GFPGAN v1.4 (ONNX) restoring detail in the faces the swapper touched.

Per frame: every usable face of packet.faces (no second detection) is aligned to the FFHQ 512
template from the same input frame, all crops go through the model in one call when its batch
dimension is dynamic (else back to back), and each restored crop is pasted back through a
feathered crop-space mask inside the face's region only, mixed with `blend`.
"""

from __future__ import annotations

import time
from typing import Any, Sequence

import cv2
import numpy as np

from livecam.errors import ModelError
from livecam.faces.align import FFHQ_512, align_matrix, to_blob
from livecam.faces.source import SourceIdentity
from livecam.frame import FramePacket
from livecam.processors.base import usable
from livecam.processors.paste import align_crop, feathered_box, paste
from livecam.processors.registry import BuildContext, ProcessorSpec
from livecam.runtime.sessions import input_dtype
from livecam.settings import EnhanceSettings

CROP_SIZE = 512
# The restored face fades out well inside the crop (whose corners hold hair and background).
_MASK_MARGIN = 0.04 * CROP_SIZE
_MASK_FEATHER = 0.10 * CROP_SIZE


class FaceEnhancer:
    """Frame processor "face_enhancer" backed by a GFPGAN session."""

    name = "face_enhancer"

    def __init__(self, session: Any, settings: EnhanceSettings) -> None:
        self._session = session
        self._settings = settings
        inputs = {i.name: i for i in session.get_inputs()}
        image_in = inputs.get("input")
        shape = tuple(image_in.shape) if image_in is not None else ()
        extra = set(inputs) - {"input", "weight"}
        if image_in is None or len(shape) != 4 or tuple(shape[1:]) != (3, CROP_SIZE, CROP_SIZE) or extra:
            raise ModelError(
                f"this file is not a GFPGAN model: expected input `input` [1,3,512,512], got "
                f"{[(i.name, i.shape) for i in inputs.values()]}; delete it and run "
                f"`livecam models download gfpgan_1.4`")
        self._input_dtype = input_dtype(image_in.type)
        # A symbolic or missing first dimension means the export takes any batch size.
        self.batched = not (isinstance(shape[0], int) and shape[0] > 0)
        self._feeds_extra: dict[str, np.ndarray] = {}
        weight = inputs.get("weight")
        if weight is not None:
            dims = [d if isinstance(d, int) and d > 0 else 1 for d in weight.shape]
            self._feeds_extra["weight"] = np.ones(dims, dtype=input_dtype(weight.type))
        self._output_name = session.get_outputs()[0].name
        self._mask = feathered_box(CROP_SIZE, _MASK_MARGIN, _MASK_FEATHER)

    def prepare(self, sources: Sequence[SourceIdentity]) -> None:
        """Nothing per source: the enhancer only looks at the frame."""

    def _run(self, blob: np.ndarray) -> np.ndarray:
        feeds = {"input": blob.astype(self._input_dtype, copy=False), **self._feeds_extra}
        return np.asarray(self._session.run([self._output_name], feeds)[0], dtype=np.float32)

    def _restore_planes(self, crops: list[np.ndarray]) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """Run the model on aligned 512x512 crops; returns each restored crop as its B, G, R
        uint8 planes."""
        blob = to_blob(crops, 1.0 / 127.5, -1.0)  # (x / 255 - 0.5) / 0.5, RGB
        batches = [blob] if self.batched else [blob[i:i + 1] for i in range(len(crops))]
        out = []
        for p in (p for batch in batches for p in self._run(batch)):
            rows = p.reshape(3 * CROP_SIZE, CROP_SIZE)
            # (clip(x, -1, 1) + 1) / 2 * 255, rounded: OpenCV's saturating cast to uint8 is the clamp.
            u8 = cv2.addWeighted(rows, 127.5, rows, 0.0, 127.5, dtype=cv2.CV_8U)
            out.append((u8[2 * CROP_SIZE:], u8[CROP_SIZE:2 * CROP_SIZE], u8[:CROP_SIZE]))
        return out

    def restore(self, crops: list[np.ndarray]) -> list[np.ndarray]:
        """Run the model on aligned 512x512 BGR crops; returns restored BGR uint8 crops."""
        return [cv2.merge(planes) for planes in self._restore_planes(crops)]

    def process(self, packet: FramePacket) -> FramePacket:
        start = time.perf_counter()
        blend = float(np.clip(self._settings.blend, 0.0, 1.0))
        faces = [f for f in packet.faces if usable(f)] if blend > 0.0 else []
        if faces:
            image = packet.image
            matrices = [align_matrix(f.kps, FFHQ_512) for f in faces]
            # All crops from the same input frame, so batched and single calls agree.
            crops = [align_crop(image, m, CROP_SIZE) for m in matrices]  # bilinear, replicated border
            for matrix, planes in zip(matrices, self._restore_planes(crops)):
                # BGRA with the paste mask as alpha, built in one merge (paste() takes it as is).
                restored = cv2.merge((*planes, self._mask.alpha8))
                paste(image, restored, matrix, self._mask, opacity=blend)
        packet.timings[self.name] = (time.perf_counter() - start) * 1000.0
        return packet


# ---- registration (livecam.processors.registry) ---------------------------------------------------
MODEL = "gfpgan_1.4"


def _build(ctx: BuildContext) -> FaceEnhancer:
    return FaceEnhancer(ctx.store.open_session(MODEL, ctx.providers, ctx.threads), ctx.settings.enhance)


PROCESSOR = ProcessorSpec(name=FaceEnhancer.name, role="enhancer", build=_build, model=lambda ctx: MODEL)
