"""Splitting a video for several machines without decoding it: one demux pass records every
video packet's timestamps and keyframe flag (PacketIndex), and `plan_segments` cuts the frames,
in presentation order, into segments at exact frame times.

A segment is [first, end) of the frame numbers (presentation order, from 0), plus its warm-up:
the frames of the `overlap` seconds before it, which a worker decodes and tracks but does not
write (the tracker's smoothing then starts where one machine's would be), and the keyframe to
seek to so that every frame from the warm-up on decodes. Frame times are on the same timeline as
VideoDecoder's (seconds, input time minus the container's origin), so a worker recognises its
frames by time.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

import av

from livecam.errors import InputError
from livecam.media.containers import as_fraction
from livecam.media.video_reader import open_input, timeline_origin, video_stream_of

SNAP_FRACTION = 0.25  # a keyframe within a quarter of a segment of a cut becomes the cut
SNAP_MAX_S = 2.0  # ... and never further than this


@dataclass(frozen=True)
class PacketIndex:
    """The video stream's packets as demuxed: timestamps in `time_base` ticks, keyframe flags."""

    path: Path
    time_base: Fraction
    origin: float  # seconds of the input's timestamps that are 0 on the decoders' timeline
    pts: tuple[int, ...]  # in decode order
    dts: tuple[int | None, ...]
    keyframe: tuple[bool, ...]
    headless: tuple[int, float] = (0, 0.0)  # frames and seconds left out before the first keyframe


    @property
    def frame_pts(self) -> tuple[int, ...]:
        """Presentation timestamps of the frames, in presentation order."""
        return tuple(sorted(self.pts))

    def seconds(self, pts: int) -> float:
        """`pts` on the decoders' timeline (computed as VideoDecoder computes a frame's time)."""
        return float(pts * self.time_base) - self.origin


def index_packets(path: Path) -> PacketIndex:
    """One demux pass over `path`'s video stream (no decoding). InputError when the stream
    cannot be cut by timestamps (packets without one, timestamps that repeat or restart)."""
    pts: list[int] = []
    dts: list[int | None] = []
    key: list[bool] = []
    with open_input(path) as container:
        stream = video_stream_of(container, str(path))
        tb = as_fraction(stream.time_base) if stream.time_base else Fraction(1, 90000)
        origin = timeline_origin(container)
        try:
            for packet in container.demux(stream):
                if packet.size == 0 or packet.is_discard:
                    continue  # the demuxer's flush packet; frames an edit list drops
                if packet.pts is None:
                    raise InputError(f"{path.name} has video packets without timestamps; it cannot be split "
                                     "for a cluster run: run it without --cluster, or remux it to MP4 or MKV")
                pts.append(int(packet.pts))
                dts.append(int(packet.dts) if packet.dts is not None else None)
                key.append(bool(packet.is_keyframe))
        except av.error.FFmpegError as exc:
            raise InputError(f"{path.name} could not be read to the end ({str(exc).splitlines()[0]}); it cannot "
                             "be split for a cluster run: run it without --cluster") from exc
    if not pts:
        raise InputError(f"{path}: no video packets; the file is truncated or corrupt")
    # A stream that starts without a keyframe (video_reader.HeadlessStart): the non-key packets
    # before its first keyframe, presented before it, do not decode, so no segment plans them.
    lead = next((i for i, k in enumerate(key) if k), 0)
    lost = {i for i in range(lead) if pts[i] < pts[lead]}
    headless = (len(lost), float((pts[lead] - min(pts[i] for i in lost)) * tb)) if lost else (0, 0.0)
    kept = [i for i in range(len(pts)) if i not in lost]
    pts, dts, key = [pts[i] for i in kept], [dts[i] for i in kept], [key[i] for i in kept]
    if len(set(pts)) != len(pts):
        raise InputError(f"{path.name} has video frames with equal or restarting timestamps; it cannot be split "
                         "for a cluster run: run it without --cluster")
    return PacketIndex(path=Path(path), time_base=tb, origin=origin, pts=tuple(pts), dts=tuple(dts),
                       keyframe=tuple(key), headless=headless)


@dataclass(frozen=True)
class Segment:
    """Frames [first, end) of a file (presentation order), warmed up from frame `warm` on."""

    number: int  # 0, 1, ... within the file
    first: int
    end: int
    warm: int  # first frame decoded for the tracker's warm-up (== first: none)
    seek_pts: int | None  # keyframe to seek to (stream ticks); None: decode from the start
    warm_time: float  # times of frames warm, first and end on the decoders' timeline
    first_time: float
    end_time: float | None  # None: to the end of the file
    stop_pts: int  # the last packet (decode order) a decode of frames warm..end-1 needs

    @property
    def frames(self) -> int:
        return self.end - self.first

    def role(self, time: float) -> str:
        """'before', 'warm', 'write' or 'after' for a decoded frame at `time` seconds."""
        eps = 1e-6  # times are computed the same way on both sides; this only absorbs float noise
        if time < self.warm_time - eps:
            return "before"
        if time < self.first_time - eps:
            return "warm"
        if self.end_time is None or time < self.end_time - eps:
            return "write"
        return "after"


def plan_segments(index: PacketIndex, segment_seconds: float, overlap_seconds: float) -> list[Segment]:
    """Cut the frames at about every `segment_seconds` (at a keyframe when one is near), each
    segment with `overlap_seconds` of warm-up before it."""
    if segment_seconds <= 0:
        raise InputError(f"--segment-seconds must be above 0, got {segment_seconds:g}")
    if overlap_seconds < 0:
        raise InputError(f"--overlap-seconds must be 0 or more, got {overlap_seconds:g}")
    frame_pts = index.frame_pts
    times = [index.seconds(p) for p in frame_pts]
    key_times = sorted(index.seconds(p) for p, k in zip(index.pts, index.keyframe) if k)
    key_frames = [bisect.bisect_left(times, t - 1e-9) for t in key_times]
    snap = min(SNAP_MAX_S, SNAP_FRACTION * segment_seconds)
    cuts = [0]
    target = times[0] + segment_seconds
    while True:
        i = bisect.bisect_left(times, target - 1e-9)
        if i >= len(times):
            break
        near = [k for k, t in zip(key_frames, key_times) if abs(t - target) <= snap and k > cuts[-1]]
        if near:
            i = min(near, key=lambda k: abs(times[k] - target))
        if i > cuts[-1]:
            cuts.append(i)
        target = times[i] + segment_seconds
    bounds = list(zip(cuts, cuts[1:] + [len(times)]))
    # a frame presented before a cut may be decoded after the cut's own (B-frames): a segment's
    # packets end with the last one, in decode order, that holds a frame before its end
    last_before = []
    latest = -1
    order = sorted(range(len(index.pts)), key=lambda i: index.pts[i])  # decode positions, by frame
    for position in order:
        latest = max(latest, position)
        last_before.append(latest)
    segments = []
    for number, (first, end) in enumerate(bounds):
        warm = bisect.bisect_left(times, times[first] - overlap_seconds - 1e-9) if number else first
        seek = None
        if warm > 0:
            # The last keyframe at or before the warm-up's first frame: every frame from there
            # on decodes (an open GOP's leading pictures come before it in presentation order).
            at = bisect.bisect_right(key_times, times[warm] + 1e-9) - 1
            if at >= 0 and key_frames[at] > 0:
                seek = frame_pts[key_frames[at]]
        segments.append(Segment(number=number, first=first, end=end, warm=warm, seek_pts=seek,
                                warm_time=times[warm], first_time=times[first],
                                end_time=times[end] if end < len(times) else None,
                                stop_pts=index.pts[last_before[end - 1]]))
    return segments
