"""Frame sources for the live pipeline: a camera, a video file or URL, or synthetic frames.

Every source has the same small interface (FrameSource): `open()`, `read()` -> BGR uint8 image
or None at the end of the stream, `close()`; `live` says whether the pipeline may drop frames
(cameras and real-time files) or must take every one (files with --no-realtime).
"""

from __future__ import annotations

import logging
import os
import sys
import time
from fractions import Fraction
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from livecam.errors import DeviceError, InputError
from livecam.media.containers import open_container

log = logging.getLogger("livecam")

STALL_TIMEOUT_S = 2.0  # a camera that gives no frame for this long is an error
MAX_BAD_PACKETS_IN_A_ROW = 50  # a file or stream this damaged is given up on
WARN_BAD_PACKETS = 3  # corrupt packets reported one by one; the rest are counted at the end
URL_SCHEMES = ("rtsp://", "rtmp://", "http://", "https://", "udp://", "tcp://", "srt://")


class FrameSource(Protocol):
    # Read-only for the pipeline: plain attributes of any type that fits satisfy them.
    @property
    def name(self) -> str: ...  # for messages: "camera 0", "clip.mp4"
    @property
    def live(self) -> bool: ...  # True: the pipeline drops the oldest frame rather than wait
    @property
    def fps(self) -> float | None: ...  # nominal rate, when known

    def open(self) -> None: ...
    def read(self) -> np.ndarray | None: ...
    def close(self) -> None: ...


# -- numbered synthetic frames (tests, benchmarks, soak runs) -----------------------------------

def stamp_index(image: np.ndarray, index: int) -> None:
    """Write index into the top-left 4x4 block (B, G, R = three base-256 digits), in place."""
    image[:4, :4] = (index & 0xFF, (index >> 8) & 0xFF, (index >> 16) & 0xFF)


def read_index(image: np.ndarray) -> int:
    """The index stamped by stamp_index (median of the block, robust to light filtering)."""
    block = np.median(image[:4, :4].reshape(-1, 3).astype(np.int64), axis=0)
    return int(block[0]) | (int(block[1]) << 8) | (int(block[2]) << 16)


class SyntheticSource:
    """Numbered frames (index stamped into the pixels) at a set rate, like a camera would give."""

    def __init__(self, width: int = 64, height: int = 48, fps: float = 30.0, frames: int | None = None,
                 *, live: bool = True, realtime: bool = True, image: np.ndarray | None = None) -> None:
        self.name = "synthetic camera"
        self.width, self.height, self.fps = width, height, fps
        self.frames = frames
        self.live = live
        self.realtime = realtime
        self._base = image
        self._index = 0
        self._next_due = 0.0
        self.closed = False

    def open(self) -> None:
        self._next_due = time.perf_counter()

    def read(self) -> np.ndarray | None:
        if self.frames is not None and self._index >= self.frames:
            return None
        if self.realtime:
            delay = self._next_due - time.perf_counter()
            if delay > 0:
                time.sleep(delay)
            self._next_due = max(self._next_due + 1.0 / self.fps, time.perf_counter() - 1.0 / self.fps)
        if self._base is not None:
            image = self._base.copy()
        else:
            image = np.full((self.height, self.width, 3), 96, dtype=np.uint8)
        stamp_index(image, self._index)
        self._index += 1
        return image

    def close(self) -> None:
        self.closed = True


# -- cameras ------------------------------------------------------------------------------------

def camera_backends() -> list[tuple[str, int]]:
    """OpenCV capture backends to try, best first, for this platform."""
    import cv2

    if sys.platform.startswith("linux"):
        return [("V4L2", cv2.CAP_V4L2)]
    if sys.platform == "win32":
        return [("DirectShow", cv2.CAP_DSHOW), ("Media Foundation", cv2.CAP_MSMF)]
    if sys.platform == "darwin":
        return [("AVFoundation", cv2.CAP_AVFOUNDATION)]
    return [("default", cv2.CAP_ANY)]


def camera_device_problem(index: int, dev: Path = Path("/dev")) -> str | None:
    """Why camera INDEX cannot open, known without opening it (Linux: V4L2 opens /dev/videoINDEX),
    or None; lets `run` say so before the models load instead of after."""
    if not sys.platform.startswith("linux"):
        return None
    node = dev / f"video{index}"
    if not node.exists():
        found = sorted(int(p.name[5:]) for p in dev.glob("video*") if p.name[5:].isdigit())
        here = f"cameras here: {', '.join(map(str, found))}" if found else "no camera is connected"
        return (f"camera {index}: there is no {node} ({here}); give --camera another index or a "
                f"video file")
    if not os.access(node, os.R_OK | os.W_OK):
        return (f"camera {index}: {node} is not accessible to this user; add yourself to its group "
                f"(sudo usermod -aG video $USER, then log in again)")
    return None


def _quiet_open(cv2: Any, index: int, backend: int) -> Any:
    """VideoCapture without OpenCV's own warnings on stderr (our error message says it better)."""
    logging_mod = getattr(getattr(cv2, "utils", None), "logging", None)
    previous = None
    try:
        if logging_mod is not None:
            previous = logging_mod.getLogLevel()
            logging_mod.setLogLevel(logging_mod.LOG_LEVEL_ERROR)
        return cv2.VideoCapture(index, backend)
    finally:
        if logging_mod is not None and previous is not None:
            logging_mod.setLogLevel(previous)


class CameraSource:
    """A webcam through OpenCV: MJPG at the asked size and rate, reporting what it really gives."""

    def __init__(self, index: int, resolution: tuple[int, int] = (1280, 720), fps: float = 30.0,
                 stall_timeout_s: float = STALL_TIMEOUT_S) -> None:
        self.index = index
        self.name = f"camera {index}"
        self.live = True
        self.fps: float | None = fps
        self.resolution = resolution
        self.stall_timeout_s = stall_timeout_s
        self._cap: Any = None
        self._count = 0
        self._first_at: float | None = None

    def open(self) -> None:
        import cv2

        tried = []
        for backend_name, backend in camera_backends():
            cap = _quiet_open(cv2, self.index, backend)
            if cap is not None and cap.isOpened():
                self._cap = cap
                self.name = f"camera {self.index} ({backend_name})"
                break
            tried.append(backend_name)
            if cap is not None:
                cap.release()
        if self._cap is None:
            raise DeviceError(
                f"camera {self.index} could not be opened (tried {', '.join(tried)}): check that it is "
                f"connected and not used by another application, or give --camera another index or a video file")
        cap = self._cap
        cap.set(cv2.CAP_PROP_FOURCC, cv2.VideoWriter.fourcc(*"MJPG"))
        cap.set(cv2.CAP_PROP_FRAME_WIDTH, self.resolution[0])
        cap.set(cv2.CAP_PROP_FRAME_HEIGHT, self.resolution[1])
        cap.set(cv2.CAP_PROP_FPS, float(self.fps or 30.0))
        width, height = int(cap.get(cv2.CAP_PROP_FRAME_WIDTH)), int(cap.get(cv2.CAP_PROP_FRAME_HEIGHT))
        got_fps = float(cap.get(cv2.CAP_PROP_FPS) or 0.0)
        fourcc = int(cap.get(cv2.CAP_PROP_FOURCC))
        fourcc_text = "".join(chr((fourcc >> (8 * i)) & 0xFF) for i in range(4)).strip("\x00") or "?"
        log.info("%s: asked for %dx%d at %g FPS (MJPG), got %dx%d at %g FPS (%s)", self.name,
                 self.resolution[0], self.resolution[1], self.fps or 30.0, width, height, got_fps, fourcc_text)
        if got_fps > 0:
            self.fps = got_fps

    def read(self) -> np.ndarray | None:
        if self._cap is None:
            raise DeviceError(f"{self.name} is not open")
        deadline = time.monotonic() + self.stall_timeout_s
        while True:
            ok, image = self._cap.read()
            if ok and image is not None and image.size:
                break
            if time.monotonic() >= deadline:
                raise DeviceError(f"{self.name} stopped delivering frames (none for {self.stall_timeout_s:g} s): "
                                  f"check the cable and that no other application took the camera")
            time.sleep(0.01)
        now = time.perf_counter()
        if self._first_at is None:
            self._first_at = now
        self._count += 1
        if image.ndim == 2:  # some drivers give grayscale
            image = np.repeat(image[:, :, None], 3, axis=2)
        return np.ascontiguousarray(image[:, :, :3])

    @property
    def measured_fps(self) -> float | None:
        if self._first_at is None or self._count < 2:
            return None
        return (self._count - 1) / max(time.perf_counter() - self._first_at, 1e-9)

    def close(self) -> None:
        if self._cap is not None:
            measured = self.measured_fps
            if measured is not None:
                log.info("%s: measured %.1f FPS over %d frames", self.name, measured, self._count)
            self._cap.release()
            self._cap = None


# -- video files and URLs -----------------------------------------------------------------------

class VideoFileSource:
    """A video file or stream URL decoded with PyAV, at its own rate (realtime) or flat out."""

    def __init__(self, location: str, realtime: bool = True) -> None:
        self.location = location
        self.name = location if "://" in location else Path(location).name
        self.realtime = realtime
        self.live = realtime  # a real-time file stands in for a camera: the pipeline may drop
        self.fps: float | None = None
        self._container: Any = None
        self._frames: Any = None
        self._time_base: Fraction | None = None
        self._start_wall: float | None = None
        self._start_pts: float | None = None
        self._last_t = 0.0
        self.last_pts: float | None = None  # timestamp (s) of the frame read last, for tracking
        self.bad_packets = 0
        self._bad_in_a_row = 0

    def open(self) -> None:
        import av

        try:
            self._container = open_container(self.location, timeout=5.0)
            stream = self._container.streams.video[0]
        except (IndexError, av.FFmpegError, OSError, ValueError) as exc:
            if self._container is not None:
                self._container.close()
                self._container = None
            raise InputError(f"--camera {self.location}: could not read a video stream from it ({exc}); "
                             f"give a camera index, a video file such as clip.mp4 or a stream URL") from exc
        if stream.codec_context is None:  # an unknown codec id (a damaged header): nothing can decode it
            self._container.close()
            self._container = None
            raise InputError(f"--camera {self.location}: the video stream's codec is unknown; the file is corrupt "
                             "or needs a codec this FFmpeg build lacks")
        stream.thread_type = "AUTO"
        rate = stream.average_rate or stream.guessed_rate
        self.fps = float(rate) if rate else None
        self._time_base = stream.time_base
        self._frames = self._decode(stream)
        log.info("%s: %dx%d at %s FPS, %s", self.name, stream.codec_context.width, stream.codec_context.height,
                 f"{self.fps:g}" if self.fps else "unknown", "real time" if self.realtime else "as fast as possible")

    def _decode(self, stream: Any) -> Any:
        """Decoded frames; a corrupt packet (a damaged file, a lossy network stream) is skipped
        with a warning, as `livecam video` does, instead of ending the run."""
        import av

        while True:
            try:
                for packet in self._container.demux(stream):
                    try:
                        frames = packet.decode()
                    except av.FFmpegError as exc:
                        self._bad_packet(exc)
                        continue
                    for frame in frames:
                        self._bad_in_a_row = 0
                        yield frame
                return
            except av.EOFError:
                return
            except av.FFmpegError as exc:  # a demux error: a fresh demux resumes after it
                self._bad_packet(exc)

    def _bad_packet(self, exc: BaseException) -> None:
        self.bad_packets += 1
        self._bad_in_a_row += 1
        if self._bad_in_a_row > MAX_BAD_PACKETS_IN_A_ROW:
            raise InputError(f"{self.name}: more than {MAX_BAD_PACKETS_IN_A_ROW} corrupt packets in a row; "
                             f"the video is too damaged to read further ({exc})")
        if self.bad_packets <= WARN_BAD_PACKETS:
            log.warning("warning: skipped a corrupt video packet in %s (%s)", self.name, exc)

    def read(self) -> np.ndarray | None:
        import av

        from livecam.media.video_reader import upright_image  # PyAV loads only for file sources

        if self._frames is None:
            raise DeviceError(f"{self.name} is not open")
        try:
            frame = next(self._frames)
        except StopIteration:
            return None
        except av.FFmpegError as exc:
            raise InputError(f"{self.name}: the video could not be decoded further ({exc})") from exc
        self.last_pts = float(frame.pts * self._time_base) if frame.pts is not None and self._time_base else None
        if self.realtime:
            self._pace(frame)
        return upright_image(frame)

    def _pace(self, frame: Any) -> None:
        """Sleep until this frame is due, by its timestamp (or the nominal rate without one)."""
        if frame.pts is not None and self._time_base is not None:
            t = float(frame.pts * self._time_base)
        else:
            t = self._last_t + 1.0 / (self.fps or 30.0)
        self._last_t = t
        now = time.perf_counter()
        if self._start_wall is None or self._start_pts is None:
            self._start_wall, self._start_pts = now, t
            return
        delay = (t - self._start_pts) - (now - self._start_wall)
        if delay > 0:
            time.sleep(min(delay, 1.0))

    def close(self) -> None:
        if self.bad_packets > WARN_BAD_PACKETS:
            log.warning("warning: %d corrupt video packets were skipped in %s", self.bad_packets, self.name)
        if self._container is not None:
            self._container.close()
            self._container = None
            self._frames = None


def open_source(camera: str, resolution: tuple[int, int], fps: float, realtime: bool | None) -> FrameSource:
    """The source for --camera: a digit string is a camera index, else a file path or a URL."""
    spec = camera.strip()
    if spec.isdigit():
        return CameraSource(int(spec), resolution, fps)
    if not spec.lower().startswith(URL_SCHEMES) and not Path(spec).is_file():
        raise InputError(f"--camera {camera!r}: no such camera index, file or URL; give a camera index "
                         f"such as 0, a video file such as clip.mp4, or an rtsp:// or http:// URL")
    return VideoFileSource(spec, realtime=True if realtime is None else realtime)
