"""PyAV across its versions: opening media files for reading (local_path: a local file's name as
FFmpeg must be given it), and its rationals."""

from __future__ import annotations

import re
from fractions import Fraction
from pathlib import Path
from typing import IO, Any, Protocol

import av
from av.container import InputContainer

# PyAV before 19 raises on tags in broken UTF-8 unless told metadata_errors="replace"; 19
# dropped that parameter (passing it is a TypeError) and no longer raises on such tags.
_NEEDS_METADATA_ERRORS = int(av.__version__.split(".")[0]) < 19


# What FFmpeg takes for a protocol name before a colon (its URL scheme characters).
_SCHEME = re.compile(r"[A-Za-z0-9+.-]+:")


def local_path(path: Path | str) -> str:
    """A local file's path as FFmpeg should open it: "clip:1.mp4" or "2024-05-01T10:30.mp4" starts
    like a URL, and FFmpeg looked for a protocol named "clip" ("Protocol not found"); the file
    protocol, named, reads any name."""
    text = str(path)
    return "file:" + text if _SCHEME.match(text) else text


def open_container(file: str | IO[bytes], **options: Any) -> InputContainer:
    """av.open(file, "r", **options), with tags in broken UTF-8 never fatal."""
    if _NEEDS_METADATA_ERRORS:
        options["metadata_errors"] = "replace"
    return av.open(file, "r", **options)


class _Rational(Protocol):
    @property
    def numerator(self) -> int: ...

    @property
    def denominator(self) -> int: ...


def as_fraction(value: _Rational) -> Fraction:
    """A Fraction from a PyAV rate or time base (a Fraction before PyAV 19, an AVRational since)."""
    return Fraction(value.numerator, value.denominator)


def frame_rate(fps: float) -> Fraction:
    """A frame rate given as a number (--fps, a source's float rate) as the rational a stream
    stores: within 0.01% of an NTSC rate N*1000/1001 (29.97, 23.976, 59.94) that rate, which is
    what those spellings mean (29.97 was 2997/100, a rate no camera or player uses), else the
    nearest fraction with a denominator up to 1001."""
    n = round(fps * 1.001)
    if n > 0:
        ntsc = Fraction(n * 1000, 1001)
        if abs(fps - float(ntsc)) <= 1e-4 * float(ntsc):
            return ntsc
    return Fraction(fps).limit_denominator(1001)


def library_versions() -> str:
    """OpenCV's and PyAV's versions, and FFmpeg's under PyAV: what reads and writes every file
    (a GIF needs OpenCV 4.11+ or FFmpeg's decoder; PyAV 12 to 19 differ in what they decode)."""
    import cv2

    ffmpeg = getattr(av, "ffmpeg_version_info", None)  # PyAV 13 and later
    return f"OpenCV {cv2.__version__}, PyAV {av.__version__}" + (f" (FFmpeg {ffmpeg})" if ffmpeg else "")
