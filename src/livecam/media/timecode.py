"""SMPTE start timecodes (HH:MM:SS:FF, drop-frame HH:MM:SS;FF), as FFmpeg reads them from an
input (an MP4/MOV `tmcd` track, a Matroska TIMECODE tag) and writes them from a video stream's
"timecode" metadata. No PyAV here: the reader finds the text, the writer sets it.

A timecode counts frames at its nominal rate, the frame rate rounded to a whole number, as
FFmpeg's av_timecode does (29.97 counts 30 frames a second); a drop-frame one skips two frame
numbers a minute, nine minutes in ten, and belongs to multiples of 30000/1001 only.
"""

from __future__ import annotations

import re
from fractions import Fraction

_TIMECODE = re.compile(r"(\d{2}):(\d{2}):(\d{2})([:;.,])(\d{2,3})")


def start_timecode(text: str | None) -> str | None:
    """`text` when it is a timecode FFmpeg's muxers take (HH:MM:SS:FF, ';' '.' or ',' before the
    frames for drop-frame), else None (an empty or damaged tag)."""
    match = _parse(text)
    return match[0] if match is not None else None


def _parse(text: str | None) -> re.Match[str] | None:
    match = _TIMECODE.fullmatch(text.strip()) if text is not None else None
    return match if match is not None and int(match[2]) < 60 and int(match[3]) < 60 else None


def _nominal_fps(rate: Fraction) -> int:
    """The frames a second a timecode at `rate` counts (FFmpeg's: the rate rounded half up)."""
    return int(rate + Fraction(1, 2))


def conform(timecode: str | None, source: Fraction, target: Fraction) -> str | None:
    """`timecode`, of a video at `source` fps, for the same start of that video at `target` fps:
    as it is where both count the same frames a second, else its frame number scaled to the new
    count (25 -> 50 fps: 01:00:00:10 -> 01:00:00:20), drop-frame kept only where `target` is a
    multiple of 30000/1001. None where `target` counts no whole frame a second (under 0.5 fps:
    FFmpeg's muxer refuses such a timecode) or `timecode` is not one (None, or not start_timecode's)."""
    match = _parse(timecode)
    if match is None:
        return None
    have, want = _nominal_fps(source), _nominal_fps(target)
    if want < 1:
        return None
    if have == want or have < 1:
        return match[0]
    hh, mm, ss, sep, ff = match.groups()
    drop = sep != ":" and want % 30 == 0 and target.denominator == 1001
    frame = min(want - 1, int(ff) * want // have)
    return f"{hh}:{mm}:{ss}{sep if drop else ':'}{frame:02d}"
