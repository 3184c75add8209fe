"""What a `livecam video` run may take of the machine: worker threads and bytes of memory.

--max-memory GB bounds the process's resident memory (RSS), models and libraries included.
Without it the bound is the RAM the machine has available when the run starts (livecam.machine:
MemAvailable of /proc/meminfo on Linux, psutil.virtual_memory().available elsewhere when psutil
is installed, no bound where neither answers); a --max-memory past that RAM is planned to it, with
one warning. The plan is made twice before anything large is
allocated: before the models load (what is resident then, plus an allowance for them) and again
once they are resident. It sizes everything whose bytes grow with the frame size:

    decoder     FFmpeg's frame threads and reference frames          ~1.5 B/px x (threads + 11)
    encoder     x264's frame pool, look-ahead included               ~52 B/px + 2.8 B/px a look-ahead frame
                and its frame threads (machine.encoder_threads)      + 10 B/px a thread past the first
    workers     each: model activations + two working copies          WORKER_BYTES + 6 B/px
                (or, before them, its frame's conversion to BGR: ~6.5 B/px)
    in flight   decoded BGR frames in the work queue, the workers,    3 B/px each
                the reorder buffer and the encoder's input (one in the
                queue holds its 1.5 B/px YUV: a worker converts it)
    held        decoded frames the reader holds past those: 1, and     3 B/px each
                3 with --fps, 8 more for an AVI with B-frames
                (held_frames)

(measured with PyAV's libx264 at the `faster` preset, 1080p and 4K). When the budget is tight the
encoder's look-ahead shrinks first (x264's preset looks 20 frames ahead), then the frames in
flight, down to workers + 2. A budget that cannot hold that minimum is refused with what would
fit; more workers than fit are reduced to those that fit, with one warning (threads are a
speed knob, the budget a limit).
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass

from livecam.errors import InputError
from livecam.machine import available_bytes, cores, encoder_threads, resident_bytes

log = logging.getLogger("livecam")

GB = 1 << 30
MB = 1 << 20
THREADS_PER_CORE = 4  # --execution-threads beyond this many per core only add memory and contention
USABLE_SHARE = 0.9  # of the budget: the rest absorbs allocator slack and Python's small objects
ENGINE_BYTES = 128 * MB  # ONNX Runtime and the shipped models, before they load (measured: ~100 MB)
WORKER_BYTES = 48 * MB  # ONNX Runtime activations of one concurrent frame (detector at 640, swapper)
BGR_BYTES = 3  # per pixel of a decoded frame in flight
WORKER_COPIES = 2  # full-frame working copies a worker may hold beside its frame
ENCODER_BASE = 52.0  # x264 bytes per pixel with no look-ahead (frame pool, half-pel planes, lowres)
ENCODER_PER_LOOKAHEAD = 2.8  # per pixel and look-ahead frame
ENCODER_PER_THREAD = 10.0  # per pixel and frame thread past the first (1080p: +136 B/px at 16 threads, 2-16 measured)
PRESET_LOOKAHEAD = 20  # x264's `faster` preset (what encoder_options asks for)
LOOKAHEADS = (None, 10, 0)  # tried in order: the preset's, then shorter (None: the preset's)
DECODER_REFERENCES = 11  # frames an H.264/HEVC decoder keeps beside one per frame thread
# Decoded frames that exist outside the in-flight slots (the decode thread takes a slot for what
# its frame source yields, not for what the source keeps): VideoReader.frames() holds each frame
# until the next says how long it lasts, and --fps's file.retime holds its newest frame and one
# whose last tick waits for the next frame; an AVI with B-frames has its frames held back to be
# timed (VideoInfo.held_back). Counted as BGR frames: a 10-bit 4:2:0 frame is as big.
READER_HELD = 1
RETIME_HELD = 2


@dataclass(frozen=True)
class MemoryPlan:
    """How a file run fits its budget (bytes, whole process)."""

    budget: int | None  # None: no bound known (no --max-memory, available RAM unknown)
    workers: int
    frames_in_flight: int
    lookahead: int | None  # the encoder's look-ahead frames; None: its preset's
    needed: int  # the bytes this plan needs at most


def check_execution_threads(threads: int) -> None:
    """Refuse --execution-threads beyond THREADS_PER_CORE per core (64 on 2 cores was accepted)."""
    n = cores()
    most = THREADS_PER_CORE * n
    if threads > most:
        raise InputError(f"--execution-threads {threads} is more than this machine's {n} "
                         f"core{'s' if n != 1 else ''} can use (at most {most}, {THREADS_PER_CORE} per core); "
                         f"use --execution-threads {most} or fewer")


def decoder_bytes(pixels: int) -> int:
    threads = min(16, cores() + 1)  # FFmpeg's automatic frame-thread count
    return int(pixels * 1.5 * (threads + DECODER_REFERENCES))


def encoder_bytes(pixels: int, lookahead: int | None) -> int:
    frames = PRESET_LOOKAHEAD if lookahead is None else lookahead
    threads = encoder_threads() - 1
    return int(pixels * (ENCODER_BASE + ENCODER_PER_LOOKAHEAD * frames + ENCODER_PER_THREAD * threads))


def worker_bytes(pixels: int) -> int:
    return WORKER_BYTES + pixels * BGR_BYTES * WORKER_COPIES


def held_frames(retimed: bool, held_back: int = 0) -> int:
    """Decoded frames held outside the in-flight slots (READER_HELD, RETIME_HELD with --fps, and
    the `held_back` the reader times)."""
    return READER_HELD + held_back + (RETIME_HELD if retimed else 0)


def default_in_flight(workers: int) -> int:
    """Frames in flight that keep every worker busy; more only costs memory."""
    return 2 * workers + 4


def _gb(size: float) -> str:
    return f"{max(math.ceil(size / GB * 10), 1) / 10:.1f} GB"


def plan_video(width: int, height: int, workers: int, max_memory_gb: float | None,
               resident: int | None = None, *, warn: bool = True, engine_loaded: bool = True,
               retimed: bool = False, held_back: int = 0) -> MemoryPlan:
    """The plan for `workers` threads on width x height frames within --max-memory (or the
    available RAM), given what the process holds now (`resident`, measured when None). Raises
    InputError when the budget cannot hold the smallest pipeline; fewer workers than asked are
    said in one warning (`warn`). Before the models load (not `engine_loaded`) ENGINE_BYTES
    stands for them, so the first answer is close to the one given once they are resident.
    `retimed`: the run has --fps, `held_back`: the reader's timing holds frames (held_frames)."""
    pixels = width * height
    now = (resident_bytes() if resident is None else resident) + (0 if engine_loaded else ENGINE_BYTES)
    frame = pixels * BGR_BYTES
    fixed = now + decoder_bytes(pixels) + held_frames(retimed, held_back) * frame

    def needed(n_workers: int, lookahead: int | None, in_flight: int) -> int:
        return fixed + encoder_bytes(pixels, lookahead) + n_workers * worker_bytes(pixels) + in_flight * frame

    explicit = max_memory_gb is not None
    available = available_bytes()
    budget: int | None = None if available is None else now + available
    if max_memory_gb is not None:
        asked = int(max_memory_gb * GB)
        if budget is not None and asked > budget:
            # a limit past what the machine has bounds nothing: planned to it, the encoder's
            # look-ahead and the frames in flight were sized for memory that is not there
            if warn:
                log.warning("warning: --max-memory %g is more than this machine has available (%s); "
                            "the run is planned within that", max_memory_gb, _gb(budget))
            explicit = False
        else:
            budget = asked
    workers = max(1, workers)
    if budget is None:
        in_flight = default_in_flight(workers)
        return MemoryPlan(None, workers, in_flight, None, needed(workers, None, in_flight))
    usable = int(budget * USABLE_SHARE)
    size = f"{width}x{height} video"
    least = needed(1, 0, 3)
    if least > usable:
        fit = _gb(least / USABLE_SHARE)
        if explicit:
            raise InputError(f"--max-memory {max_memory_gb:g} is too small for {size}: at least {fit} "
                             f"(models and libraries {_gb(now)}, decoder, encoder and frames the rest)")
        raise InputError(f"not enough free memory for {size}: it needs at least {fit} and this machine has "
                         f"{_gb(budget - now)} available; close other programs or use a smaller video")
    fits = workers
    while fits > 1 and needed(fits, 0, fits + 2) > usable:
        fits -= 1
    if fits < workers and warn:  # threads are a speed knob, the budget a limit: fewer threads, said once
        bound = f"--max-memory {max_memory_gb:g}" if explicit else f"the available memory ({_gb(budget - now)})"
        log.warning("warning: %s holds %d of the %d execution threads for %s; using %d", bound, fits, workers,
                    size, fits)
    workers = fits
    floor, ceiling = workers + 2, default_in_flight(workers)
    for lookahead in LOOKAHEADS:
        if needed(workers, lookahead, floor) <= usable:
            room = usable - needed(workers, lookahead, 0)
            in_flight = max(floor, min(ceiling, room // max(1, frame)))
            return MemoryPlan(budget, workers, in_flight, lookahead, needed(workers, lookahead, in_flight))
    raise AssertionError("unreachable: the smallest plan was checked to fit")  # pragma: no cover
