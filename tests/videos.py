"""Small generated video clips for tests (PyAV, in-process; no ffmpeg binary).

`make_clip` writes an H.264 (or other) clip with an optional AAC tone. Frames are either a
moving crop of a photo (so a face moves across the frame) or a synthetic gradient; the frame
index can be stamped into the pixels as large black/white blocks that survive lossy coding, and
read back with `read_index`.
"""

from __future__ import annotations

import contextlib
import re
import http.server
import struct
import threading
from fractions import Fraction
from pathlib import Path
from typing import Iterator, Sequence

import av
import cv2
import numpy as np

STAMP_BITS = 12
STAMP_CELL = 8  # px per bit block; 8x8 blocks survive CRF 18-30 easily


def stamp_index(image: np.ndarray, index: int) -> None:
    """Write `index` into the top-left corner as STAMP_BITS black/white blocks (in place)."""
    for bit in range(STAMP_BITS):
        value = 255 if (index >> bit) & 1 else 0
        x = bit * STAMP_CELL
        image[0:STAMP_CELL, x:x + STAMP_CELL] = value


def read_index(image: np.ndarray) -> int:
    """Read back what `stamp_index` wrote (after decoding)."""
    index = 0
    for bit in range(STAMP_BITS):
        x = bit * STAMP_CELL
        cell = image[2:STAMP_CELL - 2, x + 2:x + STAMP_CELL - 2]
        if float(cell.mean()) > 127:
            index |= 1 << bit
    return index


def synthetic_frame(index: int, size: tuple[int, int]) -> np.ndarray:
    """A smooth, moving gradient frame (no face), BGR uint8."""
    w, h = size
    ys, xs = np.mgrid[0:h, 0:w]
    img = np.empty((h, w, 3), np.uint8)
    img[..., 0] = ((xs + index * 3) % 256).astype(np.uint8)
    img[..., 1] = ((ys * 255) // max(h - 1, 1)).astype(np.uint8)
    img[..., 2] = 96
    return img


def photo_frame(photo: np.ndarray, index: int, frames: int, size: tuple[int, int], moving: bool) -> np.ndarray:
    """Frame `index` of a slow pan over the top of `photo` (where portraits keep the face)."""
    w, h = size
    ph, pw = photo.shape[:2]
    ww = 0.9 * pw
    wh = ww * h / w
    if wh > 0.9 * ph:
        wh = 0.9 * ph
        ww = wh * w / h
    t = index / max(frames - 1, 1) if moving else 0.5
    x = (pw - ww) * t
    y = min(0.04 * ph, ph - wh) * t
    # One affine warp per frame: sub-pixel pan, resize and crop together.
    s = w / ww
    m = np.array([[s, 0, -x * s], [0, s, -y * s]], np.float32)
    return cv2.warpAffine(photo, m, (w, h), flags=cv2.INTER_AREA if s < 1 else cv2.INTER_LINEAR)


def make_clip(
    path: Path,
    frames: int = 60,
    size: tuple[int, int] = (160, 120),
    fps: float = 30,
    audio: bool = True,
    source_image: Path | None = None,
    moving_crop: bool = True,
    *,
    stamp: bool = False,
    codec: str = "libx264",
    rotation: int | None = None,
    timestamps: Sequence[float] | None = None,
    audio_codec: str = "aac",
    audio_rate: int = 44100,
    subtitle: bool = False,
    timecode: str | None = None,
) -> Path:
    """Write a clip and return its path.

    timecode: a start timecode (HH:MM:SS:FF), a tmcd track in an MP4/MOV (FFmpeg's muxer writes
    one for a video stream's "timecode" tag), a TIMECODE tag in Matroska.

    timestamps: per-frame presentation times in seconds (variable frame rate); default i/fps.
    rotation: display rotation in degrees (counterclockwise, as PyAV's set_display_rotation).
    """
    path = Path(path)
    photo = cv2.imread(str(source_image), cv2.IMREAD_COLOR) if source_image is not None else None
    if source_image is not None and photo is None:
        raise FileNotFoundError(source_image)
    rate = Fraction(fps).limit_denominator(1001)
    with av.open(str(path), "w") as out:
        vs = out.add_stream(codec, rate=rate)
        vs.width, vs.height = size
        vs.pix_fmt = "yuv420p"
        if codec == "libx264":
            vs.codec_context.options = {"preset": "ultrafast", "crf": "18"}
        if timestamps is not None:
            vs.codec_context.time_base = Fraction(1, 1000)
        if rotation is not None:
            vs.set_display_rotation(rotation)
        if timecode is not None:
            vs.metadata["timecode"] = timecode
        as_ = None
        if audio:
            as_ = out.add_stream(audio_codec, rate=audio_rate)
            as_.layout = "mono"
        if subtitle:
            out.add_stream("mov_text" if path.suffix in (".mp4", ".mov") else "ass")
        for i in range(frames):
            img = photo_frame(photo, i, frames, size, moving_crop) if photo is not None else synthetic_frame(i, size)
            if stamp:
                stamp_index(img, i)
            frame = av.VideoFrame.from_ndarray(img, format="bgr24")
            if timestamps is not None:
                frame.pts = int(round(timestamps[i] * 1000))
                frame.time_base = Fraction(1, 1000)
            else:
                frame.pts = i
                frame.time_base = 1 / rate
            out.mux(vs.encode(frame))
        out.mux(vs.encode())
        if as_ is not None:
            duration = (timestamps[-1] + 1 / fps) if timestamps is not None else frames / fps
            _write_tone(out, as_, duration, audio_rate)
    return path


def make_offset_mkv(path: Path, *, frames: int, size: tuple[int, int], video_start: float, tone_start: float,
                    tone_seconds: float, sample_rate: int) -> Path:
    """A Matroska file whose video and sound start at different times (`video_start`,
    `tone_start`, seconds): the container's span is not the video's."""
    with av.open(str(path), "w") as out:
        video = out.add_stream("libx264", rate=30)
        video.width, video.height, video.pix_fmt = size[0], size[1], "yuv420p"
        sound = out.add_stream("aac", rate=sample_rate, layout="mono")
        first = int(round(video_start * 30))
        for i in range(frames):
            frame = av.VideoFrame.from_ndarray(synthetic_frame(i, size), format="bgr24")
            frame.pts, frame.time_base = first + i, Fraction(1, 30)
            out.mux(video.encode(frame))
        out.mux(video.encode())
        _write_tone(out, sound, tone_seconds, sample_rate, start=tone_start)
    return path


def _write_tone(out: av.container.OutputContainer, stream: av.audio.stream.AudioStream, seconds: float, rate: int,
               start: float = 0.0) -> None:
    total = int(round(seconds * rate))
    first = int(round(start * rate))
    chunk = stream.codec_context.frame_size or 1024
    fmt = stream.codec_context.format.name
    done = 0
    while done < total:
        n = min(chunk, total - done)
        t = (np.arange(done, done + n) / rate).astype(np.float32)
        tone = (0.3 * np.sin(2 * np.pi * 440 * t)).astype(np.float32)
        channels = stream.codec_context.channels or 1
        # mono: planar and packed share this shape; stereo planar is (2, n), packed (1, 2n)
        arr = np.repeat(tone.reshape(1, -1), channels, axis=0) if fmt.endswith("p") else \
            np.repeat(tone, channels).reshape(1, -1)
        if fmt.startswith("s16"):
            arr = (arr * 32767).astype(np.int16)
        elif fmt.startswith("s32"):
            arr = (arr * 2147483647).astype(np.int32)
        frame = av.AudioFrame.from_ndarray(arr, format=fmt, layout="stereo" if channels == 2 else "mono")
        frame.sample_rate = rate
        frame.pts = first + done
        frame.time_base = Fraction(1, rate)
        for packet in stream.encode(frame):
            out.mux(packet)
        done += n
    for packet in stream.encode():
        out.mux(packet)


def probe(path: Path) -> dict:
    """Frame count, rate, size, timestamps and audio duration of a clip (decoded, not guessed)."""
    info: dict = {}
    with av.open(str(path)) as c:
        info["metadata"] = dict(c.metadata)
        v = c.streams.video[0]
        info["rate"] = v.average_rate
        info["codec"] = v.codec_context.name
        info["streams"] = [s.type for s in c.streams]
        times = []
        images = []
        for frame in c.decode(v):
            times.append(float(frame.pts * frame.time_base))
            images.append(frame.to_ndarray(format="bgr24"))
        info["frames"] = len(times)
        info["times"] = times
        info["images"] = images
        info["size"] = (images[0].shape[1], images[0].shape[0]) if images else None
    info["audio_duration"] = None
    with av.open(str(path)) as c:
        if c.streams.audio:
            a = c.streams.audio[0]
            info["audio_codec"] = a.codec_context.name
            first, end = None, 0.0
            for packet in c.demux(a):
                if packet.pts is None:
                    continue
                start = float(packet.pts * packet.time_base)
                first = start if first is None else min(first, start)
                end = max(end, start + float((packet.duration or 0) * packet.time_base))
            info["audio_duration"] = end - (first or 0.0) if first is not None else 0.0
            info["audio_start"] = first
    return info


def count_frames(path: Path) -> int:
    """Decoded video frames, without keeping them."""
    with av.open(str(path)) as c:
        return sum(1 for _ in c.decode(video=0))


def make_audio_only(path: Path) -> Path:
    """An mp4-family file with one short AAC stream and no video stream."""
    with av.open(str(path), "w", format="mp4") as out:
        stream = out.add_stream("aac", rate=44100)
        frame = av.AudioFrame.from_ndarray(np.zeros((1, 1024), np.float32), format="fltp", layout="mono")
        frame.sample_rate, frame.pts = 44100, 0
        for packet in [*stream.encode(frame), *stream.encode(None)]:
            out.mux(packet)
    return path


def make_empty_recording(path: Path) -> Path:
    """A video file written with its header and no frame (a recording stopped at once): Matroska
    and WebM keep a video track FFmpeg cannot open, MP4 and MOV no track at all."""
    with av.open(str(path), "w") as out:
        stream = out.add_stream("libx264", rate=30)
        stream.width, stream.height, stream.pix_fmt = 64, 64, "yuv420p"
        out.start_encoding()
    return path


def make_timed_clip(path: Path, *, start: float = 0.0, frames: int = 30, size: tuple[int, int] = (96, 64),
                    fps: int = 30, audio_codec: str | None = "aac", audio_rate: int = 48000,
                    sample_aspect: Fraction | None = None, fmt: str | None = None,
                    shade: int = 0, still_first: tuple[int, int] | None = None,
                    cover: tuple[int, int] | None = None) -> Path:
    """A clip whose timestamps start at `start` seconds (an MPEG-TS, an offset MKV), frames
    stamped with their index; optionally non-square pixels, a one-frame still video track of size
    `still_first` before the real one (a thumbnail track), or cover art (an attached picture) of
    size `cover` (MP4 puts it after the video). `shade`: the frames' grey."""
    with av.open(str(path), "w", format=fmt) as out:
        still = None
        if still_first is not None:
            still = out.add_stream("libx264", rate=1)
            still.width, still.height = still_first
            still.pix_fmt = "yuv420p"
        vs = out.add_stream("libx264", rate=fps)
        vs.width, vs.height = size
        vs.pix_fmt = "yuv420p"
        vs.codec_context.options = {"preset": "ultrafast", "crf": "18"}
        if sample_aspect is not None:
            vs.codec_context.sample_aspect_ratio = sample_aspect
            vs.sample_aspect_ratio = sample_aspect
        as_ = None
        if audio_codec:
            # FFmpeg's own Vorbis encoder is experimental and takes stereo only.
            as_ = out.add_stream(audio_codec, rate=audio_rate, layout="stereo" if audio_codec == "vorbis" else "mono")
            if audio_codec == "vorbis":
                as_.codec_context.options = {"strict": "experimental"}
        picture = None
        if cover is not None:
            picture = out.add_stream("mjpeg", rate=1)
            picture.width, picture.height = cover
            picture.pix_fmt = "yuvj420p"
            picture.disposition = av.stream.Disposition.attached_pic
        for one, size_of in ((still, still_first), (picture, cover)):
            if one is not None and size_of is not None:
                frame = av.VideoFrame.from_ndarray(np.full((size_of[1], size_of[0], 3), 200, np.uint8), format="bgr24")
                frame.pts, frame.time_base = int(round(start)), Fraction(1, 1)
                for packet in [*one.encode(frame), *one.encode(None)]:
                    out.mux(packet)
        first = int(round(start * fps))
        for i in range(frames):
            image = np.full((size[1], size[0], 3), shade, np.uint8)
            stamp_index(image, i)
            frame = av.VideoFrame.from_ndarray(image, format="bgr24")
            frame.pts, frame.time_base = first + i, Fraction(1, fps)
            out.mux(vs.encode(frame))
        out.mux(vs.encode())
        if as_ is not None:
            _write_tone(out, as_, frames / fps, audio_rate, start=start)
    return path


def make_flat_clip(path: Path, *, luma: int, pix_fmt: str = "yuv420p", codec: str = "libx264",
                   colour: tuple[int, int, int, int] | None = None, frames: int = 5,
                   size: tuple[int, int] = (64, 48), fmt: str | None = None) -> Path:
    """A grey clip whose Y plane is `luma` everywhere and whose chroma is neutral, written
    losslessly, tagged with `colour` = (range, primaries, transfer, matrix) as FFmpeg's enums
    (range 2: full), or untagged."""
    w, h = size
    with av.open(str(path), "w", format=fmt) as out:
        vs = out.add_stream(codec, rate=25)
        vs.width, vs.height = size
        vs.pix_fmt = pix_fmt
        cc = vs.codec_context
        if colour is not None:
            cc.color_range, cc.color_primaries, cc.color_trc, cc.colorspace = colour
        if codec == "libx264":
            cc.options = {"preset": "ultrafast", "qp": "0"}
        for i in range(frames):
            frame = av.VideoFrame(w, h, pix_fmt)
            for plane, value in zip(frame.planes, (luma, 128, 128)):
                plane.update(bytes([value]) * plane.buffer_size)
            if colour is not None:
                frame.color_range, frame.color_primaries, frame.color_trc, frame.colorspace = colour
            frame.pts, frame.time_base = i, Fraction(1, 25)
            out.mux(vs.encode(frame))
        out.mux(vs.encode())
    return path


def make_colour_clip(path: Path, *, colour: tuple[int, int, int, int], pix_fmt: str = "yuv420p", frames: int = 6,
                     size: tuple[int, int] = (128, 96)) -> Path:
    """A clip of smoothly varied colour (luma 80-170, chroma 100-156: inside every matrix's
    gamut at either range, so BGR holds it unclipped), its planes moving a little each frame,
    written losslessly (x264 at qp 0) and tagged with `colour` as make_flat_clip's."""
    w, h = size
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float64)
    with av.open(str(path), "w") as out:
        vs = out.add_stream("libx264", rate=25)
        vs.width, vs.height, vs.pix_fmt = w, h, pix_fmt
        cc = vs.codec_context
        cc.color_range, cc.color_primaries, cc.color_trc, cc.colorspace = colour
        cc.options = {"preset": "ultrafast", "qp": "0"}
        for i in range(frames):
            luma = 125 + 45 * np.sin((xx + 3 * i) / 9.0) * np.cos(yy / 13.0)
            cy, cx = yy[::2, ::2], xx[::2, ::2]
            u = 128 + 28 * np.sin((cx - 2 * i) / 7.0 + cy / 11.0)
            v = 128 + 28 * np.cos(cy / 6.0 - (cx + i) / 17.0)
            frame = av.VideoFrame(w, h, pix_fmt)
            for plane, values in zip(frame.planes, (luma, u, v)):
                rows = np.zeros((plane.buffer_size // plane.line_size, plane.line_size), np.uint8)
                rows[:values.shape[0], :values.shape[1]] = np.rint(values)
                plane.update(rows.tobytes())
            frame.color_range, frame.color_primaries, frame.color_trc, frame.colorspace = colour
            frame.pts, frame.time_base = i, Fraction(1, 25)
            out.mux(vs.encode(frame))
        out.mux(vs.encode())
    return path


def luma_planes(path: Path) -> list[np.ndarray]:
    """The Y plane of every frame of an 8-bit YUV clip, as decoded (no conversion to RGB)."""
    with av.open(str(path)) as c:
        planes = []
        for frame in c.decode(video=0):
            plane = frame.planes[0]
            rows = np.frombuffer(memoryview(plane), np.uint8)[:plane.line_size * frame.height]
            planes.append(rows.reshape(frame.height, plane.line_size)[:, :frame.width].copy())
        return planes


def colour_tags(path: Path) -> tuple[int, int, int, int]:
    """(range, primaries, transfer, matrix) of the first video stream, as ffprobe reports them."""
    with av.open(str(path)) as c:
        cc = c.streams.video[0].codec_context
        return (int(cc.color_range), int(cc.color_primaries), int(cc.color_trc), int(cc.colorspace))


def make_animation(path: Path, frames: int = 3, size: tuple[int, int] = (96, 48)) -> Path:
    """An animated GIF or WebP (by the suffix) of `frames` frames, each stamped with its index."""
    fmt, codec, pix_fmt = {".gif": ("gif", "gif", "rgb8"), ".webp": ("webp", "libwebp_anim", "yuv420p")}[path.suffix]
    with av.open(str(path), "w", format=fmt) as out:
        vs = out.add_stream(codec, rate=10)
        vs.width, vs.height = size
        vs.pix_fmt = pix_fmt
        for i in range(frames):
            image = np.full((size[1], size[0], 3), 40 * i, np.uint8)
            stamp_index(image, i)
            frame = av.VideoFrame.from_ndarray(image, format="bgr24")
            frame.pts, frame.time_base = i, Fraction(1, 10)
            out.mux(vs.encode(frame))
        out.mux(vs.encode())
    return path


def make_interlaced_clip(path: Path, frames: int = 8, size: tuple[int, int] = (96, 64)) -> Path:
    """An interlaced (top field first) H.264 clip, lossless: a white bar moves between the two
    fields of each frame, so a frame shown as it is combs (its even and odd rows disagree)."""
    w, h = size
    with av.open(str(path), "w") as out:
        vs = out.add_stream("libx264", rate=25)
        vs.width, vs.height = size
        vs.pix_fmt = "yuv420p"
        vs.codec_context.options = {"preset": "ultrafast", "qp": "0", "x264-params": "interlaced=1:tff=1"}
        for i in range(frames):
            image = np.zeros((h, w, 3), np.uint8)
            for row, moment in ((0, 2 * i), (1, 2 * i + 1)):  # the bottom field is the later one
                x = (6 * moment) % (w - 8)
                image[row::2, x:x + 8] = 255
            frame = av.VideoFrame.from_ndarray(image, format="bgr24")
            frame.pts, frame.time_base = i, Fraction(1, 25)
            out.mux(vs.encode(frame))
        out.mux(vs.encode())
    return path


def combing(image: np.ndarray) -> float:
    """How much neighbouring rows disagree beyond what rows two apart do (0 for a smooth picture;
    large for woven fields of a moving picture)."""
    grey = image.astype(np.float32).mean(axis=2)
    adjacent = np.abs(grey[1:-1] - 0.5 * (grey[:-2] + grey[2:])).mean()
    return float(adjacent)


def clip_with_chapters(path: Path) -> Path:
    """A 2 s clip (its container from `path`'s suffix) with chapters "Intro" (0-1 s) and "Main" (1-2 s)."""
    with av.open(str(path), "w") as out:
        stream = out.add_stream("libx264", rate=30)
        stream.width, stream.height, stream.pix_fmt = 64, 48, "yuv420p"
        out.set_chapters([{"id": i + 1, "start": i * 1000, "end": (i + 1) * 1000, "time_base": Fraction(1, 1000),
                           "metadata": {"title": title}} for i, title in enumerate(("Intro", "Main"))])
        for i in range(60):
            frame = av.VideoFrame.from_ndarray(np.full((48, 64, 3), 4 * i, np.uint8), format="bgr24")
            frame.pts = i
            out.mux(stream.encode(frame))
        out.mux(stream.encode())
    return path


def make_raw_h264(path: Path, frames: int = 12, fps: int = 10) -> Path:
    """A raw H.264 stream (a dashcam's, a Raspberry Pi camera's .h264): no container, no
    timestamps, its rate only in the SPS; frame i a flat grey of 20 * i."""
    with av.open(str(path), "w", format="h264") as out:
        vs = out.add_stream("libx264", rate=fps)
        vs.width, vs.height, vs.pix_fmt = 96, 64, "yuv420p"
        for i in range(frames):
            frame = av.VideoFrame.from_ndarray(np.full((64, 96, 3), 20 * i % 256, np.uint8), format="bgr24")
            frame.pts = i
            out.mux(vs.encode(frame))
        out.mux(vs.encode())
    return path


def make_headless_ts(path: Path, *, frames: int = 60, gop: int = 15, cut: int = 2, fps: int = 30) -> Path:
    """A stamped MPEG-TS with a tone, starting 10 s in, cut at frame `cut` of its first group of
    pictures (keyframes every `gop` frames): the video and sound before that frame's time are
    dropped, as a recording joined mid-broadcast starts, so frames cut..gop-1 lack their keyframe."""
    whole = path.with_name(f"whole-{path.name}")
    with av.open(str(whole), "w", format="mpegts") as out:
        vs = out.add_stream("libx264", rate=fps)
        vs.width, vs.height, vs.pix_fmt = 96, 64, "yuv420p"
        vs.codec_context.options = {"preset": "ultrafast", "crf": "18", "g": str(gop), "sc_threshold": "0"}
        sound = out.add_stream("aac", rate=48000, layout="mono")
        for i in range(frames):
            image = np.zeros((64, 96, 3), np.uint8)
            stamp_index(image, i)
            frame = av.VideoFrame.from_ndarray(image, format="bgr24")
            frame.pts, frame.time_base = 10 * fps + i, Fraction(1, fps)
            out.mux(vs.encode(frame))
        out.mux(vs.encode())
        _write_tone(out, sound, frames / fps, 48000, start=10.0)
    at = 10.0 + cut / fps
    with av.open(str(whole)) as src, av.open(str(path), "w", format="mpegts") as dst:
        streams = {s.index: dst.add_stream_from_template(s) for s in src.streams}
        for packet in src.demux():
            if packet.pts is not None and float(packet.pts * packet.time_base) >= at - 1e-6:
                packet.stream = streams[packet.stream.index]
                dst.mux(packet)
    whole.unlink()
    return path


def _boxes(data: bytes) -> list[bytes]:
    """The MP4 boxes that `data` (a file, or a box's payload) holds, each whole (32-bit sizes)."""
    found, pos = [], 0
    while pos < len(data):
        size = int.from_bytes(data[pos:pos + 4], "big")
        found.append(data[pos:pos + size])
        pos += size
    return found


def cover_first(path: Path) -> Path:
    """`path` (an MP4 with cover art, its index last, as FFmpeg writes it) rewritten with the
    index's metadata (udta) before its tracks: FFmpeg then gives the cover as stream 0, before the
    video. Only boxes inside the index move, so the media data's offsets stay right."""
    rewritten = []
    for top in _boxes(path.read_bytes()):
        if top[4:8] == b"moov":
            inner = _boxes(top[8:])
            udta = [b for b in inner if b[4:8] == b"udta"]
            rest = [b for b in inner if b[4:8] != b"udta"]
            first = next(i for i, b in enumerate(rest) if b[4:8] == b"trak")
            top = top[:8] + b"".join(rest[:first] + udta + rest[first:])
        rewritten.append(top)
    path.write_bytes(b"".join(rewritten))
    return path


def label_corners(images: Sequence[np.ndarray], plain: Sequence[np.ndarray]) -> list[str]:
    """Per frame, the corner the visible label darkens (against the unlabelled input frame)."""
    from livecam.media.provenance import CORNERS, label_box

    def darkened(image: np.ndarray, before: np.ndarray, corner: str) -> float:
        x1, y1, x2, y2 = label_box(image.shape, corner)
        return float(before[y1:y2, x1:x2].mean()) - float(image[y1:y2, x1:x2].mean())

    return [max(CORNERS, key=lambda c: darkened(image, before, c)) for image, before in zip(images, plain)]


def make_icon(path: Path, image: np.ndarray) -> Path:
    """A .ico holding one PNG (what current icon tools write); FFmpeg reads it as a one-frame video."""
    png = cv2.imencode(".png", image)[1].tobytes()
    h, w = image.shape[:2]
    entry = struct.pack("<BBBBHHII", w % 256, h % 256, 0, 0, 1, 32, len(png), 6 + 16)
    path.write_bytes(struct.pack("<HHH", 0, 1, 1) + entry + png)
    return path


def make_vp9_alpha(path: Path, frames: int = 3) -> Path:
    """A WebM cut-out: VP9 with alpha (its left half transparent), which WebM stores beside the picture."""
    with av.open(str(path), "w") as out:
        stream = out.add_stream("libvpx-vp9", rate=10)
        stream.width, stream.height, stream.pix_fmt = 64, 48, "yuva420p"
        for _ in range(frames):
            rgba = np.full((48, 64, 4), 128, np.uint8)
            rgba[:, :32, 3] = 0
            out.mux(stream.encode(av.VideoFrame.from_ndarray(rgba, format="rgba")))
        out.mux(stream.encode())
    return path


def set_display_matrix(path: Path, a: int, b: int, c: int, d: int) -> Path:
    """Write the 2x2 part (in whole units) of an MP4's display matrix into its one track header,
    in place, the translation set so the picture stays in view: a mirror, which PyAV cannot set."""
    data = bytearray(path.read_bytes())
    at = data.index(b"tkhd") + 4
    assert data[at] == 0, "a version-0 tkhd"
    matrix = at + 4 + 4 * 5 + 8 + 8  # version/flags, times, track, reserved, duration, reserved, layer..volume
    width, height = (struct.unpack(">I", data[matrix + 36 + i:matrix + 40 + i])[0] >> 16 for i in (0, 4))
    x = -min(0, a * width, c * height, a * width + c * height)
    y = -min(0, b * width, d * height, b * width + d * height)
    struct.pack_into(">9i", data, matrix, a << 16, b << 16, 0, c << 16, d << 16, 0, x << 16, y << 16, 1 << 30)
    path.write_bytes(data)
    return path


def as_displayed(image: np.ndarray, a: int, b: int, c: int, d: int) -> np.ndarray:
    """`image` as a player shows it under the display matrix's 2x2 part (ISO 14496-12: a pixel at
    p, q goes to a*p + c*q, b*p + d*q), worked out pixel by pixel."""
    h, w = image.shape[:2]
    q, p = np.mgrid[0:h, 0:w]
    x, y = a * p + c * q, b * p + d * q
    out = np.zeros((y.max() - y.min() + 1, x.max() - x.min() + 1, *image.shape[2:]), image.dtype)
    out[y - y.min(), x - x.min()] = image[q, p]
    return out


def make_still_clip(path: Path, image: np.ndarray, frames: int = 4, fps: int = 10) -> Path:
    """A lossless (FFV1) clip of `image` (even width and height) held for `frames` frames."""
    with av.open(str(path), "w") as out:
        vs = out.add_stream("ffv1", rate=fps)
        vs.height, vs.width = image.shape[:2]
        vs.pix_fmt = "yuv420p"
        for i in range(frames):
            frame = av.VideoFrame.from_ndarray(image, format="bgr24")
            frame.pts, frame.time_base = i, Fraction(1, fps)
            out.mux(vs.encode(frame))
        out.mux(vs.encode())
    return path


@contextlib.contextmanager
def stalling_server(data: bytes, name: str = "live.ts", content_type: str = "video/mp2t",
                    sent: float = 0.5) -> Iterator[str]:
    """A local HTTP server whose every GET sends the first `sent` of `data`, then keeps the
    connection open sending nothing (a stream that went quiet); the URL of `name` on it."""
    release = threading.Event()

    class Quiet(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            self.send_response(200)
            self.send_header("Content-Type", content_type)
            self.end_headers()
            self.wfile.write(data[: int(len(data) * sent)])
            self.wfile.flush()
            release.wait(60)  # connected, sending nothing

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Quiet)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/{name}"
    finally:
        release.set()
        server.shutdown()
        server.server_close()


def shorten_edit_lists(path: Path, seconds: float, tracks: int = 1) -> Path:
    """Make the first `tracks` tracks of an MP4 (FFmpeg's: one version-0 edit list of one entry
    a track, video first) end after `seconds`, in place, as an editor's trim that keeps the
    samples does: their edit lists and track headers (and the movie's, when all are cut) say
    `seconds`; the sample tables still hold the rest, which players do not show."""
    data = bytearray(path.read_bytes())
    mvhd = data.index(b"mvhd") + 4
    assert data[mvhd] == 0, "a version-0 mvhd"
    scale = struct.unpack(">I", data[mvhd + 12:mvhd + 16])[0]
    length = int(round(seconds * scale))
    edits = [i for i in range(len(data)) if data[i:i + 4] == b"elst"]
    assert len(edits) >= tracks and all(data[i + 4] == 0 and data[i + 8:i + 12] == b"\0\0\0\1" for i in edits)
    for at in edits[:tracks]:
        struct.pack_into(">I", data, at + 12, length)  # the entry's segment duration
        tkhd = data.rindex(b"tkhd", 0, at) + 4
        assert data[tkhd] == 0, "a version-0 tkhd"
        struct.pack_into(">I", data, tkhd + 20, length)  # after version/flags, times, track, reserved
    if tracks == len(edits):
        struct.pack_into(">I", data, mvhd + 16, length)
    path.write_bytes(data)
    return path


def make_vfr_clip(path: Path, times: Sequence[float], last: float, size: tuple[int, int] = (96, 64),
                  audio: bool = True, bframes: bool = False) -> Path:
    """A variable-rate clip (a phone's, a screen recording's): frames stamped with their index at
    `times` (seconds, on a millisecond clock), each packet lasting until the next and the last one
    `last` seconds, so its video ends at times[-1] + last; with a tone that ends there too. Its
    header's rate says 30 fps, as a recorder's may whatever the gaps. `bframes`: frames stored out
    of order (a phone's H.264), so an MP4's packet durations, in decode order, are other frames'."""
    path = Path(path)
    ends = [*times[1:], times[-1] + last]
    lasts = {int(round(t * 1000)): int(round((e - t) * 1000)) for t, e in zip(times, ends)}
    with av.open(str(path), "w") as out:
        vs = out.add_stream("libx264", rate=30)
        vs.width, vs.height, vs.pix_fmt = size[0], size[1], "yuv420p"
        vs.codec_context.time_base = Fraction(1, 1000)
        vs.codec_context.options = {"preset": "faster", "bf": "3"} if bframes else {"preset": "ultrafast"}
        tone = out.add_stream("aac", rate=48000, layout="mono") if audio else None

        held: list[av.Packet] = []  # the last in decode order, whose duration ends an MP4's track
        delay: list[int] = []  # the first packet's pts - dts

        def mux(packets: Sequence[av.Packet]) -> None:
            for packet in packets:
                if packet.pts is not None and packet.time_base is not None:
                    ms = lasts[int(round(float(packet.pts * packet.time_base) * 1000))]
                    packet.duration = int(round(Fraction(ms, 1000) / packet.time_base))
                    delay[:] = delay or [int(packet.pts - (packet.dts if packet.dts is not None else packet.pts))]
                out.mux(held[:1])
                held[:] = [packet]

        for i, t in enumerate(times):
            image = synthetic_frame(i, size)
            stamp_index(image, i)
            frame = av.VideoFrame.from_ndarray(image, format="bgr24")
            frame.pts, frame.time_base = int(round(t * 1000)), Fraction(1, 1000)
            mux(vs.encode(frame))
        mux(vs.encode())
        # a recorder's MP4 track lasts to its last frame's end: its samples' durations add up to it
        last_packet = held[0]
        assert last_packet.time_base is not None and last_packet.dts is not None
        if path.suffix in (".mp4", ".mov"):
            end = int(round(ends[-1] / float(last_packet.time_base)))
            last_packet.duration = max(last_packet.duration or 0, end - delay[0] - int(last_packet.dts))
        out.mux(last_packet)
        if tone is not None:
            _write_tone(out, tone, ends[-1], 48000)
    return path


def video_end(path: Path) -> float:
    """Where a file's video ends in seconds, as players and ffprobe read it: an MP4/MOV track's
    duration (its samples' durations added up) after its first frame's time; a Matroska/WebM
    stream's DURATION tag."""
    with av.open(str(path)) as c:
        stream = c.streams.video[0]
        if stream.duration:
            first = stream.start_time or 0
            return float((first + stream.duration) * stream.time_base)
        h, m, s = str(stream.metadata["DURATION"]).split(":")
        return int(h) * 3600 + int(m) * 60 + float(s)


def cut_short_lines(messages: Sequence[str]) -> list[str]:
    """The warnings saying how much of a cut-short input could be read, without the skipped-packet
    clause PyAV 17 puts first (it reports the cut-through last packet as corrupt; later PyAV drops
    it quietly), which a segmented run says on a line of its own."""
    skipped = re.compile(r"^warning: skipped \d+ corrupt video packets? in [^;]*\(damaged data\); ")
    return [skipped.sub("warning: ", m) for m in messages if "could be read" in m]
