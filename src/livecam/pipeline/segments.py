"""One video in segments: what a cluster worker runs on one segment, and the driver's join.

    index_packets (no decoding) -> plan_segments -> run_segment per segment (any machine) ->
        write_joined (parts in order, exact timestamps, the input's audio once, one AtomicOutput)

`run_segment` decodes the segment from the input path (seeking to a keyframe before it),
warms the tracker and the label's placement on the overlap frames before it (detection and
tracking only, nothing written; by default at least CHOICE_WARM_UP_S when one face is chosen,
and always at least the label's LABEL_MEMORY_S with a label), then runs
the segment's frames through the same FilePipeline and VideoWriter as a whole-file run, numbered as in the whole file (so --frame-range and the watermark's cadence
count as they would there). The encoded part comes back as bytes with its packets' exact
timestamps. A worker that cannot read the input (no shared storage) is given a Chunk instead
(media.chunks: the segment's packets stream-copied on the driver, exact timestamps beside them),
which decodes to the same frames at the same times. `process_segmented` runs all of it in this process (tests, and the measure of
what a cluster adds); livecam.cluster runs the same functions on Ray workers.
"""

from __future__ import annotations

import logging
import math
import os
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Generator, Iterator, Sequence, Union

from livecam.atomic import AtomicOutput, OutputStart
from livecam.errors import InputError
from livecam.faces.tracking import params_for_strength
from livecam.frame import FramePacket
from livecam.media.chunks import Chunk, ChunkReader, cut_chunk
from livecam.media.join import EncodedPart, join_parts
from livecam.media.provenance import CONTAINER_METADATA, LABEL_MEMORY_S, LabelPlacement
from livecam.media.segments import Segment, index_packets, plan_segments
from livecam.media.video_reader import (DecodedFrame, ReadEnd, VideoInfo, VideoReader, held_until_next,
                                        say_headless)
from livecam.media.video_writer import OutputSpec, VideoWriter, container_format
from livecam.pipeline.contracts import FileEngine
from livecam.pipeline.file import (SMALLER, RunStats, frames_in_flight, in_range, packet_time, run_frames,
                                   say_left_out)
from livecam.pipeline.progress import Progress
from livecam.settings import VideoJob

if TYPE_CHECKING:
    from livecam.marks.watermark import Watermarker

log = logging.getLogger("livecam")

SETTLE_TIME_CONSTANTS = 5  # e^-5: under 1% of where the smoothing started is left after this
# "The one" face is kept from frame to frame (selection.keep_previous), so a segment that chose it
# on its first frame alone took the other of two near-equal faces whenever they swapped rank for a
# moment at the join; warmed up this long, a flip shorter than it keeps the whole-file run's face.
CHOICE_WARM_UP_S = 0.5


def default_overlap_seconds(smoothing: float) -> float:
    """Warm-up before each segment: long enough for the tracker's One-Euro filter (its still
    cut-off is the slowest part) to forget where it started; 0 when nothing is smoothed."""
    params = params_for_strength(smoothing)
    if params is None:
        return 0.0
    time_constant = 1.0 / (2.0 * math.pi * params.min_cutoff)
    return round(SETTLE_TIME_CONSTANTS * time_constant, 2)


def check_segmentable(job: VideoJob) -> None:
    """What a segmented run does not do (yet): InputError naming the option."""
    if job.fps is not None:
        raise InputError("--fps cannot be combined with --cluster in this version; convert the rate first, "
                         "or run without --cluster")


@dataclass(frozen=True)
class SegmentResult:
    """A segment as encoded by a worker."""

    part: EncodedPart
    stats: RunStats  # the segment's counts, as a whole-file run counts them


@dataclass(frozen=True)
class SegmentPlan:
    """A file's segments, as the driver planned them."""

    job: VideoJob
    segments: tuple[Segment, ...]
    info: VideoInfo | None = None  # the input's, as the driver read it (what a chunk carries)
    stamp: tuple[int, int] = (0, 0)  # the input's size and mtime (ns) on the driver
    output: OutputStart | None = None  # the output as checked when planned (what --force covers)

    @property
    def frames(self) -> int:
        return self.segments[-1].end if self.segments else 0

    def name(self, segment: Segment) -> str:
        return f"{self.job.input.name} segment {segment.number + 1} of {len(self.segments)} " \
               f"(frames {segment.first}-{segment.end - 1})"


def plan_job(job: VideoJob, segment_seconds: float, overlap_seconds: float | None) -> SegmentPlan:
    """One demux pass over job.input and its segments (overlap None: the default, for the smoothing
    and the face choice)."""
    check_segmentable(job)
    analysis = job.processing.analysis
    overlap = overlap_seconds if overlap_seconds is not None else max(
        default_overlap_seconds(analysis.smoothing), CHOICE_WARM_UP_S if analysis.one_face else 0.0)
    if job.label:  # the label's corner depends on the faces of the second before a frame
        overlap = max(overlap, LABEL_MEMORY_S)
    index = index_packets(job.input)
    segments = plan_segments(index, segment_seconds, overlap)
    with VideoReader(job.input) as reader:
        info = reader.info
    # a cut-short input is said by its last segment, which decodes to where the read ends (_to_the_end)
    if index.headless[0]:
        say_headless(job.input.name, *index.headless, index.seconds(min(index.pts)), writes=True)
    say_left_out(info, job, timecode=info.timecode is not None)  # once per file: the workers' logs are not shown
    # The join opens the output at the end: a file that appears meanwhile is kept (and the result
    # beside it), as a whole-file run, which opens it at the start, keeps it.
    output = OutputStart.check(job.output, force=job.force)
    return SegmentPlan(job=job, segments=tuple(segments), info=info, stamp=file_stamp(job.input), output=output)


def file_stamp(path: Path) -> tuple[int, int]:
    """Size and modification time (ns): equal on two machines when both see the same file."""
    st = path.stat()
    return st.st_size, st.st_mtime_ns


def readable_here(plan: SegmentPlan) -> bool:
    """Whether this machine reads the driver's input at the driver's path (shared storage, or
    the same copy): readable, of the same size and modification time."""
    try:
        return os.access(plan.job.input, os.R_OK) and file_stamp(plan.job.input) == plan.stamp
    except OSError:
        return False


def cut_segment(plan: SegmentPlan, segment: Segment) -> Chunk:
    """The segment's input packets for a worker that cannot read the input (on the driver)."""
    assert plan.info is not None, "plan_job reads the input's info"
    return cut_chunk(plan.job.input, segment, plan.info, name=plan.name(segment))


class _Reporting(Progress):
    """FilePipeline's progress, passed on as a count of frames written (`report(done)`)."""

    def __init__(self, report: Callable[[int], None]) -> None:
        super().__init__(None, quiet=True)
        self._report = report

    def advance(self, n: int = 1) -> None:
        super().advance(n)
        self._report(self.done)


def run_segment(job: VideoJob, segment: Segment, engine: FileEngine, *, name: str,
                watermark: Watermarker | None = None, report: Callable[[int], None] | None = None,
                stop: threading.Event | None = None, chunk: Chunk | None = None) -> SegmentResult:
    """Decode, warm up, process and encode one segment of job.input (job.encoder resolved), or
    of `chunk` (cut_segment's) when given; LivecamError naming `name` (file and segment) when
    its frames are not what the plan says."""
    opened: Union[VideoReader, ChunkReader] = ChunkReader(chunk) if chunk is not None else VideoReader(job.input)
    with opened as reader, tempfile.TemporaryDirectory(prefix="livecam-part-") as folder:
        info = reader.info
        fmt = container_format(job.output)
        spec = OutputSpec(path=Path(folder) / f"part{job.output.suffix}", format=fmt, width=info.width,
                          height=info.height, rate=info.rate, time_base=info.time_base, encoder=job.encoder,
                          quality=job.quality, target=job.output, sample_aspect=info.sample_aspect,
                          colour=info.colour, smaller=SMALLER)
        engine.reset_tracking()  # what this worker's previous segment left says nothing about this one
        label = LabelPlacement() if job.label else None
        writer = VideoWriter(spec)
        try:
            stats = run_frames(_segment_frames(reader, segment, engine, job, name, label),
                               lambda p: writer.write(p.image, packet_time(p), p.duration), engine,
                               workers=job.processing.runtime.execution_threads,
                               max_in_flight=frames_in_flight(info.width * info.height * 3,
                                                              job.processing.runtime.execution_threads,
                                                              job.max_memory_gb),
                               frame_range=job.frame_range, label=label if label is not None else False,
                               watermark=watermark.video_marker(float(info.rate)) if watermark else None,
                               progress=_Reporting(report) if report is not None else None, stop=stop,
                               first_index=segment.first, keep_partial=False)  # a failed part is aborted
            writer.close()
        except BaseException:
            writer.abort()
            raise
        # the last segment of a cut file decodes fewer frames than it has packets (the last one
        # cut off): as a whole-file run, the output stops where the read does (_to_the_end)
        if stats.frames != segment.frames and not (segment.end_time is None and stats.frames < segment.frames):
            raise InputError(f"{name}: decoded {stats.frames} frames where the plan has {segment.frames}; "
                             "the file is damaged there: run it without --cluster")
        # a cut file's last segment may decode nothing (its only packet cut through): an empty part
        data = spec.path.read_bytes() if stats.frames else b""
        part = EncodedPart(data=data, format=fmt, time_base=info.time_base, times=tuple(writer.packet_times), name=name)
    return SegmentResult(part=part, stats=stats)


def joined_stats(results: Sequence[SegmentResult]) -> RunStats:
    """A joined file's counts, its segments' summed: what a whole-file run's RunStats says."""
    return RunStats.total(r.stats for r in results)


def _segment_frames(reader: VideoReader | ChunkReader, segment: Segment, engine: FileEngine, job: VideoJob,
                    name: str, label: LabelPlacement | None = None) -> Iterator[DecodedFrame]:
    """The segment's frames to write, each held until the next says how long it lasts
    (video_reader.held_until_next), the last until the next segment's first frame or, in the
    last segment, where the whole file's read ends (_to_the_end)."""
    frames = _written_frames(reader, segment, engine, job, name, label)
    if segment.end_time is not None:
        return held_until_next(frames, lambda: segment.end_time)
    return _to_the_end(frames, reader, segment, job.input.name)


def _to_the_end(frames: Iterator[DecodedFrame], reader: VideoReader | ChunkReader, segment: Segment,
                name: str) -> Generator[DecodedFrame, None, None]:
    """The last segment's frames, the last held until where a whole-file read of the input ends
    (ReadEnd.last_end: where the file says, or one frame when the read was cut short), with the
    whole-file read's one warning when it was (the count and time of the frames decoded, not of
    the packets the plan found: a cut file's last packet may not decode)."""
    step = 1 / float(reader.info.rate)
    ending: list[ReadEnd] = []

    def counted() -> Generator[DecodedFrame, None, None]:
        count, read_to = segment.first, segment.first_time  # frames of the file read, where the last one ends
        for frame in frames:
            count, read_to = count + 1, frame.time + step
            yield frame
        ending.append(ReadEnd.of(reader.info, name, count, read_to))
        if ending[0].short:  # said here: with no frame decoded, no last frame asks its end
            log.warning("warning: %s", ending[0].said(writes=True))

    return held_until_next(counted(), lambda: ending[0].last_end)


def _written_frames(reader: VideoReader | ChunkReader, segment: Segment, engine: FileEngine, job: VideoJob,
                    name: str, label: LabelPlacement | None) -> Generator[DecodedFrame, None, None]:
    """The segment's frames from the input, after the warm-up frames have been detected and
    tracked and their faces shown to `label` (in this thread, before the first frame is handed on)."""
    warm_index = segment.warm
    started = False
    for frame in reader.frames_from(segment.seek_pts):
        role = segment.role(frame.time)
        if role == "before":
            continue
        if role == "after":
            return
        if not started:
            first_time = segment.warm_time if role == "warm" else segment.first_time
            if abs(frame.time - first_time) > 1e-6 or (role == "write" and segment.warm < segment.first):
                raise InputError(f"{name}: decoding from the keyframe before it gave a frame at {frame.time:.3f} s "
                                 f"where {first_time:.3f} s was expected; run this file without --cluster")
            started = True
        if role == "warm":
            if (engine.tracks or label is not None) and in_range(warm_index, job.frame_range):
                packet = FramePacket(index=warm_index, image=frame.image, pts=frame.time)
                engine.detect(packet)
                if engine.tracks:
                    engine.track(packet)
                if label is not None:
                    label.observe(frame.time, [face.bbox for face in packet.faces])
            warm_index += 1
            continue
        yield frame


def write_joined(plan: SegmentPlan, results: Sequence[SegmentResult], *,
                 sign: Callable[[Path], None] | None = None, partial: bool = False,
                 ) -> tuple[str | None, tuple[int, int]]:
    """Join the parts of plan.job (in segment order) into its output through one AtomicOutput,
    with the input's audio and subtitles, the synthetic-media tags and (sign) C2PA credentials. partial: a
    leading run of the segments only (--keep-partial), the audio cut where the video stops.
    Returns the audio mode and the audio and subtitle tracks written (as VideoResult has them)."""
    job = plan.job
    with VideoReader(job.input) as reader:
        info = reader.info
    keep_audio = job.audio and info.audio_codec is not None
    end = None
    if partial and results:
        last = plan.segments[len(results) - 1]
        end = last.end_time
    with AtomicOutput(job.output, force=job.force, started=plan.output) as output:
        kept = join_parts([r.part for r in results if r.part.times], output.temp, fmt=container_format(job.output),
                          metadata=dict(CONTAINER_METADATA), audio_from=job.input if keep_audio else None,
                          shown=job.output, audio_end=end, chapters=info.chapters, subtitles_from=job.input,
                          attachments_from=job.input,
                          timecode=info.timecode)  # the reader's, checked; the join keeps the input's rate
        if sign is not None:
            sign(output.temp)
    return kept


def process_segmented(job: VideoJob, engine: FileEngine, *, segment_seconds: float,
                      overlap_seconds: float | None = None, watermark: Watermarker | None = None,
                      sign: Callable[[Path], None] | None = None, chunks: bool = False,
                      ) -> tuple[SegmentPlan, list[SegmentResult]]:
    """Every segment of job in this process, one after the other, then the join: what a
    cluster does, without one (chunks: each segment decoded from its cut_segment chunk)."""
    plan = plan_job(job, segment_seconds, overlap_seconds)
    results = [run_segment(job, s, engine, name=plan.name(s), watermark=watermark,
                           chunk=cut_segment(plan, s) if chunks else None) for s in plan.segments]
    write_joined(plan, results, sign=sign)
    return plan, results

