"""`livecam run`: build the source, the sink and the engine, then run the live pipeline."""

from __future__ import annotations

import logging
from typing import Any

import numpy as np

from livecam.frame import FramePacket

from livecam.media.camera import open_source
from livecam.media.sinks import make_sink
from livecam.pipeline.live import LiveOptions, run_live_pipeline
from livecam.pipeline.metrics import ResourceProbe
from livecam.settings import LiveJob

log = logging.getLogger("livecam")


def live_options(job: LiveJob) -> LiveOptions:
    analysis = job.processing.analysis
    return LiveOptions(
        queue_depth=job.queue_depth, workers=job.processing.runtime.execution_threads,
        max_frames=job.max_frames, duration=job.duration, stats_overlay=job.stats, stats_json=job.stats_json,
        max_latency_ms=job.max_latency_ms, degrade=job.degrade, label=job.label, mirror=job.mirror,
        detect_every=analysis.detect_every, det_size=analysis.det_size)


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
    # Cheap checks first (output, --camera), then the models and the source identity, and only
    # then the camera, so a bad option never waits for model loading or holds the device.
    source = open_source(job.camera, job.resolution, job.fps, job.realtime)
    sink = make_sink(job.output, fps=job.fps, force=job.force)
    from livecam.pipeline.engine import Engine

    engine = Engine.create(job.processing, live=True, progress=not job.processing.runtime.quiet)
    log.info("%s", engine.describe())
    warm_up(engine)
    source.open()
    if hasattr(sink, "fps"):
        sink.fps = float(source.fps or job.fps)  # the source's real rate is known once it is open
    # The pipeline releases the source and finalises the sink whatever happens.
    run_live_pipeline(engine, source, sink, live_options(job), probe=ResourceProbe())
