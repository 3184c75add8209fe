"""The invisible watermark: a 32-bit livecam word hidden in frames with RivaGAN.

RivaGAN (the embedded rivagan_encoder/decoder.onnx, see models/default/NOTICE.md) works on a
small copy of the frame: the encoder marks a copy whose shorter side is WORK_HEIGHT pixels and
whose longer side is at most MAX_WORK_WIDTH (work_size), and the difference it made is upscaled and added to the full
frame a band of rows at a time (Residual), so the model's cost does not grow with the
resolution, the rest grows linearly in bounded memory, and the change stays below the visible
(PSNR about 40 dB). The decoder reads a copy downscaled the same way, which is also why halving
a marked file's size does not lose the mark. Measured on 2 shared CPU cores, `livecam image`
of an 8000x6000 JPEG (mesh swapper, --no-c2pa): the figures are in docs/MARKS.md.

Payload: PAYLOAD_BITS = a 28-bit livecam signature (the first bits of SHA-256("livecam")) and
a 4-bit format version. A frame reads as marked when its decoded 32 bits differ from a known
version's word in at most MAX_BIT_ERRORS places. On an unmarked frame the decoder's bits are
at chance, so a false positive needs 32 coin flips to land within MAX_BIT_ERRORS of one word:
false_positive_rate() = sum(C(32, i), i <= 4) / 2**32, about 1e-5 per frame. A video reads as
marked when at least VIDEO_MIN_FRAMES sampled frames do (about n^2/2 * 1e-10 by chance).

Video cadence: `livecam video` marks runs of RUN_FRAMES consecutive frames starting
MARKS_PER_SECOND times a second (frame 0 first); live outputs mark every frame with a change
computed beside the stream (marks.live_marker). Runs, because a lone marked frame does not
survive H.264 well: the encoder predicts the next frames from it and codes the small
difference between them away, and a re-encode can turn a lone marked frame into a P-frame whose
mark goes the same way. Measured (livecam's encode, then libx264 again): on a 720p clip, lone
frames 2 a second stayed readable at CRF 18 but only partly at CRF 28, while runs of 4 kept all
12 of 12 marked frames at CRF 18 and 28; on a 320x240 clip lone frames kept 2 of 30 frames
readable at CRF 18, runs of 4 kept 17 of 30, every frame 30 of 30 (11 of 30 at CRF 28).
Marking every frame costs one encoder run per frame (on 2 CPU cores, 720p `livecam video` with
the mesh swapper went from 20.6 to 3.2 FPS); runs of 4 at 24-30 FPS cost about a third of that.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass
from typing import Any, Iterator

import cv2
import numpy as np

WORK_HEIGHT = 160  # the height RivaGAN marks and reads at
MAX_WORK_WIDTH = 4 * WORK_HEIGHT  # wider frames are squeezed to this (a 20000x100 strip took 15 s)
# Narrow strips are stretched to this width (at most to 3:5): one 1 to 64 wide did not read back
# even unchanged.
MIN_WORK_SIDE = 96
# A picture smaller than this on its shorter side (and under WORK_HEIGHT on the other) is marked
# and read enlarged: at its own size an unchanged 96x120 read 4 to 5 of 32 bits off, 64x80 6.
SMALL_SIDE = 128
BAND_PIXELS = 1 << 20  # the upscaled change is made this many pixels at a time
PAYLOAD_VERSION = 1
SIGNATURE_BITS = 28
MAX_BIT_ERRORS = 4
VIDEO_MIN_FRAMES = 2
MARKS_PER_SECOND = 2.0  # runs a second (video files)
RUN_FRAMES = 4  # consecutive marked frames in a run (video files)


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


def mark_frame(index: int, fps: float, run: int = RUN_FRAMES) -> bool:
    """Whether frame `index` of a video at `fps` carries the watermark: `run` consecutive
    frames from frame 0 and then from every step-th frame, MARKS_PER_SECOND runs a second
    (every frame when the runs touch)."""
    if fps <= 0:
        return True
    step = max(1, int(fps // MARKS_PER_SECOND))
    return index % step < run


def work_size(width: int, height: int) -> tuple[int, int]:
    """The (width, height) RivaGAN marks and reads a width x height frame at: its shorter side
    WORK_HEIGHT (the frame's own when shorter), the other as the aspect makes it but at most
    MAX_WORK_WIDTH (a panorama or a tall strip is squeezed, the same way when read), so the
    model's cost is bounded. A frame under MIN_WORK_SIDE wide is stretched towards 3:5, at most
    to that width. Portrait frames were marked at WORK_HEIGHT high, on a copy 90 to 96 wide for
    a 9:16 phone video: 3 to 7 bits off through H.264 on a 360x640 clip (1 to 2 at 160 wide).
    A small picture (under SMALL_SIDE, both sides under WORK_HEIGHT) is enlarged to WORK_HEIGHT."""
    if min(width, height) < SMALL_SIDE and max(width, height) < WORK_HEIGHT:
        scale = WORK_HEIGHT / min(width, height)
        width, height = round(width * scale), round(height * scale)
    if width >= height:
        high = min(height, WORK_HEIGHT)
        return min(max(1, round(width * high / height)), MAX_WORK_WIDTH), high
    wide = min(width, WORK_HEIGHT)
    high = min(max(1, round(height * wide / width)), MAX_WORK_WIDTH)
    if wide < MIN_WORK_SIDE:  # a narrow strip: stretched to 3:5, at most MIN_WORK_SIDE wide
        wide = min(max(wide, math.ceil(high * 0.6)), MIN_WORK_SIDE)
    return wide, high


def _small(image: np.ndarray) -> np.ndarray:
    size = work_size(image.shape[1], image.shape[0])
    if size == (image.shape[1], image.shape[0]):
        return image
    return cv2.resize(image, size, interpolation=cv2.INTER_AREA)


def _tensor(image: np.ndarray) -> np.ndarray:
    """HxWx3 uint8 -> [1, 3, 1, H, W] float32 in [-1, 1] (RivaGAN's frame layout)."""
    x = image.astype(np.float32) / 127.5 - 1.0
    return np.ascontiguousarray(x.transpose(2, 0, 1)[None, :, None])


class Residual:
    """The encoder's change to one frame, at the work size (float levels): added to that frame,
    or (live, marks.live_marker) to later frames of the same scene, which still read as marked.

    The change is upscaled to the frame and rounded a band of BAND_PIXELS at a time, so marking
    needs the marked copy and a few tens of MB whatever the size (a float32 copy of a 48 MP
    frame is 576 MB; upscaling it whole took 12 s and 1.9 GB). fit() keeps the rounded change
    for frames of one size: add_to() then costs about half a ms at 720p (saturating uint8
    arithmetic, the same pixels as rounding frame + change)."""

    def __init__(self, small: np.ndarray) -> None:
        self.small = small  # h x w x 3 float32, at the work size
        self._size: tuple[int, int] | None = None
        self._up = self._down = np.zeros((0, 0, 3), np.uint8)

    def _bands(self, width: int, height: int) -> Iterator[tuple[slice, np.ndarray, np.ndarray]]:
        """(rows, up, down): the change upscaled (bilinear) to width x height and rounded, split
        into the levels to add and to subtract, for one band of rows at a time."""
        rows = max(1, BAND_PIXELS // width)
        if rows >= height:
            yield (slice(0, height), *_rounded(cv2.resize(self.small, (width, height),
                                                          interpolation=cv2.INTER_LINEAR)))
            return
        # across first (work height x width, small), then down one band at a time, sampling
        # the rows where cv2.resize would: pixel centres, clamped at the edges
        wide = cv2.resize(self.small, (width, self.small.shape[0]), interpolation=cv2.INTER_LINEAR)
        last = wide.shape[0] - 1
        for top in range(0, height, rows):
            y = (np.arange(top, min(top + rows, height)) + 0.5) * (wide.shape[0] / height) - 0.5
            below = np.floor(y)
            weight = (y - below).astype(np.float32)[:, None, None]
            change = wide[np.clip(below.astype(np.intp), 0, last)]
            step = wide[np.clip(below.astype(np.intp) + 1, 0, last)]
            step -= change
            step *= weight
            change += step
            yield (slice(top, top + len(y)), *_rounded(change))

    def fit(self, width: int, height: int) -> None:
        """Upscale and round the change for frames of this size and keep it (one size per stream)."""
        if self._size == (width, height):
            return
        self._up = np.empty((height, width, 3), np.uint8)
        self._down = np.empty((height, width, 3), np.uint8)
        for rows, up, down in self._bands(width, height):
            self._up[rows], self._down[rows] = up, down
        self._size = (width, height)

    def add_to(self, image: np.ndarray) -> np.ndarray:
        """A marked copy of an HxWx3 (or HxWx4: alpha kept) uint8 image: with the change kept by
        fit() for this size, else upscaled band by band and not kept."""
        height, width = image.shape[:2]
        fitted = self._size == (width, height)
        bands = [(slice(0, height), self._up, self._down)] if fitted else self._bands(width, height)
        result = np.empty(image.shape, np.uint8) if image.shape[2] == 3 else image.copy()
        for rows, up, down in bands:
            colour = np.ascontiguousarray(image[rows, :, :3])
            if image.shape[2] == 3:  # straight into the copy (its rows are contiguous)
                out = result[rows]
                cv2.subtract(cv2.add(colour, up, dst=out), down, dst=out)
            else:
                result[rows, :, :3] = cv2.subtract(cv2.add(colour, up), down)
        return result


def _rounded(change: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A float change rounded to whole levels, as the uint8 levels to add and to subtract."""
    change = np.rint(change, out=change)
    up = np.clip(change, 0, 255).astype(np.uint8)
    np.negative(change, out=change)
    return up, np.clip(change, 0, 255).astype(np.uint8)


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
        return self.residual(image).add_to(image)

    def residual(self, image: np.ndarray) -> Residual:
        """What the encoder changes in this image (the costly part of embed: one encoder run)."""
        small = _tensor(_small(image[:, :, :3]))
        data = PAYLOAD_BITS.astype(np.float32)[None]
        out = self._encoder.run(None, {"frame": small, "data": data})[0]
        marked = np.clip(out[0, :, 0].transpose(1, 2, 0), -1.0, 1.0)
        return Residual((marked - small[0, :, 0].transpose(1, 2, 0)) * 127.5)

    def video_marker(self, fps: float, run: int = RUN_FRAMES) -> VideoMarker:
        """(frame index, image) -> the image, marked on the frames mark_frame() picks."""
        return VideoMarker(self, fps, run)

    def read(self, image: np.ndarray) -> Reading:
        """Decode an HxWx3 uint8 BGR frame (any size; an alpha channel is ignored)."""
        logits = self._decoder.run(None, {"frame": _tensor(_small(image[:, :, :3]))})[0][0]
        bits = (logits > 0).astype(np.uint8)
        version, word = min(KNOWN_PAYLOADS.items(), key=lambda kv: int(np.sum(bits != kv[1])))
        return Reading(bits=bits, errors=int(np.sum(bits != word)), version=version,
                       confidence=float(np.mean(np.abs(logits))))


@dataclass(frozen=True, eq=False)
class VideoMarker:
    """A video's watermark step: (frame index, image) -> the image, marked (a new array) on the
    frames mark_frame() picks. `marks` tells which, so a frame that --fps repeats on several
    marked output frames is embedded once (pipeline/file.py)."""

    watermarker: Watermarker
    fps: float
    run: int = RUN_FRAMES

    def marks(self, index: int) -> bool:
        return mark_frame(index, self.fps, self.run)

    def __call__(self, index: int, image: np.ndarray) -> np.ndarray:
        return self.watermarker.embed(image) if self.marks(index) else image


def open_watermarker(runtime: Any, providers: Any = None, workers: int = 1, threads: int | None = None) -> Watermarker:
    """The watermarker for a run: the embedded models from the model store of these
    RuntimeSettings, on the run's providers (the CPU when None) but TensorRT, sharing the cores
    between `workers` frames marked at once (or on `threads` intra-op threads). RivaGAN's frame
    sides follow the picture (work_size: its shorter side WORK_HEIGHT), which no
    TensorRT profile bounds, and ONNX Runtime's TensorRT provider refuses a shape outside one:
    CUDA (next in a TensorRT run's list) runs them."""
    from livecam.models.store import ModelStore
    from livecam.runtime.providers import resolve_providers
    from livecam.runtime.sessions import cpu_threads_per_session

    chosen = (providers or resolve_providers(["cpu"])).without("tensorrt")
    return Watermarker.open(ModelStore(runtime, progress=False), chosen, threads or cpu_threads_per_session(workers))
