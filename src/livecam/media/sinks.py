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
from livecam.provenance import CONTAINER_METADATA

log = logging.getLogger("livecam")

VIDEO_SUFFIXES = (".mp4", ".mkv", ".mov", ".avi", ".webm")


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


def live_encoder_options(codec: str) -> dict[str, str]:
    """Options that let `codec` keep up with a live stream on the output thread."""
    if codec in ("libx264", "libx265"):
        return {"preset": "veryfast", "tune": "zerolatency"}
    if codec in ("libvpx-vp9", "libvpx"):
        # Real-time speed, constant quality (zero target bitrate), no look-ahead (no added delay).
        return {"deadline": "realtime", "cpu-used": "8", "row-mt": "1", "lag-in-frames": "0", "crf": "30", "b": "0"}
    return {}


class FileRecorderSink:
    """Records the shown frames to FILE.mp4 with libx264 (VP9 for .webm), marked as synthetic in
    the metadata (the pipeline draws the visible label unless --no-label).

    Frames are timestamped by when they were shown (a live stream with drops keeps real time), or
    by the source's timestamps through `write_at` (a --no-realtime file keeps its own timing).
    The file is written beside the target under a temporary name and renamed on close; a size
    change mid-stream is scaled back to the first frame's size.
    """

    def __init__(self, path: Path, *, fps: float = 30.0, force: bool = False, codec: str | None = None) -> None:
        from livecam.media.images import check_output_folder
        from livecam.media.video_writer import check_encoder, resolve_encoder, temp_path

        if path.exists() and not force:
            raise OutputExistsError(f"--output {path}: the file exists; add --force to overwrite it or choose "
                                    f"another name")
        if path.is_dir():
            raise InputError(f"--output {path}: that is a folder; give a file name such as rec.mp4")
        if not path.parent.exists():
            raise InputError(f"--output {path}: the folder {path.parent} does not exist")
        try:
            check_output_folder(path)  # writable, checked before any model loads
        except InputError as exc:
            raise InputError(f"--output {path}: {exc.message}") from exc
        # H.264, or VP9 for .webm (which cannot hold H.264); checked now, before any model loads.
        codec = codec or resolve_encoder("auto", path)
        try:
            check_encoder(codec, path)
        except InputError as exc:
            raise InputError(f"--output {path}: {exc.message}") from exc
        self.path = path
        self.name = str(path)
        self.fps = fps
        self.codec = codec
        self._tmp = temp_path(path)
        self._container: Any = None
        self._stream: Any = None
        self._size: tuple[int, int] | None = None
        self._t0: float | None = None
        self._last_pts = -1
        self.written = 0

    def _open(self, width: int, height: int) -> None:
        import av

        from livecam.media.video_writer import add_video_stream

        self._size = (width - width % 2, height - height % 2)  # yuv420p needs even sizes
        try:
            options = {"movflags": "+use_metadata_tags"} if self.path.suffix.lower() in (".mp4", ".mov") else {}
            container = self._container = av.open(str(self._tmp), "w", options=options)
            container.metadata.update(CONTAINER_METADATA)
            stream = add_video_stream(container, self.codec, Fraction(round(self.fps * 1000), 1000))
            stream.width, stream.height = self._size
            stream.pix_fmt = "yuv420p"
            stream.time_base = Fraction(1, 1000)
            stream.codec_context.time_base = Fraction(1, 1000)  # shown-time stamps, not a fixed rate
            stream.options = dict(live_encoder_options(self.codec))
            self._stream = stream
        except (av.FFmpegError, OSError, ValueError) as exc:
            self._discard()
            raise OutputError(f"--output {self.path}: could not start the recording ({exc})") from exc

    def write(self, image_bgr: np.ndarray) -> None:
        """Record a frame stamped with the time it is shown (a live source)."""
        import time

        self._encode(image_bgr, time.perf_counter())

    def write_at(self, image_bgr: np.ndarray, pts_s: float) -> None:
        """Record a frame stamped with the source's own timestamp (a --no-realtime file, whose
        frames are shown as fast as they are made: shown-time stamps would speed it up)."""
        self._encode(image_bgr, pts_s)

    def _encode(self, image_bgr: np.ndarray, t: float) -> None:
        import av
        import cv2

        if self._container is None:
            self._open(image_bgr.shape[1], image_bgr.shape[0])
        assert self._container is not None and self._size is not None  # _open sets both or raises
        w, h = self._size
        if image_bgr.shape[1] != w or image_bgr.shape[0] != h:
            if abs(image_bgr.shape[1] - w) > 1 or abs(image_bgr.shape[0] - h) > 1:
                image_bgr = cv2.resize(image_bgr, (w, h), interpolation=cv2.INTER_AREA)
            else:
                image_bgr = image_bgr[:h, :w]
        if self._t0 is None:
            self._t0 = t
        pts = max(int(round((t - self._t0) * 1000)), self._last_pts + 1)
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
        try:
            os.replace(self._tmp, self.path)
        except OSError as exc:
            self._tmp.unlink(missing_ok=True)
            raise OutputError(f"--output {self.path}: the recording could not be put in place "
                              f"({exc.strerror or exc})") from exc
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
