"""`livecam run`: build the source, the sink and the engine, then run the live pipeline."""

from __future__ import annotations

import logging
import os
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

import numpy as np

from livecam.atomic import write_target
from livecam.errors import InputError, OutputError, OutputExistsError
from livecam.frame import FramePacket
from livecam.marks.credentials import signing_for
from livecam.marks.live_marker import LiveMarker
from livecam.marks.watermark import open_watermarker
from livecam.media.camera import CameraSource, FrameSource, VideoFileSource, camera_device_problem, open_source
from livecam.media.images import check_not_an_input, check_output_folder, same_file
from livecam.media.sinks import FileRecorderSink, NullSink, Sink, make_sink
from livecam.pipeline.live import STATS_TO_STDOUT, STDOUT_NAMES, LiveRun, run_live_pipeline, stats_stream
from livecam.pipeline.metrics import ResourceProbe
from livecam.processors import registry
from livecam.settings import LiveJob

if TYPE_CHECKING:
    from livecam.pipeline.contracts import FrameEngine
    from livecam.pipeline.engine import Engine

log = logging.getLogger("livecam")


def check_files(job: LiveJob, sink: Sink) -> None:
    """--stats-json and the recording, checked before any model loads: an existing stats file is
    kept unless --force (a FIFO or /dev/stdout is written as it is, stdout only if the process has
    one), and neither may be the --camera file (it would be overwritten), nor the stats file a
    photo the run uses."""
    camera = Path(job.camera)
    recording = sink.path if isinstance(sink, FileRecorderSink) else None
    if recording is not None and same_file(recording, camera):
        raise InputError(f"--output {recording} is the --camera file; record to another file")
    path = job.stats_json
    if path in STDOUT_NAMES and sys.__stdout__ is None:
        # started without stdout (`>&-`): descriptor 1 is then whatever file was opened first (the
        # --camera file), and the lines went there
        raise OutputError(f"--stats-json {path}: standard output is closed (the command was started with >&-); "
                          f"give a file name such as stats.jsonl")
    if path is None or path == STATS_TO_STDOUT:
        return
    if path.is_dir():
        raise InputError(f"--stats-json {path}: that is a folder; give a file name such as stats.jsonl")
    # resolve(): "sub/../rec.mp4" or a link to it is the recording too (it would be overwritten by the
    # stats, and the recording then refused as "exists")
    if same_file(path, camera) or (recording is not None and (path.resolve() == recording.resolve()
                                                              or same_file(path, recording))):
        raise InputError(f"--stats-json {path}: that is the --camera or --output file; give another name")
    try:  # --force would overwrite the photo (one in a --source folder too)
        check_not_an_input(path, processing=job.processing)
    except InputError as exc:
        raise InputError(f"--stats-json: {exc.message}") from exc
    if stats_stream(path):  # a FIFO, a device, /dev/stdout even after `> file`: nothing to replace
        if not os.access(path, os.W_OK):
            raise InputError(f"--stats-json {path}: not writable by this user; give a file name such as stats.jsonl")
        return
    if path.exists() and not job.force:
        raise OutputExistsError(f"--stats-json {path}: the file exists; add --force to overwrite it or choose "
                                f"another name")
    write_target(path, what="--stats-json ")  # a link is written through (open "w"): it must lead somewhere
    try:
        check_output_folder(path)
    except InputError as exc:
        raise InputError(f"--stats-json {path}: {exc.message}") from exc


def ignored_options(job: LiveJob, source: FrameSource, sink: Sink) -> list[str]:
    """Options given that this source or output has no use for (they were silently ignored): a
    camera's capture size and rate for a file or URL, real-time pacing for a camera, the label,
    the watermark and the --stats overlay for --output none (which still ran the watermark encoder
    for nobody; --stats-json is where a headless run's metrics go), signing and --force where no file
    is recorded, a latency budget with --no-degrade."""
    if isinstance(source, CameraSource):
        flags = registry.given(job, {"realtime": "--realtime/--no-realtime"})
        said = [f"{registry.listed(flags)} for a video file or URL; a camera always runs in real time"] if flags else []
    else:
        flags = registry.given(job, {"resolution": "--resolution", "fps": "--fps"})
        said = ([f"{registry.listed(flags)} for a camera's capture; {source.name} plays at its own size and frame "
                 f"rate"] if flags else [])
    marks = registry.given(job, {"label": "--label/--no-label", "watermark": "--watermark/--no-watermark",
                                 "stats": "--stats"})
    if marks and isinstance(sink, NullSink):
        said.append(f"{registry.listed(marks)} for frames shown or recorded; --output none shows and records none"
                    + (" (--stats-json - prints the metrics)" if "--stats" in marks else ""))
    if not isinstance(sink, FileRecorderSink):
        signing = registry.given(job.c2pa, {"enabled": "--c2pa/--no-c2pa", "cert": "--c2pa-cert", "key": "--c2pa-key"})
        if signing:
            said.append(f"{registry.listed(signing)} for a recording's content credentials; --output "
                        f"{job.output} records no file")
        if job.force and job.stats_json is None:
            said.append(f"--force overwrites a recording or --stats-json file; --output {job.output} records "
                        f"no file and there is no --stats-json")
    if not job.degrade and registry.given(job, {"max_latency_ms": "--max-latency-ms"}):
        said.append("--max-latency-ms is the budget the governor defends; --no-degrade turns the governor off")
    return said


def warm_frames(engine: FrameEngine, images: Sequence[np.ndarray], track: bool, process: bool = True,
                lanes: Sequence[FrameEngine] = ()) -> None:
    """Analyse `images` on `engine` (tracked when `track`) and process them on it, or with
    `lanes` on each lane with the faces it found (the lanes only process). `process` False: the
    run's engine beside its lanes, which analyses only (Engine.create(lanes=True))."""
    for i, image in enumerate(images):
        packet = FramePacket(index=i, image=image.copy(), captured_at=time.perf_counter())
        engine.analyse(packet, track=track)
        for lane in lanes:
            lane.process(FramePacket(index=i, image=image.copy(), faces=list(packet.faces)))
        if process and not lanes:
            engine.process(packet)


def warm_up(engine: Engine) -> None:
    """Run the models once on the source photo, so the first camera frames are not seconds late
    (ONNX Runtime allocates and plans on the first run) and the governor judges steady state.
    With lanes the run's engine only analyses (its processors run nowhere: Engine.create(lanes=True))
    and the lanes process."""
    lanes = engine.lanes()  # each lane's own sessions (runtime/lanes.py), built and warmed here
    if engine.sources:
        warm_frames(engine, [np.ascontiguousarray(engine.sources[0].image[..., :3])], track=False, lanes=lanes)


def run_live(job: LiveJob) -> None:
    # SIGTERM while the models load stops like Ctrl-C (exit 130); the pipeline then installs its own.
    from livecam.pipeline.signals import stop_signals

    with stop_signals():
        _run_live(job)


def _run_live(job: LiveJob) -> None:
    # Cheap checks first (output, --camera), then the models and the source identity, and only
    # then the camera, so a bad option never waits for model loading or holds the device. A
    # local video file holds nothing: it is opened next, before anything else is said (the
    # warnings, the C2PA note), so a damaged one or a GIF of one frame is one line; a camera
    # index with no device node (Linux) is reported at once too.
    source = open_source(job.camera, job.resolution, job.fps, job.realtime)
    if isinstance(source, CameraSource) and (problem := camera_device_problem(source.index)):
        raise InputError(problem)  # fixed by another --camera or by connecting one: bad input, exit 2
    sink = make_sink(job.output, fps=job.fps, force=job.force)
    check_files(job, sink)
    if isinstance(source, VideoFileSource):
        source.writes = not isinstance(sink, NullSink)
    local_file = isinstance(source, VideoFileSource) and "://" not in source.location
    if local_file:
        source.open()
    try:
        for ignored in ignored_options(job, source, sink):
            log.warning("warning: %s", ignored)
        # a given signing identity is checked now, before the models load; a local file is the parent
        # ingredient, but not a pipe or FIFO: it was read once, and opening it again to sign waited
        # for a writer that never came (the run hung after its last frame, the recording unwritten)
        parent = Path(job.camera) if local_file and Path(job.camera).is_file() else None
        signing = (signing_for(job.c2pa, parent, (), outputs=(sink.path,))
                   if isinstance(sink, FileRecorderSink) else None)
        from livecam.pipeline.engine import Engine

        engine = Engine.create(job.processing, live=True, progress=not job.processing.runtime.quiet, lanes=True)
        log.info("%s", engine.describe())
        warm_up(engine)
        if not local_file:
            source.open()
        recording = isinstance(sink, FileRecorderSink)
        if recording and isinstance(source, VideoFileSource) and source.has_audio:
            log.warning("warning: %s's sound is not recorded (`livecam run` records the pictures); `livecam video` "
                        "keeps it", source.name)
        # every frame marked on the marking thread with a change the encoder refreshes beside the
        # stream (marks.live_marker, marks.marking_sink); one intra-op thread: it runs on idle time
        marker = (LiveMarker(open_watermarker(job.processing.runtime, engine.providers, threads=1),
                             recording_fps=float(source.fps or job.fps) if recording else None)
                  if job.watermarked(recording) else None)
    except BaseException:
        source.close()  # (from here on the pipeline releases it)
        raise
    if hasattr(sink, "fps"):
        sink.fps = float(source.fps or job.fps)  # the source's real rate is known once it is open
    if isinstance(sink, FileRecorderSink) and signing is not None:
        signed = replace(signing, models=tuple(engine.model_names.values()))
        sink.sign = lambda temp, copy: signed.sign_file(temp, sink.path, copy)
    # The pipeline releases the source and finalises the sink whatever happens.
    try:
        run_live_pipeline(engine, source, sink, LiveRun(job, recording=recording, watermark=marker,
                                                        watermark_slower=marker.slower if marker else None,
                                                        lanes=engine.lanes()),
                          probe=ResourceProbe())
    finally:
        if marker is not None:
            marker.close()
