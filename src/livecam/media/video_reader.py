"""Video input with PyAV: open and check a file, then decode its frames in order as BGR arrays.

Frames come out upright (the display rotation phones record is applied) with their own
presentation time, so variable frame rate survives. A corrupt packet is skipped with a warning;
a file that cannot be opened, has no video stream, or ends well before its header says is an
InputError.
"""

from __future__ import annotations

import errno
import logging
import os
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Iterator

import av
import numpy as np

from livecam.errors import InputError
from livecam.media.containers import as_fraction, open_container

log = logging.getLogger("livecam")

# Demuxers that read still images: those files belong to `livecam image` (an animated GIF is a clip).
_IMAGE_FORMATS = ("image2", "png_pipe", "jpeg_pipe", "webp_pipe", "bmp_pipe", "tiff_pipe")
_MAX_BAD_PACKETS = 200  # past this many undecodable packets the file is not worth reading on


@dataclass(frozen=True)
class VideoInfo:
    path: Path
    width: int  # as displayed (after rotation)
    height: int
    rate: Fraction  # average frame rate
    time_base: Fraction  # of the video stream's timestamps
    start_time: float  # seconds; first video timestamp as the container states it
    frames: int | None  # frame count from the header, None when unknown
    duration: float | None  # seconds, of the video stream (or the container)
    rotation: int  # display rotation in degrees, counterclockwise (0, 90, 180, -90)
    codec: str
    audio_codec: str | None
    other_streams: tuple[str, ...]  # e.g. ("subtitle", "data"): what the output drops

    @property
    def expected_frames(self) -> int | None:
        """The header's frame count, or duration x rate; None when neither is known."""
        if self.frames:
            return self.frames
        if self.duration and self.rate:
            return max(1, int(round(self.duration * float(self.rate))))
        return None


@dataclass(frozen=True, slots=True)
class DecodedFrame:
    image: np.ndarray  # HxWx3 BGR uint8, upright
    time: float  # presentation time in seconds


def _describe(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0]


def open_input(path: Path) -> av.container.InputContainer:
    """Open `path` for reading, or raise an InputError that says why it is not a usable video."""
    path = Path(path)
    if not path.exists():
        raise InputError(f"input video not found: {path}; check the path")
    if path.is_dir():
        raise InputError(f"input {path} is a folder; expected a video file such as .mp4, .mkv, .mov or .webm")
    if not os.access(path, os.R_OK):
        raise InputError(f"cannot read input video {path}: permission denied")
    if path.stat().st_size == 0:
        raise InputError(f"input video {path} is empty (0 bytes); expected a video file")
    try:
        container = open_container(str(path))
    except av.error.FFmpegError as exc:
        raise InputError(
            f"cannot read {path} as a video ({_describe(exc)}): the file is not a video, or is truncated "
            "or corrupt; expected a video file such as .mp4, .mkv, .mov or .webm"
        ) from exc
    if container.format.name in _IMAGE_FORMATS or container.format.name.endswith("_pipe"):
        container.close()
        raise InputError(f"{path} is a still image, not a video; use `livecam image` for images")
    return container


class VideoReader:
    """Owns one input container; `frames()` may be consumed by a thread other than the opener's."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._container = open_input(self.path)
        try:
            self.info = self._inspect()
        except BaseException:
            self._container.close()
            raise
        self.bad_packets = 0

    def _inspect(self) -> VideoInfo:
        c = self._container
        if not c.streams.video:
            kinds = ", ".join(sorted({s.type for s in c.streams})) or "nothing"
            raise InputError(f"{self.path} has no video stream (it holds: {kinds}); give a video file")
        vs = c.streams.video[0]
        cc = vs.codec_context
        if cc is None:  # PyAV gives no codec context when the codec id is unknown (damaged header)
            raise InputError(f"{self.path}: the video stream's codec is unknown; the file is corrupt or needs "
                             "a codec this FFmpeg build lacks")
        if not cc.width or not cc.height:
            raise InputError(f"{self.path}: the video stream has no frame size; the file is corrupt")
        rate = vs.average_rate or vs.guessed_rate or vs.base_rate or Fraction(30)
        tb = vs.time_base or Fraction(1, 90000)
        duration = float(vs.duration * tb) if vs.duration else (c.duration / av.time_base if c.duration else None)
        start = float(vs.start_time * tb) if vs.start_time is not None else 0.0
        rotation = _stream_rotation(vs)
        w, h = (cc.height, cc.width) if rotation in (90, -90, 270) else (cc.width, cc.height)
        audio_cc = c.streams.audio[0].codec_context if c.streams.audio else None
        audio = audio_cc.name if audio_cc is not None else None  # an unknown audio codec: no audio
        others: list[str] = [s.type for s in c.streams if s.type not in ("video", "audio")]
        others += ["video"] * (len(c.streams.video) - 1) + ["audio"] * max(0, len(c.streams.audio) - 1)
        return VideoInfo(path=self.path, width=w, height=h, rate=as_fraction(rate), time_base=as_fraction(tb),
                         start_time=start, frames=vs.frames or None, duration=duration, rotation=rotation,
                         codec=cc.name, audio_codec=audio, other_streams=tuple(others))

    def frames(self) -> Iterator[DecodedFrame]:
        """Decoded frames in presentation order. Corrupt packets are skipped with a warning."""
        c = self._container
        vs = c.streams.video[0]
        vs.thread_type = "AUTO"  # frame + slice threads in the decoder
        step = 1.0 / float(self.info.rate) if self.info.rate else 1 / 30
        last_time: float | None = None
        count = 0
        finished = False
        while not finished:
            demuxer = c.demux(vs)
            try:
                for packet in demuxer:
                    try:
                        decoded = packet.decode()
                    except av.error.FFmpegError as exc:
                        _raise_if_out_of_memory(exc)
                        self._bad_packet(packet_time(packet), exc)
                        continue
                    for frame in decoded:
                        t = float(frame.pts * frame.time_base) if frame.pts is not None and frame.time_base else None
                        if t is None:
                            t = (last_time + step) if last_time is not None else self.info.start_time
                        try:
                            image = upright_image(frame)
                        except av.error.FFmpegError as exc:  # conversion: no packet is at fault
                            _raise_if_out_of_memory(exc)
                            raise
                        last_time = t
                        count += 1
                        yield DecodedFrame(image=image, time=t)
                finished = True
            except av.error.EOFError:
                finished = True
            except av.error.FFmpegError as exc:
                # A demux error: resume reading after it (a fresh generator continues from there).
                _raise_if_out_of_memory(exc)
                self._bad_packet(last_time, exc)
        if count == 0:
            raise InputError(f"{self.path}: no video frame could be decoded; the file is truncated or corrupt")
        expected = self.info.frames
        # Did decoding get to the end the header announces? Damage in the middle loses frames
        # there (a decoder drops those that depend on a broken one) but still reaches the end.
        end = self.info.start_time + (self.info.duration or 0.0)
        reached_end = not self.info.duration or (
            last_time is not None and last_time + step >= end - max(0.5, 0.05 * self.info.duration))
        if expected and count < expected - max(2, expected // 50):
            if not (self.bad_packets and reached_end):
                raise InputError(
                    f"{self.path} ended after {count} of the {expected} frames its header announces: "
                    "the file looks truncated; re-copy or re-export it"
                )
            log.warning("warning: %d of the %d frames of %s could not be decoded (damaged data); the output "
                        "skips them", expected - count, expected, self.path.name)
        elif not expected and not reached_end:
            # No frame count (Matroska, WebM): a demuxer that loses sync in damaged data just
            # ends, silently; say so, so that a shorter output is never a surprise.
            log.warning("warning: %s ended at %.2f s of the %.2f s its header announces (damaged or cut "
                        "short); the output stops there", self.path.name, (last_time or 0.0) + step, end)

    def _bad_packet(self, at: float | None, exc: BaseException) -> None:
        self.bad_packets += 1
        where = f" near {at:.2f}s" if at is not None else ""
        log.warning("warning: skipped a corrupt video packet%s in %s (%s)", where, self.path.name, _describe(exc))
        if self.bad_packets > _MAX_BAD_PACKETS:
            raise InputError(f"{self.path}: more than {_MAX_BAD_PACKETS} corrupt packets; the file is too damaged to read")

    def close(self) -> None:
        self._container.close()

    def __enter__(self) -> "VideoReader":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _raise_if_out_of_memory(exc: av.error.FFmpegError) -> None:
    """An allocation or thread-creation failure is no damaged packet: say so instead of skipping."""
    if getattr(exc, "errno", None) in (errno.ENOMEM, errno.EAGAIN):
        raise MemoryError(f"decoding failed for lack of memory ({_describe(exc)})") from exc


def packet_time(packet: av.Packet) -> float | None:
    if packet.pts is None or packet.time_base is None:
        return None
    return float(packet.pts * packet.time_base)


def _stream_rotation(stream: av.video.stream.VideoStream) -> int:
    """Display rotation in counterclockwise degrees (a multiple of 90). PyAV exposes the display
    matrix on decoded frames, so the size of the output is found by peeking at the first one;
    an old-style `rotate` tag (clockwise) wins when present."""
    tag = stream.metadata.get("rotate")
    if tag:
        try:
            return _snap(-float(tag))  # the legacy tag is clockwise
        except ValueError:
            return 0
    return _peek_rotation(stream)


def _peek_rotation(stream: av.video.stream.VideoStream) -> int:
    """Decode the first frame from a second opening of the file to read its display rotation."""
    container = stream.container
    try:
        with open_container(container.name) as c:
            for frame in c.decode(video=0):
                return _snap(float(getattr(frame, "rotation", 0) or 0))
    except av.error.FFmpegError:
        return 0
    return 0


def _snap(degrees: float) -> int:
    """Nearest multiple of 90 in (-180, 180]; odd angles are not supported and snap."""
    k = int(round(degrees / 90.0)) % 4
    return {0: 0, 1: 90, 2: 180, 3: -90}[k]


def upright_image(frame: av.VideoFrame) -> np.ndarray:
    """The frame as BGR, turned by its display rotation (phones record sideways and say so)."""
    image: np.ndarray = frame.to_ndarray(format="bgr24")
    k = int(round(float(getattr(frame, "rotation", 0) or 0) / 90.0)) % 4
    if k:
        # rotation is counterclockwise degrees, as np.rot90 turns for positive k.
        image = np.ascontiguousarray(np.rot90(image, k))
    return image
