"""Frame sources for the live pipeline: a camera, or a video file or URL.

Every source has the same small interface (FrameSource): `open()`, `read()` -> a frame (a
camera's BGR uint8 image, or a file's video_reader.DecodedFrame, converted to BGR when the
pipeline first asks for its image) or None at the end of the stream, `close()`; `live` says
whether the pipeline may drop frames (cameras and real-time files) or must take every one
(files with --no-realtime).
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator, Protocol, TypeAlias, TypeVar
from urllib.parse import urlsplit

import numpy as np

from livecam.errors import DeviceError, InputError
from livecam.interrupt import heard
from livecam.paths import why_missing
from livecam.settings import CAMERA_FPS

if TYPE_CHECKING:  # for the type checker; imported when a file source opens
    from livecam.media.video_reader import DecodedFrame, Fitter, VideoDecoder
from livecam.media.containers import as_fraction, open_container

log = logging.getLogger("livecam")

STALL_TIMEOUT_S = 2.0  # a camera that gives no frame for this long is an error
URL_TIMEOUT_S = 5.0  # a stream URL that opens or sends nothing for this long is an error
MAX_GAP_S = 1.0  # the longest a real-time file's source waits between two frames
# A local --camera (a FIFO whose writer sends nothing yet) that gives no first frame for this long is
# said to be waited for, once: FFmpeg waits as long as the writer is there, and the run looked hung
FIRST_FRAME_WAIT_S = 3.0
# What a source's read gives: an image, or a file's decoded frame whose BGR image is made when
# first asked for (by the live pipeline's analyse thread, so the capture thread only decodes and a
# frame the pipeline drops is never converted).
Frame: TypeAlias = "np.ndarray | DecodedFrame"
URL_SCHEMES = ("rtsp://", "rtmp://", "http://", "https://", "udp://", "tcp://", "srt://")
T = TypeVar("T")


class FrameSource(Protocol):
    # Read-only for the pipeline: plain attributes of any type that fits satisfy them.
    @property
    def name(self) -> str: ...  # for messages: "camera 0", "clip.mp4"
    @property
    def live(self) -> bool: ...  # True: the pipeline drops the oldest frame rather than wait
    @property
    def fps(self) -> float | None: ...  # nominal rate, when known

    def open(self) -> None: ...
    def read(self) -> Frame | None: ...
    def close(self) -> None: ...


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


def _last_line(exc: BaseException) -> str:
    """OpenCV's error text is several lines ending in the reason; that reason."""
    lines = [line.strip() for line in str(exc).strip().splitlines() if line.strip()]
    last = lines[-1] if lines else type(exc).__name__
    return last.partition(": error: ")[2] or last  # without "OpenCV(4.x) /io/...cpp:123"


def gave_no_frame(name: str, waited_s: float, why: str = "") -> InputError:
    """A camera that opened but never gave its first frame: held by another application, or a
    node with no picture (a UVC camera's metadata node), which another --camera fixes: bad input
    (exit 2), as a camera that does not open; one that stops later is a DeviceError."""
    return InputError(f"{name} opened but gave no frame in {waited_s:g} s{why}: check that no other application "
                      f"is using it, or give --camera another index (a camera's second node gives no picture)")


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
        self._last_at = 0.0
        self._fitter: Fitter | None = None

    def open(self) -> None:
        import cv2

        from livecam.media.video_reader import Fitter

        # The first frame's size for the whole run, as a file source gives: a camera that
        # renegotiates mid-run (a USB bandwidth change, a driver reset) sent frames of another
        # size, and faces carried over from the last detection landed in the wrong place.
        self._fitter = Fitter(None, f"camera {self.index}")
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
            raise InputError(  # at start, fixed by the user: bad input (exit 2), as a missing --camera file
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
        if CAMERA_FPS[0] <= got_fps <= CAMERA_FPS[1]:  # (not NaN, inf or a driver's 1e9: the asked rate stays)
            self.fps = got_fps

    def read(self) -> np.ndarray | None:
        import cv2

        if self._cap is None:
            raise DeviceError(f"{self.name} is not open")
        deadline = time.monotonic() + self.stall_timeout_s
        failure: cv2.error | None = None
        while True:
            # Some backends raise rather than return False (a frame the driver garbled, a device
            # unplugged under MSMF or GStreamer): a failed read like any other, so a camera that
            # comes back within the stall limit goes on, and one that does not is one clear line.
            try:
                ok, image = self._cap.read()
            except cv2.error as exc:
                if failure is None:
                    log.debug("%s: read failed: %s", self.name, exc)
                ok, image, failure = False, None, exc
            if ok and image is not None and image.size:
                break
            if time.monotonic() >= deadline:
                said = f"; OpenCV: {_last_line(failure)}" if failure is not None else ""
                if self._count == 0:  # it never started: not a cable, more likely another user
                    raise gave_no_frame(self.name, self.stall_timeout_s, said)
                raise DeviceError(f"{self.name} stopped delivering frames (none for {self.stall_timeout_s:g} s"
                                  f"{said}): check the cable and that no other application took the camera")
            time.sleep(0.01)
        now = time.perf_counter()
        if self._first_at is None:
            self._first_at = now
        self._last_at = now
        self._count += 1
        if image.ndim == 3 and image.shape[2] == 1:
            image = image[:, :, 0]
        if image.dtype != np.uint8 or image.ndim not in (2, 3) or (image.ndim == 3 and image.shape[2] not in (3, 4)):
            # a depth or thermal stream (16-bit), raw YUYV: it was "internal error: ValueError"
            kind = f"{image.shape[2]}-channel " if image.ndim == 3 else ""
            raise DeviceError(f"{self.name} gives {kind}{image.dtype} frames, not 8-bit pictures (a depth or thermal "
                              f"camera's stream?); give --camera the index of an ordinary camera")
        if image.ndim == 2:  # some drivers give grayscale
            image = np.repeat(image[:, :, None], 3, axis=2)
        image = np.ascontiguousarray(image[:, :, :3])
        return self._fitter.fit(image) if self._fitter is not None else image

    @property
    def measured_fps(self) -> float | None:
        if self._first_at is None or self._count < 2:
            return None
        # first to last frame: a camera that stopped is not measured over its silence too
        return (self._count - 1) / max(self._last_at - self._first_at, 1e-9)

    def close(self) -> None:
        if self._cap is not None:
            measured = self.measured_fps
            if measured is not None:
                log.info("%s: measured %.1f FPS over %d frames", self.name, measured, self._count)
            self._cap.release()
            self._cap = None


# -- video files and URLs -----------------------------------------------------------------------

class VideoFileSource:
    """A video file or stream URL decoded with PyAV (video_reader.VideoDecoder, the loop `livecam
    video` uses: one damage rule, one summarising warning), at its own rate (realtime) or flat out."""

    def __init__(self, location: str, realtime: bool = True, timeout_s: float = URL_TIMEOUT_S) -> None:
        self.location = location
        self.timeout_s = timeout_s
        # A URL's read gives up after timeout_s with its own line, the capture thread free: the
        # pipeline's stall check (which reads this) waits longer, as for a camera. (At 2 s it came
        # first, and the read still blocked added "stages still running" and "not released".)
        self.stall_timeout_s = timeout_s if "://" in location else None
        self.name = shown_url(location) if "://" in location else Path(location).name
        self.realtime = realtime
        self.live = realtime  # a real-time file stands in for a camera: the pipeline may drop
        self.fps: float | None = None
        self._container: Any = None
        self._decoder: VideoDecoder | None = None
        self._frames: Iterator[DecodedFrame] | None = None
        self._start_wall: float | None = None
        self._start_pts: float | None = None
        self._gaps = 0  # gaps in the timestamps shortened to MAX_GAP_S
        self.last_pts: float | None = None  # timestamp (s) of the frame read last, for tracking
        self._read = 0  # frames read so far
        self.has_audio = False  # known once open: a recording keeps the pictures only
        # an MP4/MOV read through a pipe or from a URL: its index may be out of reach (a pipe, or a
        # server without range requests, cannot seek back to the frames from an index at the end)
        self._forward_only_mp4 = False
        self._said_waiting = False  # the one note of a first frame waited for (_waited)
        # an output is made of the frames (VideoDecoder.writes), set before open(): with --output none
        # nothing is, and the warnings say what the input holds, not what an output loses
        self.writes = True

    @property
    def bad_packets(self) -> int:
        return self._decoder.bad_packets if self._decoder is not None else 0

    def open(self) -> None:
        import av

        from livecam.media.video_reader import (IMAGE_FORMATS, MJPEG_STREAM, VideoDecoder, ffmpeg_reason,
                                                  open_input, refuse_picture, stream_rate, timeline_origin,
                                                  track_mirror, video_stream_of)

        url = "://" in self.location
        try:
            if url:  # a stream URL: opened once, no file checks
                try:  # in a thread: Ctrl-C waited for the timeout while FFmpeg waited for the server
                    self._container = heard(lambda: open_container(self.location, timeout=self.timeout_s),
                                            "livecam-url-open")
                except av.error.ExitError as exc:  # PyAV's timeout: FFmpeg said "Immediate exit requested"
                    raise InputError(f"--camera {self.name}: the stream sent no video within {self.timeout_s:g} s; "
                                     "check the URL and that the stream is live") from exc
                except av.error.ProtocolNotFoundError as exc:
                    scheme = self.location.partition("://")[0]
                    raise InputError(f"--camera {self.name}: this FFmpeg build cannot read {scheme}:// streams; "
                                     f"give an address the sender offers in another protocol (rtsp://, http://, "
                                     f"udp://)") from exc
                except (av.FFmpegError, OSError) as exc:  # (FFmpeg's text names the URL, password and all)
                    raise InputError(f"--camera {self.name}: could not open the stream ({ffmpeg_reason(exc)}); "
                                     "check the URL and that the stream is live") from exc
                self._forward_only_mp4 = "mp4" in self._container.format.name
                # one picture (image2: by its name, snapshot.jpg) played as one frame, exit 0; not
                # jpeg_pipe, which is also a camera's stream of JPEGs one after another
                if self._container.format.name in set(IMAGE_FORMATS) - {MJPEG_STREAM}:
                    raise InputError(self._still_picture())
            else:  # a file: the checks and messages of `livecam video`
                refuse_picture(Path(self.location))
                # read once: a pipe will do. In a thread: a FIFO whose writer sends nothing held FFmpeg's
                # probe, and the main thread with it, deaf to Ctrl-C and SIGTERM until the writer closed
                self._container = self._waited(lambda: heard(lambda: open_input(Path(self.location), once=True),
                                                             "livecam-file-open"))
                self._forward_only_mp4 = not Path(self.location).is_file() and "mp4" in self._container.format.name
            stream = video_stream_of(self._container, self.name if url else self.location)
        except BaseException:
            if self._container is not None:
                self._container.close()
                self._container = None
            raise
        self.has_audio = bool(self._container.streams.audio)
        rate = stream_rate(self._container, stream)
        self.fps = float(rate) if rate else None
        origin = timeline_origin(self._container)
        # size=None: the first frame (turned upright) sets the size later ones are fitted to.
        self._decoder = VideoDecoder(self._container, stream, self.name, size=None,
                                     rate=as_fraction(rate) if rate else None, origin=origin,
                                     mirror=track_mirror(self._container, stream), writes=self.writes)
        # before the first frame, garbage from a forward-only MP4 is its index out of reach, not damage
        self._decoder.warn_damage = not self._forward_only_mp4
        # --no-realtime (the recording keeps the file's timing): each frame held until the next says
        # how long it lasts, as `livecam video` reads it (an MP4's packet durations are in decode order:
        # with B-frames they are other frames'); in real time a live stream's frame would wait for the next
        decoder = self._decoder
        frames = iter(decoder) if self.realtime else self._held(decoder, stream)
        self._frames = self._more_than_one(frames) if self._container.format.name == MJPEG_STREAM else frames

    def _held(self, decoder: VideoDecoder, stream: Any) -> Iterator[DecodedFrame]:
        """--no-realtime: the decoded frames through video_reader.held_until_next, the last one's
        end decided once the read has ended: as `livecam video` decides it (video_reader.read_end:
        a file cut short or whose demuxer lost sync is said once, its last frame lasts one frame).
        A pipe or a URL has no stored end to trust."""
        from livecam.media.video_reader import held_until_next, read_end, video_info

        def last_end() -> float | None:
            path = Path(self.location)
            if "://" in self.location or not path.is_file():
                return None
            return read_end(video_info(self._container, stream, path), decoder).last_end

        return held_until_next(iter(decoder), last_end)

    def _still_picture(self) -> str:
        return (f"--camera {self.name} is a still image, not a video stream (a camera's snapshot address?); "
                "give the camera's stream address (rtsp://, or its MJPEG http:// address), or save the picture "
                "and use `livecam image`")

    def _more_than_one(self, frames: Iterator[DecodedFrame]) -> Iterator[DecodedFrame]:
        """A JPEG stream's frames by video_reader.more_than_one, checked as they come: a pipe or a
        URL cannot be read twice (open_input checked a file's already). A URL of one JPEG
        (http://cam/snapshot.cgi) is a camera's snapshot address, said so."""
        from livecam.media.video_reader import more_than_one, still_image

        return more_than_one(frames, lambda: InputError(self._still_picture()) if "://" in self.location
                             else still_image(Path(self.location)))

    def read(self) -> DecodedFrame | None:
        import av

        from livecam.media.video_reader import ffmpeg_reason

        if self._frames is None:
            raise DeviceError(f"{self.name} is not open")
        try:
            frames = self._frames
            # decoded only: its image is made by whoever first asks
            frame = self._waited(lambda: next(frames)) if self._read == 0 else next(frames)
        except StopIteration:
            if self._read == 0 and self._forward_only_mp4 and self.bad_packets:
                raise self._index_out_of_reach() from None
            if self._read == 0:  # (it was "0 frames", exit 0, and no recording, as for a clip that plays)
                raise InputError(self._nothing_decoded()) from None
            return None
        except InputError as exc:  # (the decoder's "too damaged")
            if self._read == 0 and self._forward_only_mp4:
                raise self._index_out_of_reach() from exc
            raise
        except av.error.ExitError as exc:
            # PyAV's read timeout (the URL's): the stream went quiet, as a camera that stops
            # delivering frames; what was recorded so far is kept as it is then.
            raise DeviceError(f"{self.name} stopped sending data (nothing for {self.timeout_s:g} s): check that "
                              "the stream is still live") from exc
        except av.FFmpegError as exc:  # (FFmpeg's text names the URL, password and all)
            raise InputError(f"{self.name}: the video could not be decoded further ({ffmpeg_reason(exc)})") from exc
        self._read += 1
        if self._read == 1:  # said once the first frame, turned upright, has set the size shown
            self._announce()
        previous, self.last_pts = self.last_pts, frame.time
        if self.realtime:
            self._pace(frame.time, previous)
        return frame

    def _waited(self, call: Callable[[], T]) -> T:
        """call() (the open's probe, the first read), with the one note that the first frame is
        waited for once it has waited FIRST_FRAME_WAIT_S (a URL times out instead: URL_TIMEOUT_S)."""
        if "://" in self.location or self._said_waiting:
            return call()
        timer = threading.Timer(FIRST_FRAME_WAIT_S, self._say_waiting)
        timer.daemon = True
        timer.start()
        try:
            return call()
        finally:
            timer.cancel()

    def _say_waiting(self) -> None:
        if not self._said_waiting:
            self._said_waiting = True
            log.warning("note: waiting for the first frame from --camera %s (nothing has come for %g s: its writer "
                        "has sent nothing yet?); Ctrl-C stops", self.name, FIRST_FRAME_WAIT_S)

    def _announce(self) -> None:
        assert self._decoder is not None and self._decoder.fitter.size is not None
        self._decoder.warn_damage = True  # (what came before the first frame is then damage after all)
        width, height = self._decoder.fitter.size
        log.info("%s: %dx%d at %s FPS, %s", self.name, width, height, f"{self.fps:g}" if self.fps else "unknown",
                 "real time" if self.realtime else "as fast as possible")

    def _nothing_decoded(self) -> str:
        from livecam.media.video_reader import NONE_DECODED

        if "://" in self.location:
            return (f"{self.name}: the stream ended before its first video frame; check the URL and that the "
                    f"stream is live")
        return f"{self.name}: {NONE_DECODED}"

    def _index_out_of_reach(self) -> InputError:
        """Why no frame of a piped or served MP4/MOV could be read: most recorders write the index
        (moov) after the frames, and a pipe, or a web server without range requests (python -m
        http.server), cannot seek back to them once it is read (a small file still fits FFmpeg's
        buffer); every packet was garbage, which is no damage to warn of (warn_damage)."""
        if "://" in self.location:
            through, fix = ("from this server", "serve it from one that supports range requests, or remux it "
                                                "once with")
        else:
            through, fix = "through a pipe", "give --camera the file itself, or remux it once with"
        return InputError(f"{self.name}: no frame could be read: an MP4 or MOV {through} needs its index (moov) "
                          f"first, and this one has it at the end; {fix} `ffmpeg -i IN.mp4 -c copy -movflags "
                          f"+faststart OUT.mp4`")

    def _pace(self, t: float, previous: float | None) -> None:
        """Sleep until the frame at `t` seconds is due; a longer gap in the timestamps (a VFR
        recording that paused, a motion-triggered camera's file) is played as MAX_GAP_S, the
        frames after it at their own rate again (each one came MAX_GAP_S later than the last
        until they were due: seconds of slow motion)."""
        now = time.perf_counter()
        if self._start_wall is None or self._start_pts is None:
            self._start_wall, self._start_pts = now, t
            return
        delay = (t - self._start_pts) - (now - self._start_wall)
        if delay > MAX_GAP_S:  # (a longer wait would be taken for a stalled stream: the pipeline's stall timeout)
            self._gaps += 1
            (log.info if self._gaps == 1 else log.debug)(  # (a file of many gaps says so once)
                "%s: a %.1f s gap in its timestamps at %.2f s is played as %g s", self.name,
                t - (previous if previous is not None else self._start_pts), t, MAX_GAP_S)
            self._start_wall, self._start_pts, delay = now + MAX_GAP_S, t, MAX_GAP_S
        if delay > 0:
            time.sleep(delay)

    def close(self) -> None:
        if self._decoder is not None:
            self._decoder.report()
        if self._container is not None:
            self._container.close()
            self._container = None
            self._frames = None


def shown_url(url: str) -> str:
    """`url` as messages and logs show it: a password in it (rtsp://admin:secret@192.168.1.20/live,
    how IP cameras are addressed) as ***."""
    scheme, sep, rest = url.partition("://")
    netloc, slash, path = rest.partition("/")
    userinfo, at, host = netloc.rpartition("@")
    if not at or ":" not in userinfo:
        return url
    return f"{scheme}{sep}{userinfo.partition(':')[0]}:***@{host}{slash}{path}"


def device_camera_index(spec: str, dev: Path = Path("/dev")) -> int | None:
    """The camera index a V4L2 device path names (/dev/video2, or a link to it such as
    /dev/v4l/by-id/usb-...-video-index0), or None; it was read as a video file ("cannot read
    /dev/video0 as a video", or "no such ... file" without the camera)."""
    if not sys.platform.startswith("linux") or "://" in spec:
        return None
    try:
        path = Path(spec).resolve()
    except (OSError, RuntimeError):  # a link loop: the file checks say so
        return None
    digits = path.name.removeprefix("video")
    if path.parent != dev.resolve() or path.name == digits or not digits.isdigit():
        return None
    return int(digits)


def open_source(camera: str, resolution: tuple[int, int], fps: float, realtime: bool | None,
                dev: Path = Path("/dev")) -> FrameSource:
    """The source for --camera: a digit string (or a V4L2 device path) is a camera index, else a
    file path or a URL."""
    spec = camera.strip()
    if spec.isdigit():
        return CameraSource(int(spec), resolution, fps)
    if (index := device_camera_index(spec, dev)) is not None:
        return CameraSource(index, resolution, fps)
    if spec.lower().startswith(URL_SCHEMES):  # a scheme is any case; FFmpeg's protocol names are lower case
        scheme, sep, rest = spec.partition("://")
        spec = scheme.lower() + sep + rest
        example = f"{scheme.lower()}://192.168.1.20:8554/live"
        try:  # FFmpeg would fail only once the models had loaded
            parts = urlsplit(spec)
            parts.port  # noqa: B018 - a port that is no number 0..65535 raises
        except ValueError as exc:  # (an unclosed [IPv6 bracket was "internal error: ValueError")
            problem = "its port is not a number up to 65535" if "Port" in str(exc) else "its host is malformed"
            raise InputError(f"--camera {shown_url(camera)!r}: {problem}; give the stream's whole address, such as "
                             f"{example}") from exc
        if not parts.netloc:
            raise InputError(f"--camera {camera!r} names no host; give the stream's whole address, such as {example}")
    if spec == "-" and not Path(spec).exists():  # was "no such camera index, file or URL"
        raise InputError("--camera '-' (standard input) is not a file; to read a video from a pipe give "
                         "--camera /dev/stdin")
    if spec.lower().startswith("file:") and not Path(spec).exists():  # was "no such ... file" for a file that is there
        raise InputError(f"--camera {camera!r}: give the file's path itself, not a file: URL")
    if spec and not spec.lower().startswith(URL_SCHEMES) and Path(spec).is_dir():  # was "no such ... file"
        raise InputError(f"--camera {camera!r} is a folder; give a video file in it, a camera index such as 0, "
                         f"or an rtsp:// or http:// URL")
    if not spec.lower().startswith(URL_SCHEMES) and (not Path(spec).exists() or Path(spec).is_dir()):
        if os.path.islink(spec):  # a link in a loop, or to nothing: said as for the other commands' inputs
            raise InputError(f"--camera {camera!r} {why_missing(Path(spec))}")
        raise InputError(f"--camera {camera!r}: no such camera index, file or URL; give a camera index "
                         f"such as 0, a video file such as clip.mp4, or an rtsp:// or http:// URL")
    return VideoFileSource(spec, realtime=True if realtime is None else realtime)
