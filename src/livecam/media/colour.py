"""A video's colour description (range, primaries, transfer, matrix) and the YUV <-> BGR
conversions that honour it.

Frames are decoded to full-range BGR with the input's own matrix and range (a full-range input,
yuvj420p from MJPEG or yuv420p flagged full, is not squeezed as if it were limited), and encoded
back with the output's, with swscale's accurate rounding (its fast default is off by 1-2 levels
and tints a flat grey). The output is tagged with the description it was encoded with: the
input's, or when the input says nothing, what players assume for its size (limited range, BT.709
in HD and BT.601 below). Values are FFmpeg's enums (AVColorRange, AVColorPrimaries,
AVColorTransferCharacteristic, AVColorSpace), as PyAV reports them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import av
import numpy as np
from av.video.reformatter import VideoReformatter

LIMITED, FULL = 1, 2  # AVColorRange: MPEG (16-235), JPEG (0-255)
UNSPECIFIED = 2  # AVColorPrimaries, AVColorTransferCharacteristic and AVColorSpace alike
BT709, SMPTE170M = 1, 6  # the same numbers in all three enums
HD_HEIGHT = 720  # from this height on, players assume BT.709 for an untagged video

# AVColorSpace -> swscale's matrix (SWS_CS_*), for the matrices swscale knows.
_SWS_MATRIX = {1: 1, 4: 4, 5: 5, 6: 5, 7: 7, 9: 9, 10: 9}


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
    """YUV frames to BGR arrays and back, for one stream (keeps its swscale context)."""

    def __init__(self) -> None:
        self._sws = VideoReformatter()
        self._decoding, self._encoding = _interpolation(encode=False), _interpolation(encode=True)

    def to_bgr(self, frame: av.VideoFrame, colour: Colour) -> np.ndarray:
        """Full-range BGR, converted with `colour`'s matrix and range (RGB and grey as they are)."""
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
        frame = av.VideoFrame.from_ndarray(image, format="bgr24")
        if not _is_rgb(pix_fmt):
            frame = self._sws.reformat(frame, format=pix_fmt, dst_colorspace=_SWS_MATRIX.get(colour.matrix, 5),
                                       src_color_range=FULL, dst_color_range=colour.range,
                                       interpolation=self._encoding)
        tag(frame, colour)
        return frame


def tag(target: Any, colour: Colour) -> None:
    """Set the four fields on a frame or codec context (where this PyAV has them)."""
    for name, value in (("color_range", colour.range), ("color_primaries", colour.primaries),
                        ("color_trc", colour.trc), ("colorspace", colour.matrix)):
        try:
            setattr(target, name, value)
        except (AttributeError, TypeError, ValueError):  # an older PyAV: left untagged
            pass
