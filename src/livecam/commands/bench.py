"""`livecam bench`: run a clip through the real pipeline and report where the time goes.

--mode live runs livecam.pipeline.live (as `livecam run --no-realtime`: nothing dropped, a frame
read as soon as one leaves the pipeline) into a null sink; --mode video runs the file pipeline
(livecam.pipeline.file.run_frames: decode thread, workers, in-order encode to a temporary file
that is deleted afterwards). The clip is --input, or one generated in memory from the first
--source photo (without --source, the demo's sample photos: one face put on a clip of the other;
the photo letterboxed into --resolution, drifting a few pixels per frame so that
detection and tracking work as on a camera). Three warm-up frames go through the engine first
and are not counted. Reported: per-stage median and p95 ms (whatever stages the engine's
analyser and processors record, plus capture/decode and output/encode), end-to-end FPS, live
latency p50/p95, CPU time per frame (all threads), peak RSS and GPU memory (NVML, when
available), faces per frame: changed, and swapped too faintly to change a pixel (not changed).
"""

from __future__ import annotations

import json
import logging
import math
import os
import sys
import tempfile
import threading
import time
from dataclasses import replace
from fractions import Fraction
from itertools import islice
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator

import click
import numpy as np

from livecam.commands.live import warm_frames
from livecam.console import agree, counted
from livecam.errors import InputError
from livecam.frame import FramePacket
from livecam.paths import why_missing
from livecam.pipeline.contracts import ForwardingEngine
from livecam.marks.live_marker import LiveMarker
from livecam.marks.watermark import open_watermarker
from livecam.processors import registry
from livecam.processors.base import MIN_EYE_DISTANCE, changed_faces, usable, why_unchanged
from livecam.settings import BenchJob, LiveJob

if TYPE_CHECKING:
    from livecam.media.camera import Frame
    from livecam.pipeline.engine import Engine

log = logging.getLogger("livecam")

WARMUP_FRAMES = 3
RING = 24  # distinct generated frames, cycled
READ_EVERY = 10  # live --watermark: every 10th marked frame is read back after the run
MAX_BASELINE_BYTES = 16 << 20  # a --baseline report is a few KB; a bigger file is not one


# ----------------------------------------------------------------------------- the clip


def _letterbox(photo: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    import cv2

    w, h = size
    scale = min(w / photo.shape[1], h / photo.shape[0]) * 0.9
    nw, nh = max(1, int(photo.shape[1] * scale)), max(1, int(photo.shape[0] * scale))
    canvas = np.full((h, w, 3), 40, dtype=np.uint8)
    x0, y0 = (w - nw) // 2, (h - nh) // 2
    canvas[y0:y0 + nh, x0:x0 + nw] = cv2.resize(photo[:, :, :3], (nw, nh), interpolation=cv2.INTER_AREA)
    return canvas


def check_clip_memory(size: tuple[int, int]) -> None:
    """The generated clip holds RING frames in memory: a --resolution such as 20000x20000 (29 GB)
    ended after the models loaded in OpenCV's "insufficient memory" (an internal error) or the
    system's OOM killer; refused up front when it would take over half the RAM available."""
    from livecam.machine import available_bytes

    need = RING * size[0] * size[1] * 3
    available = available_bytes()
    if available is not None and need > available // 2:
        raise InputError(f"--resolution {size[0]}x{size[1]}: the generated clip holds {RING} frames of that size "
                         f"({need / 1e9:.1f} GB) and this machine has {available / 1e9:.1f} GB available; choose a "
                         f"smaller --resolution or --input a clip")


class GeneratedClip:
    """A ring of frames made from one photo, shifted along a small circle (about 1% of the width)."""

    def __init__(self, photo_bgr: np.ndarray, size: tuple[int, int], frames: int, fps: float = 30.0) -> None:
        import cv2

        base = _letterbox(photo_bgr, size)
        radius = max(2.0, size[0] * 0.01)
        self.ring = []
        for i in range(RING):
            a = 2 * math.pi * i / RING
            m = np.array([[1, 0, radius * math.cos(a)], [0, 1, radius * math.sin(a)]], dtype=np.float32)
            self.ring.append(cv2.warpAffine(base, m, size, borderMode=cv2.BORDER_REPLICATE))
        self.frames, self.fps = frames, fps

    def image(self, index: int) -> np.ndarray:
        return self.ring[index % RING].copy()  # processors write into the frame


class TimedSource:
    """FrameSource over a generated clip or a decoded file, timing each read (capture stage). A
    file's frames are handed on decoded, as `run --camera FILE` reads them: the pipeline converts
    them (its "convert" stage)."""

    def __init__(self, images: Iterator[Frame], name: str, fps: float, times: list[float]) -> None:
        self.name, self.live, self.fps, self.last_pts = name, False, fps, None
        self._images, self._times = images, times

    def open(self) -> None:
        pass

    def read(self) -> Frame | None:
        t0 = time.perf_counter()
        image = next(self._images, None)
        if image is not None:
            self._times.append((time.perf_counter() - t0) * 1000.0)
        return image

    def close(self) -> None:
        pass


class RecordingEngine(ForwardingEngine):
    """Passes every call to the real engine and keeps each processed frame's stage timings."""

    def __init__(self, engine: Engine) -> None:
        super().__init__(engine)
        # The packets' own timing dicts (not copies): stages timed after process(), such as the
        # live pipeline's "output", land in them too.
        self.records: list[dict[str, float]] = []
        self.faces: list[int] = []
        self.usable: list[int] = []  # of those, the faces big enough to change (processors.base.usable)
        self.changed: list[int] = []  # and of those, the faces changed (processors.base.changed_faces)
        # of the usable ones left as they were, those whose paste changed no pixel (FramePacket.faint:
        # --blend, a fade-in): said apart, as a swap that ran but did not show
        self.faint: list[int] = []
        self._lock = threading.Lock()

    def process(self, packet: FramePacket) -> None:
        t0 = time.perf_counter()
        self.engine.process(packet)
        packet.timings["process"] = (time.perf_counter() - t0) * 1000.0
        with self._lock:
            self.records.append(packet.timings)
            self.faces.append(len(packet.faces))
            self.usable.append(sum(usable(face) for face in packet.faces))
            self.changed.append(changed_faces(packet))
            self.faint.append(packet.faint)

    def for_lane(self, lane: Engine) -> "RecordingEngine":
        """A recorder of `lane` (Engine.lanes()) that keeps its records with this one's."""
        other = RecordingEngine(lane)
        other.records, other.faces, other.usable, other.changed = self.records, self.faces, self.usable, self.changed
        other.faint = self.faint
        other._lock = self._lock
        return other


# ----------------------------------------------------------------------------- statistics


def _stat(values: list[float]) -> dict[str, float | int]:
    arr = np.asarray(values, dtype=np.float64)
    return {"median_ms": round(float(np.median(arr)), 3), "p95_ms": round(float(np.percentile(arr, 95)), 3),
            "count": int(arr.size)}


def stage_table(records: list[dict[str, float]], first: tuple[str, list[float]],
                last: tuple[str, list[float]] | None = None) -> dict[str, dict[str, float | int]]:
    """Per-stage median/p95 in pipeline order: capture/decode, the engine's stages in the order
    they were recorded, process (all processors), output/encode."""
    stages: dict[str, dict[str, float | int]] = {}
    if first[1]:
        stages[first[0]] = _stat(first[1])
    order: list[str] = []
    for rec in records:
        order += [k for k in rec if k not in order and k != "processed"]
    order = [k for k in order if k not in ("process", "output")] + ["process", "output"]
    for key in order:
        values = [r[key] for r in records if key in r]
        if values:
            stages[key] = _stat(values)
    if last is not None and last[1]:
        stages[last[0]] = _stat(last[1])
    return stages


def timed_marker(mark: Callable[[int, np.ndarray], np.ndarray], times: list[float],
                 kept: list[np.ndarray] | None = None) -> Callable[[int, np.ndarray], np.ndarray]:
    """The watermark step, keeping the ms of each frame it marked (frames it passes are free)
    and every READ_EVERY-th marked frame in `kept` (read back after the run)."""
    def timed(index: int, image: np.ndarray) -> np.ndarray:
        t0 = time.perf_counter()
        out = mark(index, image)
        if out is not image:
            times.append((time.perf_counter() - t0) * 1000.0)  # list.append: safe from the workers
            if kept is not None and len(times) % READ_EVERY == 1:
                kept.append(out)
        return out
    return timed


def with_watermark(stages: dict[str, dict[str, float | int]],
                   marks: list[float]) -> dict[str, dict[str, float | int]]:
    """The stage table with a "watermark" row (ms per marked frame; count: frames marked)."""
    if marks:
        stages["watermark"] = _stat(marks)
    return stages


def cpu_seconds() -> float:
    """User + system CPU time of this process so far (all threads)."""
    t = os.times()
    return t.user + t.system


def peak_rss_mb() -> float | None:
    try:
        import resource  # Unix only
    except ImportError:
        try:
            import psutil

            info = psutil.Process().memory_info()
            return getattr(info, "peak_wset", info.rss) / 2**20
        except Exception:  # noqa: BLE001 - optional dependency
            return None
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / 2**20 if sys.platform == "darwin" else peak / 1024.0  # bytes on macOS, KiB on Linux


# ----------------------------------------------------------------------------- the runs


def with_default_source(job: BenchJob) -> tuple[BenchJob, np.ndarray | None]:
    """Without --source (or --map), the demo's bundled sample photos stand in, so `livecam bench`
    runs as it is: one face is put in, and (without --input) the clip is made of the other (a
    portrait whose face every detector finds at any --resolution). Returns the job and that
    clip photo (None: the clip comes from --source as usual). Without a swapper, no face is put
    in: the clip is made of the --source photo (which then leaves the job: it is no source face),
    else of the sample portrait."""
    processing = job.processing
    swapping = registry.swaps(processing.frame_processors)
    if not swapping and processing.sources:
        if job.input is not None:
            return job, None  # the run warns that --source goes unused
        return replace(job, processing=replace(processing, sources=())), _source_photo(job)
    if processing.sources or processing.analysis.face_map:
        return job, None
    from livecam.media.images import read_image
    from livecam.samples import sample_path

    source, target = sample_path("astronaut"), sample_path("grace_hopper")
    if not swapping:
        if job.input is not None:
            return job, None
        log.info("no --source given: a clip of the bundled sample photo %s", target.name)
        return job, read_image(target)
    job = replace(job, processing=replace(processing, sources=(source,)))
    if job.input is not None:  # the clip is the user's: only the face to put in is the sample's
        log.info("no --source given: putting the bundled sample photo %s on the faces of %s", source.name,
                 job.input.name)
        return job, None
    log.info("no --source given: putting the bundled sample photo %s on a clip of %s", source.name, target.name)
    return job, read_image(target)


def _source_photo(job: BenchJob) -> np.ndarray:
    from livecam.media.images import read_image
    from livecam.pipeline.engine import source_photos

    sources = list(job.processing.sources) or [p for p, _ in job.processing.analysis.face_map]
    if not sources:
        raise InputError("missing --source PATH: give a photo of the face to put in")
    path = Path(sources[0])
    if path.is_dir():
        photos = source_photos(path)
        if not photos:
            raise InputError(f"source folder {path} holds no photos")
        path = photos[0]
    return read_image(path)


def _file_frames(path: Path, limit: int) -> tuple[Iterator[Any], Any]:
    from livecam.media.video_reader import VideoReader

    reader = VideoReader(path)
    return islice(reader.frames(), limit), reader


def run_live_bench(job: BenchJob, engine: Engine, clip_photo: np.ndarray | None = None) -> dict[str, Any]:
    from livecam.media.sinks import NullSink
    from livecam.pipeline.live import LiveRun, run_live_pipeline
    from livecam.pipeline.metrics import ResourceProbe

    capture: list[float] = []
    reader = None
    if job.input is not None:
        frames, reader = _file_frames(job.input, job.frames + WARMUP_FRAMES)
        warm = [f.image for f in islice(frames, WARMUP_FRAMES)]
        images: Iterator[Frame] = frames  # decoded; converted by the pipeline, as `run --camera FILE`'s
        fps = float(reader.info.rate or 30)
    else:
        photo = clip_photo if clip_photo is not None else _source_photo(job)
        clip = GeneratedClip(photo, job.resolution, job.frames)
        warm = [clip.image(i) for i in range(WARMUP_FRAMES)]
        images = (clip.image(i) for i in range(job.frames))
        fps = clip.fps
    recording = RecordingEngine(engine)
    lanes = [recording.for_lane(lane) for lane in engine.lanes()]
    warm_frames(engine, warm, track=True, lanes=lanes)  # the lanes' sessions, buffers and CUDA graphs come first
    marks: list[float] = []
    kept: list[np.ndarray] = []
    # --watermark: as `run --output virtual-camera --watermark` marks (every frame, on the marking
    # thread, with the change the encoder thread refreshes: marks.live_marker)
    live_marker = (LiveMarker(open_watermarker(job.processing.runtime, engine.providers, threads=1))
                   if job.watermark else None)
    if live_marker is not None:
        live_marker.prime(warm[0])  # its first encoder run is warm-up too: the run measures the steady state
    # The governor stays off: the configured pipeline is what gets measured, not a degraded one.
    options = LiveRun(LiveJob(processing=job.processing, max_frames=job.frames, degrade=False, label=False),
                      watermark=timed_marker(live_marker, marks, kept) if live_marker is not None else None,
                      lanes=lanes)
    cpu0 = cpu_seconds()
    try:
        result = run_live_pipeline(recording, TimedSource(images, "bench clip", fps, capture),
                                   NullSink(), options, probe=ResourceProbe())
    finally:
        if reader is not None:
            reader.close()
        if live_marker is not None:
            live_marker.close()
    cpu = cpu_seconds() - cpu0
    summary = result.summary
    stages = with_watermark(stage_table(recording.records, ("capture", capture)), marks)
    if live_marker is not None and live_marker.encoder_cpu_ms:  # CPU ms per encoder run (count: runs)
        stages["watermark encoder"] = _stat(live_marker.encoder_cpu_ms)
    return {
        "frames": summary["frames"], "fps": summary["fps"], "dropped": summary["dropped"],
        "latency_ms_p50": summary["latency_ms_p50"], "latency_ms_p95": summary["latency_ms_p95"],
        "cpu_ms_per_frame": round(cpu * 1000.0 / max(1, summary["frames"]), 2),
        "stages": stages, **_face_counts(recording), "gpu_mb": gpu_memory_mb(),
        **({"marked_frames": len(marks), "unmarked_frames": live_marker.unmarked,
            "marked_read_back": _read_back(job, engine, kept)} if live_marker else {}),
    }


def _read_back(job: BenchJob, engine: Engine, frames: list[np.ndarray]) -> float | None:
    """The share of these marked frames the decoder reads as marked (live marks reuse a change
    computed on an earlier frame: this says how much of the clip's motion they bear)."""
    if not frames:
        return None
    reader = open_watermarker(job.processing.runtime, engine.providers)
    return round(sum(reader.read(image).marked for image in frames) / len(frames), 3)


def gpu_memory_mb() -> float | None:
    """GPU memory in use after the run (NVML; None without an NVIDIA driver or nvidia-ml-py).
    ONNX Runtime's arenas do not shrink, so this is close to the run's peak."""
    from livecam.pipeline.metrics import ResourceProbe

    probe = ResourceProbe()
    try:
        return probe.gpu_mb()
    finally:
        probe.close()


def _generated_file(job: BenchJob, folder: Path, clip_photo: np.ndarray | None = None) -> Path:
    """Encode the generated clip once (not timed), so video mode decodes a real file."""
    from livecam.media.video_writer import OutputSpec, VideoWriter

    photo = clip_photo if clip_photo is not None else _source_photo(job)
    clip = GeneratedClip(photo, job.resolution, job.frames)
    path = folder / "bench-input.mp4"
    rate = Fraction(30)
    writer = VideoWriter(OutputSpec(path=path, format="mp4", width=job.resolution[0], height=job.resolution[1],
                                    rate=rate, time_base=1 / rate, quality=18))
    for i in range(job.frames + WARMUP_FRAMES):
        writer.write(clip.image(i), i / 30.0)
    writer.close()
    return path


def run_video_bench(job: BenchJob, engine: Engine, clip_photo: np.ndarray | None = None) -> dict[str, Any]:
    from livecam.media.video_writer import OutputSpec, VideoWriter
    from livecam.pipeline.file import frames_in_flight, packet_time, run_frames

    decode: list[float] = []
    encode: list[float] = []
    marks: list[float] = []
    with tempfile.TemporaryDirectory(prefix="livecam-bench-") as tmp:
        folder = Path(tmp)
        path = job.input if job.input is not None else _generated_file(job, folder, clip_photo)
        frames, reader = _file_frames(path, job.frames + WARMUP_FRAMES)
        try:
            info = reader.info
            warm = [f.image for f in islice(frames, WARMUP_FRAMES)]
            warm_frames(engine, warm, track=False, process=not engine.lanes())
            for lane in engine.lanes():  # their sessions, buffers and CUDA graphs come first
                warm_frames(lane, warm, track=False)

            def timed(it: Iterable[Any]) -> Iterator[Any]:
                it = iter(it)
                while True:
                    t0 = time.perf_counter()
                    item = next(it, None)
                    if item is None:
                        return
                    decode.append((time.perf_counter() - t0) * 1000.0)
                    yield item

            spec = OutputSpec(path=folder / "bench-output.mp4", format="mp4", width=info.width,
                              height=info.height, rate=info.rate, time_base=info.time_base)
            writer = VideoWriter(spec)

            def write(packet: FramePacket) -> None:
                t0 = time.perf_counter()
                writer.write(packet.image, packet_time(packet))
                encode.append((time.perf_counter() - t0) * 1000.0)

            recording = RecordingEngine(engine)
            lanes = [recording.for_lane(lane) for lane in engine.lanes()]
            workers = len(lanes) or job.processing.runtime.execution_threads
            in_flight = frames_in_flight(info.width * info.height * 3, workers, None)
            # --watermark: the cadence of `livecam video` (runs of frames twice a second)
            marker = timed_marker(open_watermarker(job.processing.runtime, engine.providers, workers).video_marker(
                float(info.rate or 30)), marks) if job.watermark else None
            cpu0 = cpu_seconds()
            try:
                stats = run_frames(timed(frames), write, recording, workers=workers, label=True,
                                   max_in_flight=in_flight, watermark=marker, lanes=lanes)
            except BaseException:
                writer.abort()  # the temporary folder goes with the file
                raise
            cpu = cpu_seconds() - cpu0
            writer.close()
        finally:
            reader.close()
    return {
        "frames": stats.frames, "fps": round(stats.fps, 2), "dropped": 0,
        "latency_ms_p50": None, "latency_ms_p95": None,
        "cpu_ms_per_frame": round(cpu * 1000.0 / max(1, stats.frames), 2),
        "stages": with_watermark(stage_table(recording.records, ("decode", decode), ("encode", encode)), marks),
        **_face_counts(recording), "gpu_mb": gpu_memory_mb(),
    }


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 1)


def _faces(counts: list[int]) -> float | None:
    return round(float(np.mean(counts)), 2) if counts else None


def _face_counts(recording: RecordingEngine) -> dict[str, float | None]:
    """Faces per frame: found, big enough to change, changed, and swapped too faintly to change a
    pixel (not counted as changed)."""
    return {"faces_per_frame": _faces(recording.faces), "faces_usable_per_frame": _faces(recording.usable),
            "faces_changed_per_frame": _faces(recording.changed), "faces_faint_per_frame": _faces(recording.faint)}


# ----------------------------------------------------------------------------- report


def _input_size(path: Path) -> tuple[str, int | None]:
    """The clip's WIDTHxHEIGHT and the frames it holds (None: unknown)."""
    from livecam.media.video_reader import StillImageError, VideoReader

    try:
        with VideoReader(path) as reader:
            if reader.info.frames is not None and reader.info.frames <= WARMUP_FRAMES:
                raise _too_short(path)
            return f"{reader.info.width}x{reader.info.height}", reader.info.expected_frames
    except StillImageError as exc:  # "use `livecam image`": bench makes its clip from a photo itself
        raise InputError(f"--input {path} is a still image, not a video; to measure on a clip made from it, "
                         f"leave --input out and give it as --source {path}") from exc


def _too_short(path: Path) -> InputError:
    # a clip used up by the warm-up was reported as "0 frames, 0.0 FPS" and "no face was found"
    return InputError(f"--input {path}: no frame is left to measure after the {WARMUP_FRAMES} warm-up frames; "
                      f"give a clip of more than {WARMUP_FRAMES} frames")


def run_bench(job: BenchJob) -> None:
    # SIGTERM stops like Ctrl-C (exit 130), and the temporary clips are removed on the way out.
    from livecam.pipeline.signals import stop_signals

    with stop_signals():
        _run_bench(job)


def _run_bench(job: BenchJob) -> None:
    from livecam.pipeline.engine import Engine

    if job.input is not None and not job.input.is_file():
        fix = "give a video file or leave it out to use a generated clip"
        what = f"is a folder; {fix}" if job.input.is_dir() else why_missing(job.input, fix)
        raise InputError(f"--input {job.input} {what}")
    if job.compare_providers and job.processing.runtime.providers not in ((), ("auto",)):
        # each compared run sets its own provider: --execution-provider was silently dropped
        raise InputError(f"--execution-provider {' '.join(job.processing.runtime.providers)} and "
                         f"--compare-providers exclude each other; list every provider to run in "
                         f"--compare-providers")
    baseline = read_baseline(job.baseline) if job.baseline is not None else None
    # an unreadable clip is reported before any model loads, and alone: before the note on the sample face
    probed = _input_size(job.input) if job.input is not None else ("", None)
    job, clip_photo = with_default_source(job)
    live = job.mode == "live"
    if job.input is None:
        if clip_photo is None:
            _source_photo(job)  # a missing/unreadable photo is reported before any model loads
        check_clip_memory(job.resolution)
        size = f"{job.resolution[0]}x{job.resolution[1]}"
    else:
        size, held = probed
        defaults = BenchJob(processing=job.processing)
        if job.resolution != defaults.resolution:  # it was silently ignored
            log.warning("warning: --resolution sizes the generated clip; --input %s is measured at its own %s",
                        job.input.name, size)
        if held is not None and job.frames != defaults.frames and held - WARMUP_FRAMES < job.frames:
            # the run ends with the clip: it measured fewer frames than asked without a word
            measured = held - WARMUP_FRAMES
            log.warning("warning: --input %s has %d frames, so %d %s measured after the %d warm-up frames, "
                        "not the %d of --frames; give a longer clip", job.input.name, held, measured,
                        agree(measured, "is", "are"), WARMUP_FRAMES, job.frames)
    if baseline is not None and (baseline.get("mode"), baseline.get("resolution")) != (job.mode, size):
        log.warning("warning: --baseline %s was measured in %s mode at %s, this run is %s mode at %s: its "
                    "ratios compare different work; save a baseline of the same mode and size",
                    job.baseline, baseline.get("mode", "an unknown"), baseline.get("resolution", "an unknown size"),
                    job.mode, size)
    # One job per provider compared (or the job itself); engines are built once each, then the
    # runs alternate round by round so every provider sees the same machine state.
    variants = {p: _on_provider(job, p) for p in job.compare_providers} or {"": job}
    from livecam.runtime.providers import resolve_providers

    for provider in job.compare_providers:  # a missing one is said before the others' models load
        resolve_providers([provider])
    if job.watermark and not job.compare_providers:  # the cost of the mark: with and without, alternating
        variants = {"unmarked": replace(job, watermark=False), "watermarked": job}
    engines: dict[str, Engine] = {}
    for name, v in variants.items():  # the watermark variants share one engine
        same = [engines[n] for n, other in variants.items() if n in engines and other.processing == v.processing]
        # lanes=True: both benches hand every frame to engine.lanes() where the provider has lanes
        engines[name] = same[0] if same else Engine.create(v.processing, live=live, lanes=True,
                                                           progress=not v.processing.runtime.quiet)
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in variants}
    for _ in range(job.rounds):
        for name, variant in variants.items():
            runs[name].append((run_live_bench if live else run_video_bench)(variant, engines[name], clip_photo))
    if job.input is not None and any(r["frames"] == 0 for results in runs.values() for r in results):
        raise _too_short(job.input)  # the header did not say (or was wrong)
    reports = {}
    for name, results in runs.items():
        result = median_result(results)
        if not result["faces_per_frame"]:
            log.warning("warning: no face was found in the clip's frames, so these figures leave the swap out; "
                        "use a photo where the face fills more of the frame, or --input a clip with a face")
        elif not result["faces_usable_per_frame"]:
            log.warning("warning: the faces in the clip's frames are all too small to change (under %g px between "
                        "the eyes), so these figures leave out what the processors do to a face; use a larger "
                        "--resolution, a photo where the face fills more of the frame, or --input a clip with "
                        "larger faces", MIN_EYE_DISTANCE)
        elif not result["faces_changed_per_frame"]:  # each left by the swapper
            # the mesh swapper ignores --face-mask: it leaves faces FaceMesh cannot fit, and those
            # too faint to show (it said "could not fit" of a --blend 0.01)
            faint = bool(result.get("faces_faint_per_frame"))
            log.warning("warning: %s (these figures leave out the swap)",
                        why_unchanged("the faces in the clip's frames", engines[name].swap_model == "mesh" and not faint,
                                      variants[name].processing, faint))
        reports[name] = {
            "mode": job.mode, "input": str(job.input) if job.input else "generated", "resolution": size,
            "engine": engines[name].describe(), "workers": job.processing.runtime.execution_threads,
            "processors": list(engines[name].processor_names), "rounds": job.rounds, **result,
            "peak_rss_mb": _round(peak_rss_mb()),
        }
    if len(reports) == 1:  # one run (also --compare-providers with one provider): the plain report
        report = next(iter(reports.values()))
        if baseline is not None:
            report["against_baseline"] = ratios(report, baseline)
        click.echo(json.dumps(report, indent=2) if job.json else format_table(report))
        return
    first = next(iter(reports.values()))
    if baseline is not None:  # every column against the one earlier run
        for report in reports.values():
            report["against_baseline"] = ratios(report, baseline)
    side = {"mode": job.mode, "resolution": size, "rounds": job.rounds,
            ("providers" if job.compare_providers else "variants"): reports,
            "ratios_to_first": {name: ratios(r, first) for name, r in reports.items()}}
    click.echo(json.dumps(side, indent=2) if job.json else side_by_side_table(side))


def _on_provider(job: BenchJob, provider: str) -> BenchJob:
    runtime = replace(job.processing.runtime, providers=(provider,))
    return replace(job, processing=replace(job.processing, runtime=runtime))


# ----------------------------------------------------------------------------- comparing runs


_SCALARS = ("fps", "latency_ms_p50", "latency_ms_p95", "cpu_ms_per_frame", "faces_per_frame",
            "faces_usable_per_frame", "faces_changed_per_frame", "faces_faint_per_frame", "gpu_mb", "dropped",
            "marked_read_back")


def median_result(results: list[dict[str, Any]]) -> dict[str, Any]:
    """One result from several rounds: the median of every figure (a noisy machine's outliers
    do not move it)."""
    if len(results) == 1:
        return results[0]
    merged = dict(results[-1])
    for key in _SCALARS:
        values = [r[key] for r in results if r.get(key) is not None]
        merged[key] = round(float(np.median(values)), 2) if values else None
    stages: dict[str, dict[str, float | int]] = {}
    for name in results[-1]["stages"]:
        rows = [r["stages"][name] for r in results if name in r["stages"]]
        stages[name] = {"median_ms": round(float(np.median([row["median_ms"] for row in rows])), 3),
                        "p95_ms": round(float(np.median([row["p95_ms"] for row in rows])), 3),
                        "count": int(sum(int(row["count"]) for row in rows))}
    merged["stages"] = stages
    merged["fps_rounds"] = [r["fps"] for r in results]
    merged["dropped_rounds"] = [r["dropped"] for r in results]
    return merged


def read_baseline(path: Path) -> dict[str, Any]:
    """An earlier `livecam bench --json` report (one run, not a side-by-side one)."""
    # The fix names the file only where writing a report over it loses nothing: a .json file
    # (`> clip.mp4` told the user to overwrite their clip with JSON).
    hint = f"`livecam bench --json > {path.name if path.suffix.lower() == '.json' else 'baseline.json'}`"
    try:
        with path.open("rb") as stream:  # bounded: /dev/zero or a huge file must not fill the memory
            raw = stream.read(MAX_BASELINE_BYTES + 1)
    except OSError as exc:
        if not path.exists():  # missing, a link to nothing or a loop of links
            raise InputError(f"--baseline {path} {why_missing(path, f'save one first with {hint}')}") from None
        raise InputError(f"--baseline {path} cannot be read ({exc.strerror or exc}); save a report with {hint}") from None
    if len(raw) > MAX_BASELINE_BYTES:
        raise InputError(f"--baseline {path} is over {MAX_BASELINE_BYTES // 2**20} MB, not a livecam bench JSON "
                         f"report; save one with {hint}")
    try:
        data = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise InputError(f"--baseline {path} is not a livecam bench JSON report (not text); save one with {hint}") from None
    except ValueError as exc:
        raise InputError(f"--baseline {path} is not a livecam bench JSON report ({exc}); save one with {hint}") from None
    if not isinstance(data, dict) or "fps" not in data or not isinstance(data.get("stages"), dict):
        raise InputError(f"--baseline {path} is not a single livecam bench JSON report (no fps and stages); "
                         f"save one with {hint}")
    # ratios() reads each stage's median: a hand-edited stage failed as an internal error after the run
    if not all(isinstance(s, dict) and isinstance(s.get("median_ms"), (int, float)) for s in data["stages"].values()):
        raise InputError(f"--baseline {path}: its stages are not livecam bench figures (each needs a median_ms); "
                         f"save one with {hint}")
    return data


def ratios(report: dict[str, Any], base: dict[str, Any]) -> dict[str, Any]:
    """This run's figures divided by the baseline's: FPS (higher is better), latency, CPU and
    per-stage medians (lower is better). A figure either side lacks is left out."""
    def ratio(a: Any, b: Any) -> float | None:
        return round(a / b, 3) if isinstance(a, (int, float)) and isinstance(b, (int, float)) and b else None

    out: dict[str, Any] = {key: ratio(report.get(key), base.get(key))
                           for key in ("fps", "latency_ms_p50", "latency_ms_p95", "cpu_ms_per_frame")}
    out["stages"] = {name: ratio(s["median_ms"], base["stages"][name]["median_ms"])
                     for name, s in report["stages"].items() if name in base["stages"]}
    return {k: v for k, v in out.items() if v is not None}


def format_table(report: dict[str, Any]) -> str:
    rounds = f", median of {report['rounds']} rounds" if report.get("rounds", 1) > 1 else ""
    lines = [f"livecam bench: {report['mode']} mode, {report['resolution']}, {report['frames']} frames, "
             f"{report['engine']}{rounds}",
             f"{'stage':<16}{'median ms':>12}{'p95 ms':>12}"]
    against = report.get("against_baseline", {})
    if against:
        lines[-1] += f"{'x baseline':>12}"
    for name, s in report["stages"].items():
        line = f"{name:<16}{s['median_ms']:>12.2f}{s['p95_ms']:>12.2f}"
        if name in against.get("stages", {}):
            line += f"{against['stages'][name]:>12.2f}"
        lines.append(line)
    rate = "FPS n/a" if report["fps"] is None else f"{report['fps']:.1f} FPS"  # one frame has no rate
    lines.append(f"end-to-end: {rate}" + (
        f", latency p50 {report['latency_ms_p50']} ms p95 {report['latency_ms_p95']} ms"
        if report.get("latency_ms_p50") is not None else ""))
    lines.append(f"CPU time: {report['cpu_ms_per_frame']} ms per frame (all threads)")
    mem = f"peak RSS {report['peak_rss_mb']:.0f} MB" if report.get("peak_rss_mb") is not None else "peak RSS n/a"
    mem += f", GPU {report['gpu_mb']:.0f} MB" if report.get("gpu_mb") is not None else ", GPU n/a"
    lines.append(mem + f", faces per frame {report['faces_per_frame']}{_changed_and_faint(report)}")
    if against:
        lines.append("against the baseline (this run / baseline): " + ", ".join(
            f"{key} x{value:.2f}" for key, value in against.items() if key != "stages"))
    return "\n".join(lines)


def _changed_and_faint(report: dict[str, Any]) -> str:
    """How many of a report's faces per frame were changed, and how many were swapped too faintly
    to change a pixel (a --blend or fade-in that did not show), where it has them."""
    changed, faint = report.get("faces_changed_per_frame"), report.get("faces_faint_per_frame")
    if changed is None:
        return ""
    return f" (changed {changed}" + (f", too faint to show {faint}" if faint else "") + ")"


def side_by_side_table(side: dict[str, Any]) -> str:
    """Stage medians and end-to-end figures, one column per provider, each with its ratio to the
    first provider."""
    reports: dict[str, dict[str, Any]] = side.get("providers") or side["variants"]
    names = list(reports)
    width = max(16, *(len(n) + 11 for n in names))
    lines = [f"livecam bench: {side['mode']} mode, {side['resolution']}, median of "
             f"{counted(side['rounds'], 'alternating round')}",
             f"{'ms (median)':<16}" + "".join(f"{n:>{width}}" for n in names)]
    stages = list(dict.fromkeys(s for r in reports.values() for s in r["stages"]))

    def cell(value: float | None, base: float | None) -> str:
        if value is None:
            return f"{'n/a':>{width}}"
        text = f"{value:.2f}" + (f" (x{value / base:.2f})" if base else "")
        return f"{text:>{width}}"

    for stage in stages:
        row = [reports[n]["stages"].get(stage, {}).get("median_ms") for n in names]
        lines.append(f"{stage:<16}" + "".join(cell(v, row[0]) for v in row))
    for key, label in (("fps", "FPS"), ("latency_ms_p50", "latency p50"), ("latency_ms_p95", "latency p95"),
                       ("cpu_ms_per_frame", "CPU ms/frame"), ("dropped", "dropped"),
                       ("faces_changed_per_frame", "faces changed"), ("faces_faint_per_frame", "faces too faint"),
                       ("marked_read_back", "read as marked")):
        row = [reports[n].get(key) for n in names]
        if any(v is not None for v in row) and (key != "faces_faint_per_frame" or any(row)):
            lines.append(f"{label:<16}" + "".join(cell(v, row[0]) for v in row))
    if any("against_baseline" in reports[n] for n in names):
        lines.append("against the baseline (this run / baseline): " + "; ".join(
            f"{n}: " + ", ".join(f"{key} x{value:.2f}" for key, value in reports[n]["against_baseline"].items()
                                 if key != "stages") for n in names))
    lines.append("engines: " + "; ".join(f"{n}: {reports[n]['engine']}" for n in names))
    return "\n".join(lines)
