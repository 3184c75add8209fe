"""Joining video parts encoded on several machines into one file, without re-encoding.

Each part is a small container holding one video stream plus the exact (pts, dts) its encoder
gave every packet (`EncodedPart.times`): the container may round them (Matroska keeps
milliseconds), so the join puts the encoder's own back. Parts must share their codec parameters
(codec, size, pixel format, extradata), and decode timestamps must rise strictly across the
joints; either failing is an OutputError naming the part. The input's audio is copied once,
interleaved as the video advances, exactly as VideoWriter copies it.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any, Sequence, cast

import av

from livecam.errors import OutputError
from livecam.media.containers import as_fraction
from livecam.media.video_reader import Chapter
from livecam.media.video_writer import (copy_attachments, input_audio_track, input_subtitle_tracks, open_output,
                                         set_timecode, tag_for_players, tracks_written)


@dataclass(frozen=True)
class EncodedPart:
    """One segment's video as encoded: a `format` container and its packets' exact timestamps."""

    data: bytes
    format: str  # FFmpeg muxer/demuxer name of `data`
    time_base: Fraction  # of `times`
    times: tuple[tuple[int, int | None], ...]  # (pts, dts) per packet, in decode order
    name: str = "part"  # how messages name it (file and segment)


def _params(stream: av.video.stream.VideoStream) -> tuple[Any, ...]:
    cc = stream.codec_context
    return (cc.name, cc.width, cc.height, cc.format.name if cc.format else None, bytes(cc.extradata or b""))


def join_parts(parts: Sequence[EncodedPart], path: Path, *, fmt: str, metadata: dict[str, str],
               audio_from: Path | None, shown: Path, audio_end: float | None = None,
               chapters: Sequence[Chapter] = (), subtitles_from: Path | None = None,
               attachments_from: Path | None = None, timecode: str | None = None,
               ) -> tuple[str | None, tuple[int, int]]:
    """Write `parts` in order into a `fmt` file at `path` (a temporary name: the caller commits
    it), with the audio tracks of `audio_from` (audio_order) (cut at `audio_end` seconds when given).
    The subtitles of `subtitles_from` are kept as VideoWriter keeps them (cut there too), and the
    attached files of `attachments_from` (copy_attachments), and the start `timecode` (set_timecode).
    Returns the audio mode ('copy', 'reencode' or None) and the audio and subtitle tracks written
    (tracks_written). Errors name `shown`."""
    if not parts:
        raise OutputError(f"nothing to write to {shown}: no video part was encoded")
    out = open_output(path, fmt, metadata, shown, chapters)
    audio = None
    subtitles: list[Any] = []
    try:
        first = av.open(io.BytesIO(parts[0].data), "r", format=parts[0].format)
        try:
            template = first.streams.video[0]
            expected = _params(template)
            video = out.add_stream_from_template(template)
            tag_for_players(out, video)
            rate = template.average_rate
            set_timecode(video, timecode, rate=as_fraction(rate) if rate else None)
            video.time_base = parts[0].time_base
            if template.sample_aspect_ratio:  # the muxer's own (MP4 'pasp'), as VideoWriter sets it
                cast(Any, video).sample_aspect_ratio = template.sample_aspect_ratio
        finally:
            first.close()
        if audio_from is not None:
            audio = input_audio_track(out, audio_from)
        if subtitles_from is not None:
            subtitles = input_subtitle_tracks(out, subtitles_from)
        if attachments_from is not None:
            copy_attachments(out, attachments_from)
        last_dts: int | None = None
        for part in parts:
            with av.open(io.BytesIO(part.data), "r", format=part.format) as container:
                stream = container.streams.video[0]
                if _params(stream) != expected:
                    raise OutputError(f"cannot join {part.name} into {shown}: its codec parameters differ from the "
                                      "first part's (workers with different FFmpeg builds or encoders?); run the "
                                      "cluster's nodes with the same livecam install")
                count = 0
                for packet in container.demux(stream):
                    if packet.size == 0:
                        continue
                    if count >= len(part.times):
                        raise OutputError(f"cannot join {part.name} into {shown}: it holds more packets than "
                                          f"its encoder reported ({len(part.times)})")
                    pts, dts = part.times[count]
                    count += 1
                    dts = pts if dts is None else dts
                    if last_dts is not None and dts <= last_dts:
                        raise OutputError(f"cannot join {part.name} into {shown}: its decode timestamps do not "
                                          "follow the previous part's; try a longer --segment-seconds")
                    last_dts = dts
                    packet.pts, packet.dts = pts, dts
                    if packet.duration and packet.time_base:  # the part container's time base, not the times'
                        packet.duration = int(round(packet.duration * packet.time_base / part.time_base))
                    packet.time_base = part.time_base
                    packet.stream = video
                    out.mux(packet)
                    if audio is not None:
                        audio.pump(float(pts * part.time_base))
                    for track in subtitles:
                        track.pump(float(pts * part.time_base))
                if count != len(part.times):
                    raise OutputError(f"cannot join {part.name} into {shown}: it holds {count} packets where its "
                                      f"encoder reported {len(part.times)} (damaged in transfer?)")
        if audio is not None:
            audio.pump(audio_end, final=True)
        for track in subtitles:
            track.pump(audio_end, final=True)
        out.close()
    except OSError as exc:
        _close_quietly(out)
        from livecam.atomic import output_error

        raise output_error(shown, exc) from exc
    except av.error.FFmpegError as exc:
        _close_quietly(out)
        raise OutputError(f"joining the parts of {shown} failed: {str(exc).splitlines()[0]}") from exc
    except BaseException:
        _close_quietly(out)
        raise
    finally:
        if audio is not None:
            audio.close()
        for track in subtitles:
            track.close()
    return (audio.mode if audio is not None else None), tracks_written(audio, len(subtitles))


def _close_quietly(out: av.container.OutputContainer) -> None:
    try:
        out.close()
    except (OSError, av.error.FFmpegError):
        pass
