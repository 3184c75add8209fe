"""A segment of an input for a machine that cannot read the input: its video packets,
stream-copied (no decoding) from the keyframe its warm-up starts at to the last packet its
frames need, in a small container, with every packet's exact timestamps beside it (the
container rounds them: Matroska keeps milliseconds) and the input's VideoInfo.

    driver: cut_chunk(path, segment, info) -> Chunk (bytes)
    worker: ChunkReader(chunk).frames_from(...) -> the frames a VideoReader of the input gives
            from the segment's keyframe on: the same pictures at the same times

The audio stays behind: the driver copies it from the input when it joins the parts.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Iterator, cast

import av

from livecam.errors import InputError
from livecam.media.containers import as_fraction
from livecam.media.join import EncodedPart
from livecam.media.segments import Segment
from livecam.media.video_reader import DecodedFrame, VideoDecoder, VideoInfo, open_input, video_stream_of

CHUNK_FORMAT = "matroska"  # takes (nearly) every codec FFmpeg decodes, stream-copied as is


@dataclass(frozen=True)
class Chunk:
    """A segment's input packets (`packets.times` in the input stream's ticks) and the input's info."""

    packets: EncodedPart
    info: VideoInfo


def cut_chunk(path: Path, segment: Segment, info: VideoInfo, *, name: str) -> Chunk:
    """The packets of `segment` (planned on `path`'s PacketIndex), stream-copied. InputError
    naming `name` when the input does not hold them where the plan says."""
    times: list[tuple[int, int | None]] = []
    buffer = io.BytesIO()
    try:
        with open_input(path) as container:
            stream = video_stream_of(container, str(path))
            tb = as_fraction(stream.time_base) if stream.time_base else Fraction(1, 90000)  # as index_packets
            if segment.seek_pts is not None:
                container.seek(segment.seek_pts, stream=stream, backward=True, any_frame=False)
            with av.open(buffer, "w", format=CHUNK_FORMAT) as out:
                copy = out.add_stream_from_template(stream)
                copy.time_base = stream.time_base
                started = segment.seek_pts is None
                done = False
                for packet in container.demux(stream):
                    if packet.size == 0:
                        continue
                    if not started:
                        if packet.pts != segment.seek_pts:
                            continue  # the demuxer landed before the keyframe
                        started = True
                    # every packet has a pts: index_packets refused the file otherwise
                    times.append((int(cast(int, packet.pts)), None if packet.dts is None else int(packet.dts)))
                    done = packet.pts == segment.stop_pts and not packet.is_discard
                    packet.stream = copy
                    out.mux(packet)
                    if done:
                        break
    except av.error.FFmpegError as exc:
        raise InputError(f"{name}: its packets could not be copied ({str(exc).splitlines()[0]}); run this "
                         "file without --cluster") from exc
    if not done:
        raise InputError(f"{name}: the input does not hold the packets its plan names (changed since?); "
                         "run it again")
    part = EncodedPart(data=buffer.getvalue(), format=CHUNK_FORMAT, time_base=tb, times=tuple(times), name=name)
    return Chunk(packets=part, info=info)


class ChunkReader:
    """A Chunk read as VideoReader reads the input: `info` (the input's) and `frames_from`."""

    def __init__(self, chunk: Chunk) -> None:
        self.chunk = chunk
        self.info = chunk.info
        try:
            self._container = av.open(io.BytesIO(chunk.packets.data), "r", format=chunk.packets.format)
        except av.error.FFmpegError as exc:
            raise InputError(f"{chunk.packets.name}: its chunk does not open ({str(exc).splitlines()[0]}); "
                             "damaged in transfer?") from exc
        self._count = 0

    def _restamp(self, packet: av.Packet) -> None:
        """The packet's exact timestamps back, in the order the chunk was cut."""
        part = self.chunk.packets
        if packet.duration and packet.time_base:  # in the chunk's time base: said in the input's
            packet.duration = int(round(packet.duration * packet.time_base / part.time_base))
        packet.time_base = part.time_base  # the flush packet's too: the frames it gives carry it
        if not packet.size:
            return
        if self._count >= len(part.times):
            raise InputError(f"{part.name}: its chunk holds more packets than were cut ({len(part.times)}); "
                             "damaged in transfer?")
        packet.pts, packet.dts = part.times[self._count]
        self._count += 1

    def frames_from(self, seek_pts: int | None) -> Iterator[DecodedFrame]:
        """Every frame of the chunk, on the input's timeline (the chunk starts at `seek_pts`)."""
        info = self.info
        decoder = VideoDecoder(self._container, self._container.streams.video[0], info.path.name,
                               size=(info.width, info.height), rate=info.rate, origin=info.origin,
                               mirror=info.mirror, restamp=self._restamp)
        try:
            yield from decoder
        finally:
            decoder.report()
        if self._count != len(self.chunk.packets.times):
            raise InputError(f"{self.chunk.packets.name}: its chunk holds {self._count} packets where "
                             f"{len(self.chunk.packets.times)} were cut; damaged in transfer?")

    def close(self) -> None:
        self._container.close()

    def __enter__(self) -> "ChunkReader":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
