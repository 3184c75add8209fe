"""The protobuf wire format of an ONNX file, walked without onnx (not a runtime dependency) and
without loading the model: the fields of a message, and whether a file is framed as a whole model.

Only offsets are read, never the weights: a file of hundreds of MB is memory-mapped and checked in
milliseconds, so `models list` and `doctor` can tell a truncated or overwritten unpinned model (no
SHA-256 to compare) from a good one.
"""

from __future__ import annotations

import mmap
from pathlib import Path
from typing import Any, Iterator

MODEL_GRAPH = 7  # ModelProto.graph, from onnx.proto


def varint(buf: memoryview, pos: int) -> tuple[int, int]:
    """The varint at `pos` and the position after it; IndexError past the end of `buf`."""
    result = shift = 0
    while True:
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, pos
        shift += 7


def repeated_varints(buf: memoryview, wire: int, value: Any) -> list[int]:
    """A repeated varint field: one value (wire type 0) or a packed run (wire type 2)."""
    if wire == 0:
        return [value]
    pos, length = value
    stop, out = pos + length, []
    while pos < stop:
        v, pos = varint(buf, pos)
        out.append(v)
    return out


def fields(buf: memoryview, start: int, end: int) -> Iterator[tuple[int, int, Any]]:
    """Yield (field number, wire type, value) where value is an int for varints and
    (offset, length) for everything else; ValueError where the bytes are not a message."""
    pos = start
    value: Any  # a varint's int, else (offset, length)
    while pos < end:
        at = pos
        try:
            tag, pos = varint(buf, pos)
            number, wire = tag >> 3, tag & 7
            if wire == 0:
                value, pos = varint(buf, pos)
                skip = 0
            elif wire == 2:
                skip, pos = varint(buf, pos)
                value = (pos, skip)
            elif wire in (1, 5):
                skip = 8 if wire == 1 else 4
                value = (pos, skip)
            else:
                raise ValueError(f"unsupported protobuf wire type {wire} at byte {at}")
        except IndexError:
            raise ValueError(f"protobuf message cut short at byte {at}") from None
        if number == 0:  # never valid: zeros (an interrupted copy) stop the walk here
            raise ValueError(f"no protobuf field at byte {at}")
        yield number, wire, value
        pos += skip
    if pos != end:
        raise ValueError(f"protobuf message cut short: its last field needs {pos - end} bytes more")


def framing_problem(path: Path) -> str:
    """'' when `path` holds one whole ONNX model as far as its framing shows (the model's fields
    and its graph's fields end exactly where their lengths say), else what is wrong, in a few
    words: empty, cut short (a truncated download or copy), or bytes that are not a model
    (zeros, another file). The graph's fields are walked too: a file of the right size whose
    end was never written (zeros) still frames its top level correctly."""
    try:
        with open(path, "rb") as fh:
            if fh.seek(0, 2) == 0:
                return "an empty file, 0 bytes"
            with mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mm:
                buf = memoryview(mm)
                try:
                    return _model_problem(buf)
                finally:
                    buf.release()
    except OSError as exc:
        return f"unreadable: {exc.strerror or exc}"


def _model_problem(buf: memoryview) -> str:
    graph = None
    try:
        for number, wire, value in fields(buf, 0, len(buf)):
            if number == MODEL_GRAPH and wire == 2:
                graph = value
        if graph is None:
            return "not an ONNX model: it has no graph"
        for _ in fields(buf, graph[0], graph[0] + graph[1]):
            pass
    except ValueError as exc:
        return f"not a whole ONNX model, truncated or overwritten: {exc}"
    return ""
