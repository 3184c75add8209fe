"""`livecam video`: check everything cheap first, then build the engine and run the file pipeline."""

from __future__ import annotations

import logging
import os
from dataclasses import replace
from typing import TYPE_CHECKING

from livecam.atomic import check_new_output
from livecam.errors import InputError, LivecamError
from livecam.marks.credentials import signing_for
from livecam.marks.watermark import open_watermarker
from livecam.media.images import check_not_an_input, check_output_folder
from livecam.pipeline.signals import output_done, stop_signals
from livecam.media.video_reader import VideoReader
from livecam.media.video_writer import check_encoder, container_format, resolve_encoder
from livecam.pipeline.file import process_video
from livecam.settings import VideoJob

if TYPE_CHECKING:
    from livecam.pipeline.contracts import FileEngine

log = logging.getLogger("livecam")


def check_job(job: VideoJob) -> None:
    """Every check that needs no model: input, output, folder, encoder. Raises LivecamError."""
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
    # Frame numbers count the frames written: with --fps, the retimed ones.
    total = info.expected_frames
    if job.fps is not None and info.duration:
        total = max(1, int(round(info.duration * job.fps)))
    if job.frame_range is not None and total is not None and job.frame_range[0] >= total:
        at = f" at {job.fps:g} fps" if job.fps is not None else ""
        raise InputError(f"--frame-range starts at frame {job.frame_range[0]} but {job.input.name} has about "
                         f"{total} frames{at}")


def create_engine(job: VideoJob) -> FileEngine:
    """Build the processing engine (models load here) and say which models and provider it
    uses; a separate function so tests can swap it."""
    from livecam.pipeline.engine import Engine

    engine = Engine.create(job.processing, live=False, progress=not job.processing.runtime.quiet)
    log.info("%s", engine.describe())
    return engine


def run_video(job: VideoJob) -> None:
    job = replace(job, encoder=resolve_encoder(job.encoder, job.output))
    check_job(job)
    engine = create_engine(job)
    quiet = job.processing.runtime.quiet
    marker = (open_watermarker(job.processing.runtime, engine.providers,
                               job.processing.runtime.execution_threads) if job.watermark else None)
    signing = signing_for(job.c2pa, job.input, tuple(engine.model_names.values()))
    cap = AddressSpaceCap(job.max_memory_gb)
    with stop_signals():
        try:
            result = process_video(job, engine, quiet=quiet, on_warm=cap.apply, watermark=marker,
                                   sign=(lambda temp: signing.sign_file(temp, job.output)) if signing else None)
        except MemoryError as exc:
            raise LivecamError(f"ran out of memory (--max-memory {job.max_memory_gb} GB); raise the limit or "
                               "use fewer --execution-threads") from exc
        finally:
            cap.restore()
    output_done()  # written and valid: a signal from now on is not an interruption
    stats = result.stats
    audio = {"copy": "audio copied", "reencode": "audio re-encoded", None: "no audio"}[result.audio]
    log.info("wrote %s: %d frames (%d processed, %d with a face) in %.1f s, %.1f fps, %s",
             result.output, stats.frames, stats.processed, stats.with_faces, stats.seconds, stats.fps, audio)


def _vm_bytes() -> int | None:
    try:
        with open("/proc/self/statm") as fh:
            return int(fh.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None


class AddressSpaceCap:
    """--max-memory as an address-space limit (RLIMIT_AS, Linux), applied once the pipeline is
    warm: the models, thread stacks, allocator arenas and codec buffers reserve far more address
    space than they use, so the cap is that warm size plus the budget. Growth past it (a leak, a
    runaway buffer) then fails with MemoryError instead of swapping the machine to a halt."""

    def __init__(self, max_memory_gb: float | None) -> None:
        self._budget = int(max_memory_gb * (1 << 30)) if max_memory_gb else None
        self._saved: tuple[int, int] | None = None

    def apply(self) -> None:
        try:
            import resource
        except ImportError:  # Windows
            return
        now = _vm_bytes()
        if self._budget is None or now is None or not hasattr(resource, "RLIMIT_AS") or self._saved is not None:
            return
        soft, hard = resource.getrlimit(resource.RLIMIT_AS)
        cap = now + self._budget
        for limit in (soft, hard):
            if limit != resource.RLIM_INFINITY:
                cap = min(cap, limit)
        try:
            resource.setrlimit(resource.RLIMIT_AS, (cap, hard))
        except (ValueError, OSError):
            return
        self._saved = (soft, hard)
        log.debug("address space capped at %.2f GB", cap / (1 << 30))

    def restore(self) -> None:
        if self._saved is not None:
            import resource

            resource.setrlimit(resource.RLIMIT_AS, self._saved)
            self._saved = None
