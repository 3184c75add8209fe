"""The live pipeline: capture -> analyse -> process (N workers) -> output, with bounded latency.

Threads and queues:

    capture thread --q_analyse--> analyse thread --q_process--> N process workers
        --ReorderBuffer--> output loop (the caller's thread: window keys, metrics, governor)
        [--> marking thread (marks.marking_sink, with a watermark: marks and writes in order)] --> sink

The capture thread only reads; the analyse thread makes each packet (Captured: a file's frame is
converted to BGR there, and mirrored). Queues hold 1 or 2 frames. For a live source (camera,
real-time file) a full queue drops its oldest packet (counted by reason, and skipped in the
reorder buffer), so nothing waits behind a slow stage; for a --no-realtime file nothing is
dropped: a frame is read only when one has left the pipeline (workers + 1 frames in flight), so
it is read as fast as the pipeline can take it. One stop event,
timeouts on every blocking call, an end-of-stream sentinel passed along by every stage. The
first exception in any stage sets the stop event and is re-raised to the caller after shutdown
(stop, drain, join with timeout, release the source, finalise the sink, write the summary).
SIGINT and SIGTERM stop cleanly and raise Interrupted (exit 130).

The engine, the source and the sink are passed in, so tests drive it with fakes.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import json
import logging
import os
import queue
import select
import signal
import stat
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Callable, Iterator, Sequence

import numpy as np

from livecam.errors import DeviceError, Interrupted, OutputError
from livecam.frame import FramePacket
from livecam.marks.marking_sink import MarkingSink
from livecam.media.camera import Frame, FrameSource, gave_no_frame
from livecam.media.exit_guard import THREAD_NAME as STRANDED_THREAD
from livecam.media.sinks import Sink
from livecam.pipeline.contracts import FrameEngine, LiveEngine
from livecam.pipeline.governor import Governor, Step, default_steps
from livecam.pipeline.metrics import LiveMetrics, ResourceProbe
from livecam.pipeline.queues import DropOldestQueue, ReorderBuffer, put_until
from livecam.pipeline.signals import SIGNAL_NAMES, interrupting, stop_signals
from livecam.pipeline.stages import POLL_S, Stages
from livecam.processors import registry
from livecam.processors.base import MIN_EYE_DISTANCE, usable
from livecam.media.provenance import LabelPlacement
from livecam.settings import LiveJob
from livecam.console import agree, counted

log = logging.getLogger("livecam")

END = object()  # end-of-stream sentinel

SMALL_FACES_NOTICE_S = 2.0  # faces in view, all too small to change, this long: said once


class SmallFacesNotice:
    """Says once when every face in view has been too small to change (processors.base.usable)
    for SMALL_FACES_NOTICE_S: in the window nothing else tells someone sitting far from the
    camera why their face is not swapped."""

    def __init__(self, after_s: float | None = None) -> None:
        self.after_s = SMALL_FACES_NOTICE_S if after_s is None else after_s
        self.said = False
        self._since: float | None = None  # when the faces in view last became all too small

    def see(self, faces: Sequence[Any], now: float) -> None:
        if self.said:
            return
        if not faces or any(usable(face) for face in faces):
            self._since = None
        elif self._since is None:
            self._since = now
        elif now - self._since >= self.after_s:
            self.said = True
            log.warning("warning: the %s in view %s too small to change (under %g px between the eyes); "
                        "come closer to the camera or give a higher --resolution",
                        agree(len(faces), "face", "faces"), agree(len(faces), "is", "are"), MIN_EYE_DISTANCE)


@dataclass(frozen=True, slots=True)
class Captured:
    """A frame as the capture thread hands it on; the analyse thread makes its packet. A file's
    frame is converted to BGR only then (video_reader.DecodedFrame), and mirrored then, so the
    capture thread only reads (the conversion neither caps its rate nor delays its next read) and a
    frame dropped while the analyse thread is busy is never converted. Latency still counts from
    the read (captured_at), so it includes the conversion."""

    index: int
    frame: Frame
    captured_at: float
    pts: float | None
    mirror: bool  # the m key's state when it was captured

    def packet(self) -> FramePacket:
        t0 = time.perf_counter()
        image = self.frame if isinstance(self.frame, np.ndarray) else self.frame.image
        if self.mirror:
            image = np.ascontiguousarray(image[:, ::-1])
        # a file's frame says how long it is shown: a --no-realtime recording keeps the file's timing
        duration = None if isinstance(self.frame, np.ndarray) else self.frame.duration
        packet = FramePacket(index=self.index, image=image, captured_at=self.captured_at, pts=self.pts,
                             duration=duration)
        if image is not self.frame:  # work done here, shown as a stage (--stats-json, the overlay, bench)
            packet.timings["convert"] = (time.perf_counter() - t0) * 1000.0
        return packet


STATS_TO_STDOUT = Path("-")  # --stats-json -: `run` prints nothing else there
# names of the process's own streams: written as streams, whatever they point at (after `>` or
# `>>`, a regular file the shell opened: appended to, never replaced, needs no --force)
STREAM_NAMES = (Path("/dev/stdout"), Path("/dev/stderr"))
STDOUT_NAMES = (STATS_TO_STDOUT, Path("/dev/stdout"))
FD_FOLDERS = (Path("/dev/fd"), Path("/proc/self/fd"))


def stats_stream(path: Path) -> bool:
    """Whether --stats-json names a stream (written as the run goes, nothing to replace): -,
    /dev/stdout, /dev/stderr, /dev/fd/N, a FIFO or a device."""
    if path == STATS_TO_STDOUT or path in STREAM_NAMES or path.parent in FD_FOLDERS:
        return True
    return path.exists() and not path.is_file() and not path.is_dir()


@dataclass(frozen=True)
class LiveRun:
    """One live run: the job as the CLI built it, what only the command knows (whether the sink
    records a file, the watermark step for a recording), and the pipeline's own periods, which
    tests shorten."""

    job: LiveJob
    recording: bool = False  # the sink is a file: labelled unless --no-label
    # (output frame index, image) -> image, run on the marking thread (marks.marking_sink)
    watermark: Callable[[int, np.ndarray], np.ndarray] | None = None
    # the governor's first step with a watermark: slower(True) marks more cheaply (marks.live_marker)
    watermark_slower: Callable[[bool], None] | None = None
    interval_s: float = 1.0  # metrics and governor period
    recover_s: float = 3.0
    # a live source that gives nothing this long is an error (twice a source's own limit, as a
    # camera's: its line says more, OpenCV's reason; this one catches a read that never returns)
    stall_timeout_s: float = 2.0
    join_timeout_s: float = 2.0
    # the capture stage's share of it: a read still blocked this long after the stop (a stalled
    # stream or camera) is left behind, its source unreleased, so a Ctrl-C during a stall returns
    # at once rather than after join_timeout_s; a read that returns within it is waited for
    capture_join_s: float = 0.3
    reorder_wait_s: float = 1.0  # give up on a frame missing this long (live only)
    handle_signals: bool = True
    # after a stop signal the output loop has this long to return; else its call is stuck (a
    # display that stopped answering, a stalled stats reader) and the run is ended without it
    stuck_output_s: float = 3.0
    # Engine.lanes(): process worker i runs lanes[i] (runtime/lanes.py); empty: all share the engine
    lanes: Sequence[FrameEngine] = ()

    @property
    def workers(self) -> int:  # --execution-threads (or the lanes): frames processed in parallel
        return len(self.lanes) or max(1, self.job.processing.runtime.execution_threads)

    @property
    def label(self) -> bool:
        return self.job.labelled(self.recording)


@dataclass(frozen=True)
class LiveResult:
    summary: dict[str, Any]
    stop_reason: str


def draw_overlay(image: np.ndarray, lines: list[str]) -> None:
    """Stats text in the top-left corner, in place, readable on any background: white text on a
    darkened panel. (A black outline drawn with a thicker stroke does not line up with the text:
    OpenCV 5 spaces the glyphs by stroke thickness.)"""
    import cv2

    if not lines:
        return
    font = cv2.FONT_HERSHEY_SIMPLEX
    scale = max(0.35, min(image.shape[1] / 1280.0, 1.0) * 0.6)
    step = int(26 * scale / 0.6)
    height, width = image.shape[:2]
    sizes = [cv2.getTextSize(line, font, scale, 1) for line in lines]
    top = max(0, 8 + step - sizes[0][0][1] - 4)
    bottom = min(height, 8 + step * len(lines) + sizes[-1][1] + 3)
    right = min(width, 8 + max(w for (w, _), _ in sizes) + 4)
    image[top:bottom, 4:right] >>= 2  # one panel behind all lines, a quarter of the brightness
    for i, line in enumerate(lines):
        cv2.putText(image, line, (8, 8 + step * (i + 1)), font, scale, (255, 255, 255), 1, cv2.LINE_AA)


class LivePipeline:
    def __init__(self, engine: LiveEngine, source: FrameSource, sink: Sink, options: LiveRun,
                 *, probe: ResourceProbe | None = None) -> None:
        self.engine = engine
        self.source = source
        self.options = options
        job = options.job
        self.live = bool(getattr(source, "live", True))
        self.metrics = LiveMetrics(interval_s=options.interval_s, probe=probe)
        self.sink: Sink = sink
        if hasattr(sink, "on_lost"):  # the window: its display can vanish under the output loop
            sink.on_lost = self._sink_lost
        self._closing_sink = False
        # held by whichever thread ends the run: the output loop's, or the rescue of a stuck one
        self._ending = threading.Lock()
        self._rescued: Interrupted | None = None
        self._loop_returned = False  # this thread is ending the run itself: no rescue
        self._writing_stats = False
        self._slowest_output_s = 0.0  # the longest sink write so far: a slow sink is not a stuck one
        # the window (OpenCV's GUI) is driven from this thread only: marking on another thread
        # wrote frames from there and deadlocked Qt; its frames are marked here, before the write
        self._mark_here = options.watermark if getattr(sink, "one_thread", False) else None
        self._marked = 0
        if options.watermark is not None and self._mark_here is None:
            # Marked off the output thread, so a marked frame does not hold up the loop; half a
            # second of frames absorbs one marking. A recording loses nothing, the virtual camera
            # drops the oldest waiting frame if the marker falls behind.
            fps = float(getattr(source, "fps", None) or job.fps)
            self.sink = MarkingSink(sink, options.watermark, backlog=max(2, round(fps / 2)),
                                    lossless=options.recording, on_drop=lambda: self.metrics.drop("marking busy"))
        self._probe = probe
        steps = default_steps(engine, detect_every=job.processing.analysis.detect_every, det_size=engine.det_size,
                              sparse_detection=engine.sparse_detection_saves,
                              switch_enhancers=lambda on: self._hold_enhancer(not on))
        slower = options.watermark_slower if options.watermark is not None else None
        if slower is not None:  # first: the frames stay marked, the encoder just runs less often
            steps.insert(0, Step("watermark refresh slower", lambda: slower(True), lambda: slower(False)))
        self.governor = Governor(
            steps, job.max_latency_ms, enabled=job.degrade, interval_s=options.interval_s,
            recover_s=options.recover_s, clock=time.perf_counter)
        self.stages = Stages()
        self._stop = self.stages.stop
        self._interrupted = False
        self._signal_name = "Ctrl-C"
        self.mirror = job.mirror
        self.paused = False
        self.stats_overlay = job.stats
        self._enhancers = registry.with_role(engine.processor_names, "enhancer")
        self._enhancer_on = True  # the e key's choice
        self._enhancer_held_off = False  # the governor's "enhancer off" step
        self._last_progress = time.perf_counter()
        own = getattr(source, "stall_timeout_s", None)  # (on a loaded machine half a second more was not enough)
        self._stall_s = max(options.stall_timeout_s, 2 * own if isinstance(own, (int, float)) else 0.0)
        depth = job.queue_depth
        self.q_analyse: DropOldestQueue[Any] = DropOldestQueue(depth, on_drop=self._dropper("analyse busy"))
        self.q_process: DropOldestQueue[Any] = DropOldestQueue(depth, on_drop=self._dropper("process busy"))
        # (packet, when it was processed): the governor judges capture -> processed, what its steps change
        self.reorder: ReorderBuffer[tuple[FramePacket, float]] = ReorderBuffer(
            0, producers=options.workers, max_wait_s=options.reorder_wait_s if self.live else None)
        # A lossless source is read only when a frame left the pipeline: at most one frame per
        # stage that can work at once is in flight, so frames do not wait in queues (latency
        # stays the sum of the stage times) while every stage is kept busy (throughput).
        self._credits = None if self.live else threading.Semaphore(options.workers + 1)
        self._label = LabelPlacement() if options.label else None  # keeps off the faces of the last second
        self._small_faces = SmallFacesNotice()
        self._shown_with_faces = 0  # frames shown with a face found: none at all is said at the end
        self._stats_file: IO[str] | None = None
        self._stats_stream = False  # a pipe, FIFO or terminal: its reader may fall behind
        self._stats_left_out = 0

    # -- public ---------------------------------------------------------------------------------
    def run(self) -> LiveResult:
        """Run until the end of the stream, a limit, a quit key, a signal or an error."""
        stop_reason = "error"
        with stop_signals(self._on_signal) if self.options.handle_signals else contextlib.nullcontext(), \
                self._rescue_a_stuck_output():
            try:
                self._open_stats()
                self._start_threads()
                stop_reason = self._output_loop()
            except KeyboardInterrupt:
                self._interrupted = True
            except BaseException as exc:  # noqa: BLE001 - re-raised below, after cleanup
                self.stages.fail(exc)
            finally:
                with self._ending:  # (waits for a rescue that is ending the run)
                    self._loop_returned = True
                    if self._rescued is None:
                        self._shutdown()
        if self._rescued is not None:  # ended while this thread was stuck: its line is said
            raise self._rescued
        if self.stages.error is not None and not isinstance(self.stages.error, KeyboardInterrupt):
            stop_reason = "error"
        elif self._interrupted:
            stop_reason = "interrupted"
        summary = self._finish(stop_reason)
        self.stages.raise_error()
        if self._interrupted:
            raise Interrupted(f"interrupted ({self._signal_name}); stopped cleanly after "
                              f"{counted(summary['frames'], 'frame')}")
        return LiveResult(summary, stop_reason)

    def stop(self) -> None:
        self._stop.set()

    # -- stages -----------------------------------------------------------------------------
    def _dropper(self, reason: str) -> Callable[[Any], None]:
        def on_drop(item: Any) -> None:
            if isinstance(item, (FramePacket, Captured)):  # (not END)
                self.metrics.drop(reason)
                self.reorder.skip(item.index)

        return on_drop

    def _put(self, q: DropOldestQueue[Any], item: Any, *, lossless: bool) -> bool:
        if not lossless:
            q.put(item)
            return True
        return put_until(q, item, self._stop)

    def _capture(self) -> None:
        index = 0
        try:
            while not self._stop.is_set():
                if self._credits is not None and not self._credits.acquire(timeout=POLL_S):
                    self._last_progress = time.perf_counter()  # waiting on the pipeline, not the source
                    continue
                try:
                    frame = self.source.read()
                except Exception as exc:
                    if not self._stop.is_set():
                        raise
                    # The run was stopped while the read waited (Ctrl-C while a camera's read
                    # retried up to its own limit): the stop is how it ended, not this late error.
                    log.debug("%s: read failed after the stop: %s", self.source.name, exc)
                    break
                self._last_progress = time.perf_counter()
                if frame is None:
                    break
                captured = Captured(index, frame, time.perf_counter(), getattr(self.source, "last_pts", None),
                                    self.mirror)
                index += 1
                self.metrics.captured_frame()
                self._put(self.q_analyse, captured, lossless=not self.live)
        finally:
            self._last_progress = float("inf")  # no stall once capture is over
        self._put(self.q_analyse, END, lossless=True)

    def _take(self, q: DropOldestQueue[Any]) -> Iterator[Any]:
        """The packets from q until the stop event or END, which goes on to q_process (the next
        stage after analyse; the other workers after a process worker)."""
        while not self._stop.is_set():
            try:
                packet = q.get(POLL_S)
            except queue.Empty:
                continue
            if packet is END:
                self._put(self.q_process, END, lossless=True)
                return
            yield packet

    def _analyse(self) -> None:
        for captured in self._take(self.q_analyse):
            packet = captured.packet()  # the first stage that needs the pixels makes them
            t0 = time.perf_counter()
            self.engine.analyse(packet, track=True)
            packet.timings["analyse"] = (time.perf_counter() - t0) * 1000.0
            self._put(self.q_process, packet, lossless=not self.live)

    def _process(self, engine: FrameEngine) -> None:
        try:
            for packet in self._take(self.q_process):
                t0 = time.perf_counter()
                engine.process(packet)  # in place (contracts.FrameEngine)
                packet.timings["process"] = (time.perf_counter() - t0) * 1000.0
                if not self.reorder.push(packet.index, (packet, time.perf_counter())):
                    self.metrics.drop("late")
        finally:
            self.reorder.finish()

    def _start_threads(self) -> None:
        self._last_progress = time.perf_counter()
        self.stages.start("livecam-capture", self._capture)  # first: _shutdown asks whether it still runs
        self.stages.start("livecam-analyse", self._analyse)
        for i in range(self.options.workers):
            engine = self.options.lanes[i] if self.options.lanes else self.engine
            self.stages.start(f"livecam-process-{i}", functools.partial(self._process, engine))

    # -- output loop (caller's thread) ----------------------------------------------------------
    def _output_loop(self) -> str:
        job = self.options.job
        # --duration counts from the first frame shown or recorded: a run always has one (a
        # duration shorter than the wait for it, such as 1e-9, recorded nothing and exited 0).
        # A --no-realtime file counts in its own time, as its recording keeps it (in wall time,
        # --duration 0.1 recorded 0.7 s of a 10 fps clip, more on a faster machine): no frame
        # SECONDS or more after the first is shown.
        first_at: float | None = None
        by_pts = False

        def duration_over(now: float) -> bool:
            return job.duration is not None and first_at is not None and now - first_at >= job.duration

        while True:
            if self._stop.is_set():
                return "interrupted" if self._interrupted else "stopped"
            now = time.perf_counter()
            if not by_pts and duration_over(now):
                return "duration"
            for key in self.sink.poll():
                if self._on_key(key):
                    return "quit"
            if self.paused and not self.live:
                # A lossless source waits for the resume: its frames stay in the pipeline (and
                # keep their read credits), so nothing is dropped and nothing is read meanwhile.
                time.sleep(POLL_S)
                items = []
            else:
                items = self.reorder.pop_ready(timeout=POLL_S)
            if items:
                if self.paused:
                    for _ in items:
                        self.metrics.drop("paused")
                    items = []
                elif self.live and len(items) > 1:  # output is behind: show only the newest
                    for _ in items[:-1]:
                        self.metrics.drop("output busy")
                    items = items[-1:]
                for packet, processed_at in items:
                    if first_at is None:
                        by_pts = not self.live and packet.pts is not None
                    elif by_pts and packet.pts is not None and duration_over(packet.pts):
                        return "duration"
                    self._emit(packet, processed_at)
                    shown = packet.pts if by_pts and packet.pts is not None else time.perf_counter()
                    first_at = shown if first_at is None else first_at
                    if job.max_frames is not None and self.metrics.frames >= job.max_frames:
                        return "max frames"
                    if not by_pts and duration_over(shown):
                        return "duration"
            elif self.reorder.done:
                return "end of stream"
            now = time.perf_counter()
            if self.metrics.due(now):
                self._tick(now)
            if self.live and now - self._last_progress > self._stall_s:
                if not self.metrics.captured:  # its first read never returned: it never started
                    raise gave_no_frame(self.source.name, self._stall_s)
                raise DeviceError(f"{self.source.name} stopped delivering frames (none for "
                                  f"{self._stall_s:g} s): check the device or the stream")

    def _emit(self, packet: FramePacket, processed_at: float) -> None:
        image = packet.image
        if self.stats_overlay:
            draw_overlay(image, self.metrics.overlay_lines())
        if self._label is not None:
            self._label.draw(image, [face.bbox for face in packet.faces], packet.pts)
        if self._mark_here is not None:
            image = self._mark_here(self._marked, image)
            self._marked += 1
        t0 = time.perf_counter()
        write_at = getattr(self.sink, "write_at", None)
        if not self.live and packet.pts is not None and write_at is not None:
            write_at(image, packet.pts, packet.duration)  # the file's timing, not the processing speed
        else:
            self.sink.write(image)
        done = time.perf_counter()
        self._slowest_output_s = max(self._slowest_output_s, done - t0)
        packet.timings["output"] = (done - t0) * 1000.0
        depths = {"analyse": self.q_analyse.qsize(), "process": self.q_process.qsize(), "reorder": len(self.reorder)}
        self.metrics.frame(packet, done, depths, processed_at=processed_at)
        self._small_faces.see(packet.faces, done)
        self._shown_with_faces += bool(packet.faces)
        if self._credits is not None:
            self._credits.release()

    def _tick(self, now: float) -> None:
        # Capture to processed, not to shown: a slow consumer (a remote display, a stalled virtual
        # camera reader, a slow encoder) made the governor drop the enhancer and detections,
        # which cannot make the output faster.
        self.governor.observe(self.metrics.window_processed_p95(), now)
        record = self.metrics.tick(now, {"degraded": self.governor.active})
        self._write_stats(record)

    def _on_key(self, key: str) -> bool:
        """React to a window key; True means quit."""
        if key in ("q", "esc", "closed"):
            return True
        if key == "m":
            self.mirror = not self.mirror
        elif key == "s":
            self.stats_overlay = not self.stats_overlay
        elif key == "space":
            self.paused = not self.paused
            log.info("paused" if self.paused else "resumed")
        elif key == "e":
            if self._enhancers:
                self._enhancer_on = not self._enhancer_on
                self._apply_enhancer()
                held = " (held off while latency is over budget; --no-degrade keeps it on)"
                log.info("face enhancer %s%s", "on" if self._enhancer_on else "off",
                         held if self._enhancer_on and self._enhancer_held_off else "")
            else:
                log.info("the face enhancer is not running (add --frame-processor %s)",
                         " or ".join(registry.names_with_role("enhancer")))
        elif key == "n":
            name = self.engine.next_source()
            log.info("source: %s", name if name else "only one source (give --source a folder to cycle)")
        return False

    def _apply_enhancer(self) -> None:
        """The enhancer runs only when both the e key and the governor allow it, so neither
        undoes the other's choice."""
        for name in self._enhancers:
            self.engine.set_enabled(name, self._enhancer_on and not self._enhancer_held_off)

    def _hold_enhancer(self, off: bool) -> None:
        self._enhancer_held_off = off
        self._apply_enhancer()

    # -- shutdown -------------------------------------------------------------------------------
    @contextlib.contextmanager
    def _rescue_a_stuck_output(self) -> Iterator[None]:
        """Ends the run from another thread when a stop signal came and the output loop's thread
        does not return: held in C (a display that stopped answering: X11 calls retry, so
        Python's handler never runs) or in a write that retries (a stats reader that stopped
        reading). Ctrl-C and SIGTERM did nothing then, only kill -9 ended the run.

        Python's wakeup fd is written by the C signal handler even then; the watching thread
        reads it. Its error goes through cli.py's handler for stranded threads (exit 130)."""
        if (not self.options.handle_signals or sys.platform == "win32"
                or threading.current_thread() is not threading.main_thread()):
            yield
            return
        read_fd, write_fd = os.pipe()
        os.set_blocking(write_fd, False)
        previous = signal.set_wakeup_fd(write_fd, warn_on_full_buffer=False)
        over = threading.Event()
        watcher = threading.Thread(target=self._watch_signals, args=(read_fd, over), name=STRANDED_THREAD,
                                   daemon=True)
        watcher.start()
        try:
            yield
        finally:
            over.set()
            signal.set_wakeup_fd(previous)
            watcher.join(1.0)
            if not watcher.is_alive():  # (else it is raising its error: the process is ending)
                os.close(read_fd)
                os.close(write_fd)

    def _watch_signals(self, read_fd: int, over: threading.Event) -> None:
        stopped_at, name = None, ""
        while not over.is_set():
            if select.select([read_fd], [], [], POLL_S)[0]:
                for signum in os.read(read_fd, 64):
                    if stopped_at is None and signum in SIGNAL_NAMES:
                        stopped_at, name = time.monotonic(), SIGNAL_NAMES[signal.Signals(signum)]
            if stopped_at is not None and time.monotonic() - stopped_at >= self._stuck_after_s():
                self._rescue(name)
                return

    def _stuck_after_s(self) -> float:
        """How long the output loop may take to return after a stop: a sink whose every write is
        slow (a huge frame's encoding) gets three of its slowest, so its recording is finalised."""
        return max(self.options.stuck_output_s, 3 * self._slowest_output_s)

    def _rescue(self, name: str) -> None:
        """The output loop did not return after a stop: end the run here, leaving its call alone."""
        if not self._ending.acquire(blocking=False):
            return  # the loop returned and its thread is ending the run (within its own deadlines)
        if self._loop_returned:  # (and has already shut down)
            self._ending.release()
            return
        try:
            self._interrupted, self._signal_name = True, name
            if self._writing_stats:  # the stuck call may be that write: the file is left as it is
                self._stats_file = None
            self._shutdown(close_sink=False)
            abandon = getattr(self.sink, "abandon", None)
            if abandon is not None:  # a recording that cannot be finished: its temporary file goes
                abandon()
            summary = self._finish("interrupted")
            self._rescued = Interrupted(
                f"interrupted ({name}); the output ({self.sink.name}) did not answer within "
                f"{self._stuck_after_s():.3g} s, so the run was ended without it after {summary['frames']} frames")
        finally:
            self._ending.release()
        raise self._rescued

    def _shutdown(self, close_sink: bool = True) -> None:
        self._stop.set()
        for q in (self.q_analyse, self.q_process):
            q.drain()
        # A stage still running is left behind (a daemon thread, gone with the process): internal
        # detail, for -v only. The user's lines say how the run ended (a stall's own error, or
        # the interrupt after a Ctrl-C while a stalled stream's read waited).
        alive = self.stages.join(self.options.join_timeout_s, at_most={0: self.options.capture_join_s})
        if alive:
            log.debug("stages still running %g s after the stop: %s", self.options.join_timeout_s, ", ".join(alive))
        capture_alive = self.stages.running(0)
        try:
            if capture_alive:  # releasing a device under a blocked read can crash the driver
                log.debug("%s not released: its read is still blocked", self.source.name)
            else:
                self.source.close()
        except BaseException as exc:  # noqa: BLE001
            self.stages.fail(exc)
        self._closing_sink = True
        if not close_sink:
            return
        try:
            # The run's last wait, one only a signal can end (a recording's signing stuck in native
            # code: interrupt.heard): a stop signal now interrupts it, the unfinished file removed
            # by its AtomicOutput. A clean stop is what is already happening; the rescue of a stuck
            # output cannot step in (this thread holds _ending).
            with interrupting():
                self.sink.close()
        except KeyboardInterrupt as exc:
            self._interrupted = True
            self.stages.fail(exc)  # raised by run() once the run is summed up: cli's one line
        except BaseException as exc:  # noqa: BLE001
            self.stages.fail(exc)

    def _sink_lost(self, error: BaseException) -> None:
        """The sink's device is gone while this thread (the output loop's, the main thread) is
        held where it cannot return (WindowSink.on_lost: inside Qt's exit()): the rest of the
        run's end happens here, on the caller's thread; the caller then reports `error`."""
        self.stages.fail(error)
        if not self._closing_sink:  # else only the sink's close was left, and it cannot finish
            self._shutdown()
        self._finish("error")

    def _finish(self, stop_reason: str) -> dict[str, Any]:
        summary = self.metrics.summary(degradations=list(self.governor.events), stop_reason=stop_reason)
        self._write_stats({"summary": summary}, wait_s=STATS_SUMMARY_WAIT_S)
        if self._stats_left_out:
            log.warning("--stats-json %s: %s left out while its reader was behind", self.options.job.stats_json,
                        counted(self._stats_left_out, "line"))
        if self._stats_file is not None:
            self._stats_file.close()
            self._stats_file = None
        if self._probe is not None:
            self._probe.close()
        if summary["latency_ms_p50"] is None:  # no frame was shown
            latency = "latency n/a"
        else:
            latency = f"latency p50 {summary['latency_ms_p50']} ms p95 {summary['latency_ms_p95']} ms"
        if summary["frames"] and not self._shown_with_faces:  # (a recording of it is the clip unchanged)
            log.warning("warning: no %s was found in %s; none was swapped",
                        self.options.job.processing.analysis.wanted_faces,
                        "the one frame shown" if summary["frames"] == 1
                        else f"any of the {summary['frames']} frames shown")
        rate = "FPS n/a" if summary["fps"] is None else f"{summary['fps']:.1f} FPS"
        log.info("%s, %s, %s, %d dropped (%s)", counted(summary["frames"], "frame"),
                 rate, latency, summary["dropped"], stop_reason)
        return summary

    def _open_stats(self) -> None:
        path = self.options.job.stats_json
        if path is None:
            return
        try:
            if path == STATS_TO_STDOUT:  # a copy of the descriptor: closing it leaves stdout open
                self._stats_file = open(os.dup(1), "w", encoding="utf-8")  # noqa: SIM115 - closed in _finish
            elif path.is_fifo():
                self._stats_file = self._open_fifo(path)
            else:  # a stream is appended to: `>> stats.jsonl` keeps what the file held
                self._stats_file = open(path, "a" if stats_stream(path) else "w",  # noqa: SIM115 - closed in _finish
                                        encoding="utf-8")
        except OSError as exc:
            raise OutputError(f"--stats-json {path}: cannot write it ({exc.strerror}); give another file") from exc
        if self._stats_file is not None:
            mode = os.fstat(self._stats_file.fileno()).st_mode
            self._stats_stream = stat.S_ISFIFO(mode) or stat.S_ISCHR(mode) or stat.S_ISSOCK(mode)

    def _open_fifo(self, path: Path) -> IO[str] | None:
        """A FIFO opens for writing only once a reader has it open; a plain open() waits for that
        where neither Ctrl-C nor SIGTERM reaches (it retries on EINTR), so poll until a reader
        comes or the run is stopped (None: stopped first)."""
        said = False
        while not self._stop.is_set():
            try:
                fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
            except OSError as exc:
                if exc.errno != errno.ENXIO:  # ENXIO: no reader yet
                    raise
                if not said:
                    log.info("--stats-json %s: waiting for a reader on this FIFO", path)
                    said = True
                time.sleep(POLL_S)
                continue
            os.set_blocking(fd, True)  # lines go whole; _write_stats skips them while the reader is behind
            return open(fd, "w", encoding="utf-8")  # noqa: SIM115 - closed in _finish
        return None

    def _write_stats(self, record: dict[str, Any], wait_s: float = 0.0) -> None:
        """One JSON line. A stream's reader that fell behind (`| less` not scrolled, a terminal
        paused with Ctrl-S, a FIFO reader that stopped) filled the pipe and held the output loop,
        and the window froze: a stream not ready within `wait_s` skips the line."""
        stats = self._stats_file
        if stats is None:
            return
        if self._stats_stream and not _writable(stats.fileno(), wait_s):
            if not self._stats_left_out:
                log.warning("--stats-json %s: its reader is not keeping up; lines are left out until it does",
                            self.options.job.stats_json)
            self._stats_left_out += 1
            return
        try:
            self._writing_stats = True  # (a reader that stopped reading holds this write)
            stats.write(json.dumps(record) + "\n")
            stats.flush()
        except OSError as exc:
            self._stats_file = None
            _close_failed(stats)
            path = self.options.job.stats_json
            if exc.errno == errno.EPIPE and path in STDOUT_NAMES:
                # stdout's reader went away (`| head -1`): the run ends as any command's output cut
                # short does, cli.py's exit 141 without a line (a recording is finished all the same)
                self.stages.fail(exc)
                return
            if exc.errno == errno.EPIPE:  # a FIFO's reader (or a pipe's) went away
                why = "its reader closed it (broken pipe); keep the reader open until the run ends"
            else:
                why = f"writing failed ({exc.strerror}); free space on that disk or give another file"
            self.stages.fail(OutputError(f"--stats-json {path}: {why}"))
        finally:
            self._writing_stats = False

    def _on_signal(self, name: str) -> None:
        """The first SIGINT/SIGTERM: stop cleanly (pipeline.signals ignores later ones)."""
        self._interrupted = True
        self._signal_name = name
        self._stop.set()


STATS_SUMMARY_WAIT_S = 2.0  # how long the summary line waits for a stream's reader


def _close_failed(stream: IO[str]) -> None:
    """Close a stats file whose write failed. Its close flushes the unwritten line again, which
    fails the same way; the descriptor is released all the same. (Dropped unclosed, it was closed
    only when collected: "ResourceWarning: unclosed file", its descriptor held till then.)"""
    with contextlib.suppress(OSError):
        stream.close()


def _writable(fd: int, wait_s: float) -> bool:
    """Whether a line (up to PIPE_BUF, 4 KiB, which a pipe takes whole) can be written to fd
    within wait_s without blocking; an error or hang-up counts as ready (the write then says it)."""
    if not hasattr(select, "poll"):  # Windows: no poll on pipes, write as before
        return True
    poller = select.poll()
    poller.register(fd, select.POLLOUT)
    return bool(poller.poll(wait_s * 1000.0))


def run_live_pipeline(engine: LiveEngine, source: FrameSource, sink: Sink, options: LiveRun,
                      *, probe: ResourceProbe | None = None) -> LiveResult:
    """Run the live pipeline on an opened source; raises LivecamError (or Interrupted)."""
    return LivePipeline(engine, source, sink, options, probe=probe).run()

