"""Live marking within the live budget: the encoder runs beside the stream and its change is reused.

One RivaGAN encoder run is 7.4 G multiply-adds at the 160-pixel work size of a 16:9 frame, about
300-400 CPU-ms on a laptop core whatever the threads (ONNX Runtime's 3D convolutions reach about
half of the core's measured SGEMM peak). Run on marked frames, that time came out of the
pipeline's: 2 marked frames a second halved 720p live FPS on 2 cores. So live, the two halves
of Watermarker.embed are split:

- the encoder thread computes a Residual from the newest frame at most every `refresh_s`
  seconds, on one intra-op thread (ORT then computes on the calling thread) at the lowest CPU
  priority (Linux: nice 19 for that thread), so it runs on time the pipeline leaves idle;
- every frame gets the newest Residual added on the marking thread (marks.marking_sink), a
  few ms at 720p. The change reads back where the picture under it moved less than about 3
  pixels at the work size since the frame it was computed on (measured on a 720p clip drifting
  3 px a frame: 0 of 32 bits off 4 frames later, 7 off at 6, unreadable at 12; with a still
  background and a moving face, 2 off after 12 frames). A webcam's background holds still, so
  most frames between refreshes read as marked; a fast pan reads again at the next refresh.

No frame waits for the encoder, except in a recording (`recording_fps`): its first frame is
marked with its own change, computed then (x264 makes it the first keyframe), and so is a
frame whenever the newest change was computed OWN_CHANGE_S of recorded frames earlier or more
(the idle-priority encoder starved by a saturated CPU): a recording gets an exactly marked
frame at least that often, whatever the motion. Counted in frames, not wall time, so a
--no-realtime recording processed slower than real time pays per second of video. Before the
first change is ready, other sinks pass frames unmarked. Under load the governor's first step
(pipeline.live) stretches the refresh to SLOW_REFRESH_S; the marks themselves keep their cadence.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
import numpy as np

from livecam.marks.watermark import Residual, Watermarker

log = logging.getLogger("livecam")

REFRESH_S = 2.0  # a new change from the newest frame at most this often
SLOW_REFRESH_S = 8.0  # under load (the governor's marking step)
OWN_CHANGE_S = 2.0  # a recording: a frame marked with its own change at least this often (video time)


def lower_priority() -> None:
    """The calling thread at the lowest CPU priority (Linux: nice is per thread); elsewhere a
    no-op, and the governor's step is what keeps the encoder's share down."""
    if sys.platform.startswith("linux"):
        try:
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 19)
        except OSError:
            pass


class LiveMarker:
    """(output frame index, image) -> image, marked on every frame (a cheap addition, so the
    mark is on every keyframe and rides through H.264 as a steady pattern); call close() when
    the stream ends."""

    def __init__(self, watermarker: Watermarker, *, recording_fps: float | None = None,
                 refresh_s: float = REFRESH_S) -> None:
        self._watermarker = watermarker
        # a recording: frames between own changes (None: never wait for the encoder)
        self._own_every = max(1, round(OWN_CHANGE_S * recording_fps)) if recording_fps else None
        self._changed_index = 0  # the output index of the frame the newest change was computed on
        self._refresh_s = refresh_s
        self._normal_refresh_s = refresh_s
        self._cond = threading.Condition()
        self._residual: Residual | None = None
        self._newest: tuple[int, np.ndarray] | None = None  # (index, frame) offered to the encoder thread
        self._refreshed_at = -float("inf")
        self._closing = False
        self._error: BaseException | None = None
        self.encoder_cpu_ms: list[float] = []  # one per encoder run (thread CPU time)
        self.unmarked = 0  # frames passed before the first change was ready
        self.own_changes = 0  # changes computed on the marking thread (a recording's own-change frames)
        self._thread = threading.Thread(target=self._run, name="livecam-watermark-encoder", daemon=True)
        self._thread.start()

    def __call__(self, index: int, image: np.ndarray) -> np.ndarray:
        with self._cond:
            if self._error is not None:
                raise self._error
            residual = self._residual
            own = self._own_every is not None and (residual is None or index - self._changed_index >= self._own_every)
            if not own and self._newest is None and time.perf_counter() - self._refreshed_at >= self._refresh_s:
                self._newest = (index, image)  # not written to after it was shown; the encoder reads a small copy
                self._cond.notify_all()
        if own:
            residual = self._first(index, image)
        if residual is None:
            self.unmarked += 1
            return image
        return residual.add_to(image)

    def prime(self, image: np.ndarray) -> None:
        """Compute a first change now, from a warm-up frame (bench: the run measures the steady state)."""
        self._first(0, image)

    def slower(self, on: bool) -> None:
        """The governor's marking step: refresh every SLOW_REFRESH_S (on) or as configured."""
        with self._cond:
            self._refresh_s = max(SLOW_REFRESH_S, self._normal_refresh_s) if on else self._normal_refresh_s

    @property
    def refresh_s(self) -> float:
        return self._refresh_s

    def close(self) -> None:
        with self._cond:
            self._closing = True
            self._cond.notify_all()
        self._thread.join(5.0)
        log.debug("watermark: %d changes computed (%d on the marking thread), %.0f CPU-ms each (median), "
                  "%d frames passed unmarked", len(self.encoder_cpu_ms), self.own_changes,
                  float(np.median(self.encoder_cpu_ms)) if self.encoder_cpu_ms else 0.0, self.unmarked)

    # -- internals -------------------------------------------------------------------------------
    def _first(self, index: int, image: np.ndarray) -> Residual:
        """A change computed from this frame now, on the calling thread; it becomes the newest."""
        t0 = time.thread_time()
        residual = self._watermarker.residual(image)
        residual.fit(image.shape[1], image.shape[0])
        with self._cond:
            self.own_changes += 1
            self.encoder_cpu_ms.append((time.thread_time() - t0) * 1000.0)
            self._residual, self._refreshed_at, self._changed_index = residual, time.perf_counter(), index
            return residual

    def _run(self) -> None:
        lower_priority()
        while True:
            with self._cond:
                while self._newest is None and not self._closing:
                    self._cond.wait(0.1)
                if self._closing:
                    return
                offered = self._newest
            assert offered is not None
            index, image = offered
            try:
                t0 = time.thread_time()
                residual = self._watermarker.residual(image)
                residual.fit(image.shape[1], image.shape[0])  # here, not on the marking thread
                cpu = (time.thread_time() - t0) * 1000.0
            except BaseException as exc:  # noqa: BLE001 - raised by the next mark
                with self._cond:
                    self._error = exc
                return
            with self._cond:
                self._newest = None
                if index >= self._changed_index:  # not over an own change made meanwhile on a later frame
                    self._residual = residual
                    self._refreshed_at, self._changed_index = time.perf_counter(), index
                self.encoder_cpu_ms.append(cpu)
