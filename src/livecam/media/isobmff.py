"""The box structure of MP4/MOV files (ISO-BMFF), read from the file itself, no PyAV: where a
box lies (a track header for track_mirror), and why a file that FFmpeg cannot open has no index
(missing_index): the one thing that tells a cut-short recording from a file that is no video."""

from __future__ import annotations

import os
from pathlib import Path
from typing import BinaryIO, Iterator, NamedTuple

# Top-level boxes a recording opens with: a file starting with one of these is an MP4/MOV.
_OPENING = (b"ftyp", b"wide", b"free", b"skip", b"mdat", b"moov", b"pnot", b"styp")


class Box(NamedTuple):
    kind: bytes
    start: int  # of its payload
    end: int  # where it ends, at most where the region read ends
    whole: bool  # whether the file holds all of it (its declared end is not past the region)


def boxes(f: BinaryIO, start: int, end: int) -> Iterator[Box]:
    """The boxes between `start` and `end` of `f`, in order."""
    pos = start
    while pos + 8 <= end:
        f.seek(pos)
        head = f.read(16)
        if len(head) < 8:
            return
        size, kind, skip = int.from_bytes(head[:4], "big"), head[4:8], 8
        if size == 1:
            size, skip = int.from_bytes(head[8:16], "big"), 16
        elif size == 0:  # to the end
            size = end - pos
        if size < skip:
            return
        yield Box(kind, pos + skip, min(pos + size, end), pos + size <= end)
        pos += size


def missing_index(path: Path) -> str | None:
    """Why `path`, an MP4/MOV by its first box, has no usable index (its moov box): missing (a
    recorder writes it last, so a recording cut by a crash or a full disk, or a copy cut short,
    has none) or cut off itself; None when it is not an MP4/MOV or its index is whole."""
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            top = list(boxes(f, 0, size))
    except OSError:
        return None
    if not top or top[0].kind not in _OPENING:
        return None
    moov = next((box for box in top if box.kind == b"moov"), None)
    kinds = {box.kind for box in top}
    # fragments carry their own index; a still image (HEIC, AVIF) has its top-level meta box instead
    if moov is None and not kinds & {b"moof", b"meta"}:
        return "its index (the moov box a recorder writes last) is missing"
    if moov is not None and not moov.whole:
        return "its index (the moov box) is cut off"
    return None
