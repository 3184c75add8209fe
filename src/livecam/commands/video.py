"""`livecam video`: check everything cheap first, then build the engine and run the file pipeline."""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import TYPE_CHECKING

from livecam.atomic import check_new_output
from livecam.errors import InputError
from livecam.marks.credentials import signing_for
from livecam.marks.watermark import open_watermarker
from livecam.media.images import check_not_an_input, check_output_folder
from livecam.pipeline.signals import output_done, stop_signals
from livecam.media.video_reader import VideoReader
from livecam.media.video_writer import check_encoder, container_format, out_of_memory, resolve_encoder
from livecam.pipeline.address_space import AddressSpaceCap
from livecam.pipeline.budget import plan_video
from livecam.pipeline.file import process_video
from livecam.settings import VideoJob

if TYPE_CHECKING:
    from livecam.pipeline.contracts import FileEngine

log = logging.getLogger("livecam")


def check_job(job: VideoJob) -> VideoJob:
    """Every check that needs no model: input, output, folder, encoder, memory. Raises
    LivecamError; returns the job with as many --execution-threads as its memory holds."""
    if job.output.is_dir():
        raise InputError(f"the output {job.output} is a folder; give a file name such as "
                         f"{job.output / (job.input.stem + '.mp4')}")
    container_format(job.output)
    with VideoReader(job.input) as reader:  # opens, finds the video stream; decodes nothing yet
        info = reader.info
    if info.width < 2 or info.height < 2:  # 4:2:0 output needs even sizes: 1 px would become 0
        raise InputError(f"{job.input.name} is {info.width}x{info.height} pixels, too small to encode "
                         "(at least 2x2)")
    check_not_an_input(job.output, job.input, job.processing)
    check_new_output(job.output, force=job.force)
    check_output_folder(job.output)
    check_encoder(job.encoder, job.output)
    # Before any model loads: a budget too small for this frame size fails now, in one line, and
    # the engine's sessions are sized for the workers that fit.
    threads = job.processing.runtime.execution_threads
    workers = plan_video(info.width, info.height, threads, job.max_memory_gb, engine_loaded=False).workers
    if workers < threads:
        job = replace(job, processing=replace(job.processing, runtime=replace(job.processing.runtime,
                                                                                execution_threads=workers)))
    # Frame numbers count the frames written: with --fps, the retimed ones.
    total = info.expected_frames
    if job.fps is not None and info.duration:
        total = max(1, int(round(info.duration * job.fps)))
    if job.frame_range is not None and total is not None and job.frame_range[0] >= total:
        at = f" at {job.fps:g} fps" if job.fps is not None else ""
        raise InputError(f"--frame-range starts at frame {job.frame_range[0]} but {job.input.name} has about "
                         f"{total} frames{at}")
    return job


def create_engine(job: VideoJob) -> FileEngine:
    """Build the processing engine (models load here) and say which models and provider it
    uses; a separate function so tests can swap it."""
    from livecam.pipeline.engine import Engine

    engine = Engine.create(job.processing, live=False, progress=not job.processing.runtime.quiet)
    log.info("%s", engine.describe())
    return engine


def run_video(job: VideoJob) -> None:
    job = replace(job, encoder=resolve_encoder(job.encoder, job.output))
    job = check_job(job)
    engine = create_engine(job)
    quiet = job.processing.runtime.quiet
    marker = (open_watermarker(job.processing.runtime, getattr(engine, "providers", None),
                               job.processing.runtime.execution_threads) if job.watermark else None)
    signing = signing_for(job.c2pa, job.input, tuple(getattr(engine, "model_names", {}).values()))
    cap = AddressSpaceCap(job.max_memory_gb)
    with stop_signals():
        try:
            result = process_video(job, engine, quiet=quiet, on_warm=cap.apply, watermark=marker,
                                   sign=(lambda temp: signing.sign_file(temp, job.output)) if signing else None)
        except MemoryError as exc:  # numpy, the decoder (media/video_reader), the address-space cap
            raise out_of_memory(job.output, job.max_memory_gb) from exc
        finally:
            cap.restore()
    output_done()  # written and valid: a signal from now on is not an interruption
    stats = result.stats
    audio = {"copy": "audio copied", "reencode": "audio re-encoded", None: "no audio"}[result.audio]
    log.info("wrote %s: %d frames (%d processed, %d with a face) in %.1f s, %.1f fps, %s",
             result.output, stats.frames, stats.processed, stats.with_faces, stats.seconds, stats.fps, audio)
