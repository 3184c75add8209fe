"""MP4/MOV boxes read from the file: why a file has no usable index."""

from __future__ import annotations

import struct
from pathlib import Path

from livecam.media.isobmff import missing_index


def box(kind: bytes, payload: bytes = b"", declared: int | None = None) -> bytes:
    return struct.pack(">I", declared if declared is not None else 8 + len(payload)) + kind + payload


def test_which_files_have_no_usable_index(tmp_path: Path) -> None:
    ftyp = box(b"ftyp", b"isom\0\0\2\0isomiso2")
    cases = {
        "recording.mp4": (ftyp + box(b"mdat", bytes(64), declared=5000), "is missing"),  # cut before its moov
        "whole.mp4": (ftyp + box(b"mdat", bytes(64)) + box(b"moov", bytes(32)), None),
        "faststart.mp4": (ftyp + box(b"moov", bytes(32), declared=900), "is cut off"),
        "fragments.mp4": (ftyp + box(b"moov", bytes(32)) + box(b"moof", bytes(16)) + box(b"mdat", bytes(8)), None),
        # a still image (HEIC) has a top-level meta box and no moov: not a recording without its index
        "photo.heic": (box(b"ftyp", b"heic\0\0\0\0mif1heic") + box(b"meta", bytes(32)) + box(b"mdat", bytes(64)), None),
        "notes.txt": (b"shopping list\n" * 8, None),
    }
    for name, (data, problem) in cases.items():
        path = tmp_path / name
        path.write_bytes(data)
        found = missing_index(path)
        assert (found is None) if problem is None else (found is not None and problem in found), (name, found)
