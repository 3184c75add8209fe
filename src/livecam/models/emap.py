"""Read the last initializer of an ONNX graph (inswapper's `emap`) without loading the model.

The real inswapper files are 554 MB; onnx.load would parse all of it into memory next to the
ONNX Runtime session, and onnx is not a runtime dependency. The file is memory-mapped and the
protobuf wire format walked just deep enough (ModelProto.graph -> last GraphProto.initializer)
to decode one TensorProto.
"""

from __future__ import annotations

import mmap
from pathlib import Path

import numpy as np

from livecam.errors import ModelError
from livecam.models.catalog import repair
from livecam.models.onnx_wire import MODEL_GRAPH, fields, repeated_varints

# Field numbers from onnx.proto.
_GRAPH_INITIALIZER = 5
_T_DIMS, _T_DATA_TYPE, _T_FLOAT_DATA, _T_INT32_DATA = 1, 2, 4, 5
_T_NAME, _T_RAW_DATA, _T_EXTERNAL_DATA, _T_DATA_LOCATION = 8, 9, 13, 14
_DTYPES = {1: np.float32, 10: np.float16, 11: np.float64}


def _last_field(buf: memoryview, start: int, end: int, number: int) -> tuple[int, int] | None:
    found = None
    for num, wire, value in fields(buf, start, end):
        if num == number and wire == 2:
            found = value
    return found


def _decode_tensor(buf: memoryview, start: int, end: int, model_dir: Path) -> tuple[str, np.ndarray]:
    dims: list[int] = []
    dtype_code = 0
    name = ""
    raw: bytes | None = None
    floats = bytearray()
    int32s: list[int] = []
    external: dict[str, str] = {}
    for num, wire, value in fields(buf, start, end):
        if num == _T_DIMS:
            dims.extend(repeated_varints(buf, wire, value))
        elif num == _T_DATA_TYPE:
            dtype_code = value
        elif num == _T_NAME:
            name = bytes(buf[value[0]:value[0] + value[1]]).decode("utf-8", "replace")
        elif num == _T_RAW_DATA:
            raw = bytes(buf[value[0]:value[0] + value[1]])
        elif num == _T_FLOAT_DATA:
            floats += buf[value[0]:value[0] + value[1]]
        elif num == _T_INT32_DATA:
            int32s.extend(repeated_varints(buf, wire, value))
        elif num == _T_EXTERNAL_DATA:
            key = val = ""
            for k_num, _, kv in fields(buf, value[0], value[0] + value[1]):
                text = bytes(buf[kv[0]:kv[0] + kv[1]]).decode("utf-8", "replace")
                if k_num == 1:
                    key = text
                elif k_num == 2:
                    val = text
            external[key] = val
    dtype = _DTYPES.get(dtype_code)
    if dtype is None:
        raise ValueError(f"initializer {name!r} has unsupported data type {dtype_code}")
    count = int(np.prod(dims)) if dims else 1
    if external:
        with open(model_dir / external["location"], "rb") as fh:
            fh.seek(int(external.get("offset", 0)))
            raw = fh.read(int(external.get("length", count * np.dtype(dtype).itemsize)))
    if raw is not None:
        data = np.frombuffer(raw, dtype=np.dtype(dtype).newbyteorder("<"))
    elif dtype == np.float16:
        data = np.array(int32s, dtype=np.uint16).view(np.float16)
    else:
        data = np.frombuffer(bytes(floats), dtype="<f4").astype(dtype)
    if data.size != count:
        raise ValueError(f"initializer {name!r} holds {data.size} values for shape {dims}")
    return name, data.reshape(dims).copy()


def read_last_initializer(model_path: Path | str) -> tuple[str, np.ndarray]:
    """(name, array) of the last initializer of the model's main graph."""
    path = Path(model_path)
    try:
        with open(path, "rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mm:
            buf = memoryview(mm)
            try:
                graph = _last_field(buf, 0, len(buf), MODEL_GRAPH)
                if graph is None:
                    raise ValueError("no graph in the file")
                init = _last_field(buf, graph[0], graph[0] + graph[1], _GRAPH_INITIALIZER)
                if init is None:
                    raise ValueError("the graph has no initializers")
                return _decode_tensor(buf, init[0], init[0] + init[1], path.parent)
            finally:
                buf.release()
    except (OSError, ValueError, IndexError, KeyError) as exc:
        raise ModelError(
            f"cannot read the last initializer (emap) of {path}: {exc}; the file is damaged or "
            f"not an inswapper model; {repair(path.stem)}"
        ) from exc
