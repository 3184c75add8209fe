"""A video's colour description (range, primaries, transfer, matrix) and the YUV <-> BGR
conversions that honour it.

Frames are decoded to full-range BGR with the input's own matrix and range (a full-range input,
yuvj420p from MJPEG or yuv420p flagged full, is not squeezed as if it were limited), and encoded
back with the output's, with swscale's accurate rounding (its fast default is off by 1-2 levels
and tints a flat grey). 8-bit 4:2:0 frames, nearly every video's, are decoded by yuv420p_to_bgr,
rounded to nearest: swscale's fast path truncates (a lossless round trip came back 1.1 levels
darker) and its accurate one costs 10x more. The output is tagged with the description it was encoded with: the
input's, or when the input says nothing, what players assume for its size (limited range, BT.709
in HD and BT.601 below). Values are FFmpeg's enums (AVColorRange, AVColorPrimaries,
AVColorTransferCharacteristic, AVColorSpace), as PyAV reports them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import threading

import av
import cv2
import numpy as np
from av.video.reformatter import VideoReformatter

LIMITED, FULL = 1, 2  # AVColorRange: MPEG (16-235), JPEG (0-255)
UNSPECIFIED = 2  # AVColorPrimaries, AVColorTransferCharacteristic and AVColorSpace alike
BT709, SMPTE170M = 1, 6  # the same numbers in all three enums
HD_HEIGHT = 720  # from this height on, players assume BT.709 for an untagged video

# AVColorSpace -> swscale's matrix (SWS_CS_*), for the matrices swscale knows.
_SWS_MATRIX = {1: 1, 4: 4, 5: 5, 6: 5, 7: 7, 9: 9, 10: 9}
# AVColorSpace -> (Kr, Kb) of its Y'CbCr matrix (BT.709, FCC, BT.601, SMPTE 240M, BT.2020).
_KR_KB = {1: (0.2126, 0.0722), 4: (0.30, 0.11), 5: (0.299, 0.114), 6: (0.299, 0.114), 7: (0.212, 0.087),
          9: (0.2627, 0.0593), 10: (0.2627, 0.0593)}
_EXACT_FORMATS = frozenset({"yuv420p", "yuvj420p"})  # what bgr_to_yuv420p writes and yuv420p_to_bgr reads
# OpenCV's cv2.transform on 8-bit pixels multiplies in fixed point with 10 fractional bits: a
# coefficient that is a multiple of 1/1024 is taken as it is, any other one rounded.
_TRANSFORM_STEP = 1024


def _interpolation(encode: bool) -> Any:
    """Bilinear; for encoding with accurate rounding too, where this PyAV can combine flags (18+):
    swscale's fast BGR -> YUV path is 1-2 levels off in luma and 1 in chroma, which tints a flat
    grey. Decoding keeps the fast path (within a level; accurate rounding there is 5-10x slower
    and darkens the last two rows of 4:2:0 by 2 levels)."""
    from av.video.reformatter import Interpolation

    flag = getattr(Interpolation, "ACCURATE_RND", None) if encode else None
    return Interpolation.BILINEAR | flag if flag is not None else Interpolation.BILINEAR


@dataclass(frozen=True)
class Colour:
    range: int
    primaries: int
    trc: int
    matrix: int

    @classmethod
    def assumed(cls, height: int) -> "Colour":
        """What players assume for an untagged video of this height."""
        std = BT709 if height >= HD_HEIGHT else SMPTE170M
        return cls(range=LIMITED, primaries=std, trc=std, matrix=std)

    @classmethod
    def described(cls, source: Any, pix_fmt: str | None, height: int, fallback: "Colour | None" = None) -> "Colour":
        """The description a codec context or frame gives, each unknown field from `fallback`
        (the stream's, for a frame) or from what players assume for its height."""
        base = fallback or cls.assumed(height)
        rgb = pix_fmt is not None and _is_rgb(pix_fmt)  # RGB input: the output's range and matrix are ours

        def field(name: str, default: int) -> int:
            value = int(getattr(source, name, 0) or 0)
            return value if value not in (0, UNSPECIFIED, 3) else default  # 0 is RGB's matrix, 3 reserved

        rng = int(getattr(source, "color_range", 0) or 0)
        if rng not in (LIMITED, FULL) or rgb:
            rng = FULL if (pix_fmt or "").startswith("yuvj") else base.range
        return cls(range=rng, primaries=field("color_primaries", base.primaries),
                   trc=field("color_trc", base.trc),
                   matrix=base.matrix if rgb else field("colorspace", base.matrix))


def _is_rgb(pix_fmt: str) -> bool:
    try:
        fmt = av.VideoFormat(pix_fmt)
    except (ValueError, av.error.FFmpegError):
        return False
    return bool(fmt.is_rgb or fmt.has_palette or len(fmt.components) < 3)


class ColourConverter:
    """YUV frames to BGR arrays and back, for one stream (keeps its swscale context). to_bgr may
    be called from several threads (the file pipeline's workers convert the frames they take)."""

    def __init__(self) -> None:
        self._sws = VideoReformatter()
        self._sws_lock = threading.Lock()  # one swscale context: one conversion at a time
        self._decoding, self._encoding = _interpolation(encode=False), _interpolation(encode=True)
        # No ACCURATE_RND in this PyAV (before 18; what Python 3.10 gets): swscale's fast path is
        # 2-5 levels off on a flat grey, so the common 4:2:0 case is converted by bgr_to_yuv420p.
        self._own_420 = self._encoding == self._decoding

    def to_bgr(self, frame: av.VideoFrame, colour: Colour) -> np.ndarray:
        """Full-range BGR, converted with `colour`'s matrix and range (RGB and grey as they are)."""
        if frame.format.name in _EXACT_FORMATS and frame.width % 2 == 0 and frame.height % 2 == 0:
            return yuv420p_to_bgr(*_planes(frame), colour)
        with self._sws_lock:
            if _is_rgb(frame.format.name):
                image: np.ndarray = frame.to_ndarray(format="bgr24")
                return image
            bgr = self._sws.reformat(frame, format="bgr24", src_colorspace=_SWS_MATRIX.get(colour.matrix, 5),
                                     src_color_range=colour.range, dst_color_range=FULL,
                                     interpolation=self._decoding)
        image = bgr.to_ndarray()
        return image

    def from_bgr(self, image: np.ndarray, pix_fmt: str, colour: Colour) -> av.VideoFrame:
        """A `pix_fmt` frame of `image` in `colour`'s matrix and range, tagged with `colour`."""
        if self._own_420 and pix_fmt in _EXACT_FORMATS and image.shape[0] % 2 == 0 and image.shape[1] % 2 == 0:
            frame = av.VideoFrame.from_ndarray(bgr_to_yuv420p(image, colour), format=pix_fmt)
            tag(frame, colour)
            return frame
        frame = av.VideoFrame.from_ndarray(image, format="bgr24")
        if not _is_rgb(pix_fmt):
            frame = self._sws.reformat(frame, format=pix_fmt, dst_colorspace=_SWS_MATRIX.get(colour.matrix, 5),
                                       src_color_range=FULL, dst_color_range=colour.range,
                                       interpolation=self._encoding)
        tag(frame, colour)
        return frame


def _scales(colour: Colour) -> tuple[float, float, float]:
    """(luma scale, luma offset, chroma scale) of `colour`'s range, in 8-bit levels."""
    return (255.0, 0.0, 255.0) if colour.range == FULL else (219.0, 16.0, 224.0)


def _planes(frame: av.VideoFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Views of an even-sized 4:2:0 frame's Y, U and V planes (their rows padded to line_size)."""
    sizes = ((frame.width, frame.height), (frame.width // 2, frame.height // 2), (frame.width // 2, frame.height // 2))
    views = []
    for plane, (width, height) in zip(frame.planes, sizes):
        rows = np.frombuffer(memoryview(plane), np.uint8)[:plane.line_size * height].reshape(height, plane.line_size)
        views.append(rows[:, :width])
    return views[0], views[1], views[2]


def _decode_matrix(colour: Colour) -> np.ndarray:
    """The 3x4 matrix from (Y, U, V, 1) in 8-bit levels to full-range (B, G, R) for cv2.transform:
    each coefficient a multiple of 1/1024 (_TRANSFORM_STEP: what cv2.transform computes exactly),
    the error of that rounding at the middle of its input's range given back in the offset, so the
    result is within 0.1 level of exact arithmetic before its rounding to nearest."""
    kr, kb = _KR_KB.get(colour.matrix, _KR_KB[5])
    kg = 1.0 - kr - kb
    luma_scale, luma_offset, chroma_scale = _scales(colour)
    y = 255.0 / luma_scale
    c = 255.0 / chroma_scale
    # B = Y' + 2(1-kb)Cb, R = Y' + 2(1-kr)Cr, G = Y' - (kb B' + kr R' chroma parts) / kg
    rows = ((y, c * 2 * (1 - kb), 0.0), (y, -c * 2 * (1 - kb) * kb / kg, -c * 2 * (1 - kr) * kr / kg),
            (y, 0.0, c * 2 * (1 - kr)))
    middle = (luma_offset + luma_scale / 2, 128.0, 128.0)  # of Y, U and V

    def step(value: float) -> float:
        return round(value * _TRANSFORM_STEP) / _TRANSFORM_STEP

    matrix = []
    for row in rows:
        exact_offset = -row[0] * luma_offset - 128.0 * (row[1] + row[2])
        taken = [step(k) for k in row]
        lost = sum((k - t) * m for k, t, m in zip(row, taken, middle))
        matrix.append([*taken, step(exact_offset + lost)])
    return np.array(matrix, np.float32)


def yuv420p_to_bgr(y: np.ndarray, u: np.ndarray, v: np.ndarray, colour: Colour) -> np.ndarray:
    """Full-range BGR of 8-bit 4:2:0 planes (`y` even-sized, `u` and `v` half each side) in
    `colour`'s matrix and range, rounded to nearest (within a level of exact arithmetic, unbiased).
    Each chroma sample covers its 2x2 pixels, as in swscale's fast path; thread-safe."""
    height, width = y.shape
    full = []
    for plane in (u, v):
        # each sample twice across (as a uint16 of two equal bytes) and twice down, in one pass
        doubled = np.empty((height // 2, 2, width // 2), np.uint16)
        np.multiply(plane[:, None, :], 257, out=doubled, dtype=np.uint16)
        full.append(doubled.view(np.uint8).reshape(height, width))
    yuv = cv2.merge([y, full[0], full[1]])
    bgr: np.ndarray = cv2.transform(yuv, _decode_matrix(colour))
    return bgr


def bgr_to_yuv420p(image: np.ndarray, colour: Colour) -> np.ndarray:
    """I420 planes (Y, then U, then V, as PyAV's from_ndarray takes them) of an even-sized BGR
    image in `colour`'s matrix and range, rounded to nearest; chroma is the mean of each 2x2."""
    kr, kb = _KR_KB.get(colour.matrix, _KR_KB[5])
    bgr = image.astype(np.float32) * np.float32(1 / 255)
    b, g, r = bgr[..., 0], bgr[..., 1], bgr[..., 2]
    y = kr * r + (1.0 - kr - kb) * g + kb * b
    h, w = y.shape
    def half(plane: np.ndarray) -> np.ndarray:
        return plane.reshape(h // 2, 2, w // 2, 2).mean(axis=(1, 3))
    u = half((b - y) / (2.0 * (1.0 - kb)))
    v = half((r - y) / (2.0 * (1.0 - kr)))
    luma_scale, luma_offset, chroma_scale = _scales(colour)
    planes = [y * luma_scale + luma_offset, u * chroma_scale + 128.0, v * chroma_scale + 128.0]
    out = np.concatenate([p.reshape(-1) for p in planes])
    return np.clip(np.rint(out), 0, 255).astype(np.uint8).reshape(h * 3 // 2, w)


def tag(target: Any, colour: Colour) -> None:
    """Set the four fields on a frame or codec context (where this PyAV has them)."""
    for name, value in (("color_range", colour.range), ("color_primaries", colour.primaries),
                        ("color_trc", colour.trc), ("colorspace", colour.matrix)):
        try:
            setattr(target, name, value)
        except (AttributeError, TypeError, ValueError):  # an older PyAV: left untagged
            pass
