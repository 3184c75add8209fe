"""A loopback HTTP server with Range support and fault injection, and test catalogs.

The server runs http.server in a thread on 127.0.0.1; every request is logged (path, Range
header, status) so tests can assert what the client actually asked for.
"""

from __future__ import annotations

import hashlib
import http.server
import io
import json
import os
import re
import threading
import time
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from livecam.models.catalog import ArchiveSpec, ModelSpec, TensorSpec


@dataclass
class Fault:
    cut_after: int | None = None  # close the connection after this many body bytes
    cuts: int = 1  # how many responses are cut
    ignore_range: bool = False  # always answer 200 with the whole file
    status: int | None = None  # answer this HTTP status instead (e.g. 503), `times` times
    times: int = 1
    change_to: bytes | None = None  # after the first cut, the server's file becomes this
    throttle_s: float = 0.0  # pause between 64 kB blocks
    stall_s: float = 0.0  # at the cut, send nothing for this long first (the client's read times out)
    no_length: bool = False  # no Content-Length: the body ends when the connection closes


@dataclass
class ServerState:
    files: dict[str, bytes] = field(default_factory=dict)
    faults: dict[str, Fault] = field(default_factory=dict)
    log: list[tuple[str, str | None, int]] = field(default_factory=list)
    sent: dict[str, int] = field(default_factory=dict)  # body bytes written per path
    lock: threading.Lock = field(default_factory=threading.Lock)

    def requests(self, path: str) -> list[tuple[str, str | None, int]]:
        with self.lock:
            return [entry for entry in self.log if entry[0] == path]


class _Handler(http.server.BaseHTTPRequestHandler):
    state: ServerState  # set on a subclass per server
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: Any) -> None:  # keep pytest output clean
        pass

    def do_GET(self) -> None:  # noqa: N802 - http.server's naming
        state = self.state
        path = self.path.split("?")[0]
        range_header = self.headers.get("Range")
        fault = state.faults.get(path)
        if fault is not None and fault.status is not None and fault.times > 0:
            fault.times -= 1
            self._status(path, range_header, fault.status)
            return
        body = state.files.get(path)
        if body is None:
            self._status(path, range_header, 404)
            return
        start = 0
        match = re.fullmatch(r"bytes=(\d+)-", range_header or "")
        if match and not (fault and fault.ignore_range):
            start = int(match.group(1))
            if start >= len(body):
                self._log(path, range_header, 416)
                self.send_response(416)
                self.send_header("Content-Range", f"bytes */{len(body)}")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            self._log(path, range_header, 206)
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {start}-{len(body) - 1}/{len(body)}")
        else:
            self._log(path, range_header, 200)
            self.send_response(200)
        if fault is not None and fault.no_length:
            self.close_connection = True
        else:
            self.send_header("Content-Length", str(len(body) - start))
        self.send_header("Accept-Ranges", "bytes")
        self.end_headers()
        payload = body[start:]
        cut = None
        if fault is not None and fault.cut_after is not None and fault.cuts > 0:
            fault.cuts -= 1
            cut = fault.cut_after
            if fault.change_to is not None:
                state.files[path] = fault.change_to
        sent = 0
        view = memoryview(payload)
        try:
            while sent < len(payload):
                n = 65536 if cut is None else min(65536, cut - sent)
                if n <= 0:
                    break
                self.wfile.write(view[sent:sent + n])
                sent += n
                with state.lock:
                    state.sent[path] = state.sent.get(path, 0) + n
                if fault is not None and fault.throttle_s:
                    time.sleep(fault.throttle_s)
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            return
        if cut is not None:
            if fault is not None and fault.stall_s:
                time.sleep(fault.stall_s)
            self.close_connection = True
            self.connection.shutdown(2)

    def _status(self, path: str, range_header: str | None, code: int) -> None:
        self._log(path, range_header, code)  # before answering: the client may look at once
        self.send_response(code)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def _log(self, path: str, range_header: str | None, status: int) -> None:
        with self.state.lock:
            self.state.log.append((path, range_header, status))


class LoopbackServer:
    def __init__(self) -> None:
        self.state = ServerState()
        handler = type("Handler", (_Handler,), {"state": self.state})
        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> "LoopbackServer":
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=5)

    def url(self, path: str) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host}:{port}{path}"

    def serve(self, path: str, body: bytes, fault: Fault | None = None) -> str:
        self.state.files[path] = body
        if fault is not None:
            self.state.faults[path] = fault
        return self.url(path)


def payload(size: int, seed: int = 0) -> bytes:
    """Deterministic pseudo-random bytes (not compressible, not all zeros)."""
    out = bytearray()
    counter = 0
    while len(out) < size:
        out += hashlib.sha256(f"{seed}:{counter}".encode()).digest()
        counter += 1
    return bytes(out[:size])


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def spec_for(name: str, urls: tuple[str, ...], data: bytes | None, *, pinned: bool = True,
             needs_acceptance: bool = False, archive: ArchiveSpec | None = None,
             inputs: tuple[TensorSpec, ...] = (TensorSpec("x", (1, 4)),),
             outputs: tuple[TensorSpec, ...] = (TensorSpec(None, (1, 4)),)) -> ModelSpec:
    return ModelSpec(
        name=name, file_name=f"{name}.onnx", urls=urls,
        size=None if data is None else len(data),
        sha256=sha(data) if (pinned and data is not None) else None,
        licence="test: non-commercial" if needs_acceptance else "MIT",
        licence_url="https://example.invalid/licence", needs_acceptance=needs_acceptance,
        inputs=inputs, outputs=outputs, archive=archive,
    )


def make_zip(members: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_STORED) as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return buf.getvalue()


def catalog_to_json(specs: list[ModelSpec]) -> str:
    """Serialise a test catalog for the patched-CLI subprocess (tests/models/patched_cli.py)."""
    def tensor(t: TensorSpec) -> dict[str, Any]:
        return {"name": t.name, "shape": None if t.shape is None else list(t.shape), "dtypes": list(t.dtypes)}

    out = []
    for s in specs:
        archive = None if s.archive is None else {
            "file_name": s.archive.file_name, "urls": list(s.archive.urls), "size": s.archive.size,
            "sha256": s.archive.sha256, "members": list(s.archive.members)}
        out.append({"name": s.name, "file_name": s.file_name, "urls": list(s.urls), "size": s.size,
                    "sha256": s.sha256, "licence": s.licence, "licence_url": s.licence_url,
                    "needs_acceptance": s.needs_acceptance, "inputs": [tensor(t) for t in s.inputs],
                    "outputs": [tensor(t) for t in s.outputs], "archive": archive, "bundled": s.bundled,
                    "default_download": s.default_download})
    return json.dumps(out)


def catalog_from_json(text: str) -> dict[str, ModelSpec]:
    def tensor(d: dict[str, Any]) -> TensorSpec:
        return TensorSpec(d["name"], None if d["shape"] is None else tuple(d["shape"]), tuple(d["dtypes"]))

    specs = {}
    for d in json.loads(text):
        a = d["archive"]
        archive = None if a is None else ArchiveSpec(a["file_name"], tuple(a["urls"]), a["size"], a["sha256"],
                                                     tuple(a["members"]))
        specs[d["name"]] = ModelSpec(
            name=d["name"], file_name=d["file_name"], urls=tuple(d["urls"]), size=d["size"], sha256=d["sha256"],
            licence=d["licence"], licence_url=d["licence_url"], needs_acceptance=d["needs_acceptance"],
            inputs=tuple(tensor(t) for t in d["inputs"]), outputs=tuple(tensor(t) for t in d["outputs"]),
            archive=archive, bundled=d["bundled"], default_download=d.get("default_download", False))
    return specs


def tiny_onnx(path: Path, inputs: list[tuple[str, list[int]]], outputs: list[tuple[str, list[int]]]) -> Path:
    """A valid ONNX model with the given float inputs/outputs (outputs are constant zeros)."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    nodes = [helper.make_node("Constant", [], [name],
                              value=numpy_helper.from_array(np.zeros(shape, np.float32), name=f"{name}_value"))
             for name, shape in outputs]
    graph = helper.make_graph(
        nodes, "standin",
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in outputs])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(path))
    return path


def env_without_offline(env: dict[str, str]) -> dict[str, str]:
    out = dict(env)
    out.pop("LIVECAM_OFFLINE", None)
    out["NO_PROXY"] = out["no_proxy"] = "127.0.0.1,localhost"
    for k in ("HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy"):
        out.pop(k, None)
    return out


def python_path_env(env: dict[str, str]) -> dict[str, str]:
    """Let a subprocess import `tests.models.*` from the repo root."""
    root = str(Path(__file__).resolve().parents[2])
    out = dict(env)
    out["PYTHONPATH"] = root + (os.pathsep + out["PYTHONPATH"] if out.get("PYTHONPATH") else "")
    return out
