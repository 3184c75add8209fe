"""The file pipeline: decode thread -> N processing workers -> encode thread, in frame order.

    reader.frames() --decode thread--> work queue --N workers: [convert], detect, [track], process, label-->
        ReorderBuffer --encode thread--> writer.write() (video + interleaved audio)

The decode thread only decodes: a frame's BGR image is made by the worker that takes it (a
video_reader.DecodedFrame converts when first asked for), so the one decode thread does not cap
the run's frame rate with the colour conversion.

Memory is bounded by a semaphore of `max_in_flight` slots: the decode thread takes one per
frame and the encode thread gives it back once that frame is written, so at most that many
frames exist at once whatever the video's length. The frame the encoder waits for is always
decoded before any later one, so the bound cannot deadlock. Nothing is dropped.

The engine is a contracts.FileEngine; tests pass fakes. Workers call it concurrently (ONNX
Runtime sessions are thread-safe for run()). Detection needs no order (analyse(track=False)
keeps no state). Tracking does (each new track confirmed by FaceMesh, the one face chosen
among the confirmed and kept from frame to frame, --smoothing): when the engine `tracks` (every
real engine), workers call its `detect(packet)`, hand the packet to an InOrder step that calls
`track(packet)` strictly in frame order (one call at a time), and process what it returns.

With lanes (runtime/lanes.py: a GPU provider), worker i is lane i: it detects and processes
with `lanes[i]`, an engine whose sessions only that thread runs; tracking stays with the run's
engine, so the ordered step is the same whatever lane detected a frame.
Whichever worker completes a run of consecutive detected frames tracks them all (cheap: a
One-Euro filter; FaceMesh only on a new track), processes the first and puts the others at the head of the work queue for any
free worker; a worker whose frame must wait for an earlier one does not wait, it takes the next
frame. So no worker idles on the order and no extra thread is needed; the waiting frames hold
their in-flight slots, so the memory bound is unchanged.

The label's corner depends on the faces of the second before a frame (LabelPlacement), so it
is decided by a second InOrder step, `placing`, which takes every frame as soon as its faces are
known (after analyse; tracked: as the ordered step releases it; outside --frame-range: at once)
and places it in frame order; the worker draws it after processing, waiting if needed until
that frame has been placed (only for the faces of earlier frames, never for their swaps: see
_placed for why this cannot deadlock). So the corners are those of a one-worker run whatever
the worker count and timing, and the watermark still goes on last, over the label.

A frame that --fps shows on several output ticks (retime) travels as one packet carrying the
later ticks' times (FramePacket.repeats) and holds one slot: the engine processes it once, the
worker labels it once and pushes one packet per tick (the same array, marked by the watermark
at each tick's own index: one embed for all its marked ticks where the marker is Cadenced), and
the encoder gives the slot back after its last tick.
"""

from __future__ import annotations

import functools
import logging
import math
import queue
import threading
import time
from collections import Counter as Tally, deque
from dataclasses import dataclass, field, fields
from fractions import Fraction
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator, Protocol, Sequence, runtime_checkable

import numpy as np

from livecam.atomic import DISK_FULL, AtomicOutput, OutputConflictError
from livecam.errors import Interrupted
from livecam.frame import FramePacket
from livecam.media.containers import frame_rate
from livecam.media.timecode import conform
from livecam.media.video_reader import VideoInfo, VideoReader
from livecam.media.video_writer import (OutputSpec, VideoWriter, container_format,
                                         dropped_attachments, say_trimmed, subtitle_fate)
from livecam.pipeline.budget import default_in_flight, plan_video
from livecam.pipeline.contracts import FileEngine
from livecam.pipeline.progress import Counter, Progress
from livecam.pipeline.queues import BoundedQueue, ReorderBuffer, put_until
from livecam.pipeline.stages import POLL_S, Stages
from livecam.processors.base import MIN_EYE_DISTANCE, changed_faces, usable, why_unchanged
from livecam.media.provenance import CONTAINER_METADATA, LabelPlacement, draw_label
from livecam.settings import VideoJob
from livecam.console import agree, counted

SMALLER = "a lower --video-quality"  # what makes `video`'s output smaller, for a size limit's message

if TYPE_CHECKING:
    from livecam.marks.watermark import Watermarker

log = logging.getLogger("livecam")

_JOIN_S = 5.0


class InOrder:
    """Calls `step` on packets strictly by index from `first` on, whatever order they arrive in.

    add() returns the packets that became ready (already stepped, in order): none when an
    earlier one is still missing, several when this one completed a run. Indices from `first`
    must all arrive (the frame range is contiguous and nothing is dropped); a packet with
    repeats stands for its own index and the next len(repeats) ones."""

    def __init__(self, step: Callable[[FramePacket], None], first: int = 0) -> None:
        self._step = step
        self._next = first
        self._waiting: dict[int, FramePacket] = {}
        self._cond = threading.Condition()

    def add(self, packet: FramePacket) -> list[FramePacket]:
        with self._cond:  # also makes the (non-thread-safe) tracker's calls one at a time
            self._waiting[packet.index] = packet
            ready = []
            while self._next in self._waiting:
                ready.append(self._waiting.pop(self._next))
                self._step(ready[-1])
                self._next += 1 + len(ready[-1].repeats)  # a repeated frame holds its ticks' indices
            if ready:
                self._cond.notify_all()
            return ready

    def wait(self, packet: FramePacket, timeout: float) -> bool:
        """Whether `packet` has been stepped, waiting up to `timeout` seconds for it."""
        with self._cond:
            return self._cond.wait_for(lambda: self._next > packet.index, timeout)

    @property
    def waiting(self) -> int:
        with self._cond:
            return len(self._waiting)


@dataclass(frozen=True, slots=True)
class Decoded:
    """A frame as the decode thread hands it on: its packet is made by the worker that takes it
    (which converts its image)."""

    index: int
    frame: TimedFrame
    pts: float
    repeats: tuple[float, ...] = ()
    duration: float | None = None  # seconds it is shown (TimedFrame.duration), on one tick only

    def packet(self) -> FramePacket:
        return FramePacket(index=self.index, image=self.frame.image, pts=self.pts, repeats=self.repeats,
                           duration=self.duration)


class WorkQueue(BoundedQueue["Decoded | None"]):
    """The workers' queue: decoded frames (bounded, FIFO, put_wait from the decode thread; None
    ends the stream) and, served first, frames that passed the ordered tracking step and only
    wait to be processed (the oldest in flight, which the encoder needs next; whichever worker
    is free takes them). That lane needs no bound: its frames already hold in-flight slots."""

    def __init__(self, maxsize: int) -> None:
        super().__init__(maxsize)
        self._ready: deque[FramePacket] = deque()

    def put_ready(self, packets: Iterable[FramePacket]) -> None:
        with self._cond:
            self._ready.extend(packets)
            self._cond.notify_all()

    def get(self, timeout: float) -> tuple[FramePacket | Decoded | None, bool]:
        """(packet, True) for a tracked frame to process, (item, False) for a decoded one; raises
        queue.Empty after timeout. A worker that gets None (end of stream) may stop: tracked
        frames are only added by a worker that has not stopped, and come out before None."""
        with self._cond:
            if not self._cond.wait_for(lambda: bool(self._ready or self._items), timeout):
                raise queue.Empty
            if self._ready:
                return self._ready.popleft(), True
            item = self._items.popleft()
            self._cond.notify_all()  # room for the decode thread
            return item, False


@runtime_checkable
class Cadenced(Protocol):
    """A watermark step that says which output frames it marks (marks.watermark.VideoMarker)."""

    def marks(self, index: int) -> bool: ...


class TimedFrame(Protocol):
    @property
    def image(self) -> np.ndarray: ...

    @property
    def time(self) -> float: ...

    @property
    def duration(self) -> float | None:
        """How long the input shows it in seconds (video_reader.DecodedFrame.duration); None where
        the source does not say (one frame at its rate)."""
        ...


@dataclass(frozen=True, slots=True)
class OutFrame:
    image: np.ndarray
    time: float
    repeats: tuple[float, ...] = ()  # times of the later output ticks that show it (retime)
    duration: float | None = None  # seconds it is shown (TimedFrame.duration)


@dataclass(frozen=True, slots=True)
class Retimed:
    """An input frame on the output's ticks (retime): shown at `time` and at `repeats`; its
    image is the input frame's, made when asked for (by a worker)."""

    frame: TimedFrame
    time: float
    repeats: tuple[float, ...] = ()

    @property
    def image(self) -> np.ndarray:
        return self.frame.image

    @property
    def duration(self) -> None:  # each tick lasts one output frame
        return None


def ticks_of(frame: TimedFrame) -> tuple[float, ...]:
    """The output times that show `frame`: its own, then its repeats' (OutFrame, Retimed)."""
    return (frame.time, *(frame.repeats if isinstance(frame, (OutFrame, Retimed)) else ()))


@dataclass
class RunStats:
    frames: int = 0  # written
    processed: int = 0  # went through the engine
    with_faces: int = 0
    usable: int = 0  # with a face big enough for the processors to change (processors.base.usable)
    faces_changed: int = 0  # faces the processors changed, summed over the frames (processors.base.changed_faces)
    faces_small: int = 0  # faces found but too small to change (not processors.base.usable), summed
    faces_unfitted: int = 0  # faces the mesh swapper could not fit, summed (FramePacket.unfitted)
    faces_faint: int = 0  # faces the swap was too faint to change, summed (FramePacket.faint)
    interrupted: bool = False
    seconds: float = 0.0
    stage_ms: dict[str, float] = field(default_factory=dict)  # summed over processed frames

    @property
    def fps(self) -> float:
        return self.frames / self.seconds if self.seconds > 0 else 0.0

    @classmethod
    def total(cls, parts: Iterable[RunStats]) -> RunStats:
        """The counts of several runs as one (a file's segments, a folder's files): every field
        summed (interrupted: any was; stage_ms: per stage), so a new field is never left out."""
        total = cls()
        for part in parts:
            for f in fields(cls):
                mine, theirs = getattr(total, f.name), getattr(part, f.name)
                if isinstance(mine, bool):
                    setattr(total, f.name, mine or theirs)
                elif isinstance(mine, dict):
                    for key, value in theirs.items():
                        mine[key] = mine.get(key, 0) + value
                else:
                    setattr(total, f.name, mine + theirs)
        return total


def frames_in_flight(frame_bytes: int, workers: int, max_memory_gb: float | None) -> int:
    """How many decoded frames may exist at once (budget.plan_video sizes them by bytes)."""
    if max_memory_gb is None:
        return default_in_flight(workers)
    pixels = max(1, frame_bytes // 3)
    return plan_video(pixels, 1, workers, max_memory_gb, warn=False).frames_in_flight


def in_range(index: int, frame_range: tuple[int, int | None] | None) -> bool:
    if frame_range is None:
        return True
    start, end = frame_range
    return index >= start and (end is None or index < end)


def packet_time(packet: FramePacket) -> float:
    """The presentation time run_frames gave `packet` (from its input frame)."""
    if packet.pts is None:
        raise ValueError(f"frame {packet.index} has no presentation time")
    return packet.pts


# Seconds of float error forgiven where a tick's first half meets the input's end.
_END_SLACK_S = 1e-6


def retimed_frames(duration: float, fps: float) -> int:
    """How many frames --fps `fps` makes of `duration` seconds: the ticks whose first half lies
    before the end, at least one (the one statement of the rule: retime keeps the ticks it counts);
    so the output is never longer than the input by more than half an output frame (1.03 s at
    --fps 7 was 8 frames, 1.14 s)."""
    return max(1, math.floor((duration + _END_SLACK_S) * fps + 0.5))


def retime(frames: Iterable[TimedFrame], fps: Fraction, input_rate: Fraction) -> Iterator[Retimed]:
    """Constant `fps` output from any input timing: each output tick shows the input frame
    nearest to it (frames are dropped or repeated); the first tick is the first frame's time.
    A frame shown on several ticks comes once, at its first tick, with the later ticks' times
    in `repeats`: the pipeline processes it once and writes its result on each (--fps 30 on a
    10 fps clip had swapped and enhanced three identical frames for every input frame).

    The output ends where the input does (its last frame's time + its duration, else one input
    frame: a variable-rate clip's last frame may last far longer) as closely as
    the output's ticks allow: the first retimed_frames(end - first tick) ticks are written. The end
    is known at the last frame only, so a tick near the newest frame waits until a later frame
    shows it is written (one held, when slowing down)."""
    step = 1.0 / float(fps)
    nominal = 1.0 / float(input_rate or fps)  # a frame's duration where the input does not say
    held: deque[tuple[int, Retimed]] = deque()  # ticks not yet known to be written, by first tick number
    prev: TimedFrame | None = None
    t0 = 0.0
    k = 0

    def tick(until: float) -> None:
        """prev, once, on every tick before `until` (held)."""
        nonlocal k
        assert prev is not None
        first, times = k, []
        while t0 + k * step < until:
            times.append(t0 + k * step)
            k += 1
        if times:
            held.append((first, Retimed(prev, times[0], tuple(times[1:]))))

    def release(end: float, final: bool) -> Iterator[Retimed]:
        """The held ticks written for an input that ends at `end`: its end when `final`, else
        where it reaches at least (a held frame's ticks go out together, or not yet)."""
        written = retimed_frames(end - t0, float(fps))
        while held:
            first, shown = held[0]
            times = ticks_of(shown)[:max(0, written - first)]
            if not final and len(times) < 1 + len(shown.repeats):
                return
            held.popleft()
            if times:
                yield Retimed(shown.frame, times[0], tuple(times[1:]))

    for frame in frames:
        if prev is None:
            prev, t0 = frame, frame.time
            continue
        tick((prev.time + frame.time) / 2 + 1e-9)
        prev = frame
        yield from release(frame.time + nominal, final=False)  # the end is no earlier than this frame's
    if prev is not None:
        end = prev.time + (prev.duration or nominal)
        tick(end)
        yield from release(end, final=True)


def range_runs(first: int, count: int, frame_range: tuple[int, int | None] | None) -> list[tuple[int, int]]:
    """The indices [first, first + count) cut where frame_range starts or ends: (start, end)
    runs each wholly inside or outside it (a repeated frame whose ticks straddle a bound is
    processed for the ticks inside only, as when every tick was its own frame)."""
    end = first + count
    cuts = {first, end} | {b for b in (frame_range or ()) if b is not None and first < b < end}
    ordered = sorted(cuts)
    return list(zip(ordered, ordered[1:]))


class FilePipeline:
    """Every frame through the engine with `workers` threads, handed to `write` strictly in
    order from one encode thread (see the module docstring for the memory bound and the ordered
    smoothing step).

    on_warm is called once from the encode thread when as many frames as may be in flight have
    been written: every thread, codec and buffer exists by then (the moment to cap memory).
    first_index numbers the first frame (frame_range and the watermark's cadence count in the
    whole file when a cluster worker runs one segment of it). keep_partial: an input that fails
    (too damaged to read on) ends there and the frames read before it are still processed and
    written, for a caller that keeps a partial output; without it every stage stops at once, as
    the output will be thrown away."""

    def __init__(self, frames: Iterable[TimedFrame], write: Callable[[FramePacket], None], engine: FileEngine, *,
                 workers: int = 1, max_in_flight: int = 6, frame_range: tuple[int, int | None] | None = None,
                 label: bool | LabelPlacement = True,
                 watermark: Callable[[int, np.ndarray], np.ndarray] | None = None,
                 progress: Counter | None = None, stop: threading.Event | None = None,
                 on_warm: Callable[[], None] | None = None, lanes: Sequence[FileEngine] = (),
                 first_index: int = 0, keep_partial: bool = True) -> None:
        self.frames = frames
        self.keep_partial = keep_partial
        self.first_index = first_index  # of the first frame (a cluster segment's place in its file)
        self.write = write
        self.engine = engine
        self.lanes = list(lanes)  # worker i runs lanes[i] (one per worker); empty: all share `engine`
        self.workers = len(self.lanes) or max(1, workers)
        self.max_in_flight = max_in_flight
        self.frame_range = frame_range  # frames outside it skip the engine (labelled all the same)
        # the label's corner over the video (a cluster segment passes the one its warm-up fed)
        self.label = label if isinstance(label, LabelPlacement) else LabelPlacement() if label else None
        # its corner, decided in frame order as each frame's faces become known (_finish draws it)
        self.placing = InOrder(self._place, first_index) if self.label is not None else None
        self.watermark = watermark  # (index, image) -> image; marks.watermark's video cadence
        self.progress = progress
        self.on_warm = on_warm
        self.stages = Stages(stop)
        self.slots = threading.Semaphore(max(self.workers + 2, max_in_flight))
        self.work = WorkQueue(maxsize=max_in_flight + self.workers)
        self.reorder: ReorderBuffer[FramePacket] = ReorderBuffer(first_index, producers=self.workers)
        self.stats = RunStats()
        self._input_error: Exception | None = None  # the read's, raised after the frames before it
        self.ordered: InOrder | None = None
        if engine.tracks:
            self.ordered = InOrder(engine.track, max(first_index, frame_range[0] if frame_range is not None else 0))

    def run(self) -> RunStats:
        """Returns when all frames are written; raises the first error of any thread (an error
        reading the frames once those read before it are written); a KeyboardInterrupt stops every thread and is re-raised (frames written so far stay
        written, so the caller may finalise a shorter file)."""
        started = time.perf_counter()
        try:
            self.stages.start("livecam-decode", self._decode)
            for i in range(self.workers):
                lane = self.lanes[i] if self.lanes else self.engine
                self.stages.start(f"livecam-{'lane' if self.lanes else 'worker'}-{i}", functools.partial(self._work, lane))
            self.stages.wait(self.stages.start("livecam-encode", self._encode))
        except KeyboardInterrupt:
            self.stats.interrupted = True
            raise
        finally:
            self.stages.join(_JOIN_S)  # the caller closes reader and writer next
            self.stats.seconds = time.perf_counter() - started
        self.stages.raise_error()
        if self._input_error is not None:
            raise self._input_error
        return self.stats

    # -- stages (each in its own thread) ----------------------------------------------------------
    def _decode(self) -> None:
        stop = self.stages.stop
        try:
            source = iter(self.frames)
            index = self.first_index
            while True:
                # Take the slot before decoding, so a decoded frame always has one.
                if not self._take_slot():
                    return
                try:
                    frame = next(source, None)
                except Exception as exc:  # noqa: BLE001 - raised by run() once the frames before it are written
                    # The input failed (too damaged to read on): it ends here, and the frames
                    # already read are still processed and written (--keep-partial keeps them);
                    # else nothing will keep them: every stage stops now.
                    if not self.keep_partial:
                        raise
                    self._input_error = exc
                    frame = None
                if frame is None:
                    self.slots.release()
                    return
                times = ticks_of(frame)
                runs = range_runs(index, len(times), self.frame_range)
                # Where the frame range starts or ends inside a repeated frame, each later run
                # gets its own copy (runs are processed in place) and its own slot: that rare
                # frame is converted here.
                pristine = frame.image.copy() if len(runs) > 1 else None
                for n, (start, end) in enumerate(runs):
                    if n and not self._take_slot():
                        return
                    own = frame if pristine is None or n == 0 else OutFrame(pristine.copy(), frame.time)
                    decoded = Decoded(start, own, times[start - index], times[start - index + 1:end - index],
                                      frame.duration if len(times) == 1 else None)
                    if not put_until(self.work, decoded, stop):
                        return
                index += len(times)
        finally:
            for _ in range(self.workers):  # one end-of-stream sentinel per worker
                if not put_until(self.work, None, stop):
                    break

    def _take_slot(self) -> bool:
        """One in-flight slot; False when the run stops first."""
        while not self.slots.acquire(timeout=POLL_S):
            if self.stages.stop.is_set():
                return False
        return not self.stages.stop.is_set()

    def _work(self, engine: FileEngine) -> None:
        try:
            while not self.stages.stop.is_set():
                try:
                    item, tracked = self.work.get(timeout=POLL_S)
                except queue.Empty:
                    continue
                if item is None:
                    break
                packet = item.packet() if isinstance(item, Decoded) else item  # converted here, not in the decode thread
                if tracked:  # placed by the worker that tracked it
                    self._process(engine, packet)
                elif not in_range(packet.index, self.frame_range):
                    self._faces_known(packet)
                    self._finish(packet)
                elif self.ordered is None:
                    engine.analyse(packet, track=False)
                    self._faces_known(packet)
                    self._process(engine, packet)
                else:
                    engine.detect(packet)
                    ready = self.ordered.add(packet)  # often none (an earlier frame is missing), sometimes several
                    for each in ready:
                        self._faces_known(each)
                    if ready:
                        self.work.put_ready(ready[1:])  # for any free worker
                        self._process(engine, ready[0])
        finally:
            self.reorder.finish()

    def _faces_known(self, packet: FramePacket) -> None:
        """Hand a frame whose faces are final (process keeps them) to the label's in-order step."""
        if self.placing is not None:
            self.placing.add(packet)

    def _place(self, packet: FramePacket) -> None:
        """The label's corner for `packet` (the `placing` step: in frame order, so every earlier
        frame's faces are in the placement and no later one's, as in a one-worker run)."""
        assert self.label is not None
        packet.label_corner = self.label.place(packet.image.shape, [face.bbox for face in packet.faces], packet.pts)

    def _placed(self, packet: FramePacket) -> bool:
        """Wait until the label's corner for `packet` is decided; False when the run stops first.

        This cannot deadlock: a worker waits only with a frame already handed to `placing`, and
        only for earlier frames. The work queue is FIFO and fed in frame order, so every earlier
        frame left it before this one, and the worker that took it hands it on without waiting
        for anything: at once outside --frame-range, after analyse untracked, and tracked when
        the ordered step releases it (whichever worker completes a run; the ready lane's frames
        were handed on then). An error in any thread or Ctrl-C sets the stop event, which ends
        the wait within POLL_S."""
        assert self.placing is not None
        while not self.placing.wait(packet, POLL_S):
            if self.stages.stop.is_set():
                return False
        return True

    def _process(self, engine: FileEngine, packet: FramePacket) -> None:
        engine.process(packet)
        packet.timings["processed"] = 1.0
        self._finish(packet)

    def _finish(self, packet: FramePacket) -> None:
        if self.label is not None:
            if not self._placed(packet):
                return  # the run is stopping
            if not packet.image.flags.writeable:
                packet.image = packet.image.copy()
            draw_label(packet.image, corner=packet.label_corner)
        shown = packet.image  # on every tick of the packet (its repeats share the array: written, never changed)
        counted = {"processed": 1.0} if "processed" in packet.timings else {}  # the stage times once
        ticks = [packet] + [FramePacket(index=packet.index + n, image=shown, pts=time, faces=packet.faces,
                                        timings=dict(counted)) for n, time in enumerate(packet.repeats, 1)]
        marked: np.ndarray | None = None  # `shown` marked: the same for every tick the cadence marks
        for tick in ticks:
            if self.watermark is not None:  # last: the mark covers the pixels as written; its cadence per tick
                if marked is not None and isinstance(self.watermark, Cadenced) and self.watermark.marks(tick.index):
                    tick.image = marked  # one embed for the repeats of a frame (it is the costly part)
                else:
                    tick.image = self.watermark(tick.index, shown)
                    marked = tick.image if tick.image is not shown else marked
            self.reorder.push(tick.index, tick)

    def _encode(self) -> None:
        stop, stats = self.stages.stop, self.stats
        owed = 0  # repeats of the last decoded packet still to write; its slot is given back after them
        while not stop.is_set():
            for packet in self.reorder.pop_ready(timeout=POLL_S):
                if stop.is_set():
                    return
                self.write(packet)
                if packet.repeats:
                    owed = len(packet.repeats)
                elif owed:
                    owed -= 1
                if not owed:
                    self.slots.release()
                stats.frames += 1
                if self.on_warm is not None and stats.frames == self.max_in_flight:
                    self.on_warm()
                if packet.timings.pop("processed", None):
                    stats.processed += 1
                    stats.with_faces += bool(packet.faces)
                    stats.usable += any(usable(face) for face in packet.faces)
                    stats.faces_small += sum(not usable(face) for face in packet.faces)
                    stats.faces_changed += changed_faces(packet)
                    stats.faces_unfitted += packet.unfitted
                    stats.faces_faint += packet.faint
                    for stage, ms in packet.timings.items():
                        stats.stage_ms[stage] = stats.stage_ms.get(stage, 0.0) + ms
                if self.progress is not None:
                    self.progress.advance()
            if self.reorder.done:
                return


def run_frames(frames: Iterable[TimedFrame], write: Callable[[FramePacket], None], engine: FileEngine,
               **options: Any) -> RunStats:
    """FilePipeline(frames, write, engine, **options).run()."""
    return FilePipeline(frames, write, engine, **options).run()


# --------------------------------------------------------------------------- a whole video job


@dataclass(frozen=True)
class VideoResult:
    output: Path
    stats: RunStats
    audio: str | None  # copy, reencode or None
    partial: bool
    tracks: tuple[int, int] = (1, 0)  # audio and subtitle tracks written (VideoWriter.tracks)


def say_tracks(audio: str | None, tracks: tuple[int, int]) -> str:
    """What an output's summary says of its sound and subtitles: "audio copied", "2 audio tracks
    re-encoded, 1 subtitle track", "no audio" (a run here and a cluster's join alike)."""
    said = {"copy": "audio copied", "reencode": "audio re-encoded", None: "no audio"}[audio]
    sounds, subtitles = tracks
    if audio is not None and sounds > 1:  # "2 audio tracks copied"
        said = f"{sounds} {said.replace('audio', 'audio tracks', 1)}"
    if subtitles:
        said += f", {counted(subtitles, 'subtitle track')}"
    return said


def process_video(job: VideoJob, engine: FileEngine, *, quiet: bool = False,
                  stop: threading.Event | None = None, on_warm: Callable[[], None] | None = None,
                  watermark: Watermarker | None = None, sign: Callable[[Path], None] | None = None,
                  progress: Counter | None = None, lanes: Sequence[FileEngine] = ()) -> VideoResult:
    """Decode, process and encode job.input into job.output through an AtomicOutput.

    On success the temporary file is renamed onto the output, never over a file that appeared
    there during the run (OutputConflictError, exit 1, naming where the result was kept). On an
    error or interrupt it is removed, or with keep_partial finalised as a valid shorter video and
    renamed the same way; then the error (Interrupted for Ctrl-C) is raised. `watermark` marks
    frames at its video cadence (None: --no-watermark); `sign` adds C2PA content credentials to
    the finished temporary file (None: --no-c2pa or a container C2PA does not sign). `progress`:
    the count a caller owns (one bar over a batch); None: this file's own bar (none when quiet);
    `lanes`: one engine per worker (Engine.lanes(); empty: the workers share `engine`)."""
    with VideoReader(job.input) as reader:  # closed on every path, setup errors included
        return _write_video(reader, job, engine, quiet=quiet, stop=stop, on_warm=on_warm,
                            watermark=watermark, sign=sign, counter=progress, lanes=lanes)


def _say_dropped_streams(kinds: Sequence[str], keep_audio: bool, subtitles: Sequence[str] = (), fmt: str = "",
                         attachments: Sequence[str] = (), timecode: bool = False) -> None:
    """One line for the streams the output leaves out (and the attached files, where the
    container cannot hold them, named with the fix); it said "the input's audio stream is not copied" for a
    second audio track beside "audio copied". `timecode`: the output has the input's start
    timecode, so one timecode track is not left out (it was counted as "1 data stream")."""
    counts = Tally(kind for kind in kinds if keep_audio or kind != "audio")  # --no-audio: asked for
    if timecode and counts["timecode"]:
        counts["timecode"] -= 1
    counts = +counts  # without the kinds counted down to none
    # subtitles the output's container cannot hold (bitmap ones outside Matroska)
    counts.update("subtitle" for codec in subtitles if subtitle_fate(codec, fmt) is None)
    files = dropped_attachments(attachments, fmt)
    if counts or files:
        more = ", ".join([f"{n} {'more ' if kind in ('audio', 'video') else ''}{kind}"
                          f" stream{'s' if n > 1 else ''}" for kind, n in counts.items()]
                         + ([files] if files else []))
        log.warning("note: the output has the input's video%s; not copied: %s",
                    " and its audio" if keep_audio else "", more)


def say_left_out(info: VideoInfo, job: VideoJob, *, timecode: bool) -> None:
    """The notes on what job.output leaves out of the input `info` describes (its other streams,
    chapters, attached files; an odd last column or row): said once per file, before its frames,
    by a whole-file run (process_video) and a segmented one (segments.plan_job) alike.
    `timecode`: the output has the input's start timecode."""
    _say_dropped_streams(info.other_streams, job.audio and info.audio_codec is not None, info.subtitles,
                         container_format(job.output), info.attachments, timecode=timecode)
    say_trimmed(info.width, info.height)


def output_timing(info: VideoInfo, fps: float | None) -> tuple[Fraction, Fraction]:
    """The output video's (frame rate, time base): --fps's, in ticks of one frame, or the
    input's own, its timestamps kept as they are."""
    if fps is not None:
        rate = frame_rate(fps)
        return rate, 1 / rate
    return info.rate, info.time_base


def _write_video(reader: VideoReader, job: VideoJob, engine: FileEngine, *, quiet: bool,
                 stop: threading.Event | None, on_warm: Callable[[], None] | None,
                 watermark: Watermarker | None, sign: Callable[[Path], None] | None,
                 counter: Counter | None = None, lanes: Sequence[FileEngine] = ()) -> VideoResult:
    info = reader.info
    keep_audio = job.audio and info.audio_codec is not None
    rate, time_base = output_timing(info, job.fps)
    # the output starts at the input's first frame (--frame-range swaps frames, it does not cut)
    timecode = conform(info.timecode, info.rate, rate)
    say_left_out(info, job, timecode=timecode is not None)
    if job.fps is not None:
        frames: Iterable[TimedFrame] = retime(reader.frames(), rate, info.rate)
        total = retimed_frames(info.duration, float(rate)) if info.duration else None
    else:
        frames = reader.frames()
        total = info.expected_frames
    # Sized now, with the models resident and before any frame is decoded; the encoder's
    # look-ahead is part of the plan (its frame pool is the largest buffer at 4K and beyond).
    plan = plan_video(info.width, info.height, len(lanes) or job.processing.runtime.execution_threads,
                      job.max_memory_gb, retimed=job.fps is not None, held_back=info.held_back)
    output = AtomicOutput(job.output, force=job.force)
    spec = OutputSpec(path=output.temp, format=container_format(job.output),
                      width=info.width, height=info.height, rate=rate, time_base=time_base,
                      encoder=job.encoder, quality=job.quality, metadata=dict(CONTAINER_METADATA),
                      audio_from=job.input if keep_audio else None, subtitles_from=job.input, target=job.output,
                      attachments_from=job.input,
                      sample_aspect=info.sample_aspect, colour=info.colour, lookahead=plan.lookahead,
                      chapters=info.chapters, timecode=timecode, smaller=SMALLER)
    workers, in_flight = plan.workers, plan.frames_in_flight
    lanes = lanes[:workers]  # a lane is a worker: only as many as the memory holds
    marker = watermark.video_marker(float(rate)) if watermark is not None else None
    log.debug("video: %dx%d at %s fps, %s frames, %d workers, %d frames in flight, encoder look-ahead %s, "
              "memory %.2f of %s GB", info.width, info.height, float(rate), total or "?", workers, in_flight,
              "preset" if plan.lookahead is None else plan.lookahead, plan.needed / (1 << 30),
              "?" if plan.budget is None else f"{plan.budget / (1 << 30):.2f}")
    writer: VideoWriter | None = None
    output.open()  # the --force check again (a file may have appeared while the models loaded)
    try:
        own = Progress(total, quiet=quiet, label=job.output.name) if counter is None else None  # closed here
    except BaseException:
        output.discard()
        raise
    try:
        writer = VideoWriter(spec)
        stats = run_frames(frames, lambda p: writer.write(p.image, packet_time(p), p.duration), engine, workers=workers,
                           max_in_flight=in_flight, frame_range=job.frame_range, label=job.label,
                           watermark=marker, progress=own if own is not None else counter, stop=stop, on_warm=on_warm,
                           lanes=lanes, keep_partial=job.keep_partial)
    except BaseException as exc:
        if own is not None:
            own.close()
        kept = _finish_partial(writer, output, job, exc) if writer is not None else None
        output.discard()  # the writer may have created the file before failing; no-op once committed
        if isinstance(exc, KeyboardInterrupt):
            done = writer.frames_written if writer is not None else 0
            where = (f"; the first {counted(done, 'frame')} {agree(done, 'was', 'were')} kept in {kept}"
                     if kept else "; no output written")
            raise Interrupted(f"interrupted after {counted(done, 'frame')}{where}") from exc
        raise
    if own is not None:
        own.close()
    try:
        writer.close()
        if sign is not None:  # C2PA content credentials over the finished file, before the rename
            sign(output.temp)
    except BaseException:
        output.discard()
        raise
    output.commit()  # OutputConflictError when a file appeared at job.output meanwhile
    say_unchanged(stats, job)
    return VideoResult(output=job.output, stats=stats, audio=writer.audio_mode, partial=False, tracks=writer.tracks)


def say_unchanged(stats: RunStats, job: VideoJob) -> None:
    """The one warning a written video gets when it came out as it went in: no frame in
    --frame-range, no face found, every face too small, or every face left by --face-mask. Said
    once per file, whole-file run (process_video) or segments joined (livecam.cluster)."""
    one = stats.processed == 1  # "in any of the 1 processed frames"
    if job.frame_range is not None and not stats.processed:  # the header promised more frames than there were
        log.warning("warning: --frame-range starts at frame %d but %s ended after %s, so no frame was processed; "
                    "the video was copied without swaps", job.frame_range[0], job.input.name,
                    counted(stats.frames, "frame"))
    elif stats.processed and not stats.with_faces:
        log.warning("warning: no %s was found in %s; the video was copied without swaps",
                    job.processing.analysis.wanted_faces,
                    "the one processed frame" if one else f"any of the {stats.processed} processed frames")
    elif stats.with_faces and not stats.usable:  # found, but every one left as it is
        log.warning("warning: the faces found in %s are all too small to change (under %g px between the eyes), "
                    "so none was changed; use a video where they are larger",
                    "the one processed frame" if one
                    else f"{stats.with_faces} of the {stats.processed} processed frames", MIN_EYE_DISTANCE)
    elif stats.usable and not stats.faces_changed:  # each left by the swapper
        where = "the one processed frame" if one else f"{stats.usable} of the {stats.processed} processed frames"
        log.warning("warning: %s", why_unchanged(f"the faces found in {where}", stats.faces_unfitted > 0,
                                                 job.processing, stats.faces_faint > 0))


def _finish_partial(writer: VideoWriter, output: AtomicOutput, job: VideoJob, exc: BaseException) -> Path | None:
    """With --keep-partial, finalise the frames written so far and commit them; returns where
    they were kept (job.output, or the free name beside it when a file appeared there), or None
    after aborting the writer."""
    cause = exc.__cause__
    disk_full = isinstance(cause, OSError) and cause.errno in DISK_FULL  # nothing more can be written
    if job.keep_partial and writer.frames_written > 0 and not disk_full:
        try:
            writer.close(partial=True)
            try:
                kept: Path | None = output.commit()
            except OutputConflictError as conflict:  # a file appeared at the output: kept beside it
                log.warning("warning: %s", conflict.message)
                kept = conflict.kept
            if not isinstance(exc, KeyboardInterrupt):  # the interrupt's own one line says where
                log.warning("partial video with %s kept in %s", counted(writer.frames_written, "frame"), kept)
            return kept
        except BaseException:  # noqa: BLE001 - fall through to removal; the original error wins
            pass
    writer.abort()
    return None
