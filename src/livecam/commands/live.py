"""`livecam run`: build the source, the sink and the engine, then run the live pipeline."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import numpy as np

from livecam.errors import DeviceError, InputError, OutputExistsError
from livecam.frame import FramePacket
from livecam.marks.watermark import open_watermarker
from livecam.media.camera import CameraSource, VideoFileSource, camera_device_problem, open_source
from livecam.media.images import check_output_folder, same_file
from livecam.media.sinks import FileRecorderSink, make_sink
from livecam.pipeline.live import LiveOptions, run_live_pipeline
from livecam.pipeline.metrics import ResourceProbe
from livecam.settings import LiveJob

log = logging.getLogger("livecam")


def live_options(job: LiveJob, *, recording: bool = False, det_size: int | None = None,
                 watermark: Any = None) -> LiveOptions:
    """`recording`: the sink is a file, which carries the visible label unless --no-label.
    `det_size`: the detector's input size, None for a detector with a fixed input (BlazeFace),
    so the governor does not spend a step on a change that does nothing."""
    analysis = job.processing.analysis
    return LiveOptions(
        queue_depth=job.queue_depth, workers=job.processing.runtime.execution_threads,
        max_frames=job.max_frames, duration=job.duration, stats_overlay=job.stats, stats_json=job.stats_json,
        max_latency_ms=job.max_latency_ms, degrade=job.degrade, mirror=job.mirror,
        label=recording if job.label is None else job.label,
        detect_every=analysis.detect_every, det_size=det_size,
        watermark=watermark if recording else None)


def check_files(job: LiveJob, sink: Any) -> None:
    """--stats-json and the recording, checked before any model loads: an existing stats file is
    kept unless --force, and neither may be the --camera file (it would be overwritten)."""
    camera = Path(job.camera)
    recording = sink.path if isinstance(sink, FileRecorderSink) else None
    if recording is not None and same_file(recording, camera):
        raise InputError(f"--output {recording} is the --camera file; record to another file")
    path = job.stats_json
    if path is None:
        return
    if path.is_dir():
        raise InputError(f"--stats-json {path}: that is a folder; give a file name such as stats.jsonl")
    if same_file(path, camera) or (recording is not None and path.absolute() == recording.absolute()):
        raise InputError(f"--stats-json {path}: that is the --camera or --output file; give another name")
    if path.exists() and not job.force:
        raise OutputExistsError(f"--stats-json {path}: the file exists; add --force to overwrite it or choose "
                                f"another name")
    try:
        check_output_folder(path)
    except InputError as exc:
        raise InputError(f"--stats-json {path}: {exc.message}") from exc


def warm_up(engine: Any) -> None:
    """Run the models once on the source photo, so the first camera frames are not seconds late
    (ONNX Runtime allocates and plans on the first run) and the governor judges steady state."""
    sources = getattr(engine, "sources", None)
    if not sources:
        return
    image = np.ascontiguousarray(sources[0].image[..., :3])
    packet = FramePacket(index=-1, image=image.copy())
    engine.analyse(packet, track=False)
    engine.process(packet)


def run_live(job: LiveJob) -> None:
    # SIGTERM while the models load stops like Ctrl-C (exit 130); the pipeline then installs its own.
    from livecam.commands.signals import stop_signals

    with stop_signals():
        _run_live(job)


def _run_live(job: LiveJob) -> None:
    # Cheap checks first (output, --camera), then the models and the source identity, and only
    # then the camera, so a bad option never waits for model loading or holds the device. A
    # local video file holds nothing: it is opened first, so a damaged one is reported at once;
    # a camera index with no device node (Linux) is reported at once too.
    source = open_source(job.camera, job.resolution, job.fps, job.realtime)
    if isinstance(source, CameraSource) and (problem := camera_device_problem(source.index)):
        raise DeviceError(problem)
    sink = make_sink(job.output, fps=job.fps, force=job.force)
    check_files(job, sink)
    from livecam.pipeline.engine import Engine

    local_file = isinstance(source, VideoFileSource) and "://" not in source.location
    if local_file:
        source.open()
    try:
        engine = Engine.create(job.processing, live=True, progress=not job.processing.runtime.quiet)
        log.info("%s", engine.describe())
        warm_up(engine)
        if not local_file:
            source.open()
    except BaseException:
        source.close()
        raise
    if hasattr(sink, "fps"):
        sink.fps = float(source.fps or job.fps)  # the source's real rate is known once it is open
    recording = isinstance(sink, FileRecorderSink)
    marker = (open_watermarker(job.processing.runtime, engine.providers).video_marker(
        float(source.fps or job.fps), run=1)
              if recording and job.watermark else None)
    options = live_options(job, recording=recording, det_size=engine.det_size, watermark=marker)
    # The pipeline releases the source and finalises the sink whatever happens.
    run_live_pipeline(engine, source, sink, options, probe=ResourceProbe())
