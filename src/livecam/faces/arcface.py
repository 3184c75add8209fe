"""ArcFace identity embeddings (insightface buffalo_l `w600k_r50.onnx`) on ONNX Runtime.

Each face is aligned by a similarity transform of its 5 keypoints onto the 112x112 ArcFace
template, converted to RGB and scaled to (x - 127.5) / 127.5; all faces of a frame go through
the model in one batched call (in slices of runtime.providers.MAX_BATCH, the TensorRT profile's
batch range), and the 512-value outputs are L2-normalised.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from livecam.errors import ModelError
from livecam.faces.align import ARCFACE_112, align_matrix, to_bgr, warp_crop
from livecam.faces.face import EMBEDDING_SIZE, Face
from livecam.models.catalog import download_command
from livecam.runtime.providers import MAX_BATCH

CROP_SIZE = 112
INPUT_MEAN = 127.5
INPUT_STD = 127.5


def normalise(vectors: np.ndarray) -> np.ndarray:
    """Row-wise L2 normalisation; all-zero rows stay zero instead of becoming NaN."""
    v = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(v, axis=-1, keepdims=True)
    return np.divide(v, norms, out=np.zeros_like(v), where=norms > 0)


class ArcFaceEmbedder:
    """Turns faces (5 keypoints each) into L2-normalised 512-value identity embeddings."""

    def __init__(self, session: Any) -> None:
        self._session = session
        inputs, outputs = session.get_inputs(), session.get_outputs()
        shape = list(inputs[0].shape) if len(inputs) == 1 else []
        if len(shape) != 4 or shape[1:] != [3, CROP_SIZE, CROP_SIZE] or len(outputs) != 1:
            raise ModelError(
                f"the ArcFace model should take one [N,3,112,112] input and give one [N,512] output, "
                f"it takes {[i.shape for i in inputs]} and gives {len(outputs)} outputs; use insightface's "
                f"w600k_r50.onnx (`{download_command('w600k_r50')}`)"
            )
        self._input_name = inputs[0].name
        self._output_name = outputs[0].name
        # Some exports fix the batch at 1; those get one call per face.
        self._fixed_batch = shape[0] if isinstance(shape[0], int) and shape[0] > 0 else None

    @staticmethod
    def align(image: np.ndarray, kps: np.ndarray) -> np.ndarray:
        """The 112x112 BGR crop ArcFace expects for these keypoints."""
        return warp_crop(to_bgr(image), align_matrix(kps, ARCFACE_112), CROP_SIZE)

    def embed(self, image: np.ndarray, faces: Sequence[Face]) -> list[Face]:
        """Copies of the faces with `embedding` set (one batched model call)."""
        if not faces:
            return []
        bgr = to_bgr(image)
        crops = np.stack([self.align(bgr, f.kps) for f in faces])
        embeddings = self.embed_crops(crops)
        return [f.with_(embedding=e) for f, e in zip(faces, embeddings)]

    def embed_crops(self, crops: np.ndarray | Sequence[np.ndarray]) -> np.ndarray:
        """(N, 512) normalised embeddings of already aligned 112x112 BGR uint8 crops."""
        batch = np.asarray(crops)
        if batch.ndim == 3:
            batch = batch[None]
        if batch.shape[1:] != (CROP_SIZE, CROP_SIZE, 3):
            raise ValueError(f"ArcFace crops must be Nx112x112x3 BGR, got {batch.shape}")
        if batch.shape[0] == 0:
            return np.empty((0, EMBEDDING_SIZE), dtype=np.float32)
        rgb = batch[..., ::-1].transpose(0, 3, 1, 2).astype(np.float32)
        blob = (rgb - np.float32(INPUT_MEAN)) / np.float32(INPUT_STD)
        step = 1 if self._fixed_batch == 1 else MAX_BATCH
        raw = np.concatenate([self._run(blob[i:i + step]) for i in range(0, blob.shape[0], step)])
        return normalise(raw.reshape(blob.shape[0], -1))

    def _run(self, blob: np.ndarray) -> np.ndarray:
        out = self._session.run([self._output_name], {self._input_name: np.ascontiguousarray(blob)})[0]
        if out.shape[-1] != EMBEDDING_SIZE:
            raise ModelError(f"the ArcFace model gave {out.shape[-1]} values per face, expected 512; "
                             "use insightface's w600k_r50.onnx")
        return out
