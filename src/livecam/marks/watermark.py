"""The invisible watermark: a 32-bit livecam word hidden in frames with RivaGAN.

RivaGAN (the embedded rivagan_encoder/decoder.onnx, see models/default/NOTICE.md) works on a
small copy of the frame: the encoder marks a WORK_HEIGHT-pixel-high copy, and the difference it
made is upscaled and added to the full frame, so the cost does not grow with the resolution and
the change stays below the visible (PSNR about 40 dB). The decoder reads a copy downscaled the
same way, which is also why halving a marked file's size does not lose the mark.

Payload: PAYLOAD_BITS = a 28-bit livecam signature (the first bits of SHA-256("livecam")) and
a 4-bit format version. A frame reads as marked when its decoded 32 bits differ from a known
version's word in at most MAX_BIT_ERRORS places. On an unmarked frame the decoder's bits are
at chance, so a false positive needs 32 coin flips to land within MAX_BIT_ERRORS of one word:
false_positive_rate() = sum(C(32, i), i <= 4) / 2**32, about 1e-5 per frame. A video reads as
marked when at least VIDEO_MIN_FRAMES sampled frames do (about n^2/2 * 1e-10 by chance).

Video cadence: `livecam video` marks every frame. Marking only some (2 a second was tried)
does not survive H.264: the encoder predicts the frames after a marked one from it and codes the
small difference to the unmarked next frame away, so on a 320x240 clip at livecam's own CRF 18
only 2 of 30 frames still read as marked (0 of 30 at CRF 28), against 30 of 30 (11 of 30 at
CRF 28) with every frame marked. Live recordings, where a marked frame must not hold up the
output, mark LIVE_MARKS_PER_SECOND frames a second (frame 0 first), which keeps the first frame
(a keyframe) and most of the marked ones readable in livecam's own recording only.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass
from typing import Any, Callable

import cv2
import numpy as np

WORK_HEIGHT = 160  # the height RivaGAN marks and reads at
PAYLOAD_VERSION = 1
SIGNATURE_BITS = 28
MAX_BIT_ERRORS = 4
LIVE_MARKS_PER_SECOND = 2.0
VIDEO_MIN_FRAMES = 2


def _payload(version: int) -> np.ndarray:
    digest = int.from_bytes(hashlib.sha256(b"livecam").digest()[:4], "big")
    word = ((digest >> (32 - SIGNATURE_BITS)) << (32 - SIGNATURE_BITS)) | (version & 0xF)
    return np.array([(word >> (31 - i)) & 1 for i in range(32)], dtype=np.uint8)


PAYLOAD_BITS = _payload(PAYLOAD_VERSION)
KNOWN_PAYLOADS: dict[int, np.ndarray] = {PAYLOAD_VERSION: PAYLOAD_BITS}


def false_positive_rate(max_errors: int = MAX_BIT_ERRORS, versions: int = 1) -> float:
    """Chance that 32 random bits fall within max_errors of one of `versions` known words."""
    return versions * sum(math.comb(32, i) for i in range(max_errors + 1)) / 2 ** 32


@dataclass(frozen=True)
class Reading:
    """What the decoder read in one frame."""

    bits: np.ndarray  # 32 x uint8
    errors: int  # bit differences from the closest known word
    version: int  # that word's version
    confidence: float  # mean |logit|: near 0 on unmarked frames

    @property
    def marked(self) -> bool:
        return self.errors <= MAX_BIT_ERRORS


def mark_frame(index: int, fps: float, per_second: float | None = None) -> bool:
    """Whether frame `index` of a video at `fps` carries the watermark: every frame when
    per_second is None, else frame 0 (the first keyframe) and every step-th frame, at least
    per_second a second."""
    if per_second is None or fps <= 0:
        return True
    step = max(1, int(fps // per_second))
    return index % step == 0


def _small(image: np.ndarray) -> np.ndarray:
    h, w = image.shape[:2]
    if h <= WORK_HEIGHT:
        return image
    width = max(1, round(w * WORK_HEIGHT / h))
    return cv2.resize(image, (width, WORK_HEIGHT), interpolation=cv2.INTER_AREA)


def _tensor(image: np.ndarray) -> np.ndarray:
    """HxWx3 uint8 -> [1, 3, 1, H, W] float32 in [-1, 1] (RivaGAN's frame layout)."""
    x = image.astype(np.float32) / 127.5 - 1.0
    return np.ascontiguousarray(x.transpose(2, 0, 1)[None, :, None])


class Watermarker:
    """Embeds and reads the livecam word with two ONNX Runtime sessions (encoder, decoder)."""

    def __init__(self, encoder: Any, decoder: Any) -> None:
        self._encoder = encoder
        self._decoder = decoder

    @classmethod
    def open(cls, store: Any, providers: Any, intra_op_threads: int = 0) -> "Watermarker":
        """Sessions of the embedded models from a models.store.ModelStore (checked like any model)."""
        return cls(store.open_session("rivagan_encoder", providers, intra_op_threads),
                   store.open_session("rivagan_decoder", providers, intra_op_threads))

    def embed(self, image: np.ndarray) -> np.ndarray:
        """A marked copy of an HxWx3 (or HxWx4: alpha kept) uint8 image."""
        colour = image[:, :, :3]
        small = _small(colour)
        data = PAYLOAD_BITS.astype(np.float32)[None]
        out = self._encoder.run(None, {"frame": _tensor(small), "data": data})[0]
        marked = np.clip(out[0, :, 0].transpose(1, 2, 0), -1.0, 1.0)
        residual = (marked - _tensor(small)[0, :, 0].transpose(1, 2, 0)) * 127.5
        if residual.shape[:2] != colour.shape[:2]:
            residual = cv2.resize(residual, (colour.shape[1], colour.shape[0]), interpolation=cv2.INTER_LINEAR)
        result = image.copy()
        result[:, :, :3] = np.clip(colour.astype(np.float32) + residual, 0, 255).round().astype(np.uint8)
        return result

    def video_marker(self, fps: float, per_second: float | None = None) -> Callable[[int, np.ndarray], np.ndarray]:
        """(frame index, image) -> the image, marked on the frames mark_frame() picks."""
        def mark(index: int, image: np.ndarray) -> np.ndarray:
            return self.embed(image) if mark_frame(index, fps, per_second) else image
        return mark

    def read(self, image: np.ndarray) -> Reading:
        """Decode an HxWx3 uint8 BGR frame (any size; an alpha channel is ignored)."""
        logits = self._decoder.run(None, {"frame": _tensor(_small(image[:, :, :3]))})[0][0]
        bits = (logits > 0).astype(np.uint8)
        version, word = min(KNOWN_PAYLOADS.items(), key=lambda kv: int(np.sum(bits != kv[1])))
        return Reading(bits=bits, errors=int(np.sum(bits != word)), version=version,
                       confidence=float(np.mean(np.abs(logits))))


def open_watermarker(runtime: Any, providers: Any = None, workers: int = 1) -> Watermarker:
    """The watermarker for a run: the embedded models from the model store of these
    RuntimeSettings, on the run's providers (the CPU when None), sharing the cores between
    `workers` frames marked at once."""
    from livecam.models.store import ModelStore
    from livecam.runtime.providers import resolve_providers
    from livecam.runtime.sessions import cpu_threads_per_session

    return Watermarker.open(ModelStore(runtime, progress=False), providers or resolve_providers(["cpu"]),
                            cpu_threads_per_session(workers) if workers > 1 else 0)
