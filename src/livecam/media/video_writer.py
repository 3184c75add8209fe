"""Video output with PyAV, the one writer (`video`, `run --output FILE`, `demo`, `bench`):
encoder and container checks, frame encoding with the input's timestamps (frames of another size
letterboxed, non-square pixels kept), every audio track (the default one first) copied where the
container is commonly played with its codec (AUDIO_COPY_CODECS) or re-encoded, or given samples
encoded; subtitles copied or converted (subtitle_fate); the start timecode (set_timecode);
provenance tags.

The writer owns its output container and must be used from one thread. Each audio and subtitle
track is read from its own opening of the input file, put on the reader's timeline and
interleaved as the video advances, so nothing is buffered beyond about a second of audio. Each
opening demuxes the whole file again, which costs little: 3 AAC tracks beside 8 Mb/s 720p H.264
took 0.07 s of CPU per 10 s of video (0.015 s in one demux pass of all three), against 37 s for
`livecam video` on that clip. Errors name the user's output (OutputSpec.target), never the
temporary file being written.
"""

from __future__ import annotations

import errno
import io
import logging
import os
import re
from dataclasses import dataclass, field, replace
from fractions import Fraction
from pathlib import Path
from typing import Any, Iterator, Literal, Protocol, Sequence, cast

import av
import numpy as np
from av.audio.frame import AudioFrame
from av.audio.stream import AudioStream
from av.subtitles.codeccontext import SubtitleCodecContext
from av.subtitles.stream import SubtitleStream
from av.video.codeccontext import VideoCodecContext
from av.video.stream import VideoStream

from livecam.atomic import output_error
from livecam.console import agree, counted
from livecam.errors import InputError, OutputError
from livecam.machine import encoder_threads
from livecam.media.colour import LIMITED, SMPTE170M, Colour, ColourConverter, tag
from livecam.native_stderr import dropping
from livecam.media.containers import local_path, open_container
from livecam.media.images import UNMARKABLE_FORMATS, WRITE_FORMATS
from livecam.media.video_reader import (Chapter, Fitter, Timeline, audio_order, codec_name, is_default,
                                         read_attachments, timeline_origin)

log = logging.getLogger("livecam")

# Output extension -> FFmpeg muxer. AVI is read but not written: it holds one fixed frame rate and
# no B-frame timestamps, so a variable-rate input's timing (and x264's reordering) would be lost.
CONTAINERS: dict[str, str] = {".mp4": "mp4", ".m4v": "mp4", ".mov": "mov", ".mkv": "matroska", ".webm": "webm"}
FORMAT_NAMES: dict[str, str] = {"mp4": "MP4", "mov": "MOV", "webm": "WebM", "matroska": "Matroska"}  # in notes
# Video codecs each container may hold (FFmpeg codec names); None: anything the muxer accepts.
CONTAINER_VIDEO_CODECS: dict[str, frozenset[str] | None] = {
    "webm": frozenset({"vp8", "vp9", "av1"}),
    "mp4": frozenset({"h264", "hevc", "av1", "vp9", "mpeg4"}),
    "mov": frozenset({"h264", "hevc", "mpeg4", "prores"}),
    "matroska": None,
}
# Encoders offered when the requested one is unavailable (only those that open are listed).
ENCODER_CANDIDATES: tuple[str, ...] = (
    "libx264", "libx265", "libvpx-vp9", "libvpx", "libsvtav1", "libaom-av1",
    "h264_nvenc", "hevc_nvenc", "av1_nvenc", "h264_qsv", "hevc_qsv", "h264_amf", "hevc_amf",
    "h264_videotoolbox", "hevc_videotoolbox", "mpeg4",
)
# libx264 grows its frame pool over its first frames (look-ahead, B-frames, frame threads,
# references: under 64 at any preset) and allocates nothing more until the flush.
X264_POOL_FRAMES = 64
# libx264 reports a failed allocation straight to fd 2, before livecam's one line (out_of_memory)
_X264_MALLOC = re.compile(rb"x264 \[error\]: malloc of size \d+ failed\r?\n?")
_AUDIO_LEAD_S = 0.0  # audio is muxed up to the current video time (a cut keeps them together)


def container_format(path: Path) -> str:
    path = Path(path)
    suffix = path.suffix.lower()
    fmt = CONTAINERS.get(suffix)
    if fmt is None:
        extensions = ", ".join(sorted(CONTAINERS))
        if suffix == ".gif":  # what a user making a clip to share may well type
            raise InputError(f"cannot write {path.name}: livecam does not write animated GIFs (256 colours, no "
                             f"sound, no room for the tags that say the video is synthetic); write "
                             f"{path.stem}.mp4 instead (or another of {extensions})")
        if suffix in WRITE_FORMATS or suffix in UNMARKABLE_FORMATS:
            raise InputError(f"cannot write a video to {path.name}: {suffix} is a picture's extension; "
                             f"name the output {path.stem}.mp4 (or another of {extensions})")
        raise InputError(f"cannot tell the output format from {path.name!r}: "
                         f"use one of the extensions {extensions}")
    return fmt


# FFmpeg's own MPEG encoders take no CRF: left alone they aim at 200 kb/s whatever the
# frame size (--video-quality did nothing, and a 1080p mpeg4 output was blocks). Their constant
# quality is a fixed quantiser (qmin = qmax, 1 best .. 31 worst).
QSCALE_ENCODERS: frozenset[str] = frozenset({"mpeg4", "mpeg2video"})


def mpeg_qscale(quality: int) -> int:
    """The MPEG quantiser that matches a CRF-like `quality` (0..51): H.264's quantiser step is
    0.625 * 2^(QP/6), MPEG's is 2 * qscale, so qscale = 0.3125 * 2^(QP/6) (CRF 18 -> 2, 23 -> 4)."""
    return min(31, max(1, round(0.3125 * 2 ** (quality / 6))))


def encoder_options(name: str, quality: int) -> dict[str, str]:
    """Private options that give `name` a CRF-like `quality` (0 best .. 51 worst); {} for an
    encoder with no quality setting livecam knows (quality_ignored)."""
    q63 = str(round(quality * 63 / 51))
    if name in QSCALE_ENCODERS:
        q = str(mpeg_qscale(quality))
        return {"qmin": q, "qmax": q}
    if name in ("libx264", "libx265"):
        # `faster`: quicker than x264's default at nearly the same fidelity for a given CRF
        # (`veryfast` is about twice as quick again, at -0.2 dB PSNR and visibly more noise).
        opts = {"crf": str(quality), "preset": "faster"}
        if name == "libx265":
            opts["x265-params"] = "log-level=error"  # x265 prints a banner on stderr otherwise
        return opts
    if name in ("libvpx-vp9", "libvpx"):
        # Constant quality needs a zero target bitrate (VP9; VP8's: _vp8_quantiser); row-mt for the two-core laptops.
        return {"crf": q63, "b": "0", "deadline": "good", "cpu-used": "5", "row-mt": "1", **_vp8_quantiser(name, q63)}
    if name == "libaom-av1":
        return {"crf": q63, "b": "0", "cpu-used": "6", "row-mt": "1"}
    if name == "libsvtav1":
        return {"crf": q63, "preset": "8"}
    if name.endswith("_nvenc"):
        return {"rc": "vbr", "cq": str(max(1, quality)), "b": "0", "preset": "p4"}
    if name.endswith("_qsv"):
        return {"global_quality": str(max(1, quality))}
    if name.endswith("_amf"):
        return {"rc": "cqp", "qp_i": str(quality), "qp_p": str(quality)}
    if name.endswith("_videotoolbox"):
        return {"q:v": str(max(1, 100 - quality * 2))}
    return {}


# VP8 has no constant-quality mode: given no bitrate, FFmpeg's libvpx holds its constrained
# quality to 256 kb/s whatever the crf (a moving 720p pattern came back a mean 7.7 levels off at
# any --video-quality, a flat grey 1-4), and under a cap no video reaches its key frames take the
# best quantiser. So its constant quality is a fixed quantiser, as mpeg4's (QSCALE_ENCODERS); that
# pattern, 24 frames: --video-quality 18 -> 144 KB, 3.1 levels off; 40 -> 45 KB, 4.7; 0 -> 1.8 MB,
# 2.4 (the 4:2:0 chroma's). qmin = crf also lets 0 open (VP8's default minimum, 4, refused it).
def _vp8_quantiser(name: str, q63: str) -> dict[str, str]:
    return {"qmin": q63, "qmax": q63, "b": "1G"} if name == "libvpx" else {}


def quality_ignored(name: str) -> bool:
    """Whether `name` is one of the encoders --video-quality has no setting for (ffv1, prores...)."""
    return not encoder_options(name, 0)  # the options of the others depend on the quality


def _quiet_encoder_logs(name: str) -> None:
    """SVT-AV1 prints a banner on stderr when opened unless its own log level says otherwise
    (read from the environment; a user's own setting is kept)."""
    if name == "libsvtav1":
        os.environ.setdefault("SVT_LOG", "1")


def _pix_fmt(codec: av.Codec) -> str:
    formats = [f.name for f in (codec.video_formats or [])]
    return "yuv420p" if not formats or "yuv420p" in formats else formats[0]


def encoder_available(name: str, rate: Fraction = Fraction(30), time_base: Fraction | None = None) -> bool:
    """True when FFmpeg has the encoder and it opens here (hardware ones need their device), at
    `rate` frames a second with timestamps in ticks of `time_base` (None: one frame): MPEG-1/2
    take only their standard rates, in ticks of one frame."""
    try:
        codec = av.Codec(name, "w")
        if codec.type != "video":
            return False
        _quiet_encoder_logs(name)
        ctx = av.CodecContext.create(codec)
        if not isinstance(ctx, VideoCodecContext):  # codec.type said video; PyAV types it as any context
            return False
        ctx.width, ctx.height = 256, 256
        ctx.pix_fmt = _pix_fmt(codec)
        ctx.time_base = time_base or 1 / rate
        ctx.framerate = rate
        ctx.options = encoder_options(name, 23)
        ctx.open()
        return True
    except (av.error.FFmpegError, ValueError, TypeError):
        return False


def bitstream_colour(encoder: str, colour: Colour) -> Colour:
    """`colour` as `encoder`'s bitstream can carry it. VP8's says limited range and BT.601's
    matrix whatever the container says, and decoders go by it: a full-range input is encoded
    limited, an HD (BT.709) one in BT.601 (a saturated red came back 13 levels off)."""
    if encoder == "libvpx":
        return replace(colour, range=LIMITED, matrix=SMPTE170M)
    return colour


# `--video-encoder auto`: the first of these that opens, per container.
AUTO_ENCODERS: dict[str, tuple[str, ...]] = {
    "webm": ("libvpx-vp9", "libvpx", "libsvtav1", "libaom-av1"),
}
AUTO_ENCODERS_DEFAULT: tuple[str, ...] = ("libx264", "libx265", "mpeg4")


def resolve_encoder(name: str, output: Path) -> str:
    """`name`, or for "auto" the usual encoder for `output`'s container (libx264; VP9 for WebM).
    An unknown extension gets the default here; container_format() reports it."""
    if name != "auto":
        return name
    candidates = AUTO_ENCODERS.get(CONTAINERS.get(Path(output).suffix.lower(), ""), AUTO_ENCODERS_DEFAULT)
    return next((e for e in candidates if encoder_available(e)), candidates[0])


def available_encoders() -> list[str]:
    return [name for name in ENCODER_CANDIDATES if encoder_available(name)]


# The frame sizes these encoders open with (the writer's even size), as (smallest side, largest
# width, largest height): outside them they fail to open, after the models loaded, with a generic
# error (libx264's read as "out of memory"; libx265 and SVT-AV1 gave "Invalid argument", SVT-AV1
# with lines of its own). Measured with PyAV 18's encoders; one not listed takes 2 px and up.
# SVT-AV1's 26: the one in PyAV 15 and 16 kills the process (SIGFPE)
# or hangs on frames under 26 px wide; 17's takes 4.
ENCODER_SIZES: dict[str, tuple[int, int, int]] = {
    "libx264": (2, 16384, 16384), "libx265": (16, 1 << 20, 1 << 20), "libvpx": (2, 16383, 16383),
    "mpeg4": (2, 8191, 8191), "libsvtav1": (26, 16384, 8704),
}


def encoder_sizes(name: str) -> tuple[int, int, int]:
    """(smallest side, largest width, largest height) that `name` opens for."""
    return ENCODER_SIZES.get(name, (2, 1 << 20, 1 << 20))


def encoded_size(width: int, height: int) -> tuple[int, int]:
    """The size the writer encodes a width x height video at: even sides, as 4:2:0 chroma
    needs (an odd last column or row is left out)."""
    return width & ~1, height & ~1


def say_trimmed(width: int, height: int) -> None:
    """A note when the output (a video's, a recording's) loses the input's odd last column or row."""
    size = encoded_size(width, height)
    if size != (width, height):
        sides = [side for side, odd in (("column", width % 2), ("row", height % 2)) if odd]
        log.warning("note: the output is %dx%d, the input %dx%d: video is encoded with even sides (4:2:0 colour), "
                    "so its last %s of pixels %s left out", *size, width, height, " and ".join(sides),
                    agree(len(sides), "is", "are"))


def encoder_fits(name: str, width: int, height: int) -> bool:
    """Whether `name` opens for frames of `width` x `height` (made even, as the writer does)."""
    least, most_w, most_h = encoder_sizes(name)
    w, h = encoded_size(width, height)
    return least <= min(w, h) and w <= most_w and h <= most_h


def muxer_holds(fmt: str, encoder: str) -> bool:
    """Whether FFmpeg's `fmt` muxer takes `encoder`'s stream, asked of the muxer itself (for the
    containers CONTAINER_VIDEO_CODECS leaves open: Matroska refuses png, gif, huffyuv, utvideo...,
    which failed as an internal error after the models loaded)."""
    try:
        with av.open(io.BytesIO(), "w", format=fmt) as probe:
            probe.add_stream(encoder, rate=30)
    except (av.error.FFmpegError, ValueError):
        return False
    return True


def check_encoder(name: str, output: Path, size: tuple[int, int] | None = None,
                  timing: tuple[Fraction, Fraction] | None = None) -> None:
    """Raise InputError when `name` cannot encode here, cannot go into `output`'s container, or
    cannot encode frames of `size` (width, height) or with `timing` (frame rate, time base; the
    writer's OutputSpec's); None: not checked."""
    fmt = container_format(output)
    if not encoder_available(name):
        raise InputError(f"video encoder {name!r} is not available here; available: "
                         f"{', '.join(available_encoders()) or 'none'}")
    codec = av.Codec(name, "w").canonical_name
    allowed = CONTAINER_VIDEO_CODECS.get(fmt)

    def holds(encoder: str) -> bool:
        return (av.Codec(encoder, "w").canonical_name in allowed) if allowed is not None else muxer_holds(fmt, encoder)

    def suggested() -> list[str]:
        """The encoders here that pass every check below: one that fails the next wastes a try
        (mpeg4 was offered for a 90 kHz input it cannot time)."""
        return [e for e in available_encoders() if holds(e) and (size is None or encoder_fits(e, *size))
                and (timing is None or encoder_available(e, *timing))]

    if not holds(name):
        raise InputError(f"{Path(output).suffix} files cannot hold {codec} video from {name!r}; "
                         f"use --video-encoder {' or '.join(suggested()) or 'libvpx-vp9'} or another extension")
    if size is not None and not encoder_fits(name, *size):
        least, most_w, most_h = encoder_sizes(name)
        limits = f"at least {least} pixels a side" if min(encoded_size(*size)) < least else \
            (f"at most {most_w} pixels a side" if most_w == most_h else f"at most {most_w}x{most_h} pixels")
        others = suggested()
        fix = f"use --video-encoder {' or '.join(others)}" if others else "no encoder here takes it; resize the video first"
        raise InputError(f"{name} encodes frames of {limits}, and this video is {size[0]}x{size[1]}; {fix}")
    if timing is not None and not encoder_available(name, *timing):
        # mpeg2video failed "Invalid argument" once the frames were being encoded: it takes only
        # standard rates in ticks of one frame, and a video keeps its input's finer ticks without --fps
        others = suggested()
        raise InputError(f"{name} does not encode this video's timing ({float(timing[0]):.4g} fps, in ticks of "
                         f"{timing[1]} s); give --fps with a standard rate (such as 25 or 30)"
                         + (f", or use --video-encoder {' or '.join(others)}" if others else ""))


def add_video_stream(out: av.container.OutputContainer, encoder: str, rate: Fraction | int) -> VideoStream:
    """out.add_stream() for a video encoder named at run time."""
    stream = out.add_stream(encoder, rate=rate)
    if not isinstance(stream, VideoStream):
        raise InputError(f"{encoder!r} is not a video encoder; use --video-encoder libx264 or another video encoder")
    tag_for_players(out, stream)
    return stream


def tag_for_players(out: av.container.OutputContainer, stream: VideoStream) -> None:
    """HEVC in MP4/MOV as 'hvc1': FFmpeg's 'hev1' is refused by QuickTime, iOS and Safari, and
    'hvc1' plays everywhere (the same bitstream; only the sample entry's name differs). Also for
    a stream added from a template, which starts untagged."""
    if stream.codec_context.codec.canonical_name == "hevc" and out.format.name in ("mp4", "mov"):
        stream.codec_context.codec_tag = "hvc1"


def set_timecode(stream: VideoStream, timecode: str | None, rate: Fraction | None = None) -> None:
    """Give the output's video `stream` a start timecode (HH:MM:SS:FF, timecode.conform'd to its
    rate): FFmpeg's MP4/MOV muxer writes it as a tmcd track, which editors read, Matroska and
    WebM as a TIMECODE tag. None: none. `rate`: the frame rate of a stream added from a template,
    which has none, and the MP4/MOV muxer counts the timecode's frames at it (without one it
    refused the file, EINVAL; PyAV 18 passes it on from the codec context, PyAV 17 writes no
    timecode for such a stream)."""
    if timecode is None:
        return
    if rate:
        stream.codec_context.framerate = rate
    stream.metadata["timecode"] = timecode


# Audio codecs copied as they are into each container: those its common players read. PCM in
# MP4 plays as noise or not at all in many players (and Debian's ffmpeg 5.1), Vorbis in MP4 is
# an oddity; FLAC in MP4 still needs FFmpeg's -strict; Opus in MP4 plays in browsers, VLC and
# FFmpeg but not in QuickTime, so MOV re-encodes it. PCM is MOV's own uncompressed audio (ProRes
# and camera files carry it; sowt, twos, in24, fl32): copied, not made lossy. Everything else
# becomes AAC (Opus for WebM), said in one line. None: the container holds anything FFmpeg can put
# there (Matroska).
_MOV_PCM = frozenset(f"pcm_{kind}{end}" for kind in ("s16", "s24", "s32", "f32", "f64") for end in ("le", "be"))
AUDIO_COPY_CODECS: dict[str, frozenset[str] | None] = {
    "mp4": frozenset({"aac", "mp3", "alac", "ac3", "eac3", "opus"}),
    "mov": frozenset({"aac", "mp3", "alac", "ac3", "eac3"}) | _MOV_PCM,
    "webm": frozenset({"opus", "vorbis"}),
    "matroska": None,
}


@dataclass(frozen=True, eq=False)
class AudioSamples:
    """Sound to write beside the video instead of an input's audio (the demo's tone)."""

    samples: np.ndarray  # float32 mono, -1..1
    rate: int


@dataclass(frozen=True)
class OutputSpec:
    path: Path  # the file to write (the temporary one)
    format: str  # FFmpeg muxer name
    width: int
    height: int
    rate: Fraction  # nominal frame rate
    time_base: Fraction  # of the timestamps given to write()
    encoder: str = "libx264"
    quality: int = 18
    metadata: dict[str, str] = field(default_factory=dict)
    audio_from: Path | None = None  # input whose audio tracks are kept (audio_order)
    target: Path | None = None  # the user's output, named in messages (`path` is its temporary file)
    sample_aspect: Fraction | None = None  # of non-square pixels, kept in the output (VideoInfo's)
    live: bool = False  # encoder settings that keep up with a live stream (no look-ahead)
    audio: AudioSamples | None = None  # sound to write (instead of audio_from)
    colour: Colour | None = None  # the input's (VideoInfo.colour); None: what players assume for the size
    lookahead: int | None = None  # frames the encoder may look ahead (its memory); None: the preset's
    chapters: tuple[Chapter, ...] = ()  # the input's (VideoInfo.chapters)
    subtitles_from: Path | None = None  # input whose subtitle streams are kept (subtitle_fate)
    attachments_from: Path | None = None  # input whose attached files are kept (copy_attachments)
    timecode: str | None = None  # start timecode of the first frame (set_timecode), at `rate`
    smaller: str | None = None  # the option that makes the file smaller, for a size limit (atomic.os_error_message)

    @property
    def shown_path(self) -> Path:
        return self.target or self.path


def live_encoder_options(codec: str) -> dict[str, str]:
    """Options that let `codec` keep up with a live stream on the output thread."""
    if codec in ("libx264", "libx265"):
        return {"preset": "veryfast", "tune": "zerolatency"}
    if codec in ("libvpx-vp9", "libvpx"):
        # Real-time speed, constant quality (zero target bitrate), no look-ahead (no added delay).
        return {"deadline": "realtime", "cpu-used": "8", "row-mt": "1", "lag-in-frames": "0", "crf": "30", "b": "0",
                **_vp8_quantiser(codec, "30")}
    if codec in QSCALE_ENCODERS:  # 200 kb/s otherwise; CRF 23 is what the live libx264 gets (its default)
        return encoder_options(codec, 23)
    return {}


def set_encoder_threads(context: VideoCodecContext, spec: OutputSpec) -> None:
    """libx264 for a file: frame threads, not PyAV's default slices, so that an encode call hands
    the frame on instead of encoding it there (on the GPU machine's 16 cores a 720p call took
    10 ms, the in-order writer's whole share). Live keeps slices (zerolatency: no added delay)."""
    if spec.encoder == "libx264" and not spec.live:
        context.thread_type = "FRAME"
        context.thread_count = encoder_threads()


def lookahead_options(codec: str, frames: int | None) -> dict[str, str]:
    """Options that hold `codec`'s look-ahead to `frames` (pipeline/budget.py's memory plan)."""
    if frames is None:
        return {}
    if codec == "libx264":
        return {"rc-lookahead": str(frames)}
    if codec in ("libvpx-vp9", "libvpx"):
        return {"lag-in-frames": str(frames)}
    return {}


def out_of_memory(path: Path, max_memory_gb: float | None = None) -> OutputError:
    """The one line for a run that ran out of memory while producing `path`."""
    if max_memory_gb is not None:
        return OutputError(f"writing {path} failed: out of memory within --max-memory {max_memory_gb:g}; raise it "
                           "or use fewer --execution-threads")
    return OutputError(f"writing {path} failed: out of memory; close other programs, use fewer "
                       "--execution-threads or a smaller video, or give --max-memory GB to size the run")


class _Track(Protocol):
    @property
    def mode(self) -> str | None: ...  # None: the input's audio holds no packet

    def pump(self, until: float | None, final: bool = False) -> None: ...
    def close(self) -> None: ...


# Containers that hold attached files (fonts for ASS subtitles, cover art). WebM's muxer takes
# them too, but WebM has no place for them (its players need not read such a file).
ATTACHMENT_FORMATS: frozenset[str] = frozenset({"matroska"})


def copy_attachments(out: av.container.OutputContainer, source: Path) -> int:
    """Every file attached to `source` (video_reader.read_attachments) added to `out` where its
    container holds them (ATTACHMENT_FORMATS; written with the header); returns how many."""
    if out.format.name not in ATTACHMENT_FORMATS:
        return 0
    with open_container(local_path(source)) as src:
        files = read_attachments(src)
    for file in files:
        out.add_attachment(file.name, file.mimetype, file.data)
    return len(files)


def dropped_attachments(names: Sequence[str], fmt: str) -> str | None:
    """What the 'not copied' note says of the input's attached files (`names`) a `fmt` output
    leaves out, with how to keep them; None when it keeps them (or there are none)."""
    if not names or fmt in ATTACHMENT_FORMATS:
        return None
    shown = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
    return (f"{len(names)} attached file{'s' if len(names) > 1 else ''} ({shown}): "
            f"{FORMAT_NAMES.get(fmt, fmt)} outputs leave them out; write a .mkv output to keep them")


def open_output(path: Path, fmt: str, metadata: dict[str, str], shown: Path,
                chapters: Sequence[Chapter] = ()) -> av.container.OutputContainer:
    """A `fmt` output container at `path` with `metadata` tags (kept in MP4/MOV too) and
    `chapters` (every output container holds them: Matroska and WebM natively, MP4 and MOV as a
    chapter track); errors name `shown`, the user's path."""
    options = {"movflags": "+use_metadata_tags"} if fmt in ("mp4", "mov") else {}
    try:
        out = av.open(local_path(path), mode="w", format=fmt, options=options)
    except OSError as exc:
        raise output_error(shown, exc) from exc
    out.metadata.update(metadata)
    if chapters:
        # PyAV 19's stubs type time_base as AVRational, earlier ones as Fraction; both take a Fraction
        entries: list[Any] = [{"id": i + 1, "start": c.start, "end": c.end, "time_base": c.time_base,
                               "metadata": dict(c.metadata)} for i, c in enumerate(chapters)]
        out.set_chapters(entries)
    return out


def _describe_as(stream: av.stream.Stream, ins: av.stream.Stream, default: bool) -> None:
    """Give an output `stream` the input's language and title, and mark it default or not (the
    first audio track is the default one, whatever its place in the input). An MP4/MOV keeps a
    track's title in 'name' (as FFmpeg reads it back) and players show its handler name, so the
    title goes in both there."""
    title = ins.metadata.get("title") or ins.metadata.get("name")  # Matroska's, MP4's
    if ins.metadata.get("language"):
        stream.metadata["language"] = ins.metadata["language"]
    if title:
        stream.metadata["title"] = title
        if stream.container.format.name in ("mp4", "mov"):
            stream.metadata["handler_name"] = title
    try:
        stream.disposition = av.stream.Disposition.default if default else av.stream.Disposition(0)
    except (AttributeError, TypeError):  # a PyAV whose disposition is read-only: the muxer's choice
        pass


class _Tracks:
    """Every audio track an input's audio gives an output (audio_order), as one _Track."""

    def __init__(self, out: av.container.OutputContainer, source: Path) -> None:
        self.tracks: list[_AudioTrack] = []
        try:
            with open_container(local_path(source)) as probe:
                order = audio_order(probe)
                # notes name a track by its place among the input's audio tracks, and its language
                names = {s.index: f"audio track {n + 1}" + (f" ({s.language})" if s.language not in (None, "und")
                                                             else "") for n, s in enumerate(probe.streams.audio)}
            changes = _MidwayChanges(source, order)
            for index in order:
                default = not any(t.mode for t in self.tracks)  # the first track kept is the default one
                self.tracks.append(_AudioTrack(out, source, index, default=default,
                                               named=names[index] if len(order) > 1 else "", changes=changes))
        except BaseException:
            self.close()
            raise

    @property
    def mode(self) -> str | None:
        """'reencode' when any track is re-encoded, 'copy' when all are copied, None when none is kept."""
        modes = {t.mode for t in self.tracks} - {None}
        return "reencode" if "reencode" in modes else "copy" if modes else None

    @property
    def count(self) -> int:
        return sum(1 for t in self.tracks if t.mode)

    def pump(self, until: float | None, final: bool = False) -> None:
        for track in self.tracks:
            track.pump(until, final)

    def close(self) -> None:
        for track in self.tracks:
            track.close()


def input_audio_track(out: av.container.OutputContainer, source: Path) -> _Track:
    """Every audio stream of `source` (audio_order: the default one first) added to `out`, to be
    muxed with pump() as the video advances (copied or re-encoded, as VideoWriter does it)."""
    return _Tracks(out, source)


def tracks_written(audio: _Track | None, subtitles: int) -> tuple[int, int]:
    """How many audio and subtitle tracks an output holds besides its video (a writer's, a join's)."""
    count = audio.count if isinstance(audio, _Tracks) else int(audio is not None and audio.mode is not None)
    return count, subtitles


class VideoWriter:
    """Encodes BGR frames with given timestamps into one container; one thread only.

    Every frame is fitted to the spec's size (a frame of another size is letterboxed, said once);
    timestamps must start near 0 (VideoReader's do) and are nudged forward when they do not rise.
    Errors name `spec.target`, the user's path, never the temporary file."""

    def __init__(self, spec: OutputSpec) -> None:
        self.spec = spec
        self.frames_written = 0
        # (pts, dts) of every video packet as the encoder gave it, in spec.time_base: a part
        # encoded for a cluster run is joined with these (a container may round its own)
        self.packet_times: list[tuple[int, int | None]] = []
        self._last_pts: int | None = None
        self._last_time: float | None = None
        self._last_duration: float | None = None
        # ticks each frame is shown, by pts, until its packet is muxed: the muxer stores the last
        # one's (a variable-rate clip's last frame lasted one frame at the average rate whatever
        # it lasted in the input, so the video ended up to a gap's length off the input's and its audio)
        self._durations: dict[int, int] = {}
        self._end_pts: int | None = None  # where the last frame's shown time ends, given its duration
        # MP4/MOV time a sample by the next one's decode time: the last packet in decode order
        # (held back until another comes) is what says where the video ends
        self._held: av.Packet | None = None
        self._delay = 0  # the first packet's pts - dts (the encoder's reordering delay)
        self._decode_timed = spec.format in ("mp4", "mov")
        self._audio: _Track | None = None
        self._subtitles: list[_SubtitleTrack] = []
        self.attachments = 0  # attached files copied from spec.attachments_from
        self._out = open_output(spec.path, spec.format, spec.metadata, spec.shown_path, spec.chapters)
        try:
            codec = av.Codec(spec.encoder, "w")
            _quiet_encoder_logs(spec.encoder)
            vs = add_video_stream(self._out, spec.encoder, spec.rate)
            set_timecode(vs, spec.timecode)
            self._w, self._h = encoded_size(spec.width, spec.height)
            self._fitter = Fitter((self._w, self._h), spec.shown_path.name)
            vs.width, vs.height = self._w, self._h
            vs.pix_fmt = _pix_fmt(codec)
            # Encoded and tagged with the input's colour description (range, primaries, transfer, matrix).
            self._colour = bitstream_colour(spec.encoder, spec.colour or Colour.assumed(self._h))
            self._converter = ColourConverter()
            tag(vs.codec_context, self._colour)
            vs.time_base = spec.time_base
            vs.codec_context.time_base = spec.time_base
            vs.codec_context.framerate = spec.rate
            if spec.sample_aspect:
                vs.codec_context.sample_aspect_ratio = spec.sample_aspect
                # the muxer's (MP4 'pasp', Matroska display size); PyAV 19's stubs say AVRational
                cast(Any, vs).sample_aspect_ratio = spec.sample_aspect
            set_encoder_threads(vs.codec_context, spec)
            vs.codec_context.options = {**(live_encoder_options(spec.encoder) if spec.live
                                           else encoder_options(spec.encoder, spec.quality)),
                                        **lookahead_options(spec.encoder, spec.lookahead)}
            self._video = vs
            if spec.audio is not None:
                self._audio = _SamplesTrack(self._out, spec.audio)
            elif spec.audio_from is not None:
                self._audio = _Tracks(self._out, spec.audio_from)
            if spec.subtitles_from is not None:
                self._subtitles = input_subtitle_tracks(self._out, spec.subtitles_from)
            self.attachments = copy_attachments(self._out, spec.attachments_from) if spec.attachments_from else 0
        except OSError as exc:
            self.abort()
            raise output_error(spec.shown_path, exc, spec.smaller) from exc
        except BaseException:
            self.abort()
            raise

    @property
    def audio_mode(self) -> str | None:
        """'copy', 'reencode', 'encode' (given samples) or None (no audio)."""
        return self._audio.mode if self._audio is not None else None

    @property
    def tracks(self) -> tuple[int, int]:
        """How many audio and subtitle tracks the output holds besides its video."""
        return tracks_written(self._audio, len(self._subtitles))

    def write(self, image: np.ndarray, time_s: float, duration_s: float | None = None) -> None:
        """Encode `image` shown at `time_s` for `duration_s` seconds (None: the encoder's one
        frame at spec.rate)."""
        pts = int(round(time_s / self.spec.time_base))
        if self._last_pts is not None and pts <= self._last_pts:
            pts = self._last_pts + 1  # encoders need strictly increasing timestamps
        self._last_pts = pts
        self._last_time = time_s
        self._last_duration = duration_s
        if duration_s is not None and duration_s > 0:
            self._durations[pts] = max(1, int(round(duration_s / self.spec.time_base)))
            self._end_pts = pts + self._durations[pts]
        else:
            self._end_pts = None
        if image.shape[0] != self._h or image.shape[1] != self._w:
            if abs(image.shape[0] - self._h) <= 1 and abs(image.shape[1] - self._w) <= 1:
                image = image[: self._h, : self._w]  # the odd row/column trimmed for 4:2:0
            else:
                image = self._fitter.fit(image)
        try:
            # the conversion allocates too (livecam's own 4:2:0 conversion on PyAV 17)
            frame = self._converter.from_bgr(np.ascontiguousarray(image),
                                             self._video.codec_context.pix_fmt or "yuv420p", self._colour)
            frame.pts = pts
            frame.time_base = self.spec.time_base
            with dropping(_X264_MALLOC, self._allocating()):
                packets = self._video.encode(frame)
            for packet in packets:
                self._mux_video(packet)
            if self._audio is not None:
                self._audio.pump(time_s + _AUDIO_LEAD_S)
            for track in self._subtitles:
                track.pump(time_s)
        except OSError as exc:
            raise output_error(self.spec.shown_path, exc, self.spec.smaller) from exc
        except av.error.FFmpegError as exc:
            raise self._encoder_error("encoding", exc) from exc
        except MemoryError as exc:
            raise out_of_memory(self.spec.shown_path) from exc
        self.frames_written += 1

    def close(self, *, partial: bool = False) -> None:
        """Flush and finalise a valid file. partial: cut the audio where the video stops."""
        try:
            with dropping(_X264_MALLOC, self.spec.encoder == "libx264"):
                packets = self._video.encode(None)
            for packet in packets:
                self._mux_video(packet)
            self._mux_held()
            end = None  # a partial video's audio and subtitles are cut where it stops
            if partial or self.spec.audio is not None:
                end = (self._last_time or 0.0) + (self._last_duration or 1.0 / float(self.spec.rate or 30))
            if self._audio is not None:
                self._audio.pump(end, final=True)
            for track in self._subtitles:
                track.pump(end if partial else None, final=True)
            self._out.close()
        except OSError as exc:
            self._close_quietly()
            raise output_error(self.spec.shown_path, exc, self.spec.smaller) from exc
        except av.error.FFmpegError as exc:
            self._close_quietly()
            raise self._encoder_error("finishing", exc) from exc
        except MemoryError as exc:
            self._close_quietly()
            raise out_of_memory(self.spec.shown_path) from exc
        finally:
            self._close_inputs()

    def _mux_video(self, packet: av.Packet) -> None:
        if packet.pts is not None:
            duration = self._durations.pop(int(packet.pts), None)
            if duration is not None:
                packet.duration = duration
            self.packet_times.append((int(packet.pts), int(packet.dts) if packet.dts is not None else None))
        if not self._decode_timed:
            self._out.mux(packet)
            return
        if len(self.packet_times) == 1 and packet.pts is not None and packet.dts is not None:
            self._delay = int(packet.pts - packet.dts)
        held, self._held = self._held, packet
        if held is not None:
            self._out.mux(held)

    def _mux_held(self) -> None:
        """The last packet in decode order, lasting until the last frame's end (MP4/MOV: with
        B-frames it is not the last frame shown, and the video ended at that frame's start + one
        frame at the average rate)."""
        held, self._held = self._held, None
        if held is None:
            return
        # the samples' durations add up to the video's span (the first is shifted by the delay)
        end = self._end_pts - self._delay if self._end_pts is not None else None
        if end is not None and held.dts is not None and end > held.dts + (held.duration or 0):
            held.duration = end - held.dts
        self._out.mux(held)

    def _allocating(self) -> bool:
        return self.spec.encoder == "libx264" and self.frames_written < X264_POOL_FRAMES

    def _encoder_error(self, doing: str, exc: av.error.FFmpegError) -> OutputError:
        """One line naming the user's output (PyAV's text names the temporary file or a C
        function). libx264 fails on an open encoder only when an allocation fails ("malloc of
        size ... failed", an external-library error): that is memory, as ENOMEM is."""
        external = isinstance(exc, av.error.ExternalError) and self.spec.encoder == "libx264"
        if isinstance(exc, MemoryError) or exc.errno in (errno.ENOMEM, -errno.ENOMEM) or external:
            return out_of_memory(self.spec.shown_path)
        return OutputError(f"{doing} {self.spec.shown_path} failed: {exc.strerror or type(exc).__name__}")

    def abort(self) -> None:
        """Close without caring about the file (the caller removes it)."""
        self._close_quietly()
        self._close_inputs()

    def _close_inputs(self) -> None:
        if self._audio is not None:
            self._audio.close()
        for track in self._subtitles:
            track.close()

    def _close_quietly(self) -> None:
        try:
            self._out.close()
        except (OSError, av.error.FFmpegError):
            pass


def encode_into(out: av.container.OutputContainer, stream: AudioStream,
                frame: AudioFrame | None) -> None:
    """Encode `frame` (None: flush the encoder) and mux what comes out."""
    for packet in stream.encode(frame):
        out.mux(packet)


def copies_audio(codec: str, fmt: str) -> bool:
    """Whether audio in `codec` goes into a `fmt` file as it is (AUDIO_COPY_CODECS)."""
    allowed = AUDIO_COPY_CODECS.get(fmt)
    return allowed is None or codec in allowed


def reencoded_rate(encoder: str, rate: int) -> int:
    """The input's sample rate where the encoder takes it (AAC: 7350 to 96000 Hz), else 48 kHz
    (192 kHz PCM failed the run with "Invalid argument"); Opus always 48 kHz."""
    return rate if encoder == "aac" and rate in (av.Codec(encoder, "w").audio_rates or ()) else 48000


def reencoded_layout(channels: int) -> str:
    """The layout re-encoded audio gets: 5.1 kept as 5.1 (it was mixed down to stereo; AAC and
    Opus both carry it; 7.1 becomes 5.1, as FFmpeg's AAC encoder is unreliable with it), 3 to 5
    channels mixed to stereo, mono kept."""
    return "5.1" if channels >= 6 else "stereo" if channels >= 2 else "mono"


def _can_copy(source: Path, fmt: str, index: int) -> bool:
    """Whether the `fmt` muxer really accepts the stream `index` of `source` copied as is.

    FFmpeg's codec query is not enough: it says yes to Opus in MOV, whose header then fails
    (EINVAL) only once frames are being written. So a throwaway in-memory file of that format
    gets the stream and its first packet; any refusal means re-encoding."""
    try:
        with open_container(local_path(source)) as src:
            ins = src.streams[index]
            with av.open(io.BytesIO(), mode="w", format=fmt) as trial:
                stream = trial.add_stream_from_template(ins)
                for packet in src.demux(ins):
                    if packet.pts is not None and packet.size:
                        packet.stream = stream
                        trial.mux(packet)
                        break
        return True
    except (av.error.FFmpegError, ValueError, OSError):
        return False


ADTS_HEADER = 7  # bytes of an ADTS header without its CRC


def _adts_setup(packet: bytes) -> tuple[int, int] | None:
    """The sample rate index and channel configuration an AAC packet's ADTS header gives."""
    if len(packet) < ADTS_HEADER or packet[0] != 0xFF or packet[1] & 0xF6 != 0xF0:
        return None
    return (packet[2] >> 2) & 0x0F, ((packet[2] & 0x01) << 2) | (packet[3] >> 6)


def _changing_midway(source: Path, indices: Sequence[int]) -> frozenset[int]:
    """The AAC streams among `indices` of an MPEG-TS that change their sample rate or channels
    midway (TS recordings joined, a TV channel's stereo adverts in a 5.1 film; each packet's ADTS
    header says its own): copied, the output's one track header gives the first part's, and the
    rest did not decode ('channel element is not allocated'), silent. One demux pass for them all
    (it was one per track), no decoding, ending once each has changed; for a TS only (MP4, MOV and
    Matroska state one set-up for the whole stream). The pass precedes the output's header, so it
    reads the whole file when nothing changes; it does no more than that: the demuxer drops every
    other stream's data (the video, most of the bytes) unassembled, and each packet gives only
    its header's bytes."""
    with open_container(local_path(source)) as src:
        if "mpegts" not in src.format.name.split(","):
            return frozenset()
        streams = [s for s in (src.streams[i] for i in indices)
                   if s.codec_context is not None and s.codec_context.codec.canonical_name == "aac"]
        _only(src, streams)
        first: dict[int, tuple[int, int]] = {}
        changed: set[int] = set()
        try:
            for packet in src.demux(streams) if streams else ():
                setup = _adts_setup(bytes(memoryview(packet)[:ADTS_HEADER])) if packet.size else None
                index = packet.stream.index
                if setup is not None and first.setdefault(index, setup) != setup:
                    changed.add(index)
                    if len(changed) == len(streams):
                        break
        except av.error.FFmpegError:  # damaged data: the copy skips it as it does now
            pass
    return frozenset(changed)


def _only(src: av.container.InputContainer, streams: Sequence[av.stream.Stream]) -> None:
    """Have the demuxer of `src` drop the data of every stream but `streams` (PyAV 18's
    Stream.discard; demux(streams) alone assembles each packet of them all and then drops it).
    PyAV 17 lacks it: every packet is assembled there, as before."""
    discard = getattr(av.stream, "Discard", None)
    if discard is None:
        return
    kept = {s.index for s in streams}
    for stream in src.streams:
        if stream.index not in kept:
            stream.discard = discard.all


class _MidwayChanges:
    """Whether an audio track changes its set-up midway (_changing_midway), asked of the input's
    kept tracks: its one pass is made for them all at the first question (none when none is copied)."""

    def __init__(self, source: Path, indices: Sequence[int]) -> None:
        self._source = source
        self._indices = tuple(indices)
        self._found: frozenset[int] | None = None

    def __call__(self, index: int) -> bool:
        if self._found is None:
            self._found = _changing_midway(self._source, self._indices)
        return index in self._found


class _AudioTrack:
    """One audio stream of the input (`index`), on the video's timeline (the same origin, the same
    handling of restarting timestamps), copied packet by packet when the output container is
    commonly read with its codec (AUDIO_COPY_CODECS) and accepts it, else re-encoded (AAC, or
    Opus for WebM) with one line saying so; its language and title kept. `named`: how notes name
    it among several ('audio track 2'), empty for the only one."""

    _kind = "audio"  # how warnings name its packets

    def __init__(self, out: av.container.OutputContainer, source: Path, index: int, *, default: bool = True,
                 named: str = "", changes: _MidwayChanges) -> None:
        self._in = open_container(local_path(source))  # damaged tags must not stop the audio
        self._last_dts: int | None = None
        self._out_of_order = 0
        self._corrupt = 0
        self._stream: AudioStream
        self.mode: str | None = None
        self._out = out
        self._pending: tuple[av.Packet, float] | None = None
        self._done = False
        try:
            ins = self._in.streams[index]
            assert isinstance(ins, AudioStream)
            self._in_stream: av.stream.Stream = ins
            tb = ins.time_base or Fraction(1, 90000)
            self._tb = Fraction(tb.numerator, tb.denominator)
            self._timeline = Timeline(timeline_origin(self._in), 1024 / (ins.codec_context.sample_rate or 48000))
            self._packets: Iterator[av.Packet] = self._in.demux(ins)
            # An audio stream without a packet (a recorder stopped at once): no track, and the
            # summary says 'no audio' (it said 'audio re-encoded' over an output without any).
            self._pending = self._next_packet()
            if self._pending is None:
                self._done = True
                if named:
                    log.warning("note: the input's %s holds no sound, so the output leaves it out", named)
                else:
                    log.warning("note: the input's audio stream holds no sound, so the output has no audio")
                return
            codec = ins.codec_context.codec.canonical_name
            fmt = out.format.name
            holds = codec in out.supported_codecs and _can_copy(source, fmt, index)
            midway = holds and copies_audio(codec, fmt) and changes(index)
            if holds and copies_audio(codec, fmt) and not midway:
                self.mode = "copy"
                self._stream = out.add_stream_from_template(ins)
            else:
                self.mode = "reencode"
                target: Literal["libopus", "aac"] = "libopus" if fmt == "webm" else "aac"
                rate = reencoded_rate(target, ins.codec_context.sample_rate or 48000)
                layout = reencoded_layout(ins.codec_context.channels or 1)
                self._stream = out.add_stream(target, rate=rate, layout=layout)
                self._resampler = av.AudioResampler(format=self._stream.codec_context.format, layout=layout,
                                                    rate=rate)
                self._resampling: tuple[str, str, int] | None = None  # the input frames' format, layout, rate
                self._fifo = av.AudioFifo()
                self._next_pts: int | None = None
                kind = FORMAT_NAMES.get(fmt, fmt)
                why = ("its sample rate or channels change midway, which a copy into one track does not play"
                       if midway else f"{kind} files {'are not commonly played with' if holds else 'cannot hold'} "
                                       f"{codec} audio")
                log.warning("note: the %s (%s) is re-encoded as %s: %s", named or "audio", codec,
                            "Opus" if target == "libopus" else "AAC", why)
            _describe_as(self._stream, ins, default)
            self._target: av.stream.Stream = self._stream
        except BaseException:
            self._in.close()
            raise

    def pump(self, until: float | None, final: bool = False) -> None:
        """Mux audio packets that start before `until` seconds (all of them when None)."""
        while not self._done:
            pending = self._pending or self._next_packet()
            self._pending = None
            if pending is None:
                self._done = True
                break
            packet, start = pending
            if until is not None and start >= until:
                self._pending = pending
                break
            self._mux(packet, start)
        if final and self.mode == "reencode":
            self._drain(final=True)

    def _next_packet(self) -> tuple[av.Packet, float] | None:
        """The next packet with a timestamp, and its start on the output timeline."""
        while True:
            try:
                packet = next(self._packets)
            except StopIteration:
                return None
            except av.error.FFmpegError as exc:
                log.debug("skipped a corrupt audio packet (%s)", str(exc).splitlines()[0])
                self._corrupt += 1
                self._packets = self._in.demux(self._in_stream)
                continue
            if packet.pts is not None and packet.size:
                duration = float(packet.duration * self._tb) if packet.duration else None
                return packet, self._timeline.map(float(packet.pts * self._tb), duration)

    def _mux(self, packet: av.Packet, start: float | None = None) -> None:
        if start is None:  # a packet from outside (tests of damaged input): onto the timeline
            assert packet.pts is not None
            start = self._timeline.map(float(packet.pts * self._tb))
        if self.mode == "copy":
            # Onto the output timeline: shift both timestamps by what moved the start.
            assert packet.pts is not None
            shift = int(round(start / self._tb)) - packet.pts
            packet.pts += shift
            if packet.dts is not None:
                packet.dts += shift
            # Damaged input can send timestamps backwards; the muxer refuses those (EINVAL at
            # the end of the run), so they are dropped here with one warning.
            if packet.dts is not None and self._last_dts is not None and packet.dts <= self._last_dts:
                self._out_of_order += 1
                if self._out_of_order == 1:
                    log.warning("warning: skipped %s packets whose timestamps go backwards (damaged input)", self._kind)
                return
            if packet.dts is not None:
                self._last_dts = packet.dts
            packet.stream = self._target
            self._out.mux(packet)
            return
        try:
            frames = cast("list[AudioFrame]", packet.decode())  # a packet of the audio stream
        except av.error.FFmpegError as exc:
            log.debug("skipped an undecodable audio packet (%s)", str(exc).splitlines()[0])
            self._corrupt += 1
            return
        for frame in frames:
            if self._next_pts is None:
                self._next_pts = int(round(max(0.0, start) * self._stream.codec_context.sample_rate))
            for resampled in self._resample(frame):
                resampled.pts = None  # the fifo checks continuity; timestamps are counted below
                # and its frames' time base: a resampler passes a frame it need not change on with
                # the decoder's (1/90000 from a TS), a new one after a change gives 1/rate
                resampled.time_base = Fraction(1, self._stream.codec_context.sample_rate)
                self._fifo.write(resampled)
        self._drain(final=False)

    def _resample(self, frame: AudioFrame) -> list[AudioFrame]:
        """`frame` in the output's format, rate and layout. Where the input's change mid-stream
        (a TV recording's stereo adverts in a 5.1 film, TS files joined), the resampler made for
        the first refused the first frame that differed ('Frame does not match AudioResampler
        setup', a traceback): what the old one holds is flushed and a new one takes over."""
        given = (frame.format.name, frame.layout.name, frame.sample_rate)
        done: list[AudioFrame] = []
        if self._resampling is not None and given != self._resampling:
            done = self._resampler.resample(None)
            cc = self._stream.codec_context
            self._resampler = av.AudioResampler(format=cc.format, layout=cc.layout, rate=cc.sample_rate)
        self._resampling = given
        return done + self._resampler.resample(frame)

    def _drain(self, final: bool) -> None:
        cc = self._stream.codec_context
        size = cc.frame_size or 1024
        if final:
            for resampled in self._resampler.resample(None):
                resampled.pts = None
                self._fifo.write(resampled)
        while self._fifo.samples >= size or (final and self._fifo.samples > 0):
            frame = self._fifo.read(min(size, self._fifo.samples))
            if frame is None:  # only when asked for more samples than it holds
                break
            frame.pts = self._next_pts or 0
            frame.time_base = Fraction(1, cc.sample_rate)
            self._next_pts = frame.pts + frame.samples
            encode_into(self._out, self._stream, frame)
        if final:
            encode_into(self._out, self._stream, None)

    def close(self) -> None:
        if self._corrupt:  # one line for all of them, as for video packets
            log.warning("warning: skipped %s (damaged data); the output's sound has gaps there",
                        counted(self._corrupt, "corrupt audio packet"))
            self._corrupt = 0
        self._in.close()


# Subtitles: what each container holds as it is (None: whatever its muxer takes), and what the
# text ones become where they are not held as they are (bitmap subtitles cannot be converted).
SUBTITLE_COPY_CODECS: dict[str, frozenset[str] | None] = {
    "mp4": frozenset({"mov_text"}), "mov": frozenset({"mov_text"}), "webm": frozenset({"webvtt"}), "matroska": None,
}
SUBTITLE_TEXT_TARGET: dict[str, str] = {"mp4": "mov_text", "mov": "mov_text", "webm": "webvtt", "matroska": "subrip"}
TEXT_SUBTITLES: frozenset[str] = frozenset({"subrip", "srt", "ass", "ssa", "webvtt", "mov_text", "text"})


def subtitle_fate(codec: str, fmt: str) -> Literal["copy", "convert"] | None:
    """How a subtitle stream in `codec` goes into a `fmt` file: copied as it is, converted (a text
    one: MP4/MOV mov_text, WebM WebVTT), or None: left out."""
    allowed = SUBTITLE_COPY_CODECS.get(fmt, frozenset())
    if not codec:  # unknown (a damaged codec id)
        return None
    if allowed is None or codec in allowed:
        return "copy"
    return "convert" if fmt in SUBTITLE_TEXT_TARGET and _convertible(codec) else None


def _convertible(codec: str) -> bool:
    return codec in TEXT_SUBTITLES


# The least ASS header the text encoders take (one default style), for a track that has none.
_ASS_HEADER = (b"[Script Info]\nScriptType: v4.00+\nPlayResX: 384\nPlayResY: 288\n\n[V4+ Styles]\n"
               b"Format: Name, Fontname, Fontsize, PrimaryColour, SecondaryColour, OutlineColour, BackColour, "
               b"Bold, Italic, Underline, StrikeOut, ScaleX, ScaleY, Spacing, Angle, BorderStyle, Outline, "
               b"Shadow, Alignment, MarginL, MarginR, MarginV, Encoding\n"
               b"Style: Default,Arial,16,&Hffffff,&Hffffff,&H0,&H0,0,0,0,0,100,100,0,0,1,1,0,2,10,10,10,1\n\n"
               b"[Events]\nFormat: Layer, Start, End, Style, Name, MarginL, MarginR, MarginV, Effect, Text\n")


def _encoder_opens(name: str, header: bytes) -> bool:
    """Whether the subtitle encoder `name` opens with `header` (a stream added to an output that
    then fails to open fails the whole file, at its first packet)."""
    try:
        ctx = cast(SubtitleCodecContext, av.CodecContext.create(name, "w"))
        ctx.time_base = Fraction(1, 1000)
        ctx.subtitle_header = header
        ctx.open()
        return True
    except (av.error.FFmpegError, ValueError):
        return False


class _SubtitleTrack(_AudioTrack):
    """One subtitle stream of the input, on the video's timeline exactly as the audio is (the same
    origin and restarts; cut where a partial video stops), copied (subtitle_fate) or, a text one
    the container does not hold, converted cue by cue; its language, title and default mark kept.
    `mode` is None when it is left out (its muxer or encoder refused it: said in a note)."""

    _kind = "subtitle"

    def __init__(self, out: av.container.OutputContainer, source: Path, index: int) -> None:
        self._in = open_container(local_path(source))
        self._last_dts = None
        self._out_of_order = 0
        self._corrupt = 0
        self.mode = None
        self._out = out
        self._pending = None
        self._done = True  # until it is known to be kept
        try:
            ins = self._in.streams[index]
            assert isinstance(ins, SubtitleStream)
            self._sub_in = ins
            self._in_stream = ins
            tb = ins.time_base or Fraction(1, 1000)
            self._tb = Fraction(tb.numerator, tb.denominator)
            self._timeline = Timeline(timeline_origin(self._in), 1.0)
            self._packets = self._in.demux(ins)
            fmt = out.format.name
            fate = subtitle_fate(ins.codec_context.name, fmt)
            if fate == "copy" and not _can_copy(source, fmt, index):  # mov_text in Matroska
                fate = "convert" if _convertible(ins.codec_context.name) else None
                if fate is None:
                    log.warning("note: the input's subtitle stream %d (%s) is not copied: the output's muxer "
                                "refuses it", index, ins.codec_context.name)
            if fate == "copy":
                self._target = out.add_stream_from_template(ins)
            elif fate == "convert":
                ins.codec_context.open()  # the decoder's ASS header, which the text encoders read
                # subtitle_header, encode_subtitle: PyAV 16.1 and later (typed from 18 only)
                header = cast(Any, ins.codec_context).subtitle_header or _ASS_HEADER  # an ASS track without one
                if not _encoder_opens(SUBTITLE_TEXT_TARGET[fmt], header):  # before the stream exists
                    log.warning("note: the input's subtitle stream %d (%s) is not copied: it cannot be "
                                "converted to %s", index, ins.codec_context.name, SUBTITLE_TEXT_TARGET[fmt])
                    self._in.close()
                    return
                stream = cast(SubtitleStream, out.add_stream(SUBTITLE_TEXT_TARGET[fmt]))
                stream.codec_context.time_base = Fraction(1, 1000)
                stream.time_base = Fraction(1, 1000)
                cast(Any, stream.codec_context).subtitle_header = header
                self._target = self._sub_out = stream
            else:
                self._in.close()
                return
            self.mode = fate
            self._done = False
            _describe_as(self._target, ins, is_default(ins))
        except BaseException:
            self._in.close()
            raise

    def _mux(self, packet: av.Packet, start: float | None = None) -> None:
        if self.mode == "copy" or start is None:
            super()._mux(packet, start)
            return
        try:
            cues = self._sub_in.decode2(packet)
            if cues is None or not len(cues):
                return
            encoded = cast(Any, self._sub_out.codec_context).encode_subtitle(cues)
        except av.error.FFmpegError as exc:  # a damaged cue: left out, counted like a corrupt packet
            log.debug("skipped an unconvertible subtitle (%s)", str(exc).splitlines()[0])
            self._corrupt += 1
            return
        encoded.pts = encoded.dts = int(round(start * 1000))
        encoded.duration = int(round(float((packet.duration or 0) * self._tb) * 1000)) or \
            max(0, cues.end_display_time - cues.start_display_time)
        encoded.time_base = Fraction(1, 1000)
        encoded.stream = self._sub_out
        self._out.mux(encoded)

    def close(self) -> None:
        if self._corrupt:
            log.warning("warning: skipped %s", counted(self._corrupt, "damaged subtitle"))
            self._corrupt = 0
        self._in.close()


def input_subtitle_tracks(out: av.container.OutputContainer, source: Path) -> list[_SubtitleTrack]:
    """Every subtitle stream of `source` that `out`'s container can hold (subtitle_fate), in the
    input's order, added to `out` to be muxed with pump() as the video advances."""
    with open_container(local_path(source)) as probe:
        indices = [s.index for s in probe.streams.subtitles if subtitle_fate(codec_name(s), out.format.name)]
    tracks: list[_SubtitleTrack] = []
    try:
        for index in indices:
            track = _SubtitleTrack(out, source, index)
            if track.mode is not None:
                tracks.append(track)
    except BaseException:
        for track in tracks:
            track.close()
        raise
    return tracks


class _SamplesTrack:
    """Given mono samples encoded as AAC (Opus for WebM), muxed as the video advances."""

    mode = "encode"

    def __init__(self, out: av.container.OutputContainer, audio: AudioSamples) -> None:
        codec: Literal["libopus", "aac"] = "libopus" if out.format.name == "webm" else "aac"
        self._rate = 48000 if codec == "libopus" else audio.rate
        self._stream = out.add_stream(codec, rate=self._rate, layout="mono")
        samples: np.ndarray = np.asarray(audio.samples, np.float32).reshape(1, -1)
        if self._rate != audio.rate:  # Opus takes 48 kHz only
            frame = av.AudioFrame.from_ndarray(samples, format="flt", layout="mono")
            frame.sample_rate = audio.rate
            resampler = av.AudioResampler(format="flt", layout="mono", rate=self._rate)
            parts = [f.to_ndarray() for f in resampler.resample(frame) + resampler.resample(None)]
            samples = np.concatenate(parts, axis=1) if parts else samples[:, :0]
        self._samples = samples
        self._out = out
        self._next = 0

    def pump(self, until: float | None, final: bool = False) -> None:
        cc = self._stream.codec_context
        chunk = cc.frame_size or 1024
        end = self._samples.shape[1] if until is None else min(self._samples.shape[1], int(until * self._rate))
        while self._next < end and (self._next + chunk <= end or final):
            part = self._samples[:, self._next:self._next + chunk]
            fmt = cc.format.name
            if fmt.startswith("s16"):
                part = (np.clip(part, -1.0, 1.0) * 32767).astype(np.int16)
            # mono: planar and packed share this (1, n) shape
            frame = av.AudioFrame.from_ndarray(np.ascontiguousarray(part), format=fmt, layout="mono")
            frame.sample_rate = self._rate
            frame.pts, frame.time_base = self._next, Fraction(1, self._rate)
            self._next += part.shape[1]
            encode_into(self._out, self._stream, frame)
        if final:
            encode_into(self._out, self._stream, None)

    def close(self) -> None:
        pass
