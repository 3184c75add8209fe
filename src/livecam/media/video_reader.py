"""Video input with PyAV: open and check a file, then decode its frames in order as BGR arrays.

Frames come out upright (the display rotation phones record is applied, and a mirror), of one size (a
resolution change mid-stream is letterboxed into the first), with their own presentation time on
a timeline that starts at 0 and never runs back (an MPEG-TS starting at 10 h, concatenated
segments whose timestamps restart), so variable frame rate survives. The stream read is the one
a user means (not cover art, not a one-frame thumbnail track). Corrupt packets are skipped and
summarised in one warning; a file that ends before its header says (cut short: a crash, a full
disk, a partial download) gives the frames it holds and one warning saying how much was read;
a file that cannot be opened (an MP4 cut before its index was written) or has no video stream is
an InputError. `VideoDecoder` is the one decode loop: `run --camera
FILE` (camera.VideoFileSource) uses it too. A frame's BGR image is made when first asked for, in
the thread that asks: the file pipeline's workers, not its one decode thread; the live
pipeline's analyse thread, not its capture thread.
"""

from __future__ import annotations

import collections
import errno
import functools
import heapq
import logging
import math
import os
import stat
import struct
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Callable, Generator, Iterator, TypeVar, cast

import av
import numpy as np

from livecam.errors import InputError
from livecam.media.colour import Colour, ColourConverter
from livecam.media.containers import as_fraction, local_path, open_container
from livecam.media.isobmff import boxes, missing_index
from livecam.media.metadata import PNG_SIGNATURE, apng_frames
from livecam.media.timecode import start_timecode
from livecam.paths import why_missing
from livecam.console import counted
from livecam.settings import IMAGE_READ_FORMATS

log = logging.getLogger("livecam")

# Demuxers that read still images: those files belong to `livecam image` (an animated GIF is a clip).
IMAGE_FORMATS = ("image2", "png_pipe", "jpeg_pipe", "webp_pipe", "bmp_pipe", "tiff_pipe")
# One JPEG after another: a photo, or an MJPEG stream (a capture tool's `-f mjpeg -`, a .mjpeg recording,
# JPEG files concatenated). The rule, `more_than_one`, for `video` and `run --camera` alike: one JPEG is a
# photo, refused as any picture is (still_image); more is a video. JPEGs carry no timestamps: it plays at
# the demuxer's 25 fps, FFmpeg's default for it (`ffmpeg -i in.mjpeg` says the same).
MJPEG_STREAM = "jpeg_pipe"
# Demuxers of pictures open_input lets through, read as one-frame videos (picture_kind): icons (.ico, .cur).
_PICTURE_FORMATS = ("ico",)
# What a video without one frame is told, however its container shows it.
NO_FRAMES, GIVE_FRAMES = "has no video frames", "give a video with frames"
NONE_DECODED = "no video frame could be decoded; the file is truncated or corrupt"  # (it opened, then ended)



class StillImageError(InputError):
    """A still image given where a video goes: a command with another use for it (`bench`, which
    makes a clip from a --source photo) says so instead."""


@dataclass(frozen=True)  # not slotted: pickled with VideoInfo into a chunk (frozen + slots: no unpickling on 3.10)
class Chapter:
    """A chapter mark of the input, on frames()'s timeline (ticks of `time_base`), for the output."""

    start: int
    end: int
    time_base: Fraction
    metadata: tuple[tuple[str, str], ...]  # title, ...


@dataclass(frozen=True)
class VideoInfo:
    path: Path
    width: int  # as displayed (after rotation)
    height: int
    rate: Fraction  # average frame rate
    time_base: Fraction  # of the video stream's timestamps
    start_time: float  # seconds; first video timestamp on frames()'s timeline (0 unless audio starts first)
    frames: int | None  # frame count from the header, None when unknown
    duration: float | None  # seconds, of the video stream (or the container)
    rotation: int  # display rotation in degrees, counterclockwise (0, 90, 180, -90)
    codec: str
    audio_codec: str | None  # of the audio track an output gets first (audio_order); None: no audio
    other_streams: tuple[str, ...]  # e.g. ("data", "video", "timecode"): what the output drops
    origin: float = 0.0  # seconds of the input's timestamps that are 0 on frames()'s timeline
    sample_aspect: Fraction | None = None  # of non-square pixels (DV, DVD), as displayed; None: square
    colour: Colour | None = None  # range, primaries, transfer, matrix (what players assume when untagged)
    chapters: tuple[Chapter, ...] = ()
    subtitles: tuple[str, ...] = ()  # codec of each subtitle stream (video_writer.subtitle_fate: which are kept)
    attachments: tuple[str, ...] = ()  # names of the attached files (attachment_streams): a Matroska output keeps them
    cut_short: str | None = None  # why the file is known truncated before decoding (cut_short()), for frames()'s warning
    # a mirroring display matrix (a selfie app's MP4/MOV), as track_mirror reads it from the file: what
    # every decoder of this input turns its frames by, a chunk's too (media/chunks), whose Matroska has none
    mirror: tuple[int, int] | None = None
    # the start timecode (input_timecode), which the writer keeps; other_streams counts its track as "timecode"
    timecode: str | None = None
    end: float | None = None  # seconds on frames()'s timeline where the video ends as stored (stored_end)
    held_back: int = 0  # decoded frames the reader holds back to time them (DecodeTimes), for the memory plan

    @property
    def expected_frames(self) -> int | None:
        """The header's frame count, or duration x rate; None when neither is known."""
        if self.frames:
            return self.frames
        if self.duration and self.rate:
            return max(1, int(round(self.duration * float(self.rate))))
        return None


class DecodedFrame:
    """A decoded frame: its presentation time and how long it is shown (seconds; None when the
    input does not say), and its image (HxWx3 BGR uint8,
    upright, of the stream's one size), made when first asked for, in whichever thread asks: the
    file pipeline's workers convert the frames they take (the decode thread is one), the live
    pipeline's analyse thread those of `run --camera FILE` it takes, and a reader
    that looks at a few frames of many (`livecam verify`) skips the others' conversion. It holds
    the decoder's frame until then. One thread at a time may ask for the image."""

    __slots__ = ("time", "duration", "_make", "_image")

    def __init__(self, time: float, make: Callable[[], np.ndarray], duration: float | None = None) -> None:
        self.time = time
        # the input's (its packet's): a variable-rate clip's last frame may last far longer than
        # one frame at the average rate, and the output's video ends where the input's does
        self.duration = duration
        self._make: Callable[[], np.ndarray] | None = make
        self._image: np.ndarray | None = None

    @property
    def image(self) -> np.ndarray:
        if self._image is None:
            assert self._make is not None
            self._image, self._make = self._make(), None
        return self._image


def ffmpeg_reason(exc: BaseException) -> str:
    """FFmpeg's reason, without the errno and the file name PyAV adds ("[Errno 1094995529] Invalid
    data found when processing input: 'clip.mp4'", inside a message that names the file)."""
    reason = exc.strerror if isinstance(exc, av.error.FFmpegError) and exc.strerror else None
    text = str(reason or exc).strip() or type(exc).__name__
    return text.splitlines()[0]


def open_input(path: Path, *, once: bool = False) -> av.container.InputContainer:
    """Open `path` for reading, or raise an InputError that says why it is not a usable video.

    A pipe (`cat clip.mp4 | livecam video /dev/stdin ...`, a FIFO) can be read only once: fine for
    `run --camera` (once=True), refused for `video`, whose input is opened again for its checks,
    its display rotation and its audio."""
    path = Path(path)
    if not path.exists():
        raise InputError(f"input video {path} {why_missing(path)}")
    if path.is_dir():
        raise InputError(f"input {path} is a folder; expected a video file such as .mp4, .mkv, .mov or .webm")
    if not os.access(path, os.R_OK):
        raise InputError(f"cannot read input video {path}: permission denied")
    regular = stat.S_ISREG(path.stat().st_mode)
    if not regular and not once:
        raise InputError(f"input {path} is a pipe or device, not a file: `livecam video` reads its input more than "
                         "once (checks, frames, audio), which a pipe cannot give; save it to a file first "
                         "(e.g. `cat > clip.mp4`) and give that file")
    if regular and path.stat().st_size == 0:
        raise InputError(f"input video {path} is empty (0 bytes); expected a video file")
    try:
        container = open_container(local_path(path))
    except av.error.EOFError as exc:  # a Matroska/WebM recording stopped before its first frame said "(End of file)"
        raise InputError(f"{path} {NO_FRAMES}: it ends before the first one (an empty recording, or one "
                         f"cut short); {GIVE_FRAMES}") from exc
    except av.error.FFmpegError as exc:
        refusal = _index_refusal(path) if regular else None
        if refusal is not None:
            raise refusal from exc
        raise InputError(
            f"cannot read {path} as a video ({ffmpeg_reason(exc)}): the file is not a video, or is truncated "
            "or corrupt; expected a video file such as .mp4, .mkv, .mov or .webm"
        ) from exc
    refusal = _index_refusal(path) if regular and "mov" in container.format.name.split(",") else None
    if refusal is not None:  # FFmpeg opens an MP4 cut inside its index: "no video stream", "codec unknown"
        container.close()
        raise refusal
    if container.format.name == "png_pipe" and _animated_png(path):
        # FFmpeg takes a .png for a still; its own APNG demuxer reads the animation
        container.close()
        try:
            return open_container(local_path(path), format="apng")
        except av.error.FFmpegError as exc:
            raise InputError(f"cannot read {path} as an animated PNG ({ffmpeg_reason(exc)}); re-export it") from exc
    if container.format.name == MJPEG_STREAM:
        if not regular:  # a pipe (`run --camera`): read once, its frames checked as they come (more_than_one)
            return container
        container.close()
        _refuse_one_jpeg(path)
        return open_container(local_path(path))
    if container.format.name in IMAGE_FORMATS or container.format.name.endswith("_pipe"):
        container.close()
        if _animated_webp(path):  # FFmpeg's WebP decoder reads stills only (and OpenCV none)
            raise InputError(f"{path} is an animated WebP, which this FFmpeg cannot decode; convert it to an "
                             f"animated GIF or a video first (e.g. `magick {path.name} {path.stem}.gif`) and give that")
        raise still_image(path)
    return container


def still_image(path: Path) -> StillImageError:
    return StillImageError(f"{path} is a still image, not a video; use `livecam image` for images")


T = TypeVar("T")


def more_than_one(items: Iterator[T], refusal: Callable[[], Exception]) -> Iterator[T]:
    """MJPEG_STREAM's rule: a JPEG stream's `items` (its packets or frames), the first handed on
    once a second came; `refusal()` is raised when there is only one (a photo)."""
    first = next(items, None)
    if first is None:
        return
    second = next(items, None)
    if second is None:
        raise refusal()
    yield first
    yield second
    yield from items


def _refuse_one_jpeg(path: Path) -> None:
    """still_image for a file of one JPEG (more_than_one, on its packets: nothing is decoded); a
    file that fails to demux is left to the decoder's damage rule."""
    try:
        with open_container(local_path(path)) as container:
            packets = (p for p in container.demux(container.streams.video[0]) if p.size)
            next(more_than_one(packets, lambda: still_image(path)), None)
    except (av.error.FFmpegError, IndexError):
        return


def _index_refusal(path: Path) -> InputError | None:
    """The InputError for an MP4/MOV whose index is missing or cut off (isobmff.missing_index),
    with the fix; None when its index is whole or it is no MP4/MOV."""
    problem = missing_index(path)
    if problem is None:
        return None
    return InputError(f"cannot read {path}: {problem}, so its frames cannot be found: the recording or copy was cut "
                      "short (a crash, a full disk, an interrupted download); re-copy the whole file, or rebuild its "
                      "index with a repair tool such as untrunc, given a whole recording from the same camera")


def container_tags(path: Path) -> tuple[dict[str, str], bool]:
    """The container's metadata tags (keys lower-cased), and whether it holds one picture that
    FFmpeg reads as a one-frame video (picture_kind), for `livecam verify`, which called those
    "(video)"; InputError when the file is not a readable video."""
    with open_input(path) as container:
        tags = {str(k).lower(): str(v) for k, v in container.metadata.items()}
        demuxer = container.format.name
    return tags, picture_kind(path, demuxer) is not None


def picture_kind(path: Path, demuxer: str) -> str | None:
    """What a file FFmpeg's `demuxer` reads as a one-frame video is when it is one picture: "an
    icon" (.ico, .cur), "a GIF of one frame"; None for a video. The one rule of `verify` (an
    image) and `video`/`run --camera` (refused, as a PNG is)."""
    from livecam.media.images import still_gif  # (OpenCV: not loaded for a video's sake)

    if demuxer in _PICTURE_FORMATS:
        return "an icon"
    return "a GIF of one frame" if demuxer == "gif" and still_gif(path) else None


def refuse_picture(path: Path) -> None:
    """The InputError `livecam video` and `run --camera FILE` give a picture FFmpeg reads as a
    one-frame video (picture_kind): it came out as a one-frame video, where a PNG is refused.
    Not in open_input: `verify` reads such a picture's tags through it. A file that does not
    open is left to open_input, which names the problem; a pipe is not opened here."""
    if not path.is_file():
        return
    try:
        with open_container(local_path(path)) as container:
            demuxer = container.format.name
    except (av.error.FFmpegError, OSError):
        return
    kind = picture_kind(path, demuxer)
    if kind is None:
        return
    # the pointer to `livecam image` is true only for a kind it reads
    fix = ("use `livecam image` for images" if kind != "an icon" or "ICO" in IMAGE_READ_FORMATS else
           "save it as a PNG and use `livecam image` for images (it does not read icons)")
    raise InputError(f"{path} is a still image ({kind}), not a video; {fix}")


def _animated_png(path: Path) -> bool:
    """Whether `path` is a PNG whose acTL chunk announces frames: the chunks before the image
    data are walked, their payloads skipped (an ICC profile there can be hundreds of KB)."""
    try:
        with open(path, "rb") as f:
            if f.read(8) != PNG_SIGNATURE:
                return False
            while True:
                head = f.read(8)
                if len(head) < 8 or head[4:] == b"IDAT":
                    return False
                length = int.from_bytes(head[:4], "big")
                if head[4:] == b"acTL":
                    return apng_frames(PNG_SIGNATURE + head + f.read(length)) > 1
                f.seek(length + 4, os.SEEK_CUR)  # the payload and its CRC
    except OSError:
        return False


def _animated_webp(path: Path) -> bool:
    """Whether `path` is a WebP with its animation flag set (the VP8X chunk's flags, byte 20)."""
    try:
        with open(path, "rb") as f:
            head = f.read(21)
    except OSError:
        return False
    return len(head) == 21 and head[:4] == b"RIFF" and head[8:16] == b"WEBPVP8X" and bool(head[20] & 0x02)


def select_video_stream(container: av.container.InputContainer) -> av.video.stream.VideoStream | None:
    """The video stream a user means, close to FFmpeg's default selection: never an attached
    picture (cover art) or a one-frame still (a thumbnail track) when a real video is there; then
    the one marked default, then the largest picture, the first on a tie. None without video."""
    streams = list(container.streams.video)
    if not streams:
        return None

    def rank(stream: av.video.stream.VideoStream) -> tuple[int, int, int, int]:
        cc = stream.codec_context
        attached = bool(stream.disposition & av.stream.Disposition.attached_pic)
        moving = not attached and cc is not None and _frame_count(stream) != 1
        default = bool(stream.disposition & av.stream.Disposition.default)
        return (int(moving), int(default), (cc.width * cc.height) if cc is not None else 0, -stream.index)

    return max(streams, key=rank)


def video_stream_of(container: av.container.InputContainer, name: str) -> av.video.stream.VideoStream:
    """The stream select_video_stream picks, or the one InputError every command gives (`video`,
    `run --camera FILE`) when there is none or its codec is unknown."""
    stream = select_video_stream(container)
    if not container.streams:  # an MP4 recording stopped before its first frame keeps no track: "it holds: nothing"
        raise InputError(f"{name} {NO_FRAMES} (nor any other stream); {GIVE_FRAMES}")
    if stream is None:
        kinds = ", ".join(sorted({s.type for s in container.streams}))
        raise InputError(f"{name} has no video stream (it holds: {kinds}); give a video file")
    if all(s.disposition & av.stream.Disposition.attached_pic for s in container.streams.video):
        # a song's cover art: taken as a one-frame video, the output was that picture alone
        # (with a 'cut short' warning), the sound cut to one frame's length
        raise InputError(f"{name} has no video stream, only a still picture attached to it (cover art); "
                         f"give a video file (`livecam image` swaps a face in a picture saved on its own)")
    if stream.codec_context is None:  # PyAV gives no codec context when the codec id is unknown (damaged header)
        raise InputError(f"{name}: the video stream's codec is unknown; the file is corrupt or needs "
                         "a codec this FFmpeg build lacks")
    return stream


def _frame_count(stream: av.video.stream.VideoStream) -> int | None:
    """Frames in `stream` from its header: the count (MP4), or its duration (Matroska's
    DURATION tag) times its rate; None when unknown."""
    if stream.frames:
        return int(stream.frames)
    seconds = _tagged_end(stream)
    rate = stream.average_rate or stream.base_rate
    if seconds is None:
        return None
    return max(1, round(seconds * float(rate))) if rate else None


def _tagged_end(stream: av.stream.Stream) -> float | None:
    """Where a Matroska stream ends, in seconds from 0, by its DURATION tag (FFmpeg's muxer writes
    one for each stream); None without one."""
    try:
        h, m, sec = str(stream.metadata.get("DURATION", "")).split(":")
        seconds = int(h) * 3600 + int(m) * 60 + float(sec)
    except ValueError:
        return None
    return seconds if math.isfinite(seconds) and seconds > 0 else None


def _stream_duration(container: av.container.InputContainer, stream: av.video.stream.VideoStream,
                     tb: Fraction, start: float) -> float | None:
    """The video stream's length in seconds: its own duration, else its DURATION tag less its
    start (Matroska), else the container's less the video's `start` on the timeline. The
    container's spans every stream: an MKV whose sound runs on 0.5 s past its video was called cut
    short ("ended at 1.00 s of the 1.52 s"), and one whose audio starts 1 s before its video was
    called cut short 1 s before its end."""
    if stream.duration:
        return float(stream.duration * tb)
    end = _tagged_end(stream)
    own_start = float(stream.start_time * tb) if stream.start_time is not None else 0.0
    if end is not None and end > own_start:
        return end - own_start
    span = container_duration(container)
    return span - start if span is not None and span > start > 0 else span


# AVFormatContext flag of formats whose packets carry no timestamps (raw .h264/.hevc streams).
AVFMT_NOTIMESTAMPS = 0x80


def stream_rate(container: av.container.InputContainer, stream: av.video.stream.VideoStream) -> Fraction | None:
    """The frames a second `stream` plays at. A raw H.264/HEVC stream (a dashcam's or a Raspberry
    Pi camera's .h264) has no timestamps: FFmpeg's demuxer then reports its own 25 fps default as
    the average, while the rate the stream declares (its SPS timing) is the codec's, which players
    and FFmpeg's own outputs use; a 10 fps clip came out 2.5 times too fast. None: unknown."""
    declared = stream.codec_context.framerate
    if container.format.flags & AVFMT_NOTIMESTAMPS and declared:
        return plausible_rate(as_fraction(declared))
    rate = stream.average_rate or stream.guessed_rate or stream.base_rate
    return plausible_rate(as_fraction(rate)) if rate else None


# Phones store slow-motion clips at up to 960 fps; a "rate" above this is a file's time base.
MAX_FILE_FPS = 1000


def plausible_rate(rate: Fraction) -> Fraction | None:
    """`rate`, or None (unknown) when it is faster than MAX_FILE_FPS: then it is the file's time
    base (a two-frame animated PNG, with no average, reported 100000 fps, its 1/100000 s tick;
    `run --camera` printed it and sized its marking queue by it). Slow rates are kept: a slideshow
    GIF's 0.5 fps is real (taken as 30, its last frame was cut from 2 s to 1/30 s)."""
    return rate if 0 < rate <= MAX_FILE_FPS else None


def timeline_origin(container: av.container.InputContainer) -> float:
    """Where the output timeline's 0 lies in the input, in seconds: the earliest start of any of
    its streams (an MPEG-TS starts anywhere, an MKV may be offset), as FFmpeg's outputs do."""
    if container.start_time is not None:
        return float(container.start_time) / av.time_base
    return 0.0


class Timeline:
    """Maps input timestamps (seconds) onto the output's: shifted so `origin` is 0, and kept
    monotonic where the input's restart (concatenated TS segments): a jump back of more than
    RESTART_S continues right after the last time instead. Small steps back are left to the
    writer (damaged input), which nudges them forward by a tick."""

    RESTART_S = 0.5

    def __init__(self, origin: float, step: float) -> None:
        self.origin = origin
        self.step = step  # the nominal distance between two frames (or audio packets)
        self._offset = 0.0
        self._last: float | None = None
        self.restarts = 0

    def map(self, t: float, duration: float | None = None) -> float:
        out = t - self.origin + self._offset
        if self._last is not None and out < self._last - self.RESTART_S:
            self._offset += self._last + (duration or self.step) - out
            out = self._last + (duration or self.step)
            self.restarts += 1
        self._last = out
        return out


class Fitter:
    """Gives every image one size: a frame of another size (the input changed resolution
    mid-stream) is scaled to fit inside it, its aspect kept, with black bars (letterbox); said
    once, in one warning."""

    def __init__(self, size: tuple[int, int] | None, name: str) -> None:
        self.size = size  # None: the first image's
        self.name = name
        self.fitted = 0

    def fit(self, image: np.ndarray) -> np.ndarray:
        size = self.place(image.shape[1], image.shape[0])
        return image if size is None else letterbox(image, *size)

    def place(self, width: int, height: int) -> tuple[int, int] | None:
        """The size an image of width x height is letterboxed into, None when it has the one
        size (fit, decided before the image exists: the decoder decides in order, a worker fits)."""
        if self.size is None:
            self.size = (width, height)
        w, h = self.size
        if width == w and height == h:
            return None
        if self.fitted == 0:
            log.warning("warning: %s changes its picture size (%dx%d, then %dx%d); later frames are scaled "
                        "to fit the first size, their aspect kept (black bars)", self.name, w, h, width, height)
        self.fitted += 1
        return self.size


def letterbox(image: np.ndarray, width: int, height: int) -> np.ndarray:
    """`image` scaled to fit inside width x height, aspect kept, centred on black."""
    import cv2

    ih, iw = image.shape[:2]
    scale = min(width / iw, height / ih)
    nw, nh = max(1, min(width, round(iw * scale))), max(1, min(height, round(ih * scale)))
    canvas = np.zeros((height, width, 3), np.uint8)
    x, y = (width - nw) // 2, (height - nh) // 2
    interpolation = cv2.INTER_AREA if scale < 1 else cv2.INTER_LINEAR
    canvas[y:y + nh, x:x + nw] = cv2.resize(image, (nw, nh), interpolation=interpolation)
    return canvas


# Packed 8-bit formats with alpha, and where the alpha byte is: their pixels are looked at.
_PACKED_ALPHA = {"bgra": 3, "rgba": 3, "argb": 0, "abgr": 0}


def _transparent(frame: av.VideoFrame) -> bool:
    """Whether `frame` has transparency: for a packed 8-bit format, whether any pixel is less than
    opaque (FFmpeg's GIF decoder gives bgra for every GIF: opaque ones were called transparent);
    for another format with an alpha channel (yuva, gbrap), by its format."""
    name = frame.format.name
    if name in _PACKED_ALPHA:
        return bool((frame.to_ndarray()[..., _PACKED_ALPHA[name]] < 255).any())
    return any(c.is_alpha for c in frame.format.components)


def _full_chroma(frame: av.VideoFrame) -> bool:
    """Whether `frame` is YUV with its colour planes as large as its picture (4:4:4)."""
    fmt = frame.format
    return fmt.name.startswith("yuv") and len(fmt.components) >= 3 and \
        fmt.chroma_width(frame.width) == frame.width and fmt.chroma_height(frame.height) == frame.height


def _stored_alpha(stream: av.video.stream.VideoStream) -> str | None:
    """"VP9 alpha" (or VP8) for a WebM whose transparency is stored beside the picture (the
    stream's alpha_mode tag): FFmpeg's own VP8/VP9 decoders read the picture only, so its frames
    come out opaque yuv420p and _transparent never saw it; None otherwise."""
    if any(str(key).lower() == "alpha_mode" and str(value) == "1" for key, value in stream.metadata.items()):
        return f"{stream.codec_context.name.upper()} alpha"
    return None


class Deinterlacer:
    """Interlaced frames (fields of two moments woven together: broadcast, DV, camcorders) made
    progressive with FFmpeg's bwdif, one frame per frame (timestamps and count kept); progressive
    frames pass untouched. Started at the first interlaced frame, said once; bwdif holds one frame
    back, so `flush()` at the end gives it out."""

    def __init__(self, name: str, time_base: Fraction) -> None:
        self.name = name
        self.time_base = time_base
        self._graph: av.filter.Graph | None = None
        self._key: tuple[int, int, str] | None = None
        self._failed = False

    def push(self, frame: av.VideoFrame) -> list[av.VideoFrame]:
        """The frames ready after `frame` (none, it, or an earlier one)."""
        if self._failed or (self._graph is None and not frame.interlaced_frame):
            return [frame]
        key = (frame.width, frame.height, frame.format.name)
        ready: list[av.VideoFrame] = []
        if self._graph is not None and key != self._key:  # a new size or format: a new graph
            ready = self.flush()
        if self._graph is None:
            try:
                graph = self._build(frame)
            except (av.error.FFmpegError, ValueError) as exc:  # a pixel format bwdif does not take
                self._failed = True
                log.warning("warning: %s is interlaced but cannot be deinterlaced (%s); its frames are kept "
                            "as they are", self.name, ffmpeg_reason(exc))
                return [*ready, frame]
            if self._key is None:
                log.warning("note: %s is interlaced; its frames are deinterlaced (bwdif), one output frame per "
                            "input frame", self.name)
            self._graph, self._key = graph, key
        self._graph.push(frame)
        return ready + self._pull()

    def flush(self) -> list[av.VideoFrame]:
        if self._graph is None:
            return []
        self._graph.push(None)
        ready = self._pull()
        self._graph = None
        return ready

    def _build(self, frame: av.VideoFrame) -> av.filter.Graph:
        graph = av.filter.Graph()
        source = graph.add_buffer(width=frame.width, height=frame.height, format=frame.format,
                                  time_base=self.time_base)
        # deint=interlaced: frames flagged progressive (mixed content) pass as they are
        bwdif = graph.add("bwdif", "mode=send_frame:parity=auto:deint=interlaced")
        source.link_to(bwdif)
        bwdif.link_to(graph.add("buffersink"))
        graph.configure()
        return graph

    def _pull(self) -> list[av.VideoFrame]:
        assert self._graph is not None
        ready: list[av.VideoFrame] = []
        while True:
            try:
                out = self._graph.pull()
            except (av.error.BlockingIOError, av.error.EOFError):
                return ready
            if isinstance(out, av.VideoFrame):
                if out.time_base is None:  # bwdif halves the time base; the sink's frames say so
                    out.time_base = self.time_base
                ready.append(out)


class DecodeTimes:
    """Presentation times for an AVI stream that reorders frames (B-frames). AVI stores none: the
    demuxer guesses each packet's as its decode time plus the decoder's delay, and a decoder that
    reorders (H.264) hands those out with the wrong frames, out of order. The frames come out in
    presentation order, so the n-th takes the smallest time not yet taken (seen within LOOKAHEAD
    frames, held back till then), less that delay: the first frame at the first decode time, with
    the audio, and a frame the decoder drops in damaged data leaves its gap."""

    LOOKAHEAD = 8  # frames; more than a B-frame's time moves (3 with two B-frames)

    @staticmethod
    def needed(c: av.container.InputContainer, vs: av.video.stream.VideoStream) -> bool:
        """Whether `vs` is timed this way: an AVI whose decoder reorders frames."""
        return c.format.name == "avi" and bool(vs.codec_context.has_b_frames)

    def __init__(self) -> None:
        self._held: collections.deque[av.VideoFrame] = collections.deque()
        self._times: list[int] = []  # a heap
        self._delay: int | None = None

    def sent(self, packet: av.Packet) -> None:
        if self._delay is None and packet.pts is not None and packet.dts is not None:
            self._delay = packet.pts - packet.dts

    def frame(self, frame: av.VideoFrame) -> list[av.VideoFrame]:
        """The frames ready to go on, with their times."""
        self._held.append(frame)
        if frame.pts is not None:
            heapq.heappush(self._times, frame.pts)
        return [self._next()] if len(self._held) > self.LOOKAHEAD else []

    def flush(self) -> list[av.VideoFrame]:
        """The frames held back, at the end of the stream."""
        return [self._next() for _ in range(len(self._held))]

    def _next(self) -> av.VideoFrame:
        frame = self._held.popleft()
        if frame.pts is not None:
            frame.pts = heapq.heappop(self._times) - (self._delay or 0)
        return frame


class HeadlessStart:
    """The frames lost at the start of a stream that begins without a keyframe (a broadcast or
    recording cut mid-way through a group of pictures, as a TS often is): the packets before its
    first keyframe need a picture that is not in the file, and the decoder drops them, so its
    first frame comes later than its first packet. Counted until the first decoded frame: those
    non-key packets before the first keyframe that are presented before that frame."""

    def __init__(self) -> None:
        self._lead: list[float] | None = []  # times of the non-key packets so far; None: counted
        self._keyed = False
        self.frames = 0
        self.seconds = 0.0  # from the first lost frame to the first decoded one

    def sent(self, packet: av.Packet) -> None:
        if self._lead is None or self._keyed:
            return
        if packet.is_keyframe:
            self._keyed = True
        elif packet.size and not packet.is_discard and (t := packet_time(packet)) is not None:
            self._lead.append(t)

    def decoded(self, frame: av.VideoFrame) -> None:
        if self._lead is None:
            return
        if frame.pts is not None and frame.time_base:
            shown = float(frame.pts * frame.time_base)
            lost = [t for t in self._lead if t < shown]
            self.frames, self.seconds = len(lost), shown - min(lost, default=shown)
        self._lead = None


def say_headless(name: str, frames: int, seconds: float, first: float, *, writes: bool) -> None:
    """The one warning for the `frames` (`seconds`) lost before the first keyframe (HeadlessStart;
    a segmented run's plan finds them in its demux pass); `first`: the first frame's time."""
    log.warning("warning: %s starts without a keyframe (cut from a longer recording?): its first %s (%.2f s) need "
                "a picture from before the cut and could not be decoded%s", name, counted(frames, "frame"), seconds,
                f"; the output leaves them out, its first frame at {first:.2f} s as in the input" if writes else "")


class VideoDecoder:
    """The one decode loop (files for `video`, `demo`, `bench`; files and URLs for `run
    --camera`): frames of one stream, upright, of one size, on one timeline from 0.

    Damage rule: a packet that does not decode (or a demux error) is skipped and counted; more
    than MAX_BAD_IN_A_ROW of them with no frame between end the read (InputError). A damaged input
    gives one summarising warning (`report()`), not one line per packet. A read that timed out
    (av.error.ExitError: a stream URL opened with a timeout that stopped sending) is no damage:
    it is raised as it is, for the source that set the timeout to say."""

    MAX_BAD_IN_A_ROW = 50

    def __init__(self, container: av.container.InputContainer, stream: av.video.stream.VideoStream,
                 name: str, *, size: tuple[int, int] | None, rate: Fraction | None, origin: float,
                 mirror: tuple[int, int] | None, restamp: Callable[[av.Packet], None] | None = None,
                 writes: bool = True) -> None:
        self._container = container
        self.writes = writes  # an output is made of these frames: what it loses is said (not for `verify`)
        self._restamp = restamp  # puts a packet's own timestamps back (a stream-copied chunk's: media.chunks)
        self._stream = stream
        self.name = name
        step = 1.0 / float(rate) if rate else 1 / 30
        self.timeline = Timeline(origin, step)
        self.fitter = Fitter(size, name)
        cc = stream.codec_context
        self.colour = Colour.described(cc, cc.format.name if cc.format else None, cc.height or 0)
        self._converter = ColourConverter()
        self.bad_packets = 0
        self._alpha_beside = _stored_alpha(stream)
        self._mirror = mirror  # VideoInfo.mirror's (track_mirror): the stream's own frames do not say it
        self._said_alpha = False
        self._said_depth = False
        self._said_chroma = False
        self._bad_in_a_row = 0
        self._first_bad: float | None = None
        self._reported = 0
        # False: corrupt packets are counted but not warned of (`run --camera` reading an MP4
        # through a pipe before its first frame: garbage there means an index out of reach, said instead)
        self.warn_damage = True
        self.last_time: float | None = None
        self.frames_out = 0  # frames handed on so far: how far a read got (read_end)
        self._raw_last: float | None = None  # the last frame's input time, for one without a timestamp
        self.headless = HeadlessStart()

    def __iter__(self) -> Generator[DecodedFrame, None, None]:
        for frame in self._ready():
            time = self._stamp(frame)
            # what needs the frames in order (the turn, the one size and its warning) is decided here
            turns = quarter_turns(frame, self._mirror)
            shape = (frame.width, frame.height) if turns % 2 == 0 else (frame.height, frame.width)
            fit = self.fitter.place(*shape)
            self.frames_out += 1
            yield DecodedFrame(time, functools.partial(self._image, frame, turns, fit), frame_duration(frame))

    def _ready(self) -> Iterator[av.VideoFrame]:
        """The decoded (and deinterlaced) frames in order, damage handled by the rule above."""
        c, vs = self._container, self._stream
        vs.thread_type = "AUTO"  # frame + slice threads in the decoder
        deinterlacer = Deinterlacer(self.name, as_fraction(vs.time_base or Fraction(1, 90000)))
        times = DecodeTimes() if DecodeTimes.needed(c, vs) else None
        while True:
            try:
                for packet in c.demux(vs):
                    if packet.size == 0 and packet.buffer_ptr:
                        # an empty packet holds no picture (a dropped frame: Theora's and NUT's "the
                        # previous one again"), and FFmpeg refuses it; the demuxer's flush packet at
                        # the end has no data at all and is sent on (it drains the decoder)
                        continue
                    if self._restamp is not None:
                        self._restamp(packet)
                    self.headless.sent(packet)
                    if times is not None:
                        times.sent(packet)
                    try:
                        decoded = packet.decode()
                    except av.error.FFmpegError as exc:
                        self._bad_packet(packet_time(packet), exc)
                        continue
                    for frame in decoded:
                        self._bad_in_a_row = 0
                        self.headless.decoded(cast(av.VideoFrame, frame))
                        for ready in times.frame(cast(av.VideoFrame, frame)) if times is not None else [frame]:
                            yield from deinterlacer.push(cast(av.VideoFrame, ready))
                break
            except av.error.EOFError:
                break
            except av.error.FFmpegError as exc:
                # A demux error: resume reading after it (a fresh generator continues from there).
                self._bad_packet(self.last_time, exc)
        for ready in times.flush() if times is not None else []:
            yield from deinterlacer.push(ready)
        yield from deinterlacer.flush()

    def _stamp(self, frame: av.VideoFrame) -> float:
        """`frame`'s time on the timeline (and the notes its format calls for, once)."""
        t = float(frame.pts * frame.time_base) if frame.pts is not None and frame.time_base else None
        if t is None:  # no timestamp: one nominal frame after the last
            t = self._raw_last + self.timeline.step if self._raw_last is not None else self.timeline.origin
        self._raw_last = t
        if self.writes and not self._said_alpha and (self._alpha_beside or _transparent(frame)):
            # the output's encoders hold none: said once, as for a JPEG given a transparent image
            self._said_alpha = True
            log.warning("note: %s has transparency (%s), which the output cannot hold; its frames are "
                        "written opaque, showing the colours under the transparent parts", self.name,
                        self._alpha_beside or frame.format.name)
        bits = max(c.bits for c in frame.format.components)
        if self.writes and not self._said_depth and bits > 8:
            # every frame goes through 8-bit BGR: a phone's 10-bit HDR clip came out 8-bit unsaid
            self._said_depth = True
            log.warning("note: %s has %d bits a sample; livecam works in 8, so the output has 8 bits (smooth "
                        "gradients may band) and keeps the input's colour tags", self.name, bits)
        if self.writes and not self._said_chroma and _full_chroma(frame):
            # the encoders write 4:2:0: a 4:4:4 screen recording's colour was halved unsaid
            self._said_chroma = True
            log.warning("note: %s has full-resolution colour (%s); the output stores colour at half resolution "
                        "(4:2:0, what players expect), so thin coloured edges may soften", self.name,
                        frame.format.name)
        self.last_time = self.timeline.map(t)
        return self.last_time

    def _image(self, frame: av.VideoFrame, turns: int, fit: tuple[int, int] | None) -> np.ndarray:
        """`frame` as an upright BGR image of the one size (any thread: see DecodedFrame)."""
        try:
            image = upright(self._to_bgr(frame), turns, self._mirror is not None)
            return image if fit is None else letterbox(image, *fit)
        except av.error.FFmpegError as exc:  # conversion: no packet is at fault
            _raise_if_out_of_memory(exc)
            raise

    def _to_bgr(self, frame: av.VideoFrame) -> np.ndarray:
        """BGR by the frame's own colour description (the stream's where it says nothing)."""
        colour = Colour.described(frame, frame.format.name, frame.height, fallback=self.colour)
        return self._converter.to_bgr(frame, colour)

    def _bad_packet(self, at: float | None, exc: av.error.FFmpegError) -> None:
        _raise_if_out_of_memory(exc)
        if isinstance(exc, av.error.ExitError):  # the read timed out: a stalled stream, no damage
            raise exc
        self.bad_packets += 1
        self._bad_in_a_row += 1
        if self._first_bad is None and at is not None:
            self._first_bad = at
        log.debug("skipped a corrupt video packet in %s (%s)", self.name, ffmpeg_reason(exc))
        if self._bad_in_a_row > self.MAX_BAD_IN_A_ROW:
            self.report()
            raise InputError(f"{self.name}: more than {self.MAX_BAD_IN_A_ROW} corrupt video packets in a row; "
                             f"the video is too damaged to read further ({ffmpeg_reason(exc)}); re-copy or re-export it")

    def report(self, lost: str | None = None) -> None:
        """One warning for the corrupt packets skipped so far (none when there were none);
        `lost` says what that cost (by default what the output leaves out, where one is made)."""
        if self.warn_damage and self.bad_packets > self._reported:
            where = f", the first near {self._first_bad:.2f} s" if self._first_bad is not None else ""
            if lost is None and self.writes:
                lost = "the output leaves out what they held"
            cost = f"; {lost}" if lost else ""
            log.warning("warning: skipped %s in %s%s (damaged data)%s", counted(self.bad_packets, "corrupt video packet"),
                        self.name, where, cost)
            self._reported = self.bad_packets


def cut_short(container: av.container.InputContainer, path: Path) -> str | None:
    """Why an MP4/MOV file is truncated, known from its index alone, or None.

    An MP4 with its index at the end that is cut short has no index and does not open
    (isobmff.missing_index says so); one with its index first (`-movflags +faststart`, what streaming sites serve) opens, and its sample
    table places the samples at byte offsets: data the table places past the end of the file was
    cut off: said with what frames() could read (a fragmented MP4's index is read from its
    fragments, the cut one's too). Only the mov demuxer's index lists every sample (Matroska's cues list keyframes)."""
    if "mov" not in container.format.name.split(","):
        return None
    try:
        size = path.stat().st_size
    except OSError:
        return None
    end = 0
    for stream in container.streams:
        entries = stream.index_entries
        if len(entries):
            last = entries[len(entries) - 1]  # the samples are in decoding order, as stored
            end = max(end, last.pos + last.size)
    if end <= size:
        return None
    return (f"{path} is cut short: its index places media up to byte {end} but the file ends at byte {size} "
            f"({100 * size // end}% of it: an interrupted download or copy?)")


def _chapters(container: av.container.InputContainer, origin: float) -> tuple[Chapter, ...]:
    """The container's chapters moved onto the timeline from `origin` (those that end before it
    are left out)."""
    out = []
    for chapter in container.chapters():
        if not chapter["time_base"]:
            continue
        tb = as_fraction(chapter["time_base"])
        shift = round(origin / tb)
        start, end = max(0, chapter["start"] - shift), chapter["end"] - shift
        if end > start:
            out.append(Chapter(start=start, end=end, time_base=tb,
                               metadata=tuple((str(k), str(v)) for k, v in chapter["metadata"].items())))
    return tuple(out)


AVDISCARD_ALL = 48


def audio_order(container: av.container.InputContainer) -> list[int]:
    """The indices of the audio streams an output keeps, in the order it gets them: the one the
    input marks default first (what a player plays), then the others in the input's order.
    A stream whose codec FFmpeg does not know is left out (it cannot be copied or decoded)."""
    streams = [s for s in container.streams.audio if s.codec_context is not None and s.codec_context.name]
    streams.sort(key=lambda s: not is_default(s))  # stable: the input's order otherwise
    return [s.index for s in streams]


def container_duration(container: av.container.InputContainer) -> float | None:
    """The container's duration in seconds, None when unknown. Matroska's (and WebM's) is measured
    from timestamp 0, not from the first frame: an MKV starting at 10 s said 11 s for 1 s of video,
    and the read was called cut short at 1 s."""
    if not container.duration:
        return None
    seconds = container.duration / av.time_base
    if "matroska" in container.format.name and container.start_time:
        seconds -= max(0.0, container.start_time / av.time_base)
    return seconds if seconds > 0 else None


def codec_name(stream: av.stream.Stream) -> str:
    """FFmpeg's name for `stream`'s codec; "" when it does not know it (a damaged codec id leaves
    PyAV without a codec context)."""
    return (stream.codec_context.name or "") if stream.codec_context is not None else ""


@dataclass(frozen=True)
class Attachment:
    """A file attached to a container (Matroska: fonts that ASS subtitles use, cover art)."""

    name: str
    mimetype: str
    data: bytes


# Attached pictures (cover art) by codec: the MIME type and the file name extension an
# attachment of that picture gets when the input does not name it (an MP4's cover art)
_PICTURES: dict[str, tuple[str, str]] = {"mjpeg": ("image/jpeg", ".jpg"), "png": ("image/png", ".png"),
                                         "bmp": ("image/bmp", ".bmp"), "gif": ("image/gif", ".gif"),
                                         "webp": ("image/webp", ".webp")}


def _attached_picture(stream: av.stream.Stream) -> bool:
    """Whether `stream` is cover art livecam can carry as an attachment: an attached picture
    named by the input (FFmpeg reads Matroska's image attachments as these) or of a picture codec."""
    if stream.type != "video" or not stream.disposition & av.stream.Disposition.attached_pic:
        return False
    return bool(stream.metadata.get("filename")) or codec_name(stream) in _PICTURES


def attachment_streams(container: av.container.InputContainer) -> list[av.stream.Stream]:
    """The files attached to `container`: its attachment streams and its cover pictures."""
    return [s for s in container.streams if s.type == "attachment" or _attached_picture(s)]


def attachment_name(stream: av.stream.Stream) -> str:
    """The file name an attachment has in the input, or one from its kind (a cover's codec)."""
    if stream.metadata.get("filename"):
        return stream.metadata["filename"]
    ext = _PICTURES.get(codec_name(stream), ("", ".bin"))[1]
    return f"cover{ext}" if stream.type == "video" else f"attachment{stream.index}{ext}"


def read_attachments(container: av.container.InputContainer) -> list[Attachment]:
    """Every file attached to `container` with its bytes: an attachment stream's are its header
    data; a picture's, the one packet FFmpeg gives for it (queued before any other)."""
    found = []
    for stream in attachment_streams(container):
        mime = stream.metadata.get("mimetype") or _PICTURES.get(codec_name(stream), ("application/octet-stream",))[0]
        if isinstance(stream, av.stream.AttachmentStream):
            data = stream.data
        else:
            data = next((bytes(p) for p in container.demux(stream) if p.size), b"")
        if data:
            found.append(Attachment(attachment_name(stream), mime, data))
    return found


def is_default(stream: av.stream.Stream) -> bool:
    """Whether the input marks `stream` as the one of its kind to play (disposition default)."""
    return bool(stream.disposition & av.stream.Disposition.default)


def _is_chapter_track(stream: av.stream.Stream) -> bool:
    """Whether `stream` is an MP4/MOV's chapter track: the chapters themselves, which FFmpeg reads
    into container.chapters() (and livecam copies) and turns into a data stream it never demuxes;
    the 'not copied' note called it '1 data stream'."""
    return stream.type == "data" and stream.name == "bin_data" and \
        int(getattr(stream, "discard", AVDISCARD_ALL)) == AVDISCARD_ALL


def _timecode_tag(metadata: dict[str, str]) -> str | None:
    """A "timecode" tag (Matroska's reads back as TIMECODE) when it holds a timecode."""
    return start_timecode(next((v for k, v in metadata.items() if k.lower() == "timecode"), None))


def _is_timecode_track(stream: av.stream.Stream) -> bool:
    """Whether `stream` is an MP4/MOV's timecode (tmcd) track: a data stream FFmpeg reads the start
    timecode of into its metadata (and into its video stream's)."""
    return stream.type == "data" and _timecode_tag(dict(stream.metadata)) is not None


def input_timecode(container: av.container.InputContainer, video: av.stream.Stream) -> str | None:
    """The start timecode of `video` in `container`: its own "timecode" tag (FFmpeg copies a MOV's
    tmcd track's there), else a timecode track's, else the container's (a Matroska TIMECODE tag,
    an MXF's); None when the input has none."""
    found = [_timecode_tag(dict(video.metadata))] + \
        [_timecode_tag(dict(s.metadata)) for s in container.streams if _is_timecode_track(s)] + \
        [_timecode_tag(dict(container.metadata))]
    return next((tc for tc in found if tc is not None), None)


def _stored_frames(container: av.container.InputContainer, stream: av.video.stream.VideoStream) -> int | None:
    """The header's frame count less the frames that hold no picture. AVI is constant-rate: one made
    from a variable-rate source (FFmpeg fills its gaps so, as capture software does a dropped
    frame) stores empty chunks, counted in its header but in neither its index nor a read, and a
    whole file was said "cut short" at its very end ("9 of the 12 frames"). Where the index
    reaches the stream's last frame it lists every picture; one that does not (no index: a cut
    file) leaves the header's count."""
    count = int(stream.frames) if stream.frames else None
    if count is None or container.format.name != "avi":
        return count
    entries = stream.index_entries  # an AVI video stream's timestamps count frames
    listed = len(entries)
    if 0 < listed < count and entries[listed - 1].timestamp + 1 >= count:
        return listed
    return count


def _shown_frames(counted: int | None, duration: float | None, rate: Fraction) -> int | None:
    """The header's frame count, or the frames its duration shows when that is clearly fewer: an
    MP4 cut without re-encoding (`ffmpeg -ss 1.5 -c copy`, an editor's trim) keeps the frames from
    the keyframe before the cut and hides them with an edit list, which the decoder honours (90
    counted, 73 shown: the file was refused as truncated)."""
    if not counted or not duration or not rate:
        return counted or None
    shown = int(round(duration * float(rate)))
    return shown if counted > shown + max(2, shown // 50) else counted


@dataclass(frozen=True)
class ReadEnd:
    """How a read of a video's frames ended against what its header announces (VideoReader.frames
    after decoding, a segmented run's last segment after decoding to the end): a read short of it (cut
    short: a crash, a full disk, a partial download; or a demuxer that lost sync in damaged data
    and just ended) gives the frames read, said in one warning."""

    info: VideoInfo
    name: str
    count: int  # frames read
    read_to: float  # seconds on the timeline: the last frame's time + one frame
    expected: int  # the header's frame count, 0 when unknown
    fewer: bool  # clearly fewer frames than the header counts
    reached_end: bool  # near enough the header's duration (damage in the middle still gets there)
    restarted: bool = False  # the timeline restarted (Timeline.restarts): the stored end is on another

    @classmethod
    def of(cls, info: VideoInfo, name: str, count: int, read_to: float, *, restarted: bool = False) -> "ReadEnd":
        expected = info.frames or 0
        end = info.start_time + (info.duration or 0.0)
        reached = not info.duration or restarted or read_to >= end - max(0.5, 0.05 * info.duration)
        return cls(info, name, count, read_to, expected, bool(expected) and count < expected - max(2, expected // 50),
                   reached, restarted)

    @property
    def last_end(self) -> float | None:
        """Where the last frame read ends (held_until_next): where the file says its video ends,
        unless the read was cut short (a frozen picture for what was lost) or its timeline
        restarted; None: one frame at the rate, or as long as its packet says."""
        return None if self.short or self.restarted else self.info.end

    @property
    def short(self) -> bool:
        """Whether the read ended before the input does: a cut its index shows is one however
        close to the end the read got (a fragmented MP4's cut fragment lost its audio, stored
        after its video)."""
        return self.info.cut_short is not None or self.fewer or (not self.expected and not self.reached_end)

    def skipped(self, bad_packets: int) -> bool:
        """Whether the frames missing are those of the `bad_packets` skipped (damage the read got
        past, to the end), not a cut."""
        return self.fewer and bad_packets > 0 and self.reached_end and not self.info.cut_short

    def said(self, *, writes: bool) -> str:
        """The one warning's text: why, and how much could be read."""
        info, end = self.info, self.info.start_time + (self.info.duration or 0.0)
        frames = f"{self.count} of the {counted(self.expected, 'frame')}" if self.expected else counted(self.count, "frame")
        why = (f"{info.cut_short}: {frames}, {self.read_to:.2f} s of {end:.2f} s, could be read" if info.cut_short
               else f"{self.name} ended at {self.read_to:.2f} s of the {end:.2f} s its header announces "
                    f"(damaged or cut short): {frames} could be read")
        return why + ("; the output stops there" if writes else "")


class VideoReader:
    """Owns one input container; `frames()` may be consumed by a thread other than the opener's."""

    def __init__(self, path: Path, *, writes: bool = True, says_end: bool = True) -> None:
        """`writes`: an output is made of the frames (VideoDecoder.writes); `says_end`: a read that
        ends early is warned of (read_end); both False for `verify`, whose verdict says it."""
        self.path = Path(path)
        self.writes = writes
        self.says_end = says_end
        self._container = open_input(self.path)
        try:
            self.info = self._inspect()
        except BaseException:
            self._container.close()
            raise
        self.bad_packets = 0
        self.ended_early = False  # frames() read fewer frames than the header announces (cut short)

    def _inspect(self) -> VideoInfo:
        self._stream = video_stream_of(self._container, str(self.path))
        return video_info(self._container, self._stream, self.path)

    def frames(self) -> Iterator[DecodedFrame]:
        """Decoded frames in presentation order, on a timeline from 0 (see VideoDecoder), each
        converted to BGR when its image is first asked for; then the checks that the read
        reached the end."""
        info = self.info
        decoder = VideoDecoder(self._container, self._stream, self.path.name, size=(info.width, info.height),
                               rate=info.rate, origin=info.origin, mirror=info.mirror, writes=self.writes)

        def decoded() -> Generator[DecodedFrame, None, None]:
            try:
                for frame in decoder:
                    if decoder.frames_out == 1:
                        self._say_headless(decoder.headless, frame.time)
                    yield frame
            except BaseException:  # a failed read, or the consumer stopped early (GeneratorExit)
                decoder.report()
                raise
            finally:
                self.bad_packets = decoder.bad_packets

        yield from held_until_next(decoded(), lambda: self._last_end(decoder))
        if decoder.frames_out == 0:
            raise InputError(f"{self.path}: {NONE_DECODED}")

    def _last_end(self, decoder: VideoDecoder) -> float | None:
        """Once the read has ended: where the last frame ends (read_end)."""
        ending = read_end(self.info, decoder, says_end=self.says_end)
        self.ended_early = ending.short and not ending.skipped(decoder.bad_packets)
        return ending.last_end

    def _say_headless(self, headless: HeadlessStart, first: float) -> None:
        if headless.frames:
            say_headless(self.path.name, headless.frames, headless.seconds, first, writes=self.writes)

    def frames_from(self, seek_pts: int | None) -> Iterator[DecodedFrame]:
        """Decoded frames from the keyframe at `seek_pts` (video stream ticks; None: the start) on,
        on frames()'s timeline: a segment of the file for a cluster worker, which stops when it
        has its frames (so frames()'s checks of the whole file's length do not apply)."""
        if seek_pts is not None:
            self._container.seek(seek_pts, stream=self._stream, backward=True, any_frame=False)
        info = self.info
        decoder = VideoDecoder(self._container, self._stream, self.path.name, size=(info.width, info.height),
                               rate=info.rate, origin=info.origin, mirror=info.mirror, writes=self.writes)
        try:
            yield from decoder
        finally:
            self.bad_packets = decoder.bad_packets
            decoder.report()

    def close(self) -> None:
        self._container.close()

    def __enter__(self) -> "VideoReader":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def sample_aspect(stream: av.video.stream.VideoStream, rotation: int) -> Fraction | None:
    """The pixels' shape (width / height of one pixel) when not square, as displayed (a turn by
    90 degrees inverts it); None for square pixels or when unknown."""
    value = stream.sample_aspect_ratio or (stream.codec_context.sample_aspect_ratio if stream.codec_context else None)
    if not value or not value.numerator or not value.denominator:
        return None
    sar = as_fraction(value)
    if rotation in (90, -90, 270):
        sar = 1 / sar
    return None if sar == 1 else sar


def _raise_if_out_of_memory(exc: av.error.FFmpegError) -> None:
    """An allocation or thread-creation failure is no damaged packet: say so instead of skipping."""
    if getattr(exc, "errno", None) in (errno.ENOMEM, errno.EAGAIN):
        raise MemoryError(f"decoding failed for lack of memory ({ffmpeg_reason(exc)})") from exc


def lasting(frame: DecodedFrame, until: float | None) -> DecodedFrame:
    """`frame`, shown until `until` (the next frame's time, where the stream ends) when that is
    later, else as long as its packet says: an MP4's packet durations are its decode order's, so
    with B-frames they are other frames' (a phone clip's last frame lasted 1/30 s, one before it
    0.67 s), and a Matroska's last block may carry only the track's default duration."""
    if until is not None and until > frame.time:
        frame.duration = until - frame.time
    return frame


def video_info(c: av.container.InputContainer, vs: av.video.stream.VideoStream, path: Path) -> VideoInfo:
    """What `path`'s container and its video stream `vs` say of the video (VideoReader.info; a
    --no-realtime camera file's, once read, for where it ends: read_end)."""
    cc = vs.codec_context
    if not cc.width or not cc.height:
        raise InputError(f"{path}: the video stream has no frame size; the file is corrupt")
    rate = as_fraction(stream_rate(c, vs) or Fraction(30))
    tb = as_fraction(vs.time_base or Fraction(1, 90000))
    origin = timeline_origin(c)
    start = float(vs.start_time * tb) - origin if vs.start_time is not None else 0.0
    duration = _stream_duration(c, vs, tb, start)
    rotation = _stream_rotation(vs)
    w, h = (cc.height, cc.width) if rotation in (90, -90, 270) else (cc.width, cc.height)
    sar = sample_aspect(vs, rotation)
    kept_audio = audio_order(c)  # an unknown audio codec: not kept
    short = cut_short(c, path)
    audio = c.streams[kept_audio[0]].codec_context.name if kept_audio else None
    chapters = _chapters(c, origin)
    attached = attachment_streams(c)  # kept apart: a Matroska output copies them
    others: list[str] = ["timecode" if _is_timecode_track(s) else s.type for s in c.streams
                         if s.type not in ("video", "audio", "subtitle", "attachment")
                         and not (chapters and _is_chapter_track(s))]
    others += ["video"] * (len(c.streams.video) - 1 - sum(s.type == "video" for s in attached))
    others += ["audio"] * (len(c.streams.audio) - len(kept_audio))
    return VideoInfo(path=path, width=w, height=h, rate=rate, time_base=as_fraction(tb),
                     start_time=max(0.0, start), frames=_shown_frames(_stored_frames(c, vs), duration, rate),
                     duration=duration,
                     rotation=rotation, codec=cc.name, audio_codec=audio, other_streams=tuple(others),
                     attachments=tuple(attachment_name(s) for s in attached),
                     subtitles=tuple(codec_name(s) for s in c.streams.subtitles),
                     origin=origin, sample_aspect=sar, chapters=chapters,
                     cut_short=short, mirror=track_mirror(c, vs),
                     timecode=input_timecode(c, vs), end=None if short else stored_end(c, vs, origin),
                     colour=Colour.described(cc, cc.format.name if cc.format else None, cc.height),
                     held_back=DecodeTimes.LOOKAHEAD if DecodeTimes.needed(c, vs) else 0)


def read_end(info: VideoInfo, decoder: VideoDecoder, *, says_end: bool = True) -> ReadEnd:
    """Once `decoder` has read `info`'s video and ended: how the read ended against the header
    (decoder.frames_out frames read), said in one warning where short of it (with the damage,
    where packets were skipped; what the output loses only where one is made: decoder.writes),
    for `livecam video` and a --no-realtime `run --camera FILE` alike; its last_end is where the
    last frame ends. `says_end` False: the caller says an early end itself (verify's verdict)."""
    count = decoder.frames_out
    ending = ReadEnd.of(info, decoder.name, count, (decoder.last_time or 0.0) + decoder.timeline.step,
                        restarted=decoder.timeline.restarts > 0)
    if ending.skipped(decoder.bad_packets):
        # The same damage as the skipped packets: said in their one line.
        decoder.report(f"{ending.expected - count} of the {ending.expected} frames could not be decoded"
                       + ("; the output skips them" if decoder.writes else ""))
    elif ending.short:
        ended = ending.said(writes=decoder.writes)
        if decoder.bad_packets:
            decoder.report(ended)
        elif says_end:
            log.warning("warning: %s", ended)
    decoder.report()  # nothing when said above or undamaged
    return ending


def held_until_next(frames: Generator[DecodedFrame, None, None],
                    last_end: Callable[[], float | None]) -> Generator[DecodedFrame, None, None]:
    """`frames`, each held until the next says how long it lasts (`lasting`), the last until
    `last_end()`, asked once the read has ended so that it can weigh what the read met (damage,
    a restarted timeline, a cut). A read that fails (an Exception) hands on the frame it holds,
    read before the failure (--keep-partial keeps it), then raises; one stopped (GeneratorExit:
    its consumer stopped early; Ctrl-C) hands on nothing more."""
    held: DecodedFrame | None = None
    try:
        for frame in frames:
            if held is not None:
                yield lasting(held, frame.time)
            held = frame
    except Exception:
        if held is not None:
            yield held
        raise
    finally:  # one that ends early (a consumer that stopped: GeneratorExit) ends the read now, not when collected
        frames.close()
    if held is not None:
        yield lasting(held, last_end())


def stored_end(container: av.container.InputContainer, stream: av.video.stream.VideoStream,
               origin: float) -> float | None:
    """Where the video stream ends on frames()'s timeline as its container stores it (an
    MP4/MOV track's duration, a Matroska DURATION tag); None for other containers, whose
    durations are estimates."""
    tb = stream.time_base
    if "mov" in container.format.name.split(",") and stream.duration and tb:
        return float((int(stream.start_time or 0) + stream.duration) * tb) - origin
    if "matroska" in container.format.name:
        end = _tagged_end(stream)
        return end - origin if end is not None else None
    return None


def frame_duration(frame: av.VideoFrame) -> float | None:
    """How long `frame` is shown, in seconds, as its packet says (an MP4's sample table, a
    Matroska block's duration); None when unknown."""
    duration = getattr(frame, "duration", None)
    if not duration or duration < 0 or not frame.time_base:
        return None
    return float(duration * frame.time_base)


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
            for frame in c.decode(c.streams[stream.index]):
                return _snap(float(getattr(frame, "rotation", 0) or 0))
    except av.error.FFmpegError:
        return 0
    return 0


def _snap(degrees: float) -> int:
    """Nearest multiple of 90 in (-180, 180]; odd angles are not supported and snap."""
    k = int(round(degrees / 90.0)) % 4
    return {0: 0, 1: 90, 2: 180, 3: -90}[k]


def quarter_turns(frame: av.VideoFrame, mirror: tuple[int, int] | None = None) -> int:
    """Counterclockwise quarter turns (0-3) that make the frame upright: its display rotation
    (phones record sideways and say so), or with `mirror` (track_mirror's) the turn that follows
    the mirror."""
    degrees = float(getattr(frame, "rotation", 0) or 0)
    if mirror is not None:
        degrees = -math.degrees(math.atan2(mirror[1], mirror[0]))
    return int(round(degrees / 90.0)) % 4


def upright(image: np.ndarray, turns: int, mirrored: bool = False) -> np.ndarray:
    """A frame's BGR `image` mirrored left-right first when `mirrored`, then turned `turns`
    quarter turns counterclockwise (quarter_turns')."""
    if mirrored:
        image = image[:, ::-1]
    if turns:
        image = np.rot90(image, turns)  # counterclockwise for positive k, as the rotation is
    return np.ascontiguousarray(image) if turns or mirrored else image


def track_mirror(container: av.container.InputContainer, stream: av.stream.Stream) -> tuple[int, int] | None:
    """For an MP4/MOV track whose display matrix mirrors (a selfie app's), the first row of that
    matrix less its mirror (what FFmpeg's rotation is read from); None when it does not mirror.
    FFmpeg reads a mirror as a turn by 180 degrees (such a clip came out upside down), and PyAV
    gives the matrix only as frame side data, whose reading ties every frame in a reference cycle
    (collecting those crashed PyAV 18.1); so the track header (tkhd) is read from the file."""
    if "mov" not in container.format.name.split(","):
        return None
    name = container.name  # local_path's: "file:" before a name that looks like a URL
    if name.startswith("file:") and not os.path.exists(name):
        name = name[len("file:"):]
    if not os.path.isfile(name):  # a pipe is read once, by the demuxer
        return None
    try:
        with open(name, "rb") as f:
            f.seek(0, os.SEEK_END)
            moov = next((b for b in boxes(f, 0, f.tell()) if b.kind == b"moov"), None)
            traks = [b for b in boxes(f, moov.start, moov.end) if b.kind == b"trak"] if moov else []
            if stream.index >= len(traks):  # the mov demuxer makes one stream of each track, in order
                return None
            trak = traks[stream.index]
            tkhd = next((b for b in boxes(f, trak.start, trak.end) if b.kind == b"tkhd"), None)
            if tkhd is None:
                return None
            f.seek(tkhd.start)
            header = f.read(52 + 36)
    except OSError:
        return None
    at = 52 if header[:1] == b"\x01" else 40  # version 1: 64-bit times
    if len(header) < at + 36:
        return None
    a, b, _, c, d = struct.unpack_from(">5i", header, at)
    return (-a, -b) if a * d - b * c < 0 else None
