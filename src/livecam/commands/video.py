"""`livecam video`: check everything cheap first, then build the engine and run the file pipeline.

A folder input is a batch (pipeline/batch.py): every file planned and checked first (a refusal is
that file's outcome), then run by the runner `pick_runner` chooses, then one summary.
"""

from __future__ import annotations

import logging
import time
from dataclasses import replace
from typing import TYPE_CHECKING, Callable, Sequence

from livecam.atomic import check_new_output
from livecam.errors import InputError, LivecamError, OutputExistsError
from livecam.commands.image import check_given_identity
from livecam.marks.credentials import signing_for
from livecam.marks.watermark import open_watermarker
from livecam.media.images import check_not_an_input, check_output_folder
from livecam.interrupt import output_done
from livecam.pipeline.signals import stop_signals
from livecam.media.video_reader import VideoReader, refuse_picture
from livecam.media.video_writer import (check_encoder, container_format, out_of_memory, quality_ignored,
                                        resolve_encoder)
from livecam.pipeline.address_space import AddressSpaceCap
from livecam.pipeline.budget import plan_video
from livecam.pipeline.batch import FileOutcome, is_folder_run, output_folder, plan_folder, run_batch, summarize
from livecam.pipeline.file import output_timing, process_video, retimed_frames, say_tracks
from livecam.pipeline.segments import check_segmentable
from livecam.pipeline.progress import Parts, Progress
from livecam.processors import registry
from livecam.processors.registry import given
from livecam.settings import ClusterSettings, VideoJob
from livecam.console import counted

if TYPE_CHECKING:
    from livecam.pipeline.contracts import FileEngine

log = logging.getLogger("livecam")


def check_job(job: VideoJob) -> tuple[VideoJob, int | None]:
    """Every check that needs no model: input, output, folder, encoder, memory. Raises
    LivecamError. Returns the job with as many --execution-threads as its memory holds, and
    the frames the output will have (None: unknown), counted as --frame-range counts them."""
    if job.output.is_dir():
        raise InputError(f"the output {job.output} is a folder; give a file name such as "
                         f"{job.output / (job.input.stem + '.mp4')}")
    container_format(job.output)
    refuse_picture(job.input)
    with VideoReader(job.input) as reader:  # opens, finds the video stream; decodes nothing yet
        info = reader.info
    if info.width < 2 or info.height < 2:  # 4:2:0 output needs even sizes: 1 px would become 0
        raise InputError(f"{job.input.name} is {info.width}x{info.height} pixels, too small to encode "
                         "(at least 2x2)")
    check_not_an_input(job.output, job.input, job.processing)
    check_new_output(job.output, force=job.force)
    check_output_folder(job.output)
    check_encoder(job.encoder, job.output, (info.width, info.height), output_timing(info, job.fps))
    # Before any model loads: a budget too small for this frame size fails now, in one line, and
    # the engine's sessions are sized for the workers that fit.
    threads = job.processing.runtime.execution_threads
    workers = plan_video(info.width, info.height, threads, job.max_memory_gb, engine_loaded=False,
                         retimed=job.fps is not None, held_back=info.held_back).workers
    if workers < threads:
        job = replace(job, processing=replace(job.processing, runtime=replace(job.processing.runtime,
                                                                                execution_threads=workers)))
    if job.fps is not None and info.duration and info.duration * job.fps < 0.5:
        # its one frame was shown for a whole 1/fps: a 1 s clip at --fps 0.01 became 100 s long. A rate
        # whose one frame lasts under twice the input is kept: a one-frame clip is one frame at any rate.
        raise InputError(f"--fps {job.fps:g} would show one frame of {job.input.name} ({info.duration:.3g} s "
                         f"long) for {1 / job.fps:.3g} s; give --fps {1 / info.duration:.3g} or more (one over its length)")
    # Frame numbers count the frames written: with --fps, the retimed ones.
    total = info.expected_frames
    if job.fps is not None and info.duration:
        total = retimed_frames(info.duration, job.fps)
    if job.frame_range is not None and total is not None:
        check_frame_range(job, job.frame_range, total)
    return job, total


def check_frame_range(job: VideoJob, frame_range: tuple[int, int | None], total: int) -> None:
    """A START past the last frame is an error; an END past it only a note (the frames there are
    all swapped, as asked), so a range like 100:99999 is not taken for a mistake silently. Both
    count the frames as the output will have them."""
    start, end = frame_range
    at = f" at {job.fps:g} fps" if job.fps is not None else ""
    has = f"{job.input.name} has about {counted(total, 'frame')}{at}"
    if start >= total:
        raise InputError(f"--frame-range starts at frame {start} but {has}; give a START under {total} "
                         f"(frames count from 0)")
    if end is not None and end > total:
        log.warning("note: --frame-range ends at frame %d but %s, so the range was clipped to the last frame, %d",
                    end, has, total - 1)


def say_ignored_quality(jobs: Sequence[VideoJob]) -> None:
    """--video-quality given for an encoder it has no setting for (ffv1, prores...): said once,
    where it was silently ignored."""
    encoders = sorted({job.encoder for job in jobs if quality_ignored(job.encoder)})
    if encoders and any(given(job, {"quality": "--video-quality"}) for job in jobs):
        log.warning("warning: --video-quality has no setting in the %s encoder, so it is ignored (%s encodes at "
                    "its own defaults)", " and ".join(encoders), "they" if len(encoders) > 1 else "it")


def create_engine(job: VideoJob) -> FileEngine:
    """Build the processing engine (models load here) and say which models and provider it
    uses; a separate function so tests can swap it."""
    from livecam.pipeline.engine import Engine

    # lanes=True: video and folder runs hand every frame to engine.lanes() where there are lanes
    engine = Engine.create(job.processing, live=False, progress=not job.processing.runtime.quiet, lanes=True)
    log.info("%s", engine.describe())
    return engine


def run_video(job: VideoJob, cluster: ClusterSettings | None = None) -> None:
    if is_folder_run(job):
        return run_folder(job, cluster)
    if job.pattern is not None:
        raise InputError(f"--pattern chooses the files of a folder input, but {job.input} is not a folder")
    if job.skip_existing and (job.output.exists() or job.output.is_symlink()):
        log.info("skipped %s: the output %s exists (--skip-existing)", job.input, job.output)
        return None
    job = replace(job, encoder=resolve_encoder(job.encoder, job.output))
    job, _ = check_job(job)
    say_ignored_quality([job])
    if cluster is not None:  # --cluster: segments on Ray workers (commands/video_cluster.py)
        from livecam.commands.video_cluster import run_video_on_cluster

        return run_video_on_cluster(job, cluster)
    check_given_identity(job.c2pa)
    engine = create_engine(job)
    quiet = job.processing.runtime.quiet
    marker = (open_watermarker(job.processing.runtime, engine.providers,
                               job.processing.runtime.execution_threads) if job.watermark else None)
    signing = signing_for(job.c2pa, job.input, tuple(engine.model_names.values()), outputs=(job.output,))
    cap = AddressSpaceCap(job.max_memory_gb)
    with stop_signals():
        try:
            result = process_video(job, engine, quiet=quiet, on_warm=cap.apply, watermark=marker,
                                   sign=(lambda temp: signing.sign_file(temp, job.output)) if signing else None,
                                   lanes=engine.lanes())
        except MemoryError as exc:  # numpy, the decoder (media/video_reader), the address-space cap
            raise out_of_memory(job.output, job.max_memory_gb) from exc
        finally:
            cap.restore()
    output_done()  # written and valid: a signal from now on is not an interruption
    stats = result.stats
    log.info("wrote %s: %s (%d processed, %d with a face, %s) in %.1f s, %.1f fps, %s",
             result.output, counted(stats.frames, "frame"), stats.processed, stats.with_faces,
             registry.changed(stats.faces_changed, job.processing.frame_processors, stats.faces_small), stats.seconds, stats.fps,
             say_tracks(result.audio, result.tracks))


def run_folder(template: VideoJob, cluster: ClusterSettings | None = None) -> None:
    """A folder in, a folder out: every matching file planned (batch.plan_folder) and checked
    before any model loads, a check's refusal recorded as that file's outcome; the rest run
    through the chosen runner; one summary, and a non-zero exit when any file failed."""
    plan = plan_folder(template, template.pattern, skip_existing=template.skip_existing)
    with output_folder(template.output):  # removed again when the run created it and wrote nothing
        outcomes = list(plan.decided)
        jobs: list[VideoJob] = []
        totals: list[int | None] = []
        for job in plan.jobs:
            try:
                job = replace(job, encoder=resolve_encoder(job.encoder, job.output))
                job, total = check_job(job)
                totals.append(total)
                if cluster is not None:
                    check_segmentable(job)
            except OutputExistsError as exc:
                hint = f"{exc.message} (--skip-existing keeps it and goes on)"
                outcomes.append(FileOutcome(job, error=OutputExistsError(hint)))
                continue
            except LivecamError as exc:
                outcomes.append(FileOutcome(job, error=exc))
                continue
            jobs.append(job)
        say_ignored_quality(jobs)
        started = time.perf_counter()
        if jobs:
            total = None if None in totals else sum(t for t in totals if t is not None)
            outcomes += pick_runner(cluster)(template, jobs, total)
        output_done()  # every file is decided: a signal from now on changes nothing
        error = summarize(outcomes, time.perf_counter() - started)
        if error is not None:
            raise error


# (the folder run's template job, its checked jobs, the frames they will write) -> one outcome per job
Runner = Callable[[VideoJob, Sequence[VideoJob], "int | None"], "list[FileOutcome]"]


def pick_runner(cluster: ClusterSettings | None) -> Runner:
    """The one place a folder run's runner is chosen: this machine (run_local) or, with
    --cluster, every segment of every file in one queue on the cluster's workers. A runner
    returns one batch.FileOutcome per job (a failed file is an outcome, not an exception;
    Ctrl-C raises Interrupted), counts frames on the one bar and builds its engines itself."""
    if cluster is None:
        return run_local

    def on_cluster(template: VideoJob, jobs: Sequence[VideoJob], total: int | None) -> list[FileOutcome]:
        from livecam.cluster import run_on_cluster
        from livecam.commands.video_cluster import cluster_signer

        signing_for(template.c2pa, None, (), outputs=[job.output for job in jobs])  # the local identity now
        with stop_signals(), batch_progress(template, jobs, total) as parts:
            return run_on_cluster(jobs, cluster, parts.progress, sign_for=cluster_signer, folder=True)

    return on_cluster


def batch_progress(template: VideoJob, jobs: Sequence[VideoJob], total: int | None) -> Parts:
    """The one bar over every frame of every file of a folder run (nothing with -q)."""
    return Parts(Progress(total, quiet=template.processing.runtime.quiet, label=counted(len(jobs), "file")))


def run_local(template: VideoJob, jobs: Sequence[VideoJob], total: int | None) -> list[FileOutcome]:
    """This machine: one engine (the models load once) and the files one after another."""
    engine = create_engine(template)
    marker = (open_watermarker(template.processing.runtime, engine.providers,
                               template.processing.runtime.execution_threads) if template.watermark else None)
    signing = signing_for(template.c2pa, None, tuple(engine.model_names.values()),
                          outputs=[job.output for job in jobs])
    sign = ((lambda job, temp: replace(signing, input=job.input).sign_file(temp, job.output))
            if signing is not None else None)
    cap = AddressSpaceCap(template.max_memory_gb)
    with stop_signals(), batch_progress(template, jobs, total) as parts:
        try:
            return run_batch(jobs, engine, parts=parts, watermark=marker, sign=sign, on_warm=cap.apply,
                             lanes=engine.lanes())
        finally:
            cap.restore()

