"""Output sinks for the live pipeline: window, virtual camera, file recorder, none, memory.

Every sink has the same small interface (Sink): `write(image)` for each shown frame, `poll()`
for the keys pressed since the last call (only the window has any), and `close()`, which always
finalises (a recording is complete and playable after Ctrl-C or an error, never half-written).
`make_sink` turns --output into a sink and checks it before any model is loaded.
"""

from __future__ import annotations

import logging
import os
import sys
from fractions import Fraction
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from livecam.errors import InputError, OutputError, OutputExistsError

log = logging.getLogger("livecam")

VIDEO_SUFFIXES = (".mp4", ".mkv", ".mov", ".avi", ".webm")
FALLBACK_METADATA = {"comment": "AI-generated (synthetic) video made with livecam", "synthetic": "true"}


class Sink(Protocol):
    name: str

    def write(self, image_bgr: np.ndarray) -> None: ...
    def poll(self) -> list[str]: ...
    def close(self) -> None: ...


class NullSink:
    """--output none: frames go nowhere (benchmarks, headless runs)."""

    name = "none"

    def write(self, image_bgr: np.ndarray) -> None:
        pass

    def poll(self) -> list[str]:
        return []

    def close(self) -> None:
        pass


class MemorySink:
    """Keeps copies of the frames written (tests; `keep` bounds how many)."""

    name = "memory"

    def __init__(self, keep: int | None = None) -> None:
        self.frames: list[np.ndarray] = []
        self.keep = keep
        self.written = 0
        self.closed = False
        self.keys: list[str] = []  # keys a test wants poll() to report

    def write(self, image_bgr: np.ndarray) -> None:
        self.written += 1
        self.frames.append(image_bgr.copy())
        if self.keep is not None and len(self.frames) > self.keep:
            del self.frames[0]

    def poll(self) -> list[str]:
        keys, self.keys = self.keys, []
        return keys

    def close(self) -> None:
        self.closed = True


def container_metadata() -> dict[str, str]:
    try:
        from livecam.provenance import CONTAINER_METADATA

        return dict(CONTAINER_METADATA)
    except ImportError:
        return dict(FALLBACK_METADATA)


class FileRecorderSink:
    """Records the shown frames to FILE.mp4 with libx264, marked as synthetic in the metadata.

    Frames are timestamped by when they were shown (a live stream with drops keeps real time).
    The file is written beside the target under a temporary name and renamed on close; a size
    change mid-stream is scaled back to the first frame's size.
    """

    def __init__(self, path: Path, *, fps: float = 30.0, force: bool = False, codec: str = "libx264") -> None:
        if path.exists() and not force:
            raise OutputExistsError(f"--output {path}: the file exists; add --force to overwrite it or choose "
                                    f"another name")
        if not path.parent.exists():
            raise InputError(f"--output {path}: the folder {path.parent} does not exist")
        self.path = path
        self.name = str(path)
        self.fps = fps
        self.codec = codec
        self._tmp = path.with_name(f".{path.stem}.partial{path.suffix}")
        self._container: Any = None
        self._stream: Any = None
        self._size: tuple[int, int] | None = None
        self._t0: float | None = None
        self._last_pts = -1
        self.written = 0

    def _open(self, width: int, height: int) -> None:
        import av

        self._size = (width - width % 2, height - height % 2)  # yuv420p needs even sizes
        try:
            options = {"movflags": "+use_metadata_tags"} if self.path.suffix.lower() in (".mp4", ".mov") else {}
            self._container = av.open(str(self._tmp), "w", options=options)
            self._container.metadata.update(container_metadata())
            stream = self._container.add_stream(self.codec, rate=Fraction(round(self.fps * 1000), 1000))
            stream.width, stream.height = self._size
            stream.pix_fmt = "yuv420p"
            stream.time_base = Fraction(1, 1000)
            stream.codec_context.time_base = Fraction(1, 1000)  # shown-time stamps, not a fixed rate
            stream.options = {"preset": "veryfast", "tune": "zerolatency"}
            self._stream = stream
        except (av.FFmpegError, OSError, ValueError) as exc:
            self._discard()
            raise OutputError(f"--output {self.path}: could not start the recording ({exc})") from exc

    def write(self, image_bgr: np.ndarray) -> None:
        import time

        import av
        import cv2

        if self._container is None:
            self._open(image_bgr.shape[1], image_bgr.shape[0])
        assert self._size is not None
        w, h = self._size
        if image_bgr.shape[1] != w or image_bgr.shape[0] != h:
            if abs(image_bgr.shape[1] - w) > 1 or abs(image_bgr.shape[0] - h) > 1:
                image_bgr = cv2.resize(image_bgr, (w, h), interpolation=cv2.INTER_AREA)
            else:
                image_bgr = image_bgr[:h, :w]
        now = time.perf_counter()
        if self._t0 is None:
            self._t0 = now
        pts = max(int((now - self._t0) * 1000), self._last_pts + 1)
        self._last_pts = pts
        frame = av.VideoFrame.from_ndarray(np.ascontiguousarray(image_bgr), format="bgr24")
        frame.pts = pts
        frame.time_base = Fraction(1, 1000)
        try:
            for packet in self._stream.encode(frame):
                self._container.mux(packet)
        except (av.FFmpegError, OSError) as exc:
            raise OutputError(f"--output {self.path}: writing the recording failed ({exc})") from exc
        self.written += 1

    def poll(self) -> list[str]:
        return []

    def close(self) -> None:
        if self._container is None:
            if self.written == 0:
                log.warning("no frame was recorded; %s was not written", self.path)
            return
        try:
            for packet in self._stream.encode(None):
                self._container.mux(packet)
            self._container.close()
        except Exception as exc:  # noqa: BLE001 - never leave a half-written file behind
            self._discard()
            raise OutputError(f"--output {self.path}: finishing the recording failed ({exc})") from exc
        self._container = None
        os.replace(self._tmp, self.path)
        log.info("recorded %d frames to %s", self.written, self.path)

    def _discard(self) -> None:
        if self._container is not None:
            try:
                self._container.close()
            except Exception:  # noqa: BLE001
                pass
            self._container = None
        self._tmp.unlink(missing_ok=True)


def display_available() -> bool:
    if sys.platform.startswith("linux") or sys.platform.startswith("freebsd"):
        return bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))
    return True


def make_sink(output: str, *, fps: float = 30.0, force: bool = False) -> Sink:
    """The sink for --output (auto, window, virtual-camera, none or FILE.mp4)."""
    spec = output.strip()
    key = spec.lower()
    if key == "auto":
        if not display_available():
            raise InputError("--output auto: no display found (DISPLAY and WAYLAND_DISPLAY are unset); use "
                             "--output none, --output FILE.mp4 or --output virtual-camera")
        key = "window"
    if key == "none":
        return NullSink()
    if key == "window":
        from livecam.media.window import WindowSink

        return WindowSink()
    if key in ("virtual-camera", "virtualcam", "virtual"):
        from livecam.media.virtualcam import VirtualCameraSink

        return VirtualCameraSink(fps=fps)
    path = Path(spec)
    if path.suffix.lower() not in VIDEO_SUFFIXES:
        raise InputError(f"--output {output!r}: expected window, virtual-camera, none or a video file name "
                         f"ending in {', '.join(VIDEO_SUFFIXES)}")
    return FileRecorderSink(path, fps=fps, force=force)
