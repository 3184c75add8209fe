"""The file pipeline: decode thread -> N processing workers -> encode thread, in frame order.

    reader.frames() --decode thread--> work queue --N workers: detect, [track], process, label-->
        ReorderBuffer --encode thread--> writer.write() (video + interleaved audio)

Memory is bounded by a semaphore of `max_in_flight` slots: the decode thread takes one per
frame and the encode thread gives it back once that frame is written, so at most that many
frames exist at once whatever the video's length. The frame the encoder waits for is always
decoded before any later one, so the bound cannot deadlock. Nothing is dropped.

The engine is any object with `analyse(packet, track)` and `process(packet)`; tests pass fakes.
Workers call it concurrently (ONNX Runtime sessions are thread-safe for run()). Detection needs
no order (analyse(track=False) keeps no state). Smoothing over time (--smoothing) does: when the
engine `smooths`, workers call its `detect(packet)`, hand the packet to an InOrder step that
calls `track(packet)` strictly in frame order (one call at a time), and process what it returns.
Whichever worker completes a run of consecutive detected frames tracks them all (cheap: a
One-Euro filter), processes the first and puts the others at the head of the work queue for any
free worker; a worker whose frame must wait for an earlier one does not wait, it takes the next
frame. So no worker idles on the order and no extra thread is needed; the waiting frames hold
their in-flight slots, so the memory bound is unchanged.
"""

from __future__ import annotations

import logging
import os
import queue
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Protocol, cast

import numpy as np

from livecam.errors import Interrupted
from livecam.frame import FramePacket
from livecam.media.video_reader import VideoReader
from livecam.media.video_writer import DISK_FULL, OutputSpec, VideoWriter, container_format, temp_path
from livecam.pipeline.progress import Progress
from livecam.pipeline.queues import ReorderBuffer
from livecam.provenance import CONTAINER_METADATA, draw_label

log = logging.getLogger("livecam")

_POLL_S = 0.1  # every blocking wait wakes this often to look at the stop event
_JOIN_S = 5.0
FRAME_MEMORY_SHARE = 0.5  # of --max-memory; the rest is for models, codecs and Python


class Engine(Protocol):
    def analyse(self, packet: FramePacket, track: bool) -> None: ...

    def process(self, packet: FramePacket) -> None: ...


class SmoothingEngine(Engine, Protocol):
    """An engine whose faces are smoothed over time: detect() in any thread, track() in order."""

    smooths: bool

    def detect(self, packet: FramePacket) -> None: ...

    def track(self, packet: FramePacket) -> None: ...


def smooths(engine: object) -> bool:
    """Whether the engine wants the ordered tracking step (fakes without it analyse as before)."""
    return bool(getattr(engine, "smooths", False)) and callable(getattr(engine, "detect", None)) \
        and callable(getattr(engine, "track", None))


class InOrder:
    """Calls `step` on packets strictly by index from `first` on, whatever order they arrive in.

    add() returns the packets that became ready (already stepped, in order): none when an
    earlier one is still missing, several when this one completed a run. Indices from `first`
    must all arrive (the frame range is contiguous and nothing is dropped)."""

    def __init__(self, step: Callable[[FramePacket], None], first: int = 0) -> None:
        self._step = step
        self._next = first
        self._waiting: dict[int, FramePacket] = {}
        self._lock = threading.Lock()

    def add(self, packet: FramePacket) -> list[FramePacket]:
        with self._lock:  # also makes the (non-thread-safe) tracker's calls one at a time
            self._waiting[packet.index] = packet
            ready = []
            while self._next in self._waiting:
                ready.append(self._waiting.pop(self._next))
                self._step(ready[-1])
                self._next += 1
            return ready

    @property
    def waiting(self) -> int:
        with self._lock:
            return len(self._waiting)


class WorkQueue:
    """The workers' queue: decoded frames (bounded, FIFO, from the decode thread) and, served
    first, frames that passed the ordered tracking step and only wait to be processed (the
    oldest in flight, which the encoder needs next; whichever worker is free takes them). That
    lane needs no bound: its frames already hold in-flight slots."""

    def __init__(self, maxsize: int) -> None:
        self._new: deque[FramePacket | None] = deque()
        self._ready: deque[FramePacket] = deque()
        self._maxsize = maxsize
        self._cond = threading.Condition()

    def put(self, item: FramePacket | None, timeout: float) -> bool:
        """Add a decoded frame (None: end of stream); False when still full after timeout."""
        with self._cond:
            if not self._cond.wait_for(lambda: len(self._new) < self._maxsize, timeout):
                return False
            self._new.append(item)
            self._cond.notify_all()
            return True

    def put_ready(self, packets: Iterable[FramePacket]) -> None:
        with self._cond:
            self._ready.extend(packets)
            self._cond.notify_all()

    def get(self, timeout: float) -> tuple[FramePacket | None, bool]:
        """(item, True) for a tracked frame to process, (item, False) for a decoded one; raises
        queue.Empty after timeout. A worker that gets None (end of stream) may stop: tracked
        frames are only added by a worker that has not stopped, and come out before None."""
        with self._cond:
            if not self._cond.wait_for(lambda: bool(self._ready or self._new), timeout):
                raise queue.Empty
            if self._ready:
                return self._ready.popleft(), True
            item = self._new.popleft()
            self._cond.notify_all()  # room for the decode thread
            return item, False


class TimedFrame(Protocol):
    @property
    def image(self) -> np.ndarray: ...

    @property
    def time(self) -> float: ...


@dataclass(frozen=True, slots=True)
class OutFrame:
    image: np.ndarray
    time: float


@dataclass(frozen=True)
class RunOptions:
    workers: int = 1
    max_in_flight: int = 6
    frame_range: tuple[int, int | None] | None = None  # frames outside pass through untouched
    label: bool = True
    watermark: Callable[[int, np.ndarray], np.ndarray] | None = None  # (index, image) -> image


@dataclass
class RunStats:
    frames: int = 0  # written
    processed: int = 0  # went through the engine
    with_faces: int = 0
    interrupted: bool = False
    seconds: float = 0.0
    stage_ms: dict[str, float] = field(default_factory=dict)  # summed over processed frames

    @property
    def fps(self) -> float:
        return self.frames / self.seconds if self.seconds > 0 else 0.0


def frames_in_flight(frame_bytes: int, workers: int, max_memory_gb: float | None) -> int:
    """How many decoded frames may exist at once: enough to keep every worker busy, and within
    FRAME_MEMORY_SHARE of --max-memory (never fewer than workers + 2)."""
    floor, ceiling = workers + 2, 4 * workers + 8
    if max_memory_gb is None:
        return 2 * workers + 4
    # Each frame in flight costs its BGR array plus about two working copies in the processors.
    budget = max_memory_gb * (1 << 30) * FRAME_MEMORY_SHARE
    return max(floor, min(ceiling, int(budget // max(1, 3 * frame_bytes))))


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


def retime(frames: Iterable[TimedFrame], fps: Fraction, input_rate: Fraction) -> Iterator[OutFrame]:
    """Constant `fps` output from any input timing: each output tick shows the input frame
    nearest to it (frames are dropped or repeated); the first tick is the first frame's time."""
    step = 1.0 / float(fps)
    prev: TimedFrame | None = None
    t0 = 0.0
    k = 0
    for frame in frames:
        if prev is None:
            prev, t0 = frame, frame.time
            continue
        middle = (prev.time + frame.time) / 2
        while t0 + k * step < middle + 1e-9:
            yield OutFrame(prev.image, t0 + k * step)
            k += 1
        prev = frame
    if prev is not None:
        end = prev.time + 1.0 / float(input_rate or fps)
        while t0 + k * step < end - 1e-9:
            yield OutFrame(prev.image, t0 + k * step)
            k += 1


def run_frames(
    frames: Iterable[TimedFrame],
    write: Callable[[FramePacket], None],
    engine: Engine,
    options: RunOptions,
    *,
    progress: Progress | None = None,
    stop: threading.Event | None = None,
    on_warm: Callable[[], None] | None = None,
) -> RunStats:
    """Run every frame through the engine with `options.workers` threads and hand them to
    `write` strictly in order (from one encode thread). Returns when all are written; raises the
    first error of any thread; a KeyboardInterrupt stops every thread and is re-raised (frames
    written so far stay written, so the caller may finalise a shorter file).

    on_warm is called once from the encode thread when as many frames as may be in flight have
    been written: every thread, codec and buffer exists by then (the moment to cap memory)."""
    workers = max(1, options.workers)
    stop = stop or threading.Event()
    slots = threading.Semaphore(max(workers + 2, options.max_in_flight))
    work = WorkQueue(maxsize=options.max_in_flight + workers)
    reorder: ReorderBuffer[FramePacket] = ReorderBuffer(0, producers=workers)
    errors: list[BaseException] = []
    stats = RunStats()
    started = time.perf_counter()
    smoothing = cast(SmoothingEngine, engine) if smooths(engine) else None
    ordered: InOrder | None = None
    if smoothing is not None:
        first = options.frame_range[0] if options.frame_range is not None else 0
        ordered = InOrder(smoothing.track, first)

    def fail(exc: BaseException) -> None:
        errors.append(exc)
        stop.set()

    def put(item: FramePacket | None) -> bool:
        while not stop.is_set():
            if work.put(item, timeout=_POLL_S):
                return True
        return False

    def decode() -> None:
        try:
            source = iter(frames)
            index = 0
            while True:
                # Take the slot before decoding, so a decoded frame always has one.
                while not slots.acquire(timeout=_POLL_S):
                    if stop.is_set():
                        return
                if stop.is_set():
                    return
                frame = next(source, None)
                if frame is None:
                    slots.release()
                    return
                packet = FramePacket(index=index, image=frame.image, pts=frame.time)
                index += 1
                if not put(packet):
                    return
        except BaseException as exc:  # noqa: BLE001 - handed to the caller
            fail(exc)
        finally:
            for _ in range(workers):  # one end-of-stream sentinel per worker
                if not put(None):
                    break

    def work_loop() -> None:
        try:
            while not stop.is_set():
                try:
                    packet, tracked = work.get(timeout=_POLL_S)
                except queue.Empty:
                    continue
                if packet is None:
                    break
                if tracked:
                    process(packet)
                elif not in_range(packet.index, options.frame_range):
                    finish(packet)
                elif smoothing is None or ordered is None:
                    engine.analyse(packet, track=False)
                    process(packet)
                else:
                    smoothing.detect(packet)
                    ready = ordered.add(packet)  # often none (an earlier frame is missing), sometimes several
                    if ready:
                        work.put_ready(ready[1:])  # for any free worker
                        process(ready[0])
        except BaseException as exc:  # noqa: BLE001
            fail(exc)
        finally:
            reorder.finish()

    def process(packet: FramePacket) -> None:
        engine.process(packet)
        packet.timings["processed"] = 1.0
        finish(packet)

    def finish(packet: FramePacket) -> None:
        if options.label:
            if not packet.image.flags.writeable:
                packet.image = packet.image.copy()
            draw_label(packet.image)
        if options.watermark is not None:
            packet.image = options.watermark(packet.index, packet.image)
        reorder.push(packet.index, packet)

    def encode() -> None:
        try:
            while not stop.is_set():
                for packet in reorder.pop_ready(timeout=_POLL_S):
                    if stop.is_set():
                        return
                    write(packet)
                    slots.release()
                    stats.frames += 1
                    if on_warm is not None and stats.frames == options.max_in_flight:
                        on_warm()
                    if packet.timings.pop("processed", None):
                        stats.processed += 1
                        stats.with_faces += bool(packet.faces)
                        for stage, ms in packet.timings.items():
                            stats.stage_ms[stage] = stats.stage_ms.get(stage, 0.0) + ms
                    if progress is not None:
                        progress.advance()
                if reorder.done:
                    return
        except BaseException as exc:  # noqa: BLE001
            fail(exc)

    # Each thread sets its event when it is done, and the waits below use the events, not
    # Thread.join(): on Python <= 3.12 a join() interrupted by Ctrl-C marks a thread that is still
    # running as finished, so later joins return at once and the caller would close the writer
    # and reader while the encoder is still inside FFmpeg (a crash).
    done = [threading.Event() for _ in range(workers + 2)]

    def finishing(target: Callable[[], None], event: threading.Event) -> Callable[[], None]:
        def run() -> None:
            try:
                target()
            finally:
                event.set()

        return run

    threads = [threading.Thread(target=finishing(decode, done[0]), name="livecam-decode", daemon=True)]
    threads += [threading.Thread(target=finishing(work_loop, done[1 + i]), name=f"livecam-worker-{i}", daemon=True)
                for i in range(workers)]
    threads.append(threading.Thread(target=finishing(encode, done[-1]), name="livecam-encode", daemon=True))
    launched: list[threading.Event] = []
    try:
        # Started inside the try: Ctrl-C can land in Thread.start() itself, and the threads that
        # did start must still be stopped and waited for before the caller closes the files.
        for t, event in zip(threads, done):
            launched.append(event)
            t.start()
        while not done[-1].wait(_POLL_S):  # short waits keep the main thread responsive to Ctrl-C
            pass
    except KeyboardInterrupt:
        stats.interrupted = True
        raise
    finally:
        stop.set()
        for event in launched:
            event.wait(_JOIN_S)
        stats.seconds = time.perf_counter() - started
    if errors:
        raise errors[0]
    return stats


# --------------------------------------------------------------------------- a whole video job


@dataclass(frozen=True)
class VideoOptions:
    """What process_video needs from a VideoJob (settings.VideoJob maps onto it 1:1)."""

    input: Path
    output: Path
    encoder: str = "libx264"
    quality: int = 18
    fps: float | None = None
    audio: bool = True
    keep_partial: bool = False
    frame_range: tuple[int, int | None] | None = None
    label: bool = True
    watermark: Any = None  # a marks.watermark.Watermarker, or None for --no-watermark
    sign: Callable[[Path], None] | None = None  # C2PA: signs the finished temporary file in place
    workers: int = 1
    max_memory_gb: float | None = None
    wanted_faces: str = "face"  # for the warning when none is found ("face of the --reference person")


@dataclass(frozen=True)
class VideoResult:
    output: Path
    stats: RunStats
    audio: str | None  # copy, reencode or None
    partial: bool


def process_video(options: VideoOptions, engine: Engine, *, quiet: bool = False,
                  stop: threading.Event | None = None, on_warm: Callable[[], None] | None = None) -> VideoResult:
    """Decode, process and encode one video into options.output via a temporary file.

    On success the temporary file is renamed over the output. On an error or interrupt it is
    removed, or with keep_partial finalised as a valid shorter video and renamed; then the error
    (Interrupted for Ctrl-C) is raised."""
    with VideoReader(options.input) as reader:  # closed on every path, setup errors included
        return _write_video(reader, options, engine, quiet=quiet, stop=stop, on_warm=on_warm)


def _write_video(reader: VideoReader, options: VideoOptions, engine: Engine, *, quiet: bool,
                 stop: threading.Event | None, on_warm: Callable[[], None] | None) -> VideoResult:
    info = reader.info
    for kind in info.other_streams:
        log.warning("note: the input's %s stream is not copied to the output", kind)
    if options.fps is not None:
        rate = Fraction(options.fps).limit_denominator(1001)
        time_base = 1 / rate
        frames: Iterable[TimedFrame] = retime(reader.frames(), rate, info.rate)
        total = int(round(info.duration * float(rate))) if info.duration else None
    else:
        rate, time_base = info.rate, info.time_base
        frames = reader.frames()
        total = info.expected_frames
    keep_audio = options.audio and info.audio_codec is not None
    spec = OutputSpec(path=temp_path(options.output), format=container_format(options.output),
                      width=info.width, height=info.height, rate=rate, time_base=time_base,
                      encoder=options.encoder, quality=options.quality, metadata=dict(CONTAINER_METADATA),
                      audio_from=options.input if keep_audio else None)
    in_flight = frames_in_flight(info.width * info.height * 3, options.workers, options.max_memory_gb)
    run = RunOptions(workers=options.workers, max_in_flight=in_flight, frame_range=options.frame_range,
                     label=options.label,
                     watermark=options.watermark.video_marker(float(rate)) if options.watermark else None)
    log.debug("video: %dx%d at %s fps, %s frames, %d workers, %d frames in flight",
              info.width, info.height, float(rate), total or "?", options.workers, in_flight)
    writer: VideoWriter | None = None
    progress = Progress(total, quiet=quiet, label=options.output.name)
    try:
        writer = VideoWriter(spec)
        stats = run_frames(frames, lambda p: writer.write(p.image, packet_time(p)), engine, run,
                           progress=progress, stop=stop, on_warm=on_warm)
    except BaseException as exc:
        progress.close()
        interrupted = isinstance(exc, KeyboardInterrupt)
        partial = False
        if writer is not None:
            partial = _finish_partial(writer, spec.path, options, exc)
        else:
            spec.path.unlink(missing_ok=True)  # the writer may have created the file before failing
        if interrupted:
            done = writer.frames_written if writer is not None else 0
            where = f"; the first {done} frames were kept in {options.output}" if partial else "; no output written"
            raise Interrupted(f"interrupted after {done} frames{where}") from exc
        raise
    progress.close()
    try:
        writer.close()
        if options.sign is not None:
            options.sign(spec.path)
        os.replace(spec.path, options.output)
    except BaseException:
        spec.path.unlink(missing_ok=True)
        raise
    if stats.processed and not stats.with_faces:
        log.warning("warning: no %s was found in any of the %d processed frames; the video was "
                    "copied without swaps", options.wanted_faces, stats.processed)
    return VideoResult(output=options.output, stats=stats, audio=writer.audio_mode, partial=False)


def _finish_partial(writer: VideoWriter, temp: Path, options: VideoOptions, exc: BaseException) -> bool:
    """Finalise the frames written so far when asked to and possible; else remove the temp."""
    cause = exc.__cause__
    disk_full = isinstance(cause, OSError) and cause.errno in DISK_FULL  # nothing more can be written
    if options.keep_partial and writer.frames_written > 0 and not disk_full:
        try:
            writer.close(partial=True)
            os.replace(temp, options.output)
            log.warning("partial video with %d frames kept in %s", writer.frames_written, options.output)
            return True
        except BaseException:  # noqa: BLE001 - fall through to removal; the original error wins
            pass
    writer.abort()
    temp.unlink(missing_ok=True)
    return False

